#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Add, list or remove hardware intents in an ONNX model's metadata_props.

An intent is the metadata key ``metainfer.intent.NAME`` with the value
``KIND:NODES[:opt=val,...]`` (Documentation/search.rst, "Hardware
intents"); ``metainfer tune`` honours them.  This script checks the
syntax and that every node named exists in the graph (a plan's
"<op>#<index>" name of an unnamed node is taken as it is); the library
checks again, against the planned model, when it searches.

  tools/models/intent.py MODEL.onnx --list
  tools/models/intent.py MODEL.onnx -o OUT.onnx \\
      --add 'mem=MEMORY_CONSTRAINED:conv1..conv5:max_mem=1M,precisions=fp32'
  tools/models/intent.py MODEL.onnx -o OUT.onnx --remove mem

Run with Debian's python (/usr/bin/python3: onnx 1.12).  Errors are one
line on stderr and exit 2.
"""
import argparse
import re
import sys

import onnx

KEY = "metainfer.intent."
KINDS = ("LATENCY_CRITICAL", "MEMORY_CONSTRAINED", "POWER_SENSITIVE")
OPTS = ("weight", "max_mem", "layout", "precisions")
LAYOUTS = ("NCHW", "NHWC", "NCHWc")


class Bad(Exception):
    pass


def check_spec(name, spec, nodes):
    """Raise Bad naming what is wrong with one intent."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,63}", name):
        raise Bad(f"intent name '{name}': 1-63 letters, digits, '_' or '-'")
    parts = spec.split(":", 2)
    if parts[0] not in KINDS:
        raise Bad(f"intent '{name}': unknown intent '{parts[0]}' "
                  f"({', '.join(KINDS)})")
    if len(parts) < 2 or not parts[1]:
        raise Bad(f"intent '{name}': no nodes (KIND:NODES[:opt=val,...])")
    sel = parts[1]
    if sel != "*":
        if ".." in sel and "+" in sel:
            raise Bad(f"intent '{name}': a region A..B or a list A+B, "
                      "not both")
        for n in sel.split("..") if ".." in sel else sel.split("+"):
            # "<op>#<index>": the plan's name of an unnamed node (an
            # index of the normalized graph: the library checks it)
            if n not in nodes and not re.fullmatch(r"[A-Za-z]\w*#\d+", n):
                raise Bad(f"intent '{name}': unknown node '{n}'")
    if len(parts) < 3:
        return
    for opt in parts[2].split(","):
        key, eq, val = opt.partition("=")
        if not eq or not val:
            raise Bad(f"intent '{name}': option '{opt}' is not opt=value")
        if key not in OPTS:
            raise Bad(f"intent '{name}': unknown option '{key}' "
                      f"({', '.join(OPTS)})")
        if key == "max_mem" and parts[0] != "MEMORY_CONSTRAINED":
            raise Bad(f"intent '{name}': max_mem is an option of "
                      "MEMORY_CONSTRAINED only")
        if key == "max_mem" and not re.fullmatch(r"[0-9.]+[kKmMgG]?", val):
            raise Bad(f"intent '{name}': bad max_mem '{val}'")
        if key == "weight":
            try:
                ok = float(val) > 0
            except ValueError:
                ok = False
            if not ok:
                raise Bad(f"intent '{name}': bad weight '{val}'")
        if key == "layout" and val not in LAYOUTS:
            raise Bad(f"intent '{name}': unknown layout '{val}' "
                      f"({', '.join(LAYOUTS)})")
        if key == "precisions":
            for p in val.split("+"):
                if p not in ("int8", "fp32"):
                    raise Bad(f"intent '{name}': unknown precision '{p}'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("-o", "--output", help="the model with the intents")
    ap.add_argument("--add", action="append", default=[],
                    metavar="NAME=KIND:NODES[:opts]")
    ap.add_argument("--remove", action="append", default=[], metavar="NAME")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    try:
        m = onnx.load(a.model)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds
        print(f"intent.py: {a.model}: {e}", file=sys.stderr)
        return 2
    nodes = {n.name for n in m.graph.node if n.name}
    props = {p.key: p.value for p in m.metadata_props}
    try:
        for name in a.remove:
            if KEY + name not in props:
                raise Bad(f"intent '{name}': not in {a.model}")
            del props[KEY + name]
        for s in a.add:
            name, eq, spec = s.partition("=")
            if not eq:
                raise Bad(f"'{s}' is not NAME=KIND:NODES[:opts]")
            check_spec(name, spec, nodes)
            props[KEY + name] = spec
    except Bad as e:
        print(f"intent.py: {e}", file=sys.stderr)
        return 2
    if a.list or not (a.add or a.remove):
        for k, v in props.items():
            if k.startswith(KEY):
                print(f"{k[len(KEY):]}={v}")
    if a.add or a.remove:
        if not a.output:
            print("intent.py: -o OUT.onnx is required with --add/--remove",
                  file=sys.stderr)
            return 2
        del m.metadata_props[:]
        for k, v in props.items():
            m.metadata_props.add(key=k, value=v)
        onnx.save(m, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
