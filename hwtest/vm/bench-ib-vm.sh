#!/bin/sh
# `make bench-ib-vm`: runs inside the soft-RoCE guest. Aeron over each
# channel of a list, side by side in the same guest and the same run:
# 256-byte messages, the same MTU and receiver window (rcv-wnd, so-rcvbuf,
# so-sndbuf) for every channel. For each channel and round: a fresh
# `ibgo driver`, then `ibgo aeron throughput` (publisher and subscriber in
# one process; the run ends only when every message arrived) and `ibgo
# aeron ping`/`pong` (two channels, round-trip time), then the driver's
# distinct error log (ErrorStat). Rounds rotate the channels, and the
# medians are printed with their ratio to aeron:udp.
#
# BENCH_IB_CHANNELS lists NAME:MEDIA:EXTRA entries, space-separated; each
# becomes aeron:MEDIA?endpoint=IP:PORT|mtu=...|rcv-wnd=...|...EXTRA. A
# channel the driver refuses (ib-qp=rc until it exists) is reported as
# "not supported" with the driver's reason, and the others still run.
#
# What the ratio means on soft-RoCE: rxe is a kernel driver that builds
# RoCE v2 packets in software and hands them to the same network stack
# aeron:udp uses, so both channels pay the kernel per packet (plus rxe's
# own work and a doorbell write(2) per post list); nothing is offloaded.
# The ratio tells what ibgo's verbs path costs against its socket path on
# the same CPU, not what an HCA gives (docs/hardware.md for that).
set -u
. /ibgo/lib.sh # stop, dur2us, medianof
ROUNDS=${BENCH_ROUNDS:-3}
MESSAGES=${BENCH_MESSAGES:-200000}
PINGS=${BENCH_PINGS:-2000}
MTU=${BENCH_MTU:-4096}
WND=${BENCH_WINDOW:-2m}
CHANNELS=${BENCH_IB_CHANNELS:-"ib-ud:ib: udp:udp: ib-rc:ib:|ib-qp=rc"}
cp "$(command -v ibgo)" /tmp/ibgo
IBGO=/tmp/ibgo
ip=${IBGO_VM_IP:?the guest init exports IBGO_VM_IP}
port=23000
WORK=$(mktemp -d /tmp/bench-ib.XXXXXX)




# one NAME MEDIA EXTRA: one round of one channel; appends "tput p50 p99 errors"
# to $WORK/NAME, or writes $WORK/NAME.unsupported
one() {
	name=$1 media=$2 extra=$3
	port=$((port + 3))
	opts="|mtu=$MTU|rcv-wnd=$WND|so-rcvbuf=$WND|so-sndbuf=$WND$extra"
	c="aeron:$media?endpoint=$ip:$port$opts"
	pc="aeron:$media?endpoint=$ip:$((port + 1))$opts"
	qc="aeron:$media?endpoint=$ip:$((port + 2))$opts"
	dir=/dev/shm/bench-ib-$name-$port
	rm -rf "$dir"
	$IBGO driver --dir "$dir" --dir-delete-on-shutdown >"$WORK/driver.log" 2>&1 &
	drv=$!
	i=0
	while [ ! -e "$dir/cnc.dat" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 0.5
	rc=0
	timeout -s INT 900 $IBGO aeron throughput --dir "$dir" --channel "$c" --messages "$MESSAGES" --length 256 >"$WORK/tput.log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		stop $drv
		if grep -Eq 'not implemented|not supported|INVALID_CHANNEL' "$WORK/tput.log"; then
			grep -Eo '(ib|aeron)[^"]*(not implemented|not supported)[^"]*' "$WORK/tput.log" | head -n 1 >"$WORK/$name.unsupported"
			[ -s "$WORK/$name.unsupported" ] || head -n 1 "$WORK/tput.log" >"$WORK/$name.unsupported"
			return 0
		fi
		echo "== $name: throughput rc=$rc" >&2
		cat "$WORK/tput.log" "$WORK/driver.log" >&2
		echo "nan nan nan nan" >>"$WORK/$name"
		return 0
	fi
	tput=$(sed -n 's/^total: .*: \([0-9.]*\) M msg\/s.*/\1/p' "$WORK/tput.log")
	$IBGO aeron pong --dir "$dir" --channel "$pc" --pong-channel "$qc" >"$WORK/pong.log" 2>&1 &
	pong=$!
	sleep 0.5
	timeout -s INT 600 $IBGO aeron ping --dir "$dir" --channel "$pc" --pong-channel "$qc" \
		--messages "$PINGS" --warmup $((PINGS / 4)) --length 256 >"$WORK/ping.log" 2>&1 || echo "== $name: ping failed" >&2
	stop $pong
	l=$(grep 'p99.9=' "$WORK/ping.log" | tail -n 1)
	p50=$(dur2us "$(echo "$l" | sed -n 's/.* p50=\([^ ]*\).*/\1/p')")
	p99=$(dur2us "$(echo "$l" | sed -n 's/.* p99=\([^ ]*\).*/\1/p')")
	errs=$($IBGO aeron errors --dir "$dir" 2>/dev/null | sed -n 's/^\([0-9]*\) distinct errors observed.*/\1/p')
	if [ "${errs:-0}" != 0 ]; then $IBGO aeron errors --dir "$dir" >&2; fi
	stop $drv
	echo "${tput:-nan} ${p50:-nan} ${p99:-nan} ${errs:-nan}" >>"$WORK/$name"
	echo "  $name round: ${tput:-nan} M msg/s, RTT p50 ${p50:-nan} µs p99 ${p99:-nan} µs, errors ${errs:-nan}" >&2
}

echo "Aeron over rxe0 (one guest, loopback): $MESSAGES x 256 B, mtu=$MTU, window $WND, $PINGS pings, $ROUNDS rounds"
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

col() { awk -v c="$2" '{printf " %s", $c}' "$WORK/$1" 2>/dev/null; }
base=${BENCH_BASE:-udp}
bt=$(col "$base" 1 | medianof) bl=$(col "$base" 2 | medianof)
printf '%-8s %-14s %-10s %-12s %-12s %-10s %s\n' channel "M msg/s" "vs $base" "RTT p50 µs" "vs $base" "RTT p99 µs" "errors (per round)"
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
