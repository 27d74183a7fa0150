#!/usr/bin/env bash
# workspace-write in a chroot, where / is no mount of its own (Debian's
# build chroots, many CI runners): the real daemon, run inside a chroot made
# of this machine's /usr and /etc, serves a workspace-write tool that writes
# its workspace and nothing else, while an unsandboxed tool of the same
# session can. Needs root (chroot, mounts); prints why and exits 77 if not.
set -euo pipefail

if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
	echo "not root, or no unshare: the chroot suite was not run"
	exit 77
fi
# Root without CAP_SYS_ADMIN (a container's, by default) makes no mounts.
if ! unshare --mount true 2>/dev/null; then
	echo "cannot make a mount namespace here (no CAP_SYS_ADMIN): the" \
	    "chroot suite was not run"
	exit 77
fi
: "${STEXEC_DAEMON:?}" "${STEXEC_CLI:?}"
# The test's mounts go in a namespace of its own, below a mount made
# private there, so that none reaches the machine: "/", or, when this runs
# in a chroot already (where "/" is no mount point), /run.
priv=/ base=/tmp
if ! mountpoint -q /; then
	priv=/run base=/run
	mountpoint -q /run || { echo "in a chroot without a /run mount: the" \
	    "chroot suite was not run"; exit 77; }
fi
root=$(mktemp -d "$base/stexec-chroot.XXXXXX")
# Removed once the namespace, and so every mount in it, is gone.
trap 'rm -rf "$root"' EXIT
build=$(cd "$(dirname "$STEXEC_DAEMON")/.." && pwd)
mkdir -p "$root"/{usr,etc,proc,dev,tmp,run,ws,outside}
for l in bin lib lib64 sbin; do
	[ -e "/$l" ] && ln -s "usr/$l" "$root/$l"
done
cat >"$root/tools.json" <<'EOF'
[{"name": "ww", "command": ["/bin/sh", "-c", "{script}"],
  "inputSchema": {"type": "object"}, "sandbox": "workspace-write"},
 {"name": "free", "command": ["/bin/sh", "-c", "{script}"],
  "inputSchema": {"type": "object"}, "sandbox": "none"}]
EOF

# Inside: the daemon on a private socket, then three tools.
inside='
set -eu
"$STEXEC_DAEMON" --socket /run/s.sock >/tmp/daemon.log 2>&1 &
d=$!
n=0
until [ -S /run/s.sock ]; do
	kill -0 $d 2>/dev/null || { cat /tmp/daemon.log; exit 1; }
	n=$((n + 1)); [ $n -lt 3000 ] || { echo "no socket"; exit 1; }
	sleep 0.01
done
cli() { "$STEXEC_CLI" --socket /run/s.sock "$@"; }
rc=0
cli run --cwd /ws --tools /tools.json ww "{\"script\": \"echo in > /ws/in\"}" ||
	{ echo "FAIL: workspace-write cannot write its workspace"; rc=1; }
if cli run --cwd /ws --tools /tools.json ww \
    "{\"script\": \"echo out > /outside/x\"}"; then
	echo "FAIL: workspace-write wrote outside its workspace"; rc=1
fi
cli run --cwd /ws --tools /tools.json free \
    "{\"script\": \"echo out > /outside/y\"}" ||
	{ echo "FAIL: the unsandboxed tool cannot write either"; rc=1; }
kill $d; wait $d || true
exit $rc
'
passed=0 failed=0
if unshare -m --propagation unchanged bash -c '
	set -e
	r=$1 b=$2
	mount --make-rprivate "$4"
	mount --rbind /usr "$r/usr"; mount --rbind /etc "$r/etc"
	mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
	mount -t tmpfs tmpfs "$r/tmp"; mount -t tmpfs tmpfs "$r/run"
	# After /tmp: the build tree may be under it.
	mkdir -p "$r$b"; mount --rbind "$b" "$r$b"
	exec chroot "$r" /bin/sh -c "$3"' - "$root" "$build" "$inside" "$priv"; then
	[ -f "$root/ws/in" ] && [ ! -e "$root/outside/x" ] &&
		[ -f "$root/outside/y" ] && passed=1 || failed=1
else
	failed=1
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
