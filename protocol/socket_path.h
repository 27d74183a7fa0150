/*
 * Where the daemon listens when no --socket is given, and where clients look
 * (doc/design.md §3): the one rule both sides follow.
 */
#ifndef STEXEC_SOCKET_PATH_H
#define STEXEC_SOCKET_PATH_H

#include <stddef.h>

/* The system daemon's socket, the last default and the clients' fallback. */
#define SOCKET_PATH_SYSTEM "/run/stexec/stexecd.sock"

/*
 * $STEXEC_SOCKET if set and not empty, else $XDG_RUNTIME_DIR/stexec/
 * stexecd.sock if XDG_RUNTIME_DIR is an absolute path (the XDG spec says a
 * relative one must be ignored), else SOCKET_PATH_SYSTEM. 0, or -1 when it
 * does not fit in len bytes.
 */
int socket_path_default(char *buf, size_t len);

/*
 * Where a client tries next when the default is the $XDG_RUNTIME_DIR socket
 * and nothing listens there: $STEXEC_FALLBACK_SOCKET if set and not empty
 * (for tests, which must never meet the machine's system daemon), else
 * SOCKET_PATH_SYSTEM.
 */
const char *socket_path_fallback(void);

#endif
