/*
 * The one SIGCHLD path (doc/design.md §6, S18): the daemon is a child subreaper,
 * SIGCHLD is blocked and read from a signalfd in the loop (no handler, no
 * self-pipe: a tool's end costs one read), which runs a waitpid loop that
 * hands the status of registered pids to their owner; anything else (orphans
 * re-parented to the daemon) is reaped silently. Also finds those orphans
 * while they still run, by scanning /proc, so that the supervisor can kill
 * them.
 */
#ifndef STEXEC_REAPER_H
#define STEXEC_REAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct event_base;

typedef void (*reaper_cb)(pid_t, int, void *);

/* A live or zombie child of this process that is not a registered pid. */
struct reaper_orphan {
	pid_t pid;
	pid_t pgid;
	bool zombie;
};

/*
 * Become a subreaper, block SIGCHLD (in the calling thread: call it before
 * any other starts) and watch its signalfd. -1 with err on failure.
 */
int reaper_init(struct event_base *, char *err, size_t errlen);
/* Remove the SIGCHLD event and forget every registered pid. */
void reaper_free(void);

/* Call cb(pid, status, arg) from the loop when pid has been reaped. */
void reaper_add(pid_t, reaper_cb, void *);
void reaper_remove(pid_t);

/* Reap every child that has ended now (what the SIGCHLD event does). */
void reaper_reap(void);

/* Call cb for every unregistered child, in /proc order. */
void reaper_orphans(void (*cb)(const struct reaper_orphan *, void *), void *);
/* Copy the value of NAME in pid's initial environment; -1 when absent. */
int reaper_getenv(pid_t, const char *name, char *value, size_t len);

/* Read ppid, pgid and state from /proc/PID/stat; -1 if it is gone. */
int reaper_stat(pid_t, pid_t *ppid, pid_t *pgid, char *state);

/* Kill every child (and what they leave) and reap them all; for shutdown. */
void reaper_kill_all(void);

#endif
