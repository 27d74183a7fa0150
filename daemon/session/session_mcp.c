/*
 * A session's MCP servers (doc/design.md §7, MCP servers): the operator's
 * (--mcp-config) and its own (createSession mcpServers), started with it in
 * parallel; their tools as mcp__SERVER__TOOL ToolDefs run by the executor
 * like any other (runner mcp); their requests (roots, sampling,
 * elicitation) answered for the session.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/content.h"
#include "core/executor.h"
#include "log.h"
#include "core/netpolicy.h"
#include "handover.h"
#include "mcp/mcp.h"
#include "metrics.h"
#include "net/proxy.h"
#include "session/journal.h"
#include "session/mcp_shared.h"
#include "session/session_int.h"
#include "supervisor/capture.h"
#include "util.h"

/* Requests from servers a session's client has yet to answer. */
#define SESSION_MCP_PENDING_MAX 64

/* How a call ended, for metrics. */
enum session_mcp_outcome {
	MCP_OUTCOME_OK,
	MCP_OUTCOME_ERROR,     /* the server said isError */
	MCP_OUTCOME_FAILED,    /* no result: a failed server, a crash... */
	MCP_OUTCOME_CANCELLED,
	MCP_OUTCOME_TIMEOUT,
	SESSION_MCP_OUTCOMES,
};
static const char *const session_mcp_outcome_names[] = { "ok", "error",
    "failed", "cancelled", "timeout" };

struct mcp_tool {
	char *name;              /* mcp__SERVER__TOOL */
	struct tooldef *def;
	json_t *listed;          /* the server's own description */
};

struct mcp_srv {
	struct session_mcp *m;
	const struct mcp_server_config *cfg;
	struct mcp_server *srv;
	char *prefix;            /* mcp__SERVER__, sanitized */
	struct mcp_tool *tools;
	size_t ntools;
	struct tooldef *waiting; /* the def of a call made before its list */
	const char *roots[SANDBOX_MAX_ROOTS];
	struct proxy_tool *proxy; /* network rules: its way out (§7.2) */
	int netns;               /* ...and the namespace it runs in */
	uint64_t outcomes[SESSION_MCP_OUTCOMES]; /* its calls, by outcome */
	char **envp;             /* its last spawn's environment */
	struct buf vars;         /* ...the proxy's variables in it */
	bool shared;             /* scope daemon: mcp_shared.c's, not ours */
	struct mcp_run *runs;    /* the session's calls to it */
};

struct mcp_pending {
	struct mcp_pending *next;
	char id[24];
	struct mcp_srv *sv;
	json_t *server_id;
};

struct session_mcp {
	struct session *s;
	struct mcp_config *own;   /* createSession's */
	struct mcp_srv *srvs;
	size_t n;
	bool sampling, elicitation;
	struct mcp_pending *pending;
	unsigned npending;
	char *cwd;                /* the root they were last told of */
	uint64_t next_request;
	unsigned closing;         /* servers closed whose process runs on */
};

struct mcp_run {
	struct session *s;
	struct exec_tool *t;
	struct mcp_srv *sv;
	struct mcp_call *call;
	struct event *timeout, *now;
	enum exec_end end;
	size_t max_result;
	uint64_t started_ms;
	int64_t timeout_ms;      /* its call's, from started_ms; 0: none */
	struct mcp_run *prev, *next; /* its server's runs (sv->runs) */
};

static struct mcp_config *session_mcp_operator;
static struct session_mcp_config session_mcp_cfg;

static void	session_mcp_add(struct session_mcp *,
		    const struct mcp_server_config *);
static void	session_mcp_launch(struct mcp_srv *,
		    const struct handover_in *, const json_t *);
static bool	session_mcp_carried_srv(const struct mcp_srv *);
static void	session_mcp_prepare(void *, struct mcp_server *,
		    struct proc_spec *);
static void	session_mcp_state(void *, struct mcp_server *);
static void	session_mcp_tools(void *, struct mcp_server *);
static void	session_mcp_request(void *, struct mcp_server *,
		    const json_t *, const char *, const json_t *);
static json_t	*session_mcp_roots(void *, struct mcp_server *);
static void	session_mcp_log(void *, struct mcp_server *, int,
		    const char *);
static void	session_mcp_clear_tools(struct mcp_srv *);
static struct mcp_srv *session_mcp_srv(struct session *, const char *);
static void	session_mcp_announce(struct mcp_srv *);
static void	session_mcp_progress(void *, const json_t *);
static void	session_mcp_done(void *, const json_t *, const char *);
static void	session_mcp_end(struct mcp_run *, const struct exec_done *,
		    const struct exec_exit *);
static void	session_mcp_bounded(struct mcp_run *, const json_t *, bool,
		    const json_t *);
static void	session_mcp_timeout_cb(evutil_socket_t, short, void *);
static void	session_mcp_now_cb(evutil_socket_t, short, void *);
static json_t	*session_mcp_uri(const char *);
static void	session_mcp_shared_each(struct mcp_server *,
		    void (*)(struct mcp_srv *));
static void	session_mcp_shared_state(struct mcp_server *);
static void	session_mcp_shared_tools(struct mcp_server *);
static void	session_mcp_shared_request(struct mcp_server *,
		    const json_t *, const char *, const json_t *);
static void	session_mcp_shared_release(struct mcp_server *);
static void	session_mcp_release(struct mcp_srv *, bool);
static void	session_mcp_refresh(struct mcp_srv *);
static void	session_mcp_unanswer(struct session_mcp *, struct mcp_srv *);
static void	session_mcp_top(json_t *, const char *, const char *,
		    struct mcp_server *, bool);

static const struct mcp_server_ops session_mcp_ops = {
	.prepare = session_mcp_prepare,
	.state = session_mcp_state,
	.tools = session_mcp_tools,
	.request = session_mcp_request,
	.roots = session_mcp_roots,
	.log = session_mcp_log,
};

static const struct mcp_call_ops session_mcp_call_ops = {
	.progress = session_mcp_progress,
	.done = session_mcp_done,
};

static const struct mcp_shared_hooks session_mcp_shared_hooks = {
	.state = session_mcp_shared_state,
	.tools = session_mcp_shared_tools,
	.request = session_mcp_shared_request,
	.release = session_mcp_shared_release,
};

void
session_mcp_init(const struct session_mcp_config *cfg)
{
	session_mcp_cfg = *cfg;
	mcp_shared_set_hooks(&session_mcp_shared_hooks);
}

void
session_mcp_set_operator(struct mcp_config *c)
{
	mcp_config_free(session_mcp_operator);
	session_mcp_operator = c;
}

const struct mcp_config *
session_mcp_operator_config(void)
{
	return session_mcp_operator;
}

int
session_mcp_check(const struct mcp_config *own, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; own != NULL && i < own->n; i++)
		if (mcp_config_find(session_mcp_operator,
		    own->servers[i].name) != NULL) {
			snprintf(err, errlen, "mcpServers.%s: the operator's "
			    "--mcp-config already defines a server of this name",
			    own->servers[i].name);
			return -1;
		}
	return 0;
}

/*
 * The session's record for the journal (what a reload or a restart makes
 * it again from) holds its own servers and answers too.
 */
static void
session_mcp_journal(struct session *s, const json_t *servers, bool sampling,
    bool elicitation)
{
	json_t *rec, *answers = json_array();
	char *text;

	if (sampling)
		json_array_append_new(answers, json_string("sampling"));
	if (elicitation)
		json_array_append_new(answers, json_string("elicitation"));
	if (s->journal == NULL || (rec = json_loads(s->journal, 0, NULL)) ==
	    NULL) {
		json_decref(answers);
		return;
	}
	if (servers != NULL)
		json_object_set_new(rec, "mcpServers", json_deep_copy(servers));
	json_object_set_new(rec, "mcpAnswers", answers);
	if ((text = json_dumps(rec, JSON_COMPACT)) != NULL &&
	    strcmp(text, s->journal) != 0) {
		free(s->journal);
		s->journal = text;
		session_mcp_cfg.rejournal(s);
	} else
		free(text);
	json_decref(rec);
}

void
session_mcp_restore(struct session *s, const json_t *rec)
{
	const json_t *servers = json_object_get(rec, "mcpServers"), *a;
	struct mcp_config *own = NULL;
	bool sampling = false, elicitation = false;
	char err[512];
	size_t i;

	json_array_foreach(json_object_get(rec, "mcpAnswers"), i, a) {
		sampling |= json_is_string(a) && strcmp(json_string_value(a),
		    "sampling") == 0;
		elicitation |= json_is_string(a) && strcmp(
		    json_string_value(a), "elicitation") == 0;
	}
	/* Again (a later record): what started first goes. */
	session_mcp_free(s);
	if (servers != NULL && (own = mcp_config_parse(servers, false, err,
	    sizeof err)) == NULL) {
		log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "journal: "
		    "its MCP servers no longer parse: %s", err);
		servers = NULL;
	}
	/* Started afresh: a server's process is not carried over. */
	session_mcp_start(s, own, servers, sampling, elicitation);
}

void
session_mcp_start(struct session *s, struct mcp_config *own,
    const json_t *servers, bool sampling, bool elicitation)
{
	struct session_mcp *m;
	size_t i, n;

	if (servers != NULL || sampling || elicitation)
		session_mcp_journal(s, servers, sampling, elicitation);

	n = (session_mcp_operator != NULL ? session_mcp_operator->n : 0) +
	    (own != NULL ? own->n : 0);
	if (n == 0) {
		mcp_config_free(own);
		return;
	}
	m = s->mcp = xcalloc(1, sizeof *m);
	m->s = s;
	m->own = own;
	m->sampling = sampling;
	m->elicitation = elicitation;
	m->srvs = xcalloc(n, sizeof *m->srvs);
	m->cwd = xstrdup(exec_cwd(s->ex));
	/* In parallel: each starts now and reports when it is ready. */
	for (i = 0; session_mcp_operator != NULL &&
	    i < session_mcp_operator->n; i++)
		session_mcp_add(m, &session_mcp_operator->servers[i]);
	for (i = 0; own != NULL && i < own->n; i++)
		session_mcp_add(m, &own->servers[i]);
}

static void
session_mcp_add(struct session_mcp *m, const struct mcp_server_config *cfg)
{
	struct mcp_srv *sv = &m->srvs[m->n++];
	char *name = mcp_tool_name(cfg->name, "");
	json_t *o;
	char err[256];

	sv->m = m;
	sv->cfg = cfg;
	sv->prefix = name;
	o = json_pack("{s:s, s:{s:s}}", "name", name, "inputSchema", "type",
	    "object");
	if (cfg->timeout_ms > 0)
		json_object_set_new(o, "timeoutMs",
		    json_integer(cfg->timeout_ms));
	if ((sv->waiting = tooldef_parse_runner(o, TOOLDEF_RUNNER_MCP, err,
	    sizeof err)) == NULL)
		fatal("an MCP placeholder definition: %s", err);
	json_decref(o);
	if (cfg->scope == MCP_SCOPE_DAEMON) {
		/* The daemon's one process: its tools as they are now. */
		sv->shared = true;
		if ((sv->srv = mcp_shared_find(cfg->name)) != NULL &&
		    mcp_server_state(sv->srv) == MCP_READY)
			session_mcp_tools(sv, sv->srv);
		return;
	}
	/* Restoring: started or adopted once every record is read. */
	if (session_journal_restoring)
		return;
	session_mcp_launch(sv, NULL, NULL);
}

/* A server of the session's, started, or adopted from a reload's record. */
static void
session_mcp_launch(struct mcp_srv *sv, const struct handover_in *in,
    const json_t *rec)
{
	const struct mcp_server_config *cfg = sv->cfg;
	struct session_mcp *m = sv->m;
	struct mcp_server_params p = { 0 };
	char id[MCP_NAME_MAX + 8];
	const json_t *v;

	p.cfg = cfg;
	p.cwd = exec_cwd(m->s->ex);
	p.sampling = m->sampling;
	p.elicitation = m->elicitation;
	p.start_timeout_ms = cfg->start_timeout_ms > 0 ? cfg->start_timeout_ms :
	    session_mcp_cfg.start_timeout_ms;
	if (in != NULL && (v = json_object_get(rec, "proxy")) != NULL) {
		/* Its way out goes on too: the same port, its tunnels. */
		sv->netns = session_net_adopt(m->s, json_object_get(v,
		    "policy"), json_object_get(rec, "netns"));
		if (m->s->net_quota == NULL)
			m->s->net_quota = proxy_quota_new();
		snprintf(id, sizeof id, "mcp-%s", cfg->name);
		if (sv->netns == -1 || (sv->proxy = proxy_tool_adopt(in, v,
		    m->s->net_quota, m->s->id, id, cfg->name)) == NULL) {
			mcp_server_discard(in, rec);
			in = NULL;
		}
	}
	if (in != NULL && (sv->srv = mcp_server_adopt(
	    session_mcp_cfg.client.base, &p, &session_mcp_ops, sv, in,
	    rec)) != NULL) {
		log_about(LOG_LEVEL_INFO, m->s->id, NULL, NULL, "MCP server %s "
		    "(pid %d) handed over by the reload", cfg->name,
		    mcp_server_pid(sv->srv));
		session_mcp_tools(sv, sv->srv);
		return;
	}
	sv->srv = mcp_server_start(session_mcp_cfg.client.base, &p,
	    &session_mcp_ops, sv);
}

/*
 * Its sandbox as a tool's (the session's default, the floor), network rules
 * through the proxy as a tool's (its own port, the session's namespace for
 * that policy), its env with the proxy's variables.
 */
static void
session_mcp_prepare(void *arg, struct mcp_server *srv, struct proc_spec *spec)
{
	static const char *const vars[] = { "HTTP_PROXY", "http_proxy",
	    "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
	    "NO_PROXY", "no_proxy" };
	struct mcp_srv *sv = arg;
	struct session *s = sv->m->s;
	struct exec_spawn req = { 0 };
	struct netpolicy *policy;
	char **base = session_mcp_cfg.env_strings(s), id[MCP_NAME_MAX + 8];
	size_t n, i, j, *offs;
	uint16_t port = 0;

	req.sandbox = &sv->cfg->sandbox;
	session_mcp_cfg.sandbox(s, &req, &spec->sandbox, sv->roots);
	proxy_tool_free(sv->proxy);
	sv->proxy = NULL;
	if ((policy = session_net_policy(s, &sv->cfg->sandbox)) != NULL) {
		spec->sandbox.net_rules = true;
		spec->sandbox.netns = sv->netns = session_net_ns(s, policy);
		snprintf(id, sizeof id, "mcp-%s", sv->cfg->name);
		if (spec->sandbox.netns != -1 && (sv->proxy =
		    session_net_proxy(s, spec->sandbox.netns, policy, id,
		    sv->cfg->name, &port)) == NULL)
			spec->sandbox.netns = -1;
		netpolicy_free(policy);
	}
	for (n = 0; base[n] != NULL; n++)
		;
	free(sv->envp);
	buf_reset(&sv->vars);
	sv->envp = xcalloc(n + nitems(vars) + 1, sizeof *sv->envp);
	offs = xcalloc(nitems(vars), sizeof *offs);
	for (i = n = 0; base[i] != NULL; i++) {
		for (j = 0; sv->proxy != NULL && j < nitems(vars); j++)
			if (strncmp(base[i], vars[j], strlen(vars[j])) == 0 &&
			    base[i][strlen(vars[j])] == '=')
				break;
		if (sv->proxy == NULL || j == nitems(vars))
			sv->envp[n++] = base[i];
	}
	/* NO_PROXY empty: localhost too goes through the proxy's rules. */
	for (j = 0; sv->proxy != NULL && j < nitems(vars); j++) {
		offs[j] = sv->vars.len;
		if (j < 6)
			buf_printf(&sv->vars, "%s=%s://127.0.0.1:%u", vars[j],
			    j < 4 ? "http" : "socks5h", (unsigned)port);
		else
			buf_printf(&sv->vars, "%s=", vars[j]);
		buf_add(&sv->vars, "", 1);
	}
	for (j = 0; sv->proxy != NULL && j < nitems(vars); j++)
		sv->envp[n++] = sv->vars.data + offs[j];
	free(offs);
	spec->envp = sv->envp;
	spec->limits.memory_bytes = sv->cfg->limits.memory_bytes;
	spec->limits.max_processes = sv->cfg->limits.max_processes;
	spec->limits.cpu_percent = sv->cfg->limits.cpu_percent;
	spec->user = sv->m->s->user;
}

static void
session_mcp_state(void *arg, struct mcp_server *srv)
{
	struct mcp_srv *sv = arg;

	log_about(mcp_server_state(srv) == MCP_READY ? LOG_LEVEL_INFO :
	    LOG_LEVEL_WARN, sv->m->s->id, NULL, NULL, "MCP server %s: "
	    "%s%s%s", sv->cfg->name, mcp_state_name(mcp_server_state(srv)),
	    mcp_server_why(srv) != NULL ? ": " : "", mcp_server_why(srv) !=
	    NULL ? mcp_server_why(srv) : "");
	session_mcp_announce(sv);
}

/* mcp_server: a server's state and tools, to the session's subscribers. */
static void
session_mcp_announce(struct mcp_srv *sv)
{
	json_t *o = mcp_server_json(sv->srv), *names = json_array();
	size_t i;

	for (i = 0; i < sv->ntools; i++)
		json_array_append_new(names, json_string(sv->tools[i].name));
	json_object_set_new(o, "tools", names);
	json_object_set_new(o, "scope", json_string(sv->shared ? "daemon" :
	    "session"));
	session_mcp_cfg.emit(sv->m->s, "mcp_server", o);
}

static void
session_mcp_clear_tools(struct mcp_srv *sv)
{
	size_t i;

	for (i = 0; i < sv->ntools; i++) {
		free(sv->tools[i].name);
		tooldef_unref(sv->tools[i].def);
		json_decref(sv->tools[i].listed);
	}
	free(sv->tools);
	sv->tools = NULL;
	sv->ntools = 0;
}

/*
 * Its tools as ToolDefs: concurrency-safe when readOnlyHint is true and
 * cancel on interrupt then, unless the configuration says otherwise; the
 * other annotations are shown, never trusted.
 */
static void
session_mcp_tools(void *arg, struct mcp_server *srv)
{
	struct mcp_srv *sv = arg;
	const json_t *list = mcp_server_tools(srv), *t, *v;
	struct mcp_tool *mt;
	const char *tname;
	json_t *o;
	char err[512];
	size_t i, j;
	int safe, cancel;

	session_mcp_clear_tools(sv);
	sv->tools = xcalloc(json_array_size(list) + 1, sizeof *sv->tools);
	json_array_foreach(list, i, t) {
		tname = json_string_value(json_object_get(t, "name"));
		mt = &sv->tools[sv->ntools];
		mt->name = mcp_tool_name(sv->cfg->name, tname);
		for (j = 0; j < sv->ntools; j++)
			if (strcmp(sv->tools[j].name, mt->name) == 0)
				break;
		if (j < sv->ntools) {
			log_about(LOG_LEVEL_WARN, sv->m->s->id, NULL,
			    NULL, "MCP server %s: two tools are named %s once "
			    "sanitized: the second is left out", sv->cfg->name,
			    mt->name);
			free(mt->name);
			continue;
		}
		safe = mcp_config_safe(sv->cfg, tname);
		if (safe == -1)
			safe = json_is_true(json_object_get(json_object_get(t,
			    "annotations"), "readOnlyHint"));
		cancel = mcp_config_cancel(sv->cfg, tname);
		if (cancel == -1)
			cancel = safe;
		v = json_object_get(t, "inputSchema");
		o = json_pack("{s:s, s:O, s:b, s:s}", "name", mt->name,
		    "inputSchema", json_is_object(v) ? v : json_object(),
		    "concurrencySafe", safe, "interruptBehavior", cancel ?
		    "cancel" : "block");
		if (json_is_string(json_object_get(t, "description")))
			json_object_set(o, "description", json_object_get(t,
			    "description"));
		if (sv->cfg->timeout_ms > 0)
			json_object_set_new(o, "timeoutMs",
			    json_integer(sv->cfg->timeout_ms));
		if ((mt->def = tooldef_parse_runner(o, TOOLDEF_RUNNER_MCP, err,
		    sizeof err)) == NULL) {
			log_about(LOG_LEVEL_WARN, sv->m->s->id, NULL,
			    NULL, "MCP server %s: tool %s left out: %s",
			    sv->cfg->name, mt->name, err);
			free(mt->name);
			json_decref(o);
			continue;
		}
		json_decref(o);
		mt->listed = json_deep_copy(t);
		sv->ntools++;
	}
	session_mcp_announce(sv);
}

/* sampling/createMessage, elicitation/create: to the session's client. */
static void
session_mcp_request(void *arg, struct mcp_server *srv, const json_t *id,
    const char *method, const json_t *params)
{
	struct mcp_srv *sv = arg;
	struct session_mcp *m = sv->m;
	struct mcp_pending *p;

	if (m->npending >= SESSION_MCP_PENDING_MAX) {
		mcp_server_respond(srv, id, NULL, "too many requests wait for "
		    "the session's client already");
		return;
	}
	p = xcalloc(1, sizeof *p);
	snprintf(p->id, sizeof p->id, "mr-%llu",
	    (unsigned long long)++m->next_request);
	p->sv = sv;
	p->server_id = json_deep_copy(id);
	p->next = m->pending;
	m->pending = p;
	m->npending++;
	session_mcp_cfg.emit(m->s, "mcp_request", json_pack("{s:s, s:s, s:s, s:O}",
	    "requestId", p->id, "server", sv->cfg->name, "method", method,
	    "params", params != NULL ? params : json_null()));
}

int
session_mcp_respond(struct session *s, const char *id, const json_t *result,
    const char *error, char *err, size_t errlen)
{
	struct session_mcp *m = s->mcp;
	struct mcp_pending **pp, *p;

	for (pp = m != NULL ? &m->pending : NULL; pp != NULL && *pp != NULL;
	    pp = &(*pp)->next)
		if (strcmp((*pp)->id, id) == 0)
			break;
	if (pp == NULL || *pp == NULL) {
		snprintf(err, errlen, "no MCP request %.32s waits for an "
		    "answer in this session", id);
		return -1;
	}
	p = *pp;
	*pp = p->next;
	m->npending--;
	if (p->sv->srv != NULL)
		mcp_server_respond(p->sv->srv, p->server_id, result, error);
	json_decref(p->server_id);
	free(p);
	return 0;
}

/* A path as a file:// URI, its bytes outside the unreserved ones escaped. */
static json_t *
session_mcp_uri(const char *path)
{
	struct buf b = { 0 };
	const unsigned char *p;
	json_t *v;

	buf_addstr(&b, "file://");
	for (p = (const unsigned char *)path; *p != '\0'; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/-._~", *p) != NULL)
			buf_add(&b, p, 1);
		else
			buf_printf(&b, "%%%02X", *p);
	v = json_stringn(b.data, b.len);
	buf_free(&b);
	return v;
}

/* roots/list: the session's cwd and its writableRoots. */
static json_t *
session_mcp_roots(void *arg, struct mcp_server *srv)
{
	struct mcp_srv *sv = arg;
	const json_t *v;
	json_t *roots = json_array();
	size_t i;

	json_array_append_new(roots, json_pack("{s:o, s:s}", "uri",
	    session_mcp_uri(exec_cwd(sv->m->s->ex)), "name", "cwd"));
	json_array_foreach(sv->m->s->sandbox.roots, i, v)
		json_array_append_new(roots, json_pack("{s:o, s:s}", "uri",
		    session_mcp_uri(json_string_value(v)), "name",
		    "writableRoot"));
	return roots;
}

static void
session_mcp_log(void *arg, struct mcp_server *srv, int level,
    const char *text)
{
	struct mcp_srv *sv = arg;

	log_about((enum log_level)level, sv->m->s->id, NULL, NULL,
	    "MCP_SERVER=%s: %s", sv->cfg->name, text);
}

/* The session's cwd moved (S14): its servers are told their roots changed. */
void
session_mcp_roots_changed(struct session *s)
{
	const char *cwd = exec_cwd(s->ex);
	size_t i;

	if (s->mcp == NULL || (s->mcp->cwd != NULL && strcmp(s->mcp->cwd, cwd)
	    == 0))
		return;
	free(s->mcp->cwd);
	s->mcp->cwd = xstrdup(cwd);
	/* A shared server's roots are its own cwd: they do not move. */
	for (i = 0; i < s->mcp->n; i++)
		if (s->mcp->srvs[i].srv != NULL && !s->mcp->srvs[i].shared)
			mcp_server_roots_changed(s->mcp->srvs[i].srv);
}

static struct mcp_srv *
session_mcp_srv(struct session *s, const char *name)
{
	size_t i;

	for (i = 0; s->mcp != NULL && i < s->mcp->n; i++)
		if (strncmp(name, s->mcp->srvs[i].prefix,
		    strlen(s->mcp->srvs[i].prefix)) == 0)
			return &s->mcp->srvs[i];
	return NULL;
}

/*
 * The ToolDef of mcp__SERVER__TOOL; before the server's first tools/list,
 * one that lets the call wait for it (its input is checked by the server).
 */
struct tooldef *
session_mcp_tool(struct session *s, const char *name)
{
	struct mcp_srv *sv;
	size_t i;

	if (strncmp(name, "mcp__", 5) != 0 || (sv = session_mcp_srv(s, name))
	    == NULL || sv->srv == NULL)
		return NULL;
	for (i = 0; i < sv->ntools; i++)
		if (strcmp(sv->tools[i].name, name) == 0)
			return sv->tools[i].def;
	if (sv->ntools == 0 && mcp_server_state(sv->srv) != MCP_READY)
		return sv->waiting;
	return NULL;
}

void
session_mcp_tools_json(struct session *s, json_t *tools)
{
	struct mcp_srv *sv;
	const json_t *a;
	json_t *o;
	size_t i, j;

	for (i = 0; s != NULL && s->mcp != NULL && i < s->mcp->n; i++) {
		sv = &s->mcp->srvs[i];
		for (j = 0; j < sv->ntools; j++) {
			o = tooldef_json(sv->tools[j].def);
			json_object_set_new(o, "mcpServer",
			    json_string(sv->cfg->name));
			if ((a = json_object_get(sv->tools[j].listed,
			    "annotations")) != NULL)
				json_object_set(o, "annotations", (json_t *)a);
			json_array_append_new(tools, o);
		}
	}
}

json_t *
session_mcp_json(struct session *s)
{
	json_t *a = json_array(), *o;
	size_t i;

	for (i = 0; s != NULL && s->mcp != NULL && i < s->mcp->n; i++)
		if (s->mcp->srvs[i].srv != NULL) {
			o = mcp_server_json(s->mcp->srvs[i].srv);
			json_object_set_new(o, "scope", json_string(
			    s->mcp->srvs[i].shared ? "daemon" : "session"));
			json_array_append_new(a, o);
		}
	return a;
}

/*
 * The metrics of the caller's sessions' servers and of the shared ones:
 * calls by outcome (per session), restarts, readiness, and for top one
 * sample per server (its state, scope and pid), its calls in flight and
 * done; a shared server's are labelled session "daemon".
 */
void
session_mcp_metrics(uid_t uid, json_t *families)
{
	json_t *calls, *restarts, *up, *top[3];
	struct mcp_server *srv;
	struct mcp_srv *sv;
	struct session *s;
	size_t i, k;

	calls = json_pack("{s:s, s:s, s:s, s:[]}", "name",
	    "stexec_mcp_calls_total", "type", "counter", "help", "Calls to an "
	    "MCP server of the session, by how they ended: ok, error (the "
	    "server's isError), failed (no result: its failure, a crash, a "
	    "JSON-RPC error), cancelled, timeout.", "samples");
	restarts = json_pack("{s:s, s:s, s:s, s:[]}", "name",
	    "stexec_mcp_restarts_total", "type", "counter", "help", "Restarts "
	    "of an MCP server after it failed.", "samples");
	up = json_pack("{s:s, s:s, s:s, s:[]}", "name", "stexec_mcp_ready",
	    "type", "gauge", "help", "Whether an MCP server is ready (1) or "
	    "starting, restarting or failed (0).", "samples");
	top[0] = json_pack("{s:s, s:s, s:s, s:[]}", "name", "stexec_mcp_server",
	    "type", "gauge", "help", "One sample per MCP server, its state and "
	    "scope as labels: its process id (0: none now).", "samples");
	top[1] = json_pack("{s:s, s:s, s:s, s:[]}", "name",
	    "stexec_mcp_calls_in_flight", "type", "gauge", "help", "Calls of "
	    "an MCP server sent or waiting for it to be ready.", "samples");
	top[2] = json_pack("{s:s, s:s, s:s, s:[]}", "name",
	    "stexec_mcp_calls_done_total", "type", "counter", "help", "Calls "
	    "of an MCP server that ended, any way (all sessions' for a shared "
	    "one).", "samples");
	for (s = session_list; s != NULL; s = s->next) {
		if (s->uid != uid || s->closing || s->mcp == NULL)
			continue;
		for (i = 0; i < s->mcp->n; i++) {
			sv = &s->mcp->srvs[i];
			for (k = 0; k < SESSION_MCP_OUTCOMES; k++)
				json_array_append_new(json_object_get(calls,
				    "samples"), json_pack("{s:{s:s, s:s, s:s}, "
				    "s:I}", "labels", "session", s->id, "server",
				    sv->cfg->name, "outcome",
				    session_mcp_outcome_names[k], "value",
				    (json_int_t)sv->outcomes[k]));
			if (sv->shared || sv->srv == NULL)
				continue;
			json_array_append_new(json_object_get(restarts,
			    "samples"), json_pack("{s:{s:s, s:s}, s:I}",
			    "labels", "session", s->id, "server", sv->cfg->name,
			    "value", (json_int_t)mcp_server_restarts(sv->srv)));
			json_array_append_new(json_object_get(up, "samples"),
			    json_pack("{s:{s:s, s:s}, s:i}", "labels", "session",
			    s->id, "server", sv->cfg->name, "value",
			    mcp_server_state(sv->srv) == MCP_READY));
			session_mcp_top(json_pack("[o, o, o]", json_incref(
			    top[0]), json_incref(top[1]), json_incref(top[2])),
			    s->id, sv->cfg->name, sv->srv, false);
		}
	}
	for (i = 0; i < mcp_shared_count(); i++) {
		if ((srv = mcp_shared_get(i)) == NULL)
			continue;
		json_array_append_new(json_object_get(restarts, "samples"),
		    json_pack("{s:{s:s, s:s}, s:I}", "labels", "session",
		    "daemon", "server", mcp_server_name(srv), "value",
		    (json_int_t)mcp_server_restarts(srv)));
		json_array_append_new(json_object_get(up, "samples"),
		    json_pack("{s:{s:s, s:s}, s:i}", "labels", "session",
		    "daemon", "server", mcp_server_name(srv), "value",
		    mcp_server_state(srv) == MCP_READY));
		session_mcp_top(json_pack("[o, o, o]", json_incref(top[0]),
		    json_incref(top[1]), json_incref(top[2])), "daemon",
		    mcp_server_name(srv), srv, true);
	}
	json_array_append_new(families, calls);
	json_array_append_new(families, restarts);
	json_array_append_new(families, up);
	for (k = 0; k < nitems(top); k++)
		json_array_append_new(families, top[k]);
}

/* A server's samples for top into its three families (fams, stolen). */
static void
session_mcp_top(json_t *fams, const char *session, const char *name,
    struct mcp_server *srv, bool shared)
{
	json_t *o = mcp_server_json(srv);
	json_int_t pid = json_integer_value(json_object_get(o, "pid"));

	json_array_append_new(json_object_get(json_array_get(fams, 0),
	    "samples"), json_pack("{s:{s:s, s:s, s:s, s:s}, s:I}", "labels",
	    "session", session, "server", name, "state",
	    mcp_state_name(mcp_server_state(srv)), "scope", shared ? "daemon" :
	    "session", "value", pid));
	json_array_append_new(json_object_get(json_array_get(fams, 1),
	    "samples"), json_pack("{s:{s:s, s:s}, s:I}", "labels", "session",
	    session, "server", name, "value",
	    (json_int_t)mcp_server_calls_in_flight(srv)));
	json_array_append_new(json_object_get(json_array_get(fams, 2),
	    "samples"), json_pack("{s:{s:s, s:s}, s:I}", "labels", "session",
	    session, "server", name, "value",
	    (json_int_t)mcp_server_calls_done(srv)));
	json_decref(o);
	json_decref(fams);
}

static void
session_mcp_gone_cb(void *arg)
{
	struct mcp_srv *sv = arg;
	struct session_mcp *m = sv->m;

	if (--m->closing == 0)
		session_mcp_cfg.gone(m->s);
}

void
session_mcp_close(struct session *s)
{
	struct mcp_srv *sv;
	size_t i;

	for (i = 0; s->mcp != NULL && i < s->mcp->n; i++) {
		sv = &s->mcp->srvs[i];
		/* A shared server serves on: only this session lets go. */
		if (sv->shared)
			session_mcp_release(sv, false);
		else if (sv->srv != NULL && !mcp_server_close(sv->srv,
		    session_mcp_gone_cb, sv))
			s->mcp->closing++;
		sv->srv = NULL;
	}
}

bool
session_mcp_gone(const struct session *s)
{
	return s->mcp == NULL || s->mcp->closing == 0;
}

void
session_mcp_free(struct session *s)
{
	struct session_mcp *m = s->mcp;
	struct mcp_pending *p;
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->n; i++) {
		if (m->srvs[i].shared)
			session_mcp_release(&m->srvs[i], false);
		else if (m->srvs[i].srv != NULL)
			mcp_server_close(m->srvs[i].srv, NULL, NULL);
		session_mcp_clear_tools(&m->srvs[i]);
		tooldef_unref(m->srvs[i].waiting);
		free(m->srvs[i].prefix);
		proxy_tool_free(m->srvs[i].proxy);
		free(m->srvs[i].envp);
		buf_free(&m->srvs[i].vars);
	}
	while ((p = m->pending) != NULL) {
		m->pending = p->next;
		json_decref(p->server_id);
		free(p);
	}
	free(m->srvs);
	free(m->cwd);
	mcp_config_free(m->own);
	free(m);
	s->mcp = NULL;
}

/* EXEC_SPAWN of an MCP tool: tools/call, once its server is ready. */
struct mcp_run *
session_mcp_call(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req)
{
	struct mcp_run *r = xcalloc(1, sizeof *r);
	struct mcp_srv *sv = session_mcp_srv(s, exec_tool_name(t));
	struct timeval tv;

	r->s = s;
	r->t = t;
	r->sv = sv;
	r->end = EXEC_END_EXITED;
	r->max_result = req->max_output;
	r->started_ms = metrics_now() / 1000000;
	r->timeout = evtimer_new(session_mcp_cfg.client.base,
	    session_mcp_timeout_cb, r);
	r->now = evtimer_new(session_mcp_cfg.client.base, session_mcp_now_cb, r);
	if (sv == NULL || sv->srv == NULL) {
		/* Its server left with the session's, or the daemon stops. */
		r->end = EXEC_END_KILLED;
		event_active(r->now, EV_TIMEOUT, 0);
		return r;
	}
	if ((r->timeout_ms = req->timeout_ms) > 0) {
		tv.tv_sec = (time_t)(req->timeout_ms / 1000);
		tv.tv_usec = (suseconds_t)(req->timeout_ms % 1000) * 1000;
		evtimer_add(r->timeout, &tv);
	}
	r->call = mcp_server_call(sv->srv, exec_tool_name(t), req->input,
	    &session_mcp_call_ops, r);
	if ((r->next = sv->runs) != NULL)
		sv->runs->prev = r;
	sv->runs = r;
	return r;
}

void
session_mcp_describe(const struct mcp_run *r, json_t *o)
{
	json_object_set_new(o, "runner", json_string("mcp"));
	json_object_set_new(o, "elapsedMs", json_integer((json_int_t)(
	    metrics_now() / 1000000 - r->started_ms)));
	if (r->sv == NULL || r->sv->srv == NULL)
		return;
	json_object_set_new(o, "mcpServer", json_string(r->sv->cfg->name));
	/* Its server is not ready (yet, or any more): the call waits. */
	if (mcp_server_state(r->sv->srv) != MCP_READY)
		json_object_set_new(o, "waitingForServer", json_true());
}

/* EXEC_KILL: notifications/cancelled; the result goes now (S9). */
void
session_mcp_cancel(struct mcp_run *r)
{
	const char *why = exec_tool_kill_reason(r->t);

	if (r->end != EXEC_END_EXITED)
		return;
	r->end = EXEC_END_KILLED;
	if (r->call != NULL)
		mcp_call_cancel(r->call, why != NULL ? why : "abort");
	r->call = NULL;
	evtimer_del(r->timeout);
	event_active(r->now, EV_TIMEOUT, 0);
}

static void
session_mcp_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_run *r = arg;

	if (r->end != EXEC_END_EXITED)
		return;
	r->end = EXEC_END_TIMED_OUT;
	if (r->call != NULL)
		mcp_call_cancel(r->call, "timeout");
	r->call = NULL;
	event_active(r->now, EV_TIMEOUT, 0);
}

static void
session_mcp_now_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_run *r = arg;
	struct exec_exit x = { .end = r->end };

	if (r->sv != NULL)
		r->sv->outcomes[r->end == EXEC_END_TIMED_OUT ?
		    MCP_OUTCOME_TIMEOUT : MCP_OUTCOME_CANCELLED]++;
	session_mcp_end(r, NULL, &x);
}

/* Its tool is done with it: freed, any call cancelled. */
void
session_mcp_drop(struct mcp_run *r)
{
	if (r->call != NULL)
		mcp_call_cancel(r->call, "the tool ended");
	if (r->sv != NULL) {
		if (r->prev != NULL)
			r->prev->next = r->next;
		else if (r->sv->runs == r)
			r->sv->runs = r->next;
		if (r->next != NULL)
			r->next->prev = r->prev;
	}
	event_free(r->timeout);
	event_free(r->now);
	free(r);
}

static void
session_mcp_end(struct mcp_run *r, const struct exec_done *d,
    const struct exec_exit *x)
{
	struct exec_done dd;
	struct exec_exit xx;
	int64_t ms = (int64_t)(metrics_now() / 1000000 - r->started_ms);

	if (d != NULL) {
		dd = *d;
		dd.duration_ms = ms;
		d = &dd;
	} else {
		xx = *x;
		xx.duration_ms = ms;
		x = &xx;
	}
	session_mcp_cfg.client.finish(r->t, d, x);
}

static void
session_mcp_progress(void *arg, const json_t *params)
{
	struct mcp_run *r = arg;
	json_t *data = json_object();

	json_object_set(data, "progress", json_object_get(params, "progress"));
	if (json_object_get(params, "total") != NULL)
		json_object_set(data, "total", json_object_get(params,
		    "total"));
	if (json_is_string(json_object_get(params, "message")))
		json_object_set(data, "message", json_object_get(params,
		    "message"));
	exec_progress(r->t, data);
	json_decref(data);
}

static void
session_mcp_done(void *arg, const json_t *result, const char *error)
{
	struct mcp_run *r = arg;
	struct exec_done d = { .is_error = true };
	json_t *content = NULL, *meta = NULL;
	bool is_error;
	char err[512];

	r->call = NULL;
	evtimer_del(r->timeout);
	if (result != NULL && mcp_content_result(result, &content, &is_error,
	    &meta, err, sizeof err) == 0) {
		r->sv->outcomes[is_error ? MCP_OUTCOME_ERROR :
		    MCP_OUTCOME_OK]++;
		session_mcp_bounded(r, content, is_error, meta);
		json_decref(content);
		json_decref(meta);
		return;
	}
	r->sv->outcomes[MCP_OUTCOME_FAILED]++;
	content = json_sprintf("<tool_use_error>Error: %s</tool_use_error>",
	    result != NULL ? err : error);
	d.content = content;
	session_mcp_end(r, &d, NULL);
	json_decref(content);
}

/*
 * S17 for a server's content: text over maxResultBytes keeps its head and
 * tail, the whole in a file, in a process's words; images past the
 * daemon's ceiling are refused in words.
 */
static void
session_mcp_bounded(struct mcp_run *r, const json_t *content, bool is_error,
    const json_t *meta)
{
	struct exec_done d = { .content = content, .is_error = is_error,
	    .meta = meta };
	struct buf text = { 0 };
	struct capture *cap;
	struct output out;
	const json_t *b;
	json_t *refusal = NULL;
	size_t i;

	if (content_image_bytes(content) > tooldef_result_ceiling()) {
		refusal = json_sprintf("<tool_use_error>Error: the MCP server's "
		    "images are %zu bytes of base64, over this daemon's %zu "
		    "(--max-result-bytes)</tool_use_error>",
		    content_image_bytes(content), tooldef_result_ceiling());
		d.content = refusal;
		d.is_error = true;
		session_mcp_end(r, &d, NULL);
		json_decref(refusal);
		return;
	}
	if (content_text_bytes(content) <= r->max_result) {
		session_mcp_end(r, &d, NULL);
		return;
	}
	json_array_foreach(content, i, b)
		if (json_is_string(json_object_get(b, "text"))) {
			if (text.len > 0)
				buf_add(&text, "\n", 1);
			buf_add(&text, json_string_value(json_object_get(b,
			    "text")), json_string_length(json_object_get(b,
			    "text")));
		}
	cap = capture_create(r->max_result, session_mcp_cfg.client.output_dir,
	    exec_tool_name(r->t), 0, metrics_now());
	capture_add(cap, 1, text.data, text.len);
	buf_free(&text);
	while (capture_finish(cap) == 1)
		;
	capture_output(cap, &out);
	d.content = NULL;
	d.output = &out;
	d.output_error = capture_error(cap);
	if (out.path != NULL)
		session_mcp_cfg.client.keep_file(r->s, out.path, out.total,
		    exec_tool_id(r->t));
	session_mcp_end(r, &d, NULL);
	capture_free(cap, out.path != NULL);
}

/* Each session's entry for a shared server. */
static void
session_mcp_shared_each(struct mcp_server *srv, void (*fn)(struct mcp_srv *))
{
	struct session *s;
	size_t i;

	for (s = session_list; s != NULL; s = s->next)
		for (i = 0; !s->closing && s->mcp != NULL && i < s->mcp->n; i++)
			if (s->mcp->srvs[i].shared &&
			    s->mcp->srvs[i].srv == srv)
				fn(&s->mcp->srvs[i]);
}

static void
session_mcp_refresh(struct mcp_srv *sv)
{
	session_mcp_tools(sv, sv->srv);
}

static void
session_mcp_shared_state(struct mcp_server *srv)
{
	session_mcp_shared_each(srv, session_mcp_announce);
}

static void
session_mcp_shared_tools(struct mcp_server *srv)
{
	session_mcp_shared_each(srv, session_mcp_refresh);
}

/*
 * A shared server's sampling or elicitation request goes to the session
 * whose call is in flight when there is exactly one such call; else the
 * server is told, in words, why nobody is asked.
 */
static void
session_mcp_shared_request(struct mcp_server *srv, const json_t *id,
    const char *method, const json_t *params)
{
	struct mcp_srv *sv, *to = NULL;
	struct mcp_run *r;
	struct session *s;
	size_t i, n = 0;
	bool sampling = strcmp(method, "sampling/createMessage") == 0;
	char why[256];

	for (s = session_list; s != NULL; s = s->next)
		for (i = 0; !s->closing && s->mcp != NULL && i < s->mcp->n;
		    i++) {
			sv = &s->mcp->srvs[i];
			if (!sv->shared || sv->srv != srv)
				continue;
			for (r = sv->runs; r != NULL; r = r->next)
				if (r->call != NULL) {
					n++;
					to = sv;
				}
		}
	if (n != 1) {
		snprintf(why, sizeof why, "%s: this MCP server is shared by "
		    "every session (scope daemon) and %zu calls are in flight "
		    "on it: only a request made during exactly one call goes "
		    "to that call's session", method, n);
		mcp_server_respond(srv, id, NULL, why);
		return;
	}
	if (!(sampling ? to->m->sampling : to->m->elicitation)) {
		snprintf(why, sizeof why, "%s: no client of the session whose "
		    "call is in flight answers %s requests", method, sampling ?
		    "sampling" : "elicitation");
		mcp_server_respond(srv, id, NULL, why);
		return;
	}
	session_mcp_request(to, srv, id, method, params);
}

/* Closing sessions too: no call of any session may outlive the server. */
static void
session_mcp_shared_release(struct mcp_server *srv)
{
	struct session *s;
	size_t i;

	for (s = session_list; s != NULL; s = s->next)
		for (i = 0; s->mcp != NULL && i < s->mcp->n; i++)
			if (s->mcp->srvs[i].shared &&
			    s->mcp->srvs[i].srv == srv)
				session_mcp_release(&s->mcp->srvs[i],
				    !s->closing);
}

/*
 * A session lets go of a shared server: its calls cancelled (end: their
 * results come as for an abort, the session living on), its requests from
 * it answered.
 */
static void
session_mcp_release(struct mcp_srv *sv, bool end)
{
	struct mcp_run *r;

	for (r = sv->runs; r != NULL; r = r->next)
		if (r->call != NULL) {
			mcp_call_cancel(r->call, "the session let go of the "
			    "shared server");
			r->call = NULL;
			if (end && r->end == EXEC_END_EXITED) {
				r->end = EXEC_END_KILLED;
				evtimer_del(r->timeout);
				event_active(r->now, EV_TIMEOUT, 0);
			}
		}
	session_mcp_unanswer(sv->m, sv);
	sv->srv = NULL;
}

/* The server's requests the session's client never answered: refused. */
static void
session_mcp_unanswer(struct session_mcp *m, struct mcp_srv *sv)
{
	struct mcp_pending **pp = &m->pending, *p;

	while ((p = *pp) != NULL) {
		if (p->sv != sv) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		m->npending--;
		if (sv->srv != NULL)
			mcp_server_respond(sv->srv, p->server_id, NULL, "the "
			    "session that was asked closed");
		json_decref(p->server_id);
		free(p);
	}
}

/*
 * A live reload (doc/design.md §7, Reload): a server of the session's own
 * goes on in the next image, with its proxy, when it is carriable; the
 * others are killed now, and started afresh there.
 */
static bool
session_mcp_carried_srv(const struct mcp_srv *sv)
{
	return sv->srv != NULL && mcp_server_carriable(sv->srv);
}

bool
session_mcp_carried(const struct mcp_run *r)
{
	return r->sv != NULL && r->call != NULL && r->end == EXEC_END_EXITED &&
	    session_mcp_carried_srv(r->sv);
}

void
session_mcp_save(const struct mcp_run *r, json_t *o)
{
	json_object_set_new(o, "mcp", json_pack("{s:s, s:I, s:I, s:I, s:I}",
	    "server", r->sv->cfg->name, "id", (json_int_t)mcp_call_id(r->call),
	    "startedMs", (json_int_t)r->started_ms, "timeoutMs",
	    (json_int_t)r->timeout_ms, "maxResult", (json_int_t)r->max_result));
}

void
session_mcp_handover(struct session *s)
{
	struct session_mcp *m = s->mcp;
	struct handover_rec r;
	struct mcp_pending *p;
	struct buf out = { 0 };
	struct mcp_srv *sv;
	size_t i;
	int pid;

	if (m == NULL)
		return;
	/* Its requests are not carried: refused, the server may ask again. */
	while ((p = m->pending) != NULL) {
		m->pending = p->next;
		if (p->sv->srv != NULL && !p->sv->shared)
			mcp_server_respond(p->sv->srv, p->server_id, NULL, "the "
			    "daemon reloaded before the session's client "
			    "answered");
		json_decref(p->server_id);
		free(p);
	}
	m->npending = 0;
	for (i = 0; i < m->n; i++) {
		sv = &m->srvs[i];
		if (sv->shared)
			continue;   /* mcp_shared_handover's */
		if (session_mcp_carried_srv(sv)) {
			r.json = json_pack("{s:s, s:s}", "s", s->id, "name",
			    sv->cfg->name);
			memset(&r.bytes, 0, sizeof r.bytes);
			mcp_server_save(sv->srv, &r, r.json);
			if (sv->proxy != NULL) {
				json_object_set_new(r.json, "proxy",
				    proxy_tool_save(sv->proxy, &r));
				handover_keep_fd(sv->netns);
				json_object_set_new(r.json, "netns",
				    json_integer(sv->netns));
			}
			out.len = 0;
			handover_encode(&r, &out);
			journal_append(JOURNAL_MCP, out.data, out.len, NULL, 0);
		} else if (sv->srv != NULL && (pid = mcp_server_pid(sv->srv)) >
		    0)
			kill(-pid, SIGKILL);
	}
	buf_free(&out);
}

void
session_mcp_restored(struct session *s, const struct handover_in *recs,
    size_t n)
{
	struct session_mcp *m = s->mcp;
	const char *name;
	size_t i, k;

	for (k = 0; k < n; k++) {
		name = json_string_value(json_object_get(recs[k].json, "name"));
		for (i = 0; m != NULL && name != NULL && i < m->n; i++)
			if (!m->srvs[i].shared && m->srvs[i].srv == NULL &&
			    strcmp(m->srvs[i].cfg->name, name) == 0)
				break;
		if (m != NULL && name != NULL && i < m->n) {
			session_mcp_launch(&m->srvs[i], &recs[k], recs[k].json);
			continue;
		}
		log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "a reload handed "
		    "over MCP server %s, which the session no longer has: "
		    "killed", name != NULL ? name : "?");
		mcp_server_discard(&recs[k], recs[k].json);
	}
	/* The rest start afresh, as after a crash; shared ones are back. */
	for (i = 0; m != NULL && i < m->n; i++)
		if (!m->srvs[i].shared && m->srvs[i].srv == NULL)
			session_mcp_launch(&m->srvs[i], NULL, NULL);
		else if (m->srvs[i].shared && m->srvs[i].srv == NULL &&
		    (m->srvs[i].srv = mcp_shared_find(m->srvs[i].cfg->name)) !=
		    NULL && mcp_server_state(m->srvs[i].srv) == MCP_READY)
			session_mcp_tools(&m->srvs[i], m->srvs[i].srv);
}

struct mcp_run *
session_mcp_adopt(struct session *s, struct exec_tool *t, const json_t *o)
{
	struct mcp_run *r = xcalloc(1, sizeof *r);
	const char *name = json_string_value(json_object_get(o, "server"));
	struct mcp_srv *sv = session_mcp_srv(s, exec_tool_name(t));
	int64_t left;
	struct timeval tv;

	r->s = s;
	r->t = t;
	r->sv = sv;
	r->end = EXEC_END_EXITED;
	r->started_ms = (uint64_t)json_integer_value(json_object_get(o,
	    "startedMs"));
	r->timeout_ms = json_integer_value(json_object_get(o, "timeoutMs"));
	r->max_result = (size_t)json_integer_value(json_object_get(o,
	    "maxResult"));
	r->timeout = evtimer_new(session_mcp_cfg.client.base,
	    session_mcp_timeout_cb, r);
	r->now = evtimer_new(session_mcp_cfg.client.base, session_mcp_now_cb, r);
	if (sv == NULL || sv->srv == NULL || name == NULL ||
	    strcmp(name, sv->cfg->name) != 0 || (r->call = mcp_call_adopt(
	    sv->srv, json_integer_value(json_object_get(o, "id")),
	    &session_mcp_call_ops, r)) == NULL) {
		/* Its server was not handed over: as after a crash (S10). */
		r->sv = NULL;
		r->end = EXEC_END_KILLED;
		event_active(r->now, EV_TIMEOUT, 0);
		return r;
	}
	if (r->timeout_ms > 0) {
		left = r->timeout_ms - (int64_t)(metrics_now() / 1000000 -
		    r->started_ms);
		if (left < 0)
			left = 0;
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
		evtimer_add(r->timeout, &tv);
	}
	if ((r->next = sv->runs) != NULL)
		sv->runs->prev = r;
	sv->runs = r;
	return r;
}

void
session_mcp_adopted(struct session *s)
{
	size_t i;

	for (i = 0; s->mcp != NULL && i < s->mcp->n; i++)
		if (!s->mcp->srvs[i].shared && s->mcp->srvs[i].srv != NULL)
			mcp_server_adopted(s->mcp->srvs[i].srv);
}
