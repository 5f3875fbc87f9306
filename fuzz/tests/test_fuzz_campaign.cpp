// Fuzz campaigns: a bug model is found, shrunk and saved as a replayable, deduplicated case file;
// the exact reference finds nothing; shards split a campaign deterministically; the CLI's exit codes.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/internal/atomic_file.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/pipeline/trial.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

using test::Cmd;
using test::run_cli;
using test::run_sh;

// Every file in dir: *.case files must be valid found cases; anything else is a leftover.
void expect_only_valid_case_files(const fs::path& dir, size_t* count = nullptr) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension(), ".case") << "leftover: " << e.path();
    EXPECT_TRUE(valid_found_file(e.path().string())) << e.path() << ":\n" << slurp(e.path());
    ++n;
  }
  if (count) *count = n;
}

// A backward campaign whose first draws include a weak case (SDPA, 16-bit, values=extreme: dQ).
constexpr uint64_t kWeakSeed = 1;
constexpr uint64_t kWeakCases = 40;

CampaignOptions one_failure(const fs::path& dir) {
  CampaignOptions o;
  o.backend = "cpu-bug:topleft-cp";
  o.seed = 1;
  o.budget = {0, 400};
  o.max_failures = 1;
  o.shrink_runs = 40;
  o.out_dir = dir.string();
  return o;
}

}  // namespace

TEST(FuzzCampaign, FindsShrinksAndSavesABugModelFailure) {
  const fs::path dir = fresh_dir("campaign");
  CampaignOptions o;
  o.backend = "cpu-bug:topleft-cp";
  o.seed = 1;
  o.budget = {0, 400};
  o.max_failures = 1;
  o.shrink_runs = 100;
  o.out_dir = dir.string();
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  ASSERT_EQ(s.verdicts.bad(), 1);
  EXPECT_EQ(campaign_exit_code(s), 1);
  ASSERT_EQ(s.unique.size(), 1u);
  const FoundCase& f = s.unique[0];
  EXPECT_GT(s.first_failure_case, 0);
  EXPECT_FALSE(f.already_known);
  ASSERT_TRUE(fs::exists(f.file));
  EXPECT_EQ(fs::path(f.file).filename().string(), case_hash(print_case(f.shrunk)) + ".case");
  // The file: comments with the original line, backend and metrics, then exactly one case line.
  std::ifstream in(f.file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("# original: " + print_case(f.original)), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("cpu-bug:topleft-cp"), std::string::npos);
  EXPECT_NE(text.str().find("failing: "), std::string::npos);
  const auto entries = read_case_files({f.file});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].c, f.shrunk);
  // It replays: still fails with the bug, passes the exact reference.
  auto bug = make_backend(o.backend);
  auto ref = make_backend("cpu-ref");
  EXPECT_EQ(run_case(entries[0].c, *bug, *ref).verdict.kind, Verdict::Fail);
  EXPECT_EQ(run_case(entries[0].c, *ref, *ref).verdict.kind, Verdict::Pass);
  EXPECT_LE(print_case(f.shrunk).size(), print_case(f.original).size());
  // Running the same campaign again finds the same case and does not rewrite it.
  const CampaignSummary again = run_campaign(o, err);
  ASSERT_EQ(again.unique.size(), 1u);
  EXPECT_EQ(again.unique[0].shrunk, f.shrunk);
  EXPECT_TRUE(again.unique[0].already_known);
  EXPECT_NE(format_summary(o, again).find("known:"), std::string::npos);
  fs::remove_all(dir);
}

namespace {
// A backend that loses its process's device context at its n-th run, the way an in-process GPU library
// does after an illegal instruction: that run is an error, and from then on it is unavailable (every
// later CUDA call would fail). Runs after the loss are counted: the campaign must make none.
class LosesItsContext : public Backend {
 public:
  LosesItsContext(const std::string& spec, int lose_at_run) : inner_(make_backend(spec)), lose_at_(lose_at_run) {}
  std::string name() const override { return "loses-context"; }
  std::string unavailable_reason() const override {
    return lost_ ? "the device context of this process was lost (illegal instruction)" : "";
  }
  std::string declines(const Layout& l) const override { return inner_->declines(l); }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    if (lost_) {
      ++runs_after_loss;
      return {RunStatus::Error, "illegal instruction (a later call of a lost context)", 0};
    }
    if (++runs == lose_at_) {
      lost_ = true;
      return {RunStatus::Error, "illegal instruction", 0};
    }
    return inner_->run(l, in, out);
  }
  int runs = 0, runs_after_loss = 0;

 private:
  std::unique_ptr<Backend> inner_;
  int lose_at_;
  bool lost_ = false;
};

size_t case_files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".case" ? 1 : 0;
  return n;
}
}  // namespace

TEST(FuzzCampaign, ABackendLostMidCampaignEndsItAtThatCaseAndKeepsNothingShrunk) {
  const fs::path dir = fresh_dir("campaign-lost");
  CampaignOptions o = one_failure(dir);
  o.backend = "loses-context";
  o.budget = {0, 60};
  auto b = std::make_shared<LosesItsContext>("cpu-ref", 7);
  o.backend_object = b;
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  // The seventh run is the case that saw the loss: counted as an error, not shrunk, not saved, named.
  EXPECT_EQ(b->runs, 7);
  EXPECT_EQ(b->runs_after_loss, 0);
  EXPECT_EQ(s.verdicts.bad(), 1);
  EXPECT_TRUE(s.unique.empty());
  EXPECT_EQ(case_files_in(dir), 0u);
  EXPECT_LT(s.cases, 60u);
  ASSERT_EQ(s.failing_indices.size(), 1u);
  EXPECT_EQ(s.backend_lost.rfind(fmt::format("at case #{} (", s.failing_indices[0]), 0), 0u) << s.backend_lost;
  EXPECT_NE(s.backend_lost.find("illegal instruction"), std::string::npos);
  EXPECT_EQ(campaign_exit_code(s), 1);
  const std::string text = format_summary(o, s);
  EXPECT_NE(text.find("BACKEND LOST at case #"), std::string::npos) << text;
  EXPECT_NE(text.find("backend_lost=1"), std::string::npos) << text;

  // Lost while a real failure is being confirmed: the runs before the loss found it, but what the
  // shrinker would keep after it is noise, so nothing is kept. First, how many runs reach the failure.
  CampaignOptions probe = one_failure(dir);
  probe.confirm_runs = 0;
  probe.shrink_runs = 0;
  probe.out_dir.clear();
  auto counter = std::make_shared<LosesItsContext>("cpu-bug:topleft-cp", 0);
  probe.backend = "loses-context";
  probe.backend_object = counter;
  const CampaignSummary first = run_campaign(probe, err);
  ASSERT_EQ(first.verdicts.bad(), 1) << format_summary(probe, first);
  EXPECT_TRUE(first.backend_lost.empty());
  EXPECT_NE(format_summary(probe, first).find("backend_lost=0"), std::string::npos);
  CampaignOptions mid = one_failure(dir);
  mid.backend = "loses-context";
  auto late = std::make_shared<LosesItsContext>("cpu-bug:topleft-cp", counter->runs + 2);
  mid.backend_object = late;
  const CampaignSummary m = run_campaign(mid, err);
  EXPECT_EQ(late->runs_after_loss, 0);
  EXPECT_TRUE(m.unique.empty());
  EXPECT_EQ(case_files_in(dir), 0u);
  EXPECT_EQ(m.backend_lost.rfind("while confirming or shrinking case #", 0), 0u) << m.backend_lost;
  EXPECT_EQ(campaign_exit_code(m), 1);
  fs::remove_all(dir);
}

TEST(FuzzCampaign, ExactReferenceFindsNothing) {
  CampaignOptions o;
  o.backend = "cpu-ref";
  o.budget = {0, 150};
  o.seed = 42;
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  EXPECT_EQ(s.cases, 150u);
  EXPECT_EQ(s.verdicts.bad(), 0) << format_summary(o, s);
  EXPECT_EQ(s.invalid, 0u);
  EXPECT_EQ(s.verdicts[Verdict::Pass], 150);
  EXPECT_EQ(campaign_exit_code(s), 0);
  EXPECT_TRUE(err.str().empty());  // no progress line unless asked (terminal only)
}

// The fuzzer prefers cases whose gates discriminate: a weak draw is replaced by the same case number's
// draw from the next stream, at most kWeakRedraws times (the last draw is kept), weak() seeing every draw.
TEST(FuzzCampaign, AWeakDrawIsRedrawnAtMostTwice) {
  GenOptions gen;
  const GeneratedCase first = generate_recorded(7, 3, gen);
  int calls = 0, redraws = -1;
  const GeneratedCase a = generate_discriminating(7, 3, gen, [&](const Case&) { return ++calls, false; }, &redraws);
  EXPECT_EQ(print_case(a.c), print_case(first.c));
  EXPECT_EQ(redraws, 0);
  EXPECT_EQ(calls, 1);
  calls = 0;
  const GeneratedCase b = generate_discriminating(7, 3, gen, [&](const Case&) { return ++calls, true; }, &redraws);
  EXPECT_EQ(redraws, kWeakRedraws);
  EXPECT_EQ(calls, kWeakRedraws + 1);
  EXPECT_EQ(print_case(b.c), print_case(generate_recorded(redraw_seed(7, kWeakRedraws), 3, gen).c));
  const GeneratedCase c = generate_discriminating(
      7, 3, gen, [&](const Case& x) { return print_case(x) == print_case(first.c); }, &redraws);
  EXPECT_EQ(redraws, 1);
  EXPECT_NE(print_case(c.c), print_case(first.c));
  EXPECT_EQ(print_case(replay_choices(c.choices, gen)), print_case(c.c));  // the shrinker replays it
}

// In a campaign: the first draws of the case numbers whose gates have a weak output (judged here, apart)
// are redrawn, the summary counts them, and fewer weak cases run than were drawn.
TEST(FuzzCampaign, PrefersCasesWhoseGatesDiscriminate) {
  CampaignOptions o;
  o.backend = "cpu-ref";
  o.gen.op = Op::Sdpa;
  o.gen.pass = Pass::Bwd;
  o.seed = kWeakSeed;
  o.budget = {0, kWeakCases};
  int weak_first = 0;
  for (uint64_t i = 0; i < kWeakCases; ++i) {
    Trial t(generate_case(o.seed, i, o.gen));
    const auto* checks = t.gate_checks();
    ASSERT_NE(checks, nullptr);
    weak_first += std::any_of(checks->begin(), checks->end(), [](const GateCheck& g) { return g.weak(); });
  }
  ASSERT_GT(weak_first, 0) << "the seed must draw a weak case";
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  EXPECT_EQ(s.cases, kWeakCases);
  EXPECT_GE(s.weak_redrawn, uint64_t(weak_first)) << format_summary(o, s);
  EXPECT_LT(s.verdicts.weak(), weak_first) << format_summary(o, s);
  EXPECT_EQ(s.verdicts.bad(), 0) << format_summary(o, s);
  const std::string text = format_summary(o, s);
  EXPECT_NE(text.find(fmt::format("{} drawn case(s) redrawn for a weak gate", s.weak_redrawn)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("weak_redrawn={}", s.weak_redrawn)), std::string::npos) << text;
}

TEST(FuzzCampaign, ShardsPartitionTheCaseNumbers) {
  // A predicate-free check through the bug model: the failing case numbers of 0/1 over 40 cases
  // are exactly the union of those of shards 0/2 and 1/2 over 20 cases each.
  auto originals = [](int shard, int shards, uint64_t cases) {
    CampaignOptions o;
    o.backend = "cpu-bug:cross-doc";
    o.budget = {0, cases};
    o.shard = shard;
    o.shards = shards;
    o.shrink_runs = 0;
    std::ostringstream err;
    std::set<std::string> lines;
    for (uint64_t i : run_campaign(o, err).failing_indices)
      lines.insert(std::to_string(i) + " " + print_case(generate_case(o.seed, i, o.gen)));
    return lines;
  };
  const auto all = originals(0, 1, 40);
  auto a = originals(0, 2, 20), b = originals(1, 2, 20);
  for (const auto& x : a) EXPECT_EQ(std::stoull(x) % 2, 0u);
  for (const auto& x : b) EXPECT_EQ(std::stoull(x) % 2, 1u);
  a.insert(b.begin(), b.end());
  EXPECT_FALSE(all.empty());
  EXPECT_EQ(a, all);
}

TEST(FuzzCampaign, BudgetAndShardParsing) {
  EXPECT_EQ(parse_budget("60s").seconds, 60);
  EXPECT_EQ(parse_budget("5m").seconds, 300);
  EXPECT_EQ(parse_budget("250").cases, 250u);
  EXPECT_THROW(parse_budget("soon"), BadInput);
  EXPECT_THROW(parse_budget("0"), BadInput);
  EXPECT_EQ(parse_shard("2/5"), std::make_pair(2, 5));
  for (const char* bad : {"5/5", "1", "a/b", "-1/3", "1/0"}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << bad;
    } catch (const BadInput& e) {
      EXPECT_EQ(e.key, "shard");
    }
  }
}

TEST(FuzzCampaign, CliExitCodesAndSummary) {
  const fs::path dir = fresh_dir("cli-fuzz");
  auto ok = run_cli("fuzz --backend cpu-ref --budget 20 --seed 3 --out " + dir.string());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("fuzz-result cases=20 failed=0"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find('\r'), std::string::npos);  // not a terminal: no progress line
  auto bad = run_cli("fuzz --backend cpu-bug:off-by-one-causal --budget 50 --max-failures 1 --shrink-runs 40 --out " +
                     dir.string());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("wrote: " + dir.string()), std::string::npos) << bad.out;
  EXPECT_EQ(run_cli("fuzz --backend cpu-ref --budget soon").code, 2);
  auto shard = run_cli("fuzz --backend cpu-ref --budget 5 --shard 3/3");
  EXPECT_EQ(shard.code, 2);
  EXPECT_NE(shard.out.find("shard"), std::string::npos);
  EXPECT_EQ(run_cli("fuzz --backend no-such-backend --budget 5").code, 2);
  fs::remove_all(dir);
}

TEST(FuzzCampaign, AnEmptyOrUnparsableFoundFileIsNotKnownAndIsRewrittenByRename) {
  const fs::path dir = fresh_dir("resave");
  const CampaignOptions o = one_failure(dir);
  std::ostringstream err;
  const CampaignSummary first = run_campaign(o, err);
  ASSERT_EQ(first.unique.size(), 1u);
  const fs::path file = first.unique[0].file;
  const std::string good = slurp(file);
  ASSERT_TRUE(valid_found_file(file.string()));
  EXPECT_NE(good.find("# signature: " + first.unique[0].signature + "\n"), std::string::npos) << good;
  // What a crash in the middle of the old in-place write left: an empty file, or a cut one.
  const std::string comments = good.substr(0, good.rfind("op="));
  for (const std::string& broken : {std::string(), comments, comments + "op=ind"}) {
    { std::ofstream(file, std::ios::trunc) << broken; }
    EXPECT_FALSE(valid_found_file(file.string()));
    const fs::path link = dir / "hardlink-to-broken";
    fs::remove(link);
    fs::create_hard_link(file, link);
    const CampaignSummary again = run_campaign(o, err);
    ASSERT_EQ(again.unique.size(), 1u);
    EXPECT_FALSE(again.unique[0].already_known);
    EXPECT_TRUE(again.unique[0].resaved);
    EXPECT_NE(format_summary(o, again).find("rewrote (was empty or unparsable): " + file.string()), std::string::npos);
    EXPECT_EQ(again.unique[0].file, file.string());
    EXPECT_TRUE(valid_found_file(file.string()));
    EXPECT_EQ(slurp(file), good);
    // Replaced by a rename, not rewritten in place: the old inode still holds the broken text.
    EXPECT_EQ(slurp(link), broken);
    fs::remove(link);
  }
  size_t n = 0;
  expect_only_valid_case_files(dir, &n);
  EXPECT_EQ(n, 1u);
  // A valid file is known and left alone.
  const CampaignSummary third = run_campaign(o, err);
  ASSERT_EQ(third.unique.size(), 1u);
  EXPECT_TRUE(third.unique[0].already_known);
  EXPECT_FALSE(third.unique[0].resaved);
  fs::remove_all(dir);
}

TEST(FuzzCampaign, WriteFileAtomicallyLeavesNoTemporaryAndNamesTheFailure) {
  const fs::path dir = fresh_dir("atomic");
  const fs::path f = dir / "x.case";
  { std::ofstream(f) << "old\n"; }
  fs::create_hard_link(f, dir / "old-inode");
  write_file_atomically(f.string(), "op=indexer docs=4\n");
  EXPECT_EQ(slurp(f), "op=indexer docs=4\n");
  EXPECT_EQ(slurp(dir / "old-inode"), "old\n");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2u);
  try {
    write_file_atomically((dir / "no-such-dir" / "y.case").string(), "x\n");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(FuzzCampaign, FailureSignatureIsStructureAndMetricNamesNotValues) {
  auto fail = [](std::vector<std::pair<std::string, double>> ms) {
    Verdict v;
    v.kind = Verdict::Fail;
    for (auto& [n, x] : ms) {
      Metric m;
      m.name = n;
      m.value = x;
      m.failed = true;
      v.metrics.push_back(m);
    }
    return v;
  };
  const Verdict v1 = fail({{"out_of_causal", 1}, {"tie_aware_recall_min", 0.5}});
  const Verdict v2 = fail({{"tie_aware_recall_min", 0}, {"out_of_causal", 7}});
  auto sig = [](const std::string& line, const Verdict& v, const std::string& be = "cpu-bug:x") {
    return failure_signature(be, make_layout(parse_case(line)), v);
  };
  const std::string base = sig("op=indexer docs=4 heads=1 dim=1 topk=1", v1);
  EXPECT_NE(base.find("out_of_causal,tie_aware_recall_min"), std::string::npos) << base;
  // Same: other lengths, values, seeds, dims, 16-bit dtypes, 3 or more documents.
  EXPECT_EQ(base, sig("op=indexer docs=9 heads=4 dim=8 topk=3 seed=77", v2));
  EXPECT_EQ(sig("op=indexer docs=4 dtype=fp16", v1), sig("op=indexer docs=40 dtype=bf16", v1));
  EXPECT_EQ(sig("op=indexer docs=4,4,4", v1), sig("op=indexer docs=1,2,3,4,5", v1));
  // Different: backend, metric names, error, op, mask, window, cp, documents 1/2, padding, f32.
  for (const auto& other :
       {sig("op=indexer docs=4", v1, "cpu-bug:y"), sig("op=indexer docs=4", fail({{"out_of_causal", 1}})),
        failure_signature("cpu-bug:x", make_layout(parse_case("op=indexer docs=4")), error_verdict("boom")),
        sig("op=sdpa lens=4", v1), sig("op=indexer docs=4 mask=none", v1), sig("op=sdpa lens=4 window=2", v1),
        sig("op=indexer docs=4 cp=2", v1), sig("op=indexer docs=4,4", v1), sig("op=indexer docs=4 pad=1", v1),
        sig("op=indexer docs=4 tail=3", v1), sig("op=indexer docs=4 dtype=fp32", v1)}) {
    EXPECT_NE(other, base);
  }
  EXPECT_NE(sig("op=sdpa lens=4", v1), sig("op=sdpa lens=4 window=2", v1));
  EXPECT_NE(sig("op=indexer docs=4 cp=2", v1), sig("op=indexer docs=3 pad=1 cp=2", v1));  // CP chunk padding
  // Size order: tokens, then documents, then line length.
  EXPECT_TRUE(smaller_case(parse_case("op=indexer docs=2,2 seed=123456"), parse_case("op=indexer docs=5")));
  EXPECT_TRUE(smaller_case(parse_case("op=indexer docs=4"), parse_case("op=indexer docs=2,2")));
  EXPECT_TRUE(smaller_case(parse_case("op=indexer docs=4"), parse_case("op=indexer docs=4 seed=99")));
  EXPECT_FALSE(smaller_case(parse_case("op=indexer docs=4"), parse_case("op=indexer docs=4")));
}

TEST(FuzzCampaign, OneSmallestFilePerFailureSignatureAlsoAcrossRuns) {
  const fs::path dir = fresh_dir("signature");
  CampaignOptions o;
  o.backend = "cpu-bug:off-by-one-causal";
  o.seed = 5;
  o.budget = {0, 14};
  o.shrink_runs = 40;
  o.out_dir = dir.string();
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  ASSERT_GT(s.verdicts.bad(), 4) << format_summary(o, s);
  std::set<std::string> sigs;
  uint64_t merged = 0;
  for (const auto& f : s.unique) {
    EXPECT_TRUE(sigs.insert(f.signature).second) << f.signature;
    EXPECT_FALSE(f.already_known);
    EXPECT_NE(slurp(f.file).find("# signature: " + f.signature + "\n"), std::string::npos);
    merged += f.merged;
  }
  EXPECT_EQ(int64_t(merged + s.unique.size()), s.verdicts.bad());  // every failure is kept or merged into a kept one
  EXPECT_LT(int64_t(s.unique.size()), s.verdicts.bad()) << format_summary(o, s);
  EXPECT_LE(s.unique.size(), 5u) << format_summary(o, s);
  size_t files = 0;
  expect_only_valid_case_files(dir, &files);
  EXPECT_EQ(files, s.unique.size());
  const std::string summary = format_summary(o, s);
  EXPECT_NE(summary.find(fmt::format("unique={} merged={} merged_per_case=", s.unique.size(), merged)),
            std::string::npos) << summary;
  // The files already there: a second campaign (other seed, same bug) adds files only for new
  // signatures, and counts the rest as known.
  o.seed = 6;
  const CampaignSummary again = run_campaign(o, err);
  size_t known = 0, written = 0;
  for (const auto& f : again.unique) {
    (f.already_known ? known : written) += 1;
    if (f.already_known) EXPECT_TRUE(sigs.count(f.signature)) << f.signature;
    else EXPECT_FALSE(sigs.count(f.signature)) << f.signature;
  }
  EXPECT_GT(known, 0u) << format_summary(o, again);
  expect_only_valid_case_files(dir, &files);
  EXPECT_EQ(files, s.unique.size() + written);
  fs::remove_all(dir);
}

TEST(FuzzCampaign, TimeBudgetBoundsTheShrinker) {
  // GLM dims: the first failure is case #0 of seed 3 (found in ~0.05 s). The structural shrinker took
  // ~100 runs on it and always hit the 0.1 s deadline; the choice shrinker needs ~7 runs and may
  // finish first (its deadline stop is tested in FuzzChoices.ShrinkByChoicesStopsAtTheDeadline).
  // Either way the campaign ends within the budget plus its longest single run and saves the
  // smallest failing case so far, saying so when the deadline stopped it.
  const fs::path dir = fresh_dir("deadline");
  CampaignOptions o;
  o.backend = "cpu-bug:topleft-cp";
  o.seed = 3;
  o.budget = {0.1, 0};
  o.gen.dims = DimsProfile::Glm;
  o.shrink_runs = 1000;
  o.out_dir = dir.string();
  std::ostringstream err;
  const auto t0 = std::chrono::steady_clock::now();
  const CampaignSummary s = run_campaign(o, err);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string summary = format_summary(o, s);
  ASSERT_GE(s.unique.size(), 1u) << summary;
  const FoundCase& f = s.unique[0];
  const bool deadline = f.shrink_stop == ShrinkStop::Deadline;
  EXPECT_TRUE(deadline || f.shrink_stop == ShrinkStop::Minimum) << summary;
  EXPECT_EQ(summary.find("stopped at the deadline") != std::string::npos, deadline) << summary;
  EXPECT_GT(s.longest_run_seconds, 0);
  EXPECT_LE(took, o.budget.seconds + s.longest_run_seconds + 0.5) << summary;
  EXPECT_NE(summary.find(fmt::format("longest_run_seconds={:.3f}", s.longest_run_seconds)), std::string::npos);
  // Saved anyway, saying so; the saved case fails.
  ASSERT_TRUE(valid_found_file(f.file));
  EXPECT_EQ(slurp(f.file).find("stopped at the deadline") != std::string::npos, deadline) << slurp(f.file);
  auto bug = make_backend(o.backend);
  auto ref = make_backend(o.vs);
  EXPECT_EQ(run_case(read_case_files({f.file})[0].c, *bug, *ref).verdict.kind, Verdict::Fail);
  fs::remove_all(dir);
}

namespace {

// An exec: backend that fails every case after `body` (a slow kernel: each run takes its time, so a
// shrink is cut by the deadline or a stop request part-way, after some steps and before its minimum).
std::string failing_exec(const fs::path& dir, const std::string& body) {
  std::ofstream(dir / "slow.sh") << body << "\nexit 1\n";
  return "exec:/bin/sh " + (dir / "slow.sh").string();
}

// The found file of a campaign that ended while shrinking: one file, holding the smallest case the
// shrinker saw fail (smaller than the generated one), that still fails, and saying why it stopped.
void expect_kept_mid_shrink(const CampaignOptions& o, const CampaignSummary& s, ShrinkStop stop, const char* note) {
  const std::string summary = format_summary(o, s);
  ASSERT_EQ(s.unique.size(), 1u) << summary;
  const FoundCase& f = s.unique[0];
  EXPECT_EQ(f.shrink_stop, stop) << summary;
  EXPECT_GE(f.steps, 1) << summary;
  EXPECT_TRUE(smaller_case(f.shrunk, f.original)) << summary;
  EXPECT_FALSE(f.nondeterministic()) << summary;
  ASSERT_TRUE(valid_found_file(f.file)) << summary;
  const std::string text = slurp(f.file);
  EXPECT_NE(text.find(note), std::string::npos) << text;
  const auto saved = read_case_files({f.file});
  ASSERT_EQ(saved.size(), 1u) << text;
  EXPECT_EQ(print_case(saved[0].c), print_case(f.shrunk)) << text;
  EXPECT_NE(print_case(saved[0].c), print_case(f.original)) << text;
  auto bug = make_backend(o.backend);
  auto ref = make_backend(o.vs);
  EXPECT_EQ(run_case(saved[0].c, *bug, *ref).verdict.kind, Verdict::Error) << text;
}

}  // namespace

TEST(FuzzCampaign, ADeadlineMidShrinkSavesTheSmallestFailingCaseSoFar) {
  // Runs of 0.3 s and a 0.7 s budget: case #0 (4 documents under CP) fails at 0.3 s; its shrink, 3 runs
  // to the minimum when nothing cuts it, starts at most 2 runs before the deadline stops it.
  const fs::path dir = fresh_dir("deadline-mid-shrink");
  CampaignOptions o;
  o.backend = failing_exec(dir, "sleep 0.3");
  o.seed = 5;
  o.budget = {0.7, 0};
  o.confirm_runs = 0;
  o.shrink_runs = 1000;
  o.out_dir = (dir / "found").string();
  ASSERT_GE(generate_case(o.seed, 0, o.gen).q_lens.size(), 3u) << print_case(generate_case(o.seed, 0, o.gen));
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  EXPECT_EQ(s.cases, 1u) << format_summary(o, s);
  expect_kept_mid_shrink(o, s, ShrinkStop::Deadline, "stopped at the deadline");
  fs::remove_all(dir);
}

TEST(FuzzCampaign, AStopRequestMidShrinkSavesTheSmallestFailingCaseSoFar) {
  // The backend's 4th run (the shrinker's 3rd) sends SIGINT to this process before it fails: that run
  // proves nothing, the two steps before it are kept, the campaign saves that case and ends.
  install_interrupt_handlers();
  const fs::path dir = fresh_dir("stop-mid-shrink");
  CampaignOptions o;
  o.backend = failing_exec(dir, fmt::format("n=$(cat {0}/runs 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {0}/runs\n"
                                            "[ $n -eq 4 ] && kill -INT {1} && sleep 0.5",
                                            dir.string(), getpid()));
  o.seed = 5;
  o.budget = {0, 100};
  o.confirm_runs = 0;
  o.shrink_runs = 1000;
  o.out_dir = (dir / "found").string();
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  const int sig = interrupted();
  reset_interrupt();
  signal(SIGINT, SIG_DFL);
  EXPECT_EQ(sig, SIGINT);
  EXPECT_EQ(s.interrupted, SIGINT) << format_summary(o, s);
  EXPECT_EQ(s.cases, 1u) << format_summary(o, s);
  ASSERT_EQ(s.unique.size(), 1u) << format_summary(o, s);
  EXPECT_EQ(s.unique[0].runs, 3) << format_summary(o, s);
  EXPECT_EQ(s.unique[0].steps, 2) << format_summary(o, s);
  expect_kept_mid_shrink(o, s, ShrinkStop::Interrupted, ", interrupted");
  fs::remove_all(dir);
}

TEST(FuzzCampaign, CliTimeBudgetHoldsWithGlmDims) {
  // Seed 1 under --dims glm: failures from case #1 on, each with a shrink of up to 1000 runs.
  const auto t0 = std::chrono::steady_clock::now();
  const Cmd r = run_cli("fuzz --backend cpu-bug:topleft-cp --budget 2s --dims glm --shrink-runs 1000 --no-save");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out;
  const auto at = r.out.find("longest_run_seconds=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double longest = std::stod(r.out.substr(at + 20));
  EXPECT_LT(took, 2 + longest + 1.0) << r.out;  // budget + one run + start-up and saving
}

TEST(FuzzCampaign, AStopRequestEndsTheCampaignBeforeTheNextCase) {
  install_interrupt_handlers();
  raise(SIGTERM);
  CampaignOptions o;
  o.backend = "cpu-bug:cross-doc";
  o.budget = {0, 50};
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  reset_interrupt();
  signal(SIGTERM, SIG_DFL);
  EXPECT_EQ(s.interrupted, SIGTERM);
  EXPECT_EQ(s.cases, 0u);
  const std::string summary = format_summary(o, s);
  EXPECT_NE(summary.find("INTERRUPTED by signal " + std::to_string(SIGTERM)), std::string::npos) << summary;
  EXPECT_NE(summary.find("interrupted=" + std::to_string(SIGTERM)), std::string::npos) << summary;
}

TEST(FuzzCampaign, CliStopsOnSigintAndSigtermWithASummaryAndOnlyWholeFiles) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path dir = fresh_dir("sig" + std::to_string(sig));
    auto bg = test::start_cli("fuzz --backend cpu-bug:off-by-one-causal --budget 10m --shrink-runs 100000 --out " +
                              dir.string());
    ASSERT_GT(bg.pid, 0);
    // Wait until it is in the middle of its campaign: a first found case was saved.
    const auto t0 = std::chrono::steady_clock::now();
    auto has_case = [&] {
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".case") return true;
      return false;
    };
    while (!has_case() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(has_case());
    const auto t_signal = std::chrono::steady_clock::now();
    kill(bg.pid, sig);
    const Cmd r = test::finish_cli(bg, 60);
    const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_signal).count();
    EXPECT_EQ(r.code, 128 + sig) << r.out;
    EXPECT_LT(stop_s, 10) << r.out;
    EXPECT_NE(r.out.find("INTERRUPTED by signal " + std::to_string(sig)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("fuzz-result cases="), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("interrupted=" + std::to_string(sig)), std::string::npos) << r.out;
    expect_only_valid_case_files(dir);
    fs::remove_all(dir);
  }
}
