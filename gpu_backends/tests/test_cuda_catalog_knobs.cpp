// The catalog's kernel-mechanism defects as bug knobs of the own CUDA kernels: each knob's
// run fails on a triggering case with the metric that catches it (3 recorded seeds), the same case
// passes without the knob, and on a case outside the trigger the knob's outputs equal the knob-less
// kernel's bitwise (the knob re-creates the trigger, not a generic corruption). The ids are the cpu-bug
// models'; scripts/device/catalog-knobs.sh runs both on the same cases.
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <sstream>

#include "gpu_test_util.h"

namespace ao::gpu {
namespace {

using gputest::run_line;
using gputest::run_raw;

struct KnobRow {
  const char* backend;  // the knob's spec
  const char* line;     // a triggering case (without seed)
  const char* metric;   // a gated metric it must fail
};

void PrintTo(const KnobRow& r, std::ostream* os) { *os << r.backend << " on " << r.line << " " << r.metric; }

std::string with_seed(const char* line, int seed) {
  std::string s = line;
  s += " seed=";
  s += std::to_string(seed);
  return s;
}
// The spec without its bug knob (other knobs, e.g. inputs=host, kept).
std::string plain(const std::string& spec) {
  const size_t colon = spec.find(':');
  std::string out = spec.substr(0, colon), knobs;
  std::stringstream in(colon == std::string::npos ? "" : spec.substr(colon + 1));
  for (std::string k; std::getline(in, k, ',');) {
    if (k.rfind("bug=", 0) == 0) continue;
    if (!knobs.empty()) knobs += ',';
    knobs += k;
  }
  if (!knobs.empty()) {
    out += ':';
    out += knobs;
  }
  return out;
}

const KnobRow kCaught[] = {
    // [3]: rows with fewer keys than k (causal rows near a document start; a short document)
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", "unwritten_rows"},
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", "out_of_causal"},
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24", "unwritten_rows"},
    // [4]: the same short rows: masked lanes instead of the -1 fill
    {"cuda-indexer:bug=masked-key-fill", "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", "wrong_fill_rows"},
    {"cuda-indexer:bug=masked-key-fill", "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64", "out_of_causal"},
    {"cuda-indexer:bug=masked-key-fill", "op=indexer docs=256,128 cp=2 rank=0 heads=4 dim=32 topk=24", "wrong_fill_rows"},
    // [4] on long rows: extreme scores (below -65504 but for 1 key in 32: 128 < k above the bin;
    // host-shaped inputs): the slots after them get the lanes past the row's end
    {"cuda-indexer:bug=masked-key-fill,inputs=host", "op=indexer q_lens=64 kv_lens=4096 values=extreme heads=2 dim=16 topk=512",
     "out_of_range"},
    {"cuda-indexer:bug=masked-key-fill,inputs=host", "op=indexer q_lens=64 kv_lens=4096 values=extreme heads=2 dim=16 topk=512",
     "tie_aware_recall_min"},
    // [22]: decode without a mask: lanes past kv_len read the pad slots (NaN) or the next document
    {"cuda-sdpa:bug=decode-tile-unmasked", "op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64",
     "nonfinite_valid"},
    {"cuda-sdpa:bug=decode-tile-unmasked",
     "op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=none hq=4 hkv=2 dim=64 poison=none", "lse_max_err"},
    // [30]: split-KV over several documents: the combine puts every document's O on document 0's rows
    {"cuda-sdpa:bug=split-combine-stride0", "op=sdpa q_lens=16,16,16 kv_lens=300,200,100 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64",
     "unwritten_rows"},
    {"cuda-sdpa:bug=split-combine-stride0", "op=sdpa q_lens=1*8 kv_lens=700*8 num_splits=3 mask=none hq=8 hkv=1 dim=128",
     "unwritten_rows"},
    // [29]: split-KV: a document shorter than max_seqlen_kv reads keys past its end (the next pad slots:
    // NaN) and is shifted bottom-right by max_seqlen_kv
    {"cuda-sdpa:bug=split-max-seqlen", "op=sdpa docs=300,100 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64",
     "nonfinite_valid"},
    {"cuda-sdpa:bug=split-max-seqlen",
     "op=sdpa q_lens=1,1 kv_lens=100,37 tail=512 max_seqlen_kv=512 num_splits=2 mask=none hq=4 dim=64 poison=none",
     "lse_max_err"},
};

class CatalogKnobCaught : public ::testing::TestWithParam<KnobRow> {};

TEST_P(CatalogKnobCaught, FailsWithItsMetricAndPassesWithoutTheKnob) {
  AO_REQUIRE_GPU();
  const KnobRow& k = GetParam();
  for (int seed : {1, 2, 3}) {
    const std::string line = with_seed(k.line, seed);
    const auto bad = run_line(line, k.backend);
    ASSERT_EQ(bad.verdict.kind, Verdict::Fail) << k.backend << " " << line << ": " << gputest::describe(bad);
    const Metric* m = bad.verdict.find(k.metric);
    ASSERT_NE(m, nullptr) << k.metric;
    EXPECT_TRUE(m->failed) << k.backend << " " << line << ": " << k.metric << " did not fail: "
                           << gputest::describe(bad);
    const auto ok = run_line(line, plain(k.backend));
    EXPECT_EQ(ok.verdict.kind, Verdict::Pass) << line << ": " << gputest::describe(ok);
  }
}

// Test names: the row index, the knob's id and (when given) the metric, as letters, digits and '_'.
std::string row_name(const ::testing::TestParamInfo<KnobRow>& info) {
  std::string s = "c";  // no "literal" + std::string: GCC 12 -Wrestrict false positive under -Werror
  s += std::to_string(info.index);
  const std::string spec = info.param.backend;
  for (const std::string& part : {spec.substr(spec.find('=') + 1), std::string(info.param.metric)}) {
    if (part.empty()) continue;
    s += '_';
    for (char ch : part) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Catalog, CatalogKnobCaught, ::testing::ValuesIn(kCaught), row_name);

// Cases outside each trigger: every row has at least k keys (no CP chunk near a document start, or
// mask=none, or queries at the end of a long key range: the radix path); a decode under a causal mask,
// and mask=none with q_len > 1.
const KnobRow kInert[] = {
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer docs=300 mask=none heads=2 dim=16 topk=40", ""},
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16", ""},
    {"cuda-indexer:bug=sentinel-lanes", "op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=100 levels=3", ""},
    {"cuda-indexer:bug=masked-key-fill", "op=indexer docs=300 mask=none heads=2 dim=16 topk=40", ""},
    {"cuda-indexer:bug=masked-key-fill", "op=indexer docs=512 cp=2 rank=1 heads=4 dim=32 topk=16", ""},
    {"cuda-indexer:bug=masked-key-fill", "op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=100 levels=3", ""},
    {"cuda-indexer:bug=masked-key-fill,inputs=host", "op=indexer q_lens=64 kv_lens=4096 heads=2 dim=16 topk=512", ""},
    {"cuda-sdpa:bug=decode-tile-unmasked", "op=sdpa q_lens=1,1,1 kv_lens=100,37,300 kv_pad=5 tail=64 mask=bottomright hq=4 hkv=2 dim=64", ""},
    {"cuda-sdpa:bug=decode-tile-unmasked", "op=sdpa q_lens=40,3 kv_lens=90,50 kv_pad=5 tail=64 mask=none hq=2 dim=32", ""},
    {"cuda-sdpa:bug=split-combine-stride0", "op=sdpa docs=300 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64", ""},
    {"cuda-sdpa:bug=split-combine-stride0", "op=sdpa q_lens=16,16,16 kv_lens=300,200,100 mask=bottomright hq=4 hkv=2 dim=64", ""},
    {"cuda-sdpa:bug=split-max-seqlen", "op=sdpa docs=300,300 kv_pad=5 num_splits=4 mask=bottomright hq=4 hkv=2 dim=64", ""},
    {"cuda-sdpa:bug=split-max-seqlen", "op=sdpa docs=300,100 kv_pad=5 mask=bottomright hq=4 hkv=2 dim=64", ""},
};

class CatalogKnobInert : public ::testing::TestWithParam<KnobRow> {};

TEST_P(CatalogKnobInert, OutputsEqualTheKnoblessKernelOutsideTheTrigger) {
  AO_REQUIRE_GPU();
  const KnobRow& k = GetParam();
  const std::string line = with_seed(k.line, 4);
  auto bug = run_raw(line, k.backend);
  auto ok = run_raw(line, plain(k.backend));
  ASSERT_EQ(bug.got.status.kind, RunStatus::Ok) << bug.got.status.reason;
  ASSERT_EQ(ok.got.status.kind, RunStatus::Ok) << ok.got.status.reason;
  EXPECT_EQ(bug.trial.judge(bug.got, bug.ref).kind, Verdict::Pass) << line;
  EXPECT_EQ(bug.got.out.topk, ok.got.out.topk) << line;
  for (auto [a, b] : {std::pair{&bug.got.out.scores, &ok.got.out.scores}, std::pair{&bug.got.out.o, &ok.got.out.o},
                      std::pair{&bug.got.out.lse, &ok.got.out.lse}}) {
    ASSERT_EQ(a->size(), b->size()) << line;
    if (a->empty()) continue;
    EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * sizeof(float))) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalog, CatalogKnobInert, ::testing::ValuesIn(kInert), row_name);

// The exact slots of a short row: [3] slot n = the buffer row past the row with -FLT_MAX, later slots
// keep the harness's sentinel; [4] slots n.. = buffer rows kv_off + hi + j with -inf. Slots before n
// are the knob-less kernel's.
TEST(CatalogKnobs, ShortRowSlotsAreTheDefectsExactly) {
  AO_REQUIRE_GPU();
  const std::string line = "op=indexer docs=100,37 pad=3 heads=4 dim=32 topk=64 seed=5";
  auto ok = run_raw(line, "cuda-indexer");
  auto sl = run_raw(line, "cuda-indexer:bug=sentinel-lanes");
  auto mk = run_raw(line, "cuda-indexer:bug=masked-key-fill");
  for (auto* r : {&ok, &sl, &mk}) ASSERT_EQ(r->got.status.kind, RunStatus::Ok) << r->got.status.reason;
  const Layout& l = ok.trial.layout();
  const size_t K = 64;
  int64_t short_rows = 0;
  for (int64_t r = 0; r < l.q_rows; ++r) {
    if (l.row_segment[size_t(r)] < 0 || !l.valid_row(r)) continue;
    const auto& seg = l.seg_of(r);
    const auto& d = l.docs[size_t(seg.doc)];
    int64_t lo = 0, hi = 0;
    l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
    const size_t n = size_t(hi - lo);
    const size_t at = size_t(r) * K;
    if (n >= K) {
      for (size_t e = 0; e < K; ++e) {
        ASSERT_EQ(sl.got.out.topk[at + e], ok.got.out.topk[at + e]) << "row " << r;
        ASSERT_EQ(mk.got.out.topk[at + e], ok.got.out.topk[at + e]) << "row " << r;
      }
      continue;
    }
    ++short_rows;
    for (size_t e = 0; e < n; ++e) {
      ASSERT_EQ(sl.got.out.topk[at + e], ok.got.out.topk[at + e]) << "row " << r << " slot " << e;
      ASSERT_EQ(mk.got.out.topk[at + e], ok.got.out.topk[at + e]) << "row " << r << " slot " << e;
    }
    EXPECT_EQ(sl.got.out.topk[at + n], int32_t(d.kv_off + hi)) << "row " << r;
    EXPECT_EQ(sl.got.out.scores[at + n], -FLT_MAX) << "row " << r;
    for (size_t e = n + 1; e < K; ++e) ASSERT_EQ(sl.got.out.topk[at + e], kSentinelIndex) << "row " << r << " slot " << e;
    for (size_t e = n; e < K; ++e) {
      ASSERT_EQ(mk.got.out.topk[at + e], int32_t(d.kv_off + hi + int64_t(e - n))) << "row " << r << " slot " << e;
      ASSERT_TRUE(std::isinf(mk.got.out.scores[at + e]) && mk.got.out.scores[at + e] < 0) << "row " << r;
    }
  }
  EXPECT_EQ(short_rows, 63 + 37);  // doc 0's positions 0..62, all of doc 1
}

}  // namespace
}  // namespace ao::gpu
