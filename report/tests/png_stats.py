#!/usr/bin/env python3
"""Pixel statistics of a PNG screenshot, for tests that check a page really rendered.

Usage: png_stats.py FILE.png [RRGGBB ...]  ->  prints one line of JSON:
  {"width", "height", "colours": distinct colours (capped at 4096),
   "background": the most common colour, "foreground_fraction": share of pixels that differ from it,
   "counts": {"RRGGBB": pixels of exactly that colour (alpha ignored), ...}}
Standard library only (zlib); handles 8-bit greyscale/RGB/RGBA, non-interlaced (what Chromium writes).
"""
import json
import struct
import sys
import zlib
from collections import Counter


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG file")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    w, h, depth, ctype, _, _, interlace = hdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    bpp, stride = channels, w * channels
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, channels, rows


def main():
    w, h, ch, rows = decode(sys.argv[1])
    counts = Counter()
    for line in rows:
        for x in range(0, len(line), ch):
            counts[line[x:x + ch]] += 1
    bg, n_bg = counts.most_common(1)[0]
    want = {c.lower(): 0 for c in sys.argv[2:]}
    for px, n in counts.items():
        key = px[:3].hex() if ch >= 3 else (px[:1] * 3).hex()
        if key in want:
            want[key] += n
    print(json.dumps({"width": w, "height": h, "colours": min(len(counts), 4096),
                      "background": bg.hex(), "foreground_fraction": 1 - n_bg / float(w * h), "counts": want}))


if __name__ == "__main__":
    main()
