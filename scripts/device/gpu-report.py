#!/usr/bin/env python3
"""Turns a gpu-campaign.sh result folder (env.txt, *.json from ao-gpu-campaign, the unpacked
campaign-*.tgz logs) into one Markdown report. Run here, after the device call:
  scripts/device/gpu-report.py RESULT_DIR > results/gpu/cuda-<date>/README.md"""
import json, os, re, sys

d = sys.argv[1]
def read(name):
    p = os.path.join(d, name)
    return open(p).read() if os.path.exists(p) else None
def load(name):
    t = read(name)
    return json.loads(t) if t else None

env = read("env.txt") or ""
print("# cuda-indexer / cuda-sdpa on the H200 (scripts/device/gpu-campaign.sh)\n")
print("```\n" + env.strip() + "\n```\n")

t = read("gpu_tests.txt")
if t:
    tail = [l for l in t.splitlines() if re.search(r"PASSED|FAILED|SKIPPED|tests ran|exit", l)]
    print("## ao_gpu_tests\n\n```\n" + "\n".join(tail[-12:]) + "\n```\n")

def fmt(x, p=4):
    if x is None: return ""
    if isinstance(x, float): return f"{x:.{p}g}"
    return str(x)

def short(case):
    keep = []
    for tok in case.split():
        k = tok.split("=")[0]
        if k in ("docs", "padded_offsets", "rank", "crop", "q_pad", "kv_pad", "tail", "hq", "hkv", "mask", "poison", "lens", "pad"):
            keep.append(tok)
    if "cp=" in case and "rank=" not in case:
        keep.append("rank=0")  # the case line omits defaults
    return " ".join(keep)

def result_table(rs, title):
    print(f"## {title}\n")
    print("| as expected | verdict | expect | backend | case | overlap min / mean | tie-aware recall min | out-of-causal | wrong fill | chunks passing (doc:chunk) | GPU total ms | CPU ref s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        m = r.get("metrics", {})
        segs = r.get("segments", [])
        passing = [f"{s['doc']}:{s['chunk']}" for s in segs if s["verdict"] == "pass"]
        chunks = f"{len(passing)}/{len(segs)}" + (f" ({', '.join(passing[:4])})" if 0 < len(passing) < len(segs) else "")
        ov = f"{fmt(m.get('overlap_min'))} / {fmt(m.get('overlap_mean'), 6)}" if "overlap_min" in m else ""
        extra = "" if "overlap_min" in m else f"max_abs_err {fmt(m.get('max_abs_err'))}, nonfinite {fmt(m.get('nonfinite_valid'))}, clobbered {fmt(m.get('clobbered_pad_slots'))}"
        print(f"| {'yes' if r.get('as_expected') else '**NO**'} | {r.get('verdict')} | {r.get('expect')} | `{r.get('backend')}` | "
              f"`{short(r.get('case', ''))}` | {ov or extra} | {fmt(m.get('tie_aware_recall_min'))} | {fmt(m.get('out_of_causal'))} | "
              f"{fmt(m.get('wrong_fill_rows'))} | {chunks} | {fmt(r.get('gpu_ms', {}).get('total_ms'))} | {fmt(r.get('reference_s'), 3)} |")
    bad = [r for r in rs if not r.get("as_expected")]
    print(f"\n{len(rs)} runs, {len(bad)} not as expected.\n")
    for r in bad:
        print(f"* not as expected: `{r.get('backend')}` `{r.get('case')}`: {r.get('verdict')} ({r.get('reason')})")
    if bad: print()

for name, title in (("quick.json", "Quick plan"), ("seeds.json", "Seed cases at full size (cp=32, 32 heads x 128, topk 2048, bf16)")):
    j = load(name)
    if j: result_table(j["results"], title)

j = load("seeds.json")
if j:
    tl = [r for r in j["results"] if r["backend"] == "cuda-indexer:bug=topleft-cp"]
    if tl:
        print("### bug=topleft-cp, per CP chunk\n")
        print("Expected: every chunk fails except rank 0's front chunk (chunk 0 of each document).\n")
        print("| case | chunk verdicts (doc:chunk=verdict, overlap mean) |\n|---|---|")
        for r in tl:
            cells = [f"{s['doc']}:{s['chunk']}={s['verdict']} ({fmt(s.get('overlap_mean'), 3)})" for s in r.get("segments", [])]
            print(f"| `{short(r['case'])}` | {'; '.join(cells)} |")
        print()

j = load("timing.json")
if j:
    print("## Timing (CUDA events; medians of the repeats; inputs generated on the device)\n")
    print("| backend | case | inputs ms (first run) | scores / attention ms | top-k ms | total ms (median) | repeats | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for r in j["results"]:
        g, rp = r.get("gpu_ms", {}), r.get("repeat", {})
        print(f"| `{r['backend']}` | `{r.get('case','')}` | {fmt(g.get('inputs_ms'))} | {fmt(rp.get('compute_ms_median'))} | "
              f"{fmt(rp.get('select_ms_median'))} | {fmt(rp.get('total_ms_median'))} | {rp.get('n')} | {r.get('verdict')} |")
    print()

for name, title in (("memcheck_tests.txt", "compute-sanitizer memcheck: ao_gpu_tests"),
                    ("memcheck_layouts.txt", "compute-sanitizer memcheck: large layouts (plan_sanitize)")):
    t = read(name)
    if t:
        lines = [l for l in t.splitlines() if re.search(r"ERROR SUMMARY|exit|Invalid|UNEXPECTED|^ok|lines,", l)]
        print(f"## {title}\n\n```\n" + "\n".join(lines[-40:]) + "\n```\n")
p = read("plan_sanitize.txt")
if p:
    print("Layouts under memcheck:\n\n```\n" + p.strip() + "\n```\n")

gates = sorted(f for f in os.listdir(d) if f.startswith("gate_"))
if gates:
    print("## gate corpus/ (attn-oracle gate, vs cpu-ref)\n")
    for g in gates:
        t = read(g)
        summary = [l for l in t.splitlines() if l.startswith("gate:") or l.startswith("exit")]
        fails = [l for l in t.splitlines() if l.startswith("FAIL") or l.startswith("ERROR")]
        print(f"### {g[5:-4]}\n\n```\n" + "\n".join(summary) + "\n```\n")
        if fails:
            print("<details><summary>" + str(len(fails)) + " failing cases</summary>\n\n```\n" + "\n".join(fails[:60]) + "\n```\n</details>\n")
