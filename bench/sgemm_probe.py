#!/usr/bin/env python3
"""The best sgemm this machine has, and the cores' fp32 peak, measured in one run (bench/run.sh).

  sgemm_probe.py [--n 2048] [--threads T] [--reps 3] [--lib SPEC]

Without --lib: probes every candidate found, each in its own process (a BLAS reads OPENBLAS_CORETYPE when it is
loaded), round-robin over --reps rounds, and prints one JSON line per candidate, then one for the peak. Candidates:
  numpy            numpy.matmul with numpy's own BLAS (a wheel's bundled OpenBLAS, or Debian's libblas.so.3)
  openblas         Debian's libopenblas (the build's fallback BLAS), its own CPU detection
  openblas:CORE    the same library with OPENBLAS_CORETYPE=CORE, CORE named from the CPU's flags
  scipy-openblas   PyPI's scipy-openblas32 (prefixed symbols, DYNAMIC_ARCH): the build's BLAS
  blis             Debian's BLIS (libblis4), where installed
Libraries are looked for in LD_LIBRARY_PATH's folders (a device pack's lib/), then .deps/scipy-openblas/lib
(scripts/install-deps.sh) and the system's.
GFLOP/s are 2*n^3 / the best wall time of 3 calls after a warm-up, with the library's threads set to T (default:
OMP_NUM_THREADS, else all CPUs). --lib SPEC measures one candidate in this process (what the driver runs).
"""
import argparse
import ctypes
import ctypes.util
import glob
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def coretype_from_flags(flags):
    """The OpenBLAS kernel set a CPU with these flags can run, named as OPENBLAS_CORETYPE spells it."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def find_lib(name):
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [os.path.join(ROOT, ".deps", "scipy-openblas", "lib"), DEBIAN_LIB]
    for d in dirs:
        hits = sorted(glob.glob(os.path.join(d, name)))
        if hits:
            return hits[0]
    return None


def scipy_openblas_lib():
    return find_lib("libscipy_openblas*.so")


def candidates():
    c = []
    try:
        import numpy  # noqa: F401
        c.append("numpy")
    except ImportError:
        pass
    if find_lib("libopenblas.so.0"):
        c.append("openblas")
        core = coretype_from_flags(cpu_flags())
        if core:
            c.append("openblas:" + core)
    if scipy_openblas_lib():
        c.append("scipy-openblas")
    if find_lib("libblis.so.4"):
        c.append("blis")
    return c


def time_best(fn, reps=3):
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def probe_numpy(n, threads):
    import numpy as np
    a = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)
    cfg = ""
    try:
        import io
        import contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            np.show_config()
        text = buf.getvalue()
        m = re.search(r"openblas[^\n]*?(\d+\.\d+\.\d+)", text, re.I) or re.search(r"name: (\S+)", text)
        cfg = m.group(0).strip() if m else ""
    except Exception:  # show_config's format differs between numpy releases
        pass
    info = f"numpy {np.__version__}" + (f", {cfg}" if cfg else "")
    return time_best(lambda: np.matmul(a, b)), info


def probe_cblas(path, prefix, n, threads, kind):
    lib = ctypes.CDLL(path)
    info = os.path.basename(path)
    if kind == "openblas":
        getattr(lib, prefix + "openblas_set_num_threads")(ctypes.c_int(threads))
        for f in ("openblas_get_config", "openblas_get_corename"):
            g = getattr(lib, prefix + f)
            g.restype = ctypes.c_char_p
            info += "; " + g().decode()
    elif kind == "blis":
        lib.bli_thread_set_num_threads(ctypes.c_long(threads))
        g = lib.bli_info_get_version_str
        g.restype = ctypes.c_char_p
        info += f"; BLIS {g().decode()}"
        try:
            g = lib.bli_arch_string
            g.restype = ctypes.c_char_p
            g.argtypes = [ctypes.c_int]
            lib.bli_arch_query_id.restype = ctypes.c_int
            info += f"; arch {g(lib.bli_arch_query_id()).decode()}"
        except AttributeError:
            pass
    A, B, C = ((ctypes.c_float * (n * n))() for _ in range(3))  # zeros: no denormals, the same work
    sgemm = getattr(lib, prefix + "cblas_sgemm")
    sgemm.restype = None
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    row_major, no_trans = 101, 111
    return time_best(lambda: sgemm(row_major, no_trans, no_trans, n, n, n, 1.0, A, n, B, n, 0.0, C, n)), info


def probe_one(spec, n, threads):
    if spec == "numpy":
        return probe_numpy(n, threads)
    if spec.startswith("openblas"):
        return probe_cblas(find_lib("libopenblas.so.0"), "", n, threads, "openblas")
    if spec == "scipy-openblas":
        return probe_cblas(scipy_openblas_lib(), "scipy_", n, threads, "openblas")
    if spec == "blis":
        return probe_cblas(find_lib("libblis.so.4"), "", n, threads, "blis")
    raise SystemExit(f"sgemm_probe: unknown --lib {spec!r}")


def child_env(spec, threads):
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # each candidate its own detection unless named
        env.pop(k, None)
    if ":" in spec:
        env["OPENBLAS_CORETYPE"] = spec.split(":", 1)[1]
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


def peak(threads):
    """fp32 peak of `threads` cores from the flags and the clock: FMA units x lanes x 2 x GHz. Stated as such:
    the clock is the highest /proc/cpuinfo or cpufreq reports (a VM may show only the base clock), and the FMA
    unit count is the common one for the vector width (2; some AVX-512 parts have one 512-bit FMA unit)."""
    flags = cpu_flags()
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags or "avx" in flags else 4
    ghz = 0.0
    src = "?"
    try:
        mx = open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read().strip()
        ghz, src = int(mx) / 1e6, "cpufreq max"
    except OSError:
        mhz = [float(x) for x in re.findall(r"cpu MHz\s*:\s*([\d.]+)", open("/proc/cpuinfo").read())]
        if mhz:
            ghz, src = max(mhz) / 1000, "/proc/cpuinfo cpu MHz (max over CPUs)"
    fma_units = 2
    gflops = threads * fma_units * lanes * 2 * ghz
    return {"impl": "peak", "gflops": round(gflops, 1), "threads": threads,
            "info": f"{threads} cores x {fma_units} FMA x {lanes} fp32 lanes x 2 x {ghz:.2f} GHz ({src}); "
                    f"{'AVX-512' if lanes == 16 else 'AVX2' if lanes == 8 else 'SSE'} from the flags"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--lib")
    a = p.parse_args()
    if a.lib:
        sec, info = probe_one(a.lib, a.n, a.threads)
        print(json.dumps({"impl": a.lib, "seconds": sec, "gflops": 2 * a.n ** 3 / sec / 1e9, "threads": a.threads,
                          "n": a.n, "info": info}))
        return
    runs = {}
    for _ in range(a.reps):  # round-robin: a load spike hits every candidate alike
        for spec in candidates():
            r = subprocess.run([sys.executable, __file__, "--lib", spec, "--n", str(a.n), "--threads", str(a.threads)],
                               capture_output=True, text=True, env=child_env(spec, a.threads))
            try:
                runs.setdefault(spec, []).append(json.loads(r.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                runs.setdefault(spec, []).append({"impl": spec, "error": (r.stderr.strip() or "no output")[-300:]})
    for spec, rs in runs.items():
        ok = [r for r in rs if "gflops" in r]
        if ok:
            best = max(ok, key=lambda r: r["gflops"])
            best["reps"] = [round(r["gflops"], 1) for r in ok]
            print(json.dumps(best))
        else:
            print(json.dumps(rs[-1]))
    print(json.dumps(peak(a.threads)))


if __name__ == "__main__":
    main()
