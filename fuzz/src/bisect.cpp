#include "attn_oracle/bisect.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace ao {

namespace {

// What the child computes: the same verdict logic as `repro`, reduced to one line.
BisectOutcome run_in_child(const std::vector<Case>& cases, const BisectOptions& opt) {
  std::unique_ptr<Backend> be, vs;
  try {
    be = make_backend(opt.backend);
    vs = make_backend(opt.vs);
  } catch (const CaseError& e) {
    return {kBisectAbort, fmt::format("abort: {}", e.what())};
  } catch (const std::exception& e) {
    return {kBisectSkip, fmt::format("skip: backend {} could not be created: {}", opt.backend, e.what())};
  }
  std::vector<CaseResult> results;
  for (const auto& c : cases) {
    results.push_back(run_case(c, *be, *vs, opt.lim));
    const auto& r = results.back();
    if (r.verdict.kind == Verdict::Fail || r.verdict.kind == Verdict::Error)
      return {kBisectBad, fmt::format("bad: {} ({}): {}", r.case_line, r.backend,
                                      r.verdict.reason.empty() ? verdict_name(r.verdict.kind) : r.verdict.reason)};
  }
  const int code = exit_code(results);
  if (code == 125) {
    std::string why = results.empty() ? "no cases" : results.front().verdict.reason;
    return {kBisectSkip, fmt::format("skip: nothing ran ({})", why)};
  }
  return {kBisectGood, fmt::format("good: {} case(s) passed with {} vs {}", results.size(), opt.backend, opt.vs)};
}

}  // namespace

BisectOutcome bisect_step(const std::vector<Case>& cases, const BisectOptions& opt) {
  int fds[2];
  if (pipe(fds) != 0) return {kBisectSkip, fmt::format("skip: pipe failed: {}", std::strerror(errno))};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return {kBisectSkip, fmt::format("skip: fork failed: {}", std::strerror(errno))};
  if (pid == 0) {
    close(fds[0]);
    BisectOutcome o;
    try {
      o = run_in_child(cases, opt);
    } catch (const std::exception& e) {
      o = {kBisectBad, fmt::format("bad: exception escaped the backend: {}", e.what())};
    }
    std::string msg = fmt::format("{}\n{}", o.code, o.line);
    ssize_t left = ssize_t(msg.size());
    const char* p = msg.data();
    while (left > 0) {
      const ssize_t n = write(fds[1], p, size_t(left));
      if (n <= 0) break;
      p += n;
      left -= n;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  bool timed_out = false;
  for (;;) {
    const double left = opt.timeout_seconds -
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt.timeout_seconds > 0 && left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ms = opt.timeout_seconds > 0 ? int(std::min(left * 1000.0, 1000.0)) + 1 : 1000;
    const int pr = poll(&pfd, 1, ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // EOF: the child closed its end (finished or died)
    msg.append(buf, size_t(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return {kBisectBad, fmt::format("bad: {} timed out after {:g} s (hang)", opt.backend, opt.timeout_seconds)};
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {opt.crash_is_skip ? kBisectSkip : kBisectBad,
            fmt::format("{}: {} crashed (signal {}, {})", opt.crash_is_skip ? "skip" : "bad", opt.backend, sig,
                        strsignal(sig))};
  }
  const auto nl = msg.find('\n');
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || nl == std::string::npos)
    return {opt.crash_is_skip ? kBisectSkip : kBisectBad,
            fmt::format("{}: {} exited without a verdict (exit status {})", opt.crash_is_skip ? "skip" : "bad",
                        opt.backend, WIFEXITED(status) ? WEXITSTATUS(status) : -1)};
  BisectOutcome o;
  o.code = std::atoi(msg.substr(0, nl).c_str());
  o.line = msg.substr(nl + 1);
  return o;
}

}  // namespace ao
