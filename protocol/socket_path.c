/* The default socket path: see socket_path.h. */
#include "socket_path.h"

#include <stdio.h>
#include <stdlib.h>

#include "stexec/protocol.h"

int
socket_path_default(char *buf, size_t len)
{
	const char *env = getenv(STEXEC_SOCKET_ENV);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env != NULL && *env != '\0')
		n = snprintf(buf, len, "%s", env);
	else if (xdg != NULL && *xdg == '/')
		n = snprintf(buf, len, "%s/stexec/stexecd.sock", xdg);
	else
		n = snprintf(buf, len, "%s", SOCKET_PATH_SYSTEM);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

const char *
socket_path_fallback(void)
{
	const char *env = getenv("STEXEC_FALLBACK_SOCKET");

	return env != NULL && *env != '\0' ? env : SOCKET_PATH_SYSTEM;
}
