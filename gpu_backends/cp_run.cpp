#include "attn_oracle/gpu/cp_run.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/compare/compare.h"
#include "attn_oracle/internal/rng.h"
#include "attn_oracle/internal/subprocess.h"
#include "attn_oracle/pipeline/trial.h"
#include "cp_comm.h"
#include "device_inputs.h"
#include "device_run.h"

namespace ao::gpu {

namespace {

// One CP rank's share of the global K/V buffer: the rows at its chunks' positions, in local-row order.
struct RankRows {
  Layout l;                           // the rank's layout (local Q/O rows, global K/V)
  std::vector<int64_t> kv_row;        // local row j -> global K/V row (-1 where the chunk is padding)
};

RankRows rank_rows(const Case& c, int rank) {
  Case cr = c;
  cr.rank = rank;
  RankRows rr{make_layout(cr), {}};
  rr.kv_row.assign(size_t(rr.l.q_rows), -1);
  for (const auto& s : rr.l.segments)
    for (int64_t i = 0; i < s.valid; ++i)
      rr.kv_row[size_t(s.row0 + i)] = rr.l.docs[size_t(s.doc)].kv_off + s.pos0 + i;
  return rr;
}

size_t elem_bytes(const DeviceTensor& t) { return t.st == Storage::F32 ? 4 : 2; }
void* raw(DeviceTensor& t) { return t.st == Storage::F32 ? static_cast<void*>(t.f32.get()) : t.bf16.get(); }

// Local rows of a global tensor for one rank: generated on this device from the rank's token ids.
void generate_local(DeviceTensor& dst, int64_t row_offset, const Case& c, uint32_t tensor,
                    const std::vector<int64_t>& global_tokens, const std::vector<int64_t>& kv_row) {
  std::vector<int64_t> tok(kv_row.size(), -1);
  for (size_t j = 0; j < kv_row.size(); ++j)
    if (kv_row[j] >= 0) tok[j] = global_tokens[size_t(kv_row[j])];
  DeviceTensor part;
  generate_tensor(part, dst.st, int64_t(kv_row.size()), dst.width, c, tensor, tok);
  AO_CUDA(cudaMemcpy(static_cast<char*>(raw(dst)) + size_t(row_offset * dst.width) * elem_bytes(dst), part.data(),
                     kv_row.size() * size_t(dst.width) * elem_bytes(dst), cudaMemcpyDeviceToDevice));
}

// Puts gathered rows (all ranks, rank-major) back at their global rows; pad rows stay as generated.
void scatter_global(DeviceTensor& global, const DeviceTensor& gathered, const std::vector<RankRows>& all) {
  const size_t eb = elem_bytes(global), w = size_t(global.width);
  int64_t base = 0;
  for (const auto& rr : all) {
    for (const auto& s : rr.l.segments)
      if (s.valid > 0)
        AO_CUDA(cudaMemcpy(static_cast<char*>(raw(global)) + size_t(rr.kv_row[size_t(s.row0)]) * w * eb,
                           static_cast<const char*>(gathered.data()) + size_t(base + s.row0) * w * eb,
                           size_t(s.valid) * w * eb, cudaMemcpyDeviceToDevice));
    base += rr.l.q_rows;
  }
}

bool same_bits(const DeviceTensor& a, const DeviceTensor& b) {
  auto x = download_f32(a), y = download_f32(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Flattens one rank's outputs into words (int32 indices / fp32 bits) for the all-gather, and back.
std::vector<uint32_t> pack(const Outputs& o, bool idx) {
  std::vector<uint32_t> w;
  auto put = [&](const auto& v) {
    const size_t at = w.size();
    w.resize(at + v.size());
    std::memcpy(w.data() + at, v.data(), v.size() * 4);
  };
  if (idx) { put(o.topk); put(o.scores); } else { put(o.o); put(o.lse); }
  return w;
}
void unpack(const uint32_t* w, Outputs& o, bool idx) {
  auto get = [&](auto& v) {
    std::memcpy(v.data(), w, v.size() * 4);
    w += v.size();
  };
  if (idx) { get(o.topk); get(o.scores); } else { get(o.o); get(o.lse); }
}

CpRunResult run_rank_process(const CpRunOptions& o, const CpWorld& world) {
  const Case c = parse_case(o.case_line);
  const bool idx = c.op == Op::Indexer;
  if (c.cp % world.size != 0)
    throw CaseError("cp", std::to_string(c.cp), fmt::format("cannot be folded over {} processes", world.size));
  const int per = c.cp / world.size;
  if (c.probe != Probe::None)  // each rank generates its chunks on its GPU; probe= inputs exist on the host only
    throw CaseError("probe", "edges", "cp-run generates inputs on the devices; probe= inputs are generated on the host only");
  if (c.values != Values::Normal)
    throw CaseError("values", to_string(c.values), "cp-run generates inputs on the devices; values= shapes are host-only");
  auto backend = make_backend(o.backend);
  auto* dev = dynamic_cast<DeviceRunnable*>(backend.get());
  if (!dev) throw BadInput("backend", o.backend, "cp-run needs a CUDA backend (cuda-indexer or cuda-sdpa)");
  const Layout lg = make_layout(c);
  for (const auto& d : lg.docs)
    if (d.kv_off != d.q_off || d.kv_len != d.q_len)
      throw CaseError("kv_offsets", "", "cp-run exchanges K/V by the Q chunks: K/V offsets and lengths must equal Q's");

  std::vector<RankRows> all;
  for (int r = 0; r < c.cp; ++r) all.push_back(rank_rows(c, r));
  const int64_t n_loc = all[0].l.q_rows;

  CpWorld w = world;
  w.timeout_s = o.timeout_s;
  CpComm comm(w);
  const Storage st = c.dtype == DType::BF16 ? Storage::BF16 : Storage::F32;
  const auto kv_tokens = kv_token_ids(lg);
  const int64_t kw = idx ? c.dim : int64_t(c.hkv) * c.dim, vw = int64_t(c.hkv) * c.dim_v;

  // 1. This process's ranks: local K (and V) rows, generated here only.
  DeviceTensor k_send, v_send, k_all, v_all;
  alloc_tensor(k_send, st, per * n_loc, kw);
  alloc_tensor(k_all, st, c.cp * n_loc, kw);
  if (!idx) {
    alloc_tensor(v_send, st, per * n_loc, vw);
    alloc_tensor(v_all, st, c.cp * n_loc, vw);
  }
  for (int i = 0; i < per; ++i) {
    const auto& rr = all[size_t(w.rank * per + i)];
    generate_local(k_send, i * n_loc, c, kTensorK, kv_tokens, rr.kv_row);
    if (!idx) generate_local(v_send, i * n_loc, c, kTensorV, kv_tokens, rr.kv_row);
  }
  // 2. All-gather, then global order; pad slots hold the case's poison (generated here).
  comm.all_gather(k_send.data(), raw(k_all), size_t(per * n_loc * kw) * elem_bytes(k_send));
  if (!idx) comm.all_gather(v_send.data(), raw(v_all), size_t(per * n_loc * vw) * elem_bytes(v_send));
  DeviceInputs gathered;
  generate_tensor(gathered.k, st, lg.kv_rows, kw, c, kTensorK, std::vector<int64_t>(size_t(lg.kv_rows), -1));
  scatter_global(gathered.k, k_all, all);
  if (!idx) {
    generate_tensor(gathered.v, st, lg.kv_rows, vw, c, kTensorV, std::vector<int64_t>(size_t(lg.kv_rows), -1));
    scatter_global(gathered.v, v_all, all);
  }
  // The exchange must reproduce the whole-buffer generation bit for bit.
  DeviceTensor k_whole, v_whole;
  generate_tensor(k_whole, st, lg.kv_rows, kw, c, kTensorK, kv_tokens);
  bool exchange_ok = same_bits(gathered.k, k_whole);
  if (!idx) {
    generate_tensor(v_whole, st, lg.kv_rows, vw, c, kTensorV, kv_tokens);
    exchange_ok = exchange_ok && same_bits(gathered.v, v_whole);
  }
  k_whole = {};
  v_whole = {};

  // 3. Each local rank runs the kernel on its own Q chunks against the gathered K/V.
  std::vector<uint32_t> send_words;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < per; ++i) {
    const auto& rr = all[size_t(w.rank * per + i)];
    DeviceInputs din;
    const auto qt = q_token_ids(rr.l);
    generate_tensor(din.q, st, rr.l.q_rows, idx ? int64_t(c.heads) * c.dim : int64_t(c.hq) * c.dim, c, kTensorQ, qt);
    if (idx) generate_tensor(din.w, Storage::F32, rr.l.q_rows, c.heads, c, kTensorW, qt);
    din.k = std::move(gathered.k);
    din.v = std::move(gathered.v);
    Outputs out = make_sentinel_outputs(rr.l);
    dev->run_on_device(rr.l, din, out);
    gathered.k = std::move(din.k);
    gathered.v = std::move(din.v);
    auto words = pack(out, idx);
    send_words.insert(send_words.end(), words.begin(), words.end());
  }
  const double kernel_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // 4. Outputs to process 0 (an all-gather: every process gets all; only 0 reports).
  DeviceBuffer<uint32_t> d_send, d_recv(send_words.size() * size_t(world.size));
  d_send.upload(send_words);
  comm.all_gather(d_send.get(), d_recv.get(), send_words.size() * 4);
  bool exchange_all = exchange_ok;
  {
    DeviceBuffer<uint32_t> flag_s, flag_r(size_t(world.size));
    flag_s.upload(std::vector<uint32_t>{exchange_ok ? 1u : 0u});
    comm.all_gather(flag_s.get(), flag_r.get(), 4);
    std::vector<uint32_t> flags;
    flag_r.download(flags);
    for (auto f : flags) exchange_all = exchange_all && f == 1;
  }
  CpRunResult res;
  if (w.rank != 0) {
    res.kind = CpRunResult::Worker;
    return res;
  }
  std::vector<uint32_t> words;
  d_recv.download(words);

  // 5. Process 0 checks every CP rank: one trial per rank (its layout, inputs generated whole on the
  // host), judged against cpu-ref, and the single-GPU simulation run on the same trial.
  res.kind = CpRunResult::Checked;
  res.case_line = print_case(c);
  res.backend = o.backend;
  res.nccl_version = CpComm::nccl_version();
  res.device = device_description();
  res.processes = world.size;
  res.ranks_per_process = per;
  res.exchange_bit_identical = exchange_all;
  res.kernel_seconds = kernel_s;
  auto ref = make_backend("cpu-ref");
  const size_t words_per_rank = send_words.size() / size_t(per);
  for (int r = 0; r < c.cp; ++r) {
    Trial trial(all[size_t(r)].l);
    TrialRun got;
    got.backend = o.backend + " (cp-run)";
    got.out = make_sentinel_outputs(trial.layout());
    unpack(words.data() + size_t(r) * words_per_rank, got.out, idx);
    auto sim = make_backend(o.backend);
    const TrialRun simo = trial.run(*sim);
    const bool bitwise = simo.ok() && (idx ? same_bits(got.out.topk, simo.out.topk) && same_bits(got.out.scores, simo.out.scores)
                                           : same_bits(got.out.o, simo.out.o) && same_bits(got.out.lse, simo.out.lse));
    const TrialRun refo = trial.run(*ref);
    CpRankResult rank;
    rank.rank = r;
    rank.bitwise_vs_single_gpu = bitwise;
    CaseResult& cr = rank.result;
    cr.case_line = print_case(trial.layout().c);
    cr.backend = got.backend;
    cr.backend_version = backend->version() + ", " + CpComm::nccl_version();
    cr.vs = refo.backend;
    cr.ref_seconds = refo.status.seconds;
    cr.verdict = trial.judge(got, refo);
    if (!bitwise) {
      cr.verdict.metrics.push_back(gated_metric("bitwise_vs_single_gpu", 0, "== 1", true));
      cr.verdict.reason += (cr.verdict.reason.empty() ? "" : ", ") + std::string("bitwise_vs_single_gpu");
      cr.verdict.kind = Verdict::Fail;
    }
    res.ranks.push_back(std::move(rank));
  }
  return res;
}

// --gpus N without a launcher: re-executes this command once per rank with RANK/WORLD_SIZE/LOCAL_RANK
// set, all under the subprocess supervisor: a rank that fails or outlives the timeout fails the run
// (naming it) and the others are stopped with their process groups. The ranks print to this
// process's stdout/stderr (process 0 reports).
CpRunResult spawn_ranks(const CpRunOptions& o) {
  const std::string rdv = o.rendezvous.empty()
                              ? (std::filesystem::temp_directory_path() / fmt::format("attn-oracle-cp-{}.id", getpid())).string()
                              : o.rendezvous;
  std::filesystem::remove(rdv);
  std::vector<std::string> argv = o.argv;
  argv.at(0) = std::filesystem::read_symlink("/proc/self/exe").string();  // this very binary
  std::vector<CommandLine> ranks;
  for (int r = 0; r < o.gpus; ++r)
    ranks.push_back({argv,
                     {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(o.gpus),
                      "LOCAL_RANK=" + std::to_string(r), "AO_CP_RENDEZVOUS=" + rdv, "NCCL_NVLS_ENABLE=0"}});
  SubprocessOptions so;
  so.timeout_s = o.timeout_s + 60;
  so.capture_stderr = false;
  const auto outs = run_commands_together(ranks, so);
  std::filesystem::remove(rdv);
  CpRunResult res;
  res.kind = CpRunResult::Spawned;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& x = outs[i];
    if (x.kind == SubprocessOutcome::Exited && x.code == 0) continue;
    if (x.kind == SubprocessOutcome::Interrupted && x.code == 0) continue;  // stopped because another failed
    res.kind = CpRunResult::Failed;
    res.reason = fmt::format("rank {} {}", i, x.describe(so.timeout_s));
    res.exit_code = x.kind == SubprocessOutcome::Exited && x.code == 2 ? 2 : 1;
    break;
  }
  return res;
}

}  // namespace

CpRunResult cp_run(const CpRunOptions& o) {
  {  // bad input is exit 2 even where no GPU could run it
    const Layout l = make_layout(parse_case(o.case_line));
    auto b = make_backend(o.backend);
    if (!dynamic_cast<DeviceRunnable*>(b.get()))
      throw BadInput("backend", o.backend, "cp-run needs a CUDA backend (cuda-indexer or cuda-sdpa)");
  }
  CpRunResult res;
  if (auto why = unavailable_reason(); !why.empty()) {
    res.kind = CpRunResult::Skipped;
    res.reason = why;
    return res;
  }
  CpWorld w;
  const bool launched = world_from_environment(w);
  if (!launched && o.gpus > 1) return spawn_ranks(o);
  if (const char* r = std::getenv("AO_CP_RENDEZVOUS")) w.rendezvous = r;
  if (!o.rendezvous.empty()) w.rendezvous = o.rendezvous;
  if (w.rendezvous.empty())
    w.rendezvous = (std::filesystem::temp_directory_path() /
                    fmt::format("attn-oracle-cp-{}.id", std::getenv("SLURM_JOB_ID") ? std::getenv("SLURM_JOB_ID")
                                                         : std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT")
                                                                                      : "local"))
                       .string();
  try {
    return run_rank_process(o, w);
  } catch (const BadInput&) {
    throw;
  } catch (const std::exception& e) {
    res.kind = CpRunResult::Failed;
    res.reason = fmt::format("rank {} of {} failed: {}", w.rank, w.size, e.what());
    res.exit_code = 1;
    return res;
  }
}

}  // namespace ao::gpu
