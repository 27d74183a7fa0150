/*
 * One MCP server process (doc/design.md §7, MCP servers): newline-delimited
 * JSON-RPC on its stdin and stdout, the lifecycle (initialize, initialized,
 * tools/list), concurrent tools/call requests by id, its requests to us,
 * and supervision: a bounded stderr tail, bounded lines and bad input,
 * restarts with backoff, and a close that leaves nothing (S18).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "handover.h"
#include "log.h"
#include "mcp/mcp.h"
#include "supervisor/proc.h"
#include "utf8.h"
#include "util.h"

/* Bad input tolerated within a window before the server is restarted. */
#define MCP_BAD_MAX 100
#define MCP_BAD_WINDOW_MS 10000
/* Notifications taken per second; past it they are dropped. */
#define MCP_NOTES_PER_SEC 2000
/* notifications/message lines logged per window. */
#define MCP_LOGS_MAX 20
#define MCP_LOGS_WINDOW_MS 10000
/* Ids of cancelled requests whose late answers are dropped quietly. */
#define MCP_CANCELLED_KEPT 256
#define MCP_BACKOFF_MAX_MS 10000
#define MCP_ENV_MAX 4096

static const char *mcp_versions[] = { "2025-11-25", "2025-06-18",
    "2025-03-26" };

struct mcp_call {
	struct mcp_server *s;
	struct mcp_call *prev, *next;
	int64_t id;              /* 0 while queued */
	char *tool;
	json_t *args;
	struct mcp_call_ops ops;
	void *arg;
	struct event *ev;        /* the start timeout; a deferred end */
	char *error;             /* a deferred end's */
};

struct mcp_server {
	struct event_base *base;
	const struct mcp_server_config *cfg;
	struct mcp_server_params params;
	char *cwd;
	struct mcp_server_ops ops;
	void *arg;
	struct mcp_server *all_prev, *all_next;
	enum mcp_state state;
	bool ever_ready;
	bool closing;
	unsigned busy;           /* our callbacks on the stack */
	char *why;
	char *kill_why;          /* why we killed it, for its exit */
	bool kill_final;         /* ...and it is not to be restarted */
	struct proc *proc;
	struct buf line;
	bool discarding;
	char tail[MCP_STDERR_TAIL];
	size_t tail_len;
	int64_t next_id;
	int64_t init_id, list_id, ping_id;
	json_t *listing;         /* tools of a tools/list under way */
	unsigned pages;
	bool relist;
	json_t *tools;
	const char *version;
	struct mcp_call *calls;
	int64_t cancelled[MCP_CANCELLED_KEPT];
	unsigned ncancelled;
	int64_t failures[MCP_FAILURES_MAX];
	unsigned nfailures;
	uint64_t restarts;
	uint64_t done;           /* calls ended, any way */
	int64_t bad_since, notes_since, logs_since;
	unsigned bad, notes, logs, logs_dropped;
	struct event *start_ev, *restart_ev, *stop_ev;
	char **env_built;
	void (*gone)(void *);     /* after a close, once the process is gone */
	void *gone_arg;
};

static struct mcp_server *mcp_all;

static const struct proc_ops mcp_server_proc_ops;

static struct mcp_server *mcp_server_new(struct event_base *,
		    const struct mcp_server_params *,
		    const struct mcp_server_ops *, void *);
static void	mcp_server_spawn(struct mcp_server *);
static void	mcp_server_chunk(void *, int, const char *, size_t);
static void	mcp_server_exit(void *, const struct proc_exit *);
static void	mcp_server_fd3(void *, const char *, size_t);
static void	mcp_server_message(struct mcp_server *, const char *, size_t);
static void	mcp_server_dispatch(struct mcp_server *, json_t *);
static void	mcp_server_response(struct mcp_server *, json_t *);
static void	mcp_server_request(struct mcp_server *, json_t *);
static void	mcp_server_notification(struct mcp_server *, json_t *);
static int	mcp_server_send(struct mcp_server *, json_t *, const char **);
static int64_t	mcp_server_rpc(struct mcp_server *, const char *, json_t *);
static void	mcp_server_answer(struct mcp_server *, const json_t *,
		    json_t *, int, const char *);
static void	mcp_server_initialized(struct mcp_server *, json_t *);
static void	mcp_server_list(struct mcp_server *, const char *);
static void	mcp_server_listed(struct mcp_server *, json_t *);
static void	mcp_server_ready(struct mcp_server *);
static void	mcp_server_set_state(struct mcp_server *, enum mcp_state,
		    const char *);
static void	mcp_server_kill(struct mcp_server *, bool, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	mcp_server_bad(struct mcp_server *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	mcp_server_log(struct mcp_server *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static bool	mcp_server_window(int64_t *, unsigned *, unsigned, int64_t);
static char	*mcp_server_tail(const struct mcp_server *);
static void	mcp_server_failed_calls(struct mcp_server *, bool,
		    const char *);
static void	mcp_server_flush(struct mcp_server *);
static void	mcp_server_unbusy(struct mcp_server *);
static void	mcp_server_free(struct mcp_server *);
static void	mcp_server_start_cb(evutil_socket_t, short, void *);
static void	mcp_server_restart_cb(evutil_socket_t, short, void *);
static void	mcp_server_stop_cb(evutil_socket_t, short, void *);
static void	mcp_call_send(struct mcp_call *);
static bool	mcp_call_resolve(struct mcp_call *);
static void	mcp_call_defer(struct mcp_call *, const char *);
static void	mcp_call_unlink(struct mcp_call *);
static void	mcp_call_free(struct mcp_call *);
static void	mcp_call_end(struct mcp_call *, const json_t *, const char *);
static void	mcp_call_cb(evutil_socket_t, short, void *);
static struct mcp_call *mcp_call_find(struct mcp_server *, int64_t);
static int64_t	mcp_now_ms(void);
static void	mcp_arm(struct event *, int64_t);

static const struct proc_ops mcp_server_proc_ops = {
	.line = mcp_server_fd3,
	.chunk = mcp_server_chunk,
	.exit = mcp_server_exit,
};

static int64_t
mcp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
mcp_arm(struct event *ev, int64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

struct mcp_server *
mcp_server_start(struct event_base *base, const struct mcp_server_params *p,
    const struct mcp_server_ops *ops, void *arg)
{
	struct mcp_server *s = mcp_server_new(base, p, ops, arg);

	s->tools = json_array();
	s->state = MCP_STARTING;
	mcp_server_spawn(s);
	return s;
}

/* A server with its params' defaults and its events, not yet running. */
static struct mcp_server *
mcp_server_new(struct event_base *base, const struct mcp_server_params *p,
    const struct mcp_server_ops *ops, void *arg)
{
	struct mcp_server *s = xcalloc(1, sizeof *s);

	s->base = base;
	s->cfg = p->cfg;
	s->params = *p;
	s->cwd = xstrdup(p->cfg->cwd != NULL ? p->cfg->cwd : p->cwd != NULL ?
	    p->cwd : "/");
	s->params.cwd = s->cwd;
	if (s->params.start_timeout_ms <= 0)
		s->params.start_timeout_ms = MCP_START_TIMEOUT_DEFAULT;
	if (s->params.stop_grace_ms <= 0)
		s->params.stop_grace_ms = 1000;
	if (s->params.backoff_ms <= 0)
		s->params.backoff_ms = 250;
	s->ops = *ops;
	s->arg = arg;
	s->next_id = 1;
	s->start_ev = evtimer_new(base, mcp_server_start_cb, s);
	s->restart_ev = evtimer_new(base, mcp_server_restart_cb, s);
	s->stop_ev = evtimer_new(base, mcp_server_stop_cb, s);
	if ((s->all_next = mcp_all) != NULL)
		mcp_all->all_prev = s;
	mcp_all = s;
	return s;
}

/* A process, then initialize; ready once its tools are listed. */
static void
mcp_server_spawn(struct mcp_server *s)
{
	struct proc_spec spec = { 0 };
	struct buf b = { 0 };
	const char *key;
	const json_t *v;
	char **envp;
	size_t n = 0, i, j;

	spec.argv = s->cfg->argv;
	spec.cwd = s->cwd;
	spec.stdin_stream = true;
	spec.stream_output = true;
	spec.name = s->cfg->name;
	if (s->ops.prepare != NULL)
		s->ops.prepare(s->arg, s, &spec);
	/* The config's env over what the caller gave. */
	for (i = 0; spec.envp != NULL && spec.envp[i] != NULL; i++)
		n++;
	envp = xcalloc(n + json_object_size(s->cfg->env) + 2, sizeof *envp);
	n = 0;
	for (i = 0; spec.envp != NULL && spec.envp[i] != NULL &&
	    n < MCP_ENV_MAX; i++) {
		json_object_foreach(s->cfg->env, key, v) {
			j = strlen(key);
			if (strncmp(spec.envp[i], key, j) == 0 &&
			    spec.envp[i][j] == '=')
				break;
		}
		if (key == NULL)
			envp[n++] = xstrdup(spec.envp[i]);
	}
	json_object_foreach(s->cfg->env, key, v) {
		buf_reset(&b);
		buf_printf(&b, "%s=%s", key, json_string_value(v));
		envp[n++] = xstrndup(b.data, b.len);
	}
	if (spec.envp == NULL) {
		envp[n++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
	}
	buf_free(&b);
	spec.envp = envp;
	s->proc = proc_spawn(&spec, &mcp_server_proc_ops, s);
	/* A server holds no tool slot: it runs as long as the session. */
	proc_detach(s->proc);
	for (i = 0; envp[i] != NULL; i++)
		free(envp[i]);
	free(envp);
	buf_reset(&s->line);
	s->discarding = false;
	s->tail_len = 0;
	/* A new process: its own bounds. */
	s->bad_since = s->notes_since = s->logs_since = 0;
	s->bad = s->notes = s->logs = 0;
	s->version = NULL;
	s->list_id = s->ping_id = 0;
	json_decref(s->listing);
	s->listing = NULL;
	mcp_arm(s->start_ev, s->params.start_timeout_ms);
	s->init_id = mcp_server_rpc(s, "initialize", json_pack(
	    "{s:s, s:{s:{s:b}}, s:{s:s, s:s}}", "protocolVersion",
	    mcp_versions[0], "capabilities", "roots", "listChanged", 1,
	    "clientInfo", "name", "stexecd", "version", STEXEC_VERSION));
}

/* One JSON-RPC request; its id, or 0 when it could not be written. */
static int64_t
mcp_server_rpc(struct mcp_server *s, const char *method, json_t *params)
{
	json_t *msg, *caps;
	const char *why;
	int64_t id = s->next_id++;

	if (strcmp(method, "initialize") == 0) {
		caps = json_object_get(params, "capabilities");
		if (s->params.sampling)
			json_object_set_new(caps, "sampling", json_object());
		if (s->params.elicitation)
			json_object_set_new(caps, "elicitation",
			    json_object());
	}
	msg = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
	    (json_int_t)id, "method", method, "params", params);
	if (mcp_server_send(s, msg, &why) != 0) {
		mcp_server_kill(s, false, "cannot write %s to its stdin: %s",
		    method, why);
		id = 0;
	}
	json_decref(msg);
	return id;
}

/* A message on a line of its stdin (stolen). */
static int
mcp_server_send(struct mcp_server *s, json_t *msg, const char **why)
{
	char *text;
	size_t len;
	int rc;

	if (s->proc == NULL) {
		*why = "it is not running";
		return -1;
	}
	if ((text = json_dumps(msg, JSON_COMPACT)) == NULL) {
		*why = "the message cannot be encoded";
		return -1;
	}
	len = strlen(text);
	text[len] = '\n';
	rc = proc_write(s->proc, text, len + 1, false, why);
	free(text);
	return rc;
}

static void
mcp_server_answer(struct mcp_server *s, const json_t *id, json_t *result,
    int code, const char *error)
{
	json_t *msg;
	const char *why;

	if (result != NULL)
		msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
		    "result", result);
	else
		msg = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
		    "id", id, "error", "code", code, "message", error);
	if (msg != NULL && mcp_server_send(s, msg, &why) != 0)
		mcp_server_log(s, LOG_LEVEL_WARN, "cannot answer its request: "
		    "%s", why);
	json_decref(msg);
}

/* stdout in lines, each bounded; stderr into its tail. */
static void
mcp_server_chunk(void *arg, int fd, const char *data, size_t len)
{
	struct mcp_server *s = arg;
	const char *nl;
	size_t n;

	if (fd == 2) {
		if (len >= sizeof s->tail) {
			memcpy(s->tail, data + len - sizeof s->tail,
			    sizeof s->tail);
			s->tail_len = sizeof s->tail;
		} else {
			if (s->tail_len + len > sizeof s->tail) {
				n = s->tail_len + len - sizeof s->tail;
				memmove(s->tail, s->tail + n, s->tail_len - n);
				s->tail_len -= n;
			}
			memcpy(s->tail + s->tail_len, data, len);
			s->tail_len += len;
		}
		return;
	}
	s->busy++;
	while (len > 0 && !s->closing && s->proc != NULL) {
		nl = memchr(data, '\n', len);
		n = nl != NULL ? (size_t)(nl - data) : len;
		if (s->discarding) {
			/* The rest of a line over the bound: to its newline. */
		} else if (s->line.len + n > MCP_LINE_MAX) {
			mcp_server_bad(s, "a message line over %u bytes, "
			    "discarded", MCP_LINE_MAX);
			buf_free(&s->line);
			s->discarding = true;
		} else
			buf_add(&s->line, data, n);
		if (nl == NULL)
			break;
		if (!s->discarding && s->line.len > 0)
			mcp_server_message(s, s->line.data, s->line.len);
		s->discarding = false;
		s->line.len = 0;
		data += n + 1;
		len -= n + 1;
	}
	mcp_server_unbusy(s);
}

static void
mcp_server_fd3(void *arg, const char *line, size_t len)
{
	(void)arg;
	(void)line;
	(void)len;
}

static void
mcp_server_message(struct mcp_server *s, const char *text, size_t len)
{
	json_error_t jerr;
	json_t *msg, *m;
	size_t i;

	if (len > 0 && text[len - 1] == '\r')
		len--;
	if (len == 0)
		return;
	if ((msg = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)) ==
	    NULL) {
		mcp_server_bad(s, "invalid JSON on its stdout (%s at byte %d)",
		    jerr.text, jerr.position);
		return;
	}
	if (json_is_array(msg)) {
		/* A 2025-03-26 batch. */
		json_array_foreach(msg, i, m) {
			if (s->closing || i >= 1000)
				break;
			mcp_server_dispatch(s, m);
		}
	} else
		mcp_server_dispatch(s, msg);
	json_decref(msg);
}

static void
mcp_server_dispatch(struct mcp_server *s, json_t *m)
{
	if (!json_is_object(m) || !json_is_string(json_object_get(m,
	    "jsonrpc"))) {
		mcp_server_bad(s, "a message that is not a JSON-RPC object");
		return;
	}
	if (json_is_string(json_object_get(m, "method"))) {
		if (json_object_get(m, "id") != NULL)
			mcp_server_request(s, m);
		else
			mcp_server_notification(s, m);
	} else if (json_object_get(m, "result") != NULL ||
	    json_object_get(m, "error") != NULL)
		mcp_server_response(s, m);
	else
		mcp_server_bad(s, "a JSON-RPC message with neither method nor "
		    "result");
}

static void
mcp_server_response(struct mcp_server *s, json_t *m)
{
	const json_t *idv = json_object_get(m, "id"), *err;
	const json_t *result = json_object_get(m, "result");
	struct mcp_call *c;
	char why[512];
	int64_t id;
	unsigned i;

	if (!json_is_integer(idv)) {
		mcp_server_bad(s, "a response with an id we never sent");
		return;
	}
	id = json_integer_value(idv);
	err = json_object_get(m, "error");
	if (err != NULL) {
		utf8_snprintf(why, sizeof why, "the server answered with an "
		    "error: %s (code %lld)", json_string_value(json_object_get(
		    err, "message")) != NULL ? json_string_value(
		    json_object_get(err, "message")) : "(no message)",
		    (long long)json_integer_value(json_object_get(err,
		    "code")));
		result = NULL;
	}
	if (id != 0 && id == s->init_id) {
		s->init_id = 0;
		if (result == NULL || !json_is_object(result))
			mcp_server_kill(s, true, "initialize failed: %s",
			    err != NULL ? why : "its result is not an object");
		else
			mcp_server_initialized(s, (json_t *)result);
		return;
	}
	if (id != 0 && id == s->ping_id) {
		s->ping_id = 0;
		mcp_server_ready(s);
		return;
	}
	if (id != 0 && id == s->list_id) {
		s->list_id = 0;
		if (result == NULL || !json_is_object(result)) {
			mcp_server_kill(s, false, "tools/list failed: %s",
			    err != NULL ? why : "its result is not an object");
			return;
		}
		mcp_server_listed(s, (json_t *)result);
		return;
	}
	if ((c = mcp_call_find(s, id)) != NULL) {
		mcp_call_unlink(c);
		if (result != NULL)
			mcp_call_end(c, result, NULL);
		else
			mcp_call_end(c, NULL, why);
		mcp_call_free(c);
		return;
	}
	for (i = 0; i < s->ncancelled && i < MCP_CANCELLED_KEPT; i++)
		if (s->cancelled[i] == id)
			return;
	mcp_server_bad(s, "a response to an unknown id (%lld)",
	    (long long)id);
}

static void
mcp_server_initialized(struct mcp_server *s, json_t *result)
{
	const char *v = json_string_value(json_object_get(result,
	    "protocolVersion"));
	json_t *msg;
	const char *why;
	size_t i;

	for (i = 0; v != NULL && i < nitems(mcp_versions); i++)
		if (strcmp(v, mcp_versions[i]) == 0)
			break;
	if (v == NULL || i == nitems(mcp_versions)) {
		mcp_server_kill(s, true, "it speaks MCP revision %.32s; the "
		    "daemon speaks 2025-11-25, 2025-06-18 and 2025-03-26",
		    v != NULL ? v : "(none given)");
		return;
	}
	s->version = mcp_versions[i];
	msg = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/initialized");
	if (mcp_server_send(s, msg, &why) != 0) {
		json_decref(msg);
		mcp_server_kill(s, false, "cannot write to its stdin: %s", why);
		return;
	}
	json_decref(msg);
	mcp_server_list(s, NULL);
}

/* tools/list from the start, or its next page. */
static void
mcp_server_list(struct mcp_server *s, const char *cursor)
{
	if (s->list_id != 0) {
		s->relist = true;
		return;
	}
	if (cursor == NULL) {
		json_decref(s->listing);
		s->listing = json_array();
		s->pages = 0;
	}
	s->pages++;
	s->list_id = mcp_server_rpc(s, "tools/list", cursor != NULL ?
	    json_pack("{s:s}", "cursor", cursor) : json_object());
}

static void
mcp_server_listed(struct mcp_server *s, json_t *result)
{
	const json_t *tools = json_object_get(result, "tools"), *t, *next;
	size_t i;
	bool first = !s->ever_ready || s->state != MCP_READY;

	json_array_foreach(tools, i, t) {
		if (!json_is_object(t) || !json_is_string(json_object_get(t,
		    "name")) || json_string_length(json_object_get(t,
		    "name")) == 0) {
			mcp_server_bad(s, "tools/list: tools[%zu] has no name, "
			    "left out", i);
			continue;
		}
		if (json_array_size(s->listing) >= MCP_TOOLS_MAX) {
			mcp_server_log(s, LOG_LEVEL_WARN, "tools/list: more "
			    "than %d tools, the rest left out",
			    MCP_TOOLS_MAX);
			break;
		}
		json_array_append(s->listing, (json_t *)t);
	}
	next = json_object_get(result, "nextCursor");
	if (json_is_string(next) && json_string_length(next) > 0 &&
	    s->pages < MCP_PAGES_MAX && json_array_size(s->listing) <
	    MCP_TOOLS_MAX && !s->relist) {
		mcp_server_list(s, json_string_value(next));
		return;
	}
	json_decref(s->tools);
	s->tools = s->listing;
	s->listing = NULL;
	if (s->relist) {
		s->relist = false;
		mcp_server_list(s, NULL);
	}
	if (first && s->ping_id == 0) {
		/*
		 * Ready once a ping is answered: a request it made on
		 * initialized (roots/list) comes before that answer, and ours
		 * reaches it before the first call.
		 */
		s->ping_id = mcp_server_rpc(s, "ping", json_object());
		return;
	}
	if (!s->closing && s->ops.tools != NULL)
		s->ops.tools(s->arg, s);
}

/* The first tools/list and the ping after it are answered. */
static void
mcp_server_ready(struct mcp_server *s)
{
	evtimer_del(s->start_ev);
	s->ever_ready = true;
	free(s->kill_why);
	s->kill_why = NULL;
	/* Its tools first, so that its state says ready with them. */
	if (s->ops.tools != NULL)
		s->ops.tools(s->arg, s);
	if (s->closing)
		return;
	mcp_server_set_state(s, MCP_READY, NULL);
	if (!s->closing)
		mcp_server_flush(s);
}

static void
mcp_server_request(struct mcp_server *s, json_t *m)
{
	const char *method = json_string_value(json_object_get(m, "method"));
	const json_t *id = json_object_get(m, "id");
	json_t *roots;
	bool asked;

	if (!json_is_string(id) && !json_is_integer(id)) {
		mcp_server_bad(s, "a request whose id is neither a string nor "
		    "an integer");
		return;
	}
	if (!mcp_server_window(&s->notes_since, &s->notes, MCP_NOTES_PER_SEC,
	    1000)) {
		mcp_server_answer(s, id, NULL, -32000, "too many requests: "
		    "dropped");
		return;
	}
	if (strcmp(method, "ping") == 0) {
		mcp_server_answer(s, id, json_object(), 0, NULL);
		return;
	}
	if (strcmp(method, "roots/list") == 0) {
		roots = s->ops.roots != NULL ? s->ops.roots(s->arg, s) :
		    json_array();
		mcp_server_answer(s, id, json_pack("{s:o}", "roots", roots), 0,
		    NULL);
		return;
	}
	if (strcmp(method, "sampling/createMessage") == 0 ||
	    strcmp(method, "elicitation/create") == 0) {
		asked = method[0] == 's' ? s->params.sampling :
		    s->params.elicitation;
		if (!asked || s->ops.request == NULL) {
			mcp_server_answer(s, id, NULL, -32601, method[0] == 's' ?
			    "sampling/createMessage: no client of this "
			    "session answers sampling requests" :
			    "elicitation/create: no client of this session "
			    "answers elicitation requests");
			return;
		}
		s->ops.request(s->arg, s, id, method, json_object_get(m,
		    "params"));
		return;
	}
	mcp_server_answer(s, id, NULL, -32601, "method not found");
}

static void
mcp_server_notification(struct mcp_server *s, json_t *m)
{
	const char *method = json_string_value(json_object_get(m, "method"));
	const json_t *params = json_object_get(m, "params"), *tok, *data;
	struct mcp_call *c;
	char *text;

	if (!mcp_server_window(&s->notes_since, &s->notes, MCP_NOTES_PER_SEC,
	    1000)) {
		if (s->notes == MCP_NOTES_PER_SEC + 1)
			mcp_server_bad(s, "a flood of notifications: more than "
			    "%d in a second, dropped", MCP_NOTES_PER_SEC);
		return;
	}
	if (strcmp(method, "notifications/progress") == 0) {
		tok = json_object_get(params, "progressToken");
		if (!json_is_integer(tok) || (c = mcp_call_find(s,
		    json_integer_value(tok))) == NULL)
			return;
		if (c->ops.progress == NULL || !json_is_number(
		    json_object_get(params, "progress")))
			return;
		c->ops.progress(c->arg, params);
	} else if (strcmp(method, "notifications/tools/list_changed") == 0) {
		if (s->ever_ready)
			mcp_server_list(s, NULL);
	} else if (strcmp(method, "notifications/message") == 0) {
		if (!mcp_server_window(&s->logs_since, &s->logs, MCP_LOGS_MAX,
		    MCP_LOGS_WINDOW_MS)) {
			s->logs_dropped++;
			return;
		}
		data = json_object_get(params, "data");
		text = json_is_string(data) ? xstrdup(json_string_value(data)) :
		    json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
		mcp_server_log(s, LOG_LEVEL_INFO, "%.16s: %.1000s",
		    json_string_value(json_object_get(params, "level")) != NULL ?
		    json_string_value(json_object_get(params, "level")) :
		    "info", text != NULL ? text : "");
		free(text);
	}
}

/* Whether one more event fits the window's count (a new window resets it). */
static bool
mcp_server_window(int64_t *since, unsigned *count, unsigned max, int64_t ms)
{
	int64_t now = mcp_now_ms();

	if (*since == 0 || now - *since >= ms) {
		*since = now;
		*count = 0;
	}
	return ++*count <= max;
}

/* Bad input: logged (bounded); past MCP_BAD_MAX in the window, a restart. */
static void
mcp_server_bad(struct mcp_server *s, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (mcp_server_window(&s->bad_since, &s->bad, MCP_BAD_MAX,
	    MCP_BAD_WINDOW_MS)) {
		if (s->bad <= 10)
			mcp_server_log(s, LOG_LEVEL_WARN, "%s", text);
		return;
	}
	/* Once: a kill under way ignores the next. */
	mcp_server_kill(s, false, "it kept misbehaving (more than %d bad "
	    "messages in %d s; the last: %s)", MCP_BAD_MAX,
	    MCP_BAD_WINDOW_MS / 1000, text);
}

static void
mcp_server_log(struct mcp_server *s, int level, const char *fmt, ...)
{
	char text[1200];
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (!s->closing && s->ops.log != NULL)
		s->ops.log(s->arg, s, level, text);
	else
		log_msg(level, "MCP server %s: %s", s->cfg->name, text);
}

/* Kill the process for why; final: it is not to be restarted. */
static void
mcp_server_kill(struct mcp_server *s, bool final, const char *fmt, ...)
{
	char text[600];
	va_list ap;

	if (s->proc == NULL || s->kill_why != NULL)
		return;
	va_start(ap, fmt);
	utf8_vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	s->kill_why = xstrdup(text);
	s->kill_final = final;
	proc_kill(s->proc);
}

/* Its stderr's tail as valid text, "" when none. malloc'd. */
static char *
mcp_server_tail(const struct mcp_server *s)
{
	struct buf b = { 0 };
	size_t start = 0;
	char *r;

	/* Not from the middle of a character or a line. */
	while (start < s->tail_len && s->tail_len == sizeof s->tail &&
	    s->tail[start] != '\n' && start < 200)
		start++;
	if (s->tail_len == 0)
		return xstrdup("");
	buf_addstr(&b, "; its stderr ends: ");
	utf8_repair(&b, s->tail + start, s->tail_len - start);
	while (b.len > 0 && (b.data[b.len - 1] == '\n' ||
	    b.data[b.len - 1] == ' '))
		b.len--;
	buf_add(&b, "", 1);
	r = xstrdup(b.data);
	buf_free(&b);
	return r;
}

static void
mcp_server_exit(void *arg, const struct proc_exit *x)
{
	struct mcp_server *s = arg;
	char how[700], *tail, *why;
	int64_t now = mcp_now_ms(), backoff;
	bool final;
	unsigned i, recent;

	s->proc = NULL;
	if (s->closing) {
		if (s->gone != NULL)
			s->gone(s->gone_arg);
		mcp_server_unbusy(s);
		return;
	}
	s->busy++;
	evtimer_del(s->start_ev);
	if (s->kill_why != NULL)
		snprintf(how, sizeof how, "%s", s->kill_why);
	else if (x->end == PROC_SPAWN_FAILED)
		snprintf(how, sizeof how, "it could not start: %s", x->error);
	else if (x->end == PROC_EXITED)
		snprintf(how, sizeof how, "it exited with status %d", x->status);
	else if (x->end == PROC_LIMIT_HIT)
		snprintf(how, sizeof how, "it was killed over its %s limit",
		    x->hit == TOOLCG_HIT_MEMORY ? "memory" : "process");
	else
		snprintf(how, sizeof how, "it was killed by signal %d (%s)",
		    x->signal, strsignal(x->signal));
	final = s->kill_final || x->end == PROC_SPAWN_FAILED;
	free(s->kill_why);
	s->kill_why = NULL;
	s->kill_final = false;
	tail = mcp_server_tail(s);
	xasprintf(&why, "%s%s", how, tail);
	free(tail);
	mcp_server_failed_calls(s, false, why);
	/* The failures of the last window decide between restart and failed. */
	if (s->nfailures < MCP_FAILURES_MAX)
		s->failures[s->nfailures++] = now;
	else {
		memmove(s->failures, s->failures + 1, (MCP_FAILURES_MAX - 1) *
		    sizeof *s->failures);
		s->failures[MCP_FAILURES_MAX - 1] = now;
	}
	for (i = recent = 0; i < s->nfailures; i++)
		if (now - s->failures[i] < MCP_FAILURE_WINDOW_MS)
			recent++;
	if (!s->closing && (final || recent >= MCP_FAILURES_MAX)) {
		if (!final) {
			tail = why;
			xasprintf(&why, "%s (%u failures in %d s: not restarted)",
			    tail, recent, MCP_FAILURE_WINDOW_MS / 1000);
			free(tail);
		}
		mcp_server_set_state(s, MCP_FAILED, why);
		if (!s->closing)
			mcp_server_failed_calls(s, true, why);
	} else if (!s->closing) {
		backoff = s->params.backoff_ms;
		for (i = 1; i < recent && backoff < MCP_BACKOFF_MAX_MS; i++)
			backoff *= 2;
		if (backoff > MCP_BACKOFF_MAX_MS)
			backoff = MCP_BACKOFF_MAX_MS;
		mcp_server_set_state(s, MCP_RESTARTING, why);
		mcp_arm(s->restart_ev, backoff);
	}
	free(why);
	mcp_server_unbusy(s);
}

/* Fail the calls sent (or, queued, those waiting) with why. */
static void
mcp_server_failed_calls(struct mcp_server *s, bool queued, const char *why)
{
	struct mcp_call *c, *next;
	char *text;

	for (c = s->calls; c != NULL; c = next) {
		next = c->next;
		if ((c->id != 0) == queued || c->error != NULL)
			continue;
		xasprintf(&text, "the MCP server %s %s: %s", s->cfg->name,
		    queued ? "is not available" : "ended during the call", why);
		c->id = 0;
		mcp_call_defer(c, text);
		free(text);
	}
}

static void
mcp_server_set_state(struct mcp_server *s, enum mcp_state st,
    const char *why)
{
	s->state = st;
	free(s->why);
	s->why = why != NULL ? xstrdup(why) : NULL;
	if (!s->closing && s->ops.state != NULL)
		s->ops.state(s->arg, s);
}

/* Send the calls that waited for it to be ready. */
static void
mcp_server_flush(struct mcp_server *s)
{
	struct mcp_call *c;

	for (c = s->calls; c != NULL && !s->closing; c = c->next)
		if (c->id == 0 && c->error == NULL) {
			evtimer_del(c->ev);
			mcp_call_send(c);
		}
}

static void
mcp_server_start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_server *s = arg;

	(void)fd;
	(void)what;
	s->busy++;
	mcp_server_kill(s, false, "it did not become ready within %lld ms "
	    "(%s)", (long long)s->params.start_timeout_ms, s->init_id != 0 ?
	    "initialize unanswered" : "tools/list unanswered");
	mcp_server_unbusy(s);
}

static void
mcp_server_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_server *s = arg;

	(void)fd;
	(void)what;
	s->restarts++;
	mcp_server_spawn(s);
}

static void
mcp_server_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_server *s = arg;

	(void)fd;
	(void)what;
	if (s->proc != NULL)
		proc_kill(s->proc);
}

bool
mcp_server_close(struct mcp_server *s, void (*gone)(void *), void *arg)
{
	struct mcp_call *c;
	const char *why;

	if (s == NULL || s->closing)
		return true;
	s->closing = true;
	while ((c = s->calls) != NULL) {
		if (c->id != 0 && s->proc != NULL)
			mcp_call_cancel(c, "the session closed");
		else {
			mcp_call_unlink(c);
			mcp_call_free(c);
		}
	}
	evtimer_del(s->start_ev);
	evtimer_del(s->restart_ev);
	if (s->proc != NULL) {
		/* stdin closed, then TERM, then KILL (proc_kill's grace). */
		if (proc_write(s->proc, NULL, 0, true, &why) != 0)
			proc_kill(s->proc);
		else
			mcp_arm(s->stop_ev, s->params.stop_grace_ms);
		s->gone = gone;
		s->gone_arg = arg;
		return false;
	}
	if (s->busy == 0)
		mcp_server_free(s);
	return true;
}

static void
mcp_server_unbusy(struct mcp_server *s)
{
	if (s->busy > 0)
		s->busy--;
	if (s->busy == 0 && s->closing && s->proc == NULL)
		mcp_server_free(s);
}

static void
mcp_server_free(struct mcp_server *s)
{
	struct mcp_call *c;

	while ((c = s->calls) != NULL) {
		mcp_call_unlink(c);
		mcp_call_free(c);
	}
	if (s->all_prev != NULL)
		s->all_prev->all_next = s->all_next;
	else
		mcp_all = s->all_next;
	if (s->all_next != NULL)
		s->all_next->all_prev = s->all_prev;
	event_free(s->start_ev);
	event_free(s->restart_ev);
	event_free(s->stop_ev);
	buf_free(&s->line);
	json_decref(s->listing);
	json_decref(s->tools);
	free(s->why);
	free(s->kill_why);
	free(s->cwd);
	free(s);
}

void
mcp_shutdown(void)
{
	struct mcp_server *s, *next;

	/* proc_shutdown kills and forgets every process next. */
	for (s = mcp_all; s != NULL; s = next) {
		next = s->all_next;
		s->proc = NULL;
		s->gone = NULL;
		evtimer_del(s->start_ev);
		evtimer_del(s->restart_ev);
		evtimer_del(s->stop_ev);
		if (s->closing && s->busy == 0)
			mcp_server_free(s);
	}
}

const char *
mcp_server_name(const struct mcp_server *s)
{
	return s->cfg->name;
}

enum mcp_state
mcp_server_state(const struct mcp_server *s)
{
	return s->state;
}

const char *
mcp_state_name(enum mcp_state st)
{
	switch (st) {
	case MCP_STARTING:
		return "starting";
	case MCP_READY:
		return "ready";
	case MCP_FAILED:
		return "failed";
	case MCP_RESTARTING:
		return "restarting";
	}
	return "unknown";
}

const char *
mcp_server_why(const struct mcp_server *s)
{
	return s->why;
}

const json_t *
mcp_server_tools(const struct mcp_server *s)
{
	return s->tools;
}

uint64_t
mcp_server_restarts(const struct mcp_server *s)
{
	return s->restarts;
}

size_t
mcp_server_calls_in_flight(const struct mcp_server *s)
{
	struct mcp_call *c;
	size_t n = 0;

	for (c = s->calls; c != NULL; c = c->next)
		n++;
	return n;
}

uint64_t
mcp_server_calls_done(const struct mcp_server *s)
{
	return s->done;
}

int
mcp_server_pid(const struct mcp_server *s)
{
	return s->proc != NULL && proc_pid(s->proc) > 0 ?
	    (int)proc_pid(s->proc) : 0;
}

json_t *
mcp_server_json(const struct mcp_server *s)
{
	struct mcp_call *c;
	json_t *o;
	size_t n = 0;

	for (c = s->calls; c != NULL; c = c->next)
		n++;
	o = json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", s->cfg->name,
	    "state", mcp_state_name(s->state), "tools",
	    (json_int_t)json_array_size(s->tools), "calls", (json_int_t)n,
	    "restarts", (json_int_t)s->restarts);
	if (s->why != NULL)
		json_object_set_new(o, "why", json_string(s->why));
	if (s->version != NULL)
		json_object_set_new(o, "protocolVersion",
		    json_string(s->version));
	if (s->proc != NULL && proc_pid(s->proc) > 0)
		json_object_set_new(o, "pid", json_integer(proc_pid(s->proc)));
	return o;
}

void
mcp_server_roots_changed(struct mcp_server *s)
{
	json_t *msg;
	const char *why;

	if (s->state != MCP_READY || s->closing)
		return;
	msg = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/roots/list_changed");
	(void)mcp_server_send(s, msg, &why);
	json_decref(msg);
}

void
mcp_server_respond(struct mcp_server *s, const json_t *id,
    const json_t *result, const char *error)
{
	if (s->closing || s->proc == NULL)
		return;
	if (result != NULL)
		mcp_server_answer(s, id, json_deep_copy(result), 0, NULL);
	else
		mcp_server_answer(s, id, NULL, -32603, error != NULL ? error :
		    "no answer");
}

struct mcp_call *
mcp_server_call(struct mcp_server *s, const char *tool, const json_t *args,
    const struct mcp_call_ops *ops, void *arg)
{
	struct mcp_call *c = xcalloc(1, sizeof *c);
	char *text;

	c->s = s;
	c->tool = xstrdup(tool);
	c->args = args != NULL ? json_deep_copy(args) : json_object();
	c->ops = *ops;
	c->arg = arg;
	c->ev = evtimer_new(s->base, mcp_call_cb, c);
	if ((c->next = s->calls) != NULL)
		s->calls->prev = c;
	s->calls = c;
	if (s->state == MCP_FAILED) {
		xasprintf(&text, "the MCP server %s failed: %s", s->cfg->name,
		    s->why != NULL ? s->why : "(no reason known)");
		mcp_call_defer(c, text);
		free(text);
	} else if (s->state == MCP_READY && s->proc != NULL)
		mcp_call_send(c);
	else
		mcp_arm(c->ev, s->params.start_timeout_ms);
	return c;
}

static void
mcp_call_send(struct mcp_call *c)
{
	struct mcp_server *s = c->s;
	json_t *msg;
	const char *why;
	char *text;
	int64_t id;

	if (!mcp_call_resolve(c))
		return;
	id = s->next_id++;

	msg = json_pack("{s:s, s:I, s:s, s:{s:s, s:O, s:{s:I}}}", "jsonrpc",
	    "2.0", "id", (json_int_t)id, "method", "tools/call", "params",
	    "name", c->tool, "arguments", c->args, "_meta", "progressToken",
	    (json_int_t)id);
	if (mcp_server_send(s, msg, &why) != 0) {
		xasprintf(&text, "cannot send the call to the MCP server %s: %s",
		    s->cfg->name, why);
		mcp_call_defer(c, text);
		free(text);
	} else
		c->id = id;
	json_decref(msg);
}

/*
 * A call by its mcp__SERVER__TOOL name: the server's own name for it, now
 * that its tools are known; false once it is ended for want of one.
 */
static bool
mcp_call_resolve(struct mcp_call *c)
{
	const json_t *t;
	const char *name;
	char *full, *text;
	size_t i;

	if (strncmp(c->tool, "mcp__", 5) != 0)
		return true;
	json_array_foreach(c->s->tools, i, t) {
		name = json_string_value(json_object_get(t, "name"));
		if (strcmp(name, c->tool) == 0)
			return true;
		full = mcp_tool_name(c->s->cfg->name, name);
		if (strcmp(full, c->tool) == 0) {
			free(full);
			free(c->tool);
			c->tool = xstrdup(name);
			return true;
		}
		free(full);
	}
	xasprintf(&text, "the MCP server %s has no tool %s (its tools/list)",
	    c->s->cfg->name, c->tool);
	mcp_call_defer(c, text);
	free(text);
	return false;
}

/* The end, with this error, from the loop. */
static void
mcp_call_defer(struct mcp_call *c, const char *error)
{
	free(c->error);
	c->error = xstrdup(error);
	evtimer_del(c->ev);
	event_active(c->ev, EV_TIMEOUT, 0);
}

static void
mcp_call_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_call *c = arg;
	struct mcp_server *s = c->s;
	char *text;

	(void)fd;
	(void)what;
	if (c->error == NULL) {
		/* Queued past the start timeout. */
		xasprintf(&text, "the MCP server %s is not ready after %lld ms "
		    "(%s%s%s)", s->cfg->name,
		    (long long)s->params.start_timeout_ms,
		    mcp_state_name(s->state), s->why != NULL ? ": " : "",
		    s->why != NULL ? s->why : "");
		c->error = text;
	}
	s->busy++;
	mcp_call_unlink(c);
	mcp_call_end(c, NULL, c->error);
	mcp_call_free(c);
	mcp_server_unbusy(s);
}

static void
mcp_call_end(struct mcp_call *c, const json_t *result, const char *error)
{
	if (!c->s->closing && c->ops.done != NULL)
		c->ops.done(c->arg, result, error);
}

void
mcp_call_cancel(struct mcp_call *c, const char *reason)
{
	struct mcp_server *s = c->s;
	json_t *msg;
	const char *why;

	if (c->id != 0 && s->proc != NULL) {
		msg = json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0",
		    "method", "notifications/cancelled", "params", "requestId",
		    (json_int_t)c->id, "reason", reason);
		(void)mcp_server_send(s, msg, &why);
		json_decref(msg);
		s->cancelled[s->ncancelled++ % MCP_CANCELLED_KEPT] = c->id;
		if (s->ncancelled >= 2 * MCP_CANCELLED_KEPT)
			s->ncancelled -= MCP_CANCELLED_KEPT;
	}
	mcp_call_unlink(c);
	mcp_call_free(c);
}

static struct mcp_call *
mcp_call_find(struct mcp_server *s, int64_t id)
{
	struct mcp_call *c;

	for (c = s->calls; c != NULL; c = c->next)
		if (c->id == id && c->error == NULL)
			return c;
	return NULL;
}

static void
mcp_call_unlink(struct mcp_call *c)
{
	struct mcp_server *s = c->s;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else if (s->calls == c)
		s->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void
mcp_call_free(struct mcp_call *c)
{
	c->s->done++;
	event_free(c->ev);
	free(c->tool);
	json_decref(c->args);
	free(c->error);
	free(c);
}

/*
 * A live reload (doc/design.md §7, Reload) hands a server over as it is
 * only when nothing of it is half done: ready, no handshake, listing or
 * ping under way, every call sent and none ending.
 */
bool
mcp_server_carriable(const struct mcp_server *s)
{
	const struct mcp_call *c;

	if (s->state != MCP_READY || s->closing || s->proc == NULL ||
	    s->init_id != 0 || s->list_id != 0 || s->ping_id != 0 ||
	    s->version == NULL || !proc_carried(s->proc))
		return false;
	for (c = s->calls; c != NULL; c = c->next)
		if (c->id == 0 || c->error != NULL)
			return false;
	return true;
}

void
mcp_server_save(struct mcp_server *s, struct handover_rec *r, json_t *o)
{
	json_t *proc = json_object(), *calls = json_array();
	const struct mcp_call *c;

	for (c = s->calls; c != NULL; c = c->next)
		json_array_append_new(calls, json_integer(c->id));
	json_object_set_new(o, "calls", calls);
	json_object_set_new(o, "nextId", json_integer(s->next_id));
	json_object_set_new(o, "version", json_string(s->version));
	json_object_set_new(o, "tools", json_incref(s->tools));
	json_object_set_new(o, "restarts", json_integer((json_int_t)
	    s->restarts));
	json_object_set_new(o, "done", json_integer((json_int_t)s->done));
	json_object_set_new(o, "discarding", json_boolean(s->discarding));
	handover_put(r, o, "line", s->line.data, s->line.len);
	handover_put(r, o, "tail", s->tail, s->tail_len);
	proc_save(s->proc, r, proc);
	json_object_set_new(o, "proc", proc);
}

struct mcp_server *
mcp_server_adopt(struct event_base *base, const struct mcp_server_params *p,
    const struct mcp_server_ops *ops, void *arg, const struct handover_in *in,
    const json_t *o)
{
	static const struct mcp_call_ops none = { 0 };
	const char *version = json_string_value(json_object_get(o, "version"));
	const json_t *tools = json_object_get(o, "tools"), *v;
	struct mcp_server *s;
	struct mcp_call *c;
	const char *data;
	size_t i, n;

	for (i = 0; version != NULL && i < nitems(mcp_versions); i++)
		if (strcmp(version, mcp_versions[i]) == 0)
			break;
	if (version == NULL || i == nitems(mcp_versions) ||
	    !json_is_array(tools) || json_array_size(tools) > MCP_TOOLS_MAX ||
	    !json_is_object(json_object_get(o, "proc"))) {
		mcp_server_discard(in, o);
		return NULL;
	}
	s = mcp_server_new(base, p, ops, arg);
	s->version = mcp_versions[i];
	s->tools = json_deep_copy(tools);
	s->next_id = json_integer_value(json_object_get(o, "nextId"));
	if (s->next_id < 1)
		s->next_id = 1;
	s->restarts = (uint64_t)json_integer_value(json_object_get(o,
	    "restarts"));
	s->done = (uint64_t)json_integer_value(json_object_get(o, "done"));
	s->discarding = json_is_true(json_object_get(o, "discarding"));
	data = handover_get(in, o, "line", &n);
	if (n <= MCP_LINE_MAX)
		buf_add(&s->line, data, n);
	data = handover_get(in, o, "tail", &n);
	s->tail_len = n < sizeof s->tail ? n : sizeof s->tail;
	memcpy(s->tail, data, s->tail_len);
	s->state = MCP_READY;
	s->ever_ready = true;
	/* Its calls in flight wait for their tools to take them back. */
	json_array_foreach(json_object_get(o, "calls"), i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) >= s->next_id)
			continue;
		c = mcp_server_call(s, "", NULL, &none, NULL);
		c->id = json_integer_value(v);
		evtimer_del(c->ev);
	}
	s->proc = proc_adopt(in, json_object_get(o, "proc"),
	    &mcp_server_proc_ops, s);
	return s;
}

/*
 * Read no further than its group and descriptors: a record that does not
 * serve may not hold what proc_adopt needs. The reaper reaps the process.
 */
void
mcp_server_discard(const struct handover_in *in, const json_t *o)
{
	const json_t *proc = json_object_get(o, "proc"), *v;
	json_int_t pgid = json_integer_value(json_object_get(proc, "pgid"));
	size_t i;
	int fd;

	(void)in;
	/* Never 0 or 1, nor our own group: only a group of its own. */
	if (pgid > 1 && pgid != (json_int_t)getpgrp())
		(void)kill(-(pid_t)pgid, SIGKILL);
	if ((fd = handover_take_fd(json_object_get(proc, "inFd"))) != -1)
		close(fd);
	json_array_foreach(json_object_get(proc, "pipes"), i, v)
		if ((fd = handover_take_fd(v)) != -1)
			close(fd);
}

struct mcp_call *
mcp_call_adopt(struct mcp_server *s, int64_t id,
    const struct mcp_call_ops *ops, void *arg)
{
	struct mcp_call *c = mcp_call_find(s, id);

	if (c == NULL || c->ops.done != NULL)
		return NULL;
	c->ops = *ops;
	c->arg = arg;
	return c;
}

void
mcp_server_adopted(struct mcp_server *s)
{
	struct mcp_call *c, *next;

	for (c = s->calls; c != NULL; c = next) {
		next = c->next;
		if (c->ops.done == NULL)
			mcp_call_cancel(c, "its tool did not outlive the reload");
	}
}

int64_t
mcp_call_id(const struct mcp_call *c)
{
	return c->id;
}
