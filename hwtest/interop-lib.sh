# interop-lib.sh: the process and result helpers of the interop scripts
# (aeron-interop.sh, aeron-java-interop.sh), sourced after WORK is set:
# every process started with bg is killed at exit, every directory in
# DIRS removed; result records a PASS/FAIL row.

PIDS=()
DIRS=()
FAILS=0
RESULTS=()

# stop PID: SIGINT, up to 5 s to exit, then SIGKILL; the exit status in $RC.
# (Not in a $(...) subshell: only this shell can wait for its children.)
stop() {
	local pid=$1 i
	kill -INT "$pid" 2>/dev/null
	for i in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	RC=$?
}

cleanup() {
	local p d
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for d in "${DIRS[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

# bg NAME CMD...: start CMD in the background, stdout line-buffered into
# $WORK/NAME.log; its pid is in $LAST.
bg() {
	local name=$1
	shift
	stdbuf -oL -eL "$@" >"$WORK/$name.log" 2>&1 &
	LAST=$!
	PIDS+=("$LAST")
}

# run SECONDS NAME CMD...: run CMD in the foreground with a time limit.
run() {
	local t=$1 name=$2
	shift 2
	timeout -s INT -k 5 "$t" stdbuf -oL -eL "$@" >"$WORK/$name.log" 2>&1
}

# wait_for FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_for() {
	local i
	for i in $(seq $(($3 * 10))); do
		grep -q -E "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

result() { # result NAME OK DETAIL
	if [ "$2" = 0 ]; then
		RESULTS+=("PASS  $1: $3")
	else
		RESULTS+=("FAIL  $1: $3 (log: $WORK)")
		FAILS=$((FAILS + 1))
	fi
	echo "${RESULTS[-1]}"
}
