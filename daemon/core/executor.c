/*
 * The executor core: scheduling (S3, S4), in-order delivery (S5), progress
 * (S6), the sibling cascade (S7), aborts (S8, S9), discard (S11), drain
 * (S12), permissions (S13), context modifiers (S14) and the state reports
 * (S15) of one session, as a pure state machine. See executor.h.
 */
#include "core/executor.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "buf.h"
#include "core/content.h"
#include "idmap.h"
#include "jsonrpc.h"
#include "stexec/protocol.h"
#include "utf8.h"
#include "util.h"

enum exec_reason {
	REASON_OK,
	REASON_EXIT,
	REASON_SIGNAL,
	REASON_TIMEOUT,
	REASON_UNKNOWN_TOOL,
	REASON_INVALID_INPUT,
	REASON_SIBLING_ERROR,
	REASON_INTERRUPTED,
	REASON_PERMISSION_DENIED,
	REASON_SPAWN_FAILED,
	REASON_MEMORY_LIMIT,   /* extension */
	REASON_PROCESS_LIMIT,  /* extension */
	REASON_DAEMON_RESTARTED, /* extension */
	REASON_BACKGROUND,     /* extension: became a job */
	REASON_ERROR,          /* extension: a tool without a process said
	                          isError */
};

static const char *exec_reason_names[] = {
	"ok", "exit", "signal", "timeout", "unknown_tool", "invalid_input",
	"sibling_error", "interrupted", "permission_denied", "spawn_failed",
	"memory_limit", "process_limit", "daemon_restarted", "background",
	"error",
};

enum exec_abort {
	ABORT_NONE,
	ABORT_INTERRUPT,
	ABORT_CANCEL,
};

struct exec_tool {
	struct exec *ex;
	uint64_t turn;
	char *id;
	char *name;
	struct tooldef *def;  /* NULL: unknown tool */
	json_t *input;
	char **argv;          /* NULL when the input is invalid */
	char *invalid;        /* InputValidationError detail */
	int64_t timeout_ms;
	bool safe;
	bool cancel;          /* interruptBehavior "cancel" */

	enum exec_status status;
	bool running;         /* has a process: spawned, exit not yet seen */
	bool discarded;       /* its turn was discarded or the session closed */
	/* Why we killed it: its result is this, not the process's. */
	enum exec_reason killed_for;
	bool killed;

	json_t *context;      /* context modifiers seen, in order (S14) */
	char *note;           /* a line after its output: its cwd was reset */
	json_t *warnings;     /* meta.warnings */
	/*
	 * The tool_result params, once completed: as text (exec_result_write)
	 * until something needs the object (exec_result), then the object.
	 */
	struct buf result_text;
	json_t *result;
	const char *result_reason; /* meta.reason and durationMs, for the */
	int64_t result_ms;         /* tool_result's effect */
	json_t *blocks;       /* content blocks given for its result (fd 3's
	                         {"content": [...]}, or exec_finish) */
	json_t *meta_extra;   /* members exec_finish adds to meta */
	struct buf early;     /* stdin written before its start */
	bool early_eof;       /* ...and closed after it */
	size_t early_handed;  /* bytes of it EXEC_SPAWN handed over */
	void *handle;
	enum exec_hook_phase hook_phase; /* while EXEC_HOOKS */
	json_t *hooks;        /* meta.hooks: {runs, context?, stop?...} */
	char *ask_reason;     /* a PreToolUse "ask": the permission_request's */
	struct buf remind;    /* hooks' lines for the model, after the result */
	enum exec_reason post_why; /* POST: what exec_complete was given */
	bool post_error;
	uint64_t stamps[EXEC_NSTAMPS]; /* the I/O layer's, read by nobody here */

	/* The in-progress list of the current turn (S15), or the orphans. */
	TAILQ_ENTRY(exec_tool) entry;
};

struct exec_turn {
	uint64_t number;
	struct exec_tool **tools; /* in add order */
	size_t n, cap;
	size_t sched;    /* tools before this are not queued (S4 scan start) */
	size_t deliver;  /* first undelivered tool (S5) */
	enum exec_abort abort;
	char *errored;   /* DESC of the tool that errored (S7), or NULL */
	void **drains;   /* cookies of pending drain requests */
	size_t ndrains;
	struct idmap ids;
};

struct exec {
	struct exec_config cfg;
	const char *interrupt_message;
	char *cwd;
	json_t *env;          /* shared with whoever gave it, until changed */
	bool env_owned;
	unsigned env_gen;
	unsigned ctx_gen;     /* changes with cwd or env (exec_context_gen) */
	struct exec_turn turn;
	bool closed;

	/* Counted as executing for S3, including orphans of discarded turns. */
	unsigned n_exec, n_exec_unsafe, n_exec_block;
	unsigned n_running; /* tools with a process, for exec_busy */
	unsigned n_queued;  /* current-turn tools QUEUED, for exec_queued */
	uint64_t add_stamp; /* what new tools take as EXEC_STAMP_ADDED */
	TAILQ_HEAD(, exec_tool) progress; /* S15 inProgress, in start order */
	TAILQ_HEAD(, exec_tool) orphans;  /* still running, their turn is gone */

	bool state_dirty;
	bool last_interruptible;
	json_t *restore_flags; /* exec_restore_flags, until exec_restore */
};

static struct exec_tool *exec_add_tool(struct exec *, const char *,
		    const char *, struct tooldef *, const json_t *);
static void	exec_notify_status(struct exec_tool *, const char *);
static void	exec_turn_init(struct exec *, uint64_t);
static void	exec_turn_end(struct exec *, const char *, int);
static void	exec_tool_free(struct exec_tool *);
static void	exec_set_status(struct exec_tool *, enum exec_status);
static void	exec_emit(struct exec *, const struct exec_effect *);
static void	exec_notify(struct exec *, const char *, json_t *);
static void	exec_notify_text(struct exec *, const char *, struct buf *);
static json_t	*exec_tool_params(const struct exec_tool *);
static bool	exec_can_start(const struct exec *, const struct exec_tool *);
static void	exec_schedule(struct exec *);
static void	exec_start(struct exec_tool *);
static void	exec_spawn(struct exec_tool *);
static struct exec_tool *exec_turn_append(struct exec *, const char *,
		    const char *, const json_t *);
static void	exec_enter(struct exec_tool *);
static void	exec_leave(struct exec_tool *);
static void	exec_kill(struct exec_tool *, enum exec_reason);
static void	exec_complete(struct exec_tool *, enum exec_reason, char *,
		    const struct exec_exit *);
static void	exec_complete_synthetic(struct exec_tool *, enum exec_reason);
static enum exec_reason exec_exit_reason(const struct exec_exit *);
static char	*exec_synthetic_content(struct exec *, enum exec_reason);
static void	exec_add_output(struct buf *, const struct exec_exit *);
static void	exec_exit_content(struct buf *, const struct exec_tool *,
		    const struct exec_exit *, enum exec_reason);
static json_t	*exec_content(struct exec_tool *, json_t *);
static bool	exec_blocks_over(const struct exec_tool *, const json_t *);
static void	exec_deliver(struct exec *);
static void	exec_cascade(struct exec_tool *);
static char	*exec_describe(const struct exec_tool *);
static void	exec_early_dropped(struct exec_tool *, const struct exec_exit *);
static void	exec_apply_context(struct exec *, const json_t *);
static void	exec_check_drain(struct exec *);
static void	exec_flush_state(struct exec *);
static void	exec_restore_running(struct exec_tool *, int);
static void	exec_restore_apply(struct exec *);
static void	exec_after_event(struct exec *);
static void	exec_vet_cwd(struct exec *, struct exec_tool *, bool);
static void	exec_pre(struct exec_tool *);
static void	exec_ask(struct exec_tool *, bool);
static void	exec_settle(struct exec_tool *, enum exec_reason, bool);
static bool	exec_hooks_cancel(struct exec_tool *);
static void	exec_hooks_note(struct exec_tool *,
    const struct exec_hooks_done *);
static void	exec_hooks_post(struct exec_tool *,
    const struct exec_hooks_done *);
static void	exec_hooks_input(struct exec_tool *, const json_t *);
static void	exec_hooks_remind(struct exec_tool *);

struct exec *
exec_new(const struct exec_config *cfg, const char *cwd, const json_t *env)
{
	struct exec *ex = xcalloc(1, sizeof *ex);

	ex->cfg = *cfg;
	TAILQ_INIT(&ex->progress);
	TAILQ_INIT(&ex->orphans);
	if (ex->cfg.max_parallel == 0)
		ex->cfg.max_parallel = EXEC_MAX_PARALLEL_DEFAULT;
	ex->interrupt_message = cfg->interrupt_message != NULL ?
	    cfg->interrupt_message : EXEC_INTERRUPT_MESSAGE;
	ex->cwd = xstrdup(cwd != NULL ? cwd : "/");
	/* Sessions share the daemon's environment until one changes it. */
	ex->env = env != NULL ? json_incref((json_t *)env) : json_object();
	exec_turn_init(ex, 1);
	return ex;
}

void
exec_free(struct exec *ex)
{
	size_t i;

	if (ex == NULL)
		return;
	if (ex->n_running != 0)
		fatal("exec_free with %u tools still running", ex->n_running);
	for (i = 0; i < ex->turn.n; i++)
		exec_tool_free(ex->turn.tools[i]);
	free(ex->turn.tools);
	free(ex->turn.errored);
	free(ex->turn.drains);
	json_decref(ex->restore_flags);
	idmap_free(&ex->turn.ids);
	free(ex->cwd);
	json_decref(ex->env);
	free(ex);
}

static void
exec_turn_init(struct exec *ex, uint64_t number)
{
	memset(&ex->turn, 0, sizeof ex->turn);
	ex->turn.number = number;
}

/* Every status change but a new tool's, so that n_queued stays right. */
static void
exec_set_status(struct exec_tool *t, enum exec_status status)
{
	if (t->status == EXEC_QUEUED)
		t->ex->n_queued--;
	if (status == EXEC_QUEUED)
		t->ex->n_queued++;
	t->status = status;
}

static void
exec_tool_free(struct exec_tool *t)
{
	if (t->def != NULL)
		tooldef_unref(t->def);
	tooldef_argv_free(t->argv);
	json_decref(t->input);
	json_decref(t->context);
	free(t->note);
	json_decref(t->warnings);
	buf_free(&t->result_text);
	json_decref(t->result);
	json_decref(t->blocks);
	json_decref(t->meta_extra);
	json_decref(t->hooks);
	free(t->ask_reason);
	buf_free(&t->remind);
	buf_free(&t->early);
	free(t->invalid);
	free(t->id);
	free(t->name);
	free(t);
}

static void
exec_emit(struct exec *ex, const struct exec_effect *e)
{
	ex->cfg.effect(ex->cfg.arg, e);
}

/* Send a notification; steals params. */
static void
exec_notify(struct exec *ex, const char *method, json_t *params)
{
	struct exec_effect e = { .kind = EXEC_NOTIFY };

	e.method = method;
	e.params = params;
	exec_emit(ex, &e);
	json_decref(params);
}

/*
 * The objects of every tool's notifications are built key by key, not
 * with json_pack: its format is parsed at each call, and these are built
 * several times a tool (a third of the daemon's JSON cost per tool).
 * The keys are ASCII literals: the _nocheck setters skip their UTF-8 check.
 */
#define exec_set(o, key, v) json_object_set_new_nocheck(o, key, v)

/* The params every tool notification starts with. */
static json_t *
exec_tool_params(const struct exec_tool *t)
{
	json_t *p = json_object();

	exec_set(p, "turn", json_integer((json_int_t)t->turn));
	exec_set(p, "toolUseId", json_string(t->id));
	return p;
}

/* Send a notification whose params are already encoded; frees them. */
static void
exec_notify_text(struct exec *ex, const char *method, struct buf *params)
{
	struct exec_effect e = { .kind = EXEC_NOTIFY };

	e.method = method;
	e.params_text = params->data;
	e.params_len = params->len;
	exec_emit(ex, &e);
	buf_free(params);
}

/* {"turn":N,"toolUseId":ID, as exec_tool_params encodes, opened as text. */
static void
exec_params_open(struct buf *b, const struct exec_tool *t)
{
	buf_addstr(b, "{\"turn\":");
	buf_add_int(b, (long long)t->turn);
	buf_addstr(b, ",\"toolUseId\":");
	jsonrpc_add_string_repaired(b, t->id, strlen(t->id));
}

/*
 * {"turn":N,"toolUseId":ID,"status":S}: the same bytes exec_tool_params
 * and a "status" member would encode to, at a fraction of the cost (two
 * of these a tool, at least).
 */
static void
exec_notify_status(struct exec_tool *t, const char *status)
{
	struct buf p = { 0 };

	/* One allocation, not one per doubling: the size is known. */
	buf_grow(&p, 64 + 6 * strlen(t->id));
	exec_params_open(&p, t);
	buf_addstr(&p, ",\"status\":\"");
	buf_addstr(&p, status);
	buf_addstr(&p, "\"}");
	exec_notify_text(t->ex, "tool_status", &p);
}

int
exec_add(struct exec *ex, const char *id, const char *name,
    struct tooldef *def, const json_t *input, struct exec_added *out)
{
	uint64_t number = ex->turn.number;
	struct exec_tool *t;
	bool safe;

	if (idmap_get(&ex->turn.ids, id) != NULL)
		return STEXEC_ERR_DUPLICATE_TOOL_USE;
	t = exec_add_tool(ex, id, name, def, input);
	safe = t->safe;
	exec_after_event(ex);
	if (out != NULL) {
		out->turn = number;
		out->safe = safe;
		/* A pending drain may have ended the turn, and freed t. */
		if (ex->turn.number != number || ex->closed) {
			out->tool = NULL;
			out->status = EXEC_DELIVERED;
		} else {
			out->tool = t;
			out->status = t->status;
		}
	}
	return 0;
}

/* A new queued tool at the end of the current turn. */
static struct exec_tool *
exec_turn_append(struct exec *ex, const char *id, const char *name,
    const json_t *input)
{
	struct exec_turn *turn = &ex->turn;
	struct exec_tool *t = xcalloc(1, sizeof *t);

	t->ex = ex;
	t->turn = turn->number;
	t->id = xstrdup(id);
	t->name = xstrdup(name);
	/* Kept by reference, not copied: nobody changes an input (exec_add). */
	t->input = input != NULL ? json_incref((json_t *)input) :
	    json_object();
	t->warnings = json_array();
	t->status = EXEC_QUEUED;
	t->stamps[EXEC_STAMP_ADDED] = ex->add_stamp;
	ex->n_queued++;
	if (turn->n == turn->cap) {
		turn->cap = turn->cap ? turn->cap * 2 : 8;
		turn->tools = xreallocarray(turn->tools, turn->cap,
		    sizeof *turn->tools);
	}
	turn->tools[turn->n++] = t;
	idmap_put(&turn->ids, t->id, t);
	return t;
}

/* Track a new tool and decide what can be decided at add (S1, S2). */
static struct exec_tool *
exec_add_tool(struct exec *ex, const char *id, const char *name,
    struct tooldef *def, const json_t *input)
{
	struct exec_turn *turn = &ex->turn;
	struct exec_tool *t;
	char err[512];

	t = exec_turn_append(ex, id, name, input);

	if (def == NULL) {
		/* S1: completes at once, blocks nobody, keeps its place. */
		exec_complete_synthetic(t, REASON_UNKNOWN_TOOL);
		return t;
	}

	/* S2: safety is decided here, once; invalid input means unsafe. */
	t->def = tooldef_ref(def);
	t->cancel = tooldef_interrupt(def) == TOOLDEF_CANCEL;
	if (!tooldef_check_input(def, t->input, err, sizeof err))
		t->invalid = xstrdup(err);
	else if ((t->argv = tooldef_argv(def, t->input, err, sizeof err)) ==
	    NULL)
		t->invalid = xstrdup(err);
	else {
		t->safe = tooldef_is_safe(def, t->input);
		t->timeout_ms = tooldef_timeout_ms(def, t->input);
	}

	/* S7, S8, S9: a turn that errored or was aborted starts nothing new. */
	if (turn->errored != NULL)
		exec_complete_synthetic(t, REASON_SIBLING_ERROR);
	else if (turn->abort != ABORT_NONE)
		exec_complete_synthetic(t, REASON_INTERRUPTED);
	return t;
}

/* S3. */
static bool
exec_can_start(const struct exec *ex, const struct exec_tool *t)
{
	if (ex->n_exec == 0)
		return true;
	return t->safe && ex->n_exec_unsafe == 0 &&
	    ex->n_exec < ex->cfg.max_parallel;
}

/*
 * S4. A safe tool that may not start means something unsafe executes or
 * maxParallel is reached; then no later tool may start either, so the scan
 * stops at the first queued tool that may not start. Tools before `sched`
 * are never queued again, so the whole scan is amortized O(1) per tool.
 */
static void
exec_schedule(struct exec *ex)
{
	struct exec_turn *turn = &ex->turn;
	struct exec_tool *t;

	while (turn->sched < turn->n) {
		t = turn->tools[turn->sched];
		if (t->status != EXEC_QUEUED) {
			turn->sched++;
			continue;
		}
		if (!exec_can_start(ex, t))
			break;
		turn->sched++;
		exec_start(t);
	}
}

/* Its time has come: S2 invalid input, S13 permission, or a process. */
static void
exec_start(struct exec_tool *t)
{
	json_t *p;

	if (t->invalid != NULL) {
		exec_complete(t, REASON_INVALID_INPUT, NULL, NULL);
		return;
	}
	/* The slot is taken first: hooks run inside it. */
	exec_enter(t);
	if (t->ex->cfg.hooks != NULL && t->ex->cfg.hooks(t->ex->cfg.arg, t,
	    EXEC_HOOK_PRE, NULL)) {
		exec_set_status(t, EXEC_HOOKS);
		t->hook_phase = EXEC_HOOK_PRE;
		return;
	}
	exec_pre(t);
	(void)p;
}

/* After PreToolUse (or none): S13's permission, else the call. */
static void
exec_pre(struct exec_tool *t)
{
	if (!tooldef_requires_permission(t->def)) {
		exec_spawn(t);
		return;
	}
	exec_ask(t, true);
}

/* S13: PermissionRequest hooks may answer; else the client is asked. */
static void
exec_ask(struct exec_tool *t, bool hooks)
{
	json_t *p;

	if (hooks && t->ex->cfg.hooks != NULL && t->ex->cfg.hooks(
	    t->ex->cfg.arg, t, EXEC_HOOK_PERMISSION, NULL)) {
		exec_set_status(t, EXEC_HOOKS);
		t->hook_phase = EXEC_HOOK_PERMISSION;
		return;
	}
	exec_set_status(t, EXEC_WAITING_PERMISSION);
	p = exec_tool_params(t);
	json_object_set_new(p, "name", json_string(t->name));
	json_object_set(p, "input", t->input);
	if (t->ask_reason != NULL)
		json_object_set_new(p, "reason", json_string(t->ask_reason));
	exec_notify(t->ex, "permission_request", p);
}

/* The tool counts as executing from here (S3, S13, S15). */
static void
exec_enter(struct exec_tool *t)
{
	struct exec *ex = t->ex;

	ex->n_exec++;
	if (!t->safe)
		ex->n_exec_unsafe++;
	if (!t->cancel)
		ex->n_exec_block++;
	TAILQ_INSERT_TAIL(&ex->progress, t, entry);
	ex->state_dirty = true;
}

/* The tool no longer counts as executing. */
static void
exec_leave(struct exec_tool *t)
{
	struct exec *ex = t->ex;

	ex->n_exec--;
	if (!t->safe)
		ex->n_exec_unsafe--;
	if (!t->cancel)
		ex->n_exec_block--;
	if (t->discarded)
		TAILQ_REMOVE(&ex->orphans, t, entry);
	else {
		TAILQ_REMOVE(&ex->progress, t, entry);
		ex->state_dirty = true;
	}
}

static void
exec_spawn(struct exec_tool *t)
{
	struct tooldef_job_call job;
	struct exec_spawn spawn;
	struct exec_effect e = { .kind = EXEC_SPAWN, .spawn = &spawn };

	/* A cwd removed since it became the session's must not fail this. */
	exec_vet_cwd(t->ex, t, false);
	spawn = (struct exec_spawn){
		.argv = t->argv,
		.input = t->input,
		.cwd = t->ex->cwd,
		.env = tooldef_env(t->def),
		.timeout_ms = t->timeout_ms,
		.max_output = tooldef_max_result_bytes(t->def),
		.stream_output = tooldef_stream_output(t->def),
		.name = t->name,
		.safe = t->safe,
		.sandbox = tooldef_sandbox(t->def),
		.limits = tooldef_limits(t->def),
		.job = &job,
		.stdin_early = t->early.data,
		.stdin_early_len = t->early.len,
		.stdin_early_eof = t->early_eof,
	};

	tooldef_job_call(tooldef_job(t->def), t->input, &job);

	exec_set_status(t, EXEC_EXECUTING);
	t->running = true;
	t->ex->n_running++;
	e.tool = t;
	exec_emit(t->ex, &e);
	t->early_handed = t->early.len;
	buf_free(&t->early);
	exec_notify_status(t, "executing");
}

/* Kill a running tool; its result is `why` once its processes are dead. */
static void
exec_kill(struct exec_tool *t, enum exec_reason why)
{
	struct exec_effect e = { .kind = EXEC_KILL };

	if (t->killed)
		return;
	t->killed = true;
	t->killed_for = why;
	e.tool = t;
	exec_emit(t->ex, &e);
}

static char *
exec_synthetic_content(struct exec *ex, enum exec_reason why)
{
	char *s;

	switch (why) {
	case REASON_INTERRUPTED:
		return xstrdup(ex->interrupt_message);
	case REASON_SIBLING_ERROR:
		xasprintf(&s, "<tool_use_error>Cancelled: parallel tool call "
		    "%s errored</tool_use_error>", ex->turn.errored);
		return s;
	case REASON_DAEMON_RESTARTED:
		return xstrdup("<tool_use_error>Error: the tool executor "
		    "restarted while this tool ran or waited; its result is "
		    "lost and its processes were killed</tool_use_error>");
	default:
		fatal("no synthetic content for reason %d", why);
	}
}

/* Complete a tool that will not (or did not get to) run. */
static void
exec_complete_synthetic(struct exec_tool *t, enum exec_reason why)
{
	char *content;

	if (why == REASON_UNKNOWN_TOOL)
		xasprintf(&content, "<tool_use_error>Error: No such tool "
		    "available: %s</tool_use_error>", t->name);
	else
		content = exec_synthetic_content(t->ex, why);
	exec_complete(t, why, content, NULL);
}

/* S17: errors usually sit at the end, so a long output keeps both ends. */
static void
exec_add_output(struct buf *b, const struct exec_exit *x)
{
	const struct output *o = &x->output;

	utf8_repair(b, o->head, o->head_len);
	if (o->total <= o->head_len)
		return;
	if (o->path != NULL)
		buf_printf(b, "\n\n[... output truncated: %llu bytes in "
		    "total, the whole output is in %s; the first %zu and the "
		    "last %zu bytes are shown ...]\n\n",
		    (unsigned long long)o->total, o->path, o->head_len,
		    o->tail_len);
	else
		buf_printf(b, "\n\n[... output truncated: %llu bytes in "
		    "total, and the whole output could not be saved (%s); the "
		    "first %zu and the last %zu bytes are shown ...]\n\n",
		    (unsigned long long)o->total, x->output_error != NULL ?
		    x->output_error : "no output directory", o->head_len,
		    o->tail_len);
	utf8_repair(b, o->tail, o->tail_len);
}

/* The content of a tool that ran: its output and, on error, why. */
static void
exec_exit_content(struct buf *b, const struct exec_tool *t,
    const struct exec_exit *x, enum exec_reason why)
{
	const char *sig;

	if (why == REASON_SPAWN_FAILED) {
		buf_printf(b, "<tool_use_error>Error: %s</tool_use_error>",
		    x->error != NULL ? x->error : "cannot start the tool");
		return;
	}
	exec_add_output(b, x);
	if (t->note != NULL) {
		if (b->len > 0 && b->data[b->len - 1] != '\n')
			buf_addstr(b, "\n");
		buf_addstr(b, t->note);
	}
	if (why == REASON_OK || why == REASON_ERROR)
		return;
	if (b->len > 0 && b->data[b->len - 1] != '\n')
		buf_addstr(b, "\n");
	switch (why) {
	case REASON_EXIT:
		buf_printf(b, "Exit code %d", x->status);
		break;
	case REASON_SIGNAL:
		sig = sigabbrev_np(x->signal);
		buf_printf(b, "Killed by signal %d (SIG%s)", x->signal,
		    sig != NULL ? sig : "?");
		break;
	case REASON_TIMEOUT:
		buf_printf(b, "Error: timed out after %lld ms",
		    (long long)t->timeout_ms);
		break;
	case REASON_MEMORY_LIMIT:
		buf_printf(b, "Error: killed: over its memory limit of %llu "
		    "bytes", (unsigned long long)x->limit);
		break;
	case REASON_PROCESS_LIMIT:
		buf_printf(b, "Error: killed: over its limit of %llu "
		    "processes", (unsigned long long)x->limit);
		break;
	default:
		fatal("no exit content for reason %d", why);
	}
}

/*
 * The params of a tool_result, written as text (encoding a jansson object
 * built for it cost a fifth of the daemon's instructions per tool): the
 * same bytes the object would encode to. The content is given as bytes
 * (valid UTF-8) or, with content NULL, left null for exec_complete to set.
 * Members only an object can hold (network, meta_extra, blocks) are set
 * by exec_complete on the object.
 */
static void
exec_result_write(struct buf *out, const struct exec_tool *t,
    enum exec_reason why, bool is_error, const char *content, size_t len,
    const struct exec_exit *x)
{
	size_t i, idlen = strlen(t->id);

	buf_grow(out, 320 + 12 * idlen + (content != NULL ? len + len / 8 :
	    0));
	exec_params_open(out, t);
	buf_addstr(out, ",\"result\":{\"type\":\"tool_result\","
	    "\"tool_use_id\":");
	jsonrpc_add_string_repaired(out, t->id, idlen);
	buf_addstr(out, ",\"content\":");
	if (content != NULL)
		jsonrpc_add_string_repaired(out, content, len);
	else
		buf_addstr(out, "null");
	buf_addstr(out, is_error ? ",\"is_error\":true},\"meta\":{\"reason\":\"" :
	    ",\"is_error\":false},\"meta\":{\"reason\":\"");
	buf_addstr(out, exec_reason_names[why]);
	buf_addstr(out, "\",\"exitCode\":");
	if (x != NULL && x->end == EXEC_END_EXITED)
		buf_add_int(out, x->status);
	else
		buf_addstr(out, "null");
	buf_addstr(out, ",\"signal\":");
	if (x != NULL && x->signal != 0)
		buf_add_int(out, x->signal);
	else
		buf_addstr(out, "null");
	buf_addstr(out, ",\"durationMs\":");
	buf_add_int(out, x != NULL ? (long long)x->duration_ms : 0);
	buf_addstr(out, x != NULL && x->output.total > x->output.head_len ?
	    ",\"truncated\":true,\"fullOutputPath\":" :
	    ",\"truncated\":false,\"fullOutputPath\":");
	if (x != NULL && x->output.path != NULL)
		jsonrpc_add_string_repaired(out, x->output.path,
		    strlen(x->output.path));
	else
		buf_addstr(out, "null");
	/* Every warning is a string (json_string and json_sprintf's). */
	buf_addstr(out, ",\"warnings\":[");
	for (i = 0; i < json_array_size(t->warnings); i++) {
		const json_t *w = json_array_get(t->warnings, i);

		if (i > 0)
			buf_addstr(out, ",");
		jsonrpc_add_string_repaired(out, json_string_value(w),
		    json_string_length(w));
	}
	buf_addstr(out, "]");
	/* Extensions: only what was measured. */
	if (x != NULL && x->peak_measured) {
		buf_addstr(out, ",\"peakMemoryBytes\":");
		buf_add_int(out, (long long)x->peak_memory);
	}
	if (x != NULL && x->cpu_measured) {
		buf_addstr(out, ",\"cpuMs\":");
		buf_add_int(out, (long long)x->cpu_ms);
	}
	buf_addstr(out, "}}");
}

/*
 * The result as an object, for whatever changes it or reads into it: made
 * from the text the first time. The text is ours (every string went
 * through jsonrpc_add_string_repaired), so it always parses.
 */
static json_t *
exec_result(struct exec_tool *t)
{
	json_error_t err;

	if (t->result != NULL || t->result_text.data == NULL)
		return t->result;
	t->result = json_loadb(t->result_text.data, t->result_text.len,
	    JSON_ALLOW_NUL, &err);
	if (t->result == NULL)
		fatal("tool %s: its own tool_result does not parse: %s",
		    t->id, err.text);
	buf_free(&t->result_text);
	return t->result;
}

const json_t *
exec_tool_result(struct exec_tool *t)
{
	return exec_result(t);
}

/*
 * The tool is done: build its result (content given as a string, which is
 * stolen, or else from the process exit x), hold it for ordering, and
 * report the completion.
 */
static void
exec_complete(struct exec_tool *t, enum exec_reason why, char *content,
    const struct exec_exit *x)
{
	struct exec *ex = t->ex;
	struct buf b = { 0 }, fixed = { 0 };
	const char *text = NULL;
	size_t len = 0;
	json_t *p, *meta, *result;
	bool is_error = why != REASON_OK && why != REASON_BACKGROUND;
	/* PostToolUse(Failure): for a call that ran and was not stopped. */
	bool post = t->status == EXEC_EXECUTING && !t->killed &&
	    !t->discarded && why != REASON_BACKGROUND &&
	    ex->cfg.hooks != NULL;
	bool inline_content;

	exec_hooks_cancel(t);
	if (!post && (t->status == EXEC_WAITING_PERMISSION || t->status ==
	    EXEC_EXECUTING || t->status == EXEC_HOOKS))
		exec_leave(t);
	if (content != NULL)
		buf_addstr(&b, content);
	else if (why == REASON_INVALID_INPUT)
		buf_printf(&b, "<tool_use_error>InputValidationError: %s"
		    "</tool_use_error>", t->invalid);
	else if (x != NULL && why == REASON_OK && t->note == NULL &&
	    x->output.total <= x->output.head_len) {
		/* The output alone: no copy of it. */
		text = x->output.head;
		len = x->output.head_len;
	} else
		exec_exit_content(&b, t, x, why);
	free(content);
	if (text == NULL) {
		text = b.data != NULL ? b.data : "";
		len = b.len;
	}
	/* S17: output is never lost silently, and meta says so too. */
	if (x != NULL && x->output.total > x->output.head_len &&
	    x->output.path == NULL)
		json_array_append_new(t->warnings, json_sprintf("the whole "
		    "output (%llu bytes) was not kept: %s", (unsigned long long)
		    x->output.total, x->output_error != NULL ? x->output_error :
		    "no output directory"));
	exec_early_dropped(t, x);
	/* Each piece is valid; should one slip, S10 still needs a result. */
	if (!utf8_valid(text, len)) {
		utf8_repair(&fixed, text, len);
		buf_free(&b);
		b = fixed;
		text = b.data;
		len = b.len;
	}
	/*
	 * A long content stays out of the text: the session encodes such a
	 * result in slices (an object's string), not in one pass here.
	 */
	inline_content = len <= EXEC_RESULT_TEXT_MAX && t->blocks == NULL;
	exec_result_write(&t->result_text, t, why, is_error, inline_content ?
	    text : NULL, len, x);
	t->result_reason = exec_reason_names[why];
	t->result_ms = x != NULL ? x->duration_ms : 0;
	if (!inline_content || (x != NULL && x->network != NULL) ||
	    t->meta_extra != NULL) {
		p = exec_result(t);
		result = json_object_get(p, "result");
		meta = json_object_get(p, "meta");
		if (!inline_content)
			/* Output may hold NUL bytes: given with its length. */
			exec_set(result, "content", exec_content(t,
			    json_stringn_nocheck(text, len)));
		if (x != NULL && x->network != NULL)
			json_object_set(meta, "network", x->network);
		if (t->meta_extra != NULL)
			json_object_update(meta, t->meta_extra);
	}
	buf_free(&b);
	if (post && ex->cfg.hooks(ex->cfg.arg, t, EXEC_HOOK_POST, is_error)) {
		/* The result waits in the slot for the hooks' word. */
		exec_set_status(t, EXEC_HOOKS);
		t->hook_phase = EXEC_HOOK_POST;
		t->post_why = why;
		t->post_error = is_error;
		return;
	}
	if (post)
		exec_leave(t);
	exec_settle(t, why, is_error);
}

/* The result stands: completed, held for its turn (S5), S7 checked. */
static void
exec_settle(struct exec_tool *t, enum exec_reason why, bool is_error)
{
	struct exec *ex = t->ex;

	exec_set_status(t, EXEC_COMPLETED);
	exec_hooks_remind(t);
	if (t->hooks != NULL)
		json_object_set(json_object_get(exec_result(t), "meta"),
		    "hooks", t->hooks);
	exec_notify_status(t, "completed");

	if (is_error && t->def != NULL && tooldef_abort_siblings(t->def) &&
	    why != REASON_SIBLING_ERROR && why != REASON_INTERRUPTED &&
	    why != REASON_PERMISSION_DENIED && ex->turn.errored == NULL)
		exec_cascade(t);
}

/* Whether more blocks would take a tool's past what any result may hold. */
static bool
exec_blocks_over(const struct exec_tool *t, const json_t *more)
{
	size_t have = t->blocks != NULL ? content_text_bytes(t->blocks) +
	    content_image_bytes(t->blocks) : 0;

	return have + content_text_bytes(more) + content_image_bytes(more) >
	    tooldef_result_ceiling() || json_array_size(t->blocks) +
	    json_array_size(more) > CONTENT_BLOCKS_MAX;
}

/*
 * The result's content: the text (taken), or with blocks given (a tool's
 * fd 3, a client, an MCP server), the blocks after the text when there is
 * any, so that nothing the tool wrote is lost.
 */
static json_t *
exec_content(struct exec_tool *t, json_t *text)
{
	json_t *blocks;

	if (t->blocks == NULL || t->killed)
		return text;
	if (json_string_length(text) == 0) {
		json_decref(text);
		blocks = t->blocks;
	} else {
		blocks = json_array();
		json_array_append_new(blocks, json_pack("{s:s, s:o}", "type",
		    "text", "text", text));
		json_array_extend(blocks, t->blocks);
		json_decref(t->blocks);
	}
	t->blocks = NULL;
	return blocks;
}

/* S5: deliver every completed result whose predecessors are delivered. */
static void
exec_deliver(struct exec *ex)
{
	struct exec_effect e = { .kind = EXEC_NOTIFY,
	    .method = "tool_result" };
	struct exec_turn *turn = &ex->turn;
	struct exec_tool *t;
	const json_t *meta;

	while (turn->deliver < turn->n) {
		t = turn->tools[turn->deliver];
		if (t->status != EXEC_COMPLETED)
			break;
		t->status = EXEC_DELIVERED;
		turn->deliver++;
		/* The effect names the tool: the I/O layer times delivery. */
		e.tool = t;
		e.params = t->result;
		e.params_text = t->result_text.data;
		e.params_len = t->result_text.len;
		if (t->result != NULL) {
			/* Restored, or changed: it says so itself. */
			meta = json_object_get(t->result, "meta");
			e.reason = json_string_value(json_object_get(meta,
			    "reason"));
			e.duration_ms = json_integer_value(json_object_get(
			    meta, "durationMs"));
		} else {
			e.reason = t->result_reason;
			e.duration_ms = t->result_ms;
		}
		exec_emit(ex, &e);
		json_decref(t->result);
		t->result = NULL;
		buf_free(&t->result_text);
	}
}

/* S7: DESC = name(first 40 characters of command/file_path/pattern). */
static char *
exec_describe(const struct exec_tool *t)
{
	static const char *keys[] = { "command", "file_path", "pattern" };
	const char *s = NULL, *p;
	size_t i, chars;
	char *desc;

	for (i = 0; i < nitems(keys) && s == NULL; i++) {
		s = json_string_value(json_object_get(t->input, keys[i]));
		if (s != NULL && *s == '\0')
			s = NULL;
	}
	if (s == NULL)
		return xstrdup(t->name);
	/* Count characters, not bytes: never cut a UTF-8 sequence. */
	for (p = s, chars = 0; *p != '\0' && chars < 40; chars++) {
		p++;
		while ((*p & 0xc0) == 0x80)
			p++;
	}
	xasprintf(&desc, "%s(%.*s%s)", t->name, (int)(p - s), s,
	    *p != '\0' ? "\xe2\x80\xa6" : "");
	return desc;
}

/* S7: the turn errors; every other unfinished tool is cancelled. */
static void
exec_cascade(struct exec_tool *failed)
{
	struct exec *ex = failed->ex;
	struct exec_turn *turn = &ex->turn;
	struct exec_tool *t;
	size_t i;

	turn->errored = exec_describe(failed);
	for (i = turn->deliver; i < turn->n; i++) {
		t = turn->tools[i];
		if (t == failed)
			continue;
		if (t->status == EXEC_QUEUED ||
		    t->status == EXEC_WAITING_PERMISSION ||
		    (t->status == EXEC_HOOKS && t->hook_phase != EXEC_HOOK_POST))
			exec_complete_synthetic(t, REASON_SIBLING_ERROR);
		else if (t->status == EXEC_EXECUTING && t->cancel)
			exec_kill(t, REASON_SIBLING_ERROR);
		else if (t->status == EXEC_HOOKS && t->cancel)
			exec_hooks_done(t, NULL);
	}
}

void
exec_progress_line(struct exec_tool *t, const char *line, size_t len)
{
	struct exec *ex = t->ex;
	json_t *v, *data = NULL, *ctx, *p;
	struct buf b = { 0 };
	char err[256];

	if (t->discarded || t->status != EXEC_EXECUTING)
		return;
	v = json_loadb(line, len, JSON_DECODE_ANY, NULL);
	if (json_is_object(v) && json_object_size(v) == 1 &&
	    (ctx = json_object_get(v, "context")) != NULL) {
		/* S14: only an unsafe tool may change the session context. */
		if (t->safe)
			json_array_append_new(t->warnings, json_string(
			    "context modifier ignored: a concurrency-safe tool "
			    "cannot change the session context"));
		else if (!json_is_object(ctx))
			json_array_append_new(t->warnings, json_string(
			    "context modifier ignored: \"context\" must be an "
			    "object"));
		else {
			if (t->context == NULL)
				t->context = json_array();
			json_array_append(t->context, ctx);
		}
		json_decref(v);
		return;
	}
	if (json_is_object(v) && json_object_size(v) == 1 &&
	    json_is_array(ctx = json_object_get(v, "content"))) {
		/* Content blocks for the result (doc/design.md §7, T7). */
		if (!content_check(ctx, err, sizeof err))
			json_array_append_new(t->warnings, json_sprintf(
			    "content blocks ignored: %s", err));
		else if (exec_blocks_over(t, ctx))
			json_array_append_new(t->warnings, json_sprintf(
			    "content blocks ignored: with them the result would "
			    "pass the daemon's --max-result-bytes (%zu) or %u "
			    "blocks", tooldef_result_ceiling(),
			    CONTENT_BLOCKS_MAX));
		else {
			if (t->blocks == NULL)
				t->blocks = json_array();
			json_array_extend(t->blocks, ctx);
		}
		json_decref(v);
		return;
	}
	if (json_is_object(v) && json_object_size(v) == 1 &&
	    json_object_get(v, "progress") != NULL)
		data = json_incref(json_object_get(v, "progress"));
	else {
		utf8_repair(&b, line, len);
		data = json_pack("{s:s%}", "text", b.data != NULL ? b.data :
		    "", b.len);
		buf_free(&b);
	}
	json_decref(v);
	p = exec_tool_params(t);
	json_object_set_new(p, "data", data);
	exec_notify(ex, "progress", p);
}

void
exec_output_chunk(struct exec_tool *t, int fd, const char *data, size_t len)
{
	struct exec_effect e = { .kind = EXEC_OUTPUT };

	if (t->discarded || t->status != EXEC_EXECUTING || len == 0)
		return;
	e.tool = t;
	e.fd = fd == 2 ? 2 : 1;
	e.text = data;
	e.text_len = len;
	exec_emit(t->ex, &e);
}

/* S14: a relative cwd is resolved against the current one; null unsets. */
static void
exec_apply_context(struct exec *ex, const json_t *ctx)
{
	const char *cwd, *key;
	json_t *env, *v, *shared;
	char *joined;

	if ((cwd = json_string_value(json_object_get(ctx, "cwd"))) != NULL &&
	    *cwd != '\0') {
		if (*cwd == '/')
			joined = xstrdup(cwd);
		else
			xasprintf(&joined, "%s%s%s", ex->cwd,
			    ex->cwd[strlen(ex->cwd) - 1] == '/' ? "" : "/",
			    cwd);
		free(ex->cwd);
		ex->cwd = joined;
		ex->ctx_gen++;
	}
	env = json_object_get(ctx, "env");
	if (json_object_size(env) > 0) {
		ex->env_gen++;
		ex->ctx_gen++;
	}
	if (json_object_size(env) > 0 && !ex->env_owned) {
		shared = ex->env;
		ex->env = json_copy(shared);
		json_decref(shared);
		ex->env_owned = true;
	}
	json_object_foreach(env, key, v) {
		if (json_is_string(v))
			json_object_set(ex->env, key, v);
		else if (json_is_null(v))
			json_object_del(ex->env, key);
	}
}

/* The I/O layer may refuse the cwd (gone, or outside where it may be). */
static void
exec_vet_cwd(struct exec *ex, struct exec_tool *t, bool moved)
{
	const char *to;

	if (ex->cfg.cwd_check == NULL || (to = ex->cfg.cwd_check(ex->cfg.arg,
	    t, ex->cwd, moved)) == NULL)
		return;
	free(t->note);
	xasprintf(&t->note, "Shell cwd was reset to %s", to);
	free(ex->cwd);
	ex->cwd = xstrdup(to);
	ex->ctx_gen++;
}

void
exec_restore_context(struct exec *ex, const char *cwd, const json_t *env)
{
	if (cwd != NULL) {
		free(ex->cwd);
		ex->cwd = xstrdup(cwd);
	}
	if (json_is_object(env)) {
		json_decref(ex->env);
		ex->env = json_deep_copy(env);
		ex->env_owned = true;
		ex->env_gen++;
	}
	ex->ctx_gen++;
}

unsigned
exec_context_gen(const struct exec *ex)
{
	return ex->ctx_gen;
}

struct exec_tool *
exec_find(const struct exec *ex, const char *id)
{
	return idmap_get(&ex->turn.ids, id);
}

bool
exec_tool_detachable(const struct exec_tool *t)
{
	return t->running && !t->killed && !t->discarded;
}

void
exec_detach(struct exec_tool *t, char *content, json_t *job)
{
	struct exec *ex = t->ex;

	if (!exec_tool_detachable(t))
		fatal("exec_detach for tool %s that cannot be", t->id);
	t->running = false;
	ex->n_running--;
	exec_complete(t, REASON_BACKGROUND, content, NULL);
	json_object_set_new(json_object_get(exec_result(t), "meta"), "job",
	    job);
	exec_after_event(ex);
}

void
exec_progress(struct exec_tool *t, const json_t *data)
{
	json_t *p;

	if (t->discarded || t->status != EXEC_EXECUTING)
		return;
	p = exec_tool_params(t);
	json_object_set_new(p, "data", json_deep_copy(data));
	exec_notify(t->ex, "progress", p);
}

void
exec_finish(struct exec_tool *t, const struct exec_done *d)
{
	struct exec *ex = t->ex;
	struct exec_exit x = { .end = EXEC_END_EXITED,
	    .duration_ms = d->duration_ms };

	if (!t->running)
		fatal("exec_finish for tool %s that does not run", t->id);
	if (t->discarded || t->killed) {
		/* As a process killed: its words, not the client's. */
		x.end = EXEC_END_KILLED;
		exec_exited(t, &x);
		return;
	}
	t->running = false;
	ex->n_running--;
	/* No process: no exit code, whatever x says for exec_complete. */
	t->meta_extra = d->meta != NULL ? json_deep_copy(d->meta) :
	    json_object();
	json_object_set_new(t->meta_extra, "exitCode", json_null());
	json_decref(t->blocks);
	t->blocks = NULL;
	if (d->output != NULL) {
		x.output = *d->output;
		x.output_error = d->output_error;
		exec_complete(t, d->is_error ? REASON_ERROR : REASON_OK, NULL,
		    &x);
	} else if (json_is_array(d->content)) {
		t->blocks = json_deep_copy(d->content);
		exec_complete(t, d->is_error ? REASON_ERROR : REASON_OK,
		    xstrdup(""), &x);
	} else
		exec_complete(t, d->is_error ? REASON_ERROR : REASON_OK,
		    xstrdup(json_string_value(d->content) != NULL ?
		    json_string_value(d->content) : ""), &x);
	exec_after_event(ex);
}

void
exec_exited(struct exec_tool *t, const struct exec_exit *x)
{
	struct exec *ex = t->ex;
	enum exec_reason why;
	unsigned gen;
	size_t i;

	if (!t->running)
		fatal("exec_exited for tool %s that has no process", t->id);
	t->running = false;
	ex->n_running--;

	if (t->discarded) {
		/* S11: finishes silently; it stops counting for S3 now. */
		exec_leave(t);
		exec_tool_free(t);
		exec_after_event(ex);
		return;
	}

	if (t->killed) {
		exec_complete_synthetic(t, t->killed_for);
		exec_after_event(ex);
		return;
	}
	why = exec_exit_reason(x);
	/* S14: only a process that ended by itself changes the context. */
	if ((why == REASON_OK || why == REASON_EXIT) && t->context != NULL) {
		gen = ex->ctx_gen;
		for (i = 0; i < json_array_size(t->context); i++)
			exec_apply_context(ex, json_array_get(t->context, i));
		if (gen != ex->ctx_gen)
			exec_vet_cwd(ex, t, true);
	}
	if (why == REASON_INTERRUPTED)
		exec_complete_synthetic(t, why);
	else
		exec_complete(t, why, NULL, x);
	exec_after_event(ex);
}

/* How a process that nobody here killed ended. */
static enum exec_reason
exec_exit_reason(const struct exec_exit *x)
{
	switch (x->end) {
	case EXEC_END_EXITED:
		return x->status == 0 ? REASON_OK : REASON_EXIT;
	case EXEC_END_SIGNALED:
		return REASON_SIGNAL;
	case EXEC_END_TIMED_OUT:
		return REASON_TIMEOUT;
	case EXEC_END_SPAWN_FAILED:
		return REASON_SPAWN_FAILED;
	case EXEC_END_MEMORY_LIMIT:
		return REASON_MEMORY_LIMIT;
	case EXEC_END_PROCESS_LIMIT:
		return REASON_PROCESS_LIMIT;
	default:
		/* Killed, but not by us: the daemon is going away. */
		return REASON_INTERRUPTED;
	}
}

bool
exec_exit_uses_output(const struct exec_tool *t, const struct exec_exit *x)
{
	enum exec_reason why;

	if (t->discarded || t->killed)
		return false;
	why = exec_exit_reason(x);
	return why != REASON_INTERRUPTED && why != REASON_SPAWN_FAILED;
}

void
exec_abort(struct exec *ex, bool hard)
{
	struct exec_turn *turn = &ex->turn;
	enum exec_abort level = hard ? ABORT_CANCEL : ABORT_INTERRUPT;
	struct exec_tool *t;
	size_t i;

	if (ex->closed)
		return;
	if (turn->abort < level)
		turn->abort = level;
	for (i = turn->deliver; i < turn->n; i++) {
		t = turn->tools[i];
		if (t->status == EXEC_QUEUED ||
		    t->status == EXEC_WAITING_PERMISSION ||
		    (t->status == EXEC_HOOKS && t->hook_phase != EXEC_HOOK_POST))
			exec_complete_synthetic(t, REASON_INTERRUPTED);
		else if (t->status == EXEC_EXECUTING && (hard || t->cancel))
			exec_kill(t, REASON_INTERRUPTED);
		else if (t->status == EXEC_HOOKS && (hard || t->cancel))
			exec_hooks_done(t, NULL);
	}
	exec_after_event(ex);
}

/*
 * End the current turn: its tools that still run become orphans (they go
 * on counting for S3), the rest are freed, pending drains are answered.
 */
static void
exec_turn_end(struct exec *ex, const char *reason, int drain_error)
{
	struct exec_turn *turn = &ex->turn;
	struct exec_effect e = { .kind = EXEC_DRAIN_DONE };
	struct exec_tool *t;
	uint64_t number = turn->number;
	unsigned results = (unsigned)turn->deliver;
	json_t *p;
	size_t i;

	for (i = 0; i < turn->n; i++) {
		t = turn->tools[i];
		if (exec_hooks_cancel(t) || t->status == EXEC_WAITING_PERMISSION)
			exec_leave(t);
		else if (t->status == EXEC_QUEUED)
			ex->n_queued--;
		if (!t->running) {
			exec_tool_free(t);
			continue;
		}
		/* S11: cancel tools are killed, block tools run on, unseen. */
		t->discarded = true;
		if (t->cancel || ex->closed)
			exec_kill(t, REASON_INTERRUPTED);
		TAILQ_REMOVE(&ex->progress, t, entry);
		TAILQ_INSERT_HEAD(&ex->orphans, t, entry);
		ex->state_dirty = true;
	}
	if (!ex->closed) {
		p = json_pack("{s:I, s:s}", "turn", (json_int_t)number,
		    "reason", reason);
		exec_notify(ex, "turn_end", p);
	}
	for (i = 0; i < turn->ndrains; i++) {
		e.cookie = turn->drains[i];
		e.turn = number;
		e.results = results;
		e.error = drain_error;
		exec_emit(ex, &e);
	}
	free(turn->tools);
	free(turn->errored);
	free(turn->drains);
	idmap_free(&turn->ids);
	exec_turn_init(ex, number + 1);
}

void
exec_restore(struct exec *ex, uint64_t turn, const struct exec_restored *r,
    size_t n)
{
	struct exec_turn *tt = &ex->turn;
	struct exec_tool *t;
	bool delivered = true;
	size_t i;

	if (tt->n > 0 || ex->n_running > 0)
		fatal("exec_restore on an executor in use");
	exec_turn_init(ex, turn);
	for (i = 0; i < n; i++) {
		if (idmap_get(&tt->ids, r[i].id) != NULL)
			continue;
		/* Results go in order (S5): the delivered ones lead. */
		delivered = delivered && r[i].delivered;
		if (!delivered && r[i].requeue) {
			t = exec_add_tool(ex, r[i].id, r[i].name, r[i].def,
			    r[i].input);
			if (t->status == EXEC_QUEUED) {
				buf_add(&t->early, r[i].stdin_early,
				    r[i].stdin_early_len);
				t->early_eof = r[i].stdin_early_eof;
			}
			continue;
		}
		if (!delivered && r[i].running && r[i].def != NULL) {
			/* Its status went out already: it just goes on. */
			t = exec_add_tool(ex, r[i].id, r[i].name, r[i].def,
			    r[i].input);
			exec_restore_running(t, r[i].killed_for);
			continue;
		}
		t = exec_turn_append(ex, r[i].id, r[i].name, NULL);
		if (delivered) {
			exec_set_status(t, EXEC_DELIVERED);
			tt->deliver++;
		} else if (r[i].result != NULL) {
			/* Its status went out already: the result waits. */
			exec_set_status(t, EXEC_COMPLETED);
			t->result = json_deep_copy(r[i].result);
		} else
			exec_complete_synthetic(t, REASON_DAEMON_RESTARTED);
	}
	exec_restore_apply(ex);
	exec_after_event(ex);
}

/* The turn's abort and error state a reload handed over, again. */
static void
exec_restore_apply(struct exec *ex)
{
	struct exec_turn *tt = &ex->turn;
	const char *errored;
	json_int_t abort;
	struct exec_tool *t;
	size_t i;

	if (ex->restore_flags == NULL)
		return;
	abort = json_integer_value(json_object_get(ex->restore_flags,
	    "abort"));
	errored = json_string_value(json_object_get(ex->restore_flags,
	    "errored"));
	if (errored != NULL && tt->errored == NULL)
		tt->errored = xstrdup(errored);
	if (abort > (json_int_t)tt->abort && abort <= ABORT_CANCEL)
		tt->abort = (enum exec_abort)abort;
	json_decref(ex->restore_flags);
	ex->restore_flags = NULL;
	/* What was queued again would not have started: S7, S8. */
	for (i = tt->deliver; i < tt->n; i++) {
		t = tt->tools[i];
		if (t->status == EXEC_QUEUED ||
		    t->status == EXEC_WAITING_PERMISSION)
			exec_complete_synthetic(t, tt->errored != NULL ?
			    REASON_SIBLING_ERROR : REASON_INTERRUPTED);
	}
}

json_t *
exec_turn_flags(const struct exec *ex)
{
	if (ex->turn.abort == ABORT_NONE && ex->turn.errored == NULL)
		return NULL;
	return json_pack("{s:i, s:s?}", "abort", (int)ex->turn.abort,
	    "errored", ex->turn.errored);
}

void
exec_restore_flags(struct exec *ex, const json_t *flags)
{
	json_decref(ex->restore_flags);
	ex->restore_flags = json_incref((json_t *)flags);
}

const json_t *
exec_tool_context(const struct exec_tool *t)
{
	return t->context;
}

void
exec_tool_set_context(struct exec_tool *t, const json_t *context)
{
	json_decref(t->context);
	t->context = json_is_array(context) ? json_deep_copy(context) : NULL;
}

/* A tool whose process runs on after a reload: executing, not spawned. */
static void
exec_restore_running(struct exec_tool *t, int killed_for)
{
	t->status = EXEC_EXECUTING;
	t->running = true;
	t->ex->n_running++;
	if (killed_for >= 0) {
		t->killed = true;
		t->killed_for = (enum exec_reason)killed_for;
	}
	exec_enter(t);
}

struct exec_tool *
exec_restore_orphan(struct exec *ex, const char *id, const char *name,
    struct tooldef *def, const json_t *input, int killed_for)
{
	struct exec_tool *t = xcalloc(1, sizeof *t);
	char err[256];

	t->ex = ex;
	t->id = xstrdup(id);
	t->name = xstrdup(name);
	t->input = input != NULL ? json_deep_copy(input) : json_object();
	t->warnings = json_array();
	t->def = tooldef_ref(def);
	t->cancel = tooldef_interrupt(def) == TOOLDEF_CANCEL;
	t->safe = tooldef_check_input(def, t->input, err, sizeof err) &&
	    tooldef_is_safe(def, t->input);
	t->status = EXEC_EXECUTING;
	t->running = true;
	t->discarded = true;
	ex->n_running++;
	if (killed_for >= 0) {
		t->killed = true;
		t->killed_for = (enum exec_reason)killed_for;
	}
	ex->n_exec++;
	if (!t->safe)
		ex->n_exec_unsafe++;
	if (!t->cancel)
		ex->n_exec_block++;
	TAILQ_INSERT_HEAD(&ex->orphans, t, entry);
	return t;
}

struct exec_tool *
exec_turn_find(struct exec *ex, const char *id)
{
	return idmap_get(&ex->turn.ids, id);
}

size_t
exec_drains(const struct exec *ex, void *const **cookies)
{
	*cookies = ex->turn.drains;
	return ex->turn.ndrains;
}

uint64_t
exec_discard(struct exec *ex)
{
	uint64_t number = ex->turn.number;

	if (ex->closed)
		return number;
	exec_turn_end(ex, "discarded", STEXEC_ERR_STATE);
	exec_after_event(ex);
	return number;
}

/* S12: the turn ends once every result is delivered and a drain waits. */
static void
exec_check_drain(struct exec *ex)
{
	if (ex->turn.ndrains > 0 && ex->turn.deliver == ex->turn.n)
		exec_turn_end(ex, "drained", 0);
}

void
exec_drain(struct exec *ex, void *cookie)
{
	struct exec_turn *turn = &ex->turn;
	struct exec_effect e = { .kind = EXEC_DRAIN_DONE };

	if (ex->closed) {
		e.cookie = cookie;
		e.turn = turn->number;
		e.error = STEXEC_ERR_STATE;
		exec_emit(ex, &e);
		return;
	}
	turn->drains = xreallocarray(turn->drains, turn->ndrains + 1,
	    sizeof *turn->drains);
	turn->drains[turn->ndrains++] = cookie;
	exec_after_event(ex);
}

int
exec_permission(struct exec *ex, const char *id, bool allow,
    const char *message)
{
	struct exec_tool *t = idmap_get(&ex->turn.ids, id);

	if (t == NULL)
		return STEXEC_ERR_INVALID_PARAMS;
	if (t->status != EXEC_WAITING_PERMISSION)
		return STEXEC_ERR_STATE;
	if (allow) {
		exec_spawn(t);
		exec_after_event(ex);
		return 0;
	}
	/* S13: deny bubbles up: the whole turn is hard-aborted (S9). */
	exec_complete(t, REASON_PERMISSION_DENIED, xstrdup(message != NULL ?
	    message : ex->interrupt_message), NULL);
	exec_abort(ex, true);
	return 0;
}

void
exec_close(struct exec *ex)
{
	struct exec_tool *t;

	if (ex->closed)
		return;
	ex->closed = true;
	exec_turn_end(ex, NULL, STEXEC_ERR_STATE);
	TAILQ_FOREACH(t, &ex->orphans, entry)
		exec_kill(t, REASON_INTERRUPTED);
}

/* S15: report interruptible/inProgress whenever either changed. */
static void
exec_flush_state(struct exec *ex)
{
	bool interruptible = exec_interruptible(ex);
	struct exec_tool *t;
	struct buf p = { 0 };
	const char *sep = "";

	if (!ex->state_dirty && interruptible == ex->last_interruptible)
		return;
	ex->state_dirty = false;
	ex->last_interruptible = interruptible;
	/* {"interruptible":B,"inProgress":[IDS]}, as exec_notify_status. */
	buf_grow(&p, 128);
	buf_addstr(&p, interruptible ? "{\"interruptible\":true" :
	    "{\"interruptible\":false");
	buf_addstr(&p, ",\"inProgress\":[");
	TAILQ_FOREACH(t, &ex->progress, entry) {
		buf_addstr(&p, sep);
		jsonrpc_add_string_repaired(&p, t->id, strlen(t->id));
		sep = ",";
	}
	buf_addstr(&p, "]}");
	exec_notify_text(ex, "state", &p);
}

/* What follows every event: deliver, start what may start, end, report. */
static void
exec_after_event(struct exec *ex)
{
	if (ex->closed)
		return;
	exec_deliver(ex);
	exec_schedule(ex);
	exec_deliver(ex);
	/* State before turn_end: the drain reply is the last of a turn. */
	exec_flush_state(ex);
	exec_check_drain(ex);
	exec_flush_state(ex);
}

void *
exec_arg(const struct exec *ex)
{
	return ex->cfg.arg;
}

uint64_t
exec_turn(const struct exec *ex)
{
	return ex->turn.number;
}

/* Something executes and every executing tool is "cancel" (S15). */
bool
exec_interruptible(const struct exec *ex)
{
	return ex->n_exec > 0 && ex->n_exec_block == 0;
}

unsigned
exec_turn_size(const struct exec *ex)
{
	return (unsigned)ex->turn.n;
}

unsigned
exec_unfinished(const struct exec *ex)
{
	return (unsigned)(ex->turn.n - ex->turn.deliver);
}

bool
exec_busy(const struct exec *ex)
{
	return ex->n_running > 0;
}

const char *
exec_status_name(enum exec_status s)
{
	static const char *names[] = { "queued", "waiting_permission",
		"executing", "completed", "delivered", "hooks" };

	return names[s];
}

json_t *
exec_status_json(const struct exec *ex,
    void (*describe)(struct exec_tool *, json_t *))
{
	json_t *tools = json_array(), *o;
	struct exec_tool *t;
	size_t i;

	for (i = 0; i < ex->turn.n; i++) {
		t = ex->turn.tools[i];
		o = json_pack("{s:s, s:s, s:s, s:b, s:O}", "id", t->id, "name",
		    t->name, "status", exec_status_name(t->status),
		    "concurrencySafe", t->safe, "input", t->input);
		if (describe != NULL && t->running)
			describe(t, o);
		json_array_append_new(tools, o);
	}
	return json_pack("{s:I, s:b, s:o}", "turn",
	    (json_int_t)ex->turn.number, "interruptible",
	    exec_interruptible(ex), "tools", tools);
}

const char *
exec_turn_tool_state(const struct exec *ex, size_t i, enum exec_status *st,
    const json_t **input, const json_t **result)
{
	struct exec_tool *t;  /* its result made an object: the same state */

	if (i >= ex->turn.n)
		return NULL;
	t = ex->turn.tools[i];
	*st = t->status;
	/* After the call, in PostToolUse: its result is held as it stands. */
	if (t->status == EXEC_HOOKS && t->hook_phase == EXEC_HOOK_POST)
		*st = EXEC_COMPLETED;
	*input = t->input;
	*result = exec_result(t);
	return t->id;
}

const char *
exec_turn_tool(const struct exec *ex, size_t i, const char **name)
{
	if (i >= ex->turn.n)
		return NULL;
	*name = ex->turn.tools[i]->name;
	return ex->turn.tools[i]->id;
}

const char *
exec_cwd(const struct exec *ex)
{
	return ex->cwd;
}

const json_t *
exec_env(const struct exec *ex)
{
	return ex->env;
}

unsigned
exec_env_gen(const struct exec *ex)
{
	return ex->env_gen;
}

struct exec *
exec_tool_exec(const struct exec_tool *t)
{
	return t->ex;
}

const char *
exec_tool_id(const struct exec_tool *t)
{
	return t->id;
}

const json_t *
exec_tool_input(const struct exec_tool *t)
{
	return t->input;
}

bool
exec_tool_running(const struct exec_tool *t)
{
	return t->running;
}

bool
exec_tool_discarded(const struct exec_tool *t)
{
	return t->discarded;
}

int
exec_tool_killed(const struct exec_tool *t)
{
	return t->killed ? (int)t->killed_for : -1;
}

const char *
exec_tool_kill_reason(const struct exec_tool *t)
{
	if (t->discarded)
		return t->ex->closed ? "closed" : "discard";
	if (!t->killed)
		return NULL;
	if (t->killed_for == REASON_SIBLING_ERROR)
		return "sibling_error";
	return t->ex->turn.abort == ABORT_CANCEL ? "abort" : "interrupt";
}

const char *
exec_tool_name(const struct exec_tool *t)
{
	return t->name;
}

struct tooldef *
exec_tool_def(const struct exec_tool *t)
{
	return t->def;
}

uint64_t
exec_tool_turn(const struct exec_tool *t)
{
	return t->turn;
}

bool
exec_tool_safe(const struct exec_tool *t)
{
	return t->safe;
}

int64_t
exec_tool_timeout_ms(const struct exec_tool *t)
{
	return t->timeout_ms;
}

void
exec_tool_set_handle(struct exec_tool *t, void *handle)
{
	t->handle = handle;
}

void *
exec_tool_handle(const struct exec_tool *t)
{
	return t->handle;
}

unsigned
exec_queued(const struct exec *ex)
{
	return ex->n_queued;
}

void
exec_set_add_stamp(struct exec *ex, uint64_t stamp)
{
	ex->add_stamp = stamp;
}

uint64_t
exec_tool_stamp(const struct exec_tool *t, enum exec_stamp which)
{
	return t->stamps[which];
}

void
exec_tool_set_stamp(struct exec_tool *t, enum exec_stamp which,
    uint64_t stamp)
{
	t->stamps[which] = stamp;
}

int
exec_stdin_early(struct exec_tool *t, const char *data, size_t len, bool eof,
    size_t max)
{
	struct tooldef_job_call job;

	if (t->status != EXEC_QUEUED && t->status != EXEC_WAITING_PERMISSION &&
	    !(t->status == EXEC_HOOKS && t->hook_phase != EXEC_HOOK_POST))
		return EXEC_STDIN_NOT_QUEUED;
	tooldef_job_call(tooldef_job(t->def), t->input, &job);
	if (job.internal != TOOLDEF_INTERNAL_NONE ||
	    (!job.stdin_stream && !job.tty))
		return EXEC_STDIN_NOT_STREAMED;
	if (t->early_eof)
		return EXEC_STDIN_CLOSED;
	if (t->early.len + len > max)
		return EXEC_STDIN_FULL;
	if (len > 0)
		buf_add(&t->early, data, len);
	t->early_eof = eof;
	return EXEC_STDIN_OK;
}

const char *
exec_tool_stdin_early(const struct exec_tool *t, size_t *len, bool *eof)
{
	*len = t->early.len;
	*eof = t->early_eof;
	return t->early.data;
}

json_t *
exec_stdin_early_held(const struct exec *ex)
{
	const struct exec_turn *turn = &ex->turn;
	json_t *o = json_object();
	size_t i;

	for (i = 0; i < turn->n; i++)
		if (turn->tools[i]->early.len > 0 &&
		    turn->tools[i]->status != EXEC_DELIVERED &&
		    turn->tools[i]->status != EXEC_COMPLETED)
			json_object_set_new(o, turn->tools[i]->id, json_integer(
			    (json_int_t)turn->tools[i]->early.len));
	return o;
}

/*
 * Completing a tool whose early stdin never reached a process: held still
 * (it never started), or handed to a spawn that failed.
 */
static void
exec_early_dropped(struct exec_tool *t, const struct exec_exit *x)
{
	size_t n = t->early.len;

	if (n == 0 && x != NULL && x->end == EXEC_END_SPAWN_FAILED)
		n = t->early_handed;
	if (n > 0)
		json_array_append_new(t->warnings, json_sprintf("%zu bytes of "
		    "stdin queued before the start were dropped", n));
	buf_free(&t->early);
	t->early_eof = false;
}

/* A tool in its hook phase: they are told to stop. Whether it was. */
static bool
exec_hooks_cancel(struct exec_tool *t)
{
	struct exec_effect e = { .kind = EXEC_HOOKS_CANCEL };

	if (t->status != EXEC_HOOKS)
		return false;
	e.tool = t;
	exec_emit(t->ex, &e);
	return true;
}

enum exec_hook_phase
exec_tool_hook_phase(const struct exec_tool *t)
{
	return t->hook_phase;
}

/* meta.hooks: every run, and what the model and client are told. */
static void
exec_hooks_note(struct exec_tool *t, const struct exec_hooks_done *d)
{
	json_t *runs;
	const char *old;
	char *joined;

	if (t->hooks == NULL)
		t->hooks = json_pack("{s:[]}", "runs");
	runs = json_object_get(t->hooks, "runs");
	if (d->runs != NULL)
		json_array_extend(runs, (json_t *)d->runs);
	if (d->context != NULL) {
		old = json_string_value(json_object_get(t->hooks,
		    "additionalContext"));
		if (old != NULL) {
			xasprintf(&joined, "%s\n%s", old, d->context);
			json_object_set_new(t->hooks, "additionalContext",
			    json_string(joined));
			free(joined);
		} else {
			json_object_set_new(t->hooks, "additionalContext",
			    json_string(d->context));
		}
	}
	if (d->stop) {
		json_object_set_new(t->hooks, "continue", json_false());
		if (d->stop_reason != NULL && json_object_get(t->hooks,
		    "stopReason") == NULL)
			json_object_set_new(t->hooks, "stopReason",
			    json_string(d->stop_reason));
	}
}

/* updatedInput: the schema checks it again (S2); safety stays as decided. */
static void
exec_hooks_input(struct exec_tool *t, const json_t *input)
{
	char err[512];
	char **argv;

	if (!tooldef_check_input(t->def, input, err, sizeof err) ||
	    (argv = tooldef_argv(t->def, input, err, sizeof err)) == NULL) {
		free(t->invalid);
		xasprintf(&t->invalid, "a hook's updatedInput: %s", err);
		return;
	}
	json_decref(t->input);
	t->input = json_deep_copy(input);
	tooldef_argv_free(t->argv);
	t->argv = argv;
}

/* The words the model reads after the result (README, "Hooks"). */
static void
exec_hooks_post(struct exec_tool *t, const struct exec_hooks_done *d)
{
	json_t *result = json_object_get(exec_result(t), "result");
	json_t *content = json_object_get(result, "content");
	const char *event = t->post_error ? "PostToolUseFailure" :
	    "PostToolUse", *name = d->name != NULL ? d->name : t->name;
	char *text;

	if (d->updated_output != NULL) {
		if (json_is_string(d->updated_output) ||
		    json_is_array(d->updated_output)) {
			content = json_deep_copy(d->updated_output);
		} else {
			text = json_dumps(d->updated_output, JSON_COMPACT);
			content = json_string_nocheck(text != NULL ? text : "");
			free(text);
		}
		json_object_set_new(result, "content", content);
	}
	if (d->blocked)
		buf_printf(&t->remind, "%s:%s hook blocking error: %s\n",
		    event, name, d->reason != NULL ? d->reason : "blocked");
	if (d->context != NULL)
		buf_printf(&t->remind, "%s:%s hook additional context: %s\n",
		    event, name, d->context);
}

/*
 * What hooks said for the model (README, Hooks): one reminder after the
 * result's content, PreToolUse's lines before PostToolUse's.
 */
static void
exec_hooks_remind(struct exec_tool *t)
{
	json_t *result, *content;
	char *text;

	if (t->remind.len == 0 ||
	    (result = json_object_get(exec_result(t), "result")) == NULL)
		return;
	content = json_object_get(result, "content");
	xasprintf(&text, "<system-reminder>\n%.*s</system-reminder>",
	    (int)t->remind.len, t->remind.data);
	buf_free(&t->remind);
	if (json_is_string(content)) {
		char *joined;

		xasprintf(&joined, "%s\n%s", json_string_value(content), text);
		json_object_set_new(result, "content", json_string_nocheck(
		    joined));
		free(joined);
	} else if (json_is_array(content)) {
		json_array_append_new(content, json_pack("{s:s, s:s}", "type",
		    "text", "text", text));
	}
	free(text);
}

/*
 * The hooks of t's phase ended (d) or are stopped (NULL: cancelled, which
 * a PRE or PERMISSION phase never is here: exec_complete does that).
 */
void
exec_hooks_done(struct exec_tool *t, const struct exec_hooks_done *d)
{
	struct exec *ex = t->ex;
	char *content;

	if (t->status != EXEC_HOOKS)
		return;
	if (d == NULL) {
		/* POST: the result stands as the tool gave it. */
		exec_hooks_cancel(t);
		exec_leave(t);
		exec_settle(t, t->post_why, t->post_error);
		return;
	}
	exec_hooks_note(t, d);
	/* Their word is in: nothing is left to cancel, the slot is kept. */
	if (t->hook_phase != EXEC_HOOK_POST)
		t->status = EXEC_WAITING_PERMISSION;
	switch (t->hook_phase) {
	case EXEC_HOOK_POST:
		exec_hooks_post(t, d);
		exec_leave(t);
		exec_settle(t, t->post_why, t->post_error);
		break;
	case EXEC_HOOK_PRE:
		if (d->decision == EXEC_HOOK_DENY) {
			xasprintf(&content, "<tool_use_error>Hook PreToolUse:%s "
			    "denied this tool: %s</tool_use_error>", d->name !=
			    NULL ? d->name : t->name,
			    d->reason != NULL ? d->reason : "no reason given");
			exec_complete(t, REASON_PERMISSION_DENIED, content,
			    NULL);
			break;
		}
		if (d->updated_input != NULL)
			exec_hooks_input(t, d->updated_input);
		if (t->invalid != NULL) {
			exec_complete(t, REASON_INVALID_INPUT, NULL, NULL);
			break;
		}
		if (d->context != NULL)
			buf_printf(&t->remind, "PreToolUse:%s hook additional "
			    "context: %s\n", d->name != NULL ? d->name : t->name,
			    d->context);
		if (d->decision == EXEC_HOOK_ALLOW) {
			exec_spawn(t);
		} else if (d->decision == EXEC_HOOK_ASK) {
			free(t->ask_reason);
			t->ask_reason = d->reason != NULL ?
			    xstrdup(d->reason) : NULL;
			exec_ask(t, false);
		} else {
			exec_pre(t);
		}
		break;
	case EXEC_HOOK_PERMISSION:
		if (d->updated_input != NULL)
			exec_hooks_input(t, d->updated_input);
		if (t->invalid != NULL) {
			exec_complete(t, REASON_INVALID_INPUT, NULL, NULL);
			break;
		}
		if (d->decision == EXEC_HOOK_ALLOW) {
			exec_spawn(t);
		} else if (d->decision == EXEC_HOOK_DENY) {
			/* S13's deny, answered by a hook for the client. */
			exec_complete(t, REASON_PERMISSION_DENIED, xstrdup(
			    d->reason != NULL ? d->reason :
			    ex->interrupt_message), NULL);
			exec_abort(ex, true);
			return;
		} else {
			exec_ask(t, false);
		}
		break;
	}
	exec_after_event(ex);
}
