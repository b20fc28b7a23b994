#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Small ONNX models exercising each normalization pass, plus a manifest
(one line per model: file pass min_rewrites absent=OPS present=OPS) read by
lib/tests/test-passes.c.  Weights are seeded; nothing is committed."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(42)
manifest = []


def init(name, shape, lo=-1.0, hi=1.0):
    return nh.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def const_i64(name, vals):
    return nh.from_array(np.array(vals, np.int64), name)


def scalar(name, v):
    return nh.from_array(np.array(v, np.float32), name)


def save(name, nodes, inputs, outputs, inits, pass_, min_rw, absent='', present=''):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + '.onnx'))
    manifest.append(f'{name}.onnx {pass_} {min_rw} absent={absent or "-"} present={present or "-"}')


def vi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def bn_inits(c, p):
    return [init(p + 'g', [c], 0.5, 1.5), init(p + 'b', [c]),
            init(p + 'm', [c]), init(p + 'v', [c], 0.2, 2.0)]


# BatchNormalization after Conv (with bias), then Relu
save('bn_conv',
     [h.make_node('Conv', ['x', 'w', 'cb'], ['c'], pads=[1, 1, 1, 1]),
      h.make_node('BatchNormalization', ['c', 'g', 'b', 'm', 'v'], ['n'], epsilon=1e-3),
      h.make_node('Relu', ['n'], ['y'])],
     [vi('x', ['N', 3, 8, 8])], [vi('y', ['N', 4, 8, 8])],
     [init('w', [4, 3, 3, 3]), init('cb', [4])] + bn_inits(4, ''),
     'bn', 1, 'BatchNormalization', 'Conv')
# depthwise Conv without bias, BN result is the graph output
save('bn_dwconv',
     [h.make_node('Conv', ['x', 'w'], ['c'], group=3, strides=[2, 2]),
      h.make_node('BatchNormalization', ['c', 'g', 'b', 'm', 'v'], ['y'])],
     [vi('x', [2, 3, 9, 9])], [vi('y', [2, 6, 4, 4])],
     [init('w', [6, 1, 3, 3])] + bn_inits(6, ''),
     'bn', 1, 'BatchNormalization', 'Conv')
# Gemm (transB, alpha, beta, bias) followed by BN over features
save('bn_gemm',
     [h.make_node('Gemm', ['x', 'w', 'c'], ['f'], transB=1, alpha=0.5, beta=2.0),
      h.make_node('BatchNormalization', ['f', 'g', 'b', 'm', 'v'], ['y'])],
     [vi('x', ['N', 16])], [vi('y', ['N', 8])],
     [init('w', [8, 16]), init('c', [8])] + bn_inits(8, ''),
     'bn', 1, 'BatchNormalization', 'Gemm')
# Conv output also read elsewhere: BN must stay
save('bn_shared',
     [h.make_node('Conv', ['x', 'w'], ['c']),
      h.make_node('BatchNormalization', ['c', 'g', 'b', 'm', 'v'], ['n']),
      h.make_node('Add', ['n', 'c'], ['y'])],
     [vi('x', [1, 2, 5, 5])], [vi('y', [1, 2, 3, 3])],
     [init('w', [2, 2, 3, 3])] + bn_inits(2, ''),
     'bn', 0, '', 'BatchNormalization')
# Identity, Dropout, same-shape Reshape, cancelling Transposes; the last
# Identity writes the graph output (its name must survive)
save('noops',
     [h.make_node('Identity', ['x'], ['i1']),
      h.make_node('Relu', ['i1'], ['r']),
      h.make_node('Dropout', ['r'], ['d']),
      h.make_node('Reshape', ['d', 's'], ['rs']),
      h.make_node('Transpose', ['rs'], ['t1'], perm=[0, 2, 3, 1]),
      h.make_node('Transpose', ['t1'], ['t2'], perm=[0, 3, 1, 2]),
      h.make_node('Sigmoid', ['t2'], ['sg']),
      h.make_node('Identity', ['sg'], ['y'])],
     [vi('x', ['N', 3, 4, 5])], [vi('y', ['N', 3, 4, 5])],
     [const_i64('s', [0, 3, -1, 5])],
     'noops', 5, 'Identity,Dropout,Reshape,Transpose', 'Relu,Sigmoid')
# A Reshape that is not a no-op must stay
save('reshape_real',
     [h.make_node('Reshape', ['x', 's'], ['r']),
      h.make_node('Relu', ['r'], ['y'])],
     [vi('x', [2, 3, 4])], [vi('y', [2, 12])],
     [const_i64('s', [2, -1])],
     'noops', 0, '', 'Reshape')
# MatMul + Add -> Gemm
save('canon_gemm',
     [h.make_node('MatMul', ['x', 'w'], ['mm']),
      h.make_node('Add', ['mm', 'b'], ['y'])],
     [vi('x', ['N', 16])], [vi('y', ['N', 8])],
     [init('w', [16, 8]), init('b', [8])],
     'canon', 1, 'MatMul,Add', 'Gemm')
# x * HardSigmoid(x; 1/6, 0.5) -> HardSwish
save('canon_hswish1',
     [h.make_node('HardSigmoid', ['x'], ['hs'], alpha=1.0 / 6, beta=0.5),
      h.make_node('Mul', ['x', 'hs'], ['y'])],
     [vi('x', ['N', 4, 3, 3])], [vi('y', ['N', 4, 3, 3])], [],
     'canon', 1, 'HardSigmoid,Mul', 'HardSwish')
# x * Clip(x + 3, 0, 6) / 6 -> HardSwish
save('canon_hswish2',
     [h.make_node('Add', ['x', 'three'], ['a']),
      h.make_node('Clip', ['a', 'zero', 'six'], ['c']),
      h.make_node('Mul', ['x', 'c'], ['m']),
      h.make_node('Div', ['m', 'six'], ['y'])],
     [vi('x', [2, 5])], [vi('y', [2, 5])],
     [scalar('three', 3.0), scalar('zero', 0.0), scalar('six', 6.0)],
     'canon', 1, 'Clip,Div,Add', 'HardSwish')
# Min(Max(x, 0), 6) -> Clip; Clip(0,6)(Relu(x)) -> Clip(0,6)(x)
save('canon_relu6',
     [h.make_node('Max', ['x', 'zero'], ['mx']),
      h.make_node('Min', ['mx', 'six'], ['c1']),
      h.make_node('Relu', ['x'], ['r']),
      h.make_node('Clip', ['r', 'zero', 'six'], ['c2']),
      h.make_node('Add', ['c1', 'c2'], ['y'])],
     [vi('x', [3, 4])], [vi('y', [3, 4])],
     [scalar('zero', 0.0), scalar('six', 6.0)],
     'canon', 2, 'Max,Min,Relu', 'Clip')
# Reshape(x, [0, -1]) -> Flatten(axis=1)
save('canon_flatten',
     [h.make_node('Reshape', ['x', 's'], ['r']),
      h.make_node('Relu', ['r'], ['y'])],
     [vi('x', ['N', 4, 2, 2])], [vi('y', ['N', 16])],
     [const_i64('s', [0, -1])],
     'canon', 1, 'Reshape', 'Flatten')
# LayerNorm as PyTorch exports it before opset 17 -> LayerNormalization
save('canon_layernorm',
     [h.make_node('ReduceMean', ['x'], ['mu'], axes=[-1]),
      h.make_node('Sub', ['x', 'mu'], ['d']),
      h.make_node('Pow', ['d', 'two'], ['d2']),
      h.make_node('ReduceMean', ['d2'], ['var'], axes=[-1]),
      h.make_node('Add', ['var', 'eps'], ['ve']),
      h.make_node('Sqrt', ['ve'], ['sd']),
      h.make_node('Div', ['d', 'sd'], ['nrm']),
      h.make_node('Mul', ['nrm', 'gamma'], ['sc']),
      h.make_node('Add', ['sc', 'beta'], ['y'])],
     [vi('x', ['N', 5, 8])], [vi('y', ['N', 5, 8])],
     [scalar('two', 2.0), scalar('eps', 1e-5), init('gamma', [8], 0.5, 1.5),
      init('beta', [8])],
     'canon', 1, 'ReduceMean,Sub,Pow,Sqrt,Div,Mul,Add', 'LayerNormalization')
# ... but not when the normalized axis is not the last one
save('canon_layernorm_axis1',
     [h.make_node('ReduceMean', ['x'], ['mu'], axes=[1]),
      h.make_node('Sub', ['x', 'mu'], ['d']),
      h.make_node('Pow', ['d', 'two'], ['d2']),
      h.make_node('ReduceMean', ['d2'], ['var'], axes=[1]),
      h.make_node('Add', ['var', 'eps'], ['ve']),
      h.make_node('Sqrt', ['ve'], ['sd']),
      h.make_node('Div', ['d', 'sd'], ['nrm']),
      h.make_node('Mul', ['nrm', 'gamma'], ['sc']),
      h.make_node('Add', ['sc', 'beta'], ['y'])],
     [vi('x', [2, 8, 8])], [vi('y', [2, 8, 8])],
     [scalar('two', 2.0), scalar('eps', 1e-5), init('gamma', [8], 0.5, 1.5),
      init('beta', [8])],
     'canon', 0, 'LayerNormalization', 'ReduceMean,Sqrt')
# Constant subgraph folded at load
save('fold',
     [h.make_node('Constant', [], ['k'], value=nh.from_array(np.arange(4, dtype=np.float32), 'kv')),
      h.make_node('Mul', ['k', 'two'], ['k2']),
      h.make_node('Add', ['k2', 'b'], ['k3']),
      h.make_node('Add', ['x', 'k3'], ['y'])],
     [vi('x', ['N', 4])], [vi('y', ['N', 4])],
     [scalar('two', 2.0), init('b', [4])],
     'fold', 3, 'Constant,Mul', 'Add')
# Dead branch
save('dead',
     [h.make_node('Relu', ['x'], ['y']),
      h.make_node('Sigmoid', ['x'], ['unused1']),
      h.make_node('Tanh', ['unused1'], ['unused2'])],
     [vi('x', [2, 3])], [vi('y', [2, 3])], [],
     'dead', 2, 'Sigmoid,Tanh', 'Relu')


# ---- models for test-api (not in the manifest) ----
def save_plain(name, nodes, inputs, outputs, inits):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + '.onnx'))


# small residual CNN with a symbolic batch
save_plain('api_net',
    [h.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], pads=[1, 1, 1, 1]),
     h.make_node('BatchNormalization', ['c1', 'g', 'b', 'm', 'v'], ['n1']),
     h.make_node('Relu', ['n1'], ['r1']),
     h.make_node('Conv', ['r1', 'w2'], ['c2'], pads=[1, 1, 1, 1]),
     h.make_node('Add', ['c2', 'r1'], ['s']),
     h.make_node('Relu', ['s'], ['r2']),
     h.make_node('MaxPool', ['r2'], ['p'], kernel_shape=[2, 2], strides=[2, 2]),
     h.make_node('GlobalAveragePool', ['p'], ['gap']),
     h.make_node('Flatten', ['gap'], ['f']),
     h.make_node('Gemm', ['f', 'fw', 'fb'], ['y'], transB=1)],
    [vi('x', ['N', 3, 16, 16])], [vi('y', ['N', 10])],
    [init('w1', [8, 3, 3, 3]), init('b1', [8]), init('w2', [8, 8, 3, 3]),
     init('fw', [10, 8]), init('fb', [10])] + bn_inits(8, ''))
# flatten through a Shape chain (x.view(x.size(0), -1))
save_plain('api_shape',
    [h.make_node('Shape', ['x'], ['sh']),
     h.make_node('Gather', ['sh', 'zero'], ['n'], axis=0),
     h.make_node('Unsqueeze', ['n', 'ax0'], ['n1']),
     h.make_node('Concat', ['n1', 'minus1'], ['ns'], axis=0),
     h.make_node('Reshape', ['x', 'ns'], ['r']),
     h.make_node('Relu', ['r'], ['y'])],
    [vi('x', ['N', 4, 2, 2])], [vi('y', ['N', 16])],
    [nh.from_array(np.array(0, np.int64), 'zero'), const_i64('ax0', [0]),
     const_i64('minus1', [-1])])
# data-dependent output shape (NonZero)
save_plain('api_dyn',
    [h.make_node('Greater', ['x', 'zf'], ['pos']),
     h.make_node('NonZero', ['pos'], ['nz']),
     h.make_node('Cast', ['nz'], ['nzf'], to=T.FLOAT),
     h.make_node('Add', ['nzf', 'one'], ['y'])],
    [vi('x', [8])], [vi('y', [1, 'K'])],
    [scalar('zf', 0.0), scalar('one', 1.0)])

with open(os.path.join(out, 'manifest.txt'), 'w') as f:
    f.write('\n'.join(manifest) + '\n')
