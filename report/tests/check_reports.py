#!/usr/bin/env python3
"""Checks a report dir with real parsers: report.json (json), report.xml (xml.etree / expat), report.html
(xml.etree: the page is also well-formed XML), report.md (a GFM table check: every row of the case table has
the header's column count, no line starts a heading but the writer's own, no raw HTML or comment outside a
code span). With --expect FILE (JSON: per case the backend, vs, case line and reason as valid UTF-8) each
report must also show each text as the format's escaping rules promise (report.h, escape.h).

  usage: check_reports.py REPORT_DIR [--cases N] [--status complete|interrupted] [--signal NAME]
                          [--expect FILE] [--missing NAME ...]
Exit 0 when every check passes; else 1 with the first failure on stderr.
"""
import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

MD_HEADER = "| verdict | backend | vs | case | failing metrics / reason |"
FIELDS = ("backend", "vs", "case", "reason")


def fail(msg):
    sys.stderr.write("check_reports: " + msg + "\n")
    sys.exit(1)


def is_control(ch):
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F


def is_nonchar(ch):
    o = ord(ch)
    return 0xFDD0 <= o <= 0xFDEF or (o & 0xFFFE) == 0xFFFE


def xml_text(s):  # what an XML parser must read back from an element's text
    return "".join(ch if ch in "\n\t" else " " if is_control(ch) else "\ufffd" if is_nonchar(ch) else ch for ch in s)


def xml_attr(s):  # attribute-value normalization turns tab and newline into spaces
    return xml_text(s).replace("\n", " ").replace("\t", " ")


def md_text(s):
    return "".join(" " if is_control(ch) else ch for ch in s)


def gfm_cells(line):
    """The cells of a GFM table row, split as GitHub does: at each `|` not escaped by a backslash."""
    if not (line.startswith("|") and line.endswith("|")):
        fail(f"report.md: table row does not start and end with '|': {line!r}")
    cells, cur, i, s = [], "", 0, line[1:-1]
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] == "|":
            cur += "|"  # unescaped before inline parsing, code spans included
            i += 2
        elif s[i] == "|":
            cells.append(cur)
            cur, i = "", i + 1
        else:
            cur += s[i]
            i += 1
    cells.append(cur)
    return [c.strip(" ") for c in cells]


def code_span_content(cell):
    """The literal text of a cell holding one CommonMark code span (or nothing)."""
    if cell == "":
        return ""
    m = re.fullmatch(r"(`+)(.*)\1", cell, re.S)
    if not m:
        fail(f"report.md: cell is not one code span: {cell!r}")
    fence, body = m.group(1), m.group(2)
    if any(len(r) == len(fence) for r in re.findall(r"`+", body)):
        fail(f"report.md: the code span closes early (a backtick run as long as its fence): {cell!r}")
    if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
        body = body[1:-1]
    return body


def strip_code_spans(line):
    """The line without its code spans (CommonMark: a backtick run opens a span closed by a run as long)."""
    out, i = "", 0
    while i < len(line):
        m = re.match(r"`+", line[i:])
        if not m:
            out += line[i]
            i += 1
            continue
        fence = m.group(0)
        j = i + len(fence)
        close = None
        for r in re.finditer(r"`+", line[j:]):
            if len(r.group(0)) == len(fence):
                close = j + r.start()
                break
        if close is None:
            out += fence
            i = j
        else:
            i = close + len(fence)
    return out


def check_md(text, n_cases, expect):
    lines = text.split("\n")
    for ln in lines:
        if ln.lstrip(" ").startswith("#") and not (ln == "## attn-oracle report" or ln.startswith("### FAIL ")):
            fail(f"report.md: a line starts a heading the writer did not write: {ln!r}")
        if ln.startswith("```") and ln != "```":
            fail(f"report.md: a fence line carries text: {ln!r}")
    in_fence = False
    for ln in lines:
        if ln == "```":
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        rest = strip_code_spans(ln)
        if "<!--" in rest or re.search(r"<[A-Za-z/!?]", rest):
            fail(f"report.md: raw HTML or an HTML comment outside a code span: {ln!r}")
    if MD_HEADER not in lines:
        fail("report.md: no case table header")
    h = lines.index(MD_HEADER)
    width = len(gfm_cells(MD_HEADER))
    if len(gfm_cells(lines[h + 1])) != width:
        fail("report.md: the delimiter row has another column count")
    rows = []
    for ln in lines[h + 2:]:
        if ln == "":
            break
        rows.append(ln)
    if len(rows) != n_cases:
        fail(f"report.md: {len(rows)} table rows for {n_cases} cases (a line break in foreign text split a row?)")
    for k, ln in enumerate(rows):
        cells = gfm_cells(ln)
        if len(cells) != width:
            fail(f"report.md: row {k + 1} has {len(cells)} cells, the header {width}: {ln!r}")
        if expect:
            for f, cell in zip(FIELDS, cells[1:]):
                got, want = code_span_content(cell), md_text(expect[k][f])
                if got != want:
                    fail(f"report.md: row {k + 1} {f}: {got!r} != {want!r}")


def check_xml(path, n_cases, expect, status, signal):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail(f"report.xml is not well-formed: {e}")
    cases = root.findall("./testsuite/testcase")
    if len(cases) != n_cases:
        fail(f"report.xml: {len(cases)} testcases for {n_cases} cases")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    if status and props.get("status") != status:
        fail(f"report.xml: status {props.get('status')!r}, expected {status!r}")
    if signal and props.get("signal") != signal:
        fail(f"report.xml: signal {props.get('signal')!r}, expected {signal!r}")
    for k, c in enumerate(cases):
        if not expect:
            continue
        e = expect[k]
        if c.get("name") != xml_attr(e["case"]):
            fail(f"report.xml: testcase {k + 1} name {c.get('name')!r} != {xml_attr(e['case'])!r}")
        if c.get("classname") != "attn-oracle." + xml_attr(e["backend"]):
            fail(f"report.xml: testcase {k + 1} classname {c.get('classname')!r}")
        for tag in ("failure", "error", "skipped"):
            el = c.find(tag)
            if el is not None and el.get("message") != xml_attr(e["reason"]):
                fail(f"report.xml: testcase {k + 1} {tag} message {el.get('message')!r} != {xml_attr(e['reason'])!r}")


def check_html(path, n_cases, expect):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail(f"report.html is not well-formed XML: {e}")
    table = next((t for t in root.iter("table") if t.get("class") == "cases"), None)
    if table is None:
        fail("report.html: no case table")
    rows = table.findall("tr")[1:]
    if len(rows) != n_cases:
        fail(f"report.html: {len(rows)} case rows for {n_cases} cases")
    for k, tr in enumerate(rows):
        if not expect:
            continue
        tds = ["".join(td.itertext()) for td in tr.findall("td")]
        for f, got in zip(FIELDS, tds[2:6]):
            if got != xml_text(expect[k][f]):
                fail(f"report.html: row {k + 1} {f}: {got!r} != {xml_text(expect[k][f])!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--cases", type=int)
    ap.add_argument("--status")
    ap.add_argument("--signal")
    ap.add_argument("--expect")
    ap.add_argument("--missing", action="append", default=[])
    a = ap.parse_args()
    files = {f: os.path.join(a.dir, f) for f in ("report.json", "report.md", "report.xml", "report.html")}
    for f, p in files.items():
        if f in a.missing:
            if os.path.lexists(p) and not os.path.isdir(p):
                fail(f"{f} exists but should not")
        elif not os.path.isfile(p):
            fail(f"{f} missing")
    expect = json.load(open(a.expect, encoding="utf-8")) if a.expect else None
    n = len(expect) if expect else a.cases
    if "report.json" not in a.missing:
        j = json.load(open(files["report.json"], encoding="utf-8"))
        if n is None:
            n = len(j["cases"])
        if len(j["cases"]) != n:
            fail(f"report.json: {len(j['cases'])} cases, expected {n}")
        if a.status and j.get("status") != a.status:
            fail(f"report.json: status {j.get('status')!r}, expected {a.status!r}")
        if a.signal and j.get("signal") != a.signal:
            fail(f"report.json: signal {j.get('signal')!r}, expected {a.signal!r}")
    if n is None:
        fail("give --cases or --expect when report.json is missing")
    if "report.xml" not in a.missing:
        check_xml(files["report.xml"], n, expect, a.status, a.signal)
    if "report.html" not in a.missing:
        check_html(files["report.html"], n, expect)
    if "report.md" not in a.missing:
        text = open(files["report.md"], encoding="utf-8").read()
        check_md(text, n, expect)
        if a.signal and f"INTERRUPTED by {a.signal}" not in text:
            fail(f"report.md does not say INTERRUPTED by {a.signal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
