#!/bin/sh
# `make bench-write-vm`: runs inside the soft-RoCE guest. aeron:ib RC with
# ib-mode=write against ib-mode=send and aeron:udp, side by side in one run
# (rounds rotate the channels), same mtu and receiver window: for each, a
# publisher driver and a subscriber driver (two `ibgo driver` processes),
# `ibgo aeron throughput --role sub` on the subscriber's and `--role pub`
# on the publisher's (256-byte messages); then ping/pong on one driver
# (the RTT across two would be the scheduler's: eight spinning threads on
# the guest's two CPUs). Reported per channel (medians): throughput (the
# subscriber's rate), the receiving driver's CPU time per message (user + system, from
# /proc/<pid>/stat, over the whole throughput run), the guest's total busy
# CPU per message (/proc/stat: on soft-RoCE the kernel does the placing),
# and RTT p50/p99.
set -u
. /ibgo/lib.sh # stop, dur2us, medianof
ROUNDS=${BENCH_ROUNDS:-3}
MESSAGES=${BENCH_MESSAGES:-5000000}
PINGS=${BENCH_PINGS:-5000}
MTU=${BENCH_MTU:-4096}
WND=${BENCH_WINDOW:-2m}
# the drivers run one agent each and sleep when idle, so that a driver's
# CPU time is its work, not its spinning (and two drivers and two clients
# fit the guest's two CPUs)
DRIVER_ENV=${BENCH_DRIVER_ENV:-"AERON_THREADING_MODE=SHARED AERON_SHARED_IDLE_STRATEGY=sleep-ns,20000"}
CHANNELS=${BENCH_WRITE_CHANNELS:-"write:ib:|ib-qp=rc|ib-mode=write send:ib:|ib-qp=rc|ib-mode=send udp:udp:"}
cp "$(command -v ibgo)" /tmp/ibgo
IBGO=/tmp/ibgo
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
port=23500
WORK=$(mktemp -d /tmp/bench-write.XXXXXX)
TCK=100 # USER_HZ: the unit of /proc/stat and /proc/<pid>/stat on every Linux




# proc_cpu PID: utime + stime in clock ticks
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# proc_us PID: "utime stime" in clock ticks
proc_us() { awk '{print $14, $15}' "/proc/$1/stat"; }
# guest_busy: busy clock ticks of every CPU since boot
guest_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

driver() { # DIR: starts a driver, echoes its pid
	rm -rf "$1"
	env $DRIVER_ENV $IBGO driver --dir "$1" --dir-delete-on-shutdown >"$1.log" 2>&1 &
	p=$!
	i=0
	while [ ! -e "$1/cnc.dat" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	echo $p
}

one() {
	name=$1 media=$2 extra=$3
	port=$((port + 3))
	opts="|mtu=$MTU|rcv-wnd=$WND|so-rcvbuf=$WND|so-sndbuf=$WND$extra"
	c="aeron:$media?endpoint=$ip:$port$opts"
	pc="aeron:$media?endpoint=$ip:$((port + 1))$opts"
	qc="aeron:$media?endpoint=$ip:$((port + 2))$opts"
	P=/dev/shm/bw-pub-$port S=/dev/shm/bw-sub-$port
	dp=$(driver $P)
	ds=$(driver $S)
	sleep 0.5
	$IBGO aeron throughput --role sub --dir $S --channel "$c" -n "$MESSAGES" >"$WORK/sub.log" 2>&1 &
	sub=$!
	sleep 0.5
	c0=$(proc_cpu $ds) g0=$(guest_busy) us0=$(proc_us $ds)
	rc=0
	timeout -s INT 900 $IBGO aeron throughput --role pub --dir $P --channel "$c" -n "$MESSAGES" -l 256 >"$WORK/pub.log" 2>&1 || rc=$?
	wait $sub || rc=$?
	c1=$(proc_cpu $ds) g1=$(guest_busy) us1=$(proc_us $ds)
	split=$(echo "$us0 $us1" | awk -v t="$TCK" -v n="$MESSAGES" '{printf "user %.0f, system %.0f", ($3 - $1) / t * 1e9 / n, ($4 - $2) / t * 1e9 / n}')
	if [ $rc -ne 0 ]; then
		echo "== $name: throughput rc=$rc" >&2
		cat "$WORK/pub.log" "$WORK/sub.log" "$P.log" "$S.log" >&2
	fi
	tput=$(sed -n 's/^subscriber total: .*: \([0-9.]*\) M msg\/s.*/\1/p' "$WORK/sub.log" | tail -n 1)
	rcpu=$(awk -v a="$c0" -v b="$c1" -v t="$TCK" -v n="$MESSAGES" 'BEGIN {printf "%.0f", (b - a) / t * 1e9 / n}')
	gcpu=$(awk -v a="$g0" -v b="$g1" -v t="$TCK" -v n="$MESSAGES" 'BEGIN {printf "%.0f", (b - a) / t * 1e9 / n}')
	errs=0
	for d in $P $S; do
		e=$($IBGO aeron errors --dir "$d" 2>/dev/null | sed -n 's/^\([0-9]*\) distinct errors observed.*/\1/p')
		if [ "${e:-0}" != 0 ]; then $IBGO aeron errors --dir "$d" >&2; fi
		errs=$((errs + ${e:-0}))
	done
	if [ "$name" = write ]; then
		$IBGO aeron stat --dir $S 2>/dev/null | grep -E 'rc write: (immediates|frames placed|grants)' >&2
	fi
	stop $dp
	stop $ds
	# RTT on one driver (ping and pong on it, the frames through rxe0 and
	# back): two drivers and two clients would be six spinning agents on
	# the guest's two CPUs, and the RTT that of the scheduler
	dp=$(driver $P)
	sleep 0.5
	$IBGO aeron pong --dir $P --channel "$pc" --pong-channel "$qc" >"$WORK/pong.log" 2>&1 &
	pong=$!
	sleep 0.5
	timeout -s INT 600 $IBGO aeron ping --dir $P --channel "$pc" --pong-channel "$qc" \
		--messages "$PINGS" --warmup $((PINGS / 4)) --length 256 >"$WORK/ping.log" 2>&1 || echo "== $name: ping failed" >&2
	stop $pong
	l=$(grep 'p99.9=' "$WORK/ping.log" | tail -n 1)
	p50=$(dur2us "$(echo "$l" | sed -n 's/.* p50=\([^ ]*\).*/\1/p')")
	p99=$(dur2us "$(echo "$l" | sed -n 's/.* p99=\([^ ]*\).*/\1/p')")
	e=$($IBGO aeron errors --dir "$P" 2>/dev/null | sed -n 's/^\([0-9]*\) distinct errors observed.*/\1/p')
	if [ "${e:-0}" != 0 ]; then $IBGO aeron errors --dir "$P" >&2; fi
	errs=$((errs + ${e:-0}))
	stop $dp
	echo "${tput:-nan} ${rcpu:-nan} ${gcpu:-nan} ${p50:-nan} ${p99:-nan} $errs" >>"$WORK/$name"
	echo "  $name round: ${tput:-nan} M msg/s, receiving driver ${rcpu:-nan} ns/msg ($split), guest ${gcpu:-nan} ns/msg, RTT p50 ${p50:-nan} µs p99 ${p99:-nan} µs, errors $errs" >&2
}

echo "Aeron between two drivers over rxe0 (one guest): $MESSAGES x 256 B, mtu=$MTU, window $WND, $PINGS pings, $ROUNDS rounds, $(nproc) CPUs, drivers: $DRIVER_ENV"
r=0
while [ $r -lt "$ROUNDS" ]; do
	for ch in $CHANNELS; do
		name=${ch%%:*} rest=${ch#*:}
		one "$name" "${rest%%:*}" "${rest#*:}"
	done
	r=$((r + 1))
done

col() { awk -v c="$2" '{printf " %s", $c}' "$WORK/$1" 2>/dev/null; }
base=${BENCH_BASE:-send}
bt=$(col "$base" 1 | medianof) bc=$(col "$base" 2 | medianof)
printf '%-6s %-9s %-8s %-16s %-8s %-14s %-11s %-11s %s\n' channel "M msg/s" "vs $base" "rcv driver ns/msg" "vs $base" "guest ns/msg" "RTT p50 µs" "RTT p99 µs" "errors"
for ch in $CHANNELS; do
	name=${ch%%:*}
	t=$(col "$name" 1 | medianof) rc=$(col "$name" 2 | medianof) g=$(col "$name" 3 | medianof) l=$(col "$name" 4 | medianof) p=$(col "$name" 5 | medianof)
	printf '%-6s %-9s %-8s %-16s %-8s %-14s %-11s %-11s %s\n' "$name" "$t" \
		"$(awk -v a="$t" -v b="$bt" 'BEGIN {if (b > 0 && a == a + 0) printf "%.2f", a / b; else print "-"}')" "$rc" \
		"$(awk -v a="$rc" -v b="$bc" 'BEGIN {if (b > 0 && a == a + 0) printf "%.2f", a / b; else print "-"}')" "$g" "$l" "$p" "$(col "$name" 6)"
	echo "       rounds (M msg/s):$(col "$name" 1)   (rcv ns/msg):$(col "$name" 2)"
done
rm -rf "$WORK"
