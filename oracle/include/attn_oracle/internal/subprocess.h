// The one supervisor for child processes (exec: commands, plugin: libraries, the bisect-run step,
// cp-run's rank processes): nothing the child does can kill, hang or outlive the harness.
//  * The child runs under a small reaper process of ours: the reaper leads a new process group and is
//    a child subreaper (PR_SET_CHILD_SUBREAPER), so descendants that leave the group (setsid, double
//    fork) are re-parented to it. When the child ends (or on a stop), the reaper kills the group and
//    then every process re-parented to it, reaps them all and reports the child's wait status. That
//    status is the reaper's own exit status (an exit code passed on, a signal re-raised), never bytes
//    from a pipe: the child's descendants can open the supervisor's pipes through /proc/<pid>/fd.
//  * The harness is a child subreaper too, so a reaper that is killed (by the child or anything it
//    started) cannot set descendants free: they are re-parented to the harness, which then kills and
//    reaps every child of its own that is not one of its live reapers (and does so again at exit). The
//    child itself dies with its reaper (PR_SET_PDEATHSIG) and the outcome is Signaled (SIGKILL) with
//    `error` saying the supervisor was killed: never a "could not start".
//  * The wait polls: a timeout or a stop request (ao::interrupted()) sends the reaper SIGTERM (group
//    SIGTERM, then SIGKILL after a grace period, then the sweep); the outcome says TimedOut/Interrupted.
//  * stderr is drained while the child runs and only its last bytes are kept (bounded memory); stdout
//    into a file is drained by the harness too and cut after its first stdout_max_bytes.
//  * A forked body gets a message pipe for its result; the parent reads it whole (bounded).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "attn_oracle/internal/write_all.h"  // write_all, used by every writer of a supervised process

namespace ao {

struct SubprocessOptions {
  double timeout_s = 0;               // 0: no limit
  bool capture_stderr = true;         // false: the child writes to the harness's stdout/stderr
  std::string stdout_path;            // with capture_stderr: a file for stdout ("" = into the stderr tail)
  // stdout_path: the file keeps the first this many bytes, then one line saying how much was cut. The
  // head, not the tail: a runaway writer repeats itself, and what it printed first (a banner, the first
  // error) is what explains the run; the stderr tail already keeps the end of the other stream.
  size_t stdout_max_bytes = size_t(16) << 20;
  size_t stderr_tail_bytes = 16384;   // at most this much of the end of stderr is kept
  size_t message_max_bytes = 1 << 20; // a longer message is cut (message_truncated)
  double kill_grace_s = 2;            // on a stop: SIGTERM to the group, SIGKILL after this many seconds
  // Forked bodies only: SIGINT/SIGTERM dispositions in the child. false: default (a stop kills it);
  // true: ao::interrupted() records them, so the body can clean up (it must then exit by itself).
  bool child_handles_stop = false;
  // run_command only: the message pipe becomes fd 3 of the command, and command_fds (the harness's
  // descriptors, in order) become fds 4, 5, ...; every other descriptor is closed before the exec.
  bool command_message_fd = false;
  std::vector<int> command_fds;
};

struct SubprocessOutcome {
  enum Kind { Exited, Signaled, TimedOut, Interrupted, NotStarted } kind = NotStarted;
  int code = 0;           // Exited: the exit status; Signaled: the signal; Interrupted: the stop signal
  std::string stderr_tail;  // the last bytes of stderr (whole UTF-8 characters at the cut)
  bool stderr_cut = false;  // more was written than stderr_tail holds
  bool stdout_cut = false;  // stdout_path: more was written than stdout_max_bytes
  std::string message;      // what a forked body wrote to its message fd
  bool message_truncated = false;
  std::string error;        // NotStarted: why; Signaled: set when the supervising process was killed
  double seconds = 0;
  // "exited with status 3", "killed by signal 11 (Segmentation fault)", "timed out after 5 s (...)",
  // "interrupted by signal 2 (...)", "could not start: ...".
  std::string describe(double timeout_s) const;
};

// Runs argv[0] (a path, no search) with argv, the environment plus extra_env ("K=V", overriding),
// stdin /dev/null.
SubprocessOutcome run_command(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                              const SubprocessOptions& opt);

struct CommandLine {
  std::vector<std::string> argv, extra_env;  // as for run_command
};

// Runs every command at once, each supervised as run_command does (its own reaper and process group,
// the timeout, the output caps). The first that does not exit with status 0 stops the others: they
// end as Interrupted with code 0 ("stopped because another process of its set failed"). Outcomes in
// the order given. For sets of processes that work together (cp-run's ranks).
std::vector<SubprocessOutcome> run_commands_together(const std::vector<CommandLine>& cmds,
                                                     const SubprocessOptions& opt);

// Forks; the child runs body(message_fd) and _exits with its return value (an escaping exception:
// 70). stdin is /dev/null. The body may use anything the harness has (it is a copy of it).
SubprocessOutcome run_forked(const std::function<int(int message_fd)>& body, const SubprocessOptions& opt);

// Reads a positive number of seconds from the environment variable `name` (unset or empty: fallback);
// throws BadInput(name, value, ...) for anything else.
double seconds_from_env(const char* name, double fallback);

}  // namespace ao
