/*
 * The proxy's parsers against a hostile tool: HTTP request heads and
 * SOCKS5 byte strings, each with what the proxy must make of it. The
 * target decides where the daemon connects, the rewritten head is what
 * the allowed server gets: a byte mistaken here is a way around the
 * policy, or a request the server reads otherwise than the proxy did.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/proxy_parse.h"
#include "utf8.h"

/* A literal with its length: the inputs hold NUL bytes. */
#define S(s) s, sizeof(s) - 1
#define MORE PROXY_PARSE_MORE
#define DONE PROXY_PARSE_DONE
#define ERROR PROXY_PARSE_ERROR

struct http_row {
	const char *in;
	size_t len;
	enum proxy_parse want;
	int status;          /* ERROR: the status; DONE: 1 for CONNECT */
	const char *host;    /* DONE: the target */
	uint16_t port;
	const char *head;    /* DONE, not CONNECT: the head sent upstream */
};

static const struct http_row http_rows[] = {
	/* CONNECT host:port */
	{ S("CONNECT www.test:443 HTTP/1.1\r\nHost: www.test:443\r\n\r\n"),
	    DONE, 1, "www.test", 443, NULL },
	{ S("CONNECT www.test:443 HTTP/1.0\r\n\r\n"), DONE, 1, "www.test",
	    443, NULL },
	{ S("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n"), DONE, 1,
	    "2001:db8::1", 443, NULL },
	{ S("CONNECT [::ffff:127.0.0.1]:80 HTTP/1.1\r\n\r\n"), DONE, 1,
	    "::ffff:127.0.0.1", 80, NULL },
	{ S("CONNECT www.test:1 HTTP/1.1\r\n\r\n"), DONE, 1, "www.test", 1,
	    NULL },
	{ S("CONNECT www.test:65535 HTTP/1.1\r\n\r\n"), DONE, 1, "www.test",
	    65535, NULL },
	{ S("CONNECT www.test HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT [::1] HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT www.test: HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT www.test:0 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT www.test:65536 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test:100000 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test:44a HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test:+443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test:-1 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test:443:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT :443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT []:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT [::1:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("CONNECT [::1]x:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	/* Brackets hold an IPv6 literal, never a name. */
	{ S("CONNECT [evil.test]:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT evil]test:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT http://www.test:443 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL,
	    0, NULL },
	{ S("CONNECT www.test:443 HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n"), ERROR,
	    400, NULL, 0, NULL },

	/* Absolute form: the URL decides, never a Host header. */
	{ S("GET http://www.test/hello HTTP/1.1\r\nHost: evil.test\r\n"
	    "User-Agent: t\r\nAccept: */*\r\n\r\n"), DONE, 0, "www.test", 80,
	    "GET /hello HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n"
	    "User-Agent: t\r\nAccept: */*\r\n\r\n" },
	/* Headers a Connection header names are hop-by-hop: dropped. */
	{ S("GET http://www.test/ HTTP/1.1\r\nConnection: X-Secret ,\tx-b\r\n"
	    "X-Secret: 1\r\nX-Kept: 2\r\nconnection: close\r\nX-B: 3\r\n"
	    "X-Secrets: 4\r\n\r\n"), DONE, 0, "www.test", 80,
	    "GET / HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n"
	    "X-Kept: 2\r\nX-Secrets: 4\r\n\r\n" },
	{ S("GET http://www.test/ HTTP/1.1\r\nConnection: ,, ,\r\n\r\n"),
	    DONE, 0, "www.test", 80,
	    "GET / HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n\r\n" },
	/* Each option costs a comparison per header: a bounded list. */
	{ S("GET http://www.test/ HTTP/1.1\r\nConnection: a,b,c,d,e,f,g,h\r\n"
	    "Connection: i,j,k,l,m,n,o,p\r\n\r\n"), DONE, 0, "www.test", 80,
	    "GET / HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://www.test/ HTTP/1.1\r\nConnection: a,b,c,d,e,f,g,h\r\n"
	    "Connection: i,j,k,l,m,n,o,p,q\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://allowed.test@evil.test/ HTTP/1.1\r\n\r\n"), DONE, 0,
	    "evil.test", 80,
	    "GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://u:p@evil.test:8080/x HTTP/1.1\r\n\r\n"), DONE, 0,
	    "evil.test", 8080, "GET /x HTTP/1.1\r\nHost: evil.test:8080\r\n"
	    "Connection: close\r\n\r\n" },
	{ S("GET http://a@allowed.test@evil.test/ HTTP/1.1\r\n\r\n"), DONE, 0,
	    "evil.test", 80,
	    "GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://evil.test#@allowed.test/ HTTP/1.1\r\n\r\n"), DONE, 0,
	    "evil.test", 80,
	    "GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://evil.test?@allowed.test/ HTTP/1.1\r\n\r\n"), DONE, 0,
	    "evil.test", 80, "GET /?@allowed.test/ HTTP/1.1\r\nHost: "
	    "evil.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://[::1]:80/ HTTP/1.1\r\n\r\n"), DONE, 0, "::1", 80,
	    "GET / HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n" },
	{ S("GET http://[::1]/ HTTP/1.1\r\n\r\n"), DONE, 0, "::1", 80,
	    "GET / HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n" },
	{ S("GET http://www.test/p?q=1&r=%20#frag HTTP/1.1\r\n\r\n"), DONE, 0,
	    "www.test", 80, "GET /p?q=1&r=%20 HTTP/1.1\r\nHost: www.test\r\n"
	    "Connection: close\r\n\r\n" },
	{ S("GET http://www.test HTTP/1.1\r\n\r\n"), DONE, 0, "www.test", 80,
	    "GET / HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n\r\n" },
	{ S("GET http://www.test?x=1 HTTP/1.1\r\n\r\n"), DONE, 0, "www.test",
	    80, "GET /?x=1 HTTP/1.1\r\nHost: www.test\r\nConnection: close"
	    "\r\n\r\n" },
	{ S("GET http://www.test#f HTTP/1.1\r\n\r\n"), DONE, 0, "www.test", 80,
	    "GET / HTTP/1.1\r\nHost: www.test\r\nConnection: close\r\n\r\n" },
	{ S("HEAD HTTP://WWW.TEST:81/ HTTP/1.0\r\n\r\n"), DONE, 0, "WWW.TEST",
	    81, "HEAD / HTTP/1.0\r\nHost: WWW.TEST:81\r\nConnection: close"
	    "\r\n\r\n" },
	{ S("GET http://\xc3\xa9t\xc3\xa9.test/ HTTP/1.1\r\n\r\n"), DONE, 0,
	    "\xc3\xa9t\xc3\xa9.test", 80, "GET / HTTP/1.1\r\nHost: "
	    "\xc3\xa9t\xc3\xa9.test\r\nConnection: close\r\n\r\n" },
	/* Hop-by-hop and Proxy-* headers dropped, the rest kept in order. */
	{ S("POST http://www.test/f HTTP/1.1\r\nConnection: keep-alive\r\n"
	    "X-A: 1\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: "
	    "Basic eDp5\r\nKeep-Alive: 5\r\nCookie: c=1\r\nTE: trailers\r\n"
	    "Upgrade: h2c\r\nproxy-whatever: 1\r\nHOST: evil.test\r\n"
	    "X-Empty:\r\nContent-Length: 3\r\nX-A: 2\r\n\r\nabc"), DONE, 0,
	    "www.test", 80, "POST /f HTTP/1.1\r\nHost: www.test\r\n"
	    "Connection: close\r\nX-A: 1\r\nCookie: c=1\r\nX-Empty:\r\n"
	    "Content-Length: 3\r\nX-A: 2\r\n\r\n" },
	/* Bare \n line ends: the head goes out with \r\n. */
	{ S("GET http://www.test/ HTTP/1.1\nX-A: 1\nHost: evil.test\n\n"),
	    DONE, 0, "www.test", 80, "GET / HTTP/1.1\r\nHost: www.test\r\n"
	    "Connection: close\r\nX-A: 1\r\n\r\n" },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: \xff\xfe obs-text\t!"
	    "\r\n\r\n"), DONE, 0, "www.test", 80, "GET / HTTP/1.1\r\nHost: "
	    "www.test\r\nConnection: close\r\nX-A: \xff\xfe obs-text\t!\r\n"
	    "\r\n" },

	/* Not an absolute http:// URL. */
	{ S("GET https://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 501, NULL, 0,
	    NULL },
	{ S("GET /hello HTTP/1.1\r\nHost: www.test\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("OPTIONS * HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET ftp://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET www.test:80 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http:// HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http:///x HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://@/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://evil.test@/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test:0/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test:/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://[www.test]/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },

	/* Malformed request lines; HTTP/0.9 and 2.0. */
	{ S("GET http://www.test/\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/2.0\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test/ HTTP/1.10\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test/ http/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET  http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S(" GET http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test/ HTTP/1.1 \r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test/ x HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("G(T http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET\rX http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.test/\rHost:evil.test HTTP/1.1\r\n\r\n"), ERROR,
	    400, NULL, 0, NULL },
	{ S("GET http://www.test/\tx HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("\r\nGET http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("\n"), ERROR, 400, NULL, 0, NULL },

	/* Header lines one reader could take otherwise than another. */
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n"), ERROR,
	    400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: 1\r\n\tHost: evil.test\r\n"
	    "\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\n Host: evil.test\r\n\r\n"),
	    ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nHost : evil.test\r\n\r\n"),
	    ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nProxy-Authorization\t: x\r\n"
	    "\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: 1\rHost: evil.test\r\n"
	    "\r\n"), ERROR, 400, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: 1\r\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nno colon\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\n: no name\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX\x01: 1\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: \x7f\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },

	/* NUL bytes, anywhere. */
	{ S("GET http://www.test/\0 HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GET http://www.te\0st/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("GE\0T http://www.test/ HTTP/1.1\r\n\r\n"), ERROR, 400, NULL, 0,
	    NULL },
	{ S("CONNECT www.test\0.evil.test:443 HTTP/1.1\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-A: a\0b\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\nX-\0: 1\r\n\r\n"), ERROR, 400,
	    NULL, 0, NULL },
	{ S("\0\0\0\0\r\n\r\n"), ERROR, 400, NULL, 0, NULL },

	/* Incomplete. */
	{ S(""), MORE, 0, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\n"), MORE, 0, NULL, 0, NULL },
	{ S("GET http://www.test/ HTTP/1.1\r\n\r"), MORE, 0, NULL, 0, NULL },
	{ S("\0\0\0"), MORE, 0, NULL, 0, NULL },
};

/* Valid heads, each cut at every byte. */
static const struct {
	const char *in;
	size_t len;
} whole[] = {
	{ S("CONNECT www.test:443 HTTP/1.1\r\nHost: www.test:443\r\n"
	    "User-Agent: curl\r\nProxy-Connection: Keep-Alive\r\n\r\n") },
	{ S("GET http://u@www.test:8080/a?b#c HTTP/1.1\r\nHost: x\r\n"
	    "Accept: */*\r\n\r\n") },
	{ S("GET http://[::1]/ HTTP/1.0\nX-A: 1\n\n") },
};

static void	check_err(const char *, const char *, size_t);
static char	*head_of(size_t, bool);

/* An error says what was wrong, in valid UTF-8 (it goes into JSON). */
static void
check_err(const char *err, const char *in, size_t len)
{
	cr_expect_neq(err[0], '\0', "no error message for %.*s", (int)len, in);
	cr_expect(utf8_valid(err, strlen(err)), "the error for %.*s is not "
	    "valid UTF-8: %s", (int)len, in, err);
}

Test(proxy_parse, http_table)
{
	struct proxy_http out;
	char err[256];
	size_t i;
	int status;

	for (i = 0; i < sizeof http_rows / sizeof http_rows[0]; i++) {
		const struct http_row *r = &http_rows[i];
		enum proxy_parse got;

		err[0] = '\0';
		got = proxy_parse_http(r->in, r->len, &out, &status, err,
		    sizeof err);
		cr_expect_eq(got, r->want, "row %zu %.*s: got %d, want %d (%s)",
		    i, (int)r->len, r->in, got, r->want, err);
		if (got != r->want) {
			free(out.head);
			continue;
		}
		if (got == ERROR) {
			cr_expect_eq(status, r->status, "row %zu %.*s: status %d, "
			    "want %d", i, (int)r->len, r->in, status, r->status);
			check_err(err, r->in, r->len);
		}
		if (got != DONE)
			continue;
		cr_expect_eq(out.connect, r->status == 1, "row %zu: CONNECT",
		    i);
		cr_expect_str_eq(out.target.host, r->host, "row %zu: host", i);
		cr_expect_eq(out.target.port, r->port, "row %zu: port %u, want "
		    "%u", i, out.target.port, r->port);
		/* The head ends at its empty line: what follows is a body. */
		cr_expect_leq(out.consumed, r->len, "row %zu: consumed", i);
		cr_expect(out.consumed >= 2 && r->in[out.consumed - 1] == '\n' &&
		    (r->in[out.consumed - 2] == '\n' ||
		    (r->in[out.consumed - 2] == '\r' &&
		    r->in[out.consumed - 3] == '\n')), "row %zu: consumed %zu "
		    "does not end at the empty line", i, out.consumed);
		if (r->head == NULL)
			cr_expect_null(out.head, "row %zu: a CONNECT has no head",
			    i);
		else {
			cr_expect_not_null(out.head, "row %zu: no head", i);
			if (out.head != NULL) {
				cr_expect_eq(out.head_len, strlen(r->head),
				    "row %zu: head %.*s", i, (int)out.head_len,
				    out.head);
				cr_expect_str_eq(out.head, r->head, "row %zu", i);
			}
		}
		free(out.head);
	}
}

/* Every cut of a valid head waits for more; bytes after it are not its. */
Test(proxy_parse, http_every_prefix)
{
	static const char after[] = "\x16\x03\x01 a body\r\n\r\n";
	struct proxy_http out, full;
	char err[256], *more;
	size_t i, k;
	int status;

	for (i = 0; i < sizeof whole / sizeof whole[0]; i++) {
		for (k = 0; k < whole[i].len; k++) {
			cr_assert_eq(proxy_parse_http(whole[i].in, k, &out,
			    &status, err, sizeof err), MORE, "head %zu cut at "
			    "%zu: %.*s (%s)", i, k, (int)k, whole[i].in, err);
		}
		cr_assert_eq(proxy_parse_http(whole[i].in, whole[i].len, &full,
		    &status, err, sizeof err), DONE, "head %zu: %s", i, err);
		cr_expect_eq(full.consumed, whole[i].len, "head %zu", i);
		more = malloc(whole[i].len + sizeof after);
		memcpy(more, whole[i].in, whole[i].len);
		memcpy(more + whole[i].len, after, sizeof after);
		cr_assert_eq(proxy_parse_http(more, whole[i].len + sizeof after,
		    &out,
		    &status, err, sizeof err), DONE, "head %zu and more", i);
		cr_expect_eq(out.consumed, full.consumed, "head %zu", i);
		cr_expect_eq(out.head_len, full.head_len, "head %zu", i);
		if (full.head != NULL)
			cr_expect(memcmp(out.head, full.head, full.head_len) ==
			    0, "head %zu: the same head with bytes after it",
			    i);
		free(out.head);
		free(full.head);
		free(more);
	}
}

/*
 * An absolute-form head of exactly n bytes (one X-Pad header filling it),
 * its empty line included when complete.
 */
static char *
head_of(size_t n, bool complete)
{
	static const char start[] = "GET http://www.test/ HTTP/1.1\r\nX-Pad: ";
	char *h = malloc(n + 1);

	memcpy(h, start, sizeof start - 1);
	memset(h + sizeof start - 1, 'p', n - (sizeof start - 1));
	if (complete)
		memcpy(h + n - 4, "\r\n\r\n", 4);
	h[n] = '\0';
	return h;
}

Test(proxy_parse, http_head_bound)
{
	struct proxy_http out;
	char err[256], *h;
	int status;

	h = head_of(PROXY_HEAD_MAX, true);
	cr_expect_eq(proxy_parse_http(h, PROXY_HEAD_MAX, &out, &status, err,
	    sizeof err), DONE, "a head of exactly %d bytes: %s",
	    PROXY_HEAD_MAX, err);
	cr_expect_eq(out.consumed, PROXY_HEAD_MAX);
	cr_expect_eq(out.head_len, PROXY_HEAD_MAX - 31 + 51);
	free(out.head);
	free(h);

	h = head_of(PROXY_HEAD_MAX + 1, true);
	cr_expect_eq(proxy_parse_http(h, PROXY_HEAD_MAX + 1, &out, &status,
	    err, sizeof err), ERROR, "a head of %d bytes", PROXY_HEAD_MAX + 1);
	cr_expect_eq(status, 431);
	check_err(err, h, 40);
	free(h);

	/* Not ended: MORE up to the bound, 431 from it on. */
	h = head_of(PROXY_HEAD_MAX + 100, false);
	cr_expect_eq(proxy_parse_http(h, PROXY_HEAD_MAX - 1, &out, &status,
	    err, sizeof err), MORE);
	cr_expect_eq(proxy_parse_http(h, PROXY_HEAD_MAX, &out, &status, err,
	    sizeof err), ERROR);
	cr_expect_eq(status, 431);
	cr_expect_eq(proxy_parse_http(h, PROXY_HEAD_MAX + 100, &out, &status,
	    err, sizeof err), ERROR);
	cr_expect_eq(status, 431);
	free(h);
}

/* Garbage of every byte value: an error, quoted in valid UTF-8. */
Test(proxy_parse, http_garbage)
{
	static const char *const shapes[][2] = { { "", "\r\n\r\n" },
	    { "GET ", " HTTP/1.1\r\n\r\n" },
	    { "GET http://", "/ HTTP/1.1\r\n\r\n" },
	    { "CONNECT ", ":443 HTTP/1.1\r\n\r\n" },
	    { "GET http://www.test/ HTTP/1.1\r\nX-A: 1\r\n", "\r\n\r\n" } };
	struct proxy_http out;
	char err[256], junk[3000], in[3100];
	enum proxy_parse r;
	size_t i, s;
	int status, n;

	/* Bytes 0x80..0xff cut anywhere, no space, no line end. */
	for (i = 0; i < sizeof junk - 1; i++)
		junk[i] = (char)(0x80 + (i * 37) % 128);
	junk[sizeof junk - 1] = '\0';
	for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		n = snprintf(in, sizeof in, "%s%s%s", shapes[s][0], junk,
		    shapes[s][1]);
		cr_assert_lt((size_t)n, sizeof in);
		err[0] = '\0';
		r = proxy_parse_http(in, (size_t)n, &out, &status, err,
		    sizeof err);
		/* A name of UTF-8-ish bytes is the policy's to refuse. */
		cr_expect_eq(r, ERROR, "shape %zu", s);
		if (r == ERROR)
			check_err(err, in, 40);
		free(out.head);
	}
	/* Each byte alone in a header's name, the URL and the method. */
	for (i = 0; i < 256; i++) {
		n = snprintf(in, sizeof in, "G%cT http://www.test/%c HTTP/1.1"
		    "\r\nX%c: 1\r\n\r\n", (int)i ? (int)i : 'E', (int)i ? (int)i :
		    'x', (int)i ? (int)i : '-');
		err[0] = '\0';
		r = proxy_parse_http(in, (size_t)n, &out, &status, err,
		    sizeof err);
		if (r == ERROR)
			check_err(err, in, (size_t)n);
		else
			free(out.head);
	}
}

/* An error message quotes at most 64 bytes, with "..." when it cut. */
Test(proxy_parse, http_error_quote)
{
	struct proxy_http out;
	char err[256], in[200];
	int status, n;

	n = snprintf(in, sizeof in, "CONNECT %s:443 HTTP/1.1\r\n\r\n",
	    "\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12"
	    "\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f\x01");
	cr_assert_eq(proxy_parse_http(in, (size_t)n, &out, &status, err,
	    sizeof err), ERROR);
	cr_expect(strstr(err, "...\"") != NULL, "a cut quote says so: %s",
	    err);
	check_err(err, in, (size_t)n);
}

Test(proxy_parse, socks_greeting)
{
	static const struct {
		const char *in;
		size_t len;
		enum proxy_parse want;
		size_t consumed;
		bool ok;
	} rows[] = {
		{ S("\x05\x01\x00"), DONE, 3, true },
		{ S("\x05\x02\x02\x00"), DONE, 4, true },
		{ S("\x05\x03\x01\x02\x80"), DONE, 5, false },
		{ S("\x05\x01\x02"), DONE, 3, false },
		{ S("\x05\x00"), DONE, 2, false },
		/* A request after it is not the greeting's. */
		{ S("\x05\x01\x00\x05\x01\x00\x01"), DONE, 3, true },
		{ S(""), MORE, 0, false },
		{ S("\x05"), MORE, 0, false },
		{ S("\x05\x02\x00"), MORE, 0, false },
		{ S("\x05\xff"), MORE, 0, false },
		{ S("\x04\x01\x00"), ERROR, 0, false },
		{ S("\x04"), ERROR, 0, false },
		{ S("\x00\x01\x00"), ERROR, 0, false },
	};
	size_t i, used;
	bool ok;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		used = 0;
		ok = !rows[i].ok;
		cr_expect_eq(proxy_parse_socks_greeting((const uint8_t *)
		    rows[i].in, rows[i].len, &used, &ok), rows[i].want,
		    "greeting row %zu", i);
		if (rows[i].want != DONE)
			continue;
		cr_expect_eq(used, rows[i].consumed, "greeting row %zu", i);
		cr_expect_eq(ok, rows[i].ok, "greeting row %zu", i);
	}
}

struct socks_row {
	const char *in;
	size_t len;
	enum proxy_parse want;
	uint8_t reply;       /* ERROR: the SOCKS reply code */
	const char *host;
	uint16_t port;
};

static const struct socks_row socks_rows[] = {
	{ S("\x05\x01\x00\x01\xc6\x12\x00\x0d\x01\xbb"), DONE, 0,
	    "198.18.0.13", 443 },
	{ S("\x05\x01\x00\x04\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01\x00"
	    "\x50"), DONE, 0, "2001:db8:0:0:0:0:0:1", 80 },
	{ S("\x05\x01\x00\x04\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x01\x00"
	    "\x50"), DONE, 0, "0:0:0:0:0:ffff:7f00:1", 80 },
	{ S("\x05\x01\x00\x03\x08www.test\x01\xbb"), DONE, 0, "www.test",
	    443 },
	{ S("\x05\x01\x00\x03\x01x\xff\xff"), DONE, 0, "x", 65535 },
	{ S("\x05\x01\x00\x03\x00\x01\xbb"), ERROR, 1, NULL, 0 },
	{ S("\x05\x01\x00\x03\x09www\0.test\x01\xbb"), ERROR, 1, NULL, 0 },
	{ S("\x05\x01\x00\x03\x08www.test\x00\x00"), ERROR, 1, NULL, 0 },
	{ S("\x05\x01\x00\x01\x7f\0\0\x01\x00\x00"), ERROR, 1, NULL, 0 },
	{ S("\x05\x02\x00\x01\x7f\0\0\x01\x00\x50"), ERROR, 7, NULL, 0 },
	{ S("\x05\x03\x00\x03\x08www.test\x00\x35"), ERROR, 7, NULL, 0 },
	{ S("\x05\x00\x00\x01\x7f\0\0\x01\x00\x50"), ERROR, 7, NULL, 0 },
	{ S("\x05\x01\x00\x02\x7f\0\0\x01\x00\x50"), ERROR, 8, NULL, 0 },
	{ S("\x05\x01\x00\x00\x7f\0\0\x01\x00\x50"), ERROR, 8, NULL, 0 },
	{ S("\x05\x01\x00\xff\x7f"), ERROR, 8, NULL, 0 },
	{ S("\x04\x01\x00\x01\x7f\0\0\x01\x00\x50"), ERROR, 1, NULL, 0 },
	{ S("\x05\x01\x01\x01\x7f\0\0\x01\x00\x50"), ERROR, 1, NULL, 0 },
	{ S("\x05\x01\x00\x01"), MORE, 0, NULL, 0 },
	{ S("\x05\x01\x00\x03\xff"), MORE, 0, NULL, 0 },
};

Test(proxy_parse, socks_request)
{
	struct proxy_target t;
	char err[256];
	size_t i, used;
	uint8_t reply;
	enum proxy_parse got;

	for (i = 0; i < sizeof socks_rows / sizeof socks_rows[0]; i++) {
		const struct socks_row *r = &socks_rows[i];

		err[0] = '\0';
		reply = 0;
		got = proxy_parse_socks_request((const uint8_t *)r->in, r->len,
		    &used, &t, &reply, err, sizeof err);
		cr_expect_eq(got, r->want, "request row %zu: got %d (%s)", i,
		    got, err);
		if (got != r->want)
			continue;
		if (got == ERROR) {
			cr_expect_eq(reply, r->reply, "request row %zu: reply %u, "
			    "want %u", i, reply, r->reply);
			check_err(err, r->in, 0);
		}
		if (got != DONE)
			continue;
		cr_expect_eq(used, r->len, "request row %zu", i);
		cr_expect_str_eq(t.host, r->host, "request row %zu", i);
		cr_expect_eq(t.port, r->port, "request row %zu", i);
	}
}

/* Names of 0, 1, 255 bytes; every cut of every valid request waits. */
Test(proxy_parse, socks_name_lengths_and_prefixes)
{
	uint8_t req[4 + 1 + 255 + 2 + 8];
	struct proxy_target t;
	char err[256];
	size_t i, k, used, len;
	uint8_t reply;

	memcpy(req, "\x05\x01\x00\x03\xff", 5);
	memset(req + 5, 'a', 255);
	req[260] = 0x01;
	req[261] = 0xbb;
	memcpy(req + 262, "trailing", 8);
	cr_assert_eq(proxy_parse_socks_request(req, sizeof req, &used, &t,
	    &reply, err, sizeof err), DONE, "a 255-byte name: %s", err);
	cr_expect_eq(used, 262);
	cr_expect_eq(strlen(t.host), 255);
	cr_expect_eq(t.port, 443);
	for (k = 0; k < 262; k++)
		cr_assert_eq(proxy_parse_socks_request(req, k, &used, &t,
		    &reply, err, sizeof err), MORE, "the 255-byte name's "
		    "request cut at %zu", k);
	for (i = 0; i < sizeof socks_rows / sizeof socks_rows[0]; i++) {
		if (socks_rows[i].want == MORE)
			continue;
		len = socks_rows[i].len;
		/* An unknown address type is known wrong from byte 4 on. */
		if (socks_rows[i].want == ERROR && socks_rows[i].reply == 8)
			len = 4;
		/* A wrong version or RSV is known from byte 5 on. */
		if (socks_rows[i].in[0] != 5 || socks_rows[i].in[2] != 0)
			len = 5 - 1;
		for (k = 0; k < len; k++)
			cr_expect_eq(proxy_parse_socks_request((const uint8_t *)
			    socks_rows[i].in, k, &used, &t, &reply, err,
			    sizeof err), MORE, "request row %zu cut at %zu",
			    i, k);
	}
}
