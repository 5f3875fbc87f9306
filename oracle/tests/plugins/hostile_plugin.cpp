// Plugins that misbehave in every way a foreign library can, for the supervisor's tests: one build per
// mode (CMake passes -DAO_HOSTILE_<mode>). Self-contained: includes only plugin.h. Every mode must end
// as an ERROR verdict (never a pass, a dead or hung harness):
//   exit_run / underscore_exit_run   exit(0) / _exit(0) inside ao_plugin_run
//   exit_ctor                        exit(0) in a library constructor (runs at dlopen)
//   segv / abort / stack             a null write, abort(), unbounded recursion
//   loop                             an endless loop in ao_plugin_run
//   abi_data                         ao_plugin_abi_version exported as data, not a function
//   msg_nonul                        fills the whole message buffer without a terminating NUL
//   zero_inputs                      zeroes q and w (casting away const) and returns the lowest allowed
//                                    keys: right for the zeroed inputs, wrong for the real ones
// Modes with tests of their own (they attack the isolation, not the supervision of one run):
//   copy_answer     sdpa: scans its whole address space (/proc/self/mem) for the reference's O and LSE
//                   (their first and last bytes in hex in AO_CHEAT_O_KEY, AO_CHEAT_O_KEY_END,
//                   AO_CHEAT_LSE_KEY, AO_CHEAT_LSE_KEY_END) and copies them;
//                   ERROR "no answer in memory" when it finds none. Must never pass.
//   forge_verdict   writes "0\ngood: forged" into every pipe it holds and every pipe of its attn-oracle
//                   ancestors (/proc/<pid>/fd up the ppid chain, descriptors 3 and up), then returns
//                   outputs it never wrote (a FAIL).
//   daemon_kill_reaper  starts a setsid daemon (pid written to $AO_HOSTILE_PID_FILE) that kills the
//                   host's supervising process, then sleeps; the run itself waits. Nothing may survive.
//   list_fds        ERROR whose message lists every descriptor >= 3 it holds, "fd=target;" each.
//   mark_ctor       a constructor that creates the file $AO_HOSTILE_MARK_FILE (shows the library was
//                   loaded); runs ERROR.
//   truncate_outputs  truncates every shared memory file it holds (/proc/self/fd, "memfd:" targets: its
//                   outputs' memory among them) to 0 bytes and returns OK: the harness reading the outputs
//                   back must answer ERROR, not die of SIGBUS.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <limits>
#include <string>

#include "attn_oracle/backends/plugin.h"

namespace {

#ifdef AO_HOSTILE_exit_ctor
__attribute__((constructor)) void leave_at_load() { std::exit(0); }
#endif

#ifdef AO_HOSTILE_mark_ctor
__attribute__((constructor)) void mark_load() {
  if (const char* f = std::getenv("AO_HOSTILE_MARK_FILE"))
    if (FILE* out = std::fopen(f, "w")) std::fclose(out);
}
#endif

#ifdef AO_HOSTILE_stack
int deeper(int n) {
  volatile char frame[4096];
  frame[0] = char(n);
  return deeper(n + 1) + frame[0];
}
#endif

#ifdef AO_HOSTILE_zero_inputs
void lowest_allowed_keys(const ao_layout* l, const ao_tensors* t) {
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    const ao_doc& d = l->docs[s.doc];
    for (int64_t i = 0; i < s.rows; ++i) {
      int64_t hi = 0;
      if (i < s.valid) {
        const int64_t p = s.pos0 + i;
        hi = l->mask == AO_MASK_NONE ? d.kv_len : std::clamp<int64_t>((p + 1) / l->ratio, 0, d.kv_len);
      }
      for (int e = 0; e < l->topk; ++e) {
        t->topk[(s.row0 + i) * l->topk + e] = e < hi ? int32_t(d.kv_off + e) : -1;
        if (t->scores)
          t->scores[(s.row0 + i) * l->topk + e] = e < hi ? 0.f : -std::numeric_limits<float>::infinity();
      }
    }
  }
}
#endif

#ifdef AO_HOSTILE_copy_answer
// Scratch space outside every region the scan may match in (one mmap, skipped by address).
struct Scratch {
  unsigned char key[256], end[256], tail[256];
  unsigned char buf[1 << 20];
};

size_t unhex(const char* h, unsigned char* out, size_t max) {
  size_t n = 0;
  for (; h && h[0] && h[1] && n < max; h += 2) {
    unsigned v = 0;
    if (std::sscanf(h, "%2x", &v) != 1) break;
    out[n++] = static_cast<unsigned char>(v);
  }
  return n;
}

// Finds `bytes` bytes starting with the key (env var `env`) anywhere readable and copies them to dst.
// A candidate counts only when its last bytes match the end key too (env + "_END").
bool copy_from_memory(const char* env, void* dst, size_t bytes, Scratch* sc) {
  const size_t klen = unhex(std::getenv(env), sc->key, sizeof sc->key);
  const std::string end_env = std::string(env) + "_END";
  const size_t elen = unhex(std::getenv(end_env.c_str()), sc->end, sizeof sc->end);
  if (klen == 0 || elen == 0 || bytes < klen || bytes < elen) return false;
  const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (mem < 0 || !maps) return false;
  const auto sc_lo = reinterpret_cast<uintptr_t>(sc), sc_hi = sc_lo + sizeof(Scratch);
  const auto dst_lo = reinterpret_cast<uintptr_t>(dst);
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
    if (std::strstr(line, "[vvar]") || std::strstr(line, "[vsyscall]")) continue;
    if (lo < sc_hi && sc_lo < hi) continue;
    for (uintptr_t at = lo; at < hi && !found; at += sizeof sc->buf - klen) {
      const size_t want = std::min<size_t>(sizeof sc->buf, hi - at);
      const ssize_t got = ::pread(mem, sc->buf, want, off_t(at));
      if (got < ssize_t(klen)) break;
      for (size_t i = 0; i + klen <= size_t(got); ++i) {
        if (std::memcmp(sc->buf + i, sc->key, klen) != 0) continue;
        const uintptr_t src = at + i;
        if (src == dst_lo) continue;  // our own output buffer
        if (::pread(mem, sc->tail, elen, off_t(src + bytes - elen)) != ssize_t(elen) ||
            std::memcmp(sc->tail, sc->end, elen) != 0)
          continue;
        if (::pread(mem, dst, bytes, off_t(src)) == ssize_t(bytes)) found = true;
        break;
      }
      if (size_t(got) < want) break;
    }
  }
  std::fclose(maps);
  ::close(mem);
  return found;
}
#endif

#ifdef AO_HOSTILE_forge_verdict
void forge_into(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  const int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  const char forged[] = "0\ngood: forged by the backend\n";
  (void)!::write(fd, forged, sizeof forged - 1);
}

// The attn-oracle processes above this one (the host, the reapers, a bisect child, the harness): the
// walk stops at the first other process, so the test runner's own pipes (its stdin above all) are spared.
void forge_everywhere() {
  ::signal(SIGPIPE, SIG_IGN);
  for (int fd = 3; fd < 1024; ++fd) forge_into(fd);
  for (pid_t pid = ::getppid(); pid > 1;) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
    FILE* f = std::fopen(path, "r");
    if (!f) break;
    char buf[512] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    if (std::strncmp(buf + std::strcspn(buf, "("), "(attn-oracle", 12) != 0) break;
    std::snprintf(path, sizeof path, "/proc/%d/fd", int(pid));
    if (DIR* d = ::opendir(path)) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.' || std::atoi(e->d_name) < 3) continue;
        char fdp[320];
        std::snprintf(fdp, sizeof fdp, "/proc/%d/fd/%s", int(pid), e->d_name);
        const int fd = ::open(fdp, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) forge_into(fd), ::close(fd);
      }
      ::closedir(d);
    }
    const char* rp = std::strrchr(buf, ')');
    char state = 0;
    int ppid = 0;
    if (!rp || std::sscanf(rp + 1, " %c %d", &state, &ppid) != 2) break;
    pid = ppid;
  }
}
#endif

}  // namespace

extern "C" {

#ifdef AO_HOSTILE_abi_data
extern const uint32_t ao_plugin_abi_version;
const uint32_t ao_plugin_abi_version = AO_PLUGIN_ABI_VERSION;
#else
uint32_t ao_plugin_abi_version(void) { return AO_PLUGIN_ABI_VERSION; }
#endif

const char* ao_plugin_name(void) { return "hostile-plugin"; }

int ao_plugin_run(const ao_layout* l, const ao_tensors* t, const char*, char* msg, size_t n) {
#if defined(AO_HOSTILE_exit_run)
  std::exit(0);
#elif defined(AO_HOSTILE_underscore_exit_run)
  _exit(0);
#elif defined(AO_HOSTILE_segv)
  *static_cast<volatile int*>(nullptr) = 1;
#elif defined(AO_HOSTILE_abort)
  std::abort();
#elif defined(AO_HOSTILE_stack)
  return deeper(0);
#elif defined(AO_HOSTILE_loop)
  volatile unsigned spin = 0;
  for (;;) spin = spin + 1u;
#elif defined(AO_HOSTILE_msg_nonul)
  std::memset(msg, 'A', n);
  return AO_PLUGIN_ERROR;
#elif defined(AO_HOSTILE_copy_answer)
  if (l->op == AO_OP_SDPA) {
    void* m = ::mmap(nullptr, sizeof(Scratch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return AO_PLUGIN_ERROR;
    auto* sc = static_cast<Scratch*>(m);
    const size_t o_b = size_t(l->o_rows) * size_t(l->hq) * size_t(l->dim_v) * sizeof(float);
    const size_t lse_b = size_t(l->stats_rows) * size_t(l->hq) * sizeof(float);
    const bool o = copy_from_memory("AO_CHEAT_O_KEY", t->o, o_b, sc);
    const bool lse = copy_from_memory("AO_CHEAT_LSE_KEY", t->lse, lse_b, sc);
    ::munmap(m, sizeof(Scratch));
    if (o && lse) return AO_PLUGIN_OK;
    std::snprintf(msg, n, "no answer in memory (o %s, lse %s)", o ? "found" : "not found", lse ? "found" : "not found");
    return AO_PLUGIN_ERROR;
  }
#elif defined(AO_HOSTILE_forge_verdict)
  forge_everywhere();
  return AO_PLUGIN_OK;  // outputs untouched: the sentinels fail the case
#elif defined(AO_HOSTILE_daemon_kill_reaper)
  const pid_t supervisor = ::getppid();
  if (::fork() == 0) {
    ::setsid();
    if (const char* f = std::getenv("AO_HOSTILE_PID_FILE")) {
      if (FILE* out = std::fopen(f, "w")) std::fprintf(out, "%d\n", int(::getpid())), std::fclose(out);
    }
    ::kill(supervisor, SIGKILL);
    for (int i = 0; i < 60; ++i) ::sleep(1);
    ::_exit(0);
  }
  for (int i = 0; i < 10; ++i) ::sleep(1);
  return AO_PLUGIN_ERROR;
#elif defined(AO_HOSTILE_list_fds)
  std::string list;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int self = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] == '.' || fd < 3 || fd == self) continue;
      char target[256] = {};
      char path[64];
      std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      const ssize_t k = ::readlink(path, target, sizeof target - 1);
      list += std::to_string(fd) + "=" + (k > 0 ? std::string(target, size_t(k)) : "?") + ";";
    }
    ::closedir(d);
  }
  std::snprintf(msg, n, "fds: %s", list.c_str());
  return AO_PLUGIN_ERROR;
#elif defined(AO_HOSTILE_truncate_outputs)
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int self = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] == '.' || fd < 3 || fd == self) continue;
      char target[256] = {};
      char path[64];
      std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      if (::readlink(path, target, sizeof target - 1) > 0 && std::strncmp(target, "/memfd:", 7) == 0)
        if (::ftruncate(fd, 0) != 0) {}
    }
    ::closedir(d);
  }
  return AO_PLUGIN_OK;
#elif defined(AO_HOSTILE_zero_inputs)
  if (l->op == AO_OP_INDEXER) {
    std::memset(const_cast<float*>(t->q), 0, size_t(l->q_rows) * size_t(l->heads) * size_t(l->dim) * sizeof(float));
    std::memset(const_cast<float*>(t->w), 0, size_t(l->q_rows) * size_t(l->heads) * sizeof(float));
    std::memset(const_cast<float*>(t->k), 0, size_t(l->kv_rows) * size_t(l->dim) * sizeof(float));
    lowest_allowed_keys(l, t);
    return AO_PLUGIN_OK;
  }
#endif
  (void)l, (void)t, (void)msg, (void)n;
  return AO_PLUGIN_ERROR;
}

}  // extern "C"
