// The subprocess supervisor (subprocess.h): harness -> reaper (group of its own child, subreaper) -> child.
#include "attn_oracle/internal/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/internal/bad_input.h"
#include "attn_oracle/internal/interrupt.h"

extern char** environ;

namespace ao {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_ms(int ms) {
  timespec ts{0, long(ms) * 1000000L};
  ::nanosleep(&ts, nullptr);
}

// Pipe creation, fork and the closing of the parent's write ends, one supervision at a time: a reaper
// forked by another thread meanwhile would hold this one's write ends (no EOF until it ends). A plain
// pthread mutex: the reaper is forked while it is held and gives itself (and the child, which may
// supervise again: bisect-run's child runs exec: backends) a fresh one.
pthread_mutex_t g_start_mutex = PTHREAD_MUTEX_INITIALIZER;

class StartLock {
 public:
  StartLock() { ::pthread_mutex_lock(&g_start_mutex); }
  ~StartLock() { unlock(); }
  void unlock() {
    if (held_) ::pthread_mutex_unlock(&g_start_mutex);
    held_ = false;
  }

 private:
  bool held_ = true;
};

// ---- the harness as subreaper ----
// Reapers forked by this process and not yet reaped (guarded by g_start_mutex): every other child of
// the harness that a sweep finds is a descendant set free by a killed reaper.
std::vector<pid_t> g_reapers;
pid_t g_subreaper_of = 0;  // the pid that made itself subreaper (a fork must do it again)

// The pids listed in one /proc/<pid>/task/<tid>/children file, at most `max` of them, into `out`: how
// many, or -1 when the file cannot be opened. Plain system calls only (the reaper calls it in a fork).
int read_children_file(const char* path, pid_t* out, int max) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[16384];
  size_t len = 0;
  ssize_t r;
  while (len < sizeof buf - 1 && (r = ::read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += size_t(r);
  ::close(fd);
  buf[len] = 0;
  int n = 0;
  for (char* p = buf; *p && n < max;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) break;
    out[n++] = pid_t(v);
    p = end;
  }
  return n;
}

// Children of this process across all its threads (a re-parented orphan goes to any live thread).
int list_own_children(pid_t* out, int max) {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
    n += std::max(0, read_children_file(path, out + n, max - n));
  }
  ::closedir(d);
  return n;
}

// Kills and reaps every child of the harness that is not a live reaper. settle_ms: how long to keep
// looking once none is found (descendants of a killed process arrive as it dies). at_exit: another
// thread may still hold the start lock; then the sweep is left out rather than waited for.
void sweep_strays(int settle_ms, bool at_exit = false) {
  pid_t kids[1024];
  for (int quiet = 0; quiet * 5 <= settle_ms;) {
    int strays = 0;
    {
      if (at_exit) {
        if (::pthread_mutex_trylock(&g_start_mutex) != 0) return;
      } else {
        ::pthread_mutex_lock(&g_start_mutex);
      }
      const int n = list_own_children(kids, 1024);
      for (int i = 0; i < n; ++i)
        if (std::find(g_reapers.begin(), g_reapers.end(), kids[i]) == g_reapers.end()) kids[strays++] = kids[i];
      for (int i = 0; i < strays; ++i) ::kill(kids[i], SIGKILL);  // our child: its pid cannot be reused yet
      ::pthread_mutex_unlock(&g_start_mutex);
    }
    for (int i = 0; i < strays; ++i)
      while (::waitpid(kids[i], nullptr, 0) < 0 && errno == EINTR) {
      }
    if (strays == 0) {
      if (settle_ms == 0) return;
      ++quiet;
      sleep_ms(5);
    }
  }
}

extern "C" void sweep_strays_at_exit() {
  if (g_subreaper_of == ::getpid()) sweep_strays(0, true);
}

// Under g_start_mutex.
void become_subreaper() {
  if (g_subreaper_of == ::getpid()) return;
  static bool at_exit = false;
  if (!at_exit) at_exit = std::atexit(sweep_strays_at_exit) == 0;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0) g_subreaper_of = ::getpid();
}

// ---- the reaper (runs in a fork of the harness; keeps to plain system calls) ----

volatile sig_atomic_t g_reaper_stop = 0;
extern "C" void on_reaper_stop(int) { g_reaper_stop = 1; }

// Children of this (single-threaded) process: /proc/self/task/<pid>/children, else a scan of /proc.
int list_children(pid_t* out, int max) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/children", int(::getpid()));
  if (const int listed = read_children_file(path, out, max); listed >= 0) return listed;
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    if (n >= max || e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char stat_path[300], buf[512];
    std::snprintf(stat_path, sizeof stat_path, "/proc/%s/stat", e->d_name);
    const int fd = ::open(stat_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t r = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (r <= 0) continue;
    buf[r] = 0;
    const char* rp = std::strrchr(buf, ')');  // "pid (comm) state ppid ...": comm may hold anything
    int ppid = 0;
    char state = 0;
    if (rp && std::sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self) out[n++] = pid_t(std::atoi(e->d_name));
  }
  ::closedir(d);
  return n;
}

// Kills and reaps every process re-parented to the reaper, until none is left.
void sweep_descendants() {
  pid_t kids[1024];
  for (int unlisted = 0; unlisted < 200;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    const int n = list_children(kids, 1024);
    if (n <= 0) {
      if (::waitpid(-1, nullptr, WNOHANG) != 0) return;  // ECHILD: none left
      ++unlisted;  // a child that the listing missed (just re-parented): look again
      sleep_ms(5);
      continue;
    }
    for (int i = 0; i < n; ++i) ::kill(kids[i], SIGKILL);
    while (::waitpid(-1, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

struct Pipes {
  int err[2] = {-1, -1}, msg[2] = {-1, -1}, status[2] = {-1, -1}, out[2] = {-1, -1}, go[2] = {-1, -1};
  void close_all() {
    for (int* p : {err, msg, status, out, go})
      for (int i = 0; i < 2; ++i)
        if (p[i] >= 0) ::close(p[i]), p[i] = -1;
  }
};

using ChildMain = std::function<void(int message_fd)>;  // never returns

[[noreturn]] void run_child(const ChildMain& main, Pipes& p, const SubprocessOptions& opt) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the reaper went away (killed by the harness's last resort)
  // Nothing runs before the reaper has written the child's pid: the first record of the status pipe
  // is the reaper's, whatever the child's descendants later write into it through /proc.
  ::close(p.go[1]);
  char go = 0;
  while (::read(p.go[0], &go, 1) < 0 && errno == EINTR) {
  }
  ::close(p.go[0]);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, 0);
  if (opt.capture_stderr) {
    ::dup2(p.out[1] >= 0 ? p.out[1] : p.err[1], 1);
    ::dup2(p.err[1], 2);
  }
  if (p.out[1] >= 0) ::close(p.out[1]), ::close(p.out[0]);
  ::close(p.err[1]);
  ::close(p.err[0]);
  ::close(p.msg[0]);
  ::close(p.status[0]);
  ::close(p.status[1]);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigaction(SIGTERM, &dfl, nullptr);
  if (opt.child_handles_stop) {
    reset_interrupt();
    install_interrupt_handlers();
  }
  main(p.msg[1]);
  ::_exit(127);
}

[[noreturn]] void run_reaper(const ChildMain& main, Pipes& p, const SubprocessOptions& opt, pid_t harness) {
  const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;  // ours is held by the thread that forked us
  std::memcpy(&g_start_mutex, &fresh, sizeof fresh);
  g_reapers.clear();  // the harness's, not ours (the child may supervise again)
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the harness died: clean up all the same
  struct sigaction sa {};
  sa.sa_handler = on_reaper_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::getppid() != harness) g_reaper_stop = 1;
  ::close(p.err[0]);
  ::close(p.msg[0]);
  ::close(p.status[0]);
  if (p.out[0] >= 0) ::close(p.out[0]), p.out[0] = -1;
  const pid_t c = ::fork();
  if (c == 0) run_child(main, p, opt);
  ::close(p.go[0]);
  ::close(p.err[1]);
  ::close(p.msg[1]);
  if (p.out[1] >= 0) ::close(p.out[1]);
  const int32_t started = c > 0 ? int32_t(c) : -int32_t(errno);
  write_all(p.status[1], &started, sizeof started);
  ::close(p.go[1]);  // the child may start
  if (c < 0) ::_exit(0);
  ::setpgid(c, c);  // (also done by the child: whichever runs first)
  int st = 0;
  bool stopping = false;
  double deadline = 0;
  // Polls (1 ms rising to 10 ms) rather than blocking in waitpid: a stop signal that lands between the
  // flag check and a blocking wait would otherwise go unnoticed until the child ends by itself.
  for (int nap = 1;; nap = std::min(nap * 2, 10)) {
    if (g_reaper_stop && !stopping) {
      stopping = true;
      ::kill(-c, SIGTERM);
      ::kill(c, SIGTERM);
      deadline = now_s() + opt.kill_grace_s;
    }
    const pid_t w = ::waitpid(c, &st, WNOHANG);
    if (w == c) break;
    if (w < 0 && errno != EINTR) break;
    if (stopping && now_s() > deadline) {
      ::kill(-c, SIGKILL);
      ::kill(c, SIGKILL);
      while (::waitpid(c, &st, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    sleep_ms(nap);
  }
  ::kill(-c, SIGKILL);  // what the child left in its group
  sweep_descendants();  // and everything that left the group (setsid, double fork)
  const int32_t rec[2] = {int32_t(st), int32_t(stopping)};
  write_all(p.status[1], rec, sizeof rec);
  // The child's wait status is also the reaper's own: the one record no other process can write (the
  // status pipe can be opened through /proc/<pid>/fd). An exit code is passed on; a signal is re-raised.
  if (WIFSIGNALED(st)) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(WTERMSIG(st), SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, WTERMSIG(st));
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(WTERMSIG(st));
    ::kill(::getpid(), SIGKILL);  // a signal that does not end a process by default
  }
  ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 0);
}

// ---- the harness side ----

void append_bounded(std::string& s, const char* data, size_t n, size_t keep, bool& cut) {
  s.append(data, n);
  if (s.size() > 2 * keep + 65536) {
    s.erase(0, s.size() - keep);
    cut = true;
  }
}

// Reads what is available; false at EOF (or an error).
bool drain(int fd, std::string& into, size_t keep, bool& cut, bool tail) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      if (tail) {
        append_bounded(into, buf, size_t(n), keep, cut);
      } else {
        const size_t room = into.size() < keep ? keep - into.size() : 0;
        into.append(buf, std::min(room, size_t(n)));
        if (size_t(n) > room) cut = true;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}


// stop (may be null): set by another thread to end the child as an interrupt does (Interrupted, code 0).
SubprocessOutcome supervise(const ChildMain& main, const SubprocessOptions& opt,
                            const std::atomic<bool>* stop = nullptr) {
  SubprocessOutcome r;
  if (const int sig = interrupted()) {
    r.kind = SubprocessOutcome::Interrupted;
    r.code = sig;
    return r;
  }
  // stdout into a file goes through the harness, which keeps its head (stdout_max_bytes).
  struct OutFile {
    int fd = -1;
    ~OutFile() {
      if (fd >= 0) ::close(fd);
    }
  } out_file;
  const bool to_file = opt.capture_stderr && !opt.stdout_path.empty();
  if (to_file) {
    out_file.fd = ::open(opt.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_file.fd < 0) {
      r.error = fmt::format("cannot open {}: {}", opt.stdout_path, std::strerror(errno));
      return r;
    }
  }
  StartLock starting;
  become_subreaper();
  Pipes p;
  if (::pipe2(p.err, O_CLOEXEC) != 0 || ::pipe2(p.msg, O_CLOEXEC) != 0 || ::pipe2(p.status, O_CLOEXEC) != 0 ||
      ::pipe2(p.go, O_CLOEXEC) != 0 || (to_file && ::pipe2(p.out, O_CLOEXEC) != 0)) {
    r.error = fmt::format("pipe: {}", std::strerror(errno));
    p.close_all();
    return r;
  }
  std::fflush(nullptr);
  const double t0 = now_s();
  const pid_t harness = ::getpid();
  const pid_t reaper = ::fork();
  if (reaper == 0) run_reaper(main, p, opt, harness);
  if (reaper < 0) {
    r.error = fmt::format("fork: {}", std::strerror(errno));
    p.close_all();
    return r;
  }
  g_reapers.push_back(reaper);
  ::close(p.go[0]), p.go[0] = -1;
  ::close(p.go[1]), p.go[1] = -1;
  ::close(p.err[1]), p.err[1] = -1;
  ::close(p.msg[1]), p.msg[1] = -1;
  ::close(p.status[1]), p.status[1] = -1;
  if (p.out[1] >= 0) ::close(p.out[1]), p.out[1] = -1;
  starting.unlock();
  for (int fd : {p.err[0], p.msg[0], p.status[0], p.out[0]})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  size_t out_written = 0, out_dropped = 0;
  auto drain_out = [&] {  // false at EOF
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(p.out[0], buf, sizeof buf);
      if (n > 0) {
        const size_t keep = std::min(size_t(n), opt.stdout_max_bytes - std::min(opt.stdout_max_bytes, out_written));
        if (keep > 0 && !write_all(out_file.fd, buf, keep)) out_dropped += keep;  // (a full disk: counted as cut)
        else out_written += keep;
        out_dropped += size_t(n) - keep;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  };
  bool out_open = p.out[0] >= 0;

  std::string status;
  bool err_open = true, msg_open = true, status_open = true, status_cut = false;
  int stop_sig = 0;
  bool timed_out = false, stopped = false;
  double hard_deadline = 0;
  bool reaper_killed = false;
  while (status_open) {
    const double t = now_s();
    if (!stop_sig && !timed_out && !stopped) {
      if (opt.timeout_s > 0 && t - t0 > opt.timeout_s) timed_out = true;
      else if (const int s = interrupted()) stop_sig = s;
      else if (stop && stop->load()) stopped = true;
      if (timed_out || stop_sig || stopped) {
        ::kill(reaper, SIGTERM);
        hard_deadline = t + opt.kill_grace_s + 5;
      }
    } else if (t > hard_deadline) {  // the reaper does not answer: last resort
      ::kill(reaper, SIGKILL);
      if (status.size() >= 4) {
        int32_t c = 0;
        std::memcpy(&c, status.data(), 4);
        if (c > 0) ::kill(-c, SIGKILL);
      }
      reaper_killed = true;
      break;
    }
    pollfd fds[4];
    nfds_t n = 0;
    if (err_open) fds[n++] = {p.err[0], POLLIN, 0};
    if (msg_open) fds[n++] = {p.msg[0], POLLIN, 0};
    if (out_open) fds[n++] = {p.out[0], POLLIN, 0};
    fds[n++] = {p.status[0], POLLIN, 0};
    int wait_ms = 100;
    if (opt.timeout_s > 0 && !timed_out && !stop_sig && !stopped)
      wait_ms = std::clamp(int(std::ceil((t0 + opt.timeout_s - t) * 1000)), 1, 100);
    if (::poll(fds, n, wait_ms) < 0 && errno != EINTR) break;
    if (err_open) err_open = drain(p.err[0], r.stderr_tail, opt.stderr_tail_bytes, r.stderr_cut, true);
    if (msg_open) msg_open = drain(p.msg[0], r.message, opt.message_max_bytes, r.message_truncated, false);
    if (out_open) out_open = drain_out();
    status_open = drain(p.status[0], status, 64, status_cut, false);
  }
  int rst = 0;
  while (::waitpid(reaper, &rst, 0) < 0 && errno == EINTR) {
  }
  {
    StartLock forget;
    g_reapers.erase(std::find(g_reapers.begin(), g_reapers.end(), reaper));
  }
  // A reaper that ended without its report was killed: its child dies with it (PR_SET_PDEATHSIG) and
  // everything below is re-parented to the harness; end them here.
  // (The pipe's final record only hints at this: its wait status below is the truth.)
  const bool reaper_lost = status.size() < 12 || reaper_killed;
  if (reaper_lost) sweep_strays(200);
  else if (WIFSIGNALED(rst)) sweep_strays(0);
  // Every writer is gone now (the reaper killed them); take what is left in the pipes.
  if (err_open) drain(p.err[0], r.stderr_tail, opt.stderr_tail_bytes, r.stderr_cut, true);
  if (msg_open) drain(p.msg[0], r.message, opt.message_max_bytes, r.message_truncated, false);
  if (out_open) drain_out();
  drain(p.status[0], status, 64, status_cut, false);
  p.close_all();
  if (out_dropped > 0) {
    r.stdout_cut = true;
    const std::string mark = fmt::format("\n[attn-oracle: stdout cut after its first {} bytes; {} more bytes dropped]\n",
                                         out_written, out_dropped);
    write_all(out_file.fd, mark.data(), mark.size());
  }
  r.seconds = now_s() - t0;

  if (r.stderr_tail.size() > opt.stderr_tail_bytes) {
    r.stderr_tail.erase(0, r.stderr_tail.size() - opt.stderr_tail_bytes);
    r.stderr_cut = true;
  }
  if (r.stderr_cut) {  // start at a whole UTF-8 character
    size_t skip = 0;
    while (skip < 3 && skip < r.stderr_tail.size() && (static_cast<unsigned char>(r.stderr_tail[skip]) & 0xC0) == 0x80) ++skip;
    r.stderr_tail.erase(0, skip);
  }
  int32_t started = 0;
  if (status.size() >= 4) std::memcpy(&started, status.data(), 4);
  if (timed_out || stop_sig || stopped) {
    r.kind = timed_out ? SubprocessOutcome::TimedOut : SubprocessOutcome::Interrupted;
    r.code = stop_sig;
    return r;
  }
  if (started < 0) {
    r.error = fmt::format("fork: {}", std::strerror(-started));
    return r;
  }
  if (reaper_lost && started > 0) {  // the child ran and was killed with its reaper
    r.kind = SubprocessOutcome::Signaled;
    r.code = SIGKILL;
    r.error = WIFSIGNALED(rst) ? fmt::format("its supervising process was killed by signal {}", WTERMSIG(rst))
                               : fmt::format("its supervising process ended without a report (wait status {})", rst);
    return r;
  }
  if (reaper_lost) {
    r.error = fmt::format("the supervising process ended without a report (wait status {})", rst);
    return r;
  }
  const int st = rst;  // the reaper's own wait status mirrors the child's
  if (WIFEXITED(st)) {
    r.kind = SubprocessOutcome::Exited;
    r.code = WEXITSTATUS(st);
  } else {
    r.kind = SubprocessOutcome::Signaled;
    r.code = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  }
  return r;
}

}  // namespace

std::string SubprocessOutcome::describe(double timeout_s) const {
  switch (kind) {
    case Exited: return fmt::format("exited with status {}", code);
    case Signaled:
      if (!error.empty()) return fmt::format("killed by signal {} ({}; {})", code, strsignal(code), error);
      return fmt::format("killed by signal {} ({})", code, strsignal(code));
    case TimedOut: return fmt::format("timed out after {:g} s (process group killed)", timeout_s);
    case Interrupted:
      if (code == 0) return "stopped because another process of its set failed (process group killed)";
      return fmt::format("interrupted by signal {} ({}; process group killed)", code, strsignal(code));
    case NotStarted: break;
  }
  return "could not start: " + error;
}

namespace {

SubprocessOutcome run_command_until(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                                    const SubprocessOptions& opt, const std::atomic<bool>* stop) {
  // Everything the child needs is built here, before the forks.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store(extra_env);
  for (char** e = environ; *e; ++e) {
    bool overridden = false;
    for (const auto& x : extra_env) {
      const auto eq = x.find('=');
      if (std::strncmp(*e, x.c_str(), eq + 1) == 0) overridden = true;
    }
    if (!overridden) env_store.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  return supervise(
      [&](int message_fd) {
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        // The descriptors the command is given: first copied above 3 + 64 (the most it may be given), so
        // that moving them into 3, 4, ... never overwrites one still to be moved.
        int given[64];
        int n = 0;
        if (opt.command_message_fd) given[n++] = ::fcntl(message_fd, F_DUPFD, 3 + 64);
        for (int fd : opt.command_fds)
          if (n < 64) given[n++] = ::fcntl(fd, F_DUPFD, 3 + 64);
        for (int i = 0; i < n; ++i)
          if (given[i] < 0 || ::dup2(given[i], 3 + i) < 0) {
            const std::string why = fmt::format("cannot pass descriptors to {}: {}\n", args[0], std::strerror(errno));
            write_all(2, why.data(), why.size());
            ::_exit(127);
          }
        const unsigned first_closed = unsigned(3 + n);
        if (::close_range(first_closed, ~0U, 0) != 0)
          for (int fd = int(first_closed); fd < 4096; ++fd) ::close(fd);
        ::execve(args[0], args.data(), envp.data());
        const std::string why = fmt::format("cannot execute {}: {}\n", args[0], std::strerror(errno));
        write_all(2, why.data(), why.size());
        ::_exit(127);
      },
      opt, stop);
}

}  // namespace

SubprocessOutcome run_command(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                              const SubprocessOptions& opt) {
  return run_command_until(argv, extra_env, opt, nullptr);
}

std::vector<SubprocessOutcome> run_commands_together(const std::vector<CommandLine>& cmds,
                                                     const SubprocessOptions& opt) {
  std::vector<SubprocessOutcome> out(cmds.size());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cmds.size(); ++i)
    threads.emplace_back([&, i] {
      out[i] = run_command_until(cmds[i].argv, cmds[i].extra_env, opt, &stop);
      if (out[i].kind != SubprocessOutcome::Exited || out[i].code != 0) stop = true;  // one failed: end the set
    });
  for (auto& t : threads) t.join();
  return out;
}

SubprocessOutcome run_forked(const std::function<int(int message_fd)>& body, const SubprocessOptions& opt) {
  return supervise(
      [&](int message_fd) {
        int rc = 70;
        try {
          rc = body(message_fd);
        } catch (...) {
        }
        std::fflush(nullptr);
        ::_exit(rc);
      },
      opt);
}

double seconds_from_env(const char* name, double fallback) {
  const char* t = std::getenv(name);
  if (!t || !*t) return fallback;
  char* end = nullptr;
  const double v = std::strtod(t, &end);
  if (end == t || *end != '\0' || !(v > 0) || !std::isfinite(v))
    throw BadInput(name, t, "must be a positive number of seconds");
  return v;
}

}  // namespace ao
