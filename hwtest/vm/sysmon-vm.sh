#!/bin/sh
# `make sysmon-vm`: runs inside the soft-RoCE guest (issue 16: why ibgo's UD
# send_bw trails C perftest's). Per round, in turn: Debian's C perftest pair
# as is (c), the same pair with /out/waker.so preloaded into both processes
# (cw: one extra thread each that wakes every 10 ms, as the Go runtime's
# sysmon does while a goroutine runs), and ibgo's pair (go). The order of c
# and cw alternates between rounds. PIN=1 (the default) puts every server
# on vCPU 0 and every client on vCPU 1 (taskset, all threads), which removes
# the two-mode spread of unpinned runs (both spinners on one vCPU or not).
# Prints each round and the medians; per-round ratios are in the rounds.
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
# An earlier build at /out/ibgo-before also runs in every round (go0), for
# an A/B of two ibgo builds under the same conditions.
[ ! -x /out/ibgo-before ] || cp /out/ibgo-before /tmp/ibgo-before
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
	pre=""
	case $1 in
	c) bin=ib_$TEST ;;
	cw) bin=ib_$TEST pre=LD_PRELOAD=/tmp/waker.so ;;
	go) bin="/tmp/ibgo perf $TEST" ;;
	go0) bin="/tmp/ibgo-before perf $TEST" ;;
	esac
	# shellcheck disable=SC2086
	$TS0 env $pre $bin -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/s.srv 2>&1 &
	srv=$!
	waitport $port
	if [ "$1" = cw ] && [ "$(ls /proc/$srv/task | wc -l)" -lt 2 ]; then
		echo "the waker did not start in the C server" >&2; exit 1
	fi
	# shellcheck disable=SC2086
	$TS1 env $pre $bin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/s.cli 2>&1 || cat /tmp/s.cli >&2
	wait $srv || cat /tmp/s.srv >&2
	awk -v col=$col '/^ #bytes/ {r = 1; next} r && NF > 3 {print $col; exit}' /tmp/s.cli
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "$TEST $ARGS, $ROUNDS rounds, pinned: ${PIN:-1}"
cs="" ws="" gs="" os=""
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) -eq 0 ]; then c=$(one c); w=$(one cw); else w=$(one cw); c=$(one c); fi
	o=""
	if [ -x /tmp/ibgo-before ]; then
		if [ $((r % 2)) -eq 0 ]; then g=$(one go); o=" go0=$(one go0)"; else o=" go0=$(one go0)"; g=$(one go); fi
	else
		g=$(one go)
	fi
	echo "ROUND $r c=$c cw=$w go=$g$o"
	cs="$cs $c" ws="$ws $w" gs="$gs $g" os="$os ${o#*=}"
	r=$((r + 1))
done
cm=$(echo "$cs" | median) wm=$(echo "$ws" | median) gm=$(echo "$gs" | median)
awk -v u="$unit" -v c="$cm" -v w="$wm" -v g="$gm" 'BEGIN {printf "medians %s: c %s, cw %s, go %s; cw/c %.3f, go/c %.3f\n", u, c, w, g, w / c, g / c}'
if [ -x /tmp/ibgo-before ]; then
	om=$(echo "$os" | median)
	awk -v o="$om" -v g="$gm" 'BEGIN {printf "go0 (the earlier build) %s; go/go0 %.3f\n", o, g / o}'
fi
