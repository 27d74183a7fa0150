/*
 * Network by name (doc/design.md §7, Sandbox): the pure policy the proxy asks
 * before it connects a tool anywhere. A rule is a host name, a wildcard of
 * whole labels, an IP address or a CIDR, with an optional port or port
 * range; deny wins. Names are normalised (case, trailing dot, IDN to
 * punycode) and IP literals recognised in every spelling inet_aton accepts,
 * so that what is matched is what is connected to. No I/O: no sockets, no
 * resolver, no clock.
 */
#ifndef STEXEC_NETPOLICY_H
#define STEXEC_NETPOLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A rule's text, in bytes. */
#define NETPOLICY_RULE_MAX 255
/* A host name, without its trailing dot (RFC 1035). */
#define NETPOLICY_NAME_MAX 253
#define NETPOLICY_LABEL_MAX 63
/* Rules a JSON list may hold. */
#define NETPOLICY_LIST_MAX 256
/* Room for a normalised host or an address's text, NUL included. */
#define NETPOLICY_HOST_BUFSIZE 256

struct netpolicy_addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t bytes[16]; /* v4 in bytes[0..3]; a v4-mapped v6 is AF_INET */
};

enum netpolicy_class {
	NETPOLICY_PUBLIC,
	NETPOLICY_LOOPBACK,
	NETPOLICY_LINK_LOCAL,
	NETPOLICY_PRIVATE,
	NETPOLICY_CGNAT,
	NETPOLICY_MULTICAST,
	NETPOLICY_UNSPECIFIED,
	NETPOLICY_BROADCAST,
	NETPOLICY_RESERVED,
};

enum netpolicy_rule_kind {
	NETPOLICY_RULE_NAME,     /* "registry.npmjs.org", "localhost" */
	NETPOLICY_RULE_WILDCARD, /* "*.pythonhosted.org" */
	NETPOLICY_RULE_ADDR,     /* "10.0.0.0/8", "[::1]" */
};

/* One parsed rule, normalised. */
struct netpolicy_rule {
	enum netpolicy_rule_kind kind;
	/* NAME: the host; WILDCARD: what follows "*." */
	char name[NETPOLICY_NAME_MAX + 1];
	struct netpolicy_addr addr; /* ADDR: the network, host bits zero */
	unsigned prefix;            /* ADDR: 0..32 or 0..128 */
	bool default_ports;         /* no port written: 80 and 443 */
	uint16_t port_lo, port_hi;  /* when a port or range was written */
};

struct netpolicy;

/*
 * Parse one RULE; false with err saying what is wrong (valid UTF-8 whatever
 * s holds; at most 64 bytes of s are quoted).
 */
bool netpolicy_rule_parse(const char *s, struct netpolicy_rule *out,
    char *err, size_t errlen);
/* The rule's normalised text ("*.example.org:8000-8100", "[::1]"). */
void netpolicy_rule_format(const struct netpolicy_rule *, char *buf,
    size_t len);
/* Are the hosts and ports of inner all inside outer's? */
bool netpolicy_rule_within(const struct netpolicy_rule *inner,
    const struct netpolicy_rule *outer);

/*
 * Normalise a host: ASCII case, one trailing dot, IDN to punycode, brackets
 * off an IPv6 literal; an IP literal in any spelling becomes its canonical
 * text ("127.0.0.1", "::1"). False with err for a name no DNS could carry.
 * out needs NETPOLICY_HOST_BUFSIZE bytes.
 */
bool netpolicy_host_normalize(const char *in, char *out, size_t outlen,
    char *err, size_t errlen);
/*
 * Whether host (normalised or not: brackets, one trailing dot, any case)
 * is an IP literal in any spelling; fills out.
 */
bool netpolicy_ip_parse(const char *host, struct netpolicy_addr *out);
/* The canonical text of an address, without brackets. */
void netpolicy_addr_format(const struct netpolicy_addr *, char *buf,
    size_t len);
enum netpolicy_class netpolicy_classify(const struct netpolicy_addr *);
/* "loopback", "link-local (cloud metadata)", ... */
const char *netpolicy_class_name(enum netpolicy_class);

/*
 * {"allow": [...], "deny": [...]}, both optional; field names the JSON field
 * in errors ("sandbox.network"). Unknown keys are refused, and lists longer
 * than NETPOLICY_LIST_MAX.
 */
struct netpolicy *netpolicy_parse_json(const json_t *, const char *field,
    char *err, size_t errlen);
struct netpolicy *netpolicy_new(void);
bool netpolicy_add(struct netpolicy *, bool deny, const char *rule,
    char *err, size_t errlen);
/* a's rules plus b's; either may be NULL. */
struct netpolicy *netpolicy_merge(const struct netpolicy *a,
    const struct netpolicy *b);
void netpolicy_free(struct netpolicy *);
/* {"allow": [...], "deny": [...]}: normalised, sorted, no duplicates. */
json_t *netpolicy_json(const struct netpolicy *);
/* The same rules, whatever their order or spelling. */
bool netpolicy_equal(const struct netpolicy *, const struct netpolicy *);

/*
 * Is every allow rule of p inside some allow rule of max? If not, false and
 * err names the first that is not. A NULL max bounds nothing.
 */
bool netpolicy_within(const struct netpolicy *p, const struct netpolicy *max,
    char *err, size_t errlen);

/*
 * Step 1, on the target as the client named it. True to allow; false with
 * why, a sentence naming host:port and the rule to add or the deny rule
 * that matched. norm_out (NETPOLICY_HOST_BUFSIZE bytes) gets the normalised
 * host ("" when it is not one). When the host is an IP literal, is_ip is
 * true and addr_out holds it: connect there without resolving, after
 * step 2 on it.
 */
bool netpolicy_check_name(const struct netpolicy *, const char *host,
    uint16_t port, char *norm_out, size_t normlen, bool *is_ip,
    struct netpolicy_addr *addr_out, char *why, size_t whylen);
/*
 * Step 2, after step 1 allowed norm_host, on every address it resolved to
 * (or the literal itself): a special class is refused unless an IP/CIDR
 * allow rule inside its block names the address with the port, or the
 * address is loopback, the host "localhost" or a loopback literal, and a
 * "localhost" rule allows the port. Deny IP/CIDR rules apply, and a deny
 * "localhost" rule to every loopback address.
 */
bool netpolicy_check_addr(const struct netpolicy *, const char *norm_host,
    const struct netpolicy_addr *, uint16_t port, char *why, size_t whylen);

#endif
