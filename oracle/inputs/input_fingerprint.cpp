#include "attn_oracle/inputs/input_fingerprint.h"
#include "attn_oracle/internal/omp_threads.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace ao {

namespace {

uint64_t mix(uint64_t h) {  // splitmix64 finaliser
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// Blocks hashed in parallel and combined in order, so the value does not depend on the thread count;
// within a block four independent lanes of 64-bit words (two floats each) keep the multiplier busy.
uint64_t hash_block(const float* p, size_t n, uint64_t seed) {
  constexpr uint64_t kMul = 0x9fb21c651e98df25ull;
  uint64_t h[4] = {seed, seed ^ 0x6a09e667f3bcc909ull, seed ^ 0xbb67ae8584caa73bull, seed ^ 0x3c6ef372fe94f82bull};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 2 * j, sizeof w);
      h[j] = (h[j] ^ w) * kMul;
      h[j] ^= h[j] >> 32;
    }
  for (; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, p + i, sizeof b);
    h[0] = (h[0] ^ b) * kMul;
  }
  return mix(mix(mix(mix(h[0]) ^ h[1]) ^ h[2]) ^ h[3]);
}

uint64_t hash_tensor(const std::vector<float>& t) {
  constexpr size_t kBlock = size_t(1) << 18;
  const size_t n = t.size(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<uint64_t> part(blocks);
#pragma omp parallel for schedule(static) num_threads(omp_team_size())
  for (size_t b = 0; b < blocks; ++b)
    part[b] = hash_block(t.data() + b * kBlock, std::min(n, (b + 1) * kBlock) - b * kBlock, 0x9e3779b97f4a7c15ull * (b + 1));
  uint64_t h = mix(n);
  for (uint64_t p : part) h = mix(h ^ p);
  return h;
}

}  // namespace

InputFingerprint fingerprint(const Inputs& in) {
  return {hash_tensor(in.q), hash_tensor(in.k), hash_tensor(in.v), hash_tensor(in.w)};
}

std::string changed_input(const Layout& l, const Inputs& in, const InputFingerprint& before) {
  const InputFingerprint now = fingerprint(in);
  if (now.q == before.q && now.k == before.k && now.v == before.v && now.w == before.w) return {};
  const Inputs pristine = make_inputs(l);  // deterministic: the same numbers the backend was given
  const struct {
    const char* name;
    const std::vector<float>& got;
    const std::vector<float>& was;
  } tensors[] = {{"q", in.q, pristine.q}, {"k", in.k, pristine.k}, {"v", in.v, pristine.v}, {"w", in.w, pristine.w}};
  for (const auto& t : tensors) {
    if (t.got.size() != t.was.size())
      return fmt::format("{} (resized from {} to {} elements)", t.name, t.was.size(), t.got.size());
    for (size_t i = 0; i < t.got.size(); ++i)
      if (std::memcmp(&t.got[i], &t.was[i], sizeof(float)) != 0)
        return fmt::format("{} (first changed element {} of {}: {} -> {})", t.name, i, t.got.size(), t.was[i],
                           t.got[i]);
  }
  return "an input tensor (its fingerprint changed)";  // unreachable unless make_inputs is not deterministic
}

}  // namespace ao
