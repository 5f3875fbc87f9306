// attn-oracle-plugin-host: runs plugin library code for the plugin: backend in a process that holds no
// answer. The harness execs it under the subprocess supervisor with the descriptors of
// plugin_host_protocol.h and nothing else; it dlopens the library (every time: the ABI version is checked
// on each load, so a library swapped mid-gate is refused), calls it, and writes one record to fd 3.
// Outputs go straight into the shared outputs memfd; inputs are a private copy.
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>

#include "../plugin_host_protocol.h"
#include "attn_oracle/internal/write_all.h"

namespace {

using namespace ao::plugin_host;

int send(std::initializer_list<std::string> fields) {
  std::string r;
  for (const auto& f : fields) r.append(f).push_back('\0');
  return ao::write_all(kMessageFd, r.data(), r.size()) ? 0 : 3;
}

std::string bounded(const char* s, size_t max) { return s ? std::string(s, ::strnlen(s, max)) : std::string(); }

// dlopen and look the required symbols up, then check the ABI version (`version`). "" or what is wrong;
// `refused` tells a documented refusal (no library, no symbol, another version) from a broken library.
std::string load(const std::string& path, void*& handle, bool& refused, uint32_t& version) {
  refused = true;
  handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    return std::string("dlopen failed: ") + (e ? e : "unknown error");
  }
  for (const char* s : {"ao_plugin_abi_version", "ao_plugin_name", "ao_plugin_run"}) {
    void* p = ::dlsym(handle, s);
    if (!p)
      return std::string("missing required symbol '") + s +
             "' (is it an attn-oracle plugin built against attn_oracle/backends/plugin.h, with extern \"C\" exports?)";
    Dl_info info{};
    void* entry = nullptr;
    const auto* sym = static_cast<const ElfW(Sym)*>(nullptr);
    if (::dladdr1(p, &info, &entry, RTLD_DL_SYMENT) && (sym = static_cast<const ElfW(Sym)*>(entry)) &&
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC && ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC) {
      refused = false;
      return std::string("symbol '") + s + "' is not a function (ELF symbol type " +
             std::to_string(int(ELF64_ST_TYPE(sym->st_info))) + "): not callable";
    }
  }
  const uint32_t v = reinterpret_cast<ao_plugin_abi_version_fn>(::dlsym(handle, "ao_plugin_abi_version"))();
  version = v;
  if (v < kOldestAbi || v > AO_PLUGIN_ABI_VERSION)
    return "plugin ABI version " + std::to_string(v) + " but this harness speaks versions " +
           std::to_string(kOldestAbi) + " to " + std::to_string(AO_PLUGIN_ABI_VERSION) +
           " (rebuild the library against this attn_oracle/backends/plugin.h)";
  return {};
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "attn-oracle-plugin-host: %s (run by the plugin: backend only)\n", what);
  std::fflush(stderr);
  ::_exit(2);
}

void* map_fd(int fd, uint64_t bytes, int prot, int flags) {
  if (bytes == 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) < bytes) fail("a request descriptor is missing or short");
  void* p = ::mmap(nullptr, bytes, prot, flags, fd, 0);
  if (p == MAP_FAILED) fail("cannot map a request descriptor");
  return p;
}

}  // namespace

int main() {
  Request hdr{};
  if (::pread(kRequestFd, &hdr, sizeof hdr, 0) != ssize_t(sizeof hdr) ||
      std::memcmp(hdr.magic, kRequestMagic, sizeof kRequestMagic) != 0 || hdr.struct_size != sizeof(Request) ||
      hdr.total < sizeof hdr)
    fail("no request on fd 4");
  // Private: writes (a plugin mutating its inputs) stay in this process.
  char* req = static_cast<char*>(map_fd(kRequestFd, hdr.total, PROT_READ | PROT_WRITE, MAP_PRIVATE));
  auto at = [&](const Span& s, size_t elem) -> char* {
    if (s.n == 0) return nullptr;
    if (s.off > hdr.total || s.n > (hdr.total - s.off) / elem) fail("a request field lies outside the request");
    return req + s.off;
  };
  auto str = [&](const Span& s) { return s.n ? std::string(at(s, 1), s.n) : std::string(); };
  const std::string path = str(hdr.path), knobs = str(hdr.knobs), line = str(hdr.case_line);

  void* h = nullptr;
  bool refused = false;
  uint32_t version = 0;
  const std::string why = load(path, h, refused, version);
  if (hdr.mode == kProbe) {
    if (!why.empty()) return send({kProbeMagic, refused ? "refused" : "broken", why});
    const std::string name = bounded(reinterpret_cast<ao_plugin_name_fn>(::dlsym(h, "ao_plugin_name"))(), 1024);
    std::string unavailable;
    if (auto u = reinterpret_cast<ao_plugin_unavailable_fn>(::dlsym(h, "ao_plugin_unavailable"))) {
      char msg[1024];
      std::memset(msg, 0, sizeof msg);
      if (u(msg, sizeof msg) != 0) {
        unavailable = bounded(msg, sizeof msg - 1);
        if (unavailable.empty()) unavailable = "the plugin reports it cannot run here (no reason given)";
      }
    }
    return send({kProbeMagic, "ok", name, unavailable, std::to_string(version)});
  }
  if (hdr.mode != kRun) fail("unknown request mode");
  if (!why.empty()) return send({kDoneMagic, std::to_string(AO_PLUGIN_ERROR), "loading failed: " + why});

  char* outs = static_cast<char*>(map_fd(kOutputsFd, hdr.outputs_total, PROT_READ | PROT_WRITE, MAP_SHARED));
  auto out_at = [&](const Span& s, size_t elem) -> char* {
    if (s.n == 0) return nullptr;
    if (s.off > hdr.outputs_total || s.n > (hdr.outputs_total - s.off) / elem) fail("an output lies outside its memory");
    return outs + s.off;
  };
  ao_layout al = hdr.layout;
  // The library's own version of the layout (a version-1 library reads the prefix it knows).
  al.abi_version = version;
  al.struct_size = uint32_t(abi_has_backward(version) ? sizeof(ao_layout) : AO_LAYOUT_V1_SIZE);
  if (al.pass != AO_PASS_FWD && !abi_has_backward(version))  // the library was replaced since the probe
    return send({kDoneMagic, std::to_string(AO_PLUGIN_SKIP),
                 "plugin ABI v" + std::to_string(version) + " carries the forward's tensors only"});
  al.docs = reinterpret_cast<const ao_doc*>(at(hdr.docs, sizeof(ao_doc)));
  al.segments = reinterpret_cast<const ao_segment*>(at(hdr.segments, sizeof(ao_segment)));
  al.case_line = line.c_str();
  if (uint64_t(al.num_docs) != hdr.docs.n || uint64_t(al.num_segments) != hdr.segments.n) fail("layout arrays disagree");
  auto in_f = [&](const Span& s) { return reinterpret_cast<const float*>(at(s, 4)); };
  auto out_f = [&](const Span& s) { return reinterpret_cast<float*>(out_at(s, 4)); };
  ao_tensors t{};
  t.q = in_f(hdr.q), t.k = in_f(hdr.k), t.v = in_f(hdr.v), t.w = in_f(hdr.w);
  t.topk = reinterpret_cast<int32_t*>(out_at(hdr.topk, 4));
  t.scores = out_f(hdr.scores), t.o = out_f(hdr.o), t.lse = out_f(hdr.lse);
  t.dout = in_f(hdr.dout), t.fwd_o = in_f(hdr.fwd_o), t.fwd_lse = in_f(hdr.fwd_lse);
  t.fwd_topk = reinterpret_cast<const int32_t*>(at(hdr.fwd_topk, 4));
  t.target = in_f(hdr.target), t.predict = in_f(hdr.predict), t.grad_loss = in_f(hdr.grad_loss);
  t.dq = out_f(hdr.dq), t.dk = out_f(hdr.dk), t.dv = out_f(hdr.dv), t.dw = out_f(hdr.dw), t.loss = out_f(hdr.loss);
  auto run = reinterpret_cast<ao_plugin_run_fn>(::dlsym(h, "ao_plugin_run"));
  char msg[2048];
  std::memset(msg, 0, sizeof msg);
  const int rc = run(&al, &t, knobs.c_str(), msg, sizeof msg);
  return send({kDoneMagic, std::to_string(rc), bounded(msg, sizeof msg - 1)});
}
