/*
 * The daemon's network proxy (doc/design.md §7, Network by name): the only
 * way out of a tool whose network is an allow-list. Each such tool gets a
 * listening socket inside its network namespace; on it the proxy speaks
 * HTTP/1.1 forward proxying (CONNECT, and absolute-form requests for
 * plain HTTP) and SOCKS5 (CONNECT), decides on the name after
 * normalisation and again on every address it resolves to
 * (core/netpolicy.h), and relays from the daemon's own namespace. All on
 * the event loop: resolution by evdns, relaying by bufferevents with
 * water marks both ways. It knows no sessions: a tool's owner reads its
 * tally (proxy_tool_json) and frees it when the tool ends, which closes
 * every connection the tool had.
 */
#ifndef STEXEC_PROXY_H
#define STEXEC_PROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct netpolicy;

struct proxy_config {
	struct event_base *base;
	const char *hosts_file;        /* read before DNS (--network-hosts) */
	unsigned max_conns_tool;       /* open connections of one tool */
	unsigned max_conns_session;    /* ... of one session's tools */
	unsigned max_conns_daemon;     /* ... of every tool (0: no bound) */
	unsigned head_timeout_ms;      /* to send a whole request head */
	unsigned connect_timeout_ms;   /* name resolved and connected */
};
#define PROXY_MAX_CONNS_TOOL 64
#define PROXY_MAX_CONNS_SESSION 256
/* A proxied connection's descriptors: the tool's, the host's, and a
 * splice pipe each way. */
#define PROXY_CONN_FDS 6
#define PROXY_HEAD_TIMEOUT_MS 10000
#define PROXY_CONNECT_TIMEOUT_MS 15000

/* false with err when the resolver cannot be set up (a bad hosts file). */
bool proxy_init(const struct proxy_config *, char *err, size_t errlen);
void proxy_shutdown(void);

/* What a session's tools share: a count of their open connections. */
struct proxy_quota;
struct proxy_quota *proxy_quota_new(void);
void proxy_quota_unref(struct proxy_quota *);

/*
 * Serve a tool on listen_fd (taken: closed by proxy_tool_free), under
 * policy (copied). The ids name the tool in log lines.
 */
struct proxy_tool;
struct proxy_tool *proxy_tool_new(int listen_fd, const struct netpolicy *,
    struct proxy_quota *, const char *session_id, const char *tool_use_id,
    const char *tool_name);
/*
 * meta.network: {"reached": [{host, port, connections, bytesOut,
 * bytesIn}], "refused": [{host, port, connections, why}]}.
 */
json_t *proxy_tool_json(const struct proxy_tool *);
void proxy_tool_free(struct proxy_tool *);

/*
 * A reload (doc/design.md §7, Reload): the tool's listening socket, its
 * tally and every relaying connection (both descriptors and the bytes in
 * flight each way) into a new object of r's JSON; a connection still in
 * its handshake is closed (its client sees a reset and may try again).
 * The next image serves them again from that object; NULL if it cannot.
 */
struct handover_rec;
struct handover_in;
json_t *proxy_tool_save(struct proxy_tool *, struct handover_rec *);
struct proxy_tool *proxy_tool_adopt(const struct handover_in *,
    const json_t *, struct proxy_quota *, const char *session_id,
    const char *tool_use_id, const char *tool_name);

#endif
