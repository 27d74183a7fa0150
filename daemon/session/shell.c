/* bash_session: a session's live shell, its commands delimited by markers. */
#include "session/shell.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/executor.h"
#include "handover.h"
#include "log.h"
#include "session/job.h"
#include "session/session_int.h"
#include "supervisor/proc.h"
#include "util.h"

#define SHELL_PATH "/bin/bash"
/* hex digits of a marker's token: 128 random bits */
#define SHELL_TOKEN 32

enum shell_phase {
	SHELL_RUNNING,      /* until its deadline */
	SHELL_INTERRUPTED,  /* SIGINT sent to the terminal's foreground */
	SHELL_KILLED,       /* then SIGKILL: the last grace */
};

struct shell {
	struct session *s;
	struct job *job;          /* the live shell, or NULL */
	char *ended;              /* how the last one ended, until a restart */

	/* The command in flight: tool_use_id NULL when there is none. */
	char *tool_use_id;
	struct exec_tool *t;      /* its call, NULL while a reload carries it */
	char token[SHELL_TOKEN + 1];
	bool restart_only;        /* restart without a command: no output */
	bool started;             /* its start marker came */
	bool done;                /* its end marker came */
	bool lost;                /* the shell died or hung under it */
	int status;
	enum shell_phase phase;
	int64_t began;            /* CLOCK_MONOTONIC ms it was written */
	int64_t deadline;         /* CLOCK_MONOTONIC ms of the next step */
	int64_t timeout_ms;
	size_t max;               /* output kept whole up to this */
	struct buf win;           /* bytes not yet known to be no marker */
	struct buf head, tail;    /* the output: max / 2 bytes, the last rest */
	uint64_t total;
	struct event *timer, *deliver;
};

static struct event_base *shell_base;
static struct shell_hooks shell_hooks;

static struct shell *shell_of(struct session *);
static int64_t	shell_now(void);
static void	shell_arm(struct shell *);
static void	shell_soon(struct shell *);
static void	shell_timer_cb(evutil_socket_t, short, void *);
static void	shell_deliver_cb(evutil_socket_t, short, void *);
static void	shell_keep(struct shell *, const char *, size_t);
static void	shell_scan(struct shell *);
static void	shell_forget(struct shell *);
static bool	shell_write(struct shell *, const char *, const char **);
static void	shell_ping(struct shell *);
static void	shell_stop(struct shell *, const char *);
static char	*shell_error(bool *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	shell_output(struct session *, struct job *, const char *,
		    size_t);
static void	shell_exited(struct session *, struct job *,
		    const struct proc_exit *);
static json_t	*shell_save(struct session *, struct handover_rec *);
static void	shell_restore(struct session *, struct job *,
		    const struct handover_in *, const json_t *);

/* The shell's side of its job: job.c calls up only through this. */
static const struct job_owner shell_job_owner = {
	.key = "shell",
	.output = shell_output,
	.exited = shell_exited,
	.save = shell_save,
	.restore = shell_restore,
};

void
shell_init(struct event_base *base, const struct shell_hooks *hooks)
{
	shell_base = base;
	shell_hooks = *hooks;
	job_add_owner(&shell_job_owner);
}

static struct shell *
shell_of(struct session *s)
{
	struct shell *sh;

	if (s->live_shell == NULL) {
		sh = s->live_shell = xcalloc(1, sizeof *sh);
		sh->s = s;
		sh->timer = evtimer_new(shell_base, shell_timer_cb, sh);
		sh->deliver = evtimer_new(shell_base, shell_deliver_cb, sh);
	}
	return s->live_shell;
}

static int64_t
shell_now(void)
{
	struct timespec ts;

	/* System-wide: a deadline carried by a reload stays right. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
shell_arm(struct shell *sh)
{
	int64_t left = sh->deadline - shell_now();
	struct timeval tv;

	if (left < 0)
		left = 0;
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(sh->timer, &tv);
}

/* The call's answer, from the loop. */
static void
shell_soon(struct shell *sh)
{
	struct timeval now = { 0, 0 };

	evtimer_add(sh->deliver, &now);
}

static char *
shell_error(bool *is_error, const char *fmt, ...)
{
	struct buf b = { 0 };
	va_list ap;
	char *text;

	buf_addstr(&b, "<tool_use_error>Error: ");
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) == -1)
		fatal("vasprintf failed");
	va_end(ap);
	buf_addstr(&b, text);
	buf_addstr(&b, "</tool_use_error>");
	free(text);
	*is_error = true;
	return b.data;
}

/* Bytes to the shell's terminal; false with *why when it cannot take them. */
static bool
shell_write(struct shell *sh, const char *text, const char **why)
{
	return job_write(sh->job, text, strlen(text), false, why) == 0;
}

/*
 * The end marker again, for a shell that dropped the rest of the command
 * when its foreground job died of SIGINT (bash with job control does).
 * Should the command go on instead, its own marker comes first.
 */
static void
shell_ping(struct shell *sh)
{
	const char *why;
	char line[128];

	snprintf(line, sizeof line, "printf '\\n%%s%%s:%%d\\n' %.16s %se "
	    "130\n", sh->token, sh->token + 16);
	if (sh->job != NULL)
		(void)shell_write(sh, line, &why);
}

/* The shell ends (killed): why says how, for the calls that follow. */
static void
shell_stop(struct shell *sh, const char *why)
{
	if (sh->job != NULL) {
		job_signal(sh->job, "kill");
		sh->job = NULL;
	}
	free(sh->ended);
	sh->ended = why != NULL ? xstrdup(why) : NULL;
}

/* No command in flight any more. */
static void
shell_forget(struct shell *sh)
{
	free(sh->tool_use_id);
	sh->tool_use_id = NULL;
	sh->t = NULL;
	sh->started = sh->done = sh->lost = sh->restart_only = false;
	sh->win.len = sh->head.len = sh->tail.len = 0;
	sh->total = 0;
	evtimer_del(sh->timer);
	evtimer_del(sh->deliver);
}

char *
shell_call(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req, bool *is_error, bool *wait)
{
	/*
	 * Commands from stdin, the terminal, yet not interactive (no prompts,
	 * no line editing): its stderr is not a terminal until the first
	 * line makes it one. Not /dev/stdin: the terminal cannot be opened
	 * again by its path (proc.c), and a sandbox has no capability to.
	 */
	static char *const argv[] = { SHELL_PATH, "--noprofile", "--norc",
	    "-c", "exec -a bash " SHELL_PATH " --noprofile --norc -s "
	    "2>/dev/null", NULL };
	struct shell *sh = shell_of(s);
	const json_t *cmd = json_object_get(req->input, "command");
	bool restart = json_is_true(json_object_get(req->input, "restart"));
	unsigned char raw[SHELL_TOKEN / 2];
	const char *command, *why;
	struct buf w = { 0 };
	size_t i;
	bool ok;

	*is_error = false;
	*wait = false;
	/* A call a reload carried: its command ran on meanwhile. */
	if (sh->tool_use_id != NULL && sh->t == NULL &&
	    strcmp(sh->tool_use_id, exec_tool_id(t)) == 0) {
		sh->t = t;
		*wait = true;
		if (sh->done || sh->lost)
			shell_soon(sh);
		return NULL;
	}
	if (!json_is_string(cmd) && !restart)
		return shell_error(is_error, "command is required (or "
		    "restart: true alone to restart the shell)");
	command = json_is_string(cmd) ? json_string_value(cmd) : ":";
	if (json_is_string(cmd) && strlen(command) != json_string_length(cmd))
		return shell_error(is_error, "command holds a NUL character");
	if (restart)
		shell_stop(sh, NULL);
	else if (sh->job == NULL && sh->ended != NULL)
		return shell_error(is_error, "the shell of this session has "
		    "ended (%s), and what it held (working directory, "
		    "variables, functions) is gone: call bash_session with "
		    "\"restart\": true to start a new one", sh->ended);
	/* A cancelled command's end no longer matters. */
	shell_forget(sh);
	if (sh->job == NULL) {
		if (access(SHELL_PATH, X_OK) != 0)
			return shell_error(is_error, "bash_session needs "
			    SHELL_PATH ", which this machine does not have");
		if ((sh->job = shell_hooks.spawn(s, t, req, argv)) == NULL)
			return shell_error(is_error, "the shell cannot start: "
			    "this session already runs as many jobs as it may "
			    "(--max-jobs-per-session)");
		job_set_owner(sh->job, &shell_job_owner);
		free(sh->ended);
		sh->ended = NULL;
		/*
		 * Job control: the foreground command has a process group of
		 * its own for SIGINT; the trap keeps the shell alive.
		 */
		if (!shell_write(sh, "exec 2>&1; set -m; trap : INT; shopt -s "
		    "expand_aliases; export TERM=dumb PAGER=cat GIT_PAGER=cat"
		    "\n", &why))
			return shell_error(is_error, "the shell cannot start: "
			    "%s", why);
	}
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return shell_error(is_error, "no random bytes for the marker");
	for (i = 0; i < sizeof raw; i++)
		snprintf(sh->token + 2 * i, 3, "%02x", raw[i]);
	/*
	 * The whole command is read before it runs (a quoted here-document),
	 * and its stdin is /dev/null: nothing it reads can be our text. A
	 * marker is printed from two halves, so that no echo of this text
	 * (set -v, set -x) can be taken for one.
	 */
	buf_printf(&w, "IFS= read -r -d '' __stexec_cmd <<'STEXEC_%s'\n%s\n"
	    "STEXEC_%s\nprintf '%%s%%s\\n' %.16s %ss; { eval "
	    "\"$__stexec_cmd\"; } </dev/null; printf '\\n%%s%%s:%%d\\n' %.16s "
	    "%se \"$?\"\n", sh->token, command, sh->token, sh->token,
	    sh->token + 16, sh->token, sh->token + 16);
	ok = job_write(sh->job, w.data, w.len, false, &why) == 0;
	buf_free(&w);
	if (!ok) {
		shell_stop(sh, "its terminal took no more input");
		return shell_error(is_error, "the shell takes no input (%s): "
		    "call bash_session with \"restart\": true", why);
	}
	sh->tool_use_id = xstrdup(exec_tool_id(t));
	sh->t = t;
	sh->restart_only = !json_is_string(cmd);
	sh->phase = SHELL_RUNNING;
	sh->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : 120000;
	sh->began = shell_now();
	sh->deadline = sh->began + sh->timeout_ms;
	sh->max = req->max_output > 0 ? req->max_output : 100000;
	shell_arm(sh);
	*wait = true;
	return NULL;
}

void
shell_cancel(struct session *s, struct exec_tool *t)
{
	struct shell *sh = s->live_shell;

	if (sh == NULL || sh->t != t)
		return;
	if (sh->job != NULL && !sh->done) {
		job_signal_fg(sh->job, SIGINT);
		shell_ping(sh);
	}
	shell_forget(sh);
}

/* Output of the command: its first max / 2 bytes, and the last rest. */
static void
shell_keep(struct shell *sh, const char *data, size_t len)
{
	size_t hmax = sh->max / 2, tmax = sh->max - sh->max / 2, n;

	sh->total += len;
	n = hmax - sh->head.len < len ? hmax - sh->head.len : len;
	buf_add(&sh->head, data, n);
	data += n;
	len -= n;
	if (len == 0)
		return;
	if (len >= tmax) {
		sh->tail.len = 0;
		buf_add(&sh->tail, data + len - tmax, tmax);
		return;
	}
	if (sh->tail.len + len > tmax) {
		n = sh->tail.len + len - tmax;
		memmove(sh->tail.data, sh->tail.data + n, sh->tail.len - n);
		sh->tail.len -= n;
	}
	buf_add(&sh->tail, data, len);
}

/* Find the markers in what came: before the start is not the command's. */
static void
shell_scan(struct shell *sh)
{
	char start[SHELL_TOKEN + 3], end[SHELL_TOKEN + 4];
	const char *at, *nl;
	size_t keep, off;

	snprintf(start, sizeof start, "%ss\n", sh->token);
	snprintf(end, sizeof end, "\n%se:", sh->token);
	if (!sh->started) {
		at = memmem(sh->win.data, sh->win.len, start, strlen(start));
		if (at == NULL) {
			keep = strlen(start) - 1;
			if (sh->win.len > keep) {
				memmove(sh->win.data, sh->win.data +
				    sh->win.len - keep, keep);
				sh->win.len = keep;
			}
			return;
		}
		off = (size_t)(at - sh->win.data) + strlen(start);
		memmove(sh->win.data, sh->win.data + off, sh->win.len - off);
		sh->win.len -= off;
		sh->started = true;
	}
	at = memmem(sh->win.data, sh->win.len, end, strlen(end));
	if (at == NULL) {
		keep = strlen(end) - 1;
		if (sh->win.len > keep) {
			shell_keep(sh, sh->win.data, sh->win.len - keep);
			memmove(sh->win.data, sh->win.data + sh->win.len -
			    keep, keep);
			sh->win.len = keep;
		}
		return;
	}
	off = (size_t)(at - sh->win.data);
	nl = memchr(at + strlen(end), '\n', sh->win.len - off - strlen(end));
	shell_keep(sh, sh->win.data, off);
	memmove(sh->win.data, at, sh->win.len - off);
	sh->win.len -= off;
	if (nl == NULL)
		return;
	sh->status = atoi(sh->win.data + strlen(end));
	sh->done = true;
	sh->win.len = 0;
	evtimer_del(sh->timer);
	/* Without its call (a reload carries it), kept for it. */
	if (sh->t != NULL)
		shell_soon(sh);
}

static void
shell_output(struct session *s, struct job *j, const char *data, size_t len)
{
	struct shell *sh = s->live_shell;

	if (sh == NULL || sh->job != j || sh->tool_use_id == NULL || sh->done)
		return;
	buf_add(&sh->win, data, len);
	shell_scan(sh);
}

/* The answer of the command in flight, now that it is done or lost. */
static void
shell_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct shell *sh = arg;
	struct exec_exit x = { .end = EXEC_END_EXITED };
	struct exec_tool *t = sh->t;
	struct buf all = { 0 }, note = { 0 }, tail = sh->tail;

	if (t == NULL)
		return;
	/* The answer may start the next call at once: the output is ours. */
	memset(&sh->tail, 0, sizeof sh->tail);
	if (sh->restart_only && sh->done)
		buf_printf(&all, "The shell was restarted: a new one runs, "
		    "with nothing kept from the one before.");
	else {
		buf_add(&all, sh->head.data, sh->head.len);
		if (sh->total <= sh->max)
			buf_add(&all, tail.data, tail.len);
	}
	if (sh->lost) {
		/* exit N: its status; killed or hung: an error. */
		x.status = sh->status;
		if (sh->phase != SHELL_RUNNING)
			x.end = EXEC_END_TIMED_OUT;
		buf_printf(&note, "%s[bash_session: the shell %s; what it held "
		    "is gone. Call bash_session with \"restart\": true to start "
		    "a new one.]", all.len > 0 && all.data[all.len - 1] != '\n' ?
		    "\n" : "", sh->ended != NULL ? sh->ended : "ended");
	} else if (sh->phase != SHELL_RUNNING) {
		x.end = EXEC_END_TIMED_OUT;
		buf_printf(&note, "%s[bash_session: the command was "
		    "interrupted after %lld ms; the shell lives on]",
		    all.len > 0 && all.data[all.len - 1] != '\n' ? "\n" : "",
		    (long long)sh->timeout_ms);
	} else
		x.status = sh->status;
	if (sh->total > sh->max) {
		/* Truncated: the note goes after the tail. */
		buf_add(&tail, note.data, note.len);
		x.output.tail = tail.data != NULL ? tail.data : "";
		x.output.tail_len = tail.len;
		x.output_error = "bash_session keeps no output file";
	} else {
		buf_add(&all, note.data, note.len);
		buf_add(&all, "", 1);
		all.len--;
	}
	x.duration_ms = shell_now() - sh->began;
	x.output.head = all.data != NULL ? all.data : "";
	x.output.head_len = all.len;
	x.output.total = sh->total > sh->max ? sh->total + note.len : all.len;
	shell_forget(sh);
	shell_hooks.answer(t, &x);
	buf_free(&all);
	buf_free(&note);
	buf_free(&tail);
}

/* Past the deadline: SIGINT, then SIGKILL, then the shell is lost. */
static void
shell_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct shell *sh = arg;
	int pg;

	if (sh->job == NULL || sh->tool_use_id == NULL || sh->done)
		return;
	switch (sh->phase) {
	case SHELL_RUNNING:
		job_signal_fg(sh->job, SIGINT);
		shell_ping(sh);
		sh->phase = SHELL_INTERRUPTED;
		break;
	case SHELL_INTERRUPTED:
		/* Harder, but never at the shell itself. */
		if ((pg = job_signal_fg(sh->job, 0)) > 0 && pg !=
		    job_pid(sh->job))
			job_signal_fg(sh->job, SIGKILL);
		shell_ping(sh);
		sh->phase = SHELL_KILLED;
		break;
	default:
		log_about(LOG_LEVEL_INFO, sh->s->id, sh->tool_use_id,
		    "bash_session", "the shell did not answer after SIGINT "
		    "and SIGKILL: killed");
		shell_stop(sh, "did not answer after the command was "
		    "interrupted, so it was killed");
		sh->lost = true;
		sh->status = 1;
		if (sh->t != NULL)
			shell_soon(sh);
		return;
	}
	sh->deadline = shell_now() + SHELL_GRACE_MS;
	shell_arm(sh);
}

static void
shell_exited(struct session *s, struct job *j, const struct proc_exit *px)
{
	struct shell *sh = s->live_shell;
	char why[512];

	if (sh == NULL || sh->job != j)
		return;
	sh->job = NULL;
	if (px->end == PROC_SPAWN_FAILED)
		snprintf(why, sizeof why, "could not start: %s", px->error !=
		    NULL ? px->error : "?");
	else if (px->end == PROC_EXITED)
		snprintf(why, sizeof why, "exited with status %d",
		    px->status);
	else if (px->signal != 0)
		snprintf(why, sizeof why, "was killed by signal %d",
		    px->signal);
	else
		snprintf(why, sizeof why, "was killed");
	free(sh->ended);
	sh->ended = xstrdup(why);
	log_about(LOG_LEVEL_INFO, s->id, sh->tool_use_id, "bash_session",
	    "the shell %s", why);
	if (sh->tool_use_id == NULL || sh->done)
		return;
	/* What it said last is the command's. */
	if (sh->started)
		shell_keep(sh, sh->win.data, sh->win.len);
	sh->win.len = 0;
	sh->lost = true;
	sh->status = px->end == PROC_EXITED ? px->status : 1;
	evtimer_del(sh->timer);
	if (sh->t != NULL)
		shell_soon(sh);
}

static json_t *
shell_save(struct session *s, struct handover_rec *r)
{
	struct shell *sh = s->live_shell;
	json_t *o = json_object();

	if (sh == NULL || sh->tool_use_id == NULL)
		return o;
	json_object_set_new(o, "call", json_pack("{s:s, s:s, s:b, s:b, s:b, "
	    "s:b, s:i, s:i, s:I, s:I, s:I, s:I, s:I}", "id", sh->tool_use_id,
	    "token", sh->token, "restartOnly", sh->restart_only, "started",
	    sh->started, "done", sh->done, "lost", sh->lost, "status",
	    sh->status, "phase", (int)sh->phase, "began",
	    (json_int_t)sh->began, "deadline",
	    (json_int_t)sh->deadline, "timeoutMs", (json_int_t)sh->timeout_ms,
	    "max", (json_int_t)sh->max, "total", (json_int_t)sh->total));
	handover_put(r, o, "win", sh->win.data, sh->win.len);
	handover_put(r, o, "head", sh->head.data, sh->head.len);
	handover_put(r, o, "tail", sh->tail.data, sh->tail.len);
	return o;
}

static void
shell_restore(struct session *s, struct job *j, const struct handover_in *in,
    const json_t *o)
{
	struct shell *sh = shell_of(s);
	const json_t *c = json_object_get(o, "call");
	const char *id, *token, *data;
	size_t len;

	sh->job = j;
	id = json_string_value(json_object_get(c, "id"));
	token = json_string_value(json_object_get(c, "token"));
	if (id == NULL || token == NULL || strlen(token) != SHELL_TOKEN)
		return;
	sh->tool_use_id = xstrdup(id);
	memcpy(sh->token, token, sizeof sh->token);
	sh->restart_only = json_is_true(json_object_get(c, "restartOnly"));
	sh->started = json_is_true(json_object_get(c, "started"));
	sh->done = json_is_true(json_object_get(c, "done"));
	sh->lost = json_is_true(json_object_get(c, "lost"));
	sh->status = (int)json_integer_value(json_object_get(c, "status"));
	sh->phase = (enum shell_phase)json_integer_value(json_object_get(c,
	    "phase"));
	if (sh->phase > SHELL_KILLED)
		sh->phase = SHELL_KILLED;
	sh->began = json_integer_value(json_object_get(c, "began"));
	sh->deadline = json_integer_value(json_object_get(c, "deadline"));
	sh->timeout_ms = json_integer_value(json_object_get(c, "timeoutMs"));
	sh->max = (size_t)json_integer_value(json_object_get(c, "max"));
	if (sh->max == 0)
		sh->max = 100000;
	sh->total = (uint64_t)json_integer_value(json_object_get(c, "total"));
	data = handover_get(in, o, "win", &len);
	buf_add(&sh->win, data, len);
	data = handover_get(in, o, "head", &len);
	buf_add(&sh->head, data, len);
	data = handover_get(in, o, "tail", &len);
	buf_add(&sh->tail, data, len);
	if (!sh->done)
		shell_arm(sh);
}

void
shell_free(struct session *s)
{
	struct shell *sh = s->live_shell;

	if (sh == NULL)
		return;
	event_free(sh->timer);
	event_free(sh->deliver);
	free(sh->tool_use_id);
	free(sh->ended);
	buf_free(&sh->win);
	buf_free(&sh->head);
	buf_free(&sh->tail);
	free(sh);
	s->live_shell = NULL;
}
