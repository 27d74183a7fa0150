/*
 * Jobs (doc/design.md §7, Jobs): tool processes that run on after their
 * result, owned by the session. A job's output is kept in a ring of the
 * last --job-output-bytes, read by offset (readJob, bash_output), and sent
 * as coalesced job_output notifications; its end as job_exit.
 */
#ifndef STEXEC_JOB_H
#define STEXEC_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct exec_tool;
struct job;
struct proc;
struct session;
struct ticket;

#define JOB_OUTPUT_BYTES_DEFAULT (4U << 20)
#define JOB_MAX_PER_SESSION_DEFAULT 64
#define JOB_READ_DEFAULT 65536
#define JOB_READ_MAX (4U << 20)
#define JOB_WAIT_MAX_MS 60000

struct job_config {
	size_t output_bytes;     /* the ring; 0: the default */
	unsigned max_per_session; /* running at once; 0: the default */
};

void job_init(struct event_base *, const struct job_config *);
/*
 * What a job tells its session, given by session.c once: a notification
 * to log and send (elide: its params.text is journaled by its length,
 * like a streamed chunk's), a kill_shell call answered with this text, a
 * job ended (a closing session may be done). job.c is below session.c and
 * calls it only through these.
 */
struct job_hooks {
	void (*notify)(struct session *, const char *method, json_t *params,
	    bool elide);
	void (*answered)(struct exec_tool *, const char *text);
	void (*ended)(struct session *);
};
void job_set_hooks(const struct job_hooks *);

/*
 * Who owns a job from above (bash_session's shell, shell.h): told of its
 * output while it runs and of its end, asked for its state at a reload
 * (kept under key in the job's record), and given back a carried job
 * whose record holds key. job.c calls an owner only through these, so no
 * call runs from job.c up to its users.
 */
struct handover_in;
struct handover_rec;
struct proc_exit;
struct job_owner {
	const char *key;
	void (*output)(struct session *, struct job *, const char *, size_t);
	void (*exited)(struct session *, struct job *,
	    const struct proc_exit *);
	json_t *(*save)(struct session *, struct handover_rec *);
	void (*restore)(struct session *, struct job *,
	    const struct handover_in *, const json_t *);
};
#define JOB_OWNERS_MAX 4
/* A kind of owner job_restore knows from now on (a static object). */
void job_add_owner(const struct job_owner *);
/* The job's owner from now on; before the loop runs again after job_spawn. */
void job_set_owner(struct job *, const struct job_owner *);
const struct job_config *job_config(void);

/*
 * A call that may become a job: it collects output from its start. NULL
 * when the session already runs max_per_session jobs (it stays a tool).
 */
struct job *job_new(struct session *, const char *tool_use_id,
    const char *name, char *const *argv, bool tty);
/* Bytes of its output, before or after it became a job. */
void job_output(struct job *, const char *, size_t);
/*
 * It runs on as a job (its process has started): it gets its id, joins
 * the session's jobs and takes over the process's callbacks. Returns meta.job and sets *content (the
 * result's, with the output so far: at most max bytes of it).
 */
json_t *job_attach(struct job *, struct proc *, size_t max, char **content);
/* Network rules: the call's proxy is the job's now, until it ends. */
struct proxy_tool;
void job_take_proxy(struct job *, struct proxy_tool *);
/*
 * A job at once, running spec's process (bash_session's shell, which
 * then makes itself its owner). NULL as job_new.
 */
struct proc_spec;
struct job *job_spawn(struct session *, const char *tool_use_id,
    const char *name, const struct proc_spec *);
const char *job_id(const struct job *);
pid_t job_pid(const struct job *);
/* A signal to its terminal's foreground group (proc_signal_fg). */
int job_signal_fg(struct job *, int);
/* Its process ended before it became one: it never was. */
void job_free(struct job *);

/* The session's job of that id, or NULL. */
struct job *job_find(struct session *, const char *id);
json_t *job_list_json(struct session *);
/*
 * readJob: from since (< 0: this session's read cursor, which then moves
 * on), at most max bytes, waiting up to wait_ms for output; filter (may be
 * NULL) keeps matching lines. The ticket is answered now or later;
 * -1 with err when filter does not compile (the ticket is dropped).
 */
int job_read(struct job *, int64_t since, size_t max, int wait_ms,
    const char *filter, struct ticket *, char *err, size_t errlen);
/* writeJob; -1 with *why (a State conflict) when it cannot be had. */
int job_write(struct job *, const char *, size_t, bool eof,
    const char **why);
/* signalJob: "interrupt", "terminate", "kill"; -1 when it has ended. */
int job_signal(struct job *, const char *how);
/* resizeJob; -1 with *why. */
int job_resize(struct job *, unsigned cols, unsigned rows, const char **why);

/*
 * The built-ins answered by the daemon (internal "job_output" and
 * "job_kill"): the content of the answer, and whether it is an error. For
 * job_kill of a running job, *wait is set: the answer is given by
 * job_kill_done(tool) once the job is dead (or the tool is cancelled with
 * job_kill_cancel).
 */
char *job_internal(struct session *, struct exec_tool *, int kind,
    const json_t *input, bool *is_error, bool *wait);
void job_kill_cancel(struct session *, struct exec_tool *);

/*
 * A reload (doc/design.md §7, Reload): every job of the session, its state,
 * the output its ring holds and its process, one JOURNAL_JOB record each;
 * in the next image, a job of such a record made again.
 */
void job_handover(struct session *);
void job_restore(struct session *, const struct handover_in *);

/* Close: kill every job of the session; free: after they are all dead. */
void job_close_all(struct session *);
void job_free_all(struct session *);
unsigned job_running(const struct session *);

#endif
