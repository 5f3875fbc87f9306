// Bug models of the defect catalog's split-KV, empty-row and LSE entries (docs/defect-catalog.md,
// sections D and E): Quirks on the SDPA reference where the defect changes what is
// computed (finite-neg-inf, merge-empty-nan, split-max-seqlen), output transforms after the exact run
// where it changes what is stored (+inf, unwritten stats, the combine's O stride, LSE layouts).
// A split-KV model changes only the rows its defect reaches: elsewhere a correct split kernel differs
// from the exact path by rounding alone, which the comparator allows and the kill matrix must not see.
#include <algorithm>
#include <limits>

#include "attn_oracle/backends/bug_models.h"

namespace ao {

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

}  // namespace

std::vector<BugModel> catalog_split_models() {
  using K = DefectClass;
  std::vector<BugModel> v;
  auto quirk = [](auto set) {
    Quirks q;
    set(q);
    return q;
  };
  v.push_back({"finite-neg-inf",
               "the running max starts at the finite -5e4: a row whose every logit is below -5e4 (sum underflows) "
               "gives O = 0, LSE = -5e4",
               false, true, quirk([](Quirks& q) { q.finite_neg_inf = true; }), {}, "[23]",
               "flashinfer #4267 (#4450, #4451; PR #4401)", K::EmptyRows,
               {"lse_max_err"}});
  v.push_back({"lse-plus-inf", "rows with no allowed key get LSE = +inf instead of -inf", false, true, Quirks{},
               lse_plus_inf, "[26]", "FlashAttention PR #978, FlashMLA PR #77", K::EmptyRows, {"lse_max_err"}});
  v.push_back({"lse-unwritten", "THD batch (more than one document): ragged stats accepted and never written", false,
               true, Quirks{}, lse_unwritten, "[28]", "cudnn-frontend PR #1036 (also PR #484)", K::EmptyRows,
               {"unwritten_rows"}});
  v.push_back({"merge-empty-nan",
               "split-KV merge without the -inf guard: two empty partial states ((0, -inf), (0, -inf)) merge to NaN "
               "(num_splits > 1, a row whose first two splits hold no allowed key)",
               false, true, quirk([](Quirks& q) { q.merge_unguarded = true; }), {}, "[25]", "flashinfer #4051",
               K::EmptyRows, {"nonfinite_valid", "lse_max_err", "tol_violations", "rel_l2_err"}});
  v.push_back({"split-max-seqlen",
               "num_splits > 1: split ranges and the bottom-right shift use max_seqlen_kv instead of the document's "
               "kv_len: keys past the real end enter",
               false, true, quirk([](Quirks& q) { q.split_max_seqlen = true; }), {}, "[29]",
               "vLLM flash-attention PR #18 (also FA PRs #1192, #1455)", K::BoundaryMetadata,
               {"tol_violations", "lse_max_err", "rel_l2_err", "nonfinite_valid"}});
  v.push_back({"split-combine-stride0",
               "num_splits > 1, several documents: the combine stores O with batch stride 0: every document's O lands "
               "on document 0's rows",
               false, true, Quirks{}, split_combine_stride0, "[30]", "FlashAttention #1217 (PRs #2542, #2550)",
               K::BoundaryMetadata, {"unwritten_rows", "tol_violations", "rel_l2_err"}});
  v.push_back({"folded-lse-layout",
               "GQA decode (max_seqlen_q = 1, hq > hkv), num_splits > 1: the LSE of head h stored at the folded "
               "position (h % G) * hkv + h / G",
               false, true, Quirks{}, folded_lse_layout, "[31]", "vLLM flash-attention PR #87", K::SplitKv,
               {"lse_max_err"}});
  v.push_back({"early-exit-lse-offset",
               "num_splits > 1: a row with no allowed key stores its LSE at the padded offset b * max_seqlen_q + t "
               "instead of its stats row",
               false, true, Quirks{}, early_exit_lse_offset, "[32]", "FlashAttention PR #2573", K::EmptyRows,
               {"unwritten_rows"}});
  return v;
}

}  // namespace ao
