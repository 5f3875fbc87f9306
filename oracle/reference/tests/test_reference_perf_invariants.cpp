// Invariants the references' performance work must keep:
//  * determinism: bitwise identical outputs for a fixed thread count, and outputs that pass the
//    comparator (within tolerance; in practice bitwise) across thread counts;
//  * memory: peak RSS of the full `attn-oracle repro` check of one CP rank of a 131k-token document
//    (cp=32 rank=31, topk 2048) stays linear in the tensors (streamed key tiles, running top-k),
//    measured as the child's ru_maxrss, never S x S.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/reference/reference.h"
#include "../reference_runtime.h"
#include "cli_run.h"

namespace {

using namespace ao;

// Fresh inputs each run, from a seed that a failure message records.
uint64_t fresh_seed() {
  return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000007u;
}

Outputs run_ref(const Layout& l, const Inputs& in, int threads) {
  detail::reference_threads_override() = threads;
  Outputs o = make_sentinel_outputs(l);
  if (l.c.op == Op::Indexer)
    reference_indexer(l, in, o);
  else
    reference_sdpa(l, in, o);
  detail::reference_threads_override() = 0;
  return o;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
bool bitwise_equal(const Outputs& a, const Outputs& b) {
  return bitwise_equal(a.topk, b.topk) && bitwise_equal(a.scores, b.scores) && bitwise_equal(a.o, b.o) &&
         bitwise_equal(a.lse, b.lse);
}

// Cases with many row blocks (so that the threads really split the work), few blocks (split by keys),
// ties, GQA, padding, CP.
std::vector<std::string> determinism_cases(uint64_t seed) {
  const std::string s = " seed=" + std::to_string(seed);
  return {
      "op=indexer docs=4096,2048 cp=4 rank=1 heads=16 dim=64 topk=256" + s,
      "op=indexer docs=4096,2048 cp=4 rank=2 heads=16 dim=64 topk=256 precision=fp64" + s,
      "op=indexer docs=3000,1000 heads=8 dim=32 topk=64 levels=3" + s,  // heavy ties: lower index wins
      // Few row blocks over many key tiles: at 2 and 3 threads each block's tiles are shared out in parts
      // whose running top-k merge into the block's (1 thread: one pass).
      "op=indexer docs=16384 cp=2 rank=1 heads=8 dim=32 topk=128 rows=24" + s,
      "op=indexer docs=16384,3000 cp=2 rank=1 heads=8 dim=32 topk=512 levels=3 rows=40 precision=fp64" + s,
      "op=sdpa docs=1000,700,300 q_pad=3,0,5 kv_pad=0,4,0 tail=16 hq=8 hkv=2 dim=64 mask=bottomright" + s,
      "op=sdpa docs=1500,600 hq=4 hkv=4 dim=32 window=200 precision=fp64" + s,
      // Few row blocks (sampled rows): each block's query heads are shared out in parts. One block: 4 parts of 2
      // heads at 1 thread, 8 of one at 2 and 3 threads; four blocks (the CP rank's segments): 1, 2, 3 parts.
      "op=sdpa docs=6000 q_pad=7 hq=8 hkv=2 dim=64 rows=40" + s,
      "op=sdpa docs=5000,900 cp=2 rank=1 hq=8 hkv=4 dim=32 rows=150 precision=fp64" + s,
  };
}

TEST(ReferencePerfInvariants, BitwiseIdenticalForAFixedThreadCount) {
  const uint64_t seed = fresh_seed();
  for (const auto& line : determinism_cases(seed)) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_inputs(l);
    const Outputs a = run_ref(l, in, 2), b = run_ref(l, in, 2);
    EXPECT_TRUE(bitwise_equal(a, b));
  }
}

TEST(ReferencePerfInvariants, WithinToleranceAcrossThreadCounts) {
  const uint64_t seed = fresh_seed();
  for (const auto& line : determinism_cases(seed)) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_inputs(l);
    const Outputs one = run_ref(l, in, 1);
    for (int t : {2, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(t));
      const Outputs many = run_ref(l, in, t);
      const Verdict v = compare(l, in, many, one);
      EXPECT_EQ(v.kind, Verdict::Pass) << v.reason;
      // Row blocks and their products do not depend on the thread count, so this is bitwise in fact;
      // the contract above is the tolerance, this records what the implementation gives.
      EXPECT_TRUE(bitwise_equal(one, many));
    }
  }
}

// The comparator must see a thread-count-dependent result as a failure, or the test above is empty.
TEST(ReferencePerfInvariants, AcrossThreadCheckCatchesAPerturbedResult) {
  const Layout l = make_layout(parse_case("op=indexer docs=4096,2048 cp=4 rank=1 heads=16 dim=64 topk=256 seed=5"));
  const Inputs in = make_inputs(l);
  const Outputs one = run_ref(l, in, 1);
  Outputs bad = run_ref(l, in, 2);
  const size_t K = size_t(l.c.topk);
  const int64_t r = l.check_rows[l.check_rows.size() / 2];
  std::swap(bad.topk[size_t(r) * K], bad.topk[size_t(r) * K + K - 1]);  // same set, other order: passes
  EXPECT_EQ(compare(l, in, bad, one).kind, Verdict::Pass);
  bad.topk[size_t(r) * K] = -1;  // a lost index: must fail
  EXPECT_EQ(compare(l, in, bad, one).kind, Verdict::Fail);
  EXPECT_FALSE(bitwise_equal(one, bad));
}

using test::ChildRun;
using test::run_cli_measured;
using test::split_words;

// Peak RSS of `repro <case> --backend cpu-ref` (inputs, two output sets, reference run twice,
// comparator). Allowed: the tensors the check holds, plus a fixed working set. A reference that held a
// score row per key for all checked rows (rows x keys x 4 B, 268 MB at 1024 rows x 65k keys) or the
// products of a row block over all keys (32 rows x 32 heads x 65k keys x 4 B = 268 MB) exceeds it.
void expect_linear_memory(const std::string& line) {
  SCOPED_TRACE(line);
  const Layout l = make_layout(parse_case(line));
  const size_t K = size_t(l.c.topk);
  const int64_t out_bytes = l.q_rows * int64_t(K) * 8;  // top-k indices + scores of one output set
  const int64_t held = l.tensor_bytes + out_bytes;      // inputs + backend outputs + reference outputs
  const int64_t allowed = held + (int64_t(160) << 20);
  auto args = split_words(line);
  args.insert(args.begin(), "repro");
  args.push_back("--backend");
  args.push_back("cpu-ref");
  const ChildRun r = run_cli_measured(args);
  ASSERT_EQ(r.rc, 0);
  ::testing::Test::RecordProperty("max_rss_mib", std::to_string(r.max_rss_bytes >> 20));
  std::printf("  %s: peak RSS %lld MiB (tensors held %lld MiB, allowed %lld MiB)\n", line.c_str(),
              (long long)(r.max_rss_bytes >> 20), (long long)(held >> 20), (long long)(allowed >> 20));
  EXPECT_LE(r.max_rss_bytes, allowed);
  EXPECT_LE(r.max_rss_bytes, int64_t(2) << 30);  // the bound for this case
}

// The seed's dims, 64 sampled rows (+ the boundary rows): full-size buffers, per-block working set.
TEST(ReferencePerfInvariants, MemoryOf131kSingleRankStaysLinear) {
  expect_linear_memory("op=indexer docs=131072 cp=32 rank=31 heads=32 dim=128 topk=2048 seed=7 rows=64");
}

// Small dims, 1024 checked rows x ~65k keys each: catches memory that grows with rows x keys.
TEST(ReferencePerfInvariants, MemoryOf131kSingleRankManyRowsStaysLinear) {
  expect_linear_memory("op=indexer docs=131072 cp=32 rank=31 heads=4 dim=32 topk=2048 seed=7 rows=1024");
}

}  // namespace
