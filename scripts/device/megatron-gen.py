#!/usr/bin/env python3
"""Random indexer case lines in the domain of Megatron-Core's DSA top-k (python/attn_oracle/adapters/megatron_dsa.py),
for the real-kernels campaign's megatron fuzz steps: `attn-oracle fuzz` draws ratios, mask=none, q_len != kv_len,
gaps and pad rows that a Megatron THD batch cannot express (none of 90 drawn lines was served), so these steps draw
the framework's domain themselves and replay the lines through `gate` (failures shrunk with `attn-oracle shrink`).

  megatron-gen.py SEED N [glm|deepseek]   -> N case lines on stdout (the same lines for the same SEED)
Draws: 1-4 documents packed in THD order; cp 1, 2, 4, 8, 16 or 32 (zigzag), a rank at the edges (0, cp-1) or
inside; each document's padded length a multiple of 2*cp, chunk sizes at tile edges (63/64/65, 127/128/129, 1, 2)
or random, sometimes long enough for top-k 2048 to rank (8k-32k tokens); a document's real length below its padded
length only by what lies in other ranks' chunks (the adapter declines a rank holding THD pad rows); bf16, the dims'
heads (glm: 32, deepseek: 64) and dim 128, top-k 2048 (or a multiple of 128 under deepseek), rows=64 sampled on
ranks of more than 2048 rows.
"""
import random
import sys


def chunk(r, cp):
    if r.random() < 0.15:
        return r.choice([2048, 4096, 8192]) // (2 * cp) or 1  # long documents: top-k 2048 ranks
    return r.choice([1, 2, 63, 64, 65, 127, 128, 129, r.randint(1, 40), r.randint(1, 300)])


def line(r, dims):
    cp = r.choice([1, 2, 4, 8, 8, 16, 32, 32])
    rank = r.choice([0, cp - 1, r.randrange(cp)])
    nd = r.choice([1, 1, 2, 2, 2, 3, 4])
    heads, topk = (32, 2048) if dims == "glm" else (64, r.choice([128, 512, 2048]))
    padded = [2 * cp * chunk(r, cp) for _ in range(nd)]
    real = []
    for p in padded:
        c = p // (2 * cp)
        slack = rank * c if cp > 1 else 0  # tokens after the rank's last one: other ranks' chunks
        real.append(p - (r.randint(1, slack) if slack and r.random() < 0.3 else 0))
    parts = ["op=indexer", f"docs={','.join(map(str, real))}"]
    if real != padded:
        offs = [0]
        for p in padded:
            offs.append(offs[-1] + p)
        parts.append(f"padded_offsets={','.join(map(str, offs))}")
    if cp > 1:
        parts += [f"cp={cp}", f"rank={rank}"]
    parts += [f"heads={heads}", "dim=128", f"topk={topk}", "dtype=bf16", f"seed={r.randrange(1, 10**6)}"]
    if sum(padded) // cp > 2048:
        parts.append("rows=64")
    if r.random() < 0.3:
        parts.append(f"poison={r.choice(['nan', 'inf', 'large'])}")
    return " ".join(parts)


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] not in ("glm", "deepseek")):
        raise SystemExit("usage: megatron-gen.py SEED N [glm|deepseek]")
    r = random.Random(int(argv[0]))
    dims = argv[2] if len(argv) == 3 else "glm"
    for _ in range(int(argv[1])):
        print(line(r, dims))


if __name__ == "__main__":
    main(sys.argv[1:])
