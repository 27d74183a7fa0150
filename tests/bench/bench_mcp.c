/*
 * mcp: the daemon's added latency per MCP call, from writing the addTool of
 * mcp__fake__echo to reading its tool_result, against the same minimal
 * server (tests/mcp_fake_server.py inline, answering echo at once) driven
 * directly over its pipes in the same run, call by call alternating; and
 * the throughput of safe calls with 10 in flight, both ways.
 *
 * Target: at most +100 us at the median.
 *
 * STEXEC_BENCH_N: calls of each per repetition (default 300).
 */
#include "bench.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MCP_TARGET_US 100.0
#define MCP_INFLIGHT 10
#define MCP_CONTENT "[{\"type\":\"text\",\"text\":\"echo: x\"}]"

struct direct {
	pid_t pid;
	int in;
	struct bench_conn *out;
	int64_t next_id;
};

static void	mcp_direct_start(struct direct *, const char *);
static void	mcp_direct_send(struct direct *, int64_t);
static void	mcp_direct_wait(struct direct *, int64_t);
static double	mcp_direct_us(struct direct *);
static void	mcp_ready(struct bench_conn *);
static double	mcp_daemon_batch_us(struct bench_conn *, const char *, int *);
static double	mcp_direct_batch_us(struct direct *);

static void
mcp_direct_send(struct direct *d, int64_t id)
{
	char req[256];
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
	    "\"arguments\":{\"text\":\"x\"},\"_meta\":{\"progressToken\":%"
	    PRId64 "}}}\n", id, id);
	bench_write(d->in, req, (size_t)n);
}

static void
mcp_direct_wait(struct direct *d, int64_t id)
{
	char *line;
	size_t len;

	for (;;) {
		line = bench_line(d->out, &len);
		if (bench_response_id(line) == id) {
			if (strstr(line, "echo: x") == NULL)
				bench_fail("direct echo: %.300s", line);
			return;
		}
	}
}

static void
mcp_direct_start(struct direct *d, const char *fake)
{
	char *argv[] = { "/usr/bin/python3", (char *)fake, "inline", NULL };
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
	    "\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\","
	    "\"version\":\"1\"}}}\n";
	static const char inited[] = "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/initialized\"}\n";
	size_t len;
	int out;

	d->pid = bench_spawn_piped(argv, &d->in, &out);
	d->out = bench_conn_adopt(out);
	bench_write(d->in, init, sizeof init - 1);
	(void)bench_line(d->out, &len);
	bench_write(d->in, inited, sizeof inited - 1);
	d->next_id = 2;
}

static double
mcp_direct_us(struct direct *d)
{
	int64_t id = d->next_id++, t0 = bench_now_ns();

	mcp_direct_send(d, id);
	mcp_direct_wait(d, id);
	return (double)(bench_now_ns() - t0) / 1e3;
}

/* MCP_INFLIGHT calls written at once, until the last answer. */
static double
mcp_direct_batch_us(struct direct *d)
{
	int64_t first = d->next_id, t0 = bench_now_ns();
	int i;

	for (i = 0; i < MCP_INFLIGHT; i++)
		mcp_direct_send(d, d->next_id++);
	for (i = 0; i < MCP_INFLIGHT; i++)
		mcp_direct_wait(d, first + i);
	return (double)(bench_now_ns() - t0) / 1e3;
}

static double
mcp_daemon_batch_us(struct bench_conn *c, const char *sid, int *k)
{
	char req[512], *line;
	int64_t t0 = bench_now_ns();
	int i, results = 0, replies = 0, n;
	size_t len;

	for (i = 0; i < MCP_INFLIGHT; i++) {
		n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%"
		    PRId64 ",\"method\":\"addTool\",\"params\":{\"sessionId\":"
		    "\"%s\",\"toolUse\":{\"id\":\"b%d\",\"name\":"
		    "\"mcp__fake__echo\",\"input\":{\"text\":\"x\"}}}}\n",
		    c->next_id++, sid, (*k)++);
		bench_write(c->fd, req, (size_t)n);
	}
	while (results < MCP_INFLIGHT || replies < MCP_INFLIGHT) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_result")) {
			if (strstr(line, "echo: x") == NULL)
				bench_fail("daemon echo: %.300s", line);
			results++;
		} else if (bench_method(line, NULL) == NULL) {
			if (bench_is_error(line))
				bench_fail("addTool: %.300s", line);
			replies++;
		}
	}
	return (double)(bench_now_ns() - t0) / 1e3;
}

/* The session's server is ready: its mcp_server notification says so. */
static void
mcp_ready(struct bench_conn *c)
{
	char *line;
	size_t len;

	for (;;) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "mcp_server")) {
			if (strstr(line, "\"state\":\"failed\"") != NULL)
				bench_fail("the MCP server failed: %.500s", line);
			if (strstr(line, "\"state\":\"ready\"") != NULL)
				return;
		}
	}
}

int
main(void)
{
	const char *fake = getenv("STEXEC_MCP_FAKE");
	struct bench_daemon bd;
	struct bench_conn *c;
	struct direct dd;
	struct bench_sum ds, ms, dt, mt;
	int reps = bench_reps(), r, i, k = 0, batches;
	long n = bench_n(300, 10, 100000);
	double *dv = bench_alloc(sizeof *dv * (size_t)reps);
	double *mv = bench_alloc(sizeof *mv * (size_t)reps);
	double *dtv = bench_alloc(sizeof *dtv * (size_t)reps);
	double *mtv = bench_alloc(sizeof *mtv * (size_t)reps);
	double *one_d = bench_alloc(sizeof *one_d * (size_t)n);
	double *one_m = bench_alloc(sizeof *one_m * (size_t)n);
	double sum_d, sum_m;
	char params[1024], lim[96], cmp[128];
	const char *sid;
	json_t *res;

	if (fake == NULL)
		bench_fail("STEXEC_MCP_FAKE is not set");
	bench_daemon_start(&bd, NULL);
	c = bench_conn_open(bd.sock);
	snprintf(params, sizeof params, "{\"mcpServers\":{\"fake\":{"
	    "\"command\":\"/usr/bin/python3\",\"args\":[\"%s\",\"inline\"],"
	    "\"sandbox\":\"none\"}}}", fake);
	res = bench_call(c, "createSession", params);
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));
	mcp_ready(c);
	mcp_direct_start(&dd, fake);

	for (i = 0; i < 30; i++) {
		mcp_direct_us(&dd);
		bench_tool_us(c, sid, "mcp__fake__echo", "{\"text\":\"x\"}",
		    MCP_CONTENT, k++);
	}
	json_decref(bench_call(c, "drain", params));
	batches = (int)(n / MCP_INFLIGHT) + 1;
	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			one_d[i] = mcp_direct_us(&dd);
			one_m[i] = bench_tool_us(c, sid, "mcp__fake__echo",
			    "{\"text\":\"x\"}", MCP_CONTENT, k++);
		}
		json_decref(bench_call(c, "drain", params));
		qsort(one_d, (size_t)n, sizeof *one_d, bench_cmp_double);
		qsort(one_m, (size_t)n, sizeof *one_m, bench_cmp_double);
		dv[r] = one_d[n / 2];
		mv[r] = one_m[n / 2];
		sum_d = sum_m = 0;
		for (i = 0; i < batches; i++) {
			sum_d += mcp_direct_batch_us(&dd);
			sum_m += mcp_daemon_batch_us(c, sid, &k);
		}
		json_decref(bench_call(c, "drain", params));
		dtv[r] = batches * MCP_INFLIGHT / (sum_d / 1e6);
		mtv[r] = batches * MCP_INFLIGHT / (sum_m / 1e6);
	}
	bench_summarize(dv, reps, &ds);
	bench_summarize(mv, reps, &ms);
	bench_summarize(dtv, reps, &dt);
	bench_summarize(mtv, reps, &mt);
	bench_report("mcp_direct", "us", &ds, "the server over its pipes",
	    "the reference", true);
	snprintf(lim, sizeof lim, "direct %.1f us", ds.med);
	snprintf(cmp, sizeof cmp, "added %+.1f us (target <= +%.0f us)",
	    ms.med - ds.med, MCP_TARGET_US);
	bench_report("mcp_call", "us", &ms, lim, cmp,
	    ms.med - ds.med <= MCP_TARGET_US);
	bench_report("mcp_direct_10", "calls/s", &dt, "10 in flight, direct",
	    "the reference", true);
	snprintf(lim, sizeof lim, "direct %.0f calls/s", dt.med);
	snprintf(cmp, sizeof cmp, "ratio %.2f of direct", mt.med / dt.med);
	bench_report("mcp_call_10", "calls/s", &mt, lim, cmp, true);
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&bd);
	close(dd.in);
	bench_conn_close(dd.out);
	kill(dd.pid, SIGTERM);
	waitpid(dd.pid, NULL, 0);
	free(dv);
	free(mv);
	free(dtv);
	free(mtv);
	free(one_d);
	free(one_m);
	return 0;
}
