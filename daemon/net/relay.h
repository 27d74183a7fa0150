/*
 * Two connected sockets joined both ways by splice(2), through a pipe each
 * way: the bytes move from socket to pipe to socket inside the kernel,
 * never through the daemon's memory, and a full pipe stops the reading
 * side (backpressure: at most RELAY_PIPE bytes each way). A side's end is
 * passed on as a shutdown of the other's writing half. The network
 * proxy's tunnels (net/proxy.c), once their request is answered.
 */
#ifndef STEXEC_RELAY_H
#define STEXEC_RELAY_H

#include <stddef.h>

#include "buf.h"

struct event_base;
struct evbuffer;

/* What each pipe may hold. */
#define RELAY_PIPE (1024 * 1024)

struct relay_ops {
	/* n bytes went from side `from` (0: a, 1: b) to the other. */
	void (*moved)(void *arg, int from, size_t n);
	/* Both ways ended (or one failed): free the relay now. */
	void (*done)(void *arg);
};

struct relay;
/*
 * Join sockets a and b (taken: closed by relay_free). first[0] goes to b
 * before anything read from a, first[1] to a before anything from b
 * (their bytes are taken; NULL: none). NULL, with nothing taken, when no
 * pipe can be had (too many descriptors).
 */
struct relay *relay_new(struct event_base *, int a, int b,
    struct evbuffer *const first[2], const struct relay_ops *, void *arg);
void relay_free(struct relay *);
/* A side's socket, for a reload to carry. */
int relay_fd(const struct relay *, int side);
/*
 * The bytes from side `from` not yet written to the other: copied, not
 * taken (a reload may yet fail).
 */
void relay_pending(const struct relay *, int from, struct buf *out);

#endif
