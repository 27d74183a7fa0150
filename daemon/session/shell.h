/*
 * bash_session (doc/design.md §7, Shell sessions): one live bash per
 * session, a job on a raw terminal, started by its first call and reused
 * by the next ones. Each command goes in as a quoted here-document run by
 * eval with stdin from /dev/null, between a start and an end marker that
 * carry a random token of its own; the result is what came between them
 * and the status the end marker gives. It owns its job (job.h's
 * job_owner): job.c feeds it the job's output and end, and a reload
 * carries its state in the job's record; session.c answers its calls
 * through the hooks.
 */
#ifndef STEXEC_SHELL_H
#define STEXEC_SHELL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct exec_exit;
struct exec_spawn;
struct exec_tool;
struct job;
struct session;

/* After SIGINT, and again after SIGKILL, the marker is awaited this long. */
#define SHELL_GRACE_MS 1000

struct shell_hooks {
	/* The shell's process, started as a tool of req would be; NULL: no. */
	struct job *(*spawn)(struct session *, struct exec_tool *,
	    const struct exec_spawn *, char *const *argv);
	/* The call is done (as exec_exited). */
	void (*answer)(struct exec_tool *, const struct exec_exit *);
};

void shell_init(struct event_base *, const struct shell_hooks *);
/*
 * A call: NULL with *wait when the answer comes later through the hook,
 * else the content to answer with now, and whether it is an error.
 */
char *shell_call(struct session *, struct exec_tool *,
    const struct exec_spawn *, bool *is_error, bool *wait);
/* The call is cancelled: its command is interrupted, nobody is answered. */
void shell_cancel(struct session *, struct exec_tool *);
void shell_free(struct session *);

#endif
