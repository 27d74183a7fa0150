/*
 * A supervised tool process (doc/design.md §4, S16-S18, S20). Spawned in its own
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
#include <time.h>

#include "output.h"
#include "supervisor/sandbox.h"
#include "supervisor/toolcg.h"

struct event_base;
struct proc;

/* Another user to run a tool as (a root daemon's client of that uid). */
struct proc_user {
	uid_t uid;
	gid_t gid;
	const gid_t *groups;  /* supplementary */
	size_t ngroups;
	const char *error;    /* it cannot be had: the tool fails to start */
};

struct proc_spec {
	char *const *argv;   /* argv[0] is executed as given (no PATH search
	                        unless it has no '/') */
	char *const *envp;   /* the complete environment; the child gets it
	                        plus STEXEC_PROC_TOKEN=<instance>-<n>, unique
	                        across daemons (<instance>: 16 random hex
	                        digits; any such entry given is replaced), by
	                        which escapees are told apart (S20) */
	const char *cwd;
	const char *input;   /* written to stdin, then EOF */
	size_t input_len;
	bool stdin_stream;   /* no EOF after the input: proc_write adds more */
	const char *early;   /* with stdin_stream or tty: more after the
	                        input (a client's, written before the start;
	                        not counted against PROC_STDIN_MAX) */
	size_t early_len;
	bool early_eof;      /* ...then EOF (a terminal's ^D) */
	bool tty;            /* 0, 1, 2 a new terminal, its controlling one;
	                        output comes as stdout; input is not written */
	unsigned cols, rows; /* its size; 0: 80x24 */
	bool tty_raw;        /* the terminal in raw mode (cfmakeraw) */
	int64_t timeout_ms;  /* wall clock from spawn; <= 0: none */
	size_t max_output;   /* combined content kept whole up to this;
	                        beyond, max_output / 2 bytes of head, the
	                        rest of it as tail, and a file */
	bool stream_output;  /* report stdout/stderr chunks as they come */
	struct toolcg_limits limits; /* 0s: none (toolcg.h says how each
	                        is enforced) */
	struct sandbox_spec sandbox; /* its profile (sandbox.h); any but
	                        none gives it a private TMPDIR removed when it
	                        ends, and fails to start where the kernel
	                        cannot enforce it */
	const char *name;    /* for the output file name and logs */
	const struct proc_user *user; /* NULL: the daemon's own; else its
	                        TMPDIR and output file are that user's too */
};

enum proc_end {
	PROC_EXITED,       /* exited by itself: see status */
	PROC_SIGNALED,     /* died of a signal nobody here sent */
	PROC_TIMED_OUT,    /* killed by the timeout */
	PROC_KILLED,       /* killed by proc_kill */
	PROC_SPAWN_FAILED, /* never ran: see error */
	PROC_LIMIT_HIT,    /* killed over a limit: see hit and limit */
};

struct proc_exit {
	enum proc_end end;
	int status;            /* exit code, PROC_EXITED */
	int signal;            /* terminating signal, when there was one */
	int64_t duration_ms;   /* from spawn to the end of the main process */
	const char *error;     /* PROC_SPAWN_FAILED: e.g. "cannot run /x: No
	                          such file or directory", "cannot chdir to
	                          /y: Not a directory" */
	struct output output;  /* valid during the callback only; truncated
	                          when total > head_len; head and tail are
	                          NUL-terminated */
	const char *output_error; /* the whole content could not be saved
	                             (e.g. "cannot write PATH: No space left
	                             on device"): output.path is then NULL
	                             but head and tail are still right */
	enum toolcg_hit hit;   /* PROC_LIMIT_HIT: which limit */
	uint64_t limit;        /* PROC_LIMIT_HIT: its value */
	bool peak_measured;
	uint64_t peak_memory;  /* bytes, when peak_measured */
	bool cpu_measured;
	uint64_t cpu_ms;
};

struct proc_ops {
	/*
	 * One line from fd 3, without its newline, NUL-terminated. A line
	 * longer than 8 MiB comes in 8 MiB pieces; a last line without a
	 * newline is delivered at EOF.
	 */
	void (*line)(void *arg, const char *line, size_t len);
	/* With stream_output: a chunk of stdout (fd 1) or stderr (fd 2). */
	void (*chunk)(void *arg, int fd, const char *data, size_t len);
	/*
	 * line and chunk may call proc_kill, proc_pause and proc_spawn (never
	 * proc_shutdown). After main has exited, what is left in the pipes is
	 * read (up to 8 MiB each) and delivered even while paused.
	 */
	/*
	 * Called once, when the main process has ended, its leftovers are dead
	 * and reaped, and every pipe is drained and closed. The proc is freed
	 * by this module when the callback returns.
	 */
	void (*exit)(void *arg, const struct proc_exit *);
	/*
	 * The process started, at (CLOCK_MONOTONIC: its spawn), once its
	 * execve is known to have happened (NULL: not wanted): from inside
	 * proc_spawn, or later when a max_procs slot came; for a child
	 * started beside running tools without waiting for its execve, later
	 * still, at the first sign of it (its output, its end, proc_execd,
	 * the counts read, a reload). Never for one that failed before. It
	 * may not call proc_*.
	 */
	void (*started)(void *arg, const struct timespec *at);
};

struct proc_config {
	int kill_grace_ms;     /* TERM -> KILL, default (when <= 0) 2000 */
	int leftover_grace_ms; /* main exited -> kill leftovers, default
	                          (when <= 0) 100 */
	int max_procs;         /* running tool processes at once; 0: no cap */
	const char *output_dir; /* for output files; NULL: /tmp */
	bool guard;            /* start a sentinel (sentinel.h): tools die
	                          with the daemon, however it dies */
	bool no_cgroup;        /* guard without a cgroup v2 subtree */
	bool measure_memory;   /* a v1 memory group for every tool */
	uint64_t output_file_max; /* no output file beyond this; 0: no cap */
	const char *handover;  /* a reload's proc_handover_env: this image
	                          goes on with the one before's tokens,
	                          sentinel and cgroup subtree */
};

/*
 * Set up the supervisor on a base: become a child subreaper, block SIGCHLD
 * and read it from a signalfd (the only reader: nothing else may reap
 * children or own SIGCHLD), ignore SIGPIPE (writing stdin needs it),
 * create the output directory. -1 with err on failure.
 *
 * Every child of the daemon is taken for a tool's: when a tool ends, any
 * re-parented process that is neither in a running tool's process group
 * nor carries a running tool's STEXEC_PROC_TOKEN is killed. Where tools
 * get a cgroup each (toolcg.h), a tool's end is instead cgroup.kill and
 * waiting for its cgroup to be empty: no /proc scan.
 *
 * With cfg->guard, also start the sentinel; proc_shutdown stops it.
 */
int proc_init(struct event_base *, const struct proc_config *, char *err,
    size_t errlen);
/*
 * Kill every process group and every child, wait for all to be reaped, free
 * everything, without callbacks. Output files not yet reported are removed.
 */
void proc_shutdown(void);

/*
 * Start a process, or queue it until a max_procs slot is free (FIFO; the
 * timeout counts from the real start). Never NULL: failures to start are
 * reported through ops->exit (PROC_SPAWN_FAILED), from the event loop, never
 * from inside this call. The spec and everything it points to are copied.
 * argv[0] without a '/' is looked up in the PATH of envp (default
 * /usr/local/bin:/usr/bin:/bin; relative entries against cwd).
 */
struct proc *proc_spawn(const struct proc_spec *, const struct proc_ops *,
    void *arg);
/*
 * TERM to the group now, KILL after the grace; ends as PROC_KILLED. Queued:
 * never starts. After main has exited: leftovers are killed at once. No-op
 * once the processes are dead.
 */
void proc_kill(struct proc *);
/* Bytes a client may queue for a tool's stdin, and what a write past them is told. */
#define PROC_STDIN_MAX (1U << 20)
#define PROC_STDIN_FULL \
	"more than 1048576 bytes are already queued for its stdin"
/*
 * More for the stdin of a stdin_stream or tty process (queued while it waits
 * for a slot); eof closes it after them (a terminal gets ^D). -1 with *why
 * when its stdin is closed or over 1 MiB would be queued.
 */
int proc_write(struct proc *, const char *, size_t, bool eof,
    const char **why);
/* A signal to its process group while the main process runs. */
void proc_signal(struct proc *, int);
/*
 * A signal to its terminal's foreground process group (which may be the
 * main process's own): that group, or -1 when it has no terminal or none.
 */
int proc_signal_fg(struct proc *, int);
/* A terminal's new size (SIGWINCH to its foreground); -1: none. */
int proc_resize(struct proc *, unsigned cols, unsigned rows);
/*
 * A job (doc/design.md §7, Jobs): its timeout no longer applies, and it
 * holds no max_procs slot (queued, it still waits for one to start).
 */
void proc_detach(struct proc *);
/* Later callbacks go to these ops and arg (a start known now, to the old). */
void proc_rebind(struct proc *, const struct proc_ops *, void *arg);
/* Stop (true) or resume (false) reading the process's pipes. */
void proc_pause(struct proc *, bool);
/* The main pid, or 0 while queued or after it ended. */
pid_t proc_pid(const struct proc *);
/* Its peak memory and CPU time so far, where cgroups measure them. */
void proc_usage(const struct proc *, bool *has_peak, uint64_t *peak,
    bool *has_cpu, uint64_t *cpu_ms);

/*
 * Descriptors the supervisor may need at once with max_procs tools running
 * (pipes, output files, one spawn's transient ends): what must stay free
 * for spawning never to fail for want of descriptors.
 */
unsigned proc_fds_needed(void);

/*
 * Reload (SIGHUP): while held, queued processes do not start; idle when
 * every process is queued, none started (none runs, none is ending).
 */
void proc_hold(bool);
bool proc_idle(void);
/*
 * A reload that hands running tools over (doc/design.md §7, Reload):
 * settled when no process is between its main's end and its exit
 * callback (those take a moment; running and queued ones are fine).
 */
bool proc_settled(void);
/*
 * Before the handover: wait (up to ms in all) for every child started
 * without waiting for its execve that is still before it, so that a
 * failure before its exec, read from this image's memory, is handed over
 * as its error (proc_save); one still before it then is logged there.
 */
void proc_await_execs(int64_t ms);
/* Whether p runs and can be handed over (queued ones are not). */
bool proc_carried(const struct proc *);
/*
 * Its state into obj, its bytes into the record, its descriptors kept
 * open across execve. Nothing of it is touched: the image is replaced.
 */
struct handover_rec;
struct handover_in;
void proc_save(struct proc *, struct handover_rec *, json_t *obj);
/*
 * What the next image needs before proc_init (proc_config.handover): the
 * token prefix and counter, the sentinel, the cgroup subtree. malloc'd.
 */
char *proc_handover_env(void);
/* The next image: a process handed over, running on as if never left. */
struct proc *proc_adopt(const struct handover_in *, const json_t *obj,
    const struct proc_ops *, void *arg);
/* Once all are adopted: reap what ended during the exec. */
void proc_adopted(void);

/*
 * This daemon's token prefix ("<16 hex digits>-"): every tool carries
 * STEXEC_PROC_TOKEN=<prefix><n>.
 */
const char *proc_instance_token(void);
/*
 * After a crash (doc/design.md §7, Restart): kill whatever an earlier daemon (of that pid)
 * left, the processes whose environment carries its token prefix and
 * everything in its cgroup subtree (NULL: none), pass after pass until
 * none is left (at most about a second); then remove its tools' TMPDIRs
 * and v1 cgroups. How many processes were killed.
 */
unsigned proc_kill_instance(const char *token, const char *cgroup,
    long pid);

/*
 * Processes running, and started since proc_init (their execve happened;
 * a spawn that failed is not one), for stats.
 */
unsigned proc_running(void);
uint64_t proc_started(void);
/*
 * Count the children known to have exec'd since (ops.started): before the
 * counts are read.
 */
void proc_count_execs(void);
/* Whether p's execve is known to have happened (checked now). */
bool proc_execd(struct proc *);
/* Of those, started without waiting for their execve (spawn_launch). */
uint64_t proc_launched(void);

/*
 * The name of the sandboxed tool that pid is a process of (by its process
 * group, else the token in its environment), or NULL: such a process may
 * not reach the daemon (conn_set_peer_check).
 */
const char *proc_sandboxed_peer(pid_t);

#endif
