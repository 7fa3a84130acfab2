#!/bin/sh
# `make levels-vm`: runs inside the soft-RoCE guest (issue 9: where ibgo's
# send_lat stands against C perftest's). Per round, in turn (the order
# rotates): Debian's C pair and the other IMPLS, pinned (servers on vCPU 0,
# clients on vCPU 1), each with -U so the client prints every sample. Each
# run's samples are cut into windows of WINDOW iterations and each window's
# median printed: this shows whether a run's latency is one level or moves
# between levels during the run. At the end, over all windows of each
# implementation: a count per whole microsecond, and the median of the
# windows inside each BANDS range ("lo-hi" in usec), which compares the
# two on the same level; then, per implementation, the median over rounds
# of its run's median (the median of the run's window medians) over C's run
# in the same round (the runs of a round are close in time, so they are
# more often on the same level), and its drift: the median over runs of
# (median of windows 7-9) / (median of windows 1-3).
# IMPLS (default "c go"): c is Debian's pair, go ibgo's; cs a C server with
# an ibgo client, gs the reverse; gnp ibgo with GODEBUG=asyncpreemptoff=1;
# go0 the build at /out/ibgo-before (an A/B of two builds).
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-8}
TEST=${TEST:-send_lat}
ARGS=${LEVELS_ARGS:--s 2 -n 10000}
WINDOW=${WINDOW:-1000}
IMPLS=${IMPLS:-c go}
BANDS=${BANDS:-13.8-15.8 17.3-20.5}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
cp "$(command -v ibgo)" /tmp/ibgo
[ ! -x /out/ibgo-before ] || cp /out/ibgo-before /tmp/ibgo-before
port=25000
: > /tmp/runs
for impl in $IMPLS; do
	case $impl in
	c | go | cs | gs | gnp) ;;
	go0) [ -x /tmp/ibgo-before ] || { echo "go0 needs /out/ibgo-before (LEVELS_BEFORE=...)"; exit 1; } ;;
	*) echo "unknown implementation $impl (c go cs gs gnp go0)"; exit 1 ;;
	esac
done

# median: the middle of the numbers on stdin
median() { sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

# one IMPL: one pair with -U; appends "IMPL median w1 w2 ..." (the run's
# window medians) to /tmp/runs
one() {
	port=$((port + 1))
	srvbin="" pre=""
	case $1 in
	c) bin=ib_$TEST ;;
	go) bin="/tmp/ibgo perf $TEST" ;;
	cs) bin="/tmp/ibgo perf $TEST" srvbin=ib_$TEST ;;
	gs) bin=ib_$TEST srvbin="/tmp/ibgo perf $TEST" ;;
	gnp) bin="/tmp/ibgo perf $TEST" pre="GODEBUG=asyncpreemptoff=1" ;;
	go0) bin="/tmp/ibgo-before perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	env $pre taskset -c 0 ${srvbin:-$bin} -d rxe0 -x "$gidx" -p $port $ARGS -U > /tmp/l.srv 2>&1 &
	srv=$!
	waitport $port
	# shellcheck disable=SC2086
	env $pre taskset -c 1 $bin -d rxe0 -x "$gidx" -p $port $ARGS -U "$ip" > /tmp/l.cli 2>&1 || cat /tmp/l.cli >&2
	wait $srv || cat /tmp/l.srv >&2
	# "sample, usec" lines; a run whose clock failed prints inf: skipped
	awk -F', ' -v w="$WINDOW" '/^[0-9]+, [0-9.]+$/ {print int(($1 - 1) / w), $2}' /tmp/l.cli |
		sort -k1,1n -k2,2n |
		awk '$1 != k {flush(); k = $1; n = 0} {v[++n] = $2} END {flush()}
			function flush() {if (n) printf "%s ", v[int((n + 1) / 2)]}' > /tmp/l.win
	printf '%-3s %s\n' "$1" "$(cat /tmp/l.win)"
	echo "$1 $(tr ' ' '\n' < /tmp/l.win | grep . | median) $(cat /tmp/l.win)" >> /tmp/runs
}

echo "$TEST $ARGS, $ROUNDS rounds, median of each $WINDOW iterations (usec):"
r=0
while [ $r -lt "$ROUNDS" ]; do
	echo "ROUND $r" >> /tmp/runs
	# shellcheck disable=SC2086
	set -- $IMPLS
	k=$((r % $#))
	while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
	for impl in "$@"; do one "$impl"; done
	r=$((r + 1))
done
for impl in $IMPLS; do
	# every window median of IMPL's runs
	awk -v i="$impl" '$1 == i {for (k = 3; k <= NF; k++) print $k}' /tmp/runs > /tmp/w.$impl
	echo "$impl: $(wc -l < /tmp/w.$impl) windows, median $(median < /tmp/w.$impl); per usec:" \
		"$(awk '{n[int($1)]++} END {for (k in n) print k ":" n[k]}' /tmp/w.$impl | sort -n | tr '\n' ' ')"
	for b in $BANDS; do
		lo=${b%-*} hi=${b#*-}
		m=$(awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 < hi' /tmp/w.$impl | median)
		n=$(awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 < hi' /tmp/w.$impl | wc -l)
		echo "  band $b: $n windows, median ${m:--}"
	done
done
# paired: per round, each implementation's run median over C's
echo "ROUND end" >> /tmp/runs
for impl in $IMPLS; do
	[ "$impl" != c ] || continue
	rs=$(awk -v i="$impl" '/^ROUND/ {if (c != "" && g != "") print g / c; c = ""; g = ""; next}
		$1 == "c" && $2 != "" {c = $2} $1 == i && $2 != "" {g = $2}' /tmp/runs)
	n=$(echo "$rs" | grep -c . || true)
	slower=$(echo "$rs" | awk '$1 > 1' | wc -l)
	echo "$impl/c paired: median $(echo "$rs" | median) over $n rounds, slower in $slower"
done
for impl in $IMPLS; do
	d=$(awk -v i="$impl" '$1 == i && NF >= 11 {
		e = med3($3, $4, $5); l = med3($9, $10, $11); print l / e}
		function med3(x, y, z) {return (x <= y) ? ((y <= z) ? y : ((x <= z) ? z : x)) : ((x <= z) ? x : ((y <= z) ? z : y))}' /tmp/runs | median)
	echo "$impl drift (windows 7-9 over 1-3): median ${d:--}"
done
