#!/bin/sh
# examples/agent_loop.ts, the TypeScript twin of agent_loop.py, over every
# recorded stream with test_examples.py's checks, and client_tools.ts, the
# twin of client_tools.py, once ts_build.sh has built the client
# (client/typescript) and the examples (examples/).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tests/ts_build.sh" examples
export PYTHONPATH="$top/client/python${PYTHONPATH:+:$PYTHONPATH}"
# Shared: test_ts_client.sh may run beside it; no build meanwhile. Then
# examples/client_tools.ts with test_example_client_tools.py's checks.
exec flock -s -o "$top/client/typescript/dist/.build-lock" sh -c '
	python3 "$1/tests/test_examples.py" node "$1/examples/dist/agent_loop.js" &&
	python3 "$1/tests/test_example_client_tools.py" node \
		"$1/examples/dist/client_tools.js"' sh "$top"
