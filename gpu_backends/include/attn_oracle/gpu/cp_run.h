// `attn-oracle cp-run`: real context parallelism. One process per GPU (rank = GPU; cp ranks folded
// cp/world per process), each generating on its device only the Q (and W) rows of its own zigzag
// chunks and the K/V rows at those positions; K/V are exchanged with an NCCL all-gather and put back
// in global order; each rank runs the kernel on its chunks against the gathered keys; outputs are
// all-gathered to process 0, which checks each rank (a) bit-for-bit against the single-GPU
// simulation of that rank (same kernel, inputs generated whole on one device) and (b) against the
// CPU oracle on the case's checked rows. The gathered K/V are checked bit-for-bit too.
#pragma once
#include <string>
#include <vector>

namespace ao::gpu {

struct CpRunOptions {
  std::string case_line, backend;  // backend: cuda-indexer[:knobs] | cuda-sdpa[:knobs]
  int gpus = 1;                    // processes to start when no launcher environment is set
  double timeout_s = 900;          // per collective, and for the whole run of a spawned rank
  std::string rendezvous;          // NCCL id file (shared file system for multi-node launchers)
  std::string report_dir;
  std::vector<std::string> argv;   // this process's command line (re-executed per rank by --gpus N)
};

// Returns the process exit code (0 pass, 1 fail, 2 bad input, 125 cannot run here).
int cp_run(const CpRunOptions& o);

}  // namespace ao::gpu
