/*
 * Starting one tool process: a vfork-like clone whose child runs our own
 * code before execve, so that it can join cgroups, take rlimits and confine
 * itself with Landlock (none of which posix_spawn can do). Where clone3 is
 * wired (x86_64) the child is born in its cgroup (CLONE_INTO_CGROUP), no
 * migration; elsewhere it writes itself into it. The parent is suspended
 * until the child has exec'd or failed, as with posix_spawn.
 */
#ifndef STEXEC_SPAWN_H
#define STEXEC_SPAWN_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#define SPAWN_MAX_JOIN 4
#define SPAWN_MAX_RLIMITS 4

struct spawn_rlimit {
	int resource;
	rlim_t value;
};

struct spawn_req {
	const char *path;        /* to execve */
	char *const *argv;
	char *const *envp;
	int fds[4];              /* become the child's 0..3; all must be > 3 */
	int dirfd;               /* fchdir there; -1: stay */
	int cgroup_fd;           /* a cgroup v2 directory to start in; -1 */
	int join[SPAWN_MAX_JOIN]; /* cgroup.procs files (v1) to write "0" to */
	size_t njoin;
	struct spawn_rlimit rlimits[SPAWN_MAX_RLIMITS];
	size_t nrlimits;
	int landlock_fd;         /* a ruleset to restrict itself with; -1 */
};

/*
 * Start the child in its own process group with every signal at its
 * default and none blocked. The pid, or -1 with errno and *step naming what
 * failed ("cannot chdir", "cannot join the cgroup", "cannot run"...).
 */
pid_t spawn_start(const struct spawn_req *, const char **step);

#endif
