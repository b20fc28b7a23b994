#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Grouped conv blocks: metainfer's default plan vs the same plan with the
grouped convs on conv.im2col (what ran before conv.nchwc.group) vs ONNX
Runtime, at 1 and 2 threads.  A benchmark, not a test.

    /usr/bin/python3 lib/cpu/tests/gconv-bench.py [--metainfer build/metainfer]
        [--ort-dir build/ort] [--work build/gconv-bench] [--threads 1,2]
        [--iters N] [--rounds R] [--isa NAME] [--only a,b]
        [--before OTHER_METAINFER] [MODEL.onnx...]

Each model is a ResNeXt / RegNet style bottleneck at batch 1, seeded
weights: Conv1x1 + Relu -> grouped Conv3x3 (stride s) + Relu -> Conv1x1
-> Add(shortcut) -> Relu (stride 2: a 1x1 stride-2 shortcut conv).
MODEL.onnx files (whole models, e.g. from tools/models/export.py --only
resnext50_32x4d) are timed the same way, with every grouped conv on
conv.im2col in the second plan (layouts 'auto'; blocked nodes that leave
their chain with it get their NCHW kernels).  With --before
OTHER_METAINFER the second column is that binary's default plan instead
(needed where fusions change with the layout, e.g. RegNet-Y's SE blocks).
Each engine runs R rounds alternately; a row gives the median of the
per-run medians (ms); 'node' is the grouped conv's fastest time in a
--profile run of each (single grouped conv models only).  Needs
python3-torch and python3-onnx (Debian).
"""
import argparse
import json
import os
import re
import subprocess
import sys

import torch
import torch.nn as nn

# name: (width, channels in/out, group width, map, stride)
BLOCKS = {
    'resnext_s1_c128_g32': (128, 256, 4, 56, 1),   # 4 ch/group: im2col
    'resnext_s2_c256_g32': (256, 512, 8, 28, 1),   # 8 ch/group: avx2
    'resnext_s3_c512_g32': (512, 1024, 16, 14, 1),
    'resnext_s4_c1024_g32': (1024, 2048, 32, 7, 1),
    'regnet_gw8_c104': (104, 104, 8, 28, 1),
    'regnet_gw16_c128': (128, 128, 16, 28, 1),
    'regnet_gw16_c288_s2': (288, 288, 16, 28, 2),
    'regnet_gw24_c336': (336, 336, 24, 14, 1),
    'regnet_gw48_c240': (240, 240, 48, 28, 1),
}


class Block(nn.Module):
    def __init__(self, width, cio, gw, stride):
        super().__init__()
        self.a = nn.Conv2d(cio, width, 1)
        self.b = nn.Conv2d(width, width, 3, stride, 1, groups=width // gw)
        self.c = nn.Conv2d(width, cio, 1)
        self.sc = nn.Conv2d(cio, cio, 1, stride) if stride > 1 else None

    def forward(self, x):
        y = self.c(torch.relu(self.b(torch.relu(self.a(x)))))
        return torch.relu(y + (self.sc(x) if self.sc is not None else x))


def export(path, width, cio, gw, hw, stride):
    torch.manual_seed(0)
    m = Block(width, cio, gw, stride).eval()
    x = torch.randn(1, cio, hw, hw)
    torch.onnx.export(m, x, path, opset_version=13, input_names=['x'],
                      output_names=['y'])


def grouped_convs(path):
    """Names of the grouped (not depthwise) Conv nodes of an ONNX file."""
    import onnx
    m = onnx.load(path)
    w = {i.name: i.dims for i in m.graph.initializer}
    out = []
    for n in m.graph.node:
        g = [a.i for a in n.attribute if a.name == 'group']
        if n.op_type == 'Conv' and g and g[0] > 1 and n.input[1] in w:
            # weights [m, c/g, kh, kw]: depthwise when c/g == 1 == m/c
            if not (w[n.input[1]][1] == 1 and w[n.input[1]][0] == g[0]):
                out.append(n.name)
    return out


# the NCHW kernels of blocked nodes that leave a chain with the grouped conv
NCHW_OF = {'globalaveragepool.nchwc': 'gap.vector', 'mul.nchwc': 'mul.chscale',
           'maxpool.nchwc': 'maxpool.rows', 'averagepool.nchwc': 'avgpool.rows'}


def fix_plan(mi, model, path, t, isa):
    """Edit plan file path until the model accepts it: a node whose
    blocked kernel no longer applies gets its NCHW kernel (NCHW_OF), or
    what its provider chose."""
    for _ in range(64):
        out = subprocess.run([mi, 'plan', model, '-t', str(t), '--apply',
                              path, '-o', os.devnull] + isa,
                             capture_output=True,
                             text=True)
        if out.returncode == 0:
            return
        m = re.search(r"node '([^']+)': variant '([^']+)' is not realizable "
                      r"here \(its provider chose '([^']+)'\)", out.stderr)
        if not m:
            sys.exit('%s: plan %s refused: %s' % (model, path, out.stderr))
        p = json.load(open(path))
        for n in p['nodes']:
            if n['name'] == m.group(1):
                n['variant'] = NCHW_OF.get(m.group(2), m.group(3))
        json.dump(p, open(path, 'w'))
    sys.exit('%s: plan %s: no accepted edit' % (model, path))


def latency(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r'latency_ms median=([0-9.]+)', out.stdout + out.stderr)
    if not m:
        sys.exit('no latency from %s:\n%s%s' % (' '.join(cmd), out.stdout,
                                                out.stderr))
    return float(m.group(1))


def node_min(cmd, node):
    """The node's fastest time (ms) in a --profile run."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(re.escape(node) + r'\s+\(min ([0-9.]+)\)', out.stdout)
    return float(m.group(1)) if m else float('nan')


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--metainfer', default='build/metainfer')
    ap.add_argument('--ort-dir', default='build/ort')
    ap.add_argument('--work', default='build/gconv-bench')
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--iters', type=int, default=30)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--isa', default='')
    ap.add_argument('--only', default='')
    ap.add_argument('--before', default='',
                    help='another metainfer binary: its default plan is the '
                    'second column (instead of the im2col plan)')
    ap.add_argument('--blocks', action='store_true',
                    help='also the blocks when models are given')
    ap.add_argument('models', nargs='*', help='ONNX files (whole models)')
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ort = os.path.isdir(os.path.join(a.ort_dir, 'node_modules',
                                     'onnxruntime-node'))
    env = dict(os.environ, MI_ORT_DIR=a.ort_dir)
    isa = ['--isa', a.isa] if a.isa else []
    names = a.only.split(',') if a.only else list(BLOCKS)
    if a.models and not a.blocks and not a.only:
        names = []
    names += a.models
    print('%-22s %2s %-17s %8s %8s %8s %6s %6s %8s %8s %6s' %
          ('model', 't', 'grouped variant', 'default', 'im2col', 'ort',
           'x im2c', 'x ort', 'node', 'node im', 'x'))
    for name in names:
        if name in BLOCKS:
            path = os.path.join(a.work, name + '.onnx')
            if not os.path.exists(path):
                export(path, *BLOCKS[name])
            grouped = ['/b/Conv']
        else:
            path = name
            name = os.path.basename(name)[:-5]
            grouped = grouped_convs(path)
        for t in [int(s) for s in a.threads.split(',')]:
            pj = os.path.join(a.work, '%s.t%d.json' % (name, t))
            ij = os.path.join(a.work, '%s.t%d.im2col.json' % (name, t))
            subprocess.run([a.metainfer, 'plan', path, '-t', str(t), '-o',
                            pj] + isa, check=True, capture_output=True)
            p = json.load(open(pj))
            gv = {}
            for n in p['nodes']:
                if n['name'] in grouped:
                    gv[n['variant']] = gv.get(n['variant'], 0) + 1
                    n['variant'] = 'conv.im2col'
                # the neighbours' layouts follow
                n.update(layout_in='auto', layout_out='auto')
            gv = ','.join('%s%s' % (k.replace('conv.', ''),
                                    'x%d' % c if c > 1 else '')
                          for k, c in sorted(gv.items())) or '-'
            json.dump(p, open(ij, 'w'))
            args = ['run', path, '-q', '-t', str(t), '--bench',
                    str(a.iters)] + isa
            run = [a.metainfer] + args
            if a.before:
                brun = [a.before] + args
            else:
                fix_plan(a.metainfer, path, ij, t, isa)
                brun = run + ['--plan', ij]
            d, i, o = [], [], []
            for r in range(a.rounds):
                d.append(latency(run + ['--plan', pj]))
                i.append(latency(brun))
                if ort:
                    o.append(latency(['node', 'tools/bench/ort-run.js', path,
                                      '--threads', str(t), '--bench',
                                      str(a.iters)], env))
            dm, im = med(d), med(i)
            om = med(o) if o else float('nan')
            nd = ni = float('nan')
            if len(grouped) == 1:
                nd = node_min(run + ['--plan', pj, '--profile=20'],
                              grouped[0])
                ni = node_min(brun + ['--profile=20'], grouped[0])
            print('%-22s %2d %-17s %8.3f %8.3f %8.3f %6.2f %6.2f %8.3f %8.3f %6.2f' %
                  (name[:22], t, gv[:17], dm, im, om, dm / im,
                   dm / om, nd, ni, nd / ni), flush=True)


if __name__ == '__main__':
    main()
