/* The listening socket (doc/design.md §3): path rules, modes, stale sockets. */
#ifndef STEXEC_SERVER_H
#define STEXEC_SERVER_H

#include <stddef.h>
#include <sys/types.h>

struct event_base;

/*
 * The socket path: --socket, else socket_path_default's (in buf), or NULL
 * when that does not fit in len bytes.
 */
const char *server_default_path(const char *option, char *buf, size_t len);
/*
 * Bind and listen on path with mode, creating its directory (0700 plus what
 * the mode shares). A live daemon on the path is an error; a stale socket
 * is replaced. Returns the fd, or -1 with err.
 */
int server_listen(const char *path, mode_t mode, char *err, size_t errlen);
/* Accept clients on fd from the loop. unlink_path: remove it at stop. */
void server_start(struct event_base *, int fd, const char *unlink_path);
/* Stop accepting and close the socket. */
void server_stop(void);
/*
 * For a reload: the listening socket (-1: none) and the path to remove at
 * stop (NULL: none), to hand to the next image, which keeps listening on
 * it: no connection attempt is refused meanwhile.
 */
int server_socket(const char **unlink_path);

#endif
