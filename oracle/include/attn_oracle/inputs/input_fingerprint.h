// Inputs are const to a backend, but foreign code can cast that away. A backend (or reference) that
// writes its inputs would hand the reference and the comparator its own numbers, so the harness
// fingerprints the inputs once and checks them after every run: a cheap 64-bit hash per tensor, and
// only on a mismatch a fresh make_inputs() to name the first changed element.
#pragma once
#include <cstdint>
#include <string>
#include "attn_oracle/inputs/tensors.h"

namespace ao {

struct InputFingerprint {
  uint64_t q = 0, k = 0, v = 0, w = 0;
};

InputFingerprint fingerprint(const Inputs& in);

// Empty while `in` matches `before`; otherwise the first changed tensor and element, e.g.
// "q (first changed element 17 of 4096: 0.5 -> 0)". `l` must be the layout `in` was made from.
std::string changed_input(const Layout& l, const Inputs& in, const InputFingerprint& before);

}  // namespace ao
