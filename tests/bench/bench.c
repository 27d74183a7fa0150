/* Benchmark support: a private daemon, a raw line client, timing. */
#include "bench.h"
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Reads this big: a streaming daemon sends 64 KiB progress lines. */
#define BENCH_READ_SIZE (256 * 1024)

static int	bench_rm_cb(const char *, const struct stat *, int,
		    struct FTW *);
static void	bench_rm_tree(const char *);

/*
 * The daemon to clean up when the bench fails, and the bench's own pid:
 * forked helpers (echo server, relay) fail through bench_fail too.
 */
static struct bench_daemon *bench_current;
static pid_t bench_main_pid;

void
bench_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	/* A forked helper (echo server, relay) must not touch the daemon. */
	if (bench_main_pid != 0 && getpid() != bench_main_pid)
		_exit(1);
	if (bench_current != NULL) {
		fprintf(stderr, "bench: daemon log: %s\n", bench_current->log);
		kill(bench_current->pid, SIGKILL);
		waitpid(bench_current->pid, NULL, 0);
		/* Keep the log for a look; drop the big output files. */
		bench_rm_tree(bench_current->out);
	}
	exit(1);
}

void *
bench_alloc(size_t n)
{
	void *p = calloc(1, n > 0 ? n : 1);

	if (p == NULL)
		bench_fail("out of memory (%zu bytes)", n);
	return p;
}

int64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double
bench_cpu_us(pid_t pid)
{
	struct timespec ts;
	clockid_t clk;

	if (clock_getcpuclockid(pid, &clk) != 0 ||
	    clock_gettime(clk, &ts) != 0)
		bench_fail("no CPU clock for pid %ld", (long)pid);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

long
bench_env_long(const char *name, long def, long min, long max)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		bench_fail("%s must be an integer in %ld..%ld, got \"%s\"",
		    name, min, max, s);
	return v;
}

int
bench_reps(void)
{
	return (int)bench_env_long("STEXEC_BENCH_REPS", 5, 1, 1000);
}

long
bench_n(long def, long min, long max)
{
	return bench_env_long("STEXEC_BENCH_N", def, min, max);
}

bool
bench_pin(pid_t pid, int k)
{
	static cpu_set_t allowed;
	static bool known;
	cpu_set_t one;
	int cpu;

	if (!known) {
		if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
			return false;
		known = true;
	}
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &allowed) && k-- == 0)
			break;
	}
	if (cpu == CPU_SETSIZE)
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(pid, sizeof one, &one) == 0;
}

/* Connections and sessions by the thousand need the fds, daemon too. */
void
bench_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void
bench_daemon_start(struct bench_daemon *d, const char *arg, ...)
{
	const char *args[64];
	char err[256];
	va_list ap;
	size_t n = 0;
	int k, status;

	bench_main_pid = getpid();
	/* A benchmark writes to closed sockets only by mistake: no signal. */
	signal(SIGPIPE, SIG_IGN);
	memset(d, 0, sizeof *d);
	snprintf(d->dir, sizeof d->dir, "/tmp/stexec-bench-XXXXXX");
	if (mkdtemp(d->dir) == NULL)
		bench_fail("mkdtemp: %s", strerror(errno));
	snprintf(d->sock, sizeof d->sock, "%s/s.sock", d->dir);
	snprintf(d->out, sizeof d->out, "%s/out", d->dir);
	snprintf(d->log, sizeof d->log, "%s/daemon.log", d->dir);

	va_start(ap, arg);
	for (; arg != NULL && n < 62; arg = va_arg(ap, const char *))
		args[n++] = arg;
	va_end(ap);
	args[n] = NULL;
	d->pid = launch_daemon(NULL, d->sock, d->out, d->log, NULL, args, err,
	    sizeof err);
	if (d->pid < 0)
		bench_fail("%s", err);
	bench_current = d;
	if ((k = launch_wait_serving(d->pid, d->sock, 30000, &status)) == -1) {
		bench_current = NULL;
		bench_fail("the daemon exited (status %#x) before serving; "
		    "see %s", status, d->log);
	}
	if (k != 0)
		bench_fail("the daemon did not serve within 30 s");
}

void
bench_daemon_stop(struct bench_daemon *d)
{
	bool killed;
	int status = launch_stop(d->pid, 60000, &killed);

	if (killed)
		fprintf(stderr, "bench: the daemon ignored SIGTERM for 60 s: "
		    "SIGKILL\n");
	bench_current = NULL;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_fail("the daemon ended with status %#x; see %s", status,
		    d->log);
	bench_rm_tree(d->dir);
}

static int
bench_rm_cb(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void
bench_rm_tree(const char *dir)
{
	nftw(dir, bench_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Only the files: the daemon keeps using the directory. */
void
bench_clean_dir(const char *dir)
{
	char path[512];
	struct dirent *e;
	DIR *dp;

	if ((dp = opendir(dir)) == NULL)
		return;
	while ((e = readdir(dp)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(dp);
}

int
bench_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		bench_fail("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0)
		bench_fail("connect %s: %s", path, strerror(errno));
	return fd;
}

struct bench_conn *
bench_conn_adopt(int fd)
{
	struct bench_conn *c = bench_alloc(sizeof *c);

	c->fd = fd;
	c->next_id = 1;
	return c;
}

struct bench_conn *
bench_conn_open(const char *path)
{
	return bench_conn_adopt(bench_connect(path));
}

void
bench_conn_close(struct bench_conn *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->buf);
	free(c);
}

void
bench_write(int fd, const void *data, size_t len)
{
	const char *p = data;
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			poll(&pfd, 1, -1);
			continue;
		}
		if (n < 0)
			bench_fail("write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

ssize_t
bench_fill(struct bench_conn *c)
{
	ssize_t n;

	/* Move the unreturned tail down before growing. */
	if (c->start > 0 && (c->start == c->len ||
	    c->cap - c->len < BENCH_READ_SIZE + 1)) {
		memmove(c->buf, c->buf + c->start, c->len - c->start);
		c->len -= c->start;
		c->scan = c->scan > c->start ? c->scan - c->start : 0;
		c->start = 0;
	}
	if (c->cap - c->len < BENCH_READ_SIZE + 1) {
		size_t cap = c->cap == 0 ? 2 * BENCH_READ_SIZE : 2 * c->cap;
		char *b = realloc(c->buf, cap);

		if (b == NULL)
			bench_fail("out of memory");
		c->buf = b;
		c->cap = cap;
	}
	for (;;) {
		n = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return -1;
		if (n < 0)
			bench_fail("read: %s", strerror(errno));
		break;
	}
	if (n == 0)
		c->eof = true;
	c->len += (size_t)n;
	return n;
}

char *
bench_take_line(struct bench_conn *c, size_t *len)
{
	char *nl, *line;

	if (c->scan < c->start)
		c->scan = c->start;
	nl = memchr(c->buf + c->scan, '\n', c->len - c->scan);
	if (nl == NULL) {
		c->scan = c->len;
		return NULL;
	}
	line = c->buf + c->start;
	*nl = '\0';
	if (len != NULL)
		*len = (size_t)(nl - line);
	c->start = c->scan = (size_t)(nl - c->buf) + 1;
	return line;
}

char *
bench_line(struct bench_conn *c, size_t *len)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	char *line;
	ssize_t n;

	while ((line = bench_take_line(c, len)) == NULL) {
		n = bench_fill(c);
		if (n == 0)
			bench_fail("the daemon closed the connection");
		if (n < 0)
			poll(&pfd, 1, -1);
	}
	return line;
}

json_t *
bench_call(struct bench_conn *c, const char *method, const char *params)
{
	int64_t id = c->next_id++;
	json_t *msg, *v;
	char head[128], *line, *text;
	size_t len;
	int k;

	k = snprintf(head, sizeof head,
	    "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64 ",\"method\":\"%s\"%s",
	    id, method, params != NULL ? ",\"params\":" : "}\n");
	if (params == NULL) {
		bench_write(c->fd, head, (size_t)k);
	} else {
		if (asprintf(&text, "%s%s}\n", head, params) < 0)
			bench_fail("out of memory");
		bench_write(c->fd, text, strlen(text));
		free(text);
	}
	for (;;) {
		line = bench_line(c, &len);
		if (bench_method(line, NULL) != NULL ||
		    bench_response_id(line) != id)
			continue;
		if ((msg = json_loadb(line, len, 0, NULL)) == NULL)
			bench_fail("%s: unparseable reply: %.200s", method,
			    line);
		if ((v = json_object_get(msg, "result")) == NULL)
			bench_fail("%s failed: %.300s", method, line);
		json_incref(v);
		json_decref(msg);
		return v;
	}
}

double
bench_tool_us(struct bench_conn *c, const char *sid, const char *tool,
    const char *input, const char *content, int k)
{
	int64_t id = c->next_id++, t0, t1 = 0;
	bool got_result = false, got_reply = false;
	char req[1024], tid[48], want[256], *line;
	size_t len;
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
	    "\"toolUse\":{\"id\":\"t%d\",\"name\":\"%s\",\"input\":"
	    "%s}}}\n", id, sid, k, tool, input);
	if (n < 0 || (size_t)n >= sizeof req)
		bench_fail("addTool of %s: too long", tool);
	snprintf(tid, sizeof tid, "\"toolUseId\":\"t%d\"", k);
	snprintf(want, sizeof want, "\"content\":%s", content);
	t0 = bench_now_ns();
	bench_write(c->fd, req, (size_t)n);
	/*
	 * The clock stops at the tool_result; the addTool reply may come
	 * after it and is read untimed, so the next call starts clean.
	 */
	while (!got_result || !got_reply) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_result")) {
			t1 = bench_now_ns();
			if (strstr(line, tid) == NULL)
				bench_fail("tool_result of another tool: "
				    "%.300s", line);
			if (strstr(line, "\"is_error\":false") == NULL ||
			    strstr(line, want) == NULL)
				bench_fail("%s failed: %.500s", tool, line);
			got_result = true;
		} else if (bench_method(line, NULL) == NULL &&
		    bench_response_id(line) == id) {
			if (bench_is_error(line))
				bench_fail("addTool: %.300s", line);
			got_reply = true;
		}
	}
	return (double)(t1 - t0) / 1e3;
}

long long
bench_rss(struct bench_conn *c)
{
	json_t *r = bench_call(c, "stats", "{}");
	json_t *v = json_object_get(r, "rssBytes");
	long long rss;

	if (!json_is_integer(v))
		bench_fail("stats has no rssBytes");
	rss = (long long)json_integer_value(v);
	json_decref(r);
	return rss;
}

const char *
bench_method(const char *line, size_t *len)
{
	const char *p = strstr(line, "\"method\":\""), *e;

	if (p == NULL)
		return NULL;
	p += 10;
	if ((e = strchr(p, '"')) == NULL)
		return NULL;
	if (len != NULL)
		*len = (size_t)(e - p);
	return p;
}

bool
bench_is_method(const char *line, const char *method)
{
	size_t len;
	const char *m = bench_method(line, &len);

	return m != NULL && len == strlen(method) &&
	    memcmp(m, method, len) == 0;
}

int64_t
bench_response_id(const char *line)
{
	const char *p = strstr(line, "\"id\":");

	if (p == NULL || p[5] < '0' || p[5] > '9')
		return -1;
	return strtoll(p + 5, NULL, 10);
}

bool
bench_is_error(const char *line)
{
	return strstr(line, "\"error\":{") != NULL;
}

pid_t
bench_spawn_piped(char *const argv[], int *in_fd, int *out_fd)
{
	posix_spawn_file_actions_t fa;
	int in[2], out[2], e;
	pid_t pid;

	/* CLOEXEC, so siblings in flight never hold each other's pipes. */
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		bench_fail("pipe2: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e != 0)
		bench_fail("posix_spawn %s: %s", argv[0], strerror(e));
	close(in[0]);
	close(out[1]);
	*in_fd = in[1];
	*out_fd = out[0];
	return pid;
}

int
bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void
bench_shuffle(int *order, int count, uint64_t *rng)
{
	int k, j, tmp;

	for (k = 0; k < count; k++)
		order[k] = k;
	for (k = count - 1; k > 0; k--) {
		*rng ^= *rng << 13;
		*rng ^= *rng >> 7;
		*rng ^= *rng << 17;
		j = (int)(*rng % (uint64_t)(k + 1));
		tmp = order[k];
		order[k] = order[j];
		order[j] = tmp;
	}
}

void
bench_summarize(const double *v, int n, struct bench_sum *s)
{
	double *c;

	if (n < 1)
		bench_fail("bench_summarize: nothing to summarize");
	c = bench_alloc((size_t)n * sizeof *c);
	memcpy(c, v, (size_t)n * sizeof *c);
	qsort(c, (size_t)n, sizeof *c, bench_cmp_double);
	s->min = c[0];
	s->max = c[n - 1];
	s->med = n % 2 == 1 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
}

void
bench_report(const char *name, const char *unit, const struct bench_sum *s,
    const char *limit, const char *cmp, bool pass)
{
	/* Small figures (a ping's microseconds) need more digits. */
	int prec = s->med < 100 ? 2 : 1;

	printf("%-12s median %.*f %s  min %.*f  max %.*f | %s | %s %s\n",
	    name, prec, s->med, unit, prec, s->min, prec, s->max, limit, cmp,
	    pass ? "PASS" : "MISS");
	fflush(stdout);
}

#define BENCH_BATCH 500

/* Create n sessions; keep the ids of the first keep of them. */
void
bench_sessions(struct bench_conn *c, int n, char (*ids)[32], int keep)
{
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"createSession\",\"params\":{}}\n";
	size_t cap = BENCH_BATCH * 96, len;
	char *buf = bench_alloc(cap), *line, *sid;
	int64_t first;
	int done = 0, k, i;

	while (done < n) {
		k = n - done < BENCH_BATCH ? n - done : BENCH_BATCH;
		first = c->next_id;
		for (i = 0, len = 0; i < k; i++)
			len += (size_t)snprintf(buf + len, cap - len, req,
			    c->next_id++);
		bench_write(c->fd, buf, len);
		for (i = 0; i < k; i++) {
			line = bench_line(c, NULL);
			if (bench_response_id(line) != first + i ||
			    bench_is_error(line) ||
			    (sid = strstr(line, "\"sessionId\":\"")) == NULL)
				bench_fail("createSession %d: %.300s",
				    done + i, line);
			if (done + i < keep)
				snprintf(ids[done + i], sizeof ids[0], "%.*s",
				    (int)strcspn(sid + 13, "\""), sid + 13);
		}
		done += k;
	}
	free(buf);
}

double
bench_client_tool_us(struct bench_conn *c, const char *sid, int k)
{
	int64_t id = c->next_id++, done_id = -1, t0, t1 = 0;
	bool got_result = false, got_reply = false, got_done = false;
	char req[512], tid[48], *line;
	size_t len;
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64
	    ",\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
	    "\"toolUse\":{\"id\":\"t%d\",\"name\":\"noop\",\"input\":{}}}}\n",
	    id, sid, k);
	snprintf(tid, sizeof tid, "\"toolUseId\":\"t%d\"", k);
	t0 = bench_now_ns();
	bench_write(c->fd, req, (size_t)n);
	while (!got_result || !got_reply || !got_done) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_start")) {
			done_id = c->next_id++;
			n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\","
			    "\"id\":%" PRId64 ",\"method\":\"completeTool\","
			    "\"params\":{\"sessionId\":\"%s\",\"toolUseId\":"
			    "\"t%d\",\"content\":\"done\"}}\n", done_id, sid, k);
			bench_write(c->fd, req, (size_t)n);
		} else if (bench_is_method(line, "tool_result")) {
			if (strstr(line, tid) == NULL)
				continue;
			t1 = bench_now_ns();
			if (strstr(line, "\"is_error\":false") == NULL)
				bench_fail("noop: %.300s", line);
			got_result = true;
		} else if (bench_method(line, NULL) == NULL) {
			if (bench_is_error(line))
				bench_fail("noop: %.300s", line);
			if (bench_response_id(line) == id)
				got_reply = true;
			else if (bench_response_id(line) == done_id)
				got_done = true;
		}
	}
	return (double)(t1 - t0) / 1e3;
}
