// `attn-oracle cp-run`: real context parallelism. One process per GPU (rank = GPU; cp ranks folded
// cp/world per process), each generating on its device only the Q (and W) rows of its own zigzag
// chunks and the K/V rows at those positions; K/V are exchanged with an NCCL all-gather and put back
// in global order; each rank runs the kernel on its chunks against the gathered keys; outputs are
// all-gathered to process 0, which checks each rank (a) bit-for-bit against the single-GPU
// simulation of that rank (same kernel, inputs generated whole on one device) and (b) against the
// CPU oracle on the case's checked rows. The gathered K/V are checked bit-for-bit too.
// cp_run() runs and checks; it prints nothing and writes no report: it returns the per-rank results
// (CpRunResult) and the CLI (app/cmd_cp_run.cpp) prints them and writes the report files.
#pragma once
#include <string>
#include <vector>

#include "attn_oracle/pipeline/run_case.h"

namespace ao::gpu {

struct CpRunOptions {
  std::string case_line, backend;  // backend: cuda-indexer[:knobs] | cuda-sdpa[:knobs]
  int gpus = 1;                    // processes to start when no launcher environment is set
  double timeout_s = 900;          // per collective, and for the whole run of a spawned rank
  std::string rendezvous;          // NCCL id file (shared file system for multi-node launchers)
  std::vector<std::string> argv;   // this process's command line (re-executed per rank by --gpus N)
};

// One CP rank, checked by process 0.
struct CpRankResult {
  int rank = 0;
  bool bitwise_vs_single_gpu = false;  // outputs equal the single-GPU simulation's bit for bit
  CaseResult result;                   // vs cpu-ref; a bitwise difference adds the failed metric bitwise_vs_single_gpu
};

struct CpRunResult {
  enum Kind {
    Checked,  // this is process 0 of the world: the fields below and ranks hold every CP rank's check
    Worker,   // another process of a launched world: it ran its ranks; process 0 reports
    Spawned,  // --gpus N: this process started the ranks (process 0 among them reported); exit_code
    Skipped,  // cannot run here (no GPU): reason
    Failed,   // this process failed (reason names the rank), or a spawned rank failed (reason)
  } kind = Skipped;
  std::string reason;
  int exit_code = 0;  // Spawned and Failed: the process exit code (1, or 2 for a rank's bad input)
  // Checked only:
  std::string case_line, backend, nccl_version, device;
  int processes = 1, ranks_per_process = 1;
  bool exchange_bit_identical = false;  // the gathered K/V equal whole-buffer generation (every process)
  double kernel_seconds = 0;            // process 0's ranks
  std::vector<CpRankResult> ranks;
};

// Throws BadInput for bad input (exit code 2), also where no GPU could run it.
CpRunResult cp_run(const CpRunOptions& o);

}  // namespace ao::gpu
