#!/usr/bin/env bash
# aeron-interop.sh: the interop matrix between ibgo and Aeron's C driver,
# client library and samples (make interop-aeron AERON_C_BIN=DIR).
#
#   hwtest/aeron-interop.sh IBGO AERON_C_BIN
#
# IBGO is an ibgo binary; AERON_C_BIN a directory holding a build of Aeron's
# C samples (aeronmd, basic_publisher, basic_subscriber, streaming_publisher,
# streaming_exclusive_publisher, rate_subscriber, cping, cpong, AeronStat,
# ErrorStat). Part 1 runs Aeron's C samples against `ibgo driver`; part 2
# runs ibgo's samples against Aeron's aeronmd. Every driver gets its own
# directory under /dev/shm, every process started here is stopped by its pid,
# every wait is bounded. Prints PASS/FAIL per row and exits non-zero if any
# row failed.
set -u

IBGO=${1:?usage: aeron-interop.sh IBGO AERON_C_BIN}
BIN=${2:?usage: aeron-interop.sh IBGO AERON_C_BIN}
MSGS=${INTEROP_MESSAGES:-1000000}
C=aeron:ipc

for b in aeronmd basic_publisher basic_subscriber streaming_publisher streaming_exclusive_publisher \
	rate_subscriber cping cpong AeronStat ErrorStat; do
	[ -x "$BIN/$b" ] || { echo "interop-aeron: $BIN/$b is missing or not executable" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/ibgo-interop.XXXXXX)
# shellcheck source=hwtest/interop-lib.sh
. "$(dirname "$0")/interop-lib.sh"

newdir() {
	DIR=/dev/shm/ibgo-interop-$1-$$-$RANDOM
	DIRS+=("$DIR")
	rm -rf "$DIR"
}

start_ibgo_driver() {
	newdir ibgo
	bg ibgo-driver "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	DRIVER=$LAST
	wait_for "$DIR/cnc.dat" . 20
	sleep 0.5
}

start_c_driver() {
	newdir c
	AERON_DIR=$DIR AERON_DIR_DELETE_ON_SHUTDOWN=true bg aeronmd "$BIN/aeronmd"
	DRIVER=$LAST
	wait_for "$DIR/cnc.dat" . 20
	sleep 0.5
}

last_total() { # the last "totals N messages" of a rate_subscriber log
	grep -o 'totals [0-9]* messages' "$1" | tail -1 | awk '{print $2}'
}

# mixed SLUG DRIVERNAME: ibgo's publisher (a Go client) to Aeron's rate_subscriber
# (a C client) through the driver in $D.
mixed() {
	local n=100000
	bg rate_subscriber-mixed-$1 "$BIN/rate_subscriber" -p "$D" -c $C -s 1004
	local s=$LAST
	wait_for "$WORK/rate_subscriber-mixed-$1.log" 'Subscription channel status' 20
	run 300 pub-mixed-$1 "$IBGO" aeron pub --dir "$D" --channel $C --stream 1004 --messages $n --length 256 --exclusive
	local rc=$?
	wait_for "$WORK/rate_subscriber-mixed-$1.log" "totals $n messages" 30
	stop "$s"
	local got
	got=$(last_total "$WORK/rate_subscriber-mixed-$1.log")
	result "ibgo aeron pub --exclusive -n $n -l 256 -> rate_subscriber, against $2" \
		$([ "$rc" = 0 ] && [ "$got" = "$n" ] && echo 0 || echo 1) "pub exit $rc, subscriber total ${got:-none}"
}

echo "== Aeron's C samples against ibgo driver (logs in $WORK)"
start_ibgo_driver
D=$DIR

bg basic_subscriber "$BIN/basic_subscriber" -p "$D" -c $C -s 1001
S=$LAST
wait_for "$WORK/basic_subscriber.log" 'Subscription channel status' 20
run 30 basic_publisher "$BIN/basic_publisher" -p "$D" -c $C -s 1001 -m 5 -l 1
wait_for "$WORK/basic_subscriber.log" 'Hello World! 4' 10
stop "$S"
got=$(grep -c '<<Hello World! [0-4]>>' "$WORK/basic_subscriber.log")
order=$(grep -o 'Hello World! [0-9]' "$WORK/basic_subscriber.log" | awk '{print $3}' | tr -d '\n')
grep -q 'Available image' "$WORK/basic_subscriber.log" && grep -q 'Done sending' "$WORK/basic_publisher.log"
ok=$?
result "basic_publisher -> basic_subscriber" $([ $ok = 0 ] && [ "$got" = 5 ] && [ "$order" = 01234 ] && echo 0 || echo 1) \
	"$got of 5 messages, order $order, image available"

for pub in streaming_publisher streaming_exclusive_publisher; do
	bg rate_subscriber-$pub "$BIN/rate_subscriber" -p "$D" -c $C -s 1001
	S=$LAST
	wait_for "$WORK/rate_subscriber-$pub.log" 'Subscription channel status' 20
	run 300 $pub "$BIN/$pub" -p "$D" -c $C -s 1001 -L 256 -m "$MSGS"
	rc=$?
	wait_for "$WORK/rate_subscriber-$pub.log" "totals $MSGS messages" 30
	stop "$S"
	got=$(last_total "$WORK/rate_subscriber-$pub.log")
	rate=$(grep -o 'Total: .*msgs/sec' "$WORK/$pub.log")
	result "$pub -L 256 -m $MSGS -> rate_subscriber" $([ "$rc" = 0 ] && [ "$got" = "$MSGS" ] && echo 0 || echo 1) \
		"publisher exit $rc, subscriber total ${got:-none}; $rate"
done

bg cpong "$BIN/cpong" -p "$D" -c $C -C $C
P=$LAST
wait_for "$WORK/cpong.log" 'Publication channel status' 20
run 120 cping "$BIN/cping" -p "$D" -c $C -C $C -m 20000 -w 2000 -L 256
rc=$?
stop "$P"
p50=$(grep -E '^ *[0-9.]+ +0\.5000' "$WORK/cping.log" | awk '{print $1}' | head -1)
grep -q -i 'histogram\|percentile' "$WORK/cping.log"
ok=$?
result "cping -m 20000 -L 256 / cpong" $([ "$rc" = 0 ] && [ $ok = 0 ] && echo 0 || echo 1) "cping exit $rc, p50 ${p50:-?} us"

run 20 AeronStat "$BIN/AeronStat" -d "$D" -w false
rc=$?
rows=$(grep -c -E '^ *[0-9]+: ' "$WORK/AeronStat.log")
grep -q 'Bytes sent' "$WORK/AeronStat.log" && grep -q 'Control protocol version' "$WORK/AeronStat.log"
ok=$?
result "AeronStat -w false" $([ "$rc" = 0 ] && [ $ok = 0 ] && [ "$rows" -gt 30 ] && echo 0 || echo 1) "exit $rc, $rows counter rows"

# A channel asking for Aeron Transport Security (ats=true) is refused by
# ibgo driver, as by the C driver 1.48; the refusal must show in the
# distinct error log that ErrorStat reads.
run 20 udp-publisher "$BIN/basic_publisher" -p "$D" -c 'aeron:udp?endpoint=127.0.0.1:40457|ats=true' -m 1 -l 0
run 20 ErrorStat "$BIN/ErrorStat" -d "$D"
rc=$?
grep -q 'distinct error' "$WORK/ErrorStat.log" && grep -q 'udp' "$WORK/ErrorStat.log"
ok=$?
result "ErrorStat" $([ "$rc" = 0 ] && [ $ok = 0 ] && echo 0 || echo 1) "exit $rc, $(grep 'distinct error' "$WORK/ErrorStat.log")"

mixed ibgo "ibgo driver"

stop "$DRIVER"
rc=$RC
result "ibgo driver clean shutdown on SIGINT" $([ "$rc" = 0 ] && [ ! -e "$D" ] && echo 0 || echo 1) "exit $rc"

echo "== ibgo's samples against Aeron's aeronmd"
start_c_driver
D=$DIR

for ex in "" --exclusive; do
	name="pub${ex:+-exclusive}"
	bg sub-$name "$IBGO" aeron sub --dir "$D" --channel $C --stream 1001 --messages 100000 --timeout 60s
	S=$LAST
	sleep 1
	run 300 $name "$IBGO" aeron pub --dir "$D" --channel $C --stream 1001 --messages 100000 --length 256 $ex
	prc=$?
	for i in $(seq 600); do kill -0 "$S" 2>/dev/null || break; sleep 0.1; done
	stop "$S"
	src=$RC
	result "ibgo aeron pub $ex -n 100000 -l 256 -> ibgo aeron sub" $([ "$prc" = 0 ] && [ "$src" = 0 ] && echo 0 || echo 1) \
		"pub exit $prc, sub exit $src: $(tail -1 "$WORK/sub-$name.log")"
done

mixed c aeronmd

bg pong "$IBGO" aeron pong --dir "$D" --messages 22000
P=$LAST
sleep 1
run 120 ping "$IBGO" aeron ping --dir "$D" --messages 20000 --warmup 2000 --length 256
rc=$?
stop "$P"
prc=$RC
result "ibgo aeron ping / pong" $([ "$rc" = 0 ] && echo 0 || echo 1) "ping exit $rc, pong exit $prc: $(grep -i 'p50\|50' "$WORK/ping.log" | head -1)"

run 300 throughput "$IBGO" aeron throughput --dir "$D" --messages "$MSGS" --length 256
rc=$?
result "ibgo aeron throughput -n $MSGS" $([ "$rc" = 0 ] && echo 0 || echo 1) "exit $rc: $(tail -1 "$WORK/throughput.log")"

CD=$D
CDRIVER=$DRIVER

echo "== aeron:udp unicast on loopback between ibgo driver and aeronmd"
# udp_pair SLUG LABEL PUBDIR SUBDIR CHANNEL: ibgo aeron pub in PUBDIR's driver
# to ibgo aeron sub in SUBDIR's driver (the sub checks every sequence number).
udp_pair() {
	local name=$1 label=$2 pd=$3 sd=$4 ch=$5 n=100000
	bg sub-$name "$IBGO" aeron sub --dir "$sd" --channel "$ch" --stream 1001 --messages $n --timeout 60s
	local s=$LAST
	sleep 1
	run 300 pub-$name "$IBGO" aeron pub --dir "$pd" --channel "$ch" --stream 1001 --messages $n --length 256
	local prc=$?
	for i in $(seq 600); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
	stop "$s"
	result "udp $label -n $n -l 256" $([ "$prc" = 0 ] && [ "$RC" = 0 ] && echo 0 || echo 1) \
		"pub exit $prc, sub exit $RC: $(tail -1 "$WORK/sub-$name.log")"
}
for loss in 0 0.05; do
	newdir ibgo-udp
	AERON_DEBUG_RECEIVE_DATA_LOSS_RATE=$loss AERON_DEBUG_SEND_DATA_LOSS_RATE=$loss AERON_CUBICCONGESTIONCONTROL_MEASURERTT=true \
		bg ibgo-driver-udp-$loss "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	ID=$DIR
	IDRIVER=$LAST
	wait_for "$ID/cnc.dat" . 20
	sleep 0.5
	udp_pair c-to-ibgo-$loss "aeronmd -> ibgo driver (ibgo drops $loss of DATA received)" "$CD" "$ID" "aeron:udp?endpoint=127.0.0.1:$((20700 + RANDOM % 100))"
	udp_pair ibgo-to-c-$loss "ibgo driver (drops $loss of DATA sent) -> aeronmd" "$ID" "$CD" "aeron:udp?endpoint=127.0.0.1:$((20800 + RANDOM % 100))"
	# cc=cubic subscriptions: the ibgo receiver measures RTT (RTTM requests
	# the C sender answers); the C receiver's cubic window is honoured by
	# the ibgo sender
	udp_pair c-to-ibgo-cubic-$loss "aeronmd -> ibgo driver, cc=cubic (ibgo drops $loss of DATA received)" "$CD" "$ID" "aeron:udp?endpoint=127.0.0.1:$((21300 + RANDOM % 100))|cc=cubic"
	udp_pair ibgo-to-c-cubic-$loss "ibgo driver (drops $loss of DATA sent) -> aeronmd, cc=cubic" "$ID" "$CD" "aeron:udp?endpoint=127.0.0.1:$((21400 + RANDOM % 100))|cc=cubic"
	stop "$IDRIVER"
done

echo "== aeron:udp multicast on loopback between ibgo driver and aeronmd"
# mcast_pair SLUG LABEL PUBDIR SUBDIR1 SUBDIR2 CHANNEL: one publisher, two
# subscribers in two drivers on one group (every sequence number checked).
mcast_pair() {
	local name=$1 label=$2 pd=$3 ch=$6 n=100000 s1 s2 rc1
	bg sub1-$name "$IBGO" aeron sub --dir "$4" --channel "$ch" --stream 1001 --messages $n --timeout 60s
	s1=$LAST
	bg sub2-$name "$IBGO" aeron sub --dir "$5" --channel "$ch" --stream 1001 --messages $n --timeout 60s
	s2=$LAST
	sleep 1
	run 300 pub-$name "$IBGO" aeron pub --dir "$pd" --channel "$ch" --stream 1001 --messages $n --length 256
	local prc=$?
	for i in $(seq 600); do kill -0 "$s1" 2>/dev/null || kill -0 "$s2" 2>/dev/null || break; sleep 0.1; done
	stop "$s1"
	rc1=$RC
	stop "$s2"
	result "udp multicast $label -n $n -l 256" $([ "$prc" = 0 ] && [ "$rc1" = 0 ] && [ "$RC" = 0 ] && echo 0 || echo 1) \
		"pub exit $prc, sub exits $rc1 $RC: $(tail -1 "$WORK/sub1-$name.log") / $(tail -1 "$WORK/sub2-$name.log")"
}
# Loss 0: the default (max) flow control; loss 5 % (the ibgo drivers drop
# that much DATA on receive and send): fc=min, which waits for the slowest
# receiver so that both recover every loss; then tagged flow control with
# a group of two receivers carrying gtag=5.
for loss in 0 0.05; do
	newdir ibgo-mc1
	AERON_DEBUG_RECEIVE_DATA_LOSS_RATE=$loss AERON_DEBUG_SEND_DATA_LOSS_RATE=$loss \
		bg ibgo-driver-mc1-$loss "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	ID1=$DIR
	IDRIVER1=$LAST
	newdir ibgo-mc2
	AERON_DEBUG_RECEIVE_DATA_LOSS_RATE=$loss AERON_DEBUG_DATA_LOSS_SEED=2 \
		bg ibgo-driver-mc2-$loss "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	ID2=$DIR
	IDRIVER2=$LAST
	wait_for "$ID1/cnc.dat" . 20
	wait_for "$ID2/cnc.dat" . 20
	sleep 0.5
	MC="|interface=127.0.0.1"
	FC="default max flow control"
	if [ "$loss" != 0 ]; then
		MC="$MC|fc=min"
		FC="fc=min, ibgo drivers drop $loss of DATA"
	fi
	mcast_pair mc-c-to-ibgo-$loss "aeronmd -> two ibgo drivers ($FC)" "$CD" "$ID1" "$ID2" \
		"aeron:udp?endpoint=224.0.1.$((2 * (RANDOM % 100) + 1)):$((20900 + RANDOM % 50))$MC"
	mcast_pair mc-ibgo-to-c-$loss "ibgo driver -> aeronmd and ibgo driver ($FC)" "$ID1" "$CD" "$ID2" \
		"aeron:udp?endpoint=224.0.2.$((2 * (RANDOM % 100) + 1)):$((20950 + RANDOM % 50))$MC"
	if [ "$loss" = 0 ]; then
		mcast_pair mc-tagged-c-$loss "aeronmd (fc=tagged,g:5/2) -> two ibgo drivers (gtag=5)" "$CD" "$ID1" "$ID2" \
			"aeron:udp?endpoint=224.0.3.$((2 * (RANDOM % 100) + 1)):$((21000 + RANDOM % 50))|interface=127.0.0.1|fc=tagged,g:5/2|gtag=5"
		mcast_pair mc-tagged-ibgo-$loss "ibgo driver (fc=tagged,g:5/2) -> aeronmd and ibgo driver (gtag=5)" "$ID1" "$CD" "$ID2" \
			"aeron:udp?endpoint=224.0.4.$((2 * (RANDOM % 100) + 1)):$((21050 + RANDOM % 50))|interface=127.0.0.1|fc=tagged,g:5/2|gtag=5"
	fi
	stop "$IDRIVER1"
	stop "$IDRIVER2"
done

echo "== aeron:udp multi-destination-cast (control-mode=dynamic) between ibgo driver and aeronmd"
# mdc_pair SLUG LABEL PUBDIR CONTROL SUBDIR1 SUBDIR2: a publication on
# control=CONTROL|control-mode=dynamic in PUBDIR's driver; a subscriber in
# each of SUBDIR1 and SUBDIR2 on its own endpoint naming that control
# address, which registers it as a destination (every sequence number
# checked at both).
mdc_pair() {
	local name=$1 label=$2 pd=$3 ctl=$4 extra=$7 n=100000 s1 s2 rc1
	local sub="|control=$ctl|control-mode=dynamic"
	# fresh endpoint ports per row: a driver may hold a closed
	# subscription's endpoint until it notices the client is gone
	MDCN=$((MDCN + 2))
	bg sub1-$name "$IBGO" aeron sub --dir "$5" --channel "aeron:udp?endpoint=127.0.0.1:$((21100 + MDCN))$sub" --stream 1001 --messages $n --timeout 60s
	s1=$LAST
	bg sub2-$name "$IBGO" aeron sub --dir "$6" --channel "aeron:udp?endpoint=127.0.0.1:$((21101 + MDCN))$sub" --stream 1001 --messages $n --timeout 60s
	s2=$LAST
	sleep 1
	run 300 pub-$name "$IBGO" aeron pub --dir "$pd" --channel "aeron:udp?control=$ctl|control-mode=dynamic$extra" --stream 1001 --messages $n --length 256
	local prc=$?
	for i in $(seq 600); do kill -0 "$s1" 2>/dev/null || kill -0 "$s2" 2>/dev/null || break; sleep 0.1; done
	stop "$s1"
	rc1=$RC
	stop "$s2"
	result "udp mdc $label -n $n -l 256" $([ "$prc" = 0 ] && [ "$rc1" = 0 ] && [ "$RC" = 0 ] && echo 0 || echo 1) \
		"pub exit $prc, sub exits $rc1 $RC: $(tail -1 "$WORK/sub1-$name.log") / $(tail -1 "$WORK/sub2-$name.log")"
}
# A receiver registers when its pending setup reaches the control address
# (aeronmd resends it every second), so a publication would start with
# whichever registered first and the other would join late, mid-stream:
MDCN=$((RANDOM % 40 * 2))
# fc=min,g:/2 makes the publication wait for both and then for the slower,
# so both get every message, at loss 0 and at 5 % (the ibgo driver drops
# that much DATA on receive and send).
for loss in 0 0.05; do
	newdir ibgo-mdc
	AERON_DEBUG_RECEIVE_DATA_LOSS_RATE=$loss AERON_DEBUG_SEND_DATA_LOSS_RATE=$loss \
		bg ibgo-driver-mdc-$loss "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	ID=$DIR
	IDRIVER=$LAST
	wait_for "$ID/cnc.dat" . 20
	sleep 0.5
	FC="|fc=min,g:/2"
	FCL="fc=min,g:/2"
	if [ "$loss" != 0 ]; then
		FCL="fc=min,g:/2, ibgo driver drops $loss of DATA"
	fi
	mdc_pair mdc-c-to-ibgo-$loss "aeronmd -> ibgo driver and aeronmd ($FCL)" "$CD" "127.0.0.1:$((21200 + MDCN))" "$ID" "$CD" "$FC"
	mdc_pair mdc-ibgo-to-c-$loss "ibgo driver -> aeronmd and ibgo driver ($FCL)" "$ID" "127.0.0.1:$((21201 + MDCN))" "$CD" "$ID" "$FC"
	stop "$IDRIVER"
done
DRIVER=$CDRIVER

stop "$DRIVER"
rc=$RC
echo "(aeronmd exit status $rc)"

echo
echo "== interop-aeron summary ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "${RESULTS[@]}"
if [ "$FAILS" != 0 ]; then
	echo "interop-aeron: $FAILS failed; logs kept in $WORK"
	exit 1
fi
rm -rf "$WORK"
echo "interop-aeron: all passed"
