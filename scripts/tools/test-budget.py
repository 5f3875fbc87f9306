#!/usr/bin/env python3
"""The test command's time budget: fails when one test, one phase or the whole run took longer than
its budget (scripts/tools/test-budget.txt) on the machine CI runs on (2 cores), so that a change
cannot silently double the wait of every contributor.

usage: test-budget.py BUDGET_FILE PHASES_TSV [CTEST_JUNIT_XML]

  BUDGET_FILE      lines `test REGEX SECONDS`, `phase NAME SECONDS`, `total SECONDS`; `#` comments.
                   A test's budget is that of the first `test` line whose REGEX matches its whole
                   name; a test that no line matches is a finding (every test has a stated budget).
  PHASES_TSV       `NAME<TAB>SECONDS` per phase of the test command (scripts/tools/test.sh writes it).
  CTEST_JUNIT_XML  what `ctest --output-junit` wrote: each test's wall time.

Prints the slowest tests and the phases with their budgets; exit 1 with one line per overrun
(`test NAME: 75.2 s > budget 60 s`), 2 on a bad budget file or input.
"""
import re
import sys
import xml.etree.ElementTree as ET


class BadInput(Exception):
    pass


def read_budget(path):
    tests, phases, total = [], {}, None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                if parts[0] == "test" and len(parts) == 3:
                    tests.append((re.compile(parts[1]), parts[1], float(parts[2])))
                elif parts[0] == "phase" and len(parts) == 3:
                    phases[parts[1]] = float(parts[2])
                elif parts[0] == "total" and len(parts) == 2:
                    total = float(parts[1])
                else:
                    raise ValueError
            except (ValueError, re.error):
                raise BadInput(f"{path}:{n}: expected `test REGEX SECONDS`, `phase NAME SECONDS` or "
                               f"`total SECONDS`, got {raw.strip()!r}")
    return tests, phases, total


def read_phases(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                name, secs = raw.rstrip("\n").split("\t")
                out.append((name, float(secs)))
            except ValueError:
                raise BadInput(f"{path}:{n}: expected NAME<TAB>SECONDS, got {raw.strip()!r}")
    return out


def read_junit(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise BadInput(f"{path}: {e}")
    out = []
    for tc in root.iter("testcase"):
        try:
            out.append((tc.get("name", ""), float(tc.get("time", "0")), tc.get("status", "")))
        except ValueError:
            raise BadInput(f"{path}: test {tc.get('name')!r} has time {tc.get('time')!r}")
    return out


def check(tests_budget, phases_budget, total_budget, phases, tests):
    findings = []
    for name, secs, status in tests:
        if status == "notrun":  # skipped or excluded: no time to judge
            continue
        budget = next((b for rx, _, b in tests_budget if rx.fullmatch(name)), None)
        if budget is None:
            findings.append(f"test {name}: no budget line matches it (add one to the budget file)")
        elif secs > budget:
            findings.append(f"test {name}: {secs:.1f} s > budget {budget:g} s")
    for name, secs in phases:
        budget = phases_budget.get(name)
        if budget is None:
            findings.append(f"phase {name}: no budget line names it")
        elif secs > budget:
            findings.append(f"phase {name}: {secs:.1f} s > budget {budget:g} s")
    total = sum(s for _, s in phases)
    if total_budget is not None and total > total_budget:
        findings.append(f"total: {total:.1f} s > budget {total_budget:g} s")
    return findings, total


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    try:
        tb, pb, total_budget = read_budget(argv[1])
        phases = read_phases(argv[2])
        tests = read_junit(argv[3]) if len(argv) == 4 else []
    except (OSError, BadInput) as e:
        print(f"test-budget: {e}", file=sys.stderr)
        return 2
    findings, total = check(tb, pb, total_budget, phases, tests)
    ran = sorted((t for t in tests if t[2] != "notrun"), key=lambda t: -t[1])
    print("test budget: slowest tests (s): " + ", ".join(f"{n} {s:.1f}" for n, s, _ in ran[:8]))
    print("test budget: phases (s): " + ", ".join(f"{n} {s:.0f}/{pb.get(n, 0):g}" for n, s in phases)
          + f"; total {total:.0f}" + (f"/{total_budget:g}" if total_budget is not None else ""))
    for f in findings:
        print(f"test budget: OVER: {f}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
