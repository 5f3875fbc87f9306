// `exec:<command>`: runs an external process on a case directory of .npy files (protocol in
// external.h) and turns every way it can fail into a RunStatus::Error with the cause.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/external.h"
#include "attn_oracle/npy.h"

extern char** environ;

namespace ao {

namespace fs = std::filesystem;

namespace {

constexpr int kProtocolVersion = 1;

const char* mask_name(MaskKind m) {
  return m == MaskKind::None ? "none" : m == MaskKind::TopLeft ? "topleft" : "bottomright";
}
const char* poison_name(Poison p) {
  return p == Poison::NaN ? "nan" : p == Poison::Inf ? "inf" : p == Poison::Large ? "large" : "none";
}

// An input tensor in the case dtype: fp32 as '<f4', fp16 as '<f2', bf16 as '<u2' bit patterns.
std::string write_input(const std::string& dir, const std::string& name, DType t, const std::vector<float>& v,
                        const std::vector<int64_t>& shape) {
  const std::string path = dir + "/" + name + ".npy";
  if (t == DType::F32) {
    npy::write(path, "<f4", shape, v.data());
    return "<f4";
  }
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = t == DType::BF16 ? f32_to_bf16_bits(v[i]) : f32_to_f16_bits(v[i]);
  npy::write(path, t == DType::BF16 ? "<u2" : "<f2", shape, bits.data());
  return t == DType::BF16 ? "<u2" : "<f2";
}

struct OutSpec {
  std::string name, descr;
  std::vector<int64_t> shape;
  bool required;
};

std::vector<OutSpec> output_specs(const Layout& l) {
  const Case& c = l.c;
  if (c.op == Op::Indexer)
    return {{"topk", "<i4", {l.q_rows, c.topk}, true}, {"scores", "<f4", {l.q_rows, c.topk}, false}};
  return {{"o", "<f4", {l.o_rows, c.hq, c.dim_v}, true}, {"lse", "<f4", {l.stats_rows, c.hq}, true}};
}

std::vector<int64_t> with_end(std::vector<int64_t> v, int64_t end) {
  v.push_back(end);
  return v;
}

}  // namespace

std::string write_case_dir(const std::string& dir, const Layout& l, const Inputs& in) {
  const Case& c = l.c;
  using nlohmann::json;
  json m;
  m["protocol"] = kProtocolVersion;
  m["case"] = print_case(c);
  m["op"] = c.op == Op::Indexer ? "indexer" : "sdpa";
  m["dtype"] = dtype_name(c.dtype);
  m["dtype_note"] = fmt::format("{}; poison=large is {:.9g} (the dtype's largest finite value)",
                                c.dtype == DType::BF16  ? "bf16 inputs are stored as uint16 bit patterns: float32 = bits << 16"
                                : c.dtype == DType::F16 ? "fp16 inputs are stored as float16"
                                                        : "fp32 inputs are stored as float32",
                                poison_value(Poison::Large, c.dtype));
  m["scale"] = l.scale;
  m["mask"] = mask_name(c.mask);
  m["window"] = c.window;
  m["poison"] = poison_name(c.poison);
  m["pad_writes"] = c.pad_writes == PadWrites::Forbid ? "forbid" : "allow";
  m["dims"] = c.op == Op::Indexer ? json{{"heads", c.heads}, {"dim", c.dim}, {"topk", c.topk}, {"ratio", c.ratio}}
                                  : json{{"hq", c.hq}, {"hkv", c.hkv}, {"dim", c.dim}, {"dim_v", c.dim_v}};
  m["cp"] = json{{"size", c.cp},
                 {"rank", c.rank},
                 {"scheme", c.cp_scheme == CpScheme::Zigzag ? "zigzag" : "contiguous"},
                 {"crop", c.crop}};
  m["rows"] = json{{"q", l.q_rows}, {"kv", l.kv_rows}, {"o", l.o_rows}, {"stats", l.stats_rows}};
  std::vector<int64_t> q_len, kv_len, q_off, kv_off, o_off, s_off, cu_q{0}, cu_kv{0};
  json docs = json::array();
  for (const auto& d : l.docs) {
    docs.push_back({{"q_len", d.q_len}, {"kv_len", d.kv_len}, {"q_off", d.q_off}, {"kv_off", d.kv_off},
                    {"o_off", d.o_off}, {"stats_off", d.stats_off}, {"q_padded", d.q_padded},
                    {"packed_q_off", d.packed_q_off}, {"packed_kv_off", d.packed_kv_off}});
    q_len.push_back(d.q_len);
    kv_len.push_back(d.kv_len);
    q_off.push_back(d.q_off);
    kv_off.push_back(d.kv_off);
    o_off.push_back(d.o_off);
    s_off.push_back(d.stats_off);
    cu_q.push_back(cu_q.back() + d.q_len);
    cu_kv.push_back(cu_kv.back() + d.kv_len);
  }
  m["docs"] = docs;
  m["q_lens"] = q_len;
  m["kv_lens"] = kv_len;
  m["cu_seqlens_q"] = cu_q;
  m["cu_seqlens_kv"] = cu_kv;
  // Ragged offsets with the capacity last, like cu_seqlens_padded. Under CP, q_offsets are global
  // (the padded documents before the split); the local rows are in "segments".
  m["q_offsets"] = with_end(q_off, l.is_cp() ? l.q_rows * c.cp : l.q_rows);
  m["kv_offsets"] = with_end(kv_off, l.kv_rows);
  m["o_offsets"] = with_end(o_off, l.is_cp() ? l.o_rows * c.cp : l.o_rows);
  m["stats_offsets"] = with_end(s_off, l.is_cp() ? l.stats_rows * c.cp : l.stats_rows);
  json segs = json::array();
  std::vector<int64_t> pos0;
  for (const auto& s : l.segments) {
    segs.push_back({{"doc", s.doc}, {"chunk", s.chunk}, {"row0", s.row0}, {"o_row0", s.o_row0},
                    {"stats_row0", s.stats_row0}, {"pos0", s.pos0}, {"rows", s.rows}, {"valid", s.valid},
                    {"key_len", s.key_len}});
    pos0.push_back(s.pos0);
  }
  m["segments"] = segs;
  m["q_causal_offsets"] = pos0;
  m["semantics"] =
      "Row i of a segment sits at document position pos0+i; rows i >= valid are pad rows. Positions: a document's "
      "q tokens t sit at shift+t; shift = 0 for mask topleft/none; bottom-right: the queries are the document's "
      "last q_len positions, shift = kv_len*ratio - q_len (sdpa: kv_len - q_len), also under CP (CP splits tokens, "
      "pos0 = shift + the chunk's first token). Allowed keys (document "
      "coordinates s, KV buffer row kv_off+s): indexer s < clamp(floor((p+1)/ratio), 0, kv_len) (mask none: all "
      "kv_len); sdpa s <= p and s > p-window when window > 0 (mask none: all). Indexer top-k returns KV buffer "
      "rows, best first by exact score, ties to the lower index, -1 fill; pad rows of a segment return all -1. SDPA rows with no allowed key: "
      "O = 0, LSE = -inf (natural log). GQA: query head h reads kv head h / (hq/hkv). Under CP the K/V buffer is "
      "the all-gathered global one and Q/O/stats rows are this rank's local buffer.";

  json tensors;
  if (c.op == Op::Indexer) {
    const std::vector<int64_t> qs{l.q_rows, c.heads, c.dim}, ws{l.q_rows, c.heads}, ks{l.kv_rows, c.dim};
    tensors["q"] = {{"file", "q.npy"}, {"shape", qs}, {"stored_as", write_input(dir, "q", c.dtype, in.q, qs)}};
    tensors["w"] = {{"file", "w.npy"}, {"shape", ws}, {"stored_as", write_input(dir, "w", c.dtype, in.w, ws)}};
    tensors["k"] = {{"file", "k.npy"}, {"shape", ks}, {"stored_as", write_input(dir, "k", c.dtype, in.k, ks)}};
  } else {
    const std::vector<int64_t> qs{l.q_rows, c.hq, c.dim}, ks{l.kv_rows, c.hkv, c.dim}, vs{l.kv_rows, c.hkv, c.dim_v};
    tensors["q"] = {{"file", "q.npy"}, {"shape", qs}, {"stored_as", write_input(dir, "q", c.dtype, in.q, qs)}};
    tensors["k"] = {{"file", "k.npy"}, {"shape", ks}, {"stored_as", write_input(dir, "k", c.dtype, in.k, ks)}};
    tensors["v"] = {{"file", "v.npy"}, {"shape", vs}, {"stored_as", write_input(dir, "v", c.dtype, in.v, vs)}};
  }
  m["inputs"] = tensors;
  json outs;
  const Outputs sentinel = make_sentinel_outputs(l);
  for (const auto& o : output_specs(l)) {
    outs[o.name] = {{"file", o.name + ".npy"}, {"shape", o.shape}, {"dtype", o.descr}, {"required", o.required}};
    const void* data = o.name == "topk"     ? static_cast<const void*>(sentinel.topk.data())
                       : o.name == "scores" ? static_cast<const void*>(sentinel.scores.data())
                       : o.name == "o"      ? static_cast<const void*>(sentinel.o.data())
                                            : static_cast<const void*>(sentinel.lse.data());
    npy::write(dir + "/" + o.name + ".npy", o.descr, o.shape, data);
  }
  m["outputs"] = outs;
  m["sentinel"] = {{"float_bits", fmt::format("0x{:08x}", kSentinelBits)}, {"index", kSentinelIndex}};

  const std::string text = m.dump(1);
  std::ofstream(dir + "/meta.json") << text << "\n";
  std::ofstream(dir + "/case.txt") << print_case(c) << "\n";
  return text;
}

namespace {

std::string tail_of(const std::string& path, size_t max_lines = 12, size_t max_bytes = 2000) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_bytes) s = "..." + s.substr(s.size() - max_bytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t at = s.size(), lines = 0;
  while (at > 0 && lines < max_lines) {
    at = s.rfind('\n', at - 1);
    if (at == std::string::npos) { at = 0; break; }
    ++lines;
  }
  if (at > 0) s = "..." + s.substr(at);
  return s;
}

std::string last_line(const std::string& path) {
  std::string t = tail_of(path, 1, 500);
  if (t.rfind("...", 0) == 0) t = t.substr(3);
  while (!t.empty() && (t.front() == '\n' || t.front() == ' ')) t.erase(0, 1);
  return t;
}

struct FileStamp {
  bool exists = false;
  ino_t ino = 0;
  int64_t size = 0, mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, int64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

struct ProcResult {
  bool spawned = false, timed_out = false;
  int status = 0;
  std::string spawn_error;
};

// Runs argv in a new process group; stdin /dev/null, stdout/stderr to files. On timeout the whole
// group gets SIGTERM, then SIGKILL; after exit, leftover members of the group are killed too.
ProcResult run_process(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                       const std::string& out_path, const std::string& err_path, double timeout_s) {
  ProcResult r;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
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

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &def);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.spawn_error = std::strerror(rc);
    return r;
  }
  r.spawned = true;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int sleep_ms = 1;
  for (;;) {
    const pid_t w = ::waitpid(pid, &r.status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) { r.spawn_error = std::strerror(errno); break; }
    if (elapsed() > timeout_s) {
      r.timed_out = true;
      ::kill(-pid, SIGTERM);
      const auto t1 = std::chrono::steady_clock::now();
      while (::waitpid(pid, &r.status, WNOHANG) == 0 &&
             std::chrono::steady_clock::now() - t1 < std::chrono::seconds(2))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &r.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min(sleep_ms * 2, 50);
  }
  ::kill(-pid, SIGKILL);  // children it left behind (ESRCH when there are none)
  return r;
}

class ExecBackend : public Backend {
 public:
  ExecBackend(std::string command, ExecOptions opt) : cmd_(std::move(command)), opt_(std::move(opt)) {}
  std::string name() const override { return "exec:" + cmd_; }
  std::string unavailable_reason() const override {
    return cmd_.empty() ? "exec needs a command: --backend 'exec:<command>' (the case directory is appended)" : "";
  }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    std::string root = opt_.work_root;
    if (root.empty()) root = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    std::string templ = root + "/ao-exec-XXXXXX";
    if (!::mkdtemp(templ.data()))
      return {RunStatus::Error, fmt::format("exec: cannot create a case directory under {}: {}", root, std::strerror(errno))};
    const std::string dir = templ;
    struct Cleanup {
      std::string dir;
      bool keep;
      ~Cleanup() {
        std::error_code ec;
        if (!keep) fs::remove_all(dir, ec);
      }
    } cleanup{dir, opt_.keep_dir};
    const std::string where = opt_.keep_dir ? fmt::format(" [case dir kept: {}]", dir) : "";
    auto error = [&](std::string why) { return RunStatus{RunStatus::Error, "exec: " + why + where, 0}; };

    try {
      write_case_dir(dir, l, in);
    } catch (const std::exception& e) {
      return error(fmt::format("writing the case directory failed: {}", e.what()));
    }
    const auto specs = output_specs(l);
    std::vector<FileStamp> before;
    for (const auto& o : specs) before.push_back(stamp(dir + "/" + o.name + ".npy"));

    const std::string err_path = dir + "/stderr.txt";
    const auto pr = run_process({"/bin/sh", "-c", cmd_ + " \"$@\"", "ao-exec", dir}, {"AO_CASE_DIR=" + dir},
                                dir + "/stdout.txt", err_path, opt_.timeout_s);
    const std::string tail = tail_of(err_path);
    const std::string tail_msg = tail.empty() ? " (stderr empty)" : "; stderr tail:\n" + tail;
    if (!pr.spawned) return error("cannot start /bin/sh: " + pr.spawn_error);
    if (pr.timed_out)
      return error(fmt::format("timed out after {:g} s (process group killed){}", opt_.timeout_s, tail_msg));
    if (WIFSIGNALED(pr.status)) {
      const int sig = WTERMSIG(pr.status);
      return error(fmt::format("command killed by signal {} ({}){}", sig, strsignal(sig), tail_msg));
    }
    const int code = WIFEXITED(pr.status) ? WEXITSTATUS(pr.status) : -1;
    if (code == 125) {
      const std::string why = last_line(err_path);
      return {RunStatus::Skipped, "exec: command skipped (exit 125): " + (why.empty() ? "no reason given" : why), 0};
    }
    if (code > 128 && code < 128 + 65)  // the shell reports a child killed by signal n as 128+n
      return error(fmt::format("command killed by signal {} ({}; shell exit status {}){}", code - 128,
                               strsignal(code - 128), code, tail_msg));
    if (code != 0) return error(fmt::format("command exited with status {}{}", code, tail_msg));

    for (size_t i = 0; i < specs.size(); ++i) {
      const auto& o = specs[i];
      const std::string path = dir + "/" + o.name + ".npy";
      const FileStamp now = stamp(path);
      if (!now.exists) {
        if (o.required) return error(fmt::format("command exited 0 but {}.npy is missing{}", o.name, tail_msg));
        continue;
      }
      if (now == before[i]) {
        if (o.required)
          return error(fmt::format("command exited 0 but did not write {}.npy (still the pre-poisoned buffer){}",
                                   o.name, tail_msg));
        continue;
      }
      try {
        if (o.name == "topk")
          out.topk = npy::read_as<int32_t>(path, o.descr, o.shape);
        else if (o.name == "scores")
          out.scores = npy::read_as<float>(path, o.descr, o.shape);
        else if (o.name == "o")
          out.o = npy::read_as<float>(path, o.descr, o.shape);
        else
          out.lse = npy::read_as<float>(path, o.descr, o.shape);
      } catch (const npy::NpyError& e) {
        return error(fmt::format("bad output {}.npy: {}", o.name, e.what()));
      }
    }
    return {};
  }

 private:
  std::string cmd_;
  ExecOptions opt_;
};

}  // namespace

ExecOptions exec_options_from_env() {
  ExecOptions o;
  if (const char* t = std::getenv("AO_EXEC_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(v > 0) || !std::isfinite(v))
      throw CaseError("AO_EXEC_TIMEOUT", t, "must be a positive number of seconds");
    o.timeout_s = v;
  }
  if (const char* k = std::getenv("AO_EXEC_KEEP")) o.keep_dir = std::string(k) == "1";
  if (const char* d = std::getenv("AO_EXEC_DIR")) o.work_root = d;
  return o;
}

std::unique_ptr<Backend> make_exec_backend(const std::string& command, const ExecOptions& opt) {
  return std::make_unique<ExecBackend>(command, opt);
}

}  // namespace ao
