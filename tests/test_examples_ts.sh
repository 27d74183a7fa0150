#!/bin/sh
# examples/agent_loop.ts, the TypeScript twin of agent_loop.py, over every
# recorded stream with test_examples.py's checks: builds the client
# (client/typescript) and the example (examples/, npm run build) first.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
# Installs devDependencies when they are missing or the lock changed.
ci() {
	if [ ! -f "$1/node_modules/.package-lock.json" ] ||
		[ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
		(cd "$1" && npm ci --no-audit --no-fund)
	fi
}
(
	# test_ts_client.sh builds the same client tree: one at a time.
	mkdir -p "$top/client/typescript/dist"
	flock 9
	ci "$top/client/typescript"
	(cd "$top/client/typescript" && npm run build)
	ci "$top/examples"
	(cd "$top/examples" && npm run build)
) 9>"$top/client/typescript/dist/.build-lock"
export PYTHONPATH="$top/client/python${PYTHONPATH:+:$PYTHONPATH}"
exec python3 "$top/tests/test_examples.py" node "$top/examples/dist/agent_loop.js"
