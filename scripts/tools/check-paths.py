#!/usr/bin/env python3
"""Checks the paths the repository names (CTest `repo_paths`).

usage: check-paths.py [ROOT]     (ROOT: the repository; default: two folders above this script)

Fails (exit 1, one `file:line: ...` per finding) on:
  * a repository path named in Markdown, in a comment of C++/CUDA, Python, shell or CMake code or in a
    Python docstring that
    does not exist: a token starting with a top-level folder of the repository (`scripts/tools/build.sh`,
    `corpus/catalog/`), an `attn_oracle/<x>.h` header (also in C++ string literals: a user reads those in
    messages) or an upper-case top-level document name (`README.md`). A `*` or a `<placeholder>` is a
    wildcard and `{a,b}` an alternation: the pattern must match at least one path; a path under a top-level
    folder that moved away (RETIRED) is one too; a Markdown line that says `git show <commit>:` names an
    older commit's paths and is left alone;
  * a path that leaves the repository for a sibling folder (`../` followed by a folder name that is not
    part of the repository): a user's clone has nothing beside it;
  * a machine-specific absolute path (a home or work folder, a mktemp folder) in any committed text file.
Paths under a build folder (`build/...`) or after another folder (`$root/scripts`, `/usr/include/...`)
are not repository paths and are left alone.
"""
import fnmatch
import os
import re
import sys

from repo_check import finish, repo_files, repo_root  # this folder: sys.path[0] of a script it holds

# Top-level folders that moved away: a path under one of them names nothing now, and without this list it
# would not even look like a repository path (reports/ became report/, results/ and bench/results/).
RETIRED = {"reports"}
# A line that tells how to read a file of an older commit (`git show <commit>:<path>`) names paths of that
# commit, not of this tree.
OLD_COMMIT = re.compile(r"git show [0-9a-f]{7,40}:")

CODE_C = {".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh", ".c"}
CODE_HASH = {".py", ".sh", ".cmake"}
BINARY = {".png", ".tgz", ".gz", ".xz", ".npy", ".so", ".a", ".o", ".whl", ".zip", ".bin", ".pdf"}

# A path token: path characters, or a {a,b} group. It must not follow a word character, a dot, a slash, a
# hyphen, `$` or `}` (then it is a suffix of a longer path or of a variable, not a repository path).
TOKEN = r"(?:[A-Za-z0-9_.\-/*<>+]|\{[^}\s]*\})+"
LEAD = r"(?<![A-Za-z0-9_./\-$}])"
HEADER = re.compile(LEAD + r"attn_oracle/[A-Za-z0-9_/]+\.h\b")
TOPDOC = re.compile(LEAD + r"[A-Z][A-Z0-9_\-]*\.md\b")
# Machine-specific paths, spelled so that this file does not match itself.
MACHINE = re.compile("(?:/" + "work/|/" + "home/|/tmp/" + r"tmp\.[A-Za-z0-9]+)")
OUTSIDE = re.compile(r"(?<![A-Za-z0-9_./])\.\./(?:\.\./)*[A-Za-z0-9_\-][A-Za-z0-9_.\-]*")


def c_comments(text):
    """(line, comment text) of every // and /* */ comment, and (line, literal) of every string literal."""
    comments, strings = [], []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append((line, text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k, part in enumerate(text[i:j].split("\n")):
                comments.append((line + k, part))
            line += text.count("\n", i, j)
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            for k, part in enumerate(text[i:end].split("\n")):
                strings.append((line + k, part))
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                strings.append((line, text[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return comments, strings


def hash_comments(text, is_python):
    """(line, comment text) of every # comment (not a shebang, not a # inside quotes or a ${#...})."""
    out = []
    for no, raw in enumerate(text.split("\n"), 1):
        if no == 1 and raw.startswith("#!"):
            continue
        quote = None
        for k, c in enumerate(raw):
            if quote:
                if c == "\\":
                    continue
                if c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#" and (k == 0 or raw[k - 1] in " \t;(" or is_python):
                out.append((no, raw[k:]))
                break
    return out


class Checker:
    def __init__(self, root):
        self.root = root
        self.files = repo_files(root)
        self.paths = set(self.files)
        for f in self.files:
            parts = f.split("/")
            for k in range(1, len(parts)):
                self.paths.add("/".join(parts[:k]) + "/")
        tops = sorted({f.split("/")[0] for f in self.files if "/" in f} | RETIRED, key=len, reverse=True)
        self.tops = set(tops)
        self.path_re = re.compile(LEAD + r"(?:" + "|".join(re.escape(t) for t in tops) + r")/" + TOKEN)
        # Public headers live in each part's include/ folder (oracle/include/, fuzz/include/, ...).
        self.headers = {f[f.index("attn_oracle/"):] for f in self.files
                        if re.match(r"(?:.*/)?include/attn_oracle/", f)}
        self.topdocs = {f for f in self.files if "/" not in f}
        self.findings = []

    def exists(self, token):
        """True when the path (or every alternative of a {a,b} group) names something in the repository."""
        m = re.search(r"\{([^}]*)\}", token)
        if m:
            return all(self.exists(token[:m.start()] + alt + token[m.end():]) for alt in m.group(1).split(","))
        pattern = re.sub(r"<[^>/]*>", "*", token)
        if "<" in pattern or ">" in pattern:
            return False
        if "*" in pattern or "?" in pattern:
            if pattern.endswith("/"):
                return any(fnmatch.fnmatchcase(p, pattern) for p in self.paths if p.endswith("/"))
            return any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, pattern + "/") for p in self.paths)
        return token in self.paths or token + "/" in self.paths

    def report(self, f, line, msg):
        self.findings.append(f"{f}:{line}: {msg}")

    def check_names(self, f, line, text):
        for m in self.path_re.finditer(text):
            tok = m.group(0).rstrip(".")
            if tok.endswith("/..") or "/../" in tok:
                continue
            if not self.exists(tok):
                self.report(f, line, f"'{tok}' does not exist in the repository")
        self.check_headers(f, line, text)
        for m in TOPDOC.finditer(text):
            if m.group(0) not in self.topdocs:
                self.report(f, line, f"'{m.group(0)}' is no document of the repository's top level")

    def check_headers(self, f, line, text):
        for m in HEADER.finditer(text):
            if m.group(0) not in self.headers:
                self.report(f, line, f"header '{m.group(0)}' is in no include/ folder of the repository")

    def check_file(self, f):
        ext = os.path.splitext(f)[1]
        if ext in BINARY:
            return
        try:
            with open(os.path.join(self.root, f), "rb") as fh:
                data = fh.read()
        except OSError as e:
            self.report(f, 0, f"unreadable: {e}")
            return
        if b"\0" in data[:8192]:
            return
        text = data.decode("utf-8", "replace")
        for no, raw in enumerate(text.split("\n"), 1):
            for m in MACHINE.finditer(raw):
                self.report(f, no, f"machine-specific path '{m.group(0)}...' (write a placeholder such as <tmp>/)")
            for m in OUTSIDE.finditer(raw):
                # `../../gpu_backends/x.cpp` in a build log is relative to a build folder inside the
                # repository; a name that is no part of the repository is outside it.
                first = m.group(0).replace("../", "").split("/")[0]
                target = os.path.normpath(os.path.join(os.path.dirname(f), m.group(0)))
                if first not in self.tops and first not in self.topdocs and not self.exists(target):
                    self.report(f, no, f"'{m.group(0)}' points outside the repository (a user's clone has nothing there)")
        base = os.path.basename(f)
        if ext == ".md":
            for no, raw in enumerate(text.split("\n"), 1):
                if not OLD_COMMIT.search(raw):  # names paths of an older commit, which `git show` reads
                    self.check_names(f, no, raw)
        elif ext in CODE_C:
            comments, strings = c_comments(text)
            for no, c in comments:
                self.check_names(f, no, c)
            for no, s in strings:
                self.check_headers(f, no, s)
        elif ext in CODE_HASH or base == "CMakeLists.txt":
            for no, c in hash_comments(text, ext == ".py"):
                self.check_names(f, no, c)
            if ext == ".py":  # docstrings and usage texts are documentation too
                for m in re.finditer(r'"""(.*?)"""', text, re.S):
                    first = text.count("\n", 0, m.start(1)) + 1
                    for k, part in enumerate(m.group(1).split("\n")):
                        self.check_names(f, first + k, part)

    def run(self):
        for f in self.files:
            self.check_file(f)
        return self.findings


def main():
    root = repo_root(sys.argv)
    checker = Checker(root)
    if len(checker.files) < 20 or "scripts" not in checker.tops:
        print(f"check-paths: {root} does not look like the repository ({len(checker.files)} files)")
        return 1
    findings = checker.run()
    return finish(findings, f"check-paths: {len(checker.files)} files, {len(findings)} finding(s)")


if __name__ == "__main__":
    sys.exit(main())
