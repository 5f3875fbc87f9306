#!/usr/bin/env python3
"""The GPU knob plan, from the one model list (`attn-oracle catalog --json`): for every `bug` knob value a
selected backend lists (`cuda-indexer:bug=sentinel-lanes`), the model of that id's trigger cases and
outside cases, on every seed the list gives (a production-scale case: the first seed only). Per trigger
case and seed:

  expect=fail:<metric> backend=<kernel>:bug=<id> <case>   one line per metric the case must fail
  expect=pass          backend=<kernel> <case>            the knob-less kernel passes it
  expect=fail:<metric> backend=cpu-bug:<id> <case>        the CPU model fails it the same way
and per outside case and seed:
  expect=pass          backend=<kernel>:bug=<id> <case>   the knob does not fire outside its trigger

A kernel serves the ops --ops gives it (cuda-indexer=indexer), else the ops of the single-op models its
knob re-creates; a trigger or outside case of another op is left out. A case with `values=` or `probe=`
inputs gets the kernel's `inputs=host` knob (the device generator makes the default inputs only). The
plan fails (exit 1, each problem named) on a knob value that names no model and on a knob whose model has
no trigger case the kernel serves: a knob the plan cannot exercise is a check that cannot fail.

  catalog-plan.py --catalog catalog.json [--backends REGEX] [--ops NAME=OP,...] [--seeds N] [--memcheck] [--dry-run]
  catalog-plan.py --ao build/attn-oracle ...     (runs `catalog --json` itself)
--memcheck prints only the knobs' trigger lines on the first seed, production scale left out (for
compute-sanitizer, which slows the kernels many times);
--dry-run prints the plan with a summary per knob on stderr, and runs nothing either way.
"""
import argparse
import json
import re
import subprocess
import sys


class PlanError(Exception):
    pass


def case_op(line):
    m = re.search(r"(?:^| )op=(\w+)", line)
    return m.group(1) if m else "indexer"


def needs_host_inputs(line):
    return bool(re.search(r"(?:^| )(values=(?!normal\b)\w+|probe=(?!none\b)\w+)", line))


def spec(backend, knobs):
    return backend["backend"] + (":" + ",".join(knobs) if knobs else "")


def served_ops(backend, models, given):
    if backend["backend"] in given:
        return given[backend["backend"]]
    ops = set()
    for v in backend["values"]:
        m = models.get(v)
        if m and len(m["ops"]) == 1:
            ops.update(m["ops"])
    return ops or {"indexer", "sdpa"}


def plan(catalog, backends_re=".*", seeds=None, memcheck=False, ops_of=None):
    """Plan lines and a summary row per knob; raises PlanError naming every problem."""
    models = {m["id"]: m for m in catalog["models"]}
    all_seeds = catalog["seeds"][: seeds or None]
    if memcheck:
        all_seeds = all_seeds[:1]
    problems, lines, summary = [], [], []
    selected = [b for b in catalog["bug_knobs"] if re.fullmatch(backends_re, b["backend"])]
    for b in selected:
        ops = served_ops(b, models, ops_of or {})
        host = "host" in b.get("knobs", {}).get("inputs", [])
        for knob_id in b["values"]:
            m = models.get(knob_id)
            if m is None:
                problems.append(f"{b['backend']}:bug={knob_id}: no model {knob_id} in the catalog")
                continue
            triggers = [t for t in m["triggers"] if case_op(t["case"]) in ops]
            outside = [o for o in m["outside"] if case_op(o["case"]) in ops]
            if not triggers:
                problems.append(f"{b['backend']}:bug={knob_id}: model {knob_id} has no trigger case for "
                                f"{'/'.join(sorted(ops))}")
                continue
            n0 = len(lines)
            lines.append(f"# {b['backend']}:bug={knob_id} {m['catalog']}".rstrip())
            for i, seed in enumerate(all_seeds):
                for t in triggers:
                    if t.get("scale") == "production" and (i > 0 or memcheck):
                        continue  # the CPU reference needs minutes at this scale: the first seed only
                    extra = ["inputs=host"] if host and needs_host_inputs(t["case"]) else []
                    line = f"{t['case']} seed={seed}"
                    for metric in t["fails"]:
                        lines.append(f"expect=fail:{metric} backend={spec(b, ['bug=' + knob_id] + extra)} {line}")
                    if memcheck:
                        continue
                    lines.append(f"expect=pass backend={spec(b, extra)} {line}")
                    for metric in t["fails"]:
                        lines.append(f"expect=fail:{metric} backend=cpu-bug:{knob_id} {line}")
                if memcheck:
                    continue
                for o in outside:
                    if i > 0 and o.get("scale") == "production":
                        continue
                    extra = ["inputs=host"] if host and needs_host_inputs(o["case"]) else []
                    lines.append(f"expect=pass backend={spec(b, ['bug=' + knob_id] + extra)} {o['case']} seed={seed}")
            summary.append((f"{b['backend']}:bug={knob_id}", len(triggers), len(outside),
                            sum(1 for x in lines[n0:] if x.startswith("expect="))))
    if problems:
        raise PlanError("\n".join(problems))
    return lines, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--catalog", help="the output of `attn-oracle catalog --json` ('-': stdin)")
    src.add_argument("--ao", help="an attn-oracle binary to run `catalog --json` with")
    ap.add_argument("--backends", default=".*", help="regex over the names of the backends with a bug knob (default: all)")
    ap.add_argument("--ops", default="", help="the op each kernel serves: NAME=OP[+OP],... (default: derived)")
    ap.add_argument("--seeds", type=int, default=0, help="only the first N seeds of the list (default: all)")
    ap.add_argument("--memcheck", action="store_true", help="the knobs' trigger lines on the first seed only")
    ap.add_argument("--dry-run", action="store_true", help="also print a summary per knob on stderr")
    a = ap.parse_args(argv)
    if a.ao:
        text = subprocess.run([a.ao, "catalog", "--json"], check=True, capture_output=True, text=True).stdout
    else:
        text = sys.stdin.read() if a.catalog == "-" else open(a.catalog, encoding="utf-8").read()
    catalog = json.loads(text)
    if catalog.get("schema") != "attn-oracle.catalog":
        print(f"not an attn-oracle catalog (schema {catalog.get('schema')!r})", file=sys.stderr)
        return 2
    ops_of = {}
    for item in filter(None, a.ops.split(",")):
        name, _, ops = item.partition("=")
        ops_of[name] = set(ops.split("+"))
        if not ops or not ops_of[name] <= {"indexer", "sdpa"}:
            print(f"--ops: '{item}' is not NAME=indexer|sdpa|indexer+sdpa", file=sys.stderr)
            return 2
    try:
        lines, summary = plan(catalog, a.backends, a.seeds, a.memcheck, ops_of)
    except PlanError as e:
        print(f"catalog-plan: the knob plan is not complete:\n{e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    if a.dry_run:
        for knob, nt, no, n in summary:
            print(f"{knob}: {nt} trigger, {no} outside cases, {n} plan lines", file=sys.stderr)
        print(f"{len(summary)} knobs, {sum(s[3] for s in summary)} plan lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
