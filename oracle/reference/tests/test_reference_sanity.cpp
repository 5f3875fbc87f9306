// `--vs` references are checked before they judge: a reference that writes NaN, leaves a
// valid row unwritten, drops or duplicates an index, or gives a keyless row a finite LSE makes the case
// an ERROR naming the reference and the row, never a PASS.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/reference/reference_sanity.h"

using namespace ao;

namespace {

// cpu-ref, then one fault injected into its outputs at a row chosen by the test.
class FaultyReference : public Backend {
 public:
  using Fault = std::function<void(const Layout&, Outputs&)>;
  explicit FaultyReference(Fault f) : fault_(std::move(f)) {}
  std::string name() const override { return "test:faulty-ref"; }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    RunStatus s = ref_->run(l, in, out);
    fault_(l, out);
    return s;
  }

 private:
  std::unique_ptr<Backend> ref_ = make_backend("cpu-ref");
  Fault fault_;
};

// A random checked row that is valid and has at least `min_keys` allowed keys.
int64_t pick_row(const Layout& l, std::mt19937_64& rng, int64_t min_keys) {
  std::vector<int64_t> ok;
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    int64_t lo = 0, hi = 0;
    l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
    if (hi - lo >= min_keys) ok.push_back(r);
  }
  EXPECT_FALSE(ok.empty());
  return ok[rng() % ok.size()];
}

struct FaultCase {
  const char* what;
  const char* case_prefix;
  int64_t min_keys;
  std::function<void(const Layout&, Outputs&, int64_t row)> inject;
  const char* message;  // expected in the reason
};

std::vector<FaultCase> faults() {
  return {
      {"nan in O", "op=sdpa docs=70,33 hq=4 hkv=2", 1,
       [](const Layout& l, Outputs& o, int64_t r) {
         const auto& s = l.seg_of(r);
         o.o[size_t((s.o_row0 + r - s.row0) * l.c.hq * l.c.dim_v + 1)] = NAN;
       },
       "is not finite"},
      {"unwritten sdpa row", "op=sdpa docs=70,33 hq=2", 1,
       [](const Layout& l, Outputs& o, int64_t r) {
         const auto& s = l.seg_of(r);
         for (int e = 0; e < l.c.hq * l.c.dim_v; ++e)
           o.o[size_t((s.o_row0 + r - s.row0) * l.c.hq * l.c.dim_v + e)] = sentinel_float();
       },
       "O unwritten"},
      {"finite lse without keys", "op=sdpa q_lens=40 kv_lens=8 mask=bottomright", 0,
       [](const Layout& l, Outputs& o, int64_t) {
         for (int64_t r : l.check_rows) {  // the first keyless valid row
           int64_t lo = 0, hi = 0;
           l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
           if (!l.valid_row(r) || hi > lo) continue;
           o.lse[size_t((l.seg_of(r).stats_row0 + r - l.seg_of(r).row0) * l.c.hq)] = 0.f;
           return;
         }
       },
       "without allowed keys (must be -inf)"},
      {"unwritten indexer row", "op=indexer docs=300,200 cp=2 rank=1 topk=16", 1,
       [](const Layout& l, Outputs& o, int64_t r) {
         for (int e = 0; e < l.c.topk; ++e) o.topk[size_t(r * l.c.topk + e)] = kSentinelIndex;
       },
       "unwritten"},
      {"dropped index", "op=indexer docs=300,200 cp=2 rank=1 topk=16", 16,
       [](const Layout& l, Outputs& o, int64_t r) { o.topk[size_t(r * l.c.topk + l.c.topk - 1)] = -1; },
       "-1 fills; min(k, allowed keys) = 16 indices expected"},
      {"duplicate index", "op=indexer docs=300,200 cp=2 rank=1 topk=16", 16,
       [](const Layout& l, Outputs& o, int64_t r) { o.topk[size_t(r * l.c.topk + 3)] = o.topk[size_t(r * l.c.topk)]; },
       "appears more than once"},
      {"index not allowed", "op=indexer docs=300,200 topk=8 mask=topleft", 1,
       [](const Layout& l, Outputs& o, int64_t r) {
         const auto& d = l.docs[size_t(l.seg_of(r).doc)];
         o.topk[size_t(r * l.c.topk)] = int32_t(d.kv_off + d.kv_len - 1 == d.kv_off + l.pos_of(r)
                                                    ? d.kv_off + d.kv_len  // next doc / pad: not allowed either
                                                    : d.kv_off + l.pos_of(r) + 1);
       },
       "is not an allowed key"},
  };
}

}  // namespace

TEST(ReferenceSanity, EachFaultOfTheVsReferenceIsAnErrorNamingItAndTheRow) {
  auto be = make_backend("cpu-ref");
  std::mt19937_64 rng(14005);
  for (const auto& f : faults()) {
    for (int rep = 0; rep < 3; ++rep) {
      const Case c = parse_case(fmt::format("{} seed={}", f.case_prefix, rng() % 100000));
      const Layout l = make_layout(c);
      const int64_t row = f.min_keys > 0 ? pick_row(l, rng, f.min_keys) : -1;
      FaultyReference vs([&](const Layout& ll, Outputs& o) { f.inject(ll, o, row); });
      const CaseResult r = run_case(c, *be, vs);
      EXPECT_EQ(r.verdict.kind, Verdict::Error) << f.what << ": " << r.case_line << ": " << r.verdict.reason;
      EXPECT_NE(r.verdict.reason.find("reference test:faulty-ref failed its own sanity check"), std::string::npos)
          << f.what << ": " << r.verdict.reason;
      EXPECT_NE(r.verdict.reason.find(f.message), std::string::npos) << f.what << ": " << r.verdict.reason;
      if (row >= 0) {
        EXPECT_NE(r.verdict.reason.find(fmt::format("row {} (doc", row)), std::string::npos)
            << f.what << ": " << r.verdict.reason;
      }
    }
  }
}

// The check holds the trusted reference to the same rules: cpu-ref passes it on random layouts.
TEST(ReferenceSanity, CpuRefIsSaneOnRandomLayouts) {
  auto ref = make_backend("cpu-ref");
  std::mt19937_64 rng(1405);
  for (int i = 0; i < 12; ++i) {
    const std::string line =
        i % 4 == 1   ? fmt::format("op=indexer docs={},{} topk={} cp=2 rank={} seed={}", 4 * (1 + rng() % 50),
                                   4 * (1 + rng() % 50), 1 + rng() % 40, rng() % 2, rng() % 100000)
        : i % 4 == 3 ? fmt::format("op=indexer docs={},{} topk={} ratio={} seed={}", 2 + rng() % 200, 2 + rng() % 200,
                                   1 + rng() % 40, 1 + rng() % 3, rng() % 100000)
                     : fmt::format("op=sdpa q_lens={},{} kv_lens={},{} mask={} window={} seed={}", 1 + rng() % 90,
                                   1 + rng() % 90, 1 + rng() % 90, 1 + rng() % 90,
                                   rng() % 2 ? "bottomright" : "topleft", rng() % 3 ? 0 : 1 + rng() % 20,
                                   rng() % 100000);
    const Layout l = make_layout(parse_case(line));
    Outputs o = make_sentinel_outputs(l);
    ASSERT_EQ(ref->run(l, make_inputs(l), o).kind, RunStatus::Ok) << line;
    EXPECT_EQ(reference_sanity(l, o), "") << line;
  }
}
