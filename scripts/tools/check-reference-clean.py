#!/usr/bin/env python3
"""Fails when the exact reference names a bug model: the reference stage's sources
(oracle/reference/*.{h,cpp} and oracle/include/attn_oracle/reference/) must hold no bug model id (from
`attn-oracle backends`, every cpu-bug:<id>) and none of the switchboard words a reference with bug flags
had. Bug models reach the reference only through its seams (reference_seams.h).

Usage: check-reference-clean.py <repo root> <attn-oracle binary>
The reference's tests (oracle/reference/tests/) are not scanned: they drive the seams with the models."""
import pathlib
import re
import subprocess
import sys

# The bug switches a reference once carried, as field or constant names.
FLAG_WORDS = [
    "Quirks", "quirk", "topleft_cp", "derived_offsets", "shared_qkv_offsets", "tail_read_tile", "off_by_one",
    "gqa_modulo", "lse_log2", "stats_packed", "fill_zero", "cp_drops_window", "cp_local_keys",
    "topleft_for_bottomright", "decode_tile", "batch_stride_max_seqlen", "window_left_only", "sentinel_widen",
    "sentinel_empty_band", "clamp_right_before_shift", "merge_unguarded", "finite_neg_inf", "kFiniteNegInf",
    "kCaseSplits", "split_max_seqlen", "row_start_ignored", "long_row_keys", "start_align",
    "compressed_tail_zero", "swizzle", "radix", "chunk_keys_only",
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    listing = subprocess.run([binary, "backends"], capture_output=True, text=True, check=True).stdout
    ids = sorted(set(re.findall(r"cpu-bug:([a-z0-9][a-z0-9-]*)", listing)))
    if not ids:
        sys.exit(f"check-reference-clean: `{binary} backends` lists no cpu-bug model (cannot check)")
    files = sorted(p for p in (root / "oracle/reference").glob("*") if p.suffix in (".h", ".cpp"))
    files += sorted((root / "oracle/include/attn_oracle/reference").rglob("*.h"))
    if not files:
        sys.exit("check-reference-clean: no reference sources found under " + str(root))
    # A model id as a word of its own (ids hold '-', so neighbours are letters, digits, '-' or '_').
    patterns = [(f"bug model id '{i}'", re.compile(rf"(?<![\w-]){re.escape(i)}(?![\w-])")) for i in ids]
    patterns += [(f"bug flag '{w}'", re.compile(rf"(?i)\b\w*{re.escape(w)}\w*\b")) for w in FLAG_WORDS]
    bad = []
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for what, pat in patterns:
                if pat.search(line):
                    bad.append(f"{f.relative_to(root)}:{n}: {what}: {line.strip()}")
    for b in bad:
        print(b)
    if bad:
        sys.exit(f"check-reference-clean: the reference names bug models or flags in {len(bad)} line(s)")
    print(f"check-reference-clean: {len(files)} reference files name none of {len(ids)} model ids or the bug flags")


if __name__ == "__main__":
    main()
