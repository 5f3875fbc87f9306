#include "attn_oracle/input_fingerprint.h"

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

// Blocks hashed in parallel and combined in order, so the value does not depend on the thread count.
uint64_t hash_tensor(const std::vector<float>& t) {
  constexpr size_t kBlock = size_t(1) << 18;
  const size_t n = t.size(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<uint64_t> part(blocks);
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b) {
    uint64_t h = 0x9e3779b97f4a7c15ull * (b + 1);
    const size_t end = std::min(n, (b + 1) * kBlock);
    for (size_t i = b * kBlock; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &t[i], sizeof bits);
      h = (h ^ bits) * 0x100000001b3ull + (h >> 29);
    }
    part[b] = mix(h);
  }
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
