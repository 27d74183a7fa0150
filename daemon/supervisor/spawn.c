/*
 * One child, started the way posix_spawn does it (CLONE_VM | CLONE_VFORK:
 * no page tables copied, the parent waits until execve), but running our own
 * steps first; or, with spawn_launch, without waiting. The child shares our
 * memory and runs on a stack of its own, so it may only make system calls:
 * no malloc, no stdio, no locks, and not even libc's wrappers (spawn_sys):
 * their errno is the parent's thread's, written while both run, and their
 * set*id calls act on every thread of the process we share memory with.
 */
#include "supervisor/spawn.h"

#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/futex.h>
#include <linux/securebits.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/*
 * Read once, at the first spawn, so that the child makes no system call it
 * does not need: the signals whose disposition is not the default (the
 * daemon installs its handlers before it spawns), bit sig - 1 each.
 */
static uint64_t spawn_reset;
static bool spawn_learnt;

/* What the child reports back through the memory it shares with us. */
struct spawn_child {
	const struct spawn_req *req;
	int error;
	const char *step;
	bool at_exec;            /* past every step: in its execve, or beyond */
};

#define SPAWN_STACK (64 * 1024)

/*
 * The daemon is single-threaded and the parent is suspended while a child
 * runs here, so one stack serves every spawn_start.
 */
static char spawn_stack[SPAWN_STACK] __attribute__((aligned(64)));

/*
 * A child of spawn_launch runs while we go on: its own stack, and a copy of
 * the request, its path and groups, which it reads until its execve; kept
 * until it is reaped, or known to have exec'd. tid is not 0 until the
 * child's execve or its end: the kernel clears it then, in the memory we
 * share (CLONE_CHILD_CLEARTID, as it does a thread's for pthread_join),
 * and wakes a futex waiter on it.
 */
struct spawn_run {
	struct spawn_child c;
	pid_t tid;
	struct spawn_req req;
	char stack[SPAWN_STACK] __attribute__((aligned(64)));
	gid_t groups[];          /* then the path */
};

static int spawn_child(void *);
static long spawn_mounts(const struct spawn_ns *, const char **);
static long spawn_write(const char *, const char *);
static long spawn_stat(const char *, struct stat *);
static long spawn_chrooted(const struct spawn_ns *, const struct mount_attr *);
static long spawn_drop_caps(void);
static void spawn_learn(void);
static pid_t spawn_clone3(struct spawn_child *, char *, pid_t *);

/*
 * A system call as the child makes it: the result, or -errno, and errno
 * untouched (the parent's, while a spawn_launch child runs beside it).
 */
#if defined(__x86_64__)
__attribute__((no_sanitize_address, always_inline)) static inline long
spawn_sys(long nr, long a, long b, long c, long d, long e)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;

	__asm__ volatile("syscall"
	    : "=a" (ret)
	    : "0" (nr), "D" (a), "S" (b), "d" (c), "r" (r10), "r" (r8)
	    : "rcx", "r11", "memory");
	return ret;
}
#else
/* Only spawn_start's children here (spawn_launch needs clone3): errno is
 * ours to use, since we wait. */
__attribute__((no_sanitize_address)) static long
spawn_sys(long nr, long a, long b, long c, long d, long e)
{
	long ret = syscall(nr, a, b, c, d, e);

	return ret == -1 ? -errno : ret;
}
#endif
#define SPAWN_SYS0(nr) spawn_sys((nr), 0, 0, 0, 0, 0)
#define SPAWN_SYS1(nr, a) spawn_sys((nr), (long)(a), 0, 0, 0, 0)
#define SPAWN_SYS2(nr, a, b) spawn_sys((nr), (long)(a), (long)(b), 0, 0, 0)
#define SPAWN_SYS3(nr, a, b, c) spawn_sys((nr), (long)(a), (long)(b), \
    (long)(c), 0, 0)
#define SPAWN_SYS4(nr, a, b, c, d) spawn_sys((nr), (long)(a), (long)(b), \
    (long)(c), (long)(d), 0)
#define SPAWN_SYS5(nr, a, b, c, d, e) spawn_sys((nr), (long)(a), (long)(b), \
    (long)(c), (long)(d), (long)(e))

/* The kernel's sigaction, as rt_sigaction takes it. */
struct spawn_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

/* The child's steps; on failure, the step and errno, then exit 127. */
__attribute__((no_sanitize_address)) static int
spawn_child(void *arg)
{
	struct spawn_child *c = arg;
	const struct spawn_req *r = c->req;
	struct spawn_sigaction dfl = { SIG_DFL, 0, NULL, 0 };
	uint64_t none = 0;
	size_t i;
	long rc = 0;
	int sig;

	c->step = "cannot set up the pipes";
	for (i = 0; i < 4; i++)
		if ((rc = SPAWN_SYS3(SYS_dup3, r->fds[i], i, 0)) < 0)
			goto fail;
	c->step = "cannot start a process group";
	if (!r->tty && (rc = SPAWN_SYS2(SYS_setpgid, 0, 0)) < 0)
		goto fail;
	/* A session of its own leads a group of its own too. */
	c->step = "cannot take the terminal";
	if (r->tty && ((rc = SPAWN_SYS0(SYS_setsid)) < 0 ||
	    (rc = SPAWN_SYS3(SYS_ioctl, 0, TIOCSCTTY, 0)) < 0))
		goto fail;
	c->step = "cannot chdir";
	if (r->ns == NULL && r->dirfd != -1 &&
	    (rc = SPAWN_SYS1(SYS_fchdir, r->dirfd)) < 0)
		goto fail;
	c->step = "cannot join the tool's cgroup";
	for (i = 0; i < r->njoin; i++)
		if ((rc = SPAWN_SYS3(SYS_write, r->join[i], "0", 1)) != 1) {
			rc = rc < 0 ? rc : -EIO;
			goto fail;
		}
	c->step = "cannot set a resource limit";
	for (i = 0; i < r->nrlimits; i++) {
		struct rlimit rl = { r->rlimits[i].value, r->rlimits[i].value };

		if ((rc = SPAWN_SYS4(SYS_prlimit64, 0, r->rlimits[i].resource,
		    &rl, NULL)) < 0)
			goto fail;
	}
	c->step = "cannot enter the tool's network namespace";
	if (r->join_netns && (rc = SPAWN_SYS2(SYS_setns, r->netns_fd,
	    CLONE_NEWNET)) < 0)
		goto fail;
	if (r->ns != NULL && (rc = spawn_mounts(r->ns, &c->step)) < 0)
		goto fail;
	/* Last as root: the cgroups, limits and mounts above need it. */
	c->step = "cannot become the session's user";
	if (r->as_user && ((rc = SPAWN_SYS2(SYS_setgroups, r->ngroups,
	    r->groups)) < 0 || (rc = SPAWN_SYS3(SYS_setresgid, r->gid, r->gid,
	    r->gid)) < 0 || (rc = SPAWN_SYS3(SYS_setresuid, r->uid, r->uid,
	    r->uid)) < 0))
		goto fail;
	c->step = "cannot give up capabilities";
	if (r->drop_caps && (rc = spawn_drop_caps()) < 0)
		goto fail;
	c->step = "cannot enter the sandbox (Landlock)";
	if (r->landlock_fd != -1 &&
	    ((rc = SPAWN_SYS5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) < 0 ||
	    (rc = SPAWN_SYS2(SYS_landlock_restrict_self, r->landlock_fd,
	    0)) < 0))
		goto fail;

	/*
	 * A handler of ours must never run in here, and the tool starts with
	 * every signal at its default, the ones we ignore too.
	 */
	for (sig = 1; sig <= 64; sig++)
		if (spawn_reset & (1ULL << (sig - 1)))
			SPAWN_SYS4(SYS_rt_sigaction, sig, &dfl, NULL,
			    sizeof none);
	/* Everything is CLOEXEC; this also covers fds libraries leak. */
	SPAWN_SYS3(SYS_close_range, 4U, ~0U, CLOSE_RANGE_CLOEXEC);
	SPAWN_SYS4(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
	/*
	 * Last: from here on only what the filter allows. SPEC_ALLOW: where
	 * the kernel's default is spec_store_bypass_disable=seccomp, it would
	 * also force speculation mitigations, slow on every context switch,
	 * on each filtered tool; a tool is no more a target of those attacks
	 * than an unsandboxed one.
	 */
	c->step = "cannot enter the sandbox (seccomp)";
	if (r->seccomp != NULL &&
	    ((rc = SPAWN_SYS5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) < 0 ||
	    (rc = SPAWN_SYS3(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    SECCOMP_FILTER_FLAG_SPEC_ALLOW, r->seccomp)) < 0))
		goto fail;

	c->step = "cannot run";
	c->at_exec = true;
	rc = SPAWN_SYS3(SYS_execve, r->path, r->argv, r->envp);
fail:
	c->error = (int)-rc;
	SPAWN_SYS1(SYS_exit_group, 127);
	return 127;
}

/* Write a short text to a /proc file, as the child: 0 or -errno. */
__attribute__((no_sanitize_address)) static long
spawn_write(const char *path, const char *text)
{
	long fd, rc;
	size_t len = 0;

	while (text[len] != '\0')
		len++;
	if ((fd = SPAWN_SYS3(SYS_openat, AT_FDCWD, path, O_WRONLY |
	    O_CLOEXEC)) < 0)
		return fd;
	rc = SPAWN_SYS3(SYS_write, fd, text, len);
	SPAWN_SYS1(SYS_close, fd);
	return rc < 0 ? rc : rc == (long)len ? 0 : -EIO;
}

/* What stat says of a path, as the child: 0 or -errno. */
__attribute__((no_sanitize_address)) static long
spawn_stat(const char *path, struct stat *st)
{
	return SPAWN_SYS4(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

/*
 * Unshare the mount namespace, make every mount read-only, bind the
 * writable areas back writable and the protected files read-only over
 * them, each checked to be what the parent opened (a path swapped for a
 * symlink meanwhile fails), then change into cwd anew: the old working
 * directory is on the read-only mount below the bind. 0 or -errno.
 */
__attribute__((no_sanitize_address)) static long
spawn_mounts(const struct spawn_ns *ns, const char **step)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	struct mount_attr priv_ro = { .attr_set = MOUNT_ATTR_RDONLY,
	    .propagation = MS_PRIVATE };
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };
	struct stat st;
	size_t i;
	long rc;

	*step = "cannot make a mount namespace";
	if ((rc = SPAWN_SYS1(SYS_unshare, CLONE_NEWNS | (ns->user ?
	    CLONE_NEWUSER : 0))) < 0)
		return rc;
	/*
	 * Our maps are root's to write while the daemon's memory, which we
	 * share until the exec, is not dumpable: dumpable until the exec,
	 * while the daemon waits for it (spawn_start makes it not again).
	 */
	if (ns->user && ((rc = SPAWN_SYS5(SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0,
	    0)) < 0 || (rc = spawn_write("/proc/self/setgroups",
	    "deny")) < 0 || (rc = spawn_write("/proc/self/gid_map",
	    ns->gid_map)) < 0 || (rc = spawn_write("/proc/self/uid_map",
	    ns->uid_map)) < 0))
		return rc;
	/*
	 * Private, so that nothing mounted here or there reaches the other
	 * side, and read-only: one walk of the copied tree for both.
	 */
	*step = "cannot make the mounts read-only";
	rc = SPAWN_SYS5(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE,
	    &priv_ro, sizeof priv_ro);
	if (rc == -EINVAL && !ns->user)
		rc = spawn_chrooted(ns, &priv_ro);
	if (rc < 0)
		return rc;
	*step = "cannot mount a writable or protected path";
	for (i = 0; i < ns->nmounts; i++) {
		const struct spawn_mount *m = &ns->mounts[i];

		if ((rc = SPAWN_SYS5(SYS_mount, m->path, m->path, NULL,
		    MS_BIND | MS_REC, NULL)) < 0 ||
		    (rc = SPAWN_SYS5(SYS_mount_setattr, AT_FDCWD, m->path,
		    AT_RECURSIVE, m->writable ? &rw : &ro, sizeof rw)) < 0 ||
		    (rc = spawn_stat(m->path, &st)) < 0)
			return rc;
		if (st.st_dev != m->dev || st.st_ino != m->ino)
			return -ESTALE;
	}
	*step = "cannot chdir";
	if ((rc = SPAWN_SYS1(SYS_chdir, ns->cwd)) < 0 ||
	    (rc = spawn_stat(".", &st)) < 0)
		return rc;
	if (st.st_dev != ns->cwd_dev || st.st_ino != ns->cwd_ino)
		return -ESTALE;
	return 0;
}

/*
 * In a chroot, "/" is no mount of its own, so the mounts cannot be made
 * private and read-only from it (and a mount made under it would reach
 * the host through shared propagation). In our new namespace, out to its
 * real root, where they can, and back in: the chroot "escape" of a
 * process with CAP_SYS_CHROOT, used on our own copy of the mounts. A user
 * namespace cannot be made in a chroot at all, so only root comes here.
 */
__attribute__((no_sanitize_address)) static long
spawn_chrooted(const struct spawn_ns *ns, const struct mount_attr *priv_ro)
{
	struct stat here, up;
	long rc, old;
	int i;

	if ((old = SPAWN_SYS3(SYS_openat, AT_FDCWD, "/", O_PATH | O_DIRECTORY |
	    O_CLOEXEC)) < 0)
		return old;
	/* Root below the working directory, then ".." up to the top. */
	if ((rc = SPAWN_SYS1(SYS_chdir, "/")) < 0 ||
	    (rc = SPAWN_SYS1(SYS_chroot, ns->cwd)) < 0)
		goto out;
	for (i = 0; i < 4096; i++) {
		if ((rc = spawn_stat(".", &here)) < 0 ||
		    (rc = spawn_stat("..", &up)) < 0)
			goto out;
		if (here.st_dev == up.st_dev && here.st_ino == up.st_ino)
			break;
		if ((rc = SPAWN_SYS1(SYS_chdir, "..")) < 0)
			goto out;
	}
	if ((rc = SPAWN_SYS1(SYS_chroot, ".")) < 0 ||
	    (rc = SPAWN_SYS5(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE,
	    priv_ro, sizeof *priv_ro)) < 0)
		goto out;
	if ((rc = SPAWN_SYS1(SYS_fchdir, old)) == 0)
		rc = SPAWN_SYS1(SYS_chroot, ".");
out:
	SPAWN_SYS1(SYS_close, old);
	return rc;
}

/*
 * A root tool keeps no capability and can never gain one: its permitted,
 * effective, inheritable and ambient sets emptied, and root's exec rule
 * switched off and locked (SECBIT_NOROOT), so no execve gives them back,
 * besides no_new_privs, which the sandbox sets anyway. That is what
 * dropping the bounding set would add, in one call instead of one per
 * capability (each of which the kernel pays with a new set of
 * credentials: 40 of them were a third of a sandboxed spawn).
 */
__attribute__((no_sanitize_address)) static long
spawn_drop_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	long rc;

	if ((rc = SPAWN_SYS5(SYS_prctl, PR_SET_SECUREBITS, SECBIT_NOROOT |
	    SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0,
	    0, 0)) < 0 || (rc = SPAWN_SYS5(SYS_prctl, PR_CAP_AMBIENT,
	    PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)) < 0)
		return rc;
	/* By hand: libc's memset may be a sanitizer's, with state of ours. */
	d[0].effective = d[0].permitted = d[0].inheritable = 0;
	d[1].effective = d[1].permitted = d[1].inheritable = 0;
	return SPAWN_SYS2(SYS_capset, &h, d);
}

static void
spawn_learn(void)
{
	/* Ours, whether or not they were installed yet. */
	static const int ours[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM,
	    SIGCHLD, SIGUSR1, SIGUSR2 };
	struct sigaction sa;
	size_t i;
	int sig;

	spawn_reset = 0;
	for (i = 0; i < nitems(ours); i++)
		spawn_reset |= 1ULL << (ours[i] - 1);
	for (sig = 1; sig < _NSIG && sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL)
			spawn_reset |= 1ULL << (sig - 1);
	spawn_learnt = true;
}

#if defined(__x86_64__) && defined(CLONE_INTO_CGROUP)
/*
 * clone3 has no libc wrapper that takes a function: the child comes back
 * from the system call on the empty stack, so it must call the function
 * before touching the stack, and never return. Into the request's cgroup
 * if it names one; waiting for the child's execve, or not (tid: cleared
 * by the kernel at the child's execve or end).
 */
__attribute__((no_sanitize_address)) static pid_t
spawn_clone3(struct spawn_child *c, char *stack, pid_t *tid)
{
	struct clone_args ca;
	long ret;

	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_VM | (tid == NULL ? CLONE_VFORK :
	    CLONE_CHILD_CLEARTID);
	ca.child_tid = (uintptr_t)tid;
	if (c->req->cgroup_fd != -1) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)c->req->cgroup_fd;
	}
	ca.exit_signal = SIGCHLD;
	ca.stack = (uintptr_t)stack;
	ca.stack_size = SPAWN_STACK;
	__asm__ volatile(
	    "syscall\n\t"
	    "test %%rax, %%rax\n\t"
	    "jnz 1f\n\t"
	    "xor %%ebp, %%ebp\n\t"
	    "mov %[arg], %%rdi\n\t"
	    "call *%[fn]\n\t"
	    "mov %%eax, %%edi\n\t"
	    "mov %[exit], %%eax\n\t"
	    "syscall\n\t"
	    "ud2\n"
	    "1:\n\t"
	    : "=a" (ret)
	    : "0" ((long)SYS_clone3), "D" (&ca), "S" (sizeof ca),
	      [fn] "r" (spawn_child), [arg] "r" (c), [exit] "i" (SYS_exit)
	    : "rcx", "r11", "memory");
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return (pid_t)ret;
}
#else
static pid_t
spawn_clone3(struct spawn_child *c, char *stack, pid_t *tid)
{
	(void)c;
	(void)stack;
	(void)tid;
	errno = ENOSYS;
	return -1;
}
#endif

pid_t
spawn_start(const struct spawn_req *req, const char **step)
{
	struct spawn_child c = { req, 0, NULL, false };
	struct spawn_req joined;
	sigset_t all, old;
	pid_t pid = -1;
	int error = 0, fd = -1;

	if (!spawn_learnt)
		spawn_learn();
	/* No handler of ours may run on the child's stack before it resets. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	if (req->cgroup_fd != -1) {
		pid = spawn_clone3(&c, spawn_stack, NULL);
		if (pid == -1 && errno == ENOSYS) {
			/* No clone3 here: the child moves itself in. */
			joined = *req;
			fd = openat(req->cgroup_fd, "cgroup.procs",
			    O_WRONLY | O_CLOEXEC);
			if (fd != -1 && joined.njoin < SPAWN_MAX_JOIN) {
				joined.join[joined.njoin++] = fd;
				c.req = &joined;
			} else
				c.step = "cannot open the tool's cgroup";
		}
	}
	if (req->cgroup_fd == -1 || (pid == -1 && c.req != req))
		pid = clone(spawn_child, spawn_stack + SPAWN_STACK,
		    CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	if (pid == -1) {
		error = errno;
		if (c.step == NULL)
			c.step = "cannot start a process";
	}
	if (fd != -1)
		close(fd);
	/* The child made our shared memory dumpable to write its maps. */
	if (req->ns != NULL && req->ns->user)
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (pid != -1 && c.error != 0) {
		/* It ran far enough to fail: reap it, nobody else knows it. */
		while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
			;
		error = c.error;
		pid = -1;
	}
	if (pid == -1) {
		*step = c.step;
		errno = error;
	}
	return pid;
}

pid_t
spawn_launch(const struct spawn_req *req, struct spawn_run **out,
    const char **step)
{
	struct spawn_run *run;
	sigset_t all, old;
	size_t len;
	pid_t pid;
	int error;

	*out = NULL;
	*step = "cannot start a process";
	if (req->ns != NULL || req->tty || req->njoin > 0) {
		errno = ENOSYS;
		return -1;
	}
	if (!spawn_learnt)
		spawn_learn();
	len = strlen(req->path) + 1;
	run = xmalloc(sizeof *run + req->ngroups * sizeof *run->groups + len);
	run->req = *req;
	run->c.req = &run->req;
	run->c.error = 0;
	run->c.step = NULL;
	run->c.at_exec = false;
	run->tid = -1;
	if (req->ngroups > 0)
		memcpy(run->groups, req->groups, req->ngroups *
		    sizeof *run->groups);
	run->req.groups = run->groups;
	run->req.path = memcpy(run->groups + req->ngroups, req->path, len);
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = spawn_clone3(&run->c, run->stack, &run->tid);
	error = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid == -1) {
		free(run);
		errno = error;
		return -1;
	}
	/*
	 * Its group exists from here on, whether the child has got that far
	 * or not: a kill of the group cannot miss it. (Once it has exec'd
	 * this fails, harmlessly.)
	 */
	setpgid(pid, pid);
	*out = run;
	return pid;
}

enum spawn_run_state
spawn_run_state(struct spawn_run *run, int64_t wait_ns)
{
	struct timespec now, until = { 0, 0 }, left;
	int64_t ns;
	pid_t tid;

	if (wait_ns > 0 && clock_gettime(CLOCK_MONOTONIC, &until) == 0) {
		ns = (int64_t)until.tv_nsec + wait_ns;
		until.tv_sec += (time_t)(ns / 1000000000);
		until.tv_nsec = (long)(ns % 1000000000);
	}
	/* The child wrote its error and at_exec before the kernel cleared tid. */
	while ((tid = __atomic_load_n(&run->tid, __ATOMIC_ACQUIRE)) != 0 &&
	    wait_ns > 0 && clock_gettime(CLOCK_MONOTONIC, &now) == 0) {
		ns = (int64_t)(until.tv_sec - now.tv_sec) * 1000000000 +
		    (until.tv_nsec - now.tv_nsec);
		if (ns <= 0)
			break;
		left.tv_sec = (time_t)(ns / 1000000000);
		left.tv_nsec = (long)(ns % 1000000000);
		/* Not FUTEX_PRIVATE: the kernel's wake at the exec is not one. */
		if (syscall(SYS_futex, &run->tid, FUTEX_WAIT, tid, &left, NULL,
		    0) == -1 && errno != EAGAIN && errno != EINTR &&
		    errno != ETIMEDOUT)
			break;
	}
	if (tid != 0)
		return SPAWN_RUN_BEFORE;
	return run->c.error == 0 && run->c.at_exec ? SPAWN_RUN_EXECD :
	    SPAWN_RUN_FAILED;
}

int
spawn_run_error(const struct spawn_run *run, const char **step)
{
	*step = run->c.step;
	return run->c.error;
}

void
spawn_run_free(struct spawn_run *run)
{
	free(run);
}
