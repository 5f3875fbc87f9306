// Layout generator: case number `index` of campaign `seed` is a pure function of (seed, index,
// options), so a campaign can be split into shards and any case re-created from its number.
// Cases are biased to the edges kernels break on (see generator.cpp for the families) and every
// generated case is valid (make_layout accepts it); an invalid one is a generator bug.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "attn_oracle/case/case.h"

namespace ao {

enum class DimsProfile { Small, Glm };

struct GenOptions {
  DimsProfile dims = DimsProfile::Small;  // small: CPU-fast; glm: 32 indexer heads x 128, topk 2048
  std::optional<Op> op;                   // empty: both ops
};

// Throws CaseError("dims", ...) for anything but small|glm.
DimsProfile parse_dims(const std::string& s);
// Throws CaseError("op", ...) for anything but indexer|sdpa|any (any = empty optional).
std::optional<Op> parse_op_filter(const std::string& s);

Case generate_case(uint64_t seed, uint64_t index, const GenOptions& opt = {});

}  // namespace ao
