/*
 * Client-run tools (doc/design.md §7, Client-run tools): a ToolDef with
 * runner "client" runs in the connection that serves its name. The
 * executor schedules it like any tool; here EXEC_SPAWN becomes a tool_start
 * to that connection, EXEC_KILL a tool_cancel, and completeTool its end.
 * A call whose name nobody serves waits a grace for a connection to claim
 * it, and is started again there (resumed). Every end goes through the
 * loop, never from inside an executor effect.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "core/content.h"
#include "log.h"
#include "metrics.h"
#include "net/conn.h"
#include "stexec/protocol.h"
#include "session/session_int.h"
#include "supervisor/capture.h"
#include "utf8.h"
#include "util.h"

/* One connection's claim on a name of a session. */
struct client_claim {
	struct session *s;
	char *name;
	struct conn *c;
	struct client_claim *prev, *next; /* every claim, all sessions */
};

struct client_call {
	struct session *s;
	struct exec_tool *t;
	const char *id;           /* the tool's (exec_tool_id) */
	const char *name;
	struct conn *c;           /* the connection it was started on; NULL:
	                             waiting for one to claim the name */
	bool started;             /* a tool_start went out: the next says
	                             resumed */
	bool cancel;              /* interruptBehavior "cancel" */
	bool closed;              /* it lost its connection (the words) */
	enum exec_end end;        /* EXEC_END_EXITED, or why it is being
	                             ended (killed, timed out) */
	struct event *timeout;    /* S16 */
	struct event *grace;      /* the kill grace, or no server yet */
	struct event *now;        /* its end, from the loop */
	uint64_t started_ms;      /* CLOCK_MONOTONIC, which a reload keeps */
	uint64_t deadline_ms;     /* its timeout's; 0: none */
	int carried_fd;           /* a reload: its connection's, until that
	                             is adopted; else -1 */
	size_t max_result;
	struct client_call *prev, *next; /* the session's calls */
};

static struct client_claim *client_claims;
static unsigned client_claim_n;
static struct session_client_config client_cfg;

static struct client_claim *session_client_claim(struct session *,
		    const char *);
static void	session_client_add_claim(struct session *, const char *,
		    struct conn *);
static void	session_client_unclaim(struct client_claim *);
static void	session_client_send(struct conn *, const char *, json_t *);
static void	session_client_link(struct session *, struct exec_tool *,
		    struct client_call *);
static void	session_client_start_on(struct client_call *,
		    struct conn *);
static void	session_client_wait(struct client_call *);
static void	session_client_arm(struct event *, int64_t);
static void	session_client_timeout_cb(evutil_socket_t, short, void *);
static void	session_client_grace_cb(evutil_socket_t, short, void *);
static void	session_client_now_cb(evutil_socket_t, short, void *);
static void	session_client_tell_cancel(struct client_call *,
		    const char *);
static void	session_client_end(struct client_call *,
		    const struct exec_done *, const struct exec_exit *);
static struct client_call *session_client_find(struct session *,
		    const char *);
static int	session_client_bound(struct client_call *, const json_t *,
		    bool, char *, size_t);

void
session_client_init(const struct session_client_config *cfg)
{
	client_cfg = *cfg;
}

static struct client_claim *
session_client_claim(struct session *s, const char *name)
{
	struct client_claim *cl;

	for (cl = client_claims; cl != NULL; cl = cl->next)
		if (cl->s == s && strcmp(cl->name, name) == 0)
			return cl;
	return NULL;
}

/* A notification for this connection alone (not the session's log). */
static void
session_client_send(struct conn *c, const char *method, json_t *params)
{
	json_t *msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
	    method, "params", params);
	char *line = json_dumps(msg, JSON_COMPACT);
	size_t len = strlen(line);

	line = xrealloc(line, len + 2);
	line[len] = '\n';
	conn_write(c, line, len + 1);
	free(line);
	json_decref(msg);
}

int
session_client_serve(struct session *s, struct conn *c, const json_t *names,
    bool take_over, json_t **served, char *err, size_t errlen)
{
	struct client_claim *cl;
	struct client_call *k;
	struct tooldef *def;
	const json_t *v;
	size_t i;

	if (!json_is_array(names) || json_array_size(names) == 0 ||
	    json_array_size(names) > SESSION_CLIENT_NAMES_MAX) {
		utf8_snprintf(err, errlen, "names: must be an "
		    "array of 1 to %d tool names", SESSION_CLIENT_NAMES_MAX);
		return STEXEC_ERR_INVALID_PARAMS;
	}
	/* All or nothing: every name is checked before any is claimed. */
	json_array_foreach(names, i, v) {
		if (!json_is_string(v)) {
			utf8_snprintf(err, errlen, "names[%zu]: must "
			    "be a string", i);
			return STEXEC_ERR_INVALID_PARAMS;
		}
		def = idmap_get(&s->tools, json_string_value(v));
		if (def == NULL || tooldef_runner(def) !=
		    TOOLDEF_RUNNER_CLIENT) {
			utf8_snprintf(err, errlen, "names[%zu]: the "
			    "session has no client-run tool (runner \"client\") "
			    "named \"%s\"", i, json_string_value(v));
			return STEXEC_ERR_INVALID_PARAMS;
		}
		cl = session_client_claim(s, json_string_value(v));
		if (cl != NULL && cl->c != c && !take_over) {
			utf8_snprintf(err, errlen, "State conflict: another "
			    "connection serves \"%s\"; pass takeOver: true "
			    "to take it", json_string_value(v));
			return STEXEC_ERR_STATE;
		}
	}
	json_array_foreach(names, i, v) {
		if ((cl = session_client_claim(s, json_string_value(v))) ==
		    NULL)
			session_client_add_claim(s, json_string_value(v), c);
		else
			cl->c = c;
	}
	/*
	 * The calls of these names: waiting ones start here, and a taken-over
	 * one starts again here (its old connection is told to cancel).
	 */
	for (k = s->client_calls; k != NULL; k = k->next) {
		cl = session_client_claim(s, k->name);
		if (cl == NULL || cl->c != c || k->c == c ||
		    k->end != EXEC_END_EXITED)
			continue;
		if (k->c != NULL)
			session_client_tell_cancel(k, "taken_over");
		session_client_start_on(k, c);
	}
	*served = json_deep_copy(names);
	return 0;
}

/* The connection is gone: its names are free, its calls wait a grace. */
void
session_client_conn_closed(struct conn *c)
{
	struct client_claim *cl, *next;
	struct client_call *k;
	struct session *s;

	if (client_claim_n == 0)
		return;
	for (cl = client_claims; cl != NULL; cl = next) {
		next = cl->next;
		if (cl->c != c)
			continue;
		s = cl->s;
		for (k = s->client_calls; k != NULL; k = k->next)
			if (k->c == c && strcmp(k->name, cl->name) == 0 &&
			    k->end == EXEC_END_EXITED) {
				k->c = NULL;
				k->closed = true;
				session_client_wait(k);
			}
		session_client_unclaim(cl);
	}
}

static void
session_client_add_claim(struct session *s, const char *name, struct conn *c)
{
	struct client_claim *cl = xcalloc(1, sizeof *cl);

	cl->s = s;
	cl->name = xstrdup(name);
	cl->c = c;
	if ((cl->next = client_claims) != NULL)
		client_claims->prev = cl;
	client_claims = cl;
	client_claim_n++;
}

static void
session_client_unclaim(struct client_claim *cl)
{
	if (cl->prev != NULL)
		cl->prev->next = cl->next;
	else
		client_claims = cl->next;
	if (cl->next != NULL)
		cl->next->prev = cl->prev;
	client_claim_n--;
	free(cl->name);
	free(cl);
}

/* The session goes: its claims with it (its calls ended before). */
void
session_client_free(struct session *s)
{
	struct client_claim *cl, *next;

	for (cl = client_claims; cl != NULL; cl = next) {
		next = cl->next;
		if (cl->s == s)
			session_client_unclaim(cl);
	}
}

json_t *
session_client_served_json(struct session *s)
{
	struct client_claim *cl;
	json_t *o = json_array();

	for (cl = client_claims; cl != NULL; cl = cl->next)
		if (cl->s == s)
			json_array_append_new(o, json_string(cl->name));
	return o;
}

/* EXEC_SPAWN of a client-run tool. */
struct client_call *
session_client_start(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req)
{
	struct client_call *k = xcalloc(1, sizeof *k);
	struct client_claim *cl;

	k->max_result = req->max_output;
	k->started_ms = metrics_now() / 1000000;
	k->deadline_ms = req->timeout_ms > 0 ? k->started_ms +
	    (uint64_t)req->timeout_ms : 0;
	session_client_link(s, t, k);
	session_client_arm(k->timeout, req->timeout_ms);
	if ((cl = session_client_claim(s, k->name)) != NULL)
		session_client_start_on(k, cl->c);
	else
		session_client_wait(k);
	return k;
}

/* The parts of a call every start shares, in the session's list. */
static void
session_client_link(struct session *s, struct exec_tool *t,
    struct client_call *k)
{
	struct event_base *base = client_cfg.base;

	k->s = s;
	k->t = t;
	k->id = exec_tool_id(t);
	k->name = exec_tool_name(t);
	k->cancel = tooldef_interrupt(exec_tool_def(t)) == TOOLDEF_CANCEL;
	k->end = EXEC_END_EXITED;
	k->carried_fd = -1;
	k->timeout = evtimer_new(base, session_client_timeout_cb, k);
	k->grace = evtimer_new(base, session_client_grace_cb, k);
	k->now = evtimer_new(base, session_client_now_cb, k);
	if ((k->next = s->client_calls) != NULL)
		s->client_calls->prev = k;
	s->client_calls = k;
}

void
session_client_describe(const struct client_call *k, json_t *o)
{
	json_object_set_new(o, "runner", json_string("client"));
	json_object_set_new(o, "elapsedMs", json_integer((json_int_t)(
	    metrics_now() / 1000000 - k->started_ms)));
	/* Nobody serves its name yet (or any more): it waits for a claim. */
	if (k->c == NULL)
		json_object_set_new(o, "waitingForClient", json_true());
}

void
session_client_save(const struct client_call *k, json_t *o)
{
	json_object_set_new(o, "client", json_pack("{s:b, s:i, s:i, s:I, "
	    "s:I, s:b}", "started", k->started, "conn", k->c != NULL ?
	    conn_fd(k->c) : -1, "end", (int)k->end, "startedMs",
	    (json_int_t)k->started_ms, "deadlineMs", (json_int_t)k->deadline_ms,
	    "closed", k->closed));
}

/* A reload: the call as it was, its connection to come (carried). */
struct client_call *
session_client_adopt(struct session *s, struct exec_tool *t, const json_t *o)
{
	struct client_call *k = xcalloc(1, sizeof *k);
	uint64_t now = metrics_now() / 1000000;

	session_client_link(s, t, k);
	k->started = json_is_true(json_object_get(o, "started"));
	k->closed = json_is_true(json_object_get(o, "closed"));
	k->carried_fd = (int)json_integer_value(json_object_get(o, "conn"));
	k->started_ms = (uint64_t)json_integer_value(json_object_get(o,
	    "startedMs"));
	k->deadline_ms = (uint64_t)json_integer_value(json_object_get(o,
	    "deadlineMs"));
	k->max_result = tooldef_max_result_bytes(exec_tool_def(t));
	if (k->deadline_ms > 0)
		session_client_arm(k->timeout, k->deadline_ms > now ?
		    (int64_t)(k->deadline_ms - now) : 1);
	switch (json_integer_value(json_object_get(o, "end"))) {
	case EXEC_END_KILLED:
	case EXEC_END_TIMED_OUT:
		/* It was being stopped: it is, again, within a new grace. */
		k->end = (enum exec_end)json_integer_value(json_object_get(o,
		    "end"));
		evtimer_del(k->timeout);
		if (k->cancel)
			event_active(k->now, EV_TIMEOUT, 0);
		else
			session_client_arm(k->grace,
			    client_cfg.kill_grace_ms);
		break;
	default:
		break;
	}
	return k;
}

json_t *
session_client_conn_json(struct conn *c)
{
	struct client_claim *cl;
	json_t *out = json_array(), *names;
	const char *sid;
	size_t i;

	for (cl = client_claims; cl != NULL; cl = cl->next) {
		if (cl->c != c)
			continue;
		sid = cl->s->id;
		names = NULL;
		for (i = 0; i < json_array_size(out); i++)
			if (strcmp(json_string_value(json_object_get(
			    json_array_get(out, i), "s")), sid) == 0)
				names = json_object_get(json_array_get(out, i),
				    "names");
		if (names == NULL) {
			names = json_array();
			json_array_append_new(out, json_pack("{s:s, s:o}", "s",
			    sid, "names", names));
		}
		json_array_append_new(names, json_string(cl->name));
	}
	return out;
}

void
session_client_carried(struct session *s, struct conn *c, int fd,
    const json_t *names)
{
	struct client_call *k;
	const json_t *name;
	size_t j;

	json_array_foreach(names, j, name)
		if (json_is_string(name) && session_client_claim(s,
		    json_string_value(name)) == NULL)
			session_client_add_claim(s, json_string_value(name), c);
	for (k = s->client_calls; k != NULL; k = k->next)
		if (k->carried_fd == fd) {
			k->carried_fd = -1;
			k->c = c;
		}
}

void
session_client_carried_all(void)
{
	struct client_call *k;
	struct session *s;

	for (s = session_list; s != NULL; s = s->next)
		for (k = s->client_calls; k != NULL; k = k->next)
			if (k->carried_fd != -1 || (k->c == NULL &&
			    k->end == EXEC_END_EXITED)) {
				if (k->carried_fd != -1)
					k->closed = true;
				k->carried_fd = -1;
				session_client_wait(k);
			}
}

static void
session_client_start_on(struct client_call *k, struct conn *c)
{
	json_t *p = json_pack("{s:s, s:I, s:s, s:s, s:O}", "sessionId",
	    k->s->id, "turn", (json_int_t)exec_tool_turn(k->t),
	    "toolUseId", k->id, "name", k->name, "input",
	    exec_tool_input(k->t));

	if (k->started)
		json_object_set_new(p, "resumed", json_true());
	k->started = true;
	k->c = c;
	k->closed = false;
	evtimer_del(k->grace);
	session_client_send(c, "tool_start", p);
}

/* Nobody serves its name: wait for a claim, within the grace. */
static void
session_client_wait(struct client_call *k)
{
	session_client_arm(k->grace, client_cfg.client_grace_ms);
}

static void
session_client_arm(struct event *ev, int64_t ms)
{
	struct timeval tv;

	if (ms <= 0)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(ev, &tv);
}

static void
session_client_tell_cancel(struct client_call *k, const char *reason)
{
	if (k->c != NULL)
		session_client_send(k->c, "tool_cancel", json_pack(
		    "{s:s, s:s, s:s}", "sessionId", k->s->id,
		    "toolUseId", k->id, "reason", reason));
}

/*
 * EXEC_KILL, S16's timeout, a close: the client is told; a cancel tool
 * ends at once, a block tool within the kill grace (or its answer).
 */
static void
session_client_stop(struct client_call *k, enum exec_end end,
    const char *reason)
{
	if (k->end != EXEC_END_EXITED)
		return;
	k->end = end;
	evtimer_del(k->timeout);
	session_client_tell_cancel(k, reason);
	if (k->cancel || k->c == NULL)
		event_active(k->now, EV_TIMEOUT, 0);
	else {
		evtimer_del(k->grace);
		session_client_arm(k->grace, client_cfg.kill_grace_ms);
	}
}

void
session_client_cancel(struct client_call *k)
{
	const char *why = exec_tool_kill_reason(k->t);

	session_client_stop(k, EXEC_END_KILLED, why != NULL ? why : "abort");
}

static void
session_client_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session_client_stop(arg, EXEC_END_TIMED_OUT, "timeout");
}

static void
session_client_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client_call *k = arg;
	struct exec_exit x = { .end = k->end };
	struct exec_done d = { .is_error = true };
	json_t *content;

	if (k->end != EXEC_END_EXITED) {
		session_client_end(k, NULL, &x);
		return;
	}
	content = json_sprintf("<tool_use_error>Error: no client serves %s: "
	    "%s</tool_use_error>", k->name, k->closed ? "its connection "
	    "closed" : "no connection claimed it (serveTools)");
	d.content = content;
	session_client_end(k, &d, NULL);
	json_decref(content);
}

static void
session_client_now_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client_call *k = arg;
	struct exec_exit x = { .end = k->end };

	session_client_end(k, NULL, &x);
}

/* Forget a call, without a word to anyone (its tool is done with it). */
void
session_client_drop(struct client_call *k)
{
	if (k->prev != NULL)
		k->prev->next = k->next;
	else
		k->s->client_calls = k->next;
	if (k->next != NULL)
		k->next->prev = k->prev;
	event_free(k->timeout);
	event_free(k->grace);
	event_free(k->now);
	free(k);
}

/* The call is over: tell the executor (session.c), which drops it. */
static void
session_client_end(struct client_call *k, const struct exec_done *d,
    const struct exec_exit *x)
{
	struct exec_tool *t = k->t;
	struct exec_done dd;
	struct exec_exit xx;

	if (d != NULL) {
		dd = *d;
		dd.duration_ms = (int64_t)(metrics_now() / 1000000 -
		    k->started_ms);
		d = &dd;
	} else {
		xx = *x;
		xx.duration_ms = (int64_t)(metrics_now() / 1000000 -
		    k->started_ms);
		x = &xx;
	}
	client_cfg.finish(t, d, x);
}

static struct client_call *
session_client_find(struct session *s, const char *id)
{
	struct client_call *k;

	for (k = s->client_calls; k != NULL; k = k->next)
		if (strcmp(k->id, id) == 0)
			return k;
	return NULL;
}

/* Why a completeTool or toolProgress for id is too late, in words. */
static int
session_client_late(struct session *s, const char *id, char *err,
    size_t errlen)
{
	struct exec_tool *t = exec_find(s->ex, id);
	enum exec_status st;
	const json_t *input, *result;
	size_t i;
	const char *tid;

	if (t != NULL) {
		for (i = 0; (tid = exec_turn_tool_state(s->ex, i, &st,
		    &input, &result)) != NULL; i++)
			if (strcmp(tid, id) == 0)
				break;
		utf8_snprintf(err, errlen, "State conflict: tool %s is %s; its "
		    "result stands", id, tid != NULL ? exec_status_name(st) :
		    "not running");
	} else
		utf8_snprintf(err, errlen, "State conflict: tool %s does not run "
		    "in this session's turn (its turn ended, or no such tool); "
		    "nothing was changed", id);
	return STEXEC_ERR_STATE;
}

int
session_client_complete(struct session *s, struct conn *c, const char *id,
    const json_t *content, bool is_error, char *err, size_t errlen)
{
	struct client_call *k = session_client_find(s, id);
	struct exec_exit x;

	if (!content_check(content, err, errlen))
		return STEXEC_ERR_INVALID_PARAMS;
	if (k == NULL || (k->end != EXEC_END_EXITED && k->cancel))
		return session_client_late(s, id, err, errlen);
	if (k->c != c) {
		utf8_snprintf(err, errlen, "State conflict: tool %s was started "
		    "on another connection%s", id, k->c == NULL ? " (it waits "
		    "for its name to be claimed)" : "");
		return STEXEC_ERR_STATE;
	}
	if (k->end != EXEC_END_EXITED) {
		/* Killed or timed out: the answer ends it in those words. */
		x = (struct exec_exit){ .end = k->end };
		evtimer_del(k->grace);
		session_client_end(k, NULL, &x);
		return 0;
	}
	return session_client_bound(k, content, is_error, err, errlen);
}

/*
 * S17 for a client's content: text over maxResultBytes keeps its head and
 * tail, the whole in a file, in a process's words; blocks over the bounds
 * keep those that fit, in order, and say where the whole result is.
 */
static int
session_client_bound(struct client_call *k, const json_t *content,
    bool is_error, char *err, size_t errlen)
{
	struct exec_done d = { .content = content, .is_error = is_error };
	struct capture *cap;
	struct output out;
	json_t *kept = NULL, *meta = NULL, *b;
	char *whole;
	size_t text, img, i;

	if (content_text_bytes(content) <= k->max_result &&
	    (json_is_string(content) || content_image_bytes(content) <=
	    tooldef_result_ceiling())) {
		session_client_end(k, &d, NULL);
		return 0;
	}
	cap = capture_create(k->max_result, client_cfg.output_dir,
	    k->name, 0, metrics_now());
	if (json_is_string(content))
		capture_add(cap, 1, json_string_value(content),
		    json_string_length(content));
	else {
		whole = json_dumps(content, JSON_COMPACT);
		capture_add(cap, 1, whole, strlen(whole));
		free(whole);
	}
	while (capture_finish(cap) == 1)
		;
	capture_output(cap, &out);
	if (json_is_string(content)) {
		d.output = &out;
		d.output_error = capture_error(cap);
	} else {
		kept = json_array();
		text = img = 0;
		json_array_foreach(content, i, b) {
			text += json_string_length(json_object_get(b, "text"));
			img += json_string_length(json_object_get(
			    json_object_get(b, "source"), "data"));
			if (text > k->max_result || img >
			    tooldef_result_ceiling())
				break;
			json_array_append(kept, b);
		}
		json_array_append_new(kept, json_pack("{s:s, s:o}", "type",
		    "text", "text", json_sprintf("[... result truncated: %zu "
		    "of its %zu blocks are shown, within maxResultBytes (%zu "
		    "bytes of text) and %zu bytes of images; the whole result, "
		    "as JSON, is in %s ...]", i, json_array_size(content),
		    k->max_result, tooldef_result_ceiling(), out.path != NULL ?
		    out.path : "no file: it could not be saved")));
		d.content = kept;
		d.meta = meta = json_pack("{s:b, s:o}", "truncated", 1,
		    "fullOutputPath", out.path != NULL ? json_string(out.path) :
		    json_null());
	}
	if (out.path != NULL)
		client_cfg.keep_file(k->s, out.path, out.total, k->id);
	session_client_end(k, &d, NULL);
	if (d.content != content) {
		json_decref(kept);
		json_decref(meta);
	}
	capture_free(cap, out.path != NULL);
	(void)err;
	(void)errlen;
	return 0;
}

int
session_client_progress(struct session *s, struct conn *c, const char *id,
    const json_t *progress, char *err, size_t errlen)
{
	struct client_call *k = session_client_find(s, id);

	if (k == NULL || k->end != EXEC_END_EXITED)
		return session_client_late(s, id, err, errlen);
	if (k->c != c) {
		utf8_snprintf(err, errlen, "State conflict: tool %s was started "
		    "on another connection", id);
		return STEXEC_ERR_STATE;
	}
	exec_progress(k->t, progress);
	return 0;
}
