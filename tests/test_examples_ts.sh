#!/bin/sh
# examples/agent_loop.ts, the TypeScript twin of agent_loop.py, over every
# recorded stream with test_examples.py's checks, once ts_build.sh has
# built the client (client/typescript) and the example (examples/).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tests/ts_build.sh" examples
export PYTHONPATH="$top/client/python${PYTHONPATH:+:$PYTHONPATH}"
# Shared: test_ts_client.sh may run beside it; no build meanwhile.
exec flock -s -o "$top/client/typescript/dist/.build-lock" \
	python3 "$top/tests/test_examples.py" node "$top/examples/dist/agent_loop.js"
