#!/bin/sh
# `make threads-vm`: runs inside the soft-RoCE guest (issues 9 and 16: where
# the CPU of each side goes). Per round, Debian's C pair and then ibgo's
# pair (IMPLS="c go"; cs is a C server with an ibgo client, gs the other
# way round) run one test (THREADS_TEST, default send_bw; THREADS_ARGS, default
# -c UD -s 1024 -D 5), pinned (server on vCPU 0, client on vCPU 1). For one
# second in the middle of each run it reads the scheduler's statistics of
# every thread of both processes and of the kernel threads that share their
# vCPUs or run rxe work (ksoftirqd, rcu_preempt, kworkers, migration), and
# prints for each thread that ran over 1 ms, per second of the measured
# window: the time it ran, the time it waited runnable for its vCPU, and
# how many times it was scheduled in. It reads with shell
# builtins only, so the reading itself adds no processes to the vCPUs.
set -e
. /ibgo/lib.sh
ROUNDS=${ROUNDS:-2}
TEST=${THREADS_TEST:-send_bw}
ARGS=${THREADS_ARGS:--c UD -s 1024 -D 5}
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
gidx=$(rocev2_gid "$ip")
[ -n "$gidx" ] || { echo "no RoCE v2 GID for $ip on rxe0"; exit 1; }
port=26400

# kthreads: the kernel threads that can take the pairs' vCPUs or run rxe
# work (6.12 runs it on an unbound workqueue: kworker/uN:M), as
# "pid:name"; listed again for each run, since kworkers come and go.
kthreads() {
	local p c
	kt=""
	for p in /proc/[0-9]*; do
		read -r c < "$p/comm" 2> /dev/null || continue
		case $c in ksoftirqd/* | rcu_preempt | kworker/[01]:* | kworker/u* | migration/*) kt="$kt ${p#/proc/}:$c" ;; esac
	done
}

# snap CLI SRV: "elapsed <uptime>", then "name run_ns wait_ns slices" for
# every thread of interest
snap() {
	local up e t r w s
	read -r up _ < /proc/uptime
	echo "elapsed $up 0 0"
	for e in $kt; do read -r r w s < "/proc/${e%%:*}/schedstat" 2> /dev/null && echo "${e#*:}:${e%%:*} $r $w $s"; done
	for t in /proc/"$1"/task/*; do read -r r w s < "$t/schedstat" 2> /dev/null && echo "client:${t##*/} $r $w $s"; done
	for t in /proc/"$2"/task/*; do read -r r w s < "$t/schedstat" 2> /dev/null && echo "server:${t##*/} $r $w $s"; done
	return 0 # a thread that ended between the listing and the read is left out
}

one() {
	port=$((port + 1))
	case $1 in
	c) sbin=ib_$TEST cbin=ib_$TEST ;;
	go) sbin="ibgo perf $TEST" cbin="ibgo perf $TEST" ;;
	cs) sbin=ib_$TEST cbin="ibgo perf $TEST" ;; # C server, ibgo client
	gs) sbin="ibgo perf $TEST" cbin=ib_$TEST ;; # ibgo server, C client
	*) echo "unknown pair $1 (c, go, cs, gs)"; exit 1 ;;
	esac
	# shellcheck disable=SC2086
	taskset -c 0 $sbin -d rxe0 -x "$gidx" -p $port $ARGS > /tmp/t.srv 2>&1 &
	srv=$!
	waitport $port
	# shellcheck disable=SC2086
	taskset -c 1 $cbin -d rxe0 -x "$gidx" -p $port $ARGS "$ip" > /tmp/t.cli 2>&1 &
	cli=$!
	sleep 1.5
	kthreads
	snap $cli $srv > /tmp/t0
	sleep 1
	snap $cli $srv > /tmp/t1
	wait $cli || cat /tmp/t.cli >&2
	wait $srv || cat /tmp/t.srv >&2
	# per second of the window (sleep 1 plus the reading: measured)
	el=$(awk 'NR == FNR && $1 == "elapsed" {a = $2; next} $1 == "elapsed" {printf "%.3f", $2 - a}' /tmp/t0 /tmp/t1)
	echo "$1: client's result $(awk '/^ #bytes/ {r = 1; next} r && NF > 3 {print $4; exit}' /tmp/t.cli); over ${el} s, per second: thread run_ms wait_ms scheduled"
	awk -v el="$el" 'NR == FNR {r[$1] = $2; w[$1] = $3; s[$1] = $4; next}
		$1 != "elapsed" && ($1 in r) && $2 - r[$1] > 1e6 {printf "  %-26s %7.1f %6.1f %6d\n", $1, ($2 - r[$1]) / 1e6 / el, ($3 - w[$1]) / 1e6 / el, ($4 - s[$1]) / el}' /tmp/t0 /tmp/t1 |
		sort -k2 -n -r
}

echo "$TEST $ARGS, $ROUNDS rounds; clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
round=0
while [ $round -lt "$ROUNDS" ]; do
	for impl in ${IMPLS:-c go}; do one "$impl"; done
	round=$((round + 1))
done
