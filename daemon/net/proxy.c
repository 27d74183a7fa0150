/*
 * The network proxy of tools with an allow-list: see proxy.h. A connection
 * goes through these states: its first byte tells SOCKS5 (5) from HTTP;
 * the request is parsed (net/proxy_parse.c) under a deadline; the name is
 * decided on, resolved, and every address decided on again
 * (core/netpolicy.c); the daemon connects from its own namespace; then
 * bytes are relayed both ways until either side ends.
 */
#include "net/proxy.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "core/netpolicy.h"
#include "handover.h"
#include "log.h"
#include "metrics.h"
#include "net/proxy_parse.h"
#include "net/relay.h"
#include "utf8.h"
#include "util.h"

/* Relaying: what one direction may hold before its reader is paused. */
#define PROXY_HIGH (256 * 1024)
/* A tool's tally: so many hosts, then one count of the rest. */
#define PROXY_MAX_HOSTS 64

enum proxy_state {
	PROXY_SNIFF,       /* no byte yet */
	PROXY_HTTP,        /* reading an HTTP request head */
	PROXY_SOCKS_HELLO, /* reading SOCKS5's greeting */
	PROXY_SOCKS_REQ,   /* reading SOCKS5's request */
	PROXY_RESOLVE,
	PROXY_CONNECT,
	PROXY_RELAY,
	PROXY_CLOSING,     /* a last reply going out, then closed */
};

/* How a tool's connections to a host ended, as meta.network lists them. */
enum proxy_outcome {
	PROXY_REACHED,
	PROXY_REFUSED,     /* by the policy */
	PROXY_FAILED,      /* allowed, but not resolved or connected */
};

struct proxy_host {
	char host[NETPOLICY_HOST_BUFSIZE];
	uint16_t port;
	enum proxy_outcome outcome;
	unsigned conns;
	uint64_t out, in;
	char *why;
};

struct proxy_quota {
	unsigned conns;
	unsigned refs;
};

struct proxy_conn;

struct proxy_tool {
	struct evconnlistener *lis;
	struct event *resume;        /* accepting again after EMFILE */
	struct netpolicy *policy;
	struct proxy_quota *quota;
	char *sid, *tid, *name;
	struct proxy_conn *conns;    /* a list through next and prev */
	unsigned nconns;
	struct proxy_host *hosts;
	size_t nhosts;
	unsigned more;               /* connections past PROXY_MAX_HOSTS */
	unsigned over;               /* connections refused over a bound */
};

struct proxy_conn {
	struct proxy_tool *tool;
	struct proxy_conn *next, *prev;
	enum proxy_state state;
	struct bufferevent *c, *u;   /* the tool's side, upstream */
	struct event *deadline;
	struct evdns_getaddrinfo_request *dns;
	struct evutil_addrinfo *ai, *next_ai;
	struct proxy_target target;
	char norm[NETPOLICY_HOST_BUFSIZE]; /* the name decided on */
	bool socks, tunnel;
	char *head;                  /* plain HTTP: the head to send */
	size_t head_len;
	size_t host;                 /* its index in the tally, once reached */
	bool counted;
	struct relay *relay;         /* relaying by splice (else c and u) */
	size_t own;                  /* the proxy's reply, not the host's */
};

static struct proxy_config proxy_cfg;
static struct evdns_base *proxy_dns;
static unsigned proxy_nconns;   /* open connections of every tool */

static void proxy_accept(struct evconnlistener *, evutil_socket_t,
    struct sockaddr *, int, void *);
static void proxy_accept_error(struct evconnlistener *, void *);
static void proxy_resume(evutil_socket_t, short, void *);
static void proxy_conn_free(struct proxy_conn *);
static void proxy_read(struct bufferevent *, void *);
static void proxy_event(struct bufferevent *, short, void *);
static void proxy_deadline(evutil_socket_t, short, void *);
static void proxy_arm(struct event *, unsigned);
static void proxy_decide(struct proxy_conn *);
static void proxy_name_text(char *, size_t, const char *);
static void proxy_resolved(int, struct evutil_addrinfo *, void *);
static void proxy_connect_next(struct proxy_conn *, const char *);
static void proxy_upstream_event(struct bufferevent *, short, void *);
static void proxy_relay(struct bufferevent *, void *);
static void proxy_drained(struct bufferevent *, void *);
static void proxy_relay_event(struct bufferevent *, short, void *);
static void proxy_closed(struct bufferevent *, void *);
static void proxy_refuse(struct proxy_conn *, int, uint8_t, const char *);
static void proxy_fail(struct proxy_conn *, int, uint8_t, const char *);
static void proxy_reply_end(struct proxy_conn *, int, uint8_t, const char *);
static struct proxy_host *proxy_tally(struct proxy_tool *, const char *,
    uint16_t, enum proxy_outcome);
static void proxy_tally_why(struct proxy_conn *, enum proxy_outcome,
    const char *);
static struct proxy_conn *proxy_conn_new(struct proxy_tool *, int);
static void proxy_relay_start(struct proxy_conn *);
static void proxy_relay_buffered(struct proxy_conn *);
static void proxy_spliced(void *, int, size_t);
static void proxy_splice_done(void *);

static const struct relay_ops proxy_relay_ops = {
	.moved = proxy_spliced,
	.done = proxy_splice_done,
};
static void proxy_put_pending(struct handover_rec *, json_t *,
    const char *, struct bufferevent *, struct bufferevent *);

bool
proxy_init(const struct proxy_config *cfg, char *err, size_t errlen)
{
	proxy_cfg = *cfg;
	if (proxy_cfg.max_conns_tool == 0)
		proxy_cfg.max_conns_tool = PROXY_MAX_CONNS_TOOL;
	if (proxy_cfg.max_conns_session == 0)
		proxy_cfg.max_conns_session = PROXY_MAX_CONNS_SESSION;
	if (proxy_cfg.head_timeout_ms == 0)
		proxy_cfg.head_timeout_ms = PROXY_HEAD_TIMEOUT_MS;
	if (proxy_cfg.connect_timeout_ms == 0)
		proxy_cfg.connect_timeout_ms = PROXY_CONNECT_TIMEOUT_MS;
	if ((proxy_dns = evdns_base_new(cfg->base, 0)) == NULL) {
		snprintf(err, errlen, "cannot make a resolver");
		return false;
	}
	/* The operator's hosts first: the first entry of a name wins. */
	if (cfg->hosts_file != NULL &&
	    evdns_base_load_hosts(proxy_dns, cfg->hosts_file) != 0) {
		snprintf(err, errlen, "cannot read %s (--network-hosts)",
		    cfg->hosts_file);
		proxy_shutdown();
		return false;
	}
	/* No resolv.conf (a test machine) leaves the hosts files alone. */
	evdns_base_resolv_conf_parse(proxy_dns, DNS_OPTIONS_ALL,
	    "/etc/resolv.conf");
	evdns_base_set_option(proxy_dns, "timeout:", "3");
	evdns_base_set_option(proxy_dns, "attempts:", "2");
	return true;
}

void
proxy_shutdown(void)
{
	if (proxy_dns != NULL)
		evdns_base_free(proxy_dns, 1);
	proxy_dns = NULL;
}

struct proxy_quota *
proxy_quota_new(void)
{
	struct proxy_quota *q = xcalloc(1, sizeof *q);

	q->refs = 1;
	return q;
}

void
proxy_quota_unref(struct proxy_quota *q)
{
	if (q != NULL && --q->refs == 0)
		free(q);
}

struct proxy_tool *
proxy_tool_new(int fd, const struct netpolicy *policy,
    struct proxy_quota *quota, const char *sid, const char *tid,
    const char *name)
{
	struct proxy_tool *t = xcalloc(1, sizeof *t);

	t->policy = netpolicy_merge(policy, NULL);
	t->quota = quota;
	quota->refs++;
	t->sid = xstrdup(sid);
	t->tid = xstrdup(tid);
	t->name = xstrdup(name);
	t->lis = evconnlistener_new(proxy_cfg.base, proxy_accept, t,
	    LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (t->lis == NULL)
		close(fd);
	else
		evconnlistener_set_error_cb(t->lis, proxy_accept_error);
	t->resume = evtimer_new(proxy_cfg.base, proxy_resume, t);
	return t;
}

void
proxy_tool_free(struct proxy_tool *t)
{
	size_t i;

	if (t == NULL)
		return;
	if (t->over > 1)
		log_about(LOG_LEVEL_WARN, t->sid, t->tid, t->name, "network: %u "
		    "connections in all were refused over a connection bound",
		    t->over);
	while (t->conns != NULL)
		proxy_conn_free(t->conns);
	if (t->lis != NULL)
		evconnlistener_free(t->lis);
	event_free(t->resume);
	for (i = 0; i < t->nhosts; i++)
		free(t->hosts[i].why);
	free(t->hosts);
	netpolicy_free(t->policy);
	proxy_quota_unref(t->quota);
	free(t->sid);
	free(t->tid);
	free(t->name);
	free(t);
}

json_t *
proxy_tool_json(const struct proxy_tool *t)
{
	json_t *reached = json_array(), *refused = json_array(),
	    *failed = json_array(), *o;
	const struct proxy_host *h;
	size_t i;

	for (i = 0; i < t->nhosts; i++) {
		h = &t->hosts[i];
		if (h->outcome != PROXY_REACHED)
			json_array_append_new(h->outcome == PROXY_REFUSED ?
			    refused : failed, json_pack("{s:s, s:i, s:i, s:s}",
			    "host", h->host, "port", h->port, "connections",
			    h->conns, "why", h->why != NULL ? h->why : ""));
		else
			json_array_append_new(reached, json_pack("{s:s, s:i, "
			    "s:i, s:I, s:I}", "host", h->host, "port",
			    h->port, "connections", h->conns, "bytesOut",
			    (json_int_t)h->out, "bytesIn", (json_int_t)h->in));
	}
	o = json_pack("{s:o, s:o}", "reached", reached, "refused", refused);
	if (json_array_size(failed) > 0)
		json_object_set_new(o, "failed", failed);
	else
		json_decref(failed);
	if (t->more > 0)
		json_object_set_new(o, "moreHosts", json_integer(t->more));
	return o;
}

/* The tally's entry of host:port, made if there is room; else NULL. */
static struct proxy_host *
proxy_tally(struct proxy_tool *t, const char *host, uint16_t port,
    enum proxy_outcome outcome)
{
	struct proxy_host *h;
	size_t i;

	for (i = 0; i < t->nhosts; i++)
		if (t->hosts[i].port == port && t->hosts[i].outcome == outcome &&
		    strcmp(t->hosts[i].host, host) == 0)
			return &t->hosts[i];
	if (t->nhosts == PROXY_MAX_HOSTS) {
		t->more++;
		return NULL;
	}
	if (t->hosts == NULL)
		t->hosts = xcalloc(PROXY_MAX_HOSTS, sizeof *t->hosts);
	h = &t->hosts[t->nhosts++];
	snprintf(h->host, sizeof h->host, "%s", host);
	h->port = port;
	h->outcome = outcome;
	return h;
}

/* A connection that ended without reaching its host, tallied with why. */
static void
proxy_tally_why(struct proxy_conn *c, enum proxy_outcome outcome,
    const char *why)
{
	struct proxy_host *h = proxy_tally(c->tool, c->norm, c->target.port,
	    outcome);

	if (h != NULL) {
		h->conns++;
		if (h->why == NULL)
			h->why = xstrdup(why);
	}
}

static void
proxy_accept(struct evconnlistener *lis, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct proxy_tool *t = arg;
	struct proxy_conn *c;

	if (t->nconns >= proxy_cfg.max_conns_tool ||
	    t->quota->conns >= proxy_cfg.max_conns_session ||
	    (proxy_cfg.max_conns_daemon > 0 &&
	    proxy_nconns >= proxy_cfg.max_conns_daemon)) {
		/* One line a tool: a loop of connects must not flood the log. */
		if (t->over++ == 0)
			log_about(LOG_LEVEL_WARN, t->sid, t->tid, t->name,
			    "network: a connection refused: %u open of at most "
			    "%u for the tool, %u for the session, %u for the "
			    "daemon (more are counted when it ends)", t->nconns,
			    proxy_cfg.max_conns_tool,
			    proxy_cfg.max_conns_session,
			    proxy_cfg.max_conns_daemon);
		metrics_count(METRICS_NET_REFUSED);
		close(fd);
		return;
	}
	c = proxy_conn_new(t, fd);
	bufferevent_setcb(c->c, proxy_read, NULL, proxy_event, c);
	/* A head's bound: the rest waits in the kernel, not with us. */
	bufferevent_setwatermark(c->c, EV_READ, 0, PROXY_HEAD_MAX + 1);
	bufferevent_enable(c->c, EV_READ);
	c->deadline = evtimer_new(proxy_cfg.base, proxy_deadline, c);
	proxy_arm(c->deadline, proxy_cfg.head_timeout_ms);
}

/*
 * Out of descriptors (clients hold the rest): without a pause the listener
 * stays readable and the loop would spin on accept. The connection waits in
 * the kernel's backlog meanwhile.
 */
static void
proxy_accept_error(struct evconnlistener *lis, void *arg)
{
	struct proxy_tool *t = arg;
	struct timeval one = { 1, 0 };
	int e = EVUTIL_SOCKET_ERROR();

	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM)
		return;
	/* At most a line a second: the pause bounds it. */
	log_about(LOG_LEVEL_WARN, t->sid, t->tid, t->name, "network: accept: "
	    "%s; pausing for a second", strerror(e));
	evconnlistener_disable(lis);
	evtimer_add(t->resume, &one);
}

static void
proxy_resume(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_tool *t = arg;

	evconnlistener_enable(t->lis);
}

/* A connection of the tool's on fd, its side's bufferevent made. */
static struct proxy_conn *
proxy_conn_new(struct proxy_tool *t, int fd)
{
	struct proxy_conn *c = xcalloc(1, sizeof *c);

	c->tool = t;
	c->next = t->conns;
	if (t->conns != NULL)
		t->conns->prev = c;
	t->conns = c;
	t->nconns++;
	t->quota->conns++;
	proxy_nconns++;
	evutil_make_socket_nonblocking(fd);
	c->c = bufferevent_socket_new(proxy_cfg.base, fd,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	return c;
}

static void
proxy_conn_free(struct proxy_conn *c)
{
	struct proxy_tool *t = c->tool;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	t->nconns--;
	t->quota->conns--;
	proxy_nconns--;
	if (c->dns != NULL) {
		struct evdns_getaddrinfo_request *dns = c->dns;

		c->dns = NULL;
		evdns_getaddrinfo_cancel(dns);
	}
	if (c->ai != NULL)
		evutil_freeaddrinfo(c->ai);
	if (c->deadline != NULL)
		event_free(c->deadline);
	if (c->c != NULL)
		bufferevent_free(c->c);
	if (c->u != NULL)
		bufferevent_free(c->u);
	relay_free(c->relay);
	free(c->head);
	free(c);
}

/* A connection's deadline, ms from now. */
static void
proxy_arm(struct event *ev, unsigned ms)
{
	struct timeval tv = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

/* The request took too long: a slow client holds nothing of ours. */
static void
proxy_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;

	if (c->state == PROXY_RESOLVE || c->state == PROXY_CONNECT)
		proxy_fail(c, 504, 4, "timed out resolving or connecting");
	else
		proxy_conn_free(c);
}

/* The tool's side, before the relay: the request, parsed as it comes. */
static void
proxy_read(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in), used = 0;
	uint8_t *p, reply, ok_reply[2] = { 5, 0 };
	struct proxy_http http;
	enum proxy_parse r;
	char err[256];
	bool ok;
	int status;

	if (len == 0)
		return;
	p = evbuffer_pullup(in, -1);
	if (c->state == PROXY_SNIFF)
		c->state = p[0] == 5 ? PROXY_SOCKS_HELLO : PROXY_HTTP;
	switch (c->state) {
	case PROXY_HTTP:
		r = proxy_parse_http((const char *)p, len, &http, &status,
		    err, sizeof err);
		if (r == PROXY_PARSE_ERROR)
			proxy_reply_end(c, status, 0, err);
		if (r != PROXY_PARSE_DONE)
			return;
		evbuffer_drain(in, http.consumed);
		c->target = http.target;
		c->tunnel = http.connect;
		c->head = http.head;
		c->head_len = http.head_len;
		proxy_decide(c);
		return;
	case PROXY_SOCKS_HELLO:
		c->socks = true;
		r = proxy_parse_socks_greeting(p, len, &used, &ok);
		if (r == PROXY_PARSE_MORE)
			return;
		if (r == PROXY_PARSE_ERROR || !ok) {
			/* 0xff: no method offered is served. */
			ok_reply[1] = 0xff;
			bufferevent_write(bev, ok_reply, 2);
			proxy_reply_end(c, 0, 0xff, NULL);
			return;
		}
		evbuffer_drain(in, used);
		bufferevent_write(bev, ok_reply, 2);
		c->state = PROXY_SOCKS_REQ;
		if (evbuffer_get_length(in) == 0)
			return;
		p = evbuffer_pullup(in, -1);
		len = evbuffer_get_length(in);
		__attribute__((fallthrough));
	case PROXY_SOCKS_REQ:
		r = proxy_parse_socks_request(p, len, &used, &c->target,
		    &reply, err, sizeof err);
		if (r == PROXY_PARSE_ERROR)
			proxy_reply_end(c, 400, reply, err);
		if (r != PROXY_PARSE_DONE)
			return;
		evbuffer_drain(in, used);
		proxy_decide(c);
		return;
	default:
		/* Resolving or connecting: the rest waits in the buffer. */
		return;
	}
}

/* The tool's side closed or failed before the relay. */
static void
proxy_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn *c = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		proxy_conn_free(c);
}

/*
 * A name that is not one, as the tally keeps it: valid UTF-8 (it goes
 * into meta.network's JSON), cut to fit.
 */
static void
proxy_name_text(char *out, size_t outlen, const char *host)
{
	struct buf b = { 0 };
	size_t n;

	utf8_repair(&b, host, strlen(host));
	n = b.data != NULL ? utf8_cut(b.data, b.len, outlen - 1) : 0;
	if (n > 0)
		memcpy(out, b.data, n);
	out[n] = '\0';
	buf_free(&b);
}

/* Step 1 on the name, then resolution (or the literal's own step 2). */
static void
proxy_decide(struct proxy_conn *c)
{
	struct evutil_addrinfo hints;
	struct netpolicy_addr addr;
	struct evdns_getaddrinfo_request *req;
	struct evutil_addrinfo *ai = NULL;
	char why[512];
	bool is_ip;
	int rc;

	bufferevent_disable(c->c, EV_READ);
	if (!netpolicy_check_name(c->tool->policy, c->target.host,
	    c->target.port, c->norm, sizeof c->norm, &is_ip, &addr, why,
	    sizeof why)) {
		if (c->norm[0] == '\0')
			proxy_name_text(c->norm, sizeof c->norm, c->target.host);
		proxy_refuse(c, 403, 2, why);
		return;
	}
	/* The deadline was the head's: now resolution and connect get theirs. */
	proxy_arm(c->deadline, proxy_cfg.connect_timeout_ms);
	c->state = PROXY_RESOLVE;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* localhost is loopback whatever a hosts file says. */
	if (strcmp(c->norm, "localhost") == 0 || is_ip) {
		hints.ai_flags = EVUTIL_AI_NUMERICHOST;
		rc = evutil_getaddrinfo(is_ip ? c->norm : "127.0.0.1", NULL,
		    &hints, &ai);
		proxy_resolved(rc, ai, c);
		return;
	}
	/* The callback may run before this returns: it then saw no dns. */
	req = evdns_getaddrinfo(proxy_dns, c->norm, NULL, &hints,
	    proxy_resolved, c);
	if (req != NULL && c->state == PROXY_RESOLVE)
		c->dns = req;
}

/* Step 2 on every address, then the first connect. */
static void
proxy_resolved(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct proxy_conn *c = arg;
	struct netpolicy_addr a;
	struct evutil_addrinfo *p;
	char why[512];

	if (result == EVUTIL_EAI_CANCEL)
		return;
	c->dns = NULL;
	c->ai = ai;
	if (result != 0 || ai == NULL) {
		snprintf(why, sizeof why, "cannot resolve %s: %s", c->norm,
		    evutil_gai_strerror(result));
		proxy_fail(c, 502, 4, why);
		return;
	}
	for (p = ai; p != NULL; p = p->ai_next) {
		memset(&a, 0, sizeof a);
		a.family = p->ai_family;
		if (p->ai_family == AF_INET)
			memcpy(a.bytes, &((struct sockaddr_in *)(void *)
			    p->ai_addr)->sin_addr, 4);
		else if (p->ai_family == AF_INET6)
			memcpy(a.bytes, &((struct sockaddr_in6 *)(void *)
			    p->ai_addr)->sin6_addr, 16);
		else
			continue;
		/* One refused address refuses the name: no fallback to it. */
		if (!netpolicy_check_addr(c->tool->policy, c->norm, &a,
		    c->target.port, why, sizeof why)) {
			proxy_refuse(c, 403, 2, why);
			return;
		}
	}
	c->next_ai = ai;
	c->state = PROXY_CONNECT;
	proxy_connect_next(c, "no address");
}

/* Connect to the next address, or fail with the last error. */
static void
proxy_connect_next(struct proxy_conn *c, const char *last)
{
	struct evutil_addrinfo *p;
	struct timeval tv;
	char why[512];

	while ((p = c->next_ai) != NULL) {
		c->next_ai = p->ai_next;
		if (p->ai_family != AF_INET && p->ai_family != AF_INET6)
			continue;
		if (p->ai_family == AF_INET)
			((struct sockaddr_in *)(void *)p->ai_addr)->sin_port =
			    htons(c->target.port);
		else
			((struct sockaddr_in6 *)(void *)p->ai_addr)->sin6_port =
			    htons(c->target.port);
		if (c->u != NULL)
			bufferevent_free(c->u);
		c->u = bufferevent_socket_new(proxy_cfg.base, -1,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		bufferevent_setcb(c->u, NULL, NULL, proxy_upstream_event, c);
		tv.tv_sec = proxy_cfg.connect_timeout_ms / 1000;
		tv.tv_usec = (proxy_cfg.connect_timeout_ms % 1000) * 1000;
		bufferevent_set_timeouts(c->u, NULL, &tv);
		if (bufferevent_socket_connect(c->u, p->ai_addr,
		    (int)p->ai_addrlen) == 0)
			return;
		last = strerror(errno);
	}
	snprintf(why, sizeof why, "cannot connect to %s:%u: %s", c->norm,
	    c->target.port, last);
	proxy_fail(c, 502, 5, why);
}

/* Connected (or not): the reply to the tool, then the relay. */
static void
proxy_upstream_event(struct bufferevent *bev, short what, void *arg)
{
	static const char established[] =
	    "HTTP/1.1 200 Connection established\r\n\r\n";
	static const uint8_t socks_ok[] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	struct proxy_conn *c = arg;
	struct proxy_host *h;
	int error;

	if (!(what & BEV_EVENT_CONNECTED)) {
		error = EVUTIL_SOCKET_ERROR();
		proxy_connect_next(c, what & BEV_EVENT_TIMEOUT ? "timed out" :
		    error != 0 ? strerror(error) : "the connection closed");
		return;
	}
	evtimer_del(c->deadline);
	bufferevent_set_timeouts(c->u, NULL, NULL);
	h = proxy_tally(c->tool, c->norm, c->target.port, PROXY_REACHED);
	if (h != NULL) {
		h->conns++;
		c->host = (size_t)(h - c->tool->hosts);
		c->counted = true;
	}
	metrics_count(METRICS_NET_ALLOWED);
	if (c->socks)
		bufferevent_write(c->c, socks_ok, c->own = sizeof socks_ok);
	else if (c->tunnel)
		bufferevent_write(c->c, established, c->own =
		    sizeof established - 1);
	else
		bufferevent_write(c->u, c->head, c->head_len);
	proxy_relay_start(c);
}

/*
 * The relay: by splice where a pipe each way can be had, with what the
 * bufferevents still hold going first; else by the bufferevents.
 */
static void
proxy_relay_start(struct proxy_conn *c)
{
	struct evbuffer *first[2] = { evbuffer_new(), evbuffer_new() };
	int fd[2] = { bufferevent_getfd(c->c), bufferevent_getfd(c->u) };

	c->state = PROXY_RELAY;
	/* An output's front is libevent's alone, until we take it all. */
	evbuffer_unfreeze(bufferevent_get_output(c->u), 1);
	evbuffer_unfreeze(bufferevent_get_output(c->c), 1);
	evbuffer_add_buffer(first[0], bufferevent_get_output(c->u));
	evbuffer_add_buffer(first[0], bufferevent_get_input(c->c));
	evbuffer_add_buffer(first[1], bufferevent_get_output(c->c));
	evbuffer_add_buffer(first[1], bufferevent_get_input(c->u));
	if ((c->relay = relay_new(proxy_cfg.base, fd[0], fd[1], first,
	    &proxy_relay_ops, c)) != NULL) {
		/* The sockets are the relay's now. */
		bufferevent_setfd(c->c, -1);
		bufferevent_setfd(c->u, -1);
		bufferevent_free(c->c);
		bufferevent_free(c->u);
		c->c = c->u = NULL;
	} else {
		proxy_spliced(c, 0, evbuffer_get_length(first[0]));
		proxy_spliced(c, 1, evbuffer_get_length(first[1]));
		bufferevent_write_buffer(c->u, first[0]);
		bufferevent_write_buffer(c->c, first[1]);
		proxy_relay_buffered(c);
	}
	evbuffer_free(first[0]);
	evbuffer_free(first[1]);
}

/* Bytes the relay moved, in the tally. */
static void
proxy_spliced(void *arg, int from, size_t n)
{
	struct proxy_conn *c = arg;
	struct proxy_host *h = c->counted ? &c->tool->hosts[c->host] : NULL;
	size_t own = from == 1 && c->own < n ? c->own : from == 1 ? n : 0;

	/* The reply that opened the tunnel goes first, and is not the host's. */
	c->own -= own;
	if (h != NULL)
		*(from == 0 ? &h->out : &h->in) += n - own;
}

static void
proxy_splice_done(void *arg)
{
	proxy_conn_free(arg);
}

/* Without pipes: the bufferevents relay, reading and writing in user space. */
static void
proxy_relay_buffered(struct proxy_conn *c)
{
	/* libevent's default is 16 KiB a call: a system call per 16 KiB. */
	bufferevent_set_max_single_read(c->c, PROXY_HIGH);
	bufferevent_set_max_single_read(c->u, PROXY_HIGH);
	bufferevent_set_max_single_write(c->c, PROXY_HIGH);
	bufferevent_set_max_single_write(c->u, PROXY_HIGH);
	bufferevent_setwatermark(c->c, EV_READ, 0, PROXY_HIGH);
	bufferevent_setwatermark(c->u, EV_READ, 0, PROXY_HIGH);
	bufferevent_setcb(c->c, proxy_relay, NULL, proxy_relay_event, c);
	bufferevent_setcb(c->u, proxy_relay, NULL, proxy_relay_event, c);
	bufferevent_enable(c->c, EV_READ);
	bufferevent_enable(c->u, EV_READ);
}

/* Bytes from one side to the other; a full side pauses its source. */
static void
proxy_relay(struct bufferevent *from, void *arg)
{
	struct proxy_conn *c = arg;
	struct bufferevent *to = from == c->c ? c->u : c->c;
	struct evbuffer *in = bufferevent_get_input(from);
	struct evbuffer *out = bufferevent_get_output(to);
	size_t n = evbuffer_get_length(in);
	struct proxy_host *h = c->counted ? &c->tool->hosts[c->host] : NULL;

	if (h != NULL)
		*(from == c->c ? &h->out : &h->in) += n;
	evbuffer_add_buffer(out, in);
	if (evbuffer_get_length(out) >= PROXY_HIGH) {
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, PROXY_HIGH / 2, 0);
		bufferevent_setcb(to, proxy_relay, proxy_drained,
		    proxy_relay_event, c);
	}
}

/* The paused side's reader goes on once the other has written half. */
static void
proxy_drained(struct bufferevent *to, void *arg)
{
	struct proxy_conn *c = arg;
	struct bufferevent *from = to == c->c ? c->u : c->c;

	bufferevent_setcb(to, proxy_relay, NULL, proxy_relay_event, c);
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	bufferevent_enable(from, EV_READ);
}

/* One side ended: what the other still has to write goes, then both close. */
static void
proxy_relay_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn *c = arg;
	struct bufferevent *other = bev == c->c ? c->u : c->c;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	if (what & BEV_EVENT_EOF)
		proxy_relay(bev, c);
	if (evbuffer_get_length(bufferevent_get_output(other)) == 0) {
		proxy_conn_free(c);
		return;
	}
	c->state = PROXY_CLOSING;
	if (c->deadline != NULL)
		proxy_arm(c->deadline, proxy_cfg.head_timeout_ms);
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	bufferevent_disable(other, EV_READ);
	bufferevent_setwatermark(other, EV_WRITE, 0, 0);
	bufferevent_setcb(other, NULL, proxy_closed, proxy_event, c);
}

/* The last bytes are out. */
static void
proxy_closed(struct bufferevent *bev, void *arg)
{
	proxy_conn_free(arg);
}

/* A policy's refusal: said to the tool, tallied, logged, counted. */
static void
proxy_refuse(struct proxy_conn *c, int status, uint8_t socks, const char *why)
{
	proxy_tally_why(c, PROXY_REFUSED, why);
	log_about(LOG_LEVEL_WARN, c->tool->sid, c->tool->tid, c->tool->name,
	    "network: refused: %s", why);
	metrics_count(METRICS_NET_REFUSED);
	proxy_reply_end(c, status, socks, why);
}

/* A name that did not resolve or connect: not the policy's doing. */
static void
proxy_fail(struct proxy_conn *c, int status, uint8_t socks, const char *why)
{
	proxy_tally_why(c, PROXY_FAILED, why);
	log_about(LOG_LEVEL_INFO, c->tool->sid, c->tool->tid, c->tool->name,
	    "network: %s", why);
	metrics_count(METRICS_NET_FAILED);
	proxy_reply_end(c, status, socks, why);
}

/*
 * The last reply (an HTTP status with why as its body, or a SOCKS reply
 * code), then the connection closes once it is out.
 */
static void
proxy_reply_end(struct proxy_conn *c, int status, uint8_t socks,
    const char *why)
{
	static const char *const texts[] = { [400] = "Bad Request",
	    [403] = "Forbidden", [431] = "Request Header Fields Too Large",
	    [501] = "Not Implemented", [502] = "Bad Gateway",
	    [504] = "Gateway Timeout" };
	uint8_t r[10] = { 5, socks, 0, 1, 0, 0, 0, 0, 0, 0 };
	struct evbuffer *out = bufferevent_get_output(c->c);

	if (c->u != NULL) {
		bufferevent_free(c->u);
		c->u = NULL;
	}
	if (c->socks && socks != 0xff)
		evbuffer_add(out, r, sizeof r);
	else if (!c->socks)
		evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: "
		    "text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
		    "Connection: close\r\n\r\nstexec: %s\n", status,
		    status > 0 && (size_t)status < nitems(texts) &&
		    texts[status] != NULL ? texts[status] : "Error",
		    strlen(why) + 9, why);
	c->state = PROXY_CLOSING;
	/* A reader that never takes the reply keeps it no longer than a head. */
	if (c->deadline != NULL)
		proxy_arm(c->deadline, proxy_cfg.head_timeout_ms);
	bufferevent_disable(c->c, EV_READ);
	bufferevent_setwatermark(c->c, EV_WRITE, 0, 0);
	bufferevent_setcb(c->c, NULL, proxy_closed, proxy_event, c);
	/* Nothing queued (a refused greeting's byte went already): close. */
	if (evbuffer_get_length(out) == 0)
		bufferevent_trigger(c->c, EV_WRITE, BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * The bytes one direction holds, not yet written to one side or moved
 * from the other: copied, not taken (a reload may yet fail).
 */
static void
proxy_put_pending(struct handover_rec *r, json_t *o, const char *key,
    struct bufferevent *to, struct bufferevent *from)
{
	struct evbuffer *out = bufferevent_get_output(to);
	struct evbuffer *in = bufferevent_get_input(from);
	size_t a = evbuffer_get_length(out), b = evbuffer_get_length(in);
	char *all = xmalloc(a + b + 1);

	evbuffer_copyout(out, all, a);
	evbuffer_copyout(in, all + a, b);
	handover_put(r, o, key, all, a + b);
	free(all);
}

json_t *
proxy_tool_save(struct proxy_tool *t, struct handover_rec *r)
{
	json_t *o = json_object(), *hosts = json_array(), *conns = json_array();
	json_t *h;
	struct proxy_conn *c;
	struct buf pending = { 0 };
	size_t i;
	int fd, ufd;

	if (t->lis != NULL) {
		fd = evconnlistener_get_fd(t->lis);
		handover_keep_fd(fd);
		json_object_set_new(o, "fd", json_integer(fd));
	}
	json_object_set_new(o, "policy", netpolicy_json(t->policy));
	for (i = 0; i < t->nhosts; i++) {
		h = json_pack("{s:s, s:i, s:b, s:b, s:i, s:I, s:I}", "host",
		    t->hosts[i].host, "port", t->hosts[i].port, "refused",
		    t->hosts[i].outcome == PROXY_REFUSED, "failed",
		    t->hosts[i].outcome == PROXY_FAILED, "connections",
		    t->hosts[i].conns,
		    "out", (json_int_t)t->hosts[i].out, "in",
		    (json_int_t)t->hosts[i].in);
		if (t->hosts[i].why != NULL)
			json_object_set_new(h, "why",
			    json_string(t->hosts[i].why));
		json_array_append_new(hosts, h);
	}
	json_object_set_new(o, "hosts", hosts);
	json_object_set_new(o, "more", json_integer(t->more));
	for (c = t->conns; c != NULL; c = c->next) {
		if (c->state != PROXY_RELAY)
			continue;
		fd = c->relay != NULL ? relay_fd(c->relay, 0) :
		    bufferevent_getfd(c->c);
		ufd = c->relay != NULL ? relay_fd(c->relay, 1) :
		    bufferevent_getfd(c->u);
		h = json_pack("{s:i, s:i, s:i}", "c", fd, "u", ufd, "host",
		    c->counted ? (int)c->host : -1);
		handover_keep_fd(fd);
		handover_keep_fd(ufd);
		if (c->relay != NULL) {
			for (i = 0; i < 2; i++) {
				relay_pending(c->relay, (int)i, &pending);
				handover_put(r, h, i == 0 ? "toUpstream" :
				    "toTool", pending.data, pending.len);
				buf_reset(&pending);
			}
		} else {
			proxy_put_pending(r, h, "toUpstream", c->u, c->c);
			proxy_put_pending(r, h, "toTool", c->c, c->u);
		}
		json_array_append_new(conns, h);
	}
	json_object_set_new(o, "conns", conns);
	buf_free(&pending);
	return o;
}

struct proxy_tool *
proxy_tool_adopt(const struct handover_in *in, const json_t *o,
    struct proxy_quota *quota, const char *sid, const char *tid,
    const char *name)
{
	struct netpolicy *policy;
	struct proxy_tool *t;
	struct proxy_host *h;
	struct proxy_conn *c;
	const json_t *v, *more = json_object_get(o, "more");
	const char *data;
	char err[256];
	size_t i, n;
	int fd, ufd;

	if ((fd = handover_take_fd(json_object_get(o, "fd"))) == -1)
		return NULL;
	if ((policy = netpolicy_parse_json(json_object_get(o, "policy"),
	    "policy", err, sizeof err)) == NULL) {
		close(fd);
		return NULL;
	}
	t = proxy_tool_new(fd, policy, quota, sid, tid, name);
	netpolicy_free(policy);
	json_array_foreach(json_object_get(o, "hosts"), i, v) {
		h = proxy_tally(t, json_string_value(json_object_get(v,
		    "host")) != NULL ? json_string_value(json_object_get(v,
		    "host")) : "", (uint16_t)json_integer_value(
		    json_object_get(v, "port")), json_is_true(
		    json_object_get(v, "refused")) ? PROXY_REFUSED :
		    json_is_true(json_object_get(v, "failed")) ? PROXY_FAILED :
		    PROXY_REACHED);
		if (h == NULL)
			continue;
		h->conns = (unsigned)json_integer_value(json_object_get(v,
		    "connections"));
		h->out = (uint64_t)json_integer_value(json_object_get(v, "out"));
		h->in = (uint64_t)json_integer_value(json_object_get(v, "in"));
		if (json_is_string(json_object_get(v, "why")))
			h->why = xstrdup(json_string_value(json_object_get(v,
			    "why")));
	}
	t->more = (unsigned)json_integer_value(more);
	json_array_foreach(json_object_get(o, "conns"), i, v) {
		fd = handover_take_fd(json_object_get(v, "c"));
		ufd = handover_take_fd(json_object_get(v, "u"));
		if (fd == -1 || ufd == -1) {
			if (fd != -1)
				close(fd);
			if (ufd != -1)
				close(ufd);
			continue;
		}
		c = proxy_conn_new(t, fd);
		evutil_make_socket_nonblocking(ufd);
		c->u = bufferevent_socket_new(proxy_cfg.base, ufd,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		n = (size_t)json_integer_value(json_object_get(v, "host"));
		if (json_integer_value(json_object_get(v, "host")) >= 0 &&
		    n < t->nhosts) {
			c->host = n;
			c->counted = true;
		}
		data = handover_get(in, v, "toUpstream", &n);
		bufferevent_write(c->u, data, n);
		data = handover_get(in, v, "toTool", &n);
		bufferevent_write(c->c, data, n);
		proxy_relay_start(c);
	}
	return t;
}
