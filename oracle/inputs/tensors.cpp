// Deterministic inputs (counter-based RNG keyed by canonical token ids), poison in input pad slots,
// sentinel-filled output buffers.
#include "attn_oracle/inputs/tensors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "attn_oracle/inputs/probe_inputs.h"
#include "attn_oracle/inputs/value_distributions.h"
#include "attn_oracle/internal/isa_clones.h"
#include "attn_oracle/internal/omp_threads.h"
#include "attn_oracle/internal/prefault.h"
#include "attn_oracle/internal/rng.h"

namespace ao {

float sentinel_float() { return f32_from_bits(kSentinelBits); }
bool is_sentinel(float x) { return f32_bits(x) == kSentinelBits; }

float poison_value(Poison p, DType t) {
  switch (p) {
    case Poison::NaN: return std::numeric_limits<float>::quiet_NaN();
    case Poison::Inf: return std::numeric_limits<float>::infinity();
    case Poison::Large:  // the dtype's largest finite value: representable, so every path stores it as is
      return t == DType::F16 ? 65504.f : t == DType::BF16 ? bf16_bits_to_f32(0x7f7f) : std::numeric_limits<float>::max();
    default: return 0.f;  // poison=none fills with generated data instead (see fill_pad)
  }
}

int64_t q_token_id(const Layout& l, int64_t r) {
  if (!l.valid_row(r)) return -1;
  const auto& s = l.seg_of(r);
  return l.docs[size_t(s.doc)].packed_q_off + s.tok0 + (r - s.row0);
}

namespace {

// row[e] = generated_value(seed, tensor, index0 + e, levels) rounded to the dtype: the same bits as the
// per-element formula, with the tensor's key hoisted and the dtype's branch taken once per row, so that the
// common cases (levels off, bf16 or fp32) vectorise; cloned per ISA as the references' hot loops are.
AO_ISA_CLONES void generated_row(float* row, int64_t n, uint64_t seed, uint32_t tensor, uint64_t index0, DType t,
                                uint32_t levels) {
  const uint64_t key = splitmix64(seed ^ (uint64_t(tensor) << 56));  // counter_hash's first half
  if (levels > 1 || t == DType::F16) {
    for (int64_t e = 0; e < n; ++e) row[e] = round_to(t, generated_value(seed, tensor, index0 + uint64_t(e), levels));
  } else if (t == DType::BF16) {
    for (int64_t e = 0; e < n; ++e)
      row[e] = bf16_bits_to_f32(f32_to_bf16_bits(uniform_pm1(splitmix64(key ^ (index0 + uint64_t(e))))));
  } else {
    for (int64_t e = 0; e < n; ++e) row[e] = uniform_pm1(splitmix64(key ^ (index0 + uint64_t(e))));
  }
}

// One generated tensor: `rows` rows of `width` floats, row r holding token_of(r)'s values (a pad slot where
// that is -1).
struct TensorPlan {
  std::vector<float>* dst;
  int64_t rows, width;
  uint32_t tensor;
  bool kv_rows;  // rows are K/V rows (else Q rows)
  size_t elements() const { return size_t(rows * width); }
};

// Fills a planned tensor, sized already: valid rows by token id, pad rows by poison. token_of(row) returns
// the canonical token id, or -1 for a pad slot. Every element is a function of its token and index alone,
// so rows are filled in parallel and the inputs do not depend on the thread count.
template <class TokenOf>
void fill(const TensorPlan& t, const Case& c, TokenOf token_of) {
  const float poison = poison_value(c.poison, c.dtype);
  const int64_t width = t.width;
#pragma omp parallel for schedule(static) num_threads(omp_team_size())
  for (int64_t r = 0; r < t.rows; ++r) {
    const int64_t tok = token_of(r);
    float* row = t.dst->data() + r * width;
    if (tok >= 0)
      generated_row(row, width, c.seed, t.tensor, uint64_t(tok * width), c.dtype, c.levels);
    else if (c.poison == Poison::None)  // realistic pad content (e.g. TE identifier tokens): finite data
      generated_row(row, width, c.seed, t.tensor | 0x10u, uint64_t(r * width), c.dtype, c.levels);
    else
      std::fill(row, row + width, poison);
  }
}

// A std::vector zero-fills its elements in the thread that sizes it, and for a fresh tensor that is mostly
// page faults, one thread's (prefault.h; a CP rank's K and V are 512 MiB each at 131k tokens, 8 heads x 128).
// Each tensor's pages are faulted in by the team, then the tensors are sized side by side, one thread each,
// before the parallel fills.
void allocate_side_by_side(const std::vector<TensorPlan>& plan) {
  for (const TensorPlan& t : plan) reserve_prefaulted(*t.dst, t.elements());
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(int(plan.size()), omp_team_size()))
  for (size_t i = 0; i < plan.size(); ++i) plan[i].dst->resize(plan[i].elements());
}

}  // namespace

Inputs make_inputs(const Layout& l) {
  const Case& c = l.c;
  std::vector<int64_t> kv_token(size_t(l.kv_rows), -1);
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) kv_token[size_t(d.kv_off + s)] = d.packed_kv_off + s;
  auto q_token = [&](int64_t r) { return q_token_id(l, r); };
  auto k_token = [&](int64_t r) { return kv_token[size_t(r)]; };
  Inputs in;
  std::vector<TensorPlan> plan;
  if (c.op == Op::Indexer)
    plan = {{&in.q, l.q_rows, int64_t(c.heads) * c.dim, kTensorQ, false},
            {&in.w, l.q_rows, c.heads, kTensorW, false},
            {&in.k, l.kv_rows, c.dim, kTensorK, true}};
  else
    plan = {{&in.q, l.q_rows, int64_t(c.hq) * c.dim, kTensorQ, false},
            {&in.k, l.kv_rows, int64_t(c.hkv) * c.dim, kTensorK, true},
            {&in.v, l.kv_rows, int64_t(c.hkv) * c.dim_v, kTensorV, true}};
  // The backward's dO follows the Q rows like Q (the saved O and LSE come from the exact forward:
  // make_case_inputs, reference.h).
  if (c.op == Op::Sdpa && c.pass == Pass::Bwd)
    plan.push_back({&in.dout, l.q_rows, int64_t(c.hq) * c.dim_v, kTensorDO, false});
  allocate_side_by_side(plan);
  for (const TensorPlan& t : plan)
    if (t.kv_rows)
      fill(t, c, k_token);
    else
      fill(t, c, q_token);
  if (c.probe == Probe::Edges) apply_edge_probe(l, in);  // SDPA's Q, K and V (dO is not probed)
  apply_value_distribution(l, in);
  return in;
}

Outputs make_sentinel_outputs(const Layout& l) {
  const Case& c = l.c;
  Outputs o;
  if (c.pass == Pass::Bwd) {  // the gradients only: the forward's outputs are the backward's inputs
    if (c.op == Op::Indexer) {
      assign_prefaulted(o.dq, size_t(l.q_rows * c.heads * c.dim), sentinel_float());
      assign_prefaulted(o.dk, size_t(l.kv_rows * c.dim), sentinel_float());
      assign_prefaulted(o.dw, size_t(l.q_rows * c.heads), sentinel_float());
      o.loss.assign(1, sentinel_float());
    } else {
      assign_prefaulted(o.dq, size_t(l.q_rows * c.hq * c.dim), sentinel_float());
      assign_prefaulted(o.dk, size_t(l.kv_rows * c.hkv * c.dim), sentinel_float());
      assign_prefaulted(o.dv, size_t(l.kv_rows * c.hkv * c.dim_v), sentinel_float());
    }
    return o;
  }
  if (c.op == Op::Indexer) {
    assign_prefaulted(o.topk, size_t(l.q_rows * c.topk), kSentinelIndex);
    assign_prefaulted(o.scores, size_t(l.q_rows * c.topk), sentinel_float());
  } else {
    assign_prefaulted(o.o, size_t(l.o_rows * c.hq * c.dim_v), sentinel_float());
    assign_prefaulted(o.lse, size_t(l.stats_rows * c.hq), sentinel_float());
  }
  return o;
}

}  // namespace ao
