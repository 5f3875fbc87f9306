// Test helper: run a shell command or the built attn-oracle (AO_CLI), capturing stdout+stderr and
// the exit code (-1 for a signal death); start the CLI in the background (start_cli) to signal it; or
// run the CLI and measure its peak RSS.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

namespace ao::test {

struct Cmd {
  int code;
  std::string out;
};

inline Cmd run_sh(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = p ? pclose(p) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline Cmd run_cli(const std::string& args) { return run_sh(std::string(AO_CLI) + " " + args); }

// The CLI running in the background: pid is attn-oracle itself (the shell execs it), out_fd reads
// its stdout+stderr.
struct BackgroundCli {
  pid_t pid = -1;
  int out_fd = -1;
};

inline BackgroundCli start_cli(const std::string& args) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    // Default stop signals, as a shell's foreground command gets them: a test binary started in the
    // background of a script has SIGINT ignored, and the CLI keeps a signal ignored on entry.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    const std::string cmd = "exec " + std::string(AO_CLI) + " " + args;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return {};
  }
  return {pid, fds[0]};
}

// Collects its output until it exits; after timeout_s it is killed (SIGKILL: code -1).
inline Cmd finish_cli(BackgroundCli& b, double timeout_s) {
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  char buf[4096];
  bool killed = false;
  for (;;) {
    pollfd p{b.out_fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t n = read(b.out_fd, buf, sizeof buf);
      if (n == 0) break;
      if (n > 0) out.append(buf, size_t(n));
    }
    if (!killed && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      kill(b.pid, SIGKILL);
      killed = true;
    }
  }
  close(b.out_fd);
  int st = 0;
  waitpid(b.pid, &st, 0);
  b = {};
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// A case line's words (single spaces), as argv entries for run_cli_measured.
inline std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> v;
  size_t i = 0;
  while (i < line.size()) {
    const size_t j = line.find(' ', i);
    v.push_back(line.substr(i, j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return v;
}

struct ChildRun {
  int rc = -1;
  int64_t max_rss_bytes = 0;
};

// Runs the CLI with stdout/stderr discarded; the peak RSS is the child's own (wait4).
inline ChildRun run_cli_measured(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string exe = AO_CLI;
  argv.push_back(exe.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int dn = open("/dev/null", O_WRONLY);
    dup2(dn, 1);
    dup2(dn, 2);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  ChildRun r;
  int st = 0;
  struct rusage ru {};
  if (pid > 0 && wait4(pid, &st, 0, &ru) == pid) {
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.max_rss_bytes = int64_t(ru.ru_maxrss) * 1024;
  }
  return r;
}

}  // namespace ao::test
