// A CPU kernel library behind the plugin ABI (attn_oracle/backends/plugin.h): the DSA indexer and padded-THD
// SDPA in plain C++ (fp64 accumulation), self-contained like a third-party library (it includes only
// plugin.h). Tests and the bisect demo build it; knobs and env vars re-create defects:
//   knob "bug=topleft-cp" or env AO_EXAMPLE_PLUGIN_BUG=topleft-cp: chunk-local causal mask (pos0 dropped);
//   the id is the cpu-bug model's (cpu-bug:topleft-cp); another bug= id is refused with an error
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

// Allowed keys [lo, hi) in document coordinates for a row at document position p.
void allowed(const ao_layout* l, const ao_doc& d, int64_t p, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = d.kv_len;
  if (l->mask == AO_MASK_NONE) return;
  if (l->op == AO_OP_INDEXER) {
    const int64_t n = p + 1 >= 0 ? (p + 1) / l->ratio : -((-(p + 1) + l->ratio - 1) / l->ratio);
    hi = std::clamp<int64_t>(n, 0, d.kv_len);
  } else {
    hi = std::clamp<int64_t>(p + 1, 0, d.kv_len);
    if (l->window > 0) lo = std::clamp<int64_t>(p - l->window + 1, 0, hi);
  }
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
          t->lse[srow * Hq + h] = -std::numeric_limits<float>::infinity();
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
  if (l->abi_version != AO_PLUGIN_ABI_VERSION || l->struct_size != sizeof(ao_layout)) {
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
  if (!bug.empty() && bug != "none" && bug != "topleft-cp") {
    std::snprintf(msg, n, "this plugin re-creates bug=topleft-cp only, not bug=%s", bug.c_str());
    return AO_PLUGIN_ERROR;
  }
  const bool topleft = bug == "topleft-cp";
  if (l->op == AO_OP_INDEXER)
    indexer(l, t, topleft);
  else
    sdpa(l, t, topleft);
  if (has(knobs, "fail=nan") && l->num_segments > 0) {
    const ao_segment& s = l->segments[0];
    if (l->op == AO_OP_SDPA)
      t->o[s.o_row0 * l->hq * l->dim_v] = std::numeric_limits<float>::quiet_NaN();
    else if (t->scores)
      t->scores[s.row0 * l->topk] = std::numeric_limits<float>::quiet_NaN();
  }
  return AO_PLUGIN_OK;
}
#endif

}  // extern "C"
