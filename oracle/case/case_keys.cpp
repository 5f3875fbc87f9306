// The case-key table (see case_keys.h): one entry per key. Value-level validation lives here
// (numbers, enums, ranges of single keys); cross-key checks in case_line.cpp; structural validation
// (offsets, CP divisibility, memory) in layout.cpp.
#include "attn_oracle/case/case_keys.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"

namespace ao {

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
std::vector<int64_t> parse_list(const std::string& key, const std::string& v) {
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
      val = parse_int(key, item.substr(0, star), 0, kMaxLen);
      count = parse_int(key, item.substr(star + 1), 1, int64_t(kMaxDocs));
    } else {
      val = parse_int(key, item, 0, kMaxLen);
    }
    if (out.size() + size_t(count) > kMaxDocs)
      throw CaseError(key, v, fmt::format("more than {} elements", kMaxDocs));
    out.insert(out.end(), size_t(count), val);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

template <class E>
E parse_enum_value(const std::string& key, const std::string& v) {
  if (auto e = parse_enum<E>(v)) return *e;
  throw CaseError(key, v, "must be one of " + enum_choices<E>());
}

// Value texts, as the canonical line writes them.
std::string text(const std::vector<int64_t>& xs) {  // runs of 3 or more as v*n
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
std::string text(bool b) { return b ? "1" : "0"; }
template <class T>
std::string text(const T& x) {
  if constexpr (std::is_enum_v<T>) {
    return to_string(x);
  } else {
    return fmt::format("{}", x);
  }
}

using Parse = std::function<void(Case&, const std::string&, const std::string&)>;
using Print = std::function<std::optional<std::string>(const Case&, const Case&)>;
using Reset = std::function<void(Case&, const Case&)>;
using Show = std::function<std::string(const Case&)>;  // the value text, default or not (for default_text)

// A scalar field's value as a kernel is given it (KeyValue).
template <class T>
KeyValue kernel_value(const T& x) {
  if constexpr (std::is_enum_v<T>) {
    return EnumValue{to_string(x), int(x)};
  } else if constexpr (std::is_same_v<T, bool>) {
    return x;
  } else if constexpr (std::is_floating_point_v<T>) {
    return double(x);
  } else {
    return int64_t(x);
  }
}

// How one key reads and writes its Case field(s), and how a kernel sees it.
struct Codec {
  Parse parse;
  Print print;
  Reset reset;
  Show show;
  KernelView kernel = {};

  // Written into meta.json at `path` and (abi_field) into the plugin's ao_layout.
  Codec seen(const char* path, const char* abi_field = nullptr) && {
    kernel.meta = path;
    kernel.abi_field = abi_field;
    return std::move(*this);
  }
  // Given to the plugin only.
  Codec abi(const char* abi_field) && {
    kernel.abi_field = abi_field;
    return std::move(*this);
  }
  // In the meta.json of these ops (wider than the key's: the SDPA conventions at their defaults for the
  // indexer too, which adapters read for either op).
  Codec meta_for(KeyOps ops) && {
    kernel.meta_ops = ops;
    return std::move(*this);
  }
  Codec only(Pass p) && {
    kernel.only_pass = p;
    return std::move(*this);
  }
  // Seen through these layout fields of meta.json, which the layout's writer fills.
  Codec via(const char* fields) && {
    kernel.via = fields;
    return std::move(*this);
  }
};

// A key that is one Case field: printed when it differs from the default, reset by copying it.
template <class T, class ParseValue>
Codec field(T Case::*m, ParseValue parse_value) {
  Codec codec{[m, parse_value](Case& c, const std::string& k, const std::string& v) { c.*m = T(parse_value(k, v)); },
              [m](const Case& c, const Case& d) -> std::optional<std::string> {
                if (c.*m == d.*m) return std::nullopt;
                return text(c.*m);
              },
              [m](Case& c, const Case& d) { c.*m = d.*m; }, [m](const Case& c) { return text(c.*m); }};
  if constexpr (std::is_scalar_v<T>) codec.kernel.value = [m](const Case& c) { return kernel_value(c.*m); };
  return codec;
}

auto int_in(int64_t lo, int64_t hi) {
  return [lo, hi](const std::string& k, const std::string& v) { return parse_int(k, v, lo, hi); };
}
auto real_in(double lo, double hi) {
  return [lo, hi](const std::string& k, const std::string& v) { return parse_double(k, v, lo, hi); };
}
template <class E>
auto enum_value() {
  return [](const std::string& k, const std::string& v) { return parse_enum_value<E>(k, v); };
}
auto bool_value() {
  return [](const std::string& k, const std::string& v) {
    if (v == "0" || v == "1") return v == "1";
    throw CaseError(k, v, "must be one of 0|1");
  };
}
auto list_value() {
  return [](const std::string& k, const std::string& v) { return parse_list(k, v); };
}

template <class T>
using ValueParser = std::type_identity_t<std::function<T(const std::string&, const std::string&)>>;
template <class T>
using Omitted = std::type_identity_t<std::function<bool(const T&)>>;  // the value the line leaves out

// A both-buffer key (docs, pad, padded_offsets, capacity) sets q and kv alike; it is printed when
// they are equal (and not `omitted`), its per-buffer keys when they differ.
template <class T>
Codec both(T Case::*q, T Case::*kv, ValueParser<T> parse_value, Omitted<T> omitted) {
  return {[=](Case& c, const std::string& k, const std::string& v) { c.*q = c.*kv = parse_value(k, v); },
          [=](const Case& c, const Case&) -> std::optional<std::string> {
            if (c.*q != c.*kv || omitted(c.*q)) return std::nullopt;
            return text(c.*q);
          },
          [=](Case& c, const Case& d) {
            c.*q = d.*q;
            c.*kv = d.*kv;
          },
          [=](const Case& c) { return text(c.*q); }};
}
template <class T>
Codec one_side(T Case::*side, T Case::*other, ValueParser<T> parse_value, Omitted<T> omitted) {
  return {[=](Case& c, const std::string& k, const std::string& v) { c.*side = parse_value(k, v); },
          [=](const Case& c, const Case&) -> std::optional<std::string> {
            if (c.*side == c.*other || omitted(c.*side)) return std::nullopt;
            return text(c.*side);
          },
          [=](Case& c, const Case& d) { c.*side = d.*side; }, [=](const Case& c) { return text(c.*side); }};
}
const auto kList = [](const std::string& k, const std::string& v) { return parse_list(k, v); };
const auto kCapacity = [](const std::string& k, const std::string& v) { return parse_int(k, v, 0, kMaxLen); };
const auto kNever = [](const std::vector<int64_t>&) { return false; };
const auto kEmpty = [](const std::vector<int64_t>& x) { return x.empty(); };
const auto kUnset = [](const int64_t& x) { return x < 0; };  // capacity: -1 = end of the last sequence

template <class E>
std::string choices(const char* what) {
  return enum_choices<E>(" | ") + ": " + what;
}

struct Entry {
  const char* name;
  KeyOps ops;
  KeyShrink shrink;
  std::string doc;
  Codec codec;
  std::string default_text = {};  // empty: the value of defaults_for(op), per op the key applies to
  const char* q_key = nullptr;
  const char* kv_key = nullptr;
  const char* alias_of = nullptr;
  bool needs_cp = false;
};

CaseKey make_key(Entry e) {
  if (e.default_text.empty()) {  // per op: "4", or "indexer 32, sdpa 64" where they differ
    std::vector<std::pair<Op, std::string>> per_op;
    for (Op op : {Op::Indexer, Op::Sdpa})
      if (key_applies(e.ops, op)) per_op.emplace_back(op, e.codec.show(canonical_defaults(defaults_for(op))));
    if (per_op.size() == 1 || per_op[0].second == per_op[1].second) {
      e.default_text = per_op[0].second;
    } else {
      e.default_text = fmt::format("{} {}, {} {}", to_string(per_op[0].first), per_op[0].second,
                                   to_string(per_op[1].first), per_op[1].second);
    }
  }
  if ((e.codec.kernel.meta || e.codec.kernel.abi_field) && !e.codec.kernel.value)
    throw std::logic_error(fmt::format("case key {}: a kernel sees it but it has no value", e.name));
  return {e.name,  e.ops,  e.doc,      e.shrink,   std::move(e.codec.parse), std::move(e.codec.print),
          std::move(e.codec.reset),   e.default_text, e.q_key, e.kv_key, e.alias_of, e.needs_cp,
          std::move(e.codec.kernel)};
}

using enum KeyOps;
using enum KeyShrink;

std::vector<CaseKey> build_table() {
  const Codec lens = both(&Case::q_lens, &Case::kv_lens, kList, kNever);
  Codec lens_alias = lens;
  lens_alias.print = [](const Case&, const Case&) { return std::nullopt; };  // printed as docs
  Codec op = field(&Case::op, enum_value<Op>());
  op.print = [](const Case& c, const Case&) -> std::optional<std::string> { return to_string(c.op); };  // always
  Codec rows = field(&Case::rows, [](const std::string& k, const std::string& v) {
    return v == "all" ? 0 : parse_int(k, v, 1, kMaxLen);
  });
  rows.show = [](const Case& c) { return c.rows == 0 ? std::string("all") : text(c.rows); };
  const std::string derived_tol = "derived";  // docs/tolerances.md, "How the tolerances are derived"
  // The layout fields of meta.json through which a kernel sees the layout keys.
  const char* const kLensVia = "docs, q_lens, kv_lens, cu_seqlens_q, cu_seqlens_kv, segments";
  const char* const kOffsetsVia = "docs, q_offsets, kv_offsets, o_offsets, stats_offsets, rows";
  const char* const kRowsVia = "rows, q_offsets, kv_offsets (the capacity last)";

  std::vector<Entry> e = {
      {"op", Both, Keep, choices<Op>("the operation; the other keys' defaults depend on it (it may come anywhere)"),
       std::move(op).seen("op", "op"), "indexer"},
      {"docs", Both, Structural, "valid tokens per document, q = kv (`64*100` = 100 documents of 64)",
       Codec(lens).via(kLensVia), {},
       "q_lens", "kv_lens"},
      {"lens", Both, Structural, "same as docs", std::move(lens_alias).via(kLensVia), {}, "q_lens", "kv_lens", "docs"},
      {"q_lens", Both, Structural, "valid q tokens per document (given alone, kv_lens follows it)",
       one_side(&Case::q_lens, &Case::kv_lens, kList, kNever).via(kLensVia)},
      {"kv_lens", Both, Structural, "valid k/v tokens per document (given alone, q_lens follows it)",
       one_side(&Case::kv_lens, &Case::q_lens, kList, kNever).via(kLensVia)},
      {"pad", Both, Structural, "gap rows after each sequence, Q and K/V (one value = after every sequence)",
       both(&Case::q_pad, &Case::kv_pad, kList, kEmpty).via(kOffsetsVia), "0", "q_pad", "kv_pad"},
      {"q_pad", Both, Structural, "gap rows after each Q sequence", one_side(&Case::q_pad, &Case::kv_pad, kList, kEmpty).via(kOffsetsVia),
       "0"},
      {"kv_pad", Both, Structural, "gap rows after each K/V sequence",
       one_side(&Case::kv_pad, &Case::q_pad, kList, kEmpty).via(kOffsetsVia), "0"},
      {"padded_offsets", Both, Structural,
       "ragged offsets in rows for Q and K/V (B entries, or B+1 with the capacity last, like `cu_seqlens_padded`)",
       both(&Case::q_offsets, &Case::kv_offsets, kList, kEmpty).via(kOffsetsVia), "lengths + pads", "q_offsets",
       "kv_offsets"},
      {"q_offsets", Both, Structural, "Q offsets in rows (as padded_offsets)",
       one_side(&Case::q_offsets, &Case::kv_offsets, kList, kEmpty).via(kOffsetsVia), "lengths + pads"},
      {"kv_offsets", Both, Structural, "K/V offsets in rows (as padded_offsets)",
       one_side(&Case::kv_offsets, &Case::q_offsets, kList, kEmpty).via(kOffsetsVia), "lengths + pads"},
      {"o_offsets", Sdpa, ToDefault, "output offsets in rows", field(&Case::o_offsets, list_value()).via("o_offsets, docs (o_off)"),
       "= q_offsets"},
      {"stats_offsets", Sdpa, ToDefault, "LSE (stats) offsets in rows", field(&Case::stats_offsets, list_value()).via("stats_offsets, docs (stats_off)"),
       "= q_offsets"},
      {"capacity", Both, ToDefault, "buffer rows in total, Q and K/V (>= end of the last sequence)",
       both(&Case::q_capacity, &Case::kv_capacity, kCapacity, kUnset).via(kRowsVia), "end of the last sequence + tail",
       "q_capacity", "kv_capacity"},
      {"q_capacity", Both, Structural, "Q buffer rows in total",
       one_side(&Case::q_capacity, &Case::kv_capacity, kCapacity, kUnset).via(kRowsVia),
       "end of the last sequence + tail"},
      {"kv_capacity", Both, Structural, "K/V buffer rows in total",
       one_side(&Case::kv_capacity, &Case::q_capacity, kCapacity, kUnset).via(kRowsVia),
       "end of the last sequence + tail"},
      {"tail", Both, ToDefault, "extra capacity rows past the last sequence", field(&Case::tail, int_in(0, kMaxLen)).via(kRowsVia)},
      {"cp", Both, Structural, "context parallel size", field(&Case::cp, int_in(1, 4096)).seen("cp.size", "cp")},
      {"rank", Both, ToDefault, "this context-parallel rank (< cp)", field(&Case::rank, int_in(0, 4095)).seen("cp.rank", "rank")},
      {"cp_scheme", Both, ToDefault, choices<CpScheme>("how CP splits each sequence (cp > 1 only)"),
       field(&Case::cp_scheme, enum_value<CpScheme>()).seen("cp.scheme", "cp_scheme"), {}, nullptr, nullptr, nullptr, true},
      {"crop", Both, ToDefault, "0 | 1: the kernel sees keys cropped to the chunk end (cp > 1 and a causal mask)",
       field(&Case::crop, bool_value()).seen("cp.crop", "crop"), {}, nullptr, nullptr, nullptr, true},
      {"mask", Both, ToDefault, choices<MaskKind>("the causal alignment (causal = topleft)"),
       field(&Case::mask, enum_value<MaskKind>()).seen("mask", "mask")},
      {"window", Sdpa, ToDefault,
       "left window bound: cudnn keys s > pos-window (0 = none), fa keys s >= pos-window; -1 = unbounded",
       field(&Case::window, int_in(-1, kMaxLen)).seen("window", "window").meta_for(Both)},
      {"window_right", Sdpa, ToDefault, "right window bound: keys s <= pos+window_right (0 = causal; -1 = unbounded)",
       field(&Case::window_right, int_in(-1, kMaxLen)).seen("window_right", "window_right").meta_for(Both)},
      {"window_convention", Sdpa, ToDefault,
       choices<WindowConvention>("how `window` is read: cuDNN's length (pos-window, pos] or FlashAttention's "
                                 "[pos-window, pos] (window+1 keys)"),
       field(&Case::window_convention, enum_value<WindowConvention>())
           .seen("window_convention", "window_convention")
           .meta_for(Both)},
      {"start_pos", Indexer, ToDefault,
       "position of each document's first query (chunked / suffix prefill); -1 = from the mask alignment",
       field(&Case::start_pos, int_in(-1, kMaxLen)).via("segments (pos0), q_causal_offsets"), "-1"},
      {"max_seqlen_q", Both, ToDefault, "max_seqlen_q a kernel is given (>= every q length); 0 = the longest",
       field(&Case::max_seqlen_q, int_in(0, kMaxLen)).seen("max_seqlen.q", "max_seqlen_q"), "longest q length"},
      {"max_seqlen_kv", Both, ToDefault, "max_seqlen_kv a kernel is given (>= every kv length); 0 = the longest",
       field(&Case::max_seqlen_kv, int_in(0, kMaxLen)).seen("max_seqlen.kv", "max_seqlen_kv"), "longest kv length"},
      {"num_splits", Sdpa, ToDefault,
       "split-KV: keys split into num_splits ranges of ceil(max_seqlen_kv/num_splits), partial states merged by LSE",
       field(&Case::num_splits, int_in(1, 1024)).seen("num_splits", "num_splits").meta_for(Both)},
      {"empty_rows", Sdpa, ToDefault,
       choices<EmptyRows>("LSE of a row with no allowed key (O = 0): -inf (cuDNN, FlashInfer) or +inf (older FlashAttention)"),
       field(&Case::empty_rows, enum_value<EmptyRows>()).seen("empty_rows", "empty_rows_posinf").meta_for(Both)},
      {"heads", Indexer, Structural, "indexer heads", field(&Case::heads, int_in(1, 1024)).seen("dims.heads", "heads")},
      {"hq", Sdpa, Structural, "query heads", field(&Case::hq, int_in(1, 1024)).seen("dims.hq", "hq")},
      {"hkv", Sdpa, Structural, "k/v heads (hq a multiple of hkv: GQA/MQA)", field(&Case::hkv, int_in(1, 1024)).seen("dims.hkv", "hkv"),
       "= hq"},
      {"dim", Both, Structural, "head dim of q and k", field(&Case::dim, int_in(1, 1024)).seen("dims.dim", "dim")},
      {"dim_v", Sdpa, Structural, "head dim of v", field(&Case::dim_v, int_in(1, 1024)).seen("dims.dim_v", "dim_v"), "= dim"},
      {"topk", Indexer, Structural, "indexer top-k", field(&Case::topk, int_in(1, 1 << 16)).seen("dims.topk", "topk")},
      {"ratio", Indexer, ToDefault, "key compression ratio (> 1 needs a causal mask)",
       field(&Case::ratio, int_in(1, 1024)).seen("dims.ratio", "ratio")},
      {"dtype", Both, ToDefault, choices<DType>("input dtype; inputs are rounded to it"),
       field(&Case::dtype, enum_value<DType>()).seen("dtype", "dtype")},
      {"seed", Both, ToDefault, "input generator seed", field(&Case::seed, parse_u64)},
      {"poison", Both, ToDefault, choices<Poison>("what fills input pad slots"),
       field(&Case::poison, enum_value<Poison>()).seen("poison")},
      {"precision", Both, ToDefault, choices<Precision>("reference arithmetic"),
       field(&Case::precision, enum_value<Precision>())},
      {"scale", Both, ToDefault, "score scale", field(&Case::scale, real_in(1e-12, 1e12)).seen("scale", "scale"),
       "indexer 1, sdpa 1/sqrt(dim)"},
      {"rows", Both, Structural, "all | N: check N sampled rows plus every segment's boundary rows", rows},
      {"levels", Both, ToDefault,
       "round inputs to the nearest multiple of 2/N, ties away from 0 (about N values: tie stress)",
       field(&Case::levels, int_in(2, 1 << 24)), "off"},
      {"atol", Sdpa, Keep, "O absolute tolerance override (see \"How the tolerances are derived\")", field(&Case::atol, real_in(0, 1e30)), derived_tol},
      {"rtol", Sdpa, Keep, "O relative tolerance override", field(&Case::rtol, real_in(0, 1e30)), derived_tol},
      {"lse_tol", Sdpa, Keep, "LSE tolerance override", field(&Case::lse_tol, real_in(0, 1e30)), derived_tol},
      {"score_tol", Indexer, Keep, "score tie tolerance override", field(&Case::score_tol, real_in(0, 1e30)),
       derived_tol},
      {"min_recall", Indexer, Keep, "minimum tie-aware recall", field(&Case::min_recall, real_in(0, 1)), "1 (all)"},
      {"values", Both, ToDefault,
       choices<Values>("input distribution: extreme logits (below -65504), ReLU zero plateaus at the k-th score, "
                       "scores clustered near the k-th (see \"Input distributions\")"),
       field(&Case::values, enum_value<Values>())},
      {"ties", Indexer, ToDefault, choices<Ties>("top-k ties: any valid set, or tied keys in ascending index order"),
       field(&Case::ties, enum_value<Ties>()).seen("ties", "ties_strict")},
      {"loss_mean", Indexer, ToDefault,
       choices<LossMean>("pass=bwd: the loss's denominator: Q buffer rows (cuDNN FE, Megatron-LM), valid rows, "
                         "valid rows with a key, or 1 (a sum)"),
       field(&Case::loss_mean, enum_value<LossMean>()).seen("loss_mean", "loss_mean").only(Pass::Bwd)},
      {"pad_writes", Both, ToDefault, choices<PadWrites>("whether writes into output pad slots fail"),
       field(&Case::pad_writes, enum_value<PadWrites>()).seen("pad_writes", "pad_writes_allowed")},
      {"probe", Sdpa, Keep,
       choices<Probe>("mask-probe inputs: each row's mask-boundary keys dominate (see \"Mask-probe inputs\")"),
       field(&Case::probe, enum_value<Probe>())},
      {"pass", Both, Keep,
       choices<Pass>("which pass is judged: the forward's outputs, or the backward's gradients given the forward's "
                     "saved results"),
       field(&Case::pass, enum_value<Pass>()).seen("pass", "pass")},
      {"grad_pad", Both, ToDefault,
       choices<GradPad>("pass=bwd: gradient rows of pad slots must be left as they were, or may hold zeros "
                        "(kernels that zero them)"),
       field(&Case::grad_pad, enum_value<GradPad>()).seen("grad_pad", "grad_pad_zero_allowed")},
  };
  std::vector<CaseKey> t;
  for (auto& x : e) t.push_back(make_key(std::move(x)));
  return t;
}

}  // namespace

bool key_applies(KeyOps ops, Op op) {
  return ops == KeyOps::Both || (ops == KeyOps::Indexer) == (op == Op::Indexer);
}

bool meta_carries(const CaseKey& k, const Case& c) {
  const KernelView& v = k.kernel;
  return v.meta && key_applies(v.meta_ops.value_or(k.ops), c.op) && (!v.only_pass || *v.only_pass == c.pass);
}

const char* key_ops_text(KeyOps ops) {
  return ops == KeyOps::Both ? "both" : ops == KeyOps::Indexer ? "indexer" : "sdpa";
}

Case canonical_defaults(const Case& c) {
  Case d = defaults_for(c.op);
  if (d.hkv == 0) d.hkv = c.hq;
  if (d.dim_v == 0) d.dim_v = c.dim;
  return d;
}

std::span<const CaseKey> case_key_table() {
  static const std::vector<CaseKey> t = build_table();
  return t;
}

const CaseKey* find_case_key(std::string_view name) {
  for (const auto& k : case_key_table())
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace ao
