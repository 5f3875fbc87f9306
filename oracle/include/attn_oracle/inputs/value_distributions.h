// Input distributions (case key values=) that reach the defect catalog's triggers with ordinary
// lengths: extreme logits, ReLU zero plateaus at the k-th score, scores clustered near the k-th.
// Each overwrites one component (or the spread) of the valid rows made by make_inputs; pad slots
// keep their poison; values depend on (token, seed) only and are exact in every dtype.
//  * extreme, sdpa: every key's component 0 is +2048; queries at even tokens are (-2048, 0, ...): each
//    of their logits is exactly -2048^2 * scale (-524288 at dim 64), below -5e4 and -65504; odd tokens
//    keep their generated query (a constant shift of their logits).
//  * extreme, indexer: queries at even tokens get w = -64 on every head and q component 0 = +64; keys
//    get component 0 = +64, except every 32nd key (-64): their ReLU dot is 0, so a row's scores are 0 for
//    1 key in 32 and below -65504 for the rest (fewer than k above the fp16 -inf bin on rows < 32k keys).
//  * plateau, indexer: weights |w|; every query's component 0 is +C, every key's -C except every 32nd
//    (+C), with C^2 > dim - 1: 31 keys in 32 have a ReLU dot of exactly 0 (a plateau at the k-th score).
//  * clustered, indexer: weights |w|; keys = one shared vector + a 1/256 spread: a row's scores lie in a
//    narrow band, so thousands of keys share the k-th score's leading bits (radix-bin stress).
#pragma once
#include "attn_oracle/inputs/tensors.h"

namespace ao {

void apply_value_distribution(const Layout& l, Inputs& in);

}  // namespace ao
