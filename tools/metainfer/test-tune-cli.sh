#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# `metainfer tune`: writes a plan that `metainfer run --plan` runs and
# `metainfer predict --plan` reads, prints the default and the tuned
# plan's predicted and measured latency, memory and cosine and the three
# times; the tuned plan is never slower than the default on its own
# verification runs; every bad argument (weights, device, infeasible
# limits, option values) gets one line on stderr and a non-zero exit
# status (1 bad input, 2 usage).
set -u
MI=${1:-build/metainfer}
MODEL=${2:?usage: test-tune-cli.sh METAINFER MODEL.onnx}
W=$(mktemp -d /tmp/mi-tune-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_err DESC STATUS PATTERN CMD...: that exit status, one stderr
# line matching PATTERN.
expect_err() {
	local desc=$1 want=$2 pat=$3; shift 3
	"$@" >"$W/out" 2>"$W/err"
	local rc=$? lines
	lines=$(grep -c . "$W/err")
	if [ "$rc" != "$want" ]; then
		fail "$desc (exit $rc, expected $want): $(head -c 300 "$W/err")"
	elif [ "$lines" != 1 ]; then
		fail "$desc: expected one error line, got $lines: $(head -c 300 "$W/err")"
	elif ! grep -q -- "$pat" "$W/err"; then
		fail "$desc: '$(head -n 1 "$W/err")' does not say '$pat'"
	else
		pass "$desc: $(head -n 1 "$W/err")"
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

expect_ok "help" "$MI" tune --help
grep -q "usage: .* tune MODEL.onnx" "$W/out" || fail "help text"
start=$(date +%s.%N)
expect_ok "tune" "$MI" tune "$MODEL" -t 1 --top 3 --runs 3 -o "$W/plan.json"
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN { printf "     tune took %.2f s\n", b - a }'
cp "$W/out" "$W/tune.out"
grep -q "tune: verify" "$W/err" || fail "no progress line on stderr"
for row in default tuned; do
	grep -Eq "^$row +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$W/tune.out" ||
		fail "no $row row with predicted/measured ms, MiB, cosine: $(cat "$W/tune.out")"
done
grep -Eq "^time: search [0-9.]+ s .*compile [0-9.]+ s, run [0-9.]+ s" "$W/tune.out" ||
	fail "no time line"
d=$(awk '$1 == "default" { print $3 }' "$W/tune.out")
t=$(awk '$1 == "tuned" { print $3 }' "$W/tune.out")
if awk -v d="$d" -v t="$t" 'BEGIN { exit !(t <= d) }'; then
	pass "tuned $t ms <= default $d ms on the verification runs"
else
	fail "tuned $t ms slower than default $d ms"
fi
[ -s "$W/plan.json" ] && grep -q '"metainfer-plan/' "$W/plan.json" ||
	fail "no plan file"
expect_ok "run --plan" "$MI" run "$MODEL" -t 1 --plan "$W/plan.json"
expect_ok "predict --plan" "$MI" predict "$MODEL" -t 1 --plan "$W/plan.json"
expect_ok "weights, memory limit, budget" "$MI" tune "$MODEL" -t 1 -q \
	--weights 1,0.5,0 --max-mem 4G --budget 30 --top 2 --runs 2 \
	-o "$W/plan2.json"
[ -s "$W/err" ] && fail "-q still writes to stderr: $(head -c 200 "$W/err")"

expect_err "no model" 2 "expected one MODEL.onnx" "$MI" tune -o "$W/x.json"
expect_err "no output" 2 "-o PLAN.json is required" "$MI" tune "$MODEL"
expect_err "bad option" 2 "bad option '--bogus'" "$MI" tune "$MODEL" --bogus -o "$W/x.json"
expect_err "bad weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,x,0 -o "$W/x.json"
expect_err "two weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,1 -o "$W/x.json"
expect_err "negative weight" 2 "bad --weights" "$MI" tune "$MODEL" --weights 1,-1,0 -o "$W/x.json"
expect_err "zero weights" 2 "bad --weights" "$MI" tune "$MODEL" --weights 0,0,0 -o "$W/x.json"
expect_err "bad max-mem" 2 "bad --max-mem" "$MI" tune "$MODEL" --max-mem 12Q -o "$W/x.json"
expect_err "bad min-cosine" 2 "bad --min-cosine" "$MI" tune "$MODEL" --min-cosine 1.5 -o "$W/x.json"
expect_err "bad budget" 2 "bad --budget" "$MI" tune "$MODEL" --budget 0 -o "$W/x.json"
expect_err "bad top" 2 "bad --top" "$MI" tune "$MODEL" --top 0 -o "$W/x.json"
expect_err "bad threads" 2 "bad thread count" "$MI" tune "$MODEL" -t x -o "$W/x.json"
expect_err "unknown device" 1 "nodev9" "$MI" tune "$MODEL" -q --devices nodev9 -o "$W/x.json"
expect_err "missing model" 1 "no-such.onnx" "$MI" tune "$W/no-such.onnx" -q -o "$W/x.json"
expect_err "infeasible memory limit" 1 "no plan meets the limits" \
	"$MI" tune "$MODEL" -t 1 -q --max-mem 1k --runs 1 -o "$W/x.json"
[ -e "$W/x.json" ] && fail "an infeasible search wrote a plan"
echo "not a predictor" >"$W/bad.pred"
expect_err "bad predictor file" 1 "not a predictor file" \
	"$MI" tune "$MODEL" -q --predictor "$W/bad.pred" -o "$W/x.json"
expect_err "unwritable output" 1 "cannot write" \
	"$MI" tune "$MODEL" -t 1 -q --top 1 --runs 1 -o "$W/no/dir/x.json"

if [ "$fails" -ne 0 ]; then
	echo "test-tune-cli: $fails failed"
	exit 1
fi
echo "test-tune-cli: all passed"
