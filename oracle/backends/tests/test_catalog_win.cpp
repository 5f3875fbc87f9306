// The catalog's window, alignment, CP and offset bug models. Each fails its named
// gated metric on its trigger (3 recorded seeds) while cpu-ref passes, and each is specific: outside
// its trigger its outputs equal cpu-ref's bitwise.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/selftest.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

struct Kill {
  const char* model;
  const char* case_line;  // without seed
  const char* metric;
};

const Kill kKills[] = {
    // [14] a sliding-window layer under CP becomes full causal.
    {"cp-drops-window", "op=sdpa docs=256 cp=4 rank=1 window=16", "tol_violations"},
    {"cp-drops-window", "op=sdpa docs=256 cp=4 rank=1 window=16", "lse_max_err"},
    {"cp-drops-window", "op=sdpa docs=256 cp=4 rank=2 window=8 window_right=4 window_convention=fa", "tol_violations"},
    // [15] a rank attends only the keys of its own two zigzag chunks.
    {"cp-local-keys", "op=indexer docs=1024 cp=4 rank=1 topk=32", "tie_aware_recall_min"},
    {"cp-local-keys", "op=sdpa docs=256 cp=4 rank=1", "tol_violations"},
    {"cp-local-keys", "op=sdpa docs=256 cp=4 rank=1", "lse_max_err"},
    // [16] interior padding: results land at packed prefix rows.
    {"output-prefix", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13", "clobbered_pad_slots"},
    {"output-prefix", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13", "unwritten_rows"},
    {"output-prefix", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13", "tol_violations"},
    {"output-prefix", "op=indexer docs=100,37,200 pad=5,0,11 tail=40 topk=48", "unwritten_rows"},
    {"output-prefix", "op=indexer docs=70,200 pad=58,56 cp=4 rank=3 topk=16", "cross_doc"},
    // [18] a two-sided band forwarded with its left bound only: every query attends its whole future.
    {"window-left-only", "op=sdpa docs=200 window=16 window_right=8", "tol_violations"},
    {"window-left-only", "op=sdpa docs=100,37 window=-1 window_right=4 window_convention=fa", "lse_max_err"},
    // [19] before FA PR #2490: (-1, 0), the causal encoding, widened to full (non-causal) attention.
    {"sentinel-widen", "op=sdpa docs=200 window=-1 window_right=0 window_convention=fa", "tol_violations"},
    {"sentinel-widen", "op=sdpa docs=100,37 window=-1 window_right=0", "lse_max_err"},
    // [19] TE #3528: (-1, 0) as numbers is the empty band [p+1, p]: O = 0, LSE = -inf.
    {"sentinel-empty-band", "op=sdpa docs=200 window=-1 window_right=0 window_convention=fa", "lse_max_err"},
    {"sentinel-empty-band", "op=sdpa docs=100,37 window=16 window_right=-1", "tol_violations"},
    // [20] FA #895: bottom-right, q_len > kv_len, window_right > max_seqlen_kv (the example):
    // the right bound clamped to max_seqlen_kv, then shifted by kv_len - q_len.
    {"clamp-right-before-shift", "op=sdpa q_lens=100 kv_lens=40 mask=bottomright window_right=50", "tol_violations"},
    {"clamp-right-before-shift",
     "op=sdpa q_lens=200,30 kv_lens=40,64 mask=bottomright window=24 window_right=200 max_seqlen_kv=128",
     "lse_max_err"},
    // [21] cutlass #2336: q = 3, k = 128 built top-left instead of bottom-right.
    {"topleft-for-bottomright", "op=sdpa q_lens=3 kv_lens=128 mask=bottomright", "tol_violations"},
    {"topleft-for-bottomright", "op=sdpa q_lens=20,7 kv_lens=50,30 mask=bottomright", "lse_max_err"},
    {"topleft-for-bottomright", "op=indexer q_lens=64 kv_lens=256 topk=16", "tie_aware_recall_min"},
    {"topleft-for-bottomright", "op=indexer q_lens=256 kv_lens=128 topk=16", "out_of_causal"},
    // [22] non-causal decode: lanes past kv_len in the last 256-wide tile (NaN pad slots, the next document).
    {"decode-tile-unmasked", "op=sdpa q_lens=1,1 kv_lens=40,17 mask=none tail=256 poison=nan", "nonfinite_valid"},
    {"decode-tile-unmasked", "op=sdpa q_lens=1,1 kv_lens=40,17 mask=none", "tol_violations"},
    // [38] batch base b * max_seqlen_kv: documents shorter than the longest one before the last.
    {"batch-stride-max-seqlen", "op=sdpa docs=37,100", "tol_violations"},
    {"batch-stride-max-seqlen", "op=sdpa docs=100,37,90", "lse_max_err"},
    // pytorch #139462's case: capacity 256 declared, 128 keys each, B = 2: document 1 reads nothing.
    {"batch-stride-max-seqlen", "op=sdpa docs=128,128 max_seqlen_kv=256", "lse_max_err"},
};

// Cases outside each model's trigger: the model must change nothing there.
struct Outside {
  const char* model;
  const char* case_line;  // without seed
};

const Outside kOutside[] = {
    {"cp-drops-window", "op=sdpa docs=256 window=16"},        // no CP
    {"cp-drops-window", "op=sdpa docs=256 cp=4 rank=1"},      // CP, no window
    {"cp-drops-window", "op=sdpa docs=256 cp=4 rank=1 window=-1 window_right=0"},  // CP, the causal band
    {"cp-local-keys", "op=sdpa docs=100,37 window=8"},        // no CP
    {"cp-local-keys", "op=indexer docs=300 topk=32"},
    {"output-prefix", "op=sdpa docs=100,37 hq=8 hkv=2"},      // packed: the real tokens are a prefix
    {"output-prefix", "op=sdpa docs=100,37 tail=30"},          // capacity past the end is not interior
    {"output-prefix", "op=indexer docs=1024 cp=4 rank=1 topk=32"},  // CP chunks without pad rows
    {"window-left-only", "op=sdpa docs=200 window=16"},                   // one-sided
    {"window-left-only", "op=sdpa docs=200 window=16 window_right=-1"},   // already unbounded on the right
    {"sentinel-widen", "op=sdpa docs=200 window=16 window_right=4 window_convention=fa"},  // no sentinel
    {"sentinel-widen", "op=sdpa docs=200 window=-1 window_right=-1"},    // full attention already
    {"sentinel-widen", "op=sdpa docs=200 window=-1 window_right=3"},     // sum >= 0
    {"sentinel-empty-band", "op=sdpa docs=200 window=16 window_right=4 window_convention=fa"},
    {"sentinel-empty-band", "op=sdpa docs=100,37"},                       // no window at all
    {"clamp-right-before-shift", "op=sdpa q_lens=40 kv_lens=100 mask=bottomright window_right=200"},  // q < kv
    {"clamp-right-before-shift", "op=sdpa q_lens=100 kv_lens=40 mask=topleft window_right=50"},       // no shift
    {"clamp-right-before-shift", "op=sdpa q_lens=100 kv_lens=40 mask=bottomright window_right=30"},   // right < max
    {"topleft-for-bottomright", "op=sdpa docs=50,30 mask=bottomright"},  // q_len == kv_len
    {"topleft-for-bottomright", "op=sdpa q_lens=20,7 kv_lens=50,30 mask=topleft"},
    {"topleft-for-bottomright", "op=indexer docs=1024 cp=4 rank=3 topk=32"},  // bottom-right, q == kv, CP
    {"decode-tile-unmasked", "op=sdpa q_lens=1,1 kv_lens=40,17 mask=bottomright tail=256"},  // causal
    {"decode-tile-unmasked", "op=sdpa q_lens=2,2 kv_lens=40,17 mask=none tail=256"},         // not decode
    {"decode-tile-unmasked", "op=sdpa q_lens=1,1 kv_lens=256,512 mask=none tail=256"},       // whole tiles
    {"batch-stride-max-seqlen", "op=sdpa docs=100,100,100"},  // equal lengths: b * max = the offset
    {"batch-stride-max-seqlen", "op=sdpa docs=37 tail=40"},   // one document
};

CaseResult run(const std::string& line, const std::string& backend) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

const BugModel* model(const std::string& name) {
  for (const auto& m : bug_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

TEST(CatalogWin, EachModelFailsItsMetricWhereCpuRefPasses) {
  for (const auto& k : kKills)
    for (uint64_t seed : {5u, 202u, 1999u}) {
      const std::string line = fmt::format("{} seed={}", k.case_line, seed);
      SCOPED_TRACE(fmt::format("{} under cpu-bug:{}: {}", k.metric, k.model, line));
      const auto bad = run(line, fmt::format("cpu-bug:{}", k.model));
      ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << bad.verdict.reason;
      const Metric* m = bad.verdict.find(k.metric);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->failed) << format_result(bad);
      const auto good = run(line, "cpu-ref");
      EXPECT_EQ(good.verdict.kind, Verdict::Pass) << format_result(good);
    }
}

TEST(CatalogWin, EachModelIsBitwiseCpuRefOutsideItsTrigger) {
  auto ref = make_backend("cpu-ref");
  for (const auto& o : kOutside)
    for (uint64_t seed : {5u, 202u, 1999u}) {
      const std::string line = fmt::format("{} seed={}", o.case_line, seed);
      SCOPED_TRACE(fmt::format("cpu-bug:{} on {}", o.model, line));
      Trial t(parse_case(line));
      auto be = make_backend(fmt::format("cpu-bug:{}", o.model));
      const TrialRun got = t.run(*be), want = t.run(*ref);
      ASSERT_TRUE(got.ok() && want.ok());
      EXPECT_FALSE(outputs_differ(t.layout(), got.out, want.out));
    }
}

TEST(CatalogWin, EveryModelHasProvenanceAKillRowAndASpecificityCase) {
  for (const char* name : {"cp-drops-window", "cp-local-keys", "output-prefix", "window-left-only", "sentinel-widen",
                           "sentinel-empty-band", "clamp-right-before-shift", "topleft-for-bottomright",
                           "decode-tile-unmasked", "batch-stride-max-seqlen"}) {
    SCOPED_TRACE(name);
    const BugModel* m = model(name);
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(m->catalog.empty());
    EXPECT_FALSE(m->source.empty());
    EXPECT_NE(m->klass, DefectClass::Generic);
    bool killed = false, outside = false;
    for (const auto& k : kKills) {
      if (k.model != std::string(name)) continue;
      killed = true;
      bool claimed = false;  // every metric a kill row names is among the model's `catches`
      for (const auto& c : m->catches) claimed |= c == k.metric;
      EXPECT_TRUE(claimed) << k.metric;
    }
    for (const auto& o : kOutside) outside |= o.model == std::string(name);
    EXPECT_TRUE(killed);
    EXPECT_TRUE(outside);
  }
}
