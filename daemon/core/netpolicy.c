/* Network by name: rules, host normalisation, address classes, decisions. */
#include "core/netpolicy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/punycode.h"
#include "utf8.h"
#include "util.h"

/* Bytes of hostile input a message quotes. */
#define NETPOLICY_QUOTE_BYTES 64
/* Room for such a quote: every byte may become "\xNN". */
#define NETPOLICY_QUOTE_SIZE (NETPOLICY_QUOTE_BYTES * 4 + 8)
/* Room for a rule's normalised text. */
#define NETPOLICY_TEXT_SIZE 288
#define NETPOLICY_REASON_SIZE 320
/* Longest input a host name could be written in: 4-byte UTF-8 each. */
#define NETPOLICY_INPUT_MAX 1024
#define NETPOLICY_ALLOW_FIELD "sandbox.network.allow"

/* A rule with its normalised text, which orders and compares rules. */
struct netpolicy_entry {
	struct netpolicy_rule rule;
	char text[NETPOLICY_TEXT_SIZE];
};

/* Each list sorted by text, without duplicates. */
struct netpolicy_list {
	struct netpolicy_entry *v;
	size_t n, cap;
};

struct netpolicy {
	struct netpolicy_list allow, deny;
};

static void	netpolicy_quote(const char *, char *);
static int	netpolicy_digit(char, int);
static bool	netpolicy_ip4_parse(const char *, size_t, uint8_t *);
static void	netpolicy_unmap(struct netpolicy_addr *);
static enum netpolicy_class netpolicy_class_of(const struct netpolicy_addr *,
    unsigned *);
static enum netpolicy_class netpolicy_class4(const uint8_t *, unsigned *);
static bool	netpolicy_addr_in(const struct netpolicy_addr *, unsigned,
    const struct netpolicy_addr *);
static bool	netpolicy_label(const char *, size_t, char *, size_t *,
    char *);
static bool	netpolicy_name(const char *, char *, char *);
static bool	netpolicy_parse_port(const char *, size_t,
    struct netpolicy_rule *, char *);
static bool	netpolicy_parse_prefix(const char *, size_t, unsigned,
    unsigned *, char *);
static bool	netpolicy_parse_addr(const char *, size_t, bool,
    struct netpolicy_rule *, char *);
static bool	netpolicy_parse_host(const char *, size_t,
    struct netpolicy_rule *, char *);
static bool	netpolicy_rule_reason(const char *, struct netpolicy_rule *,
    char *);
static bool	netpolicy_port_ok(const struct netpolicy_rule *, uint16_t);
static bool	netpolicy_ports_within(const struct netpolicy_rule *,
    const struct netpolicy_rule *);
static bool	netpolicy_under(const char *, const char *);
static bool	netpolicy_name_matches(const struct netpolicy_rule *,
    const char *, uint16_t);
static bool	netpolicy_is_localhost(const struct netpolicy_rule *);
static bool	netpolicy_addr_matches(const struct netpolicy_rule *,
    const struct netpolicy_addr *, uint16_t);
static void	netpolicy_list_add(struct netpolicy_list *,
    const struct netpolicy_entry *);
static bool	netpolicy_list_json(const struct netpolicy_list *, json_t *,
    const char *);
static bool	netpolicy_list_parse(struct netpolicy_list *, const json_t *,
    const char *, const char *, char *, size_t);
static bool	netpolicy_list_equal(const struct netpolicy_list *,
    const struct netpolicy_list *);
static void	netpolicy_target(const char *, bool, uint16_t, char *,
    size_t);
static void	netpolicy_suggest(const char *, bool, uint16_t, char *,
    size_t);
static const char *netpolicy_article(enum netpolicy_class);

/* What a NULL policy is: no rule. */
static const struct netpolicy netpolicy_empty;

static const char *const netpolicy_class_names[] = {
	[NETPOLICY_PUBLIC] = "public",
	[NETPOLICY_LOOPBACK] = "loopback",
	[NETPOLICY_LINK_LOCAL] = "link-local (cloud metadata)",
	[NETPOLICY_PRIVATE] = "private",
	[NETPOLICY_CGNAT] = "shared (CGNAT)",
	[NETPOLICY_MULTICAST] = "multicast",
	[NETPOLICY_UNSPECIFIED] = "unspecified",
	[NETPOLICY_BROADCAST] = "broadcast",
	[NETPOLICY_RESERVED] = "reserved",
};

/*
 * s in double quotes for a message: at most NETPOLICY_QUOTE_BYTES of it,
 * never a character cut, bytes that are not UTF-8 and controls as \xNN.
 * buf holds NETPOLICY_QUOTE_SIZE bytes.
 */
static void
netpolicy_quote(const char *s, char *buf)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), i = 0, o = 0, n;

	buf[o++] = '"';
	while (i < len && i < NETPOLICY_QUOTE_BYTES) {
		n = utf8_seq(p + i, len - i);
		if (n > 1 && i + n > NETPOLICY_QUOTE_BYTES)
			break;
		if (n > 1) {
			memcpy(buf + o, p + i, n);
			o += n;
			i += n;
			continue;
		}
		if (n == 0 || p[i] < 0x20 || p[i] == 0x7f || p[i] == '"' ||
		    p[i] == '\\')
			o += (size_t)snprintf(buf + o, 5, "\\x%02x", p[i]);
		else
			buf[o++] = (char)p[i];
		i++;
	}
	if (i < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
}

/* The value of c as a digit of base 8, 10 or 16, or -1. */
static int
netpolicy_digit(char c, int base)
{
	int d;

	if (c >= '0' && c <= '9')
		d = c - '0';
	else if (c >= 'a' && c <= 'f')
		d = c - 'a' + 10;
	else if (c >= 'A' && c <= 'F')
		d = c - 'A' + 10;
	else
		return -1;
	return d < base ? d : -1;
}

/*
 * inet_aton's grammar, without its trailing blanks: 1 to 4 parts, each
 * decimal, octal (leading 0) or hex (0x); all but the last are one byte,
 * the last fills the bytes that remain.
 */
static bool
netpolicy_ip4_parse(const char *s, size_t len, uint8_t *out)
{
	static const uint32_t max[4] = { 0xffffffff, 0xffffff, 0xffff, 0xff };
	uint32_t parts[4], v32;
	uint64_t v;
	size_t np = 0, i = 0, start, k;
	int base, d;

	for (;;) {
		if (i >= len || s[i] < '0' || s[i] > '9')
			return false;
		base = 10;
		if (s[i] == '0') {
			base = 8;
			i++;
			if (i < len && (s[i] == 'x' || s[i] == 'X')) {
				base = 16;
				i++;
			}
		}
		start = i;
		for (v = 0; i < len && (d = netpolicy_digit(s[i], base)) >= 0;
		    i++) {
			v = v * (uint64_t)base + (uint64_t)d;
			if (v > 0xffffffff)
				return false;
		}
		if (base == 16 && i == start)
			return false;
		parts[np++] = (uint32_t)v;
		if (i == len)
			break;
		if (s[i] != '.' || np == 4)
			return false;
		i++;
	}
	for (k = 0; k + 1 < np; k++)
		if (parts[k] > 0xff)
			return false;
	if (parts[np - 1] > max[np - 1])
		return false;
	v32 = parts[np - 1];
	for (k = 0; k + 1 < np; k++)
		v32 |= parts[k] << (8 * (3 - k));
	out[0] = (uint8_t)(v32 >> 24);
	out[1] = (uint8_t)(v32 >> 16);
	out[2] = (uint8_t)(v32 >> 8);
	out[3] = (uint8_t)v32;
	return true;
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is that IPv4 address. */
static void
netpolicy_unmap(struct netpolicy_addr *a)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };

	if (a->family != AF_INET6 || memcmp(a->bytes, mapped, 12) != 0)
		return;
	a->family = AF_INET;
	memmove(a->bytes, a->bytes + 12, 4);
	memset(a->bytes + 4, 0, 12);
}

bool
netpolicy_ip_parse(const char *host, struct netpolicy_addr *out)
{
	char buf[64];
	size_t len;
	struct netpolicy_addr a;

	if (host == NULL)
		return false;
	len = strlen(host);
	memset(&a, 0, sizeof a);
	if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
		if (memchr(host, ':', len) == NULL)
			return false;
	}
	if (memchr(host, ':', len) != NULL) {
		if (len >= sizeof buf)
			return false;
		memcpy(buf, host, len);
		buf[len] = '\0';
		if (inet_pton(AF_INET6, buf, a.bytes) != 1)
			return false;
		a.family = AF_INET6;
		netpolicy_unmap(&a);
	} else {
		/* One trailing dot, as for a name: "127.0.0.1." */
		if (len > 0 && host[len - 1] == '.')
			len--;
		if (!netpolicy_ip4_parse(host, len, a.bytes))
			return false;
		a.family = AF_INET;
	}
	if (out != NULL)
		*out = a;
	return true;
}

void
netpolicy_addr_format(const struct netpolicy_addr *a, char *buf, size_t len)
{
	char tmp[INET6_ADDRSTRLEN];

	if (inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->bytes,
	    tmp, sizeof tmp) == NULL)
		snprintf(tmp, sizeof tmp, "?");
	snprintf(buf, len, "%s", tmp);
}

/* The class of an IPv4 address and the prefix of the block it is in. */
static enum netpolicy_class
netpolicy_class4(const uint8_t *b, unsigned *block)
{
	static const struct {
		uint8_t net[4];
		unsigned prefix;
		enum netpolicy_class cls;
	} blocks[] = {
		{ { 255, 255, 255, 255 }, 32, NETPOLICY_BROADCAST },
		{ { 0, 0, 0, 0 }, 8, NETPOLICY_UNSPECIFIED },
		{ { 10, 0, 0, 0 }, 8, NETPOLICY_PRIVATE },
		{ { 100, 64, 0, 0 }, 10, NETPOLICY_CGNAT },
		{ { 127, 0, 0, 0 }, 8, NETPOLICY_LOOPBACK },
		{ { 169, 254, 0, 0 }, 16, NETPOLICY_LINK_LOCAL },
		{ { 172, 16, 0, 0 }, 12, NETPOLICY_PRIVATE },
		{ { 192, 168, 0, 0 }, 16, NETPOLICY_PRIVATE },
		{ { 224, 0, 0, 0 }, 4, NETPOLICY_MULTICAST },
		{ { 240, 0, 0, 0 }, 4, NETPOLICY_RESERVED },
	};
	struct netpolicy_addr a = { .family = AF_INET }, net = a;
	size_t i;

	memcpy(a.bytes, b, 4);
	for (i = 0; i < nitems(blocks); i++) {
		memcpy(net.bytes, blocks[i].net, 4);
		if (netpolicy_addr_in(&net, blocks[i].prefix, &a)) {
			*block = blocks[i].prefix;
			return blocks[i].cls;
		}
	}
	*block = 0;
	return NETPOLICY_PUBLIC;
}

/*
 * The class of an address and the prefix of its special block (0 for a
 * public one). IPv6 prefixes that carry an IPv4 address a gateway may
 * translate to (NAT64, 6to4) take the class of that address.
 */
static enum netpolicy_class
netpolicy_class_of(const struct netpolicy_addr *in, unsigned *block)
{
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
	static const uint8_t nat64_local[6] = { 0, 0x64, 0xff, 0x9b, 0, 1 };
	static const uint8_t discard[8] = { 1, 0 };
	static const uint8_t zero[16];
	struct netpolicy_addr a = *in;
	const uint8_t *b = a.bytes;
	enum netpolicy_class cls;
	unsigned p;

	netpolicy_unmap(&a);
	if (a.family == AF_INET)
		return netpolicy_class4(b, block);
	*block = 128;
	if (memcmp(b, zero, 15) == 0 && b[15] <= 1)
		return b[15] == 0 ? NETPOLICY_UNSPECIFIED : NETPOLICY_LOOPBACK;
	if (memcmp(b, nat64, 12) == 0) {
		cls = netpolicy_class4(b + 12, &p);
		*block = cls == NETPOLICY_PUBLIC ? 0 : 96 + p;
		return cls;
	}
	if (memcmp(b, nat64_local, 6) == 0) {
		*block = 48;
		return NETPOLICY_RESERVED;
	}
	if (b[0] == 0x20 && b[1] == 0x02) {
		cls = netpolicy_class4(b + 2, &p);
		*block = cls == NETPOLICY_PUBLIC ? 0 : 16 + p;
		return cls;
	}
	*block = 8;
	if (b[0] == 0)
		return NETPOLICY_RESERVED; /* IPv4-compatible and the rest */
	if (b[0] == 0xff)
		return NETPOLICY_MULTICAST;
	if (memcmp(b, discard, 8) == 0) {
		*block = 64;
		return NETPOLICY_RESERVED;
	}
	*block = 10;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return NETPOLICY_LINK_LOCAL;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return NETPOLICY_RESERVED; /* site-local, deprecated */
	*block = 7;
	if ((b[0] & 0xfe) == 0xfc)
		return NETPOLICY_PRIVATE;
	*block = 0;
	return NETPOLICY_PUBLIC;
}

enum netpolicy_class
netpolicy_classify(const struct netpolicy_addr *a)
{
	unsigned block;

	return netpolicy_class_of(a, &block);
}

const char *
netpolicy_class_name(enum netpolicy_class cls)
{
	if ((size_t)cls >= nitems(netpolicy_class_names))
		return "unknown";
	return netpolicy_class_names[cls];
}

static const char *
netpolicy_article(enum netpolicy_class cls)
{
	return cls == NETPOLICY_UNSPECIFIED ? "an" : "a";
}

/* Is a inside net/prefix? */
static bool
netpolicy_addr_in(const struct netpolicy_addr *net, unsigned prefix,
    const struct netpolicy_addr *a)
{
	unsigned whole = prefix / 8, rest = prefix % 8;
	uint8_t mask;

	if (net->family != a->family)
		return false;
	if (memcmp(net->bytes, a->bytes, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	mask = (uint8_t)(0xff << (8 - rest));
	return (net->bytes[whole] & mask) == (a->bytes[whole] & mask);
}

/*
 * One label of a name, [s, s+len), appended at out+*o in normal form:
 * ASCII lowercased, a label with non-ASCII bytes as "xn--" and its
 * punycode. False with reason.
 */
static bool
netpolicy_label(const char *s, size_t len, char *out, size_t *o,
    char *reason)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cps[NETPOLICY_LABEL_MAX + 1];
	char enc[NETPOLICY_LABEL_MAX + 1], lab[NETPOLICY_LABEL_MAX + 1];
	size_t i, n, ncp = 0, llen;
	bool ascii = true;
	unsigned char c;

	if (len == 0) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "it has an empty label "
		    "(two dots in a row, or a leading dot)");
		return false;
	}
	for (i = 0; i < len; i++)
		if (p[i] >= 0x80)
			ascii = false;
	if (ascii) {
		if (len > NETPOLICY_LABEL_MAX) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "it has a label "
			    "longer than %d bytes", NETPOLICY_LABEL_MAX);
			return false;
		}
		for (i = 0; i < len; i++)
			lab[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ?
			    p[i] - 'A' + 'a' : p[i]);
		llen = len;
	} else {
		for (i = 0; i < len; i += n) {
			if ((n = utf8_seq(p + i, len - i)) == 0) {
				snprintf(reason, NETPOLICY_REASON_SIZE,
				    "it is not valid UTF-8");
				return false;
			}
			/* Each code point costs at least one byte of output. */
			if (ncp == NETPOLICY_LABEL_MAX) {
				snprintf(reason, NETPOLICY_REASON_SIZE, "it has "
				    "a label longer than %d bytes once "
				    "converted to punycode", NETPOLICY_LABEL_MAX);
				return false;
			}
			c = p[i];
			if (n == 1)
				cps[ncp] = c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
			else if (n == 2)
				cps[ncp] = (uint32_t)(c & 0x1f) << 6 |
				    (p[i + 1] & 0x3f);
			else if (n == 3)
				cps[ncp] = (uint32_t)(c & 0x0f) << 12 |
				    (uint32_t)(p[i + 1] & 0x3f) << 6 |
				    (p[i + 2] & 0x3f);
			else
				cps[ncp] = (uint32_t)(c & 0x07) << 18 |
				    (uint32_t)(p[i + 1] & 0x3f) << 12 |
				    (uint32_t)(p[i + 2] & 0x3f) << 6 |
				    (p[i + 3] & 0x3f);
			ncp++;
		}
		if (!punycode_encode(cps, ncp, enc,
		    sizeof enc - strlen("xn--"))) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "it has a label "
			    "longer than %d bytes once converted to punycode",
			    NETPOLICY_LABEL_MAX);
			return false;
		}
		llen = (size_t)snprintf(lab, sizeof lab, "xn--%s", enc);
	}
	for (i = 0; i < llen; i++) {
		c = (unsigned char)lab[i];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-')
			continue;
		if (c == '*')
			snprintf(reason, NETPOLICY_REASON_SIZE, "'*' may only be "
			    "the whole first label of a rule "
			    "(\"*.example.org\")");
		else if (c >= 0x20 && c < 0x7f)
			snprintf(reason, NETPOLICY_REASON_SIZE, "'%c' is not "
			    "allowed in a host name (only letters, digits, "
			    "'-' and '.')", c);
		else
			snprintf(reason, NETPOLICY_REASON_SIZE, "byte 0x%02x is "
			    "not allowed in a host name (only letters, "
			    "digits, '-' and '.')", c);
		return false;
	}
	if (lab[0] == '-' || lab[llen - 1] == '-') {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a label starts or ends "
		    "with '-'");
		return false;
	}
	if (*o + (*o > 0) + llen > NETPOLICY_NAME_MAX) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "it is longer than %d "
		    "bytes", NETPOLICY_NAME_MAX);
		return false;
	}
	if (*o > 0)
		out[(*o)++] = '.';
	memcpy(out + *o, lab, llen);
	*o += llen;
	out[*o] = '\0';
	return true;
}

/*
 * in as a normal host name into out (NETPOLICY_NAME_MAX + 1 bytes): not an
 * IP literal, which the callers tell apart first. False with reason.
 */
static bool
netpolicy_name(const char *in, char *out, char *reason)
{
	size_t len = strlen(in), o = 0, i, start, last;
	const char *dot;

	out[0] = '\0';
	if (len > NETPOLICY_INPUT_MAX) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "it is longer than %d "
		    "bytes", NETPOLICY_NAME_MAX);
		return false;
	}
	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "it is empty");
		return false;
	}
	if (in[0] == '[') {
		snprintf(reason, NETPOLICY_REASON_SIZE, "brackets hold an IPv6 "
		    "address, and this is none");
		return false;
	}
	for (start = 0; start <= len; start = i + 1) {
		dot = memchr(in + start, '.', len - start);
		i = dot != NULL ? (size_t)(dot - in) : len;
		if (!netpolicy_label(in + start, i - start, out, &o, reason))
			return false;
	}
	/* A last label that is a number makes an IPv4 literal to a URL parser. */
	dot = strrchr(out, '.');
	last = dot != NULL ? (size_t)(dot - out) + 1 : 0;
	i = last;
	if (out[i] == '0' && out[i + 1] == 'x')
		for (i += 2; out[i] != '\0' && netpolicy_digit(out[i], 16) >= 0;
		    i++)
			;
	else
		while (out[i] >= '0' && out[i] <= '9')
			i++;
	if (out[i] == '\0') {
		snprintf(reason, NETPOLICY_REASON_SIZE, "its last label is a "
		    "number, but it is not an IP address");
		return false;
	}
	return true;
}

bool
netpolicy_host_normalize(const char *in, char *out, size_t outlen,
    char *err, size_t errlen)
{
	char name[NETPOLICY_NAME_MAX + 1], reason[NETPOLICY_REASON_SIZE];
	char q[NETPOLICY_QUOTE_SIZE];
	struct netpolicy_addr a;

	if (in == NULL)
		in = "";
	if (netpolicy_ip_parse(in, &a))
		netpolicy_addr_format(&a, name, sizeof name);
	else if (!netpolicy_name(in, name, reason)) {
		netpolicy_quote(in, q);
		utf8_snprintf(err, errlen, "%s is not a host name: %s", q,
		    reason);
		if (outlen > 0)
			out[0] = '\0';
		return false;
	}
	if (strlen(name) >= outlen) {
		utf8_snprintf(err, errlen, "no room for the host name");
		if (outlen > 0)
			out[0] = '\0';
		return false;
	}
	memcpy(out, name, strlen(name) + 1);
	return true;
}

/* ":PORT" or ":LO-HI" without its colon: [s, s+len). */
static bool
netpolicy_parse_port(const char *s, size_t len, struct netpolicy_rule *r,
    char *reason)
{
	unsigned long v[2] = { 0, 0 };
	size_t i, k = 0, digits = 0;

	for (i = 0; i <= len; i++) {
		if (i < len && s[i] >= '0' && s[i] <= '9') {
			if (++digits > 5)
				break;
			v[k] = v[k] * 10 + (unsigned long)(s[i] - '0');
			continue;
		}
		if (digits == 0 || (i < len && (s[i] != '-' || k == 1)))
			break;
		if (i == len) {
			if (k == 0)
				v[1] = v[0];
			r->default_ports = false;
			r->port_lo = (uint16_t)v[0];
			r->port_hi = (uint16_t)v[1];
			if (v[0] < 1 || v[0] > 65535 || v[1] < 1 ||
			    v[1] > 65535) {
				snprintf(reason, NETPOLICY_REASON_SIZE, "a port "
				    "is from 1 to 65535");
				return false;
			}
			if (v[0] > v[1]) {
				snprintf(reason, NETPOLICY_REASON_SIZE, "the port "
				    "range %lu-%lu ends before it starts",
				    v[0], v[1]);
				return false;
			}
			return true;
		}
		k = 1;
		digits = 0;
	}
	if (digits > 5)
		snprintf(reason, NETPOLICY_REASON_SIZE, "a port is from 1 to "
		    "65535");
	else
		snprintf(reason, NETPOLICY_REASON_SIZE, "a port is a number "
		    "(\":443\") or a range (\":8000-8100\")");
	return false;
}

/* "/N" without its slash, N at most max. */
static bool
netpolicy_parse_prefix(const char *s, size_t len, unsigned max,
    unsigned *out, char *reason)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; i < len && i < 4 && s[i] >= '0' && s[i] <= '9'; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	if (len == 0 || i != len) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a CIDR prefix is a "
		    "number of bits (\"/8\")");
		return false;
	}
	if (v > max) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "the prefix /%u is longer "
		    "than the address's %u bits", v, max);
		return false;
	}
	*out = v;
	return true;
}

/*
 * An address rule's host, [s, s+len): the address (bracketed IPv6 already
 * unwrapped when v6) with an optional "/N".
 */
static bool
netpolicy_parse_addr(const char *s, size_t len, bool v6,
    struct netpolicy_rule *r, char *reason)
{
	char buf[64], canon[INET6_ADDRSTRLEN];
	const char *slash = memchr(s, '/', len);
	size_t alen = slash != NULL ? (size_t)(slash - s) : len;
	struct netpolicy_addr net;
	unsigned prefix;
	bool mapped;

	memset(&r->addr, 0, sizeof r->addr);
	if (alen >= sizeof buf)
		alen = sizeof buf - 1;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (v6) {
		if (inet_pton(AF_INET6, buf, r->addr.bytes) != 1) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "brackets hold "
			    "an IPv6 address, and this is none");
			return false;
		}
		r->addr.family = AF_INET6;
		netpolicy_unmap(&r->addr);
	} else {
		if (!netpolicy_ip4_parse(buf, alen, r->addr.bytes)) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "a CIDR is an "
			    "address and a prefix (\"10.0.0.0/8\")");
			return false;
		}
		r->addr.family = AF_INET;
		netpolicy_addr_format(&r->addr, canon, sizeof canon);
		if (strcmp(canon, buf) != 0) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "write an IPv4 "
			    "address as four decimal numbers (\"%s\")", canon);
			return false;
		}
	}
	mapped = v6 && r->addr.family == AF_INET;
	prefix = r->addr.family == AF_INET ? 32 : 128;
	if (slash != NULL && !netpolicy_parse_prefix(slash + 1,
	    len - alen - 1, v6 ? 128 : 32, &prefix, reason))
		return false;
	if (mapped && slash != NULL && prefix < 96) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "an IPv4-mapped network "
		    "is written as IPv4 (\"10.0.0.0/8\")");
		return false;
	}
	if (mapped && slash != NULL)
		prefix -= 96;
	net.family = r->addr.family;
	memset(net.bytes, 0, sizeof net.bytes);
	memcpy(net.bytes, r->addr.bytes, prefix / 8);
	if (prefix % 8 != 0)
		net.bytes[prefix / 8] = (uint8_t)(r->addr.bytes[prefix / 8] &
		    (0xff << (8 - prefix % 8)));
	if (memcmp(net.bytes, r->addr.bytes, sizeof net.bytes) != 0) {
		netpolicy_addr_format(&net, canon, sizeof canon);
		snprintf(reason, NETPOLICY_REASON_SIZE, "the address has bits "
		    "set past its /%u prefix (the network is %s%s%s/%u)", prefix,
		    net.family == AF_INET6 ? "[" : "", canon,
		    net.family == AF_INET6 ? "]" : "", prefix);
		return false;
	}
	r->kind = NETPOLICY_RULE_ADDR;
	r->prefix = prefix;
	return true;
}

/* A rule's host part without brackets or port: a name, wildcard or IPv4. */
static bool
netpolicy_parse_host(const char *s, size_t len, struct netpolicy_rule *r,
    char *reason)
{
	char buf[NETPOLICY_RULE_MAX + 1];
	struct netpolicy_addr a;

	memcpy(buf, s, len);
	buf[len] = '\0';
	if (len == 0) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "it names no host");
		return false;
	}
	if (memchr(buf, '/', len) != NULL || netpolicy_ip_parse(buf, &a))
		return netpolicy_parse_addr(buf, len, false, r, reason);
	if (strcmp(buf, "*") == 0 || strcmp(buf, "*.") == 0) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a wildcard is a whole "
		    "first label before a domain (\"*.example.org\"); write "
		    "the hosts to allow");
		return false;
	}
	r->kind = NETPOLICY_RULE_NAME;
	if (strncmp(buf, "*.", 2) == 0) {
		r->kind = NETPOLICY_RULE_WILDCARD;
		if (netpolicy_ip_parse(buf + 2, NULL)) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "a wildcard "
			    "covers names; write an address range as a CIDR "
			    "(\"10.0.0.0/8\")");
			return false;
		}
	}
	return netpolicy_name(buf + (r->kind == NETPOLICY_RULE_WILDCARD ?
	    2 : 0), r->name, reason);
}

/* host[/prefix][:port] or [v6][/prefix][:port]; false with reason. */
static bool
netpolicy_rule_reason(const char *s, struct netpolicy_rule *r, char *reason)
{
	size_t len = strlen(s), hlen;
	const char *close, *colon, *rest;

	memset(r, 0, sizeof *r);
	r->default_ports = true;
	if (len == 0) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a rule is a host, "
		    "wildcard, address or CIDR with an optional port, and this "
		    "is empty");
		return false;
	}
	if (len > NETPOLICY_RULE_MAX) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a rule is at most %d "
		    "bytes", NETPOLICY_RULE_MAX);
		return false;
	}
	if (strstr(s, "://") != NULL) {
		snprintf(reason, NETPOLICY_REASON_SIZE, "a rule names a host, "
		    "not a URL (\"example.org\", \"example.org:8443\")");
		return false;
	}
	if (s[0] == '[') {
		if ((close = strchr(s, ']')) == NULL) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "'[' has no "
			    "closing ']'");
			return false;
		}
		rest = close + 1;
		hlen = strcspn(rest, ":");
		if (hlen > 0 && rest[0] != '/') {
			snprintf(reason, NETPOLICY_REASON_SIZE, "after ']' comes "
			    "a prefix (\"/64\") or a port (\":443\")");
			return false;
		}
		/* Join the address and its prefix, the brackets dropped. */
		{
			char buf[NETPOLICY_RULE_MAX + 1];
			size_t alen = (size_t)(close - s - 1);

			memcpy(buf, s + 1, alen);
			memcpy(buf + alen, rest, hlen);
			buf[alen + hlen] = '\0';
			if (!netpolicy_parse_addr(buf, alen + hlen, true, r,
			    reason))
				return false;
		}
		colon = rest[hlen] == ':' ? rest + hlen : NULL;
	} else {
		colon = strchr(s, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL) {
			snprintf(reason, NETPOLICY_REASON_SIZE, "write an IPv6 "
			    "address in brackets (\"[2001:db8::1]\", "
			    "\"[2001:db8::1]:443\")");
			return false;
		}
		hlen = colon != NULL ? (size_t)(colon - s) : len;
		if (!netpolicy_parse_host(s, hlen, r, reason))
			return false;
	}
	return colon == NULL || netpolicy_parse_port(colon + 1,
	    strlen(colon + 1), r, reason);
}

bool
netpolicy_rule_parse(const char *s, struct netpolicy_rule *out, char *err,
    size_t errlen)
{
	char reason[NETPOLICY_REASON_SIZE], q[NETPOLICY_QUOTE_SIZE];

	if (s == NULL)
		s = "";
	if (netpolicy_rule_reason(s, out, reason))
		return true;
	netpolicy_quote(s, q);
	utf8_snprintf(err, errlen, "%s: %s", q, reason);
	return false;
}

void
netpolicy_rule_format(const struct netpolicy_rule *r, char *buf, size_t len)
{
	char host[NETPOLICY_TEXT_SIZE], port[16] = "", a[INET6_ADDRSTRLEN];

	switch (r->kind) {
	case NETPOLICY_RULE_NAME:
		snprintf(host, sizeof host, "%s", r->name);
		break;
	case NETPOLICY_RULE_WILDCARD:
		snprintf(host, sizeof host, "*.%s", r->name);
		break;
	case NETPOLICY_RULE_ADDR:
		netpolicy_addr_format(&r->addr, a, sizeof a);
		if (r->addr.family == AF_INET && r->prefix == 32)
			snprintf(host, sizeof host, "%s", a);
		else if (r->addr.family == AF_INET)
			snprintf(host, sizeof host, "%s/%u", a, r->prefix);
		else if (r->prefix == 128)
			snprintf(host, sizeof host, "[%s]", a);
		else
			snprintf(host, sizeof host, "[%s]/%u", a, r->prefix);
		break;
	}
	if (!r->default_ports && r->port_lo == r->port_hi)
		snprintf(port, sizeof port, ":%u", r->port_lo);
	else if (!r->default_ports)
		snprintf(port, sizeof port, ":%u-%u", r->port_lo, r->port_hi);
	snprintf(buf, len, "%s%s", host, port);
}

static bool
netpolicy_port_ok(const struct netpolicy_rule *r, uint16_t port)
{
	if (r->default_ports)
		return port == 80 || port == 443;
	return port >= r->port_lo && port <= r->port_hi;
}

static bool
netpolicy_ports_within(const struct netpolicy_rule *in,
    const struct netpolicy_rule *out)
{
	if (in->default_ports)
		return netpolicy_port_ok(out, 80) && netpolicy_port_ok(out, 443);
	if (out->default_ports)
		return in->port_lo == in->port_hi &&
		    netpolicy_port_ok(out, in->port_lo);
	return in->port_lo >= out->port_lo && in->port_hi <= out->port_hi;
}

/* Is name a subdomain of suffix, by whole labels, and not suffix itself? */
static bool
netpolicy_under(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s + 1 && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

bool
netpolicy_rule_within(const struct netpolicy_rule *in,
    const struct netpolicy_rule *out)
{
	if (!netpolicy_ports_within(in, out))
		return false;
	switch (out->kind) {
	case NETPOLICY_RULE_NAME:
		return in->kind == NETPOLICY_RULE_NAME &&
		    strcmp(in->name, out->name) == 0;
	case NETPOLICY_RULE_WILDCARD:
		if (in->kind == NETPOLICY_RULE_WILDCARD &&
		    strcmp(in->name, out->name) == 0)
			return true;
		return in->kind != NETPOLICY_RULE_ADDR &&
		    netpolicy_under(in->name, out->name);
	case NETPOLICY_RULE_ADDR:
		return in->kind == NETPOLICY_RULE_ADDR &&
		    in->prefix >= out->prefix &&
		    netpolicy_addr_in(&out->addr, out->prefix, &in->addr);
	}
	return false;
}

static bool
netpolicy_name_matches(const struct netpolicy_rule *r, const char *name,
    uint16_t port)
{
	if (!netpolicy_port_ok(r, port))
		return false;
	if (r->kind == NETPOLICY_RULE_NAME)
		return strcmp(r->name, name) == 0;
	if (r->kind == NETPOLICY_RULE_WILDCARD)
		return netpolicy_under(name, r->name);
	return false;
}

static bool
netpolicy_is_localhost(const struct netpolicy_rule *r)
{
	return r->kind == NETPOLICY_RULE_NAME &&
	    strcmp(r->name, "localhost") == 0;
}

/* An IP/CIDR rule containing a, with the port. */
static bool
netpolicy_addr_matches(const struct netpolicy_rule *r,
    const struct netpolicy_addr *a, uint16_t port)
{
	return r->kind == NETPOLICY_RULE_ADDR && netpolicy_port_ok(r, port) &&
	    netpolicy_addr_in(&r->addr, r->prefix, a);
}

struct netpolicy *
netpolicy_new(void)
{
	return xcalloc(1, sizeof(struct netpolicy));
}

void
netpolicy_free(struct netpolicy *p)
{
	if (p == NULL)
		return;
	free(p->allow.v);
	free(p->deny.v);
	free(p);
}

/* Insert in text order; a rule already there is not added twice. */
static void
netpolicy_list_add(struct netpolicy_list *l, const struct netpolicy_entry *e)
{
	size_t lo = 0, hi = l->n, mid;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = strcmp(l->v[mid].text, e->text);
		if (c == 0)
			return;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (l->n == l->cap) {
		l->cap = l->cap == 0 ? 8 : l->cap * 2;
		l->v = xreallocarray(l->v, l->cap, sizeof *l->v);
	}
	memmove(l->v + lo + 1, l->v + lo, (l->n - lo) * sizeof *l->v);
	l->v[lo] = *e;
	l->n++;
}

bool
netpolicy_add(struct netpolicy *p, bool deny, const char *rule, char *err,
    size_t errlen)
{
	struct netpolicy_entry e;

	if (!netpolicy_rule_parse(rule, &e.rule, err, errlen))
		return false;
	netpolicy_rule_format(&e.rule, e.text, sizeof e.text);
	netpolicy_list_add(deny ? &p->deny : &p->allow, &e);
	return true;
}

static bool
netpolicy_list_parse(struct netpolicy_list *l, const json_t *obj,
    const char *field, const char *key, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key), *x;
	char why[NETPOLICY_REASON_SIZE + NETPOLICY_QUOTE_SIZE];
	struct netpolicy_entry e;
	size_t i;

	if (v == NULL || json_is_null(v))
		return true;
	if (!json_is_array(v)) {
		utf8_snprintf(err, errlen, "%s.%s: must be an array of rules "
		    "(\"registry.npmjs.org\", \"*.pythonhosted.org:443\", "
		    "\"10.0.0.0/8\")", field, key);
		return false;
	}
	if (json_array_size(v) > NETPOLICY_LIST_MAX) {
		utf8_snprintf(err, errlen, "%s.%s: at most %d rules (it has "
		    "%zu)", field, key, NETPOLICY_LIST_MAX, json_array_size(v));
		return false;
	}
	json_array_foreach(v, i, x) {
		if (!json_is_string(x)) {
			utf8_snprintf(err, errlen, "%s.%s[%zu]: must be a "
			    "string", field, key, i);
			return false;
		}
		if (strlen(json_string_value(x)) != json_string_length(x)) {
			utf8_snprintf(err, errlen, "%s.%s[%zu]: must not "
			    "contain NUL", field, key, i);
			return false;
		}
		if (!netpolicy_rule_parse(json_string_value(x), &e.rule, why,
		    sizeof why)) {
			utf8_snprintf(err, errlen, "%s.%s[%zu]: %s", field, key,
			    i, why);
			return false;
		}
		netpolicy_rule_format(&e.rule, e.text, sizeof e.text);
		netpolicy_list_add(l, &e);
	}
	return true;
}

struct netpolicy *
netpolicy_parse_json(const json_t *v, const char *field, char *err,
    size_t errlen)
{
	struct netpolicy *p;
	const char *key;
	char q[NETPOLICY_QUOTE_SIZE];
	json_t *x;

	if (field == NULL)
		field = "sandbox.network";
	if (!json_is_object(v)) {
		utf8_snprintf(err, errlen, "%s: must be an object {\"allow\": "
		    "[RULE...], \"deny\": [RULE...]}", field);
		return NULL;
	}
	json_object_foreach((json_t *)v, key, x) {
		if (strcmp(key, "allow") != 0 && strcmp(key, "deny") != 0) {
			netpolicy_quote(key, q);
			utf8_snprintf(err, errlen, "%s: unknown field %s "
			    "(known: allow, deny)", field, q);
			return NULL;
		}
	}
	p = netpolicy_new();
	if (!netpolicy_list_parse(&p->allow, v, field, "allow", err, errlen) ||
	    !netpolicy_list_parse(&p->deny, v, field, "deny", err, errlen)) {
		netpolicy_free(p);
		return NULL;
	}
	return p;
}

struct netpolicy *
netpolicy_merge(const struct netpolicy *a, const struct netpolicy *b)
{
	struct netpolicy *p = netpolicy_new();
	const struct netpolicy *src[2] = { a, b };
	size_t k, i;

	for (k = 0; k < 2; k++) {
		if (src[k] == NULL)
			continue;
		for (i = 0; i < src[k]->allow.n; i++)
			netpolicy_list_add(&p->allow, &src[k]->allow.v[i]);
		for (i = 0; i < src[k]->deny.n; i++)
			netpolicy_list_add(&p->deny, &src[k]->deny.v[i]);
	}
	return p;
}

static bool
netpolicy_list_json(const struct netpolicy_list *l, json_t *obj,
    const char *key)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < l->n; i++)
		json_array_append_new(a, json_string(l->v[i].text));
	return json_object_set_new(obj, key, a) == 0;
}

json_t *
netpolicy_json(const struct netpolicy *p)
{
	json_t *o = json_object();

	if (p == NULL)
		p = &netpolicy_empty;
	netpolicy_list_json(&p->allow, o, "allow");
	netpolicy_list_json(&p->deny, o, "deny");
	return o;
}

static bool
netpolicy_list_equal(const struct netpolicy_list *a,
    const struct netpolicy_list *b)
{
	size_t i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i].text, b->v[i].text) != 0)
			return false;
	return true;
}

bool
netpolicy_equal(const struct netpolicy *a, const struct netpolicy *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return netpolicy_list_equal(&a->allow, &b->allow) &&
	    netpolicy_list_equal(&a->deny, &b->deny);
}

bool
netpolicy_within(const struct netpolicy *p, const struct netpolicy *max,
    char *err, size_t errlen)
{
	size_t i, k;

	if (max == NULL || p == NULL)
		return true;
	for (i = 0; i < p->allow.n; i++) {
		for (k = 0; k < max->allow.n; k++)
			if (netpolicy_rule_within(&p->allow.v[i].rule,
			    &max->allow.v[k].rule))
				break;
		if (k == max->allow.n) {
			utf8_snprintf(err, errlen, "the allow rule \"%s\" is "
			    "not inside any rule the operator allows "
			    "(--network-allow-max)", p->allow.v[i].text);
			return false;
		}
	}
	return true;
}

/* "host:port" for a message, brackets around an IPv6 address. */
static void
netpolicy_target(const char *host, bool v6, uint16_t port, char *buf,
    size_t len)
{
	snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
	    port);
}

/* What to add to allow host:port: the host alone covers 80 and 443. */
static void
netpolicy_suggest(const char *host, bool v6, uint16_t port, char *buf,
    size_t len)
{
	char t[NETPOLICY_TEXT_SIZE];

	netpolicy_target(host, v6, port, t, sizeof t);
	if (port == 80 || port == 443)
		snprintf(buf, len, "add \"%s%s%s\" or \"%s\"", v6 ? "[" : "",
		    host, v6 ? "]" : "", t);
	else
		snprintf(buf, len, "add \"%s\"", t);
}

bool
netpolicy_check_name(const struct netpolicy *p, const char *host,
    uint16_t port, char *norm_out, size_t normlen, bool *is_ip,
    struct netpolicy_addr *addr_out, char *why, size_t whylen)
{
	char norm[NETPOLICY_HOST_BUFSIZE], reason[NETPOLICY_REASON_SIZE];
	char q[NETPOLICY_QUOTE_SIZE], target[NETPOLICY_TEXT_SIZE + 64];
	char add[2 * NETPOLICY_TEXT_SIZE], wrote[NETPOLICY_QUOTE_SIZE + 16];
	const struct netpolicy_rule *r;
	struct netpolicy_addr a;
	bool ip, v6, loop;
	size_t i, near = SIZE_MAX;

	if (host == NULL)
		host = "";
	if (normlen > 0)
		norm_out[0] = '\0';
	ip = netpolicy_ip_parse(host, &a);
	*is_ip = ip;
	if (ip) {
		*addr_out = a;
		netpolicy_addr_format(&a, norm, sizeof norm);
	} else if (!netpolicy_name(host, norm, reason)) {
		netpolicy_quote(host, q);
		utf8_snprintf(why, whylen, "%s (port %u) is not allowed: it is "
		    "not a host name: %s", q, port, reason);
		return false;
	}
	if (normlen > 0)
		snprintf(norm_out, normlen, "%s", norm);
	v6 = ip && a.family == AF_INET6;
	netpolicy_target(norm, v6, port, target, sizeof target);
	wrote[0] = '\0';
	if (ip && strcmp(host, norm) != 0 && !(v6 && host[0] == '[' &&
	    strlen(host) == strlen(norm) + 2 &&
	    strncmp(host + 1, norm, strlen(norm)) == 0)) {
		netpolicy_quote(host, q);
		snprintf(wrote, sizeof wrote, " (written %s)", q);
	}
	if (port == 0) {
		utf8_snprintf(why, whylen, "%s%s is not allowed: port 0 is no "
		    "port one can connect to", target, wrote);
		return false;
	}
	if (p == NULL)
		p = &netpolicy_empty;
	loop = ip && netpolicy_classify(&a) == NETPOLICY_LOOPBACK;
	for (i = 0; i < p->deny.n; i++) {
		r = &p->deny.v[i].rule;
		if (ip ? netpolicy_addr_matches(r, &a, port) ||
		    (loop && netpolicy_is_localhost(r) &&
		    netpolicy_port_ok(r, port)) :
		    netpolicy_name_matches(r, norm, port)) {
			utf8_snprintf(why, whylen, "%s%s is refused by the "
			    "deny rule \"%s\"", target, wrote,
			    p->deny.v[i].text);
			return false;
		}
	}
	for (i = 0; i < p->allow.n; i++) {
		r = &p->allow.v[i].rule;
		if (ip ? netpolicy_addr_matches(r, &a, port) ||
		    (loop && netpolicy_is_localhost(r) &&
		    netpolicy_port_ok(r, port)) :
		    netpolicy_name_matches(r, norm, port))
			return true;
		/* A rule for this host on other ports: say so. */
		if (near == SIZE_MAX && !ip && r->kind != NETPOLICY_RULE_ADDR &&
		    (r->kind == NETPOLICY_RULE_NAME ? strcmp(r->name, norm) == 0 :
		    netpolicy_under(norm, r->name)))
			near = i;
		if (near == SIZE_MAX && ip && r->kind == NETPOLICY_RULE_ADDR &&
		    netpolicy_addr_in(&r->addr, r->prefix, &a))
			near = i;
	}
	netpolicy_suggest(norm, v6, port, add, sizeof add);
	if (near != SIZE_MAX)
		utf8_snprintf(why, whylen, "%s%s is not allowed: the allow "
		    "rule \"%s\" does not cover port %u (%s)", target, wrote,
		    p->allow.v[near].text, port, add);
	else if (ip)
		utf8_snprintf(why, whylen, "%s%s is not allowed: an address is "
		    "matched only by IP and CIDR rules, and no rule of "
		    NETPOLICY_ALLOW_FIELD " names it (%s)", target, wrote, add);
	else
		utf8_snprintf(why, whylen, "%s is not allowed: no rule of "
		    NETPOLICY_ALLOW_FIELD " matches it (%s)", target, add);
	return false;
}

bool
netpolicy_check_addr(const struct netpolicy *p, const char *norm_host,
    const struct netpolicy_addr *in, uint16_t port, char *why, size_t whylen)
{
	char astr[INET6_ADDRSTRLEN], target[NETPOLICY_TEXT_SIZE + 64];
	char subject[2 * NETPOLICY_TEXT_SIZE], add[2 * NETPOLICY_TEXT_SIZE];
	char wide[NETPOLICY_TEXT_SIZE + 64];
	const struct netpolicy_rule *r;
	struct netpolicy_addr a = *in, h;
	enum netpolicy_class cls;
	unsigned block;
	bool literal, localhost;
	size_t i;

	if (norm_host == NULL)
		norm_host = "";
	if (p == NULL)
		p = &netpolicy_empty;
	netpolicy_unmap(&a);
	cls = netpolicy_class_of(&a, &block);
	netpolicy_addr_format(&a, astr, sizeof astr);
	literal = netpolicy_ip_parse(norm_host, &h);
	localhost = cls == NETPOLICY_LOOPBACK &&
	    (strcmp(norm_host, "localhost") == 0 ||
	    (literal && netpolicy_classify(&h) == NETPOLICY_LOOPBACK));
	netpolicy_target(literal ? astr : norm_host,
	    literal && a.family == AF_INET6, port, target, sizeof target);
	if (literal)
		snprintf(subject, sizeof subject, "%s is", target);
	else
		snprintf(subject, sizeof subject, "%s resolves to %s,", target,
		    astr);
	for (i = 0; i < p->deny.n; i++) {
		r = &p->deny.v[i].rule;
		if (netpolicy_addr_matches(r, &a, port) ||
		    (cls == NETPOLICY_LOOPBACK && netpolicy_is_localhost(r) &&
		    netpolicy_port_ok(r, port))) {
			utf8_snprintf(why, whylen, "%s refused by the deny rule "
			    "\"%s\"", subject, p->deny.v[i].text);
			return false;
		}
	}
	if (cls == NETPOLICY_PUBLIC)
		return true;
	wide[0] = '\0';
	for (i = 0; i < p->allow.n; i++) {
		r = &p->allow.v[i].rule;
		if (localhost && netpolicy_is_localhost(r) &&
		    netpolicy_port_ok(r, port))
			return true;
		if (!netpolicy_addr_matches(r, &a, port))
			continue;
		/* A rule wider than the special block does not name it. */
		if (r->prefix >= block)
			return true;
		if (wide[0] == '\0')
			snprintf(wide, sizeof wide, "; \"%s\" does not name "
			    "it: it is wider than the %s block",
			    p->allow.v[i].text, netpolicy_class_name(cls));
	}
	netpolicy_suggest(astr, a.family == AF_INET6, port, add, sizeof add);
	utf8_snprintf(why, whylen, "%s %s %s address: refused unless a rule "
	    "names that address (%s%s)", subject, netpolicy_article(cls),
	    netpolicy_class_name(cls), add, wide);
	return false;
}
