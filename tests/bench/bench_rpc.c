/*
 * rpc: the cost of one request round trip, ping, in microseconds per ping.
 *
 * - rpc-seq: N pings one after another, each reply read before the next
 *   request is written.
 * - rpc-seq-1cpu: the same with client and server on one CPU (below).
 * - rpc-pipe: N pings written in batches of 1000 while the replies are
 *   read as they come (one poll loop); time until the last reply.
 *
 * Limit: a bare NDJSON echo server, a forked process on its own Unix socket
 * that reads lines and writes back {"jsonrpc":"2.0","id":N,"result":{}}
 * per line (the replies to one read in one write), driven by the very same
 * client loops. Limit and daemon alternate per repetition.
 *
 * Placement: a sequential round trip is two wakeups, and on a VM waking a
 * process on the other (idle) CPU costs far more (here ~30 us) than on the
 * same one (~5 us). Left to the scheduler, a light echo server stays on
 * the client's CPU for a while and then migrates, so the limit flipped
 * between ~10 and ~38 us with N. The bench therefore pins: the client on
 * the first allowed CPU, the server (daemon or echo) on the second, for
 * rpc-seq and rpc-pipe; rpc-seq-1cpu puts both on the first, where the
 * daemon's own CPU time per request is not hidden behind the wakeup. With
 * a single CPU allowed nothing is pinned.
 *
 * STEXEC_BENCH_N: pings per repetition and loop (default 20000).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define RPC_BATCH 1000
#define RPC_TARGET 1.3
#define RPC_REQ_MAX 96

static pid_t	rpc_echo_start(const char *);
static void	rpc_echo_serve(int);
static size_t	rpc_request(char *, int64_t);
static double	rpc_seq(const char *, int);
static double	rpc_pipe(const char *, int);
static void	rpc_report(const char *, const double *, const double *, int);
static bool	rpc_place(pid_t, pid_t, bool);

/* The bare server: accept, then echo fixed replies, one client at a time. */
static pid_t
rpc_echo_start(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	pid_t parent = getpid(), pid;
	int lfd, fd;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
	    listen(lfd, 16) != 0)
		bench_fail("echo server %s: %s", path, strerror(errno));
	if ((pid = fork()) < 0)
		bench_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent)
			_exit(1);
		for (;;) {
			if ((fd = accept(lfd, NULL, NULL)) < 0)
				_exit(1);
			rpc_echo_serve(fd);
			close(fd);
		}
	}
	close(lfd);
	return pid;
}

static void
rpc_echo_serve(int fd)
{
	static char in[65536], out[65536 * 2];
	size_t have = 0, olen, k;
	char *p, *nl, *end, *id;
	ssize_t n;

	for (;;) {
		n = read(fd, in + have, sizeof in - have);
		if (n <= 0)
			return;
		have += (size_t)n;
		p = in;
		end = in + have;
		olen = 0;
		while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
			/* The id's digits, as a server would echo the id. */
			*nl = '\0';
			id = strstr(p, "\"id\":");
			k = id != NULL ? strspn(id + 5, "0123456789") : 0;
			olen += (size_t)sprintf(out + olen,
			    "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{}}\n",
			    (int)k, id != NULL ? id + 5 : "");
			p = nl + 1;
		}
		bench_write(fd, out, olen);
		have = (size_t)(end - p);
		memmove(in, p, have);
	}
}

static size_t
rpc_request(char *buf, int64_t id)
{
	return (size_t)sprintf(buf, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"ping\",\"params\":{}}\n", id);
}

/* µs per ping, one at a time. */
static double
rpc_seq(const char *path, int n)
{
	struct bench_conn *c = bench_conn_open(path);
	char req[RPC_REQ_MAX], *line;
	int64_t t0, t1;
	size_t len;
	int i;

	t0 = bench_now_ns();
	for (i = 1; i <= n; i++) {
		len = rpc_request(req, i);
		bench_write(c->fd, req, len);
		line = bench_line(c, NULL);
		if (bench_response_id(line) != i || bench_is_error(line))
			bench_fail("ping %d: %.200s", i, line);
	}
	t1 = bench_now_ns();
	bench_conn_close(c);
	return (double)(t1 - t0) / 1e3 / n;
}

/* µs per ping, written in batches while replies are read. */
static double
rpc_pipe(const char *path, int n)
{
	struct bench_conn *c = bench_conn_open(path);
	struct pollfd pfd = { .fd = c->fd };
	size_t *off = bench_alloc(((size_t)n + 1) * sizeof *off), wpos = 0;
	char *reqs = bench_alloc((size_t)n * RPC_REQ_MAX), *line;
	int sent = 0, got = 0, i, k;
	int64_t t0, t1;
	ssize_t w;

	/* Built before the clock starts, like the sequential requests. */
	off[0] = 0;
	for (i = 0; i < n; i++)
		off[i + 1] = off[i] + rpc_request(reqs + off[i], i + 1);
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);

	t0 = bench_now_ns();
	while (got < n) {
		pfd.events = POLLIN | (sent < n ? POLLOUT : 0);
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			bench_fail("poll: %s", strerror(errno));
		if (pfd.revents & POLLOUT) {
			/* Up to a batch of whole requests; finish a cut one. */
			k = sent + RPC_BATCH < n ? sent + RPC_BATCH : n;
			w = write(c->fd, reqs + wpos, off[k] - wpos);
			if (w < 0 && errno != EAGAIN)
				bench_fail("write: %s", strerror(errno));
			if (w > 0) {
				wpos += (size_t)w;
				while (sent < n && off[sent + 1] <= wpos)
					sent++;
			}
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			if (bench_fill(c) == 0)
				bench_fail("connection closed after %d "
				    "replies", got);
			while ((line = bench_take_line(c, NULL)) != NULL) {
				if (bench_response_id(line) != got + 1 ||
				    bench_is_error(line))
					bench_fail("ping %d: %.200s", got + 1,
					    line);
				got++;
			}
		}
	}
	t1 = bench_now_ns();
	bench_conn_close(c);
	free(off);
	free(reqs);
	return (double)(t1 - t0) / 1e3 / n;
}

static void
rpc_report(const char *name, const double *dv, const double *lv, int reps)
{
	struct bench_sum ds, ls;
	char lim[128], cmp[128];

	bench_summarize(dv, reps, &ds);
	bench_summarize(lv, reps, &ls);
	snprintf(lim, sizeof lim, "limit %.2f us", ls.med);
	snprintf(cmp, sizeof cmp, "%.2f x limit (target <= %.1f x)",
	    ds.med / ls.med, RPC_TARGET);
	bench_report(name, "us", &ds, lim, cmp, ds.med / ls.med <= RPC_TARGET);
}

/*
 * The client on the first CPU, the servers on the second or the same.
 * False when there is no second CPU: then all share the one there is.
 */
static bool
rpc_place(pid_t daemon, pid_t echo, bool same)
{
	return bench_pin(0, 0) && bench_pin(daemon, same ? 0 : 1) &&
	    bench_pin(echo, same ? 0 : 1);
}

int
main(void)
{
	int reps = bench_reps(), n = (int)bench_n(20000, 1, 10000000), r;
	double *dseq = bench_alloc((size_t)reps * sizeof(double));
	double *lseq = bench_alloc((size_t)reps * sizeof(double));
	double *dpipe = bench_alloc((size_t)reps * sizeof(double));
	double *lpipe = bench_alloc((size_t)reps * sizeof(double));
	double *dseq1 = bench_alloc((size_t)reps * sizeof(double));
	double *lseq1 = bench_alloc((size_t)reps * sizeof(double));
	struct bench_daemon d;
	char echo[100];
	pid_t echo_pid;

	bench_daemon_start(&d, NULL);
	snprintf(echo, sizeof echo, "%s/echo.sock", d.dir);
	echo_pid = rpc_echo_start(echo);

	if (!rpc_place(d.pid, echo_pid, false))
		fprintf(stderr, "bench: fewer than 2 CPUs: client and server "
		    "share one\n");

	/* Warm up: each side's allocator, page cache, CPU clocks. */
	rpc_seq(echo, 2000);
	rpc_seq(d.sock, 2000);
	rpc_pipe(echo, 2000);
	rpc_pipe(d.sock, 2000);

	for (r = 0; r < reps; r++) {
		rpc_place(d.pid, echo_pid, false);
		lseq[r] = rpc_seq(echo, n);
		dseq[r] = rpc_seq(d.sock, n);
		lpipe[r] = rpc_pipe(echo, n);
		dpipe[r] = rpc_pipe(d.sock, n);
		rpc_place(d.pid, echo_pid, true);
		lseq1[r] = rpc_seq(echo, n);
		dseq1[r] = rpc_seq(d.sock, n);
	}
	kill(echo_pid, SIGKILL);
	waitpid(echo_pid, NULL, 0);
	bench_daemon_stop(&d);

	rpc_report("rpc-seq", dseq, lseq, reps);
	rpc_report("rpc-seq-1cpu", dseq1, lseq1, reps);
	rpc_report("rpc-pipe", dpipe, lpipe, reps);
	free(dseq1);
	free(lseq1);
	free(dseq);
	free(lseq);
	free(dpipe);
	free(lpipe);
	return 0;
}
