/*
 * NDJSON framing: bytes in, complete lines out, with a cap on the line
 * length. Each byte is searched for '\n' once and moved at most once in
 * the usual read-then-drain pattern, so a long line costs O(n).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndjson.h"

/* First allocation: one typical read. */
#define NDJSON_INITIAL 4096

static size_t	ndjson_sum(size_t, size_t);
static void	ndjson_compact(struct ndjson *);
static void	ndjson_grow(struct ndjson *, size_t, size_t);

void
ndjson_init(struct ndjson *nj, size_t max)
{
	memset(nj, 0, sizeof *nj);
	nj->max = max;
}

/* Release the buffer; the reader can be used again with the same max. */
void
ndjson_free(struct ndjson *nj)
{
	free(nj->buf);
	nj->buf = NULL;
	nj->len = nj->start = nj->scan = nj->cap = 0;
}

/* Saturating addition: sizes near SIZE_MAX mean "no limit", not a wrap. */
static size_t
ndjson_sum(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* Move the pending bytes to the front, dropping the consumed ones. */
static void
ndjson_compact(struct ndjson *nj)
{
	size_t	 pending = nj->len - nj->start;

	memmove(nj->buf, nj->buf + nj->start, pending);
	nj->scan -= nj->start;
	nj->len = pending;
	nj->start = 0;
}

/* Double up to need, but no further than limit: memory stays near max. */
static void
ndjson_grow(struct ndjson *nj, size_t need, size_t limit)
{
	size_t	 cap;
	char	*buf;

	if (need == SIZE_MAX) {
		fprintf(stderr, "ndjson: buffer size overflow\n");
		abort();
	}
	cap = nj->cap != 0 ? nj->cap : NDJSON_INITIAL;
	while (cap < need)
		cap = ndjson_sum(cap, cap);
	if (cap > limit)
		cap = need > limit ? need : limit;
	buf = realloc(nj->buf, cap);
	if (buf == NULL) {
		fprintf(stderr, "ndjson: out of memory (%zu bytes)\n", cap);
		abort();
	}
	nj->buf = buf;
	nj->cap = cap;
}

/*
 * Compaction happens only when the tail is too short, and then only if it
 * moves no more than was consumed (amortized O(1) per byte) or growing
 * would take the buffer past max + want.
 */
char *
ndjson_space(struct ndjson *nj, size_t want)
{
	size_t	 limit, pending;

	if (want == 0)
		want = 1;
	/* Everything was consumed: start over without moving anything. */
	if (nj->start == nj->len)
		nj->start = nj->len = nj->scan = 0;
	if (nj->cap - nj->len >= want)
		return nj->buf + nj->len;

	limit = ndjson_sum(ndjson_sum(nj->max, want), 1);
	pending = nj->len - nj->start;
	if (nj->start != 0 &&
	    (pending <= nj->start || ndjson_sum(nj->len, want) > limit)) {
		ndjson_compact(nj);
		if (nj->cap - nj->len >= want)
			return nj->buf + nj->len;
	}
	ndjson_grow(nj, ndjson_sum(nj->len, want), limit);
	return nj->buf + nj->len;
}

void
ndjson_commit(struct ndjson *nj, size_t n)
{
	if (n > nj->cap - nj->len) {
		fprintf(stderr, "ndjson: commit of %zu bytes past the space\n",
		    n);
		abort();
	}
	nj->len += n;
}

void
ndjson_feed(struct ndjson *nj, const void *data, size_t n)
{
	if (n == 0)
		return;
	memcpy(ndjson_space(nj, n), data, n);
	ndjson_commit(nj, n);
}

/*
 * The search resumes at scan and stops one byte past the longest allowed
 * line, so neither a slow long line nor a flood without '\n' is rescanned.
 * Once NDJSON_TOO_LONG is returned it is returned again on every call.
 */
enum ndjson_status
ndjson_next(struct ndjson *nj, char **line, size_t *len)
{
	char	*p, *nl;
	size_t	 end, n;

	*line = NULL;
	*len = 0;
	for (;;) {
		end = nj->len;
		if (end - nj->start > nj->max)
			end = nj->start + nj->max + 1;
		if (nj->scan < nj->start)
			nj->scan = nj->start;
		nl = NULL;
		if (nj->scan < end)
			nl = memchr(nj->buf + nj->scan, '\n', end - nj->scan);
		if (nl == NULL) {
			nj->scan = end;
			if (end - nj->start > nj->max)
				return NDJSON_TOO_LONG;
			return NDJSON_MORE;
		}

		p = nj->buf + nj->start;
		n = (size_t)(nl - p);
		*nl = '\0';
		nj->start = nj->scan = nj->start + n + 1;
		/* Blank lines carry no message: skip them, as keep-alives. */
		if (n == 0 || (n == 1 && p[0] == '\r'))
			continue;
		*line = p;
		*len = n;
		return NDJSON_LINE;
	}
}
