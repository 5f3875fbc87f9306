// bisect-run: exit codes 0/1/125 (128 for bad input); crashes, exceptions, hangs and stray exits of a
// backend become deliberate codes (never a signal death); and a real `git bisect run` over a
// throwaway repo of 8 commits names the commit that introduced the bug (directly and through
// scripts/tools/bisect.sh --demo).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <tuple>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/fuzz/bisect.h"
#include "cli_run.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

using test::Cmd;
using test::run_cli;
using test::run_sh;

// Backends that misbehave the ways a kernel library under bisect can.
class Misbehaving : public Backend {
 public:
  explicit Misbehaving(std::string how) : how_(std::move(how)) {}
  std::string name() const override { return "test-" + how_; }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override {
    if (how_ == "segv") raise(SIGSEGV);
    if (how_ == "abort") std::abort();
    if (how_ == "throw") throw std::runtime_error("kernel launch failed");
    if (how_ == "exit") _exit(3);
    if (how_ == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    return {RunStatus::Skipped, "not built for this commit", 0};
  }

 private:
  std::string how_;
};

std::vector<BackendInfo> misbehaving_backends() {
  std::vector<BackendInfo> v;
  for (const char* how : {"segv", "abort", "throw", "exit", "hang", "skip"}) {
    BackendInfo b;
    b.name = std::string("test-") + how;
    b.description = "test backend";
    b.make = [how](const Knobs&) { return std::make_unique<Misbehaving>(how); };
    v.push_back(std::move(b));
  }
  return v;
}
const BackendSet registered(9, misbehaving_backends);

const char* kCase = "op=indexer docs=512 cp=4 rank=3 topk=16";

BisectOutcome step(const std::string& backend, double timeout = 60, bool crash_is_skip = false) {
  BisectOptions o;
  o.backend = backend;
  o.timeout_seconds = timeout;
  o.crash_is_skip = crash_is_skip;
  return bisect_step({parse_case(kCase)}, o);
}

}  // namespace

TEST(Bisect, CliExitCodes) {
  ASSERT_NO_THROW(make_backend("test-skip"));
  auto good = run_cli(std::string("bisect-run ") + kCase + " --backend cpu-ref");
  EXPECT_EQ(good.code, 0) << good.out;
  EXPECT_EQ(good.out.rfind("good: ", 0), 0u) << good.out;
  EXPECT_EQ(std::count(good.out.begin(), good.out.end(), '\n'), 1) << good.out;  // one line
  auto bad = run_cli(std::string("bisect-run ") + kCase + " --backend cpu-bug:topleft-cp");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_EQ(bad.out.rfind("bad: ", 0), 0u) << bad.out;
  auto skip = run_cli(std::string("bisect-run ") + kCase + " --backend cpu-bug:tail-read");
  EXPECT_EQ(skip.code, 125) << skip.out;
  EXPECT_EQ(skip.out.rfind("skip: ", 0), 0u) << skip.out;
  auto invalid = run_cli("bisect-run op=indexer docs=96 cp=32 --backend cpu-ref");
  EXPECT_EQ(invalid.code, 128) << invalid.out;  // stops the bisect instead of blaming a commit
  EXPECT_EQ(run_cli(std::string("bisect-run ") + kCase + " --backend no-such").code, 128);
  // Its own command-line errors are harness errors too: 2 would tell git bisect "bad commit".
  for (const std::string& args : {std::string("bisect-run ") + kCase + " --backend cpu-ref --tiemout 5",
                                 std::string("bisect-run ") + kCase, std::string("bisect-run --backend cpu-ref"),
                                 std::string("bisect-run ") + kCase + " --backend cpu-ref --timeout abc",
                                 std::string("bisect-run ") + kCase + " --backend cpu-ref --timeout -1",
                                 std::string("bisect-run ") + kCase + " --backend cpu-ref --timeout nan",
                                 std::string("bisect-run ") + kCase + " --backend cpu-ref --timeout inf",
                                 std::string("--max-mem nan bisect-run ") + kCase + " --backend cpu-ref",
                                 std::string("bisect-run")}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.code, 128) << args << ": " << r.out;
  }
  EXPECT_NE(run_cli(std::string("bisect-run ") + kCase + " --backend cpu-ref --timeout nan").out.find("--timeout"),
            std::string::npos);
  // The other subcommands keep 2 for bad input.
  EXPECT_EQ(run_cli(std::string("repro ") + kCase + " --tiemout 5").code, 2);
}

TEST(Bisect, CrashesExceptionsHangsAndStrayExitsBecomeDeliberateCodes) {
  auto segv = step("test-segv");
  EXPECT_EQ(segv.code, kBisectBad) << segv.line;
  EXPECT_NE(segv.line.find("crashed (signal 11"), std::string::npos) << segv.line;
  EXPECT_EQ(step("test-abort").code, kBisectBad);
  EXPECT_EQ(step("test-segv", 60, true).code, kBisectSkip);
  auto thr = step("test-throw");
  EXPECT_EQ(thr.code, kBisectBad);
  EXPECT_NE(thr.line.find("kernel launch failed"), std::string::npos) << thr.line;
  auto ex = step("test-exit");
  EXPECT_EQ(ex.code, kBisectBad);
  EXPECT_NE(ex.line.find("without a verdict"), std::string::npos) << ex.line;
  auto hang = step("test-hang", 1.0);
  EXPECT_EQ(hang.code, kBisectBad);
  EXPECT_NE(hang.line.find("timed out"), std::string::npos) << hang.line;
  EXPECT_EQ(step("test-skip").code, kBisectSkip);
}

TEST(Bisect, GitBisectRunNamesTheCommitThatIntroducedTheBug) {
  const fs::path repo = fs::temp_directory_path() / ("ao-bisect-" + std::to_string(::getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo);
  const std::string git = "git -C " + repo.string() +
                          " -c user.name=t -c user.email=t@example.invalid -c commit.gpgsign=false ";
  ASSERT_EQ(run_sh(git + "init -q").code, 0);
  std::string first, culprit;
  for (int i = 1; i <= 8; ++i) {
    // backend.txt: the "kernel build" of this commit; commit 6 introduces the chunk-local mask.
    std::ofstream(repo / "backend.txt") << (i < 6 ? "cpu-ref" : "cpu-bug:topleft-cp") << "\n";
    std::ofstream(repo / "notes.txt", std::ios::app) << "change " << i << "\n";
    ASSERT_EQ(run_sh(git + "add backend.txt notes.txt").code, 0);
    ASSERT_EQ(run_sh(git + "commit -q -m 'change " + std::to_string(i) + "'").code, 0);
    const std::string sha = run_sh(git + "rev-parse HEAD").out.substr(0, 40);
    if (i == 1) first = sha;
    if (i == 6) culprit = sha;
  }
  ASSERT_EQ(run_sh(git + "bisect start HEAD " + first).code, 0);
  const std::string stepcmd = std::string("sh -c '") + AO_CLI + " bisect-run " + kCase +
                              " --backend \"$(cat backend.txt)\"'";
  const auto r = run_sh("cd " + repo.string() + " && git bisect run " + stepcmd);
  EXPECT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("([0-9a-f]{40}) is the first bad commit"))) << r.out;
  EXPECT_EQ(m[1].str(), culprit) << r.out;
  EXPECT_NE(r.out.find("good: "), std::string::npos);
  EXPECT_NE(r.out.find("bad: "), std::string::npos);
  fs::remove_all(repo);
}

TEST(Bisect, DemoScriptNamesTheRightCommit) {
  const auto r = run_sh(std::string("AO=") + AO_CLI + " " + AO_SOURCE_DIR + "/scripts/tools/bisect.sh --demo");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("demo: bisect named the commit that introduced the bug"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("introduce chunk-local causal mask"), std::string::npos) << r.out;
}

// bisect-run --timeout over an exec: backend that hangs after starting a process in a session of its
// own: the step is `bad: ... timed out`, and neither the shell, its children nor the case dir survive.
TEST(Bisect, TimeoutLeavesNoProcessAndNoCaseDir) {
  const fs::path root = fs::temp_directory_path() / ("ao-bisect-timeout-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string R = root.string();
  std::ofstream(root / "backend.sh") << "#!/bin/sh\n"
                                     << "setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' " << R << "/orphan.pid &\n"
                                     << "echo $$ > " << R << "/sh.pid\nsleep 1000\n";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_sh("AO_EXEC_DIR=" + R + " " + AO_CLI + " bisect-run " + kCase + " --timeout 2 --backend 'exec:/bin/sh " +
                        R + "/backend.sh'");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("timed out after 2 s"), std::string::npos) << r.out;
  EXPECT_LT(secs, 20);
  for (const char* f : {"orphan.pid", "sh.pid"}) {
    std::ifstream in(root / f);
    pid_t p = 0;
    ASSERT_TRUE(in >> p) << f << " not written";
    EXPECT_TRUE(::kill(p, 0) != 0 && errno == ESRCH) << f << " " << p << " survived";
  }
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(root)) dirs += e.path().filename().string().rfind("ao-exec-", 0) == 0;
  EXPECT_EQ(dirs, 0) << "the case dir was left behind";
  fs::remove_all(root);
}

namespace {

struct ScriptDir {
  fs::path path;
  ScriptDir() {
    std::string t = (fs::temp_directory_path() / "ao-bisect-forge-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~ScriptDir() { fs::remove_all(path); }
  std::string script(const std::string& name, const std::string& body) const {
    const auto f = path / name;
    std::ofstream(f) << "#!/bin/sh\n" << body;
    fs::permissions(f, fs::perms::owner_all);
    return f.string();
  }
};

// Writes a forged "good" record into every pipe (descriptors 3 and up) of every attn-oracle ancestor
// (through /proc/<pid>/fd, which root may open whatever the process's dumpable flag), then exits 0
// without writing its outputs (an ERROR). The walk ends above the harness: the test runner is spared.
const char* kForgeUpTheChain =
    "p=$PPID; seen=0\n"
    "while [ \"$p\" -gt 1 ]; do\n"
    "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in\n"
    "    '(attn-oracle)') seen=1 ;;\n"
    "    *) [ $seen -eq 1 ] && break ;;\n"
    "  esac\n"
    "  if [ $seen -eq 1 ]; then for f in /proc/$p/fd/*; do\n"
    "    case \"${f##*/}\" in 0|1|2) continue ;; esac\n"
    "    case \"$(readlink \"$f\" 2>/dev/null)\" in pipe:*) printf '0\\ngood: forged\\n' 1<>\"$f\" 2>/dev/null ;; esac\n"
    "  done; fi\n"
    "  p=$(cut -d' ' -f4 /proc/$p/stat)\n"
    "done\n"
    "exit 0\n";

}  // namespace

// The verdict is the harness's: a backend that writes "good" into every pipe it can reach (its own
// inherited ones, its ancestors' through /proc) cannot turn a bad step into a good one.
TEST(Bisect, ABackendCannotForgeTheVerdict) {
  ScriptDir d;
  const std::string exec = "exec:" + d.script("forge.sh", kForgeUpTheChain);
  const std::string plugin = std::string("plugin:") + AO_HOSTILE_PLUGIN_DIR + "/libao_hostile_plugin_forge_verdict.so";
  // The plugin's forged text also corrupts its own host's result record: "exited without a verdict", a
  // crash of the plugin, which --crash-is-skip skips; never good.
  for (const auto& [be, extra, code] : {std::tuple<std::string, std::string, int>{exec, "", 1},
                                        {exec, " --crash-is-skip", 1},
                                        {plugin, "", 1},
                                        {plugin, " --crash-is-skip", 125}}) {
    const auto r = run_cli(std::string("bisect-run ") + kCase + " --backend " + be + extra);
    EXPECT_EQ(r.code, code) << be << extra << "\n" << r.out;
    EXPECT_EQ(r.out.rfind(code == 1 ? "bad: " : "skip: ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find("forged"), std::string::npos) << r.out;
  }
}

// A backend that kills the step's supervisor (the reaper above the bisect child) ends the step as the
// crash it is: bad, or skip under --crash-is-skip; never the skip of "could not start".
TEST(Bisect, KillingTheSupervisorIsACrashNotASkip) {
  ScriptDir d;
  // Up from the script: (sh) -> reaper -> bisect child -> reaper (the step's supervisor) -> harness.
  const std::string be = "exec:" + d.script("kill.sh",
                                            "p=$PPID; n=0\n"
                                            "while [ \"$p\" -gt 1 ]; do\n"
                                            "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in '(attn-oracle)') n=$((n+1)) ;; esac\n"
                                            "  if [ $n -eq 3 ]; then kill -9 $p; sleep 30; fi\n"
                                            "  p=$(cut -d' ' -f4 /proc/$p/stat)\n"
                                            "done\n"
                                            "exit 3\n");
  const auto bad = run_cli(std::string("bisect-run ") + kCase + " --backend " + be);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("crashed (signal 9"), std::string::npos) << bad.out;
  const auto skip = run_cli(std::string("bisect-run ") + kCase + " --backend " + be + " --crash-is-skip");
  EXPECT_EQ(skip.code, 125) << skip.out;
}
