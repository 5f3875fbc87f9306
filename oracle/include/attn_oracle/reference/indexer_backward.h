// The DSA indexer's training path (op=indexer pass=bwd): the KL indexer loss over the exact forward's
// top-k slots and its gradients d_index_q, d_weights, d_index_k, as cuDNN frontend's
// indexer_backward_wrapper defines them (docs/ops.md, "The indexer's training path"):
//   per valid slot j of row t (topk[t, j] >= 0):
//     lt_j = clip(log target_j, -100, 0),  lp_j = clip(log predict_j, -100, 0)
//     loss_t = sum_j exp(lt_j) * (lt_j - lp_j)                       (kl_div, log_target=True)
//     g_j = -exp(lt_j) * 1[log predict_j >= -100]                    (dL/dlog_predict)
//     dz_j = (g_j - predict_j * sum_i g_i) * grad_loss / denominator (dL/dlogit)
//   loss = sum_t loss_t / denominator (denominator: loss_mean, the caller's mean)
//   through logit_j = scale * sum_h w_h ReLU(q_h . k_j), ReLU's gradient 1 only where q_h . k_j > 0:
//     d_weights[t, h] = sum_j dz_j scale ReLU(q_h . k_j)
//     d_index_q[t, h] = sum_j dz_j scale w_h 1[q_h . k_j > 0] k_j
//     d_index_k[j]   += dz_j scale sum_h w_h 1[q_h . k_j > 0] q_h   (every row that selected key j)
// -1 slots contribute nothing (their target and predict are never read). On a CP rank, d_index_k covers
// the whole all-gathered K buffer but holds only this rank's queries' contributions (a partial that the
// ranks' sum completes).
//
// The inputs of the training case (topk, target, predict, grad_loss) come from the exact forward and the
// seed (make_indexer_backward_inputs); the reference computes in fp64 from the fp32 inputs, in two
// streaming passes (rows, then keys through a key -> selecting slots index): memory linear in the inputs.
#pragma once
#include <cstdint>
#include <vector>

#include "attn_oracle/reference/reference_seams.h"

namespace ao {

// The counts a mean's denominator is taken from (loss_mean).
struct LossCounts {
  int64_t buffer_rows = 0;  // rows of the Q buffer (B * S_q for a padded batch): loss_mean=rows
  int64_t valid_rows = 0;   // rows holding a valid token: loss_mean=valid
  int64_t keyed_rows = 0;   // valid rows with at least one selected key: loss_mean=keyed
};
double exact_loss_denominator(const Case& c, const LossCounts& n);

// Where an indexer backward kernel goes wrong: each virtual's default is the exact behaviour, and a bug
// model (oracle/backends/models/indexer_backward.cpp) overrides one. Called per row or per tile, never per
// key; the forward seams (ReferenceSeams) do not act on the backward (the slots are given).
class IndexerBackwardSeams : public ReferenceSeams {
 public:
  // The KV buffer row that slot value v of row r reads (exact: v, or -1, no key, for a -1 slot); a row
  // outside the buffer reads nothing (a kernel's out-of-bounds read is not re-created).
  virtual bool alters_slot_keys(const Layout&) const { return false; }
  virtual void slot_keys(const Layout& l, int64_t r, const int32_t* topk, int64_t* keys) const;
  // Per row: the slot whose target the kernel pairs with slot e's prediction (exact: e).
  virtual bool permutes_targets(const Layout&) const { return false; }
  virtual void target_slots(const Layout& l, int64_t r, const int32_t* topk, std::vector<int>& order) const;
  // How d_index_k collects the contributions of the slots that selected one key: false (exact) adds
  // them; true stores each over the last (the last selecting row, in row order, wins).
  virtual bool dk_overwrites(const Layout&) const { return false; }
  // ReLU's gradient at q_h . k == 0 (exact: 0).
  virtual double relu_grad_at_zero(const Layout&) const { return 0; }
  // The factor the logits' gradient carries into q, w and k (exact: the case's scale).
  virtual double logit_grad_scale(const Layout& l) const;
  // The mean's denominator (exact: exact_loss_denominator).
  virtual double loss_denominator(const Layout& l, const LossCounts& n) const;
  // The floor log target and log predict are clipped to (exact: -100; -inf: no clip).
  virtual double log_floor() const { return -100; }
};
const IndexerBackwardSeams& exact_indexer_backward_seams();

// The training case's inputs beside q, w, k: the exact forward's top-k (in.topk [q_rows, topk], -1
// fill, -1 in every row outside a segment's valid rows), the target over each row's valid slots (in.target,
// generated from the seed and the token ids), the prediction (in.predict: the softmax of the exact
// logits over the row's selected slots, rounded to fp32) and grad_loss [1]. A -1 slot of target and
// predict holds the case's poison (a kernel that reads it sees it).
void make_indexer_backward_inputs(const Layout& l, Inputs& in);

// The exact backward: out.dq [q_rows, heads, dim], out.dw [q_rows, heads] on valid rows (zeros for a row
// without keys), out.dk [kv_rows, dim] on every valid KV row (zeros where no row of this rank selected the
// key), out.loss [1]. Seams other than IndexerBackwardSeams act as the exact ones.
void reference_indexer_backward(const Layout& l, const Inputs& in, Outputs& out,
                                const ReferenceSeams& s = exact_seams());

// The gates of the comparator: per element, a bound on how far an fp32 kernel's answer (inputs in the
// case dtype, fp32 logs/exps and accumulation, atomics in any order) may lie from the exact one, from
// a running-error analysis of that arithmetic (probabilistic sums, lambda * sqrt(n) * u; a ReLU whose
// argument lies within its rounding bound of 0 may go either way). Same shapes as the outputs.
// The underflow unit of an indexer backward kernel's arithmetic: fp32 and bf16 (one exponent range)
// 2^-126, the smallest normal number (below it a kernel flushes to zero or rounds to a subnormal);
// fp16's dS 2^-25, half its subnormal spacing.
inline constexpr double kUnderflow32 = 0x1p-126;
inline double underflow_unit(DType d) { return d == DType::F16 ? 0x1p-25 : kUnderflow32; }

struct IndexerBackwardGates {
  Outputs exact;  // the exact answer (reference_indexer_backward's, exact seams): the yardstick
  std::vector<float> dq, dw, dk;
  // Per dq / dk element, over its product terms (slots for dq, (row, head) contributions for dk) with
  // a nonzero ReLU gradient: ds_abs = sum |dz w k_d| resp. |dz w q_d|, what rounding each dS = dz w to the
  // dtype before the dQ/dK products scales with (a tensor-core kernel feeds dS to a bf16/fp16 MMA; the
  // roundings can all go one way: equal values round alike; empty for an fp32 case), and ds_floor =
  // sum (1 + |w|)(1 + |k_d|) resp. (1 + |w|)(1 + |q_d|), what underflow scales with: dz, dS and their
  // products below the normal range (flushed to zero, as a kernel built with fast math does, or
  // subnormal) each off by up to the underflow unit (fp32 and bf16: 2^-126; fp16's dS: 2^-25). Targets
  // near the clip (e^-100 ~ 2^-144) put dz there. Per dw element: dw_floor = sum over its row's slots
  // of 1 + max(a, 0) + the score's rounding bound, dz's underflow times the score it multiplies.
  std::vector<float> dq_ds_abs, dq_ds_floor, dk_ds_abs, dk_ds_floor, dw_floor;
  double loss = 0;
  std::vector<char> dk_selected;  // per KV row: 1 where a slot of this layout's rows reads it
};
IndexerBackwardGates indexer_backward_gates(const Layout& l, const Inputs& in);

}  // namespace ao
