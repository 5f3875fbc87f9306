// A CPU kernel library behind the plugin ABI (attn_oracle/backends/plugin.h): the DSA indexer and padded-THD
// SDPA, forward and backward, in plain C++ (fp64 accumulation), self-contained like a third-party library
// (it includes only plugin.h). Tests and the bisect demo build it; knobs and env vars re-create defects,
// each under the id of the cpu-bug model that re-creates the same answer:
//   knob "bug=topleft-cp" or env AO_EXAMPLE_PLUGIN_BUG=topleft-cp: chunk-local causal mask (pos0 dropped);
//   "bug=bwd-gqa-first-head": the SDPA backward's dK/dV of a GQA group from its first query head only;
//   "bug=dk-overwrite": the indexer backward stores d_index_k instead of accumulating it (last row wins);
//   another bug= id is refused with an error
//   knobs "fail=error" / "fail=skip" / "fail=nan": return an error / decline / write NaN into O or scores
//   env AO_EXAMPLE_PLUGIN_UNAVAILABLE=1: reports it cannot run here
// Build-time variants for the loader's tests: -DAO_EXAMPLE_ABI=<n>, -DAO_EXAMPLE_OMIT_RUN.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "attn_oracle/backends/plugin.h"

#ifndef AO_EXAMPLE_ABI
#define AO_EXAMPLE_ABI AO_PLUGIN_ABI_VERSION
#endif

#ifndef AO_EXAMPLE_OMIT_RUN
namespace {

// True when the comma-separated knob list holds the item `what` ("fail=nan") exactly.
bool has(const char* knobs, const char* what) {
  return knobs && (std::string(",") + knobs + ",").find(std::string(",") + what + ",") != std::string::npos;
}

// The value of knob `name` ("" when not given).
std::string knob(const char* knobs, const std::string& name) {
  const std::string list = std::string(",") + (knobs ? knobs : "") + ",";
  const size_t at = list.find("," + name + "=");
  if (at == std::string::npos) return {};
  const size_t from = at + name.size() + 2;
  return list.substr(from, list.find(',', from) - from);
}

// Allowed keys [lo, hi) in document coordinates for a row at document position p (plugin.h's band; a
// version-1 build knows the causal bound and the cuDNN-convention left window only).
void allowed(const ao_layout* l, const ao_doc& d, int64_t p, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = d.kv_len;
  if (l->mask == AO_MASK_NONE) return;
  if (l->op == AO_OP_INDEXER) {
    const int64_t n = p + 1 >= 0 ? (p + 1) / l->ratio : -((-(p + 1) + l->ratio - 1) / l->ratio);
    hi = std::clamp<int64_t>(n, 0, d.kv_len);
    return;
  }
#if AO_EXAMPLE_ABI >= 2
  const int64_t right = l->window_right;
  const bool fa = l->window_convention == AO_WINDOW_FA;
#else
  const int64_t right = 0;
  const bool fa = false;
#endif
  hi = right < 0 ? d.kv_len : std::clamp<int64_t>(p + 1 + right, 0, d.kv_len);
  if (l->window > 0 || (l->window == 0 && fa)) lo = std::clamp<int64_t>(fa ? p - l->window : p - l->window + 1, 0, hi);
}

// The LSE of a row with no allowed key.
float empty_lse(const ao_layout* l) {
#if AO_EXAMPLE_ABI >= 2
  if (l->empty_rows_posinf) return std::numeric_limits<float>::infinity();
#endif
  (void)l;
  return -std::numeric_limits<float>::infinity();
}

void indexer(const ao_layout* l, const ao_tensors* t, bool topleft) {
  const int H = l->heads, D = l->dim, K = l->topk;
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    const ao_doc& d = l->docs[s.doc];
    for (int64_t i = 0; i < s.rows; ++i) {
      const int64_t r = s.row0 + i;
      int32_t* out = t->topk + r * K;
      float* sc = t->scores ? t->scores + r * K : nullptr;
      std::vector<std::pair<double, int32_t>> cand;
      if (i < s.valid) {
        const int64_t pos = topleft ? i : s.pos0 + i;  // the row's document position
        int64_t lo, hi;
        allowed(l, d, pos, lo, hi);
        for (int64_t k = lo; k < hi; ++k) {
          const float* kv = t->k + (d.kv_off + k) * D;
          double acc = 0;
          for (int h = 0; h < H; ++h) {
            const float* q = t->q + (r * H + h) * D;
            double dot = 0;
            for (int e = 0; e < D; ++e) dot += double(q[e]) * double(kv[e]);
            acc += double(t->w[r * H + h]) * std::max(dot, 0.0);
          }
          cand.push_back({l->scale * acc, int32_t(d.kv_off + k)});
        }
      }
      const size_t m = std::min(cand.size(), size_t(K));
      std::partial_sort(cand.begin(), cand.begin() + long(m), cand.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (int e = 0; e < K; ++e) {
        out[e] = size_t(e) < m ? cand[size_t(e)].second : -1;
        if (sc) sc[e] = size_t(e) < m ? float(cand[size_t(e)].first) : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

void sdpa(const ao_layout* l, const ao_tensors* t, bool topleft) {
  const int Hq = l->hq, Hkv = l->hkv, D = l->dim, Dv = l->dim_v, G = Hq / Hkv;
  std::vector<double> p, acc(static_cast<size_t>(Dv));
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    const ao_doc& d = l->docs[s.doc];
    for (int64_t i = 0; i < s.valid; ++i) {
      const int64_t r = s.row0 + i, orow = s.o_row0 + i, srow = s.stats_row0 + i;
      const int64_t pos = topleft ? i : s.pos0 + i;
      int64_t lo, hi;
      allowed(l, d, pos, lo, hi);
      for (int h = 0; h < Hq; ++h) {
        const int kh = h / G;
        const float* q = t->q + (r * Hq + h) * D;
        float* o = t->o + (orow * Hq + h) * Dv;
        if (hi <= lo) {
          for (int e = 0; e < Dv; ++e) o[e] = 0.f;
          t->lse[srow * Hq + h] = empty_lse(l);
          continue;
        }
        p.assign(size_t(hi - lo), 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = lo; k < hi; ++k) {
          const float* kv = t->k + ((d.kv_off + k) * Hkv + kh) * D;
          double dot = 0;
          for (int e = 0; e < D; ++e) dot += double(q[e]) * double(kv[e]);
          p[size_t(k - lo)] = l->scale * dot;
          mx = std::max(mx, l->scale * dot);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t k = lo; k < hi; ++k) {
          const double e = std::exp(p[size_t(k - lo)] - mx);
          sum += e;
          const float* v = t->v + ((d.kv_off + k) * Hkv + kh) * Dv;
          for (int x = 0; x < Dv; ++x) acc[size_t(x)] += e * double(v[x]);
        }
        for (int x = 0; x < Dv; ++x) o[x] = float(acc[size_t(x)] / sum);
        t->lse[srow * Hq + h] = float(mx + std::log(sum));
      }
    }
  }
}

// Stores the fp64 gradient `g` (width elements per K/V row) into every valid K/V row of `out`: a CP rank's
// partial covers the whole buffer, 0 where none of its queries reaches a key; pad slots stay untouched.
void store_kv_rows(const ao_layout* l, const std::vector<double>& g, float* out, int64_t width) {
  for (int di = 0; di < l->num_docs; ++di)
    for (int64_t e = l->docs[di].kv_off * width; e < (l->docs[di].kv_off + l->docs[di].kv_len) * width; ++e)
      out[e] = float(g[size_t(e)]);
}

// dS = P (dP - D) with P = exp(s - lse) from the forward's LSE, D = rowsum(dO * O) from its O.
void sdpa_backward(const ao_layout* l, const ao_tensors* t, bool topleft, bool gqa_first_head) {
  const int Hq = l->hq, Hkv = l->hkv, D = l->dim, Dv = l->dim_v, G = Hq / Hkv;
  std::vector<double> dk(size_t(l->kv_rows) * size_t(Hkv * D), 0.0), dv(size_t(l->kv_rows) * size_t(Hkv * Dv), 0.0);
  std::vector<double> dq(static_cast<size_t>(D));
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    const ao_doc& d = l->docs[s.doc];
    for (int64_t i = 0; i < s.valid; ++i) {
      const int64_t r = s.row0 + i, orow = s.o_row0 + i, srow = s.stats_row0 + i;
      int64_t lo, hi;
      allowed(l, d, topleft ? i : s.pos0 + i, lo, hi);
      for (int h = 0; h < Hq; ++h) {
        const int kh = h / G;
        const float* q = t->q + (r * Hq + h) * D;
        const float* dout = t->dout + (r * Hq + h) * Dv;
        const float* o = t->fwd_o + (orow * Hq + h) * Dv;
        const double lse = t->fwd_lse[srow * Hq + h];
        double rowsum = 0;
        for (int x = 0; x < Dv; ++x) rowsum += double(dout[x]) * double(o[x]);
        std::fill(dq.begin(), dq.end(), 0.0);
        for (int64_t key = lo; key < hi; ++key) {
          const int64_t kr = d.kv_off + key;
          const float* k = t->k + (kr * Hkv + kh) * D;
          const float* v = t->v + (kr * Hkv + kh) * Dv;
          double dot = 0, dp = 0;
          for (int e = 0; e < D; ++e) dot += double(q[e]) * double(k[e]);
          for (int x = 0; x < Dv; ++x) dp += double(dout[x]) * double(v[x]);
          const double p = std::exp(l->scale * dot - lse), ds = p * (dp - rowsum);
          for (int e = 0; e < D; ++e) dq[size_t(e)] += l->scale * ds * double(k[e]);
          if (gqa_first_head && h % G != 0) continue;
          double* dkr = dk.data() + size_t((kr * Hkv + kh) * D);
          double* dvr = dv.data() + size_t((kr * Hkv + kh) * Dv);
          for (int e = 0; e < D; ++e) dkr[e] += l->scale * ds * double(q[e]);
          for (int x = 0; x < Dv; ++x) dvr[x] += p * double(dout[x]);
        }
        for (int e = 0; e < D; ++e) t->dq[(r * Hq + h) * D + e] = float(dq[size_t(e)]);
      }
    }
  }
  store_kv_rows(l, dk, t->dk, int64_t(Hkv) * D);
  store_kv_rows(l, dv, t->dv, int64_t(Hkv) * Dv);
}

// The KL indexer loss over the forward's top-k slots and its gradients (plugin.h, pass = AO_PASS_BWD).
void indexer_backward(const ao_layout* l, const ao_tensors* t, bool dk_overwrite) {
  const int H = l->heads, D = l->dim, K = l->topk;
  int64_t valid = 0, keyed = 0;
  for (int si = 0; si < l->num_segments; ++si)
    for (int64_t i = 0; i < l->segments[si].valid; ++i) {
      const int32_t* slots = t->fwd_topk + (l->segments[si].row0 + i) * K;
      ++valid;
      keyed += std::any_of(slots, slots + K, [](int32_t v) { return v >= 0; });
    }
  const double denom = l->loss_mean == AO_LOSS_MEAN_ROWS    ? double(std::max<int64_t>(l->q_rows, 1))
                       : l->loss_mean == AO_LOSS_MEAN_VALID ? double(std::max<int64_t>(valid, 1))
                       : l->loss_mean == AO_LOSS_MEAN_KEYED ? double(std::max<int64_t>(keyed, 1))
                                                            : 1.0;
  const double gscale = double(t->grad_loss[0]) / denom;
  std::vector<double> dk(size_t(l->kv_rows) * size_t(D), 0.0), dz(static_cast<size_t>(K)), dkj(static_cast<size_t>(D));
  std::vector<double> dw(static_cast<size_t>(H)), dq(size_t(H) * size_t(D));
  double loss = 0;
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    for (int64_t i = 0; i < s.valid; ++i) {
      const int64_t r = s.row0 + i;
      const int32_t* slots = t->fwd_topk + r * K;
      double sum_g = 0;
      for (int j = 0; j < K; ++j) {
        dz[size_t(j)] = 0;
        if (slots[j] < 0) continue;
        const double lt = std::clamp(std::log(double(t->target[r * K + j])), -100.0, 0.0);
        const double lp = std::clamp(std::log(double(t->predict[r * K + j])), -100.0, 0.0);
        loss += std::exp(lt) * (lt - lp);
        dz[size_t(j)] = std::log(double(t->predict[r * K + j])) >= -100 ? -std::exp(lt) : 0.0;  // g_j
        sum_g += dz[size_t(j)];
      }
      for (int j = 0; j < K; ++j)
        if (slots[j] >= 0) dz[size_t(j)] = (dz[size_t(j)] - double(t->predict[r * K + j]) * sum_g) * gscale;
      // One pass over (slot, head): a = q_h . k_j feeds d_weights, d_index_q and the slot's d_index_k.
      std::fill(dw.begin(), dw.end(), 0.0);
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int j = 0; j < K; ++j) {
        if (slots[j] < 0) continue;
        const float* k = t->k + int64_t(slots[j]) * D;
        const double g = dz[size_t(j)] * l->scale;
        std::fill(dkj.begin(), dkj.end(), 0.0);
        for (int h = 0; h < H; ++h) {
          const float* q = t->q + (r * H + h) * D;
          const double w = t->w[r * H + h];
          double a = 0;
          for (int e = 0; e < D; ++e) a += double(q[e]) * double(k[e]);
          dw[size_t(h)] += g * std::max(a, 0.0);
          if (a <= 0) continue;
          for (int e = 0; e < D; ++e) {
            dq[size_t(h * D + e)] += g * w * double(k[e]);
            dkj[size_t(e)] += g * w * double(q[e]);
          }
        }
        double* dst = dk.data() + size_t(slots[j]) * size_t(D);
        for (int e = 0; e < D; ++e) dst[e] = dk_overwrite ? dkj[size_t(e)] : dst[e] + dkj[size_t(e)];
      }
      for (int h = 0; h < H; ++h) t->dw[r * H + h] = float(dw[size_t(h)]);
      for (int64_t e = 0; e < int64_t(H) * D; ++e) t->dq[r * H * D + e] = float(dq[size_t(e)]);
    }
  }
  store_kv_rows(l, dk, t->dk, D);
  if (t->loss) t->loss[0] = float(loss / denom);
}

}  // namespace
#endif

extern "C" {

uint32_t ao_plugin_abi_version(void) { return AO_EXAMPLE_ABI; }

const char* ao_plugin_name(void) { return "example-cpu-plugin 1 (fp64 loops)"; }

int ao_plugin_unavailable(char* msg, size_t n) {
  const char* u = std::getenv("AO_EXAMPLE_PLUGIN_UNAVAILABLE");
  if (!u || std::strcmp(u, "1") != 0) return 0;
  std::snprintf(msg, n, "AO_EXAMPLE_PLUGIN_UNAVAILABLE=1: pretending no device is present");
  return 1;
}

#ifndef AO_EXAMPLE_OMIT_RUN
int ao_plugin_run(const ao_layout* l, const ao_tensors* t, const char* knobs, char* msg, size_t n) {
  if (l->abi_version != AO_EXAMPLE_ABI ||
      l->struct_size != (AO_EXAMPLE_ABI >= 2 ? sizeof(ao_layout) : AO_LAYOUT_V1_SIZE)) {
    std::snprintf(msg, n, "layout struct of another ABI (version %u, size %u)", l->abi_version, l->struct_size);
    return AO_PLUGIN_ERROR;
  }
  if (has(knobs, "fail=error")) {
    std::snprintf(msg, n, "planted failure (knob fail=error) on case: %s", l->case_line);
    return AO_PLUGIN_ERROR;
  }
  if (has(knobs, "fail=skip")) {
    std::snprintf(msg, n, "planted decline (knob fail=skip)");
    return AO_PLUGIN_SKIP;
  }
  const char* env = std::getenv("AO_EXAMPLE_PLUGIN_BUG");
  std::string bug = knob(knobs, "bug");
  if ((bug.empty() || bug == "none") && env) bug = env;
  if (!bug.empty() && bug != "none" && bug != "topleft-cp" && bug != "bwd-gqa-first-head" && bug != "dk-overwrite") {
    std::snprintf(msg, n, "this plugin re-creates bug=topleft-cp|bwd-gqa-first-head|dk-overwrite only, not bug=%s",
                  bug.c_str());
    return AO_PLUGIN_ERROR;
  }
  const bool topleft = bug == "topleft-cp";
  const bool bwd = AO_EXAMPLE_ABI >= 2 && l->pass == AO_PASS_BWD;
  if (bwd && l->op == AO_OP_INDEXER)
    indexer_backward(l, t, bug == "dk-overwrite");
  else if (bwd)
    sdpa_backward(l, t, topleft, bug == "bwd-gqa-first-head");
  else if (l->op == AO_OP_INDEXER)
    indexer(l, t, topleft);
  else
    sdpa(l, t, topleft);
  if (has(knobs, "fail=nan") && l->num_segments > 0) {
    const ao_segment& s = l->segments[0];
    if (bwd)
      t->dq[s.row0 * (l->op == AO_OP_SDPA ? l->hq : l->heads) * l->dim] = std::numeric_limits<float>::quiet_NaN();
    else if (l->op == AO_OP_SDPA)
      t->o[s.o_row0 * l->hq * l->dim_v] = std::numeric_limits<float>::quiet_NaN();
    else if (t->scores)
      t->scores[s.row0 * l->topk] = std::numeric_limits<float>::quiet_NaN();
  }
  return AO_PLUGIN_OK;
}
#endif

}  // extern "C"
