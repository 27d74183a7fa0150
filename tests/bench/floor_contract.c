/*
 * The floor of a daemon that keeps the contract (bench_floor.h): addTool
 * answered with the daemon's own lines, the tool given what §4 says it
 * gets, and nothing else.
 */
#include "bench_floor.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"

extern char **environ;

/* epoll's tags: the tool's three read ends are 0..2. */
#define FC_SOCK 3
#define FC_SIGNALS 4

/* What a pipe gave, up to a bound: this tool writes little. */
struct fc_got {
	char data[4096];
	size_t len;
};

/* The one call in flight. */
struct fc_call {
	pid_t pid;          /* 0: none */
	int out[3];         /* stdout, stderr, fd 3; -1 once at their end */
	int64_t id;
	char use[64];       /* its toolUseId */
	struct fc_got got[3];
	struct rusage ru;
	bool exited;
	int status;
	struct timespec start;
};

struct fc {
	int sock, ep;
	const char *cmd;
	char sid[32];
	uint64_t seq;
	char *envp[256];    /* environ, then the contract's three */
	size_t nenv;
	char use_var[96];   /* STEXEC_TOOL_USE_ID=, the call's */
	char line[65536];   /* requests not yet taken */
	size_t len;
	struct fc_call c;
};

static void
fc_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) != 0)
		bench_fail("pipe2: %s", strerror(errno));
}

/*
 * The next request: its id, toolUseId and input, then the tool started as
 * the daemon starts one, and the lines the daemon writes then.
 */
static void
fc_start(struct fc *f, const char *req, size_t len)
{
	struct fc_call *c = &f->c;
	posix_spawn_file_actions_t fa;
	struct epoll_event ev = { .events = EPOLLIN };
	json_t *o, *use;
	char *argv[] = { (char *)f->cmd, NULL }, *input, out[1024];
	int p[4][2], i, dirfd, n;
	json_error_t err;

	if ((o = json_loadb(req, len, 0, &err)) == NULL)
		bench_fail("contract floor: %s", err.text);
	use = json_object_get(json_object_get(o, "params"), "toolUse");
	if (strcmp(json_string_value(json_object_get(o, "method")),
	    "addTool") != 0 || use == NULL)
		bench_fail("contract floor: not an addTool: %.200s", req);
	c->id = json_integer_value(json_object_get(o, "id"));
	snprintf(c->use, sizeof c->use, "%s",
	    json_string_value(json_object_get(use, "id")));
	input = json_dumps(json_object_get(use, "input"), JSON_COMPACT);
	json_decref(o);

	/* The session's cwd, opened as the daemon opens it, and the env. */
	if ((dirfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		bench_fail("open .: %s", strerror(errno));
	snprintf(f->use_var, sizeof f->use_var, "STEXEC_TOOL_USE_ID=%s",
	    c->use);
	for (i = 0; i < 4; i++)
		fc_pipe(p[i]);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0][0], 0);
	for (i = 1; i < 4; i++)
		posix_spawn_file_actions_adddup2(&fa, p[i][1], i);
	posix_spawn_file_actions_addfchdir_np(&fa, dirfd);
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	if ((errno = posix_spawn(&c->pid, argv[0], &fa, NULL, argv,
	    f->envp)) != 0)
		bench_fail("posix_spawn %s: %s", argv[0], strerror(errno));
	posix_spawn_file_actions_destroy(&fa);
	close(dirfd);
	close(p[0][0]);
	bench_write(p[0][1], input, strlen(input));
	close(p[0][1]);
	free(input);
	for (i = 0; i < 3; i++) {
		close(p[i + 1][1]);
		c->out[i] = p[i + 1][0];
		c->got[i].len = 0;
		fcntl(c->out[i], F_SETFL, O_NONBLOCK);
		ev.data.u32 = (uint32_t)i;
		epoll_ctl(f->ep, EPOLL_CTL_ADD, c->out[i], &ev);
	}
	c->exited = false;
	n = snprintf(out, sizeof out,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"tool_status\",\"params\":"
	    "{\"turn\":1,\"toolUseId\":\"%s\",\"status\":\"executing\","
	    "\"sessionId\":\"%s\",\"seq\":%" PRIu64 "}}\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"state\",\"params\":"
	    "{\"interruptible\":false,\"inProgress\":[\"%s\"],"
	    "\"sessionId\":\"%s\",\"seq\":%" PRIu64 "}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":%" PRId64 ",\"result\":"
	    "{\"toolUseId\":\"%s\",\"turn\":1,\"status\":\"executing\","
	    "\"concurrencySafe\":false}}\n", c->use, f->sid, f->seq + 1,
	    c->use, f->sid, f->seq + 2, c->id, c->use);
	f->seq += 2;
	bench_write(f->sock, out, (size_t)n);
}

/* Its pipes at their ends and its process reaped: the daemon's lines. */
static void
fc_finish(struct fc *f)
{
	struct fc_call *c = &f->c;
	struct timespec now;
	json_t *content;
	char *text, *out;
	long ms, cpu;
	int i, n;

	for (i = 0; i < 3; i++)
		if (c->out[i] != -1)
			return;
	if (!c->exited)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (now.tv_sec - c->start.tv_sec) * 1000 +
	    (now.tv_nsec - c->start.tv_nsec) / 1000000;
	cpu = (c->ru.ru_utime.tv_sec + c->ru.ru_stime.tv_sec) * 1000 +
	    (c->ru.ru_utime.tv_usec + c->ru.ru_stime.tv_usec) / 1000;
	/* stdout, then stderr, a newline between where stdout has none. */
	if (c->got[1].len > 0 && c->got[0].len > 0 &&
	    c->got[0].data[c->got[0].len - 1] != '\n' &&
	    c->got[0].len < sizeof c->got[0].data)
		c->got[0].data[c->got[0].len++] = '\n';
	n = (int)(sizeof c->got[0].data - c->got[0].len);
	if (c->got[1].len < (size_t)n)
		n = (int)c->got[1].len;
	memcpy(c->got[0].data + c->got[0].len, c->got[1].data, (size_t)n);
	if ((content = json_stringn(c->got[0].data, c->got[0].len +
	    (size_t)n)) == NULL)
		bench_fail("contract floor: the tool's output is not UTF-8");
	text = json_dumps(content, JSON_ENCODE_ANY);
	json_decref(content);
	n = asprintf(&out,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"tool_status\",\"params\":"
	    "{\"turn\":1,\"toolUseId\":\"%s\",\"status\":\"completed\","
	    "\"sessionId\":\"%s\",\"seq\":%" PRIu64 "}}\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"tool_result\",\"params\":"
	    "{\"turn\":1,\"toolUseId\":\"%s\",\"result\":{\"type\":"
	    "\"tool_result\",\"tool_use_id\":\"%s\",\"content\":%s,"
	    "\"is_error\":%s},\"meta\":{\"reason\":\"%s\",\"exitCode\":%d,"
	    "\"signal\":null,\"durationMs\":%ld,\"truncated\":false,"
	    "\"fullOutputPath\":null,\"warnings\":[],\"cpuMs\":%ld},"
	    "\"sessionId\":\"%s\",\"seq\":%" PRIu64 "}}\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"state\",\"params\":"
	    "{\"interruptible\":false,\"inProgress\":[],\"sessionId\":\"%s\","
	    "\"seq\":%" PRIu64 "}}\n", c->use, f->sid, f->seq + 1, c->use,
	    c->use, text, c->status == 0 ? "false" : "true",
	    c->status == 0 ? "ok" : "exit", WEXITSTATUS(c->status), ms, cpu,
	    f->sid, f->seq + 2, f->sid, f->seq + 3);
	f->seq += 3;
	if (n < 0)
		bench_fail("asprintf: %s", strerror(errno));
	bench_write(f->sock, out, (size_t)n);
	free(out);
	free(text);
	c->pid = 0;
}

/* Start the next request if one is whole and no call is in flight. */
static void
fc_next(struct fc *f)
{
	char *nl;
	size_t used;

	if (f->c.pid != 0 || (nl = memchr(f->line, '\n', f->len)) == NULL)
		return;
	used = (size_t)(nl - f->line) + 1;
	fc_start(f, f->line, used - 1);
	memmove(f->line, f->line + used, f->len - used);
	f->len -= used;
}

static void
fc_read(struct fc *f, int i)
{
	struct fc_call *c = &f->c;
	struct fc_got *b = &c->got[i];
	char spill[4096];
	ssize_t r;

	/* Beyond the bound is read and dropped. */
	while ((r = read(c->out[i], b->len < sizeof b->data ?
	    b->data + b->len : spill, b->len < sizeof b->data ?
	    sizeof b->data - b->len : sizeof spill)) > 0)
		if (b->len < sizeof b->data)
			b->len += (size_t)r;
	if (r == 0) {
		epoll_ctl(f->ep, EPOLL_CTL_DEL, c->out[i], NULL);
		close(c->out[i]);
		c->out[i] = -1;
		fc_finish(f);
	}
}

static void __attribute__((noreturn))
fc_serve(struct fc *f)
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[8];
	struct signalfd_siginfo si;
	sigset_t chld;
	ssize_t r;
	pid_t pid;
	int sfd, n, i;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	if ((f->ep = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    (sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		_exit(1);
	ev.data.u32 = FC_SOCK;
	epoll_ctl(f->ep, EPOLL_CTL_ADD, f->sock, &ev);
	ev.data.u32 = FC_SIGNALS;
	epoll_ctl(f->ep, EPOLL_CTL_ADD, sfd, &ev);
	for (;;) {
		n = epoll_wait(f->ep, evs, 8, -1);
		for (i = 0; i < n; i++) {
			if (evs[i].data.u32 == FC_SOCK) {
				if (f->len == sizeof f->line)
					bench_fail("contract floor: a request "
					    "over %zu bytes", sizeof f->line);
				r = read(f->sock, f->line + f->len,
				    sizeof f->line - f->len);
				if (r <= 0)
					_exit(0);
				f->len += (size_t)r;
			} else if (evs[i].data.u32 == FC_SIGNALS) {
				while (read(sfd, &si, sizeof si) > 0)
					;
				while ((pid = wait4(-1, &f->c.status, WNOHANG,
				    &f->c.ru)) > 0)
					if (pid == f->c.pid) {
						f->c.exited = true;
						fc_finish(f);
					}
			} else if (f->c.out[evs[i].data.u32] != -1)
				fc_read(f, (int)evs[i].data.u32);
		}
		fc_next(f);
	}
}

pid_t
floor_contract_start(const char *cmd, const char *sid, int *fd)
{
	static struct fc f;
	char **e;
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		bench_fail("socketpair: %s", strerror(errno));
	if ((pid = fork()) == -1)
		bench_fail("fork: %s", strerror(errno));
	if (pid != 0) {
		close(sv[1]);
		*fd = sv[0];
		return pid;
	}
	/* Nothing of the caller's: the minimal floor's socket must see its EOF. */
	if ((sv[1] > 3 && close_range(3, (unsigned)sv[1] - 1, 0) != 0) ||
	    close_range((unsigned)sv[1] + 1, ~0U, 0) != 0)
		_exit(1);
	f.sock = sv[1];
	f.cmd = cmd;
	snprintf(f.sid, sizeof f.sid, "%s", sid);
	/* environ, then the session's id, the tool's (per call) and fd 3. */
	for (e = environ; *e != NULL &&
	    f.nenv < sizeof f.envp / sizeof f.envp[0] - 4; e++)
		f.envp[f.nenv++] = *e;
	if (asprintf(&f.envp[f.nenv], "STEXEC_SESSION_ID=%s", sid) < 0)
		_exit(1);
	f.envp[f.nenv + 1] = f.use_var;
	f.envp[f.nenv + 2] = "STEXEC_PROGRESS_FD=3";
	f.envp[f.nenv + 3] = NULL;
	fc_serve(&f);
}
