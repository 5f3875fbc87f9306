// SIGINT/SIGTERM/SIGHUP as a request to stop, not a death: the handler only records the signal, so a
// command can finish its bookkeeping (kill the backend's process group, remove its case dir, write what
// finished as an interrupted report, print its summary) and then exit 128 + signal.
//  * install_interrupt_handlers(): called by the CLI before any case runs, for every command that runs
//    backends (gate, fuzz, repro, explain, shrink). SIGHUP ignored on entry stays ignored (`nohup`
//    ignores it so the run outlives the terminal).
//  * install_write_error_handlers(): called by the CLI at start, for every command. A write to a closed
//    pipe or past RLIMIT_FSIZE fails with EPIPE / EFBIG (a reported write error) instead of killing the
//    harness by SIGPIPE / SIGXFSZ. A closed stdout (`gate ... | head -1`) is also recorded as a stop
//    request (SIGPIPE), so a run whose output nobody reads ends soon, with its report files written.
//    Handlers, not SIG_IGN: an exec'ed backend starts with the default dispositions.
//  * interrupted(): polled by every loop that waits on foreign code or iterates over cases.
//  * install_fatal_signal_report(): called by the CLI at start. A fatal signal in the harness itself
//    (SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT: an in-process backend such as a GPU library crashing)
//    first writes "attn-oracle: fatal signal <NAME> while running <work>" to stderr, with the work
//    set_work_in_flight last named (Trial::run: the backend and the case line), then dies by that signal
//    through the handler that was there before (a sanitizer's report, else the default action). A fuzz
//    campaign's summary comes at its end; this line is what names the case that killed it.
#pragma once
#include <string_view>

namespace ao {

void install_interrupt_handlers();
void install_write_error_handlers();
// 0 when no stop was requested; else the signal number (SIGINT, SIGTERM, SIGHUP, or SIGPIPE for a closed
// stdout) of the first request.
int interrupted();
// Tests, and a caller in process between its runs (the Python face): forget a recorded request.
void reset_interrupt();
// A stop request that came another way than a signal to this process: the Python face's KeyboardInterrupt
// raised in a kernel (Python's own SIGINT handler took the signal). Polled like a signal's.
void request_stop(int sig);

void install_fatal_signal_report();
// What the harness is running now (cut at 4 KiB); "" for nothing.
void set_work_in_flight(std::string_view what);

}  // namespace ao
