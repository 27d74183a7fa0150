/*
 * One child, started the way posix_spawn does it (CLONE_VM | CLONE_VFORK:
 * no page tables copied, the parent waits until execve), but running our own
 * steps first. The child shares our memory and runs on a stack of its own,
 * so it may only make system calls: no malloc, no stdio, no locks.
 */
#include "supervisor/spawn.h"

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

#include <linux/sched.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

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
static pid_t spawn_clone3(struct spawn_child *);

/* The child's steps; on failure, the step and errno, then exit 127. */
__attribute__((no_sanitize_address)) static int
spawn_child(void *arg)
{
	struct spawn_child *c = arg;
	const struct spawn_req *r = c->req;
	struct sigaction sa;
	sigset_t none;
	size_t i;
	int sig;

	c->step = "cannot set up the pipes";
	for (i = 0; i < 4; i++)
		if (dup2(r->fds[i], (int)i) == -1)
			goto fail;
	c->step = "cannot start a process group";
	if (setpgid(0, 0) == -1)
		goto fail;
	c->step = "cannot chdir";
	if (r->dirfd != -1 && fchdir(r->dirfd) == -1)
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
	c->step = "cannot enter the read-only sandbox";
	if (r->landlock_fd != -1 &&
	    (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    syscall(SYS_landlock_restrict_self, r->landlock_fd, 0) == -1))
		goto fail;

	/* A handler of ours must never run in here; ignored ones carry over. */
	memset(&sa, 0, sizeof sa);
	for (sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP ||
		    sigaction(sig, NULL, &sa) == -1 || sa.sa_handler == SIG_DFL)
			continue;
		sa.sa_handler = SIG_DFL;
		sa.sa_flags = 0;
		sigemptyset(&sa.sa_mask);
		sigaction(sig, &sa, NULL);
	}
	/* Everything is CLOEXEC; this also covers fds libraries leak. */
	syscall(SYS_close_range, 4U, ~0U, CLOSE_RANGE_CLOEXEC);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	c->step = "cannot run";
	execve(r->path, r->argv, r->envp);
fail:
	c->error = errno;
	_exit(127);
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
