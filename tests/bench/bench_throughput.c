/*
 * throughput: tools per second the daemon sustains. 10 sessions, one
 * subscribed connection each, each given 200 concurrency-safe no-op tools
 * ({"name":"cat","command":["/bin/cat"],"concurrencySafe":true},
 * maxParallel 10) and a drain, all written up front (pipelined); timed
 * from the first write until every drain has answered, every tool_result
 * read by its subscriber. The daemon runs with --max-procs 10, so at most
 * 10 tools are in flight, as in the limit.
 *
 * Limit: a bare spawner keeping 10 /bin/cat in flight (posix_spawn, pipes,
 * the same stdin bytes, poll on the stdout pipes, waitpid at EOF) for the
 * same number of processes. Limit and daemon alternate per repetition.
 *
 * Floor: the least any daemon does for the same calls (bench_floor.h), 10
 * in flight, all requests written at once on one connection; in the same
 * repetitions, after the daemon.
 *
 * STEXEC_BENCH_N: tools per session (default 200).
 */
#include "bench.h"
#include "bench_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TP_SESSIONS 10
#define TP_INFLIGHT 10
#define TP_INPUT "{\"ping\":1}"
#define TP_TARGET 0.90

/* One session on its own connection, with what is left to write. */
struct tp_sess {
	struct bench_conn *c;
	char sid[64];
	char *out;        /* the pipelined requests of this repetition */
	size_t out_len, out_off;
	int64_t drain_id;
	int results;
	bool drained;
};

struct tp_slot {
	pid_t pid;
	int fd;
	size_t got;
};

static void	tp_setup(struct tp_sess *, const char *);
static double	tp_daemon_run(struct tp_sess *, int);
static void	tp_read(struct tp_sess *);
static double	tp_limit_run(int);
static void	tp_spawn(struct tp_slot *);

static void
tp_setup(struct tp_sess *s, const char *sock)
{
	char params[128];
	json_t *res;

	memset(s, 0, sizeof *s);
	s->c = bench_conn_open(sock);
	res = bench_call(s->c, "createSession",
	    "{\"maxParallel\":10,\"tools\":[{\"name\":\"cat\",\"command\":"
	    "[\"/bin/cat\"],\"concurrencySafe\":true}]}");
	if (!json_is_string(json_object_get(res, "sessionId")))
		bench_fail("createSession: no sessionId");
	snprintf(s->sid, sizeof s->sid, "%s",
	    json_string_value(json_object_get(res, "sessionId")));
	json_decref(res);
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", s->sid);
	json_decref(bench_call(s->c, "subscribe", params));
	/* From now on the poll loop drives the socket. */
	fcntl(s->c->fd, F_SETFL, fcntl(s->c->fd, F_GETFL) | O_NONBLOCK);
}

/* Everything buffered and readable now; count results, spot the drain. */
static void
tp_read(struct tp_sess *s)
{
	char *line;
	ssize_t n;

	do {
		n = bench_fill(s->c);
		if (n == 0)
			bench_fail("the daemon closed a connection");
		while ((line = bench_take_line(s->c, NULL)) != NULL) {
			if (bench_is_method(line, "tool_result")) {
				if (strstr(line, "\"is_error\":false") == NULL)
					bench_fail("a no-op tool failed: "
					    "%.500s", line);
				s->results++;
			} else if (bench_method(line, NULL) == NULL) {
				if (bench_is_error(line))
					bench_fail("request failed: %.300s",
					    line);
				if (bench_response_id(line) == s->drain_id)
					s->drained = true;
			}
		}
	} while (n > 0);
}

/* tools/s through the daemon: every session's tools, then its drain. */
static double
tp_daemon_run(struct tp_sess *ss, int per)
{
	struct pollfd pfd[TP_SESSIONS];
	int64_t t0, t1, id;
	int i, k, left, done = 0;
	size_t cap, len;

	for (i = 0; i < TP_SESSIONS; i++) {
		struct tp_sess *s = &ss[i];

		cap = (size_t)per * 200 + 256;
		s->out = bench_alloc(cap);
		len = 0;
		for (k = 0; k < per; k++) {
			id = s->c->next_id++;
			len += (size_t)snprintf(s->out + len, cap - len,
			    "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
			    ",\"method\":\"addTool\",\"params\":{"
			    "\"sessionId\":\"%s\",\"toolUse\":{\"id\":"
			    "\"t%d\",\"name\":\"cat\",\"input\":" TP_INPUT
			    "}}}\n", id, s->sid, k);
		}
		s->drain_id = s->c->next_id++;
		len += (size_t)snprintf(s->out + len, cap - len,
		    "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64 ",\"method\":"
		    "\"drain\",\"params\":{\"sessionId\":\"%s\"}}\n",
		    s->drain_id, s->sid);
		s->out_len = len;
		s->out_off = 0;
		s->results = 0;
		s->drained = false;
	}

	t0 = bench_now_ns();
	while (done < TP_SESSIONS) {
		for (i = 0; i < TP_SESSIONS; i++) {
			pfd[i].fd = ss[i].drained ? -1 : ss[i].c->fd;
			pfd[i].events = POLLIN;
			if (ss[i].out_off < ss[i].out_len)
				pfd[i].events |= POLLOUT;
		}
		if (poll(pfd, TP_SESSIONS, -1) < 0 && errno != EINTR)
			bench_fail("poll: %s", strerror(errno));
		for (i = 0; i < TP_SESSIONS; i++) {
			struct tp_sess *s = &ss[i];
			ssize_t n;

			if (pfd[i].revents & POLLOUT) {
				n = write(s->c->fd, s->out + s->out_off,
				    s->out_len - s->out_off);
				if (n < 0 && errno != EAGAIN)
					bench_fail("write: %s",
					    strerror(errno));
				if (n > 0)
					s->out_off += (size_t)n;
			}
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				tp_read(s);
				if (s->drained)
					done++;
			}
		}
	}
	t1 = bench_now_ns();

	for (i = 0, left = 0; i < TP_SESSIONS; i++) {
		left += per - ss[i].results;
		free(ss[i].out);
		ss[i].out = NULL;
	}
	if (left != 0)
		bench_fail("%d tool_results missing at the drains", left);
	return (double)TP_SESSIONS * per / ((double)(t1 - t0) / 1e9);
}

static void
tp_spawn(struct tp_slot *sl)
{
	char *argv[] = { "/bin/cat", NULL };
	int in;

	sl->pid = bench_spawn_piped(argv, &in, &sl->fd);
	/* A few bytes: the pipe takes them at once, then EOF. */
	bench_write(in, TP_INPUT, strlen(TP_INPUT));
	close(in);
	sl->got = 0;
}

/* tools/s of a bare spawner keeping TP_INFLIGHT cats running. */
static double
tp_limit_run(int total)
{
	struct tp_slot slot[TP_INFLIGHT];
	struct pollfd pfd[TP_INFLIGHT];
	int started = 0, finished = 0, inflight = 0, i, status;
	char buf[4096];
	int64_t t0, t1;
	ssize_t n;

	t0 = bench_now_ns();
	while (finished < total) {
		while (inflight < TP_INFLIGHT && started < total) {
			tp_spawn(&slot[inflight++]);
			started++;
		}
		for (i = 0; i < inflight; i++) {
			pfd[i].fd = slot[i].fd;
			pfd[i].events = POLLIN;
		}
		if (poll(pfd, (nfds_t)inflight, -1) < 0 && errno != EINTR)
			bench_fail("poll: %s", strerror(errno));
		for (i = inflight - 1; i >= 0; i--) {
			if (pfd[i].revents == 0)
				continue;
			n = read(slot[i].fd, buf, sizeof buf);
			if (n > 0) {
				slot[i].got += (size_t)n;
				continue;
			}
			close(slot[i].fd);
			waitpid(slot[i].pid, &status, 0);
			if (slot[i].got != strlen(TP_INPUT) ||
			    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
				bench_fail("bare cat: %zu bytes, status %#x",
				    slot[i].got, status);
			slot[i] = slot[--inflight];
			finished++;
		}
	}
	t1 = bench_now_ns();
	return (double)total / ((double)(t1 - t0) / 1e9);
}

int
main(void)
{
	int reps = bench_reps(), per = (int)bench_n(200, 1, 10000), r, i;
	double *dv = bench_alloc((size_t)reps * sizeof *dv);
	double *lv = bench_alloc((size_t)reps * sizeof *lv);
	double *fv = bench_alloc((size_t)reps * sizeof *fv);
	struct tp_sess ss[TP_SESSIONS];
	struct bench_daemon d;
	struct floor_daemon fd;
	struct bench_sum ds, ls, fs;
	char lim[128], cmp[128];

	floor_daemon_start(&fd, TP_INPUT);
	bench_daemon_start(&d, "--max-procs", "10", NULL);
	for (i = 0; i < TP_SESSIONS; i++)
		tp_setup(&ss[i], d.sock);

	/* Warm up both sides once, untimed. */
	tp_limit_run(100);
	tp_daemon_run(ss, 10);
	floor_daemon_run(&fd, 100);

	for (r = 0; r < reps; r++) {
		lv[r] = tp_limit_run(TP_SESSIONS * per);
		dv[r] = tp_daemon_run(ss, per);
		fv[r] = floor_daemon_run(&fd, TP_SESSIONS * per);
	}
	for (i = 0; i < TP_SESSIONS; i++)
		bench_conn_close(ss[i].c);
	bench_daemon_stop(&d);
	floor_daemon_stop(&fd);

	bench_summarize(dv, reps, &ds);
	bench_summarize(lv, reps, &ls);
	bench_summarize(fv, reps, &fs);
	snprintf(lim, sizeof lim, "limit %.1f tools/s", ls.med);
	snprintf(cmp, sizeof cmp, "%.2f x limit (target >= %.2f x)",
	    ds.med / ls.med, TP_TARGET);
	bench_report("throughput", "tools/s", &ds, lim, cmp,
	    ds.med / ls.med >= TP_TARGET);
	printf("%-12s median %.1f tools/s  min %.1f  max %.1f | %s | "
	    "%.2f x limit: a minimal daemon\n", "throughput, the floor of any "
	    "daemon", fs.med, fs.min, fs.max, lim, fs.med / ls.med);
	free(dv);
	free(lv);
	free(fv);
	return 0;
}
