// Inputs are const to a backend, but foreign code can cast that away. A backend (or reference) that
// writes its inputs would hand the reference and the comparator its own numbers, so the harness
// fingerprints the inputs once and checks them after every run: a cheap 64-bit hash per tensor, keyed by
// a key drawn once per process (a rewrite cannot be made to keep it from the code alone), and only on a
// mismatch a fresh make_inputs() to name the first changed element. Where a copy is at hand (the Python
// face hands a kernel its own copy), input_difference compares every bit instead.
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

// Empty while `in` equals `pristine` bit for bit; otherwise the first changed tensor and element, as above.
std::string input_difference(const Inputs& in, const Inputs& pristine);

}  // namespace ao
