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


def cli_options(args, env):
    """The tests name the ISA cap and the profile clock as ISA=... and
    PROF_CPU=1 in env, like the other settings of a run; metainfer takes
    them as options (--isa, --profile-cpu): moved from env to args here."""
    isa, prof = env.pop("ISA", None), env.pop("PROF_CPU", None)
    if len(args) > 1 and os.path.basename(args[0]) == "metainfer" and \
            args[1] in ("run", "quantize"):
        extra = (["--isa", isa] if isa else []) + \
            (["--profile-cpu"] if prof == "1" and args[1] == "run" else [])
        args = args[:2] + extra + args[2:]
    return args


def run(args, env=None, ok=True):
    """Run a command with env added to the environment; unless ok is
    False, a non-zero exit prints its output and stops the test."""
    e = dict(os.environ)
    e.update(env or {})
    args = cli_options(list(args), e)
    r = subprocess.run(args, capture_output=True, text=True, env=e)
    if ok and r.returncode:
        print(r.stdout, r.stderr)
        raise SystemExit("command failed: " + " ".join(args))
    return r


def finish():
    """A test's last words: exit 1 after any failed check."""
    if failures:
        print("%d FAILED" % len(failures))
        raise SystemExit(1)
    print("all ok")


def mi_run(model, x, tmp, env=None, threads=1, extra=()):
    """`metainfer run` of model on x (saved to tmp): the first output and
    the run's stderr."""
    import numpy as np

    inp, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "o.npy")
    np.save(inp, x)
    r = run([MI, "run", model, "--input", inp, "--output", out, "--threads", str(threads),
             *extra], env)
    return np.load(out), r.stderr


class QdqGraph:
    """The small mixed QDQ graphs of the layout tests: activations at
    scale 1/8, int8 weights per channel (scale 2^-9 or 2^-10, 127 in every
    channel: constant folding keeps the same int8 values), fp32 weights
    and biases small multiples of 1/8, so every fp32 sum is exact in any
    order.  Weights are drawn from rng in the order of the calls."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits = rng, [], []

    def node(self, op, ins, outs, **attrs):
        from onnx import helper

        self.nodes.append(helper.make_node(op, ins, outs, **attrs))

    def const(self, name, arr):
        from onnx import numpy_helper
        import numpy as np

        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def q(self, x, name, u8=True):
        """x -> QuantizeLinear -> DequantizeLinear, uint8 (zero point 128)
        or int8 (0)."""
        import numpy as np

        zp = np.array(128, np.uint8) if u8 else np.array(0, np.int8)
        self.node("QuantizeLinear", [x, self.const(name + "_s", np.float32(0.125)),
                                     self.const(name + "_z", zp)], [name + "_q"])
        self.node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_dq"])
        return name + "_dq"

    def conv8(self, x, name, cin, cout, k, s=1, group=1):
        """A conv on int8 weights (a DequantizeLinear of them), no bias."""
        import numpy as np

        w = self.rng.integers(-127, 128, (cout, cin // group, k, k)).astype(np.int8)
        w.reshape(cout, -1)[:, 0] = 127
        ws = np.where(np.arange(cout) % 2, 2.0 ** -9, 2.0 ** -10).astype(np.float32)
        self.node("DequantizeLinear", [self.const(name + "_w", w), self.const(name + "_ws", ws),
                                       self.const(name + "_wz", np.zeros(cout, np.int8))],
                  [name + "_wdq"], axis=0)
        self.node("Conv", [x, name + "_wdq"], [name + "_y"], pads=[k // 2] * 4,
                  strides=[s, s], group=group)
        return name + "_y"

    def conv32(self, x, name, cin, cout, k, s=1, group=1, bias=True):
        import numpy as np

        w = (self.rng.integers(-4, 5, (cout, cin // group, k, k)) / 8).astype(np.float32)
        ins = [x, self.const(name + "_w", w)]
        if bias:
            ins.append(self.const(name + "_b",
                                  (self.rng.integers(-8, 9, cout) / 8).astype(np.float32)))
        self.node("Conv", ins, [name + "_y"], pads=[k // 2] * 4, strides=[s, s], group=group)
        return name + "_y"

    def relu(self, x):
        self.node("Relu", [x], [x + "_r"])
        return x + "_r"

    def save(self, path, name, x_shape, y, y_shape):
        """The graph from float input "x" to float output y (renamed "y"
        by an Identity), checked and written to path."""
        import onnx
        from onnx import TensorProto, helper

        self.node("Identity", [y], ["y"])
        gr = helper.make_graph(self.nodes, name,
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                               self.inits)
        m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(m)
        onnx.save(m, path)
