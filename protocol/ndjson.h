/*
 * NDJSON framing (doc/design.md §3): one JSON text per line, '\n' terminated,
 * with a cap on the line length. Transport-agnostic: feed it bytes, take
 * complete lines out. Shared by the daemon and the client library.
 */
#ifndef STEXEC_NDJSON_H
#define STEXEC_NDJSON_H

#include <stdbool.h>
#include <stddef.h>

struct ndjson {
	char *buf;
	size_t len;   /* bytes held */
	size_t start; /* first byte not yet returned as a line */
	size_t scan;  /* bytes before this are known to hold no '\n' */
	size_t cap;
	size_t max;   /* max line length, newline excluded */
};

enum ndjson_status {
	NDJSON_LINE,     /* a complete line was returned */
	NDJSON_MORE,     /* need more bytes */
	NDJSON_TOO_LONG, /* the pending line exceeds max: framing is lost */
};

void ndjson_init(struct ndjson *, size_t max);
void ndjson_free(struct ndjson *);

/*
 * Space to read into: at least `want` bytes at *p. Call ndjson_commit with
 * how many were written. Compacts consumed bytes first.
 */
char *ndjson_space(struct ndjson *, size_t want);
void ndjson_commit(struct ndjson *, size_t n);
void ndjson_feed(struct ndjson *, const void *, size_t);

/*
 * Take the next complete line (without its '\n', NUL-terminated in place,
 * valid until the next call that changes the reader). A trailing '\r' is
 * kept: JSON parsing treats it as white space. Blank lines are skipped.
 * After NDJSON_TOO_LONG every call returns NDJSON_TOO_LONG.
 */
enum ndjson_status ndjson_next(struct ndjson *, char **line, size_t *len);

#endif
