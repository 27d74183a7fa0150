/* A child compiles the pattern; the parent waits no longer than the deadline. */
#include "rpc/probe.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "core/pattern.h"

static int probe_deadline_ms = PROBE_DEADLINE_MS;

void
probe_set_deadline(int ms)
{
	probe_deadline_ms = ms;
}

int
probe_pattern(const char *pattern, char *err, size_t errlen)
{
	struct rlimit mem = { PROBE_MEMORY_MAX, PROBE_MEMORY_MAX };
	struct pollfd p = { -1, POLLIN, 0 };
	char why[8];
	pid_t pid;
	int status = 0, ready;

	/* What the child needs is a copy of the daemon: fork, no exec. */
	if ((pid = fork()) == 0) {
		struct pattern *pat;
		unsigned long pages = 0;
		FILE *f;

		/* The cap is on growth: the daemon's own map (huge under
		 * ASan) comes on top. */
		if ((f = fopen("/proc/self/statm", "r")) != NULL) {
			if (fscanf(f, "%lu", &pages) != 1)
				pages = 0;
			fclose(f);
		}
		mem.rlim_cur = mem.rlim_max = (rlim_t)pages *
		    (rlim_t)sysconf(_SC_PAGESIZE) + PROBE_MEMORY_MAX;
		setrlimit(RLIMIT_AS, &mem);
		pat = pattern_compile(pattern, why, sizeof why);
		pattern_free(pat);
		_exit(0);
	}
	if (pid == -1)
		return 0; /* no probe: the cost rules alone decide */
	p.fd = (int)syscall(SYS_pidfd_open, pid, 0);
	ready = p.fd == -1 ? 1 : poll(&p, 1, probe_deadline_ms);
	if (ready == 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (p.fd != -1)
		close(p.fd);
	if (ready == 0) {
		snprintf(err, errlen, "too costly: compiling it took longer "
		    "than %d ms", probe_deadline_ms);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "too costly: compiling it needed more "
		    "than %d MiB", PROBE_MEMORY_MAX >> 20);
		return -1;
	}
	return 0;
}
