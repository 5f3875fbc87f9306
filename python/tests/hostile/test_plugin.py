"""The hostile battery, classes 2, 17: plugin: backends that crash, hang, exit or break the ABI, through every
command; what a plugin can reach (descriptors, claims that load it, a library swapped mid-gate).

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import re
import subprocess

import pytest

from .battery import (params, IDX, SMALL, SDPA, OK_PLUGIN, plugin_path, Attack, plug, write, has, all_of, short_output,
                      faster, report_json, corpus)


PLUGIN_MODES = ["exit_run", "underscore_exit_run", "exit_ctor", "segv", "abort", "stack", "loop", "abi_data",
                "msg_nonul"]


def attacks():
    A = []
    # (2) plugin faults through repro, gate, fuzz, bisect-run
    env = {"AO_PLUGIN_TIMEOUT": "3"}
    for m in PLUGIN_MODES:
        load_fault = m in ("exit_ctor", "abi_data")
        rc_run = {1, 2} if load_fault else {1}
        A.append(Attack(2, f"plugin {m} repro", ["repro", IDX, "--backend", plug(m)], rc_run, env=env,
                        check=all_of(short_output(20000), has("hostile_plugin"))))
        A.append(Attack(2, f"plugin {m} repro --report-dir", ["repro", SMALL, "--backend", plug(m),
                                                               "--report-dir", "rep"], rc_run, env=env,
                        check=None if load_fault else report_json("complete"), quick=(m == "segv")))
        A.append(Attack(2, f"plugin {m} gate", ["gate", "{corpus}", "--backend", plug(m), "--report-dir", "rep"],
                        rc_run, env=env, setup=corpus([SMALL, SDPA]),
                        check=None if load_fault else report_json("complete")))
        # a time budget bounds fuzz (shrinking included) to the budget plus one run (AO_PLUGIN_TIMEOUT=3 s here)
        A.append(Attack(2, f"plugin {m} fuzz", ["fuzz", "--backend", plug(m), "--budget", "5s", "--seed", "3",
                                                "--no-save"], rc_run, env=env, check=faster(5 + 3 + 2),
                        quick=(m in ("exit_run", "stack"))))
        A.append(Attack(2, f"plugin {m} bisect-run", ["bisect-run", SMALL, "--backend", plug(m), "--timeout", "20"],
                        {1, 125, 128} if load_fault else {1}, env=env, quick=(m in ("abort", "loop"))))
        A.append(Attack(2, f"plugin {m} bisect-run --crash-is-skip", ["bisect-run", SMALL, "--backend", plug(m),
                                                                       "--timeout", "20", "--crash-is-skip"],
                        {1, 125, 128}, env=env, quick=False))
    # a plugin that truncates its shared output memory: the harness reads the outputs back through that
    # memory, so it must not die of SIGBUS (the memory is sealed at its size); every report is written
    trunc = plug("truncate_outputs")
    A.append(Attack(2, "plugin truncate_outputs repro --report-dir", ["repro", SMALL, "--backend", trunc,
                                                                      "--report-dir", "rep"], {1},
                    check=all_of(report_json("complete"), lambda r, c: "SIGBUS" if "SIGBUS" in r.out else None)))
    A.append(Attack(2, "plugin truncate_outputs gate", ["gate", "{corpus}", "--backend", trunc, "--report-dir", "rep"],
                    {1}, setup=corpus([SMALL, SDPA]), check=report_json("complete")))
    A.append(Attack(2, "plugin truncate_outputs fuzz", ["fuzz", "--backend", trunc, "--budget", "3", "--seed", "3",
                                                        "--no-save"], {1}, check=faster(30)))
    A.append(Attack(2, "example plugin ok (control)", ["repro", IDX, "--backend", OK_PLUGIN], {0}))
    A.append(Attack(2, "example plugin bug=topleft-cp", ["repro", IDX, "--backend", OK_PLUGIN + ":bug=topleft-cp"], {1}))

    # (17) plugin isolation: the descriptors library code holds, claims of plugins that are not run, an ABI
    # swapped mid-gate (a copied answer needs the reference's bytes: PluginIsolation.TheReferenceAnswer... in CTest)
    two = "op=sdpa docs=40,24 hq=2 hkv=1 dim=16 seed=4"
    A.append(Attack(17, "plugin holds no descriptor of the harness (report-dir lock)",
                    ["gate", "{corpus}", "--no-explain", "--report-dir", "rep", "--backend", plug("list_fds")], {1},
                    setup=corpus([two]),
                    check=lambda r, c: None if re.search(r"fds: 3=pipe:\[\d+\];4=/memfd:ao-plugin-request[^;]*;"
                                                         r"5=/memfd:ao-plugin-outputs[^;]*;\)", r.out)
                    else f"unexpected descriptors: {r.out[-300:]!r}"))
    A.append(Attack(17, "claim of a plugin the gate does not run loads nothing",
                    ["gate", "{corpus}", "--backend", "cpu-ref"], {0},
                    setup=corpus([f"# catches: {plug('mark_ctor')}", two]), env={"AO_HOSTILE_MARK_FILE": "{dir}/mark"},
                    needs=[plugin_path("hostile_plugin_mark_ctor")],
                    check=lambda r, c: "the claimed plugin's constructor ran" if os.path.exists(
                        os.path.join(c["dir"], "mark")) else None))

    def swap_abi(pid, ctx):
        lib = os.path.join(ctx["dir"], "libswap.so")
        os.remove(lib)
        subprocess.run(["cp", plugin_path("example_plugin_abi99"), lib])

    def swap_setup(d, ctx):
        subprocess.run(["cp", OK_PLUGIN[len("plugin:"):], os.path.join(d, "libswap.so")])
        write(os.path.join(d, "c.case"), "\n".join(f"{two[:-1]}{s}" for s in range(1, 400)) + "\n")
        ctx["corpus"] = os.path.join(d, "c.case")
        return None
    A.append(Attack(17, "plugin .so swapped for ABI 99 mid-gate is refused at its next run",
                    ["gate", "{corpus}", "--no-explain", "--backend", "plugin:{dir}/libswap.so"], {1},
                    setup=swap_setup, during=(1.5, swap_abi), limit=120, check=has("plugin ABI version 99"),
                    needs=[OK_PLUGIN[len("plugin:"):], plugin_path("example_plugin_abi99")]))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_plugin(attack, hostile):
    hostile.check(attack)
