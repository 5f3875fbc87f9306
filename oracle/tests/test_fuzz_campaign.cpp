// Fuzz campaigns: a bug model is found, shrunk and saved as a replayable, deduplicated case file;
// the exact reference finds nothing; shards split a campaign deterministically; the CLI's exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attn_oracle/campaign.h"
#include "attn_oracle/case_file.h"
#include "cli_run.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ao-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

using test::Cmd;
using test::run_cli;
using test::run_sh;

}  // namespace

TEST(FuzzCampaign, FindsShrinksAndSavesABugModelFailure) {
  const fs::path dir = temp_dir("campaign");
  CampaignOptions o;
  o.backend = "cpu-bug:topleft-cp";
  o.seed = 1;
  o.budget = {0, 400};
  o.max_failures = 1;
  o.shrink_runs = 100;
  o.out_dir = dir.string();
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  ASSERT_EQ(s.failed, 1u);
  EXPECT_EQ(campaign_exit_code(s), 1);
  ASSERT_EQ(s.unique.size(), 1u);
  const FoundCase& f = s.unique[0];
  EXPECT_GT(s.first_failure_case, 0);
  EXPECT_FALSE(f.already_known);
  ASSERT_TRUE(fs::exists(f.file));
  EXPECT_EQ(fs::path(f.file).filename().string(), case_hash(f.shrunk) + ".case");
  // The file: comments with the original line, backend and metrics, then exactly one case line.
  std::ifstream in(f.file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("# original: " + f.original), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("cpu-bug:topleft-cp"), std::string::npos);
  EXPECT_NE(text.str().find("failing: "), std::string::npos);
  const auto entries = read_case_files({f.file});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(print_case(entries[0].c), f.shrunk);
  // It replays: still fails with the bug, passes the exact reference.
  auto bug = make_backend(o.backend);
  auto ref = make_backend("cpu-ref");
  EXPECT_EQ(run_case(entries[0].c, *bug, *ref).verdict.kind, Verdict::Fail);
  EXPECT_EQ(run_case(entries[0].c, *ref, *ref).verdict.kind, Verdict::Pass);
  EXPECT_LE(f.shrunk.size(), f.original.size());
  // Running the same campaign again finds the same case and does not rewrite it.
  const CampaignSummary again = run_campaign(o, err);
  ASSERT_EQ(again.unique.size(), 1u);
  EXPECT_EQ(again.unique[0].shrunk, f.shrunk);
  EXPECT_TRUE(again.unique[0].already_known);
  EXPECT_NE(format_summary(o, again).find("known:"), std::string::npos);
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
  EXPECT_EQ(s.failed, 0u) << format_summary(o, s);
  EXPECT_EQ(s.invalid, 0u);
  EXPECT_EQ(s.passed, 150u);
  EXPECT_EQ(campaign_exit_code(s), 0);
  EXPECT_TRUE(err.str().empty());  // no progress line unless asked (terminal only)
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
  EXPECT_THROW(parse_budget("soon"), CaseError);
  EXPECT_THROW(parse_budget("0"), CaseError);
  EXPECT_EQ(parse_shard("2/5"), std::make_pair(2, 5));
  for (const char* bad : {"5/5", "1", "a/b", "-1/3", "1/0"}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << bad;
    } catch (const CaseError& e) {
      EXPECT_EQ(e.key, "shard");
    }
  }
}

TEST(FuzzCampaign, CliExitCodesAndSummary) {
  const fs::path dir = temp_dir("cli-fuzz");
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
