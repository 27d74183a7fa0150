/*
 * restore: how long a daemon takes to serve again with N journaled
 * sessions. N idle sessions are created, the daemon is stopped (SIGTERM
 * keeps sessions) and started again on the same state directory: the
 * figure is the time from that start until its socket accepts (the restore
 * runs before it listens), beside the time the daemon itself logs for the
 * restore. A tenth of N and N, each with fresh daemons per repetition.
 *
 * STEXEC_BENCH_N: the larger count (default 100000; target: under 1 s).
 */
#include "bench.h"
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define RESTORE_TARGET_MS 1000.0

/* The restore time the daemon logged last ("... in N ms"), or -1. */
static double
restore_logged_ms(const char *log)
{
	FILE *f = fopen(log, "r");
	char line[1024], *p;
	double ms = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strstr(line, "restored ") != NULL &&
		    (p = strstr(line, " in ")) != NULL)
			ms = atof(p + 4);
	fclose(f);
	return ms;
}

/* One repetition: the restart's time to serve, and the logged time. */
static void
restore_one(int n, double *serve_ms, double *logged_ms)
{
	char maxs[32], err[256];
	const char *args[] = { "--max-sessions", maxs, NULL };
	struct bench_daemon d;
	struct bench_conn *c;
	int64_t t0;
	bool killed;
	int status;
	json_t *st;

	snprintf(maxs, sizeof maxs, "%d", n + 10);
	bench_daemon_start(&d, "--max-sessions", maxs, NULL);
	c = bench_conn_open(d.sock);
	bench_sessions(c, n, NULL, 0);
	bench_conn_close(c);
	status = launch_stop(d.pid, 60000, &killed);
	if (killed || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_fail("the daemon did not stop cleanly (%#x)", status);

	t0 = bench_now_ns();
	if ((d.pid = launch_daemon(NULL, d.sock, d.out, d.log, NULL, args,
	    err, sizeof err)) < 0)
		bench_fail("%s", err);
	if (launch_wait_serving(d.pid, d.sock, 60000, &status) != 0)
		bench_fail("the restarted daemon did not serve; see %s", d.log);
	*serve_ms = (double)(bench_now_ns() - t0) / 1e6;
	*logged_ms = restore_logged_ms(d.log);
	c = bench_conn_open(d.sock);
	st = bench_call(c, "stats", "{}");
	if (json_integer_value(json_object_get(st, "sessions")) != n)
		bench_fail("restored %lld sessions of %d", (long long)
		    json_integer_value(json_object_get(st, "sessions")), n);
	json_decref(st);
	bench_conn_close(c);
	bench_daemon_stop(&d);
}

int
main(void)
{
	int reps = bench_reps(), big = (int)bench_n(100000, 10, 1000000);
	int sizes[2] = { big / 10, big }, r, k;
	double *serve = bench_alloc((size_t)reps * sizeof *serve);
	double *logged = bench_alloc((size_t)reps * sizeof *logged);
	struct bench_sum s, l;
	char name[64], lim[96], cmp[96];

	for (k = 0; k < 2; k++) {
		for (r = 0; r < reps; r++)
			restore_one(sizes[k], &serve[r], &logged[r]);
		bench_summarize(serve, reps, &s);
		bench_summarize(logged, reps, &l);
		snprintf(name, sizeof name, "restore-%d", sizes[k]);
		snprintf(lim, sizeof lim, "the daemon logs %.0f ms", l.med);
		snprintf(cmp, sizeof cmp, "target < %.0f ms at %d sessions",
		    RESTORE_TARGET_MS, big);
		bench_report(name, "ms", &s, lim, k == 1 ? cmp : "",
		    k == 0 || s.med < RESTORE_TARGET_MS);
	}
	free(serve);
	free(logged);
	return 0;
}
