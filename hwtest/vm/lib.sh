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
