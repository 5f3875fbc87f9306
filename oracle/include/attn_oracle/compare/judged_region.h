// The judged region of a case: for each output tensor an op writes, which of its rows are judged as
// values and which are pad slots that must stay untouched (pad_writes=forbid), and how two versions of
// a row are compared. The one definition that the comparators (which rows they judge, what
// clobbered_pad_slots counts), the selftest (outputs_differ: whether a model's outputs are observable)
// and explain (the units it scores) use.
//
// Each output tensor is one OutputSpec (output_specs()): the layout buffer its rows follow, its row
// width, which rows of that buffer hold judged values, how a judged row is compared, and which value
// in one of its pad slots is not a write. The region's units follow from the specs:
//  * a value unit is one checked Q row, over every output whose value rows hold it (SDPA: O and LSE of
//    the row together; indexer: the top-k row), or one valid K/V row, over every output whose rows are
//    the K/V buffer's (RowBuffer::KV: the backward's dK and dV of the row together); K/V rows are
//    judged all (every Q row contributes to each of them, so none is sampled by rows=N);
//  * a pad unit is one pad slot row of one output (only under pad_writes=forbid).
// An output tensor is one more entry in output_specs(): the units, the equality, outputs_differ, explain
// and the clobbered_pad_slots count pick it up.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn_oracle/inputs/tensors.h"
#include "attn_oracle/verdict/verdict.h"

namespace ao {

enum class OutputTensor : uint8_t { TopK, O, Lse, Dq, Dk, Dv, Dw, Loss };

// Which checked Q rows hold a tensor's judged values; every other row of its buffer is a pad slot.
enum class ValueRows : uint8_t {
  Segment,  // every segment row, a segment's pad rows included (they must hold the fill: the indexer's -1)
  Valid,    // the rows of valid tokens; a segment's pad rows are pad slots
};

// How a judged row is compared.
enum class RowCompare : uint8_t {
  IndexSet,   // the same indices and -1 fills, in any order (the comparator judges a top-k row as a set)
  IndexList,  // the same list in order (ties=strict: the comparator judges the order too)
  Floats,     // element by element under the region's ValueMatch
};

struct OutputSpec {
  OutputTensor tensor;
  const char* name;
  RowBuffer rows;      // the layout buffer whose rows this tensor's rows follow
  int64_t width;       // elements per row
  ValueRows values;
  RowCompare compare;
  // Where it lives in Outputs: an index tensor (IndexSet, IndexList) or a float one (Floats).
  std::vector<int32_t> Outputs::*indices = nullptr;
  std::vector<float> Outputs::*floats = nullptr;
  // Index tensors: a value that in a pad slot is not a write (the indexer's -1 fill), like the sentinel.
  int32_t pad_not_written = kSentinelIndex;
  // Float tensors: a pad slot holding zeros is not a write either (the gradients under grad_pad=zero).
  bool pad_zero_not_written = false;
  // Float tensors under ValueMatch::Kernel: elements within rtol * max(|x|, |y|) + atol are equal.
  double kernel_rtol = 0, kernel_atol = 0;
};

// The op's output tensors, in the order of Outputs' fields.
std::vector<OutputSpec> output_specs(const Case& c);

// Equality of float elements: Bitwise (bit-equal, or both a computed NaN), or Kernel: within a real GPU
// kernel's rounding (the spec's kernel_rtol/atol: O 4*u_d*(|x| + 1/16), u_d the dtype's unit roundoff,
// at least 2^-16; LSE 2^-10*(1 + |LSE|); infinities exact). The unwritten sentinel equals only itself.
enum class ValueMatch : uint8_t { Bitwise, Kernel };

class JudgedRegion {
 public:
  // l must be a full layout (LayoutMode::Full) and outlive the region.
  explicit JudgedRegion(const Layout& l, ValueMatch m = ValueMatch::Bitwise);

  struct Unit {
    bool pad;
    int output;   // pad units: the index in outputs(); value units: -1 (every output judging the row)
    int64_t row;  // value units: the checked Q row (kv: the K/V row); pad units: the row of the output's buffer
    bool kv = false;  // a value unit over the K/V-row outputs
  };
  const std::vector<OutputSpec>& outputs() const { return specs_; }
  // Units [0, value_rows().size()) are value units over Q rows, in check_rows order; the value units over
  // K/V rows follow (kv_value_rows() order), then the pad units, output by output, in buffer row order.
  size_t size() const { return values_->size() + kv_values_.size() + size_t(pad_count_); }
  Unit unit(size_t u) const;
  bool is_pad(size_t u) const { return u >= values_->size() + kv_values_.size(); }
  // The checked Q rows that value units judge, in check_rows order (the rows a comparator scores).
  const std::vector<int64_t>& value_rows() const { return *values_; }
  // The K/V rows that value units judge (every valid K row; empty without a K/V-row output).
  const std::vector<int64_t>& kv_value_rows() const { return kv_values_; }
  // Whether output o judges Q row r as a value, and the row of o's buffer that holds it (never for an
  // output over K/V rows).
  bool judges(size_t o, int64_t q_row) const;
  int64_t buffer_row(size_t o, int64_t q_row) const;

  // Unit u of a and b equal; output >= 0 restricts a value unit to that output.
  bool equal(size_t u, const Outputs& a, const Outputs& b, int output = -1) const;
  // Per unit: 1 where x differs from ref.
  std::vector<char> differs(const Outputs& x, const Outputs& ref) const;
  bool any_differs(const Outputs& a, const Outputs& b) const;
  // A pad unit of got holds a write (anything but the sentinel, or the output's pad_not_written).
  bool pad_written(size_t u, const Outputs& got) const;
  // Pad units of got that hold a write: clobbered_pad_slots.
  int64_t clobbered_pad_slots(const Outputs& got) const;
  // Those of output o alone.
  int64_t clobbered_pad_slots(const Outputs& got, int o) const;
  // The index in outputs() of the float output at `field` (-1: none).
  int output_of(std::vector<float> Outputs::*field) const;
  // Output o's pad units in a comparator's per-cell map (one map row per buffer row): Pad, or Clobbered
  // where written (pad_written's rule: the sentinel, and zeros under grad_pad=zero, are no write).
  void mark_pad_rows(CellMap& map, int o, const Outputs& got) const;

  const Layout& layout() const { return l_; }
  ValueMatch match() const { return m_; }

 private:
  bool rows_equal(size_t o, int64_t row, const Outputs& a, const Outputs& b, bool pad) const;
  bool row_written(size_t o, int64_t row, const Outputs& got) const;
  bool elem_equal(float x, float y, const OutputSpec& s) const;
  const Layout& l_;
  ValueMatch m_;
  std::vector<OutputSpec> specs_;
  // The value rows: l.check_rows itself when every checked row is judged, else the judged ones.
  const std::vector<int64_t>* values_;
  std::vector<int64_t> own_values_;
  std::vector<int64_t> kv_values_;
  // Pad slots come in runs (gaps between documents, a segment's pad rows, the room after the last
  // document): O(segments) runs, not a unit per pad row, so the comparator holds no per-row list.
  struct PadRun {
    int output;
    int64_t row0, rows, first_unit;  // first_unit: the run's first pad unit, counted from 0
  };
  std::vector<PadRun> runs_;
  int64_t pad_count_ = 0;
};

}  // namespace ao
