/*
 * Network by name: the policy against an attacker's table. Each row is a
 * target a sandboxed tool could name, and what the proxy must decide:
 * every spelling of a special address, wildcard boundaries, ports, IDN,
 * DNS rebinding, the metadata service; then the rule grammar, the JSON
 * form and --network-allow-max containment.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/netpolicy.h"
#include "core/punycode.h"
#include "utf8.h"

/* A stand-in for the proxy's resolver: step 1 decides without one. */
#define LITERAL NULL

static char err[512], why[512], norm[NETPOLICY_HOST_BUFSIZE];

static struct netpolicy	*policy(const char *);
static bool		 reach(const struct netpolicy *, const char *,
    uint16_t, const char *);
static void		 assert_valid(const char *);

/* A policy from its JSON text; the test fails if it does not parse. */
static struct netpolicy *
policy(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, 0, &jerr);
	struct netpolicy *p;

	cr_assert_not_null(v, "bad test JSON %s: %s", text, jerr.text);
	p = netpolicy_parse_json(v, "sandbox.network", err, sizeof err);
	json_decref(v);
	cr_assert_not_null(p, "%s: %s", text, err);
	return p;
}

/*
 * What the proxy does: step 1 on the name; then step 2 on the literal, or
 * on the address the name resolved to. why holds the refusal.
 */
static bool
reach(const struct netpolicy *p, const char *host, uint16_t port,
    const char *resolved)
{
	struct netpolicy_addr a;
	bool is_ip;

	why[0] = '\0';
	if (!netpolicy_check_name(p, host, port, norm, sizeof norm, &is_ip,
	    &a, why, sizeof why)) {
		cr_assert_neq(why[0], '\0', "%s:%u refused without a why",
		    host, port);
		assert_valid(why);
		return false;
	}
	if (!is_ip) {
		cr_assert_not_null(resolved, "%s is a name; the row needs an "
		    "address", host);
		cr_assert(netpolicy_ip_parse(resolved, &a), "%s", resolved);
	}
	if (!netpolicy_check_addr(p, norm, &a, port, why, sizeof why)) {
		assert_valid(why);
		return false;
	}
	return true;
}

static void
assert_valid(const char *s)
{
	cr_assert(utf8_valid(s, strlen(s)), "not UTF-8: %s", s);
}

/* Every spelling of an address is that address, classified. */
Test(netpolicy, ip_spellings)
{
	static const struct {
		const char *host, *canon;
		int family;
		enum netpolicy_class cls;
	} rows[] = {
		{ "2130706433", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "0177.0.0.1", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "0x7f.0.0.1", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "0X7F.0.0.1", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "0x7f000001", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "127.1", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "127.0.1", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "127.0.0.1.", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "000000000000000177.0.0.1", "127.0.0.1", AF_INET,
		    NETPOLICY_LOOPBACK },
		{ "127.255.255.254", "127.255.255.254", AF_INET,
		    NETPOLICY_LOOPBACK },
		{ "[::ffff:127.0.0.1]", "127.0.0.1", AF_INET,
		    NETPOLICY_LOOPBACK },
		{ "[::ffff:7f00:1]", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "[::FFFF:7F00:1]", "127.0.0.1", AF_INET, NETPOLICY_LOOPBACK },
		{ "[::1]", "::1", AF_INET6, NETPOLICY_LOOPBACK },
		{ "::1", "::1", AF_INET6, NETPOLICY_LOOPBACK },
		{ "[0:0:0:0:0:0:0:1]", "::1", AF_INET6, NETPOLICY_LOOPBACK },
		{ "169.254.169.254", "169.254.169.254", AF_INET,
		    NETPOLICY_LINK_LOCAL },
		{ "0251.0376.0251.0376", "169.254.169.254", AF_INET,
		    NETPOLICY_LINK_LOCAL },
		{ "0xa9fea9fe", "169.254.169.254", AF_INET,
		    NETPOLICY_LINK_LOCAL },
		{ "2852039166", "169.254.169.254", AF_INET,
		    NETPOLICY_LINK_LOCAL },
		{ "[fe80::1]", "fe80::1", AF_INET6, NETPOLICY_LINK_LOCAL },
		{ "[fd00:ec2::254]", "fd00:ec2::254", AF_INET6,
		    NETPOLICY_PRIVATE },
		{ "[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", AF_INET6,
		    NETPOLICY_LINK_LOCAL },
		{ "[2002:7f00:1::]", "2002:7f00:1::", AF_INET6,
		    NETPOLICY_LOOPBACK },
		{ "[::127.0.0.1]", "::127.0.0.1", AF_INET6, NETPOLICY_RESERVED },
		{ "0.0.0.0", "0.0.0.0", AF_INET, NETPOLICY_UNSPECIFIED },
		{ "0", "0.0.0.0", AF_INET, NETPOLICY_UNSPECIFIED },
		{ "[::]", "::", AF_INET6, NETPOLICY_UNSPECIFIED },
		{ "100.64.0.1", "100.64.0.1", AF_INET, NETPOLICY_CGNAT },
		{ "100.127.255.255", "100.127.255.255", AF_INET,
		    NETPOLICY_CGNAT },
		{ "224.0.0.1", "224.0.0.1", AF_INET, NETPOLICY_MULTICAST },
		{ "[ff02::1]", "ff02::1", AF_INET6, NETPOLICY_MULTICAST },
		{ "255.255.255.255", "255.255.255.255", AF_INET,
		    NETPOLICY_BROADCAST },
		{ "240.0.0.1", "240.0.0.1", AF_INET, NETPOLICY_RESERVED },
		{ "10.1.2.3", "10.1.2.3", AF_INET, NETPOLICY_PRIVATE },
		{ "172.31.0.1", "172.31.0.1", AF_INET, NETPOLICY_PRIVATE },
		{ "192.168.1.1", "192.168.1.1", AF_INET, NETPOLICY_PRIVATE },
		{ "[fd00::1]", "fd00::1", AF_INET6, NETPOLICY_PRIVATE },
		/* Just outside the blocks. */
		{ "172.32.0.1", "172.32.0.1", AF_INET, NETPOLICY_PUBLIC },
		{ "100.128.0.1", "100.128.0.1", AF_INET, NETPOLICY_PUBLIC },
		{ "169.255.0.1", "169.255.0.1", AF_INET, NETPOLICY_PUBLIC },
		{ "1.0.0.0", "1.0.0.0", AF_INET, NETPOLICY_PUBLIC },
		{ "223.255.255.255", "223.255.255.255", AF_INET,
		    NETPOLICY_PUBLIC },
		{ "[2606:4700::1111]", "2606:4700::1111", AF_INET6,
		    NETPOLICY_PUBLIC },
		{ "[64:ff9b::808:808]", "64:ff9b::808:808", AF_INET6,
		    NETPOLICY_PUBLIC },
	};
	struct netpolicy *names = policy("{\"allow\": [\"example.org\", "
	    "\"*.example.org\", \"localhost.example.org\"]}");
	struct netpolicy *wide = policy("{\"allow\": [\"0.0.0.0/0:1-65535\", "
	    "\"[::]/0:1-65535\"]}");
	struct netpolicy *exact;
	struct netpolicy_addr a;
	char text[64], rule[128];
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cr_assert(netpolicy_ip_parse(rows[i].host, &a), "%s",
		    rows[i].host);
		netpolicy_addr_format(&a, text, sizeof text);
		cr_assert_str_eq(text, rows[i].canon, "%s", rows[i].host);
		cr_assert_eq(a.family, rows[i].family, "%s", rows[i].host);
		cr_assert_eq(netpolicy_classify(&a), rows[i].cls, "%s is %s",
		    rows[i].host, netpolicy_class_name(netpolicy_classify(&a)));
		cr_assert(netpolicy_host_normalize(rows[i].host, norm,
		    sizeof norm, err, sizeof err), "%s: %s", rows[i].host, err);
		cr_assert_str_eq(norm, rows[i].canon);
		/* Name rules never match an address. */
		cr_assert_not(reach(names, rows[i].host, 443, LITERAL), "%s",
		    rows[i].host);
		cr_assert(strstr(why, "no rule of sandbox.network.allow names "
		    "it") != NULL, "%s", why);
		/* A CIDR wider than its block does not name a special one. */
		cr_assert_eq(reach(wide, rows[i].host, 443, LITERAL),
		    rows[i].cls == NETPOLICY_PUBLIC, "%s: %s", rows[i].host,
		    why);
		/* A rule naming the address does. */
		snprintf(rule, sizeof rule, "{\"allow\": [\"%s%s%s\"]}",
		    rows[i].family == AF_INET6 ? "[" : "", rows[i].canon,
		    rows[i].family == AF_INET6 ? "]" : "");
		exact = policy(rule);
		cr_assert(reach(exact, rows[i].host, 443, LITERAL), "%s: %s",
		    rows[i].host, why);
		cr_assert_not(reach(exact, rows[i].host, 22, LITERAL));
		netpolicy_free(exact);
	}
	netpolicy_free(names);
	netpolicy_free(wide);
}

/* What inet_aton refuses is no address, and no host name either. */
Test(netpolicy, near_addresses_are_refused)
{
	static const char *const rows[] = {
		"1.2.3.4.5", "256.0.0.1", "0x100.0.0.1", "08.0.0.1",
		"1.2.3.0x", "4294967296", "0x100000000", "127.0.0.1 ",
		"127.0.0.1..", "fe80::1%eth0", "[127.0.0.1]", "[::1", "::1]",
		"1.2.3.-4", "+1.2.3.4", "1..2", "0x", "[]", "[::1]:80",
	};
	struct netpolicy *p = policy("{\"allow\": [\"*.test\", "
	    "\"0.0.0.0/0\"]}");
	bool is_ip;
	struct netpolicy_addr a;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cr_assert_not(netpolicy_ip_parse(rows[i], &a), "%s", rows[i]);
		cr_assert_not(netpolicy_host_normalize(rows[i], norm,
		    sizeof norm, err, sizeof err), "%s", rows[i]);
		cr_assert_not(netpolicy_check_name(p, rows[i], 443, norm,
		    sizeof norm, &is_ip, &a, why, sizeof why), "%s", rows[i]);
		cr_assert(strstr(why, "is not a host name") != NULL, "%s", why);
		cr_assert_str_eq(norm, "");
	}
	netpolicy_free(p);
}

/* Wildcards are whole labels, and never the domain itself. */
Test(netpolicy, wildcard_boundaries)
{
	static const struct {
		const char *host, *norm;
		bool allowed;
	} rows[] = {
		{ "files.pythonhosted.org", "files.pythonhosted.org", true },
		{ "evilpythonhosted.org", "evilpythonhosted.org", false },
		{ "pythonhosted.org", "pythonhosted.org", false },
		{ "pythonhosted.org.", "pythonhosted.org", false },
		{ "files.pythonhosted.org.", "files.pythonhosted.org", true },
		{ "FILES.PythonHosted.ORG", "files.pythonhosted.org", true },
		{ "a.b.pythonhosted.org", "a.b.pythonhosted.org", true },
		{ "files.pythonhosted.org.evil.test",
		    "files.pythonhosted.org.evil.test", false },
		{ "files-pythonhosted.org", "files-pythonhosted.org", false },
		{ "pythonhosted.org.evil.test", "pythonhosted.org.evil.test",
		    false },
	};
	struct netpolicy *p = policy("{\"allow\": [\"*.pythonhosted.org\"]}");
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cr_assert_eq(reach(p, rows[i].host, 443, "151.101.0.223"),
		    rows[i].allowed, "%s: %s", rows[i].host, why);
		cr_assert_str_eq(norm, rows[i].norm);
	}
	cr_assert_not(reach(p, "files.pythonhosted.org..", 443, NULL));
	cr_assert_not(reach(p, "evil.test", 443, NULL));
	cr_assert_str_eq(why, "evil.test:443 is not allowed: no rule of "
	    "sandbox.network.allow matches it (add \"evil.test\" or "
	    "\"evil.test:443\")");
	netpolicy_free(p);
}

Test(netpolicy, deny_wins)
{
	struct netpolicy *p = policy("{\"allow\": [\"files.x.org\", "
	    "\"api.x.org\", \"*.y.org:1-65535\", \"registry.test\", "
	    "\"127.0.0.0/8\"], \"deny\": [\"*.x.org\", \"*.y.org:22\", "
	    "\"203.0.113.0/24\", \"localhost\"]}");

	cr_assert_not(reach(p, "files.x.org", 443, NULL));
	cr_assert_str_eq(why, "files.x.org:443 is refused by the deny rule "
	    "\"*.x.org\"");
	cr_assert_not(reach(p, "API.x.org.", 80, NULL));
	/* A deny rule's port limits it. */
	cr_assert(reach(p, "git.y.org", 443, "198.51.100.7"), "%s", why);
	cr_assert_not(reach(p, "git.y.org", 22, NULL));
	cr_assert_str_eq(why, "git.y.org:22 is refused by the deny rule "
	    "\"*.y.org:22\"");
	/* Deny CIDRs hold for what a name resolves to. */
	cr_assert(reach(p, "registry.test", 443, "198.51.100.7"), "%s", why);
	cr_assert_not(reach(p, "registry.test", 443, "203.0.113.9"));
	cr_assert_str_eq(why, "registry.test:443 resolves to 203.0.113.9, "
	    "refused by the deny rule \"203.0.113.0/24\"");
	/* And for a literal, in any spelling. */
	cr_assert_not(reach(p, "0xcb007109", 443, LITERAL));
	cr_assert_str_eq(why, "203.0.113.9:443 (written \"0xcb007109\") is "
	    "refused by the deny rule \"203.0.113.0/24\"");
	/* A deny "localhost" covers every loopback address. */
	cr_assert_not(reach(p, "127.0.0.1", 443, LITERAL));
	cr_assert_str_eq(why, "127.0.0.1:443 is refused by the deny rule "
	    "\"localhost\"");
	netpolicy_free(p);
}

/* No port means 80 and 443; a port or range means exactly those. */
Test(netpolicy, ports)
{
	static const struct {
		const char *host;
		uint16_t port;
		bool allowed;
	} rows[] = {
		{ "a.test", 80, true }, { "a.test", 443, true },
		{ "a.test", 8080, false }, { "a.test", 444, false },
		{ "a.test", 1, false }, { "a.test", 65535, false },
		{ "b.test", 8080, true }, { "b.test", 443, false },
		{ "b.test", 80, false }, { "b.test", 8081, false },
		{ "c.test", 8000, true }, { "c.test", 8050, true },
		{ "c.test", 8100, true }, { "c.test", 7999, false },
		{ "c.test", 8101, false }, { "c.test", 443, false },
		{ "d.test", 1, true }, { "d.test", 65535, true },
		{ "a.test", 0, false }, { "d.test", 0, false },
	};
	struct netpolicy *p = policy("{\"allow\": [\"a.test\", "
	    "\"b.test:8080\", \"c.test:8000-8100\", \"d.test:1-65535\"]}");
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
		cr_assert_eq(reach(p, rows[i].host, rows[i].port,
		    "198.51.100.7"), rows[i].allowed, "%s:%u: %s",
		    rows[i].host, rows[i].port, why);
	cr_assert_not(reach(p, "a.test", 8080, NULL));
	cr_assert_str_eq(why, "a.test:8080 is not allowed: the allow rule "
	    "\"a.test\" does not cover port 8080 (add \"a.test:8080\")");
	cr_assert_not(reach(p, "a.test", 0, NULL));
	cr_assert_str_eq(why, "a.test:0 is not allowed: port 0 is no port "
	    "one can connect to");
	netpolicy_free(p);
}

/* RFC 3492 section 7.1, samples (A), (B), (L), (S), and one of ours. */
Test(netpolicy, punycode_vectors)
{
	static const uint32_t arabic[] = { 0x644, 0x64a, 0x647, 0x645, 0x627,
	    0x628, 0x62a, 0x643, 0x644, 0x645, 0x648, 0x634, 0x639, 0x631,
	    0x628, 0x64a, 0x61f };
	static const uint32_t chinese[] = { 0x4ed6, 0x4eec, 0x4e3a, 0x4ec0,
	    0x4e48, 0x4e0d, 0x8bf4, 0x4e2d, 0x6587 };
	static const uint32_t mixed[] = { 0x33, 0x5e74, 0x42, 0x7d44, 0x91d1,
	    0x516b, 0x5148, 0x751f };
	static const uint32_t basic[] = { '-', '>', ' ', '$', '1', '.', '0',
	    '0', ' ', '<', '-' };
	static const uint32_t buecher[] = { 'b', 0xfc, 'c', 'h', 'e', 'r' };
	char out[64];

	cr_assert(punycode_encode(arabic, 17, out, sizeof out));
	cr_assert_str_eq(out, "egbpdaj6bu4bxfgehfvwxn");
	cr_assert(punycode_encode(chinese, 9, out, sizeof out));
	cr_assert_str_eq(out, "ihqwcrb4cv8a8dqg056pqjye");
	cr_assert(punycode_encode(mixed, 8, out, sizeof out));
	cr_assert_str_eq(out, "3B-ww4c5e180e575a65lsy2b");
	cr_assert(punycode_encode(basic, 11, out, sizeof out));
	cr_assert_str_eq(out, "-> $1.00 <--");
	cr_assert(punycode_encode(buecher, 6, out, sizeof out));
	cr_assert_str_eq(out, "bcher-kva");
	cr_assert_not(punycode_encode(chinese, 9, out, 24));
	cr_assert(punycode_encode(chinese, 9, out, 25));
}

/* A rule in Unicode matches the punycode target and the other way round. */
Test(netpolicy, idn)
{
	struct netpolicy *uni = policy("{\"allow\": [\"b\xc3\xbc" "cher."
	    "example\"]}");
	struct netpolicy *puny = policy("{\"allow\": [\"XN--bcher-kva."
	    "example\"]}");
	struct netpolicy *wild = policy("{\"allow\": [\"*.m\xc3\xbc" "nchen."
	    "test\"]}");
	json_t *j;

	cr_assert(netpolicy_host_normalize("b\xc3\xbc" "cher.example", norm,
	    sizeof norm, err, sizeof err), "%s", err);
	cr_assert_str_eq(norm, "xn--bcher-kva.example");
	cr_assert(netpolicy_host_normalize("B\xc3\xbc" "CHER.Example.", norm,
	    sizeof norm, err, sizeof err), "%s", err);
	cr_assert_str_eq(norm, "xn--bcher-kva.example");
	/* Only ASCII is case-folded: U+00DC is not U+00FC. */
	cr_assert(netpolicy_host_normalize("b\xc3\x9c" "cher.example", norm,
	    sizeof norm, err, sizeof err), "%s", err);
	cr_assert_str_neq(norm, "xn--bcher-kva.example");

	cr_assert(reach(uni, "xn--bcher-kva.example", 443, "198.51.100.7"),
	    "%s", why);
	cr_assert(reach(uni, "b\xc3\xbc" "cher.example", 443, "198.51.100.7"),
	    "%s", why);
	cr_assert(reach(puny, "b\xc3\xbc" "cher.example", 443,
	    "198.51.100.7"), "%s", why);
	cr_assert(reach(puny, "Xn--Bcher-Kva.Example", 443, "198.51.100.7"),
	    "%s", why);
	cr_assert_not(reach(uni, "bucher.example", 443, NULL));
	cr_assert(reach(wild, "a.xn--mnchen-3ya.test", 443, "198.51.100.7"),
	    "%s", why);
	cr_assert_not(reach(wild, "xn--mnchen-3ya.test", 443, NULL));
	j = netpolicy_json(uni);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j,
	    "allow"), 0)), "xn--bcher-kva.example");
	json_decref(j);
	/* Invalid UTF-8 is no name; the message is UTF-8 all the same. */
	cr_assert_not(reach(uni, "b\xfc" "cher.example", 443, NULL));
	cr_assert(strstr(why, "not valid UTF-8") != NULL, "%s", why);
	cr_assert(strstr(why, "\"b\\xfccher.example\"") != NULL, "%s", why);
	netpolicy_free(uni);
	netpolicy_free(puny);
	netpolicy_free(wild);
}

/* An allowed name that resolves to a special address is refused. */
Test(netpolicy, rebinding)
{
	static const struct {
		const char *resolved;
		bool allowed;
	} rows[] = {
		{ "127.0.0.1", false }, { "127.5.6.7", false },
		{ "::1", false }, { "::ffff:127.0.0.1", false },
		{ "169.254.169.254", false }, { "10.0.0.1", false },
		{ "192.168.0.10", false }, { "172.16.5.5", false },
		{ "100.64.1.1", false }, { "fe80::1", false },
		{ "fd12::1", false }, { "0.0.0.0", false }, { "::", false },
		{ "224.0.0.251", false }, { "255.255.255.255", false },
		{ "64:ff9b::7f00:1", false }, { "2002:a00:1::", false },
		{ "93.184.216.34", true }, { "2606:2800:220:1::1", true },
	};
	struct netpolicy *p = policy("{\"allow\": [\"registry.test\", "
	    "\"localhost:3000\", \"rebind.test:3000\"]}");
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
		cr_assert_eq(reach(p, "registry.test", 443, rows[i].resolved),
		    rows[i].allowed, "%s: %s", rows[i].resolved, why);
	cr_assert_not(reach(p, "registry.test", 443, "127.0.0.1"));
	cr_assert_str_eq(why, "registry.test:443 resolves to 127.0.0.1, a "
	    "loopback address: refused unless a rule names that address "
	    "(add \"127.0.0.1\" or \"127.0.0.1:443\")");
	cr_assert_not(reach(p, "registry.test", 443, "::"));
	cr_assert_str_eq(why, "registry.test:443 resolves to ::, an "
	    "unspecified address: refused unless a rule names that address "
	    "(add \"[::]\" or \"[::]:443\")");

	/* localhost:3000 reaches the daemon's loopback there, and only there. */
	cr_assert(reach(p, "localhost", 3000, "127.0.0.1"), "%s", why);
	cr_assert(reach(p, "LOCALHOST.", 3000, "::1"), "%s", why);
	cr_assert(reach(p, "127.0.0.1", 3000, LITERAL), "%s", why);
	cr_assert(reach(p, "[::1]", 3000, LITERAL), "%s", why);
	cr_assert_not(reach(p, "localhost", 3001, NULL));
	cr_assert_not(reach(p, "127.0.0.1", 3001, LITERAL));
	cr_assert_not(reach(p, "localhost", 3000, "10.0.0.1"));
	cr_assert_not(reach(p, "rebind.test", 3000, "127.0.0.1"));
	cr_assert_not(reach(p, "localhost.rebind.test", 3000, NULL));
	netpolicy_free(p);
}

/* The metadata service, however it is reached. */
Test(netpolicy, metadata)
{
	struct netpolicy *p = policy("{\"allow\": [\"*.internal\", "
	    "\"0.0.0.0/0\", \"[::]/0\", \"169.254.0.0/15\"]}");
	struct netpolicy *exact = policy("{\"allow\": [\"169.254.169.254:80\","
	    " \"metadata.google.internal:80\"]}");

	cr_assert_not(reach(p, "metadata.google.internal", 80,
	    "169.254.169.254"));
	cr_assert_str_eq(why, "metadata.google.internal:80 resolves to "
	    "169.254.169.254, a link-local (cloud metadata) address: refused "
	    "unless a rule names that address (add \"169.254.169.254\" or "
	    "\"169.254.169.254:80\"; \"0.0.0.0/0\" does not name it: it is "
	    "wider than the link-local (cloud metadata) block)");
	cr_assert_not(reach(p, "169.254.169.254", 80, LITERAL));
	cr_assert_not(reach(p, "0251.0376.0251.0376", 80, LITERAL));
	cr_assert_not(reach(p, "0xa9fea9fe", 80, LITERAL));
	cr_assert_not(reach(p, "[::ffff:169.254.169.254]", 80, LITERAL));
	cr_assert_not(reach(p, "[64:ff9b::a9fe:a9fe]", 80, LITERAL));
	cr_assert_not(reach(p, "[fe80::a9fe:a9fe]", 80, LITERAL));
	cr_assert_not(reach(p, "[fd00:ec2::254]", 80, LITERAL));
	cr_assert(reach(p, "198.51.100.7", 80, LITERAL), "%s", why);

	cr_assert(reach(exact, "169.254.169.254", 80, LITERAL), "%s", why);
	cr_assert(reach(exact, "0xa9fea9fe", 80, LITERAL), "%s", why);
	cr_assert(reach(exact, "metadata.google.internal", 80,
	    "169.254.169.254"), "%s", why);
	cr_assert_not(reach(exact, "169.254.169.254", 443, LITERAL));
	cr_assert_not(reach(exact, "169.254.169.253", 80, LITERAL));
	cr_assert_not(reach(exact, "metadata.google.internal", 80,
	    "169.254.169.253"));
	netpolicy_free(p);
	netpolicy_free(exact);
}

/* A CIDR inside a private block allows it, with its port. */
Test(netpolicy, cidr_allows_private)
{
	struct netpolicy *p = policy("{\"allow\": [\"10.0.0.0/8\", "
	    "\"db.test:5432\", \"172.16.0.0/12:5432\", \"[fd00::]/8\", "
	    "\"db6.test\", \"[::ffff:192.168.7.0]/120\"]}");

	cr_assert(reach(p, "10.1.2.3", 443, LITERAL), "%s", why);
	cr_assert(reach(p, "012.1.2.3", 80, LITERAL), "%s", why);
	cr_assert_not(reach(p, "10.1.2.3", 5432, LITERAL));
	cr_assert(reach(p, "db.test", 5432, "172.20.0.1"), "%s", why);
	cr_assert_not(reach(p, "db.test", 5432, "192.168.1.1"));
	cr_assert_not(reach(p, "db.test", 5432, "10.0.0.1"));
	cr_assert(reach(p, "db6.test", 443, "fd00::1"), "%s", why);
	cr_assert_not(reach(p, "db6.test", 443, "fe80::1"));
	cr_assert(reach(p, "192.168.7.9", 443, LITERAL), "%s", why);
	cr_assert_not(reach(p, "192.168.8.9", 443, LITERAL));
	cr_assert_str_eq(why, "192.168.8.9:443 is not allowed: an address is "
	    "matched only by IP and CIDR rules, and no rule of "
	    "sandbox.network.allow names it (add \"192.168.8.9\" or "
	    "\"192.168.8.9:443\")");
	netpolicy_free(p);
}

/* --network-allow-max: which rules lie inside which. */
Test(netpolicy, within)
{
	static const struct {
		const char *rule, *max;
		bool inside;
	} rows[] = {
		{ "*.npmjs.org", "*.npmjs.org", true },
		{ "registry.npmjs.org", "*.npmjs.org", true },
		{ "a.b.npmjs.org", "*.npmjs.org", true },
		{ "*.a.npmjs.org", "*.npmjs.org", true },
		{ "npmjs.org", "*.npmjs.org", false },
		{ "*.org", "*.npmjs.org", false },
		{ "evilnpmjs.org", "*.npmjs.org", false },
		{ "registry.npmjs.org", "registry.npmjs.org", true },
		{ "*.npmjs.org", "registry.npmjs.org", false },
		{ "registry.npmjs.org:443", "*.npmjs.org", true },
		{ "registry.npmjs.org:8080", "*.npmjs.org", false },
		{ "registry.npmjs.org", "*.npmjs.org:443", false },
		{ "x.test", "x.test:1-65535", true },
		{ "x.test", "x.test:80-443", true },
		{ "x.test:80-443", "x.test", false },
		{ "x.test:8000-8100", "x.test:8000-9000", true },
		{ "x.test:8000-9000", "x.test:8000-9000", true },
		{ "x.test:7000-8100", "x.test:8000-9000", false },
		{ "x.test:8100-9001", "x.test:8000-9000", false },
		{ "10.1.0.0/16", "10.0.0.0/8", true },
		{ "10.1.2.3", "10.0.0.0/8", true },
		{ "10.0.0.0/8", "10.0.0.0/8", true },
		{ "10.0.0.0/8", "10.1.0.0/16", false },
		{ "11.0.0.0/8", "10.0.0.0/8", false },
		{ "[2001:db8:1::]/48", "[2001:db8::]/32", true },
		{ "[2001:db9::]/48", "[2001:db8::]/32", false },
		{ "[::ffff:10.0.0.1]", "10.0.0.0/8", true },
		{ "10.0.0.1", "[::]/0", false },
		{ "localhost", "127.0.0.0/8", false },
		{ "localhost", "localhost", true },
		{ "10.0.0.1", "*.test", false },
	};
	struct netpolicy_rule in, out;
	struct netpolicy *p, *max;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cr_assert(netpolicy_rule_parse(rows[i].rule, &in, err,
		    sizeof err), "%s", err);
		cr_assert(netpolicy_rule_parse(rows[i].max, &out, err,
		    sizeof err), "%s", err);
		cr_assert_eq(netpolicy_rule_within(&in, &out), rows[i].inside,
		    "%s in %s", rows[i].rule, rows[i].max);
	}
	p = policy("{\"allow\": [\"registry.npmjs.org\", \"*.org\"], "
	    "\"deny\": [\"*.com\"]}");
	max = policy("{\"allow\": [\"*.npmjs.org\", \"10.0.0.0/8\"]}");
	cr_assert_not(netpolicy_within(p, max, err, sizeof err));
	cr_assert_str_eq(err, "the allow rule \"*.org\" is not inside any "
	    "rule the operator allows (--network-allow-max)");
	cr_assert(netpolicy_within(p, NULL, err, sizeof err));
	cr_assert(netpolicy_within(max, max, err, sizeof err));
	netpolicy_free(p);
	p = policy("{\"allow\": [\"registry.npmjs.org\"], \"deny\": "
	    "[\"*.com\"]}");
	/* Deny rules are not bounded: they only take away. */
	cr_assert(netpolicy_within(p, max, err, sizeof err), "%s", err);
	netpolicy_free(p);
	netpolicy_free(max);
}

/* Each malformed rule refused, saying why. */
Test(netpolicy, malformed_rules)
{
	static char long_name[301], long_label[80], long_ok[260];
	static const struct {
		const char *rule, *reason;
	} rows[] = {
		{ "", "this is empty" },
		{ "*", "a wildcard is a whole first label" },
		{ "*.", "a wildcard is a whole first label" },
		{ "*:443", "a wildcard is a whole first label" },
		{ "a..b", "empty label" },
		{ ".a.b", "empty label" },
		{ "a.b..", "empty label" },
		{ "-a.b", "a label starts or ends with '-'" },
		{ "a-.b", "a label starts or ends with '-'" },
		{ ":80", "it names no host" },
		{ "host:0", "a port is from 1 to 65535" },
		{ "host:70000", "a port is from 1 to 65535" },
		{ "host:65536", "a port is from 1 to 65535" },
		{ "host:0000080", "a port is from 1 to 65535" },
		{ "host:80-20", "the port range 80-20 ends before it starts" },
		{ "host:", "a port is a number" },
		{ "host:80-", "a port is a number" },
		{ "host:-80", "a port is a number" },
		{ "host:8a", "a port is a number" },
		{ "host:80-90-100", "a port is a number" },
		{ "host: 80", "a port is a number" },
		{ "b\xfc.test", "not valid UTF-8" },
		{ "b\xc3.test", "not valid UTF-8" },
		{ "[::1", "'[' has no closing ']'" },
		{ "[::1]x", "after ']' comes a prefix" },
		{ "[1.2.3.4]", "brackets hold an IPv6 address" },
		{ "[]", "brackets hold an IPv6 address" },
		{ "1.2.3.4/33", "the prefix /33 is longer than the address's 32 "
		    "bits" },
		{ "[::]/129", "the prefix /129 is longer" },
		{ "1.2.3.4/", "a CIDR prefix is a number" },
		{ "1.2.3.4/x", "a CIDR prefix is a number" },
		{ "10.0.0.1/8", "bits set past its /8 prefix (the network is "
		    "10.0.0.0/8)" },
		{ "[2001:db8::1]/32", "(the network is [2001:db8::]/32)" },
		{ "[::ffff:10.0.0.0]/80", "written as IPv4" },
		{ "127.1", "four decimal numbers (\"127.0.0.1\")" },
		{ "0x7f.0.0.1", "four decimal numbers (\"127.0.0.1\")" },
		{ "010.0.0.1", "four decimal numbers (\"8.0.0.1\")" },
		{ "10/8", "four decimal numbers (\"0.0.0.10\")" },
		{ "foo/8", "a CIDR is an address and a prefix" },
		{ "::1", "write an IPv6 address in brackets" },
		{ "2001:db8::1:443", "write an IPv6 address in brackets" },
		{ "a.*.b", "'*' may only be the whole first label" },
		{ "*foo.bar", "'*' may only be the whole first label" },
		{ "*.*.bar", "'*' may only be the whole first label" },
		{ "*.10.0.0.1", "a wildcard covers names" },
		{ "foo_bar.test", "'_' is not allowed in a host name" },
		{ "foo bar.test", "' ' is not allowed in a host name" },
		{ "a\tb.test", "byte 0x09 is not allowed" },
		{ "http://a.test", "not a URL" },
		{ "a/b.test", "a CIDR is an address and a prefix" },
		{ "a,b.test", "',' is not allowed" },
		{ "1.2.3.4.5", "its last label is a number" },
		{ "a.0x1f", "its last label is a number" },
		{ "a.123", "its last label is a number" },
		{ long_name, "a rule is at most 255 bytes" },
		{ long_label, "a label longer than 63 bytes" },
		{ long_ok, "it is longer than 253 bytes" },
	};
	struct netpolicy_rule r;
	char q[80];
	size_t i;

	memset(long_name, 'a', 300);
	memset(long_label, 'a', 64);
	memcpy(long_label + 64, ".test", 6);
	/* Labels of 63 bytes cut at 254: a rule that fits, a name too long. */
	for (i = 0; i < 4; i++) {
		memset(long_ok + i * 64, 'a', 63);
		long_ok[i * 64 + 63] = '.';
	}
	memcpy(long_ok + 256, "ab", 3);
	long_ok[254] = '\0';
	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		err[0] = '\0';
		cr_assert_not(netpolicy_rule_parse(rows[i].rule, &r, err,
		    sizeof err), "%s was accepted", rows[i].rule);
		cr_assert(strstr(err, rows[i].reason) != NULL, "%s: got %s",
		    rows[i].rule, err);
		assert_valid(err);
		/* The message quotes the rule (or its first 64 bytes). */
		snprintf(q, sizeof q, "\"%.20s", rows[i].rule);
		if (strspn(rows[i].rule, "abcdefghijklmnopqrstuvwxyz"
		    "0123456789.:-*[]/_ ") == strlen(rows[i].rule))
			cr_assert_eq(strncmp(err, q, strlen(q)), 0, "%s", err);
	}
	/* And the longest that fit. */
	long_ok[252] = '\0';
	cr_assert(netpolicy_rule_parse(long_ok, &r, err, sizeof err), "%s",
	    err);
	cr_assert_eq(strlen(r.name), 252);
}

/* Well-formed rules and their normal text. */
Test(netpolicy, rule_text)
{
	static const struct {
		const char *rule, *text;
		enum netpolicy_rule_kind kind;
	} rows[] = {
		{ "Registry.NPMJS.org.", "registry.npmjs.org",
		    NETPOLICY_RULE_NAME },
		{ "*.PythonHosted.org", "*.pythonhosted.org",
		    NETPOLICY_RULE_WILDCARD },
		{ "localhost:3000", "localhost:3000", NETPOLICY_RULE_NAME },
		{ "a.test:8000-8100", "a.test:8000-8100", NETPOLICY_RULE_NAME },
		{ "a.test:443-443", "a.test:443", NETPOLICY_RULE_NAME },
		{ "a.test:080", "a.test:80", NETPOLICY_RULE_NAME },
		{ "198.18.0.10", "198.18.0.10", NETPOLICY_RULE_ADDR },
		{ "10.0.0.0/8:443", "10.0.0.0/8:443", NETPOLICY_RULE_ADDR },
		{ "1.2.3.4/32", "1.2.3.4", NETPOLICY_RULE_ADDR },
		{ "0.0.0.0/0", "0.0.0.0/0", NETPOLICY_RULE_ADDR },
		{ "[2001:DB8::1]", "[2001:db8::1]", NETPOLICY_RULE_ADDR },
		{ "[2001:db8::]/32:8443", "[2001:db8::]/32:8443",
		    NETPOLICY_RULE_ADDR },
		{ "[::1]:3000", "[::1]:3000", NETPOLICY_RULE_ADDR },
		{ "[::ffff:10.0.0.1]", "10.0.0.1", NETPOLICY_RULE_ADDR },
		{ "[::ffff:10.0.0.0]/104", "10.0.0.0/8", NETPOLICY_RULE_ADDR },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example",
		    NETPOLICY_RULE_NAME },
		{ "a-b.c-d.test", "a-b.c-d.test", NETPOLICY_RULE_NAME },
		{ "1a.test", "1a.test", NETPOLICY_RULE_NAME },
		{ "123.test", "123.test", NETPOLICY_RULE_NAME },
		{ "a.0xfoo", "a.0xfoo", NETPOLICY_RULE_NAME },
	};
	struct netpolicy_rule r;
	char text[NETPOLICY_RULE_MAX + 32];
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		cr_assert(netpolicy_rule_parse(rows[i].rule, &r, err,
		    sizeof err), "%s: %s", rows[i].rule, err);
		netpolicy_rule_format(&r, text, sizeof text);
		cr_assert_str_eq(text, rows[i].text);
		cr_assert_eq(r.kind, rows[i].kind, "%s", rows[i].rule);
	}
}

/* Names at DNS's limits, and what is no name at all. */
Test(netpolicy, host_normalize)
{
	static const struct {
		const char *in, *out;
	} ok[] = {
		{ "Example.COM.", "example.com" },
		{ "[::1]", "::1" },
		{ "[::ffff:127.0.0.1]", "127.0.0.1" },
		{ "xn--BCHER-kva.example", "xn--bcher-kva.example" },
		{ "localhost", "localhost" },
		{ "a", "a" },
	};
	static const char *const bad[] = { "", ".", "..", "a..b", "*.a",
		"*", "a b", "a/b", "a@b.test", "\xff", "a.-b", "[a.test]" };
	char name[300];
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		cr_assert(netpolicy_host_normalize(ok[i].in, norm, sizeof norm,
		    err, sizeof err), "%s: %s", ok[i].in, err);
		cr_assert_str_eq(norm, ok[i].out);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_not(netpolicy_host_normalize(bad[i], norm,
		    sizeof norm, err, sizeof err), "%s", bad[i]);
		cr_assert(strstr(err, "is not a host name: ") != NULL, "%s",
		    err);
		assert_valid(err);
	}
	/* 253 bytes pass, with or without the trailing dot; 254 do not. */
	memset(name, 0, sizeof name);
	for (i = 0; i < 4; i++) {
		memset(name + i * 64, 'a', 63);
		name[i * 64 + 63] = '.';
	}
	memset(name + 253, 0, sizeof name - 253);
	cr_assert_eq(strlen(name), 253);
	cr_assert(netpolicy_host_normalize(name, norm, sizeof norm, err,
	    sizeof err), "%s", err);
	cr_assert_eq(strlen(norm), 253);
	name[253] = '.';
	cr_assert(netpolicy_host_normalize(name, norm, sizeof norm, err,
	    sizeof err), "%s", err);
	cr_assert_eq(strlen(norm), 253);
	name[253] = 'a';
	cr_assert_not(netpolicy_host_normalize(name, norm, sizeof norm, err,
	    sizeof err));
	cr_assert(strstr(err, "longer than 253 bytes") != NULL, "%s", err);
	/* An output buffer too small is an error, not an overflow. */
	cr_assert_not(netpolicy_host_normalize("example.com", norm, 5, err,
	    sizeof err));
}

/* Long hostile input: messages stay short and valid UTF-8. */
Test(netpolicy, hostile_input_gives_utf8_errors)
{
	static const char *const units[] = { "\xc3\xa9", "\xe2\x82\xac",
		"\xf0\x9f\x98\x80", "\xff", "\xe2\x82", "\"\\\n" };
	struct netpolicy *p = policy("{\"allow\": [\"*.test\"]}");
	struct netpolicy_rule r;
	struct netpolicy_addr a;
	char s[4200], small[37];
	size_t u, len, ulen, n;
	bool is_ip, ok;

	for (u = 0; u < sizeof units / sizeof units[0]; u++)
		for (n = 1; n < 1400; n = n * 3 + 1) {
			ulen = strlen(units[u]);
			for (len = 0; len / ulen < n && len + ulen < 4100;
			    len += ulen)
				memcpy(s + len, units[u], ulen);
			/* Some end in a name that would otherwise pass. */
			memcpy(s + len, ".test", 6);
			err[0] = why[0] = small[0] = '\0';
			ok = netpolicy_rule_parse(s, &r, err, sizeof err);
			cr_assert(!ok || n < 60, "unit %zu x %zu", u, n);
			assert_valid(err);
			cr_assert_lt(strlen(err), 400, "%s", err);
			ok = netpolicy_host_normalize(s, norm, sizeof norm, err,
			    sizeof err);
			cr_assert(ok || err[0] == '"', "%s", err);
			assert_valid(err);
			cr_assert_lt(strlen(err), 400, "%s", err);
			if (!netpolicy_check_name(p, s, 443, norm, sizeof norm,
			    &is_ip, &a, why, sizeof why))
				cr_assert_neq(why[0], '\0');
			assert_valid(why);
			netpolicy_host_normalize(s, norm, sizeof norm, small,
			    sizeof small);
			assert_valid(small);
		}
	/* A name of 300 two-byte characters: too long once converted. */
	for (len = 0; len < 600; len += 2)
		memcpy(s + len, "\xc3\xa9", 2);
	s[len] = '\0';
	cr_assert_not(netpolicy_host_normalize(s, norm, sizeof norm, err,
	    sizeof err));
	cr_assert(strstr(err, "longer than 63 bytes once converted to "
	    "punycode") != NULL, "%s", err);
	cr_assert(strstr(err, "...\"") != NULL, "%s", err);
	assert_valid(err);
	netpolicy_free(p);
}

/* The JSON form: errors name the field; output is normal and sorted. */
Test(netpolicy, json)
{
	static const struct {
		const char *json, *field, *err;
	} bad[] = {
		{ "{\"allow\": [\"ok.test\", \"a..b\"]}", "sandbox.network",
		    "sandbox.network.allow[1]: \"a..b\": it has an empty label" },
		{ "{\"deny\": [\"[::1\"]}", "tools[2].sandbox.network",
		    "tools[2].sandbox.network.deny[0]: \"[::1\": '[' has no "
		    "closing ']'" },
		{ "{\"allow\": \"x.test\"}", "sandbox.network",
		    "sandbox.network.allow: must be an array of rules" },
		{ "{\"allow\": [1]}", "sandbox.network",
		    "sandbox.network.allow[0]: must be a string" },
		{ "{\"allow\": [\"a\\u0000b\"]}", "sandbox.network",
		    "sandbox.network.allow[0]: must not contain NUL" },
		{ "{\"alow\": []}", "sandbox.network",
		    "sandbox.network: unknown field \"alow\" (known: allow, "
		    "deny)" },
		{ "[]", "sandbox.network", "sandbox.network: must be an object "
		    "{\"allow\": [RULE...], \"deny\": [RULE...]}" },
		{ "{\"allow\": [\"*\"]}", NULL, "sandbox.network.allow[0]: "
		    "\"*\": a wildcard" },
	};
	json_error_t jerr;
	json_t *v, *arr, *out;
	struct netpolicy *p, *q, *m;
	char *text;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = json_loads(bad[i].json, JSON_ALLOW_NUL | JSON_DECODE_ANY,
		    &jerr);
		cr_assert_not_null(v, "%s", bad[i].json);
		err[0] = '\0';
		cr_assert_null(netpolicy_parse_json(v, bad[i].field, err,
		    sizeof err), "%s", bad[i].json);
		cr_assert_eq(strncmp(err, bad[i].err, strlen(bad[i].err)), 0,
		    "%s: got %s", bad[i].json, err);
		json_decref(v);
	}
	/* At most 256 rules a list. */
	arr = json_array();
	for (i = 0; i < NETPOLICY_LIST_MAX + 1; i++)
		json_array_append_new(arr, json_sprintf("h%zu.test", i));
	v = json_pack("{s:o}", "allow", arr);
	cr_assert_null(netpolicy_parse_json(v, "sandbox.network", err,
	    sizeof err));
	cr_assert_str_eq(err, "sandbox.network.allow: at most 256 rules (it "
	    "has 257)");
	json_array_remove(arr, 0);
	p = netpolicy_parse_json(v, "sandbox.network", err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	netpolicy_free(p);
	json_decref(v);

	p = policy("{\"allow\": [\"B\xc3\xbc" "cher.example\", \"*.X.org:443\", "
	    "\"10.0.0.0/8\", \"[::ffff:10.0.0.0]/104\", \"a.test\", "
	    "\"A.TEST.\"], \"deny\": null}");
	out = netpolicy_json(p);
	text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(text, "{\"allow\":[\"*.x.org:443\",\"10.0.0.0/8\","
	    "\"a.test\",\"xn--bcher-kva.example\"],\"deny\":[]}");
	/* What it writes it reads back as the same policy. */
	q = netpolicy_parse_json(out, "sandbox.network", err, sizeof err);
	cr_assert_not_null(q, "%s", err);
	cr_assert(netpolicy_equal(p, q));
	free(text);
	json_decref(out);
	netpolicy_free(q);

	q = policy("{\"allow\": [\"a.test\", \"10.0.0.0/8\", "
	    "\"xn--bcher-kva.example\", \"*.x.org:443\"]}");
	cr_assert(netpolicy_equal(p, q));
	netpolicy_free(q);
	q = policy("{\"allow\": [\"a.test\", \"10.0.0.0/8\", "
	    "\"xn--bcher-kva.example\", \"*.x.org\"]}");
	cr_assert_not(netpolicy_equal(p, q));
	netpolicy_free(q);
	q = policy("{\"allow\": [\"a.test\", \"10.0.0.0/8\", "
	    "\"xn--bcher-kva.example\", \"*.x.org:443\"], \"deny\": "
	    "[\"a.test\"]}");
	cr_assert_not(netpolicy_equal(p, q));
	cr_assert(netpolicy_equal(NULL, NULL));
	cr_assert_not(netpolicy_equal(p, NULL));

	/* A merge is both policies' rules; the operator's deny holds. */
	m = netpolicy_merge(p, NULL);
	cr_assert(netpolicy_equal(m, p));
	netpolicy_free(m);
	m = netpolicy_merge(p, q);
	cr_assert(netpolicy_equal(m, q));
	cr_assert_not(reach(m, "a.test", 443, NULL));
	cr_assert(reach(p, "a.test", 443, "198.51.100.7"), "%s", why);
	netpolicy_free(m);
	m = netpolicy_merge(NULL, NULL);
	cr_assert_not(reach(m, "a.test", 443, NULL));
	cr_assert(netpolicy_add(m, true, "*.evil.test", err, sizeof err));
	cr_assert(netpolicy_add(m, false, "ok.test:8080", err, sizeof err));
	cr_assert_not(netpolicy_add(m, false, "a..b", err, sizeof err));
	cr_assert_str_eq(err, "\"a..b\": it has an empty label (two dots in "
	    "a row, or a leading dot)");
	out = netpolicy_json(m);
	text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(text, "{\"allow\":[\"ok.test:8080\"],\"deny\":"
	    "[\"*.evil.test\"]}");
	free(text);
	json_decref(out);
	netpolicy_free(m);
	netpolicy_free(p);
	netpolicy_free(q);
}

/* A NULL policy allows nothing, and says so. */
Test(netpolicy, null_policy)
{
	json_t *v;
	char *text;

	cr_assert_not(reach(NULL, "a.test", 443, NULL));
	cr_assert_str_eq(why, "a.test:443 is not allowed: no rule of "
	    "sandbox.network.allow matches it (add \"a.test\" or "
	    "\"a.test:443\")");
	cr_assert_not(reach(NULL, "[2001:db8::1]", 80, LITERAL));
	cr_assert(strstr(why, "add \"[2001:db8::1]\" or "
	    "\"[2001:db8::1]:80\"") != NULL, "%s", why);
	cr_assert_str_eq(netpolicy_class_name(NETPOLICY_LINK_LOCAL),
	    "link-local (cloud metadata)");
	v = netpolicy_json(NULL);
	text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(text, "{\"allow\":[],\"deny\":[]}");
	free(text);
	json_decref(v);
}
