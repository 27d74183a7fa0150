#!/bin/sh
# client/typescript: `npm test` (generate the types, build, node --test)
# against the daemon in $STEXEC_DAEMON. Installs the devDependencies from
# package-lock.json first when they are missing or the lock changed.
set -eu
cd "$(dirname "$0")/../client/typescript"
if [ ! -f node_modules/.package-lock.json ] ||
	[ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund
fi
exec npm test
