/*
 * The NDJSON reader against a model of it: the fuzzer's bytes are the
 * stream, fed in chunks of varying size through both ndjson_feed and
 * ndjson_space/commit, with lines taken out at varying moments; every line
 * must be the model's next one, and TOO_LONG must come exactly when the
 * model says the framing is lost.
 *   byte 0: the line cap (small, so long lines are cheap to reach)
 *   byte 1: seed of the chunking and draining schedule
 *   rest:   the stream
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ndjson.h"

/* The model: where the next expected line starts in the stream. */
struct fuzz_ndjson_model {
	const uint8_t *s;
	size_t len, pos;
	size_t max;
	size_t fed;   /* bytes of the stream given to the reader so far */
	int lost;     /* the model has seen a line longer than max */
};

static uint8_t	fuzz_ndjson_rand(uint8_t *);
static void	fuzz_ndjson_drain(struct ndjson *, struct fuzz_ndjson_model *,
		    unsigned);
static int	fuzz_ndjson_expect(struct fuzz_ndjson_model *,
		    const uint8_t **, size_t *);

/* A tiny generator: the schedule is a function of one byte. */
static uint8_t
fuzz_ndjson_rand(uint8_t *state)
{
	*state = (uint8_t)(*state * 37 + 11);
	return (uint8_t)(*state ^ (*state >> 3));
}

/*
 * The next line the model expects among the fed bytes: 1 with it, 0 when
 * more bytes are needed, -1 when the framing is lost.
 */
static int
fuzz_ndjson_expect(struct fuzz_ndjson_model *m, const uint8_t **line,
    size_t *len)
{
	const uint8_t *nl;
	size_t n;

	for (;;) {
		if (m->lost)
			return -1;
		nl = memchr(m->s + m->pos, '\n', m->fed - m->pos);
		n = nl != NULL ? (size_t)(nl - (m->s + m->pos)) :
		    m->fed - m->pos;
		if (n > m->max) {
			m->lost = 1;
			return -1;
		}
		if (nl == NULL)
			return 0;
		*line = m->s + m->pos;
		*len = n;
		m->pos += n + 1;
		if (n == 0 || (n == 1 && (*line)[0] == '\r'))
			continue;
		return 1;
	}
}

/* Take up to `take` lines out of the reader, each checked with the model. */
static void
fuzz_ndjson_drain(struct ndjson *nj, struct fuzz_ndjson_model *m,
    unsigned take)
{
	const uint8_t *want;
	enum ndjson_status st;
	size_t wlen, len;
	char *line;
	int e;

	while (take-- > 0) {
		st = ndjson_next(nj, &line, &len);
		e = fuzz_ndjson_expect(m, &want, &wlen);
		if (e < 0) {
			FUZZ_CHECK(st == NDJSON_TOO_LONG, "TOO_LONG missed");
			return;
		}
		if (e == 0) {
			FUZZ_CHECK(st == NDJSON_MORE, "a line out of nothing");
			return;
		}
		FUZZ_CHECK(st == NDJSON_LINE, "a complete line not returned");
		FUZZ_CHECK(len == wlen && memcmp(line, want, len) == 0,
		    "the line differs from the stream's");
		FUZZ_CHECK(line[len] == '\0', "the line is not NUL-terminated");
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_ndjson_model m = { 0 };
	struct ndjson nj;
	uint8_t rng;
	size_t off, n;
	char *p;

	if (size < 2)
		return 0;
	m.max = data[0] & 0x80 ? (size_t)1 << 20 : data[0];
	rng = data[1];
	m.s = data + 2;
	m.len = size - 2;
	ndjson_init(&nj, m.max);
	for (off = 0; off < m.len; off += n) {
		n = 1 + fuzz_ndjson_rand(&rng) % 67;
		if (n > m.len - off)
			n = m.len - off;
		if (fuzz_ndjson_rand(&rng) & 1)
			ndjson_feed(&nj, m.s + off, n);
		else {
			/* As a read(2) into the space: ask for more than comes. */
			p = ndjson_space(&nj, n + fuzz_ndjson_rand(&rng) % 8);
			memcpy(p, m.s + off, n);
			ndjson_commit(&nj, n);
		}
		m.fed = off + n;
		/* Sometimes leave lines in: the reader must keep them. */
		fuzz_ndjson_drain(&nj, &m, fuzz_ndjson_rand(&rng) % 4);
	}
	fuzz_ndjson_drain(&nj, &m, UINT32_MAX);
	ndjson_free(&nj);
	return 0;
}
