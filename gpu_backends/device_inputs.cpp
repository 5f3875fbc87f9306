// Host side of device_inputs.h: token maps from the Layout, allocation, upload for inputs=host.
#include "device_inputs.h"

#include "attn_oracle/case/dtype.h"
#include "attn_oracle/internal/rng.h"

namespace ao::gpu {

std::vector<int64_t> q_token_ids(const Layout& l) {
  std::vector<int64_t> t(size_t(l.q_rows), -1);
  for (int64_t r = 0; r < l.q_rows; ++r) t[size_t(r)] = q_token_id(l, r);
  return t;
}

std::vector<int64_t> kv_token_ids(const Layout& l) {
  std::vector<int64_t> t(size_t(l.kv_rows), -1);
  for (const auto& d : l.docs)
    for (int64_t s = 0; s < d.kv_len; ++s) t[size_t(d.kv_off + s)] = d.packed_kv_off + s;
  return t;
}

namespace {

void alloc(DeviceTensor& t, Storage st, int64_t rows, int64_t width) {
  t.st = st;
  t.rows = rows;
  t.width = width;
  if (st == Storage::F32)
    t.f32.resize(size_t(rows * width));
  else
    t.bf16.resize(size_t(rows * width));
}

void fill_generated(DeviceTensor& t, const Case& c, uint32_t tensor, const DeviceBuffer<int64_t>& tokens) {
  GenSpec g;
  g.rows = t.rows;
  g.width = t.width;
  g.token = tokens.get();
  g.tensor = tensor;
  g.seed = c.seed;
  g.levels = c.levels;
  g.dtype = int(c.dtype);
  g.poison_bits = f32_bits(poison_value(c.poison, c.dtype));
  g.poison_generated = c.poison == Poison::None;
  launch_generate(g, t.st, t.st == Storage::F32 ? static_cast<void*>(t.f32.get()) : t.bf16.get());
}

void fill_uploaded(DeviceTensor& t, const std::vector<float>& h) {
  if (t.st == Storage::F32) {
    std::vector<uint32_t> bits(h.size());
    for (size_t i = 0; i < h.size(); ++i) bits[i] = f32_bits(h[i]);
    t.f32.upload(bits);
  } else {
    std::vector<uint16_t> bits(h.size());
    for (size_t i = 0; i < h.size(); ++i) bits[i] = f32_to_bf16_bits(h[i]);
    t.bf16.upload(bits);
  }
}

}  // namespace

void alloc_tensor(DeviceTensor& t, Storage st, int64_t rows, int64_t width) { alloc(t, st, rows, width); }

void generate_tensor(DeviceTensor& t, Storage st, int64_t rows, int64_t width, const Case& c, uint32_t tensor,
                     const std::vector<int64_t>& tokens) {
  alloc(t, st, rows, width);
  DeviceBuffer<int64_t> d_tokens;
  d_tokens.upload(tokens);
  fill_generated(t, c, tensor, d_tokens);
  AO_CUDA(cudaDeviceSynchronize());  // d_tokens is freed on return
}

DeviceInputs make_device_inputs(const Layout& l, Storage st, bool from_host, const Inputs* host) {
  const Case& c = l.c;
  DeviceInputs d;
  const bool idx = c.op == Op::Indexer;
  alloc(d.q, st, l.q_rows, idx ? int64_t(c.heads) * c.dim : int64_t(c.hq) * c.dim);
  alloc(d.k, st, l.kv_rows, idx ? int64_t(c.dim) : int64_t(c.hkv) * c.dim);
  if (idx)
    alloc(d.w, Storage::F32, l.q_rows, c.heads);
  else
    alloc(d.v, st, l.kv_rows, int64_t(c.hkv) * c.dim_v);
  if (from_host) {
    fill_uploaded(d.q, host->q);
    fill_uploaded(d.k, host->k);
    if (idx) fill_uploaded(d.w, host->w); else fill_uploaded(d.v, host->v);
    return d;
  }
  DeviceBuffer<int64_t> qt, kt;
  qt.upload(q_token_ids(l));
  kt.upload(kv_token_ids(l));
  fill_generated(d.q, c, kTensorQ, qt);
  fill_generated(d.k, c, kTensorK, kt);
  if (idx) fill_generated(d.w, c, kTensorW, qt); else fill_generated(d.v, c, kTensorV, kt);
  AO_CUDA(cudaDeviceSynchronize());  // the token maps are freed on return
  return d;
}

std::vector<float> download_f32(const DeviceTensor& t) {
  std::vector<float> out;
  if (t.st == Storage::F32) {
    std::vector<uint32_t> bits;
    t.f32.download(bits);
    out.resize(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = f32_from_bits(bits[i]);
  } else {
    std::vector<uint16_t> bits;
    t.bf16.download(bits);
    out.resize(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_bits_to_f32(bits[i]);
  }
  return out;
}

}  // namespace ao::gpu
