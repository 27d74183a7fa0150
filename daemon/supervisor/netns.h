/*
 * Network namespaces for tools whose network is an allow-list
 * (doc/design.md §7, Network by name): a namespace holding only `lo`, so
 * that nothing but a listening socket the daemon made inside it can be
 * reached from there, and such sockets. The daemon's own thread enters a
 * namespace only for the moment it takes to make one or to bind in it.
 */
#ifndef STEXEC_NETNS_H
#define STEXEC_NETNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether namespaces can be made here (probed once); else why not. */
bool netns_available(void);
const char *netns_error(void);
void netns_init(void);
void netns_shutdown(void);
/* A new namespace with `lo` up: its fd (CLOEXEC), or -1 and err. */
int netns_new(char *err, size_t errlen);
/*
 * A listening TCP socket on 127.0.0.1 inside ns, on a port the kernel
 * chose (*port): non-blocking and CLOEXEC, or -1 and err.
 */
int netns_listen(int ns, uint16_t *port, char *err, size_t errlen);

#endif
