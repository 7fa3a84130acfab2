#!/bin/sh
# `make bench-ib-vm BENCH_TOPO=two`: bench-ib-vm.sh across two guests (one
# vCPU each, rxe on a qemu stream link). Node 2 subscribes and answers
# pings, node 1 publishes and pings; both run this script and walk the
# same list of channels and rounds, each step waiting for the other through
# Aeron itself (a publication waits for its subscription, ping for pong).
#
# messages/s is BENCH_MESSAGES / the publisher's elapsed time, which
# includes connecting (SIDR or SETUP, up to a few hundred ms): compare
# channels with each other, as the table's ratio does, not with the
# one-guest numbers. The subscriber checks that every message arrives once
# and in order; both drivers' error logs are read after each step.
set -u
. /ibgo/lib.sh # stop, dur2us, medianof
ROUNDS=${BENCH_ROUNDS:-3}
MESSAGES=${BENCH_MESSAGES:-200000}
PINGS=${BENCH_PINGS:-2000}
MTU=${BENCH_MTU:-4096}
WND=${BENCH_WINDOW:-2m}
CHANNELS=${BENCH_IB_CHANNELS:-"ib-ud:ib: udp:udp: ib-rc:ib:|ib-qp=rc"}
# BENCH_DRIVER_ENV: AERON_* settings of both drivers (e.g. SHARED threading
# and a sleeping idle strategy, so that node 2's driver CPU per message,
# which its lines report, is its work rather than its spinning)
DRIVER_ENV=${BENCH_DRIVER_ENV:-}
cp "$(command -v ibgo)" /tmp/ibgo
IBGO=/tmp/ibgo
node=${IBGO_VM_NODE:?the guest init exports IBGO_VM_NODE}
ip=${IBGO_VM_IP:?} peer=${IBGO_VM_PEER:?}
if [ "$node" = 1 ]; then sub_ip=$peer pub_ip=$ip; else sub_ip=$ip pub_ip=$peer; fi
port=23000
WORK=$(mktemp -d /tmp/bench-ib.XXXXXX)



now() { date +%s.%N; }

one() {
	name=$1 media=$2 extra=$3
	port=$((port + 3))
	opts="|mtu=$MTU|rcv-wnd=$WND|so-rcvbuf=$WND|so-sndbuf=$WND$extra"
	c="aeron:$media?endpoint=$sub_ip:$port$opts"
	pc="aeron:$media?endpoint=$sub_ip:$((port + 1))$opts"
	qc="aeron:$media?endpoint=$pub_ip:$((port + 2))$opts"
	dir=/dev/shm/bench-ib-$name-$port
	rm -rf "$dir"
	env $DRIVER_ENV $IBGO driver --dir "$dir" --dir-delete-on-shutdown >"$WORK/driver.log" 2>&1 &
	drv=$!
	i=0
	while [ ! -e "$dir/cnc.dat" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 0.5
	if [ "$node" = 2 ]; then
		rc=0
		c0=$(awk '{print $14, $15}' /proc/$drv/stat) g0=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat)
		$IBGO aeron sub --dir "$dir" --channel "$c" -n "$MESSAGES" --timeout 5m >"$WORK/sub.log" 2>&1 || rc=$?
		c1=$(awk '{print $14, $15}' /proc/$drv/stat) g1=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat)
		# clock ticks are USER_HZ (100 a second) on every Linux
		cpu=$(echo "$c0 $c1 $g0 $g1" | awk -v n="$MESSAGES" '{printf "driver %.0f ns/msg (user %.0f, system %.0f), guest %.0f ns/msg",
			($3 + $4 - $1 - $2) * 1e7 / n, ($3 - $1) * 1e7 / n, ($4 - $2) * 1e7 / n, ($6 - $5) * 1e7 / n}')
		if [ $rc -ne 0 ]; then
			echo "== node 2 $name: sub rc=$rc: $(tail -n 1 "$WORK/sub.log")"
			stop $drv
			grep -Eq 'not implemented|not supported|INVALID_CHANNEL' "$WORK/sub.log" && touch "$WORK/$name.unsupported"
			return 0
		fi
		$IBGO aeron pong --dir "$dir" --channel "$pc" --pong-channel "$qc" -n $((PINGS + PINGS / 4)) >"$WORK/pong.log" 2>&1 ||
			echo "== node 2 $name: pong failed: $(tail -n 1 "$WORK/pong.log")"
		errs=$($IBGO aeron errors --dir "$dir" 2>/dev/null | sed -n 's/^\([0-9]*\) distinct errors observed.*/\1/p')
		echo "  node 2 $name: $(tail -n 1 "$WORK/sub.log"); $cpu over the stream; errors ${errs:-nan}"
		[ "${errs:-0}" = 0 ] || $IBGO aeron errors --dir "$dir"
		stop $drv
		return 0
	fi
	rc=0
	t0=$(now)
	$IBGO aeron pub --dir "$dir" --channel "$c" -n "$MESSAGES" -l 256 --timeout 1m >"$WORK/pub.log" 2>&1 || rc=$?
	t1=$(now)
	if [ $rc -ne 0 ]; then
		stop $drv
		if grep -Eq 'not implemented|not supported|INVALID_CHANNEL' "$WORK/pub.log"; then
			grep -Eo '(ib|aeron)[^"]*(not implemented|not supported)[^"]*' "$WORK/pub.log" | head -n 1 >"$WORK/$name.unsupported"
			[ -s "$WORK/$name.unsupported" ] || head -n 1 "$WORK/pub.log" >"$WORK/$name.unsupported"
			return 0
		fi
		echo "== $name: pub rc=$rc" >&2
		cat "$WORK/pub.log" "$WORK/driver.log" >&2
		echo "nan nan nan nan" >>"$WORK/$name"
		return 0
	fi
	tput=$(awk -v n="$MESSAGES" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", n / (b - a) / 1e6}')
	timeout -s INT 900 $IBGO aeron ping --dir "$dir" --channel "$pc" --pong-channel "$qc" \
		--messages "$PINGS" --warmup $((PINGS / 4)) --length 256 >"$WORK/ping.log" 2>&1 || echo "== $name: ping failed" >&2
	l=$(grep 'p99.9=' "$WORK/ping.log" | tail -n 1)
	p50=$(dur2us "$(echo "$l" | sed -n 's/.* p50=\([^ ]*\).*/\1/p')")
	p99=$(dur2us "$(echo "$l" | sed -n 's/.* p99=\([^ ]*\).*/\1/p')")
	errs=$($IBGO aeron errors --dir "$dir" 2>/dev/null | sed -n 's/^\([0-9]*\) distinct errors observed.*/\1/p')
	[ "${errs:-0}" = 0 ] || $IBGO aeron errors --dir "$dir" >&2
	stop $drv
	echo "${tput:-nan} ${p50:-nan} ${p99:-nan} ${errs:-nan}" >>"$WORK/$name"
	echo "  node 1 $name round: ${tput:-nan} M msg/s, RTT p50 ${p50:-nan} µs p99 ${p99:-nan} µs, errors ${errs:-nan}"
}

[ "$node" = 1 ] && echo "Aeron across two guests (rxe, qemu link): $MESSAGES x 256 B, mtu=$MTU, window $WND, $PINGS pings, $ROUNDS rounds"
r=0
while [ $r -lt "$ROUNDS" ]; do
	for ch in $CHANNELS; do
		name=${ch%%:*} rest=${ch#*:}
		media=${rest%%:*} extra=${rest#*:}
		[ -e "$WORK/$name.unsupported" ] && continue
		one "$name" "$media" "$extra"
	done
	r=$((r + 1))
done
[ "$node" = 1 ] || exit 0

col() { awk -v c="$2" '{printf " %s", $c}' "$WORK/$1" 2>/dev/null; }
base=${BENCH_BASE:-udp}
bt=$(col "$base" 1 | medianof) bl=$(col "$base" 2 | medianof)
printf '%-8s %-14s %-10s %-12s %-12s %-10s %s\n' channel "M msg/s" "vs $base" "RTT p50 µs" "vs $base" "RTT p99 µs" "errors (node 1, per round)"
for ch in $CHANNELS; do
	name=${ch%%:*}
	if [ -e "$WORK/$name.unsupported" ]; then
		printf '%-8s not supported: %s\n' "$name" "$(cat "$WORK/$name.unsupported")"
		continue
	fi
	t=$(col "$name" 1 | medianof) l=$(col "$name" 2 | medianof) p=$(col "$name" 3 | medianof)
	printf '%-8s %-14s %-10s %-12s %-12s %-10s %s\n' "$name" "$t" \
		"$(awk -v a="$t" -v b="$bt" 'BEGIN {if (b > 0 && a == a + 0) printf "%.2f", a / b; else print "-"}')" "$l" \
		"$(awk -v a="$l" -v b="$bl" 'BEGIN {if (b > 0 && a == a + 0) printf "%.2f", a / b; else print "-"}')" "$p" "$(col "$name" 4)"
	echo "         rounds (M msg/s):$(col "$name" 1)"
done
rm -rf "$WORK"
