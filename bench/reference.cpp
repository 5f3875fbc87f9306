// Throughput of the CPU references against an OpenBLAS GEMM baseline measured in the same run and
// with the same thread count (one thread per physical core). Counters: GFLOP/s of the useful work
// (multiply-adds over allowed keys only, not tile padding), so "ours / sgemm" is the ratio the
// performance targets are stated in. Cases are case lines: --indexer-case=..., --sdpa-case=...
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "attn_oracle/reference/indexer_backward.h"
#include "attn_oracle/reference/reference.h"
#include "../oracle/reference/reference_gemm.h"
#include "../oracle/reference/reference_runtime.h"

namespace {

using namespace ao;

void gemm_baseline(benchmark::State& st, bool fp64, int n) {
  const int threads = detail::reference_threads();
  AO_BLAS_FN(openblas_set_num_threads)(threads);
  const size_t e = size_t(n) * size_t(n);
  std::vector<float> a(e, 0.5f), b(e, 0.25f), c(e);
  std::vector<double> ad(fp64 ? e : 0, 0.5), bd(fp64 ? e : 0, 0.25), cd(fp64 ? e : 0);
  for (auto _ : st) {
    if (fp64)
      AO_BLAS_FN(cblas_dgemm)(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, ad.data(), n, bd.data(), n, 0.0,
                  cd.data(), n);
    else
      AO_BLAS_FN(cblas_sgemm)(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP"] = benchmark::Counter(2.0 * n * n * double(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = threads;
}

// Multiply-adds x 2 over the allowed keys of every checked row.
double useful_flops(const Layout& l) {
  double keys = 0;
  for (int64_t r : l.check_rows) {
    if (!l.valid_row(r)) continue;
    int64_t lo, hi;
    l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
    keys += double(std::max<int64_t>(hi - lo, 0));
  }
  if (l.c.op == Op::Indexer) return 2.0 * keys * l.c.heads * l.c.dim;
  return 2.0 * keys * l.c.hq * (l.c.dim + l.c.dim_v);
}

void reference_case(benchmark::State& st, const std::string& line) {
  const Layout l = make_layout(parse_case(line));
  const Inputs in = make_case_inputs(l);  // pass=bwd: the forward's O and LSE, made before the timing
  Outputs out = make_sentinel_outputs(l);
  for (auto _ : st) {
    if (l.c.op == Op::Indexer)
      reference_indexer(l, in, out);
    else if (l.c.pass == Pass::Bwd)
      reference_sdpa_bwd(l, in, out);
    else
      reference_sdpa(l, in, out);
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP"] = benchmark::Counter(useful_flops(l) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = detail::reference_threads();
  st.SetLabel(line);
}

// The indexer backward's pieces on one case: the exact backward itself, its gates (the comparator's
// cost), and the inputs it needs (the exact forward's top-k and the prediction over it).
void indexer_backward_case(benchmark::State& st, const std::string& line, int what) {
  const Layout l = make_layout(parse_case(line));
  Inputs in = make_case_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  for (auto _ : st) {
    if (what == 0) reference_indexer_backward(l, in, out);
    if (what == 1) benchmark::DoNotOptimize(indexer_backward_gates(l, in));
    if (what == 2) make_indexer_backward_inputs(l, in);
    benchmark::ClobberMemory();
  }
  st.counters["threads"] = detail::reference_threads();
  st.SetLabel(line);
}

std::string flag(int argc, char** argv, const char* name, const char* dflt) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("blas", ao::detail::blas_config());
  // One CP rank of the 131k-token document at the seed's dims (cp=32 rank=31), 512 sampled rows x ~65k keys.
  const std::string idx = flag(argc, argv, "--indexer-case",
                               "op=indexer docs=131072 cp=32 rank=31 heads=32 dim=128 topk=2048 seed=7 rows=512");
  // A 32k-token pack of 4 documents, 8 heads x 128, causal.
  const std::string sdpa = flag(argc, argv, "--sdpa-case", "op=sdpa docs=8192*4 hq=8 hkv=8 dim=128 seed=7");
  // The indexer's training path on the seed's rank (reduced dims): the forward of the same case is its baseline.
  const std::string bwd = flag(argc, argv, "--indexer-bwd-case",
                               "op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7");
  const int reps = std::max(1, std::atoi(flag(argc, argv, "--reps", "3").c_str()));
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(0.5);
  };
  // The machine may be shared: each repetition measures the baselines right before its cases, and
  // bench/run.sh takes the median over repetitions of the per-repetition ratios.
  for (int r = 0; r < reps; ++r) {
    const std::string t = "/rep:" + std::to_string(r);
    reg("sgemm_2048" + t, [](benchmark::State& s) { gemm_baseline(s, false, 2048); });
    reg("dgemm_2048" + t, [](benchmark::State& s) { gemm_baseline(s, true, 2048); });
    reg("indexer_fp32" + t, [idx](benchmark::State& s) { reference_case(s, idx); });
    reg("indexer_fp64" + t, [idx](benchmark::State& s) { reference_case(s, idx + " precision=fp64"); });
    reg("sdpa_fp32" + t, [sdpa](benchmark::State& s) { reference_case(s, sdpa); });
    // The backward of the same pack (useful flops counted as the forward's: the ratio to sdpa_fp32 is the
    // backward's cost in forwards).
    reg("sdpa_bwd_fp32" + t, [sdpa](benchmark::State& s) { reference_case(s, sdpa + " pass=bwd"); });
    reg("indexer_bwd_forward" + t, [bwd](benchmark::State& s) { reference_case(s, bwd); });
    reg("indexer_bwd_backward" + t, [bwd](benchmark::State& s) { indexer_backward_case(s, bwd + " pass=bwd", 0); });
    reg("indexer_bwd_gates" + t, [bwd](benchmark::State& s) { indexer_backward_case(s, bwd + " pass=bwd", 1); });
    reg("indexer_bwd_inputs" + t, [bwd](benchmark::State& s) { indexer_backward_case(s, bwd + " pass=bwd", 2); });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
