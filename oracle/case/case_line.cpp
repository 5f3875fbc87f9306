// Case-line parser and canonical printer. Value-level validation lives here (numbers, enums,
// ranges of single keys); structural validation (offsets, CP divisibility, memory) in layout.cpp.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "attn_oracle/case/case.h"

namespace ao {

std::string clip_for_message(const std::string& v, size_t max_bytes) {
  if (v.size() <= max_bytes) return v;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(v[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return fmt::format("{}... ({} bytes)", v.substr(0, n), v.size());
}

CaseError::CaseError(std::string k, std::string v, const std::string& why)
    : std::runtime_error(fmt::format("case key '{}' = '{}': {}", clip_for_message(k), clip_for_message(v), why)),
      key(std::move(k)),
      value(std::move(v)) {}

namespace {

constexpr int64_t kMaxLen = int64_t(1) << 40;
constexpr size_t kMaxDocs = 1 << 20;

int64_t parse_int(const std::string& key, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    throw CaseError(key, v, "not an integer");
  if (x < lo || x > hi) throw CaseError(key, v, fmt::format("must be in [{}, {}]", lo, hi));
  return x;
}

uint64_t parse_u64(const std::string& key, const std::string& v) {
  uint64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    throw CaseError(key, v, "not an unsigned 64-bit integer");
  return x;
}

double parse_double(const std::string& key, const std::string& v, double lo, double hi) {
  // strtod accepts "nan"/"inf"/hex; require a plain decimal number.
  if (v.empty() || v.find_first_not_of("0123456789.eE+-") != std::string::npos)
    throw CaseError(key, v, "not a decimal number");
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !std::isfinite(x)) throw CaseError(key, v, "not a decimal number");
  if (x < lo || x > hi) throw CaseError(key, v, fmt::format("must be in [{}, {}]", lo, hi));
  return x;
}

// "a,b,c" with "v*n" meaning n copies of v.
std::vector<int64_t> parse_list(const std::string& key, const std::string& v, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  if (v.empty()) throw CaseError(key, v, "empty list");
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw CaseError(key, v, "empty list element");
    size_t star = item.find('*');
    int64_t count = 1, val;
    if (star != std::string::npos) {
      val = parse_int(key, item.substr(0, star), lo, hi);
      count = parse_int(key, item.substr(star + 1), 1, int64_t(kMaxDocs));
    } else {
      val = parse_int(key, item, lo, hi);
    }
    if (out.size() + size_t(count) > kMaxDocs)
      throw CaseError(key, v, fmt::format("more than {} elements", kMaxDocs));
    out.insert(out.end(), size_t(count), val);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string print_list(const std::vector<int64_t>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size();) {
    size_t j = i;
    while (j < xs.size() && xs[j] == xs[i]) ++j;
    if (!s.empty()) s += ',';
    if (j - i >= 3) {
      s += fmt::format("{}*{}", xs[i], j - i);
    } else {
      for (size_t t = i; t < j; ++t) s += fmt::format("{}{}", t > i ? "," : "", xs[t]);
    }
    i = j;
  }
  return s;
}

std::string fmt_double(double x) { return fmt::format("{}", x); }

template <class E>
E parse_enum(const std::string& key, const std::string& v, const std::vector<std::pair<std::string, E>>& names) {
  for (auto& [n, e] : names)
    if (n == v) return e;
  std::string all;
  for (auto& [n, e] : names) all += (all.empty() ? "" : "|") + n;
  throw CaseError(key, v, "must be one of " + all);
}

template <class E>
std::string enum_name(E e, const std::vector<std::pair<std::string, E>>& names) {
  for (auto& [n, x] : names)
    if (x == e) return n;
  return "?";
}

const std::vector<std::pair<std::string, Op>> kOps = {{"indexer", Op::Indexer}, {"sdpa", Op::Sdpa}};
const std::vector<std::pair<std::string, MaskKind>> kMasks = {{"none", MaskKind::None},
                                                              {"topleft", MaskKind::TopLeft},
                                                              {"causal", MaskKind::TopLeft},
                                                              {"bottomright", MaskKind::BottomRight}};
const std::vector<std::pair<std::string, CpScheme>> kSchemes = {{"zigzag", CpScheme::Zigzag},
                                                                {"contiguous", CpScheme::Contiguous}};
const std::vector<std::pair<std::string, DType>> kDtypes = {
    {"fp32", DType::F32}, {"bf16", DType::BF16}, {"fp16", DType::F16}};
const std::vector<std::pair<std::string, Poison>> kPoisons = {
    {"nan", Poison::NaN}, {"inf", Poison::Inf}, {"large", Poison::Large}, {"none", Poison::None}};
const std::vector<std::pair<std::string, Precision>> kPrecisions = {{"fp32", Precision::F32},
                                                                    {"fp64", Precision::F64}};
const std::vector<std::pair<std::string, PadWrites>> kPadWrites = {{"forbid", PadWrites::Forbid},
                                                                   {"allow", PadWrites::Allow}};
const std::vector<std::pair<std::string, Probe>> kProbes = {{"none", Probe::None}, {"edges", Probe::Edges}};
const std::vector<std::pair<std::string, bool>> kBools = {{"0", false}, {"1", true}};

using Setter = std::function<void(Case&, const std::string& key, const std::string& v)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> m = [] {
    std::map<std::string, Setter> s;
    auto lens = [](Case& c, const std::string& k, const std::string& v) {
      c.q_lens = c.kv_lens = parse_list(k, v, 0, kMaxLen);
    };
    s["docs"] = lens;
    s["lens"] = lens;
    s["q_lens"] = [](Case& c, auto& k, auto& v) { c.q_lens = parse_list(k, v, 0, kMaxLen); };
    s["kv_lens"] = [](Case& c, auto& k, auto& v) { c.kv_lens = parse_list(k, v, 0, kMaxLen); };
    s["pad"] = [](Case& c, auto& k, auto& v) { c.q_pad = c.kv_pad = parse_list(k, v, 0, kMaxLen); };
    s["q_pad"] = [](Case& c, auto& k, auto& v) { c.q_pad = parse_list(k, v, 0, kMaxLen); };
    s["kv_pad"] = [](Case& c, auto& k, auto& v) { c.kv_pad = parse_list(k, v, 0, kMaxLen); };
    // Offsets: B entries, or B+1 where the last is the buffer capacity (cu_seqlens_padded style).
    s["q_offsets"] = [](Case& c, auto& k, auto& v) { c.q_offsets = parse_list(k, v, 0, kMaxLen); };
    s["kv_offsets"] = [](Case& c, auto& k, auto& v) { c.kv_offsets = parse_list(k, v, 0, kMaxLen); };
    s["o_offsets"] = [](Case& c, auto& k, auto& v) { c.o_offsets = parse_list(k, v, 0, kMaxLen); };
    s["stats_offsets"] = [](Case& c, auto& k, auto& v) { c.stats_offsets = parse_list(k, v, 0, kMaxLen); };
    s["padded_offsets"] = [](Case& c, auto& k, auto& v) {
      c.q_offsets = c.kv_offsets = parse_list(k, v, 0, kMaxLen);
    };
    s["capacity"] = [](Case& c, auto& k, auto& v) { c.q_capacity = c.kv_capacity = parse_int(k, v, 0, kMaxLen); };
    s["q_capacity"] = [](Case& c, auto& k, auto& v) { c.q_capacity = parse_int(k, v, 0, kMaxLen); };
    s["kv_capacity"] = [](Case& c, auto& k, auto& v) { c.kv_capacity = parse_int(k, v, 0, kMaxLen); };
    s["tail"] = [](Case& c, auto& k, auto& v) { c.tail = parse_int(k, v, 0, kMaxLen); };
    s["cp"] = [](Case& c, auto& k, auto& v) { c.cp = int(parse_int(k, v, 1, 4096)); };
    s["rank"] = [](Case& c, auto& k, auto& v) { c.rank = int(parse_int(k, v, 0, 4095)); };
    s["cp_scheme"] = [](Case& c, auto& k, auto& v) { c.cp_scheme = parse_enum(k, v, kSchemes); };
    s["crop"] = [](Case& c, auto& k, auto& v) { c.crop = parse_enum(k, v, kBools); };
    s["mask"] = [](Case& c, auto& k, auto& v) { c.mask = parse_enum(k, v, kMasks); };
    s["window"] = [](Case& c, auto& k, auto& v) { c.window = parse_int(k, v, 0, kMaxLen); };
    s["heads"] = [](Case& c, auto& k, auto& v) { c.heads = int(parse_int(k, v, 1, 1024)); };
    s["hq"] = [](Case& c, auto& k, auto& v) { c.hq = int(parse_int(k, v, 1, 1024)); };
    s["hkv"] = [](Case& c, auto& k, auto& v) { c.hkv = int(parse_int(k, v, 1, 1024)); };
    s["dim"] = [](Case& c, auto& k, auto& v) { c.dim = int(parse_int(k, v, 1, 1024)); };
    s["dim_v"] = [](Case& c, auto& k, auto& v) { c.dim_v = int(parse_int(k, v, 1, 1024)); };
    s["topk"] = [](Case& c, auto& k, auto& v) { c.topk = int(parse_int(k, v, 1, 1 << 16)); };
    s["ratio"] = [](Case& c, auto& k, auto& v) { c.ratio = int(parse_int(k, v, 1, 1024)); };
    s["dtype"] = [](Case& c, auto& k, auto& v) { c.dtype = parse_enum(k, v, kDtypes); };
    s["seed"] = [](Case& c, auto& k, auto& v) { c.seed = parse_u64(k, v); };
    s["poison"] = [](Case& c, auto& k, auto& v) { c.poison = parse_enum(k, v, kPoisons); };
    s["precision"] = [](Case& c, auto& k, auto& v) { c.precision = parse_enum(k, v, kPrecisions); };
    s["scale"] = [](Case& c, auto& k, auto& v) { c.scale = parse_double(k, v, 1e-12, 1e12); };
    s["rows"] = [](Case& c, auto& k, auto& v) { c.rows = v == "all" ? 0 : parse_int(k, v, 1, kMaxLen); };
    s["levels"] = [](Case& c, auto& k, auto& v) { c.levels = uint32_t(parse_int(k, v, 2, 1 << 24)); };
    s["atol"] = [](Case& c, auto& k, auto& v) { c.atol = parse_double(k, v, 0, 1e30); };
    s["rtol"] = [](Case& c, auto& k, auto& v) { c.rtol = parse_double(k, v, 0, 1e30); };
    s["lse_tol"] = [](Case& c, auto& k, auto& v) { c.lse_tol = parse_double(k, v, 0, 1e30); };
    s["score_tol"] = [](Case& c, auto& k, auto& v) { c.score_tol = parse_double(k, v, 0, 1e30); };
    s["min_recall"] = [](Case& c, auto& k, auto& v) { c.min_recall = parse_double(k, v, 0, 1); };
    s["pad_writes"] = [](Case& c, auto& k, auto& v) { c.pad_writes = parse_enum(k, v, kPadWrites); };
    s["probe"] = [](Case& c, auto& k, auto& v) { c.probe = parse_enum(k, v, kProbes); };
    return s;
  }();
  return m;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& case_keys() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"op", "indexer | sdpa (must come first or anywhere; defaults depend on it)"},
      {"docs / lens", "valid lengths per document, q = kv (e.g. 65536,65536; 64*100 = 100 docs of 64)"},
      {"q_lens, kv_lens", "separate q and kv lengths"},
      {"pad, q_pad, kv_pad", "gap rows after each sequence (one value = same after every sequence)"},
      {"padded_offsets", "ragged offsets for Q and K/V (B entries, or B+1 with the capacity last)"},
      {"q_offsets, kv_offsets, o_offsets, stats_offsets", "per-tensor ragged offsets in rows (o_/stats_: sdpa)"},
      {"capacity, q_capacity, kv_capacity", "buffer rows in total (>= end of the last sequence)"},
      {"tail", "extra capacity rows past the last sequence"},
      {"cp, rank, cp_scheme", "context parallel size, this rank, zigzag | contiguous (cp_scheme: cp > 1 only)"},
      {"crop", "0|1: the kernel sees keys cropped to the chunk end (cp > 1, causal masks only)"},
      {"mask", "none | causal (= topleft) | topleft | bottomright"},
      {"window", "sliding window (sdpa): keys in (pos-window, pos]"},
      {"heads", "indexer heads"},
      {"hq, hkv", "sdpa query / kv heads (hq multiple of hkv)"},
      {"dim, dim_v", "head dims"},
      {"topk, ratio", "indexer top-k and key compression ratio (ratio > 1 needs a causal mask)"},
      {"dtype", "fp32 | bf16 | fp16: inputs are rounded to it"},
      {"seed", "input generator seed"},
      {"poison", "nan | inf | large | none: what fills input pad slots"},
      {"precision", "fp32 | fp64 reference arithmetic"},
      {"scale", "score scale (indexer default 1, sdpa 1/sqrt(dim))"},
      {"rows", "all | N: check N sampled rows plus every segment's boundary rows"},
      {"levels", "round inputs to the nearest multiple of 2/N, ties away from 0 (about N values: tie stress)"},
      {"atol, rtol, lse_tol", "sdpa tolerances (defaults per dtype)"},
      {"score_tol, min_recall", "indexer tie tolerance override, minimum tie-aware recall"},
      {"pad_writes", "forbid | allow writes into output pad slots"},
      {"probe", "none | edges (sdpa): inputs where each row's mask-boundary keys dominate (one-key errors show)"},
  };
  return k;
}

std::string strip_utf8_bom(const std::string& line) {
  return line.rfind("\xEF\xBB\xBF", 0) == 0 ? line.substr(3) : line;
}

Case defaults_for(Op op) {
  Case c;
  c.op = op;
  if (op == Op::Indexer) {
    c.heads = 4; c.dim = 32; c.topk = 64; c.mask = MaskKind::BottomRight;
    c.q_lens = c.kv_lens = {512};
  } else {
    c.hq = 4; c.hkv = 0; c.dim = 64; c.dim_v = 0; c.mask = MaskKind::TopLeft;
    c.q_lens = c.kv_lens = {256};
  }
  return c;
}

Case parse_case(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> kvs;
  std::istringstream is(strip_utf8_bom(line));
  std::string tok;
  std::set<std::string> seen;
  Op op = Op::Indexer;
  while (is >> tok) {
    if (tok[0] == '#') break;  // trailing comment
    // Control bytes (NUL would truncate the message) are shown as '?' in the key/value reported.
    if (std::any_of(tok.begin(), tok.end(), [](char ch) { return (unsigned char)ch < 0x20 || ch == 0x7f; })) {
      std::string shown = tok;
      for (auto& ch : shown) if ((unsigned char)ch < 0x20 || ch == 0x7f) ch = '?';
      const size_t e = shown.find('=');
      throw CaseError(e == std::string::npos || e == 0 ? shown : shown.substr(0, e),
                      e == std::string::npos ? "" : shown.substr(e + 1), "contains a control byte (shown as ?)");
    }
    size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CaseError(tok, "", "expected key=value");
    std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (!seen.insert(k).second) throw CaseError(k, v, "key given twice");
    if (k == "op") {
      op = parse_enum(k, v, kOps);
      continue;
    }
    if (!setters().count(k)) throw CaseError(k, v, "unknown key (see `attn-oracle keys`)");
    kvs.emplace_back(k, v);
  }
  Case c = defaults_for(op);
  static const std::set<std::string> indexer_only = {"heads", "topk", "ratio", "score_tol", "min_recall"};
  static const std::set<std::string> sdpa_only = {"hq",   "hkv",  "dim_v",   "window",       "atol",
                                                  "rtol", "lse_tol", "o_offsets", "stats_offsets", "probe"};
  for (auto& [k, v] : kvs) {
    if (op == Op::Sdpa && indexer_only.count(k)) throw CaseError(k, v, "applies only to op=indexer");
    if (op == Op::Indexer && sdpa_only.count(k)) throw CaseError(k, v, "applies only to op=sdpa");
    setters().at(k)(c, k, v);
  }
  if ((seen.count("docs") + seen.count("lens")) > 1 ||
      ((seen.count("docs") || seen.count("lens")) && (seen.count("q_lens") || seen.count("kv_lens"))))
    throw CaseError("docs", "", "give docs/lens, or q_lens with kv_lens, not both");
  // The other both-buffer aliases: one would silently override the other, depending on key order.
  static const std::array<std::array<const char*, 3>, 3> kAliases = {
      {{"pad", "q_pad", "kv_pad"}, {"padded_offsets", "q_offsets", "kv_offsets"}, {"capacity", "q_capacity", "kv_capacity"}}};
  for (const auto& [both, q, kv] : kAliases)
    if (seen.count(both) && (seen.count(q) || seen.count(kv)))
      throw CaseError(seen.count(q) ? q : kv, "", fmt::format("give {}, or {} / {}, not both", both, q, kv));
  // Keys that only act under context parallelism: without cp > 1 they would be silently ignored.
  // (The values that differ from the default are rejected again by make_layout, for built cases.)
  if (c.cp == 1)
    for (const char* k : {"cp_scheme", "crop"})
      for (const auto& [key, v] : kvs)
        if (key == k) throw CaseError(key, v, "applies only under context parallelism (cp > 1)");
  // One side given alone: the other follows it.
  if (seen.count("q_lens") && !seen.count("kv_lens")) c.kv_lens = c.q_lens;
  if (seen.count("kv_lens") && !seen.count("q_lens")) c.q_lens = c.kv_lens;
  if (c.hkv == 0) c.hkv = c.hq;
  if (c.dim_v == 0) c.dim_v = c.dim;
  return c;
}

std::string print_case(const Case& c) {
  Case d = defaults_for(c.op);
  if (d.hkv == 0) d.hkv = c.hq;
  if (d.dim_v == 0) d.dim_v = c.dim;
  std::vector<std::string> parts;
  auto add = [&](const std::string& k, const std::string& v) { parts.push_back(k + "=" + v); };
  add("op", enum_name(c.op, kOps));
  if (c.q_lens == c.kv_lens) {
    add("docs", print_list(c.q_lens));
  } else {
    add("q_lens", print_list(c.q_lens));
    add("kv_lens", print_list(c.kv_lens));
  }
  if (c.q_pad == c.kv_pad) {
    if (!c.q_pad.empty()) add("pad", print_list(c.q_pad));
  } else {
    if (!c.q_pad.empty()) add("q_pad", print_list(c.q_pad));
    if (!c.kv_pad.empty()) add("kv_pad", print_list(c.kv_pad));
  }
  if (c.q_offsets == c.kv_offsets) {
    if (!c.q_offsets.empty()) add("padded_offsets", print_list(c.q_offsets));
  } else {
    if (!c.q_offsets.empty()) add("q_offsets", print_list(c.q_offsets));
    if (!c.kv_offsets.empty()) add("kv_offsets", print_list(c.kv_offsets));
  }
  if (!c.o_offsets.empty()) add("o_offsets", print_list(c.o_offsets));
  if (!c.stats_offsets.empty()) add("stats_offsets", print_list(c.stats_offsets));
  if (c.q_capacity == c.kv_capacity) {
    if (c.q_capacity >= 0) add("capacity", fmt::format("{}", c.q_capacity));
  } else {
    if (c.q_capacity >= 0) add("q_capacity", fmt::format("{}", c.q_capacity));
    if (c.kv_capacity >= 0) add("kv_capacity", fmt::format("{}", c.kv_capacity));
  }
  if (c.tail != d.tail) add("tail", fmt::format("{}", c.tail));
  if (c.cp != d.cp) add("cp", fmt::format("{}", c.cp));
  if (c.rank != d.rank) add("rank", fmt::format("{}", c.rank));
  if (c.cp_scheme != d.cp_scheme) add("cp_scheme", enum_name(c.cp_scheme, kSchemes));
  if (c.crop != d.crop) add("crop", c.crop ? "1" : "0");
  if (c.mask != d.mask) add("mask", enum_name(c.mask, kMasks));
  if (c.window != d.window) add("window", fmt::format("{}", c.window));
  if (c.op == Op::Indexer) {
    if (c.heads != d.heads) add("heads", fmt::format("{}", c.heads));
  }
  if (c.hq != d.hq) add("hq", fmt::format("{}", c.hq));
  if (c.hkv != c.hq) add("hkv", fmt::format("{}", c.hkv));
  if (c.dim != d.dim) add("dim", fmt::format("{}", c.dim));
  if (c.dim_v != c.dim) add("dim_v", fmt::format("{}", c.dim_v));
  if (c.topk != d.topk) add("topk", fmt::format("{}", c.topk));
  if (c.ratio != d.ratio) add("ratio", fmt::format("{}", c.ratio));
  if (c.dtype != d.dtype) add("dtype", enum_name(c.dtype, kDtypes));
  if (c.seed != d.seed) add("seed", fmt::format("{}", c.seed));
  if (c.poison != d.poison) add("poison", enum_name(c.poison, kPoisons));
  if (c.precision != d.precision) add("precision", enum_name(c.precision, kPrecisions));
  if (c.scale != d.scale) add("scale", fmt_double(c.scale));
  if (c.rows != d.rows) add("rows", fmt::format("{}", c.rows));
  if (c.levels != d.levels) add("levels", fmt::format("{}", c.levels));
  if (c.atol != d.atol) add("atol", fmt_double(c.atol));
  if (c.rtol != d.rtol) add("rtol", fmt_double(c.rtol));
  if (c.lse_tol != d.lse_tol) add("lse_tol", fmt_double(c.lse_tol));
  if (c.score_tol != d.score_tol) add("score_tol", fmt_double(c.score_tol));
  if (c.min_recall != d.min_recall) add("min_recall", fmt_double(c.min_recall));
  if (c.pad_writes != d.pad_writes) add("pad_writes", enum_name(c.pad_writes, kPadWrites));
  if (c.probe != d.probe) add("probe", enum_name(c.probe, kProbes));
  std::string s;
  for (auto& p : parts) s += (s.empty() ? "" : " ") + p;
  return s;
}

}  // namespace ao
