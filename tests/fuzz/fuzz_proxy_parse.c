/*
 * The proxy's parsers (net/proxy_parse.c) on a hostile tool's bytes. An
 * HTTP head that parses must name a target the daemon can connect to,
 * and its rewritten head must tell the allowed server the same host in
 * plain lines: one Host, no Proxy-* header, CRLF only, no control byte.
 * Whatever parses must wait (MORE) when cut before its end and parse the
 * same with bytes after it; every error is valid UTF-8.
 *   byte 0: 0 and 1 an HTTP head (1: after a header that brings it near
 *           its 16 KiB bound), 2 SOCKS5 (greeting, then request)
 *   byte 1: where to cut, and how long the padding is
 *   rest:   the bytes
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "net/proxy_parse.h"
#include "utf8.h"

static void	fuzz_proxy_http(const char *, size_t, uint8_t);
static void	fuzz_proxy_head(const struct proxy_http *);
static void	fuzz_proxy_socks(const uint8_t *, size_t, uint8_t);
static void	fuzz_proxy_err(const char *);

/* An error says something, in valid UTF-8 (it goes into JSON). */
static void
fuzz_proxy_err(const char *err)
{
	FUZZ_CHECK(err[0] != '\0', "an error without a message");
	FUZZ_CHECK(utf8_valid(err, strlen(err)), "an error not in UTF-8");
}

/*
 * The head sent upstream: CRLF lines without a control byte, origin form,
 * one Host (the second line) naming the target, Connection: close, no
 * Proxy-* header.
 */
static void
fuzz_proxy_head(const struct proxy_http *h)
{
	const char *p = h->head, *end = h->head + h->head_len, *eol;
	char req[PROXY_HOST_MAX + 64], err[256];
	struct proxy_http again;
	size_t line = 0, n, i;
	int status;

	FUZZ_CHECK(h->head != NULL && h->head_len >= 4 &&
	    memcmp(end - 4, "\r\n\r\n", 4) == 0, "a head without its end");
	FUZZ_CHECK(strlen(h->head) == h->head_len, "a NUL in the head");
	for (; p < end - 2; p = eol + 2, line++) {
		eol = strstr(p, "\r\n");
		FUZZ_CHECK(eol != NULL, "a head line without CRLF");
		n = (size_t)(eol - p);
		for (i = 0; i < n; i++)
			FUZZ_CHECK(((unsigned char)p[i] >= 0x20 &&
			    p[i] != 0x7f) || p[i] == '\t',
			    "a control byte in the head");
		if (line == 0) {
			FUZZ_CHECK(memchr(p, ' ', n) != NULL &&
			    ((const char *)memchr(p, ' ', n))[1] == '/',
			    "the request line is not in origin form");
			continue;
		}
		FUZZ_CHECK(line != 2 || strncmp(p, "Connection: close\r\n",
		    19) == 0, "no Connection: close");
		if (line == 1) {
			FUZZ_CHECK(strncmp(p, "Host: ", 6) == 0,
			    "the second line is not Host");
			/* The server's Host names the proxy's target. */
			n -= 6;
			snprintf(req, sizeof req, "CONNECT %.*s%s HTTP/1.1\r\n"
			    "\r\n", (int)n, p + 6, (p[6] == '[' ?
			    memmem(p + 6, n, "]:", 2) != NULL :
			    memchr(p + 6, ':', n) != NULL) ? "" : ":80");
			FUZZ_CHECK(proxy_parse_http(req, strlen(req), &again,
			    &status, err, sizeof err) == PROXY_PARSE_DONE,
			    "Host does not parse as the target");
			FUZZ_CHECK(strcmp(again.target.host, h->target.host) ==
			    0 && again.target.port == h->target.port,
			    "Host names another target");
			continue;
		}
		FUZZ_CHECK(strncasecmp(p, "host:", 5) != 0 &&
		    strncasecmp(p, "proxy-", 6) != 0 &&
		    (line == 2 || strncasecmp(p, "connection:", 11) != 0),
		    "a header that must not go upstream");
		FUZZ_CHECK(memchr(p, ':', n) != NULL && p[0] != ' ' &&
		    p[0] != '\t' && p[0] != ':', "a malformed header upstream");
	}
}

static void
fuzz_proxy_http(const char *buf, size_t len, uint8_t cut)
{
	struct proxy_http out, other;
	char err[256], *more;
	enum proxy_parse r;
	int status = 0;
	size_t k;

	err[0] = '\0';
	r = proxy_parse_http(buf, len, &out, &status, err, sizeof err);
	if (r == PROXY_PARSE_MORE) {
		FUZZ_CHECK(len < PROXY_HEAD_MAX, "MORE past the bound");
		return;
	}
	if (r == PROXY_PARSE_ERROR) {
		fuzz_proxy_err(err);
		FUZZ_CHECK(status == 400 || status == 431 || status == 501,
		    "an unexpected status");
		FUZZ_CHECK(out.head == NULL, "an error with a head");
		return;
	}
	FUZZ_CHECK(out.consumed > 0 && out.consumed <= len &&
	    out.consumed <= PROXY_HEAD_MAX, "consumed out of bounds");
	FUZZ_CHECK(out.target.host[0] != '\0' && out.target.port != 0,
	    "a target without a host or port");
	FUZZ_CHECK(out.connect == (out.head == NULL), "CONNECT with a head, "
	    "or a plain request without one");
	if (!out.connect)
		fuzz_proxy_head(&out);
	/* A cut before the end waits. */
	k = out.consumed - 1 - cut % out.consumed;
	FUZZ_CHECK(proxy_parse_http(buf, k, &other, &status, err,
	    sizeof err) == PROXY_PARSE_MORE, "a cut head did not wait");
	/* Bytes after the head change nothing. */
	more = malloc(out.consumed + 3);
	memcpy(more, buf, out.consumed);
	memcpy(more + out.consumed, "\r\n\0", 3);
	FUZZ_CHECK(proxy_parse_http(more, out.consumed + 3, &other, &status,
	    err, sizeof err) == PROXY_PARSE_DONE && other.consumed ==
	    out.consumed && other.head_len == out.head_len &&
	    strcmp(other.target.host, out.target.host) == 0 &&
	    other.target.port == out.target.port && (out.head == NULL ||
	    memcmp(other.head, out.head, out.head_len) == 0),
	    "bytes after the head changed it");
	free(other.head);
	free(more);
	free(out.head);
}

static void
fuzz_proxy_socks(const uint8_t *buf, size_t len, uint8_t cut)
{
	struct proxy_target t;
	size_t used = 0, k;
	uint8_t reply = 0;
	enum proxy_parse r;
	char err[256];
	bool ok;

	r = proxy_parse_socks_greeting(buf, len, &used, &ok);
	if (r != PROXY_PARSE_DONE)
		return;
	FUZZ_CHECK(used == 2 + (size_t)buf[1] && used <= len,
	    "the greeting's length");
	buf += used;
	len -= used;
	err[0] = '\0';
	r = proxy_parse_socks_request(buf, len, &used, &t, &reply, err,
	    sizeof err);
	if (r == PROXY_PARSE_ERROR) {
		fuzz_proxy_err(err);
		FUZZ_CHECK(reply == 1 || reply == 7 || reply == 8,
		    "an unexpected SOCKS reply");
		return;
	}
	if (r == PROXY_PARSE_MORE)
		return;
	FUZZ_CHECK(used <= len && used >= 8, "the request's length");
	FUZZ_CHECK(t.host[0] != '\0' && strlen(t.host) < sizeof t.host &&
	    t.port != 0, "a target without a host or port");
	k = cut % used;
	FUZZ_CHECK(proxy_parse_socks_request(buf, k, &used, &t, &reply, err,
	    sizeof err) == PROXY_PARSE_MORE, "a cut request did not wait");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char start[] = "GET http://www.test/ HTTP/1.1\r\nX-Pad: ";
	size_t pad;
	char *buf;

	if (size < 2)
		return 0;
	switch (data[0] % 3) {
	case 0:
		/* Its own copy: ASan sees a read past the end. */
		buf = malloc(size - 2 + 1);
		memcpy(buf, data + 2, size - 2);
		fuzz_proxy_http(buf, size - 2, data[1]);
		free(buf);
		break;
	case 1:
		pad = PROXY_HEAD_MAX - 300 + data[1];
		buf = malloc(pad + 2 + size - 2);
		memcpy(buf, start, sizeof start - 1);
		memset(buf + sizeof start - 1, 'p', pad - (sizeof start - 1));
		memcpy(buf + pad, "\r\n", 2);
		memcpy(buf + pad + 2, data + 2, size - 2);
		fuzz_proxy_http(buf, pad + 2 + size - 2, data[1]);
		free(buf);
		break;
	default:
		fuzz_proxy_socks(data + 2, size - 2, data[1]);
		break;
	}
	return 0;
}
