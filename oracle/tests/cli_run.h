// Test helper: run a shell command or the built attn-oracle (AO_CLI), capturing stdout+stderr and
// the exit code (-1 for a signal death); or run the CLI and measure its peak RSS.
#pragma once
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
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
