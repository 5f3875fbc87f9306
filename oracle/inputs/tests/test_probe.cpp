// probe=edges: inputs where each row's mask-boundary keys dominate the softmax, so a
// one-key mask error moves O by O(1) relative, orders of magnitude above the derived gates.
#include <gtest/gtest.h>

#include <cmath>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/inputs/tensors.h"
#include "run_line.h"

using namespace ao;

namespace {

double ratio(const CaseResult& r, const std::string& metric) {
  const Metric* m = r.verdict.find(metric);
  EXPECT_NE(m, nullptr) << metric;
  return m ? m->gate_ratio : -1;
}

}  // namespace

// The blind spot: every row of this rank sees >= 3968 keys; with the default inputs one extra
// key is caught only by the derived gates' small margins (ratios ~3-11); with probes by 15x+ more.
TEST(Probe, OffByOneOnLongRowsMovesOByOrdersOfMagnitudeMore) {
  const std::string base = "op=sdpa docs=8192 cp=32 rank=31 rows=64";
  for (const char* dt : {"bf16", "fp16"}) {
    const std::string line = base + " dtype=" + dt;
    const auto plain = test::run_line(line, "cpu-bug:off-by-one-causal");
    const auto probed = test::run_line(line + " probe=edges", "cpu-bug:off-by-one-causal");
    EXPECT_EQ(probed.verdict.kind, Verdict::Fail) << dt;
    for (const char* m : {"rel_l2_err", "tol_violations", "lse_max_err"}) {
      const double a = ratio(plain, m), b = ratio(probed, m);
      EXPECT_GT(b, 1) << dt << " " << m;
      EXPECT_GE(b, 10 * a) << dt << " " << m << ": probe ratio " << b << " vs plain " << a;
    }
    // The O error itself is O(1) relative, not a rounding-sized 1/4000.
    EXPECT_GT(probed.verdict.find("rel_l2_err")->value, 0.1) << dt;
  }
}

TEST(Probe, CpuRefPassesProbeCases) {
  const char* layouts[] = {
      "op=sdpa docs=300,77,1 probe=edges",
      "op=sdpa q_lens=40,200 kv_lens=90,200 mask=bottomright probe=edges",
      "op=sdpa docs=500,129 window=33 probe=edges",
      "op=sdpa docs=256,64 hq=8 hkv=2 dim=32 dim_v=16 probe=edges",
      "op=sdpa docs=1024 cp=4 rank=2 probe=edges",
  };
  for (const char* dt : {"bf16", "fp16", "fp32"})
    for (uint64_t seed : {1u, 7u, 1234u})
      for (const char* l : layouts) {
        const std::string line = std::string(l) + " dtype=" + dt + " seed=" + std::to_string(seed);
        const auto r = test::run_line(line, "cpu-ref");
        EXPECT_EQ(r.verdict.kind, Verdict::Pass) << line << ": " << r.verdict.reason;
      }
}

TEST(Probe, MaskBugModelsFailProbeCases) {
  EXPECT_EQ(test::run_line("op=sdpa docs=300,200 probe=edges", "cpu-bug:off-by-one-causal").verdict.kind, Verdict::Fail);
  EXPECT_EQ(test::run_line("op=sdpa docs=300,200 mask=bottomright probe=edges", "cpu-bug:off-by-one-causal").verdict.kind,
            Verdict::Fail);
  EXPECT_EQ(test::run_line("op=sdpa docs=500 window=40 probe=edges", "cpu-bug:off-by-one-causal").verdict.kind, Verdict::Fail);
  EXPECT_EQ(test::run_line("op=sdpa docs=1024 cp=4 rank=2 probe=edges", "cpu-bug:topleft-cp").verdict.kind, Verdict::Fail);
  EXPECT_EQ(test::run_line("op=sdpa docs=300,200 probe=edges", "cpu-bug:cross-doc").verdict.kind, Verdict::Fail);
}

// The scheme's promise, measured on the inputs: the newest allowed key takes a large share of its row.
TEST(Probe, NewestAllowedKeyDominatesEachRow) {
  for (const char* dt : {"bf16", "fp16", "fp32"}) {
    const Case c = parse_case(std::string("op=sdpa docs=4096 hq=2 probe=edges seed=3 dtype=") + dt);
    const Layout l = make_layout(c);
    const Inputs in = make_inputs(l);
    const double scale = 1.0 / std::sqrt(double(c.dim));
    for (int64_t p : {int64_t(1), int64_t(17), int64_t(1000), int64_t(4095)}) {
      std::vector<double> s(size_t(p + 1));
      double mx = -1e300;
      for (int64_t k = 0; k <= p; ++k) {
        double dot = 0;
        for (int e = 0; e < c.dim; ++e) dot += double(in.q[size_t(p * c.hq * c.dim + e)]) * in.k[size_t(k * c.hkv * c.dim + e)];
        s[size_t(k)] = dot * scale;
        mx = std::max(mx, s[size_t(k)]);
      }
      double z = 0;
      for (double x : s) z += std::exp(x - mx);
      const double share = std::exp(s[size_t(p)] - mx) / z;
      EXPECT_GT(share, 0.4) << dt << " row " << p;
      // Neighbouring values differ in sign: one key more or less moves O by O(1).
      if (p > 0) {
        EXPECT_LT(in.v[size_t(p * c.hkv * c.dim_v)] * in.v[size_t((p - 1) * c.hkv * c.dim_v)], 0.f) << dt << " row " << p;
      }
    }
    for (float x : in.q) EXPECT_TRUE(std::isfinite(x));
    for (float x : in.k) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(Probe, CaseKey) {
  const Case c = parse_case("op=sdpa docs=64 probe=edges");
  EXPECT_EQ(c.probe, Probe::Edges);
  EXPECT_EQ(print_case(c), "op=sdpa docs=64 probe=edges");
  EXPECT_EQ(parse_case(print_case(c)), c);
  EXPECT_EQ(print_case(parse_case("op=sdpa docs=64 probe=none")), "op=sdpa docs=64");
  try {
    parse_case("op=indexer docs=64 probe=edges");
    FAIL() << "indexer accepted probe=";
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "probe");
  }
  try {
    parse_case("op=sdpa probe=corners");
    FAIL() << "bad value accepted";
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "probe");
    EXPECT_EQ(e.value, "corners");
  }
  // A built case (not parsed) is rejected by the layout too.
  Case idx = parse_case("op=indexer docs=64");
  idx.probe = Probe::Edges;
  EXPECT_THROW(make_layout(idx), CaseError);
}
