#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end checks of the transformer/shuffle fast paths through the
executor (in-place Concat, Slice/Transpose views, GELU/LayerNorm/Softmax,
copies): small seeded ONNX models run by `metainfer run` with the fast
kernels (of ISA, the CPU's without it; the arena is NaN-poisoned when
planned; 1 and 2 threads) and with --reference; every output must agree
(normalized error <= 1e-5).  Also prints which op types ran fast
(--profile) and checks the expected ones did.
usage: xform-models.py METAINFER TMPDIR [ISA]"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

mi, out = sys.argv[1], sys.argv[2]
isa = ['--isa', sys.argv[3]] if len(sys.argv) > 3 else []
# metainfer refuses an ISA the CPU lacks: nothing to test then
need = {'avx2': {'avx2', 'fma'}, 'avx512': {'avx512f', 'avx512bw', 'avx512vl', 'avx512dq'}}
with open('/proc/cpuinfo') as f:
    flags = set(next((l for l in f if l.startswith('flags')), '').split())
if isa and not need.get(isa[1], set()) <= flags:
    print(f'xform-models: skipped, this CPU has no {isa[1]}')
    sys.exit(0)
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
fails = 0


def init(name, shape, lo=-1.0, hi=1.0):
    return nh.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def i64(name, vals):
    return nh.from_array(np.array(vals, np.int64), name)


def f32(name, v):
    return nh.from_array(np.array(v, np.float32), name)


def vi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def conv(x, w, y, cin, cout, inits, k=1):
    inits.append(init(w, [cout, cin, k, k], -0.5, 0.5))
    return h.make_node('Conv', [x, w], [y], pads=[k // 2] * 4)


def shuffle_model():
    """ShuffleNetV2-like: channel shuffle, Slice views, in-place Concat
    (also nested, and cases that must not be in place)."""
    C, H = 24, 10
    inits, nodes = [], []
    nodes.append(conv('x', 'w0', 'a', 8, C, inits))
    for blk in range(2):
        p = f'b{blk}'
        src = 'a' if blk == 0 else 'b0_out'
        inits += [i64(p + 's0', [0]), i64(p + 's1', [C // 2]),
                  i64(p + 's2', [C]), i64(p + 'ax', [1])]
        nodes.append(h.make_node('Slice', [src, p + 's0', p + 's1', p + 'ax'], [p + 'x1']))
        nodes.append(h.make_node('Slice', [src, p + 's1', p + 's2', p + 'ax'], [p + 'x2']))
        nodes.append(conv(p + 'x2', p + 'w1', p + 'c1', C // 2, C // 2, inits))
        nodes.append(h.make_node('Relu', [p + 'c1'], [p + 'r1']))
        nodes.append(conv(p + 'r1', p + 'w2', p + 'c2', C // 2, C // 2, inits, 3))
        nodes.append(h.make_node('Concat', [p + 'x1', p + 'c2'], [p + 'cat'], axis=1))
        inits += [i64(p + 'sh1', [1, 2, C // 2, H, H]), i64(p + 'sh2', [1, C, H, H])]
        nodes.append(h.make_node('Reshape', [p + 'cat', p + 'sh1'], [p + 'rs']))
        nodes.append(h.make_node('Transpose', [p + 'rs'], [p + 'tr'], perm=[0, 2, 1, 3, 4]))
        nodes.append(h.make_node('Reshape', [p + 'tr', p + 'sh2'], [p + '_out']))
    # nested (DenseNet-like) concat, an input used twice, an input that is
    # also a graph output, a graph input
    nodes.append(conv('b1_out', 'wd1', 'd1', C, 8, inits))
    nodes.append(conv('d1', 'wd2', 'd2', 8, 8, inits, 3))
    nodes.append(h.make_node('Concat', ['d1', 'd2'], ['dc1'], axis=1))
    nodes.append(conv('dc1', 'wd3', 'd3', 16, 8, inits))
    nodes.append(h.make_node('Concat', ['dc1', 'd3', 'x'], ['dc2'], axis=1))
    nodes.append(conv('dc2', 'wd4', 'd4', 32, 8, inits))
    nodes.append(h.make_node('Concat', ['d4', 'd4', 'd3'], ['dc3'], axis=1))
    nodes.append(h.make_node('Sigmoid', ['dc3'], ['s3']))
    nodes.append(h.make_node('Concat', ['s3', 'd1'], ['y'], axis=1))
    nodes.append(h.make_node('ReduceMean', ['y'], ['m0'], axes=[2, 3], keepdims=0))
    # Dropout with ratio 0 in training mode is the identity (a view)
    inits += [f32('ratio0', 0.0), nh.from_array(np.array(True), 'train'),
              i64('pads', [0, 1, 0, 2])]
    nodes.append(h.make_node('Dropout', ['m0', 'ratio0', 'train'], ['m1']))
    nodes.append(h.make_node('Pad', ['m1', 'pads'], ['m'], mode='constant'))
    g = h.make_graph(nodes, 'shuffle', [vi('x', [1, 8, H, H])],
                     [vi('y', None), vi('m', None), vi('d3', None)], inits)
    return g, ['Concat', 'Slice', 'Transpose', 'ReduceMean', 'Pad'], []


def transformer_model(tanh):
    """One encoder layer: QKV MatMul, Slice, head Transpose, scaled
    QK^T + additive mask, Softmax, V, GELU (Erf or tanh form),
    decomposed LayerNorm, size-1 Transpose views."""
    S, D, Hh = 12, 32, 4
    dh = D // Hh
    inits, n = [], []
    inits += [init('wqkv', [D, 3 * D], -0.3, 0.3), init('bqkv', [3 * D]),
              i64('q0', [0]), i64('q1', [D]), i64('q2', [2 * D]), i64('q3', [3 * D]),
              i64('ax', [-1]), i64('hs', [S, Hh, dh]), i64('ms', [S, D]),
              f32('sc', np.sqrt(dh)), init('mask', [S, S], -3, 0),
              init('w1', [D, 4 * D], -0.3, 0.3), init('b1', [4 * D]),
              init('w2', [4 * D, D], -0.3, 0.3), init('lnw', [D], 0.5, 1.5),
              init('lnb', [D]), f32('one', 1.0), f32('half', 0.5),
              f32('two', 2.0), f32('eps', 1e-5), f32('r2', 1.4142135),
              f32('c0', 0.044715), f32('c1', 0.7978845608), f32('three', 3.0)]
    n.append(h.make_node('Transpose', ['x'], ['xt'], perm=[1, 0, 2]))  # [S,1,D]
    n.append(h.make_node('MatMul', ['xt', 'wqkv'], ['qkv0']))
    n.append(h.make_node('Add', ['qkv0', 'bqkv'], ['qkv']))
    for nm, a, b in (('q', 'q0', 'q1'), ('k', 'q1', 'q2'), ('v', 'q2', 'q3')):
        n.append(h.make_node('Slice', ['qkv', a, b, 'ax'], [nm + 's']))
        n.append(h.make_node('Reshape', [nm + 's', 'hs'], [nm + 'r']))
        perm = [1, 2, 0] if nm == 'k' else [1, 0, 2]
        n.append(h.make_node('Transpose', [nm + 'r'], [nm + 't'], perm=perm))
    n.append(h.make_node('Div', ['qt', 'sc'], ['qd']))
    n.append(h.make_node('MatMul', ['qd', 'kt'], ['att0']))
    n.append(h.make_node('Add', ['att0', 'mask'], ['att1']))
    n.append(h.make_node('Softmax', ['att1'], ['att'], axis=-1))
    n.append(h.make_node('MatMul', ['att', 'vt'], ['o0']))
    n.append(h.make_node('Transpose', ['o0'], ['o1'], perm=[1, 0, 2]))
    n.append(h.make_node('Reshape', ['o1', 'ms'], ['o2']))
    n.append(h.make_node('Add', ['o2', 'x2d'], ['r']))
    # decomposed LayerNorm
    n.append(h.make_node('ReduceMean', ['r'], ['mu'], axes=[-1]))
    n.append(h.make_node('Sub', ['r', 'mu'], ['dev']))
    n.append(h.make_node('Pow', ['dev', 'two'], ['sq']))
    n.append(h.make_node('ReduceMean', ['sq'], ['var'], axes=[-1]))
    n.append(h.make_node('Add', ['var', 'eps'], ['ve']))
    n.append(h.make_node('Sqrt', ['ve'], ['sd']))
    n.append(h.make_node('Div', ['dev', 'sd'], ['nrm']))
    n.append(h.make_node('Mul', ['nrm', 'lnw'], ['nw']))
    n.append(h.make_node('Add', ['nw', 'lnb'], ['ln']))
    n.append(h.make_node('MatMul', ['ln', 'w1'], ['f0']))
    n.append(h.make_node('Add', ['f0', 'b1'], ['f1']))
    if tanh:
        n.append(h.make_node('Pow', ['f1', 'three'], ['g0']))
        n.append(h.make_node('Mul', ['g0', 'c0'], ['g1']))
        n.append(h.make_node('Add', ['f1', 'g1'], ['g2']))
        n.append(h.make_node('Mul', ['g2', 'c1'], ['g3']))
        n.append(h.make_node('Tanh', ['g3'], ['g4']))
    else:
        n.append(h.make_node('Div', ['f1', 'r2'], ['g3']))
        n.append(h.make_node('Erf', ['g3'], ['g4']))
    n.append(h.make_node('Add', ['g4', 'one'], ['g5']))
    n.append(h.make_node('Mul', ['f1', 'g5'], ['g6']))
    n.append(h.make_node('Mul', ['g6', 'half'], ['g7']))
    n.append(h.make_node('MatMul', ['g7', 'w2'], ['y']))
    inits.append(i64('s2d', [S, D]))
    n.insert(0, h.make_node('Reshape', ['x', 's2d'], ['x2d']))
    g = h.make_graph(n, 'tf', [vi('x', [1, S, D])], [vi('y', None)], inits)
    fast = ['LayerNormalization', 'Softmax', 'Transpose']
    # the q/k/v Slices are folded into the head Transposes
    return g, fast, ['Erf', 'Tanh', 'Mul', 'Slice']


def run(model, args, odir):
    os.makedirs(odir, exist_ok=True)
    r = subprocess.run([mi, 'run', model, '-q', '-o', odir] + isa + args,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f'{model} {args}: {r.stderr.strip()}')
    return r.stdout + r.stderr


models = [('shuffle',) + shuffle_model(), ('tf_erf',) + transformer_model(False),
          ('tf_tanh',) + transformer_model(True)]
for name, g, fast, absent in models:
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    path = os.path.join(out, name + '.onnx')
    onnx.save(m, path)
    ref_dir = os.path.join(out, name + '.ref')
    run(path, ['--reference', '-t', '1'], ref_dir)
    for t in ('1', '2'):
        d = os.path.join(out, f'{name}.t{t}')
        prof = run(path, ['-t', t, '--profile', '--bench', '1', '--warmup', '0'], d)
        for f in sorted(os.listdir(ref_dir)):
            a, b = np.load(os.path.join(d, f)), np.load(os.path.join(ref_dir, f))
            e = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))
            ok = e <= 1e-5 and a.shape == b.shape
            fails += not ok
            print(f'{"ok  " if ok else "FAIL"} {name} threads={t} {f}: err {e:.3g}')
        for op in fast:
            line = [l for l in prof.splitlines() if l.strip().startswith(op + ' ')]
            ok = bool(line) and line[0].split()[1] == line[0].split()[2]
            fails += not ok
            if not ok:
                print(f'FAIL {name} threads={t}: {op} not on the fast path: {line}')
        for op in absent:  # fused away
            line = [l for l in prof.splitlines() if l.strip().startswith(op + ' ')]
            fails += bool(line)
            if line:
                print(f'FAIL {name} threads={t}: {op} still runs: {line}')
# MI_DEBUG=pool (lib/cpu/pool.c): the run count and one line per pool
# function at exit; nothing without it
path = os.path.join(out, 'shuffle.onnx')
for stats in ('pool', None):
    env = dict(os.environ)
    env.pop('MI_DEBUG', None)
    if stats:
        env['MI_DEBUG'] = stats
    r = subprocess.run([mi, 'run', path, '-q', '-t', '2', '--bench', '3', '--warmup', '0'] + isa,
                       env=env, capture_output=True, text=True)
    lines = [l for l in r.stderr.splitlines() if l.startswith('metainfer: pool:')]
    runs = [int(l.split()[2]) for l in lines[:1] if l.split()[3] == 'runs,']
    fns = [l for l in lines[1:] if '+0x' in l and 'us per run' in l]
    ok = r.returncode == 0 and (bool(runs and runs[0] > 0 and fns) if stats else not lines)
    fails += not ok
    print(f'{"ok  " if ok else "FAIL"} MI_DEBUG={stats}: {len(lines)} pool lines')
print(f'xform-models: {fails} failures')
sys.exit(1 if fails else 0)
