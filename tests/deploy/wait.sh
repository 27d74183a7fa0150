# Sourced by the deploy tests: tests/README.md's time rule in shell.
# wait_for SECONDS COMMAND...: run COMMAND until it succeeds, or fail once
# SECONDS times STEXEC_TEST_TIME_SCALE have passed. The guard only ends a
# hang; the wait itself ends on the event, so a loaded host just waits longer.
wait_for() {
	local end=$((SECONDS + $1 * ${STEXEC_TEST_TIME_SCALE:-1}))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}
