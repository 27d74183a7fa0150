/* The codec shared by daemon and client: NDJSON framing and JSON-RPC 2.0. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonload.h"
#include "jsonrpc.h"
#include "ndjson.h"
#include "stexec/protocol.h"

struct lines {
	char	**v;
	size_t	 *len;
	size_t	  n;
};

static uint32_t	rnd(uint32_t *);
static void	lines_add(struct lines *, const char *, size_t);
static void	lines_free(struct lines *);
static void	lines_eq(const struct lines *, const struct lines *);
static void	drain(struct ndjson *, struct lines *);
static char	*stream_build(struct lines *, size_t *);
static void	expect_line(struct ndjson *, const char *);
static void	expect_status(struct ndjson *, enum ndjson_status);
static void	decode_str(const char *, struct jsonrpc_msg *);
static char	*dump(const json_t *);
static void	expect_invalid(const char *, int, const char *, const char *);

/* xorshift32: reproducible chunk sizes on every platform. */
static uint32_t
rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void
lines_add(struct lines *l, const char *p, size_t len)
{
	l->v = realloc(l->v, (l->n + 1) * sizeof *l->v);
	l->len = realloc(l->len, (l->n + 1) * sizeof *l->len);
	cr_assert(l->v != NULL && l->len != NULL);
	l->v[l->n] = malloc(len + 1);
	cr_assert(l->v[l->n] != NULL);
	memcpy(l->v[l->n], p, len);
	l->v[l->n][len] = '\0';
	l->len[l->n] = len;
	l->n++;
}

static void
lines_free(struct lines *l)
{
	size_t	 i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->len);
	memset(l, 0, sizeof *l);
}

static void
lines_eq(const struct lines *got, const struct lines *want)
{
	size_t	 i;

	cr_assert_eq(got->n, want->n, "got %zu lines, want %zu", got->n,
	    want->n);
	for (i = 0; i < want->n; i++) {
		cr_assert_eq(got->len[i], want->len[i], "line %zu length", i);
		cr_assert(memcmp(got->v[i], want->v[i], want->len[i]) == 0,
		    "line %zu differs", i);
	}
}

/* Take every complete line; the reader must then want more bytes. */
static void
drain(struct ndjson *nj, struct lines *got)
{
	enum ndjson_status	 st;
	char			*line;
	size_t			 len;

	while ((st = ndjson_next(nj, &line, &len)) == NDJSON_LINE) {
		cr_assert_eq(line[len], '\0', "line not NUL-terminated");
		cr_assert(memchr(line, '\n', len) == NULL);
		lines_add(got, line, len);
	}
	cr_assert_eq(st, NDJSON_MORE);
}

/*
 * A stream of assorted lines: blank, "\r" only, CRLF, long, JSON. want
 * receives the lines the reader must return, in order.
 */
static char *
stream_build(struct lines *want, size_t *lenp)
{
	char		*s = NULL, line[700];
	size_t		 len = 0, n, i, k;
	uint32_t	 seed = 12345;

	for (i = 0; i < 400; i++) {
		switch (i % 7) {
		case 0:
			n = 0;
			break;
		case 1:
			n = (size_t)snprintf(line, sizeof line, "\r");
			break;
		case 2:
			n = (size_t)snprintf(line, sizeof line, "{\"jsonrpc\":"
			    "\"2.0\",\"id\":%zu,\"method\":\"ping\"}\r", i);
			break;
		default:
			n = 1 + rnd(&seed) % (sizeof line - 1);
			for (k = 0; k < n; k++)
				line[k] = (char)('a' + rnd(&seed) % 26);
			break;
		}
		s = realloc(s, len + n + 1);
		cr_assert(s != NULL);
		memcpy(s + len, line, n);
		s[len + n] = '\n';
		len += n + 1;
		if (n > 1 || (n == 1 && line[0] != '\r'))
			lines_add(want, line, n);
	}
	*lenp = len;
	return s;
}

static void
expect_line(struct ndjson *nj, const char *want)
{
	char	*line;
	size_t	 len;

	cr_assert_eq(ndjson_next(nj, &line, &len), NDJSON_LINE,
	    "want line \"%s\"", want);
	cr_assert_eq(len, strlen(want));
	cr_assert_str_eq(line, want);
}

static void
expect_status(struct ndjson *nj, enum ndjson_status want)
{
	char	*line;
	size_t	 len;

	cr_assert_eq(ndjson_next(nj, &line, &len), want);
	cr_assert_null(line);
	cr_assert_eq(len, 0);
}

Test(ndjson, one_line)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 64);
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "{\"a\":1}\n", 8);
	expect_line(&nj, "{\"a\":1}");
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "{}", 2);
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "\n", 1);
	expect_line(&nj, "{}");
	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
}

Test(ndjson, byte_by_byte)
{
	struct ndjson	 nj;
	struct lines	 want = { 0 }, got = { 0 };
	size_t		 len, i;
	char		*s;

	s = stream_build(&want, &len);
	cr_assert_gt(want.n, 200);
	ndjson_init(&nj, 1024);
	for (i = 0; i < len; i++) {
		ndjson_feed(&nj, s + i, 1);
		drain(&nj, &got);
	}
	lines_eq(&got, &want);
	ndjson_free(&nj);
	lines_free(&want);
	lines_free(&got);
	free(s);
}

Test(ndjson, random_chunks)
{
	struct ndjson	 nj;
	struct lines	 want = { 0 }, got;
	size_t		 len, off, n, maxchunk[] = { 2, 7, 64, 1000, 5000 };
	size_t		 m;
	uint32_t	 seed;
	char		*s;

	s = stream_build(&want, &len);
	for (m = 0; m < sizeof maxchunk / sizeof *maxchunk; m++) {
		for (seed = 1; seed <= 20; seed++) {
			uint32_t	 st = seed * 2654435761u;

			memset(&got, 0, sizeof got);
			ndjson_init(&nj, 1024);
			for (off = 0; off < len; off += n) {
				n = 1 + rnd(&st) % maxchunk[m];
				if (n > len - off)
					n = len - off;
				ndjson_feed(&nj, s + off, n);
				drain(&nj, &got);
			}
			lines_eq(&got, &want);
			ndjson_free(&nj);
			lines_free(&got);
		}
	}
	lines_free(&want);
	free(s);
}

/* The zero-copy path: read(2) straight into ndjson_space. */
Test(ndjson, space_commit)
{
	struct ndjson	 nj;
	struct lines	 want = { 0 }, got = { 0 };
	size_t		 len, off, n;
	uint32_t	 st = 99;
	char		*s, *p;

	s = stream_build(&want, &len);
	ndjson_init(&nj, 1024);
	for (off = 0; off < len; off += n) {
		p = ndjson_space(&nj, 300);
		cr_assert_not_null(p);
		cr_assert_geq(nj.cap - nj.len, 300);
		n = rnd(&st) % 301;
		if (n > len - off)
			n = len - off;
		memcpy(p, s + off, n);
		ndjson_commit(&nj, n);
		drain(&nj, &got);
	}
	lines_eq(&got, &want);
	ndjson_free(&nj);
	lines_free(&want);
	lines_free(&got);
	free(s);
}

Test(ndjson, crlf_kept)
{
	struct ndjson	 nj;
	char		*line;
	size_t		 len;

	ndjson_init(&nj, 64);
	ndjson_feed(&nj, "{}\r\n\r\r\nx\r", 9);
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	cr_assert_eq(len, 3);
	cr_assert_str_eq(line, "{}\r");
	/* Only a lone "\r" is blank; "\r\r" is returned (and is bad JSON). */
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	cr_assert_eq(len, 2);
	cr_assert_str_eq(line, "\r\r");
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "\n", 1);
	expect_line(&nj, "x\r");
	ndjson_free(&nj);
}

Test(ndjson, empty_lines_skipped)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 64);
	ndjson_feed(&nj, "\n\r\n\n{}\n\r\n\n", 10);
	expect_line(&nj, "{}");
	expect_status(&nj, NDJSON_MORE);
	cr_assert_eq(nj.start, nj.len, "blank lines are consumed");
	ndjson_feed(&nj, "\n\n\n", 3);
	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
}

Test(ndjson, exactly_max)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 8);
	ndjson_feed(&nj, "12345678", 8);
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "\n", 1);
	expect_line(&nj, "12345678");
	/* The '\r' of CRLF counts; only '\n' is excluded. */
	ndjson_feed(&nj, "1234567\r\n", 9);
	expect_line(&nj, "1234567\r");
	ndjson_feed(&nj, "12345678\n12345678\n", 18);
	expect_line(&nj, "12345678");
	expect_line(&nj, "12345678");
	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
}

Test(ndjson, partial_over_max)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 8);
	ndjson_feed(&nj, "1234", 4);
	expect_status(&nj, NDJSON_MORE);
	ndjson_feed(&nj, "5678", 4);
	expect_status(&nj, NDJSON_MORE);
	/* No need to wait for the newline. */
	ndjson_feed(&nj, "9", 1);
	expect_status(&nj, NDJSON_TOO_LONG);
	expect_status(&nj, NDJSON_TOO_LONG);
	ndjson_feed(&nj, "\n{}\n", 4);
	expect_status(&nj, NDJSON_TOO_LONG);
	ndjson_free(&nj);
}

Test(ndjson, complete_over_max)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 8);
	ndjson_feed(&nj, "ok\n123456789\n{}\n", 16);
	expect_line(&nj, "ok");
	expect_status(&nj, NDJSON_TOO_LONG);
	expect_status(&nj, NDJSON_TOO_LONG);
	ndjson_free(&nj);

	ndjson_init(&nj, 8);
	ndjson_feed(&nj, "12345678\r\n", 10);
	expect_status(&nj, NDJSON_TOO_LONG);
	ndjson_free(&nj);
}

Test(ndjson, many_lines_one_feed)
{
	struct ndjson	 nj;
	char		*s, want[64], *line;
	size_t		 len = 0, i, n;

	s = malloc(10000 * 32);
	cr_assert_not_null(s);
	for (i = 0; i < 10000; i++)
		len += (size_t)sprintf(s + len, "{\"i\":%zu}\n", i);
	ndjson_init(&nj, 64);
	ndjson_feed(&nj, s, len);
	for (i = 0; i < 10000; i++) {
		n = (size_t)snprintf(want, sizeof want, "{\"i\":%zu}", i);
		cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
		cr_assert_eq(len, n);
		cr_assert_str_eq(line, want);
	}
	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
	free(s);
}

/*
 * A 4 MiB line in 4 KiB reads: every call resumes where the last one
 * stopped (scan == bytes held), so the line is searched once, and the
 * buffer is never moved since nothing was consumed.
 */
Test(ndjson, incremental_scan)
{
	struct ndjson	 nj;
	char		 chunk[4096], *line;
	size_t		 i, len, held;

	memset(chunk, 'x', sizeof chunk);
	ndjson_init(&nj, STEXEC_MAX_MESSAGE_DEFAULT);
	for (i = 0; i < STEXEC_MAX_MESSAGE_DEFAULT / sizeof chunk; i++) {
		held = nj.len;
		cr_assert_eq(nj.scan, held);
		ndjson_feed(&nj, chunk, sizeof chunk);
		cr_assert_eq(nj.scan, held, "feeding must not rescan");
		cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_MORE);
		cr_assert_eq(nj.scan, held + sizeof chunk, "scan advances");
		cr_assert_eq(nj.start, 0);
	}
	ndjson_feed(&nj, "\n", 1);
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	cr_assert_eq(len, STEXEC_MAX_MESSAGE_DEFAULT);
	cr_assert_eq(line[0], 'x');
	cr_assert_eq(line[len - 1], 'x');
	cr_assert_leq(nj.cap, STEXEC_MAX_MESSAGE_DEFAULT + 2 * sizeof chunk);
	ndjson_free(&nj);
}

/*
 * White box: bytes before scan are never looked at again. A '\n' planted
 * behind scan stays unseen; a reader that rescanned would find it.
 */
Test(ndjson, no_rescan)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 64);
	ndjson_feed(&nj, "abcdef", 6);
	expect_status(&nj, NDJSON_MORE);
	cr_assert_eq(nj.scan, 6);
	nj.buf[2] = '\n';
	ndjson_feed(&nj, "gh", 2);
	expect_status(&nj, NDJSON_MORE);
	cr_assert_eq(nj.scan, 8);
	nj.buf[2] = 'c';
	ndjson_feed(&nj, "\n", 1);
	expect_line(&nj, "abcdefgh");
	ndjson_free(&nj);
}

/* 4 MiB one byte at a time: O(n) takes a moment, O(n^2) would not end. */
Test(ndjson, long_line_byte_by_byte, .timeout = 60 * STEXEC_TEST_BUILD_SCALE)
{
	struct ndjson	 nj;
	char		*line;
	size_t		 i, len;

	ndjson_init(&nj, STEXEC_MAX_MESSAGE_DEFAULT);
	for (i = 0; i < STEXEC_MAX_MESSAGE_DEFAULT; i++) {
		ndjson_feed(&nj, "z", 1);
		if (ndjson_next(&nj, &line, &len) != NDJSON_MORE)
			cr_assert_fail("byte %zu: not MORE", i);
	}
	ndjson_feed(&nj, "\n", 1);
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	cr_assert_eq(len, STEXEC_MAX_MESSAGE_DEFAULT);
	ndjson_feed(&nj, "z", 1);
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_MORE);
	cr_assert_eq(nj.start, 0, "everything consumed: back to the front");
	ndjson_free(&nj);
}

/* A flood without '\n' is searched only up to max + 1 bytes. */
Test(ndjson, scan_stops_past_max)
{
	struct ndjson	 nj;
	char		 big[100];

	memset(big, 'y', sizeof big);
	ndjson_init(&nj, 10);
	ndjson_feed(&nj, "a\n", 2);
	expect_line(&nj, "a");
	ndjson_feed(&nj, big, sizeof big);
	expect_status(&nj, NDJSON_TOO_LONG);
	cr_assert_eq(nj.scan, nj.start + 11);
	ndjson_free(&nj);
}

/* Consumed bytes stay put until the tail is too short for a read. */
Test(ndjson, lazy_compaction)
{
	struct ndjson	 nj;
	char		*p;

	ndjson_init(&nj, 64);
	ndjson_feed(&nj, "abcdefgh\nxy", 11);
	expect_line(&nj, "abcdefgh");
	expect_status(&nj, NDJSON_MORE);
	cr_assert_eq(nj.start, 9);
	p = ndjson_space(&nj, 16);
	cr_assert_eq(nj.start, 9, "no memmove while the tail has room");
	cr_assert_eq(p, nj.buf + 11);
	p = ndjson_space(&nj, nj.cap - nj.len + 1);
	cr_assert_eq(nj.start, 0, "compacted when the tail is short");
	cr_assert_eq(nj.len, 2);
	cr_assert_eq(nj.scan, 2);
	cr_assert(memcmp(nj.buf, "xy", 2) == 0);
	cr_assert_eq(p, nj.buf + 2);
	ndjson_commit(&nj, 0);
	ndjson_feed(&nj, "z\n", 2);
	expect_line(&nj, "xyz");
	/* All consumed: the next read starts at the front, nothing moved. */
	ndjson_space(&nj, 1);
	cr_assert_eq(nj.start, 0);
	cr_assert_eq(nj.len, 0);
	ndjson_free(&nj);

	/* Moving more than was consumed waits until the cap forces it. */
	ndjson_init(&nj, 1 << 20);
	ndjson_feed(&nj, "a\n", 2);
	ndjson_space(&nj, 5000);
	memset(nj.buf + nj.len, 'b', 5000);
	ndjson_commit(&nj, 5000);
	expect_line(&nj, "a");
	expect_status(&nj, NDJSON_MORE);
	ndjson_space(&nj, nj.cap - nj.len + 1);
	cr_assert_eq(nj.start, 2, "grown, not moved");
	cr_assert_eq(nj.scan, 5002);
	ndjson_free(&nj);
}

/*
 * A shorter line, then a max-length one: the consumed prefix is smaller
 * than what follows, so only the cap on memory forces the move.
 */
Test(ndjson, memory_bounded_short_first)
{
	struct ndjson		 nj;
	enum ndjson_status	 st;
	size_t			 max = 65536, short_len = 3000, total, off;
	size_t			 n, i, len, lines = 0;
	char			*s, *line, *p;

	total = 10 * (short_len + 1 + max + 1);
	s = malloc(total);
	cr_assert_not_null(s);
	for (off = 0, i = 0; i < 10; i++) {
		memset(s + off, 'p', short_len);
		s[off + short_len] = '\n';
		off += short_len + 1;
		memset(s + off, 'q', max);
		s[off + max] = '\n';
		off += max + 1;
	}
	ndjson_init(&nj, max);
	for (off = 0; off < total; off += n) {
		n = total - off < 4096 ? total - off : 4096;
		p = ndjson_space(&nj, 4096);
		memcpy(p, s + off, n);
		ndjson_commit(&nj, n);
		cr_assert_leq(nj.cap, max + 4096 + 1);
		while ((st = ndjson_next(&nj, &line, &len)) == NDJSON_LINE) {
			cr_assert(len == max || len == short_len, "len %zu",
			    len);
			lines++;
		}
		cr_assert_eq(st, NDJSON_MORE);
	}
	cr_assert_eq(lines, 20);
	ndjson_free(&nj);
	free(s);
}

/* Streaming max-length lines in 4 KiB reads keeps cap near max + read. */
Test(ndjson, memory_bounded)
{
	struct ndjson		 nj;
	enum ndjson_status	 st;
	size_t			 max = 65536, total, off, n, i, len, lines = 0;
	char			*s, *line, *p;

	total = 40 * (max + 1) + 20 * 19;
	s = malloc(total);
	cr_assert_not_null(s);
	for (off = 0, i = 0; i < 40; i++) {
		memset(s + off, 'a' + (int)i % 26, max);
		s[off + max] = '\n';
		off += max + 1;
		if (i % 2 == 0) {
			memcpy(s + off, "{\"short\":true}\r\n\n\n\n", 19);
			off += 19;
		}
	}
	total = off;
	ndjson_init(&nj, max);
	for (off = 0; off < total; off += n) {
		n = total - off < 4096 ? total - off : 4096;
		p = ndjson_space(&nj, 4096);
		memcpy(p, s + off, n);
		ndjson_commit(&nj, n);
		cr_assert_leq(nj.cap, max + 4096 + 1);
		while ((st = ndjson_next(&nj, &line, &len)) == NDJSON_LINE) {
			cr_assert(len == max || len == 15, "len %zu", len);
			lines++;
		}
		cr_assert_eq(st, NDJSON_MORE);
	}
	cr_assert_eq(lines, 60);
	ndjson_free(&nj);
	free(s);
}

Test(ndjson, reuse_after_free)
{
	struct ndjson	 nj;

	ndjson_init(&nj, 16);
	ndjson_feed(&nj, "abc\nde", 6);
	expect_line(&nj, "abc");
	ndjson_free(&nj);
	cr_assert_null(nj.buf);
	cr_assert_eq(nj.max, 16);
	ndjson_feed(&nj, "fg\n", 3);
	expect_line(&nj, "fg");
	ndjson_free(&nj);
}

static void
decode_str(const char *s, struct jsonrpc_msg *msg)
{
	jsonrpc_decode(s, strlen(s), msg);
}

static char *
dump(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* want_id: the compact JSON of msg->id, or NULL for none. */
static void
expect_invalid(const char *in, int code, const char *detail,
    const char *want_id)
{
	struct jsonrpc_msg	 msg;
	char			*id;

	decode_str(in, &msg);
	cr_assert_eq(msg.kind, JSONRPC_INVALID, "%s", in);
	cr_assert_eq(msg.code, code, "%s: code %d", in, msg.code);
	cr_assert_str_eq(msg.message, code == STEXEC_ERR_PARSE ?
	    "Parse error" : "Invalid Request");
	cr_assert_str_eq(msg.detail, detail, "%s", in);
	cr_assert_null(msg.method);
	cr_assert_null(msg.params);
	cr_assert_null(msg.result);
	if (want_id == NULL)
		cr_assert_null(msg.id, "%s: unexpected id", in);
	else {
		cr_assert_not_null(msg.id, "%s: id lost", in);
		id = dump(msg.id);
		cr_assert_str_eq(id, want_id);
		free(id);
	}
	if (code == STEXEC_ERR_PARSE)
		cr_assert_null(msg.root);
	jsonrpc_msg_clear(&msg);
	cr_assert_null(msg.root);
}

Test(decode, request)
{
	struct jsonrpc_msg	 msg;

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\","
	    "\"params\":{}}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert(json_is_integer(msg.id));
	cr_assert_eq(json_integer_value(msg.id), 1);
	cr_assert_str_eq(msg.method, "ping");
	cr_assert(json_is_object(msg.params));
	cr_assert_null(msg.result);
	cr_assert_str_eq(msg.detail, "");
	jsonrpc_msg_clear(&msg);

	/* Member order does not matter; params may be an array or absent. */
	decode_str(" {\"params\":[1,2],\"method\":\"m\",\"id\":\"abc\","
	    "\"jsonrpc\":\"2.0\"} \r", &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert_str_eq(json_string_value(msg.id), "abc");
	cr_assert_eq(json_array_size(msg.params), 2);
	jsonrpc_msg_clear(&msg);

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert(json_is_real(msg.id));
	cr_assert_null(msg.params);
	jsonrpc_msg_clear(&msg);

	/* "id": null is a request with a null id, not a notification. */
	decode_str("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert(json_is_null(msg.id));
	jsonrpc_msg_clear(&msg);
}

Test(decode, duplicate_keys_accepted)
{
	struct jsonrpc_msg	 msg;

	decode_str("{\"jsonrpc\":\"1.0\",\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"a\",\"method\":\"b\"}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert_str_eq(msg.method, "b");
	jsonrpc_msg_clear(&msg);
}

/* File contents may hold NUL: \u0000 in a value is decoded whole. */
Test(decode, nul_in_params)
{
	static const char in[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"addTool\",\"params\":{\"content\":\"a\\u0000b\"}}";
	struct jsonrpc_msg msg;
	const json_t *v;

	jsonrpc_decode(in, sizeof in - 1, &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	v = json_object_get(msg.params, "content");
	cr_assert_eq(json_string_length(v), 3);
	cr_assert_eq(memcmp(json_string_value(v), "a\0b", 3), 0);
	jsonrpc_msg_clear(&msg);
}

Test(decode, notification)
{
	struct jsonrpc_msg	 msg;

	decode_str("{\"jsonrpc\":\"2.0\",\"method\":\"tool_status\","
	    "\"params\":{\"seq\":3}}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_NOTIFICATION);
	cr_assert_null(msg.id);
	cr_assert_str_eq(msg.method, "tool_status");
	cr_assert_eq(json_integer_value(json_object_get(msg.params, "seq")),
	    3);
	jsonrpc_msg_clear(&msg);
}

Test(decode, response)
{
	struct jsonrpc_msg	 msg;

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"x\":1}}",
	    &msg);
	cr_assert_eq(msg.kind, JSONRPC_RESPONSE);
	cr_assert_eq(json_integer_value(msg.id), 7);
	cr_assert_eq(json_integer_value(json_object_get(msg.result, "x")), 1);
	cr_assert_null(msg.method);
	jsonrpc_msg_clear(&msg);

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"result\":null}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_RESPONSE);
	cr_assert(json_is_null(msg.result));
	jsonrpc_msg_clear(&msg);
}

Test(decode, error)
{
	struct jsonrpc_msg	 msg;

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32001,"
	    "\"message\":\"unknown session\",\"data\":{\"sessionId\":\"s\"}}}",
	    &msg);
	cr_assert_eq(msg.kind, JSONRPC_ERROR);
	cr_assert_eq(json_integer_value(msg.id), 7);
	cr_assert_eq(msg.code, STEXEC_ERR_UNKNOWN_SESSION);
	cr_assert_str_eq(msg.message, "unknown session");
	cr_assert_null(msg.result);
	jsonrpc_msg_clear(&msg);

	decode_str("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":"
	    "-2147483648,\"message\":\"\"}}", &msg);
	cr_assert_eq(msg.kind, JSONRPC_ERROR);
	cr_assert(json_is_null(msg.id));
	cr_assert_eq(msg.code, INT_MIN);
	cr_assert_str_eq(msg.message, "");
	jsonrpc_msg_clear(&msg);
}

Test(decode, parse_errors)
{
	expect_invalid("{", STEXEC_ERR_PARSE,
	    "string or '}' expected near end of file at column 1", NULL);
	expect_invalid("{\"a\":1,}", STEXEC_ERR_PARSE,
	    "string or '}' expected near '}' at column 8", NULL);
	expect_invalid("{} x", STEXEC_ERR_PARSE,
	    "end of file expected near 'x' at column 4", NULL);
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}{}",
	    STEXEC_ERR_PARSE, "end of file expected near '{' at column 38",
	    NULL);
	expect_invalid("nul", STEXEC_ERR_PARSE,
	    "invalid token near 'nul' at column 3", NULL);
	expect_invalid("12345678901234567890123", STEXEC_ERR_PARSE,
	    "too big integer at column 23", NULL);
	expect_invalid("", STEXEC_ERR_PARSE,
	    "unexpected token near end of file at column 0", NULL);
	expect_invalid("\r", STEXEC_ERR_PARSE,
	    "unexpected token near end of file at column 1", NULL);
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}",
	    STEXEC_ERR_INVALID_REQUEST,
	    "\"method\" must not contain NUL characters", "1");
	/* Bytes from the peer are made safe to send back. */
	expect_invalid("\"\xff\"", STEXEC_ERR_PARSE,
	    "unable to decode byte 0xff near '\"' at column 1", NULL);
	expect_invalid("{\"a\":\"x\x01\"}", STEXEC_ERR_PARSE,
	    "control character 0x1 near '\"x' at column 7", NULL);
	expect_invalid("\x01", STEXEC_ERR_PARSE,
	    "invalid token near '?' at column 1", NULL);
	expect_invalid("[1,\x7f]", STEXEC_ERR_PARSE,
	    "invalid token near '?' at column 4", NULL);
	expect_invalid("\"a\x7f\\q\"", STEXEC_ERR_PARSE,
	    "invalid escape near '\"a?\\q' at column 5", NULL);
	expect_invalid("\xc3\xa9", STEXEC_ERR_PARSE,
	    "invalid token near '\xc3\xa9' at column 1", NULL);
	expect_invalid("\xed\xa0\x80", STEXEC_ERR_PARSE,
	    "unable to decode byte 0xed at column 0", NULL);
}

/* Whatever the input, the detail fits, ends in NUL and is UTF-8. */
Test(decode, parse_error_detail_safe)
{
	static char		 big[4000];
	const char		*in[] = { big, "\x01\x02",
				    "[\"\xc3\xa9\x7f\\x\"]", "\"\xf0\x9f\x98",
				    "{\"\xe2\x82\xac\":\x1f}" };
	struct jsonrpc_msg	 msg;
	json_t			*s;
	size_t			 i;

	memset(big, 'x', sizeof big - 1);
	for (i = 0; i < sizeof in / sizeof *in; i++) {
		memset(&msg, 0x55, sizeof msg);
		decode_str(in[i], &msg);
		cr_assert_eq(msg.kind, JSONRPC_INVALID);
		cr_assert_eq(msg.code, STEXEC_ERR_PARSE);
		cr_assert_not_null(memchr(msg.detail, '\0', sizeof msg.detail));
		s = json_string(msg.detail);
		cr_assert_not_null(s, "detail is not UTF-8: %s", msg.detail);
		json_decref(s);
		jsonrpc_msg_clear(&msg);
	}
	decode_str(big, &msg);
	cr_assert_str_eq(msg.detail, "invalid token at column 3999");
	jsonrpc_msg_clear(&msg);
}

/* A batch is kept whole; each element decodes as if it were alone. */
Test(decode, batch)
{
	struct jsonrpc_msg msg, el;

	decode_str("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
	    "7,[]]", &msg);
	cr_assert_eq(msg.kind, JSONRPC_BATCH);
	cr_assert_eq(json_array_size(msg.root), 3);
	jsonrpc_decode_value(json_array_get(msg.root, 0), &el);
	cr_assert_eq(el.kind, JSONRPC_REQUEST);
	cr_assert_str_eq(el.method, "ping");
	jsonrpc_msg_clear(&el);
	jsonrpc_decode_value(json_array_get(msg.root, 1), &el);
	cr_assert_eq(el.kind, JSONRPC_INVALID);
	cr_assert_str_eq(el.detail, "a message must be a JSON object");
	jsonrpc_msg_clear(&el);
	jsonrpc_decode_value(json_array_get(msg.root, 2), &el);
	cr_assert_eq(el.kind, JSONRPC_INVALID);
	cr_assert_str_eq(el.detail, "a batch cannot hold a batch");
	jsonrpc_msg_clear(&el);
	jsonrpc_msg_clear(&msg);
}

Test(decode, invalid_requests)
{
	const int	 E = STEXEC_ERR_INVALID_REQUEST;

	expect_invalid("[]", E, "an empty batch", NULL);
	expect_invalid("42", E, "a message must be a JSON object", NULL);
	expect_invalid("\"x\"", E, "a message must be a JSON object", NULL);
	expect_invalid("null", E, "a message must be a JSON object", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"a\"}", E,
	    "\"id\" must be a string, number or null", NULL);
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"a\"}", E,
	    "\"id\" must be a string, number or null", NULL);
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"a\"}", E,
	    "\"id\" must be a string, number or null", NULL);

	expect_invalid("{\"id\":7,\"method\":\"a\"}", E,
	    "\"jsonrpc\" must be \"2.0\"", "7");
	expect_invalid("{\"jsonrpc\":\"1.0\",\"id\":\"abc\",\"method\":\"a\"}",
	    E, "\"jsonrpc\" must be \"2.0\"", "\"abc\"");
	expect_invalid("{\"jsonrpc\":2.0,\"id\":7,\"method\":\"a\"}", E,
	    "\"jsonrpc\" must be \"2.0\"", "7");
	expect_invalid("{\"jsonrpc\":\"2.00\",\"id\":null,\"method\":\"a\"}",
	    E, "\"jsonrpc\" must be \"2.0\"", "null");
	expect_invalid("{\"jsonrpc\":\"2.0\"}", E,
	    "\"method\", \"result\" or \"error\" is required", NULL);
	expect_invalid("{}", E, "\"jsonrpc\" must be \"2.0\"", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":1}", E,
	    "\"method\" must be a string", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":null}", E,
	    "\"method\" must be a string", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":[\"a\"]}", E,
	    "\"method\" must be a string", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"a\","
	    "\"params\":1}", E, "\"params\" must be an object or array", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":-1.5,\"method\":\"a\","
	    "\"params\":\"x\"}", E, "\"params\" must be an object or array",
	    "-1.5");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":null}",
	    E, "\"params\" must be an object or array", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"a\","
	    "\"result\":1}", E, "a request cannot have \"result\" or \"error\"",
	    "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"error\":{}}", E,
	    "a request cannot have \"result\" or \"error\"", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7}", E,
	    "\"method\", \"result\" or \"error\" is required", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1,\"error\":"
	    "{\"code\":1,\"message\":\"m\"}}", E,
	    "a response cannot have both \"result\" and \"error\"", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"result\":1}", E,
	    "a response must have an \"id\"", NULL);
	expect_invalid("{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,"
	    "\"message\":\"m\"}}", E, "a response must have an \"id\"", NULL);

	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":\"bad\"}", E,
	    "\"error\" must be an object", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{"
	    "\"message\":\"m\"}}", E, "\"error.code\" must be an integer", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1.0,"
	    "\"message\":\"m\"}}", E, "\"error.code\" must be an integer", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{"
	    "\"code\":\"1\",\"message\":\"m\"}}", E,
	    "\"error.code\" must be an integer", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":"
	    "2147483648,\"message\":\"m\"}}", E,
	    "\"error.code\" is out of range", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1}}",
	    E, "\"error.message\" must be a string", "7");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1,"
	    "\"message\":false}}", E, "\"error.message\" must be a string",
	    "7");
}

Test(encode, request)
{
	struct buf	 out = { 0 };
	json_t			*id = json_integer(1), *params;

	cr_assert_eq(jsonrpc_request(&out, id, "ping", NULL), 0);
	cr_assert_str_eq(out.data,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
	cr_assert_eq(out.len, strlen(out.data));

	params = json_pack("{s:[i,s],s:n,s:{}}", "a", 1, "x", "b", "c");
	cr_assert_eq(jsonrpc_request(&out, id, "createSession", params), 0);
	cr_assert_str_eq(out.data,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"createSession\","
	    "\"params\":{\"a\":[1,\"x\"],\"b\":null,\"c\":{}}}\n");
	json_decref(params);
	json_decref(id);

	out.len = 0;
	id = json_string("a\"b");
	params = json_array();
	cr_assert_eq(jsonrpc_request(&out, id, "m", params), 0);
	cr_assert_str_eq(out.data,
	    "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"m\","
	    "\"params\":[]}\n");
	json_decref(params);
	json_decref(id);
	buf_free(&out);
	cr_assert_null(out.data);
}

Test(encode, notification)
{
	struct buf	 out = { 0 };
	json_t			*params;

	params = json_pack("{s:s,s:I}", "sessionId", "s1", "seq",
	    (json_int_t)3);
	cr_assert_eq(jsonrpc_notification(&out, "tool_status", params), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"tool_status\",\"params\":{\"sessionId\":\"s1\",\"seq\":3}}\n");
	out.len = 0;
	cr_assert_eq(jsonrpc_notification(&out, "session_closed", NULL), 0);
	cr_assert_str_eq(out.data,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"session_closed\"}\n");
	json_decref(params);
	buf_free(&out);
}

/* Members appended to params come out as if they had been set into it. */
Test(encode, notification_with)
{
	static const char more[] = ",\"sessionId\":\"s1\",\"seq\":3";
	struct buf	 out = { 0 }, want = { 0 };
	json_t		*params = json_pack("{s:I,s:{s:[]}}", "turn", 1, "x",
	    "y"), *set = json_deep_copy(params), *empty = json_object();

	cr_assert_eq(jsonrpc_notification_with(&out, "tool_status", params,
	    more, strlen(more)), 0);
	json_object_set_new(set, "sessionId", json_string("s1"));
	json_object_set_new(set, "seq", json_integer(3));
	cr_assert_eq(jsonrpc_notification(&want, "tool_status", set), 0);
	cr_assert_str_eq(out.data, want.data);
	out.len = 0;
	cr_assert_eq(jsonrpc_notification_with(&out, "state", empty, more,
	    strlen(more)), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"state\",\"params\":{\"sessionId\":\"s1\",\"seq\":3}}\n");
	/* Not an object, or more that is not members: nothing written. */
	out.len = 0;
	out.data[0] = '\0';
	cr_assert_eq(jsonrpc_notification_with(&out, "m", NULL, more,
	    strlen(more)), -1);
	cr_assert_eq(jsonrpc_notification_with(&out, "m", params, "\"a\":1",
	    5), -1);
	cr_assert_eq(jsonrpc_notification_with(&out, "m", params, "", 0), -1);
	cr_assert_eq(out.len, 0);
	cr_assert_str_eq(out.data, "");
	json_decref(params);
	json_decref(set);
	json_decref(empty);
	buf_free(&out);
	buf_free(&want);
}

Test(encode, result)
{
	struct buf	 out = { 0 };
	json_t			*id = json_integer(42), *r = json_object();

	cr_assert_eq(jsonrpc_result(&out, id, r), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"id\":42,"
	    "\"result\":{}}\n");
	json_decref(r);
	r = json_real(0.5);
	out.len = 0;
	cr_assert_eq(jsonrpc_result(&out, id, r), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"id\":42,"
	    "\"result\":0.5}\n");
	json_decref(r);
	json_decref(id);
	buf_free(&out);
}

Test(encode, error)
{
	struct buf	 out = { 0 };
	json_t			*id = json_string("r1"), *data;

	data = json_string("\"jsonrpc\" must be \"2.0\"");
	cr_assert_eq(jsonrpc_error(&out, NULL, STEXEC_ERR_INVALID_REQUEST,
	    "Invalid Request", data), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
	    "{\"code\":-32600,\"message\":\"Invalid Request\",\"data\":"
	    "\"\\\"jsonrpc\\\" must be \\\"2.0\\\"\"}}\n");
	out.len = 0;
	cr_assert_eq(jsonrpc_error(&out, id, STEXEC_ERR_UNKNOWN_SESSION,
	    "unknown session \"x\"", NULL), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\","
	    "\"error\":{\"code\":-32001,\"message\":\"unknown session "
	    "\\\"x\\\"\"}}\n");
	out.len = 0;
	cr_assert_eq(jsonrpc_error(&out, NULL, INT_MIN, "m", NULL), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"id\":null,"
	    "\"error\":{\"code\":-2147483648,\"message\":\"m\"}}\n");
	json_decref(data);
	json_decref(id);
	buf_free(&out);
}

/* Our own string escaping must match jansson's, byte for byte. */
Test(encode, string_escapes)
{
	struct buf	 out = { 0 };
	const char		*m = "a\"\\/\b\f\n\r\t\x01\x1f\x7f é€😀";
	json_t			*s = json_string(m);
	char			*want, line[128];

	cr_assert_not_null(s);
	want = dump(s);
	cr_assert_str_eq(want, "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001F\x7f"
	    " é€😀\"");
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"method\":%s}\n",
	    want);
	cr_assert_eq(jsonrpc_notification(&out, m, NULL), 0);
	cr_assert_str_eq(out.data, line);
	json_decref(s);
	free(want);
	buf_free(&out);
}

/* A failed encoder leaves out exactly as it was: only whole lines. */
Test(encode, failures_roll_back)
{
	struct buf	 out = { 0 };
	json_t			*id = json_integer(1), *obj = json_object();
	json_t			*num = json_integer(5), *bad, *badid;
	const char		*before =
				    "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n";

	bad = json_pack("{s:o}", "s", json_stringn_nocheck("\xff", 1));
	badid = json_stringn_nocheck("\xff", 1);
	cr_assert_not_null(bad);
	cr_assert_eq(jsonrpc_notification(&out, "x", NULL), 0);

	cr_assert_eq(jsonrpc_request(&out, id, "bad\xc3", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xed\xa0\x80", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xc0\xaf", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xe0\x80\xaf", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xf0\x8f\xbf\xbf", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xf4\x90\x80\x80", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xf5\x80\x80\x80", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xe2\x82", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\xe2\x28\xac", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "\x80", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, NULL, NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, NULL, "m", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, obj, "m", NULL), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "m", num), -1);
	cr_assert_eq(jsonrpc_request(&out, id, "m", bad), -1);
	cr_assert_eq(jsonrpc_notification(&out, NULL, obj), -1);
	cr_assert_eq(jsonrpc_notification(&out, "m", num), -1);
	cr_assert_eq(jsonrpc_notification(&out, "m", bad), -1);
	cr_assert_eq(jsonrpc_result(&out, id, NULL), -1);
	cr_assert_eq(jsonrpc_result(&out, NULL, obj), -1);
	cr_assert_eq(jsonrpc_result(&out, obj, obj), -1);
	cr_assert_eq(jsonrpc_result(&out, id, bad), -1);
	cr_assert_eq(jsonrpc_error(&out, id, 1, "\xff", NULL), -1);
	cr_assert_eq(jsonrpc_error(&out, id, 1, NULL, NULL), -1);
	cr_assert_eq(jsonrpc_error(&out, obj, 1, "m", NULL), -1);
	cr_assert_eq(jsonrpc_error(&out, id, 1, "m", bad), -1);
	cr_assert_eq(jsonrpc_request(&out, badid, "m", NULL), -1);
	cr_assert_eq(jsonrpc_result(&out, badid, obj), -1);
	cr_assert_eq(jsonrpc_error(&out, badid, 1, "m", NULL), -1);
	cr_assert_eq(jsonrpc_dump(&out, NULL), -1);
	cr_assert_eq(jsonrpc_dump(&out, bad), -1);

	cr_assert_eq(out.len, strlen(before));
	cr_assert_str_eq(out.data, before);
	json_decref(bad);
	json_decref(badid);
	json_decref(num);
	json_decref(obj);
	json_decref(id);
	buf_free(&out);
}

Test(encode, dump)
{
	struct buf	 out = { 0 };
	json_t			*v;

	v = json_integer(-3);
	cr_assert_eq(jsonrpc_dump(&out, v), 0);
	json_decref(v);
	v = json_string("t\n");
	cr_assert_eq(jsonrpc_dump(&out, v), 0);
	json_decref(v);
	v = json_pack("{s:[b,n],s:f}", "k", 1, "r", 1.25);
	cr_assert_eq(jsonrpc_dump(&out, v), 0);
	json_decref(v);
	cr_assert_str_eq(out.data, "-3\"t\\n\"{\"k\":[true,null],\"r\":1.25}");
	cr_assert_eq(out.len, strlen(out.data));
	buf_free(&out);
}

/* Growth from empty through many reallocations keeps every byte. */
Test(encode, large_output)
{
	struct buf	 out = { 0 };
	json_t			*params, *id;
	struct jsonrpc_msg	 msg;
	char			*big;
	size_t			 n = 1 << 20, i;
	const char		*pre = "{\"jsonrpc\":\"2.0\",\"id\":9,"
				    "\"method\":\"echo\",\"params\":"
				    "{\"text\":\"";
	const char		*post = "\"}}\n";

	big = malloc(n + 1);
	cr_assert_not_null(big);
	for (i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	big[n] = '\0';
	params = json_pack("{s:s}", "text", big);
	id = json_integer(9);
	for (i = 0; i < 3; i++)
		cr_assert_eq(jsonrpc_request(&out, id, "echo", params), 0);
	cr_assert_eq(out.len, 3 * (strlen(pre) + n + strlen(post)));
	cr_assert(memcmp(out.data, pre, strlen(pre)) == 0);
	cr_assert(memcmp(out.data + out.len - strlen(post), post,
	    strlen(post)) == 0);
	jsonrpc_decode(out.data, strlen(pre) + n + strlen(post) - 1, &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert(json_equal(msg.params, params));
	jsonrpc_msg_clear(&msg);
	json_decref(params);
	json_decref(id);
	buf_free(&out);
	free(big);
}

/* Encode all four kinds, frame them, decode them, compare. */
Test(roundtrip, all_kinds)
{
	struct buf	 out = { 0 };
	struct ndjson		 nj;
	struct jsonrpc_msg	 msg;
	json_t			*id, *params, *data;
	char			*line;
	size_t			 len;

	id = json_string("req-1");
	params = json_pack("{s:s,s:{s:s,s:s,s:{s:s}}}", "sessionId", "s",
	    "toolUse", "id", "tu_1", "name", "Bash", "input", "command",
	    "printf 'a\\nb'\n\ttab \"q\" é");
	data = json_pack("{s:i}", "oldest", 12);
	cr_assert_eq(jsonrpc_request(&out, id, "addTool", params), 0);
	cr_assert_eq(jsonrpc_notification(&out, "progress", params), 0);
	cr_assert_eq(jsonrpc_result(&out, id, params), 0);
	cr_assert_eq(jsonrpc_error(&out, id, STEXEC_ERR_LIMIT, "replay gap",
	    data), 0);

	ndjson_init(&nj, STEXEC_MAX_MESSAGE_DEFAULT);
	ndjson_feed(&nj, out.data, out.len);

	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	jsonrpc_decode(line, len, &msg);
	cr_assert_eq(msg.kind, JSONRPC_REQUEST);
	cr_assert(json_equal(msg.id, id));
	cr_assert_str_eq(msg.method, "addTool");
	cr_assert(json_equal(msg.params, params));
	jsonrpc_msg_clear(&msg);

	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	jsonrpc_decode(line, len, &msg);
	cr_assert_eq(msg.kind, JSONRPC_NOTIFICATION);
	cr_assert_null(msg.id);
	cr_assert_str_eq(msg.method, "progress");
	cr_assert(json_equal(msg.params, params));
	jsonrpc_msg_clear(&msg);

	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	jsonrpc_decode(line, len, &msg);
	cr_assert_eq(msg.kind, JSONRPC_RESPONSE);
	cr_assert(json_equal(msg.id, id));
	cr_assert(json_equal(msg.result, params));
	jsonrpc_msg_clear(&msg);

	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	jsonrpc_decode(line, len, &msg);
	cr_assert_eq(msg.kind, JSONRPC_ERROR);
	cr_assert(json_equal(msg.id, id));
	cr_assert_eq(msg.code, STEXEC_ERR_LIMIT);
	cr_assert_str_eq(msg.message, "replay gap");
	cr_assert(json_equal(json_object_get(json_object_get(msg.root,
	    "error"), "data"), data));
	jsonrpc_msg_clear(&msg);

	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
	json_decref(data);
	json_decref(params);
	json_decref(id);
	buf_free(&out);
}

/* A "\n" inside a string value is escaped: the message stays one line. */
Test(roundtrip, embedded_newline)
{
	struct buf	 out = { 0 };
	struct ndjson		 nj;
	struct jsonrpc_msg	 msg;
	json_t			*params;
	char			*line;
	size_t			 len;

	params = json_pack("{s:s}", "text", "line1\nline2\r\n\n");
	cr_assert_eq(jsonrpc_notification(&out, "multi\nline", params), 0);
	cr_assert_str_eq(out.data, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"multi\\nline\",\"params\":{\"text\":\"line1\\nline2\\r\\n\\n\"}}"
	    "\n");
	cr_assert_eq(memchr(out.data, '\n', out.len), out.data + out.len - 1);

	ndjson_init(&nj, 1024);
	ndjson_feed(&nj, out.data, out.len);
	cr_assert_eq(ndjson_next(&nj, &line, &len), NDJSON_LINE);
	cr_assert_eq(len, out.len - 1);
	jsonrpc_decode(line, len, &msg);
	cr_assert_eq(msg.kind, JSONRPC_NOTIFICATION);
	cr_assert_str_eq(msg.method, "multi\nline");
	cr_assert_str_eq(json_string_value(json_object_get(msg.params,
	    "text")), "line1\nline2\r\n\n");
	jsonrpc_msg_clear(&msg);
	expect_status(&nj, NDJSON_MORE);
	ndjson_free(&nj);
	json_decref(params);
	buf_free(&out);
}

/* Random method names of every ASCII byte and some UTF-8 survive. */
Test(roundtrip, random_strings)
{
	static const char	*utf8[] = { "\xc3\xa9", "\xe2\x82\xac",
				    "\xf0\x9f\x98\x80", "\xef\xbf\xbf" };
	struct buf	 out = { 0 };
	struct jsonrpc_msg	 msg;
	char			 m[200];
	size_t			 n, i, k;
	uint32_t		 st = 7;
	json_t			*id = json_integer(0);

	for (i = 0; i < 2000; i++) {
		n = 0;
		for (k = rnd(&st) % 40; k > 0; k--) {
			if (rnd(&st) % 5 == 0) {
				const char *u = utf8[rnd(&st) % 4];

				memcpy(m + n, u, strlen(u));
				n += strlen(u);
			} else
				m[n++] = (char)(1 + rnd(&st) % 127);
		}
		m[n] = '\0';
		out.len = 0;
		cr_assert_eq(jsonrpc_request(&out, id, m, NULL), 0);
		cr_assert_eq(memchr(out.data, '\n', out.len),
		    out.data + out.len - 1);
		jsonrpc_decode(out.data, out.len, &msg);
		cr_assert_eq(msg.kind, JSONRPC_REQUEST, "%s", msg.detail);
		cr_assert_str_eq(msg.method, m);
		jsonrpc_msg_clear(&msg);
	}
	json_decref(id);
	buf_free(&out);
}

/* The direct writer gives exactly jansson's compact bytes. */
Test(encode, dump_matches_jansson)
{
	static const char *values[] = {
		"0", "-1", "9223372036854775807", "-9223372036854775808",
		"0.5", "1e300", "-2.5e-8", "3.0", "1.0e2", "123456789.123",
		"true", "false", "null", "\"\"", "\"a\\u0000b\"",
		"\"\\u001f\\u007f\\\"\\\\/\\b\\f\\n\\r\\t é 漢 😀\"",
		"[]", "{}", "[1,[2,[3,{}]],\"x\"]",
		"{\"b\":1,\"a\":{\"z\":[true,null],\"y\":\"\\n\"},\"\":0}",
		"{\"turn\":1,\"toolUseId\":\"t\",\"data\":{\"pct\":12.75}}",
	};
	struct buf out = { 0 };
	json_error_t jerr;
	char *want;
	json_t *v;
	size_t i;

	for (i = 0; i < sizeof values / sizeof *values; i++) {
		v = json_loads(values[i], JSON_DECODE_ANY | JSON_ALLOW_NUL,
		    &jerr);
		cr_assert(v != NULL, "%s: %s", values[i], jerr.text);
		want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		out.len = 0;
		cr_assert_eq(jsonrpc_dump(&out, v), 0);
		cr_assert_eq(out.len, strlen(want), "%s: %s vs %s", values[i],
		    out.data, want);
		cr_assert_str_eq(out.data, want);
		free(want);
		json_decref(v);
	}
	buf_free(&out);
}

/* The 8-bytes-at-a-time scan: a byte to escape at every offset of long
 * strings still comes out exactly as jansson writes it. */
Test(encode, escapes_at_every_offset)
{
	static const char specials[] = { '"', '\\', '\n', '\x01', '\x1f',
		' ', '~', '\x7f' };
	struct buf out = { 0 };
	char text[40], *want;
	json_t *v;
	size_t i, off;

	for (i = 0; i < sizeof specials; i++)
		for (off = 0; off < 32; off++) {
			memset(text, 'a', 32);
			text[32] = '\0';
			text[off] = specials[i];
			v = json_string(text);
			want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			out.len = 0;
			cr_assert_eq(jsonrpc_dump(&out, v), 0);
			cr_assert_str_eq(out.data, want, "byte %#x at %zu",
			    (unsigned)(unsigned char)specials[i], off);
			free(want);
			json_decref(v);
		}
	/* And with invalid UTF-8 repaired, one U+FFFD per bad byte. */
	out.len = 0;
	jsonrpc_add_string_repaired(&out, "abcdefgh\xff" "ijklmnop\xc3", 18);
	cr_assert_str_eq(out.data,
	    "\"abcdefgh\xef\xbf\xbdijklmnop\xef\xbf\xbd\"");
	buf_free(&out);
}

/*
 * buf_fmt_u64 and buf_add_int, which replace snprintf on the hot paths,
 * write what it writes.
 */
Test(buf, numbers_as_printf)
{
	static const uint64_t values[] = {
		0, 1, 9, 10, 15, 16, 255, 4096, 99999, 4294967295u,
		4294967296u, 9223372036854775807u, 9223372036854775808u,
		18446744073709551615u,
	};
	char got[BUF_U64_MAX + 1], want[32];
	struct buf b = { 0 };
	size_t i, n;

	for (i = 0; i < sizeof values / sizeof *values; i++) {
		n = buf_fmt_u64(got, values[i], 10);
		got[n] = '\0';
		snprintf(want, sizeof want, "%" PRIu64, values[i]);
		cr_assert_str_eq(got, want);
		n = buf_fmt_u64(got, values[i], 16);
		got[n] = '\0';
		snprintf(want, sizeof want, "%" PRIx64, values[i]);
		cr_assert_str_eq(got, want);
		b.len = 0;
		buf_add_int(&b, (long long)values[i]);
		snprintf(want, sizeof want, "%lld", (long long)values[i]);
		cr_assert_str_eq(b.data, want);
		b.len = 0;
		buf_add_int(&b, -(long long)(values[i] >> 1));
		snprintf(want, sizeof want, "%lld", -(long long)(values[i] >> 1));
		cr_assert_str_eq(b.data, want);
	}
	buf_free(&b);
}

/*
 * jsonload (the fast path in front of json_loadb) gives what jansson gives
 * for every line it takes, and declines the rest to jansson.
 */
/* The first JSONLOAD_COMMON lines are what clients send: all taken. */
#define JSONLOAD_COMMON 12
static const char *const jsonload_lines[] = {
	"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"addTool\",\"params\":"
	"{\"sessionId\":\"s-0011223344556677\",\"toolUse\":{\"id\":\"t1\","
	"\"name\":\"cat\",\"input\":{\"ping\":1}}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"ping\"}",
	" {\"a\" : [ 1 , -2 , 3.5 , -0.0 , 1e3 , 2E-2 , 4e+1 , true , false ,"
	" null , \"\" , { } , [ ] ] }\r\n",
	"{\"s\":\"tab\\tnl\\nq\\\"bs\\\\sl\\/b\\bf\\fr\\r\"}",
	"{\"u\":\"\\u0041\\u00e9\\u6f22\\u0000z\\u007f\\u0080\\u07ff\\u0800\"}",
	"{\"raw\":\"é 漢 😀 \x7f\"}",
	"{\"a\":1,\"a\":2,\"b\":3,\"a\":[4]}",
	"{\"n\":[0,-0,123456789012345678,-123456789012345678]}",
	"[1,[2,[3,[4,{\"x\":{\"y\":[]}}]]]]",
	"\"top\"", "42", "-7", "0.25", "true", "false", "null", "[]", "{}",
	"{\"k\\u0041\":1}", "{\"k\\u0000\":1}", "{\"\\u0000\":1}",
	"{\"e\":\"\\ud83d\\ude00\"}", "{\"e\":\"\\ud83d\"}", "{\"e\":\"\\ude00\"}",
	"{\"big\":1234567890123456789}", "{\"big\":9223372036854775807}",
	"{\"big\":-9223372036854775808}", "{\"big\":9223372036854775808}",
	"{\"r\":1e400}", "{\"r\":-1e400}", "{\"r\":1e-400}", "{\"r\":1.5e308}",
	"{\"r\":0.1000000000000000055511151231257827}",
	"{\"bad\":01}", "{\"bad\":-}", "{\"bad\":1.}", "{\"bad\":.5}",
	"{\"bad\":1e}", "{\"bad\":+1}", "{\"bad\":tru}", "{\"bad\":nulll}",
	"{\"bad\":\"\\x\"}", "{\"bad\":\"\\u12\"}", "{\"bad\":\"\\u12g4\"}",
	"{\"bad\":\"a\tb\"}", "{\"bad\":\"\xff\"}", "{\"bad\":\"\xc3\"}",
	"{\"bad\":\"\xed\xa0\x80\"}", "{\"bad\":\"\xc0\xaf\"}", "{\"\xff\":1}",
	"{\"bad\":1,}", "{\"bad\":[1,]}", "{,}", "{\"a\"}", "{\"a\":}",
	"{\"a\" 1}", "{1:2}", "[1 2]", "{\"a\":1}x", "{\"a\":1} {}", "",
	"   ", "\xef\xbb\xbf{}", "{\"a\":1", "[", "\"open", "nul",
	"{\"a\":\"b\"}\0", "\0", "{\"a\"\0:1}",
};

static void
jsonload_check(const char *text, size_t len)
{
	json_t *fast = jsonload(text, len), *want;
	json_error_t jerr;
	char *a, *b;

	if (fast == NULL)
		return;
	want = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	cr_assert(want != NULL, "taken, jansson refuses (%s): %.*s", jerr.text,
	    (int)len, text);
	cr_assert(json_equal(fast, want), "differs: %.*s", (int)len, text);
	a = json_dumps(fast, JSON_COMPACT | JSON_ENCODE_ANY);
	b = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
	cr_assert_str_eq(a, b, "order differs: %.*s", (int)len, text);
	free(a);
	free(b);
	json_decref(fast);
	json_decref(want);
}

Test(jsonload, as_jansson)
{
	size_t i;

	for (i = 0; i < sizeof jsonload_lines / sizeof *jsonload_lines; i++)
		jsonload_check(jsonload_lines[i], strlen(jsonload_lines[i]));
	/* With the NUL bytes the literals above end in or hold. */
	jsonload_check("{\"a\":\"b\"}\0", 10);
	jsonload_check("\0", 1);
	jsonload_check("{\"a\"\0:1}", 8);
	jsonload_check("{\"a\":1}\0", 8);
}

/* What clients send is taken: the fast path is the path. */
Test(jsonload, takes_the_common_lines)
{
	size_t i;
	json_t *v;

	for (i = 0; i < JSONLOAD_COMMON; i++) {
		v = jsonload(jsonload_lines[i], strlen(jsonload_lines[i]));
		cr_assert(v != NULL, "declined: %s", jsonload_lines[i]);
		json_decref(v);
	}
}

/* Whatever it is not sure of is jansson's: errors keep jansson's words. */
Test(jsonload, declines_what_jansson_decides)
{
	static const char *const left[] = {
		"{\"k\\u0041\":1}", "{\"e\":\"\\ud83d\\ude00\"}",
		"{\"big\":1234567890123456789}", "{\"r\":1e400}", "{\"bad\":01}",
		"{\"bad\":\"\xff\"}", "{\"a\":1}x", "", "{\"bad\":\"a\tb\"}",
	};
	size_t i;

	for (i = 0; i < sizeof left / sizeof *left; i++)
		cr_assert_null(jsonload(left[i], strlen(left[i])), "taken: %s",
		    left[i]);
	/* Deeper than its limit: declined, then jansson's value. */
	{
		char deep[2 * 100 + 1];

		memset(deep, '[', 100);
		memset(deep + 100, ']', 100);
		cr_assert_null(jsonload(deep, 200));
		jsonload_check(deep, 200);
	}
}

/* Every line above with bytes changed, dropped and doubled, seeded. */
Test(jsonload, mutations_as_jansson)
{
	static const char alphabet[] = "{}[]\":,\\ut0-1e.E+ \xc3\xa9\xff\x01";
	char buf[512];
	unsigned seed = 12345;
	size_t i, k, len, at;
	int round;

	for (round = 0; round < 20000; round++) {
		i = (size_t)round % (sizeof jsonload_lines /
		    sizeof *jsonload_lines);
		len = strlen(jsonload_lines[i]);
		if (len == 0 || len > sizeof buf / 2)
			continue;
		memcpy(buf, jsonload_lines[i], len);
		for (k = 0; k < 3; k++) {
			seed = seed * 1103515245u + 12345u;
			at = (seed >> 8) % len;
			switch ((seed >> 4) % 3) {
			case 0:
				buf[at] = alphabet[(seed >> 16) %
				    (sizeof alphabet - 1)];
				break;
			case 1:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			default:
				memmove(buf + at + 1, buf + at, len - at);
				len++;
				break;
			}
			if (len == 0)
				break;
		}
		jsonload_check(buf, len);
	}
}
