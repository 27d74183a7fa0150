/*
 * hooks: what Claude Code's hooks cost a tool call (README, Hooks). Three
 * sessions on one connection, each serving a client-run tool "noop"
 * answered the moment its tool_start comes (the cheapest call there is, so
 * that a few microseconds show): one with no hooks, one with 20
 * PreToolUse and 20 PostToolUse hooks none of which matches noop, one with
 * a PreToolUse hook that matches it and runs `true`. Beside them bash
 * {"command":"true"}, one process spawn. Calls alternate session by
 * session (the two compared to 5 us swapping places each round) so that
 * drift on a busy machine hits all alike. Per repetition
 * the median over N calls of each; reported: median, min and max of those
 * medians.
 *
 * Targets: 20 hooks that do not match add at most 5 us to the median; a
 * matching no-op command hook costs about one process spawn (what it adds
 * is under twice what bash true costs beyond noop).
 *
 * STEXEC_BENCH_N: calls of each per repetition (default 200).
 */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOOKS_IDLE_TARGET_US 5.0
#define HOOKS_SPAWN_TARGET 2.0
#define HOOKS_TRUE "{\"command\":\"true\"}"
#define HOOKS_NSESS 3

static char	*hooks_session(struct bench_conn *, const char *);

/* A session serving noop, with these hooks (JSON text, NULL: none). */
static char *
hooks_session(struct bench_conn *c, const char *hooks)
{
	char *params, *sid, p[160];
	json_t *res;

	if (asprintf(&params, "{\"tools\":[{\"name\":\"noop\",\"runner\":"
	    "\"client\"}]%s%s}", hooks != NULL ? ",\"hooks\":" : "",
	    hooks != NULL ? hooks : "") == -1)
		bench_fail("asprintf");
	res = bench_call(c, "createSession", params);
	free(params);
	if (json_string_value(json_object_get(res, "sessionId")) == NULL)
		bench_fail("createSession: no sessionId");
	sid = strdup(json_string_value(json_object_get(res, "sessionId")));
	json_decref(res);
	snprintf(p, sizeof p, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", p));
	snprintf(p, sizeof p, "{\"sessionId\":\"%s\",\"names\":[\"noop\"]}",
	    sid);
	json_decref(bench_call(c, "serveTools", p));
	return sid;
}

int
main(void)
{
	struct bench_daemon d;
	struct bench_conn *c;
	struct bench_sum sum[HOOKS_NSESS + 1];
	int reps = bench_reps(), r, i, j, k = 0;
	long n = bench_n(200, 10, 100000);
	double *med[HOOKS_NSESS + 1], *one[HOOKS_NSESS + 1];
	char *sid[HOOKS_NSESS], params[160], lim[96], cmp[128], *idle;
	size_t len = 0;
	double spawn, added;

	/* 20 PreToolUse and 20 PostToolUse groups naming other tools. */
	idle = bench_alloc(8192);
	len += (size_t)snprintf(idle + len, 8192 - len, "{");
	for (j = 0; j < 2; j++) {
		len += (size_t)snprintf(idle + len, 8192 - len, "%s\"%s\":[",
		    j ? "," : "", j ? "PostToolUse" : "PreToolUse");
		for (i = 0; i < 20; i++)
			len += (size_t)snprintf(idle + len, 8192 - len,
			    "%s{\"matcher\":\"%s\",\"hooks\":[{\"type\":"
			    "\"command\",\"command\":\"exit 2\"}]}",
			    i ? "," : "", i % 2 ? "Bash|Write" : "mcp__db__.*");
		len += (size_t)snprintf(idle + len, 8192 - len, "]");
	}
	snprintf(idle + len, 8192 - len, "}");

	for (j = 0; j <= HOOKS_NSESS; j++) {
		med[j] = bench_alloc(sizeof *med[j] * (size_t)reps);
		one[j] = bench_alloc(sizeof *one[j] * (size_t)n);
	}
	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	sid[0] = hooks_session(c, NULL);
	sid[1] = hooks_session(c, idle);
	sid[2] = hooks_session(c, "{\"PreToolUse\":[{\"matcher\":\"noop\","
	    "\"hooks\":[{\"type\":\"command\",\"command\":\"true\"}]}]}");

	for (i = 0; i < 20; i++) {
		for (j = 0; j < HOOKS_NSESS; j++)
			bench_client_tool_us(c, sid[j], k++);
		bench_tool_us(c, sid[0], "bash", HOOKS_TRUE, "\"\"", k++);
	}
	for (r = 0; r < reps; r++) {
		for (i = 0; i < n; i++) {
			/* The two compared for 5 us swap places each round. */
			for (j = 0; j < HOOKS_NSESS; j++) {
				int w = j < 2 ? (j + i) % 2 : j;

				one[w][i] = bench_client_tool_us(c, sid[w], k++);
			}
			one[HOOKS_NSESS][i] = bench_tool_us(c, sid[0], "bash",
			    HOOKS_TRUE, "\"\"", k++);
		}
		for (j = 0; j < HOOKS_NSESS; j++) {
			snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}",
			    sid[j]);
			json_decref(bench_call(c, "drain", params));
		}
		for (j = 0; j <= HOOKS_NSESS; j++) {
			qsort(one[j], (size_t)n, sizeof *one[j], bench_cmp_double);
			med[j][r] = one[j][n / 2];
		}
	}
	for (j = 0; j <= HOOKS_NSESS; j++)
		bench_summarize(med[j], reps, &sum[j]);
	bench_report("noop", "us", &sum[0], "a client tool, no hooks",
	    "the reference", true);
	snprintf(lim, sizeof lim, "noop %.1f us + %.0f us", sum[0].med,
	    HOOKS_IDLE_TARGET_US);
	snprintf(cmp, sizeof cmp, "+%.1f us with 40 hooks not matching",
	    sum[1].med - sum[0].med);
	bench_report("hooks_unmatched", "us", &sum[1], lim, cmp,
	    sum[1].med - sum[0].med <= HOOKS_IDLE_TARGET_US);
	bench_report("bash_true", "us", &sum[3], "one process spawn",
	    "the reference", true);
	spawn = sum[3].med - sum[0].med;
	added = sum[2].med - sum[0].med;
	snprintf(lim, sizeof lim, "a spawn %.1f us (bash true - noop)", spawn);
	snprintf(cmp, sizeof cmp, "hook adds %.1f us, %.2f spawns (target < "
	    "%.0f)", added, added / spawn, HOOKS_SPAWN_TARGET);
	bench_report("hook_true", "us", &sum[2], lim, cmp,
	    added / spawn < HOOKS_SPAWN_TARGET);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	for (j = 0; j < HOOKS_NSESS; j++)
		free(sid[j]);
	for (j = 0; j <= HOOKS_NSESS; j++) {
		free(med[j]);
		free(one[j]);
	}
	free(idle);
	return 0;
}
