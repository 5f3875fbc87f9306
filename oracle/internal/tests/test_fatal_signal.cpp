// install_fatal_signal_report: a fatal signal in the harness (an in-process GPU library dividing by zero,
// as cuDNN 9.14's backward did on the H200) names the work in flight on stderr, then still kills the
// process by that signal (or through the handler that was there before, e.g. a sanitizer's).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "attn_oracle/internal/interrupt.h"

namespace {

struct Death {
  std::string err;
  int status = 0;
};

// Runs `body` in a child whose stderr is captured; returns what it wrote and how it ended.
template <class F>
Death in_child(F body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  Death d;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) d.err.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(pid, &d.status, 0);
  return d;
}

}  // namespace

TEST(FatalSignal, NamesTheWorkInFlightAndStillDies) {
  for (int sig : {SIGFPE, SIGSEGV, SIGABRT}) {
    const Death d = in_child([sig] {
      ao::install_fatal_signal_report();
      ao::set_work_in_flight("cudnn-sdpa on op=sdpa docs=7,1,1 q_pad=1,3,3 cp=2 pass=bwd");
      ::raise(sig);
    });
    const std::string name = sig == SIGFPE ? "SIGFPE" : sig == SIGSEGV ? "SIGSEGV" : "SIGABRT";
    EXPECT_NE(d.err.find("attn-oracle: fatal signal " + name +
                         " while running cudnn-sdpa on op=sdpa docs=7,1,1 q_pad=1,3,3 cp=2 pass=bwd\n"),
              std::string::npos)
        << d.err;
    // Dead by the signal (a sanitizer's handler, when one was installed first, exits non-zero instead).
    EXPECT_TRUE((WIFSIGNALED(d.status) && WTERMSIG(d.status) == sig) ||
                (WIFEXITED(d.status) && WEXITSTATUS(d.status) != 0))
        << d.status;
  }
}

TEST(FatalSignal, NoWorkNoClaimAndLongWorkIsCut) {
  const Death idle = in_child([] {
    ao::install_fatal_signal_report();
    ao::set_work_in_flight("gate case");
    ao::set_work_in_flight("");
    ::raise(SIGFPE);
  });
  EXPECT_NE(idle.err.find("attn-oracle: fatal signal SIGFPE\n"), std::string::npos) << idle.err;
  EXPECT_EQ(idle.err.find("while running"), std::string::npos) << idle.err;
  const Death big = in_child([] {
    ao::install_fatal_signal_report();
    ao::set_work_in_flight(std::string(10000, 'x'));
    ::raise(SIGFPE);
  });
  EXPECT_NE(big.err.find(" while running " + std::string(4096, 'x') + "\n"), std::string::npos);
}
