/*
 * latency: the cost the daemon adds to one tool call. One session, one
 * subscribed connection, tools added one at a time: each is a no-op
 * ToolDef {"name":"cat","command":["/bin/cat"]} (the input JSON goes to
 * stdin and cat echoes it), timed from writing its addTool to reading its
 * tool_result. Per repetition the median over N tools (one turn, drained
 * at the end); reported: median, min and max of those medians.
 *
 * Limit: the same /bin/cat spawned directly with posix_spawn, pipes for
 * stdin and stdout, the same stdin bytes written, stdout read to EOF,
 * waitpid. Limit and daemon alternate tool by tool, so drift on a busy
 * machine hits both alike.
 *
 * The same cat in the read-only and the workspace-write sandbox, tool by
 * tool beside the others, gives two more rows, judged against the
 * unsandboxed daemon's figure: a sandbox may add at most 100 us.
 *
 * STEXEC_BENCH_N: tools per repetition (default 1000).
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The tool input; the daemon writes it compact, as here, to stdin. */
#define LAT_INPUT "{\"ping\":1}"
/* Target: what the daemon may add on top of a bare spawn, per tool. */
#define LAT_TARGET_US 60.0
/* Target: what a sandbox may add on top of the unsandboxed tool. */
#define LAT_SANDBOX_TARGET_US 100.0
/* The tools: unsandboxed, then each profile. */
static const char *const lat_tools[] = { "cat", "cat-ro", "cat-ww" };
#define LAT_NTOOLS 3

static double	lat_daemon_one(struct bench_conn *, const char *, const char *,
		    int);
static double	lat_limit_one(void);
static double	lat_median(double *, int);

/* One tool through the daemon, in microseconds. */
static double
lat_daemon_one(struct bench_conn *c, const char *sid, const char *tool,
    int k)
{
	int64_t id = c->next_id++, t0, t1 = 0;
	bool got_result = false, got_reply = false;
	char req[512], tid[48], *line;
	size_t len;
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
	    "\"toolUse\":{\"id\":\"t%d\",\"name\":\"%s\",\"input\":"
	    LAT_INPUT "}}}\n", id, sid, k, tool);
	snprintf(tid, sizeof tid, "\"toolUseId\":\"t%d\"", k);
	t0 = bench_now_ns();
	bench_write(c->fd, req, (size_t)n);
	/*
	 * The clock stops at the tool_result; the addTool reply may come
	 * after it and is read untimed, so the next call starts clean.
	 */
	while (!got_result || !got_reply) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_result")) {
			t1 = bench_now_ns();
			if (strstr(line, tid) == NULL)
				bench_fail("tool_result of another tool: "
				    "%.300s", line);
			if (strstr(line, "\"is_error\":false") == NULL ||
			    strstr(line, "\"content\":\"{\\\"ping\\\":1}\"") ==
			    NULL)
				bench_fail("the no-op tool failed: %.500s",
				    line);
			got_result = true;
		} else if (bench_method(line, NULL) == NULL &&
		    bench_response_id(line) == id) {
			if (bench_is_error(line))
				bench_fail("addTool: %.300s", line);
			got_reply = true;
		}
	}
	return (double)(t1 - t0) / 1e3;
}

/* The same process, input and output without the daemon. */
static double
lat_limit_one(void)
{
	char *argv[] = { "/bin/cat", NULL };
	char buf[4096];
	int64_t t0, t1;
	size_t total = 0;
	ssize_t n;
	int in, out, status;
	pid_t pid;

	t0 = bench_now_ns();
	pid = bench_spawn_piped(argv, &in, &out);
	bench_write(in, LAT_INPUT, strlen(LAT_INPUT));
	close(in);
	while ((n = read(out, buf, sizeof buf)) > 0)
		total += (size_t)n;
	close(out);
	waitpid(pid, &status, 0);
	t1 = bench_now_ns();
	if (total != strlen(LAT_INPUT) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		bench_fail("bare cat: %zu bytes, status %#x", total, status);
	return (double)(t1 - t0) / 1e3;
}

static double
lat_median(double *v, int n)
{
	struct bench_sum s;

	bench_summarize(v, n, &s);
	return s.med;
}

int
main(void)
{
	int reps = bench_reps(), n = (int)bench_n(1000, 1, 10000), r, i;
	double *dsamp[LAT_NTOOLS], *dmed[LAT_NTOOLS];
	double *lsamp = bench_alloc((size_t)n * sizeof *lsamp);
	double *lmed = bench_alloc((size_t)reps * sizeof *lmed);
	struct bench_daemon d;
	struct bench_conn *c;
	struct bench_sum ds[LAT_NTOOLS], ls;
	char params[256], lim[128], cmp[128], name[64];
	int t;
	const char *sid;
	json_t *res;

	for (t = 0; t < LAT_NTOOLS; t++) {
		dsamp[t] = bench_alloc((size_t)n * sizeof *dsamp[t]);
		dmed[t] = bench_alloc((size_t)reps * sizeof *dmed[t]);
	}
	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	res = bench_call(c, "createSession",
	    "{\"tools\":[{\"name\":\"cat\",\"command\":[\"/bin/cat\"]},"
	    "{\"name\":\"cat-ro\",\"command\":[\"/bin/cat\"],"
	    "\"sandbox\":\"read-only\"},{\"name\":\"cat-ww\",\"command\":"
	    "[\"/bin/cat\"],\"sandbox\":\"workspace-write\"}]}");
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));

	/* Warm up: page cache, the daemon's allocator, the CPU clocks. */
	for (i = 0; i < 50; i++) {
		lat_limit_one();
		for (t = 0; t < LAT_NTOOLS; t++)
			lat_daemon_one(c, sid, lat_tools[t],
			    i * LAT_NTOOLS + t);
	}
	json_decref(bench_call(c, "drain", params));

	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			lsamp[i] = lat_limit_one();
			for (t = 0; t < LAT_NTOOLS; t++)
				dsamp[t][i] = lat_daemon_one(c, sid,
				    lat_tools[t], i * LAT_NTOOLS + t);
		}
		lmed[r] = lat_median(lsamp, n);
		for (t = 0; t < LAT_NTOOLS; t++)
			dmed[t][r] = lat_median(dsamp[t], n);
		json_decref(bench_call(c, "drain", params));
	}
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);

	for (t = 0; t < LAT_NTOOLS; t++)
		bench_summarize(dmed[t], reps, &ds[t]);
	bench_summarize(lmed, reps, &ls);
	snprintf(lim, sizeof lim, "limit %.1f us", ls.med);
	snprintf(cmp, sizeof cmp, "%+.1f us (target <= +%.0f us)",
	    ds[0].med - ls.med, LAT_TARGET_US);
	bench_report("latency", "us", &ds[0], lim, cmp,
	    ds[0].med - ls.med <= LAT_TARGET_US);
	for (t = 1; t < LAT_NTOOLS; t++) {
		snprintf(name, sizeof name, "latency, %s", t == 1 ?
		    "read-only" : "workspace-write");
		snprintf(lim, sizeof lim, "unsandboxed %.1f us", ds[0].med);
		snprintf(cmp, sizeof cmp, "%+.1f us (target <= +%.0f us)",
		    ds[t].med - ds[0].med, LAT_SANDBOX_TARGET_US);
		bench_report(name, "us", &ds[t], lim, cmp,
		    ds[t].med - ds[0].med <= LAT_SANDBOX_TARGET_US);
	}
	for (t = 0; t < LAT_NTOOLS; t++) {
		free(dsamp[t]);
		free(dmed[t]);
	}
	free(lsamp);
	free(lmed);
	return 0;
}
