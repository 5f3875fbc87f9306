// Layout generator: case number `index` of campaign `seed` is a pure function of (seed, index,
// options), so a campaign can be split into shards and any case re-created from its number.
// Every decision is drawn from a ChoiceSource (choices.h): the campaign's PRNG records the choice
// sequence, a replay of any sequence (edited by the shrinker, choice_shrink.h) or the libFuzzer
// target's bytes give a case the same code builds, so every such case is valid by construction.
// Cases are biased to the edges kernels break on (see generator.cpp for the families) and every
// generated case is valid (make_layout accepts it); an invalid one is a generator bug.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "attn_oracle/case/case.h"
#include "attn_oracle/fuzz/choices.h"

namespace ao {

enum class DimsProfile { Small, Glm, Tiny, Wide, Deepseek };

struct GenOptions {
  DimsProfile dims = DimsProfile::Small;  // small: CPU-fast; glm: 32 indexer heads x 128, topk 2048;
                                          // deepseek: glm with 64 indexer heads, topk a multiple of 128;
                                          // tiny: short documents, cp <= 4, <= 4 heads x 16, no rows= (libFuzzer target);
                                          // wide: small's layouts, every head dim above 256 (264/384/512, 576 with d_v 512)
  std::optional<Op> op;                   // empty: both ops
  // empty: the mix (the training path in a share of cases); Bwd: every case pass=bwd (a backward
  // kernel's campaign), on smaller packs (the backward judges every row); Fwd: no backward case.
  std::optional<Pass> pass;
};

// Throws BadInput("dims", ...) for anything but small|glm|deepseek|tiny|wide.
DimsProfile parse_dims(const std::string& s);
const char* dims_name(DimsProfile d);
// Throws BadInput("op", ...) for anything but indexer|sdpa|any (any = empty optional).
std::optional<Op> parse_op_filter(const std::string& s);
// Throws BadInput("pass", ...) for anything but fwd|bwd|any (any = empty optional).
std::optional<Pass> parse_pass_filter(const std::string& s);
const char* pass_filter_name(const std::optional<Pass>& p);

// Every decision drawn from `src`; never throws for any choice sequence (an invalid case is a bug).
Case generate_case(ChoiceSource& src, const GenOptions& opt = {});
// Case `index` of campaign `seed` (RandomChoices).
Case generate_case(uint64_t seed, uint64_t index, const GenOptions& opt = {});

struct GeneratedCase {
  Case c;
  Choices choices;  // canonical: replay_choices(choices) gives c
};
GeneratedCase generate_recorded(uint64_t seed, uint64_t index, const GenOptions& opt = {});
// Case `index` of campaign `seed`, preferring a case whose every gate discriminates: the first of the
// draws of (seed, index), (redraw_seed(seed, 1), index), ... that `weak` does not reject, after at most
// kWeakRedraws redraws (the last draw is kept, weak or not; `weak` sees every draw, the last one too);
// `redraws` counts them. A pure function
// of its arguments when `weak` is one (the campaign's: the discrimination check of the case's gates).
inline constexpr int kWeakRedraws = 2;
uint64_t redraw_seed(uint64_t seed, int redraw);
GeneratedCase generate_discriminating(uint64_t seed, uint64_t index, const GenOptions& opt,
                                      const std::function<bool(const Case&)>& weak, int* redraws = nullptr);
// The case a choice sequence gives; `effective`: the sequence as played (canonical); `record`: each
// decision as played (with its range and kind).
Case replay_choices(const Choices& seq, const GenOptions& opt = {}, Choices* effective = nullptr,
                    std::vector<Choice>* record = nullptr);

}  // namespace ao
