#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `metainfer fingerprint` (make check-fingerprint): a --quick run of the
# CPU into a fresh DB, the incremental re-run, --check, JSON, and the
# error cases (one line each, non-zero exit).
#
#   lib/fingerprint/tests/test-fingerprint-cli.sh build/metainfer

set -u
MI=${1:?usage: test-fingerprint-cli.sh METAINFER}
T=$(mktemp -d /tmp/test-fingerprint-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fail=0

ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=$((fail + 1))
	fi
}

# one line on stderr, the given exit status, nothing on stdout
err_case() {
	local want=$1 pat=$2
	shift 2
	$MI fingerprint "$@" >$T/out 2>$T/err
	local rc=$?
	[ $rc = "$want" ] && [ ! -s $T/out ] && grep -q "$pat" $T/err &&
		[ "$(wc -l <$T/err)" -le 20 ]
	ok $? "fingerprint $* -> exit $want, '$pat' (got $rc: $(head -1 $T/err))"
}

$MI fingerprint --help | grep -q -- '--quick'
ok $? "--help describes --quick"

start=$(date +%s.%N)
$MI fingerprint --quick --db $T/fp.db >$T/out 2>$T/err
ok $? "--quick on the CPU exits 0"
end=$(date +%s.%N)
awk -v a=$start -v b=$end 'BEGIN { printf "# --quick on the CPU: %.2f s\n", b - a }'
grep -q '^cpu: measured [1-9][0-9]*, up to date 0' $T/out
ok $? "first run measures ($(cat $T/out))"
grep -q 'left' $T/err
ok $? "progress bar with a time estimate on stderr"

out=$($MI fingerprint --quick --db $T/fp.db --json 2>/dev/null)
ok $? "re-run exits 0"
echo "$out" | grep -q '"measured":0,"skipped":[1-9]'
ok $? "re-run measures nothing ($out)"

out=$($MI fingerprint --check --db $T/fp.db --devices cpu)
ok $? "--check exits 0 ($out)"
echo "$out" | grep -q '^cpu: \(fresh\|stale\)'
ok $? "--check prints the state"

err_case 1 "no device" --devices nosuchdev --db $T/fp.db
err_case 2 "bad --threads" --threads 0 --db $T/fp.db
err_case 2 "bad --threshold" --check --threshold -1 --db $T/fp.db
err_case 2 "unexpected argument" extra --db $T/fp.db
err_case 2 "usage" --no-such-option
err_case 1 "fingerprint DB" --db /nonexistent-dir/fp.db
err_case 1 "no fingerprint" --check --db $T/empty.db

echo "# $n tests, $fail failed"
[ $fail = 0 ]
