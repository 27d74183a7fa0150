/*
 * Supervised tool processes: spawned (spawn.h) into a new process group, pipes read
 * without blocking, the timeout and kill escalation, leftovers killed and
 * reaped before the one exit callback.
 */
#include "supervisor/proc.h"

#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "supervisor/capture.h"
#include "supervisor/cgroup.h"
#include "log.h"
#include "supervisor/reaper.h"
#include "supervisor/sandbox.h"
#include "supervisor/sentinel.h"
#include "supervisor/spawn.h"
#include "supervisor/tmpdir.h"
#include "util.h"

#define PROC_TOKEN "STEXEC_PROC_TOKEN"
#define PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* Longest fd 3 line delivered whole; longer ones come in pieces. */
#define PROC_LINE_MAX (1U << 20)
#define PROC_READ_SIZE 65536
/* Per read event, so one busy tool cannot starve the others. */
#define PROC_READ_BURST (16U * PROC_READ_SIZE)
/* What is read from a pipe after its writers are dead. */
#define PROC_DRAIN_MAX (8U << 20)
/* Polls for the leftovers to be reaped; then the result goes anyway. */
#define PROC_POLL_MS 5
#define PROC_POLL_MAX 2000
/* Held by a running tool: stdin, 3 pipes, output and spill files, cgroup. */
#define PROC_FDS_PER_TOOL 7
/*
 * Held for a moment by a spawn: 4 child ends, the cwd, the /proc scans,
 * the sandbox's ruleset and its directory, the v1 cgroups to join.
 */
#define PROC_FDS_SPAWN (8 + 2 + SPAWN_MAX_JOIN)
/* How often the events of a tool with limits are read. */
#define PROC_LIMIT_POLL_MS 50

enum proc_state {
	PROC_QUEUED,   /* waiting for a max_procs slot */
	PROC_RUNNING,  /* the main process runs */
	PROC_GRACE,    /* main ended: waiting a little for EOF */
	PROC_KILLING,  /* leftovers killed: waiting for them to be reaped */
	PROC_FLUSHING, /* all dead: assembling the output */
	PROC_DONE,     /* waiting for its exit callback */
};

struct proc_pipe {
	struct proc *p;
	int fd;             /* ours: the read end */
	int which;          /* the child's fd: 1, 2 or 3 */
	struct event *ev;
};

struct proc {
	enum proc_state state;
	uint64_t token;
	char **argv;
	char **envp;
	char *cwd;
	char *name;
	char *input;
	size_t input_len;
	size_t input_off;
	int64_t timeout_ms;
	size_t max_output;
	bool stream_output;
	char *tmpdir;       /* sandboxed: its private TMPDIR, once made */
	bool tmpdir_made;
	struct sandbox_spec sandbox; /* its roots are roots */
	char **roots;
	bool as_user;       /* run as user, not as the daemon */
	struct proc_user user; /* groups and error owned */
	struct toolcg_limits limits;
	struct toolcg *cg;  /* its cgroups, if it has any */
	struct event *limit_timer;
	enum toolcg_hit hit;
	uint64_t hit_limit;
	struct proc_ops ops;
	void *arg;

	pid_t pid;          /* main, while it runs */
	pid_t pgid;         /* the group, until it is known empty */
	bool started;
	int in_fd;
	struct event *in_ev;
	struct proc_pipe pipes[3];
	struct event *timer;      /* the timeout, then TERM -> KILL */
	struct event *end_timer;  /* leftover grace, kill polls, flush */
	int polls;

	bool paused;
	bool killed;
	bool timed_out;
	bool term_sent;
	int status;
	struct timespec start;
	int64_t duration_ms;
	char *error;
	enum proc_end end;

	struct capture *capture;
	struct buf line;
	bool line_cut;      /* the line so far went out in pieces */

	TAILQ_ENTRY(proc) all_entry;
	TAILQ_ENTRY(proc) entry;  /* queue or done */
};
TAILQ_HEAD(proc_list, proc);

/* What an orphan scan for one ending proc found. */
struct proc_scan {
	struct proc *p;
	int pending;
};

static char **proc_pack(char *const *, const char *, const char *);
static char **proc_copy_argv(char *const *);
static char **proc_copy_env(char *const *, uint64_t, const char *);
static void proc_free_strv(char **);
static const char *proc_getenv(char *const *, const char *);
static int proc_resolve(struct proc *, int, char **);
static int proc_highfd(int);
static void proc_start(struct proc *);
static void proc_start_queued(void);
static void proc_spawn_failed(struct proc *, char *);
static void proc_add_timer(struct event *, int64_t);
static int64_t proc_elapsed_ms(const struct timespec *);
static void proc_signal_group(struct proc *, int);
static void proc_write_cb(evutil_socket_t, short, void *);
static void proc_close_stdin(struct proc *);
static void proc_read_cb(evutil_socket_t, short, void *);
static void proc_read(struct proc_pipe *, size_t, bool);
static void proc_deliver(struct proc *, int, char *, size_t);
static void proc_line_add(struct proc *, char *, size_t);
static void proc_line(struct proc *, const char *, size_t);
static void proc_close_pipe(struct proc_pipe *);
static bool proc_pipes_closed(struct proc *);
static void proc_timer_cb(evutil_socket_t, short, void *);
static void proc_limit_cb(evutil_socket_t, short, void *);
static bool proc_over_limit(struct proc *);
static void proc_exited(pid_t, int, void *);
static void proc_end_cb(evutil_socket_t, short, void *);
static bool proc_reap_leftovers(struct proc *);
static void proc_scan_orphan(const struct reaper_orphan *, void *);
static struct proc *proc_owner(const struct reaper_orphan *);
static bool proc_alive(const struct proc *);
static void proc_finish(struct proc *);
static void proc_done_cb(evutil_socket_t, short, void *);
static void proc_free(struct proc *, bool);
static void proc_new_instance(void);
static void proc_forget_group(struct proc *);
static void proc_replay_groups(void);

static struct event_base *proc_base;
static struct proc_config proc_cfg;
static char *proc_output_dir;
static struct event *proc_done_ev;
static struct proc_list proc_all = TAILQ_HEAD_INITIALIZER(proc_all);
static struct proc_list proc_queue = TAILQ_HEAD_INITIALIZER(proc_queue);
static struct proc_list proc_done = TAILQ_HEAD_INITIALIZER(proc_done);
static unsigned proc_nrunning;
static uint64_t proc_nstarted;
static uint64_t proc_next_token;
/* "<16 hex digits>-": this daemon's tokens start with it. */
static char proc_instance[24];
static bool proc_starting;
static bool proc_held;   /* reloading: nothing new starts */
/* One read buffer for all pipes: reads never nest. +1 for a NUL. */
static char proc_rbuf[PROC_READ_SIZE + 1];

int
proc_init(struct event_base *base, const struct proc_config *cfg, char *err,
    size_t errlen)
{
	struct sigaction sa;

	if (proc_base != NULL)
		fatal("proc_init called twice");
	proc_cfg = *cfg;
	if (proc_cfg.kill_grace_ms <= 0)
		proc_cfg.kill_grace_ms = 2000;
	if (proc_cfg.leftover_grace_ms <= 0)
		proc_cfg.leftover_grace_ms = 100;
	if (proc_cfg.max_procs < 0)
		proc_cfg.max_procs = 0;
	proc_output_dir = xstrdup(cfg->output_dir != NULL ? cfg->output_dir :
	    "/tmp");
	proc_cfg.output_dir = proc_output_dir;
	if (util_mkdirs(proc_output_dir, 0700) != 0) {
		snprintf(err, errlen, "cannot create %s: %s", proc_output_dir,
		    strerror(errno));
		free(proc_output_dir);
		proc_output_dir = NULL;
		return -1;
	}

	/* A tool that closes its stdin must not kill the daemon. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);

	if (reaper_init(base, err, errlen) != 0) {
		free(proc_output_dir);
		proc_output_dir = NULL;
		return -1;
	}
	proc_new_instance();
	sandbox_init();
	if (proc_cfg.guard && sentinel_start(base, proc_instance,
	    proc_replay_groups, !proc_cfg.no_cgroup, err, errlen) != 0) {
		sandbox_shutdown();
		reaper_free();
		free(proc_output_dir);
		proc_output_dir = NULL;
		return -1;
	}
	toolcg_init();
	/* Its worker is the first thread: after every fork above. */
	tmpdir_init(proc_output_dir, proc_instance);
	proc_done_ev = event_new(base, -1, 0, proc_done_cb, NULL);
	if (proc_done_ev == NULL)
		fatal("event_new failed");
	proc_base = base;
	proc_nrunning = 0;
	proc_nstarted = 0;
	return 0;
}

void
proc_shutdown(void)
{
	struct proc *p;

	if (proc_base == NULL)
		return;
	TAILQ_FOREACH(p, &proc_all, all_entry) {
		toolcg_kill(p->cg);
		if (p->pgid > 0)
			kill(-p->pgid, SIGKILL);
	}
	/* Before the children are reaped: the sentinel is one of them. */
	sentinel_stop();
	reaper_kill_all();
	while ((p = TAILQ_FIRST(&proc_all)) != NULL) {
		TAILQ_REMOVE(&proc_all, p, all_entry);
		proc_free(p, false);
	}
	TAILQ_INIT(&proc_queue);
	TAILQ_INIT(&proc_done);
	event_free(proc_done_ev);
	proc_done_ev = NULL;
	reaper_free();
	sandbox_shutdown();
	tmpdir_shutdown();
	toolcg_shutdown();
	free(proc_output_dir);
	proc_output_dir = NULL;
	proc_base = NULL;
	proc_nrunning = 0;
}

struct proc *
proc_spawn(const struct proc_spec *spec, const struct proc_ops *ops,
    void *arg)
{
	struct proc *p;
	size_t i;

	if (proc_base == NULL)
		fatal("proc_spawn before proc_init");
	p = xcalloc(1, sizeof *p);
	p->token = ++proc_next_token;
	p->sandbox = spec->sandbox;
	p->roots = xcalloc(spec->sandbox.nroots + 1, sizeof *p->roots);
	for (i = 0; i < spec->sandbox.nroots; i++)
		p->roots[i] = xstrdup(spec->sandbox.roots[i]);
	p->sandbox.roots = (const char *const *)p->roots;
	if (spec->sandbox.profile != SANDBOX_NONE)
		p->tmpdir = tmpdir_take(&p->tmpdir_made);
	p->argv = proc_copy_argv(spec->argv);
	p->envp = proc_copy_env(spec->envp, p->token, p->tmpdir);
	p->cwd = spec->cwd != NULL ? xstrdup(spec->cwd) : NULL;
	p->name = xstrdup(spec->name != NULL ? spec->name : "proc");
	if (spec->user != NULL) {
		p->as_user = true;
		p->user = *spec->user;
		p->user.groups = xcalloc(spec->user->ngroups + 1,
		    sizeof *p->user.groups);
		memcpy((gid_t *)p->user.groups, spec->user->groups,
		    spec->user->ngroups * sizeof *p->user.groups);
		p->user.error = spec->user->error != NULL ?
		    xstrdup(spec->user->error) : NULL;
	}
	if (spec->input_len > 0) {
		p->input = xmalloc(spec->input_len);
		memcpy(p->input, spec->input, spec->input_len);
		p->input_len = spec->input_len;
	}
	p->timeout_ms = spec->timeout_ms;
	p->limits = spec->limits;
	p->max_output = spec->max_output;
	p->stream_output = spec->stream_output;
	p->ops = *ops;
	p->arg = arg;
	p->in_fd = -1;
	for (i = 0; i < nitems(p->pipes); i++) {
		p->pipes[i].p = p;
		p->pipes[i].fd = -1;
		p->pipes[i].which = (int)i + 1;
	}
	p->timer = evtimer_new(proc_base, proc_timer_cb, p);
	p->end_timer = evtimer_new(proc_base, proc_end_cb, p);
	p->limit_timer = event_new(proc_base, -1, EV_PERSIST, proc_limit_cb, p);
	if (p->timer == NULL || p->end_timer == NULL || p->limit_timer == NULL)
		fatal("evtimer_new failed");
	TAILQ_INSERT_TAIL(&proc_all, p, all_entry);

	p->state = PROC_QUEUED;
	TAILQ_INSERT_TAIL(&proc_queue, p, entry);
	proc_start_queued();
	return p;
}

/* Start queued procs in order while there are free slots. */
static void
proc_start_queued(void)
{
	struct proc *p;

	/* A failed start finishes at once and calls back here: no nesting. */
	if (proc_starting)
		return;
	proc_starting = true;
	while ((p = TAILQ_FIRST(&proc_queue)) != NULL && !proc_held) {
		if (proc_cfg.max_procs > 0 &&
		    proc_nrunning >= (unsigned)proc_cfg.max_procs)
			break;
		TAILQ_REMOVE(&proc_queue, p, entry);
		proc_start(p);
	}
	proc_starting = false;
}

/*
 * A NULL-ended vector copied into one allocation (pointers, then strings),
 * without the entries starting with skip ("NAME=") and with extra last:
 * one malloc per spawn instead of one per string.
 */
static char **
proc_pack(char *const *src, const char *skip, const char *extra)
{
	size_t n = 0, bytes = 0, slen = skip != NULL ? strlen(skip) : 0, i, len;
	char **v, *p;

	for (i = 0; src != NULL && src[i] != NULL; i++) {
		if (slen > 0 && strncmp(src[i], skip, slen) == 0)
			continue;
		n++;
		bytes += strlen(src[i]) + 1;
	}
	if (extra != NULL) {
		n++;
		bytes += strlen(extra) + 1;
	}
	v = xmalloc((n + 1) * sizeof *v + bytes);
	p = (char *)(v + n + 1);
	n = 0;
	for (i = 0; src != NULL && src[i] != NULL; i++) {
		if (slen > 0 && strncmp(src[i], skip, slen) == 0)
			continue;
		len = strlen(src[i]) + 1;
		v[n++] = memcpy(p, src[i], len);
		p += len;
	}
	if (extra != NULL)
		v[n++] = memcpy(p, extra, strlen(extra) + 1);
	v[n] = NULL;
	return v;
}

static char **
proc_copy_argv(char *const *argv)
{
	return proc_pack(argv, NULL, NULL);
}

/*
 * The given environment, then TMPDIR when given and our token (replacing
 * any inherited ones).
 */
static char **
proc_copy_env(char *const *envp, uint64_t token, const char *tmpdir)
{
	char tok[64], *tmp, **with_tmp = NULL, **v;

	if (tmpdir != NULL) {
		xasprintf(&tmp, "TMPDIR=%s", tmpdir);
		envp = with_tmp = proc_pack(envp, "TMPDIR=", tmp);
		free(tmp);
	}
	snprintf(tok, sizeof tok, "%s=%s%" PRIu64, PROC_TOKEN, proc_instance,
	    token);
	v = proc_pack(envp, PROC_TOKEN "=", tok);
	free(with_tmp);
	return v;
}

static void
proc_free_strv(char **v)
{
	free(v);
}

static const char *
proc_getenv(char *const *envp, const char *name)
{
	size_t len = strlen(name), i;

	for (i = 0; envp[i] != NULL; i++) {
		if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
			return envp[i] + len + 1;
	}
	return NULL;
}

/*
 * Find argv[0] as execvp would, but in the tool's PATH, not the daemon's;
 * relative PATH entries are taken from dirfd, where the child will be.
 */
static int
proc_resolve(struct proc *p, int dirfd, char **path)
{
	const char *name = p->argv[0], *s, *e;
	char *cand;
	struct stat st;
	bool denied = false;
	size_t len;

	if (*name == '\0')
		return ENOENT;
	if (strchr(name, '/') != NULL) {
		*path = xstrdup(name);
		return 0;
	}
	if ((s = proc_getenv(p->envp, "PATH")) == NULL)
		s = PROC_DEFAULT_PATH;
	for (;;) {
		e = strchr(s, ':');
		len = e != NULL ? (size_t)(e - s) : strlen(s);
		if (len == 0)
			xasprintf(&cand, "./%s", name);
		else
			xasprintf(&cand, "%.*s/%s", (int)len, s, name);
		if (fstatat(dirfd, cand, &st, 0) == 0) {
			if (S_ISREG(st.st_mode) &&
			    faccessat(dirfd, cand, X_OK, AT_EACCESS) == 0) {
				*path = cand;
				return 0;
			}
			denied = true;
		} else if (errno == EACCES)
			denied = true;
		free(cand);
		if (e == NULL)
			break;
		s = e + 1;
	}
	return denied ? EACCES : ENOENT;
}

/* Child ends must not sit on 0-3, where the file actions dup2 to. */
static int
proc_highfd(int fd)
{
	int nfd, error;

	if (fd > 3)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 4);
	error = errno;
	close(fd);
	errno = error;
	return nfd;
}

/*
 * The four pipes of a tool (0: stdin, 1: stdout, 2: stderr, 3: progress):
 * our ends non-blocking in p (proc_spawn_failed closes them), the child's
 * above 3 in child[], so that its dup2s to 0..3 cannot clobber one another.
 * 0, or an errno.
 */
static int
proc_pipes(struct proc *p, int child[4])
{
	int fds[2], i;

	for (i = 0; i < 4; i++) {
		if (pipe2(fds, O_CLOEXEC) != 0)
			return errno;
		if (i == 0) {
			child[0] = proc_highfd(fds[0]);
			p->in_fd = fds[1];
		} else {
			child[i] = proc_highfd(fds[1]);
			p->pipes[i - 1].fd = fds[0];
		}
		if (child[i] == -1)
			return EMFILE;
	}
	fcntl(p->in_fd, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 3; i++)
		fcntl(p->pipes[i].fd, F_SETFL, O_NONBLOCK);
	return 0;
}

/* The uid the tool runs as. */
static uid_t
proc_uid(const struct proc *p)
{
	return p->as_user ? p->user.uid : geteuid();
}

/*
 * A sandboxed tool's private TMPDIR and what confines it (sandbox.h);
 * NULL, or why it cannot run.
 */
static char *
proc_confine(struct proc *p, struct spawn_req *req, struct sandbox_prep **prep)
{
	char *msg = NULL;

	if (!sandbox_can(p->sandbox.profile))
		return sandbox_prepare(&p->sandbox, p->tmpdir, p->cwd,
		    proc_uid(p), req, prep);
	if (!p->tmpdir_made && mkdir(p->tmpdir, 0700) != 0) {
		xasprintf(&msg, "cannot create %s: %s", p->tmpdir,
		    strerror(errno));
		return msg;
	}
	p->tmpdir_made = true;
	if (p->as_user && chown(p->tmpdir, p->user.uid, p->user.gid) != 0) {
		xasprintf(&msg, "cannot give %s to uid %u: %s", p->tmpdir,
		    (unsigned)p->user.uid, strerror(errno));
		return msg;
	}
	return sandbox_prepare(&p->sandbox, p->tmpdir, p->cwd, proc_uid(p), req,
	    prep);
}

static void
proc_start(struct proc *p)
{
	struct sandbox_prep *prep = NULL;
	struct spawn_req req;
	int error, i;
	char *path = NULL, *msg = NULL;
	const char *step;
	pid_t pid = -1;

	memset(&req, 0, sizeof req);
	for (i = 0; i < 4; i++)
		req.fds[i] = -1;
	req.dirfd = req.cgroup_fd = req.landlock_fd = -1;
	req.argv = p->argv;
	req.envp = p->envp;

	p->state = PROC_RUNNING;
	if (p->argv[0] == NULL)
		msg = xstrdup("no command to run");
	else if (p->cwd != NULL && ((req.dirfd = open(p->cwd, O_PATH |
	    O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    faccessat(req.dirfd, ".", X_OK, AT_EACCESS) != 0))
		xasprintf(&msg, "cannot chdir to %s: %s", p->cwd,
		    strerror(errno));
	else if ((error = proc_resolve(p, req.dirfd == -1 ? AT_FDCWD :
	    req.dirfd, &path)) != 0)
		xasprintf(&msg, "cannot run %s: %s", p->argv[0],
		    strerror(error));
	else if (p->as_user && p->user.error != NULL)
		msg = xstrdup(p->user.error);
	else if (p->sandbox.profile != SANDBOX_NONE &&
	    (msg = proc_confine(p, &req, &prep)) != NULL)
		;
	else if ((p->cg = toolcg_new(p->token, &p->limits, &req, &msg)) ==
	    NULL && msg != NULL)
		;
	else if ((error = proc_pipes(p, req.fds)) != 0)
		xasprintf(&msg, "cannot create a pipe: %s", strerror(error));
	else {
		req.path = path;
		if (p->as_user) {
			req.as_user = true;
			req.uid = p->user.uid;
			req.gid = p->user.gid;
			req.groups = p->user.groups;
			req.ngroups = p->user.ngroups;
		}
		if ((pid = spawn_start(&req, &step)) == -1)
			xasprintf(&msg, "%s %s: %s", step, p->argv[0],
			    strerror(errno));
	}

	/* The one cleanup: what the child needed, whether it started or not. */
	for (i = 0; i < 4; i++)
		if (req.fds[i] != -1)
			close(req.fds[i]);
	if (req.dirfd != -1)
		close(req.dirfd);
	sandbox_release(prep);
	toolcg_spawned(p->cg, &req);
	free(path);
	if (msg != NULL) {
		proc_spawn_failed(p, msg);
		return;
	}
	proc_free_strv(p->argv);
	p->argv = NULL;
	proc_free_strv(p->envp);
	p->envp = NULL;

	p->pid = pid;
	p->pgid = pid;
	sentinel_watch(p->pgid);
	p->started = true;
	proc_nrunning++;
	proc_nstarted++;
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	if (p->ops.started != NULL)
		p->ops.started(p->arg);
	reaper_add(pid, proc_exited, p);
	p->capture = capture_create(p->max_output, proc_output_dir, p->name,
	    (long)pid, p->token);
	capture_limit_file(p->capture, proc_cfg.output_file_max);
	if (p->as_user)
		capture_set_owner(p->capture, p->user.uid, p->user.gid);

	/* Most inputs fit the pipe: write now, wait for room only if not. */
	proc_write_cb(-1, 0, p);
	if (p->in_fd != -1) {
		p->in_ev = event_new(proc_base, p->in_fd, EV_WRITE | EV_PERSIST,
		    proc_write_cb, p);
		if (p->in_ev == NULL)
			fatal("event_new failed");
		event_add(p->in_ev, NULL);
	}
	for (i = 0; i < 3; i++) {
		p->pipes[i].ev = event_new(proc_base, p->pipes[i].fd,
		    EV_READ | EV_PERSIST, proc_read_cb, &p->pipes[i]);
		if (p->pipes[i].ev == NULL)
			fatal("event_new failed");
		if (!p->paused)
			event_add(p->pipes[i].ev, NULL);
	}
	if (p->timeout_ms > 0)
		proc_add_timer(p->timer, p->timeout_ms);
	if (toolcg_watched(p->cg))
		proc_add_timer(p->limit_timer, PROC_LIMIT_POLL_MS);
}

/* Never started: report it from the loop like any other end. */
static void
proc_spawn_failed(struct proc *p, char *msg)
{
	int i;

	p->error = msg;
	if (p->in_fd != -1)
		close(p->in_fd);
	p->in_fd = -1;
	for (i = 0; i < 3; i++)
		proc_close_pipe(&p->pipes[i]);
	proc_free_strv(p->argv);
	p->argv = NULL;
	proc_free_strv(p->envp);
	p->envp = NULL;
	proc_finish(p);
}

static void
proc_add_timer(struct event *ev, int64_t ms)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
	evtimer_add(ev, &tv);
}

static int64_t
proc_elapsed_ms(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - since->tv_sec) * 1000 +
	    (now.tv_nsec - since->tv_nsec) / 1000000;
}

/*
 * Signal the group while it may exist; a gone group's id may be reused.
 * KILL also goes to the whole cgroup, escapees included.
 */
static void
proc_signal_group(struct proc *p, int sig)
{
	if (sig == SIGKILL)
		toolcg_kill(p->cg);
	if (p->pgid <= 0)
		return;
	if (kill(-p->pgid, sig) == -1 && errno == ESRCH)
		proc_forget_group(p);
}

/* The group is gone (or no longer ours to watch). */
static void
proc_forget_group(struct proc *p)
{
	if (p->pgid > 0)
		sentinel_forget(p->pgid);
	p->pgid = 0;
}

/* A new sentinel learns every group that may still exist. */
static void
proc_replay_groups(void)
{
	struct proc *p;

	TAILQ_FOREACH(p, &proc_all, all_entry) {
		if (p->pgid > 0)
			sentinel_watch(p->pgid);
	}
}

/* Tokens unique across daemons: another's sentinel must not match ours. */
static void
proc_new_instance(void)
{
	struct timespec ts;
	uint64_t r;

	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		clock_gettime(CLOCK_REALTIME, &ts);
		r = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec ^
		    ((uint64_t)ts.tv_nsec << 16);
	}
	snprintf(proc_instance, sizeof proc_instance, "%016" PRIx64 "-", r);
}

static void
proc_write_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc *p = arg;
	ssize_t n;

	(void)fd;
	(void)events;
	while (p->input_off < p->input_len) {
		n = write(p->in_fd, p->input + p->input_off,
		    p->input_len - p->input_off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		/* EPIPE: the tool does not want the rest. */
		if (n == -1)
			break;
		p->input_off += (size_t)n;
	}
	proc_close_stdin(p);
}

static void
proc_close_stdin(struct proc *p)
{
	if (p->in_ev != NULL)
		event_del(p->in_ev);
	if (p->in_fd != -1)
		close(p->in_fd);
	p->in_fd = -1;
	free(p->input);
	p->input = NULL;
	p->input_len = p->input_off = 0;
}

static void
proc_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc_pipe *pp = arg;

	(void)fd;
	(void)events;
	proc_read(pp, PROC_READ_BURST, false);
}

/* Read up to limit bytes; stop early when paused unless forced. */
static void
proc_read(struct proc_pipe *pp, size_t limit, bool force)
{
	struct proc *p = pp->p;
	size_t total = 0;
	ssize_t n;

	while (pp->fd != -1 && total < limit) {
		if (p->paused && !force)
			break;
		n = read(pp->fd, proc_rbuf, PROC_READ_SIZE);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			break;
		if (n <= 0) {
			proc_close_pipe(pp);
			/* All EOF during the grace: no need to wait longer. */
			if (p->state == PROC_GRACE && proc_pipes_closed(p)) {
				evtimer_del(p->end_timer);
				proc_add_timer(p->end_timer, 0);
			}
			break;
		}
		total += (size_t)n;
		proc_rbuf[n] = '\0';
		proc_deliver(p, pp->which, proc_rbuf, (size_t)n);
	}
}

static void
proc_deliver(struct proc *p, int which, char *data, size_t len)
{
	if (which == 3) {
		proc_line_add(p, data, len);
		return;
	}
	capture_add(p->capture, which, data, len);
	if (p->stream_output && p->ops.chunk != NULL)
		p->ops.chunk(p->arg, which, data, len);
}

/* Split fd 3 into lines; pieces of PROC_LINE_MAX for longer ones. */
static void
proc_line_add(struct proc *p, char *data, size_t len)
{
	char *nl;
	size_t k, room;

	while (len > 0) {
		nl = memchr(data, '\n', len);
		k = nl != NULL ? (size_t)(nl - data) : len;
		if (nl != NULL && p->line.len == 0 && !p->line_cut &&
		    k <= PROC_LINE_MAX) {
			/* A whole line in the read buffer: no copy. */
			*nl = '\0';
			proc_line(p, data, k);
		} else {
			while (k > 0) {
				room = PROC_LINE_MAX - p->line.len;
				if (room > k)
					room = k;
				buf_add(&p->line, data, room);
				data += room;
				len -= room;
				k -= room;
				if (p->line.len == PROC_LINE_MAX) {
					proc_line(p, p->line.data, p->line.len);
					buf_reset(&p->line);
					p->line_cut = true;
				}
			}
			if (nl != NULL) {
				if (p->line.len > 0 || !p->line_cut)
					proc_line(p, p->line.data != NULL ?
					    p->line.data : "", p->line.len);
				/* Do not keep a huge line's buffer around. */
				if (p->line.cap > PROC_READ_SIZE)
					buf_free(&p->line);
				buf_reset(&p->line);
				p->line_cut = false;
			}
		}
		if (nl == NULL)
			break;
		len -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
}

static void
proc_line(struct proc *p, const char *line, size_t len)
{
	if (p->ops.line != NULL)
		p->ops.line(p->arg, line, len);
}

/* Stop reading a pipe: EOF, error, or the end. The event is freed later. */
static void
proc_close_pipe(struct proc_pipe *pp)
{
	struct proc *p = pp->p;

	if (pp->fd == -1)
		return;
	if (pp->ev != NULL)
		event_del(pp->ev);
	close(pp->fd);
	pp->fd = -1;
	if (pp->which == 3 && p->line.len > 0) {
		proc_line(p, p->line.data, p->line.len);
		buf_free(&p->line);
	}
}

static bool
proc_pipes_closed(struct proc *p)
{
	size_t i;

	for (i = 0; i < nitems(p->pipes); i++) {
		if (p->pipes[i].fd != -1)
			return false;
	}
	return true;
}

/* The timeout, and the KILL after TERM (from the timeout or proc_kill). */
static void
proc_timer_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc *p = arg;

	(void)fd;
	(void)events;
	if (p->state != PROC_RUNNING)
		return;
	if (p->term_sent) {
		proc_signal_group(p, SIGKILL);
		return;
	}
	p->timed_out = true;
	p->term_sent = true;
	proc_signal_group(p, SIGTERM);
	/* A stopped process would not act on TERM until continued. */
	proc_signal_group(p, SIGCONT);
	proc_add_timer(p->timer, proc_cfg.kill_grace_ms);
}

/*
 * Went over a limit (the kernel has refused it memory or a process, or
 * killed part of it): kill all of it now, once.
 */
static bool
proc_over_limit(struct proc *p)
{
	if (p->hit == TOOLCG_HIT_NONE &&
	    (p->hit = toolcg_hit(p->cg, &p->hit_limit)) != TOOLCG_HIT_NONE)
		proc_signal_group(p, SIGKILL);
	return p->hit != TOOLCG_HIT_NONE;
}

static void
proc_limit_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc *p = arg;

	(void)fd;
	(void)events;
	if (p->state != PROC_RUNNING || proc_over_limit(p))
		evtimer_del(p->limit_timer);
}

/* From the reaper: the main process has been reaped. */
static void
proc_exited(pid_t pid, int status, void *arg)
{
	struct proc *p = arg;

	(void)pid;
	p->status = status;
	p->duration_ms = proc_elapsed_ms(&p->start);
	p->pid = 0;
	p->state = PROC_GRACE;
	evtimer_del(p->timer);
	evtimer_del(p->limit_timer);
	proc_close_stdin(p);
	if (proc_over_limit(p) || p->killed || proc_pipes_closed(p))
		proc_add_timer(p->end_timer, 0);
	else
		proc_add_timer(p->end_timer, proc_cfg.leftover_grace_ms);
}

/* The end, step by step: grace over, kill and wait, assemble output. */
static void
proc_end_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc *p = arg;
	size_t i;

	(void)fd;
	(void)events;
	if (p->state == PROC_GRACE) {
		p->state = PROC_KILLING;
		p->polls = 0;
	}
	if (p->state == PROC_KILLING) {
		if (!proc_reap_leftovers(p) && ++p->polls < PROC_POLL_MAX) {
			proc_add_timer(p->end_timer, PROC_POLL_MS);
			return;
		}
		/* Nobody writes any more: take what the pipes still hold. */
		for (i = 0; i < nitems(p->pipes); i++) {
			proc_read(&p->pipes[i], PROC_DRAIN_MAX, true);
			proc_close_pipe(&p->pipes[i]);
		}
		p->state = PROC_FLUSHING;
	}
	if (p->state == PROC_FLUSHING) {
		if (capture_finish(p->capture) != 0) {
			proc_add_timer(p->end_timer, 0);
			return;
		}
		proc_finish(p);
	}
}

/*
 * Kill what is left of the tool: its group, and the processes that left the
 * group (setsid) and were re-parented to us. True once all are reaped.
 */
static bool
proc_reap_leftovers(struct proc *p)
{
	struct proc_scan scan = { p, 0 };

	reaper_reap();
	/* Its own cgroup holds all of it: empty is gone, nothing to kill. */
	if (toolcg_supervises() && p->cg != NULL &&
	    toolcg_populated(p->cg) == 0)
		return true;
	proc_signal_group(p, SIGKILL);
	if (toolcg_supervises() && p->cg != NULL)
		return false;
	/*
	 * Escapees are re-parented to us only as their parents in the group
	 * die: scan /proc once the group is gone, usually a single time.
	 */
	if (p->pgid != 0)
		return false;
	reaper_orphans(proc_scan_orphan, &scan);
	return scan.pending == 0;
}

static void
proc_scan_orphan(const struct reaper_orphan *ro, void *arg)
{
	struct proc_scan *scan = arg;
	struct proc *owner;

	owner = proc_owner(ro);
	if (owner != NULL && owner != scan->p)
		return;
	/* Ours, or nobody's: kill it, and wait until it has been reaped. */
	if (!ro->zombie)
		kill(ro->pid, SIGKILL);
	scan->pending++;
}

/* The live proc an orphan belongs to: by its group, else by its token. */
static struct proc *
proc_owner(const struct reaper_orphan *ro)
{
	struct proc *q;
	size_t plen = strlen(proc_instance);
	char value[64], *end;
	uint64_t token;

	TAILQ_FOREACH(q, &proc_all, all_entry) {
		if (proc_alive(q) && q->pgid > 0 && q->pgid == ro->pgid)
			return q;
	}
	if (ro->zombie ||
	    reaper_getenv(ro->pid, PROC_TOKEN, value, sizeof value) != 0 ||
	    strncmp(value, proc_instance, plen) != 0)
		return NULL;
	errno = 0;
	token = strtoull(value + plen, &end, 10);
	if (errno != 0 || *end != '\0' || end == value + plen)
		return NULL;
	TAILQ_FOREACH(q, &proc_all, all_entry) {
		if (proc_alive(q) && q->token == token)
			return q;
	}
	return NULL;
}

const char *
proc_sandboxed_peer(pid_t pid)
{
	struct reaper_orphan ro = { pid, 0, false };
	const struct proc *q;
	char state;
	pid_t ppid;

	if (pid <= 0 || reaper_stat(pid, &ppid, &ro.pgid, &state) != 0)
		return NULL;
	q = proc_owner(&ro);
	return q != NULL && q->sandbox.profile != SANDBOX_NONE ? q->name :
	    NULL;
}

/* Started and its processes not yet known to be all dead. */
static bool
proc_alive(const struct proc *p)
{
	return p->state == PROC_RUNNING || p->state == PROC_GRACE ||
	    p->state == PROC_KILLING;
}

/* Everything is dead and closed: queue the exit callback. */
static void
proc_finish(struct proc *p)
{
	evtimer_del(p->timer);
	evtimer_del(p->end_timer);
	if (p->error != NULL)
		p->end = PROC_SPAWN_FAILED;
	else if (p->killed)
		p->end = PROC_KILLED;
	else if (p->hit != TOOLCG_HIT_NONE)
		p->end = PROC_LIMIT_HIT;
	else if (p->timed_out)
		p->end = PROC_TIMED_OUT;
	else if (WIFSIGNALED(p->status))
		p->end = PROC_SIGNALED;
	else
		p->end = PROC_EXITED;
	if (p->started)
		proc_nrunning--;
	p->state = PROC_DONE;
	TAILQ_INSERT_TAIL(&proc_done, p, entry);
	event_active(proc_done_ev, EV_TIMEOUT, 1);
	proc_start_queued();
}

/* Exit callbacks, each proc freed after its own callback has returned. */
static void
proc_done_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc_exit e;
	struct proc *p;

	(void)fd;
	(void)events;
	(void)arg;
	while ((p = TAILQ_FIRST(&proc_done)) != NULL) {
		TAILQ_REMOVE(&proc_done, p, entry);
		/* Off every list: proc_shutdown from the callback is safe. */
		TAILQ_REMOVE(&proc_all, p, all_entry);

		memset(&e, 0, sizeof e);
		e.end = p->end;
		if (p->started && WIFEXITED(p->status))
			e.status = WEXITSTATUS(p->status);
		if (p->started && WIFSIGNALED(p->status))
			e.signal = WTERMSIG(p->status);
		e.duration_ms = p->duration_ms;
		e.error = p->error;
		e.hit = p->hit;
		e.limit = p->hit_limit;
		toolcg_usage(p->cg, &e.peak_memory, &e.cpu_measured,
		    &e.cpu_ms);
		if (p->capture != NULL) {
			capture_output(p->capture, &e.output);
			e.output_error = capture_error(p->capture);
		} else {
			e.output.head = "";
			e.output.tail = "";
		}
		if (p->ops.exit != NULL)
			p->ops.exit(p->arg, &e);
		proc_free(p, true);
		if (proc_base == NULL)
			break;
	}
}

static void
proc_free(struct proc *p, bool keep_file)
{
	size_t i;

	if (p->pid > 0)
		reaper_remove(p->pid);
	proc_forget_group(p);
	if (p->in_ev != NULL)
		event_free(p->in_ev);
	if (p->in_fd != -1)
		close(p->in_fd);
	for (i = 0; i < nitems(p->pipes); i++) {
		if (p->pipes[i].ev != NULL)
			event_free(p->pipes[i].ev);
		if (p->pipes[i].fd != -1)
			close(p->pipes[i].fd);
	}
	event_free(p->timer);
	event_free(p->end_timer);
	event_free(p->limit_timer);
	toolcg_free(p->cg);
	capture_free(p->capture, keep_file);
	proc_free_strv(p->argv);
	proc_free_strv(p->envp);
	buf_free(&p->line);
	free(p->input);
	if (p->tmpdir_made && util_rmtree(p->tmpdir) != 0)
		log_warn("cannot remove %s: %s", p->tmpdir, strerror(errno));
	free(p->tmpdir);
	free((gid_t *)p->user.groups);
	free((char *)p->user.error);
	for (i = 0; p->roots != NULL && p->roots[i] != NULL; i++)
		free(p->roots[i]);
	free(p->roots);
	free(p->cwd);
	free(p->name);
	free(p->error);
	free(p);
}

void
proc_kill(struct proc *p)
{
	switch (p->state) {
	case PROC_QUEUED:
		TAILQ_REMOVE(&proc_queue, p, entry);
		p->killed = true;
		proc_finish(p);
		break;
	case PROC_RUNNING:
		p->killed = true;
		if (p->term_sent)
			break;
		p->term_sent = true;
		proc_signal_group(p, SIGTERM);
		proc_signal_group(p, SIGCONT);
		evtimer_del(p->timer);
		proc_add_timer(p->timer, proc_cfg.kill_grace_ms);
		break;
	case PROC_GRACE:
		p->killed = true;
		evtimer_del(p->end_timer);
		proc_add_timer(p->end_timer, 0);
		break;
	default:
		break;
	}
}

void
proc_pause(struct proc *p, bool pause)
{
	size_t i;

	if (p->paused == pause)
		return;
	p->paused = pause;
	if (!p->started || p->state == PROC_DONE)
		return;
	for (i = 0; i < nitems(p->pipes); i++) {
		if (p->pipes[i].fd == -1 || p->pipes[i].ev == NULL)
			continue;
		if (pause)
			event_del(p->pipes[i].ev);
		else
			event_add(p->pipes[i].ev, NULL);
	}
}

pid_t
proc_pid(const struct proc *p)
{
	return p->state == PROC_RUNNING ? p->pid : 0;
}

void
proc_usage(const struct proc *p, uint64_t *peak, bool *has_cpu,
    uint64_t *cpu_ms)
{
	toolcg_usage(p->cg, peak, has_cpu, cpu_ms);
}

unsigned
proc_fds_needed(void)
{
	unsigned procs = proc_cfg.max_procs > 0 ?
	    (unsigned)proc_cfg.max_procs : 1024;

	return procs * PROC_FDS_PER_TOOL + PROC_FDS_SPAWN;
}

void
proc_hold(bool hold)
{
	proc_held = hold;
	if (!hold)
		proc_start_queued();
}

bool
proc_idle(void)
{
	struct proc *p;

	TAILQ_FOREACH(p, &proc_all, all_entry) {
		if (p->state != PROC_QUEUED)
			return false;
	}
	return true;
}

const char *
proc_instance_token(void)
{
	return proc_instance;
}

/* The private TMPDIRs (tmp.<token><n>) of an earlier daemon's tools. */
static void
proc_remove_tmpdirs(const char *token)
{
	char prefix[64], *path;
	struct dirent *de;
	DIR *d;

	snprintf(prefix, sizeof prefix, "tmp.%s", token);
	if ((d = opendir(proc_output_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		xasprintf(&path, "%s/%s", proc_output_dir, de->d_name);
		if (util_rmtree(path) != 0)
			log_warn("cannot remove %s: %s", path, strerror(errno));
		free(path);
	}
	closedir(d);
}

unsigned
proc_kill_instance(const char *token, const char *cgroup, long old_pid)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	char value[64], *end;
	struct dirent *de;
	unsigned killed = 0, found = 1;
	size_t tlen = strlen(token);
	int pass;
	long pid;
	DIR *d;

	if (tlen == 0 || strcmp(token, proc_instance) == 0)
		return 0;
	/*
	 * Same pid, same name: our own subtree, made anew (a reload, or a pid
	 * used again); cgroup_create removed the stale one before we entered.
	 */
	if (cgroup != NULL && (cgroup_path() == NULL ||
	    strcmp(cgroup, cgroup_path()) != 0))
		cgroup_destroy_stale(cgroup);
	/* Killed ones may be forking still: until a pass finds none. */
	for (pass = 0; pass < 100 && found > 0; pass++) {
		if (pass > 0)
			nanosleep(&tick, NULL);
		found = 0;
		if ((d = opendir("/proc")) == NULL)
			break;
		while ((de = readdir(d)) != NULL) {
			pid = strtol(de->d_name, &end, 10);
			if (*end != '\0' || pid <= 1 || pid == (long)getpid() ||
			    reaper_getenv((pid_t)pid, PROC_TOKEN, value,
			    sizeof value) != 0 || strncmp(value, token, tlen) != 0)
				continue;
			if (kill((pid_t)pid, SIGKILL) == 0)
				found++;
		}
		closedir(d);
		killed += found;
	}
	proc_remove_tmpdirs(token);
	if (old_pid > 0 && old_pid != (long)getpid())
		toolcg_remove_stale(old_pid);
	return killed;
}

unsigned
proc_running(void)
{
	return proc_nrunning;
}

uint64_t
proc_started(void)
{
	return proc_nstarted;
}
