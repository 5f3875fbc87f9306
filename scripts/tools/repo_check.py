"""Shared by the structural checks run by CTest (check-include-graph.py, check-paths.py): the repository
root they check, its files (the ones git tracks plus the untracked ones it does not ignore, so a file not
yet added is checked too; a walk without build folders where git does not answer), and the one way they
end: every finding on its own line, a summary line, exit 1 when there is a finding."""
import os
import subprocess


def repo_root(argv):
    """The ROOT argument, else the repository two folders above this file, as an absolute path."""
    return os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                        "..", ".."))


def repo_files(root, under=()):
    """The repository's files (relative, sorted), only those below the folders of `under` when given."""
    files = []
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z", "--", *under],
                             check=True, capture_output=True).stdout.decode("utf-8", "replace")
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    if not files:
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not (x.startswith(".") and x != ".ci") and not x.startswith("build")
                       and x != "__pycache__"]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        if under:
            files = [f for f in files if any(f == u or f.startswith(u.rstrip("/") + "/") for u in under)]
    return sorted(files)


def finish(findings, summary):
    """Prints every finding and the summary; the exit code: 1 when there is a finding, else 0."""
    for x in findings:
        print(x)
    print(summary)
    return 1 if findings else 0
