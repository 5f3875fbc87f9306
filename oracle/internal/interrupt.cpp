#include "attn_oracle/internal/interrupt.h"

#include <poll.h>
#include <signal.h>

#include <cerrno>

namespace ao {

namespace {
volatile sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

// SIGPIPE comes from a write to any pipe (stdout, or a pipe to a child that went away); only a stdout
// whose reader is gone (POLLERR on a pipe, POLLHUP on a socket) is a request to stop.
extern "C" void on_sigpipe(int) {
  const int saved = errno;
  struct pollfd p {};
  p.fd = 1;
  if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0 && g_signal == 0) g_signal = SIGPIPE;
  errno = saved;
}

// The write that went past RLIMIT_FSIZE fails with EFBIG; the writer reports it.
extern "C" void on_sigxfsz(int) {}

void set_handler(int sig, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and the caller looks at interrupted()
  sigaction(sig, &sa, nullptr);
}
}  // namespace

void install_interrupt_handlers() {
  set_handler(SIGINT, on_stop_signal);
  set_handler(SIGTERM, on_stop_signal);
  // SIGHUP ignored on entry is nohup's doing: the run is meant to outlive the terminal; keep it ignored.
  // (SIGINT ignored on entry, as a script's background jobs get it, is overridden as it always was.)
  struct sigaction old {};
  if (sigaction(SIGHUP, nullptr, &old) != 0 || old.sa_handler != SIG_IGN) set_handler(SIGHUP, on_stop_signal);
}

void install_write_error_handlers() {
  set_handler(SIGPIPE, on_sigpipe);
  set_handler(SIGXFSZ, on_sigxfsz);
}

int interrupted() { return int(g_signal); }

void reset_interrupt() { g_signal = 0; }

}  // namespace ao
