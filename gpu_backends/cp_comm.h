// The real-CP transport for `attn-oracle cp-run`: one NCCL communicator over the processes of a run
// (one process per GPU), created from a rendezvous file, with every collective bounded by a timeout:
// a rank that fails or stalls makes the call throw (naming this rank) instead of hanging.
// NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is forced before the communicator is created).
#pragma once
#include <cstddef>
#include <string>

#include <cuda_runtime.h>

namespace ao::gpu {

struct CpWorld {
  int rank = 0, size = 1, local_rank = 0;  // from RANK/WORLD_SIZE/LOCAL_RANK (torchrun, mpirun, srun)
  std::string rendezvous;                  // file through which rank 0 publishes the NCCL unique id
  double timeout_s = 600;
};

// Reads RANK / WORLD_SIZE / LOCAL_RANK (or OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID).
// Returns false when none is set (a single process).
bool world_from_environment(CpWorld& w);

class CpComm {
 public:
  explicit CpComm(const CpWorld& w);  // selects GPU local_rank, joins the communicator
  ~CpComm();
  CpComm(const CpComm&) = delete;
  CpComm& operator=(const CpComm&) = delete;

  // recv = concatenation over ranks of every rank's `bytes` from send (device pointers).
  void all_gather(const void* send, void* recv, size_t bytes);
  int rank() const { return w_.rank; }
  int size() const { return w_.size; }
  cudaStream_t stream() const { return stream_; }
  static std::string nccl_version();

 private:
  void wait(const char* what);
  CpWorld w_;
  void* comm_ = nullptr;  // ncclComm_t
  cudaStream_t stream_ = nullptr;
};

}  // namespace ao::gpu
