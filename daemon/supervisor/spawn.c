/*
 * One child, started the way posix_spawn does it (CLONE_VM | CLONE_VFORK:
 * no page tables copied, the parent waits until execve), but running our own
 * steps first. The child shares our memory and runs on a stack of its own,
 * so it may only make system calls: no malloc, no stdio, no locks.
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
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>
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
 * does not need while we wait for it: the signals whose disposition is not
 * the default (the daemon installs its handlers before it spawns).
 */
static sigset_t spawn_reset;
static bool spawn_learnt;

/* What the child reports back through the memory it shares with us. */
struct spawn_child {
	const struct spawn_req *req;
	int error;
	const char *step;
};

/*
 * The daemon is single-threaded and the parent is suspended while a child
 * runs here, so one stack serves every spawn.
 */
static char spawn_stack[64 * 1024] __attribute__((aligned(64)));

static int spawn_child(void *);
static int spawn_mounts(const struct spawn_ns *, const char **);
static int spawn_write(const char *, const char *);
static int spawn_drop_caps(void);
static void spawn_learn(void);
static pid_t spawn_clone3(struct spawn_child *);

/* The child's steps; on failure, the step and errno, then exit 127. */
__attribute__((no_sanitize_address)) static int
spawn_child(void *arg)
{
	struct spawn_child *c = arg;
	const struct spawn_req *r = c->req;
	struct sigaction dfl;
	sigset_t none;
	size_t i;
	int sig;

	c->step = "cannot set up the pipes";
	for (i = 0; i < 4; i++)
		if (dup2(r->fds[i], (int)i) == -1)
			goto fail;
	c->step = "cannot start a process group";
	if (!r->tty && setpgid(0, 0) == -1)
		goto fail;
	/* A session of its own leads a group of its own too. */
	c->step = "cannot take the terminal";
	if (r->tty && (setsid() == -1 || ioctl(0, TIOCSCTTY, 0) == -1))
		goto fail;
	c->step = "cannot chdir";
	if (r->ns == NULL && r->dirfd != -1 && fchdir(r->dirfd) == -1)
		goto fail;
	c->step = "cannot join the tool's cgroup";
	for (i = 0; i < r->njoin; i++)
		if (write(r->join[i], "0", 1) != 1)
			goto fail;
	c->step = "cannot set a resource limit";
	for (i = 0; i < r->nrlimits; i++) {
		struct rlimit rl = { r->rlimits[i].value, r->rlimits[i].value };

		if (setrlimit(r->rlimits[i].resource, &rl) == -1)
			goto fail;
	}
	if (r->ns != NULL && spawn_mounts(r->ns, &c->step) == -1)
		goto fail;
	/*
	 * Last as root: the cgroups, limits and mounts above need it. Raw
	 * system calls: libc's would act on every thread of the process we
	 * share memory with.
	 */
	c->step = "cannot become the session's user";
	if (r->as_user && (syscall(SYS_setgroups, r->ngroups, r->groups) == -1 ||
	    syscall(SYS_setresgid, r->gid, r->gid, r->gid) == -1 ||
	    syscall(SYS_setresuid, r->uid, r->uid, r->uid) == -1))
		goto fail;
	c->step = "cannot give up capabilities";
	if (r->drop_caps && spawn_drop_caps() == -1)
		goto fail;
	c->step = "cannot enter the sandbox (Landlock)";
	if (r->landlock_fd != -1 &&
	    (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    syscall(SYS_landlock_restrict_self, r->landlock_fd, 0) == -1))
		goto fail;

	/*
	 * A handler of ours must never run in here, and the tool starts with
	 * every signal at its default, the ones we ignore too.
	 */
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (sig = 1; sig < _NSIG; sig++)
		if (sigismember(&spawn_reset, sig) == 1)
			sigaction(sig, &dfl, NULL);
	/* Everything is CLOEXEC; this also covers fds libraries leak. */
	syscall(SYS_close_range, 4U, ~0U, CLOSE_RANGE_CLOEXEC);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/*
	 * Last: from here on only what the filter allows. SPEC_ALLOW: where
	 * the kernel's default is spec_store_bypass_disable=seccomp, it would
	 * also force speculation mitigations, slow on every context switch,
	 * on each filtered tool; a tool is no more a target of those attacks
	 * than an unsandboxed one.
	 */
	c->step = "cannot enter the sandbox (seccomp)";
	if (r->seccomp != NULL && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ==
	    -1 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    SECCOMP_FILTER_FLAG_SPEC_ALLOW, r->seccomp) == -1))
		goto fail;

	c->step = "cannot run";
	execve(r->path, r->argv, r->envp);
fail:
	c->error = errno;
	_exit(127);
}

/* Write a short text to a /proc file, as the child (no stdio). */
__attribute__((no_sanitize_address)) static int
spawn_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd == -1)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/*
 * Unshare the mount namespace, make every mount read-only, bind the
 * writable areas back writable and the protected files read-only over
 * them, each checked to be what the parent opened (a path swapped for a
 * symlink meanwhile fails), then change into cwd anew: the old working
 * directory is on the read-only mount below the bind.
 */
__attribute__((no_sanitize_address)) static int
spawn_mounts(const struct spawn_ns *ns, const char **step)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	struct mount_attr priv_ro = { .attr_set = MOUNT_ATTR_RDONLY,
	    .propagation = MS_PRIVATE };
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };
	struct stat st;
	size_t i;

	*step = "cannot make a mount namespace";
	if (unshare(CLONE_NEWNS | (ns->user ? CLONE_NEWUSER : 0)) == -1)
		return -1;
	if (ns->user && (spawn_write("/proc/self/setgroups", "deny") == -1 ||
	    spawn_write("/proc/self/gid_map", ns->gid_map) == -1 ||
	    spawn_write("/proc/self/uid_map", ns->uid_map) == -1))
		return -1;
	/*
	 * Private, so that nothing mounted here or there reaches the other
	 * side, and read-only: one walk of the copied tree for both.
	 */
	*step = "cannot make the mounts read-only";
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE,
	    &priv_ro, sizeof priv_ro) == -1)
		return -1;
	*step = "cannot mount a writable or protected path";
	for (i = 0; i < ns->nmounts; i++) {
		const struct spawn_mount *m = &ns->mounts[i];

		if (mount(m->path, m->path, NULL, MS_BIND | MS_REC, NULL) == -1 ||
		    syscall(SYS_mount_setattr, AT_FDCWD, m->path, AT_RECURSIVE,
		    m->writable ? &rw : &ro, sizeof rw) == -1)
			return -1;
		if (stat(m->path, &st) == -1)
			return -1;
		if (st.st_dev != m->dev || st.st_ino != m->ino) {
			errno = ESTALE;
			return -1;
		}
	}
	*step = "cannot chdir";
	if (chdir(ns->cwd) == -1 || stat(".", &st) == -1)
		return -1;
	if (st.st_dev != ns->cwd_dev || st.st_ino != ns->cwd_ino) {
		errno = ESTALE;
		return -1;
	}
	return 0;
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
__attribute__((no_sanitize_address)) static int
spawn_drop_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
	    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) == -1 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1)
		return -1;
	memset(d, 0, sizeof d);
	return (int)syscall(SYS_capset, &h, d);
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

	sigemptyset(&spawn_reset);
	for (i = 0; i < nitems(ours); i++)
		sigaddset(&spawn_reset, ours[i]);
	for (sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL)
			sigaddset(&spawn_reset, sig);
	spawn_learnt = true;
}

#if defined(__x86_64__) && defined(CLONE_INTO_CGROUP)
/*
 * clone3 has no libc wrapper that takes a function: the child comes back
 * from the system call on the empty stack, so it must call the function
 * before touching the stack, and never return.
 */
__attribute__((no_sanitize_address)) static pid_t
spawn_clone3(struct spawn_child *c)
{
	struct clone_args ca;
	long ret;

	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.stack = (uintptr_t)spawn_stack;
	ca.stack_size = sizeof spawn_stack;
	ca.cgroup = (uint64_t)c->req->cgroup_fd;
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
spawn_clone3(struct spawn_child *c)
{
	(void)c;
	errno = ENOSYS;
	return -1;
}
#endif

pid_t
spawn_start(const struct spawn_req *req, const char **step)
{
	struct spawn_child c = { req, 0, NULL };
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
		pid = spawn_clone3(&c);
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
		pid = clone(spawn_child, spawn_stack + sizeof spawn_stack,
		    CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	if (pid == -1) {
		error = errno;
		if (c.step == NULL)
			c.step = "cannot start a process";
	}
	if (fd != -1)
		close(fd);
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
