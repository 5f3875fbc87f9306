#include "attn_oracle/inputs/input_fingerprint.h"
#include "attn_oracle/internal/omp_threads.h"

#include <algorithm>
#include <cstring>
#include <random>
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

// A key drawn once per process: a backend cannot compute the fingerprint its rewritten inputs would need
// from the code alone (in process it could still read the key: docs/threat-model.md).
uint64_t process_key() {
  static const uint64_t key = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ uint64_t(rd());
  }();
  return key;
}

template <class T>
uint64_t hash_tensor(const std::vector<T>& t) {
  static_assert(sizeof(T) == sizeof(float));
  const float* data = reinterpret_cast<const float*>(t.data());  // hashed as 32-bit words
  constexpr size_t kBlock = size_t(1) << 18;
  const size_t n = t.size(), blocks = (n + kBlock - 1) / kBlock;
  const uint64_t key = process_key();
  std::vector<uint64_t> part(blocks);
#pragma omp parallel for schedule(static) num_threads(omp_team_size())
  for (size_t b = 0; b < blocks; ++b)
    part[b] = hash_block(data + b * kBlock, std::min(n, (b + 1) * kBlock) - b * kBlock, (0x9e3779b97f4a7c15ull * (b + 1)) ^ key);
  uint64_t h = mix(n ^ key);
  for (uint64_t p : part) h = mix(h ^ p);
  return h;
}

// Every input tensor, named as messages name it; a new field of Inputs is one more entry here.
struct NamedInput {
  const char* name;
  const std::vector<float>* floats;
  const std::vector<int32_t>* indices;
};
std::vector<NamedInput> named_inputs(const Inputs& in) {
  return {{"q", &in.q, nullptr},          {"k", &in.k, nullptr},           {"v", &in.v, nullptr},
          {"w", &in.w, nullptr},          {"dout", &in.dout, nullptr},     {"o", &in.o, nullptr},
          {"lse", &in.lse, nullptr},      {"topk", nullptr, &in.topk},     {"target", &in.target, nullptr},
          {"predict", &in.predict, nullptr}, {"grad_loss", &in.grad_loss, nullptr}};
}

template <class T>
std::string first_change(const char* name, const std::vector<T>& got, const std::vector<T>& was) {
  if (got.size() != was.size())
    return fmt::format("{} (resized from {} to {} elements)", name, was.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &was[i], sizeof(T)) != 0)
      return fmt::format("{} (first changed element {} of {}: {} -> {})", name, i, got.size(), was[i], got[i]);
  return {};
}

}  // namespace

InputFingerprint fingerprint(const Inputs& in) {
  InputFingerprint f;
  for (const auto& t : named_inputs(in)) f.tensors.push_back(t.floats ? hash_tensor(*t.floats) : hash_tensor(*t.indices));
  return f;
}

std::string changed_input(const Layout& l, const Inputs& in, const InputFingerprint& before,
                          Inputs (*pristine)(const Layout&)) {
  if (fingerprint(in) == before) return {};
  const Inputs made = pristine(l);  // deterministic: the same numbers the backend was given
  const std::string s = input_difference(in, made);
  return s.empty() ? "an input tensor (its fingerprint changed)" : s;  // empty only if make_inputs is not deterministic
}

std::string input_difference(const Inputs& in, const Inputs& pristine) {
  const auto got = named_inputs(in), was = named_inputs(pristine);
  for (size_t t = 0; t < got.size(); ++t) {
    const std::string s = got[t].floats ? first_change(got[t].name, *got[t].floats, *was[t].floats)
                                        : first_change(got[t].name, *got[t].indices, *was[t].indices);
    if (!s.empty()) return s;
  }
  return {};
}

}  // namespace ao
