/*
 * A session's hooks (README, "Hooks"): the operator's and its own, run in
 * the executor's hook phases (exec_config.hooks, exec_hooks_done), and at
 * the session's start and end. The hooks layer runs them; this file says
 * what each event is about and hands the decision to the executor.
 */
#include "session/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "log.h"
#include "metrics.h"
#include "session/session_int.h"
#include "util.h"

/* One event's hooks in flight. */
struct session_hook_run {
	struct session *s;
	struct exec_tool *t;     /* NULL: SessionStart */
	enum hooks_event event;
	struct hooks_run *run;
	struct session_hook_run *next;
};

/* A session's hooks: NULL when neither the operator nor it has any. */
struct session_hook {
	struct hooks *hooks;
	struct session_hook_run *runs;
	bool starting;           /* SessionStart hooks run: tools wait */
	struct exec_tool **held; /* ...these, in order */
	size_t nheld;
	char *env_file;          /* CLAUDE_ENV_FILE made for it, or NULL */
	json_t *own;             /* createSession's hooks, for the journal */
};

/* SessionEnd's runs outlive their session: they keep its id. */
struct session_hook_end {
	char id[24];
};

static const struct session_hook_ops *session_hook_ops;
static struct hooks *session_hook_operator;
static int64_t session_hook_timeout_ms;
static const char *session_hook_dir;

static bool	session_hook_start(struct session *, struct exec_tool *,
    enum hooks_event, bool);
static json_t	*session_hook_event(struct session *, struct exec_tool *,
    enum hooks_event, const json_t *, const json_t *);
static json_t	*session_hook_input(struct session *, const json_t *);
static json_t	*session_hook_response(struct exec_tool *, const json_t *);
static const char *session_hook_tool_name(struct exec_tool *);
static void	session_hook_done(void *, const struct hooks_decision *);
static void	session_hook_end_done(void *, const struct hooks_decision *);
static void	session_hook_log(const char *, struct exec_tool *,
    const struct hooks_decision *);
static void	session_hook_unlink(struct session_hook *,
    struct session_hook_run *);
static void	session_hook_release(struct session *);
static void	session_hook_env_file(struct session *);

void
session_hook_init(const struct session_hook_ops *ops)
{
	session_hook_ops = ops;
}

void
session_hook_config(struct hooks *operator_hooks, int64_t timeout_ms,
    const char *dir)
{
	session_hook_operator = operator_hooks;
	session_hook_timeout_ms = timeout_ms;
	session_hook_dir = dir;
}

/* Claude Code's name: hookName, else a built-in's, else its own. */
static const char *
session_hook_tool_name(struct exec_tool *t)
{
	const struct tooldef *def = exec_tool_def(t);
	const char *alias = def != NULL ? tooldef_hook_name(def) : NULL;

	if (alias == NULL)
		alias = hooks_tool_alias(exec_tool_name(t));
	return alias != NULL ? alias : exec_tool_name(t);
}

/* tool_input with its paths absolute, as Claude Code gives them. */
static json_t *
session_hook_input(struct session *s, const json_t *input)
{
	static const char *const keys[] = { "file_path", "path",
		"notebook_path" };
	json_t *in = json_deep_copy(input);
	const char *v;
	char *abs;
	size_t i;

	for (i = 0; i < nitems(keys); i++) {
		v = json_string_value(json_object_get(in, keys[i]));
		if (v == NULL || v[0] == '/')
			continue;
		xasprintf(&abs, "%s/%s", exec_cwd(s->ex), v);
		json_object_set_new(in, keys[i], json_string(abs));
		free(abs);
	}
	return in;
}

/*
 * tool_response (README, "Hooks"): the result's content and meta; bash's
 * output also as stdout; the file tools' path and success.
 */
static json_t *
session_hook_response(struct exec_tool *t, const json_t *params)
{
	const json_t *result = json_object_get(params, "result");
	const json_t *meta = json_object_get(params, "meta");
	const json_t *content = json_object_get(result, "content");
	const char *name = exec_tool_name(t), *path;
	bool is_error = json_is_true(json_object_get(result, "is_error"));
	json_t *r;

	r = json_pack("{s:O, s:b, s:O, s:O}", "content", content, "isError",
	    is_error, "exitCode", json_object_get(meta, "exitCode") != NULL ?
	    json_object_get(meta, "exitCode") : json_null(), "reason",
	    json_object_get(meta, "reason") != NULL ?
	    json_object_get(meta, "reason") : json_null());
	if (strcmp(name, "bash") == 0) {
		json_object_set_new(r, "stdout", json_string(
		    json_is_string(content) ? json_string_value(content) : ""));
		json_object_set_new(r, "stderr", json_string(""));
		json_object_set_new(r, "interrupted", json_false());
	}
	path = json_string_value(json_object_get(exec_tool_input(t),
	    "file_path"));
	if (path != NULL) {
		json_object_set_new(r, "filePath", json_string(path));
		json_object_set_new(r, "success", json_boolean(!is_error));
	}
	return r;
}

/* The event's JSON; input: the tool's, its paths made absolute. */
static json_t *
session_hook_event(struct session *s, struct exec_tool *t,
    enum hooks_event e, const json_t *input, const json_t *result)
{
	const json_t *content;
	const char *text;
	json_t *ev;
	size_t i;

	ev = json_pack("{s:s, s:s, s:s, s:s}", "session_id", s->id, "cwd",
	    exec_cwd(s->ex), "permission_mode", "default", "hook_event_name",
	    hooks_event_name(e));
	if (t == NULL) {
		json_object_set_new(ev, e == HOOKS_SESSION_START ? "source" :
		    "reason", json_string(e == HOOKS_SESSION_START ? "startup" :
		    "other"));
		return ev;
	}
	json_object_set_new(ev, "tool_name",
	    json_string(session_hook_tool_name(t)));
	json_object_set(ev, "tool_input", (json_t *)input);
	json_object_set_new(ev, "tool_use_id", json_string(exec_tool_id(t)));
	if (result == NULL)
		return ev;
	json_object_set_new(ev, "tool_response", session_hook_response(t,
	    result));
	json_object_set(ev, "duration_ms", json_object_get(json_object_get(
	    result, "meta"), "durationMs"));
	if (e == HOOKS_POST_TOOL_USE_FAILURE) {
		/* error: the result's text (its first text block). */
		content = json_object_get(json_object_get(result, "result"),
		    "content");
		text = json_string_value(content);
		for (i = 0; text == NULL && i < json_array_size(content); i++)
			text = json_string_value(json_object_get(
			    json_array_get(content, i), "text"));
		json_object_set_new(ev, "error", json_string(text != NULL ?
		    text : ""));
		json_object_set_new(ev, "is_interrupt", json_false());
	}
	return ev;
}

/* Start the event's hooks that match: false when none does. */
static bool
session_hook_start(struct session *s, struct exec_tool *t,
    enum hooks_event e, bool post)
{
	struct session_hook *sh = s->hook;
	const struct hooks_handler *h[HOOKS_MAX_HANDLERS];
	struct hooks_subject subj = { .root = s->root };
	struct session_hook_run *r;
	struct hooks_run_spec spec = { 0 };
	json_t *ev, *input = NULL;
	size_t n;

	if (t != NULL) {
		subj.name = exec_tool_name(t);
		subj.alias = session_hook_tool_name(t);
		subj.input = exec_tool_input(t);
	} else {
		subj.name = e == HOOKS_SESSION_START ? "startup" : "other";
	}
	subj.cwd = exec_cwd(s->ex);
	if ((n = hooks_select(sh->hooks, e, &subj, h, nitems(h))) == 0)
		return false;
	if (t != NULL)
		input = session_hook_input(s, exec_tool_input(t));
	/* The result only once a hook wants it: it may be text until then. */
	ev = session_hook_event(s, t, e, input, post ? exec_tool_result(t) :
	    NULL);
	json_decref(input);
	spec.event = e;
	spec.input = ev;
	spec.cwd = exec_cwd(s->ex);
	spec.envp = session_hook_ops->env(s);
	spec.project_dir = s->root;
	spec.env_file = e == HOOKS_SESSION_START ? (s->shell.env_file != NULL ?
	    s->shell.env_file : sh->env_file) : NULL;
	spec.timeout_ms = session_hook_timeout_ms;
	spec.spill_dir = session_hook_dir;
	spec.user = s->user;
	r = xcalloc(1, sizeof *r);
	r->s = s;
	r->t = t;
	r->event = e;
	r->next = sh->runs;
	sh->runs = r;
	r->run = hooks_run_start(h, n, &spec, session_hook_done, r);
	json_decref(ev);
	return true;
}

/* exec_config.hooks: the tool's hooks of this phase, if any match. */
bool
session_hook_phase(void *arg, struct exec_tool *t, enum exec_hook_phase ph,
    bool failed)
{
	struct session *s = arg;
	struct session_hook *sh = s->hook;
	enum hooks_event e;

	if (sh == NULL)
		return false;
	if (ph == EXEC_HOOK_PRE && sh->starting) {
		/* SessionStart first: its env file is what the tool sees. */
		sh->held = xreallocarray(sh->held, sh->nheld + 1,
		    sizeof *sh->held);
		sh->held[sh->nheld++] = t;
		return true;
	}
	e = ph == EXEC_HOOK_PRE ? HOOKS_PRE_TOOL_USE :
	    ph == EXEC_HOOK_PERMISSION ? HOOKS_PERMISSION_REQUEST :
	    failed ? HOOKS_POST_TOOL_USE_FAILURE : HOOKS_POST_TOOL_USE;
	return session_hook_start(s, t, e, ph == EXEC_HOOK_POST);
}

static void
session_hook_unlink(struct session_hook *sh, struct session_hook_run *r)
{
	struct session_hook_run **pp;

	for (pp = &sh->runs; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
}

/* Each run a line with HOOK=; a missing command loudly. */
static void
session_hook_log(const char *sid, struct exec_tool *t,
    const struct hooks_decision *d)
{
	const json_t *run;
	const char *outcome, *decision;
	json_int_t code;
	size_t i;

	json_array_foreach(d->runs, i, run) {
		outcome = json_string_value(json_object_get(run, "outcome"));
		decision = json_string_value(json_object_get(run, "decision"));
		code = json_integer_value(json_object_get(run, "exitCode"));
		metrics_hook(outcome);
		log_hook(code == 127 ? LOG_LEVEL_WARN : LOG_LEVEL_INFO, sid,
		    t != NULL ? exec_tool_id(t) : NULL, t != NULL ?
		    exec_tool_name(t) : NULL, hooks_event_name(d->event),
		    "%s: %s%s%s in %lld ms%s", json_string_value(
		    json_object_get(run, "command")), outcome != NULL ? outcome :
		    "?", decision != NULL ? ", " : "", decision != NULL ?
		    decision : "", (long long)json_integer_value(
		    json_object_get(run, "durationMs")), code == 127 ?
		    " (exit 127: the hook's command was not found)" : "");
	}
}

/* The event's hooks ended: the executor hears what they decided. */
static void
session_hook_done(void *arg, const struct hooks_decision *d)
{
	struct session_hook_run *r = arg;
	struct session *s = r->s;
	struct session_hook *sh = s->hook;
	struct exec_tool *t = r->t;
	struct exec_hooks_done done = { 0 };

	session_hook_unlink(sh, r);
	free(r);
	session_hook_log(s->id, t, d);
	if (t == NULL) {
		if (d->context != NULL)
			log_hook(LOG_LEVEL_INFO, s->id, NULL, NULL,
			    "SessionStart", "additionalContext: %s", d->context);
		session_hook_release(s);
		session_hook_ops->decided(s);
		return;
	}
	done.name = session_hook_tool_name(t);
	done.decision = d->perm == HOOKS_PERM_ALLOW ? EXEC_HOOK_ALLOW :
	    d->perm == HOOKS_PERM_ASK ? EXEC_HOOK_ASK :
	    d->perm == HOOKS_PERM_DENY ? EXEC_HOOK_DENY : EXEC_HOOK_NONE;
	done.reason = d->reason;
	done.updated_input = d->updated_input;
	done.context = d->context;
	done.blocked = d->blocked;
	done.updated_output = d->updated_output;
	done.runs = d->runs;
	done.stop = d->stop;
	done.stop_reason = d->stop_reason;
	exec_hooks_done(t, &done);
	session_hook_ops->decided(s);
}

/* SessionStart is done: the tools it held go on to their own hooks. */
static void
session_hook_release(struct session *s)
{
	struct session_hook *sh = s->hook;
	static const struct exec_hooks_done none = { 0 };
	struct exec_tool *t;
	size_t i;

	/* No tool is held from here; one cancelled meanwhile is NULL. */
	sh->starting = false;
	for (i = 0; i < sh->nheld; i++) {
		if ((t = sh->held[i]) == NULL)
			continue;
		sh->held[i] = NULL;
		if (!session_hook_start(s, t, HOOKS_PRE_TOOL_USE, false))
			exec_hooks_done(t, &none);
	}
	free(sh->held);
	sh->held = NULL;
	sh->nheld = 0;
}

/* EXEC_HOOKS_CANCEL: the tool's hooks are killed, their word unheard. */
void
session_hook_cancel(struct session *s, struct exec_tool *t)
{
	struct session_hook *sh = s->hook;
	struct session_hook_run *r;
	size_t i;

	if (sh == NULL)
		return;
	for (i = 0; i < sh->nheld; i++)
		if (sh->held[i] == t)
			sh->held[i] = NULL;
	for (r = sh->runs; r != NULL; r = r->next)
		if (r->t == t)
			break;
	if (r == NULL)
		return;
	session_hook_unlink(sh, r);
	log_hook(LOG_LEVEL_INFO, s->id, exec_tool_id(t), exec_tool_name(t),
	    hooks_event_name(r->event), "killed with the tool's slot");
	metrics_hook("killed");
	hooks_run_cancel(r->run);
	free(r);
}

/*
 * CLAUDE_ENV_FILE: the session's shell env file where it has one; else a
 * file of its own that its bash sources before each command (the
 * daemon's --shell-env-file first, from inside it).
 */
static void
session_hook_env_file(struct session *s)
{
	struct session_hook *sh = s->hook;
	const char *daemon_file = session_shell_env_file(s);
	char *path;
	FILE *f;
	int fd;

	if (s->shell.env_file != NULL)
		return;
	xasprintf(&path, "%s/stexec-env-%s-XXXXXX", session_hook_dir != NULL ?
	    session_hook_dir : "/tmp", s->id);
	if ((fd = mkstemp(path)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "no CLAUDE_ENV_FILE "
		    "for SessionStart hooks: %s", strerror(errno));
		if (fd != -1) {
			close(fd);
			unlink(path);
		}
		free(path);
		return;
	}
	if (daemon_file != NULL)
		fprintf(f, ". '%s'\n", daemon_file);
	fclose(f);
	if (s->user != NULL && s->user->error == NULL &&
	    chown(path, s->user->uid, s->user->gid) == -1)
		log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "cannot give %s to "
		    "uid %u: %s", path, (unsigned)s->user->uid, strerror(errno));
	sh->env_file = path;
	s->shell.env_file = xstrdup(path);
}

void
session_hook_attach(struct session *s, const json_t *own, bool start)
{
	struct session_hook *sh;
	struct hooks *all;
	json_t *wrap;
	char err[1024];

	if (own != NULL && json_is_null(own))
		own = NULL;
	if (session_hook_operator == NULL && own == NULL)
		return;
	all = hooks_new();
	if (session_hook_operator != NULL)
		hooks_merge(all, session_hook_operator, err, sizeof err);
	if (own != NULL) {
		/* Checked by createSession; a journal's could have gone bad. */
		wrap = json_pack("{s:O}", "hooks", own);
		if (hooks_add_json(all, wrap, err, sizeof err) == -1)
			log_about(LOG_LEVEL_WARN, s->id, NULL, NULL, "its own "
			    "hooks are dropped: %s", err);
		json_decref(wrap);
	}
	sh = s->hook = xcalloc(1, sizeof *sh);
	sh->hooks = all;
	sh->own = own != NULL ? json_deep_copy(own) : NULL;
	if (!start && s->shell.env_file != NULL) {
		char *mine;

		/* Made again: the env file made for it is still its own. */
		xasprintf(&mine, "/stexec-env-%s-", s->id);
		if (strstr(s->shell.env_file, mine) != NULL)
			sh->env_file = xstrdup(s->shell.env_file);
		free(mine);
	}
	if (start && hooks_count(all, HOOKS_SESSION_START) > 0) {
		session_hook_env_file(s);
		sh->starting = session_hook_start(s, NULL, HOOKS_SESSION_START,
		    false);
	}
}

const json_t *
session_hook_own(const struct session *s)
{
	return s->hook != NULL ? s->hook->own : NULL;
}

/* SessionEnd: nothing waits for it; its lines name the session. */
void
session_hook_end(struct session *s)
{
	const struct hooks_handler *h[HOOKS_MAX_HANDLERS];
	struct hooks_subject subj = { .name = "other", .root = s->root };
	struct hooks_run_spec spec = { 0 };
	struct session_hook_end *end;
	json_t *ev;
	size_t n;

	if (s->hook == NULL || (n = hooks_select(s->hook->hooks,
	    HOOKS_SESSION_END, &subj, h, nitems(h))) == 0)
		return;
	ev = session_hook_event(s, NULL, HOOKS_SESSION_END, NULL, NULL);
	spec.event = HOOKS_SESSION_END;
	spec.input = ev;
	spec.cwd = exec_cwd(s->ex);
	spec.envp = session_hook_ops->env(s);
	spec.project_dir = s->root;
	spec.timeout_ms = session_hook_timeout_ms;
	spec.user = s->user;
	end = xcalloc(1, sizeof *end);
	snprintf(end->id, sizeof end->id, "%s", s->id);
	spec.arg_free = free;
	hooks_run_start(h, n, &spec, session_hook_end_done, end);
	json_decref(ev);
}

static void
session_hook_end_done(void *arg, const struct hooks_decision *d)
{
	struct session_hook_end *end = arg;

	session_hook_log(end->id, NULL, d);
	free(end);
}

/* The session goes: what still runs is killed, its env file removed. */
void
session_hook_free(struct session *s)
{
	struct session_hook *sh = s->hook;
	struct session_hook_run *r;

	if (sh == NULL)
		return;
	while ((r = sh->runs) != NULL) {
		sh->runs = r->next;
		hooks_run_cancel(r->run);
		free(r);
	}
	if (sh->env_file != NULL) {
		unlink(sh->env_file);
		free(sh->env_file);
	}
	free(sh->held);
	hooks_free(sh->hooks);
	json_decref(sh->own);
	free(sh);
	s->hook = NULL;
}
