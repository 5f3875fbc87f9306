// SIGINT/SIGTERM as a request to stop, not a death: the handler only records the signal, so a gate or
// fuzz run can finish its bookkeeping (kill the backend's process group, remove its case dir, write what
// finished as an interrupted report) and then exit 128 + signal.
//  * install_interrupt_handlers(): called once by the CLI before any case runs.
//  * interrupted(): polled by every loop that waits on foreign code or iterates over cases.
#pragma once

namespace ao {

void install_interrupt_handlers();
// 0 when no stop was requested; else the signal number (SIGINT or SIGTERM) of the first request.
int interrupted();
// Tests: forget a recorded request.
void reset_interrupt();

}  // namespace ao
