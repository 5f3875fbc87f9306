"""`python -m attn_oracle.adapters list [--json]`: every adapter with its ops, passes, knobs and requirements;
`probe [NAME...]`: which of them can run a case here (exit 0 when every one named can)."""
import argparse
import json
import sys

from .registry import find, registry


def _list(as_json):
    adapters = registry()
    if as_json:
        print(json.dumps([a.as_json() for a in adapters.values()], indent=1))
        return 0
    for a in adapters.values():
        print(f"{a.name}: {a.what}")
        print(f"  ops: {','.join(a.ops)}   passes: {','.join(a.passes)}   "
              f"requires: {', '.join(a.requires) or '-'}   in process: {a.kernel or '-'}")
        for k in a.knobs():
            choices = "|".join(map(str, k["choices"])) if isinstance(k["choices"], list) else k["choices"] or "(flag)"
            print(f"  {k['flag']} {choices}   default {k['default']}" + (f"   {k['help']}" if k["help"] else ""))
        if a.wheels:
            print(f"  wheels: {' '.join(a.wheels)}")
        print(f"  run: {a.command()}")
    return 0


def _probe(names):
    adapters = [find(n) for n in names] if names else list(registry().values())
    ok = True
    for a in adapters:
        why = a.missing()
        ok = ok and not why
        print(f"{a.name}: " + ("runs here" if not why else "cannot run here: " + "; ".join(why)))
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m attn_oracle.adapters")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="every adapter: ops, passes, knobs, requirements")
    ls.add_argument("--json", action="store_true")
    pr = sub.add_parser("probe", help="which adapters can run a case here")
    pr.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    try:
        return _list(a.json) if a.cmd == "list" else _probe(a.names)
    except KeyError as e:
        print(f"attn_oracle.adapters: {e.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
