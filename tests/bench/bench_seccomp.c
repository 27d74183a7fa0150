/*
 * seccomp: what attaching a sandbox profile's filter costs a tool, the
 * largest part of the sandbox's price. Each child forked here attaches one
 * filter and reports how long the seccomp() call took; per program the
 * median of N children. Rows: the smallest filter (one instruction that
 * allows everything: the kernel's fixed cost), a linear chain of 110
 * comparisons (what a naive list of refused system calls costs: the kernel
 * emulates the filter for every system call number when it attaches it),
 * and each profile's program as the daemon builds it (a search tree).
 *
 * STEXEC_BENCH_N: children per row (default 300).
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/seccomp.h"

static double
sc_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
sc_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median time of n children attaching prog, in microseconds. */
static double
sc_attach(const struct sock_fprog *prog, int n)
{
	double *t = calloc((size_t)n, sizeof *t), t0, med;
	int fd[2], i;
	pid_t pid;

	for (i = 0; i < n; i++) {
		if (pipe(fd) != 0 || (pid = fork()) == -1) {
			perror("bench_seccomp");
			exit(1);
		}
		if (pid == 0) {
			prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
			t0 = sc_now_us();
			if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_SPEC_ALLOW, prog) != 0)
				_exit(1);
			t0 = sc_now_us() - t0;
			_exit(write(fd[1], &t0, sizeof t0) == sizeof t0 ? 0 : 1);
		}
		if (read(fd[0], &t[i], sizeof t[i]) != sizeof t[i])
			t[i] = -1;
		waitpid(pid, NULL, 0);
		close(fd[0]);
		close(fd[1]);
	}
	qsort(t, (size_t)n, sizeof *t, sc_cmp);
	med = t[n / 2];
	free(t);
	return med;
}

int
main(void)
{
	static const char *names[] = { "read-only", "workspace-write",
	    "workspace-write + network", "read-only + network rules" };
	struct sock_filter chain[112];
	struct sock_fprog one, lin;
	const char *env = getenv("STEXEC_BENCH_N");
	int n = env != NULL && atoi(env) > 0 ? atoi(env) : 300, i;

	chain[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, nr));
	for (i = 1; i < 111; i++)
		chain[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ |
		    BPF_K, 100000 + i, 0, 0);
	chain[111] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	    SECCOMP_RET_ALLOW);
	one.len = 1;
	one.filter = &chain[111];
	lin.len = 112;
	lin.filter = chain;
	if (!seccomp_init()) {
		printf("seccomp: no programs for this architecture\n");
		return 0;
	}
	printf("seccomp attach, median of %d children:\n", n);
	printf("  %-28s %4u insns %7.1f us\n", "allow everything", one.len,
	    sc_attach(&one, n));
	printf("  %-28s %4u insns %7.1f us\n", "a chain of 110 compares",
	    lin.len, sc_attach(&lin, n));
	for (i = 0; i < SECCOMP_NPROFILES; i++)
		printf("  %-28s %4u insns %7.1f us\n", names[i],
		    seccomp_program(i)->len, sc_attach(seccomp_program(i), n));
	return 0;
}
