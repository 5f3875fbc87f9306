#include "attn_oracle/internal/interrupt.h"

#include <signal.h>

namespace ao {

namespace {
volatile sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and the caller looks at interrupted()
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupted() { return int(g_signal); }

void reset_interrupt() { g_signal = 0; }

}  // namespace ao
