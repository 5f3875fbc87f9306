// Bug models of the defect catalog's split-KV, empty-row and LSE entries (../shared/context/
// defect-catalog.md, sections D and E): Quirks on the SDPA reference (finite-neg-inf, merge-empty-nan)
// or output transforms after the exact run (what a kernel stores: +inf, unwritten stats).
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
  return v;
}

}  // namespace ao
