// Bug models of the defect catalog's split-KV, empty-row and LSE entries (docs/defect-catalog.md, sections D and E): seams of
// the SDPA reference where the defect changes what is computed (finite-neg-inf: the initial max;
// merge-empty-nan: the merge; split-max-seqlen: the keys a row sees), output transforms after the exact
// run where it changes what is stored (+inf, unwritten stats, the combine's O stride, LSE layouts).
// A split-KV model changes only the rows its defect reaches: elsewhere a correct split kernel differs
// from the exact path by rounding alone, which the comparator allows and the kill matrix must not see.
#include <algorithm>
#include <limits>

#include "models.h"

namespace ao::models {

namespace {

// Calls f(stats_row) for every checked valid row that has no allowed key (the mask leaves it empty).
template <class F>
void for_each_empty_row(const Layout& l, F&& f) {
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const auto& s = l.seg_of(r);
    int64_t lo = 0, hi = 0;
    l.allowed_range(s.doc, l.pos_of(r), lo, hi);
    if (hi <= lo) f(s.stats_row0 + (r - s.row0));
  }
}

// FlashAttention PR #978, FlashMLA PR #77: a row with no allowed key gets LSE = +inf (O = 0): the
// older convention, which breaks a later merge of partial states.
void lse_plus_inf(const Layout& l, const Inputs&, Outputs& out) {
  for_each_empty_row(l, [&](int64_t srow) {
    for (int h = 0; h < l.c.hq; ++h) out.lse[size_t(srow * l.c.hq + h)] = std::numeric_limits<float>::infinity();
  });
}

// cudnn-frontend PR #1036 (also PR #484): the ragged stats tensor of a THD batch is accepted and never
// written. One document is the dense case (its ragged and padded stats coincide) and is written.
void lse_unwritten(const Layout& l, const Inputs&, Outputs& out) {
  if (l.docs.size() < 2) return;
  for_each_valid_row(l, RowBuffer::Stats, [&](int64_t, int64_t srow) {
    for (int h = 0; h < l.c.hq; ++h) out.lse[size_t(srow * l.c.hq + h)] = sentinel_float();
  });
}

// FlashAttention #1217 (PRs #2542, #2550): varlen with num_splits > 1, the combine kernel addresses O
// with a batch stride that is 0: document b's row i is stored at document 0's row i (later documents
// overwrite earlier ones), and document b's own O rows are never written. Under CP the kernel's call
// holds this rank's rows only: a document's row i counts from its first local O row, and "document 0"
// is the first document with rows on this rank. A store that would land outside the O buffer is
// dropped (the kernel's out-of-bounds write is not re-created).
void split_combine_stride0(const Layout& l, const Inputs&, Outputs& out) {
  if (l.c.num_splits <= 1 || l.docs.size() < 2) return;
  const size_t W = size_t(l.c.hq) * size_t(l.c.dim_v);
  std::vector<int64_t> start(l.docs.size(), -1);  // each document's first O row in this buffer
  for (size_t d = 0; d < l.docs.size(); ++d)
    if (!l.is_cp()) start[d] = l.docs[d].o_off;
  if (l.is_cp())
    for (const auto& s : l.segments)
      if (s.rows > 0 && (start[size_t(s.doc)] < 0 || s.o_row0 < start[size_t(s.doc)])) start[size_t(s.doc)] = s.o_row0;
  int first = l.is_cp() ? -1 : 0;
  for (size_t d = 0; first < 0 && d < l.docs.size(); ++d) first = start[d] >= 0 ? int(d) : -1;
  for (size_t d = 0; l.is_cp() && d < l.docs.size(); ++d)
    if (start[d] >= 0 && start[d] < start[size_t(first)]) first = int(d);
  if (first < 0) return;
  struct Store { int64_t to; std::vector<float> o; };
  std::vector<Store> stores;
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const auto& s = l.seg_of(r);
    if (s.doc == first) continue;
    const int64_t orow = s.o_row0 + (r - s.row0);
    const int64_t to = start[size_t(first)] + (orow - start[size_t(s.doc)]);
    const auto src = out.o.begin() + long(size_t(orow) * W);
    if (to >= 0 && to < l.o_rows) stores.push_back({to, std::vector<float>(src, src + long(W))});
  }
  for_each_valid_row(l, RowBuffer::O, [&](int64_t q, int64_t orow) {
    if (l.seg_of(q).doc != first) std::fill_n(out.o.begin() + long(size_t(orow) * W), W, sentinel_float());
  });
  for (const auto& st : stores) std::copy(st.o.begin(), st.o.end(), out.o.begin() + long(size_t(st.to) * W));
}

// vLLM flash-attention PR #87: GQA decode (max_seqlen_q = 1, hq > hkv) folds the query heads into the
// sequence axis; with num_splits > 1 the LSE of head h is stored at the folded position
// (h % G) * hkv + h / G, which the later reshape does not undo (O is right, the LSE is another head's).
void folded_lse_layout(const Layout& l, const Inputs&, Outputs& out) {
  const int G = l.group(), Hq = l.c.hq, Hkv = l.c.hkv;
  if (l.c.num_splits <= 1 || G <= 1 || l.max_seqlen_q != 1) return;
  std::vector<float> row(static_cast<size_t>(Hq));
  for_each_valid_row(l, RowBuffer::Stats, [&](int64_t, int64_t srow) {
    float* lse = out.lse.data() + size_t(srow) * size_t(Hq);
    for (int h = 0; h < Hq; ++h) row[size_t((h % G) * Hkv + h / G)] = lse[h];
    std::copy(row.begin(), row.end(), lse);
  });
}

// FlashAttention PR #2573: varlen split-KV, a row with no allowed key takes the early exit, which
// stores its LSE at the padded offset b * max_seqlen_q + t instead of the row's packed stats row
// (which stays unwritten). O is stored right.
void early_exit_lse_offset(const Layout& l, const Inputs&, Outputs& out) {
  if (l.c.num_splits <= 1) return;
  const size_t Hq = size_t(l.c.hq);
  const int64_t smax = l.max_seqlen_q;
  struct Store { int64_t to; std::vector<float> lse; };
  std::vector<Store> stores;
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    const auto& s = l.seg_of(r);
    int64_t lo = 0, hi = 0;
    l.allowed_range(s.doc, l.pos_of(r), lo, hi);
    if (hi > lo) continue;
    const int64_t srow = s.stats_row0 + (r - s.row0), to = int64_t(s.doc) * smax + s.tok0 + (r - s.row0);
    if (to == srow) continue;
    float* lse = out.lse.data() + size_t(srow) * Hq;
    if (to < l.stats_rows) stores.push_back({to, std::vector<float>(lse, lse + Hq)});
    std::fill_n(lse, Hq, sentinel_float());
  }
  for (const auto& st : stores) std::copy(st.lse.begin(), st.lse.end(), out.lse.begin() + long(size_t(st.to) * Hq));
}

// flashinfer #4267: the running max starts at the finite "-inf" -5e4.
struct FiniteNegInf : ReferenceSeams {
  double initial_max() const override { return -5e4; }
};

// flashinfer #4051: the split-KV merge without the -inf guard, with the case's num_splits. Only the rows
// its NaN reaches differ from the exact path beyond rounding.
struct MergeEmptyNan : ReferenceSeams {
  KeySplits key_splits(const Layout& l) const override {
    return {.n = l.c.num_splits, .guard = false, .nan_rows_only = true};
  }
};

// vLLM flash-attention PR #18: with num_splits > 1 the kernel takes the document's key count from
// max_seqlen_kv: the bottom-right shift and the key bound use it instead of kv_len.
struct SplitMaxSeqlen : ReferenceSeams {
  std::vector<KeyRange> key_ranges(const Layout& l, int64_t r) const override {
    auto v = ReferenceSeams::key_ranges(l, r);
    const Case& c = l.c;
    const int64_t kv = l.docs[size_t(l.seg_of(r).doc)].kv_len, kmax = l.max_seqlen_kv;
    if (c.num_splits <= 1 || kmax <= kv) return v;
    const int64_t p = c.mask == MaskKind::BottomRight ? l.pos_of(r) + kmax - kv : l.pos_of(r);
    if (c.mask == MaskKind::None)
      v[0].lo = 0, v[0].hi = kmax;
    else
      sdpa_window_band(c.window_convention, kmax, p, c.window, c.window_right, v[0].lo, v[0].hi);
    return v;
  }
};

}  // namespace

std::vector<BugModel> split_kv_models() {
  using K = DefectClass;
  const std::string empty_rows = "q_lens=30,12 kv_lens=10,40 mask=bottomright";  // doc 0's first 20 rows: no key
  return {
      {.name = "finite-neg-inf",
       .what = "the running max starts at the finite -5e4: a row whose every logit is below -5e4 (sum underflows) "
               "gives O = 0, LSE = -5e4",
       .indexer = false, .sdpa = true, .seams = seams<FiniteNegInf>(), .catalog = "[23]",
       .source = "flashinfer #4267 (#4450, #4451; PR #4401)", .defect_class = K::EmptyRows,
       .catches = {"lse_max_err", "rel_l2_err", "tol_violations"},
       .triggers = {{"op=sdpa docs=40,24 scale=1e6 dtype=fp32", {"lse_max_err", "rel_l2_err", "tol_violations"}},
                    {"op=sdpa docs=40,24 values=extreme", {"lse_max_err", "rel_l2_err", "tol_violations"}}},
       .outside = {{"op=sdpa docs=40,24", "logits of normal size"}}},
      {.name = "lse-plus-inf", .what = "rows with no allowed key get LSE = +inf instead of -inf", .indexer = false,
       .sdpa = true, .transform = lse_plus_inf, .catalog = "[26]", .source = "FlashAttention PR #978, FlashMLA PR #77",
       .defect_class = K::EmptyRows, .catches = {"lse_max_err"},
       .triggers = {{"op=sdpa " + empty_rows, {"lse_max_err"}}},
       .outside = {{"op=sdpa q_lens=20,7 kv_lens=50,30 mask=bottomright", "no row without keys"}}},
      {.name = "lse-unwritten", .what = "THD batch (more than one document): ragged stats accepted and never written",
       .indexer = false, .sdpa = true, .transform = lse_unwritten, .catalog = "[28]",
       .source = "cudnn-frontend PR #1036 (also PR #484)", .defect_class = K::EmptyRows, .catches = {"unwritten_rows"},
       .triggers = {{"op=sdpa docs=70,50 hq=8 hkv=2", {"unwritten_rows"}}},
       .outside = {{"op=sdpa docs=130 hq=8 hkv=2", "one document: dense stats"}}},
      {.name = "merge-empty-nan",
       .what = "split-KV merge without the -inf guard: two empty partial states ((0, -inf), (0, -inf)) merge to NaN "
               "(num_splits > 1, a row whose first two splits hold no allowed key)",
       .indexer = false, .sdpa = true, .seams = seams<MergeEmptyNan>(), .catalog = "[25]", .source = "flashinfer #4051",
       .defect_class = K::EmptyRows, .catches = {"nonfinite_valid", "lse_max_err", "tol_violations", "rel_l2_err"},
       .triggers = {{"op=sdpa " + empty_rows + " num_splits=2", {"nonfinite_valid"}},
                    {"op=sdpa docs=200 window=8 num_splits=4", {"nonfinite_valid"}}},  // splits 0, 1 out of the window
       .outside = {{"op=sdpa " + empty_rows, "one split"},
                   {"op=sdpa docs=100,37 num_splits=3", "causal: split 0 never empty"}}},
      {.name = "split-max-seqlen",
       .what = "num_splits > 1: split ranges and the bottom-right shift use max_seqlen_kv instead of the document's "
               "kv_len: keys past the real end enter",
       .indexer = false, .sdpa = true, .seams = seams<SplitMaxSeqlen>(), .catalog = "[29]",
       .source = "vLLM flash-attention PR #18 (also FA PRs #1192, #1455)", .defect_class = K::BoundaryMetadata,
       .catches = {"tol_violations", "lse_max_err", "rel_l2_err", "nonfinite_valid"},
       .triggers = {{"op=sdpa q_lens=10,10 kv_lens=37,100 mask=bottomright num_splits=3", {"tol_violations"}},
                    // keys past the real end: the pad slots
                    {"op=sdpa docs=60,45 max_seqlen_kv=80 mask=none pad=30 poison=nan num_splits=2", {"nonfinite_valid"}},
                    {"op=sdpa docs=300,100 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64", {"nonfinite_valid"}},
                    {"op=sdpa q_lens=1,1 kv_lens=100,37 tail=512 max_seqlen_kv=512 num_splits=2 mask=none hq=4 dim=64 "
                     "poison=none",
                     {"lse_max_err"}},
                    {"op=sdpa q_lens=1*32 kv_lens=4000*31,8000 kv_pad=8 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16",
                     {"nonfinite_valid"}, CaseScale::Production}},
       .outside = {{"op=sdpa q_lens=10,10 kv_lens=37,100 mask=bottomright", "one split"},
                   {"op=sdpa q_lens=10,10 kv_lens=60,60 mask=bottomright num_splits=3", "kv_len = max"},
                   {"op=sdpa docs=300,300 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64", "kv_len = max"},
                   {"op=sdpa q_lens=1,1 kv_lens=100,37 tail=512 max_seqlen_kv=512 mask=none hq=4 dim=64 poison=none",
                    "one split"},
                   {"op=sdpa q_lens=1*32 kv_lens=8000*32 kv_pad=8 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16", "kv_len = max",
                    CaseScale::Production}}},
      {.name = "split-combine-stride0",
       .what = "num_splits > 1, several documents: the combine stores O with batch stride 0: every document's O lands "
               "on document 0's rows",
       .indexer = false, .sdpa = true, .transform = split_combine_stride0, .catalog = "[30]",
       .source = "FlashAttention #1217 (PRs #2542, #2550)", .defect_class = K::BoundaryMetadata,
       .catches = {"unwritten_rows", "tol_violations", "rel_l2_err"},
       .triggers = {{"op=sdpa docs=40,30 num_splits=2", {"unwritten_rows", "tol_violations"}},
                    {"op=sdpa q_lens=16,16,16 kv_lens=300,200,100 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64",
                     {"unwritten_rows"}},
                    {"op=sdpa q_lens=1*8 kv_lens=700*8 num_splits=3 mask=none hq=8 hkv=1 dim=128", {"unwritten_rows"}},
                    {"op=sdpa q_lens=1*32 kv_lens=8000*32 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16", {"unwritten_rows"},
                     CaseScale::Production}},
       .outside = {{"op=sdpa docs=40,30", "one split"},
                   {"op=sdpa docs=70 pad=9 num_splits=4", "one document"},
                   {"op=sdpa docs=300 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64", "one document"},
                   {"op=sdpa q_lens=1*8 kv_lens=700*8 mask=none hq=8 hkv=1 dim=128", "one split"},
                   {"op=sdpa q_lens=1 kv_lens=8000 num_splits=8 mask=none hq=32 hkv=8 dim=128 dtype=bf16", "one document", CaseScale::Production}}},
      {.name = "folded-lse-layout",
       .what = "GQA decode (max_seqlen_q = 1, hq > hkv), num_splits > 1: the LSE of head h stored at the folded "
               "position (h % G) * hkv + h / G",
       .indexer = false, .sdpa = true, .transform = folded_lse_layout, .catalog = "[31]",
       .source = "vLLM flash-attention PR #87", .defect_class = K::SplitKv, .catches = {"lse_max_err"},
       .triggers = {{"op=sdpa q_lens=1,1,1 kv_lens=40,17,64 mask=bottomright hq=8 hkv=2 num_splits=2", {"lse_max_err"}}},
       .outside = {{"op=sdpa q_lens=1,1,1 kv_lens=40,17,64 mask=bottomright hq=8 hkv=2", "one split"},
                   {"op=sdpa q_lens=1,1,1 kv_lens=40,17,64 mask=bottomright hq=4 hkv=4 num_splits=2", "MHA"},
                   {"op=sdpa q_lens=2,1 kv_lens=40,17 mask=bottomright hq=8 hkv=2 num_splits=2", "not decode"}}},
      {.name = "early-exit-lse-offset",
       .what = "num_splits > 1: a row with no allowed key stores its LSE at the padded offset b * max_seqlen_q + t "
               "instead of its stats row",
       .indexer = false, .sdpa = true, .transform = early_exit_lse_offset, .catalog = "[32]",
       .source = "FlashAttention PR #2573", .defect_class = K::EmptyRows, .catches = {"unwritten_rows"},
       .triggers = {{"op=sdpa q_lens=12,30 kv_lens=40,10 mask=bottomright num_splits=2", {"unwritten_rows"}}},
       .outside = {{"op=sdpa q_lens=12,30 kv_lens=40,10 mask=bottomright", "one split"},
                   {"op=sdpa " + empty_rows + " num_splits=2", "empty rows in document 0 only: b * max + t is its row"}}},
  };
}

}  // namespace ao::models
