// Inputs are const to a backend, but foreign code can cast that away. A backend (or reference) that
// writes its inputs would hand the reference and the comparator its own numbers, so the harness
// fingerprints the inputs once and checks them after every run: a cheap 64-bit hash per tensor, and
// only on a mismatch a fresh make_inputs() to name the first changed element.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "attn_oracle/inputs/tensors.h"

namespace ao {

// One hash per input tensor, in the order of Inputs' fields (every one, the backward's included; an
// empty tensor hashes too, so a backend that fills one is caught).
struct InputFingerprint {
  std::vector<uint64_t> tensors;
  bool operator==(const InputFingerprint&) const = default;
};

InputFingerprint fingerprint(const Inputs& in);

// Empty while `in` matches `before`; otherwise the first changed tensor and element, e.g.
// "q (first changed element 17 of 4096: 0.5 -> 0)". `l` must be the layout `in` was made from, and
// `pristine` the function that made it (make_case_inputs under pass=bwd: the forward's saved results).
std::string changed_input(const Layout& l, const Inputs& in, const InputFingerprint& before,
                          Inputs (*pristine)(const Layout&) = make_inputs);

}  // namespace ao
