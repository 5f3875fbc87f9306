// `cpu-ref` (the oracle seen as a backend) and the `cpu-bug:<model>` bug models: each a Quirks
// setting on the same reference path or an output transform after it (bug_transforms.cpp),
// re-creating one real defect class.
#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

namespace detail {
std::vector<BackendInfo> cpu_backends();
}

const char* defect_class_name(DefectClass k) {
  switch (k) {
    case DefectClass::BoundaryMetadata: return "boundary-metadata";
    case DefectClass::EmptyRows: return "empty-rows";
    case DefectClass::WindowAlignment: return "window-alignment";
    case DefectClass::PadLanes: return "pad-lanes";
    case DefectClass::TopkBuffers: return "topk-buffers";
    case DefectClass::SplitKv: return "split-kv";
    default: return "generic";
  }
}

// Where a model comes from and what catches it (BugModel's catalog fields).
struct Provenance {
  std::string catalog, source;
  DefectClass klass = DefectClass::Generic;
  std::vector<std::string> catches;
};

const std::vector<BugModel>& bug_models() {
  static const std::vector<BugModel> m = [] {
    using K = DefectClass;
    std::vector<BugModel> v;
    auto add = [&](std::string name, std::string what, bool idx, bool sdpa, auto set, Provenance p) {
      Quirks q;
      set(q);
      v.push_back({std::move(name), std::move(what), idx, sdpa, q, {}, p.catalog, p.source, p.klass, p.catches});
    };
    add("topleft-cp", "chunk-local top-left causal mask on CP / bottom-right query chunks (q_causal_offsets dropped; seed PR #14)",
        true, true, [](Quirks& q) { q.topleft_cp = true; },
        {"", "seed PR #14 (Megatron packed-CP indexer)", K::BoundaryMetadata,
         {"tie_aware_recall_min", "out_of_causal", "tol_violations", "rel_l2_err", "lse_max_err"}});
    add("derived-offsets", "sequences addressed by prefix(lens), bound ragged offsets ignored (cudnn-frontend #737)",
        true, true, [](Quirks& q) { q.derived_offsets = true; },
        {"", "cudnn-frontend #737", K::BoundaryMetadata,
         {"tie_aware_recall_min", "out_of_range", "cross_doc", "clobbered_pad_slots", "unwritten_rows",
          "tol_violations", "rel_l2_err", "lse_max_err", "nonfinite_valid"}});
    add("shared-qkv-offsets", "K/V read through the Q offsets", true, true,
        [](Quirks& q) { q.shared_qkv_offsets = true; },
        {"", "", K::BoundaryMetadata,
         {"tie_aware_recall_min", "out_of_range", "cross_doc", "tol_violations", "rel_l2_err", "lse_max_err",
          "nonfinite_valid"}});
    add("tail-read", "64-row key tiles read past a sequence's end; masked P times pad-row V (cudnn-frontend #624)",
        false, true, [](Quirks& q) { q.tail_read_tile = 64; },
        {"", "cudnn-frontend #624 (also FA #1745, #1395)", K::PadLanes, {"nonfinite_valid", "tol_violations", "rel_l2_err"}});
    add("off-by-one-causal", "causal mask keeps key p+1", true, true, [](Quirks& q) { q.off_by_one = true; },
        {"", "", K::Generic, {"out_of_causal", "tie_aware_recall_min", "tol_violations", "rel_l2_err", "lse_max_err"}});
    add("cross-doc", "causal mask over the whole pack, document boundaries ignored", true, true,
        [](Quirks& q) { q.cross_doc = true; },
        {"", "", K::Generic, {"cross_doc", "tie_aware_recall_min", "tol_violations", "rel_l2_err", "lse_max_err"}});
    add("gqa-modulo", "query head h reads kv head h % hkv instead of h / (hq/hkv)", false, true,
        [](Quirks& q) { q.gqa_modulo = true; },
        {"", "", K::Generic, {"tol_violations", "rel_l2_err", "lse_max_err"}});
    add("lse-log2", "LSE written in base 2", false, true, [](Quirks& q) { q.lse_log2 = true; },
        {"", "", K::Generic, {"lse_max_err"}});
    add("stats-packed", "LSE written at packed prefix rows, stats offsets ignored", false, true,
        [](Quirks& q) { q.stats_packed = true; },
        {"", "", K::BoundaryMetadata, {"clobbered_pad_slots", "unwritten_rows", "lse_max_err"}});
    add("fill-zero", "rows with fewer than k allowed keys filled with 0 instead of -1", true, false,
        [](Quirks& q) { q.fill_zero = true; }, {"", "", K::EmptyRows, {"wrong_fill_rows", "duplicates"}});
    for (auto& t : transform_bug_models()) v.push_back(std::move(t));
    for (auto& t : catalog_window_models()) v.push_back(std::move(t));  // issue 15 (win)
    for (auto& t : catalog_split_models()) v.push_back(std::move(t));
    for (auto& t : catalog_indexer_models()) v.push_back(std::move(t));
    return v;
  }();
  return m;
}

namespace {

class CpuBackend : public Backend {
 public:
  CpuBackend(std::string name, Quirks q, bool idx, bool sdpa, OutputTransform t = {})
      : name_(std::move(name)), q_(q), idx_(idx), sdpa_(sdpa), transform_(std::move(t)) {}
  std::string name() const override { return name_; }
  std::string declines(const Layout& l) const override {
    if (l.c.op == Op::Indexer && !idx_) return name_ + " models an SDPA defect; not defined for op=indexer";
    if (l.c.op == Op::Sdpa && !sdpa_) return name_ + " models an indexer defect; not defined for op=sdpa";
    return {};
  }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    if (l.c.op == Op::Indexer)
      reference_indexer(l, in, out, q_);
    else
      reference_sdpa(l, in, out, q_);
    if (transform_) transform_(l, in, out);
    return {};
  }

 private:
  std::string name_;
  Quirks q_;
  bool idx_, sdpa_;
  OutputTransform transform_;
};

}  // namespace

std::unique_ptr<Backend> make_bug_model_backend(const BugModel& m) {
  return std::make_unique<CpuBackend>("cpu-bug:" + m.name, m.quirks, m.indexer, m.sdpa, m.transform);
}

// The knob-less entries: the registry's parser refuses any knob text for them.
std::vector<BackendInfo> detail::cpu_backends() {
  std::vector<BackendInfo> v;
  BackendInfo ref;
  ref.name = "cpu-ref";
  ref.description = "exact CPU reference (Eigen; precision=fp32|fp64 from the case)";
  ref.make = [](const Knobs&) { return std::make_unique<CpuBackend>("cpu-ref", Quirks{}, true, true); };
  v.push_back(std::move(ref));
  for (const auto& m : bug_models()) {
    BackendInfo b;
    b.name = "cpu-bug:" + m.name;
    b.description = "bug model: " + m.what;
    b.defects = {m.name};
    b.make = [m](const Knobs&) { return make_bug_model_backend(m); };
    v.push_back(std::move(b));
  }
  return v;
}

}  // namespace ao
