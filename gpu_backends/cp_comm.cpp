#include "cp_comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nccl.h>

#include "gpu_common.h"

namespace ao::gpu {

namespace {

bool env_int(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 20) throw CudaError(fmt::format("environment {}='{}' is not a rank number", name, v));
  out = int(x);
  return true;
}

void nccl_check(ncclResult_t r, const char* call, int rank) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw CudaError(fmt::format("rank {}: {} failed: {}", rank, call, ncclGetErrorString(r)));
}

}  // namespace

bool world_from_environment(CpWorld& w) {
  const char* sets[][3] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                           {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
  for (auto& s : sets) {
    int r = 0, n = 0, lr = 0;
    if (env_int(s[0], r) && env_int(s[1], n)) {
      if (!env_int(s[2], lr)) lr = r;
      if (n < 1 || r >= n) throw CudaError(fmt::format("{}={} is not below {}={}", s[0], r, s[1], n));
      w.rank = r;
      w.size = n;
      w.local_rank = lr;
      return true;
    }
  }
  return false;
}

std::string CpComm::nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

CpComm::CpComm(const CpWorld& w) : w_(w) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast (shared hosts)
  int ndev = 0;
  AO_CUDA(cudaGetDeviceCount(&ndev));
  if (w.local_rank >= ndev)
    throw CudaError(fmt::format("rank {}: LOCAL_RANK {} but only {} GPU(s) visible", w.rank, w.local_rank, ndev));
  AO_CUDA(cudaSetDevice(w.local_rank));
  AO_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ncclUniqueId id{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(w.timeout_s);
  if (w.rank == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", w.rank);
    if (w.size > 1) {  // publish atomically: write then rename
      const std::string tmp = w.rendezvous + ".tmp";
      std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof id);
      std::filesystem::rename(tmp, w.rendezvous);
    }
  } else {
    for (;;) {
      std::ifstream f(w.rendezvous, std::ios::binary);
      if (f && f.read(reinterpret_cast<char*>(&id), sizeof id)) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw CudaError(fmt::format("rank {}: no NCCL id from rank 0 in {} within {} s", w.rank, w.rendezvous, w.timeout_s));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;  // lets wait() bound every call by the timeout
  ncclComm_t c = nullptr;
  nccl_check(ncclCommInitRankConfig(&c, w.size, id, w.rank, &cfg), "ncclCommInitRankConfig", w.rank);
  comm_ = c;
  wait("ncclCommInitRankConfig");
}

CpComm::~CpComm() {
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  if (stream_) cudaStreamDestroy(stream_);
}

void CpComm::wait(const char* what) {
  auto c = static_cast<ncclComm_t>(comm_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(w_.timeout_s);
  for (;;) {
    ncclResult_t st = ncclSuccess;
    ncclCommGetAsyncError(c, &st);
    const bool stream_done = cudaStreamQuery(stream_) != cudaErrorNotReady;
    if (st == ncclSuccess && stream_done) return;
    if (st != ncclSuccess && st != ncclInProgress) {
      ncclCommAbort(c);
      comm_ = nullptr;
      throw CudaError(fmt::format("rank {}: {}: {}", w_.rank, what, ncclGetErrorString(st)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(c);
      comm_ = nullptr;
      throw CudaError(fmt::format("rank {}: {} did not finish within {} s (a peer rank failed or stalled)", w_.rank,
                                  what, w_.timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void CpComm::all_gather(const void* send, void* recv, size_t bytes) {
  nccl_check(ncclAllGather(send, recv, bytes, ncclUint8, static_cast<ncclComm_t>(comm_), stream_), "ncclAllGather",
             w_.rank);
  wait("ncclAllGather");
}

}  // namespace ao::gpu
