/*
 * shell: bash_session's round trip beside bash's. One session, one
 * subscribed connection; calls added one at a time, each timed from
 * writing its addTool to reading its tool_result: bash_session {"command":
 * "true"} (the session's live shell, started by a warm-up call) and bash
 * {"command": "true"} (a new bash -c each time), alternating call by
 * call so that drift on a busy machine hits both alike. Per repetition
 * the median over N calls of each; reported: median, min and max of those
 * medians, and bash_session's against bash's.
 *
 * Target: bash_session takes at most half of bash's time.
 *
 * A ToolDef running ["/bin/bash", "-c", "{command}"], called in the same
 * alternation, is what a shell costs without the built-in's carry of cwd
 * and env. Target: bash takes at most 1.05 times that.
 *
 * A daemon without bash_session (an earlier release, under tests/bench/ab)
 * gives the other rows only.
 *
 * STEXEC_BENCH_N: calls of each per repetition (default 300).
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHELL_TARGET 0.5
#define SHELL_BASHC_TARGET 1.05
#define SHELL_BASHC_TOOLS "{\"tools\":[{\"name\":\"bash-c\"," \
	"\"command\":[\"/bin/bash\",\"-c\",\"{command}\"]}]}"
#define SHELL_TRUE "{\"command\":\"true\"}"

static bool	shell_has_tool(struct bench_conn *, const char *, const char *);

/* Whether the session lists a tool of this name. */
static bool
shell_has_tool(struct bench_conn *c, const char *params, const char *name)
{
	json_t *res = bench_call(c, "listTools", params), *t;
	bool has = false;
	size_t i;

	json_array_foreach(json_object_get(res, "tools"), i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")) ?
		    json_string_value(json_object_get(t, "name")) : "",
		    name) == 0)
			has = true;
	json_decref(res);
	return has;
}

int
main(void)
{
	struct bench_daemon d;
	struct bench_conn *c;
	struct bench_sum ss, bs, cs;
	int reps = bench_reps(), r, i, k = 0;
	bool live;
	long n = bench_n(300, 10, 100000);
	double *sv = bench_alloc(sizeof *sv * (size_t)reps);
	double *bv = bench_alloc(sizeof *bv * (size_t)reps);
	double *cv = bench_alloc(sizeof *cv * (size_t)reps);
	double *one_s = bench_alloc(sizeof *one_s * (size_t)n);
	double *one_b = bench_alloc(sizeof *one_b * (size_t)n);
	double *one_c = bench_alloc(sizeof *one_c * (size_t)n);
	char params[128], lim[96], cmp[96];
	const char *sid;
	json_t *res;

	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	res = bench_call(c, "createSession", SHELL_BASHC_TOOLS);
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));
	live = shell_has_tool(c, params, "bash_session");

	/* Warm up; the first bash_session call starts the shell. */
	for (i = 0; i < 30; i++) {
		if (live)
			bench_tool_us(c, sid, "bash_session", SHELL_TRUE,
			    "\"\"", k++);
		bench_tool_us(c, sid, "bash", SHELL_TRUE, "\"\"", k++);
		bench_tool_us(c, sid, "bash-c", SHELL_TRUE, "\"\"", k++);
	}
	json_decref(bench_call(c, "drain", params));
	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			one_s[i] = live ? bench_tool_us(c, sid,
			    "bash_session", SHELL_TRUE, "\"\"", k++) : 0;
			one_b[i] = bench_tool_us(c, sid, "bash", SHELL_TRUE,
			    "\"\"", k++);
			one_c[i] = bench_tool_us(c, sid, "bash-c", SHELL_TRUE,
			    "\"\"", k++);
		}
		json_decref(bench_call(c, "drain", params));
		qsort(one_s, (size_t)n, sizeof *one_s, bench_cmp_double);
		qsort(one_b, (size_t)n, sizeof *one_b, bench_cmp_double);
		qsort(one_c, (size_t)n, sizeof *one_c, bench_cmp_double);
		sv[r] = one_s[n / 2];
		bv[r] = one_b[n / 2];
		cv[r] = one_c[n / 2];
	}
	bench_summarize(sv, reps, &ss);
	bench_summarize(bv, reps, &bs);
	bench_summarize(cv, reps, &cs);
	bench_report("bash -c ToolDef", "us", &cs, "a new bash -c per call",
	    "the reference", true);
	snprintf(lim, sizeof lim, "bash -c ToolDef %.1f us", cs.med);
	snprintf(cmp, sizeof cmp, "ratio %.3f (target <= %.2f)",
	    bs.med / cs.med, SHELL_BASHC_TARGET);
	bench_report("bash", "us", &bs, lim, cmp,
	    bs.med / cs.med <= SHELL_BASHC_TARGET);
	snprintf(lim, sizeof lim, "bash %.1f us", bs.med);
	snprintf(cmp, sizeof cmp, "ratio %.3f (target <= %.2f)",
	    ss.med / bs.med, SHELL_TARGET);
	if (live)
		bench_report("bash_session", "us", &ss, lim, cmp,
		    ss.med / bs.med <= SHELL_TARGET);
	else
		printf("bash_session: this daemon has none\n");
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	free(sv);
	free(bv);
	free(cv);
	free(one_c);
	free(one_s);
	free(one_b);
	return 0;
}
