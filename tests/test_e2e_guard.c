/*
 * No tool outlives the daemon (doc/design.md S18): the real stexecd is SIGKILLed
 * or aborts while its tools run, background jobs, double forks and setsid
 * escapees included, and every one of them is dead within a bounded wait,
 * with a cgroup v2 subtree where this machine allows one and without.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

#define SLOW 30000
/* How long the sentinel may take to kill everything. */
#define GUARD_MS 10000

/*
 * A tool that leaves, besides its main shell: a background job, one that
 * dropped its token (only its process group betrays it), a setsid escapee
 * and a double fork. Five tagged processes in all.
 */
#define SPREAD "{\"command\":\"sleep 300 & env -u STEXEC_PROC_TOKEN " \
	"sleep 301 & setsid sleep 302 & (sleep 303 &); echo ready >&3; " \
	"wait\"}"
#define SPREAD_PROCS 5

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(guard, .fini = e2e_fini);

static void
no_core_dumps(void)
{
	struct rlimit rl = { 0, 0 };

	/* The aborted daemon inherits it: no core file in the tree. */
	setrlimit(RLIMIT_CORE, &rl);
}

/* A session running one SPREAD tool, with all its processes started. */
static struct client *
spread(struct daemon *d)
{
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL);
	long long until = e2e_now_ms() + e2e_ms(SLOW);
	int n, last = -1, stable = 0;

	json_decref(c_add(c, json_string_value(sid), "spread", "bash",
	    SPREAD));
	json_decref(c_wait(c, "progress", SLOW));
	/* The same count for 50 ms: every fork and exit has happened. */
	while (stable < 10) {
		n = d_leftovers(d);
		stable = n >= SPREAD_PROCS && n == last ? stable + 1 : 0;
		last = n;
		cr_assert_lt(e2e_now_ms(), until, "the tool did not spread: "
		    "%d processes", n);
		usleep(5000);
	}
	cr_log_info("the tool runs as %d processes", n);
	json_decref(sid);
	return c;
}

/* The cgroup the daemon's log says its tools run in, or NULL. */
static char *
cgroup_of(struct daemon *d)
{
	static const char key[] = "tools run in cgroup ";
	char *log = e2e_read_file(d->log, NULL), *p, *path = NULL;

	if (log != NULL && (p = strstr(log, key)) != NULL)
		path = strndup(p + strlen(key), strcspn(p + strlen(key),
		    "\n"));
	free(log);
	return path;
}

/*
 * A restarted daemon serves: it answers a ping (once it does, its signal
 * handlers are in place, and d_stop's SIGTERM is a clean stop).
 */
static void
restart(struct daemon *d, const char *opt)
{
	struct client *c;

	d_restart(d, opt, NULL);
	c = c_open(d);
	json_decref(c_call(c, "ping", NULL));
	c_close(c);
	d_stop(d);
}

/* The daemon dies of sig: nothing of its tools may be left. */
static void
crash(int sig, const char *opt)
{
	struct daemon *d;
	struct client *c;
	char *cg;
	int left;

	no_core_dumps();
	d = d_start(opt, NULL);
	c = spread(d);
	cg = cgroup_of(d);
	cr_log_info("tools in cgroup: %s", cg != NULL ? cg : "none");
	if (opt != NULL)
		cr_assert_null(cg, "%s, and yet a cgroup", opt);
	cr_assert_neq(d_sentinel(d), 0, "no sentinel");
	d_kill(d, sig);
	cr_assert(WIFSIGNALED(d->status) && WTERMSIG(d->status) == sig);
	/* The sentinel itself carries the tag: it must be gone too. */
	if (!d_wait_no_leftovers(d, GUARD_MS)) {
		left = d_kill_leftovers(d);
		cr_assert_fail("%d processes outlived the daemon by %d ms",
		    left, GUARD_MS);
	}
	if (cg != NULL)
		cr_assert_neq(access(cg, F_OK), 0, "%s is left behind", cg);
	free(cg);
	c_close(c);
	/* A new daemon on the same socket: the old one is gone for good. */
	restart(d, opt);
}

Test(guard, a_sigkilled_daemon_leaves_no_tool,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	crash(SIGKILL, NULL);
}

Test(guard, a_sigkilled_daemon_leaves_no_tool_without_a_cgroup,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	crash(SIGKILL, "--no-cgroup");
}

Test(guard, an_aborted_daemon_leaves_no_tool,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	crash(SIGABRT, NULL);
}

Test(guard, an_aborted_daemon_leaves_no_tool_without_a_cgroup,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	crash(SIGABRT, "--no-cgroup");
}

Test(guard, a_clean_shutdown_leaves_no_tool_and_no_sentinel,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	struct daemon *d = d_start(NULL);
	struct client *c = spread(d);
	char *cg = cgroup_of(d);

	c_close(c);
	/* d_stop: exit 0, and no tagged process left, the sentinel included,
	 * the moment the daemon has been reaped. */
	d_stop(d);
	if (cg != NULL)
		cr_assert_neq(access(cg, F_OK), 0, "%s is left behind", cg);
	free(cg);
}

Test(guard, a_killed_sentinel_is_replaced_and_told_every_group,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	struct daemon *d = d_start("--no-cgroup", NULL);
	struct client *c = spread(d);
	long long until = e2e_now_ms() + e2e_ms(SLOW);
	pid_t first = d_sentinel(d), second = 0;
	int left;

	cr_assert_neq(first, 0, "no sentinel");
	kill(first, SIGKILL);
	while ((second = d_sentinel(d)) == 0 || second == first) {
		cr_assert_lt(e2e_now_ms(), until, "no new sentinel");
		usleep(5000);
	}
	/* Let the new one read what the daemon replayed to it. */
	usleep((useconds_t)e2e_ms(100) * 1000);
	d_kill(d, SIGKILL);
	/* The token-less sleep is found by its group only: the replay. */
	if (!d_wait_no_leftovers(d, GUARD_MS)) {
		left = d_kill_leftovers(d);
		cr_assert_fail("%d processes outlived the daemon", left);
	}
	c_close(c);
	restart(d, NULL);
}
