// `plugin:<path.so>[:<knobs>]`: a kernel library behind the C ABI of attn_oracle/backends/plugin.h. No plugin
// code runs in the harness, nor in a fork of it (a fork holds the reference's and other backends'
// answers): every load is an exec of the host program attn-oracle-plugin-host (plugin_host/, found beside
// the running executable, else where the build put it) under the supervisor (subprocess.h), given only
// the descriptors of plugin_host_protocol.h: a probe at construction (dlopen runs the library's
// constructors; ABI version, name, ao_plugin_unavailable) and a fresh host per run, which loads the library
// again (and checks its ABI version again), reads the layout and a private copy of the inputs from a sealed
// memfd and writes the outputs into a shared one. Only an explicit "done" record from the host is a
// verdict: an exit (any code, 0 too), a signal or the timeout (AO_PLUGIN_TIMEOUT) is an Error naming the
// cause; inputs the plugin mutates stay in the host. The documented load refusals (no file, dlopen
// failure, missing symbol, another ABI version) are BadInputs naming the library at construction, and
// run Errors when they appear later (the file was replaced).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/backends/external.h"
#include "attn_oracle/backends/plugin.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/internal/subprocess.h"
#include "plugin_host_protocol.h"

namespace ao {

// The ABI's enum constants are the enums' ordinals (what plugin_layout stores of an enum key).
static_assert(int(Op::Indexer) == AO_OP_INDEXER && int(Op::Sdpa) == AO_OP_SDPA);
static_assert(int(DType::F32) == AO_DTYPE_F32 && int(DType::BF16) == AO_DTYPE_BF16 && int(DType::F16) == AO_DTYPE_F16);
static_assert(int(MaskKind::None) == AO_MASK_NONE && int(MaskKind::TopLeft) == AO_MASK_TOPLEFT &&
              int(MaskKind::BottomRight) == AO_MASK_BOTTOMRIGHT);
static_assert(int(CpScheme::Zigzag) == AO_CP_ZIGZAG && int(CpScheme::Contiguous) == AO_CP_CONTIGUOUS);
static_assert(int(Pass::Fwd) == AO_PASS_FWD && int(Pass::Bwd) == AO_PASS_BWD);
static_assert(int(WindowConvention::Cudnn) == AO_WINDOW_CUDNN && int(WindowConvention::Fa) == AO_WINDOW_FA);
static_assert(int(LossMean::Rows) == AO_LOSS_MEAN_ROWS && int(LossMean::Valid) == AO_LOSS_MEAN_VALID &&
              int(LossMean::Keyed) == AO_LOSS_MEAN_KEYED && int(LossMean::Sum) == AO_LOSS_MEAN_SUM);
// The 0/1 fields named for their second value.
static_assert(int(PadWrites::Allow) == 1 && int(EmptyRows::PosInf) == 1 && int(Ties::Strict) == 1 &&
              int(GradPad::Zero) == 1);

std::span<const PluginLayoutField> plugin_layout_key_fields() {
#define AO_FIELD(name, type) PluginLayoutField{#name, offsetof(ao_layout, name), PluginLayoutField::type}
  static const PluginLayoutField fields[] = {
      AO_FIELD(op, I32),          AO_FIELD(dtype, I32),          AO_FIELD(mask, I32),
      AO_FIELD(cp, I32),          AO_FIELD(rank, I32),           AO_FIELD(cp_scheme, I32),
      AO_FIELD(crop, I32),        AO_FIELD(pad_writes_allowed, I32), AO_FIELD(window, I64),
      AO_FIELD(heads, I32),       AO_FIELD(dim, I32),            AO_FIELD(topk, I32),
      AO_FIELD(ratio, I32),       AO_FIELD(hq, I32),             AO_FIELD(hkv, I32),
      AO_FIELD(dim_v, I32),       AO_FIELD(scale, F64),          AO_FIELD(pass, I32),
      AO_FIELD(grad_pad_zero_allowed, I32), AO_FIELD(loss_mean, I32), AO_FIELD(window_right, I64),
      AO_FIELD(window_convention, I32), AO_FIELD(empty_rows_posinf, I32), AO_FIELD(ties_strict, I32),
      AO_FIELD(num_splits, I32),  AO_FIELD(max_seqlen_q, I64),   AO_FIELD(max_seqlen_kv, I64),
  };
#undef AO_FIELD
  return fields;
}

ao_layout plugin_layout(const Layout& l) {
  ao_layout al{};
  al.abi_version = AO_PLUGIN_ABI_VERSION;
  al.struct_size = sizeof(ao_layout);
  const Case resolved = kernel_case(l);
  for (const CaseKey& k : case_key_table()) {  // the keys a kernel sees, into their fields (case_keys.cpp)
    if (!k.kernel.abi_field) continue;
    const PluginLayoutField* f = nullptr;
    for (const auto& x : plugin_layout_key_fields())
      if (std::string_view(x.name) == k.kernel.abi_field) f = &x;
    if (!f)
      throw std::logic_error(fmt::format("case key {} names the ao_layout field {}, which plugin_layout_key_fields() "
                                         "lacks", k.name, k.kernel.abi_field));
    const double x = std::visit(
        [](const auto& v) -> double {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, EnumValue>) {
            return v.ordinal;
          } else {
            return double(v);
          }
        },
        k.kernel.value(resolved));
    char* at = reinterpret_cast<char*>(&al) + f->offset;
    if (f->type == PluginLayoutField::F64) {
      std::memcpy(at, &x, sizeof x);
    } else if (f->type == PluginLayoutField::I64) {
      const int64_t v = int64_t(x);
      std::memcpy(at, &v, sizeof v);
    } else {
      const int32_t v = int32_t(x);
      std::memcpy(at, &v, sizeof v);
    }
  }
  al.q_rows = l.q_rows;
  al.kv_rows = l.kv_rows;
  al.o_rows = l.o_rows;
  al.stats_rows = l.stats_rows;
  return al;
}

namespace {

using plugin_host::kDoneMagic;
using plugin_host::kProbeMagic;

std::vector<std::string> fields_of(const std::string& msg) {
  std::vector<std::string> v;
  size_t at = 0;
  for (size_t nul; (nul = msg.find('\0', at)) != std::string::npos; at = nul + 1) v.push_back(msg.substr(at, nul - at));
  return v;
}

// Why a child that ran plugin code gave no verdict, with what it printed.
std::string no_verdict(const SubprocessOutcome& o, double timeout_s, const char* during) {
  std::string why;
  switch (o.kind) {
    case SubprocessOutcome::Exited:
      why = fmt::format("exited without a verdict (exit status {}) during {}", o.code, during);
      break;
    case SubprocessOutcome::Signaled:
      why = fmt::format("crashed (signal {}, {}) during {}", o.code, strsignal(o.code), during);
      break;
    case SubprocessOutcome::TimedOut:
      why = fmt::format("timed out after {:g} s during {} (AO_PLUGIN_TIMEOUT; killed)", timeout_s, during);
      break;
    case SubprocessOutcome::Interrupted:
      why = fmt::format("interrupted by signal {} during {} (killed)", o.code, during);
      break;
    case SubprocessOutcome::NotStarted: why = "could not start its child process: " + o.error; break;
  }
  std::string tail = o.stderr_tail;
  if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return tail.empty() ? why : why + "; output tail:\n" + tail;
}



// The host program: beside the running executable (an installed or copied harness), else the build's.
std::string find_plugin_host() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path() / plugin_host::kProgramName;
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef AO_PLUGIN_HOST_PATH
  if (::access(AO_PLUGIN_HOST_PATH, X_OK) == 0) return AO_PLUGIN_HOST_PATH;
#endif
  return {};
}

struct OwnedFd {
  int fd = -1;
  OwnedFd() = default;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// The request memfd: pieces appended at 8-byte aligned offsets, then the header, then sealed (no
// process can change it; the host can only map it privately).
class RequestBuilder {
 public:
  explicit RequestBuilder(uint32_t mode) {
    fd_.fd = ::memfd_create("ao-plugin-request", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_.fd < 0) error_ = fmt::format("memfd_create: {}", std::strerror(errno));
    hdr = {};
    std::memcpy(hdr.magic, plugin_host::kRequestMagic, sizeof hdr.magic);
    hdr.mode = mode;
    hdr.struct_size = sizeof hdr;
  }
  plugin_host::Request hdr;

  plugin_host::Span put(const void* p, uint64_t bytes, uint64_t n) {
    end_ = (end_ + 7) & ~uint64_t(7);
    const plugin_host::Span s{end_, n};
    if (bytes && !write_at(p, bytes, end_)) return s;
    end_ += bytes;
    return s;
  }
  plugin_host::Span put(const std::string& s) { return put(s.data(), s.size(), s.size()); }
  template <class T>
  plugin_host::Span put(const std::vector<T>& v) { return put(v.data(), v.size() * sizeof(T), v.size()); }

  // The sealed descriptor, or -1 with error() set.
  int finish() {
    hdr.total = end_;
    if (error_.empty() && write_at(&hdr, sizeof hdr, 0) && ::ftruncate(fd_.fd, off_t(end_)) != 0)
      error_ = fmt::format("ftruncate: {}", std::strerror(errno));
    if (error_.empty() &&
        ::fcntl(fd_.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
      error_ = fmt::format("sealing the request: {}", std::strerror(errno));
    return error_.empty() ? fd_.fd : -1;
  }
  const std::string& error() const { return error_; }

 private:
  bool write_at(const void* p, uint64_t bytes, uint64_t off) {
    if (!error_.empty()) return false;
    const char* c = static_cast<const char*>(p);
    while (bytes > 0) {
      const ssize_t w = ::pwrite(fd_.fd, c, bytes, off_t(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = fmt::format("writing the request: {}", w < 0 ? std::strerror(errno) : "short write");
        return false;
      }
      c += w, bytes -= uint64_t(w), off += uint64_t(w);
    }
    return true;
  }
  OwnedFd fd_;
  uint64_t end_ = sizeof(plugin_host::Request);
  std::string error_;
};

class PluginBackend : public Backend {
 public:
  // load = false: the checks that run no library code only (backend_name).
  PluginBackend(std::string spec, bool load) : spec_(std::move(spec)) {
    if (spec_.empty()) return;  // the registry's listing entry: reported unavailable
    const auto colon = spec_.find(':');
    path_ = spec_.substr(0, colon);
    if (colon != std::string::npos) knobs_ = spec_.substr(colon + 1);
    if (path_.empty()) throw BadInput("backend", "plugin:" + spec_, "plugin needs a library path: plugin:<path.so>");
    knobs_ = parse_plugin_knobs(path_, knobs_).text();
    if (colon != std::string::npos) spec_ = path_ + ":" + knobs_;
    open_path_ = path_;
    if (open_path_.find('/') == std::string::npos) open_path_ = "./" + open_path_;  // a file, not a search
    std::error_code ec;
    if (!std::filesystem::exists(open_path_, ec))
      throw BadInput("backend", "plugin:" + spec_, fmt::format("no such library file '{}'", path_));
    opt_.timeout_s = seconds_from_env("AO_PLUGIN_TIMEOUT", 600);
    if (!load) return;
    host_ = find_plugin_host();
    if (host_.empty()) {
      unavailable_ = fmt::format("the plugin host program {} is missing (expected beside this executable)",
                                 plugin_host::kProgramName);
      return;
    }
    probe();
  }

  std::string name() const override { return "plugin:" + spec_; }
  std::string version() const override { return version_; }
  std::string unavailable_reason() const override {
    if (path_.empty()) return "plugin needs a library: --backend plugin:<path.so>[:<knobs>]";
    return unavailable_;
  }

  // A library built against ABI v1 knows the forward's tensors only (a backward case would hand it no
  // dO/O/LSE inputs and no gradient outputs), and v1's layout cannot say the conventions v2 added: such a
  // case is declined, never handed over with a key the library cannot see.
  std::string declines(const Layout& l) const override {
    if (abi_ == 0 || plugin_host::abi_has_backward(abi_)) return {};
    const Case& c = l.c;
    const char* key = c.pass == Pass::Bwd                                ? "pass=bwd"
                      : c.window_right != 0                              ? "window_right"
                      : c.window_convention != WindowConvention::Cudnn   ? "window_convention=fa"
                      : c.empty_rows != EmptyRows::NegInf                ? "empty_rows=posinf"
                      : c.op == Op::Indexer && c.ties == Ties::Strict    ? "ties=strict"
                                                                         : nullptr;
    if (!key) return {};
    return fmt::format("plugin: the library speaks ABI v{}, whose layout and tensors cannot carry {} (ABI v{} does: "
                       "rebuild it against this attn_oracle/backends/plugin.h)", abi_, key, AO_PLUGIN_ABI_VERSION);
  }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    if (!broken_.empty()) return {RunStatus::Error, broken_, 0};
    if (host_.empty()) return {RunStatus::Skipped, unavailable_, 0};
    const Case& c = l.c;
    std::vector<ao_doc> docs;
    for (const auto& d : l.docs)
      docs.push_back({d.q_len, d.kv_len, d.q_off, d.kv_off, d.o_off, d.stats_off, d.q_padded, d.packed_q_off,
                      d.packed_kv_off});
    std::vector<ao_segment> segs;
    for (const auto& s : l.segments)
      segs.push_back({s.doc, s.chunk, s.row0, s.o_row0, s.stats_row0, s.pos0, s.rows, s.valid, s.key_len});
    const std::string line = print_case(c);
    ao_layout al = plugin_layout(l);
    al.num_docs = int32_t(docs.size());
    al.num_segments = int32_t(segs.size());

    RequestBuilder req(plugin_host::kRun);
    req.hdr.layout = al;
    req.hdr.path = req.put(open_path_);
    req.hdr.knobs = req.put(knobs_);
    req.hdr.case_line = req.put(line);
    req.hdr.docs = req.put(docs);
    req.hdr.segments = req.put(segs);
    // The inputs and outputs are the external tensor table's (external.h), the exec: files' too.
    for (const ExternalTensor& t : external_inputs(l)) {
      const auto slot = plugin_host::input_slot(t.name);
      if (!slot) return {RunStatus::Error, fmt::format("plugin: input '{}' has no place in ABI v{}", t.name, abi_), 0};
      req.hdr.*slot = t.in ? req.put(in.*t.in) : req.put(in.*t.in_indices);
    }
    const std::vector<ExternalTensor> outs_table = external_outputs(l);

    // Outputs live in a memfd shared with the host, pre-filled with the sentinels of `out`.
    OwnedFd outs;
    struct Region {
      void* p = MAP_FAILED;
      size_t n = 0;
      ~Region() {
        if (p != MAP_FAILED) ::munmap(p, n);
      }
    } shm;
    // An output's bytes in `out` (pre-filled with the sentinels), as one span of the shared memory.
    auto bytes_of = [&](const ExternalTensor& t) -> std::pair<char*, size_t> {
      if (t.floats) return {reinterpret_cast<char*>((out.*t.floats).data()), (out.*t.floats).size() * sizeof(float)};
      return {reinterpret_cast<char*>((out.*t.indices).data()), (out.*t.indices).size() * sizeof(int32_t)};
    };
    shm.n = 0;
    for (const ExternalTensor& t : outs_table) {
      if (!plugin_host::output_slot(t.name))
        return {RunStatus::Error, fmt::format("plugin: output '{}' has no place in ABI v{}", t.name, abi_), 0};
      shm.n += bytes_of(t).second;
    }
    // Sealed at its size: a plugin that truncates it (its host holds the descriptor) gets EPERM instead of
    // making the harness's reads below die of SIGBUS.
    outs.fd = ::memfd_create("ao-plugin-outputs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (outs.fd < 0 || ::ftruncate(outs.fd, off_t(shm.n)) != 0 ||
        ::fcntl(outs.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
      return {RunStatus::Error, fmt::format("plugin: cannot create {} bytes of shared output memory: {}", shm.n,
                                            std::strerror(errno)), 0};
    if (shm.n > 0) {
      shm.p = ::mmap(nullptr, shm.n, PROT_READ | PROT_WRITE, MAP_SHARED, outs.fd, 0);
      if (shm.p == MAP_FAILED)
        return {RunStatus::Error, fmt::format("plugin: cannot map {} bytes of shared output memory: {}", shm.n,
                                              std::strerror(errno)), 0};
    }
    char* base = static_cast<char*>(shm.p);
    size_t at = 0;
    for (const ExternalTensor& t : outs_table) {
      const auto [p, bytes] = bytes_of(t);
      req.hdr.*plugin_host::output_slot(t.name) = {at, bytes / 4};  // every element is 4 bytes
      if (bytes) std::memcpy(base + at, p, bytes);
      at += bytes;
    }
    req.hdr.outputs_total = shm.n;
    const int req_fd = req.finish();
    if (req_fd < 0) return {RunStatus::Error, "plugin: cannot prepare the request for its host: " + req.error(), 0};

    const auto res = run_host(req_fd, outs.fd);
    const auto f = fields_of(res.message);
    if (f.size() != 3 || f[0] != kDoneMagic)
      return {RunStatus::Error, fmt::format("plugin {} {}", path_, no_verdict(res, opt_.timeout_s, "ao_plugin_run")), 0};
    const int rc = std::atoi(f[1].c_str());
    const std::string& m = f[2];
    switch (rc) {
      case AO_PLUGIN_OK:
        for (const ExternalTensor& t : outs_table) {
          const auto [p, bytes] = bytes_of(t);
          if (bytes) std::memcpy(p, base + (req.hdr.*plugin_host::output_slot(t.name)).off, bytes);
        }
        return {};
      case AO_PLUGIN_SKIP: return {RunStatus::Skipped, "plugin skipped: " + (m.empty() ? "no reason given" : m), 0};
      case AO_PLUGIN_ERROR: return {RunStatus::Error, "plugin error: " + (m.empty() ? "no message" : m), 0};
      default:
        return {RunStatus::Error, fmt::format("plugin returned unknown status {}{}", rc, m.empty() ? "" : ": " + m), 0};
    }
  }

 private:
  // One exec of the host, given the message pipe, the request and (runs) the outputs.
  SubprocessOutcome run_host(int req_fd, int outs_fd) const {
    SubprocessOptions so = opt_;
    so.command_message_fd = true;
    so.command_fds = {req_fd};
    if (outs_fd >= 0) so.command_fds.push_back(outs_fd);
    return run_command({host_}, {}, so);
  }

  // Loads the library in a host: the documented refusals throw BadInput; a host that crashes, exits or
  // hangs while loading makes every run an Error naming the library.
  void probe() {
    RequestBuilder req(plugin_host::kProbe);
    req.hdr.path = req.put(open_path_);
    req.hdr.knobs = req.put(knobs_);
    const int req_fd = req.finish();
    if (req_fd < 0) {
      broken_ = fmt::format("plugin {}: cannot prepare the request for its host: {}", path_, req.error());
      return;
    }
    const auto res = run_host(req_fd, -1);
    const auto f = fields_of(res.message);
    if (f.size() >= 3 && f[0] == kProbeMagic && f[1] == "refused")
      throw BadInput("backend", "plugin:" + spec_, fmt::format("{}: {}", path_, f[2]));
    if (f.size() >= 3 && f[0] == kProbeMagic && f[1] == "broken") {
      broken_ = fmt::format("plugin {}: {}", path_, f[2]);
    } else if (f.size() == 5 && f[0] == kProbeMagic && f[1] == "ok") {
      version_ = f[2];
      unavailable_ = f[3];
      abi_ = uint32_t(std::strtoul(f[4].c_str(), nullptr, 10));
    } else {
      broken_ = fmt::format("plugin {} {}", path_, no_verdict(res, opt_.timeout_s, "loading (dlopen, constructors, "
                                                                                  "ABI/name queries)"));
    }
  }

  std::string spec_, path_, open_path_, knobs_, version_, unavailable_, broken_, host_;
  uint32_t abi_ = 0;  // the library's ABI version (from the probe; 0 before)
  SubprocessOptions opt_;
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(const std::string& spec) {
  return std::make_unique<PluginBackend>(spec, true);
}

std::string plugin_backend_name(const std::string& spec) { return PluginBackend(spec, false).name(); }

Knobs parse_plugin_knobs(const std::string& path, const std::string& text) {
  std::vector<std::string> ids;
  for (const auto& m : bug_models()) ids.push_back(m.name);
  return parse_knobs("plugin:" + path, text, {bug_knob(ids, "the defect the library re-creates")},
                     {{"bug=topleft", "bug=topleft-cp"}}, /*open=*/true);  // the old spelling kept
}

}  // namespace ao
