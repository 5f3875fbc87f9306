// Deterministic greedy ddmin over case lines (see shrink.h). Each candidate is a small edit of the
// Case fields that keeps the other documents where they are: removing a document removes its whole
// slot (valid rows + gap) from every explicit offset list and capacity; shortening one removes rows
// from the end of its slot.
#include "attn_oracle/fuzz/shrink.h"

#include <algorithm>

#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/layout/layout.h"

namespace ao {

namespace {

struct Slots {  // rows each document occupies (valid + gap after it) per tensor
  std::vector<int64_t> q, kv, o, stats;
};

Slots slots_of(const Layout& l) {
  Slots s;
  const size_t B = l.docs.size();
  const int64_t qcap = l.is_cp() ? l.q_rows * l.c.cp : l.q_rows;
  for (size_t b = 0; b < B; ++b) {
    const auto& d = l.docs[b];
    s.q.push_back(d.q_padded);
    s.kv.push_back((b + 1 < B ? l.docs[b + 1].kv_off : l.kv_rows) - d.kv_off);
    s.o.push_back((b + 1 < B ? l.docs[b + 1].o_off : std::max(l.o_rows, qcap)) - d.o_off);
    s.stats.push_back((b + 1 < B ? l.docs[b + 1].stats_off : std::max(l.stats_rows, qcap)) - d.stats_off);
  }
  return s;
}

// Explicit offsets rebuilt from the kept documents' slots (leading offset and B+1 form preserved).
std::vector<int64_t> rebuild(const std::vector<int64_t>& off, const std::vector<int64_t>& slot,
                             const std::vector<bool>& keep) {
  if (off.empty()) return off;
  const size_t B = keep.size();
  std::vector<int64_t> out;
  int64_t at = off[0];
  for (size_t b = 0; b < B; ++b)
    if (keep[b]) {
      out.push_back(at);
      at += slot[b];
    }
  if (off.size() == B + 1) out.push_back(at);
  return out;
}

template <class T>
std::vector<T> filter(const std::vector<T>& v, const std::vector<bool>& keep) {
  if (v.size() != keep.size()) return v;  // broadcast (1 entry) or empty
  std::vector<T> out;
  for (size_t b = 0; b < v.size(); ++b)
    if (keep[b]) out.push_back(v[b]);
  return out;
}

Case keep_docs(const Case& c, const Layout& l, const std::vector<bool>& keep) {
  const Slots s = slots_of(l);
  Case n = c;
  n.q_lens = filter(c.q_lens, keep);
  n.kv_lens = filter(c.kv_lens, keep);
  n.q_pad = filter(c.q_pad, keep);
  n.kv_pad = filter(c.kv_pad, keep);
  n.q_offsets = rebuild(c.q_offsets, s.q, keep);
  n.kv_offsets = rebuild(c.kv_offsets, s.kv, keep);
  n.o_offsets = rebuild(c.o_offsets, s.o, keep);
  n.stats_offsets = rebuild(c.stats_offsets, s.stats, keep);
  int64_t dq = 0, dkv = 0;
  for (size_t b = 0; b < keep.size(); ++b)
    if (!keep[b]) {
      dq += s.q[b];
      dkv += s.kv[b];
    }
  if (n.q_capacity >= 0) n.q_capacity -= dq;
  if (n.kv_capacity >= 0) n.kv_capacity -= dkv;
  return n;
}

void shift_after(std::vector<int64_t>& off, size_t b, int64_t delta) {
  for (size_t i = b + 1; i < off.size(); ++i) off[i] -= delta;
}

// Shorten document b's q (and/or kv) length, removing the rows from the end of its slot.
Case set_len(const Case& c, size_t b, int64_t new_q, int64_t new_kv) {
  Case n = c;
  const int64_t dq = c.q_lens[b] - new_q, dkv = c.kv_lens[b] - new_kv;
  n.q_lens[b] = new_q;
  n.kv_lens[b] = new_kv;
  shift_after(n.q_offsets, b, dq);
  shift_after(n.o_offsets, b, dq);
  shift_after(n.stats_offsets, b, dq);
  shift_after(n.kv_offsets, b, dkv);
  if (n.q_capacity >= 0) n.q_capacity -= dq;
  if (n.kv_capacity >= 0) n.kv_capacity -= dkv;
  return n;
}

// Shorter lengths for L: halving first, then the smallest, then one less. Under CP the removed
// row count must be a multiple of `parts`, so the padded length stays divisible by 2*cp (or cp).
std::vector<int64_t> shorter(int64_t L, int64_t parts) {
  std::vector<int64_t> v;
  auto add = [&](int64_t x) {
    if (x >= 1 && x < L && std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  if (parts > 1) {
    add(L - (L / 2) / parts * parts);
    add((L - 1) % parts + 1);
    add(L - parts);
  } else {
    add(L / 2);
    add(1);
    add(L - 1);
  }
  return v;
}

std::vector<int64_t> smaller_gaps(int64_t g, int64_t parts) {
  std::vector<int64_t> v;
  auto add = [&](int64_t x) {
    if (x >= 0 && x < g && std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  add(0);
  if (parts > 1) {
    add(g % parts);
    add(g - (g / 2) / parts * parts);
  } else {
    add(g / 2);
  }
  return v;
}

}  // namespace

bool shrinkable_valid(const Case& c, const LayoutLimits& lim) {
  try {
    make_layout(c, lim);
    return parse_case(print_case(c)) == c;
  } catch (const CaseError&) {
    return false;
  }
}

std::vector<Case> shrink_candidates(const Case& c, const LayoutLimits& lim) {
  std::vector<Case> out;
  Layout l;
  try {
    l = make_layout(c, lim);
  } catch (const CaseError&) {
    return out;
  }
  const size_t B = c.q_lens.size();
  const int64_t parts = c.cp > 1 ? (c.cp_scheme == CpScheme::Zigzag ? 2 * c.cp : c.cp) : 1;

  // 1. Documents, ddmin: keep one chunk, then drop one chunk, at growing granularity.
  for (size_t n = 2; B > 1 && n <= 2 * B; n *= 2) {
    const size_t g = std::min(n, B), size = (B + g - 1) / g;
    for (int complement = 0; complement < 2; ++complement)
      for (size_t start = 0; start < B; start += size) {
        std::vector<bool> keep(B, complement == 1);
        for (size_t b = start; b < std::min(B, start + size); ++b) keep[b] = complement == 0;
        const auto kept = std::count(keep.begin(), keep.end(), true);
        if (kept == 0 || size_t(kept) == B) continue;
        out.push_back(keep_docs(c, l, keep));
      }
    if (g == B) break;
  }
  // 2. Lower cp (rank kept < cp).
  if (c.cp > 1) {
    std::vector<int> cps = {1};
    if (c.cp % 2 == 0 && c.cp / 2 > 1) cps.push_back(c.cp / 2);
    if (c.cp - 1 > 1) cps.push_back(c.cp - 1);
    for (int cp : cps)
      for (int rank : {std::min(c.rank, cp - 1), cp - 1, int(int64_t(c.rank) * cp / c.cp), 0}) {
        Case n = c;
        n.cp = cp;
        n.rank = rank;
        out.push_back(n);
      }
  }
  // 3. Shorter documents (largest first; q and kv together when equal).
  std::vector<size_t> order(B);
  for (size_t b = 0; b < B; ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::max(c.q_lens[a], c.kv_lens[a]) > std::max(c.q_lens[b], c.kv_lens[b]);
  });
  for (size_t b : order) {
    if (c.q_lens[b] == c.kv_lens[b]) {
      for (int64_t L : shorter(c.q_lens[b], parts)) out.push_back(set_len(c, b, L, L));
    } else {
      for (int64_t L : shorter(c.q_lens[b], parts)) out.push_back(set_len(c, b, L, c.kv_lens[b]));
      for (int64_t L : shorter(c.kv_lens[b], 1)) out.push_back(set_len(c, b, c.q_lens[b], L));
      out.push_back(set_len(c, b, c.q_lens[b], c.q_lens[b]));
    }
  }
  // 4. Dimensions.
  auto with = [&](auto edit) {
    Case n = c;
    edit(n);
    out.push_back(n);
  };
  if (c.op == Op::Indexer) {
    if (c.topk > 1) with([](Case& n) { n.topk = std::max(1, n.topk / 2); });
    if (c.topk > 1) with([](Case& n) { n.topk = 1; });
    if (c.heads > 1) with([](Case& n) { n.heads /= 2; });
    if (c.dim > 1) with([](Case& n) { n.dim /= 2; n.dim_v = n.dim; });
  } else {
    if (c.hq % 2 == 0 && c.hkv % 2 == 0) with([](Case& n) { n.hq /= 2; n.hkv /= 2; });
    if (c.hq > c.hkv) with([](Case& n) { n.hq = n.hkv; });
    if (c.hq % 2 == 0 && (c.hq / 2) % c.hkv == 0) with([](Case& n) { n.hq /= 2; });
    if (c.dim > 1) with([](Case& n) { if (n.dim_v == n.dim) n.dim_v /= 2; n.dim /= 2; });
    if (c.dim_v != c.dim) with([](Case& n) { n.dim_v = n.dim; });
    if (c.dim_v > 1) with([](Case& n) { n.dim_v /= 2; });
  }
  // 5. Padding, offsets, tail.
  if (!c.q_offsets.empty() || !c.kv_offsets.empty() || !c.q_pad.empty() || !c.kv_pad.empty())
    with([](Case& n) { n.q_offsets.clear(); n.kv_offsets.clear(); n.q_pad.clear(); n.kv_pad.clear(); });
  if (parts > 1) {  // the least padding CP allows
    with([&](Case& n) {
      n.q_offsets.clear();
      n.kv_offsets.clear();
      n.q_pad.assign(B, 0);
      for (size_t b = 0; b < B; ++b) n.q_pad[b] = (parts - n.q_lens[b] % parts) % parts;
      n.kv_pad = n.q_pad;
    });
  }
  if (!c.q_offsets.empty() && c.q_offsets != c.kv_offsets) with([](Case& n) { n.q_offsets.clear(); });
  if (!c.kv_offsets.empty() && c.q_offsets != c.kv_offsets) with([](Case& n) { n.kv_offsets.clear(); });
  if (c.tail > 1) with([&](Case& n) { n.tail = parts > 1 ? n.tail - (n.tail / 2) / parts * parts : n.tail / 2; });
  if (c.kv_pad != c.q_pad) with([](Case& n) { n.kv_pad = n.q_pad; });
  if (c.kv_offsets != c.q_offsets && !c.q_offsets.empty() && c.q_lens == c.kv_lens)
    with([](Case& n) { n.kv_offsets = n.q_offsets; });
  for (auto pad : {&Case::q_pad, &Case::kv_pad}) {
    const auto& p = c.*pad;
    for (size_t b = 0; b < p.size(); ++b)
      for (int64_t g : smaller_gaps(p[b], parts))
        with([&](Case& n) {
          (n.*pad)[b] = g;
          if (pad == &Case::q_pad && c.q_pad == c.kv_pad) n.kv_pad = n.q_pad;
        });
  }
  for (auto offs : {&Case::q_offsets, &Case::kv_offsets}) {  // close gaps between explicit offsets
    const auto& o = c.*offs;
    if (o.empty()) continue;
    const bool q = offs == &Case::q_offsets;
    const auto& lens = q ? c.q_lens : c.kv_lens;
    if (o[0] > 0)
      with([&](Case& n) {
        for (auto& x : n.*offs) x -= o[0];
        if (q && c.q_offsets == c.kv_offsets) n.kv_offsets = n.q_offsets;
      });
    for (size_t b = 0; b + 1 < o.size(); ++b) {
      const int64_t gap = o[b + 1] - o[b] - lens[b];
      for (int64_t g : smaller_gaps(gap, parts))
        with([&](Case& n) {
          shift_after(n.*offs, b, gap - g);
          if (q && c.q_offsets == c.kv_offsets) n.kv_offsets = n.q_offsets;
        });
    }
  }
  // 6. Simplify the remaining keys to their defaults: every key the table marks KeyShrink::ToDefault.
  const Case d = defaults_for(c.op);
  for (const auto& key : case_key_table()) {
    if (key.shrink != KeyShrink::ToDefault || !key_applies(key.ops, c.op)) continue;
    Case n = c;
    key.reset(n, d);
    if (!(n == c)) out.push_back(std::move(n));
  }
  int64_t seg_rows = 0;
  for (const auto& s : l.segments) seg_rows += s.rows;
  if (c.rows != 0 && seg_rows <= 512) with([](Case& n) { n.rows = 0; });
  return out;
}

const char* shrink_stop_note(ShrinkStop s) {
  switch (s) {
    case ShrinkStop::Minimum: return "";
    case ShrinkStop::RunBudget: return ", run budget exhausted";
    case ShrinkStop::Deadline: return ", stopped at the deadline";
    case ShrinkStop::Interrupted: return ", interrupted";
  }
  return "";
}

ShrinkResult shrink_case(const Case& failing, const StillFails& still_fails, const ShrinkOptions& opt) {
  ShrinkResult r;
  r.minimal = failing;
  std::set<std::string> seen = {print_case(failing)};
  // Checked before every run, so no run starts after a stop request or the deadline.
  auto must_stop = [&] {
    if (interrupted() != 0) r.stop = ShrinkStop::Interrupted;
    else if (std::chrono::steady_clock::now() >= opt.deadline) r.stop = ShrinkStop::Deadline;
    return r.stop != ShrinkStop::Minimum;
  };
  bool progress = true;
  while (progress && r.runs < opt.max_runs) {
    progress = false;
    for (const Case& cand : shrink_candidates(r.minimal, opt.lim)) {
      if (!seen.insert(print_case(cand)).second) continue;
      if (!shrinkable_valid(cand, opt.lim)) continue;
      if (r.runs >= opt.max_runs) break;
      if (must_stop()) return r;
      ++r.runs;
      const bool fails = still_fails(cand);
      if (interrupted() != 0) {  // a run cut short by a stop request proves nothing
        r.stop = ShrinkStop::Interrupted;
        return r;
      }
      if (fails) {
        r.minimal = cand;
        ++r.steps;
        progress = true;
        break;
      }
    }
  }
  r.budget_exhausted = progress && r.runs >= opt.max_runs;
  if (r.budget_exhausted) r.stop = ShrinkStop::RunBudget;
  return r;
}

StillFails fails_like(const CaseResult& original, Backend& backend, Backend& vs, const LayoutLimits& lim,
                      CaseResult* last_failing) {
  const bool was_error = original.verdict.kind == Verdict::Error;
  const std::set<std::string> want = failing_metrics(original.verdict);
  return [&backend, &vs, lim, was_error, want, last_failing](const Case& c) {
    CaseResult r;
    try {
      r = run_case(c, backend, vs, lim);
    } catch (const BadInput&) {
      return false;
    }
    if (interrupted() != 0) return false;
    bool fails = false;
    if (was_error) {
      fails = r.verdict.kind == Verdict::Error;
    } else if (r.verdict.kind == Verdict::Fail) {
      for (const auto& m : failing_metrics(r.verdict)) fails |= want.count(m) > 0;
    }
    if (fails && last_failing) *last_failing = std::move(r);
    return fails;
  };
}

}  // namespace ao
