// Reports under hostile conditions: foreign text that is not UTF-8, a report dir
// that is empty/unwritable/in use, stale reports of an earlier run, and a gate stopped by SIGINT.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/internal/utf8.h"
#include "cli_run.h"
#include "attn_oracle/report/report.h"
#include "attn_oracle/report/dir.h"
#include "temp_files.h"

extern char** environ;

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

bool valid_utf8(const std::string& s) { return sanitize_utf8(s) == s; }

// A failing backend whose name and error reason carry a stray 0xff and a 3-byte character cut short.
class NonUtf8Backend : public Backend {
 public:
  std::string name() const override { return "test:name-\xc3"; }
  std::string version() const override { return "v\xfe"; }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override {
    return {RunStatus::Error, "stderr tail: bad \xff byte, cut \xe2\x82", 0};
  }
};

}  // namespace

TEST(Utf8, SanitizeKeepsValidTextAndReplacesEveryInvalidSequence) {
  const std::string valid = "ascii \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 end";  // 2-, 3-, 4-byte characters
  EXPECT_EQ(sanitize_utf8(valid), valid);
  EXPECT_EQ(sanitize_utf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize_utf8("cut \xe2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");     // truncated at the end
  EXPECT_EQ(sanitize_utf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");             // overlong '/'
  EXPECT_EQ(sanitize_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(sanitize_utf8("\xf4\x90\x80\x80").find('\xf4'), std::string::npos);  // above U+10FFFF
  // Random bytes: the result is valid UTF-8 (nlohmann's strict dump accepts it) and a fixed point.
  std::mt19937_64 rng(817);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 40, '\0');
    for (auto& ch : s) ch = char(rng() % 256);
    const std::string t = sanitize_utf8(s);
    EXPECT_EQ(sanitize_utf8(t), t);
    EXPECT_NO_THROW((void)nlohmann::json(t).dump());
  }
}

TEST(Utf8, NonUtf8BackendTextStillGivesAllReports) {
  NonUtf8Backend bad;
  auto ref = make_backend("cpu-ref");
  std::vector<CaseResult> res{run_case(parse_case("op=sdpa docs=16 seed=3"), bad, *ref)};
  ASSERT_EQ(res[0].verdict.kind, Verdict::Error);
  const fs::path dir = fresh_dir("utf8");
  ASSERT_NO_THROW(write_report_files(dir.string(), res));
  const auto j = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(j["cases"][0]["verdict"], "error");
  EXPECT_NE(j["cases"][0]["reason"].get<std::string>().find("bad \xEF\xBF\xBD byte"), std::string::npos);
  EXPECT_EQ(j["cases"][0]["backend"], "test:name-\xEF\xBF\xBD");
  for (const char* f : {"report.md", "report.xml", "report.html"}) EXPECT_TRUE(valid_utf8(slurp(dir / f))) << f;
  // The writer itself survives text that bypassed the harness.
  res[0].case_line = "op=sdpa \xff";
  EXPECT_NO_THROW(EXPECT_TRUE(nlohmann::json::parse(report_json(res)).is_object()));
  EXPECT_TRUE(valid_utf8(report_markdown(res)));
  EXPECT_TRUE(valid_utf8(report_junit(res)));
  fs::remove_all(dir);
}

// The exec: path of the report: a script whose stderr is not UTF-8 (before: exit 2, no report).
TEST(Utf8, GateWithNonUtf8StderrWritesItsReport) {
  const fs::path dir = fresh_dir("utf8cli");
  std::ofstream(dir / "bad.sh") << "printf 'broken \\377 and cut \\342\\202' >&2\nexit 3\n";
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\n";
  const auto r = test::run_cli(fmt::format("gate {} --backend 'exec:/bin/sh {}' --report-dir {}",
                                           (dir / "a.case").string(), (dir / "bad.sh").string(),
                                           (dir / "rep").string()));
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "rep" / "report.json"));
  EXPECT_EQ(j["cases"][0]["verdict"], "error");
  EXPECT_EQ(j["status"], "complete");
  fs::remove_all(dir);
}

TEST(ReportDir, EmptyPathIsRejected) {
  const fs::path dir = fresh_dir("empty");
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\n";
  for (const std::string& cmd : {"gate " + (dir / "a.case").string() + " --backend cpu-ref --report-dir ''",
                                std::string("repro op=sdpa docs=16 --report-dir ''")}) {
    const auto r = test::run_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("--report-dir: empty path"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
  }
  EXPECT_THROW(ReportDir(""), ReportDirError);
  fs::remove_all(dir);
}

// Found before any case runs (before: after all of them, summary lost). A path under a regular file
// is unwritable even for root.
TEST(ReportDir, UnwritableDirIsAnErrorBeforeAnyCaseRuns) {
  const fs::path dir = fresh_dir("unwritable");
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\nop=indexer docs=32\n";
  std::ofstream(dir / "file") << "x";
  const std::string rep = (dir / "file" / "sub").string();
  const auto r = test::run_cli(fmt::format("gate {} --backend cpu-ref --report-dir {}", (dir / "a.case").string(), rep));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--report-dir '" + rep + "'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << "ran cases first:\n" << r.out;
  fs::remove_all(dir);
}

TEST(ReportDir, SecondRunOnALockedDirIsRefusedNamingTheHolder) {
  const fs::path dir = fresh_dir("lock");
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\n";
  const std::string rep = (dir / "rep").string();
  const std::string gate = fmt::format("gate {} --backend cpu-ref --report-dir {}", (dir / "a.case").string(), rep);
  {
    ReportDir held(rep);  // this process holds the dir, as a concurrent gate would
    const auto r = test::run_cli(gate);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(fmt::format("in use by another attn-oracle run (pid {})", ::getpid())), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(fs::path(rep) / "report.json"));
  }
  const auto r = test::run_cli(gate);  // released
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(fs::path(rep) / "report.json"));
  fs::remove_all(dir);
}

TEST(ReportDir, OpeningRemovesTheLastRunsReportsAndWritesASet) {
  const fs::path dir = fresh_dir("stale");
  for (const char* f : {"report.json", "report.md", "report.xml", "report.html"}) std::ofstream(dir / f) << "old run";
  fs::create_directories(dir / ".report-tmp-1");  // an interrupted write
  std::ofstream(dir / "notes.txt") << "not ours";
  {
    ReportDir d(dir.string());
    for (const char* f : {"report.json", "report.md", "report.xml", "report.html"})
      EXPECT_FALSE(fs::exists(dir / f)) << f << " of the earlier run still looks current";
    EXPECT_FALSE(fs::exists(dir / ".report-tmp-1"));
    EXPECT_TRUE(fs::exists(dir / "notes.txt"));
    auto ref = make_backend("cpu-ref");
    d.write({run_case(parse_case("op=sdpa docs=8"), *ref, *ref)}, {SIGTERM});
  }
  const auto j = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(j["status"], "interrupted");
  EXPECT_EQ(j["signal"], "SIGTERM");
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_NE(e.path().filename().string().rfind(".report-tmp-", 0), 0u) << e.path();
  fs::remove_all(dir);
}

// SIGINT after the first case finished: the gate stops after the case in flight, prints and reports
// what finished (report.json status "interrupted"), and exits 128 + SIGINT.
TEST(ReportDir, InterruptedGateWritesWhatFinishedAndExits130) {
  const fs::path dir = fresh_dir("sigint");
  std::ofstream(dir / "slow.sh") << "sleep 1\necho slow backend >&2\nexit 3\n";
  std::ofstream(dir / "a.case") << "op=sdpa docs=16\nop=sdpa docs=17\nop=sdpa docs=18\nop=sdpa docs=19\nop=sdpa docs=20\n";
  const fs::path out = dir / "out.txt", rep = dir / "rep";
  const std::string backend = "exec:/bin/sh " + (dir / "slow.sh").string();
  std::vector<std::string> args = {AO_CLI, "gate", (dir / "a.case").string(), "--backend", backend, "--report-dir",
                                   rep.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;  // SIGINT as a foreground command gets it (the CLI keeps an inherited SIG_IGN)
  posix_spawnattr_init(&attr);
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, AO_CLI, &fa, &attr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  const auto t0 = std::chrono::steady_clock::now();
  while (slurp(out).find("ERROR ") == std::string::npos && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  const std::string text = slurp(out);
  ASSERT_TRUE(WIFEXITED(st)) << text;
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGINT) << text;
  size_t printed = 0;
  for (size_t p = text.find("ERROR "); p != std::string::npos; p = text.find("ERROR ", p + 1)) ++printed;
  EXPECT_GE(printed, 1u) << text;
  EXPECT_LT(printed, 5u) << "did not stop:\n" << text;
  EXPECT_NE(text.find("gate: INTERRUPTED by SIGINT after " + std::to_string(printed) + " of 5"), std::string::npos)
      << text;
  const auto j = nlohmann::json::parse(slurp(rep / "report.json"));
  EXPECT_EQ(j["status"], "interrupted");
  EXPECT_EQ(j["signal"], "SIGINT");
  EXPECT_EQ(j["cases"].size(), printed);
  EXPECT_NE(slurp(rep / "report.md").find("INTERRUPTED by SIGINT"), std::string::npos);
  EXPECT_NE(slurp(rep / "report.xml").find("<property name=\"status\" value=\"interrupted\"/>"), std::string::npos);
  fs::remove_all(dir);
}
