#!/usr/bin/env bash
# aeron-java-interop.sh: Aeron's Java client, samples and media driver with
# ibgo (make interop-aeron-java AERON_JAVA_CP=DIR).
#
#   hwtest/aeron-java-interop.sh IBGO AERON_JAVA_CP
#
# IBGO is an ibgo binary; AERON_JAVA_CP a class path (a directory or jars,
# ':'-separated) holding Agrona and Aeron's client, driver and samples
# (io.aeron.driver.MediaDriver, io.aeron.samples.BasicPublisher,
# BasicSubscriber, AeronStat, ErrorStat). JAVA is the java to run them
# (default: java on PATH). Rows:
#   1. Java BasicPublisher -> Java BasicSubscriber through `ibgo driver`
#      (aeron:udp on loopback), and Java's AeronStat on the live driver: the
#      channel status counters ACTIVE, the local socket addresses;
#   2. Java's ErrorStat on `ibgo driver` after a refused channel;
#   3. the wire both ways between Aeron's Java driver and `ibgo driver`: a
#      Java publisher on one, a Java subscriber on the other.
# Every driver gets its own directory under /dev/shm, every process started
# here is stopped by its pid, every wait is bounded. Prints PASS/FAIL per row
# and exits non-zero if any row failed.
set -u

IBGO=${1:?usage: aeron-java-interop.sh IBGO AERON_JAVA_CP}
CP=${2:?usage: aeron-java-interop.sh IBGO AERON_JAVA_CP}
JAVA=${JAVA:-java}
# Agrona reaches jdk.internal.misc.Unsafe; Aeron's own test runs open
# java.util.zip too
JFLAGS=(--add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
	--add-opens java.base/java.util.zip=ALL-UNNAMED -cp "$CP")

command -v "$JAVA" >/dev/null || { echo "interop-aeron-java: no $JAVA (set JAVA=/path/to/java)" >&2; exit 2; }
for c in io/aeron/driver/MediaDriver io/aeron/samples/BasicPublisher io/aeron/samples/BasicSubscriber \
	io/aeron/samples/AeronStat io/aeron/samples/ErrorStat; do
	found=no
	IFS=: read -r -a parts <<<"$CP"
	for p in "${parts[@]}"; do
		if [ -f "$p/$c.class" ] || { [ -f "$p" ] && unzip -l "$p" "$c.class" >/dev/null 2>&1; }; then
			found=yes
		fi
	done
	[ $found = yes ] || { echo "interop-aeron-java: $c.class is not on AERON_JAVA_CP=$CP" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/ibgo-java-interop.XXXXXX)
# shellcheck source=hwtest/interop-lib.sh
. "$(dirname "$0")/interop-lib.sh"

newdir() {
	DIR=/dev/shm/ibgo-java-interop-$1-$$-$RANDOM
	DIRS+=("$DIR")
	rm -rf "$DIR"
}

start_ibgo_driver() {
	newdir ibgo
	bg ibgo-driver "$IBGO" driver --dir "$DIR" --dir-delete-on-shutdown
	ID=$DIR
	IDRIVER=$LAST
	wait_for "$ID/cnc.dat" . 20
	sleep 0.5
}

start_java_driver() {
	newdir java
	bg java-driver "$JAVA" "${JFLAGS[@]}" -Daeron.dir="$DIR" -Daeron.dir.delete.on.start=true \
		-Daeron.dir.delete.on.shutdown=true -Daeron.threading.mode=SHARED io.aeron.driver.MediaDriver
	JD=$DIR
	JDRIVER=$LAST
	wait_for "$JD/cnc.dat" . 30
	sleep 1
}

# java_sample NAME DIR CLASS [-Dprop=value...]: a Java sample against DIR
java_sample() {
	local name=$1 dir=$2 class=$3
	shift 3
	bg "$name" "$JAVA" "${JFLAGS[@]}" -Daeron.dir="$dir" "$@" "$class"
}

# pub_sub LABEL PUBDIR SUBDIR CHANNEL: Java BasicPublisher (5 messages) in
# PUBDIR's driver to Java BasicSubscriber in SUBDIR's; with STAT set, Java's
# AeronStat on SUBDIR's driver while both are live.
pub_sub() {
	local label=$1 pd=$2 sd=$3 ch=$4 slug
	slug=$(echo "$label" | tr -c 'a-zA-Z0-9\n' '-')
	java_sample sub-$slug "$sd" io.aeron.samples.BasicSubscriber -Daeron.sample.channel="$ch" \
		-Daeron.sample.idleStrategy=org.agrona.concurrent.SleepingMillisIdleStrategy
	local s=$LAST
	wait_for "$WORK/sub-$slug.log" 'Subscribing to' 30
	java_sample pub-$slug "$pd" io.aeron.samples.BasicPublisher -Daeron.sample.channel="$ch" \
		-Daeron.sample.messages=5 -Daeron.sample.lingerTimeout=2000
	local p=$LAST
	wait_for "$WORK/sub-$slug.log" 'Hello World! 4' 40
	if [ -n "${STAT:-}" ]; then
		run 30 AeronStat "$JAVA" "${JFLAGS[@]}" -Daeron.dir="$sd" io.aeron.samples.AeronStat watch=false
		STATRC=$?
	fi
	stop "$p"
	stop "$s"
	# BasicPublisher skips a message it could not offer (its first, when
	# the publication is not connected yet): every message it sent must
	# arrive, once and in order
	local sent got
	sent=$(grep -o 'Offering [0-9]/5 - yay' "$WORK/pub-$slug.log" | awk '{print substr($2,1,1)}' | tr -d '\n')
	got=$(grep -o '<<Hello World! [0-9]>>' "$WORK/sub-$slug.log" | tr -dc '0-9')
	grep -q 'Available image' "$WORK/sub-$slug.log"
	local ok=$?
	result "$label" $([ $ok = 0 ] && [ ${#sent} -ge 4 ] && [ "$got" = "$sent" ] && echo 0 || echo 1) \
		"sent $sent, received $got, image available"
}

port() { echo $((21000 + RANDOM % 2000)); }

echo "== Aeron's Java samples against ibgo driver (logs in $WORK)"
start_ibgo_driver
CH="aeron:udp?endpoint=127.0.0.1:$(port)"
STAT=1 pub_sub "Java BasicPublisher -> Java BasicSubscriber, ibgo driver, $CH" "$ID" "$ID" "$CH"
STAT=
# AeronStat rows are "  N:      value - label"; a channel status of 1 is ACTIVE
active() { grep -E "^ *[0-9]+: +1 - $1" "$WORK/AeronStat.log" | grep -q "$2"; }
port_of=${CH##*:}
active "rcv-channel" "$port_of" && active "snd-channel" "$port_of" && active "rcv-local-sockaddr" "127.0.0.1:$port_of" &&
	active "snd-local-sockaddr" "0.0.0.0:"
ok=$?
result "Java AeronStat on ibgo driver" $([ "$STATRC" = 0 ] && [ $ok = 0 ] && echo 0 || echo 1) \
	"exit $STATRC, $(grep -c -E '^ *[0-9]+: ' "$WORK/AeronStat.log") counters, snd/rcv-channel ACTIVE and local addresses: $([ $ok = 0 ] && echo yes || echo no)"

# a channel ibgo refuses (Aeron Transport Security, refused by C 1.48 too)
java_sample refused "$ID" io.aeron.samples.BasicPublisher -Daeron.sample.channel="aeron:udp?endpoint=127.0.0.1:$(port)|ats=true" \
	-Daeron.sample.messages=1
wait_for "$WORK/refused.log" 'RegistrationException|ats' 30
stop "$LAST"
run 30 ErrorStat "$JAVA" "${JFLAGS[@]}" -Daeron.dir="$ID" io.aeron.samples.ErrorStat
rc=$?
grep -q 'distinct error' "$WORK/ErrorStat.log" && grep -q 'ats=true' "$WORK/ErrorStat.log"
ok=$?
result "Java ErrorStat on ibgo driver" $([ "$rc" = 0 ] && [ $ok = 0 ] && echo 0 || echo 1) \
	"exit $rc, $(grep 'distinct error' "$WORK/ErrorStat.log")"

echo "== the wire between Aeron's Java driver and ibgo driver"
start_java_driver
CH="aeron:udp?endpoint=127.0.0.1:$(port)"
pub_sub "Java publisher on Java driver -> Java subscriber on ibgo driver, $CH" "$JD" "$ID" "$CH"
CH="aeron:udp?endpoint=127.0.0.1:$(port)"
pub_sub "Java publisher on ibgo driver -> Java subscriber on Java driver, $CH" "$ID" "$JD" "$CH"

stop "$JDRIVER"
stop "$IDRIVER"
rc=$RC
result "ibgo driver clean shutdown on SIGINT" $([ "$rc" = 0 ] && [ ! -e "$ID" ] && echo 0 || echo 1) "exit $rc"

echo
echo "== summary"
printf '%s\n' "${RESULTS[@]}"
echo "$(( ${#RESULTS[@]} - FAILS )) passed, $FAILS failed"
[ $FAILS = 0 ]
