/*
 * shell: bash_session's round trip beside bash's. One session, one
 * subscribed connection; calls added one at a time, each timed from
 * writing its addTool to reading its tool_result: bash_session {"command":
 * "true"} (the session's live shell, started by a warm-up call) and bash
 * {"command": "true"} (a new bash -c each time), one call of each kind
 * per iteration, in an order drawn anew (bench_shuffle), so that drift on
 * a busy machine and what a call leaves behind for the next hit all
 * alike: in a fixed order bash always came right after bash_session, and
 * its ToolDef after it (bash over its ToolDef: 1.051, 1.044, 1.059 so;
 * 1.000, 1.007, 1.009 shuffled). Per repetition
 * the median over N calls of each; reported: median, min and max of those
 * medians, and bash_session's against bash's.
 *
 * Target: bash_session takes at most half of bash's time.
 *
 * A ToolDef running ["/bin/bash", "-c", "{command}"], called in the same
 * alternation, is what a shell costs without the built-in's carry of cwd
 * and env. Target: bash takes at most 1.05 times that. Both again with
 * {"command": "/bin/true"}: a program, which bash runs in its own place
 * unless a trap keeps it (the built-in's cwd carry, for a command that
 * may cd), the common case for an agent. All five in the same shuffle.
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
#define SHELL_PROGRAM "{\"command\":\"/bin/true\"}"

/* The calls of one alternation, each with its medians per repetition. */
struct shell_fig {
	const char *tool, *input, *row;
	double *med, *one;
	struct bench_sum sum;
};

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
	struct shell_fig f[] = {
		{ .tool = "bash_session", .input = SHELL_TRUE,
		    .row = "bash_session" },
		{ .tool = "bash", .input = SHELL_TRUE, .row = "bash" },
		{ .tool = "bash-c", .input = SHELL_TRUE,
		    .row = "bash -c ToolDef" },
		{ .tool = "bash", .input = SHELL_PROGRAM,
		    .row = "bash /bin/true" },
		{ .tool = "bash-c", .input = SHELL_PROGRAM,
		    .row = "bash -c ToolDef /bin/true" },
	};
	struct bench_daemon d;
	struct bench_conn *c;
	int reps = bench_reps(), r, k = 0;
	size_t j, nf = sizeof f / sizeof f[0], first, q;
	int order[sizeof f / sizeof f[0]];
	uint64_t rng = BENCH_SEED;
	bool live;
	long n = bench_n(300, 10, 100000), i;
	char params[128], lim[96], cmp[96];
	const char *sid;
	json_t *res;

	for (j = 0; j < nf; j++) {
		f[j].med = bench_alloc(sizeof *f[j].med * (size_t)reps);
		f[j].one = bench_alloc(sizeof *f[j].one * (size_t)n);
	}
	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	res = bench_call(c, "createSession", SHELL_BASHC_TOOLS);
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));
	live = shell_has_tool(c, params, "bash_session");
	first = live ? 0 : 1;

	/* Warm up; the first bash_session call starts the shell. */
	for (i = 0; i < 30; i++)
		for (j = live ? 0 : 1; j < nf; j++)
			bench_tool_us(c, sid, f[j].tool, f[j].input, "\"\"",
			    k++);
	json_decref(bench_call(c, "drain", params));
	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			bench_shuffle(order, (int)(nf - first), &rng);
			for (j = 0; j < nf - first; j++) {
				q = first + (size_t)order[j];
				f[q].one[i] = bench_tool_us(c, sid, f[q].tool,
				    f[q].input, "\"\"", k++);
			}
		}
		json_decref(bench_call(c, "drain", params));
		for (j = 0; j < nf; j++) {
			qsort(f[j].one, (size_t)n, sizeof *f[j].one,
			    bench_cmp_double);
			f[j].med[r] = f[j].one[n / 2];
		}
	}
	for (j = 0; j < nf; j++)
		bench_summarize(f[j].med, reps, &f[j].sum);
	/* Each bash row against the bash -c ToolDef row after it. */
	for (j = 1; j + 1 < nf; j += 2) {
		bench_report(f[j + 1].row, "us", &f[j + 1].sum, "a new bash -c "
		    "per call", "the reference", true);
		snprintf(lim, sizeof lim, "%s %.1f us", f[j + 1].row,
		    f[j + 1].sum.med);
		snprintf(cmp, sizeof cmp, "ratio %.3f (target <= %.2f)",
		    f[j].sum.med / f[j + 1].sum.med, SHELL_BASHC_TARGET);
		bench_report(f[j].row, "us", &f[j].sum, lim, cmp,
		    f[j].sum.med / f[j + 1].sum.med <= SHELL_BASHC_TARGET);
	}
	snprintf(lim, sizeof lim, "bash %.1f us", f[1].sum.med);
	snprintf(cmp, sizeof cmp, "ratio %.3f (target <= %.2f)",
	    f[0].sum.med / f[1].sum.med, SHELL_TARGET);
	if (live)
		bench_report(f[0].row, "us", &f[0].sum, lim, cmp,
		    f[0].sum.med / f[1].sum.med <= SHELL_TARGET);
	else
		printf("bash_session: this daemon has none\n");
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	for (j = 0; j < nf; j++) {
		free(f[j].med);
		free(f[j].one);
	}
	return 0;
}
