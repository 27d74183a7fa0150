/*
 * A session's tools with network rules (doc/design.md §7, Network by
 * name): one network namespace per policy, shared by the session's tools
 * of that policy (a tool could reach another's proxy port there, so two
 * policies never share one), and a proxy port per tool.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/netpolicy.h"
#include "core/tooldef.h"
#include "handover.h"
#include "log.h"
#include "net/proxy.h"
#include "session/session.h"
#include "session/session_int.h"
#include "supervisor/netns.h"
#include "util.h"

struct session_netns {
	struct netpolicy *policy;
	int fd;
};

struct session_config session_net_cfg;

bool
session_network_allowed(const struct tooldef_sandbox *sb, char *err,
    size_t errlen)
{
	const struct session_config *c = &session_net_cfg;

	if (sb->network == 1 && (c->network_allow_max != NULL ||
	    c->network_deny != NULL)) {
		snprintf(err, errlen, "network: true opens every host, which "
		    "this daemon's --network-%s rules forbid: name the hosts "
		    "({\"allow\": [...]})", c->network_allow_max != NULL ?
		    "allow-max" : "deny");
		return false;
	}
	return sb->policy == NULL || netpolicy_within(sb->policy,
	    c->network_allow_max, err, errlen);
}

struct netpolicy *
session_net_policy(const struct session *s, const struct tooldef_sandbox *td)
{
	const struct netpolicy *p = td->network != -1 ? td->policy :
	    s->sandbox.policy;

	return p != NULL ? netpolicy_merge(p, session_net_cfg.network_deny) :
	    NULL;
}

int
session_net_ns(struct session *s, const struct netpolicy *p)
{
	char err[256];
	size_t i;
	int fd;

	for (i = 0; i < s->nnetns; i++)
		if (netpolicy_equal(s->netns[i].policy, p))
			return s->netns[i].fd;
	if (!netns_available())
		return -1;
	if ((fd = netns_new(err, sizeof err)) == -1) {
		log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "network: %s", err);
		return -1;
	}
	s->netns = xreallocarray(s->netns, s->nnetns + 1, sizeof *s->netns);
	s->netns[s->nnetns].policy = netpolicy_merge(p, NULL);
	s->netns[s->nnetns++].fd = fd;
	return fd;
}

struct proxy_tool *
session_net_proxy(struct session *s, int ns, const struct netpolicy *p,
    const char *tid, const char *name, uint16_t *port)
{
	char err[256];
	int fd;

	if ((fd = netns_listen(ns, port, err, sizeof err)) == -1) {
		log_about(LOG_LEVEL_WARN, s->id, tid, name, "network: %s", err);
		return NULL;
	}
	if (s->net_quota == NULL)
		s->net_quota = proxy_quota_new();
	return proxy_tool_new(fd, p, s->net_quota, s->id, tid, name);
}

void
session_net_free(struct session *s)
{
	size_t i;

	for (i = 0; i < s->nnetns; i++) {
		netpolicy_free(s->netns[i].policy);
		close(s->netns[i].fd);
	}
	free(s->netns);
	s->netns = NULL;
	s->nnetns = 0;
	proxy_quota_unref(s->net_quota);
	s->net_quota = NULL;
}

int
session_net_adopt(struct session *s, const json_t *policy, const json_t *v)
{
	struct netpolicy *p;
	char err[256];
	size_t i;
	int fd = json_is_integer(v) ? (int)json_integer_value(v) : -1;

	/* The session's tools of one policy share it: claimed by the first. */
	for (i = 0; i < s->nnetns; i++)
		if (fd >= 0 && s->netns[i].fd == fd)
			return fd;
	if ((fd = handover_take_fd(v)) == -1)
		return -1;
	if ((p = netpolicy_parse_json(policy, "policy", err, sizeof err)) ==
	    NULL) {
		close(fd);
		return -1;
	}
	s->netns = xreallocarray(s->netns, s->nnetns + 1, sizeof *s->netns);
	s->netns[s->nnetns].policy = p;
	s->netns[s->nnetns++].fd = fd;
	return fd;
}
