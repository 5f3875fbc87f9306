// Found files written by `fuzz` hold only what the campaign vouches for: foreign text (error reasons,
// stderr, the backend spec) is escaped onto one comment line and never becomes a claim or a case; the
// backend is named as a user re-runs it, so a fresh temp dir does not make a new signature; a save
// failure does not end the campaign; a flaky failure is re-run, marked and not shrunk; a known file
// another campaign removed is not reported as known; corpus reading is bounded and takes pipes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> case_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".case") out.push_back(e.path());
  return out;
}

// An exec: backend: a sh script at dir/be.sh.
std::string exec_script(const fs::path& dir, const std::string& body) {
  std::ofstream(dir / "be.sh") << body << "\n";
  return "exec:/bin/sh " + (dir / "be.sh").string();
}

// A backend whose error reason holds a traceback, a claim and a case line on lines of their own.
const char* kPoison =
    "echo 'Traceback (most recent call last):' >&2\n"
    "printf '  File \"x.py\", line 1\\n# catches: cpu-ref\\nop=sdpa docs=16\\n' >&2\n"
    "exit 1";

CampaignOptions few_cases(const std::string& backend, const fs::path& out) {
  CampaignOptions o;
  o.backend = backend;
  o.budget = {0, 1};
  o.shrink_runs = 8;
  o.out_dir = out.string();
  return o;
}

}  // namespace

TEST(FoundFiles, ForeignTextIsEscapedOntoOneCommentLineAndAddsNoClaimOrCase) {
  const fs::path d = fresh_dir("poison");
  const fs::path out = d / "found";
  std::ostringstream err;
  // A --backend value ending in a newline must not split the `# backend:` line either.
  const CampaignSummary s = run_campaign(few_cases(exec_script(d, kPoison) + "\n", out), err);
  ASSERT_EQ(s.unique.size(), 1u) << err.str();
  const auto files = case_files(out);
  ASSERT_EQ(files.size(), 1u);
  const std::string text = slurp(files[0]);
  const auto entries = read_case_files({files[0].string()});
  ASSERT_EQ(entries.size(), 1u) << text;
  EXPECT_TRUE(entries[0].claim.empty()) << text;
  std::istringstream lines(text);
  int cases = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_NE(line.rfind("# catches:", 0), 0u) << text;
    cases += case_text_of_line(line).empty() ? 0 : 1;
    EXPECT_TRUE(line.rfind("#", 0) == 0 || line == print_case(entries[0].c)) << line;
  }
  EXPECT_EQ(cases, 1) << text;
  EXPECT_NE(text.find("Traceback (most recent call last):\\n  File"), std::string::npos) << text;
  EXPECT_NE(text.find("\\n# catches: cpu-ref\\nop=sdpa docs=16"), std::string::npos) << text;
  // The gate replays it: no case key 'Traceback', no claim on cpu-ref.
  const auto g = test::run_cli("gate " + out.string() + " --backend cpu-ref --no-explain");
  EXPECT_EQ(g.code, 0) << g.out;
  EXPECT_EQ(g.out.find("claim"), std::string::npos) << g.out;
  fs::remove_all(d);
}

TEST(FoundFiles, BackendIsNamedPortablySoATempDirMakesNoNewSignature) {
  const fs::path d1 = fresh_dir("portable1"), d2 = fresh_dir("portable2");
  const fs::path out = fresh_dir("portable-out");
  std::ostringstream err;
  const CampaignSummary a = run_campaign(few_cases(exec_script(d1, "echo boom >&2; exit 1"), out), err);
  ASSERT_EQ(a.unique.size(), 1u) << err.str();
  EXPECT_EQ(a.unique[0].signature.rfind("exec:/bin/sh <tmp>/be.sh ", 0), 0u) << a.unique[0].signature;
  const std::string text = slurp(a.unique[0].file);
  EXPECT_NE(text.find("# backend: exec:/bin/sh <tmp>/be.sh   vs: cpu-ref\n"), std::string::npos) << text;
  EXPECT_EQ(text.find(d1.string()), std::string::npos) << text;
  // The same script from another temp dir (a warm host's fresh socket dir): the same failure.
  const CampaignSummary b = run_campaign(few_cases(exec_script(d2, "echo boom >&2; exit 1"), out), err);
  ASSERT_EQ(b.unique.size(), 1u);
  EXPECT_EQ(b.unique[0].signature, a.unique[0].signature);
  EXPECT_TRUE(b.unique[0].already_known);
  EXPECT_EQ(case_files(out).size(), 1u);
  for (const auto& p : {d1, d2, out}) fs::remove_all(p);
}

TEST(FoundFiles, ASaveFailurePrintsTheLineAndTheCampaignEndsWithItsSummary) {
  const fs::path d = fresh_dir("unsaved");
  CampaignOptions o;
  o.backend = "cpu-bug:topleft-cp";
  o.budget = {0, 400};
  o.max_failures = 1;
  o.shrink_runs = 40;
  std::ostringstream err;
  const CampaignSummary probe = run_campaign(o, err);  // no --out: learns the shrunk line
  ASSERT_EQ(probe.unique.size(), 1u);
  // A directory where the file goes: the rename onto it fails (also as root, unlike a read-only dir).
  o.out_dir = (d / "found").string();
  fs::create_directories(fs::path(o.out_dir) / (case_hash(print_case(probe.unique[0].shrunk)) + ".case") / "x");
  std::ostringstream err2;
  CampaignSummary s;
  ASSERT_NO_THROW(s = run_campaign(o, err2));
  ASSERT_EQ(s.unique.size(), 1u);
  EXPECT_FALSE(s.unique[0].save_error.empty());
  EXPECT_EQ(s.unsaved, 1u);
  EXPECT_NE(err2.str().find("NOT SAVED"), std::string::npos) << err2.str();
  EXPECT_NE(err2.str().find(print_case(probe.unique[0].shrunk)), std::string::npos) << err2.str();
  const std::string summary = format_summary(o, s);
  EXPECT_NE(summary.find("NOT SAVED"), std::string::npos) << summary;
  EXPECT_NE(summary.find(print_case(probe.unique[0].shrunk)), std::string::npos) << summary;
  EXPECT_NE(summary.find("unsaved=1"), std::string::npos) << summary;
  EXPECT_EQ(campaign_exit_code(s), 1);
  fs::remove_all(d);
}

TEST(FoundFiles, AFlakyFailureIsReRunMarkedAndNotShrunk) {
  const fs::path d = fresh_dir("flaky");
  // Odd runs fail (error), even runs decline (skipped): the failure reproduces in 2 of 4 runs.
  const std::string be = exec_script(d, fmt::format("n=$(cat {0}/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > {0}/n\n"
                                                    "if [ $((n % 2)) = 1 ]; then echo flaky-error >&2; exit 1; fi\n"
                                                    "echo flaky-decline >&2; exit 125",
                                                    d.string()));
  CampaignOptions o = few_cases(be, d / "found");
  std::ostringstream err;
  const CampaignSummary s = run_campaign(o, err);
  ASSERT_EQ(s.unique.size(), 1u) << err.str();
  const FoundCase& f = s.unique[0];
  EXPECT_EQ(f.repro_runs, 4);
  EXPECT_EQ(f.repro_fails, 2);
  EXPECT_TRUE(f.nondeterministic());
  EXPECT_EQ(f.shrunk, f.original);  // the shrinker did not chase it
  EXPECT_EQ(f.runs, 0);
  EXPECT_EQ(s.nondeterministic, 1u);
  const std::string summary = format_summary(o, s);
  EXPECT_NE(summary.find("NONDETERMINISTIC"), std::string::npos) << summary;
  EXPECT_NE(summary.find("reproduced 2 of 4 runs"), std::string::npos) << summary;
  const std::string text = slurp(f.file);
  EXPECT_NE(text.find("# nondeterministic: "), std::string::npos) << text;
  EXPECT_NE(text.find("# original reproduced: reproduced 2 of 4 runs"), std::string::npos) << text;
  // A deterministic failure says so too.
  const CampaignSummary det = run_campaign(few_cases(exec_script(d, "exit 1"), d / "found2"), err);
  ASSERT_EQ(det.unique.size(), 1u);
  EXPECT_FALSE(det.unique[0].nondeterministic());
  EXPECT_EQ(det.unique[0].shrunk_repro_fails, 4);
  fs::remove_all(d);
}

TEST(FoundFiles, AKnownFileRemovedDuringTheCampaignIsNotReportedAsKnown) {
  const fs::path d = fresh_dir("vanished");
  const fs::path out = d / "found";
  // The same backend both times; the second time it deletes the found files while the campaign runs
  // (as a shard sharing --out does when it replaces its file by a smaller one).
  const std::string be = exec_script(d, fmt::format("[ -f {0}/delete ] && rm -f {0}/found/*.case\nexit 1", d.string()));
  std::ostringstream err;
  const CampaignSummary a = run_campaign(few_cases(be, out), err);
  ASSERT_EQ(a.unique.size(), 1u);
  std::ofstream(d / "delete") << "1";
  const CampaignSummary b = run_campaign(few_cases(be, out), err);
  ASSERT_EQ(b.unique.size(), 1u);
  EXPECT_FALSE(b.unique[0].already_known);
  ASSERT_FALSE(b.unique[0].file.empty());
  EXPECT_TRUE(valid_found_file(b.unique[0].file)) << format_summary(few_cases(be, out), b);
  fs::remove_all(d);
}

TEST(FoundFiles, CorpusReadingIsBoundedAndNamesFileLineAndLimit) {
  const fs::path d = fresh_dir("bounded");
  const fs::path f = d / "long.case";
  {
    std::ofstream o(f, std::ios::binary);
    o << "op=sdpa docs=16\n# " << std::string(kMaxCaseLineBytes + 10, 'x') << "\nop=sdpa docs=8\n";
  }
  try {
    read_case_files({f.string()});
    ADD_FAILURE() << "an over-long line was read";
  } catch (const CaseFileError& e) {
    EXPECT_NE(std::string(e.what()).find(f.string() + ":2: line longer than " + std::to_string(kMaxCaseLineBytes)),
              std::string::npos)
        << e.what();
  }
  // An endless device: the error comes after the limit, not after the end that never comes.
  const auto z = test::run_sh("timeout 20 " + std::string(AO_CLI) + " gate /dev/zero --backend cpu-ref");
  EXPECT_EQ(z.code, 2) << z.out;
  EXPECT_NE(z.out.find("/dev/zero:1: line longer than"), std::string::npos) << z.out;
  // A file larger than --max-mem is refused before it is read.
  {
    std::ofstream o(d / "big.case", std::ios::binary);
    o << "op=sdpa docs=16\n";
    for (int i = 0; i < 3000; ++i) o << "# " << std::string(1000, 'y') << "\n";
  }
  const auto big = test::run_cli("--max-mem 0.001 gate " + (d / "big.case").string() + " --backend cpu-ref");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("--max-mem"), std::string::npos) << big.out;
  fs::remove_all(d);
}

TEST(FoundFiles, PipesAndFifosAreCaseFilesReadOnce) {
  const auto p = test::run_sh("bash -c '" + std::string(AO_CLI) +
                              " gate <(echo \"op=sdpa docs=16\") --backend cpu-ref --no-explain'");
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("1 cases x 1 backend(s): 1 passed"), std::string::npos) << p.out;
  const fs::path d = fresh_dir("fifo");
  const fs::path fifo = d / "c.case";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // The writer holds no pipe of ours and gives up after a while, whether or not the gate reads it.
  const auto r = test::run_sh("(timeout 30 sh -c \"echo 'op=sdpa docs=8' > " + fifo.string() +
                              "\" >/dev/null 2>&1 &) ; timeout 30 " +
                              std::string(AO_CLI) + " gate " + fifo.string() + " --backend cpu-ref --no-explain");
  EXPECT_EQ(r.code, 0) << r.out;
  fs::remove_all(d);
}
