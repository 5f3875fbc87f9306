// Test helper: run a shell command or the built attn-oracle (AO_CLI), capturing stdout+stderr and
// the exit code (-1 for a signal death).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>

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

}  // namespace ao::test
