/*
 * Supervised tool processes: spawned (spawn.h) into a new process group, pipes read
 * without blocking, the timeout and kill escalation, leftovers killed and
 * reaped before the one exit callback.
 */
#include "supervisor/proc.h"

#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "supervisor/capture.h"
#include "supervisor/cgroup.h"
#include "handover.h"
#include "log.h"
#include "supervisor/reaper.h"
#include "supervisor/sandbox.h"
#include "supervisor/sentinel.h"
#include "supervisor/spawn.h"
#include "supervisor/netns.h"
#include "supervisor/pipes.h"
#include "supervisor/tmpdir.h"
#include "util.h"

#define PROC_TOKEN "STEXEC_PROC_TOKEN"
#define PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/*
 * Longest fd 3 line delivered whole; longer ones come in pieces. A line of
 * content blocks must hold an image the API takes (5 MiB of base64).
 */
#define PROC_LINE_MAX (8U << 20)
#define PROC_READ_SIZE 65536
/* Per read event, so one busy tool cannot starve the others. */
#define PROC_READ_BURST (16U * PROC_READ_SIZE)
/* What is read from a pipe after its writers are dead. */
#define PROC_DRAIN_MAX (8U << 20)
/* Polls for the leftovers to be reaped; then the result goes anyway. */
#define PROC_POLL_MS 5
#define PROC_POLL_MAX 2000
/*
 * Held by a running tool: stdin, 3 pipes, output and spill files, and its
 * cgroup's 4 (the group, cgroup.events, cpu.stat, cgroup.procs), which a
 * pooled group keeps for the next tool (toolcg.c): a group exists only for
 * a tool that runs or ran at once with the others.
 */
#define PROC_FDS_PER_TOOL 10
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
	int spent;          /* the read end after EOF, closed after the
	                       result (proc_pipe_ended) */
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
	char *input;        /* stdin still to write, from input_off */
	size_t input_len;
	size_t input_off;
	bool stdin_stream;  /* keep it open after the input (proc_write) */
	bool stdin_eof;     /* close it once the input is written */
	bool tty;           /* 0, 1 and 2 are a terminal: pipes[0] its master */
	bool tty_raw;
	unsigned cols, rows;
	int64_t timeout_ms;
	size_t max_output;
	bool stream_output;
	char *tmpdir;       /* sandboxed: its private TMPDIR, once made */
	bool tmpdir_made;
	int tmpdir_ruleset; /* its Landlock ruleset, made with it, or -1 */
	int mntns;          /* its mount namespace (workspace-write), or -1 */
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

	struct spawn_run *run; /* launched without waiting: until reaped, with
	                          argv and envp, which its child reads */
	pid_t pid;          /* main, while it runs */
	pid_t pgid;         /* the group, until it is known empty */
	bool started;       /* has a process (launched: maybe not exec'd yet) */
	bool execd;         /* its execve is known to have happened: counted
	                       in proc_nstarted, ops.started called */
	bool slot;          /* holds a max_procs slot */
	bool detached;      /* a job: no timeout, no slot (proc_detach) */
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
static int proc_pty(struct proc *, int[4]);
static void proc_events(struct proc *);
static void proc_start(struct proc *);
static void proc_watch(struct proc *);
static void proc_start_queued(void);
static void proc_spawn_failed(struct proc *, char *);
static void proc_add_timer(struct event *, int64_t);
static void proc_end_now(struct proc *);
static int64_t proc_elapsed_ms(const struct timespec *);
static void proc_signal_group(struct proc *, int);
static void proc_write_cb(evutil_socket_t, short, void *);
static void proc_close_stdin(struct proc *);
static bool proc_launches(void);
static void proc_exec_happened(struct proc *);
static void proc_check_exec(struct proc *);
static void proc_check_execs(void);
static void proc_append(struct proc *, const char *, size_t, bool);
static void proc_read_cb(evutil_socket_t, short, void *);
static void proc_read(struct proc_pipe *, size_t, bool);
static void proc_deliver(struct proc *, int, char *, size_t);
static void proc_line_add(struct proc *, char *, size_t);
static void proc_line(struct proc *, const char *, size_t);
static void proc_close_pipe(struct proc_pipe *);
static void proc_pipe_ended(struct proc_pipe *);
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
static void proc_close_spent(int);
static void proc_after_cb(evutil_socket_t, short, void *);
static void proc_close_spent_now(void);
static void proc_new_instance(void);
static void proc_forget_group(struct proc *);
static void proc_replay_groups(void);
static bool proc_take_handover(const char *);
static void proc_save_spawn(struct proc *, json_t *);

static struct event_base *proc_base;
static struct proc_config proc_cfg;
static char *proc_output_dir;
static struct event *proc_done_ev;
/*
 * What waits until this pass's results are out: the spent pipe ends of
 * freed procs to close; idle, the next tool's pipes to make (pipes.h).
 */
static struct event *proc_after_ev;
static int *proc_spent;
static size_t proc_nspent, proc_spent_cap;
static struct proc_list proc_all = TAILQ_HEAD_INITIALIZER(proc_all);
static struct proc_list proc_queue = TAILQ_HEAD_INITIALIZER(proc_queue);
static struct proc_list proc_done = TAILQ_HEAD_INITIALIZER(proc_done);
static unsigned proc_nrunning;
/* Those holding a max_procs slot: every running one but jobs. */
static unsigned proc_nslots;
static uint64_t proc_nstarted;
static uint64_t proc_nlaunched;
/* Launched, not known yet to have exec'd (p->run is theirs still). */
static unsigned proc_nlaunching;
static uint64_t proc_next_token;
/* "<16 hex digits>-": this daemon's tokens start with it. */
static char proc_instance[24];
static bool proc_starting;
static bool proc_held;   /* reloading: nothing new starts */
static uint64_t proc_tmpdirs; /* TMPDIR names the image before used */
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
	if (cfg->handover == NULL || !proc_take_handover(cfg->handover))
		proc_new_instance();
	sandbox_init();
	netns_init();
	if (proc_cfg.guard && sentinel_start(base, proc_instance,
	    proc_replay_groups, !proc_cfg.no_cgroup, err, errlen) != 0) {
		sandbox_shutdown();
		netns_shutdown();
		reaper_free();
		free(proc_output_dir);
		proc_output_dir = NULL;
		return -1;
	}
	toolcg_init(proc_cfg.measure_memory);
	/* Its worker is the first thread: after every fork above. */
	tmpdir_init(proc_output_dir, proc_instance);
	tmpdir_resume(proc_tmpdirs);
	proc_done_ev = event_new(base, -1, 0, proc_done_cb, NULL);
	proc_after_ev = event_new(base, -1, 0, proc_after_cb, NULL);
	if (proc_done_ev == NULL || proc_after_ev == NULL)
		fatal("event_new failed");
	proc_base = base;
	proc_nrunning = proc_nslots = 0;
	proc_nstarted = proc_nlaunched = 0;
	proc_nlaunching = 0;
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
	proc_close_spent_now();
	pipes_drop();
	event_free(proc_after_ev);
	proc_after_ev = NULL;
	free(proc_spent);
	proc_spent = NULL;
	proc_spent_cap = 0;
	reaper_free();
	sandbox_shutdown();
	netns_shutdown();
	tmpdir_shutdown();
	toolcg_shutdown();
	free(proc_output_dir);
	proc_output_dir = NULL;
	proc_base = NULL;
	proc_nrunning = proc_nslots = 0;
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
	p->tmpdir_ruleset = p->mntns = -1;
	p->token = ++proc_next_token;
	p->sandbox = spec->sandbox;
	p->roots = xcalloc(spec->sandbox.nroots + 1, sizeof *p->roots);
	for (i = 0; i < spec->sandbox.nroots; i++)
		p->roots[i] = xstrdup(spec->sandbox.roots[i]);
	p->sandbox.roots = (const char *const *)p->roots;
	if (spec->sandbox.profile != SANDBOX_NONE)
		p->tmpdir = tmpdir_take(&p->tmpdir_made, &p->tmpdir_ruleset);
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
	p->stdin_stream = spec->stdin_stream || spec->tty;
	p->stdin_eof = !p->stdin_stream;
	p->tty = spec->tty;
	p->tty_raw = spec->tty && spec->tty_raw;
	p->cols = spec->cols > 0 ? spec->cols : 80;
	p->rows = spec->rows > 0 ? spec->rows : 24;
	/* A terminal has no EOF to send after the input: it gets none. */
	if (spec->input_len > 0 && !spec->tty) {
		p->input = xmalloc(spec->input_len);
		memcpy(p->input, spec->input, spec->input_len);
		p->input_len = spec->input_len;
	}
	/* What a client wrote before the start follows, within no bound. */
	if (p->stdin_stream && (spec->early_len > 0 || spec->early_eof))
		proc_append(p, spec->early, spec->early_len, spec->early_eof);
	p->timeout_ms = spec->timeout_ms;
	p->limits = spec->limits;
	p->max_output = spec->max_output;
	p->stream_output = spec->stream_output;
	p->ops = *ops;
	p->arg = arg;
	p->in_fd = -1;
	for (i = 0; i < nitems(p->pipes); i++) {
		p->pipes[i].p = p;
		p->pipes[i].fd = p->pipes[i].spent = -1;
		p->pipes[i].which = (int)i + 1;
	}
	proc_events(p);

	p->state = PROC_QUEUED;
	TAILQ_INSERT_TAIL(&proc_queue, p, entry);
	proc_start_queued();
	return p;
}

/* Its timers, and its place among every proc. */
static void
proc_events(struct proc *p)
{
	p->timer = evtimer_new(proc_base, proc_timer_cb, p);
	p->end_timer = evtimer_new(proc_base, proc_end_cb, p);
	p->limit_timer = event_new(proc_base, -1, EV_PERSIST, proc_limit_cb, p);
	if (p->timer == NULL || p->end_timer == NULL || p->limit_timer == NULL)
		fatal("evtimer_new failed");
	TAILQ_INSERT_TAIL(&proc_all, p, all_entry);
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
		    proc_nslots >= (unsigned)proc_cfg.max_procs)
			break;
		TAILQ_REMOVE(&proc_queue, p, entry);
		proc_start(p);
	}
	proc_starting = false;
}

/* Every variable of every spawn is asked: the first byte decides most. */
static inline bool
proc_skip(const char *s, const char *skip, size_t slen)
{
	return slen > 0 && s[0] == skip[0] && strncmp(s, skip, slen) == 0;
}

/*
 * A NULL-ended vector copied into one allocation (pointers, then strings),
 * without the entries starting with skip ("NAME=") and with extra last:
 * one malloc per spawn instead of one per string.
 */
static char **
proc_pack(char *const *src, const char *skip, const char *extra)
{
	size_t n = 0, bytes = 0, slen = skip != NULL ? strlen(skip) : 0, i;
	char **v, *p, *end;

	for (i = 0; src != NULL && src[i] != NULL; i++) {
		if (proc_skip(src[i], skip, slen))
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
	end = p + bytes;
	n = 0;
	for (i = 0; src != NULL && src[i] != NULL; i++) {
		if (proc_skip(src[i], skip, slen))
			continue;
		v[n++] = p;
		p = memccpy(p, src[i], '\0', (size_t)(end - p));
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

/*
 * The four pipes of a tool (0: stdin, 1: stdout, 2: stderr, 3: progress):
 * our ends non-blocking in p (proc_spawn_failed closes them), the child's
 * above 3 in child[], so that its dup2s to 0..3 cannot clobber one another.
 * A tool that starts alone takes the set made while the daemon was idle.
 * 0, or an errno.
 */
static int
proc_pipes(struct proc *p, int child[4])
{
	struct pipes ps;
	int error, i;

	if (p->tty)
		return proc_pty(p, child);
	if ((proc_launches() || !pipes_take(&ps)) &&
	    (error = pipes_make(&ps)) != 0)
		return error;
	p->in_fd = ps.ours[0];
	for (i = 0; i < 4; i++) {
		if (i > 0)
			p->pipes[i - 1].fd = ps.ours[i];
		child[i] = ps.child[i];
	}
	/*
	 * An input of at most PIPE_BUF bytes, followed by EOF, is written
	 * whole into the empty pipe at the spawn and the pipe closed: a write
	 * that cannot block, so no fcntl for it.
	 */
	if (p->stdin_stream || p->input_len > PIPE_BUF)
		fcntl(p->in_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

/*
 * A terminal instead of the first three pipes: the child's 0, 1 and 2 are
 * its slave, our stdin and stdout ends its master (one stream: no stderr).
 */
static int
proc_pty(struct proc *p, int child[4])
{
	struct winsize ws = { .ws_row = (unsigned short)p->rows,
	    .ws_col = (unsigned short)p->cols };
	struct termios tio;
	char name[64];
	int fds[2], master, slave, i;

	if ((master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1)
		return errno;
	p->pipes[0].fd = master;
	if (unlockpt(master) != 0 || ptsname_r(master, name, sizeof name) != 0 ||
	    ioctl(master, TIOCSWINSZ, &ws) != 0)
		return errno;
	/* No echo, no line editing, no signal keys: bytes pass as they are. */
	if (p->tty_raw && (tcgetattr(master, &tio) != 0 || (cfmakeraw(&tio),
	    tcsetattr(master, TCSANOW, &tio)) != 0))
		return errno;
	if ((slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1)
		return errno;
	/*
	 * Nobody opens it by its path again: another tool of the same uid
	 * (a sandboxed one has no capability to override this) could
	 * otherwise read the keys meant for this one, or write to it. The
	 * tool has its descriptors; /dev/tty still reaches it.
	 */
	if (fchmod(slave, 0) != 0) {
		close(slave);
		return errno;
	}
	for (i = 0; i < 3; i++)
		if ((child[i] = pipes_high(i == 0 ? slave : dup(slave))) == -1)
			return EMFILE;
	if ((p->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 4)) == -1)
		return errno;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return errno;
	if ((child[3] = pipes_high(fds[1])) == -1)
		return EMFILE;
	p->pipes[2].fd = fds[0];
	fcntl(master, F_SETFL, O_NONBLOCK);
	fcntl(p->pipes[2].fd, F_SETFL, O_NONBLOCK);
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
		return sandbox_prepare(&p->sandbox, p->tmpdir, -1, p->cwd,
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
	return sandbox_prepare(&p->sandbox, p->tmpdir, p->tmpdir_ruleset,
	    p->cwd, proc_uid(p), req, prep);
}

/*
 * A workspace-write tool's mount namespace, held from its spawn: when its
 * last process exits, the namespace's teardown (its mounts detached, an
 * expedited RCU grace period) is then done by the TMPDIR worker that lets
 * it go (tmpdir.h), not on the tool's exit before its SIGCHLD. -1 if the
 * tool is gone already.
 */
static int
proc_hold_mntns(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof path, "/proc/%ld/ns/mnt", (long)pid);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/*
 * Watch a running tool's descriptors: its stdin while we still write it,
 * and its output pipes, read unless the tool is paused.
 */
static void
proc_watch(struct proc *p)
{
	size_t i;

	if (p->in_fd != -1) {
		p->in_ev = event_new(proc_base, p->in_fd, EV_WRITE | EV_PERSIST,
		    proc_write_cb, p);
		if (p->in_ev == NULL)
			fatal("event_new failed");
		event_add(p->in_ev, NULL);
	}
	for (i = 0; i < nitems(p->pipes); i++) {
		if (p->pipes[i].fd == -1)
			continue;
		p->pipes[i].ev = event_new(proc_base, p->pipes[i].fd,
		    EV_READ | EV_PERSIST, proc_read_cb, &p->pipes[i]);
		if (p->pipes[i].ev == NULL)
			fatal("event_new failed");
		if (!p->paused)
			event_add(p->pipes[i].ev, NULL);
	}
}

/*
 * Whether the next child is launched (proc_spawn_child says why): while
 * other tools hold a slot. A job (the session's live shell, a command in
 * the background) does not count: it may run for the session's life, and
 * every tool beside it would be launched, where alone it starts sooner
 * waited for (a bash -c true took 4% longer beside an idle live shell).
 */
static bool
proc_launches(void)
{
	return proc_nslots > 0;
}

/*
 * Start the child. While other tools run, without waiting for its execve
 * (spawn_launch): waiting would hold up their output and their ends, and
 * the exec would wake the loop on the child's CPU, where it then takes
 * the CPU from the child. Alone, waiting costs nothing and keeps the child
 * on our CPU, where it starts sooner than on one that must be woken.
 */
static pid_t
proc_spawn_child(struct proc *p, const struct spawn_req *req,
    const char **step)
{
	pid_t pid;

	if (proc_launches()) {
		/* It runs on while we do: it must not hold the next set. */
		pipes_drop();
		if ((pid = spawn_launch(req, &p->run, step)) != -1 ||
		    errno != ENOSYS)
			return pid;
	}
	return spawn_start(req, step);
}

/* Why the child did not get to run: the spawn's step that failed. */
static char *
proc_spawn_error(const struct proc *p, const char *step, int error)
{
	char *msg;

	xasprintf(&msg, "%s %s: %s", step, p->argv[0], strerror(error));
	return msg;
}

/* What the child read until its execve, now that it has exec'd or died. */
static void
proc_spawn_done(struct proc *p)
{
	proc_free_strv(p->argv);
	p->argv = NULL;
	proc_free_strv(p->envp);
	p->envp = NULL;
	if (p->run != NULL)
		proc_nlaunching--;
	spawn_run_free(p->run);
	p->run = NULL;
}

/*
 * Its execve happened: now it counts as started (a tool that never exec'd
 * is not), with the time of its spawn as its start.
 */
static void
proc_exec_happened(struct proc *p)
{
	p->execd = true;
	proc_nstarted++;
	if (p->ops.started != NULL)
		p->ops.started(p->arg, &p->start);
}

/*
 * A launched child's execve is known from the memory it shares with us
 * (spawn_run_state), so the loop is never woken for it: looked at when
 * something of the tool happens (output, its reap), when the counts are
 * read, and before a reload. One that failed is left to its reap.
 */
static void
proc_check_exec(struct proc *p)
{
	if (p->run != NULL && !p->execd &&
	    spawn_run_state(p->run, 0) == SPAWN_RUN_EXECD) {
		proc_exec_happened(p);
		proc_spawn_done(p);
	}
}

static void
proc_check_execs(void)
{
	struct proc *p;

	if (proc_nlaunching == 0)
		return;
	TAILQ_FOREACH(p, &proc_all, all_entry)
		proc_check_exec(p);
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
	req.tty = p->tty;

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
	else if (p->sandbox.profile == SANDBOX_NONE && p->sandbox.net_rules)
		msg = xstrdup("network rules hold only in a sandbox: this tool "
		    "runs unsandboxed (give it sandbox \"read-only\" or "
		    "\"workspace-write\")");
	else if (p->sandbox.profile != SANDBOX_NONE &&
	    (msg = proc_confine(p, &req, &prep)) != NULL)
		;
	else if ((p->cg = toolcg_new(p->token, &p->limits,
	    proc_launches(), &req, &msg)) == NULL && msg != NULL)
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
		if ((pid = proc_spawn_child(p, &req, &step)) == -1)
			msg = proc_spawn_error(p, step, errno);
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
	if (p->run == NULL)
		proc_spawn_done(p);

	p->pid = pid;
	p->pgid = pid;
	toolcg_started(p->cg, pid);
	if (req.ns != NULL)
		p->mntns = proc_hold_mntns(pid);
	sentinel_watch(p->pgid);
	p->started = true;
	proc_nrunning++;
	if (!p->detached) {
		p->slot = true;
		proc_nslots++;
	}
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	/* A waited spawn returns after the exec; a launched one may not yet. */
	if (p->run == NULL)
		proc_exec_happened(p);
	else {
		proc_nlaunched++;
		proc_nlaunching++;
	}
	reaper_add(pid, proc_exited, p);
	p->capture = capture_create(p->max_output, proc_output_dir, p->name,
	    (long)pid, p->token);
	capture_limit_file(p->capture, proc_cfg.output_file_max);
	if (p->as_user)
		capture_set_owner(p->capture, p->user.uid, p->user.gid);

	/* Most inputs fit the pipe: write now, wait for room only if not. */
	proc_write_cb(-1, 0, p);
	proc_watch(p);
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
	/*
	 * From now, not from the loop pass's cached time: a busy pass made a
	 * timeout (S16) or a kill grace fire early by what it had spent.
	 */
	event_base_update_cache_time(proc_base);
	evtimer_add(ev, &tv);
}

/*
 * Go on with the end in this loop pass, not the next: a timer of 0 would
 * cost another epoll_wait. Not for a step that waits on something (those
 * keep their timer, so that the loop turns meanwhile).
 */
static void
proc_end_now(struct proc *p)
{
	evtimer_del(p->end_timer);
	event_active(p->end_timer, EV_TIMEOUT, 1);
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
	/*
	 * A tool's group is its own: never 0, 1 or the daemon's, whatever a
	 * corrupt handover record may name (kill(-1) reaches every process).
	 */
	if (p->pgid <= 1 || p->pgid == getpgrp())
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
	if (p->input_off < p->input_len || p->stdin_eof) {
		proc_close_stdin(p);
		return;
	}
	/* All written, more may come (proc_write): stop waiting for room. */
	if (p->in_ev != NULL)
		event_del(p->in_ev);
	p->input_len = p->input_off = 0;
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
	p->stdin_stream = false;
}

static void
proc_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct proc_pipe *pp = arg;

	(void)fd;
	(void)events;
	proc_check_exec(pp->p);
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
			proc_pipe_ended(pp);
			/* All EOF during the grace: no need to wait longer. */
			if (p->state == PROC_GRACE && proc_pipes_closed(p))
				proc_end_now(p);
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
	int fd = pp->fd;

	if (fd == -1)
		return;
	proc_pipe_ended(pp);
	close(fd);
	pp->spent = -1;
}

/*
 * No more to read: no writer is left (EOF), or we stop. The descriptor is
 * kept until the result is out (proc_close_spent): closing a pipe frees its
 * buffers and inode, a few microseconds of each tool's way to its result.
 */
static void
proc_pipe_ended(struct proc_pipe *pp)
{
	struct proc *p = pp->p;

	if (pp->ev != NULL)
		event_del(pp->ev);
	if (pp->fd != -1) {
		pp->spent = pp->fd;
		pp->fd = -1;
	}
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
	const char *step;
	int error;

	(void)pid;
	p->status = status;
	p->duration_ms = proc_elapsed_ms(&p->start);
	p->pid = 0;
	/* Launched without waiting: it may have failed before its exec. */
	if (p->run != NULL) {
		if (spawn_run_state(p->run, 0) == SPAWN_RUN_EXECD)
			proc_exec_happened(p);
		else if ((error = spawn_run_error(p->run, &step)) != 0)
			p->error = proc_spawn_error(p, step, error);
		proc_spawn_done(p);
	}
	p->state = PROC_GRACE;
	evtimer_del(p->timer);
	evtimer_del(p->limit_timer);
	proc_close_stdin(p);
	if (proc_over_limit(p) || p->killed || proc_pipes_closed(p))
		proc_end_now(p);
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

	/*
	 * Its own cgroup holds all of it: empty is gone, nothing to kill
	 * (the zombies of any that left it are reaped on their SIGCHLD).
	 */
	if (toolcg_supervises() && p->cg != NULL &&
	    toolcg_populated(p->cg) == 0)
		return true;
	reaper_reap();
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
	if (p->slot)
		proc_nslots--;
	p->slot = false;
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
		toolcg_usage(p->cg, &e.peak_measured, &e.peak_memory,
		    &e.cpu_measured, &e.cpu_ms);
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
		if (!proc_launches() && proc_after_ev != NULL)
			event_active(proc_after_ev, EV_TIMEOUT, 1);
		if (proc_base == NULL)
			break;
	}
}

/*
 * Close a spent pipe end after the notes queued so far are written: the
 * event runs behind the journal's and the connections' flushes, which the
 * exit callback has just queued, so the result goes out first.
 */
static void
proc_close_spent(int fd)
{
	if (proc_after_ev == NULL) {
		close(fd);
		return;
	}
	if (proc_nspent == proc_spent_cap) {
		proc_spent_cap = proc_spent_cap != 0 ? 2 * proc_spent_cap : 16;
		proc_spent = xreallocarray(proc_spent, proc_spent_cap,
		    sizeof *proc_spent);
	}
	proc_spent[proc_nspent++] = fd;
	event_active(proc_after_ev, EV_TIMEOUT, 1);
}

static void
proc_after_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	proc_close_spent_now();
	if (!proc_launches() && proc_nlaunching == 0)
		pipes_fill();
}

static void
proc_close_spent_now(void)
{
	while (proc_nspent > 0)
		close(proc_spent[--proc_nspent]);
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
		if (p->pipes[i].spent != -1)
			proc_close_spent(p->pipes[i].spent);
	}
	event_free(p->timer);
	event_free(p->end_timer);
	event_free(p->limit_timer);
	toolcg_free(p->cg);
	capture_free(p->capture, keep_file);
	/*
	 * A launched child reads argv and envp, and its run, until its
	 * execve: they go once it is reaped (at shutdown reaper_kill_all has
	 * reaped them all; one that would not die, in the kernel, keeps them).
	 */
	if (p->run != NULL)
		proc_nlaunching--;
	if (p->run == NULL || p->pid <= 0 ||
	    waitpid(p->pid, NULL, WNOHANG) != 0) {
		proc_free_strv(p->argv);
		proc_free_strv(p->envp);
		spawn_run_free(p->run);
	}
	buf_free(&p->line);
	free(p->input);
	/* Workspace-write added its areas to the ruleset (sandbox.h). */
	if (p->tmpdir_ruleset != -1 &&
	    p->sandbox.profile == SANDBOX_WORKSPACE_WRITE) {
		close(p->tmpdir_ruleset);
		p->tmpdir_ruleset = -1;
	}
	if (p->tmpdir_made)
		tmpdir_give(p->tmpdir, p->tmpdir_ruleset, p->mntns);
	else {
		if (p->tmpdir_ruleset != -1)
			close(p->tmpdir_ruleset);
		if (p->mntns != -1)
			close(p->mntns);
		free(p->tmpdir);
	}
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
		proc_end_now(p);
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
proc_usage(const struct proc *p, bool *has_peak, uint64_t *peak,
    bool *has_cpu, uint64_t *cpu_ms)
{
	toolcg_usage(p->cg, has_peak, peak, has_cpu, cpu_ms);
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
	proc_check_execs();
	return proc_nstarted;
}

void
proc_count_execs(void)
{
	proc_check_execs();
}

bool
proc_execd(struct proc *p)
{
	proc_check_exec(p);
	return p->execd;
}

uint64_t
proc_launched(void)
{
	return proc_nlaunched;
}

int
proc_write(struct proc *p, const char *data, size_t len, bool eof,
    const char **why)
{
	if (!p->stdin_stream || p->stdin_eof || p->state > PROC_RUNNING) {
		*why = "its stdin is closed";
		return -1;
	}
	if (p->input_len - p->input_off + len + (eof && p->tty) >
	    PROC_STDIN_MAX) {
		*why = PROC_STDIN_FULL;
		return -1;
	}
	proc_append(p, data, len, eof);
	if (p->state == PROC_RUNNING) {
		proc_write_cb(-1, 0, p);
		if (p->in_fd != -1 && p->input_len > 0)
			event_add(p->in_ev, NULL);
	}
	return 0;
}

/* More for its stdin after what is left; eof: close it after them. */
static void
proc_append(struct proc *p, const char *data, size_t len, bool eof)
{
	size_t left = p->input_len - p->input_off;

	if (left > 0 && p->input_off > 0)
		memmove(p->input, p->input + p->input_off, left);
	/* A terminal's EOF is the character its line discipline reads so. */
	p->input = xrealloc(p->input, left + len + 1);
	if (len > 0)
		memcpy(p->input + left, data, len);
	if (eof && p->tty)
		p->input[left + len++] = '\004';
	p->input_len = left + len;
	p->input_off = 0;
	p->stdin_eof = eof && !p->tty;
}

void
proc_signal(struct proc *p, int sig)
{
	if (p->state == PROC_RUNNING && !p->killed)
		proc_signal_group(p, sig);
}

int
proc_signal_fg(struct proc *p, int sig)
{
	pid_t pg;

	if (p->state != PROC_RUNNING || p->killed || !p->tty ||
	    p->pipes[0].fd == -1 || (pg = tcgetpgrp(p->pipes[0].fd)) <= 0)
		return -1;
	return kill(-pg, sig) == 0 ? (int)pg : -1;
}

int
proc_resize(struct proc *p, unsigned cols, unsigned rows)
{
	struct winsize ws = { .ws_row = (unsigned short)rows,
	    .ws_col = (unsigned short)cols };

	if (!p->tty)
		return -1;
	p->cols = cols;
	p->rows = rows;
	/* The kernel sends SIGWINCH to the terminal's foreground group. */
	if (p->pipes[0].fd != -1)
		ioctl(p->pipes[0].fd, TIOCSWINSZ, &ws);
	return 0;
}

void
proc_detach(struct proc *p)
{
	p->detached = true;
	p->timeout_ms = 0;
	if (!p->term_sent)
		evtimer_del(p->timer);
	if (p->slot) {
		p->slot = false;
		proc_nslots--;
		proc_start_queued();
	}
}

void
proc_rebind(struct proc *p, const struct proc_ops *ops, void *arg)
{
	/* A start that already happened goes to the ops it happened under. */
	proc_check_exec(p);
	p->ops = *ops;
	p->arg = arg;
}

void
proc_await_execs(int64_t ms)
{
	struct timespec t0, now;
	struct proc *p;
	int64_t ns;

	if (proc_nlaunching == 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	TAILQ_FOREACH(p, &proc_all, all_entry) {
		if (p->run == NULL || p->execd)
			continue;
		/* ms in all: what is left of it. */
		clock_gettime(CLOCK_MONOTONIC, &now);
		ns = ms * 1000000 - ((int64_t)(now.tv_sec - t0.tv_sec) *
		    1000000000 + (now.tv_nsec - t0.tv_nsec));
		if (spawn_run_state(p->run, ns > 0 ? ns : 0) ==
		    SPAWN_RUN_EXECD)
			proc_check_exec(p);
	}
}

bool
proc_settled(void)
{
	struct proc *p;

	TAILQ_FOREACH(p, &proc_all, all_entry) {
		if (p->state != PROC_QUEUED && p->state != PROC_RUNNING)
			return false;
	}
	return true;
}

bool
proc_carried(const struct proc *p)
{
	return p->state == PROC_RUNNING && p->started;
}

/* ms until ev fires; -1 when it is not pending. */
static int64_t
proc_timer_left(struct event *ev)
{
	struct timeval at, now;
	int64_t ms;

	if (!evtimer_pending(ev, &at))
		return -1;
	gettimeofday(&now, NULL);
	ms = (int64_t)(at.tv_sec - now.tv_sec) * 1000 +
	    (at.tv_usec - now.tv_usec) / 1000;
	return ms < 0 ? 0 : ms;
}

/*
 * A launched child's failure before its exec is in this image's memory
 * only: it goes along as the tool's error (proc_await_execs has waited for
 * those still before their exec).
 */
static void
proc_save_spawn(struct proc *p, json_t *o)
{
	enum spawn_run_state st;
	const char *step;
	char *msg;
	int error;

	proc_check_exec(p);
	if (p->run == NULL)
		return;
	if ((st = spawn_run_state(p->run, 0)) == SPAWN_RUN_BEFORE) {
		log_warn("reload: tool %s (pid %ld) is still before its exec: "
		    "should that fail, the next image reports exit 127",
		    p->name, (long)p->pid);
		return;
	}
	if (st == SPAWN_RUN_FAILED &&
	    (error = spawn_run_error(p->run, &step)) != 0) {
		msg = proc_spawn_error(p, step, error);
		log_debug("reload: tool %s (pid %ld) failed before its exec, "
		    "handed over with its error: %s", p->name, (long)p->pid,
		    msg);
		json_object_set_new(o, "spawnError", json_string(msg));
		free(msg);
	}
}

void
proc_save(struct proc *p, struct handover_rec *r, json_t *o)
{
	json_t *cap = json_object(), *pipes = json_array();
	size_t i;

	json_object_set_new(o, "pid", json_integer(p->pid));
	json_object_set_new(o, "pgid", json_integer(p->pgid));
	json_object_set_new(o, "token", json_integer((json_int_t)p->token));
	json_object_set_new(o, "name", json_string(p->name));
	/* CLOCK_MONOTONIC goes on across execve: the start as it is. */
	json_object_set_new(o, "start", json_pack("[I, I]", (json_int_t)
	    p->start.tv_sec, (json_int_t)p->start.tv_nsec));
	json_object_set_new(o, "timeoutMs", json_integer(p->timeout_ms));
	json_object_set_new(o, "timerLeft", json_integer(
	    proc_timer_left(p->timer)));
	json_object_set_new(o, "termSent", json_boolean(p->term_sent));
	json_object_set_new(o, "killed", json_boolean(p->killed));
	json_object_set_new(o, "timedOut", json_boolean(p->timed_out));
	json_object_set_new(o, "hit", json_integer(p->hit));
	json_object_set_new(o, "hitLimit", json_integer((json_int_t)
	    p->hit_limit));
	json_object_set_new(o, "streamOutput", json_boolean(p->stream_output));
	json_object_set_new(o, "maxOutput", json_integer((json_int_t)
	    p->max_output));
	json_object_set_new(o, "profile", json_integer(p->sandbox.profile));
	if (p->tmpdir != NULL)
		json_object_set_new(o, "tmpdir", json_string(p->tmpdir));
	json_object_set_new(o, "tmpdirMade", json_boolean(p->tmpdir_made));
	json_object_set_new(o, "inFd", json_integer(p->in_fd));
	json_object_set_new(o, "stdin", json_pack("{s:b, s:b, s:b, s:i, s:i}",
	    "stream", p->stdin_stream, "eof", p->stdin_eof, "tty", p->tty,
	    "cols", (int)p->cols, "rows", (int)p->rows));
	json_object_set_new(o, "detached", json_boolean(p->detached));
	proc_save_spawn(p, o);
	handover_keep_fd(p->in_fd);
	handover_put(r, o, "input", p->input != NULL ? p->input +
	    p->input_off : NULL, p->input_len - p->input_off);
	for (i = 0; i < nitems(p->pipes); i++) {
		json_array_append_new(pipes, json_integer(p->pipes[i].fd));
		handover_keep_fd(p->pipes[i].fd);
	}
	json_object_set_new(o, "pipes", pipes);
	handover_put(r, o, "line", p->line.data, p->line.len);
	json_object_set_new(o, "lineCut", json_boolean(p->line_cut));
	json_object_set_new(o, "cg", toolcg_save(p->cg));
	capture_save(p->capture, r, cap);
	json_object_set_new(o, "capture", cap);
}

char *
proc_handover_env(void)
{
	pid_t spid = 0;
	int sfd = -1;
	json_t *o;
	char *text;

	toolcg_handover();
	if (!sentinel_handover(&spid, &sfd))
		spid = 0;
	o = json_pack("{s:s, s:I, s:I, s:i, s:i, s:s?, s:s?}", "instance",
	    proc_instance, "next", (json_int_t)proc_next_token, "tmpdirs",
	    (json_int_t)tmpdir_handover(), "sentinel",
	    (int)spid, "sentinelFd", sfd, "cgroup", cgroup_path(), "parent",
	    cgroup_parent_path());
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* The image before's tokens, sentinel and subtree; false: none usable. */
static bool
proc_take_handover(const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	const char *inst = json_string_value(json_object_get(o, "instance"));
	const char *cg = json_string_value(json_object_get(o, "cgroup"));
	const char *parent = json_string_value(json_object_get(o, "parent"));
	int sfd = (int)json_integer_value(json_object_get(o, "sentinelFd"));
	pid_t spid = (pid_t)json_integer_value(json_object_get(o, "sentinel"));

	if (inst == NULL || strlen(inst) >= sizeof proc_instance) {
		json_decref(o);
		return false;
	}
	snprintf(proc_instance, sizeof proc_instance, "%s", inst);
	proc_next_token = (uint64_t)json_integer_value(json_object_get(o,
	    "next"));
	proc_tmpdirs = (uint64_t)json_integer_value(json_object_get(o,
	    "tmpdirs"));
	if (spid > 0 && sfd >= 0 && handover_claim_fd(sfd))
		sentinel_adopt(spid, sfd);
	if (cg != NULL && parent != NULL && !proc_cfg.no_cgroup)
		cgroup_adopt(cg, parent);
	json_decref(o);
	return true;
}

struct proc *
proc_adopt(const struct handover_in *in, const json_t *o,
    const struct proc_ops *ops, void *arg)
{
	const json_t *start = json_object_get(o, "start"), *stdin_o;
	const char *data;
	struct proc *p;
	int64_t left;
	size_t i, n;

	p = xcalloc(1, sizeof *p);
	p->tmpdir_ruleset = p->mntns = -1;
	p->token = (uint64_t)json_integer_value(json_object_get(o, "token"));
	p->name = xstrdup(json_string_value(json_object_get(o, "name")) !=
	    NULL ? json_string_value(json_object_get(o, "name")) : "proc");
	p->pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
	p->pgid = (pid_t)json_integer_value(json_object_get(o, "pgid"));
	p->start.tv_sec = (time_t)json_integer_value(json_array_get(start, 0));
	p->start.tv_nsec = (long)json_integer_value(json_array_get(start, 1));
	p->timeout_ms = json_integer_value(json_object_get(o, "timeoutMs"));
	p->term_sent = json_is_true(json_object_get(o, "termSent"));
	p->killed = json_is_true(json_object_get(o, "killed"));
	p->timed_out = json_is_true(json_object_get(o, "timedOut"));
	p->hit = (enum toolcg_hit)json_integer_value(json_object_get(o,
	    "hit"));
	p->hit_limit = (uint64_t)json_integer_value(json_object_get(o,
	    "hitLimit"));
	p->stream_output = json_is_true(json_object_get(o, "streamOutput"));
	p->max_output = (size_t)json_integer_value(json_object_get(o,
	    "maxOutput"));
	p->sandbox.profile = (enum sandbox_profile)json_integer_value(
	    json_object_get(o, "profile"));
	if (json_string_value(json_object_get(o, "tmpdir")) != NULL)
		p->tmpdir = xstrdup(json_string_value(json_object_get(o,
		    "tmpdir")));
	p->tmpdir_made = json_is_true(json_object_get(o, "tmpdirMade"));
	p->in_fd = handover_take_fd(json_object_get(o, "inFd"));
	stdin_o = json_object_get(o, "stdin");
	p->stdin_stream = json_is_true(json_object_get(stdin_o, "stream"));
	p->stdin_eof = json_is_true(json_object_get(stdin_o, "eof"));
	p->tty = json_is_true(json_object_get(stdin_o, "tty"));
	p->cols = (unsigned)json_integer_value(json_object_get(stdin_o,
	    "cols"));
	p->rows = (unsigned)json_integer_value(json_object_get(stdin_o,
	    "rows"));
	p->detached = json_is_true(json_object_get(o, "detached"));
	data = handover_get(in, o, "input", &n);
	if (n > 0) {
		p->input = xmalloc(n);
		memcpy(p->input, data, n);
		p->input_len = n;
	}
	for (i = 0; i < nitems(p->pipes); i++) {
		p->pipes[i].p = p;
		p->pipes[i].which = (int)i + 1;
		p->pipes[i].spent = -1;
		p->pipes[i].fd = handover_take_fd(json_array_get(json_object_get(o,
		    "pipes"), i));
	}
	data = handover_get(in, o, "line", &n);
	buf_add(&p->line, data, n);
	p->line_cut = json_is_true(json_object_get(o, "lineCut"));
	p->cg = toolcg_load(json_object_get(o, "cg"));
	p->capture = capture_load(in, json_object_get(o, "capture"));
	p->ops = *ops;
	p->arg = arg;
	proc_events(p);
	p->state = PROC_RUNNING;
	p->started = true;
	/* Counted by the image before; a failure before its exec is carried. */
	p->execd = true;
	if (json_string_value(json_object_get(o, "spawnError")) != NULL)
		p->error = xstrdup(json_string_value(json_object_get(o,
		    "spawnError")));
	proc_nrunning++;
	if (!p->detached) {
		p->slot = true;
		proc_nslots++;
	}
	reaper_add(p->pid, proc_exited, p);
	if (p->in_fd != -1)
		fcntl(p->in_fd, F_SETFL, O_NONBLOCK);
	proc_watch(p);
	/* The deadline as time left, or the KILL after the TERM. */
	if ((left = json_integer_value(json_object_get(o, "timerLeft"))) >= 0 &&
	    json_is_integer(json_object_get(o, "timerLeft")))
		proc_add_timer(p->timer, left);
	if (toolcg_watched(p->cg))
		proc_add_timer(p->limit_timer, PROC_LIMIT_POLL_MS);
	return p;
}

void
proc_adopted(void)
{
	/* What ended while the images changed: its status waits for us. */
	reaper_reap();
}
