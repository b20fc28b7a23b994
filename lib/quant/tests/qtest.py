# SPDX-License-Identifier: GPL-2.0-only
"""What the Python tests of lib/quant share: paths, check(), run()."""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
MI = os.path.join(ROOT, "build/metainfer")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, env=None, ok=True):
    """Run a command with env added to the environment; unless ok is
    False, a non-zero exit prints its output and stops the test."""
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(args, capture_output=True, text=True, env=e)
    if ok and r.returncode:
        print(r.stdout, r.stderr)
        raise SystemExit("command failed: " + " ".join(args))
    return r
