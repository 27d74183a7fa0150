/*
 * client: a client-run tool's round trip beside bash's. One session whose
 * ToolDef {"name":"noop","runner":"client"} this connection serves: from
 * writing the addTool, through the tool_start the daemon sends back and
 * the completeTool that answers it at once, to reading the tool_result.
 * Beside it, bash {"command":"true"}, alternating call by call so that
 * drift on a busy machine hits both alike. Per repetition the median over
 * N calls of each; reported: median, min and max of those medians, and
 * the client tool's against bash's.
 *
 * Target: a client tool takes under a tenth of bash's time.
 *
 * STEXEC_BENCH_N: calls of each per repetition (default 300).
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_TARGET 0.1
#define CLIENT_TRUE "{\"command\":\"true\"}"


int
main(void)
{
	struct bench_daemon d;
	struct bench_conn *c;
	struct bench_sum cs, bs;
	int reps = bench_reps(), r, i, k = 0;
	long n = bench_n(300, 10, 100000);
	double *cv = bench_alloc(sizeof *cv * (size_t)reps);
	double *bv = bench_alloc(sizeof *bv * (size_t)reps);
	double *one_c = bench_alloc(sizeof *one_c * (size_t)n);
	double *one_b = bench_alloc(sizeof *one_b * (size_t)n);
	char params[160], lim[96], cmp[96];
	const char *sid;
	json_t *res;

	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	res = bench_call(c, "createSession", "{\"tools\":[{\"name\":\"noop\","
	    "\"runner\":\"client\"}]}");
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\",\"names\":"
	    "[\"noop\"]}", sid);
	json_decref(bench_call(c, "serveTools", params));
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);

	for (i = 0; i < 30; i++) {
		bench_client_tool_us(c, sid, k++);
		bench_tool_us(c, sid, "bash", CLIENT_TRUE, "\"\"", k++);
	}
	json_decref(bench_call(c, "drain", params));
	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			one_c[i] = bench_client_tool_us(c, sid, k++);
			one_b[i] = bench_tool_us(c, sid, "bash", CLIENT_TRUE,
			    "\"\"", k++);
		}
		json_decref(bench_call(c, "drain", params));
		qsort(one_c, (size_t)n, sizeof *one_c, bench_cmp_double);
		qsort(one_b, (size_t)n, sizeof *one_b, bench_cmp_double);
		cv[r] = one_c[n / 2];
		bv[r] = one_b[n / 2];
	}
	bench_summarize(cv, reps, &cs);
	bench_summarize(bv, reps, &bs);
	bench_report("bash", "us", &bs, "bash -c true per call",
	    "the reference", true);
	snprintf(lim, sizeof lim, "bash %.1f us", bs.med);
	snprintf(cmp, sizeof cmp, "ratio %.3f (target < %.2f)",
	    cs.med / bs.med, CLIENT_TARGET);
	bench_report("client_tool", "us", &cs, lim, cmp,
	    cs.med / bs.med < CLIENT_TARGET);
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	free(cv);
	free(bv);
	free(one_c);
	free(one_b);
	return 0;
}
