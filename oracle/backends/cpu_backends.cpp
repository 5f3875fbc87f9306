// `cpu-ref` (the oracle seen as a backend) and the `cpu-bug:<model>` bug models (oracle/backends/models/):
// each runs the same reference through its seams, then its output transform.
#include <optional>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/reference/indexer_backward.h"
#include "attn_oracle/reference/reference.h"

namespace ao {

namespace detail {
std::vector<BackendInfo> cpu_backends();
}

namespace {

class CpuBackend : public Backend {
 public:
  CpuBackend(std::string name, std::shared_ptr<const ReferenceSeams> seams, bool idx, bool sdpa,
             OutputTransform t = {}, std::optional<Pass> pass = std::nullopt)
      : name_(std::move(name)), seams_(std::move(seams)), idx_(idx), sdpa_(sdpa), transform_(std::move(t)),
        pass_(pass) {}
  std::string name() const override { return name_; }
  bool is_exact_reference() const override { return !seams_ && !transform_; }
  std::string declines(const Layout& l) const override {
    if (l.c.op == Op::Indexer && !idx_) return name_ + " models an SDPA defect; not defined for op=indexer";
    if (l.c.op == Op::Sdpa && !sdpa_) return name_ + " models an indexer defect; not defined for op=sdpa";
    if (pass_ && *pass_ != l.c.pass)
      return fmt::format("{} models a defect of the {} pass; not defined for pass={}", name_,
                         *pass_ == Pass::Bwd ? "backward" : "forward", l.c.pass == Pass::Bwd ? "bwd" : "fwd");
    return {};
  }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    const ReferenceSeams& s = seams_ ? *seams_ : exact_seams();
    if (l.c.op == Op::Indexer && l.c.pass == Pass::Bwd)
      reference_indexer_backward(l, in, out, s);
    else if (l.c.op == Op::Indexer)
      reference_indexer(l, in, out, s);
    else if (l.c.pass == Pass::Bwd)
      reference_sdpa_bwd(l, in, out, s);
    else
      reference_sdpa(l, in, out, s);
    // A transform rewrites its own pass's outputs (a pass-less model's: the forward's); another pass's are not there.
    if (transform_ && l.c.pass == pass_.value_or(Pass::Fwd)) transform_(l, in, out);
    return {};
  }

 private:
  std::string name_;
  std::shared_ptr<const ReferenceSeams> seams_;  // null: the exact reference
  bool idx_, sdpa_;
  OutputTransform transform_;
  std::optional<Pass> pass_;  // a bug model's pass (cpu-ref: every pass)
};

}  // namespace

std::unique_ptr<Backend> make_bug_model_backend(const BugModel& m) {
  return std::make_unique<CpuBackend>("cpu-bug:" + m.name, m.seams, m.indexer, m.sdpa, m.transform, m.pass);
}

// The knob-less entries: the registry's parser refuses any knob text for them.
std::vector<BackendInfo> detail::cpu_backends() {
  std::vector<BackendInfo> v;
  BackendInfo ref;
  ref.name = "cpu-ref";
  ref.description = "exact CPU reference (" + reference_runtime() + "; precision=fp32|fp64 from the case)";
  ref.make = [](const Knobs&) { return std::make_unique<CpuBackend>("cpu-ref", nullptr, true, true); };
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
