/* HTTP/1.x proxy request heads and SOCKS5 requests, parsed. */
#include "net/proxy_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "util.h"

/*
 * The names a Connection header lists are hop-by-hop too (RFC 9110 7.6.1).
 * A bounded list: each header is compared with each name.
 */
#define PROXY_OPTIONS_MAX 16
struct proxy_options {
	const char *name[PROXY_OPTIONS_MAX];
	size_t len[PROXY_OPTIONS_MAX];
	size_t n;
};

/* Headers the proxy drops: hop-by-hop, and the client's Host. */
static const char *const proxy_dropped[] = {
	"host", "connection", "keep-alive", "te", "upgrade",
};

static bool proxy_authority(const char *, size_t, uint16_t,
    struct proxy_target *, char *, size_t);
static bool proxy_port(const char *, size_t, uint16_t *);
static bool proxy_token(const char *, size_t);
static bool proxy_text(const char *, size_t, bool);
static bool proxy_drop(const char *, size_t);
static bool proxy_options(const char *, size_t, struct proxy_options *);
static bool proxy_optioned(const struct proxy_options *, const char *,
    size_t);
static const char *proxy_eol(const char *, const char *);
static const char *proxy_line(const char **, const char *, size_t *);
static void proxy_quote(char *, size_t, const char *, const char *,
    const char *, size_t);
static enum proxy_parse proxy_too_long(int *, char *, size_t);

/*
 * The header line at *hp (its length less its line end in *n) and *hp
 * past it; NULL at the empty line that ends the head, or at end.
 */
static const char *
proxy_line(const char **hp, const char *end, size_t *n)
{
	const char *line = *hp, *eol;

	if (line >= end || (eol = proxy_eol(line, end)) == NULL)
		return NULL;
	*n = (size_t)(eol - line);
	if (*n > 0 && line[*n - 1] == '\r')
		--*n;
	*hp = eol + 1;
	return *n > 0 ? line : NULL;
}

/* The end of the line at p (its '\n'), or NULL before end. */
static const char *
proxy_eol(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return nl;
}

/* A message quoting at most 64 bytes of s (n long), valid UTF-8. */
static void
proxy_quote(char *err, size_t errlen, const char *before, const char *after,
    const char *s, size_t n)
{
	char q[80];
	size_t i, o = 0;

	for (i = 0; i < n && i < 64 && o + 5 < sizeof q; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			q[o++] = (char)ch;
		else
			o += (size_t)snprintf(q + o, sizeof q - o, "\\x%02x", ch);
	}
	q[o] = '\0';
	snprintf(err, errlen, "%s\"%s%s\"%s", before, q, i < n ? "..." : "",
	    after);
}

static enum proxy_parse
proxy_too_long(int *status, char *err, size_t errlen)
{
	*status = 431;
	snprintf(err, errlen, "the request head is longer than %d bytes",
	    PROXY_HEAD_MAX);
	return PROXY_PARSE_ERROR;
}

/* RFC 9110's token: a method, a header's name. */
static bool
proxy_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') ||
		    strchr("!#$%&'*+-.^_`|~", s[i]) != NULL) || s[i] == '\0')
			return false;
	return true;
}

/*
 * No control byte (a CR or NUL one reader takes for a line's end and
 * another does not); blanks where space says so (a header's value).
 */
static bool
proxy_text(const char *s, size_t n, bool space)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if ((ch == ' ' || ch == '\t') ? !space : ch < 0x20 || ch == 0x7f)
			return false;
	}
	return true;
}

/* A header never sent upstream: hop-by-hop, and Proxy-*. */
static bool
proxy_drop(const char *name, size_t n)
{
	size_t i;

	if (n >= 6 && strncasecmp(name, "proxy-", 6) == 0)
		return true;
	for (i = 0; i < nitems(proxy_dropped); i++)
		if (strlen(proxy_dropped[i]) == n &&
		    strncasecmp(name, proxy_dropped[i], n) == 0)
			return true;
	return false;
}

/* Add a Connection value's comma-separated names; false past the bound. */
static bool
proxy_options(const char *v, size_t n, struct proxy_options *o)
{
	const char *end = v + n, *comma;
	size_t len;

	for (; v < end; v = comma + 1) {
		if ((comma = memchr(v, ',', (size_t)(end - v))) == NULL)
			comma = end;
		while (v < comma && (*v == ' ' || *v == '\t'))
			v++;
		for (len = (size_t)(comma - v); len > 0 && (v[len - 1] == ' ' ||
		    v[len - 1] == '\t'); len--)
			;
		if (len == 0)
			continue;
		if (o->n == PROXY_OPTIONS_MAX)
			return false;
		o->name[o->n] = v;
		o->len[o->n++] = len;
	}
	return true;
}

static bool
proxy_optioned(const struct proxy_options *o, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		if (o->len[i] == n && strncasecmp(o->name[i], name, n) == 0)
			return true;
	return false;
}

static bool
proxy_port(const char *s, size_t n, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

/*
 * host[:port] or [v6][:port] (n bytes at s, userinfo already gone); dflt
 * 0: the port must be given. Brackets hold an IPv6 literal, nothing else.
 */
static bool
proxy_authority(const char *s, size_t n, uint16_t dflt,
    struct proxy_target *t, char *err, size_t errlen)
{
	const char *host = s, *colon = NULL, *close;
	size_t hlen = n;

	if (n > 0 && s[0] == '[') {
		if ((close = memchr(s, ']', n)) == NULL)
			goto bad;
		host = s + 1;
		hlen = (size_t)(close - host);
		if (memchr(host, ':', hlen) == NULL)
			goto bad;
		if (close + 1 < s + n) {
			if (close[1] != ':')
				goto bad;
			colon = close + 1;
		}
	} else if ((colon = memchr(s, ':', n)) != NULL)
		hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen >= sizeof t->host || memchr(host, '\0', hlen) ||
	    memchr(host, '[', hlen) || memchr(host, ']', hlen))
		goto bad;
	if (colon != NULL) {
		if (!proxy_port(colon + 1, (size_t)(s + n - colon - 1),
		    &t->port))
			goto bad;
	} else if ((t->port = dflt) == 0)
		goto bad;
	memcpy(t->host, host, hlen);
	t->host[hlen] = '\0';
	return true;
bad:
	proxy_quote(err, errlen, "not a host and port: ", "", s, n);
	return false;
}

enum proxy_parse
proxy_parse_http(const char *buf, size_t len, struct proxy_http *out,
    int *status, char *err, size_t errlen)
{
	const char *end = buf + len, *p, *eol, *sp1, *sp2, *url, *auth, *at,
	    *path, *frag, *colon, *hp;
	size_t n, mlen, auth_len;
	struct buf head = { 0 };
	struct proxy_options opts = { .n = 0 };

	memset(out, 0, sizeof *out);
	*status = 400;
	/* The head ends at the first empty line. */
	for (p = buf; (eol = proxy_eol(p, end)) != NULL; p = eol + 1)
		if (eol == p || (eol == p + 1 && *p == '\r'))
			break;
	if (eol == NULL)
		return len < PROXY_HEAD_MAX ? PROXY_PARSE_MORE :
		    proxy_too_long(status, err, errlen);
	out->consumed = (size_t)(eol + 1 - buf);
	if (out->consumed > PROXY_HEAD_MAX)
		return proxy_too_long(status, err, errlen);

	/* METHOD SP TARGET SP HTTP/1.x */
	eol = proxy_eol(buf, end);
	n = (size_t)(eol - buf);
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	sp1 = memchr(buf, ' ', n);
	sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(buf + n - sp1 -
	    1)) : NULL;
	if (sp1 == NULL || sp2 == NULL || !proxy_token(buf,
	    (size_t)(sp1 - buf)) || sp2 == sp1 + 1 ||
	    !proxy_text(sp1 + 1, (size_t)(sp2 - sp1 - 1), false) ||
	    (size_t)(buf + n - sp2 - 1) != 8 ||
	    (strncmp(sp2 + 1, "HTTP/1.1", 8) != 0 &&
	    strncmp(sp2 + 1, "HTTP/1.0", 8) != 0)) {
		proxy_quote(err, errlen, "not an HTTP/1.x request line: ", "",
		    buf, n);
		return PROXY_PARSE_ERROR;
	}
	mlen = (size_t)(sp1 - buf);
	url = sp1 + 1;
	/* Every header line well formed, kept or not. */
	for (hp = eol + 1; (p = proxy_line(&hp, buf + out->consumed, &n)) !=
	    NULL;) {
		/*
		 * A folded line, or blanks before the colon, hide a header
		 * from one reader and not another.
		 */
		if ((colon = memchr(p, ':', n)) == NULL ||
		    !proxy_token(p, (size_t)(colon - p)) ||
		    !proxy_text(colon + 1, (size_t)(p + n - colon - 1), true)) {
			proxy_quote(err, errlen, "a malformed header line: ",
			    "", p, n);
			return PROXY_PARSE_ERROR;
		}
		if (colon - p == 10 && strncasecmp(p, "connection", 10) == 0 &&
		    !proxy_options(colon + 1, (size_t)(p + n - colon - 1),
		    &opts)) {
			snprintf(err, errlen, "more than %d Connection options",
			    PROXY_OPTIONS_MAX);
			return PROXY_PARSE_ERROR;
		}
	}
	if (mlen == 7 && memcmp(buf, "CONNECT", 7) == 0) {
		out->connect = true;
		return proxy_authority(url, (size_t)(sp2 - url), 0,
		    &out->target, err, errlen) ? PROXY_PARSE_DONE :
		    PROXY_PARSE_ERROR;
	}
	if ((size_t)(sp2 - url) < 7 || strncasecmp(url, "http://", 7) != 0) {
		if ((size_t)(sp2 - url) >= 8 &&
		    strncasecmp(url, "https://", 8) == 0) {
			*status = 501;
			snprintf(err, errlen, "https:// URLs go through "
			    "CONNECT host:443, not as a plain request");
		} else
			proxy_quote(err, errlen, "this is a proxy: a request "
			    "names an absolute http:// URL, or CONNECT "
			    "host:port; not ", "", url, (size_t)(sp2 - url));
		return PROXY_PARSE_ERROR;
	}
	/* http://[userinfo@]authority[/path][?query][#fragment] */
	auth = url + 7;
	for (path = auth; path < sp2 && *path != '/' && *path != '?' &&
	    *path != '#'; path++)
		;
	/* The last '@' ends userinfo. */
	at = NULL;
	for (p = auth; p < path; p++)
		if (*p == '@')
			at = p;
	if (at != NULL)
		auth = at + 1;
	auth_len = (size_t)(path - auth);
	if (!proxy_authority(auth, auth_len, 80, &out->target, err, errlen))
		return PROXY_PARSE_ERROR;
	/* A fragment is the client's own: never sent. */
	if ((frag = memchr(path, '#', (size_t)(sp2 - path))) == NULL)
		frag = sp2;

	/* The request line in origin form, then the headers kept. */
	buf_add(&head, buf, mlen);
	buf_add(&head, " ", 1);
	if (path == frag || *path != '/')
		buf_add(&head, "/", 1);
	buf_add(&head, path, (size_t)(frag - path));
	buf_add(&head, sp2, 9);
	buf_add(&head, "\r\nHost: ", 8);
	buf_add(&head, auth, auth_len);
	buf_add(&head, "\r\nConnection: close\r\n", 21);
	for (hp = proxy_eol(buf, end) + 1; (p = proxy_line(&hp, buf +
	    out->consumed, &n)) != NULL;) {
		colon = memchr(p, ':', n);
		if (!proxy_drop(p, (size_t)(colon - p)) &&
		    !proxy_optioned(&opts, p, (size_t)(colon - p))) {
			buf_add(&head, p, n);
			buf_add(&head, "\r\n", 2);
		}
	}
	buf_add(&head, "\r\n", 2);
	out->head_len = head.len;
	out->head = head.data;
	return PROXY_PARSE_DONE;
}

enum proxy_parse
proxy_parse_socks_greeting(const uint8_t *buf, size_t len, size_t *consumed,
    bool *ok)
{
	size_t i;

	if (len < 2 || len < 2 + (size_t)buf[1])
		return len > 0 && buf[0] != 5 ? PROXY_PARSE_ERROR :
		    PROXY_PARSE_MORE;
	if (buf[0] != 5)
		return PROXY_PARSE_ERROR;
	*ok = false;
	for (i = 0; i < buf[1]; i++)
		*ok = *ok || buf[2 + i] == 0;
	*consumed = 2 + (size_t)buf[1];
	return PROXY_PARSE_DONE;
}

enum proxy_parse
proxy_parse_socks_request(const uint8_t *buf, size_t len, size_t *consumed,
    struct proxy_target *t, uint8_t *reply, char *err, size_t errlen)
{
	size_t need, alen;

	*reply = 1;
	if (len < 5)
		return PROXY_PARSE_MORE;
	if (buf[0] != 5 || buf[2] != 0) {
		snprintf(err, errlen, "not a SOCKS5 request");
		return PROXY_PARSE_ERROR;
	}
	switch (buf[3]) {
	case 1:
		alen = 4;
		break;
	case 3:
		alen = 1 + (size_t)buf[4];
		break;
	case 4:
		alen = 16;
		break;
	default:
		*reply = 8;
		snprintf(err, errlen, "SOCKS5 address type %u is not one of "
		    "IPv4 (1), a name (3), IPv6 (4)", buf[3]);
		return PROXY_PARSE_ERROR;
	}
	need = 4 + alen + 2;
	if (len < need)
		return PROXY_PARSE_MORE;
	if (buf[1] != 1) {
		*reply = 7;
		snprintf(err, errlen, "SOCKS5 command %u: only CONNECT (1) is "
		    "served", buf[1]);
		return PROXY_PARSE_ERROR;
	}
	if (buf[3] == 1)
		snprintf(t->host, sizeof t->host, "%u.%u.%u.%u", buf[4],
		    buf[5], buf[6], buf[7]);
	else if (buf[3] == 4)
		snprintf(t->host, sizeof t->host, "%x:%x:%x:%x:%x:%x:%x:%x",
		    buf[4] << 8 | buf[5], buf[6] << 8 | buf[7],
		    buf[8] << 8 | buf[9], buf[10] << 8 | buf[11],
		    buf[12] << 8 | buf[13], buf[14] << 8 | buf[15],
		    buf[16] << 8 | buf[17], buf[18] << 8 | buf[19]);
	else {
		if (buf[4] == 0 || memchr(buf + 5, '\0', buf[4]) != NULL) {
			proxy_quote(err, errlen, "not a host name: ", "",
			    (const char *)buf + 5, buf[4]);
			return PROXY_PARSE_ERROR;
		}
		memcpy(t->host, buf + 5, buf[4]);
		t->host[buf[4]] = '\0';
	}
	t->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
	if (t->port == 0) {
		snprintf(err, errlen, "port 0 is no port");
		return PROXY_PARSE_ERROR;
	}
	*consumed = need;
	return PROXY_PARSE_DONE;
}
