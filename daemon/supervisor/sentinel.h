/*
 * No tool outlives the daemon, even a SIGKILLed one (doc/design.md S18, G4). At
 * start the daemon puts itself in a cgroup v2 subtree where it can
 * (cgroup.h) and forks a sentinel: a small process that holds the read end
 * of a pipe only the daemon writes to. The daemon tells it each tool's
 * process group as it starts and ends: in a bitmap they share (a store, no
 * system call), or by the pipe for a sentinel adopted across a reload.
 * When the pipe reaches EOF, i.e. the
 * daemon has exited however it died, the sentinel kills the subtree, then
 * every recorded group and every process whose environment carries this
 * daemon's STEXEC_PROC_TOKEN prefix, again until none is left, and exits.
 * The write end is CLOEXEC; a daemon that re-executes itself keeps it by
 * clearing the flag, and the sentinel never notices.
 */
#ifndef STEXEC_SENTINEL_H
#define STEXEC_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct event_base;

/*
 * Start guarding (needs the reaper: the sentinel is a registered child).
 * token_prefix: what every tool's STEXEC_PROC_TOKEN value starts with.
 * replay: called after a sentinel that died was replaced, to watch every
 * live group again. use_cgroup false: the sentinel alone. -1 with err.
 */
int sentinel_start(struct event_base *, const char *token_prefix,
    void (*replay)(void), bool use_cgroup, char *err, size_t errlen);
/*
 * A reload (doc/design.md §7, Reload): hand the running sentinel over
 * (what is not written to it yet is written now; its pipe is kept open
 * across execve): false when none runs. The next image adopts it before
 * sentinel_start, which then forks none, and the sentinel never notices.
 */
bool sentinel_handover(pid_t *pid, int *fd);
void sentinel_adopt(pid_t pid, int fd);
/* A tool's group exists / is gone. No-ops when not started. */
void sentinel_watch(pid_t pgid);
void sentinel_forget(pid_t pgid);
/*
 * Clean shutdown: leave the cgroup, let the sentinel sweep (it kills what
 * is left and removes the subtree), wait for it to exit.
 */
void sentinel_stop(void);

#endif
