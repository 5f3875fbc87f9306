// The subprocess supervisor (subprocess.h) on its own: every outcome kind, the message channel, the
// bounded stderr tail, stop requests, and no descendant surviving (in or out of the process group).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "attn_oracle/case/case.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/subprocess.h"
#include "temp_files.h"

using namespace ao;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

SubprocessOutcome sh(const std::string& script, double timeout = 20) {
  SubprocessOptions o;
  o.timeout_s = timeout;
  return run_command({"/bin/sh", "-c", script}, {"AO_SUBPROCESS_TEST=yes"}, o);
}

bool alive(pid_t p) { return ::kill(p, 0) == 0 || errno != ESRCH; }


pid_t pid_in(const fs::path& f) {
  std::ifstream in(f);
  pid_t p = 0;
  in >> p;
  return p;
}

}  // namespace

TEST(Subprocess, OutcomeKinds) {
  auto ok = sh("echo \"$AO_SUBPROCESS_TEST\" >&2; exit 0");
  EXPECT_EQ(ok.kind, SubprocessOutcome::Exited);
  EXPECT_EQ(ok.code, 0);
  EXPECT_EQ(ok.stderr_tail, "yes\n");  // extra_env reaches the child
  auto three = sh("exit 3");
  EXPECT_EQ(three.kind, SubprocessOutcome::Exited);
  EXPECT_EQ(three.code, 3);
  EXPECT_EQ(three.describe(0), "exited with status 3");
  auto segv = sh("kill -SEGV $$");
  EXPECT_EQ(segv.kind, SubprocessOutcome::Signaled);
  EXPECT_EQ(segv.code, SIGSEGV);
  EXPECT_NE(segv.describe(0).find("killed by signal 11"), std::string::npos) << segv.describe(0);
  const auto t0 = std::chrono::steady_clock::now();
  auto slow = sh("sleep 100", 0.5);
  EXPECT_EQ(slow.kind, SubprocessOutcome::TimedOut);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5);
  EXPECT_NE(slow.describe(0.5).find("timed out after 0.5 s"), std::string::npos);
  auto missing = run_command({"/nonexistent/binary"}, {}, {});
  EXPECT_EQ(missing.kind, SubprocessOutcome::Exited);
  EXPECT_EQ(missing.code, 127);
  EXPECT_NE(missing.stderr_tail.find("cannot execute /nonexistent/binary"), std::string::npos) << missing.stderr_tail;
}

TEST(Subprocess, ForkedBodyMessageAndExits) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("seed={}", seed));
  std::mt19937 rng(seed);
  std::string payload(size_t(rng() % 300000), '\0');  // larger than a pipe buffer, any bytes
  for (auto& ch : payload) ch = char(rng());
  auto r = run_forked([&](int fd) { return write_all(fd, payload.data(), payload.size()) ? 7 : 1; }, {});
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited);
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.message, payload);
  EXPECT_FALSE(r.message_truncated);
  SubprocessOptions small;
  small.message_max_bytes = 100;
  auto cut = run_forked([&](int fd) { return write_all(fd, payload.data(), payload.size()) ? 0 : 1; }, small);
  EXPECT_EQ(cut.message, payload.substr(0, std::min<size_t>(100, payload.size())));
  EXPECT_EQ(cut.message_truncated, payload.size() > 100);
  auto ex = run_forked([](int) -> int { std::exit(0); }, {});  // exit() instead of returning
  EXPECT_EQ(ex.kind, SubprocessOutcome::Exited);
  EXPECT_TRUE(ex.message.empty());
  auto ab = run_forked([](int) -> int { std::abort(); }, {});
  EXPECT_EQ(ab.kind, SubprocessOutcome::Signaled);
  EXPECT_EQ(ab.code, SIGABRT);
  auto thr = run_forked([](int) -> int { throw std::runtime_error("x"); }, {});
  EXPECT_EQ(thr.code, 70);
}

TEST(Subprocess, StderrTailIsBoundedAndStartsAtACharacter) {
  // 3 MB of 'é' lines (two-byte characters): the tail keeps the last bytes only, cut before a whole character.
  SubprocessOptions o;
  o.stderr_tail_bytes = 1001;
  auto r = run_command({"/bin/sh", "-c", "yes \u00e9 | head -c 3000000 >&2; echo END >&2"}, {}, o);
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited);
  EXPECT_TRUE(r.stderr_cut);
  EXPECT_LE(r.stderr_tail.size(), 1001u);
  EXPECT_GE(r.stderr_tail.size(), 998u);
  EXPECT_EQ(r.stderr_tail.substr(r.stderr_tail.size() - 4), "END\n");
  EXPECT_NE(static_cast<unsigned char>(r.stderr_tail[0]) & 0xC0u, 0x80u) << "cut inside a character";
}

TEST(Subprocess, NoDescendantSurvivesInOrOutOfTheGroup) {
  TempDir d;
  const std::string D = d.path.string();
  // A background job in the group, a setsid'd process outside it, a double fork whose middle exits.
  auto r = sh("sleep 1000 & echo $! > " + D + "/group.pid\n"
              "setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' " + D + "/session.pid &\n"
              "( sh -c 'echo $$ > \"$0\"; exec sleep 1000' " + D + "/double.pid & ) \n"
              "while [ ! -s " + D + "/session.pid ] || [ ! -s " + D + "/double.pid ]; do sleep 0.02; done; exit 0");
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited);
  for (const char* f : {"group.pid", "session.pid", "double.pid"}) {
    const pid_t p = pid_in(d.path / f);
    ASSERT_GT(p, 0) << f;
    EXPECT_FALSE(alive(p)) << f << " " << p << " survived";
  }
}

TEST(Subprocess, StopRequestBeforeAndDuringARun) {
  install_interrupt_handlers();
  ::raise(SIGINT);
  auto before = sh("exit 0");
  EXPECT_EQ(before.kind, SubprocessOutcome::Interrupted);
  EXPECT_EQ(before.code, SIGINT);
  reset_interrupt();
  TempDir d;
  std::thread stopper([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(::getpid(), SIGINT);
  });
  // The command ignores SIGTERM: the grace period ends in SIGKILL.
  SubprocessOptions o;
  o.kill_grace_s = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  auto during = run_command({"/bin/sh", "-c", "trap '' TERM; echo $$ > " + d.path.string() + "/sh.pid; while :; do sleep 0.1; done"}, {}, o);
  stopper.join();
  reset_interrupt();
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  EXPECT_EQ(during.kind, SubprocessOutcome::Interrupted);
  EXPECT_EQ(during.code, SIGINT);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5);
  const pid_t p = pid_in(d.path / "sh.pid");
  ASSERT_GT(p, 0);
  EXPECT_FALSE(alive(p));
}

TEST(Subprocess, TimeoutFromTheEnvironmentIsValidated) {
  ::unsetenv("AO_SUBPROCESS_TEST_TIMEOUT");
  EXPECT_EQ(seconds_from_env("AO_SUBPROCESS_TEST_TIMEOUT", 600), 600);
  ::setenv("AO_SUBPROCESS_TEST_TIMEOUT", "2.5", 1);
  EXPECT_EQ(seconds_from_env("AO_SUBPROCESS_TEST_TIMEOUT", 600), 2.5);
  for (const char* bad : {"0", "-1", "abc", "nan", "inf", "5s"}) {
    ::setenv("AO_SUBPROCESS_TEST_TIMEOUT", bad, 1);
    EXPECT_THROW(seconds_from_env("AO_SUBPROCESS_TEST_TIMEOUT", 600), BadInput) << bad;
  }
  ::unsetenv("AO_SUBPROCESS_TEST_TIMEOUT");
}

// A set of processes that work together (cp-run's ranks): all run at once; the first that fails stops
// the others (their whole process groups), long before their own end or the timeout.
TEST(Subprocess, CommandsTogetherStopOnTheFirstFailure) {
  TempDir d;
  const std::string pid_file = (d.path / "child.pid").string();
  SubprocessOptions o;
  o.timeout_s = 60;
  const auto t0 = std::chrono::steady_clock::now();
  const auto outs = run_commands_together(
      {{{"/bin/sh", "-c", "sleep 100 & echo $! > " + pid_file + "; wait"}, {}},
       {{"/bin/sh", "-c", "sleep 0.3; echo \"rank $RANK\" >&2; exit 3"}, {"RANK=1"}},
       {{"/bin/sh", "-c", "sleep 100"}, {}}},
      o);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[1].kind, SubprocessOutcome::Exited);
  EXPECT_EQ(outs[1].code, 3);
  EXPECT_EQ(outs[1].stderr_tail, "rank 1\n");
  for (size_t i : {0, 2}) {
    EXPECT_EQ(outs[i].kind, SubprocessOutcome::Interrupted) << i;
    EXPECT_EQ(outs[i].code, 0) << i;
    EXPECT_NE(outs[i].describe(60).find("stopped because another process of its set failed"), std::string::npos);
  }
  const pid_t grandchild = pid_in(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(alive(grandchild)) << "the stopped process's own children are gone too";

  const auto fine = run_commands_together({{{"/bin/sh", "-c", "exit 0"}, {}}, {{"/bin/sh", "-c", "sleep 0.2"}, {}}}, o);
  for (const auto& r : fine) EXPECT_TRUE(r.kind == SubprocessOutcome::Exited && r.code == 0) << r.describe(60);
  o.timeout_s = 0.5;
  const auto slow = run_commands_together({{{"/bin/sh", "-c", "sleep 100"}, {}}, {{"/bin/sh", "-c", "sleep 100"}, {}}}, o);
  for (const auto& r : slow)
    EXPECT_TRUE(r.kind == SubprocessOutcome::TimedOut || (r.kind == SubprocessOutcome::Interrupted && r.code == 0))
        << r.describe(0.5);
  EXPECT_EQ(slow[0].kind == SubprocessOutcome::TimedOut || slow[1].kind == SubprocessOutcome::TimedOut, true);
}

// A supervised child that supervises again (bisect-run's child runs exec: backends): the start lock
// held while the reaper was forked must not be inherited held (before the fix: a deadlock).
TEST(Subprocess, NestedSupervisionDoesNotDeadlock) {
  SubprocessOptions o;
  o.timeout_s = 20;
  const auto r = run_forked(
      [](int) {
        SubprocessOptions inner;
        inner.timeout_s = 5;
        const auto x = run_command({"/bin/sh", "-c", "exit 4"}, {}, inner);
        return x.kind == SubprocessOutcome::Exited ? x.code : 99;
      },
      o);
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited) << r.describe(20);
  EXPECT_EQ(r.code, 4);
}

// A descendant that kills the reaper (its supervisor) sets nothing free: the child dies with its reaper,
// the harness (a subreaper itself) kills what was re-parented to it, and the outcome is a crash (SIGKILL),
// never a "could not start" (which a bisect step would read as skip).
TEST(Subprocess, KillingTheReaperLeavesNoDaemonAndIsACrash) {
  TempDir d;
  const std::string D = d.path.string();
  auto r = sh("setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' " + D + "/daemon.pid &\n"
              "while [ ! -s " + D + "/daemon.pid ]; do sleep 0.02; done\n"
              "kill -9 $PPID; sleep 1000");
  EXPECT_EQ(r.kind, SubprocessOutcome::Signaled) << r.describe(20);
  EXPECT_EQ(r.code, SIGKILL);
  EXPECT_NE(r.describe(20).find("supervising process"), std::string::npos) << r.describe(20);
  const pid_t p = pid_in(d.path / "daemon.pid");
  ASSERT_GT(p, 0);
  for (int i = 0; i < 100 && alive(p); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(alive(p)) << "daemon " << p << " survived its killed supervisor";
  if (alive(p)) ::kill(p, SIGKILL);
}

// The wait status is the reaper's own: bytes a descendant writes into the supervisor's status pipe
// (opened through /proc/<reaper>/fd) change nothing.
TEST(Subprocess, ForgedStatusRecordsDoNotChangeTheOutcome) {
  // Little-endian int32 records: started pid 1, wait status 0 (exit 0), stopping 0, written many times.
  auto r = sh("trap '' PIPE; for f in /proc/$PPID/fd/*; do case ${f##*/} in 0|1|2) continue ;; esac; printf '\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000' "
              "> \"$f\" 2>/dev/null; done; exit 3");
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited) << r.describe(20);
  EXPECT_EQ(r.code, 3);
  auto s = sh("trap '' PIPE; for f in /proc/$PPID/fd/*; do case ${f##*/} in 0|1|2) continue ;; esac; printf '\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000' "
              "> \"$f\" 2>/dev/null; done; kill -SEGV $$");
  EXPECT_EQ(s.kind, SubprocessOutcome::Signaled) << s.describe(20);
  EXPECT_EQ(s.code, SIGSEGV);
}

// stdout into a file keeps its first stdout_max_bytes and says how much was cut.
TEST(Subprocess, StdoutFileIsBoundedAndTheCutMarked) {
  TempDir d;
  SubprocessOptions o;
  o.timeout_s = 60;
  o.stdout_path = (d.path / "stdout.txt").string();
  o.stdout_max_bytes = 1 << 20;
  auto r = run_command({"/bin/sh", "-c", "echo first; yes spam | head -c 30000000; exit 0"}, {}, o);
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited) << r.describe(60);
  EXPECT_TRUE(r.stdout_cut);
  const auto size = fs::file_size(o.stdout_path);
  EXPECT_GT(size, o.stdout_max_bytes);
  EXPECT_LT(size, o.stdout_max_bytes + 200);
  std::ifstream in(o.stdout_path);
  std::string first, text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("first\n", 0), 0u);
  EXPECT_NE(text.find("[attn-oracle: stdout cut after its first 1048576 bytes; 28951430 more bytes dropped]"),
            std::string::npos)
      << text.substr(text.size() - 200);
  o.stdout_max_bytes = 100;  // a short one is whole, unmarked
  auto small = run_command({"/bin/sh", "-c", "echo short"}, {}, o);
  EXPECT_FALSE(small.stdout_cut);
  EXPECT_EQ(fs::file_size(o.stdout_path), 6u);
}

// A command is given the message pipe (fd 3) and the chosen descriptors (4, ...) and nothing else.
TEST(Subprocess, CommandGetsExactlyTheDescriptorsItIsGiven) {
  TempDir d;
  std::ofstream(d.path / "given.txt") << "given";
  const int given = ::open((d.path / "given.txt").c_str(), O_RDONLY | O_CLOEXEC);
  const int other = ::fcntl(given, F_DUPFD, 20);  // no CLOEXEC: still not passed
  ASSERT_GE(given, 0);
  SubprocessOptions o;
  o.timeout_s = 20;
  o.command_message_fd = true;
  o.command_fds = {given};
  // (stat, not a directory listing: the shell's own descriptors would show in a listing)
  const std::string probe = fmt::format("cat <&4 >&3; for i in 5 6 7 8 9 10 11 12 {}; do [ -e /proc/$$/fd/$i ] && "
                                        "echo \"fd $i open\" >&2; done; [ -e /proc/$$/fd/4 ] || echo 'no fd 4' >&2; exit 0",
                                        other);
  auto r = run_command({"/bin/sh", "-c", probe}, {}, o);
  ::close(given);
  ::close(other);
  EXPECT_EQ(r.kind, SubprocessOutcome::Exited) << r.describe(20) << r.stderr_tail;
  EXPECT_EQ(r.message, "given");
  EXPECT_EQ(r.stderr_tail, "");
}
