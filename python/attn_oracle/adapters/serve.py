#!/usr/bin/env python3
"""A warm host for `exec:` adapters: imports torch (and initialises CUDA) once, then runs adapters of the
registry in-process for the client (attn_oracle.adapters.client), so each case costs the kernel, not a
Python+CUDA start.

  python3 -m attn_oracle.adapters.serve --socket /tmp/ao.sock &
  attn-oracle repro ... --backend 'exec:python3 -m attn_oracle.adapters.client --socket /tmp/ao.sock torch_indexer'

An adapter is named as the registry names it (its module) and runs as run(argv) -> exit code (skip = SystemExit(125)). Requests
are served one at a time; an adapter that crashes the interpreter takes the server with it (the
client then exits 1, which the harness reports as a backend error).
"""
import argparse
import contextlib
import io
import json
import os
import socket
import sys
import traceback

from .registry import find


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--no-torch", action="store_true", help="do not pre-import torch (tests)")
    ap.add_argument("--idle-exit", type=float, default=0, help="exit after this many idle seconds (0: never)")
    a = ap.parse_args()
    if not a.no_torch:
        try:  # warm torch and CUDA once; adapters that need torch report its absence themselves
            import torch
            if torch.cuda.is_available():
                torch.zeros(1, device="cuda")
        except ImportError as e:
            print(f"ao_serve: torch not importable ({e}); serving anyway", file=sys.stderr, flush=True)
    if os.path.exists(a.socket):
        os.remove(a.socket)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(a.socket)
    srv.listen(4)
    print(f"ao_serve: listening on {a.socket}", file=sys.stderr, flush=True)
    if a.idle_exit > 0:
        srv.settimeout(a.idle_exit)
    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            print("ao_serve: idle, exiting", file=sys.stderr)
            break
        conn.settimeout(None)
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            try:
                req = json.loads(data)
            except ValueError:
                continue
            if req.get("adapter") == "__quit__":
                conn.sendall(b'{"code": 0, "stderr": ""}\n')
                break
            err = io.StringIO()
            code = 0
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
                try:
                    mod = find(str(req["adapter"])).module
                    code = int(mod.run(req["argv"]) or 0)
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                    if isinstance(e.code, str):
                        print(e.code, file=sys.stderr)
                except BaseException:  # noqa: BLE001 - any adapter failure is reported, not fatal
                    traceback.print_exc()
                    code = 1
            conn.sendall((json.dumps({"code": code, "stderr": err.getvalue()}) + "\n").encode())
    try:
        os.remove(a.socket)
    except OSError:
        pass


if __name__ == "__main__":
    main()
