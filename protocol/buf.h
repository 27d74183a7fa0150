/*
 * A growable byte buffer, always NUL-terminated: the one buffer of the
 * daemon, the client library and the JSON-RPC encoders. Running out of
 * memory aborts (there is no way on from there, in a daemon or a client).
 */
#ifndef STEXEC_BUF_H
#define STEXEC_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Make room for n more bytes and the NUL. */
void buf_grow(struct buf *, size_t n);
void buf_add(struct buf *, const void *, size_t);
void buf_addstr(struct buf *, const char *);
void buf_printf(struct buf *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
void buf_reset(struct buf *);
void buf_free(struct buf *);

#endif
