/*
 * Starting one tool process: a vfork-like clone whose child runs our own
 * code before execve, so that it can join cgroups, take rlimits and confine
 * itself with Landlock (none of which posix_spawn can do). Where clone3 is
 * wired (x86_64) the child is born in its cgroup (CLONE_INTO_CGROUP), no
 * migration; elsewhere it writes itself into it. With spawn_start the
 * parent is suspended until the child has exec'd or failed, as with
 * posix_spawn; with spawn_launch it is not.
 */
#ifndef STEXEC_SPAWN_H
#define STEXEC_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#define SPAWN_MAX_JOIN 4
#define SPAWN_MAX_RLIMITS 4

struct sock_fprog;

/* A bind mount of path onto itself, which must then be dev/ino. */
struct spawn_mount {
	const char *path;
	dev_t dev;
	ino_t ino;
	bool writable;        /* else read-only, over a writable one */
};

/*
 * A private mount namespace in which everything is read-only but the
 * writable mounts: the child unshares it (with a user namespace that maps
 * only its own uid and gid when not root), mounts, then changes to cwd.
 */
struct spawn_ns {
	bool user;
	const char *uid_map, *gid_map; /* "UID UID 1" */
	const char *cwd;
	dev_t cwd_dev;
	ino_t cwd_ino;
	const struct spawn_mount *mounts; /* the writable ones first */
	size_t nmounts;
};

struct spawn_rlimit {
	int resource;
	rlim_t value;
};

struct spawn_req {
	const char *path;        /* to execve */
	char *const *argv;
	char *const *envp;
	int fds[4];              /* become the child's 0..3; all must be > 3 */
	bool tty;                /* 0 is a terminal: a new session, and it
	                            becomes the controlling terminal */
	int dirfd;               /* fchdir there; -1: stay */
	int cgroup_fd;           /* a cgroup v2 directory to start in; -1 */
	int join[SPAWN_MAX_JOIN]; /* cgroup.procs files (v1) to write "0" to */
	size_t njoin;
	struct spawn_rlimit rlimits[SPAWN_MAX_RLIMITS];
	size_t nrlimits;
	const struct spawn_ns *ns; /* NULL: the daemon's mounts */
	bool as_user;            /* become uid, gid, groups (after mounts) */
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t ngroups;
	bool drop_caps;          /* give up every capability for good */
	int landlock_fd;         /* a ruleset to restrict itself with; -1 */
	bool join_netns;         /* enter netns_fd's network namespace */
	int netns_fd;
	const struct sock_fprog *seccomp; /* a filter to install last; NULL */
};

/*
 * Start the child in its own process group with every signal at its
 * default and none blocked. The pid, or -1 with errno and *step naming what
 * failed ("cannot chdir", "cannot join the cgroup", "cannot run"...).
 */
pid_t spawn_start(const struct spawn_req *, const char **step);

/*
 * The same without waiting for the child's execve: we go on while it
 * takes its steps, most often on another CPU, instead of being suspended
 * until its exec (then usually taking its CPU from it: the exec wakes us).
 * Where clone3 is wired, for a request without a mount namespace, a
 * terminal or cgroup files to join; else -1 with ENOSYS, and spawn_start
 * does it. The request is copied with its path and groups, but its argv
 * and envp must live until the child is reaped or spawn_run_state says it
 * exec'd, and so must *run: then spawn_run_error says whether the child
 * failed before its exec (an errno, and the step), and spawn_run_free lets
 * it go. Never free a run whose child may still be before its exec: it
 * may be running on its stack.
 */
struct spawn_run;
pid_t spawn_launch(const struct spawn_req *, struct spawn_run **,
    const char **step);

/*
 * Where a launched child is, read from the memory it shares with us (the
 * kernel marks its execve and its end there): no system call, no wake-up.
 * EXECD: its execve happened (past the point where it can return an
 * error); FAILED: it ended before, by an error of a step (spawn_run_error)
 * or killed by a signal. wait_ns > 0: wait up to that long while it is
 * BEFORE (a futex the kernel wakes at either).
 */
enum spawn_run_state {
	SPAWN_RUN_BEFORE,
	SPAWN_RUN_EXECD,
	SPAWN_RUN_FAILED,
};
enum spawn_run_state spawn_run_state(struct spawn_run *, int64_t wait_ns);
int spawn_run_error(const struct spawn_run *, const char **step);
void spawn_run_free(struct spawn_run *);

#endif
