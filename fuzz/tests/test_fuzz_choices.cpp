// Choice-based generation and shrinking: the choice sources (replay past the end, the libFuzzer
// source), every choice sequence gives a valid case, shrinking by choices reaches a small case with
// only valid candidates, and a found case file keeps its choice sequence beside its line.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>
#include <thread>

#if defined(AO_FDP_HEADER)
#include AO_FDP_HEADER
#endif

#include <fmt/format.h>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/choice_shrink.h"
#include "attn_oracle/internal/rng.h"
#include "cli_run.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

int64_t tokens(const Case& c) {
  int64_t t = 0;
  for (auto L : c.q_lens) t += L;
  for (auto L : c.kv_lens) t += L;
  return t;
}

GenOptions dims(DimsProfile d) {
  GenOptions o;
  o.dims = d;
  return o;
}

}  // namespace

TEST(FuzzChoices, ReplayPastTheEndAnswersTheSimplestValue) {
  ReplayChoices r({5, 1});
  EXPECT_EQ(r.integer(10, 20), 15);
  EXPECT_TRUE(r.chance(0.01));
  EXPECT_EQ(r.integer(10, 20), 10);  // past the end: lo
  EXPECT_FALSE(r.chance(0.99));      // past the end: the simplest outcome
  EXPECT_TRUE(r.chance(0.01, true));
  EXPECT_EQ(r.pick({7, 8, 9}), 7);
  EXPECT_EQ(r.pick({7, 8, 9}, 2), 9);       // the named simplest option
  EXPECT_EQ(r.integer(0, 9, 4), 4);
  EXPECT_EQ(r.integer(3, 3), 3);            // one outcome: nothing drawn
  EXPECT_EQ(r.values(), (Choices{5, 1, 0, 0, 0, 0, 0, 0}));
  ReplayChoices over({99});
  EXPECT_EQ(over.integer(0, 4), 4);  // above the range: clamped
  // The empty sequence and all zeros give the same (simplest) case; deleting choices is always valid.
  for (auto d : {DimsProfile::Small, DimsProfile::Glm, DimsProfile::Tiny, DimsProfile::Wide, DimsProfile::Deepseek}) {
    Choices eff;
    const Case c = replay_choices({}, dims(d), &eff);
    EXPECT_EQ(c, replay_choices(Choices(200, 0), dims(d)));
    EXPECT_TRUE(eff.empty());
    EXPECT_NO_THROW(make_layout(c));
  }
}

TEST(FuzzChoices, SimplestValueRotatesTheStoredValueNotTheDrawnOutcome) {
  // RandomChoices draws the same outcomes whichever value is named simplest; the stored value
  // replays to that outcome.
  for (uint64_t i = 0; i < 200; ++i) {
    RandomChoices a(7, i), b(7, i);
    const int64_t x = a.integer(-3, 9), y = b.integer(-3, 9, 4);
    EXPECT_EQ(x, y);
    const bool p = a.chance(0.3), q = b.chance(0.3, true);
    EXPECT_EQ(p, q);
    ReplayChoices r(b.values());
    EXPECT_EQ(r.integer(-3, 9, 4), y);
    EXPECT_EQ(r.chance(0.3, true), q);
  }
}

TEST(FuzzChoices, RecordedSequencesReplayToTheGeneratedCase) {
  for (auto d : {DimsProfile::Small, DimsProfile::Tiny, DimsProfile::Wide})
    for (uint64_t i = 0; i < 400; ++i) {
      const GeneratedCase g = generate_recorded(3, i, dims(d));
      EXPECT_EQ(print_case(g.c), print_case(generate_case(3, i, dims(d))));
      Choices eff;
      EXPECT_EQ(replay_choices(g.choices, dims(d), &eff), g.c) << print_case(g.c);
      EXPECT_EQ(eff, g.choices);
      EXPECT_EQ(canonical(g.choices), g.choices);
    }
}

// Any sequence (random lengths, values far above the ranges, runs of zeros) gives a valid,
// canonical case: what shrinking and the libFuzzer target rely on.
TEST(FuzzChoices, EverySequenceGivesAValidCase) {
  uint64_t st = 12345;
  auto rnd = [&] { return splitmix64(st++); };
  int n = 0;
  for (auto d : {DimsProfile::Small, DimsProfile::Tiny, DimsProfile::Glm, DimsProfile::Wide, DimsProfile::Deepseek})
    for (int k = 0; k < (d == DimsProfile::Small || d == DimsProfile::Tiny ? 2000 : 300); ++k) {
      Choices s(rnd() % 120);
      const uint64_t mode = rnd() % 4;
      for (auto& v : s) v = mode == 0 ? rnd() % 2 : mode == 1 ? rnd() % 8 : mode == 2 ? rnd() % 70000 : rnd();
      Case c;
      ASSERT_NO_THROW(c = replay_choices(s, dims(d))) << choices_text(s);
      ASSERT_NO_THROW(make_layout(c)) << print_case(c);
      ASSERT_EQ(parse_case(print_case(c)), c) << print_case(c);
      if (d == DimsProfile::Tiny) {
        EXPECT_LE(c.cp, 4);
      }
      ++n;
    }
  EXPECT_EQ(n, 4900);
}

#if defined(AO_FDP_HEADER)
TEST(FuzzChoices, FuzzedDataProviderSourceIsDeterministicAndEncodable) {
  uint64_t st = 99;
  for (int k = 0; k < 300; ++k) {
    std::vector<uint8_t> bytes(splitmix64(st++) % 200);
    for (auto& b : bytes) b = uint8_t(splitmix64(st++));
    auto gen = [&](const std::vector<uint8_t>& in) {
      FuzzedDataProvider p(in.data(), in.size());
      FdpChoices<FuzzedDataProvider> src(p);
      return std::make_pair(generate_case(src, dims(DimsProfile::Tiny)), src.record());
    };
    const auto [a, rec] = gen(bytes);
    EXPECT_EQ(a, gen(bytes).first);
    EXPECT_NO_THROW(make_layout(a));
    EXPECT_EQ(gen(fdp_bytes(rec)).first, a) << print_case(a);  // the encoder is the decoder's inverse
  }
  // An exhausted provider answers the simplest value: the empty input is the empty sequence.
  FuzzedDataProvider empty(nullptr, 0);
  FdpChoices<FuzzedDataProvider> src(empty);
  EXPECT_EQ(generate_case(src, dims(DimsProfile::Tiny)), replay_choices({}, dims(DimsProfile::Tiny)));
  // The campaign's cases, written as bytes, replay through the provider (how the corpus is made).
  for (uint64_t i = 0; i < 100; ++i) {
    RandomChoices rc(1, i);
    const Case c = generate_case(rc, dims(DimsProfile::Tiny));
    const auto bytes = fdp_bytes(rc.record());
    FuzzedDataProvider p(bytes.data(), bytes.size());
    FdpChoices<FuzzedDataProvider> fs(p);
    EXPECT_EQ(generate_case(fs, dims(DimsProfile::Tiny)), c) << print_case(c);
  }
}
#endif

// A synthetic predicate ("two or more documents, one of them at least 100 query tokens"): the
// choice shrinker reaches a small case, every candidate it runs is valid, and the result replays.
// Known limit: only lowering edits, so a case of the "one huge document, then tiny ones" or the
// long-row family whose other choices were zeroed first cannot move to the few-documents family (that
// needs larger values after the family choice): 3 of these 5 stay at their family's minimum (a
// long-row document of 4031 or 4097 tokens, the many-documents family's three documents).
TEST(FuzzChoices, ShrinkByChoicesReachesASmallCaseWithValidCandidates) {
  auto pred_of = [](int& calls, int& invalid) {
    return [&calls, &invalid](const Case& c) {
      ++calls;
      try {
        make_layout(c);
        if (!(parse_case(print_case(c)) == c)) ++invalid;
      } catch (const CaseError&) {
        ++invalid;
        return false;
      }
      bool big = false;
      for (auto L : c.q_lens) big |= L >= 100;
      return c.q_lens.size() >= 2 && big;
    };
  };
  int shrunk = 0, small = 0, two_docs = 0;
  for (uint64_t i = 0; i < 400 && shrunk < 5; ++i) {
    const GeneratedCase g = generate_recorded(21, i);
    int calls = 0, invalid = 0;
    const StillFails pred = pred_of(calls, invalid);
    if (!pred(g.c)) continue;
    ++shrunk;
    ShrinkOptions o;
    o.max_runs = 300;
    const ChoiceShrinkResult r = shrink_choices(g.choices, {}, pred, o);
    EXPECT_EQ(invalid, 0);
    EXPECT_LE(r.runs, 300);
    EXPECT_EQ(calls - 1, r.runs);
    EXPECT_TRUE(pred(r.minimal));
    EXPECT_EQ(replay_choices(r.choices, {}), r.minimal);
    EXPECT_FALSE(shortlex_less(g.choices, r.choices));
    EXPECT_LE(r.minimal.q_lens.size(), 3u) << print_case(g.c) << " -> " << print_case(r.minimal);
    two_docs += r.minimal.q_lens.size() == 2;
    small += tokens(r.minimal) <= 2 * (128 + 1);  // e.g. docs=127,1
    EXPECT_LE(tokens(r.minimal), tokens(g.c));
  }
  EXPECT_EQ(shrunk, 5);
  EXPECT_GE(small, 2);
  EXPECT_GE(two_docs, 4);
}

TEST(FuzzChoices, ShrinkByChoicesKeepsTheRunBudget) {
  const GeneratedCase g = generate_recorded(2, 6);
  int calls = 0;
  ShrinkOptions o;
  o.max_runs = 7;
  const ChoiceShrinkResult r = shrink_choices(g.choices, {}, [&](const Case&) { return ++calls, false; }, o);
  EXPECT_EQ(r.runs, 7);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(r.stop, ShrinkStop::RunBudget);
  EXPECT_EQ(r.minimal, g.c);
  EXPECT_EQ(r.choices, g.choices);
  // Always failing: the simplest case of all (the empty sequence) within a run or two.
  const ChoiceShrinkResult all = shrink_choices(g.choices, {}, [](const Case&) { return true; });
  EXPECT_TRUE(all.choices.empty());
  EXPECT_EQ(all.minimal, replay_choices({}));
  EXPECT_EQ(all.stop, ShrinkStop::Minimum);
}

// The deadline: no run starts after it; the smallest failing case so far is kept.
TEST(FuzzChoices, ShrinkByChoicesStopsAtTheDeadline) {
  // A pack of many documents: room for more than one shrink step before the minimum.
  uint64_t i = 0;
  while (generate_case(2, i).q_lens.size() < 5) ++i;
  const GeneratedCase g = generate_recorded(2, i);
  ShrinkOptions o;
  o.max_runs = 1000;
  o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  int calls = 0;
  Case last_failing = g.c;
  std::chrono::steady_clock::time_point last_start;
  const ChoiceShrinkResult r = shrink_choices(g.choices, {}, [&](const Case& c) {
    last_start = std::chrono::steady_clock::now();
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (calls % 2) last_failing = c;
    return calls % 2 == 1;  // every other candidate still fails
  }, o);
  EXPECT_EQ(r.stop, ShrinkStop::Deadline);
  EXPECT_EQ(r.runs, calls);
  EXPECT_GE(calls, 2);
  EXPECT_LT(last_start, o.deadline);
  EXPECT_EQ(r.minimal, last_failing);
  EXPECT_EQ(replay_choices(r.choices, {}), r.minimal);
}

TEST(FuzzChoices, ChoicesCommentRoundTripsAndRejectsGarbage) {
  RecordedChoices rc{dims(DimsProfile::Tiny), {3, 0, 17}};
  rc.gen.op = Op::Sdpa;
  const std::string line = choices_comment(rc);
  EXPECT_EQ(line, "# choices: dims=tiny op=sdpa 3 0 17");
  const auto back = parse_choices_comment(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->seq, rc.seq);
  EXPECT_EQ(back->gen.dims, DimsProfile::Tiny);
  EXPECT_EQ(back->gen.op, Op::Sdpa);
  EXPECT_FALSE(back->gen.pass);
  rc.gen.pass = Pass::Bwd;  // written only when set: lines without it read as the mix
  EXPECT_EQ(choices_comment(rc), "# choices: dims=tiny op=sdpa pass=bwd 3 0 17");
  EXPECT_EQ(parse_choices_comment(choices_comment(rc))->gen.pass, Pass::Bwd);
  EXPECT_FALSE(parse_choices_comment("# catches: cpu-ref"));
  for (const char* bad : {"# choices: dims=small op=any 1 -2", "# choices: 1 2", "# choices: dims=big op=any 1"}) {
    try {
      parse_choices_comment(bad);
      FAIL() << bad;
    } catch (const BadInput& e) {
      EXPECT_TRUE(e.key == "choices" || e.key == "dims") << e.key;
    }
  }
}

// The campaign finds and shrinks a bug model by choices and saves line + choices; the file reads
// back with both, the choices replay to the line, and the line alone still replays the failure.
TEST(FuzzChoices, CampaignSavesTheChoicesOfAFoundCase) {
  const fs::path dir = fs::temp_directory_path() / ("ao-test-choices-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CampaignOptions o;
  o.backend = "cpu-bug:cross-doc";
  o.seed = 1;
  o.budget = {0, 200};
  o.max_failures = 1;
  o.shrink_runs = 100;
  o.out_dir = dir.string();
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  ASSERT_EQ(s.unique.size(), 1u);
  const FoundCase& f = s.unique[0];
  EXPECT_GT(f.steps, 0);
  ASSERT_TRUE(f.choices);
  const Case& original = f.original;
  EXPECT_LT(tokens(f.shrunk), tokens(original));
  const auto entries = read_case_files({f.file});
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(entries[0].choices) << f.file;
  EXPECT_EQ(entries[0].choices->seq, *f.choices);
  EXPECT_EQ(replay_choices(entries[0].choices->seq, entries[0].choices->gen), f.shrunk);
  auto bug = make_backend(o.backend);
  auto ref = make_backend("cpu-ref");
  EXPECT_EQ(run_case(f.shrunk, *bug, *ref).verdict.kind, Verdict::Fail);
  // `attn-oracle shrink --choices` takes the file's sequence; a sequence of another case is bad input.
  const std::string seq = choices_comment(*entries[0].choices).substr(11);
  const auto ok = test::run_cli(fmt::format("shrink {} --backend {} --choices '{}' --runs 20", print_case(f.shrunk), o.backend, seq));
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("# choices: dims=small"), std::string::npos) << ok.out;
  const auto bad = test::run_cli(fmt::format("shrink op=sdpa docs=3 --backend {} --choices '{}'", o.backend, seq));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("choices"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

// A weighted pick draws by its weights under the PRNG (a zero weight never; 1:3 about 1:3 over 8000
// recorded draws of seed 5) and replays like a plain pick: the stored value names the option.
TEST(FuzzChoices, WeightedPicksFollowTheirWeightsAndReplayLikePicks) {
  std::array<int, 4> n{};
  for (uint64_t i = 0; i < 8000; ++i) {
    RandomChoices r(5, i);
    const int v = r.pick_weighted<int>({10, 11, 12, 13}, {1, 0, 3, 0}, 2);
    ++n[size_t(v - 10)];
    ReplayChoices replay(r.values());
    EXPECT_EQ(replay.pick<int>({10, 11, 12, 13}, 2), v);
    ReplayChoices replay_w(r.values());
    EXPECT_EQ(replay_w.pick_weighted<int>({10, 11, 12, 13}, {5, 5, 0, 0}, 2), v);  // weights ignored on replay
  }
  EXPECT_EQ(n[1] + n[3], 0);
  EXPECT_NEAR(double(n[2]) / double(n[0]), 3.0, 0.3);
  // integer_weighted: the same stored values as integer() with that simplest value.
  RandomChoices a(9, 1);
  const int64_t x = a.integer_weighted(4, 9, 6, {0, 0, 0, 0, 0, 1});
  EXPECT_EQ(x, 9);
  ReplayChoices b(a.values());
  EXPECT_EQ(b.integer(4, 9, 6), 9);
  // Weights that do not fit (wrong count, all zero) fall back to the uniform draw, never an error.
  RandomChoices c(9, 2);
  const int64_t y = c.integer_weighted(0, 3, 0, {0, 0, 0, 0});
  EXPECT_TRUE(y >= 0 && y <= 3);
}

// A scheduled decision takes turns over consecutive cases of a seed (every outcome within n + 1
// cases, each seed rotated), and replays like integer(0, n).
TEST(FuzzChoices, ScheduledDecisionsTakeTurnsAndReplay) {
  std::set<uint64_t> rotations;
  for (uint64_t seed : {1u, 2u, 3u, 77u}) {
    std::set<int64_t> seen;
    for (uint64_t i = 0; i < 7; ++i) {
      RandomChoices r(seed, i);
      const int64_t v = r.scheduled(6);
      seen.insert(v);
      if (i == 0) rotations.insert(uint64_t(v));
      ReplayChoices replay(r.values());
      EXPECT_EQ(replay.scheduled(6), v);
    }
    EXPECT_EQ(seen.size(), 7u) << "seed " << seed;
  }
  EXPECT_GT(rotations.size(), 1u);  // seeds start at different turns
  ReplayChoices empty({});
  EXPECT_EQ(empty.scheduled(6), 0);  // past the end: the plain outcome
}
