/* The floors of the latency figures (bench_floor.h). */
#include "bench_floor.h"

#include <sys/epoll.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "supervisor/spawn.h"

extern char **environ;

static const char floor_reply[] = "{\"status\":\"executing\"}\n";

/* A call in flight in the floor daemon. */
struct floor_slot {
	pid_t pid;        /* 0: free */
	int out;          /* its stdout, until EOF */
	size_t got;
	char buf[256];
	bool exited;
};

/* The socket and the signalfd in epoll; slots are 0..FLOOR_INFLIGHT-1. */
#define FLOOR_SOCK FLOOR_INFLIGHT
#define FLOOR_SIGNALS (FLOOR_INFLIGHT + 1)

/* Start the next call if a slot is free; false if none is. */
static bool
floor_start(struct floor_slot *slots, int ep, int sock, const char *input)
{
	char *argv[] = { "/bin/cat", NULL };
	struct epoll_event ev = { .events = EPOLLIN };
	int in, i;

	for (i = 0; i < FLOOR_INFLIGHT && slots[i].pid != 0; i++)
		;
	if (i == FLOOR_INFLIGHT)
		return false;
	slots[i].pid = bench_spawn_piped(argv, &in, &slots[i].out);
	slots[i].got = 0;
	slots[i].exited = false;
	bench_write(in, input, strlen(input));
	close(in);
	fcntl(slots[i].out, F_SETFL, O_NONBLOCK);
	ev.data.u32 = (uint32_t)i;
	epoll_ctl(ep, EPOLL_CTL_ADD, slots[i].out, &ev);
	bench_write(sock, floor_reply, sizeof floor_reply - 1);
	return true;
}

/* A call whose output ended and whose process was reaped: its result. */
static void
floor_finish(struct floor_slot *sl, int sock)
{
	char res[512];
	int len;

	if (sl->out != -1 || !sl->exited)
		return;
	len = snprintf(res, sizeof res, "{\"result\":\"%.*s\"}\n",
	    (int)sl->got, sl->buf);
	bench_write(sock, res, (size_t)len);
	sl->pid = 0;
}

/*
 * The child's loop: requests may come pipelined; FLOOR_INFLIGHT run at
 * once, the rest wait, as under --max-procs.
 */
static void __attribute__((noreturn))
floor_serve(int sock, const char *input)
{
	struct floor_slot slots[FLOOR_INFLIGHT];
	struct epoll_event ev = { .events = EPOLLIN }, evs[16];
	struct signalfd_siginfo si;
	char req[4096];
	long waiting = 0;
	int ep, sfd, n, i, k, status;
	sigset_t chld;
	uint32_t who;
	ssize_t r;
	pid_t pid;

	memset(slots, 0, sizeof slots);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    (sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		_exit(1);
	ev.data.u32 = FLOOR_SOCK;
	epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev);
	ev.data.u32 = FLOOR_SIGNALS;
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	for (;;) {
		n = epoll_wait(ep, evs, 16, -1);
		for (i = 0; i < n; i++) {
			who = evs[i].data.u32;
			if (who == FLOOR_SOCK) {
				if ((r = read(sock, req, sizeof req)) <= 0)
					_exit(0);
				for (k = 0; k < r; k++)
					waiting += req[k] == '\n';
			} else if (who == FLOOR_SIGNALS) {
				while (read(sfd, &si, sizeof si) > 0)
					;
				while ((pid = waitpid(-1, &status,
				    WNOHANG)) > 0)
					for (k = 0; k < FLOOR_INFLIGHT; k++)
						if (slots[k].pid == pid) {
							slots[k].exited = true;
							floor_finish(&slots[k],
							    sock);
						}
			} else {
				struct floor_slot *sl = &slots[who];

				while ((r = read(sl->out, sl->buf + sl->got,
				    sizeof sl->buf - sl->got)) > 0)
					sl->got += (size_t)r;
				if (r == 0) {
					epoll_ctl(ep, EPOLL_CTL_DEL, sl->out,
					    NULL);
					close(sl->out);
					sl->out = -1;
					floor_finish(sl, sock);
				}
			}
		}
		while (waiting > 0 && floor_start(slots, ep, sock, input))
			waiting--;
	}
}

void
floor_daemon_start(struct floor_daemon *f, const char *input)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		bench_fail("socketpair: %s", strerror(errno));
	if ((f->pid = fork()) == -1)
		bench_fail("fork: %s", strerror(errno));
	if (f->pid == 0) {
		close(sv[0]);
		floor_serve(sv[1], input);
	}
	close(sv[1]);
	f->fd = sv[0];
}

/* Read until n lines have come. */
static void
floor_lines(struct floor_daemon *f, long n)
{
	char buf[65536];
	ssize_t r, i;

	while (n > 0) {
		if ((r = read(f->fd, buf, sizeof buf)) <= 0)
			bench_fail("the floor daemon went away");
		for (i = 0; i < r; i++)
			n -= buf[i] == '\n';
	}
}

double
floor_daemon_one(struct floor_daemon *f)
{
	int64_t t0;

	t0 = bench_now_ns();
	bench_write(f->fd, "{\"call\":1}\n", 11);
	floor_lines(f, 2);
	return (double)(bench_now_ns() - t0) / 1e3;
}

double
floor_daemon_run(struct floor_daemon *f, int calls)
{
	static const char req[] = "{\"call\":1}\n";
	long lines = 2L * calls;
	size_t len = (size_t)calls * (sizeof req - 1), off = 0;
	char *all = bench_alloc(len), buf[65536];
	struct pollfd pfd = { .fd = f->fd };
	int64_t t0;
	ssize_t r, i;
	int flags;

	for (i = 0; i < calls; i++)
		memcpy(all + (size_t)i * (sizeof req - 1), req, sizeof req - 1);
	/* Replies come while requests go: both ways at once, in poll. */
	flags = fcntl(f->fd, F_GETFL);
	fcntl(f->fd, F_SETFL, flags | O_NONBLOCK);
	t0 = bench_now_ns();
	while (lines > 0) {
		pfd.events = POLLIN | (off < len ? POLLOUT : 0);
		if (poll(&pfd, 1, -1) == -1 && errno != EINTR)
			bench_fail("poll: %s", strerror(errno));
		if (off < len && (r = write(f->fd, all + off, len - off)) > 0)
			off += (size_t)r;
		while ((r = read(f->fd, buf, sizeof buf)) > 0)
			for (i = 0; i < r; i++)
				lines -= buf[i] == '\n';
		if (r == 0)
			bench_fail("the floor daemon went away");
	}
	t0 = bench_now_ns() - t0;
	fcntl(f->fd, F_SETFL, flags);
	free(all);
	return calls / ((double)t0 / 1e9);
}

void
floor_daemon_stop(struct floor_daemon *f)
{
	close(f->fd);
	waitpid(f->pid, NULL, 0);
}

static char floor_tmpdir[] = "/tmp/stexec-floor-XXXXXX";
static char floor_cwd[4096];
static int floor_null = -1;

void
floor_spawn_init(void)
{
	sandbox_init();
	if (mkdtemp(floor_tmpdir) == NULL)
		bench_fail("mkdtemp: %s", strerror(errno));
	/* The daemon's session works there: the bench's own directory. */
	if (getcwd(floor_cwd, sizeof floor_cwd) == NULL)
		bench_fail("getcwd: %s", strerror(errno));
	/* Above 3, where the child's dup2s go; stderr and fd 3. */
	if ((floor_null = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1 ||
	    (floor_null = fcntl(floor_null, F_DUPFD_CLOEXEC, 4)) == -1)
		bench_fail("/dev/null: %s", strerror(errno));
}

bool
floor_spawn_can(enum sandbox_profile profile)
{
	return sandbox_can(profile);
}

/* A pipe whose ends are both above 3. */
static void
floor_pipe(int p[2])
{
	int i;

	if (pipe2(p, O_CLOEXEC) != 0)
		bench_fail("pipe2: %s", strerror(errno));
	for (i = 0; i < 2; i++)
		if (p[i] <= 3 && (p[i] = fcntl(p[i], F_DUPFD_CLOEXEC, 4)) == -1)
			bench_fail("fcntl: %s", strerror(errno));
}

double
floor_spawn_one(enum sandbox_profile profile, const char *input)
{
	char *argv[] = { "/bin/cat", NULL };
	struct sandbox_spec spec = { .profile = profile };
	struct sandbox_prep *prep = NULL;
	struct spawn_req req;
	const char *step;
	char buf[4096], path[64], *msg;
	int in[2], out[2], status, ruleset = -1, ns = -1;
	size_t total = 0;
	int64_t t0, t1;
	ssize_t n;
	pid_t pid;

	floor_pipe(in);
	floor_pipe(out);
	memset(&req, 0, sizeof req);
	req.path = argv[0];
	req.argv = argv;
	req.envp = environ;
	req.fds[0] = in[0];
	req.fds[1] = out[1];
	req.fds[2] = req.fds[3] = floor_null;
	req.dirfd = req.cgroup_fd = req.landlock_fd = -1;
	/* Made ahead; workspace-write's is extended, so one per tool. */
	if (profile != SANDBOX_NONE &&
	    (ruleset = sandbox_ruleset(floor_tmpdir)) == -1)
		bench_fail("sandbox_ruleset: %s", strerror(errno));

	t0 = bench_now_ns();
	if (profile != SANDBOX_NONE && (msg = sandbox_prepare(&spec,
	    floor_tmpdir, ruleset, floor_cwd, geteuid(), &req, &prep)) != NULL)
		bench_fail("sandbox_prepare: %s", msg);
	if ((pid = spawn_start(&req, &step)) == -1)
		bench_fail("%s /bin/cat: %s", step, strerror(errno));
	if (req.ns != NULL) {
		snprintf(path, sizeof path, "/proc/%ld/ns/mnt", (long)pid);
		ns = open(path, O_RDONLY | O_CLOEXEC);
	}
	close(in[0]);
	close(out[1]);
	bench_write(in[1], input, strlen(input));
	close(in[1]);
	while ((n = read(out[0], buf, sizeof buf)) > 0)
		total += (size_t)n;
	close(out[0]);
	waitpid(pid, &status, 0);
	t1 = bench_now_ns();

	sandbox_release(prep);
	if (ruleset != -1)
		close(ruleset);
	if (ns != -1)
		close(ns);
	if (total != strlen(input) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		bench_fail("cat (profile %d): %zu bytes, status %#x",
		    (int)profile, total, status);
	return (double)(t1 - t0) / 1e3;
}

void
floor_spawn_done(void)
{
	if (floor_null != -1)
		close(floor_null);
	rmdir(floor_tmpdir);
	sandbox_shutdown();
}
