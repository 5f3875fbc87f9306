#!/usr/bin/env python3
"""Client of the warm host (attn_oracle.adapters.serve): `python3 -m attn_oracle.adapters.client --socket PATH
ADAPTER [ADAPTER ARGS...] CASE_DIR` runs the adapter in the host and exits with its code (its stderr is
printed). No host: exit 1."""
import json
import socket
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--socket":
        print("usage: python3 -m attn_oracle.adapters.client --socket PATH ADAPTER [ARGS...] CASE_DIR", file=sys.stderr)
        return 2
    path, adapter, argv = args[1], args[2], args[3:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        print(f"ao_client: no warm host (attn_oracle.adapters.serve) at {path}: {e}", file=sys.stderr)
        return 1
    s.sendall((json.dumps({"adapter": adapter, "argv": argv}) + "\n").encode())
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            print("ao_client: the server closed the connection without an answer", file=sys.stderr)
            return 1
        data += chunk
    rep = json.loads(data)
    sys.stderr.write(rep["stderr"])
    return int(rep["code"])


if __name__ == "__main__":
    sys.exit(main())
