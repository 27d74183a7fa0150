/* Jobs: a ring of output by offset, coalesced notes, waiting readers. */
#include "session/job.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <event2/event.h>

#include "core/pattern.h"
#include "core/tooldef_job.h"
#include "handover.h"
#include "log.h"
#include "net/conn.h"
#include "net/proxy.h"
#include "session/journal.h"
#include "session/outdir.h"
#include "session/session_int.h"
#include "stexec/protocol.h"
#include "supervisor/proc.h"
#include "utf8.h"
#include "util.h"

/* job_output notes: one per job per this long, at most this much each. */
#define JOB_NOTE_MS 50
#define JOB_NOTE_MAX 65536
#define JOB_RING_MIN 65536
/* Matching work one readJob filter may do (pattern.h's units). */
#define JOB_FILTER_BUDGET (16ULL * PATTERN_MATCH_BUDGET)
/* Long-polls waiting on one job; one more answers the oldest at once. */
#define JOB_READERS_MAX 64

enum job_status {
	JOB_RUNNING,
	JOB_EXITED,
	JOB_KILLED,
};

/* A readJob waiting for output. */
struct job_reader {
	struct job *j;
	struct ticket *tk;
	int64_t since;          /* < 0: the cursor */
	size_t max;
	struct pattern *filter;
	struct event *timer;
	struct job_reader *next;
};

struct job {
	char id[24];            /* "" until it is one */
	struct session *s;
	char *tool_use_id;
	char *name;
	json_t *command;
	struct proc *proc;      /* while it runs */
	struct proxy_tool *proxy; /* network rules: its way out, while it runs */
	pid_t pid;
	int64_t started_at;     /* ms since the epoch */
	bool tty;
	bool pending;           /* a call that is not a job yet */
	const struct job_owner *owner; /* NULL: the session alone */

	enum job_status status;
	bool killing;           /* we sent terminate or kill */
	json_t *exit_code, *signal; /* null until known */
	const char *reason;

	char *ring;             /* bytes [total - len, total), at offset % cap */
	size_t cap, len;
	uint64_t total;
	uint64_t cursor;        /* readJob without since, bash_output */
	uint64_t noted;         /* job_output sent up to here */
	struct event *note_ev;

	struct job_reader *readers; /* newest first */
	unsigned nreaders;
	struct exec_tool **killers; /* kill_shell calls waiting for its end */
	size_t nkillers;

	struct job *next;
};

static struct event_base *job_base;
static struct job_config job_cfg;
static struct job_hooks job_hooks;
static const struct job_owner *job_owners[JOB_OWNERS_MAX];

static void	job_put(struct job *, uint64_t, const char *, size_t);
static void	job_copy(const struct job *, uint64_t, uint64_t, struct buf *);
static void	job_text(const struct job *, uint64_t, uint64_t, struct buf *);
static uint64_t	job_oldest(const struct job *);
static uint64_t	job_whole(const struct job *, uint64_t, uint64_t);
static void	job_note_cb(evutil_socket_t, short, void *);
static void	job_note(struct job *, bool);
static void	job_chunk(void *, int, const char *, size_t);
static void	job_line(void *, const char *, size_t);
static void	job_exit(void *, const struct proc_exit *);
static json_t	*job_read_json(struct job *, int64_t, size_t,
		    struct pattern *);
static void	job_reader_cb(evutil_socket_t, short, void *);
static void	job_reader_answer(struct job_reader *);
static void	job_wake(struct job *, bool);
static void	job_forget_old(struct session *);
static const char *job_status_name(enum job_status);

static const struct proc_ops job_proc_ops = {
	.line = job_line,
	.chunk = job_chunk,
	.exit = job_exit,
};

void
job_set_hooks(const struct job_hooks *hooks)
{
	job_hooks = *hooks;
}

void
job_add_owner(const struct job_owner *owner)
{
	size_t i;

	for (i = 0; i < nitems(job_owners) && job_owners[i] != NULL; i++)
		if (job_owners[i] == owner)
			return;
	if (i == nitems(job_owners))
		fatal("job: more than %d kinds of job owner", JOB_OWNERS_MAX);
	job_owners[i] = owner;
}

void
job_set_owner(struct job *j, const struct job_owner *owner)
{
	j->owner = owner;
}

void
job_init(struct event_base *base, const struct job_config *cfg)
{
	job_base = base;
	job_cfg = *cfg;
	if (job_cfg.output_bytes == 0)
		job_cfg.output_bytes = JOB_OUTPUT_BYTES_DEFAULT;
	if (job_cfg.max_per_session == 0)
		job_cfg.max_per_session = JOB_MAX_PER_SESSION_DEFAULT;
}

const struct job_config *
job_config(void)
{
	return &job_cfg;
}

unsigned
job_running(const struct session *s)
{
	return s->jobs_running;
}

struct job *
job_new(struct session *s, const char *tool_use_id, const char *name,
    char *const *argv, bool tty)
{
	struct timespec now;
	struct job *j;
	json_t *arg;
	size_t i;

	/* Calls that may still become jobs count: they run in parallel. */
	if (s->jobs_running + s->jobs_pending >= job_cfg.max_per_session) {
		log_about(LOG_LEVEL_INFO, s->id, tool_use_id, name, "%u jobs "
		    "run already (--max-jobs-per-session): it runs as a tool",
		    s->jobs_running + s->jobs_pending);
		return NULL;
	}
	j = xcalloc(1, sizeof *j);
	j->s = s;
	j->pending = true;
	s->jobs_pending++;
	j->tool_use_id = xstrdup(tool_use_id);
	j->name = xstrdup(name);
	j->command = json_array();
	for (i = 0; argv[i] != NULL; i++) {
		/* Input fields may hold bytes that are not UTF-8. */
		arg = json_stringn_nocheck(argv[i], strlen(argv[i]));
		json_array_append_new(j->command, utf8_repair_json(arg));
		json_decref(arg);
	}
	j->tty = tty;
	clock_gettime(CLOCK_REALTIME, &now);
	j->started_at = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	j->exit_code = json_null();
	j->signal = json_null();
	return j;
}

void
job_free(struct job *j)
{
	struct job_reader *r;

	if (j == NULL)
		return;
	if (j->pending)
		j->s->jobs_pending--;
	while ((r = j->readers) != NULL) {
		j->readers = r->next;
		conn_ticket_drop(r->tk);
		pattern_free(r->filter);
		event_free(r->timer);
		free(r);
	}
	if (j->note_ev != NULL)
		event_free(j->note_ev);
	proxy_tool_free(j->proxy);
	free(j->killers);
	free(j->ring);
	json_decref(j->command);
	json_decref(j->exit_code);
	json_decref(j->signal);
	free(j->tool_use_id);
	free(j->name);
	free(j);
}

/* Write len bytes that start at offset off into the ring. */
static void
job_put(struct job *j, uint64_t off, const char *data, size_t len)
{
	size_t pos, n;

	while (len > 0) {
		pos = (size_t)(off % j->cap);
		n = j->cap - pos < len ? j->cap - pos : len;
		memcpy(j->ring + pos, data, n);
		off += n;
		data += n;
		len -= n;
	}
}

void
job_output(struct job *j, const char *data, size_t len)
{
	char *old = j->ring;
	size_t oldcap = j->cap, cap, pos, n;
	uint64_t off;

	if (len == 0)
		return;
	/* Grow up to the cap before overwriting: most jobs say little. */
	if (j->len + len > j->cap && j->cap < job_cfg.output_bytes) {
		cap = j->cap > 0 ? j->cap : JOB_RING_MIN;
		while (cap < j->len + len && cap < job_cfg.output_bytes)
			cap *= 2;
		if (cap > job_cfg.output_bytes)
			cap = job_cfg.output_bytes;
		j->ring = xmalloc(cap);
		j->cap = cap;
		for (off = j->total - j->len; off < j->total; off += n) {
			pos = (size_t)(off % oldcap);
			n = oldcap - pos < j->total - off ? oldcap - pos :
			    (size_t)(j->total - off);
			job_put(j, off, old + pos, n);
		}
		free(old);
	}
	/* Only the last cap bytes of a big write can be kept. */
	if (len > j->cap) {
		data += len - j->cap;
		j->total += len - j->cap;
		len = j->cap;
	}
	job_put(j, j->total, data, len);
	j->total += len;
	j->len = j->len + len > j->cap ? j->cap : j->len + len;
	if (j->id[0] != '\0') {
		job_note(j, false);
		job_wake(j, false);
	}
	if (j->owner != NULL && j->status == JOB_RUNNING)
		j->owner->output(j->s, j, data, len);
}

static uint64_t
job_oldest(const struct job *j)
{
	return j->total - j->len;
}

/*
 * Text of [from, to) as valid UTF-8: a character cut at either end is left
 * out (the start is later than from by its continuation bytes; the caller
 * moves its offsets by what job_whole says).
 */
static void
job_copy(const struct job *j, uint64_t from, uint64_t to, struct buf *out)
{
	size_t len = (size_t)(to - from), pos, n, done;

	for (done = 0; done < len; done += n) {
		pos = (size_t)((from + done) % j->cap);
		n = j->cap - pos < len - done ? j->cap - pos : len - done;
		buf_add(out, j->ring + pos, n);
	}
}

static void
job_text(const struct job *j, uint64_t from, uint64_t to, struct buf *out)
{
	struct buf raw = { 0 };

	job_copy(j, from, to, &raw);
	utf8_repair(out, raw.data, raw.len);
	buf_free(&raw);
}

/*
 * Where [from, to) should end so as not to cut a character: a character
 * still being written is left for later (unless the job has ended).
 */
static uint64_t
job_whole(const struct job *j, uint64_t from, uint64_t to)
{
	unsigned char c;
	uint64_t at;
	size_t need;
	int back;

	if (j->status != JOB_RUNNING)
		return to;
	for (back = 1; back <= 4 && to - from >= (uint64_t)back; back++) {
		at = to - (uint64_t)back;
		c = (unsigned char)j->ring[at % j->cap];
		if ((c & 0xC0) == 0x80)
			continue;
		need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		return need > (size_t)back ? at : to;
	}
	return to;
}

/* Send what is new, now (flush) or at most every JOB_NOTE_MS. */
static void
job_note(struct job *j, bool flush)
{
	struct timeval tv = { 0, JOB_NOTE_MS * 1000 };
	struct buf text = { 0 };
	uint64_t from, to;
	json_t *params;

	if (!flush) {
		if (j->note_ev == NULL)
			j->note_ev = evtimer_new(job_base, job_note_cb, j);
		if (!evtimer_pending(j->note_ev, NULL))
			evtimer_add(j->note_ev, &tv);
		return;
	}
	if (j->note_ev != NULL)
		evtimer_del(j->note_ev);
	/* A job that writes faster skips ahead: readJob has the rest. */
	from = j->noted;
	if (from < job_oldest(j))
		from = job_oldest(j);
	if (j->total - from > JOB_NOTE_MAX)
		from = j->total - JOB_NOTE_MAX;
	to = job_whole(j, from, j->total);
	if (to <= from)
		return;
	job_text(j, from, to, &text);
	params = json_pack("{s:s, s:I, s:s%}", "jobId", j->id, "offset",
	    (json_int_t)from, "text", text.data != NULL ? text.data : "",
	    text.len);
	job_hooks.notify(j->s, "job_output", params, true);
	json_decref(params);
	buf_free(&text);
	j->noted = to;
}

static void
job_note_cb(evutil_socket_t fd, short what, void *arg)
{
	job_note(arg, true);
}

void
job_take_proxy(struct job *j, struct proxy_tool *proxy)
{
	j->proxy = proxy;
}

/* j becomes one of the session's jobs, running p. */
static void
job_join(struct job *j, struct proc *p)
{
	struct session *s = j->s;
	struct job **pp;

	snprintf(j->id, sizeof j->id, "j-%u", ++s->njobs);
	for (pp = &s->jobs; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = j;
	s->jobs_running++;
	s->jobs_pending--;
	j->pending = false;
	j->proc = p;
	j->pid = proc_pid(p);
	proc_rebind(p, &job_proc_ops, j);
	proc_detach(p);
}

struct job *
job_spawn(struct session *s, const char *tool_use_id, const char *name,
    const struct proc_spec *spec)
{
	struct job *j;

	if ((j = job_new(s, tool_use_id, name, spec->argv, spec->tty)) ==
	    NULL)
		return NULL;
	job_join(j, proc_spawn(spec, &job_proc_ops, j));
	log_about(LOG_LEVEL_INFO, s->id, j->tool_use_id, j->name, "shell "
	    "started as job %s", j->id);
	return j;
}

const char *
job_id(const struct job *j)
{
	return j->id;
}

pid_t
job_pid(const struct job *j)
{
	return j->pid;
}

json_t *
job_attach(struct job *j, struct proc *p, size_t max, char **content)
{
	struct session *s = j->s;
	struct buf b = { 0 };
	uint64_t from;

	job_join(j, p);

	/* The content PROTOCOL.md §5 gives for reason background. */
	buf_printf(&b, "Started job %s (pid %ld) in the background; its "
	    "output so far:\n", j->id, (long)j->pid);
	/* What the result shows counts as read. */
	from = j->total - (j->total - job_oldest(j) > max ? max :
	    j->total - job_oldest(j));
	j->cursor = j->noted = job_whole(j, from, j->total);
	if (j->cursor > from) {
		job_text(j, from, j->cursor, &b);
		if (b.data[b.len - 1] != '\n')
			buf_addstr(&b, "\n");
	}
	buf_printf(&b, "Read its new output with bash_output "
	    "{\"bash_id\": \"%s\"} (readJob); end it with kill_shell "
	    "{\"shell_id\": \"%s\"} (signalJob).", j->id, j->id);
	*content = xstrdup(b.data);
	buf_free(&b);
	log_about(LOG_LEVEL_INFO, s->id, j->tool_use_id, j->name, "runs on as "
	    "job %s (pid %ld)", j->id, (long)j->pid);
	return json_pack("{s:s, s:o}", "jobId", j->id, "pid", j->pid > 0 ?
	    json_integer(j->pid) : json_null());
}

struct job *
job_find(struct session *s, const char *id)
{
	struct job *j;

	for (j = s->jobs; j != NULL; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

static const char *
job_status_name(enum job_status st)
{
	return st == JOB_RUNNING ? "running" : st == JOB_EXITED ? "exited" :
	    "killed";
}

json_t *
job_list_json(struct session *s)
{
	json_t *a = json_array();
	struct job *j;

	for (j = s->jobs; j != NULL; j = j->next)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:O, s:o, "
		    "s:s, s:I, s:O, s:O, s:o, s:I, s:b}", "jobId", j->id,
		    "toolUseId", j->tool_use_id, "name", j->name, "command",
		    j->command, "pid", j->proc != NULL && proc_pid(j->proc) > 0 ?
		    json_integer(proc_pid(j->proc)) : json_null(), "status",
		    job_status_name(j->status), "startedAt",
		    (json_int_t)j->started_at, "exitCode", j->exit_code,
		    "signal", j->signal, "reason", j->reason != NULL ?
		    json_string(j->reason) : json_null(), "outputBytes",
		    (json_int_t)j->total, "tty", j->tty));
	return a;
}

static void
job_chunk(void *arg, int fd, const char *data, size_t len)
{
	job_output(arg, data, len);
}

/* A job's progress lines have no turn to go to. */
static void
job_line(void *arg, const char *line, size_t len)
{
}

static void
job_exit(void *arg, const struct proc_exit *px)
{
	struct job *j = arg;
	struct session *s = j->s;
	struct exec_tool **killers = j->killers;
	size_t i, nkillers = j->nkillers;
	const struct job_owner *owner;
	json_t *params;
	char *text;

	j->proc = NULL;
	/* Its connections end with it. */
	proxy_tool_free(j->proxy);
	j->proxy = NULL;
	j->status = j->killing || px->end == PROC_KILLED ? JOB_KILLED :
	    JOB_EXITED;
	json_decref(j->exit_code);
	json_decref(j->signal);
	j->exit_code = px->end == PROC_EXITED ? json_integer(px->status) :
	    json_null();
	j->signal = px->signal != 0 ? json_integer(px->signal) : json_null();
	switch (px->end) {
	case PROC_EXITED:
		j->reason = px->status == 0 ? "ok" : "exit";
		break;
	case PROC_SIGNALED:
		j->reason = j->killing ? "killed" : "signal";
		break;
	case PROC_LIMIT_HIT:
		j->reason = px->hit == TOOLCG_HIT_MEMORY ? "memory_limit" :
		    "process_limit";
		break;
	case PROC_SPAWN_FAILED:
		j->reason = "spawn_failed";
		break;
	default:
		j->reason = "killed";
		break;
	}
	/* Its whole output is the session's, like a result's file. */
	if (px->output.path != NULL) {
		if (s->files == NULL)
			s->files = outdir_set_new();
		outdir_add(s->files, px->output.path, px->output.total,
		    j->tool_use_id);
	}
	job_note(j, true);
	params = json_pack("{s:s, s:O, s:O, s:s}", "jobId", j->id, "exitCode",
	    j->exit_code, "signal", j->signal, "reason", j->reason);
	job_hooks.notify(s, "job_exit", params, false);
	json_decref(params);
	log_about(LOG_LEVEL_INFO, s->id, j->tool_use_id, j->name, "job %s "
	    "ended: %s", j->id, j->reason);
	job_wake(j, true);
	s->jobs_running--;
	if ((owner = j->owner) != NULL) {
		j->owner = NULL;
		owner->exited(s, j, px);
	}
	/* Each answer may end a turn: the list is ours first. */
	j->killers = NULL;
	j->nkillers = 0;
	xasprintf(&text, "Job %s ended (%s).", j->id, j->reason);
	for (i = 0; i < nkillers; i++)
		job_hooks.answered(killers[i], text);
	free(text);
	free(killers);
	/* May forget j itself: nothing below refers to it. */
	job_forget_old(s);
	job_hooks.ended(s);
}

/*
 * The lines of raw[0..len) that match, repaired, into kept; the bytes
 * looked at. Whole lines only (a last one without its newline waits while
 * the job runs), and no more matching work than JOB_FILTER_BUDGET, in the
 * units of the pattern's subject bound: a client's filter over its job's
 * output must not hold the loop (the rest is for the next read).
 */
static size_t
job_filter(const struct job *j, const char *raw, size_t len,
    struct pattern *filter, struct buf *kept)
{
	uint64_t unit = (uint64_t)(pattern_size(filter) + 4) *
	    (pattern_size(filter) + 4), spent = 0;
	struct buf one = { 0 };
	const char *nl;
	size_t at, n;

	for (at = 0; at < len && spent < JOB_FILTER_BUDGET; at += n) {
		if ((nl = memchr(raw + at, '\n', len - at)) != NULL)
			n = (size_t)(nl - (raw + at)) + 1;
		else if (j->status != JOB_RUNNING)
			n = len - at;
		else
			break;
		spent += (uint64_t)n * unit;
		/* The matcher wants the line alone, NUL-terminated. */
		one.len = 0;
		buf_add(&one, raw + at, n - (nl != NULL));
		buf_add(&one, "", 1);
		if (pattern_match(filter, one.data, n - (nl != NULL)) == 1)
			utf8_repair(kept, raw + at, n);
	}
	buf_free(&one);
	return at;
}

/* The readJob answer for [since, ...). */
static json_t *
job_read_json(struct job *j, int64_t since, size_t max,
    struct pattern *filter)
{
	uint64_t from = since < 0 ? j->cursor : (uint64_t)since, to;
	struct buf raw = { 0 }, text = { 0 };
	bool dropped = false;
	json_t *o;

	if (from > j->total)
		from = j->total;
	if (from < job_oldest(j)) {
		from = job_oldest(j);
		dropped = true;
	}
	to = from + max < j->total ? from + max : j->total;
	to = job_whole(j, from, to);
	job_copy(j, from, to, &raw);
	if (filter != NULL)
		to = from + job_filter(j, raw.data, raw.len, filter, &text);
	else
		utf8_repair(&text, raw.data, raw.len);
	buf_free(&raw);
	if (since < 0)
		j->cursor = to;
	o = json_pack("{s:s%, s:I, s:I, s:b, s:s, s:O, s:O}", "text",
	    text.data != NULL ? text.data : "", text.len, "offset",
	    (json_int_t)from, "next", (json_int_t)to, "dropped", dropped,
	    "status", job_status_name(j->status), "exitCode", j->exit_code,
	    "signal", j->signal);
	buf_free(&text);
	return o;
}

int
job_read(struct job *j, int64_t since, size_t max, int wait_ms,
    const char *filter, struct ticket *tk, char *err, size_t errlen)
{
	struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
	struct pattern *pat = NULL;
	struct job_reader *r;
	uint64_t from = since < 0 ? j->cursor : (uint64_t)since;

	if (filter != NULL && (pat = pattern_compile(filter, err, errlen)) ==
	    NULL) {
		conn_ticket_drop(tk);
		return -1;
	}
	if (wait_ms == 0 || j->status != JOB_RUNNING || from < j->total) {
		conn_ticket_reply(tk, job_read_json(j, since, max, pat));
		pattern_free(pat);
		return 0;
	}
	if (j->nreaders == JOB_READERS_MAX) {
		for (r = j->readers; r->next != NULL; r = r->next)
			;
		job_reader_answer(r);
	}
	r = xcalloc(1, sizeof *r);
	j->nreaders++;
	r->j = j;
	r->tk = tk;
	r->since = since;
	r->max = max;
	r->filter = pat;
	r->timer = evtimer_new(job_base, job_reader_cb, r);
	evtimer_add(r->timer, &tv);
	r->next = j->readers;
	j->readers = r;
	return 0;
}

static void
job_reader_answer(struct job_reader *r)
{
	struct job_reader **pp;

	for (pp = &r->j->readers; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	r->j->nreaders--;
	conn_ticket_reply(r->tk, job_read_json(r->j, r->since, r->max,
	    r->filter));
	pattern_free(r->filter);
	event_free(r->timer);
	free(r);
}

static void
job_reader_cb(evutil_socket_t fd, short what, void *arg)
{
	job_reader_answer(arg);
}

/* New output (or the end): answer the readers that have some. */
static void
job_wake(struct job *j, bool ended)
{
	struct job_reader *r, *next;
	uint64_t from, to;

	for (r = j->readers; r != NULL; r = next) {
		next = r->next;
		from = r->since < 0 ? j->cursor : (uint64_t)r->since;
		to = job_whole(j, from, j->total);
		if (ended || to > from)
			job_reader_answer(r);
	}
}

/*
 * A session keeps the last max_per_session jobs that ended (their output
 * and how they ended); an older one is forgotten, so that a session that
 * starts job after job stays bounded.
 */
static void
job_forget_old(struct session *s)
{
	struct job **pp, *j, **oldest = NULL;
	unsigned ended = 0;

	for (pp = &s->jobs; (j = *pp) != NULL; pp = &j->next)
		if (j->status != JOB_RUNNING) {
			ended++;
			if (oldest == NULL)
				oldest = pp;
		}
	if (ended <= job_cfg.max_per_session || oldest == NULL)
		return;
	j = *oldest;
	*oldest = j->next;
	log_about(LOG_LEVEL_DEBUG, s->id, j->tool_use_id, j->name, "job %s "
	    "forgotten", j->id);
	job_free(j);
}

int
job_write(struct job *j, const char *data, size_t len, bool eof,
    const char **why)
{
	static char msg[96];

	if (j->status != JOB_RUNNING || j->proc == NULL) {
		snprintf(msg, sizeof msg, "job %s has ended", j->id);
		*why = msg;
		return -1;
	}
	if (proc_write(j->proc, data, len, eof, why) != 0) {
		snprintf(msg, sizeof msg, "job %s: %s", j->id, *why);
		*why = msg;
		return -1;
	}
	return 0;
}

int
job_signal_fg(struct job *j, int sig)
{
	if (j->status != JOB_RUNNING || j->proc == NULL)
		return -1;
	return proc_signal_fg(j->proc, sig);
}

int
job_signal(struct job *j, const char *how)
{
	if (j->status != JOB_RUNNING || j->proc == NULL)
		return -1;
	if (strcmp(how, "interrupt") == 0)
		proc_signal(j->proc, SIGINT);
	else {
		j->killing = true;
		proc_kill(j->proc);
		if (strcmp(how, "kill") == 0)
			proc_signal(j->proc, SIGKILL);
	}
	return 0;
}

int
job_resize(struct job *j, unsigned cols, unsigned rows, const char **why)
{
	static char msg[96];

	if (j->status != JOB_RUNNING || j->proc == NULL)
		snprintf(msg, sizeof msg, "job %s has ended", j->id);
	else if (proc_resize(j->proc, cols, rows) != 0)
		snprintf(msg, sizeof msg, "job %s has no terminal", j->id);
	else
		return 0;
	*why = msg;
	return -1;
}

/* The job an internal tool's input names, by either of its fields. */
static struct job *
job_named(struct session *s, const json_t *input, const char *field,
    const char **id)
{
	const json_t *v = json_object_get(input, field);

	if (!json_is_string(v))
		v = json_object_get(input, "jobId");
	*id = json_is_string(v) ? json_string_value(v) : NULL;
	return *id != NULL ? job_find(s, *id) : NULL;
}

char *
job_internal(struct session *s, struct exec_tool *t, int kind,
    const json_t *input, bool *is_error, bool *wait)
{
	const json_t *filter = json_object_get(input, "filter");
	struct pattern *pat = NULL;
	char err[256], state[64], *out;
	const char *text;
	size_t len;
	struct job *j;
	const char *id;
	json_t *r;

	*is_error = true;
	*wait = false;
	j = job_named(s, input, kind == TOOLDEF_INTERNAL_JOB_OUTPUT ?
	    "bash_id" : "shell_id", &id);
	if (j == NULL) {
		xasprintf(&out, "<tool_use_error>Error: no job %s in this "
		    "session</tool_use_error>", id != NULL ? id : "(no id "
		    "given)");
		return out;
	}
	if (kind == TOOLDEF_INTERNAL_JOB_KILL) {
		if (job_signal(j, "terminate") != 0) {
			xasprintf(&out, "<tool_use_error>Error: job %s has "
			    "already ended (%s)</tool_use_error>", j->id,
			    j->reason);
			return out;
		}
		j->killers = xreallocarray(j->killers, j->nkillers + 1,
		    sizeof *j->killers);
		j->killers[j->nkillers++] = t;
		*wait = true;
		return NULL;
	}
	if (json_is_string(filter) && (pat = pattern_compile(
	    json_string_value(filter), err, sizeof err)) == NULL) {
		xasprintf(&out, "<tool_use_error>Error: filter: %s"
		    "</tool_use_error>", err);
		return out;
	}
	r = job_read_json(j, -1, JOB_READ_DEFAULT, pat);
	pattern_free(pat);
	*is_error = false;
	text = json_string_value(json_object_get(r, "text"));
	len = strlen(text);
	if (j->status == JOB_RUNNING)
		snprintf(state, sizeof state, "running");
	else if (json_is_integer(j->exit_code))
		snprintf(state, sizeof state, "%s, exit code %lld",
		    job_status_name(j->status),
		    (long long)json_integer_value(j->exit_code));
	else if (json_is_integer(j->signal) && !j->killing)
		snprintf(state, sizeof state, "%s by signal %lld",
		    job_status_name(j->status),
		    (long long)json_integer_value(j->signal));
	else
		snprintf(state, sizeof state, "%s", job_status_name(j->status));
	xasprintf(&out, "%s%s[job %s: %s]", text, len > 0 && text[len - 1] !=
	    '\n' ? "\n" : "", j->id, state);
	json_decref(r);
	return out;
}

void
job_kill_cancel(struct session *s, struct exec_tool *t)
{
	struct job *j;
	size_t i;

	for (j = s->jobs; j != NULL; j = j->next)
		for (i = 0; i < j->nkillers; i++)
			if (j->killers[i] == t) {
				j->killers[i] = j->killers[--j->nkillers];
				return;
			}
}

void
job_close_all(struct session *s)
{
	struct job *j;

	for (j = s->jobs; j != NULL; j = j->next)
		if (j->status == JOB_RUNNING && j->proc != NULL) {
			j->killing = true;
			proc_kill(j->proc);
		}
}

void
job_free_all(struct session *s)
{
	struct job *j;

	while ((j = s->jobs) != NULL) {
		s->jobs = j->next;
		job_free(j);
	}
}

void
job_handover(struct session *s)
{
	struct handover_rec r;
	struct buf out = { 0 }, ring = { 0 };
	json_t *proc;
	struct job *j;

	for (j = s->jobs; j != NULL; j = j->next) {
		/*
		 * A long-poll is not carried: it is answered now, with what
		 * there is, like one whose waitMs ran out.
		 */
		while (j->readers != NULL)
			job_reader_answer(j->readers);
		r.json = json_pack("{s:s, s:i, s:s, s:s, s:s, s:O, s:I, s:b, "
		    "s:b, s:i, s:O, s:O, s:s?, s:I, s:I, s:I}", "s", s->id,
		    "n", (int)s->njobs, "id", j->id, "toolUseId",
		    j->tool_use_id, "name", j->name, "command", j->command,
		    "startedAt", (json_int_t)j->started_at, "tty", j->tty,
		    "killing", j->killing, "status", (int)j->status,
		    "exitCode", j->exit_code, "signal", j->signal, "reason",
		    j->reason, "total", (json_int_t)j->total, "cursor",
		    (json_int_t)j->cursor, "noted", (json_int_t)j->noted);
		memset(&r.bytes, 0, sizeof r.bytes);
		ring.len = 0;
		job_copy(j, job_oldest(j), j->total, &ring);
		handover_put(&r, r.json, "ring", ring.data, ring.len);
		if (j->owner != NULL)
			json_object_set_new(r.json, j->owner->key,
			    j->owner->save(s, &r));
		/* Its process runs on in the next image, as a tool's does. */
		if (j->proc != NULL) {
			proc = json_object();
			proc_save(j->proc, &r, proc);
			json_object_set_new(r.json, "proc", proc);
		}
		/* And its way out: the same port, its open tunnels. */
		if (j->proxy != NULL)
			json_object_set_new(r.json, "proxy",
			    proxy_tool_save(j->proxy, &r));
		out.len = 0;
		handover_encode(&r, &out);
		journal_append(JOURNAL_JOB, out.data, out.len, NULL, 0);
	}
	buf_free(&ring);
	buf_free(&out);
}

/* The reasons a job can end with, as the constant strings they are. */
static const char *
job_reason_of(const char *name)
{
	static const char *const reasons[] = { "ok", "exit", "signal",
	    "killed", "memory_limit", "process_limit", "spawn_failed" };
	size_t i;

	for (i = 0; name != NULL && i < nitems(reasons); i++)
		if (strcmp(name, reasons[i]) == 0)
			return reasons[i];
	return NULL;
}

void
job_restore(struct session *s, const struct handover_in *in)
{
	const json_t *o = in->json, *proc = json_object_get(o, "proc"), *v;
	const char *ring;
	struct job *j, **pp;
	size_t len, i;

	/* Not job_new: a carried job is never refused over the limit. */
	j = xcalloc(1, sizeof *j);
	j->s = s;
	j->tool_use_id = xstrdup(json_string_value(json_object_get(o,
	    "toolUseId")) != NULL ? json_string_value(json_object_get(o,
	    "toolUseId")) : "?");
	j->name = xstrdup(json_string_value(json_object_get(o, "name")) !=
	    NULL ? json_string_value(json_object_get(o, "name")) : "?");
	j->tty = json_is_true(json_object_get(o, "tty"));
	snprintf(j->id, sizeof j->id, "%s", json_string_value(json_object_get(o,
	    "id")) != NULL ? json_string_value(json_object_get(o, "id")) :
	    "j-?");
	j->command = json_incref(json_object_get(o, "command"));
	if (j->command == NULL)
		j->command = json_array();
	j->started_at = json_integer_value(json_object_get(o, "startedAt"));
	j->killing = json_is_true(json_object_get(o, "killing"));
	j->status = (enum job_status)json_integer_value(json_object_get(o,
	    "status"));
	if ((j->exit_code = json_incref(json_object_get(o, "exitCode"))) ==
	    NULL)
		j->exit_code = json_null();
	if ((j->signal = json_incref(json_object_get(o, "signal"))) == NULL)
		j->signal = json_null();
	if (j->status > JOB_KILLED)
		j->status = JOB_KILLED;
	j->reason = job_reason_of(json_string_value(json_object_get(o,
	    "reason")));
	/* The ring as it was: its bytes end at total. */
	ring = handover_get(in, o, "ring", &len);
	j->total = (uint64_t)json_integer_value(json_object_get(o, "total")) -
	    len;
	job_output(j, ring, len);
	j->cursor = (uint64_t)json_integer_value(json_object_get(o, "cursor"));
	j->noted = (uint64_t)json_integer_value(json_object_get(o, "noted"));
	if ((unsigned)json_integer_value(json_object_get(o, "n")) > s->njobs)
		s->njobs = (unsigned)json_integer_value(json_object_get(o, "n"));
	for (pp = &s->jobs; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = j;
	if (proc != NULL && j->status == JOB_RUNNING) {
		j->proc = proc_adopt(in, proc, &job_proc_ops, j);
		j->pid = proc_pid(j->proc);
		s->jobs_running++;
		if ((v = json_object_get(o, "proxy")) != NULL) {
			if (s->net_quota == NULL)
				s->net_quota = proxy_quota_new();
			if ((j->proxy = proxy_tool_adopt(in, v, s->net_quota,
			    s->id, j->tool_use_id, j->name)) == NULL)
				log_about(LOG_LEVEL_WARN, s->id, j->tool_use_id,
				    j->name, "network: its proxy was not carried "
				    "by the reload: its connections fail from now "
				    "on");
		}
	} else if (j->status == JOB_RUNNING) {
		/* Running without a process: it cannot have survived. */
		j->status = JOB_KILLED;
		j->reason = "killed";
	}
	for (i = 0; j->proc != NULL && j->owner == NULL &&
	    i < nitems(job_owners) && job_owners[i] != NULL; i++) {
		if (!json_is_object(v = json_object_get(o, job_owners[i]->key)))
			continue;
		j->owner = job_owners[i];
		j->owner->restore(s, j, in, v);
	}
}
