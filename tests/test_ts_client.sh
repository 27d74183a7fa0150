#!/bin/sh
# client/typescript: `npm test` (generate the types, build, node --test)
# against the daemon in $STEXEC_DAEMON. Installs the devDependencies from
# package-lock.json first when they are missing or the lock changed.
set -eu
cd "$(dirname "$0")/../client/typescript"
# test_examples_ts.sh builds the same tree: one at a time (-o: the daemons
# the tests start do not inherit the lock).
if [ -z "${STEXEC_TS_LOCKED:-}" ]; then
	mkdir -p dist
	STEXEC_TS_LOCKED=1 exec flock -o dist/.build-lock "$0" "$@"
fi
if [ ! -f node_modules/.package-lock.json ] ||
	[ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund
fi
exec npm test
