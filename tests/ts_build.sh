#!/bin/sh
# Build the TypeScript client (client/typescript) and, with "examples",
# examples/ too, when a source is newer than the last build: under an
# exclusive lock, so that test_ts_client.sh and test_examples_ts.sh, which
# meson may run at the same time, never build the same tree at once. Their
# runs then hold the lock shared (flock -s), so a build waits for them and
# they can run side by side. Installs the devDependencies from
# package-lock.json first when they are missing or the lock changed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
client=$top/client/typescript
mkdir -p "$client/dist"
if [ -z "${STEXEC_TS_LOCKED:-}" ]; then
	# -o: no process the build starts keeps the lock.
	STEXEC_TS_LOCKED=1 exec flock -o "$client/dist/.build-lock" "$0" "$@"
fi
ci() {
	if [ ! -f "$1/node_modules/.package-lock.json" ] ||
		[ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
		(cd "$1" && npm ci --no-audit --no-fund)
	fi
}
# stale DIR STAMP PATH...: is a file under a PATH newer than DIR/STAMP?
stale() {
	dir=$1 stamp=$2
	shift 2
	[ ! -f "$dir/$stamp" ] ||
		[ -n "$(cd "$dir" && find "$@" -newer "$stamp" -print -quit)" ]
}
ci "$client"
if stale "$client" dist/.built src test scripts package.json \
	package-lock.json tsconfig.json ../../protocol/schemas; then
	(cd "$client" && npm run build)
	touch "$client/dist/.built"
fi
if [ "${1:-}" = examples ]; then
	ci "$top/examples"
	mkdir -p "$top/examples/dist"
	if (cd "$top/examples" && stale . dist/.built ./*.ts package.json \
		package-lock.json tsconfig.json ../client/typescript/dist/.built); then
		(cd "$top/examples" && npm run build)
		touch "$top/examples/dist/.built"
	fi
fi
