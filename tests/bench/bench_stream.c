/*
 * stream: how fast a tool's output reaches a subscriber as progress. One
 * tool with streamOutput true and maxResultBytes 4096 writes N MiB of
 * plain text ('a's, in 64 KiB writes); the subscriber counts the decoded
 * `text` bytes of its stdout progress notifications. Timed from the
 * addTool write to the tool_result; MB/s = 10^6 bytes per second of text.
 * The decoded total must equal what the tool wrote.
 *
 * The writer is this program itself (--bench-write BYTES), so the limit
 * runs the very same writer: its stdout is a pipe, a forked relay process
 * reads it (64 KiB reads) and writes a Unix stream socket, and the client
 * reads that to EOF. Limit and daemon alternate per repetition; the
 * daemon's full-output files (S17) are removed after each.
 *
 * STEXEC_BENCH_N: MiB the tool writes (default 256).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ST_TARGET_MBS 600.0
#define ST_TARGET_RATIO 0.5
#define ST_CHUNK 65536

static int	st_write(const char *);
static unsigned long st_hex4(const char *);
static size_t	st_text_len(const char *, const char *, bool *);
static size_t	st_progress_bytes(const char *);
static double	st_daemon_run(struct bench_conn *, const char *, int,
		    long long);
static double	st_limit_run(const char *, long long);

/* The writer: BYTES of 'a' to stdout. */
static int
st_write(const char *arg)
{
	static char buf[ST_CHUNK];
	long long left = strtoll(arg, NULL, 10);
	size_t k;

	memset(buf, 'a', sizeof buf);
	while (left > 0) {
		k = left < ST_CHUNK ? (size_t)left : ST_CHUNK;
		bench_write(1, buf, k);
		left -= (long long)k;
	}
	return 0;
}

/* The 4 hex digits of a JSON backslash-u escape (the daemon's are valid). */
static unsigned long
st_hex4(const char *p)
{
	char hex[5];

	memcpy(hex, p, 4);
	hex[4] = '\0';
	return strtoul(hex, NULL, 16);
}

/*
 * Decoded length of the JSON string body at p (after its opening quote),
 * up to the closing quote: what a client gets once it unescapes.
 */
static size_t
st_text_len(const char *p, const char *end, bool *bad)
{
	const char *q, *bs;
	size_t n = 0;
	unsigned long cp, lo;

	for (;;) {
		if ((q = memchr(p, '"', (size_t)(end - p))) == NULL) {
			*bad = true;
			return n;
		}
		if ((bs = memchr(p, '\\', (size_t)(q - p))) == NULL)
			return n + (size_t)(q - p);
		n += (size_t)(bs - p);
		p = bs + 1;
		if (*p != 'u') {
			n++;
			p++;
			continue;
		}
		if (end - p < 5) {
			*bad = true;
			return n;
		}
		cp = st_hex4(p + 1);
		p += 5;
		/* A surrogate pair is one 4-byte character. */
		if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 &&
		    p[0] == '\\' && p[1] == 'u') {
			lo = st_hex4(p + 2);
			if (lo >= 0xdc00 && lo < 0xe000) {
				n += 4;
				p += 6;
				continue;
			}
		}
		n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
	}
}

/* Text bytes of a stdout progress line; 0 for any other line. */
static size_t
st_progress_bytes(const char *line)
{
	const char *p;
	bool bad = false;
	size_t n;

	if (!bench_is_method(line, "progress"))
		return 0;
	if (strstr(line, "\"stream\":\"stdout\"") == NULL ||
	    (p = strstr(line, "\"text\":\"")) == NULL)
		bench_fail("unexpected progress: %.300s", line);
	n = st_text_len(p + 8, line + strlen(line), &bad);
	if (bad)
		bench_fail("unterminated text: %.300s", line);
	return n;
}

static double
st_daemon_run(struct bench_conn *c, const char *sid, int k, long long bytes)
{
	int64_t id = c->next_id++, t0, t1;
	long long got = 0;
	char req[512], *line;
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
	    "\"toolUse\":{\"id\":\"w%d\",\"name\":\"writer\",\"input\":{}}}}\n",
	    id, sid, k);
	t0 = bench_now_ns();
	bench_write(c->fd, req, (size_t)n);
	for (;;) {
		line = bench_line(c, NULL);
		if (bench_is_method(line, "tool_result"))
			break;
		if (bench_method(line, NULL) == NULL && bench_is_error(line))
			bench_fail("addTool: %.300s", line);
		got += (long long)st_progress_bytes(line);
	}
	t1 = bench_now_ns();
	if (strstr(line, "\"is_error\":false") == NULL ||
	    strstr(line, "\"truncated\":true") == NULL)
		bench_fail("the writer's result: %.600s", line);
	if (got != bytes)
		bench_fail("progress text: %lld bytes, the tool wrote %lld",
		    got, bytes);
	return (double)bytes / 1e6 / ((double)(t1 - t0) / 1e9);
}

/* The same writer through a pipe and a relay process to a socket. */
static double
st_limit_run(const char *self, long long bytes)
{
	static char buf[256 * 1024];
	char *argv[4], arg[32];
	int sv[2], in, out, status;
	pid_t parent = getpid(), writer, relay;
	long long got = 0;
	int64_t t0, t1;
	ssize_t n;

	snprintf(arg, sizeof arg, "%lld", bytes);
	argv[0] = (char *)self;
	argv[1] = "--bench-write";
	argv[2] = arg;
	argv[3] = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		bench_fail("socketpair: %s", strerror(errno));

	t0 = bench_now_ns();
	writer = bench_spawn_piped(argv, &in, &out);
	close(in);
	if ((relay = fork()) < 0)
		bench_fail("fork: %s", strerror(errno));
	if (relay == 0) {
		/* A relay as plain as it gets: read 64 KiB, write it on. */
		static char rbuf[ST_CHUNK];

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent)
			_exit(1);
		close(sv[0]);
		while ((n = read(out, rbuf, sizeof rbuf)) > 0)
			bench_write(sv[1], rbuf, (size_t)n);
		_exit(n == 0 ? 0 : 1);
	}
	close(out);
	close(sv[1]);
	while ((n = read(sv[0], buf, sizeof buf)) > 0)
		got += n;
	close(sv[0]);
	waitpid(writer, &status, 0);
	waitpid(relay, NULL, 0);
	t1 = bench_now_ns();
	if (got != bytes || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_fail("bare relay: %lld of %lld bytes, writer status %#x",
		    got, bytes, status);
	return (double)bytes / 1e6 / ((double)(t1 - t0) / 1e9);
}

int
main(int argc, char **argv)
{
	int reps = bench_reps(), r;
	long long bytes;
	double *dv, *lv;
	struct bench_daemon d;
	struct bench_conn *c;
	struct bench_sum ds, ls;
	char self[PATH_MAX], *tools, params[128], lim[128], cmp[160];
	const char *sid;
	json_t *res;
	bool pass;

	if (argc == 3 && strcmp(argv[1], "--bench-write") == 0)
		return st_write(argv[2]);
	bytes = bench_n(256, 1, 65536) * 1024 * 1024;
	if (realpath("/proc/self/exe", self) == NULL)
		bench_fail("realpath /proc/self/exe: %s", strerror(errno));
	dv = bench_alloc((size_t)reps * sizeof *dv);
	lv = bench_alloc((size_t)reps * sizeof *lv);

	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	if (asprintf(&tools, "{\"tools\":[{\"name\":\"writer\",\"command\":"
	    "[\"%s\",\"--bench-write\",\"%lld\"],\"streamOutput\":true,"
	    "\"maxResultBytes\":4096}]}", self, bytes) < 0)
		bench_fail("out of memory");
	res = bench_call(c, "createSession", tools);
	free(tools);
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));

	for (r = 0; r < reps; r++) {
		lv[r] = st_limit_run(self, bytes);
		dv[r] = st_daemon_run(c, sid, r, bytes);
		bench_clean_dir(d.out);
	}
	json_decref(bench_call(c, "drain", params));
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);

	bench_summarize(dv, reps, &ds);
	bench_summarize(lv, reps, &ls);
	pass = ds.med >= ST_TARGET_MBS || ds.med >= ST_TARGET_RATIO * ls.med;
	snprintf(lim, sizeof lim, "limit %.1f MB/s", ls.med);
	snprintf(cmp, sizeof cmp, "%.2f x limit (target >= %.0f MB/s or "
	    ">= %.2f x)", ds.med / ls.med, ST_TARGET_MBS, ST_TARGET_RATIO);
	bench_report("stream", "MB/s", &ds, lim, cmp, pass);
	free(dv);
	free(lv);
	return 0;
}
