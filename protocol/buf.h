/*
 * A growable byte buffer, always NUL-terminated: the one buffer of the
 * daemon, the client library and the JSON-RPC encoders. Running out of
 * memory aborts (there is no way on from there, in a daemon or a client).
 */
#ifndef STEXEC_BUF_H
#define STEXEC_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Make room for n more bytes and the NUL. */
void buf_grow(struct buf *, size_t n);
void buf_add_grown(struct buf *, const void *, size_t);

/*
 * Inline when it fits: the JSON encoder appends a token at a time (a
 * brace, a comma, a key), several hundred per tool, and a call to grow and
 * one to memcpy cost more than the bytes.
 */
static inline void
buf_add(struct buf *b, const void *p, size_t n)
{
	if (n >= b->cap - b->len) {
		buf_add_grown(b, p, n);
		return;
	}
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}
void buf_addstr(struct buf *, const char *);
void buf_printf(struct buf *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * v in base 10 or 16 (lower case) at out, not NUL-terminated; its length,
 * at most BUF_U64_MAX. The JSON encoder and the journal write a number per
 * field of every note: snprintf's cost is many times a digit loop's.
 */
#define BUF_U64_MAX 20
size_t buf_fmt_u64(char *out, uint64_t v, unsigned base);
/* A signed integer in decimal, appended. */
void buf_add_int(struct buf *, long long);
void buf_reset(struct buf *);
void buf_free(struct buf *);

#endif
