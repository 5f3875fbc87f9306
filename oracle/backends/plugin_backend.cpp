// `plugin:<path.so>[:<knobs>]`: a kernel library behind the C ABI of attn_oracle/plugin.h. Every piece
// of plugin code runs in a child process under the supervisor (subprocess.h), never in the harness:
// a probe child at construction (dlopen runs the library's constructors; ABI version, name,
// ao_plugin_unavailable) and a fresh child per run, whose outputs come back through MAP_SHARED memory
// and whose status and message come back through a pipe. Only an explicit "done" record from the child
// is a verdict: an exit (any code, 0 too), a signal or the timeout (AO_PLUGIN_TIMEOUT) is an Error
// naming the cause; inputs the plugin mutates stay in the child. The documented load refusals (no
// file, dlopen failure, missing symbol, another ABI version) are CaseErrors naming the library.
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/backends/external.h"
#include "attn_oracle/backends/plugin.h"
#include "attn_oracle/internal/subprocess.h"

namespace ao {

namespace {

constexpr char kProbeMagic[] = "AO-PLUGIN-PROBE-1";
constexpr char kDoneMagic[] = "AO-PLUGIN-DONE-1";

// Records over the message pipe: NUL-separated fields, the magic first.
std::string record(std::initializer_list<std::string> fields) {
  std::string r;
  for (const auto& f : fields) r.append(f).push_back('\0');
  return r;
}
std::vector<std::string> fields_of(const std::string& msg) {
  std::vector<std::string> v;
  size_t at = 0;
  for (size_t nul; (nul = msg.find('\0', at)) != std::string::npos; at = nul + 1) v.push_back(msg.substr(at, nul - at));
  return v;
}

// A C string the plugin returned or filled: read at most max bytes, whatever it holds.
std::string bounded(const char* s, size_t max) { return s ? std::string(s, ::strnlen(s, max)) : std::string(); }

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

// In a child: dlopen and look the required symbols up. Returns "" or what is wrong; `refused` tells a
// documented refusal (CaseError) from a broken library (run errors).
std::string load_in_child(const std::string& open_path, void*& handle, bool& refused) {
  refused = true;
  handle = ::dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    return fmt::format("dlopen failed: {}", e ? e : "unknown error");
  }
  for (const char* s : {"ao_plugin_abi_version", "ao_plugin_name", "ao_plugin_run"}) {
    void* p = ::dlsym(handle, s);
    if (!p)
      return fmt::format("missing required symbol '{}' (is it an attn-oracle plugin built against plugin.h, with "
                         "extern \"C\" exports?)",
                         s);
    Dl_info info{};
    void* entry = nullptr;
    const auto* sym = static_cast<const ElfW(Sym)*>(nullptr);
    if (::dladdr1(p, &info, &entry, RTLD_DL_SYMENT) && (sym = static_cast<const ElfW(Sym)*>(entry)) &&
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC && ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC) {
      refused = false;
      return fmt::format("symbol '{}' is not a function (ELF symbol type {}): not callable", s,
                         int(ELF64_ST_TYPE(sym->st_info)));
    }
  }
  return {};
}

// The library reads its knobs itself; the oracle holds them to the knob grammar and naming rule, and
// `bug=<id>` to the defect ids of the cpu-bug models (the old spelling `bug=topleft` is read as topleft-cp).
std::string plugin_knobs(const std::string& path, const std::string& text) {
  std::vector<std::string> ids;
  for (const auto& m : bug_models()) ids.push_back(m.name);
  return parse_knobs("plugin:" + path, text, {bug_knob(ids, "the defect the library re-creates")},
                     {{"bug=topleft", "bug=topleft-cp"}}, /*open=*/true)  // old spelling kept
      .text();
}

class PluginBackend : public Backend {
 public:
  explicit PluginBackend(std::string spec) : spec_(std::move(spec)) {
    if (spec_.empty()) return;  // the registry's listing entry: reported unavailable
    const auto colon = spec_.find(':');
    path_ = spec_.substr(0, colon);
    if (colon != std::string::npos) knobs_ = spec_.substr(colon + 1);
    if (path_.empty()) throw CaseError("backend", "plugin:" + spec_, "plugin needs a library path: plugin:<path.so>");
    knobs_ = plugin_knobs(path_, knobs_);
    if (colon != std::string::npos) spec_ = path_ + ":" + knobs_;
    open_path_ = path_;
    if (open_path_.find('/') == std::string::npos) open_path_ = "./" + open_path_;  // a file, not a search
    std::error_code ec;
    if (!std::filesystem::exists(open_path_, ec))
      throw CaseError("backend", "plugin:" + spec_, fmt::format("no such library file '{}'", path_));
    opt_.timeout_s = seconds_from_env("AO_PLUGIN_TIMEOUT", 600);
    probe();
  }

  std::string name() const override { return "plugin:" + spec_; }
  std::string version() const override { return version_; }
  std::string unavailable_reason() const override {
    if (path_.empty()) return "plugin needs a library: --backend plugin:<path.so>[:<knobs>]";
    return unavailable_;
  }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    if (!broken_.empty()) return {RunStatus::Error, broken_, 0};
    const Case& c = l.c;
    std::vector<ao_doc> docs;
    for (const auto& d : l.docs)
      docs.push_back({d.q_len, d.kv_len, d.q_off, d.kv_off, d.o_off, d.stats_off, d.q_padded, d.packed_q_off,
                      d.packed_kv_off});
    std::vector<ao_segment> segs;
    for (const auto& s : l.segments)
      segs.push_back({s.doc, s.chunk, s.row0, s.o_row0, s.stats_row0, s.pos0, s.rows, s.valid, s.key_len});
    const std::string line = print_case(c);
    ao_layout al{};
    al.abi_version = AO_PLUGIN_ABI_VERSION;
    al.struct_size = sizeof(ao_layout);
    al.op = c.op == Op::Indexer ? AO_OP_INDEXER : AO_OP_SDPA;
    al.dtype = c.dtype == DType::F32 ? AO_DTYPE_F32 : c.dtype == DType::BF16 ? AO_DTYPE_BF16 : AO_DTYPE_F16;
    al.mask = c.mask == MaskKind::None ? AO_MASK_NONE : c.mask == MaskKind::TopLeft ? AO_MASK_TOPLEFT : AO_MASK_BOTTOMRIGHT;
    al.cp = c.cp;
    al.rank = c.rank;
    al.cp_scheme = c.cp_scheme == CpScheme::Zigzag ? AO_CP_ZIGZAG : AO_CP_CONTIGUOUS;
    al.crop = c.crop;
    al.pad_writes_allowed = c.pad_writes == PadWrites::Allow;
    al.window = c.window;
    al.heads = c.heads;
    al.dim = c.dim;
    al.topk = c.topk;
    al.ratio = c.ratio;
    al.hq = c.hq;
    al.hkv = c.hkv;
    al.dim_v = c.dim_v;
    al.scale = l.scale;
    al.q_rows = l.q_rows;
    al.kv_rows = l.kv_rows;
    al.o_rows = l.o_rows;
    al.stats_rows = l.stats_rows;
    al.num_docs = int32_t(docs.size());
    al.num_segments = int32_t(segs.size());
    al.docs = docs.data();
    al.segments = segs.data();
    al.case_line = line.c_str();

    // Outputs live in memory shared with the child, pre-filled with the sentinels of `out`.
    struct Region {
      void* p = MAP_FAILED;
      size_t n = 0;
      ~Region() {
        if (p != MAP_FAILED) ::munmap(p, n);
      }
    } shm;
    const size_t topk_b = out.topk.size() * sizeof(int32_t), scores_b = out.scores.size() * sizeof(float),
                 o_b = out.o.size() * sizeof(float), lse_b = out.lse.size() * sizeof(float);
    shm.n = topk_b + scores_b + o_b + lse_b;
    if (shm.n > 0) {
      shm.p = ::mmap(nullptr, shm.n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (shm.p == MAP_FAILED)
        return {RunStatus::Error, fmt::format("plugin: cannot map {} bytes of shared output memory: {}", shm.n,
                                              std::strerror(errno)), 0};
    }
    char* at = static_cast<char*>(shm.p);
    auto place = [&](auto& v, size_t bytes) {
      using T = typename std::remove_reference_t<decltype(v)>::value_type;
      T* p = bytes ? reinterpret_cast<T*>(at) : nullptr;
      if (bytes) std::memcpy(p, v.data(), bytes);
      at += bytes;
      return p;
    };
    int32_t* topk = place(out.topk, topk_b);
    float* scores = place(out.scores, scores_b);
    float* o = place(out.o, o_b);
    float* lse = place(out.lse, lse_b);
    auto ptr = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    const ao_tensors t{ptr(in.q), ptr(in.k), ptr(in.v), ptr(in.w), topk, scores, o, lse};

    const auto res = run_forked(
        [&](int fd) {
          void* h = nullptr;
          bool refused = false;
          const std::string why = load_in_child(open_path_, h, refused);
          if (!why.empty()) {
            const std::string r = record({kDoneMagic, std::to_string(AO_PLUGIN_ERROR), "loading failed: " + why});
            write_all(fd, r.data(), r.size());
            return 0;
          }
          auto run = reinterpret_cast<ao_plugin_run_fn>(::dlsym(h, "ao_plugin_run"));
          char msg[2048];
          std::memset(msg, 0, sizeof msg);
          const int rc = run(&al, &t, knobs_.c_str(), msg, sizeof msg);
          const std::string r = record({kDoneMagic, std::to_string(rc), bounded(msg, sizeof msg - 1)});
          write_all(fd, r.data(), r.size());
          return 0;
        },
        opt_);
    const auto f = fields_of(res.message);
    if (f.size() != 3 || f[0] != kDoneMagic)
      return {RunStatus::Error, fmt::format("plugin {} {}", path_, no_verdict(res, opt_.timeout_s, "ao_plugin_run")), 0};
    const int rc = std::atoi(f[1].c_str());
    const std::string& m = f[2];
    switch (rc) {
      case AO_PLUGIN_OK:
        if (topk_b) std::memcpy(out.topk.data(), topk, topk_b);
        if (scores_b) std::memcpy(out.scores.data(), scores, scores_b);
        if (o_b) std::memcpy(out.o.data(), o, o_b);
        if (lse_b) std::memcpy(out.lse.data(), lse, lse_b);
        return {};
      case AO_PLUGIN_SKIP: return {RunStatus::Skipped, "plugin skipped: " + (m.empty() ? "no reason given" : m), 0};
      case AO_PLUGIN_ERROR: return {RunStatus::Error, "plugin error: " + (m.empty() ? "no message" : m), 0};
      default:
        return {RunStatus::Error, fmt::format("plugin returned unknown status {}{}", rc, m.empty() ? "" : ": " + m), 0};
    }
  }

 private:
  // Loads the library in a child: the documented refusals throw CaseError; a child that crashes,
  // exits or hangs while loading makes every run an Error naming the library.
  void probe() {
    const auto res = run_forked(
        [&](int fd) {
          void* h = nullptr;
          bool refused = false;
          std::string why = load_in_child(open_path_, h, refused);
          if (why.empty()) {
            const uint32_t v = reinterpret_cast<ao_plugin_abi_version_fn>(::dlsym(h, "ao_plugin_abi_version"))();
            if (v != AO_PLUGIN_ABI_VERSION)
              why = fmt::format("plugin ABI version {} but this harness speaks version {} (rebuild the library "
                                "against this attn_oracle/plugin.h)",
                                v, AO_PLUGIN_ABI_VERSION);
          }
          if (!why.empty()) {
            const std::string r = record({kProbeMagic, refused ? "refused" : "broken", why});
            write_all(fd, r.data(), r.size());
            return 0;
          }
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
          const std::string r = record({kProbeMagic, "ok", name, unavailable});
          write_all(fd, r.data(), r.size());
          return 0;
        },
        opt_);
    const auto f = fields_of(res.message);
    if (f.size() >= 3 && f[0] == kProbeMagic && f[1] == "refused")
      throw CaseError("backend", "plugin:" + spec_, fmt::format("{}: {}", path_, f[2]));
    if (f.size() >= 3 && f[0] == kProbeMagic && f[1] == "broken") {
      broken_ = fmt::format("plugin {}: {}", path_, f[2]);
    } else if (f.size() == 4 && f[0] == kProbeMagic && f[1] == "ok") {
      version_ = f[2];
      unavailable_ = f[3];
    } else {
      broken_ = fmt::format("plugin {} {}", path_, no_verdict(res, opt_.timeout_s, "loading (dlopen, constructors, "
                                                                                  "ABI/name queries)"));
    }
  }

  std::string spec_, path_, open_path_, knobs_, version_, unavailable_, broken_;
  SubprocessOptions opt_;
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(const std::string& spec) { return std::make_unique<PluginBackend>(spec); }

}  // namespace ao
