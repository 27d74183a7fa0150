/*
 * Shared MCP servers (doc/design.md §7, Shared MCP servers): the operator's
 * servers of scope "daemon", one process each for the whole daemon. Calls
 * of every session go on its one pipe with the daemon's request ids
 * (mcp_server.c correlates them); what the sessions must hear goes up
 * through the hooks session_mcp.c registers.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/netpolicy.h"
#include "handover.h"
#include "log.h"
#include "mcp/mcp.h"
#include "net/proxy.h"
#include "session/journal.h"
#include "session/mcp_shared.h"
#include "supervisor/netns.h"
#include "supervisor/proc.h"
#include "supervisor/sandbox.h"
#include "util.h"

/* What waits at exit past the grace periods, for a slow reaper. */
#define MCP_SHARED_STOP_SLACK_MS 1000

struct mcp_shared_srv {
	const struct mcp_server_config *cfg;
	struct mcp_server *srv;
	char *cwd;
	const char *roots[SANDBOX_MAX_ROOTS];
	int netns;               /* its network namespace (rules), or -1 */
	struct proxy_tool *proxy;
	struct proxy_quota *quota;
	char **envp;             /* its last spawn's environment */
	struct buf env;          /* ...the strings */
	struct handover_in in;   /* a reload's record of it, until adopted */
	char *raw;               /* ...its payload */
};

static struct mcp_shared_hooks mcp_shared_hooks;
static struct mcp_shared_config mcp_shared_cfg;
static struct mcp_shared_srv *mcp_shared_srvs;
static size_t mcp_shared_n;
static unsigned mcp_shared_left;  /* processes yet to go, at exit */
static bool mcp_shared_stopping;

static void	mcp_shared_prepare(void *, struct mcp_server *,
		    struct proc_spec *);
static void	mcp_shared_state(void *, struct mcp_server *);
static void	mcp_shared_tools(void *, struct mcp_server *);
static void	mcp_shared_request(void *, struct mcp_server *,
		    const json_t *, const char *, const json_t *);
static json_t	*mcp_shared_roots(void *, struct mcp_server *);
static void	mcp_shared_log(void *, struct mcp_server *, int,
		    const char *);
static void	mcp_shared_env(struct mcp_shared_srv *, uint16_t);
static void	mcp_shared_gone_cb(void *);
static void	mcp_shared_deadline_cb(evutil_socket_t, short, void *);
static void	mcp_shared_free(void);
static void	mcp_shared_launch(struct mcp_shared_srv *);

static const struct mcp_server_ops mcp_shared_ops = {
	.prepare = mcp_shared_prepare,
	.state = mcp_shared_state,
	.tools = mcp_shared_tools,
	.request = mcp_shared_request,
	.roots = mcp_shared_roots,
	.log = mcp_shared_log,
};

void
mcp_shared_set_hooks(const struct mcp_shared_hooks *h)
{
	mcp_shared_hooks = *h;
}

void
mcp_shared_start(const struct mcp_config *c,
    const struct mcp_shared_config *cfg)
{
	struct mcp_shared_srv *sh;
	size_t i, n = 0;

	mcp_shared_cfg = *cfg;
	for (i = 0; c != NULL && i < c->n; i++)
		n += c->servers[i].scope == MCP_SCOPE_DAEMON;
	if (n == 0)
		return;
	mcp_shared_srvs = xcalloc(n, sizeof *mcp_shared_srvs);
	for (i = 0; i < c->n; i++) {
		if (c->servers[i].scope != MCP_SCOPE_DAEMON)
			continue;
		sh = &mcp_shared_srvs[mcp_shared_n++];
		sh->cfg = &c->servers[i];
		sh->netns = -1;
		/* A directory of its own: its workspace, not the daemon's. */
		if (sh->cfg->cwd == NULL && cfg->state_dir != NULL) {
			/* The journal makes it too, later: first come first. */
			(void)mkdir(cfg->state_dir, 0700);
			xasprintf(&sh->cwd, "%s/mcp-%s", cfg->state_dir,
			    sh->cfg->name);
			/* Never / instead: workspace-write would open it all. */
			if (mkdir(sh->cwd, 0700) != 0 && errno != EEXIST)
				log_warn("MCP server %s: cannot make its "
				    "directory %s: %s; it cannot start",
				    sh->cfg->name, sh->cwd, strerror(errno));
		} else
			sh->cwd = xstrdup(sh->cfg->cwd != NULL ? sh->cfg->cwd :
			    "/");
		/* After a reload, once the handover is read (mcp_shared_adopt). */
		if (!cfg->deferred)
			mcp_shared_launch(sh);
	}
}

/* Started afresh, or adopted from the reload's record it was given. */
static void
mcp_shared_launch(struct mcp_shared_srv *sh)
{
	struct mcp_server_params p = { 0 };
	const json_t *v;
	char id[MCP_NAME_MAX + 8];
	bool in = sh->raw != NULL;

	p.cfg = sh->cfg;
	p.cwd = sh->cwd;
	/* Routed to the session of the one call in flight, if any. */
	p.sampling = p.elicitation = true;
	p.start_timeout_ms = sh->cfg->start_timeout_ms > 0 ?
	    sh->cfg->start_timeout_ms : mcp_shared_cfg.start_timeout_ms;
	if (in && (v = json_object_get(sh->in.json, "proxy")) != NULL) {
		/* Its way out goes on too: its namespace, port and tunnels. */
		snprintf(id, sizeof id, "mcp-%s", sh->cfg->name);
		sh->netns = handover_take_fd(json_object_get(sh->in.json,
		    "netns"));
		if (sh->quota == NULL)
			sh->quota = proxy_quota_new();
		if (sh->netns == -1 || (sh->proxy = proxy_tool_adopt(&sh->in,
		    v, sh->quota, "daemon", id, sh->cfg->name)) == NULL) {
			mcp_server_discard(&sh->in, sh->in.json);
			in = false;
		}
	}
	if (in && (sh->srv = mcp_server_adopt(mcp_shared_cfg.base, &p,
	    &mcp_shared_ops, sh, &sh->in, sh->in.json)) != NULL)
		log_info("MCP server %s (scope daemon, pid %d) handed over by "
		    "the reload", sh->cfg->name, mcp_server_pid(sh->srv));
	else
		sh->srv = mcp_server_start(mcp_shared_cfg.base, &p,
		    &mcp_shared_ops, sh);
	if (sh->raw != NULL) {
		json_decref(sh->in.json);
		free(sh->raw);
		sh->raw = NULL;
	}
}

void
mcp_shared_restore(const struct handover_in *in, char *raw)
{
	const char *name = json_string_value(json_object_get(in->json,
	    "name"));
	size_t i;

	for (i = 0; name != NULL && i < mcp_shared_n; i++)
		if (strcmp(mcp_shared_srvs[i].cfg->name, name) == 0 &&
		    mcp_shared_srvs[i].srv == NULL &&
		    mcp_shared_srvs[i].raw == NULL) {
			mcp_shared_srvs[i].in = *in;
			mcp_shared_srvs[i].raw = raw;
			return;
		}
	log_warn("a reload handed over shared MCP server %s, which this "
	    "daemon's configuration does not have: killed", name != NULL ?
	    name : "?");
	mcp_server_discard(in, in->json);
	json_decref(in->json);
	free(raw);
}

void
mcp_shared_adopt(void)
{
	size_t i;

	for (i = 0; i < mcp_shared_n; i++)
		if (mcp_shared_srvs[i].srv == NULL)
			mcp_shared_launch(&mcp_shared_srvs[i]);
}

void
mcp_shared_adopted(void)
{
	size_t i;

	for (i = 0; i < mcp_shared_n; i++)
		if (mcp_shared_srvs[i].srv != NULL)
			mcp_server_adopted(mcp_shared_srvs[i].srv);
}

/*
 * A reload: a server carriable as it is goes into the handover with its
 * proxy (as a session's does, session_mcp.c); the others are killed, to
 * start afresh in the next image.
 */
void
mcp_shared_handover(void)
{
	struct handover_rec r;
	struct buf out = { 0 };
	struct mcp_shared_srv *sh;
	size_t i;
	int pid;

	for (i = 0; i < mcp_shared_n; i++) {
		sh = &mcp_shared_srvs[i];
		if (sh->srv == NULL)
			continue;
		if (!mcp_server_carriable(sh->srv)) {
			if ((pid = mcp_server_pid(sh->srv)) > 0)
				kill(-pid, SIGKILL);
			continue;
		}
		r.json = json_pack("{s:b, s:s}", "shared", 1, "name",
		    sh->cfg->name);
		memset(&r.bytes, 0, sizeof r.bytes);
		mcp_server_save(sh->srv, &r, r.json);
		if (sh->proxy != NULL) {
			json_object_set_new(r.json, "proxy",
			    proxy_tool_save(sh->proxy, &r));
			handover_keep_fd(sh->netns);
			json_object_set_new(r.json, "netns",
			    json_integer(sh->netns));
		}
		out.len = 0;
		handover_encode(&r, &out);
		journal_append(JOURNAL_MCP, out.data, out.len, NULL, 0);
	}
	buf_free(&out);
}

struct mcp_server *
mcp_shared_find(const char *name)
{
	size_t i;

	for (i = 0; !mcp_shared_stopping && i < mcp_shared_n; i++)
		if (strcmp(mcp_shared_srvs[i].cfg->name, name) == 0)
			return mcp_shared_srvs[i].srv;
	return NULL;
}

size_t
mcp_shared_count(void)
{
	return mcp_shared_stopping ? 0 : mcp_shared_n;
}

struct mcp_server *
mcp_shared_get(size_t i)
{
	return i < mcp_shared_n ? mcp_shared_srvs[i].srv : NULL;
}

/*
 * Its sandbox is its config's, the daemon's default when it gives none,
 * never below --min-sandbox; network rules through a proxy of its own in a
 * namespace of its own.
 */
static void
mcp_shared_prepare(void *arg, struct mcp_server *srv, struct proc_spec *spec)
{
	struct mcp_shared_srv *sh = arg;
	const struct tooldef_sandbox *td = &sh->cfg->sandbox;
	enum tooldef_sandbox_mode mode = td->mode;
	struct netpolicy *policy;
	const json_t *v;
	char err[256], id[MCP_NAME_MAX + 8];
	uint16_t port = 0;
	size_t i;
	int fd;

	(void)srv;
	if (mode == TOOLDEF_SANDBOX_UNSET)
		mode = mcp_shared_cfg.default_sandbox;
	if (mode < mcp_shared_cfg.min_sandbox)
		mode = mcp_shared_cfg.min_sandbox;
	spec->sandbox.profile = mode == TOOLDEF_SANDBOX_READ_ONLY ?
	    SANDBOX_READ_ONLY : mode == TOOLDEF_SANDBOX_WORKSPACE_WRITE ?
	    SANDBOX_WORKSPACE_WRITE : SANDBOX_NONE;
	spec->sandbox.network = td->network == 1;
	spec->sandbox.nroots = 0;
	json_array_foreach(td->roots, i, v)
		if (spec->sandbox.nroots < SANDBOX_MAX_ROOTS)
			sh->roots[spec->sandbox.nroots++] =
			    json_string_value(v);
	spec->sandbox.roots = sh->roots;
	proxy_tool_free(sh->proxy);
	sh->proxy = NULL;
	if (td->policy != NULL) {
		policy = netpolicy_merge(td->policy,
		    mcp_shared_cfg.network_deny);
		spec->sandbox.net_rules = true;
		if (sh->netns == -1 && netns_available() &&
		    (sh->netns = netns_new(err, sizeof err)) == -1)
			log_warn("MCP server %s: network: %s", sh->cfg->name,
			    err);
		spec->sandbox.netns = sh->netns;
		snprintf(id, sizeof id, "mcp-%s", sh->cfg->name);
		if (sh->netns != -1) {
			if (sh->quota == NULL)
				sh->quota = proxy_quota_new();
			if ((fd = netns_listen(sh->netns, &port, err,
			    sizeof err)) == -1) {
				log_warn("MCP server %s: network: %s",
				    sh->cfg->name, err);
				spec->sandbox.netns = -1;
			} else
				sh->proxy = proxy_tool_new(fd, policy,
				    sh->quota, "daemon", id, sh->cfg->name);
		}
		netpolicy_free(policy);
	}
	mcp_shared_env(sh, sh->proxy != NULL ? port : 0);
	spec->envp = sh->envp;
	spec->limits.memory_bytes = sh->cfg->limits.memory_bytes;
	spec->limits.max_processes = sh->cfg->limits.max_processes;
	spec->limits.cpu_percent = sh->cfg->limits.cpu_percent;
}

/* The daemon's environment; with a proxy port, its variables instead. */
static void
mcp_shared_env(struct mcp_shared_srv *sh, uint16_t port)
{
	static const char *const vars[] = { "HTTP_PROXY", "http_proxy",
	    "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
	    "NO_PROXY", "no_proxy" };
	const json_t *v;
	const char *key;
	size_t n = 0, i, *offs;

	buf_reset(&sh->env);
	offs = xcalloc(json_object_size(mcp_shared_cfg.base_env) +
	    nitems(vars) + 1, sizeof *offs);
	json_object_foreach((json_t *)mcp_shared_cfg.base_env, key, v) {
		if (!json_is_string(v))
			continue;
		for (i = 0; port != 0 && i < nitems(vars); i++)
			if (strcmp(key, vars[i]) == 0)
				break;
		if (port != 0 && i < nitems(vars))
			continue;
		offs[n++] = sh->env.len;
		buf_printf(&sh->env, "%s=%s", key, json_string_value(v));
		buf_add(&sh->env, "", 1);
	}
	/* NO_PROXY empty: localhost too goes through the proxy's rules. */
	for (i = 0; port != 0 && i < nitems(vars); i++) {
		offs[n++] = sh->env.len;
		if (i < 6)
			buf_printf(&sh->env, "%s=%s://127.0.0.1:%u", vars[i],
			    i < 4 ? "http" : "socks5h", (unsigned)port);
		else
			buf_printf(&sh->env, "%s=", vars[i]);
		buf_add(&sh->env, "", 1);
	}
	free(sh->envp);
	sh->envp = xcalloc(n + 1, sizeof *sh->envp);
	for (i = 0; i < n; i++)
		sh->envp[i] = sh->env.data + offs[i];
	free(offs);
}

static void
mcp_shared_state(void *arg, struct mcp_server *srv)
{
	struct mcp_shared_srv *sh = arg;

	log_msg(mcp_server_state(srv) == MCP_READY ? LOG_LEVEL_INFO :
	    LOG_LEVEL_WARN, "MCP server %s (scope daemon): %s%s%s",
	    sh->cfg->name, mcp_state_name(mcp_server_state(srv)),
	    mcp_server_why(srv) != NULL ? ": " : "", mcp_server_why(srv) !=
	    NULL ? mcp_server_why(srv) : "");
	if (mcp_shared_hooks.state != NULL)
		mcp_shared_hooks.state(srv);
}

static void
mcp_shared_tools(void *arg, struct mcp_server *srv)
{
	(void)arg;
	if (mcp_shared_hooks.tools != NULL)
		mcp_shared_hooks.tools(srv);
}

static void
mcp_shared_request(void *arg, struct mcp_server *srv, const json_t *id,
    const char *method, const json_t *params)
{
	(void)arg;
	if (mcp_shared_hooks.request != NULL)
		mcp_shared_hooks.request(srv, id, method, params);
	else
		mcp_server_respond(srv, id, NULL, "no session can answer it");
}

/* roots/list: its own cwd, not any session's. */
static json_t *
mcp_shared_roots(void *arg, struct mcp_server *srv)
{
	struct mcp_shared_srv *sh = arg;
	struct buf b = { 0 };
	const unsigned char *p;
	json_t *roots;

	(void)srv;
	buf_addstr(&b, "file://");
	for (p = (const unsigned char *)sh->cwd; *p != '\0'; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/-._~", *p) != NULL)
			buf_add(&b, p, 1);
		else
			buf_printf(&b, "%%%02X", *p);
	roots = json_pack("[{s:s%, s:s}]", "uri", b.data, b.len, "name",
	    "cwd");
	buf_free(&b);
	return roots;
}

static void
mcp_shared_log(void *arg, struct mcp_server *srv, int level,
    const char *text)
{
	struct mcp_shared_srv *sh = arg;

	(void)srv;
	log_msg((enum log_level)level, "MCP_SERVER=%s (scope daemon): %s",
	    sh->cfg->name, text);
}

static void
mcp_shared_gone_cb(void *arg)
{
	(void)arg;
	if (mcp_shared_left > 0)
		mcp_shared_left--;
}

static void
mcp_shared_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	bool *late = arg;

	(void)fd;
	(void)what;
	*late = true;
}

void
mcp_shared_stop(void)
{
	struct event *deadline;
	struct timeval tv;
	int64_t ms;
	bool late = false;
	size_t i;

	if (mcp_shared_n == 0)
		return;
	mcp_shared_stopping = true;
	for (i = 0; i < mcp_shared_n; i++) {
		if (mcp_shared_hooks.release != NULL)
			mcp_shared_hooks.release(mcp_shared_srvs[i].srv);
		if (mcp_shared_srvs[i].srv != NULL &&
		    !mcp_server_close(mcp_shared_srvs[i].srv,
		    mcp_shared_gone_cb, NULL))
			mcp_shared_left++;
		mcp_shared_srvs[i].srv = NULL;
	}
	/* stdin closed, TERM after a second, KILL after the kill grace. */
	ms = 1000 + mcp_shared_cfg.kill_grace_ms + MCP_SHARED_STOP_SLACK_MS;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	deadline = evtimer_new(mcp_shared_cfg.base, mcp_shared_deadline_cb,
	    &late);
	evtimer_add(deadline, &tv);
	while (mcp_shared_left > 0 && !late)
		event_base_loop(mcp_shared_cfg.base, EVLOOP_ONCE);
	event_free(deadline);
	if (mcp_shared_left > 0)
		log_warn("%u shared MCP servers did not end in %lld ms: killed",
		    mcp_shared_left, (long long)ms);
	mcp_shared_free();
}

static void
mcp_shared_free(void)
{
	size_t i;
	struct mcp_shared_srv *sh;

	for (i = 0; i < mcp_shared_n; i++) {
		sh = &mcp_shared_srvs[i];
		proxy_tool_free(sh->proxy);
		proxy_quota_unref(sh->quota);
		if (sh->netns != -1)
			close(sh->netns);
		free(sh->envp);
		buf_free(&sh->env);
		free(sh->cwd);
	}
	free(mcp_shared_srvs);
	mcp_shared_srvs = NULL;
	mcp_shared_n = 0;
}
