#!/usr/bin/env python3
"""Random padded-THD SDPA case lines at the head dims FROST serves on SM90 (256 < d <= 512), for the
cudnn_fe_sdpa campaign (real-kernels-campaign.sh step fes-fuzz512): `attn-oracle fuzz` draws dim 128 (glm) or
<= 256 (small), which on Hopper all go to the cuDNN backend, so this step draws the FROST domain itself and
replays the lines through `gate` (failures are then shrunk with `attn-oracle shrink`).

  fes-gen.py SEED N   -> N case lines on stdout (the same lines for the same SEED)
Draws: 1-5 documents of 1..700 tokens (tile edges 64/128 +-1 often), packed, uniformly padded, Q/O padded
differently from K/V, explicit offsets with a tail capacity, own stats/O offsets; q_len != kv_len under
bottom-right; mask topleft/bottomright/none; windows; GQA 1/2/4/8; bf16/fp16; dim 512, 384, 264, 576/512.
"""
import random
import sys


def doc_len(r):
    return r.choice([1, 2, 63, 64, 65, 127, 128, 129, r.randint(1, 40), r.randint(1, 700)])


def line(r, i):
    nd = r.choice([1, 2, 2, 3, 3, 4, 5])
    hkv = r.choice([1, 2, 4])
    hq = hkv * r.choice([1, 2, 4])
    dims = r.choice(["dim=512", "dim=512", "dim=512", "dim=384", "dim=264", "dim=576 dim_v=512", "dim=512 dim_v=384"])
    mask = r.choice(["topleft", "topleft", "bottomright", "bottomright", "none"])
    parts = ["op=sdpa"]
    lay = r.random()
    if mask == "bottomright" and r.random() < 0.4:
        ql = [doc_len(r) for _ in range(nd)]
        kl = [max(q, doc_len(r)) if r.random() < 0.7 else doc_len(r) for q in ql]
        parts += [f"q_lens={','.join(map(str, ql))}", f"kv_lens={','.join(map(str, kl))}"]
        if lay < 0.5:
            parts.append(f"pad={r.choice([8, 16, 64])}")
    else:
        docs = [doc_len(r) for _ in range(nd)]
        parts.append(f"docs={','.join(map(str, docs))}")
        if lay < 0.2:
            pass  # packed
        elif lay < 0.45:
            parts.append(f"pad={r.choice([1, 8, 16, 64, 128])}")
        elif lay < 0.65:
            parts.append(f"q_pad={','.join(str(r.choice([0, 1, 3, 17])) for _ in docs)}")
            parts.append(f"kv_pad={','.join(str(r.choice([0, 2, 5, 64])) for _ in docs)}")
            if r.random() < 0.5:
                parts.append(f"tail={r.choice([1, 64, 300])}")
        elif lay < 0.8:
            off, qo = 0, []
            for d in docs:
                off += r.choice([0, 1, 7, 50])
                qo.append(off)
                off += d
            ko, off2 = [], 0
            for d in docs:
                off2 += r.choice([0, 3, 64])
                ko.append(off2)
                off2 += d
            parts += [f"q_offsets={','.join(map(str, qo))}", f"kv_offsets={','.join(map(str, ko))}",
                      f"capacity={max(off, off2) + r.choice([0, 5, 100])}"]
        else:
            parts.append(f"pad={r.choice([8, 64])}")
            if nd == 2 and r.random() < 0.6:
                s1 = docs[0] + r.choice([0, 9, 100])
                parts.append(f"stats_offsets=0,{s1},{s1 + docs[1] + r.choice([0, 5])}")
    parts = [p for p in parts if p]
    if mask != "topleft":
        parts.append(f"mask={mask}")
    if mask != "none" and r.random() < 0.25:
        parts.append(f"window={r.choice([1, 7, 32, 128])}")
    parts += [f"hq={hq}", f"hkv={hkv}", dims, f"dtype={r.choice(['bf16', 'bf16', 'fp16'])}", f"seed={i}"]
    return " ".join(parts)


def main(argv):
    seed, n = int(argv[1]), int(argv[2])
    r = random.Random(seed)
    for i in range(n):
        print(line(r, seed * 100000 + i))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
