#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Behaviour tests of the metainfer CLI: exit codes, one-line errors on bad
# models and inputs, .npy round trips checked against numpy, --bench output,
# info --json.  Models are built at test time with onnx.helper.
set -u
MI=${1:-build/metainfer}
PY=${PYTHON:-/usr/bin/python3}
W=$(mktemp -d /tmp/mi-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_rc RC DESC CMD...: exit status RC, and on failure exactly one line
# on stderr.
expect_rc() {
	local want=$1 desc=$2; shift 2
	"$@" >"$W/out" 2>"$W/err"
	local rc=$? lines
	lines=$(wc -l <"$W/err")
	if [ "$rc" != "$want" ]; then
		fail "$desc (exit $rc, expected $want): $(head -c 300 "$W/err")"
	elif [ "$want" = 1 ] && [ "$lines" != 1 ]; then
		fail "$desc: expected one error line, got $lines: $(head -c 300 "$W/err")"
	else
		pass "$desc"
	fi
}

$PY - "$W" <<'EOF' || { echo "FAIL cannot build test models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
w = sys.argv[1]
rng = np.random.default_rng(0)
# y = relu(x * s + b) with a symbolic batch dim, z = reduce-free copy
s = nh.from_array(rng.standard_normal((4,)).astype(np.float32), 's')
b = nh.from_array(rng.standard_normal((4,)).astype(np.float32), 'b')
g = h.make_graph([
    h.make_node('Mul', ['x', 's'], ['m'], name='mul'),
    h.make_node('Add', ['m', 'b'], ['a'], name='add'),
    h.make_node('Relu', ['a'], ['y'], name='relu'),
    h.make_node('Neg', ['x'], ['z'], name='neg'),
], 'g', [h.make_tensor_value_info('x', T.FLOAT, ['N', 4])],
   [h.make_tensor_value_info('y', T.FLOAT, ['N', 4]),
    h.make_tensor_value_info('z', T.FLOAT, ['N', 4])], [s, b])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
onnx.save(m, f'{w}/ok.onnx')
x = rng.standard_normal((3, 4)).astype(np.float32)
np.save(f'{w}/x.npy', x)
np.save(f'{w}/y_ref.npy', np.maximum(x * nh.to_array(s) + nh.to_array(b), 0))
np.save(f'{w}/x_int.npy', np.ones((3, 4), np.int64))
np.save(f'{w}/x_wrongrank.npy', np.ones((12,), np.float32))
data = open(f'{w}/ok.onnx', 'rb').read()
open(f'{w}/trunc.onnx', 'wb').write(data[: len(data) // 2])
open(f'{w}/garbage.onnx', 'wb').write(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)))
open(f'{w}/empty.onnx', 'wb').close()
# unsupported op
g2 = h.make_graph([h.make_node('FancyOp', ['x'], ['y'], name='fancy')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [2])],
    [h.make_tensor_value_info('y', T.FLOAT, [2])])
onnx.save(h.make_model(g2, opset_imports=[h.make_opsetid('', 13)]), f'{w}/unsup.onnx')
# opset out of range
onnx.save(h.make_model(g2, opset_imports=[h.make_opsetid('', 99)]), f'{w}/opset.onnx')
# initializer whose raw data is too short
bad = nh.from_array(np.ones((4,), np.float32), 's')
bad.raw_data = bad.raw_data[:8]
g3 = h.make_graph([h.make_node('Mul', ['x', 's'], ['y'], name='mul')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [4])],
    [h.make_tensor_value_info('y', T.FLOAT, [4])], [bad])
onnx.save(h.make_model(g3, opset_imports=[h.make_opsetid('', 13)]), f'{w}/shortraw.onnx')
# a cycle
g4 = h.make_graph([h.make_node('Add', ['x', 'b2'], ['a2'], name='a'),
                   h.make_node('Relu', ['a2'], ['b2'], name='r')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [4])],
    [h.make_tensor_value_info('b2', T.FLOAT, [4])])
onnx.save(h.make_model(g4, opset_imports=[h.make_opsetid('', 13)]), f'{w}/cycle.onnx')
# external data that escapes the model directory
ext = onnx.TensorProto(); ext.name = 's'; ext.data_type = T.FLOAT; ext.dims.append(4)
ext.data_location = T.EXTERNAL
e = ext.external_data.add(); e.key = 'location'; e.value = '../../etc/passwd'
g5 = h.make_graph([h.make_node('Mul', ['x', 's'], ['y'], name='mul')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [4])],
    [h.make_tensor_value_info('y', T.FLOAT, [4])], [ext])
onnx.save(h.make_model(g5, opset_imports=[h.make_opsetid('', 13)]), f'{w}/escape.onnx')
# valid external data
import os
os.makedirs(f'{w}/ext', exist_ok=True)
arr = rng.standard_normal((4,)).astype(np.float32)
open(f'{w}/ext/weights.bin', 'wb').write(b'\0' * 16 + arr.tobytes())
ext2 = onnx.TensorProto(); ext2.name = 's'; ext2.data_type = T.FLOAT; ext2.dims.append(4)
ext2.data_location = T.EXTERNAL
for k, v in (('location', 'weights.bin'), ('offset', '16'), ('length', '16')):
    e = ext2.external_data.add(); e.key = k; e.value = v
g6 = h.make_graph([h.make_node('Mul', ['x', 's'], ['y'], name='mul')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [4])],
    [h.make_tensor_value_info('y', T.FLOAT, [4])], [ext2])
onnx.save(h.make_model(g6, opset_imports=[h.make_opsetid('', 13)]), f'{w}/ext/model.onnx')
np.save(f'{w}/ext/x.npy', np.arange(4, dtype=np.float32))
np.save(f'{w}/ext/y_ref.npy', np.arange(4, dtype=np.float32) * arr)
EOF

expect_rc 0 "help" "$MI" --help
expect_rc 0 "run --help" "$MI" run --help
expect_rc 0 "info --help" "$MI" info --help
expect_rc 2 "no command" "$MI"
expect_rc 2 "unknown command" "$MI" frobnicate
expect_rc 2 "run without model" "$MI" run
expect_rc 2 "bad --threads" "$MI" run "$W/ok.onnx" --threads -3
expect_rc 2 "bad --isa" "$MI" run "$W/ok.onnx" --isa sse9
expect_rc 0 "--isa generic --no-int8 --no-spin" "$MI" run "$W/ok.onnx" -q \
	--isa generic --no-int8 --no-spin
if ! grep -qw avx512f /proc/cpuinfo; then
	expect_rc 1 "--isa the CPU lacks" "$MI" run "$W/ok.onnx" --isa avx512
fi
expect_rc 1 "missing model file" "$MI" run "$W/nope.onnx"
expect_rc 1 "directory as model" "$MI" run "$W"
expect_rc 1 "empty model" "$MI" run "$W/empty.onnx"
expect_rc 1 "truncated model" "$MI" run "$W/trunc.onnx"
expect_rc 1 "garbage model" "$MI" run "$W/garbage.onnx"
expect_rc 1 "unsupported op" "$MI" run "$W/unsup.onnx"
grep -q "node 'fancy' (FancyOp): unsupported op" "$W/err" && pass "unsupported op message" || fail "unsupported op message: $(cat "$W/err")"
expect_rc 1 "opset out of range" "$MI" run "$W/opset.onnx"
grep -q "opset 99" "$W/err" && pass "opset message" || fail "opset message: $(cat "$W/err")"
expect_rc 1 "short raw_data" "$MI" run "$W/shortraw.onnx"
grep -q "raw_data has 8 bytes" "$W/err" && pass "raw_data message" || fail "raw_data message: $(cat "$W/err")"
expect_rc 1 "cycle" "$MI" run "$W/cycle.onnx"
grep -q "cycle" "$W/err" && pass "cycle message" || fail "cycle message: $(cat "$W/err")"
expect_rc 1 "external data escaping the model dir" "$MI" run "$W/escape.onnx"
expect_rc 1 "wrong input dtype" "$MI" run "$W/ok.onnx" -i "$W/x_int.npy"
expect_rc 1 "wrong input rank" "$MI" run "$W/ok.onnx" -i "$W/x_wrongrank.npy"
expect_rc 1 "unknown input name" "$MI" run "$W/ok.onnx" -i "nope=$W/x.npy"
expect_rc 1 "missing input file" "$MI" run "$W/ok.onnx" -i "$W/none.npy"

# Correct results: named input, symbolic batch 3, -o DIR and --output.
expect_rc 0 "run with -i NAME=FILE -o DIR" "$MI" run "$W/ok.onnx" -i "x=$W/x.npy" -o "$W/outdir" --output "$W/first.npy"
expect_rc 0 "external data" "$MI" run "$W/ext/model.onnx" --input "$W/ext/x.npy" --output "$W/ext/y.npy"
$PY - "$W" <<'EOF' && pass "outputs match numpy" || fail "outputs match numpy"
import sys, numpy as np
w = sys.argv[1]
ref = np.load(f'{w}/y_ref.npy')
for p in (f'{w}/outdir/y.npy', f'{w}/first.npy'):
    y = np.load(p)
    assert y.shape == ref.shape and y.dtype == np.float32, (p, y.shape, y.dtype)
    assert np.allclose(y, ref, rtol=1e-6, atol=1e-6), p
z = np.load(f'{w}/outdir/z.npy')
assert np.array_equal(z, -np.load(f'{w}/x.npy'))
e = np.load(f'{w}/ext/y.npy')
assert np.allclose(e, np.load(f'{w}/ext/y_ref.npy'), rtol=1e-6), 'external data'
EOF

# Random inputs with a bound symbolic dim; bench line last.
expect_rc 0 "random inputs --dim N=5 --bench 5" "$MI" run "$W/ok.onnx" --dim N=5 --bench 5 --threads 1
grep -q "float32\[5,4\]" "$W/out" && pass "symbolic dim bound" || fail "symbolic dim bound: $(cat "$W/out")"
tail -n 1 "$W/out" | grep -Eq '^latency_ms median=[0-9.]+ p90=[0-9.]+ min=[0-9.]+$' && pass "bench line" || fail "bench line: $(tail -n 1 "$W/out")"
expect_rc 0 "--profile" "$MI" run "$W/ok.onnx" -q --bench 3 --profile=2
grep -Eq '^profile: [0-9]+ nodes, [0-9.]+ ms per run in nodes, [0-9.]+ ms sum of node minima \(3 runs\)$' "$W/out" && [ "$(grep -c ' ms .*% .*(min [0-9.]*)$' "$W/out")" = 2 ] && tail -n 1 "$W/out" | grep -q '^latency_ms ' && pass "profile table" || fail "profile table: $(cat "$W/out")"
expect_rc 2 "--profile=x" "$MI" run "$W/ok.onnx" --profile=x
# Seeded random inputs are reproducible.
"$MI" run "$W/ok.onnx" --seed 7 >"$W/r1" 2>&1; "$MI" run "$W/ok.onnx" --seed 7 >"$W/r2" 2>&1
"$MI" run "$W/ok.onnx" --seed 8 >"$W/r3" 2>&1
cmp -s "$W/r1" "$W/r2" && ! cmp -s "$W/r1" "$W/r3" && pass "seeded inputs" || fail "seeded inputs"

expect_rc 0 "info" "$MI" info "$W/ok.onnx" --nodes
grep -q "op histogram" "$W/out" && grep -q "after normalization" "$W/out" && pass "info text" || fail "info text"
expect_rc 0 "info --json" "$MI" info "$W/ok.onnx" --json
$PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['before']['nodes']==4 and d['after']['params']==8, d" "$W/out" && pass "info json" || fail "info json"
expect_rc 1 "info on garbage" "$MI" info "$W/garbage.onnx"
# info still describes a model with an op MetaInfer lacks (and says so)
"$MI" info "$W/unsup.onnx" >"$W/out" 2>"$W/err" && grep -q FancyOp "$W/out" && grep -q "unsupported ops.*FancyOp" "$W/err" \
	&& pass "info on unsupported op" || fail "info on unsupported op: $(cat "$W/err")"

echo "test-cli: $fails failed"
[ "$fails" = 0 ]
