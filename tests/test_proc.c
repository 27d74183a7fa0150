/*
 * The process supervisor against real child processes: exit codes, output
 * capture and truncation, progress lines, stdin, timeouts, kills, leftovers
 * and setsid escapees, max_procs, fds and environment. Every test checks that
 * no child of the test process is left.
 */
#include <criterion/criterion.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "e2e.h"
#include "supervisor/pipes.h"
#include "supervisor/proc.h"
#include "util.h"

#define MAX_LINES 64

struct result {
	char *argv[8];
	struct proc *p;
	bool done;
	enum proc_end end;
	int status;
	int signal;
	int64_t duration_ms;
	char *error;
	char *output_error;
	struct buf head;
	struct buf tail;
	uint64_t total;
	char *path;
	char *lines[MAX_LINES];
	size_t line_lens[MAX_LINES];
	int nlines;
	struct buf chunks[3];
	int nchunks;
	struct timespec spawned;
	struct timespec ended;
	int nstarted;             /* started callbacks */
	struct timespec started;  /* the start they named */
	/* Things to do from inside callbacks. */
	bool kill_on_line;
	bool pause_on_chunk;
	bool paused;
};

static struct event_base *base;
static struct event *tick;
static char outdir[64];
static bool in_call;
static bool fd_before[1024];
static const char *test_env[] = { "PATH=/usr/bin:/bin", "LC_ALL=C", NULL };

static int64_t
ms_between(const struct timespec *a, const struct timespec *b)
{
	return (int64_t)(b->tv_sec - a->tv_sec) * 1000 +
	    (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* Whether a is not after b. */
static bool
ts_le(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec &&
	    a->tv_nsec <= b->tv_nsec);
}

static int64_t
ms_since(const struct timespec *a)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return ms_between(a, &now);
}

/* Children of this process, from /proc (whatever state they are in). */
static int
count_children(void)
{
	char path[300], line[1024], *p;
	struct dirent *de;
	long ppid;
	int n = 0, fd;
	ssize_t len;
	DIR *d;

	d = opendir("/proc");
	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		len = read(fd, line, sizeof line - 1);
		close(fd);
		if (len <= 0)
			continue;
		line[len] = '\0';
		if ((p = strrchr(line, ')')) == NULL)
			continue;
		if (sscanf(p + 1, " %*c %ld", &ppid) == 1 && ppid == getpid())
			n++;
	}
	closedir(d);
	return n;
}

static bool
pid_gone(pid_t pid)
{
	return kill(pid, 0) == -1 && errno == ESRCH;
}

static void
tick_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
}

static void
start(int kill_grace_ms, int leftover_grace_ms, int max_procs)
{
	struct proc_config cfg = { 0 };
	struct timeval tv = { 0, 20000 };
	char err[256];
	DIR *d;
	struct dirent *de;
	int fd;

	memset(fd_before, 0, sizeof fd_before);
	d = opendir("/proc/self/fd");
	while ((de = readdir(d)) != NULL) {
		fd = atoi(de->d_name);
		if (de->d_name[0] != '.' && fd < 1024)
			fd_before[fd] = true;
	}
	closedir(d);

	snprintf(outdir, sizeof outdir, "/tmp/test_proc.XXXXXX");
	cr_assert_not_null(mkdtemp(outdir));
	base = event_base_new();
	cr_assert_not_null(base);
	tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick, &tv);
	cfg.kill_grace_ms = kill_grace_ms;
	cfg.leftover_grace_ms = leftover_grace_ms;
	cfg.max_procs = max_procs;
	cfg.output_dir = outdir;
	cr_assert_eq(proc_init(base, &cfg, err, sizeof err), 0, "%s", err);
}

static void
finish(void)
{
	struct dirent *de;
	char path[400];
	DIR *d;

	if (base == NULL)
		return;
	proc_shutdown();
	cr_expect_eq(count_children(), 0, "children left after shutdown");
	event_free(tick);
	event_base_free(base);
	base = NULL;
	if ((d = opendir(outdir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", outdir,
			    de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(outdir);
}

static bool
run_until(bool *flag, int timeout_ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!*flag) {
		if (ms_since(&t0) > e2e_ms(timeout_ms))
			return false;
		event_base_loop(base, EVLOOP_ONCE);
	}
	return true;
}

static void
t_line(void *arg, const char *line, size_t len)
{
	struct result *r = arg;

	cr_assert_eq(line[len], '\0');
	if (r->nlines < MAX_LINES) {
		r->lines[r->nlines] = xstrndup(line, len);
		r->line_lens[r->nlines] = len;
	}
	r->nlines++;
	if (r->kill_on_line)
		proc_kill(r->p);
}

static void
t_chunk(void *arg, int fd, const char *data, size_t len)
{
	struct result *r = arg;

	cr_assert(fd == 1 || fd == 2);
	buf_add(&r->chunks[fd], data, len);
	r->nchunks++;
	if (r->pause_on_chunk && !r->paused) {
		proc_pause(r->p, true);
		r->paused = true;
	}
}

static void
t_exit(void *arg, const struct proc_exit *e)
{
	struct result *r = arg;

	cr_assert(!in_call, "exit callback from inside a proc_ call");
	cr_assert(!r->done, "exit callback twice");
	clock_gettime(CLOCK_MONOTONIC, &r->ended);
	r->done = true;
	r->end = e->end;
	r->status = e->status;
	r->signal = e->signal;
	r->duration_ms = e->duration_ms;
	r->error = e->error != NULL ? xstrdup(e->error) : NULL;
	r->output_error = e->output_error != NULL ?
	    xstrdup(e->output_error) : NULL;
	cr_assert_not_null(e->output.head);
	cr_assert_eq(e->output.head[e->output.head_len], '\0');
	buf_add(&r->head, e->output.head, e->output.head_len);
	if (e->output.tail_len > 0)
		buf_add(&r->tail, e->output.tail, e->output.tail_len);
	r->total = e->output.total;
	r->path = e->output.path != NULL ? xstrdup(e->output.path) : NULL;
	/* S18/S20: nothing of this tool may be alive when we hear of it. */
	cr_assert(proc_pid(r->p) == 0);
}

static void
t_started(void *arg, const struct timespec *at)
{
	struct result *r = arg;

	cr_assert(!r->done, "started after its exit callback");
	r->nstarted++;
	r->started = *at;
}

static const struct proc_ops t_ops = { t_line, t_chunk, t_exit, t_started };

/* Also after a failed assertion: no test leaves processes behind. */
TestSuite(proc, .fini = finish);

static void
result_free(struct result *r)
{
	int i;

	for (i = 0; i < r->nlines && i < MAX_LINES; i++)
		free(r->lines[i]);
	for (i = 0; i < 3; i++)
		buf_free(&r->chunks[i]);
	buf_free(&r->head);
	buf_free(&r->tail);
	free(r->error);
	free(r->output_error);
	free(r->path);
}

static struct proc_spec
sh_spec(struct result *r, const char *script)
{
	struct proc_spec spec = { 0 };

	r->argv[0] = "sh";
	r->argv[1] = "-c";
	r->argv[2] = (char *)script;
	r->argv[3] = NULL;
	spec.argv = r->argv;
	spec.envp = (char *const *)test_env;
	spec.max_output = 100000;
	spec.name = "test";
	return spec;
}

static struct proc *
spawn(struct result *r, const struct proc_spec *spec)
{
	clock_gettime(CLOCK_MONOTONIC, &r->spawned);
	in_call = true;
	r->p = proc_spawn(spec, &t_ops, r);
	in_call = false;
	cr_assert_not_null(r->p);
	return r->p;
}

/* Run one shell script to its end with the default setup. */
static void
run_sh(struct result *r, const char *script)
{
	struct proc_spec spec = sh_spec(r, script);

	spawn(r, &spec);
	cr_assert(run_until(&r->done, 10000), "no exit callback");
}

static char *
read_file(const char *path, size_t *len)
{
	struct buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd != -1, "cannot open %s", path);
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		buf_add(&b, chunk, (size_t)n);
	close(fd);
	*len = b.len;
	if (b.data == NULL)
		buf_add(&b, "", 0);
	return b.data;
}

Test(proc, exit_zero_with_stdout, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };

	start(0, 0, 0);
	run_sh(&r, "echo hello");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.status, 0);
	cr_assert_eq(r.signal, 0);
	cr_assert_str_eq(r.head.data, "hello\n");
	cr_assert_eq(r.total, 6);
	cr_assert_null(r.path);
	cr_assert_eq(r.tail.len, 0);
	cr_assert_eq(proc_started(), 1);
	cr_assert_eq(proc_running(), 0);
	cr_assert_eq(count_children(), 0);
	result_free(&r);
	finish();
}

Test(proc, exit_code, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };

	start(0, 0, 0);
	run_sh(&r, "exit 3");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.status, 3);
	cr_assert_eq(r.head.len, 0);
	cr_assert_eq(r.total, 0);
	result_free(&r);
	finish();
}

Test(proc, stderr_only, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };

	start(0, 0, 0);
	run_sh(&r, "echo oops >&2; exit 1");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.status, 1);
	cr_assert_str_eq(r.head.data, "oops\n");
	result_free(&r);
	finish();
}

Test(proc, join_rule, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };

	start(0, 0, 0);
	/* Interleaved on purpose: stderr first in time, still after stdout. */
	run_sh(&a, "printf def >&2; printf abc");
	cr_assert_str_eq(a.head.data, "abc\ndef");
	cr_assert_eq(a.total, 7);
	run_sh(&b, "printf 'abc\\n'; printf def >&2");
	cr_assert_str_eq(b.head.data, "abc\ndef");
	run_sh(&c, "printf abc");
	cr_assert_str_eq(c.head.data, "abc");
	run_sh(&d, "printf abc; printf '' >&2");
	cr_assert_str_eq(d.head.data, "abc");
	result_free(&a);
	result_free(&b);
	result_free(&c);
	result_free(&d);
	finish();
}

Test(proc, killed_by_own_signal, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };

	start(0, 0, 0);
	run_sh(&r, "echo before; kill -9 $$; echo after");
	cr_assert_eq(r.end, PROC_SIGNALED);
	cr_assert_eq(r.signal, SIGKILL);
	cr_assert_str_eq(r.head.data, "before\n");
	result_free(&r);
	finish();
}

Test(proc, spawn_enoent, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "");

	start(0, 0, 0);
	r.argv[0] = "/nonexistent";
	r.argv[1] = NULL;
	spawn(&r, &spec);
	cr_assert(!r.done);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(r.error,
	    "cannot run /nonexistent: No such file or directory");
	cr_assert_eq(r.head.len, 0);
	cr_assert_eq(proc_started(), 0);
	result_free(&r);
	finish();
}

Test(proc, spawn_not_executable, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "");

	start(0, 0, 0);
	r.argv[0] = "/etc/passwd";
	r.argv[1] = NULL;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(r.error, "cannot run /etc/passwd: Permission denied");
	/* Its execve failed: it never started. */
	cr_assert_eq(r.nstarted, 0);
	cr_assert_eq(proc_started(), 0);
	result_free(&r);
	finish();
}

/*
 * Beside a running tool a spawn does not wait for its child's execve
 * (spawn_launch): the child's output, a failure before its exec (reported
 * as from a waited spawn), and a kill at once all come out the same.
 */
Test(proc, launched_beside_a_running_tool,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 10");
	struct proc_spec bspec = sh_spec(&b, "echo out; echo err >&2");
	struct proc_spec cspec = sh_spec(&c, "");
	struct proc_spec dspec = sh_spec(&d, "sleep 10");

	start(0, 0, 0);
	spawn(&a, &aspec);
	cr_assert_eq(proc_launched(), 0, "alone, a spawn waits");
	spawn(&b, &bspec);
	c.argv[0] = "/etc/passwd";
	c.argv[1] = NULL;
	spawn(&c, &cspec);
	spawn(&d, &dspec);
	in_call = true;
	proc_kill(d.p);
	in_call = false;
	cr_assert_eq(proc_launched(), 3);
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(b.end, PROC_EXITED);
	cr_assert_eq(b.status, 0);
	cr_assert_str_eq(b.head.data, "out\nerr\n");
	cr_assert(run_until(&c.done, 5000));
	cr_assert_eq(c.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(c.error, "cannot run /etc/passwd: Permission denied");
	cr_assert(run_until(&d.done, 5000));
	cr_assert_eq(d.end, PROC_KILLED);
	cr_assert(!a.done);
	in_call = true;
	proc_kill(a.p);
	in_call = false;
	cr_assert(run_until(&a.done, 5000));
	cr_assert_eq(a.end, PROC_KILLED);
	/*
	 * Started means exec'd, as for a waited spawn: c never was, d may
	 * have been killed before (its TERM waits in its blocked signals).
	 */
	cr_assert_eq(a.nstarted, 1);
	cr_assert_eq(b.nstarted, 1);
	cr_assert_eq(c.nstarted, 0, "failed before its exec, counted started");
	cr_assert_leq(d.nstarted, 1);
	cr_assert_eq(proc_started(), 2 + (uint64_t)d.nstarted);
	/* Its start is its spawn's, even when learnt later. */
	cr_assert(ts_le(&b.spawned, &b.started) && ts_le(&b.started,
	    &b.ended));
	result_free(&a);
	result_free(&b);
	result_free(&c);
	result_free(&d);
	finish();
}

/*
 * A job (detached: the session's live shell, a command in the background)
 * holds no slot, and a tool beside it starts as it would alone, waited
 * for; a tool beside one that holds a slot is launched, job or not.
 */
Test(proc, a_job_leaves_the_next_spawn_waited,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 10");
	struct proc_spec bspec = sh_spec(&b, "echo out");
	struct proc_spec cspec = sh_spec(&c, "sleep 10");
	struct proc_spec dspec = sh_spec(&d, "echo out");

	start(0, 0, 0);
	spawn(&a, &aspec);
	proc_detach(a.p);
	spawn(&b, &bspec);
	cr_assert_eq(proc_launched(), 0, "beside a job, a spawn waits");
	cr_assert_eq(b.nstarted, 1, "a waited spawn starts at its return");
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(b.end, PROC_EXITED);
	cr_assert_str_eq(b.head.data, "out\n");
	spawn(&c, &cspec);
	cr_assert_eq(proc_launched(), 0);
	spawn(&d, &dspec);
	cr_assert_eq(proc_launched(), 1, "beside a tool, a spawn is launched");
	cr_assert(run_until(&d.done, 5000));
	cr_assert_str_eq(d.head.data, "out\n");
	in_call = true;
	proc_kill(a.p);
	proc_kill(c.p);
	in_call = false;
	cr_assert(run_until(&a.done, 5000));
	cr_assert(run_until(&c.done, 5000));
	cr_assert_eq(a.end, PROC_KILLED);
	cr_assert_eq(c.end, PROC_KILLED);
	result_free(&a);
	result_free(&b);
	result_free(&c);
	result_free(&d);
	finish();
}

/* Turn the loop until p's exec is known (proc_execd looks each time). */
static bool
run_until_execd(struct proc *p, int timeout_ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!proc_execd(p)) {
		if (ms_since(&t0) > e2e_ms(timeout_ms))
			return false;
		event_base_loop(base, EVLOOP_ONCE);
	}
	return true;
}

/*
 * A launched tool that says nothing and runs on is started once its exec
 * is known, without an event of its own; one whose execve fails (a file
 * the kernel cannot execute: ENOEXEC) never is, nor counted.
 */
Test(proc, launched_starts_once_its_exec_is_known,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 10");
	struct proc_spec bspec = sh_spec(&b, "exec sleep 10");
	struct proc_spec cspec = sh_spec(&c, "");
	char bad[128], want[200];
	int fd;

	start(0, 0, 0);
	snprintf(bad, sizeof bad, "%s/not-a-program", outdir);
	fd = open(bad, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	cr_assert(fd != -1);
	cr_assert_eq(write(fd, "no magic, no #!\n", 16), 16);
	close(fd);
	spawn(&a, &aspec);
	cr_assert_eq(a.nstarted, 1, "a waited spawn starts at its return");
	spawn(&b, &bspec);
	c.argv[0] = bad;
	c.argv[1] = NULL;
	spawn(&c, &cspec);
	cr_assert_eq(proc_launched(), 2);
	cr_assert(!proc_execd(c.p));
	cr_assert(run_until_execd(b.p, 5000));
	cr_assert_eq(b.nstarted, 1);
	cr_assert(ts_le(&b.spawned, &b.started));
	cr_assert(run_until(&c.done, 5000));
	cr_assert_eq(c.end, PROC_SPAWN_FAILED);
	snprintf(want, sizeof want, "cannot run %s: Exec format error", bad);
	cr_assert_str_eq(c.error, want);
	cr_assert_eq(c.nstarted, 0, "failed before its exec, counted started");
	cr_assert_eq(proc_started(), 2);
	in_call = true;
	proc_kill(a.p);
	proc_kill(b.p);
	in_call = false;
	cr_assert(run_until(&a.done, 5000));
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(a.nstarted, 1);
	cr_assert_eq(b.nstarted, 1);
	cr_assert_eq(proc_started(), 2);
	unlink(bad);
	result_free(&a);
	result_free(&b);
	result_free(&c);
	finish();
}

/* The same for a tool of another user: its groups are the run's copy. */
Test(proc, launched_as_another_user, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	static const gid_t groups[] = { 65534, 100 };
	struct proc_user nobody = { 65534, 65534, groups, 2, NULL };
	struct result a = { 0 }, b = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 10");
	struct proc_spec bspec = sh_spec(&b, "id -u; id -G");

	if (geteuid() != 0)
		cr_skip_test("only root can start a tool as another user");
	start(0, 0, 0);
	spawn(&a, &aspec);
	bspec.user = &nobody;
	spawn(&b, &bspec);
	cr_assert_eq(proc_launched(), 1);
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(b.end, PROC_EXITED, "%s", b.error ? b.error : "");
	cr_assert_str_eq(b.head.data, "65534\n65534 100\n");
	in_call = true;
	proc_kill(a.p);
	in_call = false;
	cr_assert(run_until(&a.done, 5000));
	result_free(&a);
	result_free(&b);
	finish();
}

Test(proc, spawn_bad_cwd, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, f = { 0 };
	struct proc_spec spec = sh_spec(&r, "pwd");
	struct proc_spec fspec = sh_spec(&f, "pwd");

	start(0, 0, 0);
	spec.cwd = "/nonexistent-dir";
	spawn(&r, &spec);
	fspec.cwd = "/etc/passwd";
	spawn(&f, &fspec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert(run_until(&f.done, 5000));
	cr_assert_eq(r.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(r.error,
	    "cannot chdir to /nonexistent-dir: No such file or directory");
	cr_assert_eq(f.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(f.error,
	    "cannot chdir to /etc/passwd: Not a directory");
	result_free(&r);
	result_free(&f);
	finish();
}

Test(proc, cwd_and_path_from_env, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, n = { 0 };
	struct proc_spec spec = sh_spec(&r, "pwd");
	struct proc_spec nspec = sh_spec(&n, "pwd");
	const char *env[] = { "PATH=/nonexistent", NULL };

	start(0, 0, 0);
	spec.cwd = "/usr";
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_str_eq(r.head.data, "/usr\n");

	/* "sh" is searched in the tool's PATH, not the daemon's. */
	nspec.envp = (char *const *)env;
	spawn(&n, &nspec);
	cr_assert(run_until(&n.done, 5000));
	cr_assert_eq(n.end, PROC_SPAWN_FAILED);
	cr_assert_str_eq(n.error, "cannot run sh: No such file or directory");
	result_free(&r);
	result_free(&n);
	finish();
}

Test(proc, stdin_delivered, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "cat");
	const char *input = "{\"command\":\"ls\"}\nsecond line";

	start(0, 0, 0);
	spec.input = input;
	spec.input_len = strlen(input);
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_str_eq(r.head.data, input);
	result_free(&r);
	finish();
}

Test(proc, stdin_large_delivered, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "wc -c");
	size_t len = 3 << 20;
	char *input = xmalloc(len);

	start(0, 0, 0);
	memset(input, 'x', len);
	spec.input = input;
	spec.input_len = len;
	spawn(&r, &spec);
	free(input);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(atol(r.head.data), (long)len);
	result_free(&r);
	finish();
}

Test(proc, stdin_never_read, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, s = { 0 };
	struct proc_spec spec = sh_spec(&r, "echo done");
	struct proc_spec sspec = sh_spec(&s, "sleep 0.3; echo slept");
	size_t len = 1 << 20;
	char *input = xmalloc(len);

	start(0, 0, 0);
	memset(input, 'x', len);
	spec.input = input;
	spec.input_len = len;
	sspec.input = input;
	sspec.input_len = len;
	spawn(&r, &spec);
	spawn(&s, &sspec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert(run_until(&s.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_str_eq(r.head.data, "done\n");
	cr_assert_eq(s.end, PROC_EXITED);
	cr_assert_str_eq(s.head.data, "slept\n");
	free(input);
	result_free(&r);
	result_free(&s);
	finish();
}

Test(proc, progress_lines, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };

	start(0, 0, 0);
	run_sh(&r, "printf 'one\\ntwo\\n' >&3; echo out;"
	    " printf '\\n{\"progress\":1}\\npartial' >&3");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.nlines, 5);
	cr_assert_str_eq(r.lines[0], "one");
	cr_assert_str_eq(r.lines[1], "two");
	cr_assert_str_eq(r.lines[2], "");
	cr_assert_str_eq(r.lines[3], "{\"progress\":1}");
	cr_assert_str_eq(r.lines[4], "partial");
	/* Progress is not output. */
	cr_assert_str_eq(r.head.data, "out\n");
	result_free(&r);
	finish();
}

Test(proc, progress_long_line_cut, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	size_t i;

	start(0, 0, 0);
	/* 20 MiB line, then a short one. */
	run_sh(&r, "head -c 20971520 /dev/zero | tr '\\0' a >&3;"
	    " printf '\\nend\\n' >&3");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.nlines, 4);
	cr_assert_eq(r.line_lens[0], 8 << 20);
	cr_assert_eq(r.line_lens[1], 8 << 20);
	cr_assert_eq(r.line_lens[2], 4 << 20);
	for (i = 0; i < 3; i++)
		cr_assert_eq(r.lines[i][r.line_lens[i] - 1], 'a');
	cr_assert_str_eq(r.lines[3], "end");
	result_free(&r);
	finish();
}

Test(proc, stream_output_chunks, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, q = { 0 };
	struct proc_spec spec = sh_spec(&r, "printf out1; printf err1 >&2;"
	    " sleep 0.05; printf out2; printf err2 >&2");
	struct proc_spec qspec = sh_spec(&q, "echo quiet; echo loud >&2");

	start(0, 0, 0);
	spec.stream_output = true;
	spawn(&r, &spec);
	spawn(&q, &qspec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert(run_until(&q.done, 5000));
	cr_assert_str_eq(r.chunks[1].data, "out1out2");
	cr_assert_str_eq(r.chunks[2].data, "err1err2");
	cr_assert_geq(r.nchunks, 3);
	cr_assert_str_eq(r.head.data, "out1out2\nerr1err2");
	cr_assert_eq(q.nchunks, 0);
	cr_assert_str_eq(q.head.data, "quiet\nloud\n");
	result_free(&r);
	result_free(&q);
	finish();
}

Test(proc, timeout_term_ignored, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "trap '' TERM; echo started;"
	    " sleep 100");

	start(300, 0, 0);
	spec.timeout_ms = 200;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_TIMED_OUT);
	cr_assert_eq(r.signal, SIGKILL);
	cr_assert_str_eq(r.head.data, "started\n");
	cr_assert_geq(r.duration_ms, 450, "%lld", (long long)r.duration_ms);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(5000));
	cr_assert_eq(count_children(), 0);
	result_free(&r);
	finish();
}

Test(proc, timeout_term_obeyed, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "sleep 100");

	/* The grace and the bound scale together (tests/README.md). */
	start(e2e_ms(5000), 0, 0);
	spec.timeout_ms = 100;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_TIMED_OUT);
	cr_assert_eq(r.signal, SIGTERM);
	cr_assert_geq(r.duration_ms, 90);
	/* Well before the 5 s grace. */
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(3000));
	result_free(&r);
	finish();
}

static void
kill_later_cb(evutil_socket_t fd, short events, void *arg)
{
	struct result *r = arg;

	(void)fd;
	(void)events;
	cr_assert_neq(proc_pid(r->p), 0);
	in_call = true;
	proc_kill(r->p);
	in_call = false;
}

Test(proc, kill, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "sleep 100");
	struct timeval tv = { 0, 100000 };
	struct event *ev;

	start(0, 0, 0);
	spawn(&r, &spec);
	ev = evtimer_new(base, kill_later_cb, &r);
	evtimer_add(ev, &tv);
	cr_assert(run_until(&r.done, 10000));
	event_free(ev);
	cr_assert_eq(r.end, PROC_KILLED);
	cr_assert_eq(r.signal, SIGTERM);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(3000));
	result_free(&r);
	finish();
}

Test(proc, kill_from_line_callback, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "trap '' TERM; echo go >&3;"
	    " sleep 100");

	start(200, 0, 0);
	r.kill_on_line = true;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_KILLED);
	cr_assert_eq(r.signal, SIGKILL);
	cr_assert_geq(r.nlines, 1);
	cr_assert_str_eq(r.lines[0], "go");
	result_free(&r);
	finish();
}

static void
kill_in_grace_cb(evutil_socket_t fd, short events, void *arg)
{
	struct result *r = arg;

	(void)fd;
	(void)events;
	/* Main has exited; its background job holds stdout open. */
	cr_assert(!r->done);
	cr_assert_eq(proc_pid(r->p), 0);
	proc_kill(r->p);
}

Test(proc, kill_during_leftover_grace, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "sleep 100 & echo $!");
	struct timeval tv = { e2e_ms(300) / 1000, e2e_ms(300) % 1000 * 1000 };
	struct event *ev;
	pid_t pid;

	/* The grace, the kill's moment and the bound scale together. */
	start(0, e2e_ms(5000), 0);
	spawn(&r, &spec);
	ev = evtimer_new(base, kill_in_grace_cb, &r);
	evtimer_add(ev, &tv);
	cr_assert(run_until(&r.done, 10000));
	event_free(ev);
	cr_assert_eq(r.end, PROC_KILLED);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(2500));
	pid = (pid_t)atol(r.head.data);
	cr_assert(pid > 0 && pid_gone(pid));
	result_free(&r);
	finish();
}

Test(proc, max_procs_fifo_and_kill_queued,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 };
	char acmd[64];
	struct proc_spec aspec;
	struct proc_spec bspec = sh_spec(&b, "echo b");
	struct proc_spec cspec = sh_spec(&c, "echo c");

	/* a's time and the bounds on b's scale together. */
	snprintf(acmd, sizeof acmd, "sleep %.3f; echo a", e2e_ms(300) / 1000.0);
	aspec = sh_spec(&a, acmd);
	start(0, 0, 1);
	spawn(&a, &aspec);
	spawn(&b, &bspec);
	spawn(&c, &cspec);
	cr_assert_neq(proc_pid(a.p), 0);
	cr_assert_eq(proc_pid(b.p), 0);
	cr_assert_eq(proc_pid(c.p), 0);
	cr_assert_eq(proc_running(), 1);
	cr_assert_eq(proc_started(), 1);

	/* Killing a queued one: never starts, ends from the loop. */
	in_call = true;
	proc_kill(c.p);
	in_call = false;
	cr_assert(!c.done);
	cr_assert(run_until(&c.done, 5000));
	cr_assert_eq(c.end, PROC_KILLED);
	cr_assert(!a.done);

	cr_assert(run_until(&b.done, 5000));
	cr_assert(a.done, "b ran before a finished");
	cr_assert_str_eq(a.head.data, "a\n");
	cr_assert_str_eq(b.head.data, "b\n");
	/* b's clock started when it really started. */
	cr_assert_lt(b.duration_ms, e2e_ms(250));
	cr_assert_geq(ms_between(&a.spawned, &b.ended), e2e_ms(300));
	cr_assert_eq(proc_started(), 2);
	cr_assert_eq(proc_running(), 0);
	result_free(&a);
	result_free(&b);
	result_free(&c);
	finish();
}

static void
check_truncated(struct result *r, const char *want, size_t wlen, size_t max)
{
	size_t flen;
	char *file;

	cr_assert_eq(r->total, wlen);
	cr_assert_not_null(r->path);
	cr_assert_null(r->output_error);
	cr_assert_eq(strncmp(r->path, outdir, strlen(outdir)), 0);
	cr_assert_eq(r->head.len, max / 2);
	cr_assert_eq(r->tail.len, max - max / 2);
	cr_assert_eq(memcmp(r->head.data, want, r->head.len), 0);
	cr_assert_eq(memcmp(r->tail.data, want + wlen - r->tail.len,
	    r->tail.len), 0);
	file = read_file(r->path, &flen);
	cr_assert_eq(flen, wlen);
	cr_assert(memcmp(file, want, wlen) == 0, "file differs");
	free(file);
}

Test(proc, truncation_stdout, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "seq 1 150000");
	struct buf want = { 0 };
	struct stat st;
	int i;

	start(0, 0, 0);
	for (i = 1; i <= 150000; i++)
		buf_printf(&want, "%d\n", i);
	spec.max_output = 1000;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_EXITED);
	check_truncated(&r, want.data, want.len, 1000);
	cr_assert_eq(stat(r.path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	buf_free(&want);
	result_free(&r);
	finish();
}

Test(proc, truncation_both_streams, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, s = { 0 }, t = { 0 };
	struct proc_spec spec = sh_spec(&r, "seq 1 200000 | head -c 1000001;"
	    " seq 1 150000 >&2; seq 1 10 | head -c 15");
	struct proc_spec sspec = sh_spec(&s, "printf 'x%.0s' $(seq 600);"
	    " printf 'y%.0s' $(seq 600) >&2");
	struct proc_spec tspec = sh_spec(&t, "seq 1 150000 >&2; printf z");
	struct buf want = { 0 }, out = { 0 };
	int i;

	start(0, 0, 0);
	/* Both streams past max: stderr spills to its own file first. */
	for (i = 1; i <= 200000; i++)
		buf_printf(&out, "%d\n", i);
	buf_add(&want, out.data, 1000001);
	buf_addstr(&want, "1\n2\n3\n4\n5\n6\n7\n8");
	buf_addstr(&want, "\n");
	for (i = 1; i <= 150000; i++)
		buf_printf(&want, "%d\n", i);
	spec.max_output = 1001;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	check_truncated(&r, want.data, want.len, 1001);

	/* Each stream fits, the combination does not. */
	buf_reset(&want);
	for (i = 0; i < 600; i++)
		buf_addstr(&want, "x");
	buf_addstr(&want, "\n");
	for (i = 0; i < 600; i++)
		buf_addstr(&want, "y");
	sspec.max_output = 1000;
	spawn(&s, &sspec);
	cr_assert(run_until(&s.done, 10000));
	check_truncated(&s, want.data, want.len, 1000);

	/* Only stderr is big; stdout is one byte. */
	buf_reset(&want);
	buf_addstr(&want, "z\n");
	for (i = 1; i <= 150000; i++)
		buf_printf(&want, "%d\n", i);
	tspec.max_output = 100;
	spawn(&t, &tspec);
	cr_assert(run_until(&t.done, 10000));
	check_truncated(&t, want.data, want.len, 100);

	buf_free(&want);
	buf_free(&out);
	result_free(&r);
	result_free(&s);
	result_free(&t);
	finish();
}

Test(proc, truncation_boundary, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 };
	struct proc_spec aspec = sh_spec(&a,
	    "head -c 1000 /dev/zero | tr '\\0' a");
	struct proc_spec bspec = sh_spec(&b,
	    "head -c 1001 /dev/zero | tr '\\0' b");

	start(0, 0, 0);
	aspec.max_output = 1000;
	spawn(&a, &aspec);
	bspec.max_output = 1000;
	spawn(&b, &bspec);
	cr_assert(run_until(&a.done, 5000));
	cr_assert(run_until(&b.done, 5000));
	/* Exactly max: whole, no file. */
	cr_assert_eq(a.total, 1000);
	cr_assert_eq(a.head.len, 1000);
	cr_assert_null(a.path);
	/* One more: head, tail and a file. */
	cr_assert_eq(b.total, 1001);
	cr_assert_eq(b.head.len, 500);
	cr_assert_eq(b.tail.len, 500);
	cr_assert_not_null(b.path);
	result_free(&a);
	result_free(&b);
	finish();
}

Test(proc, output_file_error_reported, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "seq 1 100000");

	start(0, 0, 0);
	/* The output dir vanished: say so, keep head and tail. */
	cr_assert_eq(rmdir(outdir), 0);
	spec.max_output = 100;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_null(r.path);
	cr_assert_not_null(r.output_error);
	cr_assert(strstr(r.output_error, "No such file or directory") != NULL,
	    "%s", r.output_error);
	cr_assert_eq(r.total, 588895);
	cr_assert_eq(strncmp(r.head.data, "1\n2\n3\n", 6), 0);
	cr_assert_eq(memcmp(r.tail.data + r.tail.len - 13, "99999\n100000\n",
	    13), 0);
	result_free(&r);
	finish();
}

Test(proc, timeout_stopped_tool, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "kill -STOP $$; echo resumed");

	start(e2e_ms(5000), 0, 0);
	spec.timeout_ms = 100;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 10000));
	cr_assert_eq(r.end, PROC_TIMED_OUT);
	/* TERM acted on at once thanks to the CONT, not KILL after 5 s. */
	cr_assert_eq(r.signal, SIGTERM);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(3000));
	result_free(&r);
	finish();
}

Test(proc, flood_bounded_memory, .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, e = { 0 };
	struct proc_spec spec = sh_spec(&r, "head -c 1073741824 /dev/zero");
	struct proc_spec espec = sh_spec(&e, "echo out;"
	    " head -c 268435456 /dev/zero >&2");
	struct rusage before, after;
	struct stat st;

	start(0, 0, 0);
	getrusage(RUSAGE_SELF, &before);
	spec.max_output = 4096;
	espec.max_output = 4096;
	spawn(&r, &spec);
	spawn(&e, &espec);
	cr_assert(run_until(&r.done, 100000));
	cr_assert(run_until(&e.done, 100000));
	getrusage(RUSAGE_SELF, &after);
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_null(r.output_error, "%s", r.output_error);
	cr_assert_eq(r.total, 1073741824ULL);
	cr_assert_eq(stat(r.path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, 1073741824ULL);
	unlink(r.path);
	cr_assert_eq(e.end, PROC_EXITED);
	cr_assert_null(e.output_error, "%s", e.output_error);
	cr_assert_eq(e.total, 4 + 268435456ULL);
	cr_assert_eq(memcmp(e.head.data, "out\n\0\0", 6), 0);
	cr_assert_eq(stat(e.path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, 4 + 268435456ULL);
	unlink(e.path);
	cr_assert_lt(after.ru_maxrss - before.ru_maxrss, 64 * 1024,
	    "maxrss grew by %ld KiB", after.ru_maxrss - before.ru_maxrss);
	result_free(&r);
	result_free(&e);
	finish();
}

static void
resume_cb(evutil_socket_t fd, short events, void *arg)
{
	struct result *r = arg;

	(void)fd;
	(void)events;
	/* Paused: the tool is blocked on a full pipe, not finished. */
	cr_assert(!r->done);
	cr_assert_neq(proc_pid(r->p), 0);
	proc_pause(r->p, false);
}

Test(proc, pause_backpressure, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "head -c 4194304 /dev/zero");
	struct timeval tv = { 0, 300000 };
	struct event *ev;

	start(0, 0, 0);
	spec.stream_output = true;
	spec.max_output = 1000;
	r.pause_on_chunk = true;
	spawn(&r, &spec);
	ev = evtimer_new(base, resume_cb, &r);
	evtimer_add(ev, &tv);
	cr_assert(run_until(&r.done, 10000));
	event_free(ev);
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.total, 4194304);
	cr_assert_eq(r.chunks[1].len, 4194304);
	cr_assert_geq(r.duration_ms, 290);
	result_free(&r);
	finish();
}

Test(proc, background_job_holds_stdout, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	pid_t pid;

	start(0, 100, 0);
	run_sh(&r, "sleep 100 & echo $!");
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(r.status, 0);
	pid = (pid_t)atol(r.head.data);
	cr_assert_gt(pid, 0);
	cr_assert(pid_gone(pid), "background sleep %ld survived", (long)pid);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(2000));
	cr_assert_eq(count_children(), 0);
	result_free(&r);
	finish();
}

Test(proc, setsid_escapee, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	pid_t pid;

	start(0, 100, 0);
	run_sh(&r, "setsid sleep 100 & echo $!");
	cr_assert_eq(r.end, PROC_EXITED);
	pid = (pid_t)atol(r.head.data);
	cr_assert_gt(pid, 0);
	cr_assert(pid_gone(pid), "escapee %ld survived", (long)pid);
	cr_assert_lt(ms_between(&r.spawned, &r.ended), e2e_ms(2000));
	cr_assert_eq(count_children(), 0);
	result_free(&r);
	finish();
}

Test(proc, escapees_that_fork_again, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	char *s, *end;
	long pid;
	int n = 0;

	start(0, 100, 0);
	/*
	 * An escapee whose child stays behind it, a double fork, and an
	 * escapee that clears its environment (no token: nobody's).
	 */
	run_sh(&r, "setsid sh -c 'sleep 100 & echo $!; exec sleep 101' &"
	    " echo $!;"
	    " (setsid sleep 102 & echo $!);"
	    " setsid env -i /bin/sleep 103 & echo $!;"
	    " sleep 0.3");
	cr_assert_eq(r.end, PROC_EXITED);
	for (s = r.head.data; *s != '\0'; s = end) {
		pid = strtol(s, &end, 10);
		if (end == s)
			break;
		cr_assert(pid_gone((pid_t)pid), "%ld survived", pid);
		n++;
	}
	cr_assert_eq(n, 4, "%s", r.head.data);
	cr_assert_eq(count_children(), 0);
	result_free(&r);
	finish();
}

Test(proc, escapee_of_running_tool_spared,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 };
	struct proc_spec aspec = sh_spec(&a, "pid=$( (setsid sleep 100"
	    " >/dev/null 2>&1 & echo $!) ); sleep 0.5; kill -0 $pid &&"
	    " echo alive");
	struct proc_spec bspec = sh_spec(&b, "sleep 0.1");

	start(0, 100, 0);
	/* a's escapee is re-parented to us while a runs; b ends meanwhile. */
	spawn(&a, &aspec);
	spawn(&b, &bspec);
	cr_assert(run_until(&b.done, 5000));
	cr_assert(!a.done);
	cr_assert_gt(count_children(), 1);
	cr_assert(run_until(&a.done, 5000));
	cr_assert_str_eq(a.head.data, "alive\n");
	cr_assert_eq(count_children(), 0);
	result_free(&a);
	result_free(&b);
	finish();
}

static void
check_cloexec_line(void *arg, const char *line, size_t len)
{
	struct dirent *de;
	DIR *d;
	int fd, n = 0;

	(void)arg;
	(void)line;
	(void)len;
	/* While a tool runs, every fd the supervisor holds is CLOEXEC. */
	d = opendir("/proc/self/fd");
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		fd = atoi(de->d_name);
		if (fd == dirfd(d) || (fd < 1024 && fd_before[fd]))
			continue;
		cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "fd %d", fd);
		n++;
	}
	closedir(d);
	cr_assert_geq(n, 3);
}

Test(proc, no_fds_leaked, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, c = { 0 };
	struct proc_spec spec = sh_spec(&r, "");
	struct proc_spec cspec = sh_spec(&c, "echo x >&3; sleep 0.1");
	struct proc_ops ops = t_ops;

	start(0, 0, 0);
	r.argv[0] = "ls";
	r.argv[1] = "/proc/self/fd";
	r.argv[2] = NULL;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_str_eq(r.head.data, "0\n1\n2\n3\n4\n");

	ops.line = check_cloexec_line;
	c.p = proc_spawn(&cspec, &ops, &c);
	cr_assert(run_until(&c.done, 5000));
	result_free(&r);
	result_free(&c);
	finish();
}

/* A set as pipes.h has it: every end above 3, ours non-blocking but stdin's. */
static void
check_pipes(const struct pipes *ps)
{
	int i;

	for (i = 0; i < 4; i++) {
		cr_assert_gt(ps->ours[i], 3);
		cr_assert_gt(ps->child[i], 3);
		cr_assert_eq(fcntl(ps->ours[i], F_GETFD) & FD_CLOEXEC,
		    FD_CLOEXEC);
		cr_assert_eq(fcntl(ps->child[i], F_GETFD) & FD_CLOEXEC,
		    FD_CLOEXEC);
		cr_assert_eq(fcntl(ps->ours[i], F_GETFL) & O_NONBLOCK,
		    i == 0 ? 0 : O_NONBLOCK, "our end %d", i);
		cr_assert_eq(fcntl(ps->child[i], F_GETFL) & O_NONBLOCK, 0,
		    "the child's end %d", i);
	}
	/* Each pair is one pipe: stdin's from us to the child, the rest back. */
	cr_assert_eq(write(ps->ours[0], "i", 1), 1);
	cr_assert_eq(write(ps->child[3], "p", 1), 1);
	{
		char c = 0;

		cr_assert_eq(read(ps->child[0], &c, 1), 1);
		cr_assert_eq(c, 'i');
		cr_assert_eq(read(ps->ours[3], &c, 1), 1);
		cr_assert_eq(c, 'p');
	}
}

/*
 * Idle once a result is out, the supervisor makes the next tool's pipes
 * ahead, and that tool, started alone, gets all four through them.
 */
Test(proc, pipes_made_ahead_serve_the_next_tool,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 };
	struct proc_spec spec = sh_spec(&b, "cat; echo err >&2; echo line >&3");
	struct pipes ps;

	start(0, 0, 0);
	cr_assert(!pipes_take(&ps), "a set before any tool has ended");
	run_sh(&a, "true");
	event_base_loop(base, EVLOOP_NONBLOCK);
	cr_assert(pipes_take(&ps), "no set made after the result");
	check_pipes(&ps);
	pipes_close(&ps);
	cr_assert(!pipes_take(&ps));

	pipes_fill();
	spec.input = "in\n";
	spec.input_len = 3;
	spawn(&b, &spec);
	/* Taken by the spawn: the next is made only once b has ended. */
	cr_assert(!pipes_take(&ps));
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(b.end, PROC_EXITED);
	cr_assert_str_eq(b.head.data, "in\nerr\n");
	cr_assert_eq(b.nlines, 1);
	cr_assert_str_eq(b.lines[0], "line");
	result_free(&a);
	result_free(&b);
	finish();
}

/*
 * A tool started beside a running one is launched: its child runs on until
 * its exec and would hold a made-ahead set's ends, so the set is closed
 * before the launch, and the tool makes its own.
 */
Test(proc, pipes_made_ahead_dropped_before_a_launch,
    .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 100");
	struct proc_spec bspec = sh_spec(&b, "echo b");
	struct pipes ps;

	start(0, 0, 0);
	spawn(&a, &aspec);
	pipes_fill();
	spawn(&b, &bspec);
	cr_assert(!pipes_take(&ps), "a set made ahead outlived a launch");
	cr_assert(run_until(&b.done, 5000));
	cr_assert_eq(b.end, PROC_EXITED);
	cr_assert_str_eq(b.head.data, "b\n");
	proc_kill(a.p);
	cr_assert(run_until(&a.done, 5000));
	result_free(&a);
	result_free(&b);
	finish();
}

/* pipes_make's ends, and what pipes_drop leaves: nothing to take. */
Test(proc, pipes_make_and_drop)
{
	struct pipes ps;

	cr_assert_eq(pipes_make(&ps), 0);
	check_pipes(&ps);
	pipes_close(&ps);
	pipes_fill();
	pipes_drop();
	cr_assert(!pipes_take(&ps));
}

Test(proc, env_exact, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "");
	const char *env[] = { "A=1", "STEXEC_PROC_TOKEN=forged",
		"B=two words", NULL };
	const char *prefix = "A=1\nB=two words\nSTEXEC_PROC_TOKEN=";
	char *end, *num;

	start(0, 0, 0);
	r.argv[0] = "/usr/bin/env";
	r.argv[1] = NULL;
	spec.envp = (char *const *)env;
	spawn(&r, &spec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_eq(r.end, PROC_EXITED);
	cr_assert_eq(strncmp(r.head.data, prefix, strlen(prefix)), 0, "%s",
	    r.head.data);
	/* <16 hex digits of this daemon>-<n>: unique across daemons. */
	num = r.head.data + strlen(prefix);
	cr_assert_eq(strspn(num, "0123456789abcdef"), 16, "%s", num);
	cr_assert_eq(num[16], '-', "%s", num);
	cr_assert_gt(strtoull(num + 17, &end, 10), 0);
	cr_assert_str_eq(end, "\n");
	result_free(&r);
	finish();
}

Test(proc, child_signals_and_group, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, g = { 0 };

	start(0, 0, 0);
	/*
	 * SIGPIPE is default again (yes dies quietly), nothing blocked.
	 * glibc 2.36's posix_spawn itself leaves its internal signals 32
	 * and 33 ignored; no program uses those but the C library.
	 */
	run_sh(&r, "yes | head -n 1; grep -E '^Sig(Blk|Ign)' /proc/self/status"
	    " | sed 's/0000000180000000/0000000000000000/'");
	cr_assert_str_eq(r.head.data, "y\nSigBlk:\t0000000000000000\n"
	    "SigIgn:\t0000000000000000\n");
	/* Its own process group. */
	run_sh(&g, "read -r pid comm state ppid pgid rest < /proc/$$/stat;"
	    " [ $pid = $pgid ] && echo leader");
	cr_assert_str_eq(g.head.data, "leader\n");
	result_free(&r);
	result_free(&g);
	finish();
}

static struct result chain_second;

static void
chain_exit(void *arg, const struct proc_exit *e)
{
	static char *argv[] = { "sh", "-c", "echo second", NULL };
	struct proc_spec spec = { 0 };
	struct result *r = arg;

	t_exit(arg, e);
	/* Spawning from an exit callback is allowed. */
	spec.argv = argv;
	spec.envp = (char *const *)test_env;
	spec.max_output = 100;
	chain_second.p = proc_spawn(&spec, &t_ops, &chain_second);
	(void)r;
}

Test(proc, spawn_from_exit_callback, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 };
	struct proc_spec spec = sh_spec(&r, "echo first");
	struct proc_ops ops = t_ops;

	start(0, 0, 1);
	ops.exit = chain_exit;
	r.p = proc_spawn(&spec, &ops, &r);
	cr_assert(run_until(&chain_second.done, 5000));
	cr_assert_str_eq(r.head.data, "first\n");
	cr_assert_str_eq(chain_second.head.data, "second\n");
	result_free(&r);
	result_free(&chain_second);
	finish();
}

static void
shutdown_exit(void *arg, const struct proc_exit *e)
{
	t_exit(arg, e);
	proc_shutdown();
}

Test(proc, shutdown_from_exit_callback, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result r = { 0 }, other = { 0 }, third = { 0 };
	struct proc_spec spec = sh_spec(&r, "echo bye");
	struct proc_spec ospec = sh_spec(&other, "sleep 100");
	struct proc_spec tspec = sh_spec(&third,
	    "sleep 0.5; echo never reported");
	struct proc_ops ops = t_ops;

	start(0, 0, 0);
	spawn(&other, &ospec);
	ops.exit = shutdown_exit;
	r.p = proc_spawn(&spec, &ops, &r);
	spawn(&third, &tspec);
	cr_assert(run_until(&r.done, 5000));
	cr_assert_str_eq(r.head.data, "bye\n");
	cr_assert_eq(count_children(), 0);
	/* Nothing is called back after the shutdown. */
	run_until(&third.done, 300);
	cr_assert(!other.done && !third.done);
	result_free(&r);
	result_free(&other);
	result_free(&third);
	finish();
}

Test(proc, shutdown_kills_everything, .timeout = 30 * STEXEC_TEST_BUILD_SCALE)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 };
	struct proc_spec aspec = sh_spec(&a, "sleep 100");
	struct proc_spec bspec = sh_spec(&b, "setsid sleep 100 & sleep 100");
	struct proc_spec cspec = sh_spec(&c, "sleep 100");

	start(0, 0, 2);
	spawn(&a, &aspec);
	spawn(&b, &bspec);
	spawn(&c, &cspec);
	run_until(&a.done, 200);
	cr_assert_gt(count_children(), 0);
	finish();
	cr_assert(!a.done && !b.done && !c.done, "callbacks at shutdown");
	result_free(&a);
	result_free(&b);
	result_free(&c);
}
