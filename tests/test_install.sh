#!/usr/bin/env bash
# meson install into a DESTDIR, as on a fresh machine: where each
# file lands, a program built against the installed libstexec through
# pkg-config and run, the man pages, and the bash completion sourced from
# where it was installed.
# Environment (from tests/meson.build): BUILD_ROOT PREFIX LIBDIR MANDIR
# DATADIR BINDIR CC (the compiler command, a launcher such as ccache
# included: split as words) SANITIZE STEXEC_DAEMON.
set -euo pipefail

tmp=$(mktemp -d /tmp/stexec-install-XXXXXX)
daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

dest=$tmp/dest
meson install -C "$BUILD_ROOT" --destdir "$dest" --no-rebuild --quiet \
	>"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "meson install"; }
root=$dest$PREFIX
lib=$root/$LIBDIR

# The library and its .pc where this system's loader and pkg-config look.
[ -e "$lib/libstexec.so.0" ] || fail "no $lib/libstexec.so.0: $(cd "$dest" && find . -name 'libstexec*')"
[ -e "$lib/pkgconfig/libstexec.pc" ] || fail "no $lib/pkgconfig/libstexec.pc"
[ -z "$(cd "$dest" && find . -path '*lib64*')" ] || fail "something in lib64: $(cd "$dest" && find . -path '*lib64*')"
multiarch=$($CC -print-multiarch 2>/dev/null || true)
if [ -f /etc/debian_version ] && [ -n "$multiarch" ]; then
	[ "$LIBDIR" = "lib/$multiarch" ] || fail "libdir is $LIBDIR, not lib/$multiarch"
	if [ "$PREFIX" = /usr/local ] || [ "$PREFIX" = /usr ]; then
		pc_path=$(pkg-config --variable pc_path pkg-config)
		[[ ":$pc_path:" == *":$PREFIX/$LIBDIR/pkgconfig:"* ]] ||
			fail "pkg-config does not look in $PREFIX/$LIBDIR/pkgconfig ($pc_path)"
		grep -qx "$PREFIX/$LIBDIR" /etc/ld.so.conf /etc/ld.so.conf.d/*.conf ||
			fail "the loader does not look in $PREFIX/$LIBDIR"
	fi
fi

# A program built against the installed headers and library.
cat >"$tmp/hello.c" <<'EOF'
#include <stdio.h>
#include <stexec/client.h>

int
main(int argc, char **argv)
{
	char err[512];
	struct stexec *c = stexec_connect(argv[1], err, sizeof err);

	if (c == NULL) {
		printf("no daemon: %s\n", err);
		return 1;
	}
	stexec_close(c);
	printf("connected\n");
	return 0;
}
EOF
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
pc_libdir=$(pkg-config --variable libdir libstexec)
[ "${pc_libdir#"$dest"}" = "$PREFIX/$LIBDIR" ] || fail "the .pc says libdir=$pc_libdir"
flags=()
[ "$SANITIZE" = none ] || flags=(-fsanitize="$SANITIZE")
# shellcheck disable=SC2046
$CC "${flags[@]}" -o "$tmp/hello" "$tmp/hello.c" \
	$(pkg-config --cflags --libs libstexec) ||
	fail "cannot build against libstexec: $(pkg-config --cflags --libs libstexec)"
"$STEXEC_DAEMON" --socket "$tmp/s.sock" --output-dir "$tmp/out" \
	--state-dir "$tmp/state" \
	--log-level error &
daemon=$!
# One generous guard, scaled (tests/README.md): 30 s times the factor.
guard=$(awk -v s="${STEXEC_TEST_TIME_SCALE:-${STEXEC_TEST_BUILD_SCALE:-1}}" \
	'BEGIN { print int(600 * s) }')
for _ in $(seq "$guard"); do
	[ -S "$tmp/s.sock" ] && break
	sleep 0.05
done
out=$(LD_LIBRARY_PATH=$lib "$tmp/hello" "$tmp/s.sock") || fail "hello: $out"
[ "$out" = connected ] || fail "hello said: $out"
ldd_out=$(LD_LIBRARY_PATH=$lib ldd "$tmp/hello")
[[ $ldd_out == *"$lib/libstexec.so.0"* ]] || fail "not the installed library: $ldd_out"

# Man pages, the protocol and its schemas.
for page in man8/stexecd.8 man1/stexec-cli.1 man7/stexec-protocol.7; do
	[ -s "$root/$MANDIR/$page" ] || fail "no $MANDIR/$page"
	grep -q '^\.TH ' "$root/$MANDIR/$page" || fail "$page is not a man page"
	if command -v groff >/dev/null; then
		groff -t -man -Tutf8 "$root/$MANDIR/$page" >"$tmp/page" 2>/dev/null ||
			fail "groff cannot render $page"
		[ -s "$tmp/page" ] || fail "$page renders empty"
	fi
done
grep -q 'stexec\\-cli run' "$root/$MANDIR/man1/stexec-cli.1" || fail "stexec-cli.1 has no run"
grep -q 'ORDERING GUARANTEES' "$root/$MANDIR/man7/stexec-protocol.7" || fail "stexec-protocol.7 has no sections"
[ -s "$root/$DATADIR/doc/stexec/PROTOCOL.md" ] || fail "no PROTOCOL.md"
python3 -c 'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' \
	"$root/$DATADIR"/stexec/schemas/{error,notification,request,response,tooldef}.schema.json ||
	fail "the schemas are not all there"

# Bash completion, sourced from where it was installed.
completion=$root/$DATADIR/bash-completion/completions/stexec-cli
[ -s "$completion" ] || fail "no completion at $completion"
cli=$root/$BINDIR/stexec-cli
complete_for() { # complete_for WORD... : what TAB offers after them
	bash -c 'source "$1"; shift; COMP_WORDS=("$@")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _stexec_cli
		[ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"' \
		- "$completion" "$@"
}
expect() { # expect WANT WORD...
	local want=$1 got
	shift
	got=$(complete_for "$@" | tr '\n' ' ')
	[ "$got" = "$want" ] || fail "completing '$*': '$got', not '$want'"
}
expect "run " "$cli" ru
expect "sessions status stats " "$cli" s
expect "--max-parallel " "$cli" run --m
expect "--json " "$cli" --js
expect "watch " "$cli" help wa
expect "read_file " "$cli" --socket "$tmp/s.sock" run bash '{}' rea
sid=$("$cli" --socket "$tmp/s.sock" new)
expect "$sid " "$cli" --socket "$tmp/s.sock" status s-
expect "" "$cli" --socket "$tmp/s.sock" add "$sid" bash ""
echo "ok: installed under $LIBDIR; man pages, completion, schemas in place"
