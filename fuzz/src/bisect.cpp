#include "attn_oracle/fuzz/bisect.h"

#include <sys/prctl.h>

#include <cstring>

#include <fmt/format.h>

#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/subprocess.h"

namespace ao {

namespace {

// What the child computes: the same verdict logic as `repro`, reduced to one line.
BisectOutcome run_in_child(const std::vector<Case>& cases, const BisectOptions& opt) {
  std::unique_ptr<Backend> be, vs;
  try {
    be = make_backend(opt.backend);
    vs = make_backend(opt.vs);
  } catch (const BadInput& e) {
    return {kBisectAbort, fmt::format("abort: {}", e.what())};
  } catch (const std::exception& e) {
    return {kBisectSkip, fmt::format("skip: backend {} could not be created: {}", opt.backend, e.what())};
  }
  std::vector<CaseResult> results;
  for (const auto& c : cases) {
    if (const int sig = interrupted()) return {kBisectAbort, fmt::format("abort: interrupted by signal {}", sig)};
    results.push_back(run_case(c, *be, *vs, opt.lim));
    const auto& r = results.back();
    // A plugin runs in a child of its own, so its crash arrives as an Error verdict (plugin_backend.cpp's
    // wording); --crash-is-skip treats it as the crash it is.
    const std::string& why = r.verdict.reason;
    if (opt.crash_is_skip && r.verdict.kind == Verdict::Error && why.rfind("plugin ", 0) == 0 &&
        (why.find(" crashed (signal ") != std::string::npos || why.find(" exited without a verdict") != std::string::npos))
      return {kBisectSkip, fmt::format("skip: {} ({}): {}", r.case_line, r.backend, why)};
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

// The verdict's code travels in the child's exit status, which no other process can forge: these
// values, not 0/1 (what a stray exit() of in-process code would give). The text line comes through the
// message pipe, which a backend may reach (a plugin host's reaper or an exec: process opening
// /proc/<pid>/fd as root); it is kept only when it is one line whose word matches the code.
constexpr int kChildGood = 81, kChildBad = 82, kChildSkip = 83, kChildAbort = 84;

struct VerdictCode {
  int bisect, child;
  const char* word;
};
constexpr VerdictCode kVerdictCodes[] = {{kBisectGood, kChildGood, "good"},
                                         {kBisectBad, kChildBad, "bad"},
                                         {kBisectSkip, kChildSkip, "skip"},
                                         {kBisectAbort, kChildAbort, "abort"}};

}  // namespace

BisectOutcome bisect_step(const std::vector<Case>& cases, const BisectOptions& opt) {
  SubprocessOptions so;
  so.timeout_s = opt.timeout_seconds;
  so.capture_stderr = false;
  // On the timeout the child gets SIGTERM as a stop request first, so that its own supervised
  // backends (exec:) are killed and their case directories removed; SIGKILL follows after the grace.
  so.child_handles_stop = true;
  so.kill_grace_s = 3;
  const SubprocessOutcome r = run_forked(
      [&](int fd) {
        // Not dumpable: /proc/<pid>/fd and /proc/<pid>/mem of this process (and of the reapers it forks)
        // are closed to the processes of ordinary users, so a backend cannot open the message pipe.
        ::prctl(PR_SET_DUMPABLE, 0);
        BisectOutcome o;
        try {
          o = run_in_child(cases, opt);
        } catch (const std::exception& e) {
          o = {kBisectBad, fmt::format("bad: exception escaped the backend: {}", e.what())};
        }
        int child = kChildBad;
        for (const auto& v : kVerdictCodes)
          if (v.bisect == o.code) child = v.child;
        std::string line = o.line;
        for (char& ch : line)
          if (ch == '\n' || ch == '\r') ch = ' ';  // one line: the parent refuses anything else
        const std::string msg = fmt::format("{}\n{}", o.code, line);
        write_all(fd, msg.data(), msg.size());
        return child;
      },
      so);
  const char* crash_word = opt.crash_is_skip ? "skip" : "bad";
  const int crash_code = opt.crash_is_skip ? kBisectSkip : kBisectBad;
  switch (r.kind) {
    case SubprocessOutcome::TimedOut:
      return {kBisectBad, fmt::format("bad: {} timed out after {:g} s (hang)", opt.backend, opt.timeout_seconds)};
    case SubprocessOutcome::Interrupted:
      return {kBisectAbort, fmt::format("abort: interrupted by signal {}", r.code)};
    case SubprocessOutcome::NotStarted: return {kBisectSkip, "skip: " + r.describe(opt.timeout_seconds)};
    case SubprocessOutcome::Signaled:
      return {crash_code, fmt::format("{}: {} crashed (signal {}, {}{})", crash_word, opt.backend, r.code, strsignal(r.code),
                                      r.error.empty() ? "" : "; " + r.error)};
    case SubprocessOutcome::Exited: break;
  }
  const VerdictCode* v = nullptr;
  for (const auto& c : kVerdictCodes)
    if (c.child == r.code) v = &c;
  if (!v)
    return {crash_code, fmt::format("{}: {} exited without a verdict (exit status {})", crash_word, opt.backend, r.code)};
  // The line: exactly "<code>\n<word>: <text>" with this code and word, one line; else the harness's own.
  const std::string want = fmt::format("{}\n{}: ", v->bisect, v->word);
  if (r.message.rfind(want, 0) == 0 && !r.message_truncated &&
      r.message.find_first_of("\n\r", want.size()) == std::string::npos)
    return {v->bisect, r.message.substr(want.size() - 2 - std::strlen(v->word))};
  return {v->bisect, fmt::format("{}: {} vs {} (the step's text was unreadable; its exit status says {})", v->word,
                                 opt.backend, opt.vs, v->word)};
}

}  // namespace ao
