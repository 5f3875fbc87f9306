// `attn-oracle cp-run <case> --backend cuda-indexer|cuda-sdpa --gpus N`: real context parallelism
// (gpu_backends/cp_run.h). Built without CUDA/NCCL it says so and exits 125 (skip).
#include <iostream>

#include "commands.h"
#if defined(AO_HAVE_NCCL)
#include "attn_oracle/gpu/cp_run.h"
#endif

namespace ao {
namespace {

struct CpRunArgs {
  std::vector<std::string> case_args;
  std::string backend = "cuda-indexer", rendezvous, report_dir;
  int gpus = 1;
  double timeout = 900;
};

CommandRegistrar reg([](CLI::App& app, const LayoutLimits&) {
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
    o.report_dir = a->report_dir;
    (void)app;
    o.argv = cli_argv();
    return gpu::cp_run(o);
#else
    (void)app;
    std::cout << "cp-run: skipped: this build has no CUDA/NCCL (configure on a machine with the CUDA toolkit)\n";
    return 125;
#endif
  }};
});

}  // namespace
}  // namespace ao
