// Stops and write failures never lose a report, a summary or a case dir:
//  * SIGINT, SIGTERM and SIGHUP sent to gate, fuzz, repro (one backend) and explain while a slow exec:
//    backend runs: exit 128 + signal, the summary printed, the report files written and well-formed
//    (check_reports.py), no case dir left in TMPDIR;
//  * `gate ... | head -1`: stdout closes; the gate stops (exit 141, the summary on stderr) with its reports;
//  * a file size limit (RLIMIT_FSIZE): the report too big for it is named (EFBIG), the others are written,
//    exit 2 with the summary printed (before: the harness died by SIGXFSZ);
//  * a backend that makes `report.json` a directory: the other reports are written, the failure named.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/pipeline/run_case.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

bool have_python3() { return std::system("python3 -c 'import xml.etree.ElementTree' >/dev/null 2>&1") == 0; }

int check_reports(const fs::path& rep, const std::string& args) {
  return std::system(fmt::format("python3 '{}/report/tests/check_reports.py' '{}' {}", AO_SOURCE_DIR,
                                 rep.string(), args)
                         .c_str());
}

struct Child {
  pid_t pid = -1;
  int stdout_read = -1;  // with pipe_stdout: the read end of its stdout
};

// Starts the CLI with TMPDIR=tmpdir; stderr (and stdout unless pipe_stdout) go to out. fsize_limit > 0:
// RLIMIT_FSIZE in bytes.
Child spawn(const std::vector<std::string>& args, const fs::path& tmpdir, const fs::path& out,
            bool pipe_stdout = false, rlim_t fsize_limit = 0, int ignored_signal = 0) {
  std::vector<std::string> copy = {AO_CLI};
  copy.insert(copy.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string env_tmp = "TMPDIR=" + tmpdir.string();
  int fds[2] = {-1, -1};
  if (pipe_stdout && ::pipe(fds) != 0) return {};
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::putenv(env_tmp.data());
    // The stop signals as a shell's foreground command gets them (a test binary run in the background of
    // a script has SIGINT ignored, and the CLI keeps what it inherits ignored).
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, sig == ignored_signal ? SIG_IGN : SIG_DFL);
    if (fsize_limit > 0) {
      const struct rlimit lim {fsize_limit, fsize_limit};
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    ::dup2(pipe_stdout ? fds[1] : fd, 1);
    ::dup2(fd, 2);
    if (pipe_stdout) {
      ::close(fds[0]);
      ::close(fds[1]);
    }
    ::execv(copy[0].c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fd);
  if (pipe_stdout) ::close(fds[1]);
  return {pid, pipe_stdout ? fds[0] : -1};
}

// Waits up to timeout_s; then SIGKILL. Returns the wait status.
int wait_for(pid_t pid, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &st, WNOHANG);
    if (w == pid) return st;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool wait_file(const fs::path& p, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!fs::exists(p)) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<std::string> entries(const fs::path& d) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(d)) v.push_back(e.path().filename().string());
  return v;
}

const char* const kSmall = "op=sdpa docs=16";

}  // namespace

class StopSignal : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(StopSignal, StopsCleanlyWithReportSummaryAndNoCaseDir) {
  const auto& [command, sig] = GetParam();
  const fs::path dir = fresh_dir(fmt::format("{}_{}", command, sig));
  const fs::path tmp = dir / "tmp", running = dir / "running", out = dir / "out.txt", rep = dir / "rep";
  fs::create_directories(tmp);
  // A slow backend: it says it runs (its case dir exists in TMPDIR by then), then sleeps.
  std::ofstream(dir / "slow.sh") << fmt::format("touch '{}'\nsleep 30\nexit 3\n", running.string());
  std::ofstream(dir / "a.case") << kSmall << "\nop=sdpa docs=17\nop=sdpa docs=18\n";
  const std::string be = "exec:/bin/sh " + (dir / "slow.sh").string();
  std::vector<std::string> args;
  std::string summary;
  if (command == "gate") {
    args = {"gate", (dir / "a.case").string(), "--backend", be, "--report-dir", rep.string()};
    summary = "gate: INTERRUPTED by ";
  } else if (command == "repro") {
    args = {"repro", kSmall, "--backend", be, "--report-dir", rep.string()};
    summary = "repro: INTERRUPTED by ";
  } else if (command == "explain") {
    args = {"explain", kSmall, "--backend", be};
    summary = "explain: INTERRUPTED by ";
  } else {
    args = {"fuzz", "--backend", be, "--budget", "20", "--no-save"};
    summary = "INTERRUPTED by signal ";
  }
  const Child c = spawn(args, tmp, out);
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(wait_file(running, 60)) << slurp(out);
  ASSERT_FALSE(entries(tmp).empty()) << "the backend's case dir should be in TMPDIR while it runs";
  ASSERT_EQ(::kill(c.pid, sig), 0);
  const int st = wait_for(c.pid, 30);
  const std::string text = slurp(out);
  ASSERT_TRUE(WIFEXITED(st)) << "died by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << "\n" << text;
  EXPECT_EQ(WEXITSTATUS(st), 128 + sig) << text;
  EXPECT_NE(text.find(summary), std::string::npos) << text;
  EXPECT_TRUE(entries(tmp).empty()) << "left in TMPDIR: " << entries(tmp)[0];
  if (!args.empty() && (command == "gate" || command == "repro") && have_python3()) {
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    EXPECT_EQ(check_reports(rep, fmt::format("--status interrupted --signal {}", name)), 0) << text;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Commands, StopSignal,
                         ::testing::Combine(::testing::Values("gate", "repro", "explain", "fuzz"),
                                            ::testing::Values(SIGINT, SIGTERM, SIGHUP)),
                         [](const auto& info) {
                           const int sig = std::get<1>(info.param);
                           return std::get<0>(info.param) + (sig == SIGINT    ? "_SIGINT"
                                                             : sig == SIGTERM ? "_SIGTERM"
                                                                              : "_SIGHUP");
                         });

// Under nohup (SIGHUP ignored on entry) a hangup does not stop the gate: it runs every case.
TEST(Stops, IgnoredOnEntryStaysIgnored) {
  const fs::path dir = fresh_dir("nohup");
  const fs::path tmp = dir / "tmp", running = dir / "running", out = dir / "out.txt";
  fs::create_directories(tmp);
  std::ofstream(dir / "slow.sh") << fmt::format("touch '{}'\nsleep 1\nexit 3\n", running.string());
  std::ofstream(dir / "a.case") << kSmall << "\nop=sdpa docs=17\n";
  const Child c = spawn({"gate", (dir / "a.case").string(), "--backend", "exec:/bin/sh " + (dir / "slow.sh").string()},
                        tmp, out, false, 0, SIGHUP);
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(wait_file(running, 60)) << slurp(out);
  ASSERT_EQ(::kill(c.pid, SIGHUP), 0);
  const int st = wait_for(c.pid, 60);
  const std::string text = slurp(out);
  ASSERT_TRUE(WIFEXITED(st)) << text;
  EXPECT_EQ(WEXITSTATUS(st), 1) << text;
  EXPECT_NE(text.find("gate: 2 cases x 1 backend(s): 0 passed, 2 failed"), std::string::npos) << text;
  fs::remove_all(dir);
}

// `gate ... | head -1`: the reader goes away after the first line. The gate stops after the case in flight
// (exit 141 = 128 + SIGPIPE, as a shell reports a writer killed by SIGPIPE), writes its reports as
// interrupted by SIGPIPE and prints the summary on stderr (before: killed by SIGPIPE, no report).
TEST(Stops, ClosedStdoutStopsTheGateWithItsReports) {
  const fs::path dir = fresh_dir("sigpipe");
  const fs::path tmp = dir / "tmp", err = dir / "err.txt", rep = dir / "rep";
  fs::create_directories(tmp);
  std::ofstream(dir / "slow.sh") << "sleep 0.3\nexit 3\n";
  std::ofstream cases(dir / "a.case");
  for (int i = 0; i < 10; ++i) cases << "op=sdpa docs=" << 16 + i << "\n";
  cases.close();
  const Child c = spawn({"gate", (dir / "a.case").string(), "--backend", "exec:/bin/sh " + (dir / "slow.sh").string(),
                         "--report-dir", rep.string()},
                        tmp, err, /*pipe_stdout=*/true);
  ASSERT_GT(c.pid, 0);
  std::string first;
  char ch = 0;
  while (::read(c.stdout_read, &ch, 1) == 1 && ch != '\n') first += ch;  // head -1
  ::close(c.stdout_read);
  const int st = wait_for(c.pid, 60);
  const std::string text = slurp(err);
  EXPECT_NE(first.find("ERROR"), std::string::npos) << first;
  ASSERT_TRUE(WIFEXITED(st)) << "died by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << "\n" << text;
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGPIPE) << text;
  EXPECT_NE(text.find("gate: INTERRUPTED by SIGPIPE after "), std::string::npos) << text;
  EXPECT_EQ(text.find("after 10 of 10"), std::string::npos) << "did not stop:\n" << text;
  EXPECT_TRUE(entries(tmp).empty());
  if (have_python3()) {
    EXPECT_EQ(check_reports(rep, "--status interrupted --signal SIGPIPE"), 0) << text;
  }
  fs::remove_all(dir);
}

// RLIMIT_FSIZE smaller than report.html (a failing case's pictures) but not than the other reports.
TEST(Stops, FileSizeLimitIsAReportedWriteErrorNotADeath) {
  const fs::path dir = fresh_dir("fsize");
  const fs::path tmp = dir / "tmp", out = dir / "out.txt", rep = dir / "rep";
  fs::create_directories(tmp);
  std::ofstream(dir / "a.case") << "op=indexer docs=64,32 heads=2 dim=16 topk=8 cp=2 rank=1\n";
  const Child c = spawn({"gate", (dir / "a.case").string(), "--backend", "cpu-bug:topleft-cp", "--no-explain",
                         "--report-dir", rep.string()},
                        tmp, out, false, /*fsize_limit=*/24 << 10);
  ASSERT_GT(c.pid, 0);
  const int st = wait_for(c.pid, 60);
  const std::string text = slurp(out);
  ASSERT_TRUE(WIFEXITED(st)) << "died by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << "\n" << text;
  EXPECT_EQ(WEXITSTATUS(st), 2) << text;
  EXPECT_NE(text.find("report.html: write failed"), std::string::npos) << text;
  EXPECT_NE(text.find(std::strerror(EFBIG)), std::string::npos) << text;
  EXPECT_NE(text.find("gate: 1 cases x 1 backend(s): 0 passed, 1 failed"), std::string::npos) << text;
  if (have_python3()) {
    EXPECT_EQ(check_reports(rep, "--cases 1 --status complete --missing report.html"), 0) << text;
  }
  fs::remove_all(dir);
}

// A backend that can reach the report dir makes report.json a directory while the gate runs: the writer
// replaces it, so the verdict is kept (the case's own ERROR is the gate's only failure).
TEST(Stops, ADirectoryPutInPlaceOfAReportDuringTheRunIsReplaced) {
  const fs::path dir = fresh_dir("isdir");
  const fs::path rep = dir / "rep";
  std::ofstream(dir / "evil.sh") << fmt::format("mkdir -p '{}/report.json/x'\nexit 3\n", rep.string());
  std::ofstream(dir / "a.case") << kSmall << "\n";
  const auto r = test::run_cli(fmt::format("gate {} --backend 'exec:/bin/sh {}' --report-dir {}",
                                           (dir / "a.case").string(), (dir / "evil.sh").string(), rep.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("cannot rename it into place"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate: 1 cases x 1 backend(s)"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_regular_file(rep / "report.json")) << r.out;
  if (have_python3()) {
    EXPECT_EQ(check_reports(rep, "--cases 1 --status complete"), 0) << r.out;
  }
  // One already there when the gate starts: refused before any case runs, naming it.
  fs::remove(rep / "report.json");
  fs::create_directories(rep / "report.json" / "x");
  const auto r2 = test::run_cli(fmt::format("gate {} --backend 'exec:/bin/sh {}' --report-dir {}",
                                            (dir / "a.case").string(), (dir / "evil.sh").string(), rep.string()));
  EXPECT_EQ(r2.code, 2) << r2.out;
  EXPECT_NE(r2.out.find("cannot remove the old report.json"), std::string::npos) << r2.out;
  EXPECT_EQ(r2.out.find("ERROR"), std::string::npos) << "ran cases first:\n" << r2.out;
  fs::remove_all(dir);
}

// A stop requested while a case runs: the case in flight keeps its verdict, but is not explained (explain
// runs every bug model; a single repro would otherwise keep the user waiting after Ctrl-C).
TEST(Stops, ACaseFinishedAfterAStopIsNotExplained) {
  const Case c = parse_case("op=indexer docs=512,256 cp=4 rank=2");
  auto bug = make_backend("cpu-bug:topleft-cp"), ref = make_backend("cpu-ref");
  install_interrupt_handlers();
  ::raise(SIGINT);
  ASSERT_EQ(interrupted(), SIGINT);
  const CaseResult stopped = run_case(c, *bug, *ref, {}, false, /*explain=*/true);
  reset_interrupt();
  EXPECT_EQ(stopped.verdict.kind, Verdict::Fail);
  EXPECT_EQ(stopped.explanation, nullptr);
  const CaseResult r = run_case(c, *bug, *ref, {}, false, /*explain=*/true);
  EXPECT_EQ(r.verdict.kind, Verdict::Fail);
  EXPECT_NE(r.explanation, nullptr);
}
