#include "attn_oracle/internal/interrupt.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

// The work in flight, for the fatal-signal line: written by set_work_in_flight between runs, read by the
// handler (the length is set last, so a handler sees a whole string or none).
char g_work[4096];
volatile sig_atomic_t g_work_len = 0;
constexpr int kFatal[] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
struct sigaction g_previous[std::size(kFatal)];

void put(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w, n -= size_t(w);
  }
}

// Only async-signal-safe calls: write, strlen, sigaction, raise.
extern "C" void on_fatal_signal(int sig) {
  const char* name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGFPE ? "SIGFPE" : sig == SIGBUS ? "SIGBUS"
                     : sig == SIGILL ? "SIGILL" : "SIGABRT";
  static const char head[] = "\nattn-oracle: fatal signal ";
  put(head, sizeof head - 1);
  put(name, std::strlen(name));
  if (const size_t n = size_t(g_work_len); n > 0) {
    static const char mid[] = " while running ";
    put(mid, sizeof mid - 1);
    put(g_work, n);
  }
  put("\n", 1);
  for (size_t i = 0; i < std::size(kFatal); ++i)
    if (kFatal[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  raise(sig);  // the previous handler (a sanitizer's), else the default: death by this signal
}

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

void install_fatal_signal_report() {
  for (size_t i = 0; i < std::size(kFatal); ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;  // the re-raise inside the handler reaches the previous action at once
    sigaction(kFatal[i], &sa, &g_previous[i]);
  }
}

void set_work_in_flight(std::string_view what) {
  g_work_len = 0;
  const size_t n = std::min(what.size(), sizeof g_work);
  std::memcpy(g_work, what.data(), n);
  g_work_len = sig_atomic_t(n);
}

int interrupted() { return int(g_signal); }

void reset_interrupt() { g_signal = 0; }

void request_stop(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace ao
