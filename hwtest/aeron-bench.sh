#!/usr/bin/env bash
# aeron-bench.sh: IPC or UDP loopback, 256-byte messages, one publisher and one subscriber:
# messages/s and ping-pong RTT p50/p99/p99.9, for ibgo's client + ibgo driver
# and (when AERON_C_BIN is given) Aeron's C samples + C driver, interleaved:
# ROUNDS rounds, the two stacks alternating which goes first, medians and
# their ratio printed at the end (make bench-aeron).
#
#   ROUNDS=3 MESSAGES=10000000 PINGS=20000 MEDIA=ipc PRETOUCH=false JAVA_CP= hwtest/aeron-bench.sh IBGO [AERON_C_BIN]
#
# MEDIA=udp runs the same over aeron:udp on loopback with 2 MiB socket
# buffers and receiver window (so-sndbuf, so-rcvbuf, rcv-wnd; the issue's
# configuration, aeron-brief §2.2): the throughput pair on one unicast
# channel, ping and pong on two; publisher and subscriber share one driver
# in both stacks.
#
# Throughput: ibgo `aeron throughput` (publisher and subscriber in one
# process, publisher's rate over all messages), and the same in two
# processes (--role pub / --role sub: like for like), against Aeron's
# streaming_publisher -> rate_subscriber (the publisher's "Total" rate).
# Latency: ibgo `aeron ping`/`pong` against cping/cpong, PINGS round trips
# after PINGS/4 warm-up. Each run gets a fresh driver in its own /dev/shm
# directory; every process is stopped by its pid.
#
# PRETOUCH=true has every client pre-touch the logs it maps (both stacks
# read AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY; Java's samples get
# -Daeron.pre.touch.mapped.memory). JAVA_CP (a class path with Aeron's Java
# client and samples, and HdrHistogram for Ping) adds Aeron's Java samples,
# run on ibgo driver and on aeronmd: StreamingPublisher -> RateSubscriber
# (JAVA_MESSAGES, default 5 x MESSAGES; the messages the publisher counted
# between its first per-second line and its last, over those seconds: the
# JIT's warm-up and the last partial second left out) and
# Ping/Pong.
set -u

IBGO=${1:?usage: aeron-bench.sh IBGO [AERON_C_BIN]}
BIN=${2:-}
ROUNDS=${ROUNDS:-3}
MESSAGES=${MESSAGES:-10000000}
PINGS=${PINGS:-20000}
WARM=$((PINGS / 4))
MEDIA=${MEDIA:-ipc}
PRETOUCH=${PRETOUCH:-false}
JAVA_CP=${JAVA_CP:-}
JAVA=${JAVA:-java}
JAVA_MESSAGES=${JAVA_MESSAGES:-$((MESSAGES * 5))} # seconds of per-second lines past the JIT's warm-up
export AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY=$PRETOUCH
case $PRETOUCH in 1* | on* | true*) JAVA_PRETOUCH=true ;; *) JAVA_PRETOUCH=false ;; esac # Java reads only "true"
case $MEDIA in
ipc)
	C=aeron:ipc PC=aeron:ipc QC=aeron:ipc
	;;
udp)
	B="|so-sndbuf=2m|so-rcvbuf=2m|rcv-wnd=2m"
	P=$((22000 + RANDOM % 500 * 3))
	C="aeron:udp?endpoint=127.0.0.1:$P$B" PC="aeron:udp?endpoint=127.0.0.1:$((P + 1))$B" QC="aeron:udp?endpoint=127.0.0.1:$((P + 2))$B"
	;;
*)
	echo "aeron-bench: MEDIA=$MEDIA: want ipc or udp" >&2
	exit 2
	;;
esac

WORK=$(mktemp -d /tmp/ibgo-bench.XXXXXX)
PIDS=()
DIRS=()
cleanup() {
	local p d
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for d in "${DIRS[@]}"; do rm -rf "$d"; done
	rm -rf "$WORK"
}
trap cleanup EXIT

stop() { # SIGINT, 5 s, SIGKILL
	local pid=$1 i
	kill -INT "$pid" 2>/dev/null
	for i in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

bg() { # bg LOG CMD...: pid in $LAST
	local log=$1
	shift
	stdbuf -oL -eL "$@" >"$log" 2>&1 &
	LAST=$!
	PIDS+=("$LAST")
}

wait_file() {
	local i
	for i in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.1; done
	echo "aeron-bench: no $1" >&2
	return 1
}

# dur2us: Go durations (570ns, 13.5µs, 2.3ms, 1.2s) to microseconds
dur2us() {
	awk -v d="$1" 'BEGIN {
		if (d ~ /ns$/) { sub(/ns$/, "", d); printf "%.3f", d / 1000 }
		else if (d ~ /(µs|us)$/) { sub(/(µs|us)$/, "", d); printf "%.3f", d }
		else if (d ~ /ms$/) { sub(/ms$/, "", d); printf "%.3f", d * 1000 }
		else if (d ~ /s$/) { sub(/s$/, "", d); printf "%.3f", d * 1000000 }
		else printf "nan" }'
}

# hdr_pct LOG P: the value (µs) of the first HdrHistogram row at or past percentile P
hdr_pct() {
	awk -v p="$2" 'NF == 4 && $2 ~ /^[0-9.]+$/ && $2 + 0 >= p { print $1; exit }' "$1"
}

newdir() {
	DIR=/dev/shm/ibgo-bench-$1-$$-$RANDOM
	DIRS+=("$DIR")
	rm -rf "$DIR"
}

run_ibgo() { # appends "tput p50 p99 p999 tput2" to $WORK/ibgo.txt (tput2: two processes)
	newdir ibgo
	bg "$WORK/ibgo-driver.log" "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	local drv=$LAST
	wait_file "$DIR/cnc.dat" || return
	sleep 0.5
	timeout -s INT 600 "$IBGO" aeron throughput --dir "$DIR" --channel "$C" --messages "$MESSAGES" --length 256 >"$WORK/ibgo-tput.log" 2>&1
	local tput
	tput=$(grep -o '[0-9.]* M msg/s' "$WORK/ibgo-tput.log" | tail -1 | awk '{print $1}')
	# the same in two processes, as Aeron's streaming_publisher and
	# rate_subscriber: the publisher's total
	bg "$WORK/ibgo-sub.log" "$IBGO" aeron throughput --role sub --dir "$DIR" --channel "$C" --messages "$MESSAGES"
	local sub=$LAST
	timeout -s INT 600 "$IBGO" aeron throughput --role pub --dir "$DIR" --channel "$C" --messages "$MESSAGES" --length 256 >"$WORK/ibgo-pub.log" 2>&1
	stop "$sub"
	local tput2
	tput2=$(grep -o '[0-9.]* M msg/s' "$WORK/ibgo-pub.log" | tail -1 | awk '{print $1}')
	bg "$WORK/ibgo-pong.log" "$IBGO" aeron pong --dir "$DIR" --channel "$PC" --pong-channel "$QC"
	local pong=$LAST
	sleep 0.5
	timeout -s INT 600 "$IBGO" aeron ping --dir "$DIR" --channel "$PC" --pong-channel "$QC" --messages "$PINGS" --warmup "$WARM" --length 256 >"$WORK/ibgo-ping.log" 2>&1
	stop "$pong"
	stop "$drv"
	local l p50 p99 p999
	l=$(grep 'p99.9=' "$WORK/ibgo-ping.log" | tail -1)
	p50=$(dur2us "$(sed -n 's/.* p50=\([^ ]*\).*/\1/p' <<<"$l")")
	p99=$(dur2us "$(sed -n 's/.* p99=\([^ ]*\).*/\1/p' <<<"$l")")
	p999=$(dur2us "$(sed -n 's/.* p99\.9=\([^ ]*\).*/\1/p' <<<"$l")")
	echo "${tput:-nan} ${p50:-nan} ${p99:-nan} ${p999:-nan} ${tput2:-nan}" >>"$WORK/ibgo.txt"
	echo "  ibgo:    ${tput:-nan} M msg/s (two processes: ${tput2:-nan}); RTT p50 ${p50:-nan} / p99 ${p99:-nan} / p99.9 ${p999:-nan} µs"
}

run_c() { # appends "tput p50 p99 p999" to $WORK/c.txt
	newdir c
	AERON_DIR=$DIR AERON_DIR_DELETE_ON_SHUTDOWN=true bg "$WORK/aeronmd.log" "$BIN/aeronmd"
	local drv=$LAST
	wait_file "$DIR/cnc.dat" || return
	sleep 0.5
	bg "$WORK/c-rate.log" "$BIN/rate_subscriber" -p "$DIR" -c "$C" -s 1001
	local sub=$LAST
	sleep 0.5
	timeout -s INT 600 "$BIN/streaming_publisher" -p "$DIR" -c "$C" -s 1001 -L 256 -m "$MESSAGES" >"$WORK/c-pub.log" 2>&1
	stop "$sub"
	local tput
	tput=$(sed -n 's/^Total: [0-9]*ms, \([0-9.e+]*\) msgs\/sec.*/\1/p' "$WORK/c-pub.log" | awk '{printf "%.3f", $1 / 1e6}')
	bg "$WORK/c-pong.log" "$BIN/cpong" -p "$DIR" -c "$PC" -C "$QC"
	local pong=$LAST
	sleep 0.5
	timeout -s INT 600 "$BIN/cping" -p "$DIR" -c "$PC" -C "$QC" -m "$PINGS" -w "$WARM" -L 256 >"$WORK/c-ping.log" 2>&1
	stop "$pong"
	stop "$drv"
	record_hdr "Aeron C" "$tput" "$WORK/c-ping.log" "$WORK/c.txt"
}

# record_hdr LABEL TPUT PINGLOG OUT: the ping's HdrHistogram percentiles,
# appended to OUT as "tput p50 p99 p999" and printed
record_hdr() {
	local p50 p99 p999
	p50=$(hdr_pct "$3" 0.5)
	p99=$(hdr_pct "$3" 0.99)
	p999=$(hdr_pct "$3" 0.999)
	echo "${2:-nan} ${p50:-nan} ${p99:-nan} ${p999:-nan}" >>"$4"
	echo "  $1: ${2:-nan} M msg/s; RTT p50 ${p50:-nan} / p99 ${p99:-nan} / p99.9 ${p999:-nan} µs"
}

# run_java ibgo|c: Aeron's Java samples on ibgo driver or aeronmd; appends
# "tput p50 p99 p999" to $WORK/java-$1.txt
run_java() {
	local on=$1 drv sub pong
	newdir "java-$on"
	if [ "$on" = ibgo ]; then
		bg "$WORK/java-driver.log" "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	else
		AERON_DIR=$DIR AERON_DIR_DELETE_ON_SHUTDOWN=true bg "$WORK/java-driver.log" "$BIN/aeronmd"
	fi
	drv=$LAST
	wait_file "$DIR/cnc.dat" || return
	sleep 0.5
	local j=("$JAVA" --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
		--add-opens java.base/java.util.zip=ALL-UNNAMED -cp "$JAVA_CP" -Daeron.dir="$DIR"
		-Daeron.pre.touch.mapped.memory="$JAVA_PRETOUCH" -Daeron.sample.messageLength=256)
	bg "$WORK/java-rate.log" "${j[@]}" -Daeron.sample.channel="$C" io.aeron.samples.RateSubscriber
	sub=$LAST
	sleep 1
	echo n | timeout -s INT 600 "${j[@]}" -Daeron.sample.channel="$C" -Daeron.sample.messages="$JAVA_MESSAGES" \
		io.aeron.samples.StreamingPublisher >"$WORK/java-pub.log" 2>&1
	stop "$sub"
	local tput
	# the messages between the first per-second line and the last, over
	# the seconds between them: the JIT's first second and the last
	# partial one left out
	tput=$(awk '/msgs\/sec.*totals/ { for (i = 1; i < NF; i++) if ($i == "totals") t[++n] = $(i + 1) }
		END { if (n >= 2) printf "%.3f", (t[n] - t[1]) / (n - 1) / 1e6 }' "$WORK/java-pub.log")
	bg "$WORK/java-pong.log" "${j[@]}" -Daeron.sample.ping.channel="$PC" -Daeron.sample.pong.channel="$QC" \
		-Daeron.sample.exclusive.publications=true io.aeron.samples.Pong
	pong=$LAST
	sleep 1
	echo n | timeout -s INT 600 "${j[@]}" -Daeron.sample.ping.channel="$PC" -Daeron.sample.pong.channel="$QC" \
		-Daeron.sample.exclusive.publications=true -Daeron.sample.messages="$PINGS" \
		-Daeron.sample.warmup.messages="$WARM" -Daeron.sample.warmup.iterations=1 io.aeron.samples.Ping >"$WORK/java-ping.log" 2>&1
	stop "$pong"
	stop "$drv"
	record_hdr "Java samples on $on" "$tput" "$WORK/java-ping.log" "$WORK/java-$on.txt"
}

median() { # median FILE COLUMN
	awk -v c="$2" '$c != "nan" { print $c }' "$1" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "aeron-bench: $MEDIA ($C), 256-byte messages, $ROUNDS rounds, $MESSAGES messages, $PINGS pings, pre-touch $PRETOUCH; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at start"
[ -n "$BIN" ] || echo "aeron-bench: AERON_C_BIN not set: ibgo only (see mk/aeron.mk for how to build Aeron's C samples)"
for r in $(seq "$ROUNDS"); do
	echo "round $r (load $(cut -d' ' -f1 /proc/loadavg))"
	if [ -n "$BIN" ] && [ $((r % 2)) = 0 ]; then
		run_c
		run_ibgo
	else
		run_ibgo
		[ -n "$BIN" ] && run_c
	fi
	if [ -n "$JAVA_CP" ]; then
		run_java ibgo
		[ -n "$BIN" ] && run_java c
	fi
done

echo
echo "medians over $ROUNDS rounds (load $(cut -d' ' -f1-3 /proc/loadavg) at end):"
printf '| %-28s | %14s | %10s | %10s | %10s |\n' "clients + driver" "M msg/s" "p50 µs" "p99 µs" "p99.9 µs"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------" "----------------" "------------" "------------" "------------"
row() { printf '| %-28s | %14s | %10s | %10s | %10s |\n' "$1" "$(median "$2" 1)" "$(median "$2" 2)" "$(median "$2" 3)" "$(median "$2" 4)"; }
row "ibgo client + ibgo driver" "$WORK/ibgo.txt"
printf '| %-28s | %14s | %10s | %10s | %10s |\n' "ibgo, pub and sub apart" "$(median "$WORK/ibgo.txt" 5)" "" "" ""
if [ -n "$BIN" ]; then
	row "Aeron C samples + aeronmd" "$WORK/c.txt"
	ratio() { awk -v a="$(median "$WORK/ibgo.txt" "$1")" -v b="$(median "$WORK/c.txt" "$1")" 'BEGIN {
		if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }'; }
	printf '| %-28s | %14s | %10s | %10s | %10s |\n' "ratio ibgo / C" "$(ratio 1)" "$(ratio 2)" "$(ratio 3)" "$(ratio 4)"
	apart=$(awk -v a="$(median "$WORK/ibgo.txt" 5)" -v b="$(median "$WORK/c.txt" 1)" 'BEGIN {
		if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }')
	printf '| %-28s | %14s | %10s | %10s | %10s |\n' "ratio apart / C (like for like)" "$apart" "" "" ""
	echo "(throughput ratio > 1 and latency ratios < 1 favour ibgo)"
fi
if [ -n "$JAVA_CP" ]; then
	row "Java samples + ibgo driver" "$WORK/java-ibgo.txt"
	[ -n "$BIN" ] && row "Java samples + aeronmd" "$WORK/java-c.txt"
fi
