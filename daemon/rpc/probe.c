/* A child compiles the patterns; the parent waits no longer than the deadline. */
#include "rpc/probe.h"

#include <sys/mman.h>
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

/* The child: compile each, counting in *done those finished. */
static void
probe_child(const char *const *patterns, size_t n, volatile size_t *done)
{
	struct rlimit mem;
	unsigned long pages = 0;
	struct pattern *pat;
	char why[8];
	FILE *f;
	size_t i;

	/* The cap is on growth: the daemon's own map (huge under ASan)
	 * comes on top. */
	if ((f = fopen("/proc/self/statm", "r")) != NULL) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	mem.rlim_cur = mem.rlim_max = (rlim_t)pages *
	    (rlim_t)sysconf(_SC_PAGESIZE) + PROBE_MEMORY_MAX;
	setrlimit(RLIMIT_AS, &mem);
	for (i = 0; i < n; i++) {
		pat = pattern_compile(patterns[i], why, sizeof why);
		pattern_free(pat);
		*done = i + 1;
	}
	_exit(0);
}

int
probe_patterns(const char *const *patterns, size_t n, size_t *bad,
    char *err, size_t errlen)
{
	struct pollfd p = { -1, POLLIN, 0 };
	volatile size_t *done;
	size_t finished;
	int status = 0, ready;
	pid_t pid;

	/* How far the child got, in memory it shares with us. */
	if (n == 0 || (done = mmap(NULL, sizeof *done, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
		return 0; /* no probe: the cost rules alone decide */
	*done = 0;
	/* What the child needs is a copy of the daemon: fork, no exec. */
	if ((pid = fork()) == 0)
		probe_child(patterns, n, done);
	if (pid == -1) {
		munmap((void *)done, sizeof *done);
		return 0;
	}
	p.fd = (int)syscall(SYS_pidfd_open, pid, 0);
	ready = p.fd == -1 ? 1 : poll(&p, 1, probe_deadline_ms);
	if (ready == 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (p.fd != -1)
		close(p.fd);
	finished = *done;
	munmap((void *)done, sizeof *done);
	if (finished >= n && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	*bad = finished < n ? finished : n - 1;
	if (ready == 0)
		snprintf(err, errlen, "too costly: compiling it took longer "
		    "than %d ms", probe_deadline_ms);
	else
		snprintf(err, errlen, "too costly: compiling it needed more "
		    "than %d MiB", PROBE_MEMORY_MAX >> 20);
	return -1;
}
