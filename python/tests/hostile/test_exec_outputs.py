"""The hostile battery, classes 4, 5, 8: exec: outputs that are not regular files, huge .npy headers and outputs,
stderr that is not UTF-8.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import shlex

import pytest

from .battery import (params, IDX, SMALL, SDPA, Attack, exec_script, all_of, short_output, faster, report_json,
                      corpus, with_exec, chain, npy_header)


def attacks():
    A = []
    # (4) exec outputs that are not regular files
    env5 = {"AO_EXEC_TIMEOUT": "5"}
    for kind, body in [("FIFO", 'rm -f "$1/{f}"; mkfifo "$1/{f}"'),
                       ("symlink to dir", 'rm -f "$1/{f}"; ln -s /tmp "$1/{f}"'),
                       ("symlink to file", 'rm -f "$1/{f}"; ln -s /etc/passwd "$1/{f}"'),
                       ("symlink to /dev/zero", 'rm -f "$1/{f}"; ln -s /dev/zero "$1/{f}"'),
                       ("directory", 'rm -f "$1/{f}"; mkdir "$1/{f}"'),
                       ("missing", 'rm -f "$1/{f}"')]:
        for case, f in [(IDX, "topk.npy"), (SDPA, "o.npy")]:
            A.append(Attack(4, f"exec output {f} is {kind}", ["repro", case, "--backend", "{be}"], {1}, env=env5,
                            setup=with_exec(body.format(f=f)), limit=30,
                            check=all_of(faster(15), short_output(20000),
                                         lambda r, c: None if "9223372036854775807" not in r.out
                                         else "absurd size in message")))

    # (5) huge .npy header, huge stderr
    def huge_npy(shape, sparse_gib=0):
        def s(d, ctx):
            hdr = npy_header("<i4", shape)
            py = (f"import sys;p=sys.argv[1]+'/topk.npy';f=open(p,'wb');f.write({hdr!r});"
                  + (f"f.truncate({sparse_gib}<<30);" if sparse_gib else "") + "f.close()")
            ctx["be"] = exec_script(d, "be.sh", f"python3 -c {shlex.quote(py)} \"$1\"")
        return s
    A.append(Attack(5, "npy header shape 1e9x8 (header only)", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((1000000000, 8)), max_rss_mib=1024))
    A.append(Attack(5, "npy header shape 1e9x8 sparse 3 GiB", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((1000000000, 8), 3), max_rss_mib=1024))
    A.append(Attack(5, "npy header shape 2^62", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((4611686018427387904,)), max_rss_mib=1024))
    A.append(Attack(5, "npy header negative shape", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((-1, 8)), max_rss_mib=1024))
    A.append(Attack(5, "npy header length 65535 garbage", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("python3 -c \"import sys;open(sys.argv[1]+'/topk.npy','wb').write("
                                    "b'\\x93NUMPY\\x01\\x00\\xff\\xff'+b'{' * 65535)\" \"$1\""),
                    max_rss_mib=1024))
    A.append(Attack(5, "npy v2 header 4 GiB length", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("python3 -c \"import sys;open(sys.argv[1]+'/topk.npy','wb').write("
                                    "b'\\x93NUMPY\\x02\\x00\\xff\\xff\\xff\\xff')\" \"$1\""), max_rss_mib=1024))
    A.append(Attack(5, "stderr 600 MB then exit 3", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 600000000 /dev/zero | tr '\\0' x >&2; exit 3"),
                    max_rss_mib=600, check=short_output(100000), limit=90, quick=False))
    A.append(Attack(5, "stderr 50 MB no newline then exit 0", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 50000000 /dev/zero | tr '\\0' y >&2; exit 0"),
                    max_rss_mib=600, check=short_output(100000)))
    A.append(Attack(5, "stdout 50 MB then exit 1", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 50000000 /dev/zero | tr '\\0' z; exit 1"),
                    max_rss_mib=600, check=short_output(100000)))

    # (8) non-UTF-8 stderr with --report-dir
    for name, body in [("raw 0xff 0xfe", "printf 'bad \\377\\376 bytes\\n' >&2; exit 1"),
                       ("cut mid-character", "python3 -c \"import sys;sys.stderr.buffer.write('é'.encode()*3001)\";"
                                             " exit 1"),
                       ("lone surrogate bytes", "printf '\\355\\240\\200\\n' >&2; exit 4"),
                       ("NUL and controls", "printf 'a\\000b\\001\\033[31mred\\n' >&2; exit 1"),
                       ("skip reason non-UTF-8", "printf 'skip \\377\\n' >&2; exit 125")]:
        A.append(Attack(8, f"repro exec stderr {name}", ["repro", IDX, "--backend", "{be}", "--report-dir", "rep"],
                        {1, 125}, setup=with_exec(body), check=report_json("complete")))
        A.append(Attack(8, f"gate exec stderr {name}", ["gate", "{corpus}", "--backend", "{be}", "--report-dir",
                                                        "rep"], {1, 125},
                        setup=chain(with_exec(body), corpus([SMALL, SDPA])), check=report_json("complete"),
                        quick=(name == "cut mid-character")))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_exec_outputs(attack, hostile):
    hostile.check(attack)
