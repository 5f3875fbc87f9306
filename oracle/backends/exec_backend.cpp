// `exec:<command>`: runs an external process on a case directory of .npy files (protocol in
// external.h) and turns every way it can fail into a RunStatus::Error with the cause.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/internal/npy.h"
#include "attn_oracle/internal/subprocess.h"

namespace ao {

namespace fs = std::filesystem;

namespace {

constexpr int kProtocolVersion = 1;

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

std::vector<int64_t> with_end(std::vector<int64_t> v, int64_t end) {
  v.push_back(end);
  return v;
}

}  // namespace

std::vector<ExternalTensor> external_inputs(const Layout& l) {
  const Case& c = l.c;
  const bool bwd = c.pass == Pass::Bwd;
  std::vector<ExternalTensor> v;
  if (c.op == Op::Indexer) {
    v = {{"q", "<f4", {l.q_rows, c.heads, c.dim}, true, &Inputs::q},
         {"w", "<f4", {l.q_rows, c.heads}, true, &Inputs::w},
         {"k", "<f4", {l.kv_rows, c.dim}, true, &Inputs::k}};
    if (bwd) {  // the exact forward's top-k, the distributions over its slots and grad_loss, all exact fp32
      v.push_back({"topk", "<i4", {l.q_rows, c.topk}, true, nullptr, nullptr, nullptr, &Inputs::topk});
      v.push_back({"target", "<f4", {l.q_rows, c.topk}, true, &Inputs::target, nullptr, nullptr, nullptr, true});
      v.push_back({"predict", "<f4", {l.q_rows, c.topk}, true, &Inputs::predict, nullptr, nullptr, nullptr, true});
      v.push_back({"grad_loss", "<f4", {1}, true, &Inputs::grad_loss, nullptr, nullptr, nullptr, true});
    }
    return v;
  }
  v = {{"q", "<f4", {l.q_rows, c.hq, c.dim}, true, &Inputs::q},
       {"k", "<f4", {l.kv_rows, c.hkv, c.dim}, true, &Inputs::k},
       {"v", "<f4", {l.kv_rows, c.hkv, c.dim_v}, true, &Inputs::v}};
  if (bwd) {  // dO and the forward's O in the dtype, its LSE in fp32 (as a kernel's own forward hands them over)
    v.push_back({"dout", "<f4", {l.q_rows, c.hq, c.dim_v}, true, &Inputs::dout});
    v.push_back({"o", "<f4", {l.o_rows, c.hq, c.dim_v}, true, &Inputs::o});
    v.push_back({"lse", "<f4", {l.stats_rows, c.hq}, true, &Inputs::lse, nullptr, nullptr, nullptr, true});
  }
  return v;
}

std::vector<ExternalTensor> external_outputs(const Layout& l) {
  const Case& c = l.c;
  if (c.op == Op::Indexer && c.pass == Pass::Bwd)  // the loss is optional (cuDNN's backward returns gradients only)
    return {{"dq", "<f4", {l.q_rows, c.heads, c.dim}, true, nullptr, &Outputs::dq},
            {"dk", "<f4", {l.kv_rows, c.dim}, true, nullptr, &Outputs::dk},
            {"dw", "<f4", {l.q_rows, c.heads}, true, nullptr, &Outputs::dw},
            {"loss", "<f4", {1}, false, nullptr, &Outputs::loss}};
  if (c.op == Op::Indexer)
    return {{"topk", "<i4", {l.q_rows, c.topk}, true, nullptr, nullptr, &Outputs::topk},
            {"scores", "<f4", {l.q_rows, c.topk}, false, nullptr, &Outputs::scores}};
  if (c.pass == Pass::Bwd)
    return {{"dq", "<f4", {l.q_rows, c.hq, c.dim}, true, nullptr, &Outputs::dq},
            {"dk", "<f4", {l.kv_rows, c.hkv, c.dim}, true, nullptr, &Outputs::dk},
            {"dv", "<f4", {l.kv_rows, c.hkv, c.dim_v}, true, nullptr, &Outputs::dv}};
  return {{"o", "<f4", {l.o_rows, c.hq, c.dim_v}, true, nullptr, &Outputs::o},
          {"lse", "<f4", {l.stats_rows, c.hq}, true, nullptr, &Outputs::lse}};
}

namespace {

// A key's meta.json path ("cp.size") as a JSON pointer ("/cp/size").
std::string meta_pointer(const char* path) {
  std::string p = "/";
  for (const char* at = path; *at; ++at) p += *at == '.' ? '/' : *at;
  return p;
}

// meta.json without its tensor files.
nlohmann::json case_meta(const Layout& l) {
  const Case& c = l.c;
  using nlohmann::json;
  json m;
  m["protocol"] = kProtocolVersion;
  m["case"] = print_case(c);
  m["dtype_note"] = fmt::format("{}; poison=large is {:.9g} (the dtype's largest finite value)",
                                c.dtype == DType::BF16  ? "bf16 inputs are stored as uint16 bit patterns: float32 = bits << 16"
                                : c.dtype == DType::F16 ? "fp16 inputs are stored as float16"
                                                        : "fp32 inputs are stored as float32",
                                poison_value(Poison::Large, c.dtype));
  const Case resolved = kernel_case(l);
  for (const CaseKey& k : case_key_table()) {  // the keys a kernel sees, at their paths (case_keys.cpp)
    if (!meta_carries(k, c)) continue;
    const json::json_pointer at(meta_pointer(k.kernel.meta));
    if (m.contains(at)) throw std::logic_error(fmt::format("meta.json: case key {} and another write {}", k.name, k.kernel.meta));
    m[at] = std::visit(
        [](const auto& v) -> json {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, EnumValue>) {
            return v.name;
          } else {
            return v;
          }
        },
        k.kernel.value(resolved));
  }
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
      "pos0 = shift + the chunk's first token). Allowed keys (document coordinates s, KV buffer row kv_off+s): "
      "indexer s < clamp(floor((p+1)/ratio), 0, kv_len) (mask none: all kv_len). SDPA (mask none: all kv_len): "
      "right bound s <= p + window_right (0 = causal, -1 = no right bound, > 0 = a band past p); left bound by "
      "window_convention: cudnn s > p - window when window > 0 (0 or -1: none), fa s >= p - window when "
      "window >= 0 (0: the diagonal only; -1: none). Indexer top-k returns KV buffer rows, best first by exact "
      "score, ties to the lower index, -1 fill; pad rows of a segment return all -1. SDPA LSE is the natural "
      "log; rows with no allowed key: O = 0 and LSE = -inf under empty_rows=neginf, +inf under empty_rows=posinf. "
      "max_seqlen (q, kv; >= every length) and num_splits (split-KV ranges of ceil(max_seqlen.kv / num_splits) "
      "keys) are what a kernel is given: they do not change the exact result. GQA: query head h reads kv head "
      "h / (hq/hkv). Under CP the K/V buffer is the all-gathered global one and Q/O/stats rows are this rank's "
      "local buffer.";
  if (c.op == Op::Indexer && c.pass == Pass::Bwd)
    m["semantics_backward"] =
        "Indexer backward (pass=bwd): per valid row t and valid slot j (topk[t,j] >= 0; -1 slots contribute "
        "nothing, their target/predict hold the poison): lt = clip(log target, -100, 0), lp = clip(log predict, "
        "-100, 0); loss = sum_t sum_j exp(lt)(lt - lp) / denominator; g_j = -exp(lt) * [log predict_j >= -100]; "
        "dz_j = (g_j - predict_j * sum_i g_i) * grad_loss / denominator; with a_hj = q[t,h] . k[topk[t,j]]: "
        "dw[t,h] = sum_j dz_j scale max(a_hj, 0); dq[t,h] = sum_j dz_j scale w[t,h] [a_hj > 0] k_j; "
        "dk[key] += dz_j scale sum_h w[t,h] [a_hj > 0] q[t,h] over every row that selected the key (the whole K "
        "buffer; valid K rows no row selected: 0; under CP only this rank's rows). denominator by loss_mean: rows "
        "= the Q buffer's rows, valid = valid rows, keyed = valid rows with a valid slot, sum = 1. loss.npy is "
        "optional.";

  return m;
}

}  // namespace

std::string case_meta_text(const Layout& l) { return case_meta(l).dump(1); }

std::span<const MetaField> meta_layout_fields() {
  static const MetaField fields[] = {
      {"protocol", "the exec: protocol's version (1)"},
      {"case", "the canonical case line"},
      {"dtype_note", "how the inputs of this dtype are stored, and the value of poison=large in it"},
      {"rows", "buffer rows: `q`, `kv`, `o`, `stats` (the capacities)"},
      {"docs", "per document: `q_len`, `kv_len` (valid tokens), `q_off`, `kv_off`, `o_off`, `stats_off` (ragged "
               "offsets in rows; q/o/stats global under CP), `q_padded`, `packed_q_off`, `packed_kv_off` (cu_seqlens)"},
      {"q_lens", "valid q tokens per document"},
      {"kv_lens", "valid k/v tokens per document"},
      {"cu_seqlens_q", "prefix sums of q_lens, 0 first"},
      {"cu_seqlens_kv", "prefix sums of kv_lens, 0 first"},
      {"q_offsets", "Q ragged offsets with the capacity last (`cu_seqlens_padded`); under CP global, the padded "
                    "documents before the split"},
      {"kv_offsets", "K/V ragged offsets with the capacity last"},
      {"o_offsets", "O ragged offsets with the capacity last (global under CP)"},
      {"stats_offsets", "LSE ragged offsets with the capacity last (global under CP)"},
      {"segments", "per run of this rank's query rows: `doc`, `chunk` (-1 without CP), `row0`, `o_row0`, "
                   "`stats_row0`, `pos0` (the document position of row0), `rows`, `valid` (rows >= valid are pad "
                   "rows), `key_len`"},
      {"q_causal_offsets", "each segment's pos0"},
      {"semantics", "positions, allowed keys, conventions and outputs in words"},
      {"semantics_backward", "the indexer backward's loss and gradients in words (op=indexer pass=bwd)", false, true},
      {"inputs", "per input tensor: `file`, `shape`, `stored_as` (<f4, <f2, <u2 bf16 bits, <i4)", true},
      {"outputs", "per output tensor: `file`, `shape`, `dtype`, `required`", true},
      {"sentinel", "what the output files are pre-filled with: `float_bits`, `index`", true},
  };
  return fields;
}

std::string write_case_dir(const std::string& dir, const Layout& l, const Inputs& in) {
  using nlohmann::json;
  json m = case_meta(l);
  json tensors;
  for (const auto& t : external_inputs(l)) {
    std::string stored = t.descr;
    if (t.in_indices)
      npy::write(dir + "/" + t.name + ".npy", "<i4", t.shape, (in.*t.in_indices).data());
    else
      stored = write_input(dir, t.name, t.exact_fp32 ? DType::F32 : l.c.dtype, in.*t.in, t.shape);
    tensors[t.name] = {{"file", t.name + ".npy"}, {"shape", t.shape}, {"stored_as", stored}};
  }
  m["inputs"] = tensors;
  json outs;
  const Outputs sentinel = make_sentinel_outputs(l);
  for (const auto& o : external_outputs(l)) {
    outs[o.name] = {{"file", o.name + ".npy"}, {"shape", o.shape}, {"dtype", o.descr}, {"required", o.required}};
    const void* data = o.indices ? static_cast<const void*>((sentinel.*o.indices).data())
                                 : static_cast<const void*>((sentinel.*o.floats).data());
    npy::write(dir + "/" + o.name + ".npy", o.descr, o.shape, data);
  }
  m["outputs"] = outs;
  m["sentinel"] = {{"float_bits", fmt::format("0x{:08x}", kSentinelBits)}, {"index", kSentinelIndex}};

  const std::string text = m.dump(1);
  std::ofstream(dir + "/meta.json") << text << "\n";
  std::ofstream(dir + "/case.txt") << print_case(l.c) << "\n";
  return text;
}

namespace {

// The last lines of a captured stderr tail, for messages.
std::string tail_of(std::string s, size_t max_lines = 12, size_t max_bytes = 2000) {
  if (s.size() > max_bytes) {
    size_t at = s.size() - max_bytes;
    while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;  // whole UTF-8 characters
    s = "..." + s.substr(at);
  }
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

std::string last_line(const std::string& err) {
  std::string t = tail_of(err, 1, 500);
  if (t.rfind("...", 0) == 0) t = t.substr(3);
  while (!t.empty() && (t.front() == '\n' || t.front() == ' ')) t.erase(0, 1);
  return t;
}

struct FileStamp {
  bool exists = false;
  ino_t ino = 0;
  mode_t mode = 0;
  int64_t size = 0, mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp stamp(const std::string& path) {  // lstat: never follows a link, never opens (a FIFO would block)
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, st.st_mode, int64_t(st.st_size),
          int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
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
    const auto specs = external_outputs(l);
    std::vector<FileStamp> before;
    for (const auto& o : specs) before.push_back(stamp(dir + "/" + o.name + ".npy"));

    SubprocessOptions so;
    so.timeout_s = opt_.timeout_s;
    so.stdout_path = dir + "/stdout.txt";
    const auto pr = run_command({"/bin/sh", "-c", cmd_ + " \"$@\"", "ao-exec", dir}, {"AO_CASE_DIR=" + dir}, so);
    if (opt_.keep_dir) std::ofstream(dir + "/stderr.txt", std::ios::binary) << pr.stderr_tail;
    const std::string tail = tail_of(pr.stderr_tail);
    const std::string tail_msg = tail.empty() ? " (stderr empty)" : "; stderr tail:\n" + tail;
    switch (pr.kind) {
      case SubprocessOutcome::NotStarted: return error("cannot start /bin/sh: " + pr.error);
      case SubprocessOutcome::TimedOut:
      case SubprocessOutcome::Interrupted: return error(pr.describe(opt_.timeout_s) + tail_msg);
      case SubprocessOutcome::Signaled: return error("command " + pr.describe(opt_.timeout_s) + tail_msg);
      case SubprocessOutcome::Exited: break;
    }
    const int code = pr.code;
    if (code == 125) {
      const std::string why = last_line(pr.stderr_tail);
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
        if (o.indices)
          out.*o.indices = npy::read_as<int32_t>(path, o.descr, o.shape);
        else
          out.*o.floats = npy::read_as<float>(path, o.descr, o.shape);
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
  o.timeout_s = seconds_from_env("AO_EXEC_TIMEOUT", o.timeout_s);
  if (const char* k = std::getenv("AO_EXEC_KEEP")) o.keep_dir = std::string(k) == "1";
  if (const char* d = std::getenv("AO_EXEC_DIR")) o.work_root = d;
  return o;
}

std::unique_ptr<Backend> make_exec_backend(const std::string& command, const ExecOptions& opt) {
  return std::make_unique<ExecBackend>(command, opt);
}

}  // namespace ao
