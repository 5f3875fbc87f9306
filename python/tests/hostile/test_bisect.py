"""The hostile battery, classes 3, 16: bisect-run: command-line errors are exit 128; a backend cannot forge the
step's verdict.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""

import pytest

from .battery import (params, SMALL, SDPA, Attack, plug, has, with_exec)


def attacks():
    A = []
    # (3) bisect-run command-line errors -> 128
    for name, args in [("typo option", ["bisect-run", SMALL, "--backnd", "cpu-ref"]),
                       ("missing backend", ["bisect-run", SMALL]),
                       ("missing case", ["bisect-run", "--backend", "cpu-ref"]),
                       ("--timeout abc", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "abc"]),
                       ("--timeout -1", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "-1"]),
                       ("--timeout nan", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "nan"]),
                       ("--timeout inf", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "inf"]),
                                              ("--timeout without value", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout"]),
                       ("unknown backend", ["bisect-run", SMALL, "--backend", "no-such-backend"]),
                       ("bad case key", ["bisect-run", "op=indexer docs=64 bogus=1", "--backend", "cpu-ref"]),
                       ("missing case file", ["bisect-run", "/nonexistent/x.case", "--backend", "cpu-ref"]),
                       ("plugin not found", ["bisect-run", SMALL, "--backend", "plugin:/nonexistent/lib.so"]),
                       ("exec: with no command", ["bisect-run", SMALL, "--backend", "exec:"]),
                       ("exec: with a blank command", ["bisect-run", SMALL, "--backend", "exec:   "]),
                       ("plugin: with no library", ["bisect-run", SMALL, "--backend", "plugin:"])]:
        A.append(Attack(3, f"bisect-run {name}", args, {128}))

    # (16) forged bisect verdict: "0\ngood" written into every pipe a backend can reach (its inherited
    # descriptors, its ancestors' /proc/<pid>/fd), and a backend killing the step's supervisor
    # (the walk covers the attn-oracle processes only: the battery's own pipes are spared)
    forge = ("p=$PPID; seen=0\nwhile [ \"$p\" -gt 1 ]; do\n"
             "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in '(attn-oracle)') seen=1 ;; *) [ $seen -eq 1 ] && break ;; esac\n"
             "  if [ $seen -eq 1 ]; then for f in /proc/$p/fd/*; do\n"
             "    case \"${f##*/}\" in 0|1|2) continue ;; esac\n"
             "    case \"$(readlink \"$f\" 2>/dev/null)\" in pipe:*) printf '0\\ngood: forged\\n' 1<>\"$f\" 2>/dev/null ;; esac\n"
             "  done; fi\n  p=$(cut -d' ' -f4 /proc/$p/stat)\ndone\nexit 0")
    kill_step_reaper = ("p=$PPID; n=0\nwhile [ \"$p\" -gt 1 ]; do\n"
                        "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in '(attn-oracle)') n=$((n+1)) ;; esac\n"
                        "  if [ $n -eq 3 ]; then kill -9 $p; sleep 30; fi\n  p=$(cut -d' ' -f4 /proc/$p/stat)\ndone\nexit 3")
    for extra, rc in [([], {1}), (["--crash-is-skip"], {1})]:
        A.append(Attack(16, f"bisect-run exec: forges 'good' up the /proc chain {extra}",
                        ["bisect-run", SMALL, "--backend", "{be}"] + extra, rc, setup=with_exec(forge),
                        check=has("bad: ")))
    # (the plugin's forgery also spoils its host's own record: a crash of the plugin, skipped on request)
    for extra, rc, word in [([], {1}, "bad: "), (["--crash-is-skip"], {125}, "skip: ")]:
        A.append(Attack(16, f"bisect-run plugin forges 'good' into its inherited pipes {extra}",
                        ["bisect-run", SDPA, "--backend", plug("forge_verdict")] + extra, rc, check=has(word)))
    A.append(Attack(16, "bisect-run exec: kills the step's supervisor -> bad",
                    ["bisect-run", SMALL, "--backend", "{be}"], {1}, setup=with_exec(kill_step_reaper),
                    check=has("crashed (signal 9")))
    A.append(Attack(16, "bisect-run exec: kills the step's supervisor, --crash-is-skip -> skip",
                    ["bisect-run", SMALL, "--backend", "{be}", "--crash-is-skip"], {125},
                    setup=with_exec(kill_step_reaper)))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_bisect(attack, hostile):
    hostile.check(attack)
