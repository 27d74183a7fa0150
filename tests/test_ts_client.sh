#!/bin/sh
# client/typescript: its node --test suites (what `npm test` runs) against
# the daemon in $STEXEC_DAEMON, once ts_build.sh has built the tree.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tests/ts_build.sh"
cd "$top/client/typescript"
# Shared: test_examples_ts.sh may run beside it; no build meanwhile.
exec flock -s -o dist/.build-lock node --test --test-reporter=tap \
	dist/test/*.test.js
