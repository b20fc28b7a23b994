#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `metainfer plan` and `run --plan`: the default plan round-trips and runs
# bit-identically, an edited legal plan runs, and every bad plan (another
# model, a stale plan, an unknown variant, a bad layout, an older schema,
# malformed JSON, a variant or fusion not legal for the node) is refused
# with one line on stderr and exit status 1.
set -u
MI=${1:-build/metainfer}
PY=${PYTHON:-/usr/bin/python3}
W=$(mktemp -d /tmp/mi-plan-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_err DESC PATTERN CMD...: exit status 1, one stderr line matching
# PATTERN.
expect_err() {
	local desc=$1 pat=$2; shift 2
	"$@" >"$W/out" 2>"$W/err"
	local rc=$? lines
	lines=$(wc -l <"$W/err")
	if [ "$rc" != 1 ]; then
		fail "$desc (exit $rc, expected 1): $(head -c 300 "$W/err")"
	elif [ "$lines" != 1 ]; then
		fail "$desc: expected one error line, got $lines: $(head -c 300 "$W/err")"
	elif ! grep -q -- "$pat" "$W/err"; then
		fail "$desc: '$(cat "$W/err")' does not say '$pat'"
	else
		pass "$desc: $(cat "$W/err")"
	fi
}

expect_ok() {
	local desc=$1; shift
	if "$@" >"$W/out" 2>"$W/err"; then
		pass "$desc"
	else
		fail "$desc (exit $?): $(head -c 300 "$W/err")"
	fi
}

$PY - "$W" <<'PYEOF' || { echo "FAIL cannot build test models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
w = sys.argv[1]
rng = np.random.default_rng(0)
def net(path, size, chans=16):
    c1 = nh.from_array(rng.standard_normal((chans, 3, 3, 3)).astype(np.float32) * .3, 'w1')
    c2 = nh.from_array(rng.standard_normal((chans, chans, 3, 3)).astype(np.float32) * .1, 'w2')
    b2 = nh.from_array(rng.standard_normal((chans,)).astype(np.float32), 'b2')
    g = h.make_graph([
        h.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
        h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
        h.make_node('Conv', ['r1', 'w2', 'b2'], ['c2'], name='conv2', pads=[1, 1, 1, 1]),
        h.make_node('Relu', ['c2'], ['y'], name='relu2'),
    ], 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, size, size])],
       [h.make_tensor_value_info('y', T.FLOAT, [1, chans, size, size])], [c1, c2, b2])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), path)
net(f'{w}/a.onnx', 16)
net(f'{w}/a_resized.onnx', 12)   # same nodes, other shapes: a stale plan
# another model: different node names and ops
g = h.make_graph([h.make_node('Neg', ['x'], ['y'], name='neg')], 'g',
    [h.make_tensor_value_info('x', T.FLOAT, [4])],
    [h.make_tensor_value_info('y', T.FLOAT, [4])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), f'{w}/b.onnx')
np.save(f'{w}/x.npy', rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
PYEOF

# edit W/a.json into W/$1.json with a Python expression on the dict `p`
edit() {
	local out=$1 expr=$2
	$PY - "$W/a.json" "$W/$out.json" "$expr" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
def node(name):
    return next(n for n in p['nodes'] if n['name'] == name)
exec(sys.argv[3])
json.dump(p, open(sys.argv[2], 'w'), indent=1)
PYEOF
}

expect_ok "plan writes the default plan" "$MI" plan "$W/a.onnx" -t 1 -o "$W/a.json"
if grep -q '"schema": "metainfer-plan/2"' "$W/a.json" && grep -q '"name": "conv1"' "$W/a.json"; then
	pass "the plan names its schema and the nodes"
else
	fail "plan file: $(head -c 300 "$W/a.json")"
fi
expect_ok "plan --explain" "$MI" plan "$W/a.onnx" -t 1 --explain
if grep -q '^  \* ' "$W/out" && grep -q ' ref: ' "$W/out"; then
	pass "--explain marks the chosen candidate and lists ref"
else
	fail "--explain output: $(head -c 300 "$W/out")"
fi
expect_ok "run without a plan" "$MI" run "$W/a.onnx" -t 1 -q -i "$W/x.npy" --output "$W/y0.npy"
expect_ok "run --plan (default plan)" "$MI" run "$W/a.onnx" -q -i "$W/x.npy" --plan "$W/a.json" --output "$W/y1.npy"
if cmp -s "$W/y0.npy" "$W/y1.npy"; then
	pass "the default plan's output is bit-identical"
else
	fail "the default plan's output differs"
fi
# both convs: the blocked pass takes a conv only where a neighbour is blocked
IM2COL="[node(c).update(variant='conv.im2col', layout_in='auto', layout_out='auto') for c in ('conv1', 'conv2')]"
edit im2col "$IM2COL"
expect_ok "run --plan with both convs on conv.im2col" "$MI" run "$W/a.onnx" -q -i "$W/x.npy" --plan "$W/im2col.json" --output "$W/y2.npy"
$PY -c "import numpy as np, sys; a = np.load('$W/y0.npy'); b = np.load('$W/y2.npy'); e = float(np.abs(a - b).max() / np.abs(a).max()); sys.exit(0 if e < 1e-4 else 1)" \
	&& pass "conv.im2col's output matches" || fail "conv.im2col's output differs"
edit ref "$IM2COL; node('conv1')['variant'] = 'ref'; node('conv1')['fused'] = []; p['nodes'].append({'name': 'relu1', 'op': 'Relu', 'variant': 'ref', 'fused': []})"
expect_ok "run --plan with conv1 and relu1 on their reference ops" "$MI" run "$W/a.onnx" -q -i "$W/x.npy" --plan "$W/ref.json" --output "$W/y3.npy"
$PY -c "import numpy as np, sys; a = np.load('$W/y0.npy'); b = np.load('$W/y3.npy'); e = float(np.abs(a - b).max() / np.abs(a).max()); sys.exit(0 if e < 1e-4 else 1)" \
	&& pass "the reference-op plan's output matches" || fail "the reference-op plan's output differs"

expect_err "a plan for another model" "another model" "$MI" run "$W/b.onnx" -q --plan "$W/a.json"
expect_err "a stale plan (input shapes changed)" "stale plan" "$MI" run "$W/a_resized.onnx" -q --plan "$W/a.json"
edit fp "p['fingerprint'] = '%016x' % (int(p['fingerprint'], 16) ^ 1)"
expect_err "a stale plan (fingerprint)" "stale plan" "$MI" run "$W/a.onnx" -q --plan "$W/fp.json"
edit unk "node('conv1')['variant'] = 'conv.nosuch'"
expect_err "an unknown variant" "unknown variant 'conv.nosuch'" "$MI" run "$W/a.onnx" -q --plan "$W/unk.json"
edit lay "node('conv1')['layout_in'] = 'NCWH'"
expect_err "a bad layout" "bad layout 'NCWH'" "$MI" run "$W/a.onnx" -q --plan "$W/lay.json"
edit blk "$IM2COL; node('conv2')['layout_out'] = 'NCHW8c'"
expect_err "a layout the variant does not give" "layout" "$MI" run "$W/a.onnx" -q --plan "$W/blk.json"
edit dw "node('conv2')['variant'] = 'conv.dw'; node('conv2')['layout_in'] = node('conv2')['layout_out'] = 'auto'"
expect_err "a variant the node cannot take" "not realizable" "$MI" run "$W/a.onnx" -q --plan "$W/dw.json"
edit grp "node('conv2')['variant'] = 'conv.nchwc.group'"
expect_err "the grouped blocked conv on a dense conv" "not realizable" "$MI" run "$W/a.onnx" -q --plan "$W/grp.json"
edit fuse "$IM2COL; node('conv1')['fused'] = []; node('conv2')['fused'] = ['relu2', 'relu1']"
expect_err "a fusion that is not legal" "not legal\|listed twice" "$MI" run "$W/a.onnx" -q --plan "$W/fuse.json"
edit missing "p['nodes'] = [n for n in p['nodes'] if n['name'] != 'conv2']"
expect_err "a plan missing a node" "not in the plan" "$MI" run "$W/a.onnx" -q --plan "$W/missing.json"
edit old "p['schema'] = 'metainfer-plan/0'"
expect_err "an older schema" "schema \"metainfer-plan/0\" is not supported" "$MI" run "$W/a.onnx" -q --plan "$W/old.json"
edit v1 "p['schema'] = 'metainfer-plan/1'"
expect_ok "a metainfer-plan/1 plan" "$MI" run "$W/a.onnx" -q --plan "$W/v1.json"
edit v1dev "p['schema'] = 'metainfer-plan/1'; p['nodes'][0]['device'] = 'npu0'"
expect_err "a /1 plan naming an accelerator" "knows only" "$MI" run "$W/a.onnx" -q --plan "$W/v1dev.json"
edit dev "p['nodes'][0]['device'] = 'npu9'"
expect_err "an unknown device" "unknown device 'npu9'" "$MI" run "$W/a.onnx" -q --plan "$W/dev.json"
expect_err "an unknown --devices entry" "no device 'npu9'" "$MI" run "$W/a.onnx" -q --devices npu9
edit key "p['nodes'][0]['tile'] = 4"
expect_err "an unknown key" "unknown key" "$MI" run "$W/a.onnx" -q --plan "$W/key.json"
head -c 200 "$W/a.json" >"$W/trunc.json"
expect_err "malformed JSON (truncated)" "malformed JSON" "$MI" run "$W/a.onnx" -q --plan "$W/trunc.json"
printf '{"schema": "metainfer-plan/1", "nodes": [1,]}' >"$W/comma.json"
expect_err "malformed JSON (trailing comma)" "malformed JSON" "$MI" run "$W/a.onnx" -q --plan "$W/comma.json"
expect_err "a missing plan file" "No such file" "$MI" run "$W/a.onnx" -q --plan "$W/none.json"
expect_err "plan --apply of a bad plan" "unknown variant" "$MI" plan "$W/a.onnx" -t 1 --apply "$W/unk.json"
expect_ok "plan --apply of a good plan" "$MI" plan "$W/a.onnx" -t 1 --apply "$W/im2col.json" -o "$W/b.json"
grep -q '"variant": "conv.im2col"' "$W/b.json" && pass "the applied plan reads back" || fail "the applied plan does not read back: $(head -c 400 "$W/b.json")"

# the thread split: 1 or the model's count, for CPU nodes
expect_ok "plan for 2 threads" "$MI" plan "$W/a.onnx" -t 2 -o "$W/a.json"
expect_ok "run -t 2 without a plan" "$MI" run "$W/a.onnx" -t 2 -q -i "$W/x.npy" --output "$W/t0.npy"
edit t1 "node('conv1')['threads'] = 1; node('conv2')['threads'] = 1"
expect_ok "run --plan with conv1 and conv2 on one thread" "$MI" run "$W/a.onnx" -q -i "$W/x.npy" --plan "$W/t1.json" --output "$W/t1.npy"
cmp -s "$W/t0.npy" "$W/t1.npy" && pass "one thread: the same output bits" || fail "one thread changes the output"
expect_ok "plan --apply of the one-thread plan" "$MI" plan "$W/a.onnx" -t 2 --apply "$W/t1.json" -o "$W/t1b.json"
[ "$(grep -c '"threads": 1' "$W/t1b.json")" = 2 ] && pass "the one-thread nodes read back" || fail "one-thread nodes do not read back: $(head -c 400 "$W/t1b.json")"
edit t3 "node('conv1')['threads'] = 3"
expect_err "a thread split other than 1 or the model's" "1 thread or on all the model's 2" "$MI" run "$W/a.onnx" -q --plan "$W/t3.json"

if [ "$fails" = 0 ]; then
	echo "ok   test-plan-cli: all passed"
else
	echo "FAIL test-plan-cli: $fails failed"
	exit 1
fi
