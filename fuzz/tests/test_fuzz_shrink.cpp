// The shrinker: reaches a known minimum under a synthetic predicate, keeps only valid candidates,
// respects CP divisibility and its run budget, and shrinks real bug-model failures deterministically.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/fuzz/shrink.h"

using namespace ao;

namespace {
int64_t max_len(const Case& c) {
  int64_t m = 0;
  for (auto L : c.q_lens) m = std::max(m, L);
  return m;
}
}  // namespace

TEST(FuzzShrink, ReachesTheMinimumOfASyntheticPredicate) {
  // "Fails" while some document has >= 100 tokens under CP: the minimum is one document, cp=2 and the
  // shortest length >= 100 reachable by removing multiples of 2*cp rows, everything else at defaults.
  const Case start = parse_case(
      "op=indexer docs=300,5,704,64 pad=4,11,0,0 cp=8 rank=5 heads=8 dim=32 topk=64 dtype=fp16 poison=inf seed=9");
  ASSERT_NO_THROW(make_layout(start));
  int calls = 0;
  auto pred = [&](const Case& c) {
    ++calls;
    EXPECT_TRUE(shrinkable_valid(c, {})) << print_case(c);
    return c.cp > 1 && max_len(c) >= 100;
  };
  ShrinkOptions o;
  o.max_runs = 500;
  const ShrinkResult r = shrink_case(start, pred, o);
  const Case& m = r.minimal;
  EXPECT_EQ(calls, r.runs);
  EXPECT_GT(r.steps, 5);
  EXPECT_EQ(m.q_lens.size(), 1u) << print_case(m);
  EXPECT_EQ(m.cp, 2) << print_case(m);
  EXPECT_LT(m.rank, m.cp);
  EXPECT_GE(max_len(m), 100);
  EXPECT_LT(max_len(m), 100 + 2 * 2 * 2) << print_case(m);  // within one halving step of the bound
  EXPECT_EQ(m.heads, 1);
  EXPECT_EQ(m.dim, 1);
  EXPECT_EQ(m.topk, 1);
  EXPECT_EQ(m.dtype, defaults_for(Op::Indexer).dtype);
  EXPECT_EQ(m.poison, defaults_for(Op::Indexer).poison);
  EXPECT_TRUE(pred(m));
}

// Every key the table marks KeyShrink::ToDefault gets one candidate with that key at its default
// (and nothing else changed) whenever it is not already there; the others get none from the table.
TEST(FuzzShrink, TriesTheDefaultOfEveryToDefaultKey) {
  const std::vector<std::string> lines = {
      "op=sdpa docs=64,32 cp=2 rank=1 cp_scheme=contiguous crop=1 mask=bottomright window=5 dtype=fp32 seed=3 "
      "poison=inf precision=fp64 scale=0.5 levels=4 pad_writes=allow tail=8",
      "op=sdpa docs=16,16 pad=2 o_offsets=0,18 stats_offsets=0,20 capacity=40",
      "op=indexer docs=64 ratio=2 mask=topleft seed=5 levels=8 poison=large",
      "op=sdpa docs=64,32 mask=bottomright window=-1 window_right=4 window_convention=fa max_seqlen_q=80 "
      "max_seqlen_kv=90 num_splits=3 empty_rows=posinf values=extreme",
      "op=indexer docs=64 start_pos=9 ties=strict values=plateau max_seqlen_kv=100",
      "op=sdpa pass=bwd docs=16,16 pad=2 grad_pad=zero",
      "op=indexer pass=bwd docs=64 topk=8 loss_mean=valid",
  };
  std::set<std::string> tried;
  for (const auto& line : lines) {
    const Case c = parse_case(line);
    ASSERT_NO_THROW(make_layout(c)) << line;
    const std::vector<Case> cands = shrink_candidates(c);
    const Case d = defaults_for(c.op);
    for (const auto& key : case_key_table()) {
      if (key.shrink != KeyShrink::ToDefault || !key_applies(key.ops, c.op)) continue;
      Case n = c;
      key.reset(n, d);
      if (n == c) continue;
      EXPECT_NE(std::find(cands.begin(), cands.end(), n), cands.end()) << key.name << " in " << line;
      EXPECT_EQ(print_case(n).find(std::string(" ") + key.name + "="), std::string::npos) << print_case(n);
      tried.insert(key.name);
    }
  }
  for (const auto& key : case_key_table())
    if (key.shrink == KeyShrink::ToDefault) {
      EXPECT_TRUE(tried.count(key.name)) << "no line sets " << key.name;
    }
}

TEST(FuzzShrink, CpCandidatesKeepPaddedLengthsDivisible) {
  const Case c = parse_case("op=indexer docs=96,48 cp=3 rank=2 topk=16");
  int valid = 0;
  for (const Case& cand : shrink_candidates(c)) {
    if (!shrinkable_valid(cand, {})) continue;
    ++valid;
    const Layout l = make_layout(cand);
    for (const auto& d : l.docs) {
      if (cand.cp > 1) {
        EXPECT_EQ(d.q_padded % (2 * cand.cp), 0) << print_case(cand);
      }
    }
    EXPECT_LT(cand.rank, cand.cp);
  }
  EXPECT_GT(valid, 5);
}

TEST(FuzzShrink, RespectsTheRunBudget) {
  const Case start = parse_case("op=indexer docs=304,8,704,64 cp=4 rank=1 heads=8 dim=32 topk=64");
  ASSERT_TRUE(shrinkable_valid(start, {}));
  ShrinkOptions o;
  o.max_runs = 4;
  const ShrinkResult r = shrink_case(start, [](const Case&) { return true; }, o);
  EXPECT_EQ(r.runs, 4);
  EXPECT_TRUE(r.budget_exhausted);
}

TEST(FuzzShrink, NothingIsKeptWhenNoCandidateFails) {
  const Case start = parse_case("op=sdpa docs=64,64 pad=3 hq=4 hkv=2");
  const ShrinkResult r = shrink_case(start, [](const Case&) { return false; });
  EXPECT_EQ(r.steps, 0);
  EXPECT_GT(r.runs, 5);
  EXPECT_EQ(r.minimal, start);
}

TEST(FuzzShrink, RealBugModelFailureShrinksDeterministicallyAndStillFails) {
  auto bug = make_backend("cpu-bug:topleft-cp");
  auto ref = make_backend("cpu-ref");
  const Case start = parse_case("op=indexer docs=2048,1024 cp=8 rank=5 heads=4 dim=32 topk=64 dtype=fp16 seed=5");
  const CaseResult orig = run_case(start, *bug, *ref);
  ASSERT_EQ(orig.verdict.kind, Verdict::Fail);
  ShrinkOptions o;
  o.max_runs = 150;
  const ShrinkResult a = shrink_case(start, fails_like(orig, *bug, *ref, {}), o);
  const ShrinkResult b = shrink_case(start, fails_like(orig, *bug, *ref, {}), o);
  EXPECT_EQ(print_case(a.minimal), print_case(b.minimal));
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_GT(a.steps, 0);
  EXPECT_EQ(a.minimal.q_lens.size(), 1u) << print_case(a.minimal);
  EXPECT_LT(a.minimal.q_lens[0], 1024) << print_case(a.minimal);
  const CaseResult fin = run_case(a.minimal, *bug, *ref);
  EXPECT_EQ(fin.verdict.kind, Verdict::Fail) << print_case(a.minimal);
  EXPECT_EQ(run_case(a.minimal, *ref, *ref).verdict.kind, Verdict::Pass);
  bool shared = false;
  for (const auto& m : failing_metrics(fin.verdict)) shared |= failing_metrics(orig.verdict).count(m) > 0;
  EXPECT_TRUE(shared);
}

TEST(FuzzShrink, TePaddedExampleKeepsItsOffsetBug) {
  auto bug = make_backend("cpu-bug:derived-offsets");
  auto ref = make_backend("cpu-ref");
  const Case start = parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=32");
  const CaseResult orig = run_case(start, *bug, *ref);
  ASSERT_EQ(orig.verdict.kind, Verdict::Fail);
  const ShrinkResult r = shrink_case(start, fails_like(orig, *bug, *ref, {}));
  EXPECT_EQ(run_case(r.minimal, *bug, *ref).verdict.kind, Verdict::Fail) << print_case(r.minimal);
  EXPECT_LT(make_layout(r.minimal).tensor_bytes, make_layout(start).tensor_bytes) << print_case(r.minimal);
  // The defect needs a sequence placed away from its packed prefix offset.
  const Layout l = make_layout(r.minimal);
  bool displaced = false;
  for (const auto& d : l.docs) displaced |= d.q_off != d.packed_q_off || d.kv_off != d.packed_kv_off;
  EXPECT_TRUE(displaced) << print_case(r.minimal);
}

TEST(FuzzShrink, StopsAtTheDeadlineKeepingTheSmallestFailingCase) {
  using clock = std::chrono::steady_clock;
  const Case start = parse_case("op=indexer docs=304,8,704,64 cp=4 rank=1 heads=8 dim=32 topk=64 seed=3");
  ShrinkOptions o;
  o.max_runs = 1000;
  // A deadline already passed: nothing runs, the input is the result.
  o.deadline = clock::now();
  int calls = 0;
  const ShrinkResult none = shrink_case(start, [&](const Case&) { return ++calls, true; }, o);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(none.runs, 0);
  EXPECT_EQ(none.stop, ShrinkStop::Deadline);
  EXPECT_FALSE(none.budget_exhausted);
  EXPECT_EQ(none.minimal, start);
  // Runs of 30 ms under a 100 ms deadline: it stops after a few, with the last accepted case, and no
  // run starts after the deadline (so it ends within the deadline plus one run).
  const auto t0 = clock::now();
  o.deadline = t0 + std::chrono::milliseconds(100);
  Case last_accepted = start;
  clock::time_point last_start{};
  const ShrinkResult r = shrink_case(start, [&](const Case& c) {
    last_start = clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    last_accepted = c;
    return true;
  }, o);
  const auto end = clock::now();
  EXPECT_EQ(r.stop, ShrinkStop::Deadline);
  EXPECT_GE(r.runs, 1);
  EXPECT_LE(r.runs, 4);
  EXPECT_EQ(r.steps, r.runs);
  EXPECT_EQ(r.minimal, last_accepted);
  EXPECT_NE(r.minimal, start);
  EXPECT_TRUE(shrinkable_valid(r.minimal, {}));
  EXPECT_LT(last_start, o.deadline);
  EXPECT_LT(end - last_start, std::chrono::milliseconds(30 + 200));
  EXPECT_STREQ(shrink_stop_note(r.stop), ", stopped at the deadline");
}

TEST(FuzzShrink, RealBugModelShrinkEndsWithinDeadlinePlusOneRun) {
  using clock = std::chrono::steady_clock;
  auto bug = make_backend("cpu-bug:topleft-cp");
  auto ref = make_backend("cpu-ref");
  // GLM dims; every run also waits 20 ms (a slow kernel's pace), so the unbounded shrink, dozens of runs,
  // cannot reach its minimum before the deadline on any machine (an idle AVX-512 core did, in 100 ms).
  const Case start = parse_case("op=indexer docs=128,128,4096 cp=32 rank=12 heads=32 dim=128 topk=2048 dtype=fp16 seed=132811");
  const CaseResult orig = run_case(start, *bug, *ref);
  ASSERT_EQ(orig.verdict.kind, Verdict::Fail);
  CaseResult last = orig;
  const StillFails inner = fails_like(orig, *bug, *ref, {}, &last);
  double longest_run = 0;
  const StillFails timed = [&](const Case& c) {
    const auto t = clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const bool f = inner(c);
    longest_run = std::max(longest_run, std::chrono::duration<double>(clock::now() - t).count());
    return f;
  };
  ShrinkOptions o;
  const auto t0 = clock::now();
  o.deadline = t0 + std::chrono::milliseconds(100);
  const ShrinkResult r = shrink_case(start, timed, o);
  const double took = std::chrono::duration<double>(clock::now() - t0).count();
  EXPECT_EQ(r.stop, ShrinkStop::Deadline);
  EXPECT_LE(took, 0.1 + longest_run + 0.25) << "longest run " << longest_run;
  // The kept case still fails, and `last` holds its result (no re-run needed).
  EXPECT_EQ(last.case_line, print_case(r.minimal));
  EXPECT_EQ(last.verdict.kind, Verdict::Fail);
  EXPECT_EQ(run_case(r.minimal, *bug, *ref).verdict.kind, Verdict::Fail);
}

TEST(FuzzShrink, StopsOnInterruptAndDropsTheInterruptedRun) {
  install_interrupt_handlers();
  const Case start = parse_case("op=indexer docs=304,8,704,64 cp=4 rank=1 heads=8 dim=32 topk=64 seed=3");
  int calls = 0;
  Case accepted = start;
  const ShrinkResult r = shrink_case(start, [&](const Case& c) {
    if (++calls == 3) {
      raise(SIGINT);  // arrives during the third run: its answer does not count
      return true;
    }
    accepted = c;
    return true;
  });
  EXPECT_EQ(interrupted(), SIGINT);
  EXPECT_EQ(r.stop, ShrinkStop::Interrupted);
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(r.minimal, accepted);
  // Still interrupted: nothing more runs.
  const ShrinkResult again = shrink_case(start, [&](const Case&) { return ++calls, true; });
  EXPECT_EQ(again.runs, 0);
  EXPECT_EQ(again.stop, ShrinkStop::Interrupted);
  reset_interrupt();
  signal(SIGINT, SIG_DFL);
}
