#!/bin/sh
# `make sysmon-vm`: runs inside the soft-RoCE guest (issue 16: why ibgo's UD
# send_bw trails C perftest's). Per round, each of IMPLS in turn (the order
# rotates from round to round): c is Debian's C perftest pair as is, cw the
# same pair with /out/waker.so preloaded into both processes (one extra
# thread each that wakes every 10 ms, as the Go runtime's sysmon does while
# a goroutine runs), cws and cwc the waker in the server or the client only,
# go ibgo's pair, cs a C server with an ibgo client, gs
# an ibgo server with a C client (which side a gap follows), go0 the build
# at /out/ibgo-before (an A/B of two builds; added to the default IMPLS when
# it is there). PIN=1 (the default) puts every server on vCPU 0 and every
# client on vCPU 1 (taskset, all threads), which removes the two-mode spread
# of unpinned runs (both spinners on one vCPU or not). Prints each round
# (ROUND r c=... cw=...) and, per implementation, the median of its number
# and the median over rounds of its number over c's in the same round.
# TEST (send_bw by default) picks another perftest test: a *_bw test's
# number is the client's BW average in MB/s, a *_lat test's its typical
# latency in usec (t_typical; lower is better).
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-30}
TEST=${TEST:-send_bw}
case $TEST in
*_lat) ARGS=${SYSMON_ARGS:--s 2 -n 20000} col=5 unit=usec ;;
*) ARGS=${SYSMON_ARGS:--c UD -s 1024 -n 5000} col=4 unit=MB/s ;;
esac
[ -r /out/waker.so ] || { echo "no /out/waker.so (make sysmon-vm builds it)"; exit 1; }
cp /out/waker.so /tmp/waker.so
cp "$(command -v ibgo)" /tmp/ibgo
[ ! -x /out/ibgo-before ] || cp /out/ibgo-before /tmp/ibgo-before
if [ -z "$IMPLS" ]; then
	IMPLS="c cw go"
	[ ! -x /tmp/ibgo-before ] || IMPLS="$IMPLS go0"
fi
for impl in $IMPLS; do
	case $impl in
	c | cw | cws | cwc | go | cs | gs) ;;
	go0) [ -x /tmp/ibgo-before ] || { echo "go0 needs /out/ibgo-before (SYSMON_BEFORE=...)"; exit 1; } ;;
	*) echo "unknown implementation $impl (c cw cws cwc go cs gs go0)"; exit 1 ;;
	esac
done
case " $IMPLS " in *" c "*) ;; *) echo "IMPLS must include c, the reference"; exit 1 ;; esac
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
TS0="" TS1=""
if [ "${PIN:-1}" = 1 ]; then
	TS0="taskset -c 0" TS1="taskset -c 1"
fi
port=22000

# one IMPL: one $TEST pair, prints the client's number (column $col)
one() {
	port=$((port + 1))
	pre="" srvpre="" srvbin=""
	case $1 in
	c) bin=ib_$TEST ;;
	cw) bin=ib_$TEST pre=LD_PRELOAD=/tmp/waker.so srvpre=$pre ;;
	cws) bin=ib_$TEST srvpre=LD_PRELOAD=/tmp/waker.so ;;
	cwc) bin=ib_$TEST pre=LD_PRELOAD=/tmp/waker.so ;;
	go) bin="/tmp/ibgo perf $TEST" ;;
	cs) bin="/tmp/ibgo perf $TEST" srvbin=ib_$TEST ;;
	gs) bin=ib_$TEST srvbin="/tmp/ibgo perf $TEST" ;;
	go0) bin="/tmp/ibgo-before perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	$TS0 env $srvpre ${srvbin:-$bin} -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/s.srv 2>&1 &
	srv=$!
	waitport $port
	if [ -n "$srvpre" ] && [ "$(ls /proc/$srv/task | wc -l)" -lt 2 ]; then
		echo "the waker did not start in the C server" >&2; exit 1
	fi
	# shellcheck disable=SC2086
	$TS1 env $pre $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/s.cli 2>&1 || cat /tmp/s.cli >&2
	wait $srv || cat /tmp/s.srv >&2
	awk -v col=$col '/^ #bytes/ {r = 1; next} r && NF > 3 {print $col; exit}' /tmp/s.cli
}

median() { grep . | sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

echo "$TEST $ARGS, $ROUNDS rounds, pinned: ${PIN:-1}, implementations: $IMPLS"
: > /tmp/rounds
r=0
while [ $r -lt "$ROUNDS" ]; do
	# shellcheck disable=SC2086
	set -- $IMPLS
	k=$((r % $#))
	while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
	line=""
	for impl in "$@"; do line="$line $impl=$(one "$impl")"; done
	echo "ROUND $r$line" | tee -a /tmp/rounds
	r=$((r + 1))
done
# per implementation: the median of its numbers, and the median over rounds
# of its number over c's in the same round (rounds where either is missing
# are left out)
for impl in $IMPLS; do
	m=$(awk -v i="$impl" '{for (k = 3; k <= NF; k++) {split($k, kv, "="); if (kv[1] == i && kv[2] != "") print kv[2]}}' /tmp/rounds | median)
	[ "$impl" != c ] || { echo "c: median $m $unit"; continue; }
	rs=$(awk -v i="$impl" '{c = ""; g = ""
		for (k = 3; k <= NF; k++) {split($k, kv, "="); if (kv[1] == "c") c = kv[2]; if (kv[1] == i) g = kv[2]}
		if (c != "" && g != "" && c > 0) print g / c}' /tmp/rounds)
	n=$(echo "$rs" | grep -c . || true)
	above=$(echo "$rs" | awk '$1 > 1' | wc -l)
	echo "$impl: median $m $unit; $impl/c per round: median $(echo "$rs" | median) over $n rounds, above 1 in $above"
done
