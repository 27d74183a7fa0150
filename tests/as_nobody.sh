#!/bin/sh
# Run a suite as an unprivileged user, so that the daemon it starts is not
# root either: its sandbox then makes its mount namespace inside a user
# namespace, and its tools run without any capability to drop. Where this
# runs as root; elsewhere the suite already runs unprivileged: skipped (77).
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 || exit 77
dir=$(mktemp -d) || exit 1
chown 65534:65534 "$dir" || exit 1
TMPDIR=$dir HOME=$dir setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
rc=$?
rm -rf "$dir"
exit $rc
