// `cuda-indexer[:bug=none|topleft-cp|sentinel-lanes|masked-key-fill,mask=offsets|bottomright,inputs=device|host,
// scratch_gib=N]`: the project's own DSA indexer kernel (indexer_kernel.h) as a backend. The default is
// correct; bug=topleft-cp re-creates the seed PR's chunk-local causal mask (cpu-bug:topleft-cp; old spelling
// mask=topleft); the other bug ids re-create catalog defects [3] and [4] in the top-k's fill of short
// rows (IdxBug in indexer_kernel.h; the cpu-bug models of the same ids); mask=bottomright aligns each
// query segment to the bottom right of its key extent (correct when keys are cropped to the chunk end,
// crop=1; wrong without). Inputs are generated on the
// device from the case seed (inputs=device) or uploaded from the harness (inputs=host). Every row of
// the layout is computed.
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "device_inputs.h"
#include "device_run.h"
#include "gpu_backend.h"
#include "indexer_kernel.h"

namespace ao::gpu {

namespace {

class CudaIndexer : public DeviceKernelBackend {
 public:
  explicit CudaIndexer(const Knobs& k) {
    if (k.get("bug") == "topleft-cp" && k.get("mask") == "bottomright")
      throw BadInput("backend", "cuda-indexer:" + k.text(), "knob bug=topleft-cp excludes mask=bottomright");
    if (k.get("bug") == "topleft-cp") mask_ = IdxMask::TopLeft;
    if (k.get("mask") == "bottomright") mask_ = IdxMask::BottomRight;
    if (k.get("bug") == "sentinel-lanes") bug_ = IdxBug::SentinelLanes;
    if (k.get("bug") == "masked-key-fill") bug_ = IdxBug::MaskedKeyFill;
    from_host_ = k.get("inputs") == "host";
    scratch_gib_ = k.number("scratch_gib");
    name_ = k.text().empty() ? "cuda-indexer" : "cuda-indexer:" + k.text();
  }

  std::string name() const override { return name_; }

  std::string declines(const Layout& l) const override {
    const Case& c = l.c;
    if (c.op != Op::Indexer) return "cuda-indexer serves op=indexer only";
    if (c.pass == Pass::Bwd) return "cuda-indexer is a forward kernel (pass=bwd is not implemented)";
    if (c.topk > kIdxMaxTopk) return fmt::format("topk={} is over the kernel's limit of {}", c.topk, kIdxMaxTopk);
    if (c.dim > kIdxMaxDim || c.dim % 4 != 0)
      return fmt::format("dim={} unsupported (a multiple of 4, at most {})", c.dim, kIdxMaxDim);
    if (c.heads > kIdxMaxHeads) return fmt::format("heads={} is over the kernel's limit of {}", c.heads, kIdxMaxHeads);
    return {};
  }

  // The kernel on inputs already on the device (cp-run hands in all-gathered K/V).
  void run_on_device(const Layout& l, const DeviceInputs& din, Outputs& out) override {
    const Case& c = l.c;
    const Storage st = din.q.st;

    std::vector<IdxSeg> segs;
    std::vector<IdxTile> tiles;
    for (const auto& s : l.segments) {
      IdxSeg g;
      g.row0 = s.row0;
      g.rows = s.rows;
      g.valid = s.valid;
      g.pos0 = s.pos0;
      g.key_len = s.key_len;
      g.kv_off = l.docs[size_t(s.doc)].kv_off;
      add_indexer_segment(g, segs, tiles);
    }
    const int64_t ld = indexer_scores_ld(segs);
    const size_t K = size_t(c.topk);
    const size_t nout = size_t(l.q_rows) * K;
    if (out.topk.size() != nout) out.topk.assign(nout, kSentinelIndex);
    if (out.scores.size() != nout) out.scores.assign(nout, sentinel_float());

    auto t0 = std::chrono::steady_clock::now();
    DeviceBuffer<IdxSeg> d_segs;
    DeviceBuffer<IdxTile> d_tiles;
    d_segs.upload(segs);
    d_tiles.upload(tiles);
    DeviceBuffer<int32_t> d_idx;
    DeviceBuffer<float> d_sc;
    d_idx.upload(out.topk);  // sentinels: rows the kernel must not touch keep them
    d_sc.upload(out.scores);
    times_.transfer_ms += ms_since(t0);

    const int64_t tile_bytes = int64_t(kIdxTileRows) * ld * int64_t(sizeof(float));
    const int64_t per_batch =
        std::clamp<int64_t>(int64_t(scratch_gib_ * double(int64_t(1) << 30)) / tile_bytes, 1, 65535);
    DeviceBuffer<float> scratch(size_t(std::min<int64_t>(per_batch, int64_t(tiles.size())) * tile_bytes / 4));

    IdxProblem p;
    p.segs = d_segs.get();
    p.tiles = d_tiles.get();
    p.q = din.q.data();
    p.w = reinterpret_cast<const float*>(din.w.f32.get());
    p.k = din.k.data();
    p.st = st;
    p.heads = c.heads;
    p.dim = c.dim;
    p.topk = c.topk;
    p.ratio = c.ratio;
    p.scale = float(l.scale);
    p.mask = mask_;
    p.causal = c.mask != MaskKind::None;
    p.bug = bug_;
    p.scores = scratch.get();
    p.ld = ld;
    p.out_idx = d_idx.get();
    p.out_score = d_sc.get();
    EventTimer bt(3);
    for (int64_t t = 0; t < int64_t(tiles.size()); t += per_batch) {
      p.tile0 = t;
      p.ntiles = std::min<int64_t>(per_batch, int64_t(tiles.size()) - t);
      bt.mark(0);
      launch_indexer_scores(p, nullptr);
      bt.mark(1);
      launch_indexer_topk(p, nullptr);
      bt.mark(2);
      times_.compute_ms += bt.ms(0, 1);
      times_.select_ms += bt.ms(1, 2);
    }
    AO_CUDA(cudaDeviceSynchronize());
    t0 = std::chrono::steady_clock::now();
    d_idx.download(out.topk);
    d_sc.download(out.scores);
    times_.transfer_ms += ms_since(t0);
  }

 private:
  std::string name_;
  IdxMask mask_ = IdxMask::Offsets;
  IdxBug bug_ = IdxBug::None;
  double scratch_gib_ = 4;
};

}  // namespace

BackendInfo cuda_indexer_backend() {
  BackendInfo b;
  b.name = "cuda-indexer";
  b.description = "own CUDA DSA indexer + radix top-k";
  b.knobs = {bug_knob({"topleft-cp", "sentinel-lanes", "masked-key-fill"},
                     "topleft-cp: chunk-local top-left causal mask (the seed PR's); sentinel-lanes: a row with "
                     "n < k keys gets the lane past the row at slot n, later slots unwritten ([3]); "
                     "masked-key-fill: scores < -65504 and the lanes past the row share the -inf bin, masked "
                     "lanes fill the slots ([4])"),
             knob_choice("mask", {"offsets", "bottomright"},
                         "query alignment: the segments' causal offsets, or bottom right of the key extent "
                         "(right with crop=1 only)"),
             knob_choice("inputs", {"device", "host"}, "generate inputs on the device, or upload the harness's"),
             knob_number("scratch_gib", {0, 64, true, false}, "4", "GiB of score scratch per launch batch")};
  b.aliases = {{"mask=topleft", "bug=topleft-cp"}};
  b.unavailable = [] { return gpu::unavailable_reason(); };
  b.make = [](const Knobs& k) { return std::make_unique<CudaIndexer>(k); };
  return b;
}

}  // namespace ao::gpu
