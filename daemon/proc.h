/*
 * A supervised tool process (DESIGN.md §4, S16-S18, S20). Spawned in its own
 * process group with stdin fed then closed, stdout/stderr/fd 3 read without
 * blocking, a wall-clock timeout with TERM -> grace -> KILL to the group,
 * output kept as head + tail in memory and written whole to a file when it
 * exceeds the cap. Knows nothing of sessions, tools or JSON: it reports
 * through callbacks and a void *.
 */
#ifndef STEXEC_PROC_H
#define STEXEC_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "output.h"

struct event_base;
struct proc;

struct proc_spec {
	char *const *argv;   /* argv[0] is executed as given (no PATH search
	                        unless it has no '/') */
	char *const *envp;   /* the complete environment */
	const char *cwd;
	const char *input;   /* written to stdin, then EOF */
	size_t input_len;
	int64_t timeout_ms;  /* wall clock from spawn; <= 0: none */
	size_t max_output;   /* combined content kept whole up to this */
	bool stream_output;  /* report stdout/stderr chunks as they come */
	const char *name;    /* for the output file name and logs */
};

enum proc_end {
	PROC_EXITED,       /* exited by itself: see status */
	PROC_SIGNALED,     /* died of a signal nobody here sent */
	PROC_TIMED_OUT,    /* killed by the timeout */
	PROC_KILLED,       /* killed by proc_kill */
	PROC_SPAWN_FAILED, /* never ran: see error */
};

struct proc_exit {
	enum proc_end end;
	int status;            /* exit code, PROC_EXITED */
	int signal;            /* terminating signal, when there was one */
	int64_t duration_ms;   /* from spawn to the end of the main process */
	const char *error;     /* PROC_SPAWN_FAILED: e.g. "/x: No such file..." */
	struct output output;  /* valid during the callback only */
};

struct proc_ops {
	/* One line from fd 3, without its newline. */
	void (*line)(void *arg, const char *line, size_t len);
	/* With stream_output: a chunk of stdout (fd 1) or stderr (fd 2). */
	void (*chunk)(void *arg, int fd, const char *data, size_t len);
	/*
	 * Called once, when the main process has ended, its leftovers are dead
	 * and reaped, and every pipe is drained and closed. The proc is freed
	 * by this module when the callback returns.
	 */
	void (*exit)(void *arg, const struct proc_exit *);
};

struct proc_config {
	int kill_grace_ms;     /* TERM -> KILL, default 2000 */
	int leftover_grace_ms; /* main exited -> kill leftovers, default 100 */
	int max_procs;         /* running tool processes at once; 0: no cap */
	const char *output_dir;
};

/*
 * Set up the supervisor on a base: become a child subreaper, install the
 * SIGCHLD event, create the output directory. -1 with err on failure.
 */
int proc_init(struct event_base *, const struct proc_config *, char *err,
    size_t errlen);
/* Kill every process group, wait for all to be reaped, free everything. */
void proc_shutdown(void);

/*
 * Start a process, or queue it until a max_procs slot is free. Never NULL:
 * failures to start are reported through ops->exit (PROC_SPAWN_FAILED),
 * from the event loop, never from inside this call.
 */
struct proc *proc_spawn(const struct proc_spec *, const struct proc_ops *,
    void *arg);
/* TERM to the group now, KILL after the grace; ends as PROC_KILLED. */
void proc_kill(struct proc *);
/* Stop (true) or resume (false) reading the process's pipes. */
void proc_pause(struct proc *, bool);
/* The main pid, or 0 while queued or after it ended. */
pid_t proc_pid(const struct proc *);

/* Processes running and started since proc_init, for stats. */
unsigned proc_running(void);
uint64_t proc_started(void);

#endif
