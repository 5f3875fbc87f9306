// Edge-biased layout generator. Families (each drawn with some probability, combined freely):
//  * document lengths: 1, tile sizes 64/128/256 and +-1 around them, small uniform, large uniform;
//    one document, a few, many, or one huge document followed by many tiny ones ([131008,64] scaled);
//    largest first or last;
//  * context parallel: cp in {2,3,4,8,16,32}, first/middle/last/random rank, zigzag or contiguous,
//    lengths already divisible, or TE/Megatron-style padding to a multiple of 2cp (often with extra
//    padding, so chunks are partly or wholly padding), tail capacity, key crop;
//  * padded THD: gaps 0/1/large between sequences, Q/O padding != K/V padding, explicit ragged offsets
//    (B or B+1 entries), packed O/stats offsets, tail capacity;
//  * q shorter or longer than kv with top-left and bottom-right alignment, mask none, windows;
//  * top-k below, at, just above and far above the allowed keys; key compression ratio;
//  * GQA ratios, all dtypes, all poisons, tie-stress quantisation, fp64 references;
//  * the defect catalog's triggers, each rare and each shrinking to the plain case:
//    values=extreme|plateau|clustered inputs (clustered mostly on long rows), a long-row family above
//    the profile's max_doc (rows > 4096 keys under --dims small, rows= sampled), decode (q_len = 1),
//    an empty K/V document (kv_len = 0) among others, chunked prefill (start_pos, kv extended),
//    max_seqlen_q/kv above the longest lengths, two-sided / sentinel / FA-convention windows (more
//    often where q_len > kv_len under bottom-right, with right bounds past max_seqlen_kv), split-KV
//    (num_splits), empty_rows=posinf, ties=strict (mostly where ties exist), wide heads (dim 128/256,
//    few heads, fewer rows checked).
// --dims wide draws every case's head dim above 256 (512 first, 264, 384, d_qk 576 / d_v 512) with GQA
// heads: the large-tile domain (on Hopper the cuDNN frontend's FROST SDPA serves only 256 < d <= 512),
// the small profile's layouts otherwise.
// The families take turns (Emphasis below): each case emphasises one, so rare triggers come up within
// a dozen cases of any seed rather than at their base rate.
// Large cases get `rows=` so the CPU oracle checks a sample (plus every boundary row).
#include "attn_oracle/fuzz/generator.h"

#include <algorithm>
#include <limits>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "attn_oracle/layout/layout.h"
#include "attn_oracle/fuzz/choices.h"

namespace ao {

DimsProfile parse_dims(const std::string& s) {
  if (s == "small") return DimsProfile::Small;
  if (s == "glm") return DimsProfile::Glm;
  if (s == "tiny") return DimsProfile::Tiny;
  if (s == "wide") return DimsProfile::Wide;
  if (s == "deepseek") return DimsProfile::Deepseek;
  throw BadInput("dims", s, "must be small, glm, deepseek, tiny or wide");
}

const char* dims_name(DimsProfile d) {
  return d == DimsProfile::Glm        ? "glm"
         : d == DimsProfile::Deepseek ? "deepseek"
         : d == DimsProfile::Tiny     ? "tiny"
         : d == DimsProfile::Wide     ? "wide"
                                      : "small";
}

std::optional<Op> parse_op_filter(const std::string& s) {
  if (s == "any") return std::nullopt;
  if (s == "indexer") return Op::Indexer;
  if (s == "sdpa") return Op::Sdpa;
  throw BadInput("op", s, "must be indexer, sdpa or any");
}

std::optional<Pass> parse_pass_filter(const std::string& s) {
  if (s == "any") return std::nullopt;
  if (s == "fwd") return Pass::Fwd;
  if (s == "bwd") return Pass::Bwd;
  throw BadInput("pass", s, "must be fwd, bwd or any");
}

const char* pass_filter_name(const std::optional<Pass>& p) { return !p ? "any" : *p == Pass::Bwd ? "bwd" : "fwd"; }

namespace {

struct Profile {
  int64_t max_doc;      // longest document
  int64_t max_total;    // token budget of a pack
  int64_t check_rows;   // rows= when a rank holds more rows than this
  int64_t max_check_keys;  // rows= also when rows x keys exceed this
  int max_cp = 32;         // cp is capped here
  int64_t many_chunks = 64;  // "many chunks per rank" of the divisible-CP family
  int max_heads = 8, max_dim = 64;  // small-dims caps (glm dims are fixed)
  int64_t long_doc = 0;  // rare long-row family: a document of max_doc+1 .. long_doc tokens (0 = none)
  int wide_dim = 0;      // rare wide-head family: dim 128 .. wide_dim with 1-2 heads (0 = none)
  bool all_wide = false;  // every case from the large-tile head dims (> 256), GQA heads
};

Profile profile(DimsProfile d) {
  if (d == DimsProfile::Glm || d == DimsProfile::Deepseek) return {32768, 65536, 64, int64_t(1) << 22};
  // Tiny: every row checked (no rows=): fuzz_differential's naive reference checks all rows.
  if (d == DimsProfile::Tiny) return {64, 256, INT64_MAX, INT64_MAX, 4, 4, 4, 16};
  Profile p{4096, 8192, 256, int64_t(1) << 21};
  p.long_doc = 8192;  // rows above 4096 keys (long-row paths), checked on rows= samples
  p.wide_dim = 256;
  if (d == DimsProfile::Wide) p.all_wide = true;
  return p;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// A generated backward case's estimated peak memory at most this; a larger one is drawn as its forward.
constexpr int64_t kBackwardBytes = int64_t(2) << 30;

// The key family a case emphasises. A campaign's cases take turns (ChoiceSource::scheduled: case n
// of a seed emphasises family (n + r) mod N), so every family comes up within N consecutive cases
// instead of at its base rate (some catalog triggers are drawn in well under 1% of plain cases).
// The emphasis changes only the PRNG's probabilities and weights, never which decisions are drawn:
// a replayed sequence gives the same case whatever its emphasis value, so shrinking moves it to
// None freely. None keeps the plain mix, so nothing the base rates reach is lost.
enum class Focus {
  None,
  Window,     // sdpa: bottom-right with queries past the keys, two-sided bands, right bounds past max_seqlen_kv
  Sentinel,   // sdpa: the -1 sentinels of the window bounds, FlashAttention's convention
  Cp,         // context parallel; sliding windows on CP ranks
  Split,      // sdpa: split-KV with empty K/V documents among several, GQA
  Metadata,   // boundary metadata: empty K/V documents, max_seqlen_q/kv past the longest lengths, padded
              // and explicit offsets, packed O/stats offsets, empty_rows=posinf
  Decode,     // one query per document, mask=none (decode tiles)
  Values,     // values=extreme|plateau|clustered, wide heads
  LongRows,   // rows past max_doc keys behind a shorter document, clustered scores
  Compressed, // indexer: key compression (ratio 2 mostly) with decode rows, top-k about half their keys
  Ties,       // indexer: quantised inputs with strict tie order, queries starting past position 0, and the
              // training path (pass=bwd: exact zeros of q.k under quantised inputs, loss conventions)
};

struct Emphasis {
  Focus f = Focus::None;
  // Which variant of the family (Sentinel: (-1, 0) or right -1; LongRows: mostly the indexer's or also
  // SDPA's long rows), turning once per round.
  int64_t turn = 0;
  // `base` in a case of another family, `emphasised` in one of family `g`.
  double p(Focus g, double base, double emphasised) const { return f == g ? emphasised : base; }
  bool on(Focus g) const { return f == g; }
};

Emphasis draw_emphasis(ChoiceSource& R, const std::optional<Op>& op) {
  std::vector<Focus> fam = {Focus::None, Focus::Cp, Focus::Metadata, Focus::Decode, Focus::Values, Focus::LongRows};
  if (op != Op::Indexer)
    for (Focus f : {Focus::Window, Focus::Sentinel, Focus::Split}) fam.push_back(f);
  if (op != Op::Sdpa)
    for (Focus f : {Focus::Compressed, Focus::Ties}) fam.push_back(f);
  const Focus f = fam[size_t(R.scheduled(int64_t(fam.size()) - 1))];
  // Families whose triggers exclude each other alternate between them from one round to the next
  // (drawn for every family, so that the emphasis never changes which decisions follow).
  return {f, R.scheduled(1)};
}

int64_t edge_len(ChoiceSource& R, int64_t max_len) {
  int64_t L;
  switch (R.integer(0, 9)) {
    case 0: case 1: L = R.pick<int64_t>({1, 1, 2, 3}); break;
    case 2: case 3: case 4: L = R.pick<int64_t>({64, 128, 256}) + R.pick<int64_t>({-1, 0, 1}); break;
    case 5: case 6: L = R.integer(1, 300); break;
    case 7: L = R.pick<int64_t>({512, 1024, 2048}) + R.pick<int64_t>({-1, 0, 1}); break;
    default: L = R.integer(1, max_len); break;
  }
  return std::clamp<int64_t>(L, 1, max_len);
}

// Document lengths: one, a few, many, or one huge followed by many tiny ones.
std::vector<int64_t> doc_lengths(ChoiceSource& R, const Profile& P, int64_t scale_cap, bool long_rows,
                                 const Emphasis& E) {
  std::vector<int64_t> lens;
  const int64_t max_doc = std::min(P.max_doc, scale_cap);
  // Several documents: split-KV with an empty document among others, a stride of max_seqlen_kv, decode
  // rows whose key tiles run into the next document, many compressed decode rows (each a chance that a
  // wrong last key moves its selection).
  const bool several = E.on(Focus::Split) || E.on(Focus::Metadata) || E.on(Focus::Decode) || E.on(Focus::Compressed);
  std::vector<double> shape_w(20, 1.0);
  if (several) std::fill(shape_w.begin(), shape_w.begin() + 9, 0.15);
  if (E.on(Focus::Compressed)) std::fill(shape_w.begin() + 15, shape_w.begin() + 18, 8.0);  // 5-24 documents
  const int64_t shape = long_rows ? -1 : R.integer_weighted(0, 19, 0, shape_w);
  if (shape < 0) {  // long rows: one document past max_doc, sometimes followed by a few short ones
    lens.push_back(R.pick<int64_t>({P.max_doc + 1, P.max_doc + 64, (P.max_doc + P.long_doc) / 2, P.long_doc}));
    if (R.chance(E.p(Focus::LongRows, 0.3, 0.95)))
      for (int64_t i = 0, n = R.count(1, 3); i < n; ++i) lens.push_back(edge_len(R, 300));
  } else if (shape < 9) {
    lens.push_back(edge_len(R, max_doc));
  } else if (shape < 15) {
    const int64_t n = R.count(2, 4);
    for (int64_t i = 0; i < n; ++i) lens.push_back(edge_len(R, max_doc / 2));
  } else if (shape < 18) {
    const int64_t n = R.count(5, 24);
    for (int64_t i = 0; i < n; ++i) lens.push_back(R.chance(E.p(Focus::Compressed, 0.5, 0.15)) ? R.integer(1, 8) : edge_len(R, 300));
  } else {  // [131008, 64] scaled: one huge document, then tiny ones
    const int64_t huge = std::max<int64_t>(64, max_doc - R.pick<int64_t>({64, 63, 65, 1, 0}));
    lens.push_back(huge);
    const int64_t n = R.pick<int64_t>({1, 1, 3, 16});
    for (int64_t i = 0; i < n; ++i) lens.push_back(R.pick<int64_t>({64, 1, 2, 63, 65}));
  }
  // Keep inside the pack's token budget.
  int64_t total = std::accumulate(lens.begin(), lens.end(), int64_t(0));
  while (total > P.max_total && lens.size() > 1) {
    total -= lens.back();
    lens.pop_back();
  }
  if (total > P.max_total) lens[0] = P.max_total;
  if (lens.size() > 1) {
    // Shrinks to the generated order; long rows emphasised: the long document last, away from row 0.
    const int64_t order = R.integer_weighted(0, 4, 2, {1, E.on(Focus::LongRows) ? 20.0 : 1.0, 1, 1, 1});
    if (order == 0) std::sort(lens.begin(), lens.end(), std::greater<>());  // largest first
    if (order == 1) std::sort(lens.begin(), lens.end());                    // largest last
  }
  return lens;
}

int64_t gap(ChoiceSource& R) { return R.pick<int64_t>({0, 0, 1, 1, 7, 64, 200}); }

// Offsets with the given gaps after each sequence; `lead` rows before the first.
std::vector<int64_t> offsets_from(const std::vector<int64_t>& lens, const std::vector<int64_t>& gaps, int64_t lead,
                                  bool with_capacity) {
  std::vector<int64_t> off;
  int64_t at = lead;
  for (size_t b = 0; b < lens.size(); ++b) {
    off.push_back(at);
    at += lens[b] + gaps[b];
  }
  if (with_capacity) off.push_back(at);
  return off;
}

void choose_cp(ChoiceSource& R, const Profile& P, Case& c) {
  c.cp = std::min(P.max_cp, R.pick<int>({2, 3, 4, 8, 16, 32, 32}));
  c.rank = R.pick<int>({0, c.cp / 2, c.cp - 1, c.cp - 1, int(R.integer(0, c.cp - 1))});
  c.rank = std::min(c.rank, c.cp - 1);
  c.cp_scheme = R.chance(0.85, true) ? CpScheme::Zigzag : CpScheme::Contiguous;
  c.crop = c.op == Op::Indexer && R.chance(0.3);
  const int64_t parts = c.cp_scheme == CpScheme::Zigzag ? 2 * c.cp : c.cp;
  auto& lens = c.q_lens;
  const int64_t mode = R.integer(0, 9);
  std::vector<int64_t> pads(lens.size(), 0);
  if (mode < 4) {  // lengths divisible: no padding
    for (auto& L : lens) L = std::max(parts, round_up(L, parts) - (R.chance(0.5) ? parts : 0));
    if (R.chance(0.3)) for (auto& L : lens) L = parts * R.pick<int64_t>({1, 2, P.many_chunks, P.many_chunks + 1});
  } else {  // TE/Megatron: pad each to a multiple of parts; extra padding makes chunks wholly padding
    for (size_t b = 0; b < lens.size(); ++b) {
      if (mode >= 8 && R.chance(0.5)) lens[b] = std::max(parts, round_up(lens[b], parts));
      if (R.chance(0.3)) lens[b] = R.integer(1, parts - 1);  // shorter than one chunk per rank
      pads[b] = round_up(lens[b], parts) - lens[b];
      if (R.chance(0.3)) pads[b] += parts * R.pick<int64_t>({1, 2, 7});
    }
  }
  c.kv_lens = lens;
  const bool any_pad = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; });
  if (any_pad || R.chance(0.2)) {
    if (R.chance(0.5, true)) {  // shrinks to pads rather than offsets
      c.q_pad = c.kv_pad = pads;
    } else {  // cu_seqlens_padded style
      // With the capacity entry: the last document's padding is then part of its padded length.
      c.q_offsets = c.kv_offsets = offsets_from(lens, pads, 0, true);
    }
  }
  // K/V are the all-gathered global buffer: their placement need not follow the Q padding.
  if (R.chance(0.2) && c.q_offsets.empty()) {
    c.kv_pad.assign(lens.size(), 0);
    for (auto& p : c.kv_pad) p = gap(R);
    if (c.q_pad.empty()) c.q_pad.assign(lens.size(), 0);
  }
  if (R.chance(0.2) && !(c.q_offsets.size() == lens.size() + 1)) c.tail = parts * R.pick<int64_t>({1, 2});
}

void choose_padding(ChoiceSource& R, Case& c, const Emphasis& E) {
  const size_t B = c.q_lens.size();
  // Padded or explicit offsets where boundary metadata is emphasised.
  // Explicit offsets rarely where compression is emphasised (its documents' lengths are evened out last).
  const int64_t mode = R.integer_weighted(0, 9, 0, E.on(Focus::Metadata)     ? std::vector<double>{0.05, 0.05, 0.05, 0.05, 1, 1, 1, 1, 1, 0.2}
                                                   : E.on(Focus::Compressed) ? std::vector<double>{1, 1, 1, 1, 1, 1, 1, 0.05, 0.05, 0.05}
                                                                             : std::vector<double>(10, 1.0));
  auto gaps = [&] {
    std::vector<int64_t> g(B);
    for (auto& x : g) x = gap(R);
    return g;
  };
  if (mode < 4) {
    // packed
  } else if (mode < 7) {
    c.q_pad = gaps();
    c.kv_pad = R.chance(0.4) ? c.q_pad : gaps();  // Q/O padding != K/V padding
  } else if (mode < 9) {
    const bool cap = R.chance(0.5);
    c.q_offsets = offsets_from(c.q_lens, gaps(), R.pick<int64_t>({0, 0, 1, 5}), cap);
    c.kv_offsets = offsets_from(c.kv_lens, gaps(), R.pick<int64_t>({0, 0, 3}), cap && R.chance(0.5));
  } else if (c.q_lens == c.kv_lens) {
    c.q_offsets = c.kv_offsets = offsets_from(c.q_lens, gaps(), 0, R.chance(0.5));
  }
  const bool has_cap_entry = c.q_offsets.size() == B + 1 || c.kv_offsets.size() == B + 1;
  if (!has_cap_entry && R.chance(0.2)) c.tail = R.pick<int64_t>({1, 63, 64, 200});
  // Packed O / stats offsets while Q is padded (sdpa only: outputs follow Q under the indexer).
  if (c.op == Op::Sdpa && (!c.q_pad.empty() || !c.q_offsets.empty()) && R.chance(E.p(Focus::Metadata, 0.25, 0.95))) {
    std::vector<int64_t> packed = offsets_from(c.q_lens, std::vector<int64_t>(B, 0), 0, false);
    if (R.chance(E.p(Focus::Metadata, 0.5, 0.85))) c.o_offsets = packed;
    if (R.chance(E.p(Focus::Metadata, 0.5, 0.85))) c.stats_offsets = packed;
  }
}

}  // namespace

Case generate_case(ChoiceSource& R, const GenOptions& opt) {
  const Emphasis E = draw_emphasis(R, opt.op);
  const bool sdpa_family = E.on(Focus::Window) || E.on(Focus::Sentinel) || E.on(Focus::Split);
  const bool indexer_family = E.on(Focus::Compressed) || E.on(Focus::Ties);
  const double p_indexer = sdpa_family                                 ? 0.0
                           : indexer_family                            ? 0.97
                           : E.on(Focus::LongRows)                     ? (E.turn == 0 ? 0.95 : 0.5)
                           : E.on(Focus::Values)                       ? 0.7
                           : E.on(Focus::Cp)                           ? 0.1
                           : E.on(Focus::Metadata)                     ? 0.1
                           : E.on(Focus::Decode)                       ? 0.15
                                                                       : 0.55;
  const Op op = opt.op ? *opt.op : (R.chance(p_indexer) ? Op::Indexer : Op::Sdpa);
  Profile P = profile(opt.dims);
  const bool all_bwd = opt.pass == Pass::Bwd;
  if (all_bwd) {  // every row judged: packs a backward reference checks in seconds at glm dims
    P.max_doc = std::min<int64_t>(P.max_doc, 2048);
    P.max_total = std::min<int64_t>(P.max_total, 2048);
    P.long_doc = 0;
  }
  Case c = defaults_for(op);
  const bool no_cp = E.on(Focus::Window) || E.on(Focus::Sentinel) || E.on(Focus::Decode) || E.on(Focus::Compressed) ||
                     E.on(Focus::Metadata) || E.on(Focus::Split) || E.on(Focus::LongRows) || E.on(Focus::Ties);
  const bool cp = R.chance(E.on(Focus::Cp) ? 0.95 : no_cp ? 0.0 : op == Op::Indexer ? 0.45 : 0.2);
  // Input distributions that reach the catalog's triggers (value_distributions.h); clustered scores are
  // about long rows (radix-bin candidate buffers), so they mostly come with the long-row family; zero
  // plateaus are ties, so they come with the tie family too.
  if (R.chance(E.on(Focus::Values) ? 0.9 : E.on(Focus::LongRows) ? 0.7 : E.on(Focus::Ties) ? 0.5 : E.on(Focus::Compressed) ? 0.03
               : op == Op::Indexer ? 0.12 : 0.06))
    c.values = op == Op::Indexer ? R.pick_weighted<Values>({Values::Extreme, Values::Plateau, Values::Clustered},
                                                           {E.on(Focus::Ties) ? 0.1 : 1.0, 1,
                                                            E.on(Focus::LongRows) ? 8.0 : E.on(Focus::Values) ? 0.3 : E.on(Focus::Ties) ? 0.1 : 1.0})
                                 : Values::Extreme;
  const bool long_rows =
      P.long_doc > 0 && R.chance(E.on(Focus::LongRows) ? 0.95 : c.values == Values::Clustered ? 0.5 : 0.04);

  c.q_lens = doc_lengths(R, P, cp ? P.max_total : P.max_doc, long_rows, E);
  c.kv_lens = c.q_lens;
  if (op == Op::Indexer && !cp && R.chance(E.on(Focus::Compressed) ? 0.95 : E.on(Focus::LongRows) ? 0.0 : 0.15))
    // Ratio 4 where compression is emphasised: top-k about a quarter of a decode row's keys (m below),
    // above the ReLU scores' zero plateau, so a wrong last key moves the selection.
    c.ratio = R.pick_weighted<int>({2, 4}, {1, E.on(Focus::Compressed) ? 3.0 : 1.0});
  if (cp) {
    choose_cp(R, P, c);
  } else {
    // q shorter or longer than kv; queries past the keys where bottom-right windows are emphasised (by
    // more than one: a right bound clamped to max_seqlen_kv then cuts the first rows' band); the long
    // rows kept long where they are emphasised.
    const std::vector<double> longer_w = E.on(Focus::Window) ? std::vector<double>{0, 0, 1, 0, 0, 4, 0}
                                                             : std::vector<double>(7, 1.0);
    if (R.chance(E.on(Focus::Window) ? 0.95 : E.on(Focus::LongRows) ? 0.1 : 0.3))
      for (auto& kv : c.kv_lens)
        kv = std::max<int64_t>(1, kv + R.pick_weighted<int64_t>({-1, 1, -63, 64, 129, -kv / 2, kv}, longer_w));
    if (c.ratio > 1 && R.chance(0.6))  // compressed keys: about len/ratio of them
      for (size_t b = 0; b < c.kv_lens.size(); ++b) c.kv_lens[b] = std::max<int64_t>(1, c.q_lens[b] / c.ratio);
    // Decode: one query per document (split-KV: GQA decode's per-head partial-state layout).
    if (R.chance(E.on(Focus::Decode) || E.on(Focus::Compressed) ? 0.9
                 : E.on(Focus::Split)                           ? 0.5
                 : E.on(Focus::Window) || E.on(Focus::Sentinel) || E.on(Focus::LongRows) ? 0.02
                                                                : 0.08))
      for (auto& q : c.q_lens) q = 1;
    if (op == Op::Indexer && R.chance(E.on(Focus::Ties) ? 0.5 : E.on(Focus::Compressed) ? 0.02 : 0.1)) {  // chunked / suffix prefill: queries start at start_pos
      c.start_pos = R.pick<int64_t>({0, 1, 16, 64, 1000});
      if (R.chance(0.7, true))  // the K/V holds the earlier chunks too
        for (size_t b = 0; b < c.kv_lens.size(); ++b)
          c.kv_lens[b] = std::max(c.kv_lens[b], (c.start_pos + c.q_lens[b]) / c.ratio);
    }
    if (c.kv_lens.size() >= 2 && R.chance(E.on(Focus::Split) ? 0.6 : E.on(Focus::Metadata) ? 0.9 : 0.08))  // an empty K/V document among others
    {
      // Not the first where split-KV is emphasised: its rows' stats then sit past other documents'.
      std::vector<double> at_w(c.kv_lens.size(), 1.0);
      if (E.on(Focus::Split)) at_w[0] = 0.1;
      c.kv_lens[size_t(R.integer_weighted(0, int64_t(c.kv_lens.size()) - 1, 0, at_w))] = 0;
    }
    choose_padding(R, c, E);
  }
  // Shrinks to the op's default. Bottom-right where queries past the keys meet windows; no mask for
  // decode tiles; a causal mask where windows or key compression need one.
  std::vector<double> mask_w(10, 1.0);
  if (E.on(Focus::Window)) mask_w = {0.1, 0.1, 0.1, 0.1, 1, 1, 1, 1, 1, 0};
  if (E.on(Focus::Compressed)) mask_w = {0.02, 0.02, 0.02, 0.02, 1, 1, 1, 1, 1, 0};  // decode rows see keys under bottom-right
  if (E.on(Focus::Sentinel) || (E.on(Focus::Cp) && op == Op::Sdpa)) mask_w[9] = 0;
  if (E.on(Focus::Decode)) mask_w[9] = op == Op::Sdpa ? 27 : 9;
  if (E.on(Focus::LongRows)) mask_w[9] = 0;  // long rows need the causal key range past 4096
  const int64_t mask = R.integer_weighted(0, 9, c.mask == MaskKind::BottomRight ? 4 : 0, mask_w);
  c.mask = mask < 4 ? MaskKind::TopLeft : mask < 9 ? MaskKind::BottomRight : MaskKind::None;
  if (c.mask == MaskKind::None) {  // crop, ratio and start_pos act on the causal key range only
    c.crop = false;
    c.ratio = 1;
    c.start_pos = -1;
  }
  // The max_seqlen a kernel is given: above the longest lengths (split ranges, batch strides).
  const auto longest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  if (R.chance(E.p(Focus::Metadata, 0.12, 0.6)))
    c.max_seqlen_kv = longest(c.kv_lens) + R.pick<int64_t>({1, 64, 128, longest(c.kv_lens)});
  if (R.chance(E.on(Focus::Metadata) ? 0.3 : E.on(Focus::Decode) ? 0.02 : 0.08)) c.max_seqlen_q = longest(c.q_lens) + R.pick<int64_t>({1, 64, longest(c.q_lens)});

  // Dimensions.
  // deepseek: glm's sizes with DeepSeek-V3.2's indexer (64 heads, top-k a multiple of 128: what the SM90
  // backward kernels tile); SDPA as glm.
  const bool dsv = opt.dims == DimsProfile::Deepseek, glm = opt.dims == DimsProfile::Glm || dsv;
  int64_t max_keys = 1;
  for (size_t b = 0; b < c.kv_lens.size(); ++b) max_keys = std::max(max_keys, c.kv_lens[b]);
  // Head-dim sweep past max_dim (128, 256); the wide profile draws every case above 256, d = 512 simplest
  // (576 stands for d_qk = 576 with d_v = 512, the MLA shape).
  const bool wide = P.all_wide || (!glm && P.wide_dim > 0 && R.chance(E.p(Focus::Values, 0.06, 0.4)));
  const int wide_dim = P.all_wide ? int(R.pick<int64_t>({512, 264, 384, 576}))
                       : wide     ? int(R.pick<int64_t>({128, P.wide_dim}))
                                  : 0;
  if (op == Op::Indexer) {
    c.heads = dsv ? 64 : glm ? 32 : wide ? R.pick<int>({1, 2}) : std::min(P.max_heads, R.pick<int>({1, 2, 4, 4, 8}));
    c.dim = glm ? 128 : wide ? wide_dim : std::min(P.max_dim, R.pick<int>({4, 8, 16, 32, 32, 64}));
    c.dim_v = c.dim;  // what parse_case derives for the indexer (dim_v is an sdpa key)
    const int64_t m = std::max<int64_t>(1, max_keys / c.ratio);
    // Under key compression a decode row sees about ratio * m keys: m (and m +- 1) is then a half or a
    // quarter of them, and a wrong tail key moves the selection.
    // A zero plateau matters where it sits at the k-th score: k below the allowed keys.
    const std::vector<double> k_w = E.on(Focus::Compressed)       ? std::vector<double>{0.3, 0.3, 2, 2, 2, 3, 1, 0.3, 0.3}
                                    : c.values == Values::Plateau ? std::vector<double>{1, 1, 1, 1, 0.2, 0.2, 1, 0.3, 0.3}
                                                                  : std::vector<double>(9, 1.0);
    int64_t k = dsv   ? R.pick<int64_t>({2048, 2048, 1024, 512, 256, 128})
                : glm ? R.pick<int64_t>({2048, 2048, 2048, m, m + 1, 512})
                    : R.pick_weighted<int64_t>({1, 2, m - 1, m, m + 1, 2 * m, R.integer(1, std::min<int64_t>(m, 256)), 64, 128}, k_w);
    c.topk = int(std::clamp<int64_t>(k, 1, glm ? 2048 : 512));
  } else {
    // Grouped heads under split-KV and decode (per-head partial-state layouts).
    const std::vector<double> heads_w = E.on(Focus::Split) || E.on(Focus::Decode) ? std::vector<double>{0.3, 1, 1, 3, 0.5, 3, 3, 3}
                                                           : std::vector<double>(8, 1.0);
    auto [hq, hkv] = glm ? R.pick<std::pair<int, int>>({{32, 32}, {32, 8}, {32, 4}})
                     : P.all_wide ? R.pick<std::pair<int, int>>({{1, 1}, {2, 1}, {4, 2}, {8, 2}, {4, 4}})
                     : wide ? R.pick<std::pair<int, int>>({{1, 1}, {2, 1}})
                         : R.pick_weighted<std::pair<int, int>>(
                               {{1, 1}, {2, 1}, {4, 1}, {4, 2}, {4, 4}, {6, 2}, {8, 2}, {6, 3}}, heads_w);
    c.hq = hq;
    c.hkv = hkv;
    c.dim = glm ? 128 : wide ? wide_dim : std::min(P.max_dim, R.pick<int>({8, 16, 32, 64}));
    if (P.all_wide)
      c.dim_v = c.dim == 576 ? 512 : c.dim;
    else
      c.dim_v = R.chance(0.25) ? (glm ? 64 : std::min(P.max_dim, R.pick<int>({8, 16, 32}))) : c.dim;
    const double p_window = E.on(Focus::Sentinel) ? 0.0 : E.on(Focus::Cp) ? 0.85 : E.on(Focus::Window) ? 0.3 : 0.15;
    if (c.mask != MaskKind::None && R.chance(p_window))  // short windows on CP ranks' short chunks
      c.window = R.pick_weighted<int64_t>({1, 16, 64, 100}, E.on(Focus::Cp) ? std::vector<double>{3, 2, 0.5, 0.2} : std::vector<double>(4, 1.0));
    // Two-sided bands, the -1 sentinels and FlashAttention's convention; more often where queries
    // outnumber keys under bottom-right (right bounds past max_seqlen_kv meet the shift there).
    bool q_longer = false;
    for (size_t b = 0; b < c.q_lens.size(); ++b) q_longer |= c.q_lens[b] > c.kv_lens[b];
    const bool band_family = E.on(Focus::Window) || E.on(Focus::Sentinel);
    if (c.mask != MaskKind::None &&
        R.chance(band_family       ? 0.98
                 : E.on(Focus::Cp) ? 0.03
                 : q_longer && c.mask == MaskKind::BottomRight ? 0.4
                                                               : 0.12)) {
      const int64_t seqlen_kv = c.max_seqlen_kv > 0 ? c.max_seqlen_kv : longest(c.kv_lens);
      // Sentinel rounds alternate the causal (-1, 0) band and an unbounded right side (-1).
      const std::vector<double> right_w = E.on(Focus::Window) ? std::vector<double>{0.1, 0.1, 0.5, 0.5, 2, 2}
                                          : E.on(Focus::Sentinel) && E.turn == 0 ? std::vector<double>{1, 0.02, 0.01, 0.01, 0.01, 0.01}
                                          : E.on(Focus::Sentinel) ? std::vector<double>{0.05, 1, 0.02, 0.02, 0.02, 0.02}
                                                                  : std::vector<double>(6, 1.0);
      c.window_right = R.pick_weighted<int64_t>({0, -1, 1, 16, seqlen_kv + 1, seqlen_kv + 64}, right_w);
      if (c.window == 0 && R.chance(E.p(Focus::Sentinel, 0.5, 0.95))) c.window = -1;
      if (R.chance(0.3)) c.window_convention = WindowConvention::Fa;
    }
    if (R.chance(E.on(Focus::Split) ? 0.95 : E.on(Focus::Decode) ? 0.9 : 0.2)) c.num_splits = R.pick<int>({2, 3, 4, 8, 16});
    if (R.chance(E.p(Focus::Metadata, 0.04, 0.95))) c.empty_rows = EmptyRows::PosInf;
  }
  c.dtype = R.pick<DType>({DType::F32, DType::BF16, DType::F16}, 1);  // shrinks to bf16, the default
  c.poison = R.pick<Poison>({Poison::NaN, Poison::Inf, Poison::Large, Poison::None});
  if (R.chance(0.1)) c.precision = Precision::F64;
  // Quantised inputs (ties), rarely where compression is emphasised: a tie at the k-th score hides a
  // wrong last key from the tie-aware recall.
  if (op == Op::Indexer && R.chance(E.on(Focus::Ties) ? 0.9 : E.on(Focus::Compressed) ? 0.02 : 0.15))
    c.levels = R.pick<uint32_t>({2, 16, 1024});
  // Strict tie order matters only where ties exist (quantised inputs, zero plateaus).
  if (op == Op::Indexer && R.chance(E.on(Focus::Ties) ? 0.95 : c.levels > 0 || c.values == Values::Plateau ? 0.25 : 0.02))
    c.ties = Ties::Strict;
  // The indexer's training path: the loss's denominator as callers differ, a scale the gradient chain carries.
  const auto training = [&](double p) { return opt.pass ? all_bwd : R.chance(p); };
  // Rarely where compression is emphasised: its defects are the forward's (the backward models are measured
  // with a backward campaign, where every case is a backward case).
  if (op == Op::Indexer && training(E.on(Focus::Ties)                            ? 0.5
                                    : E.on(Focus::Cp) || E.on(Focus::Metadata) ? 0.4
                                    : E.on(Focus::Compressed)                  ? 0.03
                                                                               : 0.15)) {
    c.pass = Pass::Bwd;
    c.loss_mean = R.pick<LossMean>({LossMean::Rows, LossMean::Valid, LossMean::Keyed, LossMean::Sum});
    if (R.chance(0.3)) c.scale = R.pick<double>({0.25, 0.5});
  }
  // SDPA's training path on the same layouts (split-KV is a forward key), most often where its defects
  // live (CP ranks' partial dK/dV, pad slots and rows without a key); gradient pad rows kept or zeroed.
  // Drawn after every structural decision: the forward cases keep their layouts (only their seed moves).
  if (op == Op::Sdpa && all_bwd) c.num_splits = 1;
  if (op == Op::Sdpa && c.num_splits == 1 && training(E.on(Focus::Cp) || E.on(Focus::Metadata) ? 0.5 : 0.2)) {
    c.pass = Pass::Bwd;
    if (R.chance(0.2)) c.grad_pad = GradPad::Zero;
  }
  if (R.chance(0.05)) c.pad_writes = PadWrites::Allow;
  // Compressed keys of the longest document's length for every non-empty one where compression is
  // emphasised: the pack's one top-k (drawn from the longest row) is then the same share of every row's
  // keys, so each decode row is a chance that a wrong last key moves its selection (with lengths of 1 to
  // 300, most rows had fewer keys than k and selected them all). Drawn last, so that only these cases'
  // input seeds move; the longest length, max_seqlen_kv, top-k and the gaps between documents stay valid.
  if (c.ratio > 1 && c.kv_offsets.empty() && R.chance(E.p(Focus::Compressed, 0.05, 0.9))) {
    const int64_t longest_kv = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
    for (auto& kv : c.kv_lens) kv = kv > 0 ? longest_kv : 0;
  }
  c.seed = R.integer(1, 1000000);

  // Sample rows when the rank's query rows x keys would make the CPU oracle slow.
  // Throws on a generator bug (the tests run thousands of seeds). Not on memory: a backward case too long
  // to judge every row is turned into the forward below, which then fits.
  LayoutLimits sizing;
  sizing.max_bytes = std::numeric_limits<int64_t>::max();
  const Layout l = make_layout(c, sizing);
  int64_t rows = 0;
  for (const auto& s : l.segments) rows += s.rows;
  if (rows > P.check_rows && rows * max_keys > P.max_check_keys) c.rows = P.check_rows;
  // Long rows and wide heads cost more per row: fewer sampled rows (boundary rows are always checked).
  const int64_t widen = std::max<int64_t>(1, c.dim / 64);
  if (long_rows || wide)
    if (rows > 64 && rows * max_keys * widen > P.max_check_keys) c.rows = 64;
  if (all_bwd) c.rows = 0;  // the backward's dK/dV sum over every row; the packs above are sized for it
  // The backward judges every row: too many (or a backward too large for a fuzz case: its gradient sets
  // and per-slot state, e.g. 32k rows x 64 heads x 128 at top-k 2048 ~ 10 GiB), the forward instead.
  if (c.pass == Pass::Bwd && (c.rows != 0 || (!all_bwd && l.mem_bytes > kBackwardBytes))) {
    c.pass = Pass::Fwd;
    c.loss_mean = LossMean::Rows;
    c.grad_pad = GradPad::Untouched;
  }
  return c;
}

Case generate_case(uint64_t seed, uint64_t index, const GenOptions& opt) {
  RandomChoices R(seed, index);
  return generate_case(R, opt);
}

GeneratedCase generate_recorded(uint64_t seed, uint64_t index, const GenOptions& opt) {
  RandomChoices R(seed, index);
  GeneratedCase g;
  g.c = generate_case(R, opt);
  g.choices = canonical(R.values());
  return g;
}

uint64_t redraw_seed(uint64_t seed, int redraw) { return seed + uint64_t(redraw) * 0x9E3779B97F4A7C15ull; }

GeneratedCase generate_discriminating(uint64_t seed, uint64_t index, const GenOptions& opt,
                                      const std::function<bool(const Case&)>& weak, int* redraws) {
  GeneratedCase g = generate_recorded(seed, index, opt);
  int n = 0;
  // weak() sees every draw, the last too (the campaign keeps what it prepared for the draw it runs).
  while (weak(g.c) && n < kWeakRedraws) g = generate_recorded(redraw_seed(seed, ++n), index, opt);
  if (redraws) *redraws = n;
  return g;
}

Case replay_choices(const Choices& seq, const GenOptions& opt, Choices* effective, std::vector<Choice>* record) {
  ReplayChoices R(seq);
  Case c = generate_case(R, opt);
  if (effective) *effective = canonical(R.values());
  if (record) *record = R.record();
  return c;
}

}  // namespace ao
