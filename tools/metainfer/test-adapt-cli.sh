#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `metainfer adapt`: on two emulated accelerators a live halving of emu0's
# DMA bandwidth is seen, recalibrated and re-planned, and the run ends
# converged; bad arguments get one line on stderr and exit status 1 (bad
# input) or 2 (usage).
set -u
MI=${1:-build/metainfer}
MODEL=${2:?usage: test-adapt-cli.sh METAINFER MODEL.int8.onnx FP32MODEL.onnx}
FP32=${3:?usage: test-adapt-cli.sh METAINFER MODEL.int8.onnx FP32MODEL.onnx}
W=$(mktemp -d /tmp/mi-adapt-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

expect_err() {
	local desc=$1 want=$2 pat=$3; shift 3
	"$@" >"$W/out" 2>"$W/err"
	local rc=$? lines
	lines=$(wc -l <"$W/err")
	if [ "$rc" != "$want" ]; then
		fail "$desc (exit $rc, expected $want): $(head -c 300 "$W/err")"
	elif [ "$want" = 1 ] && [ "$lines" != 1 ]; then
		fail "$desc: expected one error line, got $lines: $(head -c 300 "$W/err")"
	elif ! grep -q -- "$pat" "$W/err"; then
		fail "$desc: '$(head -n 1 "$W/err")' does not say '$pat'"
	else
		pass "$desc: $(head -n 1 "$W/err")"
	fi
}

if "$MI" adapt "$MODEL" --emulate 2 --runs 40 --update 20:emu0:dma_bw=0.5 \
	--save "$W/p.pred" >"$W/out" 2>"$W/err"; then
	sed 's/^/     /' "$W/out"
	grep -q '^run 20: emu0 dma_bw x0.5' "$W/out" &&
		grep -q 'device emu0: measured [0-9.]*x predicted (dma-bound ops) -> recalibrated, re-planned: [0-9]* nodes\? moved (iteration 1, jitter on emu0' "$W/out" &&
		grep -q '^40 runs: .* converged' "$W/out" &&
		[ -s "$W/p.pred" ] &&
		pass "adapt: the update is recalibrated and re-planned, converged" ||
		fail "adapt: output lacks the recalibration lines"
else
	fail "adapt: exit $?: $(head -c 300 "$W/err")"
fi

expect_err "no model" 2 usage "$MI" adapt
expect_err "bad --update" 2 "bad --update" "$MI" adapt "$MODEL" --emulate 1 --update 3:emu0:sram=2
expect_err "bad --runs" 2 "bad --runs" "$MI" adapt "$MODEL" --runs 0
expect_err "bad --tolerance" 2 "percentage" "$MI" adapt "$MODEL" --tolerance 120
expect_err "bad --emulate" 2 "emulate" "$MI" adapt "$MODEL" --emulate 9
expect_err "missing model" 1 "adapt:" "$MI" adapt "$W/none.onnx" --emulate 1
expect_err "fp32 model: nothing placed" 1 "nothing placed" "$MI" adapt "$FP32" --emulate 1
expect_err "update of a device not emulated" 1 "not an emulated or simulated device" \
	"$MI" adapt "$MODEL" --emulate 1 --runs 3 --update 2:npu7:dma_bw=0.5
expect_err "unreadable predictor" 1 "adapt:" "$MI" adapt "$MODEL" --emulate 1 --predictor "$W/none.pred"

[ "$fails" = 0 ] && echo "ok   test-adapt-cli" || echo "FAIL test-adapt-cli: $fails failed"
[ "$fails" = 0 ]
