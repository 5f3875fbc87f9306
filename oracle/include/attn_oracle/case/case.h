// The case line: `key=value` pairs separated by spaces, one test case. It is the only user-facing
// description of a case (CLI, corpus files, reports), so print(parse(s)) is canonical and
// parse(print(c)) == c. Unknown keys and malformed values throw CaseError naming the key.
// Every key is declared once, in the key table (case_keys.h); enum names in enum_names.h.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include "attn_oracle/case/dtype.h"
#include "attn_oracle/internal/bad_input.h"  // CaseError

namespace ao {

enum class Op { Indexer, Sdpa };
enum class MaskKind { None, TopLeft, BottomRight };
enum class CpScheme { Zigzag, Contiguous };
enum class Poison { NaN, Inf, Large, None };
enum class Precision { F32, F64 };
enum class PadWrites { Forbid, Allow };
enum class Probe { None, Edges };  // mask-probe inputs (sdpa): see probe_inputs.h
enum class WindowConvention { Cudnn, Fa };      // how the left window bound is read (see Case::window)
enum class EmptyRows { NegInf, PosInf };         // LSE of a row with no allowed key (O = 0 either way)
enum class Values { Normal, Extreme, Plateau, Clustered };  // input distributions (see value_distributions.h)
enum class Ties { Set, Strict };                 // top-k ties: any valid set, or ascending index order
enum class Pass { Fwd, Bwd };                    // which pass is judged: the forward, or the backward's gradients
enum class GradPad { Untouched, Zero };          // what gradient rows of pad slots may hold: as given, or zeros
// The indexer loss's mean (pass=bwd): over the Q buffer's rows, the valid rows, the valid rows with a key,
// or none (a sum). docs/ops.md, "The indexer's training path", says which caller uses which.
enum class LossMean { Rows, Valid, Keyed, Sum };


struct Case {
  Op op = Op::Indexer;
  std::vector<int64_t> q_lens, kv_lens;            // valid tokens per document
  std::vector<int64_t> q_pad, kv_pad;              // gap after each sequence (convenience for offsets)
  std::vector<int64_t> q_offsets, kv_offsets;      // explicit ragged offsets (rows); empty = derived
  std::vector<int64_t> o_offsets, stats_offsets;   // empty = same as q_offsets
  int64_t q_capacity = -1, kv_capacity = -1;       // total rows of the buffers; -1 = end of last seq
  int64_t tail = 0;                                // extra capacity rows past the last sequence
  int cp = 1, rank = 0;
  CpScheme cp_scheme = CpScheme::Zigzag;
  bool crop = false;                               // keys cropped to the chunk end (kernel view)
  MaskKind mask = MaskKind::TopLeft;               // resolved per op default (see defaults_for)
  // Band of allowed keys around position p (sdpa; needs a mask for the alignment): left bound
  // `window` (cudnn: s > p - window, 0 = none; fa: s >= p - window; -1 = unbounded in both), right
  // bound `window_right` (0 = causal s <= p; > 0: s <= p + window_right; -1 = unbounded).
  int64_t window = 0, window_right = 0;
  WindowConvention window_convention = WindowConvention::Cudnn;
  int64_t start_pos = -1;                          // indexer: first query's position; -1 = from the mask
  int64_t max_seqlen_q = 0, max_seqlen_kv = 0;     // the max_seqlen a kernel is given; 0 = the longest length
  int num_splits = 1;                              // sdpa split-KV: splits of ceil(max_seqlen_kv/num_splits) keys
  EmptyRows empty_rows = EmptyRows::NegInf;
  Values values = Values::Normal;
  Ties ties = Ties::Set;
  LossMean loss_mean = LossMean::Rows;             // indexer pass=bwd: the loss's denominator
  int heads = 0, hq = 0, hkv = 0, dim = 0, dim_v = 0, topk = 0, ratio = 1;
  DType dtype = DType::BF16;
  uint64_t seed = 1;
  Poison poison = Poison::NaN;
  Precision precision = Precision::F32;
  double scale = 0;                                // 0 = op default (indexer 1, sdpa 1/sqrt(dim))
  int64_t rows = 0;                                // rows to check: 0 = all, N = N sampled + boundaries
  uint32_t levels = 0;                             // round inputs to multiples of 2/N (tie stress)
  double atol = -1, rtol = -1, lse_tol = -1, score_tol = -1, min_recall = -1;  // -1 = defaults
  PadWrites pad_writes = PadWrites::Forbid;
  Probe probe = Probe::None;
  Pass pass = Pass::Fwd;
  GradPad grad_pad = GradPad::Untouched;

  bool operator==(const Case&) const = default;
};

// Defaults that depend on the op (dims small enough for CI; the seeds' dims are given explicitly).
Case defaults_for(Op op);

// A leading UTF-8 byte-order mark (an editor's, at the start of a file or line) is not part of the case.
std::string strip_utf8_bom(const std::string& line);
Case parse_case(const std::string& line);
std::string print_case(const Case& c);

// The embedded default case: the seed's single-document cp=32 rank=31 indexer case, reduced dims.
inline constexpr const char* kDefaultCase =
    "op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7";

}  // namespace ao
