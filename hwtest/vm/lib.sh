# Shell helpers for the guest scripts run with `go run ./hwtest/vm run
# -script`: the harness puts this file at /ibgo/lib.sh in every guest, and
# a script loads it with `. /ibgo/lib.sh` (busybox sh).

# waitport PORT: until a server listens on PORT (busybox netstat).
waitport() {
	i=0
	until netstat -ltn 2>/dev/null | grep -q ":$1 "; do
		i=$((i + 1)); [ $i -lt 300 ] || { echo "nothing listens on port $1"; exit 1; }
		sleep 0.05
	done
}

# rocev2_gid IP [IBGO]: the GID table index of rxe0's RoCE v2 GID for IP
# (empty when there is none), read with IBGO (default: ibgo) devinfo -v.
rocev2_gid() {
	${2:-ibgo} devinfo -v | sed -n "s/.*GID\[ *\([0-9]*\)\]:.*::ffff:$1, RoCE v2.*/\1/p" | head -n 1
}

# stop PID: SIGINT, up to 5 s for it to go, then SIGKILL (the bench
# scripts' drivers and servers).
stop() {
	kill -INT "$1" 2>/dev/null
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# dur2us DURATION: a Go duration (570ns, 13.5µs, 2.3ms, 1.2s) in
# microseconds, nan for anything else.
dur2us() {
	awk -v d="$1" 'BEGIN {
		if (d ~ /ns$/) { sub(/ns$/, "", d); printf "%.1f", d / 1000 }
		else if (d ~ /(µs|us)$/) { sub(/(µs|us)$/, "", d); printf "%.1f", d }
		else if (d ~ /ms$/) { sub(/ms$/, "", d); printf "%.1f", d * 1000 }
		else if (d ~ /s$/) { sub(/s$/, "", d); printf "%.1f", d * 1000000 }
		else printf "nan" }'
}

# medianof: the median of the numbers on stdin (space- or newline-
# separated), nan when there are none.
medianof() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
