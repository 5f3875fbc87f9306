// Bug models of the DSA indexer's backward (op=indexer pass=bwd): each overrides one seam of the
// backward reference (indexer_backward.h): which key a slot reads, how d_index_k collects a key's
// contributions, ReLU's gradient at 0, the chain's scale, the mean's denominator, which target pairs
// with which prediction. None re-creates a single public report; each is the mechanism the
// kernel's definition leaves room for (cuDNN frontend's indexer_backward_wrapper: -1 slots, local vs
// global ids with the batch offset, fp32 atomics into d_index_k, loss_coeff / (B * S_q)).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attn_oracle/reference/indexer_backward.h"
#include "models.h"

namespace ao::models {

namespace {

// A -1 slot read as a key: the buffer's first row (an index clamped at 0) or its last (-1 taken modulo
// the buffer's rows). Its target and prediction (the case's poison) enter the row's sums.
struct MinusOneAs : IndexerBackwardSeams {
  bool last;
  explicit MinusOneAs(bool last_) : last(last_) {}
  bool alters_slot_keys(const Layout&) const override { return true; }
  void slot_keys(const Layout& l, int64_t, const int32_t* topk, int64_t* keys) const override {
    for (int e = 0; e < l.c.topk; ++e) keys[e] = topk[e] >= 0 ? topk[e] : last ? l.kv_rows - 1 : 0;
  }
};

// Slot ids and the document's KV offset: the offset missing (global ids read as local ones the kernel
// did not offset: every document reads the first document's rows) or added twice (global ids offset again).
struct BatchOffset : IndexerBackwardSeams {
  int times;  // how often the kernel adds the offset to the global id, minus one: -1 or +1
  explicit BatchOffset(int t) : times(t) {}
  bool alters_slot_keys(const Layout&) const override { return true; }
  void slot_keys(const Layout& l, int64_t r, const int32_t* topk, int64_t* keys) const override {
    const int64_t off = l.docs[size_t(l.seg_of(r).doc)].kv_off;
    for (int e = 0; e < l.c.topk; ++e) keys[e] = topk[e] < 0 ? -1 : topk[e] + times * off;
    for (int e = 0; e < l.c.topk; ++e)
      if (keys[e] < 0) keys[e] = -1;  // below the buffer: nothing read (the model stays in bounds)
  }
};

struct DkOverwrite : IndexerBackwardSeams {
  bool dk_overwrites(const Layout&) const override { return true; }
};

struct MeanOverBufferRows : IndexerBackwardSeams {
  double loss_denominator(const Layout&, const LossCounts& n) const override {
    return double(std::max<int64_t>(n.buffer_rows, 1));
  }
};

struct ScaleTimes : IndexerBackwardSeams {
  int power;  // the scale's power in the chain: 2 (applied twice) or 0 (not at all)
  explicit ScaleTimes(int p) : power(p) {}
  double logit_grad_scale(const Layout& l) const override { return std::pow(l.scale, power); }
};

// The target in ascending key order (a caller that gathered the main attention's distribution over sorted
// indices) paired with the prediction in the top-k's score order.
struct TargetSortedOrder : IndexerBackwardSeams {
  bool permutes_targets(const Layout&) const override { return true; }
  void target_slots(const Layout& l, int64_t, const int32_t* topk, std::vector<int>& order) const override {
    std::vector<int> valid;
    for (int e = 0; e < l.c.topk; ++e)
      if (topk[e] >= 0) valid.push_back(e);
    std::vector<int> sorted = valid;
    std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) { return topk[a] < topk[b]; });
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = 0; i < valid.size(); ++i) order[size_t(valid[i])] = sorted[i];
  }
};

struct ReluGradAtZero : IndexerBackwardSeams {
  double relu_grad_at_zero(const Layout&) const override { return 1; }
};

// d_index_k accumulated with atomics into a buffer that was never zeroed: only the keys some slot selected
// are written (an unselected key keeps whatever the buffer held: the sentinel here).
void dk_not_zeroed(const Layout& l, const Inputs& in, Outputs& out) {
  std::vector<char> selected(size_t(l.kv_rows), 0);
  const size_t K = size_t(l.c.topk);
  for_each_valid_row(l, RowBuffer::Q, [&](int64_t r, int64_t) {
    for (size_t e = 0; e < K; ++e)
      if (const int32_t v = in.topk[size_t(r) * K + e]; v >= 0 && v < l.kv_rows) selected[size_t(v)] = 1;
  });
  const size_t D = size_t(l.c.dim);
  for (size_t j = 0; j < selected.size(); ++j)
    if (!selected[j]) std::fill_n(out.dk.begin() + long(j * D), D, sentinel_float());
}

}  // namespace

std::vector<BugModel> indexer_backward_models() {
  using K = DefectClass;
  const std::string bwd = "op=indexer pass=bwd ";
  return {
      {.name = "minus-one-as-key0",
       .what = "indexer backward: a -1 top-k slot read as KV row 0 (index clamped at 0), its poisoned target and "
               "prediction in the row's sums",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<MinusOneAs>(false), .defect_class = K::EmptyRows,
       .catches = {"nonfinite", "dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate", "loss_err_over_gate"},
       .triggers = {{bwd + "docs=40,25 topk=64", {"nonfinite"}},
                    {bwd + "docs=40,25 topk=64 poison=none", {"dq_err_over_gate", "dk_err_over_gate"}}},
       .outside = {{bwd + "docs=100 mask=none topk=32", "every row has k keys: no -1 slot"}}},
      {.name = "minus-one-as-last-key",
       .what = "indexer backward: a -1 top-k slot read as the K buffer's last row (-1 modulo the rows)",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<MinusOneAs>(true), .defect_class = K::EmptyRows,
       .catches = {"nonfinite", "clobbered_pad_slots", "dq_err_over_gate", "dw_err_over_gate",
                   "dk_unselected_written", "loss_err_over_gate"},
       .triggers = {{bwd + "docs=40,25 topk=64 tail=8", {"clobbered_pad_slots", "nonfinite"}},
                    {bwd + "docs=40,300 topk=8 poison=none", {"dk_unselected_written"}}},
       .outside = {{bwd + "docs=100 mask=none topk=32", "every row has k keys: no -1 slot"}}},
      {.name = "dk-not-zeroed",
       .what = "indexer backward: d_index_k accumulated into a buffer never zeroed (keys no row selected left "
               "unwritten)",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .transform = dk_not_zeroed, .defect_class = K::Generic,
       .catches = {"unwritten_rows"},
       .triggers = {{bwd + "docs=300 topk=8", {"unwritten_rows"}}},
       .outside = {{bwd + "docs=20 mask=none topk=32", "every row selects every key"}}},
      {.name = "dk-overwrite",
       .what = "indexer backward: d_index_k stored instead of accumulated (the last row that selected a key wins)",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<DkOverwrite>(), .defect_class = K::Generic,
       .catches = {"dk_err_over_gate"},
       .triggers = {{bwd + "docs=300 topk=32", {"dk_err_over_gate"}},
                    {bwd + "docs=512 cp=4 rank=0 topk=16", {"dk_err_over_gate"}}},
       .outside = {{bwd + "q_lens=1 kv_lens=50 mask=bottomright topk=8", "one query row: no key has two selectors"}}},
      {.name = "batch-offset-missing",
       .what = "indexer backward: global top-k ids read as local ones, the document's KV offset not added "
               "(later documents read the first document's keys)",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<BatchOffset>(-1), .defect_class = K::BoundaryMetadata,
       .catches = {"dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate", "dk_unselected_written"},
       .triggers = {{bwd + "docs=100,37 topk=16", {"dq_err_over_gate", "dk_err_over_gate"}},
                    {bwd + "docs=20,300 topk=8 poison=none", {"dk_unselected_written"}}},
       .outside = {{bwd + "docs=300 topk=32", "one document: its offset is 0"}}},
      {.name = "batch-offset-twice",
       .what = "indexer backward: global top-k ids offset by the document's KV offset again",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<BatchOffset>(1), .defect_class = K::BoundaryMetadata,
       .catches = {"dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate", "dk_unselected_written",
                   "loss_err_over_gate"},
       .triggers = {{bwd + "docs=100,200 topk=8", {"dq_err_over_gate", "dk_unselected_written"}}},
       .outside = {{bwd + "docs=300 topk=32", "one document: its offset is 0"}}},
      {.name = "loss-mean-buffer-rows",
       .what = "indexer backward: the loss's mean over every Q buffer row (pad rows counted) whatever the caller's "
               "denominator",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<MeanOverBufferRows>(), .defect_class = K::Generic,
       .catches = {"loss_err_over_gate", "dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate"},
       .triggers = {{bwd + "docs=100,37 pad=9 loss_mean=valid topk=16", {"loss_err_over_gate", "dq_err_over_gate"}}},
       .outside = {{bwd + "docs=100,37 pad=9 topk=16", "loss_mean=rows: the buffer's rows are the denominator"}}},
      {.name = "scale-twice",
       .what = "indexer backward: sm_scale applied twice in the logits' gradient",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<ScaleTimes>(2), .defect_class = K::Generic,
       .catches = {"dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate"},
       .triggers = {{bwd + "docs=100 topk=16 scale=0.25", {"dq_err_over_gate", "dw_err_over_gate"}}},
       .outside = {{bwd + "docs=100 topk=16", "scale 1"}}},
      {.name = "scale-missing",
       .what = "indexer backward: sm_scale left out of the logits' gradient",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<ScaleTimes>(0), .defect_class = K::Generic,
       .catches = {"dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate"},
       .triggers = {{bwd + "docs=100 topk=16 scale=0.25", {"dq_err_over_gate", "dk_err_over_gate"}}},
       .outside = {{bwd + "docs=100 topk=16", "scale 1"}}},
      {.name = "target-slot-order",
       .what = "indexer backward: the target in ascending key order paired with the prediction in score order",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<TargetSortedOrder>(), .defect_class = K::TopkBuffers,
       .catches = {"loss_err_over_gate", "dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate"},
       .triggers = {{bwd + "docs=200 topk=16", {"loss_err_over_gate", "dq_err_over_gate"}}},
       .outside = {{bwd + "docs=60 topk=1", "one slot per row"}}},
      {.name = "relu-grad-at-zero",
       .what = "indexer backward: ReLU's gradient taken at q.k >= 0 instead of > 0",
       .indexer = true, .sdpa = false, .pass = Pass::Bwd, .seams = seams<ReluGradAtZero>(), .defect_class = K::Generic,
       .catches = {"dq_err_over_gate", "dk_err_over_gate"},
       .triggers = {{bwd + "docs=120 topk=16 dim=4 levels=2", {"dq_err_over_gate", "dk_err_over_gate"}}},
       .outside = {{bwd + "docs=120 topk=16", "random inputs: no q.k is exactly 0"}}},
  };
}

}  // namespace ao::models
