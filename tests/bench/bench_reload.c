/*
 * reload: what a SIGHUP costs the clients (doc/design.md §7, Reload). A
 * daemon with N idle sessions and 10 tools running (sleep 30, handed over,
 * not waited for) is sent SIGHUP while a client pings it without pause,
 * on one connection (the reload carries it; were it closed, the client
 * would connect again, and that would count). Figures per N (0, 100,
 * 1000): the time from the SIGHUP until the new image answers initialize
 * with its own instance, and the longest wait the pinging client had for
 * an answer meanwhile, from its last answer before to its first after.
 * Each repetition a fresh daemon.
 */
#include "bench.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RELOAD_TOOLS 10
#define RELOAD_TARGET_MS 1000.0

/* A connection that may fail: -1 when the socket does not accept now. */
static int
reload_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * One request on fd, its answer's line into buf (the daemon answers in
 * order and sends this connection nothing else): false when the
 * connection closed or gave nothing within timeout_ms.
 */
static bool
reload_ask(int fd, const char *req, char *buf, size_t len, int timeout_ms)
{
	int64_t until = bench_now_ns() + (int64_t)timeout_ms * 1000000;
	struct pollfd p = { fd, POLLIN, 0 };
	size_t have = 0;
	ssize_t n;

	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		return false;
	while (have == 0 || memchr(buf, '\n', have) == NULL) {
		if (have + 1 >= len || bench_now_ns() > until ||
		    poll(&p, 1, 100) < 0)
			return false;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		if ((n = read(fd, buf + have, len - have - 1)) <= 0)
			return false;
		have += (size_t)n;
	}
	buf[have] = '\0';
	return true;
}

/* server.instance of an initialize answer, or "" (into out). */
static void
reload_instance(const char *line, char *out, size_t len)
{
	const char *p = strstr(line, "\"instance\":\"");

	snprintf(out, len, "%.*s", p != NULL ? (int)strcspn(p + 12, "\"") : 0,
	    p != NULL ? p + 12 : "");
}

/* One repetition with n sessions: serve_ms and the longest ping wait. */
static void
reload_one(int n, double *serve_ms, double *wait_ms)
{
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"initialize\"}\n";
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":2,"
	    "\"method\":\"ping\"}\n";
	char maxs[32], params[256], line[65536], before[64], now[64];
	struct bench_daemon d;
	struct bench_conn *c;
	int64_t t0, last, t, served = 0, longest = 0;
	const char *sid;
	json_t *res;
	int fd, i;

	snprintf(maxs, sizeof maxs, "%d", n + 10);
	bench_daemon_start(&d, "--max-sessions", maxs, NULL);
	c = bench_conn_open(d.sock);
	bench_sessions(c, n, NULL, 0);
	res = bench_call(c, "createSession", "{\"tools\":[{\"name\":\"sleep\","
	    "\"command\":[\"sleep\",\"30\"],\"concurrencySafe\":true}]}");
	if ((sid = json_string_value(json_object_get(res, "sessionId"))) ==
	    NULL)
		bench_fail("createSession: no sessionId");
	for (i = 0; i < RELOAD_TOOLS; i++) {
		snprintf(params, sizeof params, "{\"sessionId\":\"%s\","
		    "\"toolUse\":{\"id\":\"s%d\",\"name\":\"sleep\",\"input\":"
		    "{}}}", sid, i);
		json_decref(bench_call(c, "addTool", params));
	}
	json_decref(res);
	bench_conn_close(c);
	usleep(200000);

	if ((fd = reload_connect(d.sock)) == -1 ||
	    !reload_ask(fd, init, line, sizeof line, 5000))
		bench_fail("initialize before the reload");
	reload_instance(line, before, sizeof before);
	t0 = last = bench_now_ns();
	kill(d.pid, SIGHUP);
	/* Ping until the new image answers, and a little longer. */
	while (served == 0 || bench_now_ns() - served < 200000000LL) {
		if (bench_now_ns() - t0 > 30000000000LL)
			bench_fail("no new image within 30 s");
		if (fd == -1 && (fd = reload_connect(d.sock)) == -1)
			continue;
		if (!reload_ask(fd, ping, line, sizeof line, 10000)) {
			close(fd);
			fd = -1;
			continue;
		}
		t = bench_now_ns();
		if (t - last > longest)
			longest = t - last;
		last = t;
		if (served == 0 && reload_ask(fd, init, line, sizeof line,
		    10000)) {
			reload_instance(line, now, sizeof now);
			if (now[0] != '\0' && strcmp(now, before) != 0)
				served = bench_now_ns();
		}
	}
	if (fd != -1)
		close(fd);
	*serve_ms = (double)(served - t0) / 1e6;
	*wait_ms = (double)longest / 1e6;
	bench_daemon_stop(&d);
}

int
main(void)
{
	static const int counts[] = { 0, 100, 1000 };
	int reps = bench_reps(), r, k;
	double *serve = bench_alloc((size_t)reps * sizeof *serve);
	double *wait = bench_alloc((size_t)reps * sizeof *wait);
	struct bench_sum ss, ws;
	char name[64], lim[64], cmp[96];

	for (k = 0; k < 3; k++) {
		for (r = 0; r < reps; r++)
			reload_one(counts[k], &serve[r], &wait[r]);
		bench_summarize(serve, reps, &ss);
		bench_summarize(wait, reps, &ws);
		snprintf(name, sizeof name, "reload, %d sessions", counts[k]);
		snprintf(lim, sizeof lim, "%d tools running", RELOAD_TOOLS);
		snprintf(cmp, sizeof cmp, "serving again (target < %.0f ms)",
		    RELOAD_TARGET_MS);
		bench_report(name, "ms", &ss, lim, cmp, ss.max <
		    RELOAD_TARGET_MS);
		snprintf(name, sizeof name, "reload ping wait, %d sessions",
		    counts[k]);
		snprintf(cmp, sizeof cmp, "longest answer wait of a pinging "
		    "client");
		bench_report(name, "ms", &ws, lim, cmp, ws.max <
		    RELOAD_TARGET_MS);
	}
	return 0;
}
