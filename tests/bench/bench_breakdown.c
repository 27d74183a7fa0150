/*
 * breakdown: where a tool call's time goes, per tool, so that a change can
 * be judged by it (README, Performance). One session, tools added one at a
 * time; the tool is this program run with --stamp, which writes the
 * CLOCK_MONOTONIC time at which its main() began and the time just before
 * it exits, so the bench can split each call into
 *
 *   addTool -> the tool runs (the daemon's spawn path, the exec, ld.so),
 *   the tool's own run, and
 *   the tool's exit -> its tool_result (reaping, draining, the result).
 *
 * Also the daemon's user and system CPU time per tool (from /proc, all its
 * threads), and with strace installed its system calls per tool by kind
 * (a shorter run under `strace -c -f`, which follows the children too: the
 * spawn path before the exec, then the tool, this program, whose own are
 * its loader's: one execve, about 12 mmap, 4 mprotect, 2 openat...).
 *
 * Modes: the defaults; --no-cgroup; --state-dir= (no journal); and the
 * defaults with the tool in the read-only and the workspace-write sandbox
 * (the session's cwd, the daemon's, is its workspace). First the floor of each
 * interval: the same program spawned bare (posix_spawn, pipes, waitpid),
 * timed from the spawn to waitpid's return.
 *
 * STEXEC_BENCH_N: tools per mode (default 1000).
 */
#include "bench.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BD_STRACE_N 200

struct bd_mode {
	const char *name;
	const char *arg;      /* one daemon argument, or NULL */
	const char *sandbox;  /* the tool's sandbox field, or NULL */
};

static const struct bd_mode bd_modes[] = {
	{ "defaults", NULL, NULL },
	{ "--no-cgroup", "--no-cgroup", NULL },
	{ "--state-dir=", "--state-dir=", NULL },
	{ "read-only tool", NULL, "read-only" },
	{ "workspace-write", NULL, "workspace-write" },
};

/* --stamp: the tool. Its start, then its end, on stdout. */
static int
bd_stamp(void)
{
	int64_t start = bench_now_ns();
	char out[64];
	int n;

	n = snprintf(out, sizeof out, "%lld %lld", (long long)start,
	    (long long)bench_now_ns());
	return write(1, out, (size_t)n) == n ? 0 : 1;
}

/* One tool: the three intervals in microseconds. */
static void
bd_one(struct bench_conn *c, const char *sid, int k, double out[3])
{
	int64_t id = c->next_id++, t0, t3 = 0, t1, t2;
	bool got_result = false, got_reply = false;
	char req[512], tid[48], *line, *p;
	size_t len;
	int n;

	n = snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":%lld,"
	    "\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
	    "\"toolUse\":{\"id\":\"b%d\",\"name\":\"stamp\",\"input\":{}}}}\n",
	    (long long)id, sid, k);
	snprintf(tid, sizeof tid, "\"toolUseId\":\"b%d\"", k);
	t0 = bench_now_ns();
	bench_write(c->fd, req, (size_t)n);
	t1 = t2 = 0;
	while (!got_result || !got_reply) {
		line = bench_line(c, &len);
		if (bench_is_method(line, "tool_result")) {
			t3 = bench_now_ns();
			if (strstr(line, tid) == NULL ||
			    (p = strstr(line, "\"content\":\"")) == NULL ||
			    sscanf(p + 11, "%lld %lld", (long long *)&t1,
			    (long long *)&t2) != 2)
				bench_fail("the stamp tool failed: %.500s",
				    line);
			got_result = true;
		} else if (bench_method(line, NULL) == NULL &&
		    bench_response_id(line) == id) {
			if (bench_is_error(line))
				bench_fail("addTool: %.300s", line);
			got_reply = true;
		}
	}
	out[0] = (double)(t1 - t0) / 1e3;
	out[1] = (double)(t2 - t1) / 1e3;
	out[2] = (double)(t3 - t2) / 1e3;
}

/* The same three intervals without the daemon. */
static void
bd_bare(const char *self, double out[3])
{
	char *argv[] = { (char *)self, "--stamp", NULL }, buf[128];
	int64_t t0, t1 = 0, t2 = 0, t3;
	size_t total = 0;
	ssize_t n;
	int in, fd, status;
	pid_t pid;

	t0 = bench_now_ns();
	pid = bench_spawn_piped(argv, &in, &fd);
	close(in);
	while (total < sizeof buf - 1 &&
	    (n = read(fd, buf + total, sizeof buf - 1 - total)) > 0)
		total += (size_t)n;
	close(fd);
	waitpid(pid, &status, 0);
	t3 = bench_now_ns();
	buf[total] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    sscanf(buf, "%lld %lld", (long long *)&t1, (long long *)&t2) != 2)
		bench_fail("bare stamp: status %#x, \"%s\"", status, buf);
	out[0] = (double)(t1 - t0) / 1e3;
	out[1] = (double)(t2 - t1) / 1e3;
	out[2] = (double)(t3 - t2) / 1e3;
}

/* The session with the stamp tool; its id in sid. */
static void
bd_session(struct bench_conn *c, const char *self, const char *sandbox,
    char *sid, size_t sidlen)
{
	char params[4096 + 256];
	json_t *res;

	snprintf(params, sizeof params, "{\"tools\":[{\"name\":\"stamp\","
	    "\"command\":[\"%s\",\"--stamp\"]%s%s%s}]}", self,
	    sandbox != NULL ? ",\"sandbox\":\"" : "",
	    sandbox != NULL ? sandbox : "", sandbox != NULL ? "\"" : "");
	res = bench_call(c, "createSession", params);
	if (json_string_value(json_object_get(res, "sessionId")) == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(sid, sidlen, "%s", json_string_value(json_object_get(res,
	    "sessionId")));
	json_decref(res);
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));
}

/* The system calls of the daemon per tool, by kind, from strace -c. */
static void
bd_strace(struct bench_conn *c, const char *sid, pid_t daemon, int base)
{
	char pidarg[32], out[64], line[256];
	double ignore[3];
	int i, shown = 0;
	pid_t st;
	FILE *f;

	if (access("/usr/bin/strace", X_OK) != 0) {
		printf("  system calls: no /usr/bin/strace\n");
		return;
	}
	snprintf(pidarg, sizeof pidarg, "%ld", (long)daemon);
	snprintf(out, sizeof out, "/tmp/stexec-bench-strace-%ld",
	    (long)getpid());
	if ((st = fork()) == 0) {
		execl("/usr/bin/strace", "strace", "-c", "-f", "-q", "-o", out,
		    "-p", pidarg, (char *)NULL);
		_exit(127);
	}
	usleep(300000);
	for (i = 0; i < BD_STRACE_N; i++)
		bd_one(c, sid, base + i, ignore);
	kill(st, SIGINT);
	waitpid(st, NULL, 0);
	if ((f = fopen(out, "re")) == NULL)
		return;
	printf("  system calls per tool (strace -c, %d tools):", BD_STRACE_N);
	while (fgets(line, sizeof line, f) != NULL && shown < 14) {
		double pct, secs;
		long usecs, calls;
		char name[64];

		if (sscanf(line, "%lf %lf %ld %ld %*d %63s", &pct, &secs, &usecs,
		    &calls, name) != 5 && sscanf(line, "%lf %lf %ld %ld %63s",
		    &pct, &secs, &usecs, &calls, name) != 5)
			continue;
		printf("%s %s %.1f", shown++ % 5 == 0 ? "\n   " : ",", name,
		    (double)calls / BD_STRACE_N);
	}
	printf("\n");
	fclose(f);
	unlink(out);
}

int
main(int argc, char **argv)
{
	int n = (int)bench_n(1000, 10, 100000), i, m, k;
	double *v[3], t[3];
	struct bench_sum s[3];
	struct bench_daemon d;
	struct bench_conn *c;
	char self[4000], sid[64];
	double cpu0;
	ssize_t len;

	if (argc > 1 && strcmp(argv[1], "--stamp") == 0)
		return bd_stamp();
	if ((len = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
		bench_fail("cannot find this program");
	self[len] = '\0';
	for (k = 0; k < 3; k++)
		v[k] = bench_alloc((size_t)n * sizeof *v[k]);
	printf("per tool, median of %d (us): addTool -> tool runs | its run | "
	    "exit -> tool_result | daemon CPU\n", n);
	for (i = 0; i < 50; i++)
		bd_bare(self, t);
	for (i = 0; i < n; i++) {
		bd_bare(self, t);
		for (k = 0; k < 3; k++)
			v[k][i] = t[k];
	}
	for (k = 0; k < 3; k++)
		bench_summarize(v[k], n, &s[k]);
	printf("%-16s %8.1f | %8.1f | %8.1f |\n", "bare spawn", s[0].med,
	    s[1].med, s[2].med);
	for (m = 0; m < (int)(sizeof bd_modes / sizeof bd_modes[0]); m++) {
		bench_daemon_start(&d, bd_modes[m].arg, NULL);
		c = bench_conn_open(d.sock);
		bd_session(c, self, bd_modes[m].sandbox, sid, sizeof sid);
		for (i = 0; i < 50; i++)
			bd_one(c, sid, 100000 + i, t);
		cpu0 = bench_cpu_us(d.pid);
		for (i = 0; i < n; i++) {
			bd_one(c, sid, i, t);
			for (k = 0; k < 3; k++)
				v[k][i] = t[k];
		}
		cpu0 = bench_cpu_us(d.pid) - cpu0;
		for (k = 0; k < 3; k++)
			bench_summarize(v[k], n, &s[k]);
		printf("%-16s %8.1f | %8.1f | %8.1f | %6.1f\n", bd_modes[m].name,
		    s[0].med, s[1].med, s[2].med, cpu0 / n);
		bd_strace(c, sid, d.pid, 200000);
		bench_conn_close(c);
		bench_daemon_stop(&d);
	}
	return 0;
}
