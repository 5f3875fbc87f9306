// `cuda-sdpa[:bug=none|derived-offsets|tail-read|decode-tile-unmasked|split-max-seqlen|split-combine-stride0,
// inputs=device|host]`: the project's own SDPA forward kernel (sdpa_kernel.h) as a backend: the fast reference for long padded-THD cases and,
// with a bug knob on, the known-bad kernel the GPU gate must catch (the ids of the cpu-bug models of the
// same names; old spellings derived-offsets=1, tail-read=1).
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "device_inputs.h"
#include "device_run.h"
#include "gpu_backend.h"
#include "sdpa_kernel.h"

namespace ao::gpu {

namespace {

class CudaSdpa : public DeviceKernelBackend {
 public:
  explicit CudaSdpa(const Knobs& k) {
    derived_ = k.get("bug") == "derived-offsets";
    tail_ = k.get("bug") == "tail-read";
    decode_tile_ = k.get("bug") == "decode-tile-unmasked";
    split_max_seqlen_ = k.get("bug") == "split-max-seqlen";
    split_stride0_ = k.get("bug") == "split-combine-stride0";
    from_host_ = k.get("inputs") == "host";
    name_ = k.text().empty() ? "cuda-sdpa" : "cuda-sdpa:" + k.text();
  }

  std::string name() const override { return name_; }

  std::string declines(const Layout& l) const override {
    const Case& c = l.c;
    if (c.op != Op::Sdpa) return "cuda-sdpa serves op=sdpa only";
    if (c.pass == Pass::Bwd) return "cuda-sdpa is a forward kernel (pass=bwd is not implemented)";
    if (c.dim > kSdpaMaxDim || c.dim_v > kSdpaMaxDim)
      return fmt::format("dim={} dim_v={} unsupported (at most {})", c.dim, c.dim_v, kSdpaMaxDim);
    if (c.window_right != 0 || c.window_convention != WindowConvention::Cudnn)
      return "two-sided windows (window_right) and window_convention=fa are not implemented";
    if (c.empty_rows != EmptyRows::NegInf) return "empty_rows=posinf is not implemented (LSE -inf for empty rows)";
    if (c.num_splits > kSdpaMaxSplits)
      return fmt::format("num_splits={} is over the kernel's limit of {}", c.num_splits, kSdpaMaxSplits);
    return {};
  }

  // The kernel on inputs already on the device (cp-run hands in all-gathered K/V).
  void run_on_device(const Layout& l, const DeviceInputs& din, Outputs& out) override {
    const Case& c = l.c;
    const Storage st = din.q.st;

    std::vector<SdpaDoc> docs;
    for (const auto& d : l.docs) docs.push_back({d.q_off, d.kv_off, d.o_off, d.stats_off, d.q_len, d.kv_len});
    std::vector<SdpaSeg> segs;
    std::vector<SdpaTile> tiles;
    for (const auto& s : l.segments) {
      SdpaSeg g;
      g.doc = s.doc;
      g.row0 = s.row0;
      g.o_row0 = s.o_row0;
      g.stats_row0 = s.stats_row0;
      g.pos0 = s.pos0;
      g.rows = s.rows;
      g.valid = s.valid;
      for (int64_t i0 = 0; i0 < s.valid; i0 += kSdpaTileRows) {  // pad rows get no tile: never written
        SdpaTile t;
        t.seg = int32_t(segs.size());
        t.i0 = i0;
        tiles.push_back(t);
      }
      segs.push_back(g);
    }
    const size_t no = size_t(l.o_rows) * c.hq * c.dim_v, ns = size_t(l.stats_rows) * c.hq;
    if (out.o.size() != no) out.o.assign(no, sentinel_float());
    if (out.lse.size() != ns) out.lse.assign(ns, sentinel_float());

    auto t0 = std::chrono::steady_clock::now();
    DeviceBuffer<SdpaDoc> d_docs;
    DeviceBuffer<SdpaSeg> d_segs;
    DeviceBuffer<SdpaTile> d_tiles;
    d_docs.upload(docs);
    d_segs.upload(segs);
    d_tiles.upload(tiles);
    DeviceBuffer<float> d_o, d_lse;
    d_o.upload(out.o);  // sentinels: pad slots must keep them
    d_lse.upload(out.lse);
    times_.transfer_ms += ms_since(t0);

    SdpaProblem p;
    p.docs = d_docs.get();
    p.segs = d_segs.get();
    p.tiles = d_tiles.get();
    p.ntiles = int64_t(tiles.size());
    p.q = din.q.data();
    p.k = din.k.data();
    p.v = din.v.data();
    p.st = st;
    p.hq = c.hq;
    p.hkv = c.hkv;
    p.dim = c.dim;
    p.dim_v = c.dim_v;
    p.scale = float(l.scale);
    p.mask = c.mask == MaskKind::None ? 0 : c.mask == MaskKind::TopLeft ? 1 : 2;
    p.window = c.window;
    p.cp = l.is_cp();
    p.derived_offsets = derived_;
    p.tail_read = tail_;
    p.decode_tile_unmasked = decode_tile_;
    // split-KV: S = ceil(max_seqlen_kv / num_splits) keys per split (layout.h); partial states per
    // (split, tile row)
    p.num_splits = std::max(c.num_splits, 1);
    p.max_seqlen_kv = l.max_seqlen_kv;
    p.split_keys = l.split_len;
    p.split_max_seqlen = split_max_seqlen_;
    p.split_combine_stride0 = split_stride0_;
    DeviceBuffer<float> d_part_o, d_part_lse;
    if (p.num_splits > 1) {
      const size_t part_rows = size_t(p.num_splits) * tiles.size() * kSdpaTileRows * size_t(c.hq);
      d_part_o.resize(part_rows * size_t(c.dim_v));
      d_part_lse.resize(part_rows);
      p.part_o = d_part_o.get();
      p.part_lse = d_part_lse.get();
    }
    p.kv_rows = l.kv_rows;
    p.o = d_o.get();
    p.lse = d_lse.get();
    EventTimer kt(2);
    kt.mark(0);
    launch_sdpa(p, nullptr);  // grid.x = tiles (limit 2^31 - 1), grid.y = query heads
    kt.mark(1);
    times_.compute_ms = kt.ms(0, 1);
    AO_CUDA(cudaDeviceSynchronize());
    t0 = std::chrono::steady_clock::now();
    d_o.download(out.o);
    d_lse.download(out.lse);
    times_.transfer_ms += ms_since(t0);
  }

 private:
  std::string name_;
  bool derived_ = false, tail_ = false, decode_tile_ = false, split_max_seqlen_ = false, split_stride0_ = false;
};

}  // namespace

BackendInfo cuda_sdpa_backend() {
  BackendInfo b;
  b.name = "cuda-sdpa";
  b.description = "own CUDA SDPA forward over padded THD";
  b.knobs = {bug_knob({"derived-offsets", "tail-read", "decode-tile-unmasked", "split-max-seqlen",
                       "split-combine-stride0"},
                      "derived-offsets: bases from prefix(lens), bound offsets ignored; tail-read: whole key "
                      "tiles loaded past a sequence's end, V unmasked; decode-tile-unmasked: mask=none, "
                      "q_len = 1: keys past kv_len to the end of the 256-wide key tile enter the softmax ([22]); "
                      "split-max-seqlen: num_splits > 1: the key end and the bottom-right shift use "
                      "max_seqlen_kv ([29]); split-combine-stride0: num_splits > 1: the combine writes every "
                      "document's O on document 0's rows ([30])"),
             knob_choice("inputs", {"device", "host"}, "generate inputs on the device, or upload the harness's")};
  b.aliases = {{"derived-offsets=1", "bug=derived-offsets"}, {"tail-read=1", "bug=tail-read"},
               {"derived-offsets=0", "bug=none"}, {"tail-read=0", "bug=none"}};
  b.unavailable = [] { return gpu::unavailable_reason(); };
  b.make = [](const Knobs& k) { return std::make_unique<CudaSdpa>(k); };
  return b;
}

}  // namespace ao::gpu
