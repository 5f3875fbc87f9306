// Inputs generated on the device with the oracle's counter-based RNG (rng.h, dtype.h), keyed by the
// same canonical token ids as ao::make_inputs, with the same poison in pad slots: bit-identical to the
// host inputs (ao_gpu_tests proves it on the device), so a 131k case moves no input tensor over PCIe.
// Q/K/V are stored as fp32 or as bf16 bits (the kernels' input dtype); W is always fp32.
// The kernel launchers are in device_inputs.cu; the token maps come from the Layout (host side).
#pragma once
#include <cstdint>
#include <vector>

#include "attn_oracle/inputs/tensors.h"
#include "device_buffer.h"

namespace ao::gpu {

enum class Storage { F32, BF16 };

// How the kernels load one element of a stored tensor (bf16 held as raw bits).
struct DeviceTensor {
  DeviceBuffer<uint32_t> f32;  // Storage::F32 (float bits)
  DeviceBuffer<uint16_t> bf16; // Storage::BF16
  Storage st = Storage::F32;
  int64_t rows = 0, width = 0;
  const void* data() const { return st == Storage::F32 ? static_cast<const void*>(f32.get()) : bf16.get(); }
};

struct DeviceInputs {
  DeviceTensor q, k, v, w;
};

// Per buffer row: canonical token id, or -1 for a pad slot (exactly what make_inputs keys on).
std::vector<int64_t> q_token_ids(const Layout& l);
std::vector<int64_t> kv_token_ids(const Layout& l);

// Generates every input tensor of the case on the device (from_host = false), or uploads `host`
// (from_host = true: the knob inputs=host, for inputs that did not come from the generator).
DeviceInputs make_device_inputs(const Layout& l, Storage st, bool from_host, const Inputs* host);

// One tensor of `rows` x `width` generated on the device from per-row canonical token ids (-1: pad
// slot, filled with the case's poison): the building block of make_device_inputs and of cp-run.
void alloc_tensor(DeviceTensor& t, Storage st, int64_t rows, int64_t width);
void generate_tensor(DeviceTensor& t, Storage st, int64_t rows, int64_t width, const Case& c, uint32_t tensor,
                     const std::vector<int64_t>& tokens);

// Copies a device tensor back as fp32 values (bf16 widened exactly): used by the bit-identity tests.
std::vector<float> download_f32(const DeviceTensor& t);

// The generator kernel (device_inputs.cu): dst[r * width + e] for r < rows.
struct GenSpec {
  int64_t rows = 0, width = 0;
  const int64_t* token = nullptr;  // device array [rows]
  uint32_t tensor = 0;
  uint64_t seed = 0;
  uint32_t levels = 0;
  int dtype = 0;                   // ao::DType as int
  uint32_t poison_bits = 0;
  bool poison_generated = false;   // poison=none: pad slots hold generated finite data
};
void launch_generate(const GenSpec& g, Storage st, void* dst);

}  // namespace ao::gpu
