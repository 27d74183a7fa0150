/*
 * memory: what idle state costs the daemon, from stats.rssBytes (its
 * resident set, /proc/self/statm), each repetition with a fresh daemon so
 * freed memory of an earlier one cannot be reused.
 *
 * - mem-session: bytes per idle session: rss before and after creating N
 *   sessions (createSession {}, pipelined in batches of 500), divided by N.
 * - mem-conn: bytes per idle subscribed connection: N/10 connections
 *   opened after that, each subscribed to its own (already created)
 *   session; rss before and after, divided by N/10.
 *
 * There is no bare limit to compare with: the limit column shows the idle
 * daemon's rss, the targets are absolute. RLIMIT_NOFILE is raised before
 * the daemon starts, so it inherits room for the connections.
 *
 * STEXEC_BENCH_N: sessions per repetition (default 10000; connections:
 * a tenth of it).
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MEM_TARGET_SESSION 4096.0
#define MEM_TARGET_CONN 16384.0

static void	mem_run(int, double *, double *, double *);

static void
mem_run(int n, double *per_session, double *per_conn, double *idle)
{
	int nconn = n / 10 > 0 ? n / 10 : 1, i;
	char (*ids)[32] = bench_alloc((size_t)nconn * sizeof *ids), maxs[32];
	struct bench_conn **conns = bench_alloc((size_t)nconn * sizeof *conns);
	long long rss0, rss1, rss2;
	struct bench_daemon d;
	struct bench_conn *c;
	char req[160], *line;
	json_t *st;

	snprintf(maxs, sizeof maxs, "%d", n + 10);
	bench_daemon_start(&d, "--max-sessions", maxs, NULL);
	c = bench_conn_open(d.sock);
	/* The first stats call allocates what every later one reuses. */
	bench_rss(c);
	rss0 = bench_rss(c);
	bench_sessions(c, n, ids, nconn);
	rss1 = bench_rss(c);

	for (i = 0; i < nconn; i++) {
		conns[i] = bench_conn_open(d.sock);
		snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":1,"
		    "\"method\":\"subscribe\",\"params\":{\"sessionId\":"
		    "\"%s\"}}\n", ids[i]);
		bench_write(conns[i]->fd, req, strlen(req));
	}
	/* Every subscription answered: the daemon holds them all now. */
	for (i = 0; i < nconn; i++) {
		line = bench_line(conns[i], NULL);
		if (bench_response_id(line) != 1 || bench_is_error(line))
			bench_fail("subscribe: %.300s", line);
	}
	rss2 = bench_rss(c);
	/* The figures mean something only if the daemon holds them all. */
	st = bench_call(c, "stats", "{}");
	if (json_integer_value(json_object_get(st, "sessions")) != n ||
	    json_integer_value(json_object_get(st, "connections")) !=
	    nconn + 1)
		bench_fail("stats: expected %d sessions and %d connections: "
		    "%s", n, nconn + 1, json_dumps(st, JSON_COMPACT));
	json_decref(st);

	for (i = 0; i < nconn; i++)
		bench_conn_close(conns[i]);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	*per_session = (double)(rss1 - rss0) / n;
	*per_conn = (double)(rss2 - rss1) / nconn;
	*idle = (double)rss0;
	free(ids);
	free(conns);
}

int
main(void)
{
	int reps = bench_reps(), n = (int)bench_n(10000, 10, 1000000), r;
	double *sv = bench_alloc((size_t)reps * sizeof(double));
	double *cv = bench_alloc((size_t)reps * sizeof(double));
	double *iv = bench_alloc((size_t)reps * sizeof(double));
	struct bench_sum ss, cs, is;
	char lim[128], cmp[128];
	struct rlimit rl;

	bench_raise_nofile();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < (rlim_t)n / 10 + 64)
		bench_fail("RLIMIT_NOFILE is %llu, too low for %d connections",
		    (unsigned long long)rl.rlim_cur, n / 10);
	for (r = 0; r < reps; r++)
		mem_run(n, &sv[r], &cv[r], &iv[r]);

	bench_summarize(sv, reps, &ss);
	bench_summarize(cv, reps, &cs);
	bench_summarize(iv, reps, &is);
	snprintf(lim, sizeof lim, "limit none (idle daemon rss %.1f MiB)",
	    is.med / 1048576);
	snprintf(cmp, sizeof cmp, "%.2f KiB (target <= %.0f KiB)",
	    ss.med / 1024, MEM_TARGET_SESSION / 1024);
	bench_report("mem-session", "B", &ss, lim, cmp,
	    ss.med <= MEM_TARGET_SESSION);
	snprintf(cmp, sizeof cmp, "%.2f KiB (target <= %.0f KiB)",
	    cs.med / 1024, MEM_TARGET_CONN / 1024);
	bench_report("mem-conn", "B", &cs, lim, cmp,
	    cs.med <= MEM_TARGET_CONN);
	free(sv);
	free(cv);
	free(iv);
	return 0;
}
