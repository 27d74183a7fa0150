/*
 * Sessions: the executor's effects turned into processes and notifications,
 * the per-session notification log with replay, subscribers and
 * backpressure. See session.h.
 */
#include "session/session.h"
#include "session/job.h"
#include "session/shell.h"

#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <pwd.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/netpolicy.h"
#include "net/conn.h"
#include "net/proxy.h"
#include "handover.h"
#include "idmap.h"
#include "mcp/mcp.h"
#include "session/session_int.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "session/outdir.h"
#include "supervisor/proc.h"
#include "hooks/hooks.h"
#include "session/journal.h"
#include "session/readonce.h"
#include "session/registry.h"
#include "stexec/protocol.h"
#include "utf8.h"

/* A subscriber further behind than this pauses the session's tools. */
#define SESSION_PAUSE_LAG (1024 * 1024)
#define SESSION_RESUME_LAG (256 * 1024)
/* A result text longer than this is encoded this much per loop pass. */
#define SESSION_SLICE (256 * 1024)
/* Bytes of a large line's journal record (CRC, then writes) a pass. */
#define SESSION_JOURNAL_SLICE (2 * 1024 * 1024)

/* A long line shared by the log and the sockets' buffers, not copied. */
struct shared {
	char *data;
	unsigned refs;
};


/* A large tool_result being encoded, a slice per loop pass. */
struct slicer {
	uint64_t seq;
	struct readonce *text;    /* a copy of its content, freed as encoded */
	size_t done;
	struct buf out;   /* the line so far */
	struct buf tail;  /* what follows the content */
	bool encoded;     /* out is the whole line */
	struct journal_big *jb; /* its record, being journaled */
	struct slicer *next;
};

/* A drain reply that must wait for the notes up to `after` (S12). */
struct waiter {
	uint64_t after;
	struct ticket *tk;
	json_t *result;           /* or else code and message */
	int code;
	char *message;
	struct waiter *next;
};

struct sub {
	struct session *s;
	struct conn *c;
	uint64_t next; /* the next seq to send */
	struct sub *prev, *snext;
};

/*
 * What the session holds for a tool with a process (its exec_tool handle):
 * the supervisor's handle, and per stream the start of a character a
 * streamed chunk ended in, which the encoder must not split.
 */
struct session_tool {
	struct proc *proc;        /* NULL: a tool the daemon answers */
	struct utf8_carry carry[2];
	bool stream;              /* its ToolDef's streamOutput */
	struct job *job;          /* a call that may become a job */
	struct event *yield;      /* ...when this fires */
	size_t max_output;
	struct event *answer;     /* internal: the answer, from the loop */
	char *content;
	bool is_error;
	bool shell;               /* a bash_session call (shell.h) */
	struct proxy_tool *proxy; /* network rules: its way out */
	int netns;                /* ...and its namespace (the session's) */
	struct client_call *client; /* a client-run call (session_client.c) */
	struct mcp_run *mcp;      /* an MCP server's call (session_mcp.c) */
};



static const struct session_hooks *session_hooks;
static struct session_config session_cfg;
struct idmap session_map;
struct session *session_list;
static unsigned session_n;
static uint64_t session_started, session_completed;
static const struct timeval *session_idle_tv;
/* Sessions with a slicer, served in turn, one slice per loop pass. */
static struct session *session_slicing, **session_slicing_tail =
    &session_slicing;
static struct event *session_slice_ev;
bool session_stopping;

static struct proc_user *session_user(uid_t, json_t *);
static void	session_effect(void *, const struct exec_effect *);
static void	session_limits(const struct tooldef_limits *,
		    struct toolcg_limits *);
static void	session_log_result(struct session *,
		    const struct exec_effect *);
static void	session_note(struct session *, const char *, json_t *);
static void	session_note_text(struct session *, const char *, const char *,
    size_t);
static void	session_note_tail(const struct session *, struct buf *);
static void	session_note_repaired(struct session *, struct buf *,
    const char *, const json_t *);
static void	session_note_output(struct session *,
		    const struct exec_effect *);
static void	session_log(struct session *, struct buf *, bool,
		    const struct buf *);
static void	session_logged(struct session *);
static const json_t *session_big_text(const json_t *);
static int	session_split(struct buf **, struct buf *,
		    const json_t *, const json_t *);
static bool	session_note_sliced(struct session *, const char *,
		    json_t *);
static void	session_slice(struct session *, size_t);
static void	session_slice_cb(evutil_socket_t, short, void *);
static void	session_slice_queue(struct session *);
static void	session_slice_arm(void);
static void	session_wait(struct session *, struct ticket *, json_t *,
		    int, const char *);
static void	session_wake(struct session *);
static void	session_note_free(struct note *);
static void	session_unshare(const void *, size_t, void *);
static void	session_context_moved(struct session *);
static void	session_spawn(struct session *, struct exec_tool *,
		    const struct exec_spawn *);
static bool	session_our_var(const char *);
/* Each client reads its own spelling (curl: only http_proxy). */
static const char *const proxy_vars[] = { "HTTP_PROXY", "http_proxy",
    "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
    "no_proxy" };

static bool	session_proxy_var(const char *, uint16_t);
static char	**session_env_strings(struct session *);
static void	session_sandbox(struct session *, const struct exec_spawn *,
		    struct sandbox_spec *, const char **);
static void	session_rejournal(struct session *);
static void	session_emit(struct session *, const char *, json_t *);
static char	**session_envp(struct session *, struct exec_tool *,
		    const json_t *, struct buf *, uint16_t);
static void	session_pressure(struct session *);
static struct note *session_note_at(struct session *, uint64_t);
static uint64_t	session_lag(struct session *, uint64_t);
static void	session_finish(struct session *);
static void	session_catch_up(struct session *, struct conn *);
static void	session_notify(struct session *, const char *, json_t *,
		    bool);
static void	session_internal_done(struct exec_tool *, bool,
		    const char *, ...) __attribute__((format(printf, 3, 4)));
static void	session_job_answered(struct exec_tool *, const char *);
static void	session_job_ended(struct session *);
static void	session_sub_send(struct sub *, bool);
static void	session_idle_cb(evutil_socket_t, short, void *);
static void	session_proc_line(void *, const char *, size_t);
static void	session_proc_chunk(void *, int, const char *, size_t);
static void	session_proc_started(void *, const struct timespec *);
static struct proc *session_proc(struct exec_tool *);
static void	session_tool_done(struct exec_tool *, bool);
static void	session_proc_exit(void *, const struct proc_exit *);
static void	session_running_add(struct session *, struct exec_tool *);
static void	session_running_del(struct session *, struct exec_tool *);
static void	session_yield_cb(evutil_socket_t, short, void *);
static void	session_internal(struct session *, struct exec_tool *,
		    const struct exec_spawn *);
static void	session_answer_cb(evutil_socket_t, short, void *);
static struct job *session_shell_spawn(struct session *, struct exec_tool *,
		    const struct exec_spawn *, char *const *);
static void	session_shell_answer(struct exec_tool *,
		    const struct exec_exit *);
static void	session_tool_finish(struct exec_tool *,
		    const struct exec_done *, const struct exec_exit *);
static void	session_keep_file(struct session *, const char *, uint64_t,
		    const char *);
static void	session_keep_output(struct session *, struct exec_tool *,
		    const struct exec_exit *);

static const struct proc_ops session_proc_ops = {
	.line = session_proc_line,
	.chunk = session_proc_chunk,
	.started = session_proc_started,
	.exit = session_proc_exit,
};

/* What bash_session's shell asks of the session (shell.h). */
static const struct shell_hooks session_shell_hooks = {
	.spawn = session_shell_spawn,
	.answer = session_shell_answer,
};

/* What jobs tell the session (job.h). */
static const struct job_hooks session_job_hooks = {
	.notify = session_notify,
	.answered = session_job_answered,
	.ended = session_job_ended,
};

/* What session_hook.c needs of a session (session_int.h). */
static const struct session_hook_ops session_hook_ops = {
	.env = session_env_strings,
	.decided = session_idle_update,
};

void
session_init(const struct session_config *cfg)
{
	struct timeval tv = { (time_t)cfg->idle_timeout_s, 0 };

	struct session_client_config ccfg = {
		.base = cfg->base,
		.kill_grace_ms = cfg->kill_grace_ms,
		.client_grace_ms = cfg->client_grace_ms,
		.output_dir = cfg->output_dir,
		.finish = session_tool_finish,
		.keep_file = session_keep_file,
	};
	struct session_mcp_config mcfg = {
		.sandbox = session_sandbox,
		.env_strings = session_env_strings,
		.emit = session_emit,
		.rejournal = session_rejournal,
		.gone = session_job_ended,
		.start_timeout_ms = cfg->mcp_start_timeout_ms,
	};

	session_cfg = session_net_cfg = *cfg;
	session_shell_init(&cfg->shell);
	session_client_init(&ccfg);
	session_hook_init(&session_hook_ops);
	mcfg.client = ccfg;
	session_mcp_init(&mcfg);
	job_set_hooks(&session_job_hooks);
	shell_init(cfg->base, &session_shell_hooks);
	/* One timeout for all: libevent keeps them in a queue, not a heap. */
	if (cfg->base != NULL && cfg->idle_timeout_s > 0)
		session_idle_tv = event_base_init_common_timeout(cfg->base, &tv);
	if (cfg->base != NULL && session_slice_ev == NULL)
		session_slice_ev = evtimer_new(cfg->base, session_slice_cb,
		    NULL);
}

bool
session_encoding(void)
{
	return session_slicing != NULL;
}

bool
session_closing(void)
{
	struct session *s;

	for (s = session_list; s != NULL; s = s->next)
		if (s->closing)
			return true;
	return false;
}

unsigned
session_count(void)
{
	return session_n;
}

void
session_tools_check(void)
{
	proc_count_execs();
}

uint64_t
session_tools_started(void)
{
	return session_started;
}

uint64_t
session_tools_completed(void)
{
	return session_completed;
}

unsigned
session_tools_running(void)
{
	return proc_running();
}

/* The main pid of a tool's process, or 0 while queued or after it ended. */
static long
session_tool_pid(struct exec_tool *t)
{
	struct session_tool *st = exec_tool_handle(t);

	return st != NULL && st->proc != NULL ? (long)proc_pid(st->proc) : 0;
}

void
session_tool_describe(struct exec_tool *t, json_t *o)
{
	struct session_tool *st = exec_tool_handle(t);
	uint64_t peak, cpu_ms;
	bool has_peak, has_cpu;
	long pid;

	if (st != NULL && st->client != NULL) {
		session_client_describe(st->client, o);
		return;
	}
	if (st != NULL && st->mcp != NULL) {
		session_mcp_describe(st->mcp, o);
		return;
	}
	if ((pid = session_tool_pid(t)) <= 0)
		return;
	json_object_set_new(o, "pid", json_integer(pid));
	/* Its start is stamped once its exec is known. */
	(void)proc_execd(st->proc);
	if (exec_tool_stamp(t, EXEC_STAMP_STARTED) != 0)
		json_object_set_new(o, "elapsedMs", json_integer((json_int_t)
		    ((metrics_now() - exec_tool_stamp(t, EXEC_STAMP_STARTED)) /
		    1000000)));
	proc_usage(st->proc, &has_peak, &peak, &has_cpu, &cpu_ms);
	if (has_peak)
		json_object_set_new(o, "peakMemoryBytes",
		    json_integer((json_int_t)peak));
	if (has_cpu)
		json_object_set_new(o, "cpuMs",
		    json_integer((json_int_t)cpu_ms));
}

struct session *
session_create(uid_t uid, struct tooldef **tools, size_t ntools,
    unsigned max_parallel, const char *cwd, const json_t *env,
    unsigned output_grace_ms, const struct tooldef_sandbox *sandbox,
    const struct session_shell *shell, const json_t *hooks, int *code,
    char *err, size_t errlen)
{
	struct session *s;

	/*
	 * Another user's tools run as that user, which only root can do: a
	 * daemon of another uid never hands its own authority over.
	 */
	if (uid != geteuid() && uid != 0 && geteuid() != 0) {
		*code = STEXEC_ERR_NOT_PERMITTED;
		snprintf(err, errlen, "Not permitted: this daemon runs as uid "
		    "%u and cannot run tools as uid %u; only a root daemon "
		    "serves other users", (unsigned)geteuid(), (unsigned)uid);
		return NULL;
	}
	if (uid != geteuid() && uid != 0 && !session_cfg.other_uids) {
		*code = STEXEC_ERR_NOT_PERMITTED;
		snprintf(err, errlen, "Not permitted: this daemon serves only "
		    "uid %u (--allow-other-uids runs each user's tools as "
		    "that user), not uid %u", (unsigned)geteuid(),
		    (unsigned)uid);
		return NULL;
	}
	if (session_n >= session_cfg.max_sessions) {
		*code = STEXEC_ERR_LIMIT;
		snprintf(err, errlen, "Limit exceeded: %u sessions are open "
		    "(--max-sessions)", session_n);
		return NULL;
	}
	s = session_new(NULL, uid, tools, ntools, max_parallel, cwd, env);
	s->output_grace_ms = output_grace_ms;
	tooldef_sandbox_copy(&s->sandbox, sandbox);
	s->shell.keep_cwd = shell->keep_cwd;
	s->shell.keep_env = shell->keep_env;
	s->shell.env_file = shell->env_file != NULL ?
	    xstrdup(shell->env_file) : NULL;
	session_hook_attach(s, hooks, true);
	if (session_hooks != NULL)
		session_hooks->created(s, tools, ntools, max_parallel, cwd,
		    env);
	log_about(LOG_LEVEL_INFO, s->id, NULL, NULL, "created for uid %u in "
	    "%s", (unsigned)uid, exec_cwd(s->ex));
	return s;
}

/*
 * Who uid is, for running its tools as it: its group and supplementary
 * groups, and its HOME, USER and LOGNAME in env (the client's env goes on
 * top); or why it cannot be (the tools then fail to start). Looked up once
 * per session: the name service may be slow.
 */
static struct proc_user *
session_user(uid_t uid, json_t *env)
{
	struct proc_user *u = xcalloc(1, sizeof *u);
	struct passwd pw, *found = NULL;
	char buf[4096], *err;
	gid_t *groups;
	int n = 32;

	u->uid = uid;
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 ||
	    found == NULL) {
		xasprintf(&err, "cannot run a tool as uid %u: it has no "
		    "passwd entry", (unsigned)uid);
		u->error = err;
		return u;
	}
	u->gid = pw.pw_gid;
	groups = xcalloc((size_t)n, sizeof *groups);
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) == -1) {
		groups = xreallocarray(groups, (size_t)n, sizeof *groups);
		if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) == -1)
			n = 0;
	}
	u->groups = groups;
	u->ngroups = (size_t)n;
	json_object_set_new(env, "HOME", json_string(pw.pw_dir));
	json_object_set_new(env, "USER", json_string(pw.pw_name));
	json_object_set_new(env, "LOGNAME", json_string(pw.pw_name));
	return u;
}

enum tooldef_sandbox_mode
session_min_sandbox(void)
{
	return session_cfg.min_sandbox;
}

void
session_set_hooks(const struct session_hooks *hooks)
{
	session_hooks = hooks;
}

/* A session of this id (NULL: a new random one), in the map and list. */
struct session *
session_new(const char *id, uid_t uid, struct tooldef **tools, size_t ntools,
    unsigned max_parallel, const char *cwd, const json_t *env)
{
	struct exec_config ecfg = { 0 };
	struct session *s;
	unsigned char rnd[8];
	json_t *senv, *v;
	const char *key;
	size_t i;

	s = xcalloc(1, sizeof *s);
	/* Ids are unguessable, though sessions are also checked by uid. */
	if (id != NULL)
		snprintf(s->id, sizeof s->id, "%s", id);
	else {
		if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
			fatal("getrandom failed");
		snprintf(s->id, sizeof s->id,
		    "s-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
		    rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	}
	s->uid = uid;
	for (i = 0; i < ntools; i++)
		idmap_put(&s->tools, tooldef_name(tools[i]),
		    tooldef_ref(tools[i]));

	/* env: the daemon's, with the client's on top; null unsets. Without
	 * changes, every session shares the daemon's (memory per session). */
	if (json_object_size(env) == 0 && (geteuid() != 0 || uid == 0))
		senv = json_incref(session_cfg.base_env);
	else
		senv = json_copy(session_cfg.base_env);
	if (geteuid() == 0 && uid != 0)
		s->user = session_user(uid, senv);
	json_object_foreach((json_t *)env, key, v) {
		if (json_is_null(v))
			json_object_del(senv, key);
		else
			json_object_set(senv, key, v);
	}
	ecfg.max_parallel = max_parallel;
	ecfg.interrupt_message = session_cfg.interrupt_message;
	ecfg.effect = session_effect;
	ecfg.arg = s;
	ecfg.cwd_check = session_shell_cwd_check;
	ecfg.hooks = session_hook_phase;
	s->root = xstrdup(cwd != NULL ? cwd : session_cfg.base_cwd);
	s->shell.keep_cwd = true;
	s->ex = exec_new(&ecfg, s->root, senv);
	json_decref(senv);
	s->prev_turn_seq = s->cur_turn_seq = 1;
	s->slicers_tail = &s->slicers;
	s->waiters_tail = &s->waiters;
	s->output_grace_ms = SESSION_OUTPUT_GRACE_DEFAULT_MS;
	if (session_idle_tv != NULL)
		s->idle = evtimer_new(session_cfg.base, session_idle_cb, s);

	idmap_put(&session_map, s->id, s);
	s->next = session_list;
	if (session_list != NULL)
		session_list->prev = s;
	session_list = s;
	session_n++;
	log_about(LOG_LEVEL_DEBUG, s->id, NULL, NULL, "made for uid %u",
	    (unsigned)uid);
	return s;
}

struct session *
session_find(const char *id, uid_t uid, int *code)
{
	struct session *s = idmap_get(&session_map, id);

	if (s == NULL || s->closing) {
		*code = STEXEC_ERR_UNKNOWN_SESSION;
		return NULL;
	}
	if (s->uid != uid) {
		*code = STEXEC_ERR_NOT_PERMITTED;
		return NULL;
	}
	return s;
}

const char *
session_id(const struct session *s)
{
	return s->id;
}

struct exec *
session_exec(struct session *s)
{
	return s->ex;
}

struct tooldef *
session_tool(struct session *s, const char *name)
{
	struct tooldef *d = idmap_get(&s->tools, name);

	if (d == NULL)
		d = session_mcp_tool(s, name);
	return d != NULL ? d : registry_find(name);
}

json_t *
session_tools_json(struct session *s)
{
	json_t *tools = json_array();
	struct tooldef *d;
	size_t i;

	for (i = 0; i < registry_count(); i++) {
		d = registry_get(i);
		if (s == NULL || idmap_get(&s->tools, tooldef_name(d)) == NULL)
			json_array_append_new(tools, tooldef_json(d));
	}
	if (s != NULL)
		for (i = 0; i < s->tools.cap; i++)
			if (s->tools.slots[i].key != NULL &&
			    s->tools.slots[i].value != NULL)
				json_array_append_new(tools, tooldef_json(
				    s->tools.slots[i].value));
	session_mcp_tools_json(s, tools);
	return tools;
}

json_t *
session_list_json(uid_t uid)
{
	json_t *list = json_array();
	struct session *s;

	for (s = session_list; s != NULL; s = s->next)
		if (s->uid == uid && !s->closing)
			json_array_append_new(list, json_pack("{s:s, s:I, s:i}",
			    "sessionId", s->id, "turn",
			    (json_int_t)exec_turn(s->ex), "unfinished",
			    (int)exec_unfinished(s->ex)));
	return list;
}

json_t *
session_output_files_json(struct session *s)
{
	return outdir_set_json(s->files);
}

bool
session_turn_full(struct session *s)
{
	return exec_turn_size(s->ex) >= session_cfg.max_tools_per_turn;
}

void
session_refer(struct session *s, struct conn *c)
{
	if (conn_refer(c, s->id)) {
		s->refs++;
		session_idle_update(s);
	}
}

void
session_unrefer(const char *id)
{
	struct session *s = idmap_get(&session_map, id);

	if (s != NULL && s->refs > 0) {
		s->refs--;
		session_idle_update(s);
	}
}

/*
 * Start the idle clock when the session becomes idle, stop it when not.
 * The clock is wall time, journaled, so that a session restored after a
 * restart expires counting the time the daemon was down; one idle already
 * (idle_since set by the restore) keeps its start.
 */
void
session_idle_update(struct session *s)
{
	bool idle = s->refs == 0 && s->subs == NULL && !exec_busy(s->ex) &&
	    !s->closing;
	struct timeval left;
	int64_t now, ms;

	if (s->idle == NULL)
		return;
	if (!idle) {
		evtimer_del(s->idle);
		if (s->idle_since != 0) {
			s->idle_since = 0;
			if (session_hooks != NULL)
				session_hooks->idled(s);
		}
		return;
	}
	if (evtimer_pending(s->idle, NULL))
		return;
	now = util_wall_ms();
	if (s->idle_since == 0 || s->idle_since > now) {
		s->idle_since = now;
		if (session_hooks != NULL)
			session_hooks->idled(s);
		evtimer_add(s->idle, session_idle_tv);
		return;
	}
	ms = (int64_t)session_cfg.idle_timeout_s * 1000 - (now - s->idle_since);
	if (ms < 0)
		ms = 0;
	left.tv_sec = (time_t)(ms / 1000);
	left.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(s->idle, &left);
}

static void
session_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	log_about(LOG_LEVEL_INFO, s->id, NULL, NULL, "closed after %u s with "
	    "no client and nothing running (--session-idle-timeout)",
	    session_cfg.idle_timeout_s);
	session_close(s, NULL);
}

/*
 * A tool's result, in the log: an error at info, so that a session's
 * story under journald tells what failed; a success only at debug, which
 * costs a busy daemon nothing.
 */
static void
session_log_result(struct session *s, const struct exec_effect *e)
{
	const char *reason = e->reason;

	log_about(reason != NULL && strcmp(reason, "ok") == 0 ?
	    LOG_LEVEL_DEBUG : LOG_LEVEL_INFO, s->id, exec_tool_id(e->tool),
	    exec_tool_name(e->tool), "result %s after %lld ms", reason != NULL ?
	    reason : "?", (long long)e->duration_ms);
}

/* The executor's effects: processes, kills, notifications, drain replies. */
/* A ToolDef's limits, the daemon's defaults where it gives none. */
static void
session_limits(const struct tooldef_limits *l, struct toolcg_limits *out)
{
	out->memory_bytes = l->memory_bytes > 0 ? l->memory_bytes :
	    session_cfg.limits.memory_bytes;
	out->max_processes = l->max_processes > 0 ? l->max_processes :
	    session_cfg.limits.max_processes;
	out->cpu_percent = l->cpu_percent > 0 ? l->cpu_percent :
	    session_cfg.limits.cpu_percent;
}

static void
session_effect(void *arg, const struct exec_effect *e)
{
	struct session *s = arg;
	struct session_tool *st;

	switch (e->kind) {
	case EXEC_SPAWN:
		session_spawn(s, e->tool, e->spawn);
		break;
	case EXEC_KILL:
		st = exec_tool_handle(e->tool);
		if (st->proc != NULL)
			proc_kill(st->proc);
		else if (st->client != NULL)
			session_client_cancel(st->client);
		else if (st->mcp != NULL)
			session_mcp_cancel(st->mcp);
		else
			session_internal(s, e->tool, NULL);
		break;
	case EXEC_NOTIFY:
		if (e->tool != NULL) {
			/* A tool_result: how long it waited after the end. */
			metrics_finished(e->reason);
			metrics_observe(METRICS_DELIVERY, exec_tool_stamp(
			    e->tool, EXEC_STAMP_ENDED));
			session_log_result(s, e);
		}
		if (e->params_text != NULL)
			session_note_text(s, e->method, e->params_text,
			    e->params_len);
		else
			session_note(s, e->method, e->params);
		break;
	case EXEC_OUTPUT:
		session_note_output(s, e);
		break;
	case EXEC_HOOKS_CANCEL:
		session_hook_cancel(s, e->tool);
		break;
	case EXEC_DRAIN_DONE:
		/* S12: the reply comes after the turn's notifications. */
		if (e->error == 0)
			session_wait(s, e->cookie, json_pack("{s:I, s:i}",
			    "turn", (json_int_t)e->turn, "results",
			    (int)e->results), 0, NULL);
		else if (s->closing)
			session_wait(s, e->cookie, NULL, e->error, "State "
			    "conflict: the session was closed while the drain "
			    "waited");
		else {
			char msg[128];

			snprintf(msg, sizeof msg, "State conflict: turn %llu "
			    "was discarded while the drain waited",
			    (unsigned long long)e->turn);
			session_wait(s, e->cookie, NULL, e->error, msg);
		}
		break;
	}
}

/* The variables we give every tool; the session's own are left out. */
static bool
session_our_var(const char *key)
{
	return strcmp(key, "STEXEC_SESSION_ID") == 0 ||
	    strcmp(key, "STEXEC_TOOL_USE_ID") == 0 ||
	    strcmp(key, "STEXEC_PROGRESS_FD") == 0;
}

/* The session's env as "K=V" strings in one block, kept until it changes. */
static char **
session_env_strings(struct session *s)
{
	const json_t *env = exec_env(s->ex), *v;
	const char *key;
	size_t n = 0, bytes = 0;
	char **envp, *p;

	if (s->envp != NULL && s->envp_gen == exec_env_gen(s->ex))
		return s->envp;
	free(s->envp);
	json_object_foreach((json_t *)env, key, v)
		if (json_is_string(v) && !session_our_var(key)) {
			n++;
			bytes += strlen(key) + json_string_length(v) + 2;
		}
	envp = xmalloc((n + 1) * sizeof *envp + bytes);
	p = (char *)(envp + n + 1);
	n = 0;
	json_object_foreach((json_t *)env, key, v)
		if (json_is_string(v) && !session_our_var(key)) {
			envp[n++] = p;
			p += sprintf(p, "%s=%s", key, json_string_value(v)) + 1;
		}
	envp[n] = NULL;
	s->envp = envp;
	s->envp_gen = exec_env_gen(s->ex);
	return envp;
}

/*
 * The process environment of §4: the session's env, the tool's env on
 * top, and our variables; vars holds the strings that are made here.
 * Free the vector (not its strings) and vars afterwards.
 */
/*
 * With network rules (a proxy port), the proxy variables are the daemon's:
 * var is "NAME" or "NAME=value".
 */
static bool
session_proxy_var(const char *var, uint16_t proxy_port)
{
	size_t i, k;

	/* Called for every variable of every spawn: most have no proxy. */
	if (proxy_port == 0)
		return false;
	k = strcspn(var, "=");
	for (i = 0; i < nitems(proxy_vars); i++)
		if (strlen(proxy_vars[i]) == k &&
		    strncmp(proxy_vars[i], var, k) == 0)
			return true;
	return false;
}

static char **
session_envp(struct session *s, struct exec_tool *t, const json_t *tenv,
    struct buf *vars, uint16_t proxy_port)
{
	const json_t *v;
	char **base = session_env_strings(s), **envp;
	size_t n = 0, i, j, k, *offs, nvars = 0;
	const char *key;

	for (i = 0; base[i] != NULL; i++)
		;
	envp = xcalloc(i + json_object_size(tenv) + 4 + nitems(proxy_vars),
	    sizeof *envp);
	offs = xcalloc(json_object_size(tenv) + 3 + nitems(proxy_vars),
	    sizeof *offs);
	for (i = 0; base[i] != NULL; i++) {
		/* A variable the tool's definition sets or unsets is its. */
		key = NULL;
		if (json_object_size(tenv) > 0) {
			k = strcspn(base[i], "=");
			json_object_foreach((json_t *)tenv, key, v)
				if (strlen(key) == k &&
				    strncmp(key, base[i], k) == 0)
					break;
		}
		if (key == NULL && !session_proxy_var(base[i], proxy_port))
			envp[n++] = base[i];
	}
	/* Offsets, not pointers: vars may move while it grows. */
	json_object_foreach((json_t *)tenv, key, v)
		if (json_is_string(v) && !session_our_var(key) &&
		    !session_proxy_var(key, proxy_port)) {
			offs[nvars++] = vars->len;
			buf_printf(vars, "%s=%s", key, json_string_value(v));
			buf_add(vars, "", 1);
		}
	offs[nvars++] = vars->len;
	buf_addstr(vars, "STEXEC_SESSION_ID=");
	buf_add(vars, s->id, strlen(s->id) + 1);
	offs[nvars++] = vars->len;
	buf_addstr(vars, "STEXEC_TOOL_USE_ID=");
	buf_add(vars, exec_tool_id(t), strlen(exec_tool_id(t)) + 1);
	offs[nvars++] = vars->len;
	buf_addstr(vars, "STEXEC_PROGRESS_FD=3");
	/* NO_PROXY empty: localhost too goes through the proxy's rules. */
	for (j = 0; proxy_port != 0 && j < nitems(proxy_vars); j++) {
		buf_add(vars, "", 1);
		offs[nvars++] = vars->len;
		if (j < 6)
			buf_printf(vars, "%s=%s://127.0.0.1:%u", proxy_vars[j],
			    j < 4 ? "http" : "socks5h", (unsigned)proxy_port);
		else
			buf_printf(vars, "%s=", proxy_vars[j]);
	}
	for (i = 0; i < nvars; i++)
		envp[n++] = vars->data + offs[i];
	free(offs);
	return envp;
}

/*
 * A tool's profile: its ToolDef's; else read-only where --safe-read-only
 * holds it to its safety; else the session's; else the daemon's default;
 * never below the floor. Network and writable roots: the ToolDef's and the
 * session's.
 */
static void
session_sandbox(struct session *s, const struct exec_spawn *req,
    struct sandbox_spec *out, const char **roots)
{
	const struct tooldef_sandbox *td = req->sandbox;
	enum tooldef_sandbox_mode mode = td->mode;
	const json_t *lists[2] = { td->roots, s->sandbox.roots }, *v;
	size_t i, j;

	if (mode == TOOLDEF_SANDBOX_UNSET && req->safe &&
	    session_cfg.safe_read_only)
		mode = TOOLDEF_SANDBOX_READ_ONLY;
	if (mode == TOOLDEF_SANDBOX_UNSET)
		mode = s->sandbox.mode;
	if (mode == TOOLDEF_SANDBOX_UNSET)
		mode = session_cfg.default_sandbox;
	if (mode < session_cfg.min_sandbox)
		mode = session_cfg.min_sandbox;
	out->profile = mode == TOOLDEF_SANDBOX_READ_ONLY ? SANDBOX_READ_ONLY :
	    mode == TOOLDEF_SANDBOX_WORKSPACE_WRITE ? SANDBOX_WORKSPACE_WRITE :
	    SANDBOX_NONE;
	out->network = td->network != -1 ? td->network == 1 :
	    s->sandbox.network == 1;
	out->nroots = 0;
	for (i = 0; i < nitems(lists); i++)
		json_array_foreach(lists[i], j, v)
			if (out->nroots < SANDBOX_MAX_ROOTS)
				roots[out->nroots++] = json_string_value(v);
	out->roots = roots;
}

/* The session's cwd or env changed (S14): a restart and a reload keep it. */
static void
session_context_moved(struct session *s)
{
	if (exec_context_gen(s->ex) == s->context_gen)
		return;
	s->context_gen = exec_context_gen(s->ex);
	session_mcp_roots_changed(s);
	if (session_hooks != NULL && session_hooks->contexted != NULL)
		session_hooks->contexted(s);
}

static void
session_spawn(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req)
{
	const char *roots[SANDBOX_MAX_ROOTS];
	struct proc_spec spec = { 0 };
	struct session_tool *st = xcalloc(1, sizeof *st);
	struct buf vars = { 0 }, input = { 0 };
	struct netpolicy *policy;
	struct timeval tv;
	struct timespec start;
	char **envp, **wrapped;
	uint16_t port = 0;

	if (req->job->internal != TOOLDEF_INTERNAL_NONE) {
		free(st);
		session_internal(s, t, req);
		return;
	}
	if (tooldef_runner(exec_tool_def(t)) != TOOLDEF_RUNNER_PROCESS) {
		exec_tool_set_handle(t, st);
		session_running_add(s, t);
		/* Started as a process is once its exec is known: now. */
		clock_gettime(CLOCK_MONOTONIC, &start);
		session_proc_started(t, &start);
		if (tooldef_runner(exec_tool_def(t)) == TOOLDEF_RUNNER_MCP)
			st->mcp = session_mcp_call(s, t, req);
		else
			st->client = session_client_start(s, t, req);
		session_idle_update(s);
		return;
	}
	session_sandbox(s, req, &spec.sandbox, roots);
	if ((policy = session_net_policy(s, req->sandbox)) != NULL) {
		spec.sandbox.net_rules = true;
		st->netns = spec.sandbox.netns = session_net_ns(s, policy);
		if (spec.sandbox.netns != -1 &&
		    (st->proxy = session_net_proxy(s, spec.sandbox.netns,
		    policy, exec_tool_id(t), req->name, &port)) == NULL)
			spec.sandbox.netns = -1;
		netpolicy_free(policy);
	}
	envp = session_envp(s, t, req->env, &vars, st->proxy != NULL ? port :
	    0);
	/*
	 * Parsed JSON, within the parser's depth bound, always encodes; were
	 * it ever not to, the tool gets no stdin and the log says so.
	 */
	if (jsonrpc_dump(&input, req->input) != 0)
		log_about(LOG_LEVEL_ERROR, s->id, exec_tool_id(t), req->name,
		    "cannot encode the input: the tool gets none");
	session_context_moved(s);
	wrapped = session_shell_argv(s, t, req, envp);
	spec.argv = wrapped != NULL ? wrapped : req->argv;
	spec.envp = envp;
	spec.cwd = req->cwd;
	spec.input = input.data != NULL ? input.data : "";
	spec.input_len = input.len;
	spec.timeout_ms = req->timeout_ms;
	spec.max_output = req->max_output;
	spec.stream_output = req->stream_output;
	spec.name = req->name;
	spec.user = s->user;
	spec.stdin_stream = req->job->stdin_stream;
	spec.early = req->stdin_early;
	spec.early_len = req->stdin_early_len;
	spec.early_eof = req->stdin_early_eof;
	spec.tty = req->job->tty;
	spec.cols = req->job->cols;
	spec.rows = req->job->rows;
	st->stream = req->stream_output;
	st->max_output = req->max_output;
	/* A job keeps its output whole from the start (job.h). */
	if (req->job->background && (st->job = job_new(s, exec_tool_id(t),
	    req->name, req->argv, req->job->tty)) != NULL) {
		spec.stream_output = true;
		st->yield = evtimer_new(session_cfg.base, session_yield_cb, t);
		tv.tv_sec = req->job->yield_ms / 1000;
		tv.tv_usec = (req->job->yield_ms % 1000) * 1000;
		evtimer_add(st->yield, &tv);
	}
	session_limits(req->limits, &spec.limits);
	st->proc = proc_spawn(&spec, &session_proc_ops, t);
	exec_tool_set_handle(t, st);
	if (s->paused)
		proc_pause(st->proc, true);
	free(wrapped);
	buf_free(&input);
	free(envp);
	buf_free(&vars);

	session_running_add(s, t);
	session_idle_update(s);
}

/* The tools with a process, or answered by the daemon, not yet ended. */
static void
session_running_add(struct session *s, struct exec_tool *t)
{
	if (s->nrunning == s->caprunning) {
		s->caprunning = s->caprunning ? s->caprunning * 2 : 4;
		s->running = xreallocarray(s->running, s->caprunning,
		    sizeof *s->running);
	}
	s->running[s->nrunning++] = t;
}

static void
session_running_del(struct session *s, struct exec_tool *t)
{
	size_t i;

	for (i = 0; i < s->nrunning; i++)
		if (s->running[i] == t) {
			s->running[i] = s->running[--s->nrunning];
			break;
		}
}

bool
session_tool_carried(struct exec_tool *t)
{
	struct session_tool *st = exec_tool_handle(t);

	return st != NULL && ((st->proc != NULL && proc_carried(st->proc)) ||
	    st->client != NULL || (st->mcp != NULL &&
	    session_mcp_carried(st->mcp)));
}

void
session_tool_save(struct exec_tool *t, struct handover_rec *r, json_t *o)
{
	struct session_tool *st = exec_tool_handle(t);
	json_t *proc;

	if (st->client != NULL) {
		session_client_save(st->client, o);
		return;
	}
	if (st->mcp != NULL) {
		session_mcp_save(st->mcp, o);
		return;
	}
	proc = json_object();
	proc_save(st->proc, r, proc);
	json_object_set_new(o, "proc", proc);
	json_object_set_new(o, "stream", json_boolean(st->stream));
	handover_put(r, o, "carry1", st->carry[0].bytes, st->carry[0].len);
	handover_put(r, o, "carry2", st->carry[1].bytes, st->carry[1].len);
	if (st->proxy != NULL) {
		json_object_set_new(o, "proxy", proxy_tool_save(st->proxy, r));
		handover_keep_fd(st->netns);
		json_object_set_new(o, "netns", json_integer(st->netns));
	}
}

void
session_tool_adopt(struct session *s, struct exec_tool *t,
    const struct handover_in *in, const json_t *o)
{
	struct session_tool *st = xcalloc(1, sizeof *st);
	const json_t *v;
	const char *data;
	size_t n, i;

	if ((v = json_object_get(o, "client")) != NULL) {
		exec_tool_set_handle(t, st);
		session_running_add(s, t);
		st->client = session_client_adopt(s, t, v);
		return;
	}
	if ((v = json_object_get(o, "mcp")) != NULL) {
		exec_tool_set_handle(t, st);
		session_running_add(s, t);
		st->mcp = session_mcp_adopt(s, t, v);
		return;
	}
	for (i = 0; i < 2; i++) {
		data = handover_get(in, o, i == 0 ? "carry1" : "carry2", &n);
		if (n <= sizeof st->carry[i].bytes) {
			memcpy(st->carry[i].bytes, data, n);
			st->carry[i].len = n;
		}
	}
	st->stream = json_is_true(json_object_get(o, "stream"));
	if ((v = json_object_get(o, "proxy")) != NULL) {
		st->netns = session_net_adopt(s, json_object_get(v, "policy"),
		    json_object_get(o, "netns"));
		if (s->net_quota == NULL)
			s->net_quota = proxy_quota_new();
		if ((st->proxy = proxy_tool_adopt(in, v, s->net_quota, s->id,
		    exec_tool_id(t), exec_tool_name(t))) == NULL)
			log_about(LOG_LEVEL_WARN, s->id, exec_tool_id(t),
			    exec_tool_name(t), "network: its proxy was not "
			    "carried by the reload: its connections fail from "
			    "now on");
	}
	st->proc = proc_adopt(in, json_object_get(o, "proc"), &session_proc_ops,
	    t);
	exec_tool_set_handle(t, st);
	session_running_add(s, t);
}

static void
session_proc_line(void *arg, const char *line, size_t len)
{
	exec_progress_line(arg, line, len);
}

/*
 * Its process started (its execve happened, maybe learnt later: proc.h),
 * at: how long since addTool (none for restored tools). stats and the
 * metric count the same starts.
 */
static void
session_proc_started(void *arg, const struct timespec *at)
{
	struct exec_tool *t = arg;
	struct session *s = exec_arg(exec_tool_exec(t));
	uint64_t stamp = metrics_stamp(at);

	session_started++;
	metrics_count(METRICS_TOOLS_STARTED);
	metrics_observe_until(METRICS_START_DELAY, exec_tool_stamp(t,
	    EXEC_STAMP_ADDED), stamp);
	log_about(LOG_LEVEL_DEBUG, s->id, exec_tool_id(t), exec_tool_name(t),
	    "started");
	exec_tool_set_stamp(t, EXEC_STAMP_STARTED, stamp);
}

static struct proc *
session_proc(struct exec_tool *t)
{
	return ((struct session_tool *)exec_tool_handle(t))->proc;
}

/* Streamed output goes to the core cut at character boundaries. */
static void
session_proc_chunk(void *arg, int fd, const char *data, size_t len)
{
	struct session_tool *st = exec_tool_handle(arg);
	struct buf tmp = { 0 };
	const char *send;
	size_t n;

	if (st->job != NULL)
		job_output(st->job, data, len);
	if (!st->stream)
		return;
	send = utf8_carry_feed(&st->carry[fd == 2], data, len, &tmp, &n);
	exec_output_chunk(arg, fd, send, n);
	buf_free(&tmp);
}

/*
 * The process is gone: what a stream held back of a character goes out as
 * is (repaired when encoded); then the tool forgets its process.
 */
static void
session_tool_done(struct exec_tool *t, bool flush)
{
	struct session_tool *st = exec_tool_handle(t);
	int i;

	for (i = 0; flush && st->stream && i < 2; i++)
		if (st->carry[i].len > 0)
			exec_output_chunk(t, i + 1, st->carry[i].bytes,
			    st->carry[i].len);
	job_free(st->job);
	if (st->client != NULL)
		session_client_drop(st->client);
	if (st->mcp != NULL)
		session_mcp_drop(st->mcp);
	proxy_tool_free(st->proxy);
	if (st->yield != NULL)
		event_free(st->yield);
	if (st->answer != NULL)
		event_free(st->answer);
	free(st->content);
	exec_tool_set_handle(t, NULL);
	free(st);
}

/*
 * A background call still running after its yieldMs becomes a job: its
 * result goes now, its process is the session's (doc/design.md §7, Jobs).
 */
static void
session_yield_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exec_tool *t = arg;
	struct session_tool *st = exec_tool_handle(t);
	struct session *s = exec_arg(exec_tool_exec(t));
	struct job *job = st->job;
	struct timeval soon = { 0, 10000 };
	char *content;
	json_t *meta;

	if (!exec_tool_detachable(t))
		return;
	/*
	 * Still waiting for a --max-procs slot, or for its exec: a job is a
	 * process that started (one that fails before gets its result).
	 */
	if (proc_pid(st->proc) == 0 || !proc_execd(st->proc)) {
		evtimer_add(st->yield, &soon);
		return;
	}
	session_running_del(s, t);
	st->job = NULL;
	meta = job_attach(job, st->proc, st->max_output, &content);
	job_take_proxy(job, st->proxy);
	st->proxy = NULL;
	session_tool_done(t, true);
	exec_detach(t, content, meta);
	session_idle_update(s);
}

/*
 * A tool the daemon answers itself (internal): answered from the loop,
 * never from inside the executor's effect; req NULL: it was cancelled.
 */
static void
session_internal(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req)
{
	struct session_tool *st;
	struct timeval now = { 0, 0 };
	bool wait = false;

	if (req == NULL) {
		st = exec_tool_handle(t);
		if (st->shell)
			shell_cancel(s, t);
		else
			job_kill_cancel(s, t);
	} else {
		st = xcalloc(1, sizeof *st);
		exec_tool_set_handle(t, st);
		session_running_add(s, t);
		st->answer = evtimer_new(session_cfg.base, session_answer_cb,
		    t);
		st->shell = req->job->internal == TOOLDEF_INTERNAL_SHELL;
		if (st->shell)
			st->content = shell_call(s, t, req, &st->is_error,
			    &wait);
		else
			st->content = job_internal(s, t,
			    (int)req->job->internal, req->input,
			    &st->is_error, &wait);
	}
	if (!wait)
		evtimer_add(st->answer, &now);
}

static void
session_answer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct exec_tool *t = arg;
	struct session_tool *st = exec_tool_handle(t);
	char *content = st->content;

	st->content = NULL;
	session_internal_done(t, st->is_error, "%s", content != NULL ?
	    content : "");
	free(content);
}

static void
session_internal_done(struct exec_tool *t, bool is_error, const char *fmt,
    ...)
{
	struct session *s = exec_arg(exec_tool_exec(t));
	struct exec_exit x = { .end = EXEC_END_EXITED, .status = is_error };
	va_list ap;
	char *text;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) == -1)
		fatal("vasprintf failed");
	va_end(ap);
	x.output.head = text;
	x.output.head_len = x.output.total = strlen(text);
	x.output.tail = "";
	session_running_del(s, t);
	session_tool_done(t, false);
	exec_exited(t, &x);
	free(text);
	session_job_ended(s);
}

/*
 * bash_session's shell: started as a tool of req would be (sandbox,
 * network rules, environment, working directory, user, limits), but on a
 * raw terminal, without a timeout, as a job of the session.
 */
static struct job *
session_shell_spawn(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req, char *const *argv)
{
	const char *roots[SANDBOX_MAX_ROOTS];
	struct proc_spec spec = { 0 };
	struct proxy_tool *proxy = NULL;
	struct buf vars = { 0 };
	struct netpolicy *policy;
	struct job *j;
	char **envp;
	uint16_t port = 0;

	session_sandbox(s, req, &spec.sandbox, roots);
	if ((policy = session_net_policy(s, req->sandbox)) != NULL) {
		spec.sandbox.net_rules = true;
		spec.sandbox.netns = session_net_ns(s, policy);
		if (spec.sandbox.netns != -1 && (proxy = session_net_proxy(s,
		    spec.sandbox.netns, policy, exec_tool_id(t), req->name,
		    &port)) == NULL)
			spec.sandbox.netns = -1;
		netpolicy_free(policy);
	}
	envp = session_envp(s, t, req->env, &vars, proxy != NULL ? port : 0);
	spec.argv = argv;
	spec.envp = envp;
	spec.cwd = req->cwd;
	spec.max_output = req->max_output;
	spec.stream_output = true;
	spec.name = req->name;
	spec.user = s->user;
	spec.tty = spec.tty_raw = true;
	session_limits(req->limits, &spec.limits);
	if ((j = job_spawn(s, exec_tool_id(t), req->name, &spec)) != NULL)
		job_take_proxy(j, proxy);
	else
		proxy_tool_free(proxy);
	free(envp);
	buf_free(&vars);
	return j;
}

/* A client-run call is over (session_client.c): d, or else x. */
static void
session_tool_finish(struct exec_tool *t, const struct exec_done *d,
    const struct exec_exit *x)
{
	struct session *s = exec_arg(exec_tool_exec(t));

	session_running_del(s, t);
	session_completed++;
	metrics_observe(METRICS_RUN, exec_tool_stamp(t, EXEC_STAMP_STARTED));
	exec_tool_set_stamp(t, EXEC_STAMP_ENDED, metrics_now());
	session_tool_done(t, false);
	if (d != NULL)
		exec_finish(t, d);
	else
		exec_exited(t, x);
	session_job_ended(s);
}

/* A bash_session call is done. */
static void
session_shell_answer(struct exec_tool *t, const struct exec_exit *x)
{
	struct session *s = exec_arg(exec_tool_exec(t));

	session_running_del(s, t);
	session_tool_done(t, false);
	exec_exited(t, x);
	session_job_ended(s);
}

/* A kill_shell call is answered now that its job is dead. */
static void
session_job_answered(struct exec_tool *t, const char *text)
{
	session_internal_done(t, false, "%s", text);
}

/* A job ended: a closing session may be done. */
static void
session_job_ended(struct session *s)
{
	if (s->closing && !exec_busy(s->ex) && job_running(s) == 0 &&
	    session_mcp_gone(s))
		session_finish(s);
	else
		session_idle_update(s);
}

void
session_jobs_yield_now(void)
{
	struct exec_tool **calls = NULL;
	struct session_tool *st;
	struct session *s;
	size_t i, n = 0;

	for (s = session_list; s != NULL; s = s->next)
		for (i = 0; i < s->nrunning; i++)
			if ((st = exec_tool_handle(s->running[i])) != NULL &&
			    st->job != NULL) {
				calls = xreallocarray(calls, n + 1,
				    sizeof *calls);
				calls[n++] = s->running[i];
			}
	/* Each may become a job now, which changes the running lists. */
	for (i = 0; i < n; i++)
		session_yield_cb(-1, 0, calls[i]);
	free(calls);
}

unsigned
session_jobs_running(void)
{
	struct session_tool *st;
	struct session *s;
	unsigned n = 0;
	size_t i;

	for (s = session_list; s != NULL; s = s->next) {
		n += s->jobs_running;
		/* And the calls that may still become one. */
		for (i = 0; i < s->nrunning; i++)
			if ((st = exec_tool_handle(s->running[i])) != NULL &&
			    st->job != NULL)
				n++;
	}
	return n;
}

int
session_tool_write(struct exec_tool *t, const char *data, size_t len,
    bool eof, const char **why)
{
	struct session_tool *st = exec_tool_handle(t);

	if (st != NULL && st->proc != NULL)
		return proc_write(st->proc, data, len, eof, why);
	if (st != NULL) {
		*why = "it does not run";
		return -1;
	}
	/* Not started yet: held until it is (extension). */
	switch (exec_stdin_early(t, data, len, eof, PROC_STDIN_MAX)) {
	case EXEC_STDIN_OK:
		return 0;
	case EXEC_STDIN_NOT_STREAMED:
		*why = "it has not started, and its stdin will not be "
		    "streamed (its ToolDef's stdin is not \"stream\")";
		return -1;
	case EXEC_STDIN_CLOSED:
		*why = "its stdin is closed";
		return -1;
	case EXEC_STDIN_FULL:
		*why = PROC_STDIN_FULL;
		return -1;
	default:
		*why = "it does not run";
		return -1;
	}
}

static void
session_rejournal(struct session *s)
{
	if (session_hooks != NULL && session_hooks->remade != NULL)
		session_hooks->remade(s);
}

static void
session_emit(struct session *s, const char *method, json_t *params)
{
	session_notify(s, method, params, false);
	json_decref(params);
}

static void
session_notify(struct session *s, const char *method, json_t *params,
    bool elide)
{
	struct buf out = { 0 }, as = { 0 };
	json_t *copy;

	if (!elide || session_hooks == NULL || !session_hooks->journaling()) {
		session_note(s, method, params);
		return;
	}
	/* As a streamed chunk: the journal keeps its place and size. */
	json_object_set_new(params, "sessionId", json_string(s->id));
	json_object_set_new(params, "seq", json_integer(
	    (json_int_t)(s->last_seq + 1)));
	copy = json_copy(params);
	json_object_set_new(copy, "elided", json_integer((json_int_t)
	    json_string_length(json_object_get(params, "text"))));
	json_object_set_new(copy, "text", json_string(""));
	if (jsonrpc_notification(&out, method, params) != 0)
		session_note_repaired(s, &out, method, params);
	if (jsonrpc_notification(&as, method, copy) != 0)
		fatal("%s: cannot encode an elided %s", __func__, method);
	session_log(s, &out, false, &as);
	buf_free(&as);
	json_decref(copy);
}

/* The supervisor's words for how a process ended, in the core's. */
static enum exec_end
session_exec_end(enum proc_end end, enum toolcg_hit hit)
{
	switch (end) {
	case PROC_LIMIT_HIT:
		return hit == TOOLCG_HIT_MEMORY ? EXEC_END_MEMORY_LIMIT :
		    EXEC_END_PROCESS_LIMIT;
	case PROC_EXITED:
		return EXEC_END_EXITED;
	case PROC_SIGNALED:
		return EXEC_END_SIGNALED;
	case PROC_TIMED_OUT:
		return EXEC_END_TIMED_OUT;
	case PROC_SPAWN_FAILED:
		return EXEC_END_SPAWN_FAILED;
	default:
		return EXEC_END_KILLED;
	}
}

static void
session_proc_exit(void *arg, const struct proc_exit *px)
{
	struct exec_tool *t = arg;
	struct session_tool *st = exec_tool_handle(t);
	struct session *s = exec_arg(exec_tool_exec(t));
	struct exec_exit x = {
		.end = session_exec_end(px->end, px->hit),
		.status = px->status,
		.signal = px->signal,
		.duration_ms = px->duration_ms,
		.error = px->error,
		.output = px->output,
		.output_error = px->output_error,
		.limit = px->limit,
		.peak_measured = px->peak_measured,
		.peak_memory = px->peak_memory,
		.cpu_measured = px->cpu_measured,
		.cpu_ms = px->cpu_ms,
	};
	session_running_del(s, t);
	session_completed++;
	metrics_observe(METRICS_RUN, exec_tool_stamp(t, EXEC_STAMP_STARTED));
	exec_tool_set_stamp(t, EXEC_STAMP_ENDED, metrics_now());
	session_keep_output(s, t, &x);
	if (st->proxy != NULL)
		x.network = proxy_tool_json(st->proxy);
	session_tool_done(t, true);
	exec_exited(t, &x);
	session_context_moved(s);
	json_decref(x.network);
	session_job_ended(s);
}

/*
 * A whole-output file the result will name belongs to the session; one no
 * result names (the tool was killed or discarded) is removed now.
 */
static void
session_keep_output(struct session *s, struct exec_tool *t,
    const struct exec_exit *x)
{
	if (x->output.path == NULL)
		return;
	if (!exec_exit_uses_output(t, x)) {
		if (unlink(x->output.path) != 0)
			log_warn("cannot remove %s: %s", x->output.path,
			    strerror(errno));
		return;
	}
	session_keep_file(s, x->output.path, x->output.total, exec_tool_id(t));
}

/* A whole-output file is the session's (outputFiles), made at the first. */
static void
session_keep_file(struct session *s, const char *path, uint64_t bytes,
    const char *tool_use_id)
{
	if (s->files == NULL)
		s->files = outdir_set_new();
	outdir_add(s->files, path, bytes, tool_use_id);
}

/* Give a notification its seq, log it, and hand it to the subscribers. */
static void
session_note(struct session *s, const char *method, json_t *params)
{
	struct buf out = { 0 }, more = { 0 };
	int rc;

	/*
	 * The common case: sessionId and seq written after params' own
	 * members, as setting them would place them, without setting them.
	 */
	if (json_object_get(params, "sessionId") == NULL &&
	    json_object_get(params, "seq") == NULL &&
	    session_big_text(params) == NULL) {
		/* Most notes fit; from buf's 64 bytes it took three reallocs. */
		buf_grow(&out, 256);
		session_note_tail(s, &more);
		rc = jsonrpc_notification_with(&out, method, params, more.data,
		    more.len);
		buf_free(&more);
		if (rc == 0) {
			session_log(s, &out, strcmp(method, "turn_end") == 0,
			    NULL);
			return;
		}
	}
	json_object_set_new(params, "sessionId", json_string(s->id));
	json_object_set_new(params, "seq", json_integer(
	    (json_int_t)(s->last_seq + 1)));
	if (session_note_sliced(s, method, params))
		return;
	if (jsonrpc_notification(&out, method, params) != 0)
		session_note_repaired(s, &out, method, params);
	session_log(s, &out, strcmp(method, "turn_end") == 0, NULL);
}

/* The members every note's params end with: ,"sessionId":ID,"seq":N */
static void
session_note_tail(const struct session *s, struct buf *b)
{
	char seq[BUF_U64_MAX];

	buf_addstr(b, ",\"sessionId\":");
	jsonrpc_add_string_repaired(b, s->id, strlen(s->id));
	buf_addstr(b, ",\"seq\":");
	buf_add(b, seq, buf_fmt_u64(seq, s->last_seq + 1, 10));
}

/*
 * session_note for params already encoded, a compact JSON object with
 * members (the executor's tool_status and state): the same line.
 */
static void
session_note_text(struct session *s, const char *method, const char *params,
    size_t len)
{
	struct buf out = { 0 };

	/* One allocation: the log keeps it, at the size it grew to. */
	buf_grow(&out, 96 + len + strlen(s->id));
	buf_addstr(&out, "{\"jsonrpc\":\"2.0\",\"method\":");
	jsonrpc_add_string_repaired(&out, method, strlen(method));
	buf_addstr(&out, ",\"params\":");
	buf_add(&out, params, len - 1);         /* back over its "}" */
	session_note_tail(s, &out);
	buf_addstr(&out, "}}\n");
	session_log(s, &out, strcmp(method, "turn_end") == 0, NULL);
}

/*
 * A notification that could not be encoded (text that is not valid UTF-8,
 * a bug) still goes out, repaired: a tool_result is never lost (S10).
 */
static void
session_note_repaired(struct session *s, struct buf *out,
    const char *method, const json_t *params)
{
	json_t *fixed = utf8_repair_json(params);

	log_about(LOG_LEVEL_ERROR, s->id, NULL, NULL, "cannot encode a %s "
	    "notification; its text was repaired", method);
	if (jsonrpc_notification(out, method, fixed) != 0)
		fatal("cannot encode a repaired %s notification", method);
	json_decref(fixed);
}

/* The content of a tool_result too long to encode in one loop pass. */
static const json_t *
session_big_text(const json_t *params)
{
	const json_t *text = json_object_get(json_object_get(params, "result"),
	    "content");

	return json_string_length(text) > SESSION_SLICE ? text : NULL;
}

/*
 * Encode v as jsonrpc_dump does into *cur, except the string text: its
 * opening quote ends *cur, which becomes tail for the rest.
 */
static int
session_split(struct buf **cur, struct buf *tail,
    const json_t *v, const json_t *text)
{
	const char *key;
	json_t *item;
	size_t n = 0;

	if (v == text) {
		buf_add(*cur, "\"", 1);
		*cur = tail;
		buf_add(*cur, "\"", 1);
		return 0;
	}
	if (!json_is_object(v))
		return jsonrpc_dump(*cur, v);
	buf_add(*cur, "{", 1);
	json_object_foreach((json_t *)v, key, item) {
		if (n++ > 0)
			buf_add(*cur, ",", 1);
		jsonrpc_add_string_repaired(*cur, key, strlen(key));
		buf_add(*cur, ":", 1);
		if (session_split(cur, tail, item, text) != 0)
			return -1;
	}
	buf_add(*cur, "}", 1);
	return 0;
}

/*
 * A tool_result whose content is long is encoded in slices across loop
 * passes (other clients are served between them): its note holds its seq
 * in the log, and later notes and drain replies wait behind it. False when
 * params are not such a result, or without a loop.
 */
static bool
session_note_sliced(struct session *s, const char *method, json_t *params)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":";
	const json_t *text = session_big_text(params);
	struct slicer *sl;
	struct buf *cur;
	json_t *fixed = NULL;

	if (text == NULL || session_slice_ev == NULL || session_stopping)
		return false;
	sl = xcalloc(1, sizeof *sl);
	for (;;) {
		cur = &sl->out;
		buf_add(cur, head, strlen(head));
		jsonrpc_add_string_repaired(cur, method, strlen(method));
		buf_add(cur, ",\"params\":", strlen(",\"params\":"));
		if (session_split(&cur, &sl->tail, fixed != NULL ? fixed :
		    params, text) == 0 && cur == &sl->tail)
			break;
		if (fixed != NULL)
			fatal("cannot encode a repaired %s notification",
			    method);
		/* As session_note_repaired: S10 needs the result. */
		log_about(LOG_LEVEL_ERROR, s->id, NULL, NULL, "cannot encode "
		    "a %s notification; its text was repaired", method);
		buf_free(&sl->out);
		buf_free(&sl->tail);
		fixed = utf8_repair_json(params);
		text = session_big_text(fixed);
	}
	buf_add(&sl->tail, "}\n", 2);
	/* A copy the result need not outlive: the line grows as it shrinks. */
	sl->text = readonce_new(json_string_value(text),
	    json_string_length(text));
	json_decref(fixed);
	sl->seq = session_log_note(s, false)->seq;
	*s->slicers_tail = sl;
	s->slicers_tail = &sl->next;
	session_logged(s);
	session_slice_queue(s);
	return true;
}

/* Put s in the queue of sessions to slice, and have the next pass run. */
static void
session_slice_queue(struct session *s)
{
	if (s->slice_queued || s->slicers == NULL)
		return;
	s->slice_queued = true;
	s->slice_next = NULL;
	*session_slicing_tail = s;
	session_slicing_tail = &s->slice_next;
	session_slice_arm();
}

/* A timer, not event_active: the loop polls I/O before it runs. */
static void
session_slice_arm(void)
{
	struct timeval now = { 0, 0 };

	if (session_slicing != NULL && !evtimer_pending(session_slice_ev, NULL))
		evtimer_add(session_slice_ev, &now);
}

/* One slice of one session per loop pass, the sessions in turn. */
static void
session_slice_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = session_slicing;

	if (s == NULL)
		return;
	if ((session_slicing = s->slice_next) == NULL)
		session_slicing_tail = &session_slicing;
	s->slice_queued = false;
	session_slice(s, SESSION_SLICE);
	session_slice_arm();
}

/*
 * Encode up to max bytes of the session's first slicer; when it is done,
 * its note gets its line and whatever waited behind it goes out. May free
 * s (a close that waited for it).
 */
static void
session_slice(struct session *s, size_t max)
{
	struct slicer *sl = s->slicers;
	const char *text = readonce_data(sl->text);
	size_t len = readonce_len(sl->text), n = len - sl->done;
	struct note *n0, *nt, as;
	uint64_t seq;

	if (sl->encoded)
		goto journal;
	if (n > max) {
		/* Cut at a character boundary: the text is valid UTF-8. */
		n = max;
		while (n > 1 && ((unsigned char)text[sl->done + n] & 0xc0) ==
		    0x80)
			n--;
	}
	jsonrpc_add_string_part(&sl->out, text + sl->done, n);
	sl->done += n;
	readonce_release(sl->text, sl->done);
	if (sl->done < len) {
		session_slice_queue(s);
		return;
	}
	buf_add(&sl->out, sl->tail.data, sl->tail.len);
	sl->encoded = true;
	if (session_hooks != NULL && session_hooks->logged_big != NULL) {
		as = *session_note_at(s, sl->seq);
		as.line = sl->out.data;
		as.len = sl->out.len;
		sl->jb = session_hooks->logged_big(s, &as);
	}
	if (sl->jb != NULL && max != SIZE_MAX) {
		session_slice_queue(s);
		return;
	}
journal:
	/*
	 * Journaled before any subscriber can be sent it (doc/design.md §7,
	 * Restart), in slices: the loop never holds a 96 MiB write.
	 */
	if (sl->jb != NULL && !journal_big_step(sl->jb, max == SIZE_MAX ?
	    SIZE_MAX : SESSION_JOURNAL_SLICE)) {
		session_slice_queue(s);
		return;
	}
	n0 = session_note_at(s, sl->seq);
	n0->line = sl->out.data;
	n0->len = sl->out.len;
	n0->shared = xmalloc(sizeof *n0->shared);
	n0->shared->data = sl->out.data;
	n0->shared->refs = 1;
	if (session_hooks != NULL && session_hooks->logged_big == NULL)
		session_hooks->logged(s, n0);
	/* Every note from this one on ends that much later. */
	s->bytes_end += sl->out.len;
	for (seq = sl->seq; seq <= s->last_seq; seq++) {
		nt = session_note_at(s, seq);
		nt->end += sl->out.len;
	}
	if ((s->slicers = sl->next) == NULL)
		s->slicers_tail = &s->slicers;
	buf_free(&sl->tail);
	readonce_free(sl->text);
	journal_big_free(sl->jb);
	free(sl);
	session_logged(s);
	session_wake(s);
	if (s->slicers != NULL)
		session_slice_queue(s);
	else if (s->finish_wanted)
		session_finish(s);
}

/*
 * A drain reply (a result, or else an error) goes out after every
 * notification logged so far has gone to its connection (S12): now, or
 * once the notes being encoded are done.
 */
static void
session_wait(struct session *s, struct ticket *tk, json_t *result, int code,
    const char *message)
{
	struct waiter *w = xcalloc(1, sizeof *w);

	w->after = s->last_seq;
	w->tk = tk;
	w->result = result;
	w->code = code;
	w->message = message != NULL ? xstrdup(message) : NULL;
	*s->waiters_tail = w;
	s->waiters_tail = &w->next;
	session_wake(s);
}

/* Answer the waiters whose notes are all done. */
static void
session_wake(struct session *s)
{
	struct waiter *w;

	while ((w = s->waiters) != NULL && (s->slicers == NULL ||
	    s->slicers->seq > w->after)) {
		if ((s->waiters = w->next) == NULL)
			s->waiters_tail = &s->waiters;
		session_catch_up(s, conn_ticket_conn(w->tk));
		if (w->result != NULL)
			conn_ticket_reply(w->tk, w->result);
		else
			conn_ticket_error(w->tk, w->code, "%s", w->message);
		free(w->message);
		free(w);
	}
}

/*
 * A streamOutput chunk, encoded straight from the tool's bytes in one pass
 * (the bulk of a streaming tool's traffic); the same shape as any progress
 * notification: {turn, toolUseId, data: {stream, text}, sessionId, seq}.
 */
static void
session_note_output(struct session *s, const struct exec_effect *e)
{
	struct buf out = { 0 }, elided = { 0 };
	const char *id = exec_tool_id(e->tool), *data;
	char num[96];
	int n;

	n = snprintf(num, sizeof num, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"progress\",\"params\":{\"turn\":%llu,\"toolUseId\":",
	    (unsigned long long)exec_tool_turn(e->tool));
	buf_add(&out, num, (size_t)n);
	jsonrpc_add_string_repaired(&out, id, strlen(id));
	data = e->fd == 2 ? ",\"data\":{\"stream\":\"stderr\",\"text\":" :
	    ",\"data\":{\"stream\":\"stdout\",\"text\":";
	buf_add(&out, data, strlen(data));
	jsonrpc_add_string_repaired(&out, e->text, e->text_len);
	n = snprintf(num, sizeof num, "},\"sessionId\":\"%s\",\"seq\":%llu}}\n",
	    s->id, (unsigned long long)(s->last_seq + 1));
	buf_add(&out, num, (size_t)n);
	if (session_hooks == NULL || !session_hooks->journaling()) {
		session_log(s, &out, false, NULL);
		return;
	}
	/*
	 * The journal keeps the chunk's place (seq has no gaps after a
	 * restart) and size, not its text: writing every streamed byte twice
	 * halved the stream's throughput, for output of a tool that is dead
	 * by the time anyone reads it back.
	 */
	n = snprintf(num, sizeof num, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"progress\",\"params\":{\"turn\":%llu,\"toolUseId\":",
	    (unsigned long long)exec_tool_turn(e->tool));
	buf_add(&elided, num, (size_t)n);
	jsonrpc_add_string_repaired(&elided, id, strlen(id));
	buf_printf(&elided, ",\"data\":{\"stream\":\"%s\",\"text\":\"\","
	    "\"elided\":%zu},\"sessionId\":\"%s\",\"seq\":%llu}}\n",
	    e->fd == 2 ? "stderr" : "stdout", e->text_len, s->id,
	    (unsigned long long)(s->last_seq + 1));
	session_log(s, &out, false, &elided);
	buf_free(&elided);
}

/*
 * Append a whole notification line (its seq is last_seq + 1) to the log;
 * the journal gets it too, or else journal_as (an elided chunk).
 */
static void
session_log(struct session *s, struct buf *out, bool turn_end,
    const struct buf *journal_as)
{
	struct note *n = session_log_note(s, turn_end);
	struct note as;

	n->line = out->data;
	n->len = out->len;
	s->bytes_end += out->len;
	n->end = s->bytes_end;
	n->output = journal_as != NULL;
	/* Journaled before any subscriber can be sent it. */
	if (session_hooks != NULL && journal_as == NULL)
		session_hooks->logged(s, n);
	else if (session_hooks != NULL) {
		as = *n;
		as.line = journal_as->data;
		as.len = journal_as->len;
		session_hooks->logged(s, &as);
	}
	session_logged(s);
}

/* A new note at the end of the log, with the next seq and no line yet. */
struct note *
session_log_note(struct session *s, bool turn_end)
{
	struct note *n;

	if (s->count == s->cap) {
		struct note *grown;
		size_t i, cap = s->cap ? s->cap * 2 : 16;

		/* Unroll the ring into a larger array. */
		grown = xcalloc(cap, sizeof *grown);
		for (i = 0; i < s->count; i++)
			grown[i] = s->notes[(s->head + i) % s->cap];
		free(s->notes);
		s->notes = grown;
		s->cap = cap;
		s->head = 0;
	}
	n = &s->notes[(s->head + s->count) % s->cap];
	s->count++;
	n->seq = ++s->last_seq;
	n->line = NULL;
	n->len = 0;
	n->shared = NULL;
	n->output = false;
	n->end = s->bytes_end;
	if (turn_end) {
		s->prev_turn_seq = s->cur_turn_seq;
		s->cur_turn_seq = n->seq + 1;
	}
	return n;
}

/* The log grew or a note got its line: send, trim, and watch the lag. */
static void
session_logged(struct session *s)
{
	struct sub *sub, *next;

	for (sub = s->subs; sub != NULL; sub = next) {
		next = sub->snext;
		session_sub_pump(sub);
	}
	session_trim(s);
	session_pressure(s);
}

static void
session_note_free(struct note *n)
{
	if (n->shared != NULL)
		session_unshare(n->line, n->len, n->shared);
	else
		free(n->line);
}

/* A holder of a shared line is done with it. */
static void
session_unshare(const void *data, size_t len, void *arg)
{
	struct shared *sh = arg;

	if (--sh->refs == 0) {
		free(sh->data);
		free(sh);
	}
}

static struct note *
session_note_at(struct session *s, uint64_t seq)
{
	uint64_t first;

	if (s->count == 0)
		return NULL;
	first = s->notes[s->head].seq;
	if (seq < first || seq > s->last_seq)
		return NULL;
	return &s->notes[(s->head + (seq - first)) % s->cap];
}

/* Bytes of retained notifications from seq on. */
static uint64_t
session_lag(struct session *s, uint64_t seq)
{
	struct note *n = session_note_at(s, seq);

	if (n == NULL)
		return 0;
	return s->bytes_end - (n->end - n->len);
}

/*
 * Retention: drop notes older than the previous turn, and past the byte
 * budget the oldest, but never one a subscriber still has to get. A
 * subscriber so far behind that the log passes four budgets is cut off;
 * it may come back with `since`.
 */
void
session_trim(struct session *s)
{
	struct note *n;
	struct sub *sub, *next;
	struct conn *c;
	uint64_t need = s->last_seq + 1, retained;

	for (sub = s->subs; sub != NULL; sub = next) {
		next = sub->snext;
		if (session_lag(s, sub->next) > 4 * session_cfg.retention_bytes) {
			log_about(LOG_LEVEL_WARN, s->id, NULL, NULL,
			    "disconnecting a subscriber %llu notifications "
			    "behind", (unsigned long long)(s->last_seq + 1 -
			    sub->next));
			c = sub->c;
			/* Free the sub first: closing may free the conn's subs. */
			session_sub_free(sub);
			conn_close_after_flush(c);
			continue;
		}
		if (sub->next < need)
			need = sub->next;
	}
	while (s->count > 0) {
		n = &s->notes[s->head];
		retained = s->bytes_end - (n->end - n->len);
		if (n->seq >= need || n->line == NULL)
			break;
		if (retained <= session_cfg.retention_bytes &&
		    n->seq >= s->prev_turn_seq)
			break;
		session_note_free(n);
		s->head = (s->head + 1) % s->cap;
		s->count--;
	}
}

/* Backpressure: stop reading the tools' pipes while a subscriber lags. */
static void
session_pressure(struct session *s)
{
	uint64_t lag = 0, l;
	struct sub *sub;
	bool pause;
	size_t i;

	for (sub = s->subs; sub != NULL; sub = sub->snext)
		if ((l = session_lag(s, sub->next)) > lag)
			lag = l;
	if (!s->paused && lag > SESSION_PAUSE_LAG)
		pause = true;
	else if (s->paused && lag < SESSION_RESUME_LAG)
		pause = false;
	else
		return;
	s->paused = pause;
	log_about(LOG_LEVEL_DEBUG, s->id, NULL, NULL, "%s its tools' output",
	    pause ? "pausing" : "resuming");
	for (i = 0; i < s->nrunning; i++)
		if (session_proc(s->running[i]) != NULL)
			proc_pause(session_proc(s->running[i]), pause);
}

int
session_subscribe(struct session *s, struct conn *c, int64_t since,
    struct sub **out, uint64_t *last_seq, uint64_t *oldest)
{
	struct sub *sub;
	uint64_t first = s->count > 0 ? s->notes[s->head].seq :
	    s->last_seq + 1;
	uint64_t next = since < 0 ? s->last_seq + 1 : (uint64_t)since + 1;

	if (next < first) {
		*oldest = first;
		return STEXEC_ERR_LIMIT;
	}
	if (next > s->last_seq + 1)
		next = s->last_seq + 1;
	for (sub = s->subs; sub != NULL; sub = sub->snext)
		if (sub->c == c)
			break;
	if (sub == NULL) {
		sub = xcalloc(1, sizeof *sub);
		sub->s = s;
		sub->c = c;
		sub->snext = s->subs;
		if (s->subs != NULL)
			s->subs->prev = sub;
		s->subs = sub;
		conn_add_sub(c, sub);
		session_idle_update(s);
	}
	sub->next = next;
	*out = sub;
	*last_seq = s->last_seq;
	return 0;
}

void
session_unsubscribe(struct session *s, struct conn *c)
{
	struct sub *sub;

	for (sub = s->subs; sub != NULL; sub = sub->snext)
		if (sub->c == c) {
			session_sub_free(sub);
			return;
		}
}

void
session_sub_where(const struct sub *sub, const char **session_id,
    uint64_t *next)
{
	*session_id = sub->s->id;
	*next = sub->next;
}

void
session_sub_free(struct sub *sub)
{
	struct session *s = sub->s;

	if (sub->prev != NULL)
		sub->prev->snext = sub->snext;
	else
		s->subs = sub->snext;
	if (sub->snext != NULL)
		sub->snext->prev = sub->prev;
	conn_remove_sub(sub->c, sub);
	free(sub);
	session_pressure(s);
	session_idle_update(s);
}

void
session_sub_pump(struct sub *sub)
{
	session_sub_send(sub, false);
}

/*
 * Move notifications from the log to the subscriber's socket buffer: while
 * it is below its low watermark, or (all) every one it has not got yet.
 */
static void
session_sub_send(struct sub *sub, bool all)
{
	struct session *s = sub->s;
	struct note *n;

	while (sub->next <= s->last_seq &&
	    (all || conn_queued(sub->c) < CONN_OUT_LOW)) {
		if ((n = session_note_at(s, sub->next)) == NULL)
			fatal("session %s: seq %llu was trimmed under a "
			    "subscriber", s->id, (unsigned long long)sub->next);
		/* Notes are sent in order: none before this one is done. */
		if (n->line == NULL)
			break;
		if (n->shared != NULL) {
			n->shared->refs++;
			conn_write_ref(sub->c, n->line, n->len,
			    session_unshare, n->shared);
		} else
			conn_write(sub->c, n->line, n->len);
		sub->next++;
	}
	if (s->paused)
		session_pressure(s);
}

int
session_events(struct session *s, int64_t since, size_t max, struct buf *out,
    uint64_t *last_seq, uint64_t *oldest)
{
	uint64_t first = s->count > 0 ? s->notes[s->head].seq :
	    s->last_seq + 1, seq, from;
	struct note *n;
	size_t sent = 0;

	from = since < 0 ? first : (uint64_t)since + 1;
	if (from < first) {
		*oldest = first;
		return STEXEC_ERR_LIMIT;
	}
	buf_addstr(out, "[");
	*last_seq = s->last_seq;
	for (seq = from; seq <= s->last_seq && sent < max; seq++) {
		n = session_note_at(s, seq);
		if (n->line == NULL) {
			*last_seq = seq - 1;
			break;
		}
		if (sent++ > 0)
			buf_addstr(out, ",");
		buf_add(out, n->line, n->len - 1); /* without its newline */
		*last_seq = seq;
	}
	buf_addstr(out, "]");
	return 0;
}

/*
 * A reply that must follow the session's notifications (drain, close) is
 * about to go to c: first queue every notification c has not got. The log
 * bounds how much that can be.
 */
static void
session_catch_up(struct session *s, struct conn *c)
{
	struct sub *sub;

	for (sub = s->subs; sub != NULL; sub = sub->snext)
		if (c == NULL || sub->c == c)
			session_sub_send(sub, true);
}

void
session_close(struct session *s, struct ticket *tk)
{
	if (tk != NULL) {
		s->closers = xreallocarray(s->closers, s->nclosers + 1,
		    sizeof *s->closers);
		s->closers[s->nclosers++] = tk;
	}
	if (s->closing)
		return;
	s->closing = true;
	session_idle_update(s);
	log_about(LOG_LEVEL_INFO, s->id, NULL, NULL, "closing");
	session_hook_end(s);
	if (session_hooks != NULL)
		session_hooks->closed(s);
	exec_close(s->ex);
	job_close_all(s);
	session_mcp_close(s);
	if (!exec_busy(s->ex) && job_running(s) == 0 && session_mcp_gone(s))
		session_finish(s);
}

/* Every process is dead: tell the subscribers, answer, and free. */
static void
session_finish(struct session *s)
{
	json_t *params;
	size_t i;

	/* What is being encoded goes out first; at shutdown, at once. */
	if (s->slicers != NULL && !session_stopping) {
		s->finish_wanted = true;
		return;
	}
	s->finish_wanted = false;
	while (s->slicers != NULL)
		session_slice(s, SIZE_MAX);
	params = json_object();
	session_note(s, "session_closed", params);
	json_decref(params);
	/* Subscribers get everything, session_closed last, before it goes. */
	session_catch_up(s, NULL);
	for (i = 0; i < s->nclosers; i++)
		conn_ticket_reply(s->closers[i], json_object());
	s->nclosers = 0;
	session_free(s);
}

void
session_free(struct session *s)
{
	struct session **pp;
	size_t i;

	if (s->slice_queued) {
		for (pp = &session_slicing; *pp != s; pp = &(*pp)->slice_next)
			;
		if ((*pp = s->slice_next) == NULL)
			session_slicing_tail = pp;
	}
	while (s->subs != NULL)
		session_sub_free(s->subs);
	idmap_del(&session_map, s->id);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		session_list = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	session_n--;
	if (s->idle != NULL)
		event_free(s->idle);
	shell_free(s);
	session_hook_free(s);
	job_free_all(s);
	session_client_free(s);
	session_mcp_free(s);
	outdir_set_release(s->files, s->output_grace_ms);
	exec_free(s->ex);
	for (i = 0; i < s->tools.cap; i++)
		if (s->tools.slots[i].key != NULL &&
		    s->tools.slots[i].value != NULL)
			tooldef_unref(s->tools.slots[i].value);
	idmap_free(&s->tools);
	for (i = 0; i < s->count; i++)
		session_note_free(&s->notes[(s->head + i) % s->cap]);
	free(s->notes);
	for (i = 0; i < s->nclosers; i++)
		conn_ticket_drop(s->closers[i]);
	free(s->closers);
	free(s->running);
	free(s->envp);
	free(s->journal);
	tooldef_sandbox_clear(&s->sandbox);
	session_shell_clear(&s->shell);
	free(s->root);
	session_net_free(s);
	if (s->user != NULL) {
		free((gid_t *)s->user->groups);
		free((char *)s->user->error);
		free(s->user);
	}
	free(s);
}

/*
 * Shutdown: the supervisor has killed and reaped every process without
 * callbacks; tell each executor its tools are dead, then free everything.
 */
void
session_shutdown(void)
{
	struct exec_exit killed = { .end = EXEC_END_KILLED };
	struct session *s;
	struct exec_tool *t;

	killed.output.head = "";
	session_stopping = true;
	for (s = session_list; s != NULL; s = s->next) {
		s->closing = true;
		exec_close(s->ex);
	}
	mcp_shutdown();
	proc_shutdown();
	hooks_run_shutdown();
	while ((s = session_list) != NULL) {
		while (s->nrunning > 0) {
			t = s->running[--s->nrunning];
			session_tool_done(t, false);
			exec_exited(t, &killed);
		}
		session_finish(s);
	}
	idmap_free(&session_map);
	if (session_slice_ev != NULL)
		event_free(session_slice_ev);
	session_slice_ev = NULL;
}

int
session_add(struct session *s, const char *id, const char *name,
    const json_t *input, struct exec_added *out)
{
	/* Before the tool can be reported: a restart must know it was added. */
	if (session_hooks != NULL)
		session_hooks->added(s, exec_turn(s->ex), id, name);
	exec_set_add_stamp(s->ex, metrics_now());
	return exec_add(s->ex, id, name, session_tool(s, name), input, out);
}
