// `attn-oracle cp-run <case> --backend cuda-indexer|cuda-sdpa --gpus N`: real context parallelism
// (gpu_backends/include/attn_oracle/gpu/cp_run.h). Built without CUDA/NCCL it says so and exits 125 (skip).
#include <iostream>

#include "commands.h"
#if defined(AO_HAVE_NCCL)
#include <fmt/format.h>

#include "attn_oracle/gpu/cp_run.h"
#include "attn_oracle/report/report.h"
#endif

namespace ao {
namespace {

#if defined(AO_HAVE_NCCL)
// Prints what cp_run() returned, writes the per-rank reports, and gives the exit code: 0 every rank
// passed and the K/V exchange was bit-identical, 1 otherwise (2: a spawned rank's bad input), 125 skip.
int report_cp_run(const gpu::CpRunResult& r, const std::string& report_dir) {
  using K = gpu::CpRunResult;
  switch (r.kind) {
    case K::Skipped:
      std::cout << "cp-run: skipped: " << r.reason << "\n";
      return 125;
    case K::Worker: return 0;
    case K::Spawned: return r.exit_code;
    case K::Failed:
      std::cerr << "cp-run: FAILED: " << r.reason << "\n";
      return r.exit_code;
    case K::Checked: break;
  }
  std::cout << fmt::format("cp-run: {} | backend {} | {} process(es), {} cp rank(s) each | {} | {}\n", r.case_line,
                           r.backend, r.processes, r.ranks_per_process, r.nccl_version, r.device);
  std::cout << fmt::format("K/V all-gather bit-identical to whole-buffer generation: {}\n",
                           r.exchange_bit_identical ? "yes" : "NO");
  std::cout << fmt::format("kernel time of process 0's ranks: {:.3f} s\n", r.kernel_seconds);
  std::cout << "rank  verdict  bitwise==single-GPU  metrics\n";
  std::vector<CaseResult> results;
  bool all_ok = r.exchange_bit_identical;
  for (const auto& rank : r.ranks) {
    const Verdict& v = rank.result.verdict;
    std::string brief;
    for (const auto& m : v.metrics)
      if (m.headline || m.failed)
        brief += fmt::format(" {}={:.4g}", m.name, m.value);
    std::cout << fmt::format("{:>4}  {:<7}  {:<19} {}\n", rank.rank, verdict_name(v.kind),
                             rank.bitwise_vs_single_gpu ? "yes" : "NO", brief);
    all_ok = all_ok && !is_failure(v.kind);  // a weak rank failed no metric (its verdict says which gate is weak)
    results.push_back(rank.result);
  }
  if (!report_dir.empty()) write_report_files(report_dir, results);
  std::cout << fmt::format("cp-run: {}{}\n", all_ok ? "every rank passed" : "FAILED",
                           all_ok && tally(results).weak() > 0 ? fmt::format(" ({} weak)", tally(results).weak()) : "");
  return r.exchange_bit_identical ? exit_code(results) : 1;
}
#endif

struct CpRunArgs {
  std::vector<std::string> case_args;
  std::string backend = "cuda-indexer", rendezvous, report_dir;
  int gpus = 1;
  double timeout = 900;
};

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
  auto a = std::make_shared<CpRunArgs>();
  auto* sub = app.add_subcommand("cp-run", "real context parallelism: one process per GPU, NCCL all-gather of K/V, "
                                           "per-rank kernels checked against the single-GPU simulation and the oracle");
  sub->add_option("case", a->case_args, "key=value ... (cp= is the CP size; rank= is ignored)")->required();
  sub->add_option("--backend,-b", a->backend, "cuda-indexer[:knobs] or cuda-sdpa[:knobs]")->capture_default_str();
  sub->add_option("--gpus", a->gpus, "processes (GPUs) to start when no launcher sets RANK/WORLD_SIZE")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  sub->add_option("--timeout", a->timeout, "seconds any collective (and a spawned rank) may take")->capture_default_str();
  sub->add_option("--rendezvous", a->rendezvous, "file for the NCCL id (shared file system under srun)");
  sub->add_option("--report-dir", a->report_dir, "write per-rank reports here");
  return AppCommand{sub, [a, &app]() -> int {
    const Layout l = make_layout(parse_case(join_case_args(a->case_args)));  // bad input: exit 2 anywhere
    if (l.c.cp % a->gpus != 0)
      throw CaseError("cp", std::to_string(l.c.cp), "cannot be folded over --gpus " + std::to_string(a->gpus));
#if defined(AO_HAVE_NCCL)
    gpu::CpRunOptions o;
    o.case_line = join_case_args(a->case_args);
    o.backend = a->backend;
    o.gpus = a->gpus;
    o.timeout_s = a->timeout;
    o.rendezvous = a->rendezvous;
    (void)app;
    o.argv = cli_argv();
    return report_cp_run(gpu::cp_run(o), a->report_dir);
#else
    (void)app;
    std::cout << "cp-run: skipped: this build has no CUDA/NCCL (configure on a machine with the CUDA toolkit)\n";
    return 125;
#endif
  }};
});

}  // namespace
}  // namespace ao
