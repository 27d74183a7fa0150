/*
 * result: what the costliest requests the limits still allow hold the
 * event loop for (doc/design.md §7, Hostile input).
 *
 * - result-stall: a tool writes N MiB of control bytes (each is 6 bytes of
 *   JSON) with maxResultBytes N MiB, the daemon's --max-result-bytes; the
 *   longest a ping from another connection waits from the tool's start
 *   until its result has been read. Limit: the slowest of 50 pings on the
 *   idle daemon.
 * - result-memory: the same result, received whole by a client reading as
 *   fast as it can, on a fresh daemon: the daemon's peak resident set
 *   (VmHWM of /proc/PID/status, reset through clear_refs once the session
 *   is subscribed) minus its resident set then, as a multiple of the raw
 *   result. No limit to compare with; the target is absolute.
 * - rule-match: addTool round trip of a tool whose rule pattern is the
 *   costliest family found, (a|b)*a(a|b){20}c spelled out (size 91), on a
 *   random subject at its bound (506 bytes). Limit: the same tool with
 *   concurrencySafe true.
 *
 * STEXEC_BENCH_N: N, the result size in MiB (default 16: the default
 * ceiling).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RES_TARGET_STALL_MS 50.0
#define RES_TARGET_MATCH_MS 10.0
#define RES_TARGET_GROWTH 8.0
#define RES_ADDS 50
#define RES_RULE "(a|b)*a(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)" \
    "(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)(a|b)c"
#define RES_SUBJECT 506

static double	res_ping_ms(struct bench_conn *);
static void	res_stall(int, double *, double *);
static long long res_status_kib(pid_t, const char *);
static void	res_hwm_reset(pid_t);
static double	res_growth(int);
static void	res_match(double *, double *);

static double
res_ping_ms(struct bench_conn *c)
{
	int64_t t0 = bench_now_ns();

	json_decref(bench_call(c, "ping", NULL));
	return (double)(bench_now_ns() - t0) / 1e6;
}

static void
res_stall(int mib, double *stall, double *idle)
{
	struct bench_daemon d;
	struct bench_conn *c, *w;
	char bytes[32], params[512], *line;
	double ms, worst = 0;
	size_t len;
	json_t *r;
	int i;

	snprintf(bytes, sizeof bytes, "%d", mib << 20);
	bench_daemon_start(&d, "--max-result-bytes", bytes, NULL);
	c = bench_conn_open(d.sock);
	w = bench_conn_open(d.sock);
	for (i = 0, *idle = 0; i < 50; i++)
		if ((ms = res_ping_ms(w)) > *idle)
			*idle = ms;
	snprintf(params, sizeof params, "{\"tools\":[{\"name\":\"ctl\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"head -c %s /dev/zero | tr "
	    "'\\\\000' '\\\\001'\"],\"maxResultBytes\":%s}]}", bytes, bytes);
	r = bench_call(c, "createSession", params);
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}",
	    json_string_value(json_object_get(r, "sessionId")));
	json_decref(bench_call(c, "subscribe", params));
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\",\"toolUse\":"
	    "{\"id\":\"t\",\"name\":\"ctl\",\"input\":{}}}",
	    json_string_value(json_object_get(r, "sessionId")));
	json_decref(r);
	json_decref(bench_call(c, "addTool", params));
	/* Ping on w while c takes in what the daemon sends. */
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		if ((ms = res_ping_ms(w)) > worst)
			worst = ms;
		while (bench_fill(c) > 0)
			;
		if (c->eof)
			bench_fail("the daemon closed the connection");
		while ((line = bench_take_line(c, &len)) != NULL)
			if (bench_is_method(line, "tool_result"))
				goto done;
	}
done:
	bench_conn_close(w);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	*stall = worst;
}

/* A field of /proc/PID/status given in kB, such as VmHWM. */
static long long
res_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long long kib = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		bench_fail("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			kib = atoll(line + n + 1);
	fclose(f);
	if (kib < 0)
		bench_fail("%s has no %s", path, field);
	return kib;
}

/* From now on VmHWM is the peak since this call (proc(5), clear_refs). */
static void
res_hwm_reset(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/clear_refs", (long)pid);
	if ((fd = open(path, O_WRONLY)) == -1)
		bench_fail("%s: %s", path, strerror(errno));
	if (write(fd, "5", 1) != 1)
		bench_fail("%s: %s", path, strerror(errno));
	close(fd);
}

/* The daemon's peak growth while it sends the result, per raw byte. */
static double
res_growth(int mib)
{
	struct bench_daemon d;
	struct bench_conn *c;
	char bytes[32], params[512], *line;
	long long rss0, hwm;
	size_t len;
	json_t *r;

	snprintf(bytes, sizeof bytes, "%d", mib << 20);
	bench_daemon_start(&d, "--max-result-bytes", bytes, NULL);
	c = bench_conn_open(d.sock);
	snprintf(params, sizeof params, "{\"tools\":[{\"name\":\"ctl\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"head -c %s /dev/zero | tr "
	    "'\\\\000' '\\\\001'\"],\"maxResultBytes\":%s}]}", bytes, bytes);
	r = bench_call(c, "createSession", params);
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}",
	    json_string_value(json_object_get(r, "sessionId")));
	json_decref(bench_call(c, "subscribe", params));
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\",\"toolUse\":"
	    "{\"id\":\"t\",\"name\":\"ctl\",\"input\":{}}}",
	    json_string_value(json_object_get(r, "sessionId")));
	json_decref(r);
	/* A round trip after the reset: the daemon is idle when it is read. */
	res_hwm_reset(d.pid);
	json_decref(bench_call(c, "ping", NULL));
	rss0 = res_status_kib(d.pid, "VmRSS");
	json_decref(bench_call(c, "addTool", params));
	for (;;) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_result"))
			break;
	}
	if (len < (size_t)6 * ((size_t)mib << 20))
		bench_fail("the result line has %zu bytes", len);
	hwm = res_status_kib(d.pid, "VmHWM");
	bench_conn_close(c);
	bench_daemon_stop(&d);
	return (double)(hwm - rss0) * 1024 / (double)((size_t)mib << 20);
}

static void
res_match(double *rule, double *plain)
{
	struct bench_daemon d;
	struct bench_conn *c;
	char subject[RES_SUBJECT + 1], *params;
	const char *sid;
	int64_t t0;
	json_t *r;
	int i, k;

	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	r = bench_call(c, "createSession", "{\"tools\":[{\"name\":\"rule\","
	    "\"command\":[\"true\"],\"concurrencySafe\":{\"pointer\":"
	    "\"/command\",\"pattern\":\"" RES_RULE "\"}},{\"name\":\"plain\","
	    "\"command\":[\"true\"],\"concurrencySafe\":true}]}");
	sid = json_string_value(json_object_get(r, "sessionId"));
	srand(1);
	for (k = 0; k < 2; k++) {
		t0 = bench_now_ns();
		for (i = 0; i < RES_ADDS; i++) {
			for (size_t j = 0; j < RES_SUBJECT; j++)
				subject[j] = "ab"[rand() % 2];
			subject[RES_SUBJECT] = '\0';
			if (asprintf(&params, "{\"sessionId\":\"%s\",\"toolUse\":"
			    "{\"id\":\"%c%d\",\"name\":\"%s\",\"input\":"
			    "{\"command\":\"%s\"}}}", sid, "rp"[k], i,
			    k == 0 ? "rule" : "plain", subject) < 0)
				bench_fail("asprintf");
			json_decref(bench_call(c, "addTool", params));
			free(params);
		}
		*(k == 0 ? rule : plain) = (double)(bench_now_ns() - t0) /
		    1e6 / RES_ADDS;
	}
	json_decref(r);
	bench_conn_close(c);
	bench_daemon_stop(&d);
}

int
main(void)
{
	int reps = bench_reps(), mib = (int)bench_n(16, 1, 2047), r;
	double *sv = bench_alloc((size_t)reps * sizeof(double));
	double *iv = bench_alloc((size_t)reps * sizeof(double));
	double *mv = bench_alloc((size_t)reps * sizeof(double));
	double *pv = bench_alloc((size_t)reps * sizeof(double));
	double *gv = bench_alloc((size_t)reps * sizeof(double));
	struct bench_sum ss, is, ms, ps, gs;
	char lim[128], cmp[128];

	for (r = 0; r < reps; r++) {
		res_stall(mib, &sv[r], &iv[r]);
		res_match(&mv[r], &pv[r]);
		gv[r] = res_growth(mib);
	}
	bench_summarize(sv, reps, &ss);
	bench_summarize(iv, reps, &is);
	bench_summarize(mv, reps, &ms);
	bench_summarize(pv, reps, &ps);
	bench_summarize(gv, reps, &gs);
	snprintf(lim, sizeof lim, "limit %.2f ms (idle ping, slowest of 50)",
	    is.med);
	snprintf(cmp, sizeof cmp, "%d MiB of control bytes (target <= %.0f "
	    "ms)", mib, RES_TARGET_STALL_MS);
	bench_report("result-stall", "ms", &ss, lim, cmp,
	    ss.med <= RES_TARGET_STALL_MS);
	snprintf(lim, sizeof lim, "limit none (the raw result: %d MiB)", mib);
	snprintf(cmp, sizeof cmp, "peak growth %.2fx the raw result (target "
	    "<= %.0fx)", gs.med, RES_TARGET_GROWTH);
	bench_report("result-memory", "x", &gs, lim, cmp,
	    gs.med <= RES_TARGET_GROWTH);
	snprintf(lim, sizeof lim, "limit %.2f ms (concurrencySafe true)",
	    ps.med);
	snprintf(cmp, sizeof cmp, "+%.2f ms (target <= +%.0f ms)",
	    ms.med - ps.med, RES_TARGET_MATCH_MS);
	bench_report("rule-match", "ms", &ms, lim, cmp,
	    ms.med - ps.med <= RES_TARGET_MATCH_MS);
	free(sv);
	free(iv);
	free(mv);
	free(pv);
	free(gv);
	return 0;
}
