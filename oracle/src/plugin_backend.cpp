// `plugin:<path.so>[:<knobs>]`: a kernel library loaded with dlopen through the C ABI of
// attn_oracle/plugin.h. Load problems (no file, missing symbol, other ABI version) are CaseErrors
// naming the library; run problems are RunStatus::Error with the plugin's message.
#include <dlfcn.h>

#include <filesystem>

#include <fmt/format.h>

#include "attn_oracle/external.h"
#include "attn_oracle/plugin.h"

namespace ao {

namespace {

class PluginBackend : public Backend {
 public:
  explicit PluginBackend(std::string spec) : spec_(std::move(spec)) {
    if (spec_.empty()) return;  // the registry's listing entry: reported unavailable
    const auto colon = spec_.find(':');
    path_ = spec_.substr(0, colon);
    if (colon != std::string::npos) knobs_ = spec_.substr(colon + 1);
    if (path_.empty()) throw CaseError("backend", "plugin:" + spec_, "plugin needs a library path: plugin:<path.so>");
    std::string open_path = path_;
    if (open_path.find('/') == std::string::npos) open_path = "./" + open_path;  // a file, not a search
    std::error_code ec;
    if (!std::filesystem::exists(open_path, ec))
      throw CaseError("backend", "plugin:" + spec_, fmt::format("no such library file '{}'", path_));
    handle_ = ::dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* e = ::dlerror();
      throw CaseError("backend", "plugin:" + spec_, fmt::format("dlopen failed: {}", e ? e : "unknown error"));
    }
    auto abi = reinterpret_cast<ao_plugin_abi_version_fn>(sym("ao_plugin_abi_version", true));
    const uint32_t v = abi();
    if (v != AO_PLUGIN_ABI_VERSION)
      fail(fmt::format("plugin ABI version {} but this harness speaks version {} (rebuild the library against "
                       "this attn_oracle/plugin.h)",
                       v, AO_PLUGIN_ABI_VERSION));
    auto name = reinterpret_cast<ao_plugin_name_fn>(sym("ao_plugin_name", true));
    run_ = reinterpret_cast<ao_plugin_run_fn>(sym("ao_plugin_run", true));
    unavailable_ = reinterpret_cast<ao_plugin_unavailable_fn>(sym("ao_plugin_unavailable", false));
    const char* n = name();
    version_ = n ? n : "";
  }
  ~PluginBackend() override {
    if (handle_) ::dlclose(handle_);
  }
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  std::string name() const override { return "plugin:" + spec_; }
  std::string version() const override { return version_; }
  std::string unavailable_reason() const override {
    if (!handle_) return "plugin needs a library: --backend plugin:<path.so>[:<knobs>]";
    if (!unavailable_) return {};
    char msg[1024] = {0};
    if (unavailable_(msg, sizeof msg) == 0) return {};
    return msg[0] ? msg : "the plugin reports it cannot run here (no reason given)";
  }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
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
    auto ptr = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
    ao_tensors t{ptr(in.q), ptr(in.k), ptr(in.v), ptr(in.w),
                 out.topk.empty() ? nullptr : out.topk.data(), out.scores.empty() ? nullptr : out.scores.data(),
                 out.o.empty() ? nullptr : out.o.data(), out.lse.empty() ? nullptr : out.lse.data()};
    char msg[2048] = {0};
    const int rc = run_(&al, &t, knobs_.c_str(), msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    const std::string m = msg;
    switch (rc) {
      case AO_PLUGIN_OK: return {};
      case AO_PLUGIN_SKIP: return {RunStatus::Skipped, "plugin skipped: " + (m.empty() ? "no reason given" : m), 0};
      case AO_PLUGIN_ERROR: return {RunStatus::Error, "plugin error: " + (m.empty() ? "no message" : m), 0};
      default:
        return {RunStatus::Error, fmt::format("plugin returned unknown status {}{}", rc, m.empty() ? "" : ": " + m), 0};
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    ::dlclose(handle_);
    handle_ = nullptr;
    throw CaseError("backend", "plugin:" + spec_, fmt::format("{}: {}", path_, why));
  }
  void* sym(const char* s, bool required) {
    ::dlerror();
    void* p = ::dlsym(handle_, s);
    if (!p && required)
      fail(fmt::format("missing required symbol '{}' (is it an attn-oracle plugin built against plugin.h, with "
                       "extern \"C\" exports?)",
                       s));
    return p;
  }

  std::string spec_, path_, knobs_, version_;
  void* handle_ = nullptr;
  ao_plugin_run_fn run_ = nullptr;
  ao_plugin_unavailable_fn unavailable_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(const std::string& spec) { return std::make_unique<PluginBackend>(spec); }

}  // namespace ao
