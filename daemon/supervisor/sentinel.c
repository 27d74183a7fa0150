/* The sentinel: kills what the daemon's tools leave when the daemon dies. */
#include "supervisor/sentinel.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "supervisor/cgroup.h"
#include "handover.h"
#include "log.h"
#include "supervisor/reaper.h"
#include "util.h"

/* Pids are below PID_MAX_LIMIT (4M on 64-bit): a bitmap of 512 KiB. */
#define SENTINEL_PIDS (1U << 22)
/* Sweeps stop after this even if a process will not die (D state). */
#define SENTINEL_SWEEP_MS 10000
/* What a clean stop waits for the sentinel before killing it. */
#define SENTINEL_STOP_MS 30000
/* Unwritten records beyond this: the sentinel does not read; replace it. */
#define SENTINEL_OUT_MAX (1U << 20)
/* A failed restart is tried again after this. */
#define SENTINEL_RETRY_MS 1000

enum sentinel_op {
	SENTINEL_WATCH = 1,  /* arg: a group */
	SENTINEL_FORGET,     /* arg: a group */
	SENTINEL_STOP,       /* arg: 1 if the daemon is still in the cgroup */
};

struct sentinel_msg {
	int32_t op;
	int32_t arg;
};

/* The sentinel's side: what it knows. */
struct sentinel_state {
	uint8_t *groups;    /* bitmap of watched groups */
	bool stopped;       /* a clean stop, not a crash */
	bool spare_cgroup;  /* the daemon could not leave it: do not kill */
};

static int sentinel_spawn(char *, size_t);
static void sentinel_main(int) __attribute__((noreturn));
static void sentinel_detach(int);
static void sentinel_apply(struct sentinel_state *,
    const struct sentinel_msg *);
static void sentinel_finish(struct sentinel_state *);
static int sentinel_sweep(const struct sentinel_state *);
static bool sentinel_watched(const struct sentinel_state *, pid_t);
static void sentinel_unshare(void);
static bool sentinel_ours(pid_t);
static void sentinel_send(enum sentinel_op, pid_t);
static void sentinel_flush(void);
static void sentinel_write_cb(evutil_socket_t, short, void *);
static void sentinel_died(pid_t, int, void *);
static void sentinel_watch_fd(int, pid_t);
static void sentinel_retry_cb(evutil_socket_t, short, void *);
static void sentinel_close(void);
static int64_t sentinel_ms(const struct timespec *);

static struct event_base *sentinel_base;
static char *sentinel_prefix;
static void (*sentinel_replay)(void);
static bool sentinel_in_cgroup;  /* the daemon is in the subtree */
static pid_t sentinel_pid;       /* 0: none running */
static int sentinel_fd = -1;     /* the write end */
static struct event *sentinel_ev;     /* waiting for room in the pipe */
static struct event *sentinel_retry;  /* restart after a failure */
static struct buf sentinel_out;       /* records not written yet */
static size_t sentinel_out_off;
/*
 * The groups bitmap shared with the sentinel this image forked (MAP_SHARED
 * before the fork): the daemon sets and clears its groups there with a
 * store, no write(2) and no wake-up of the sentinel, and a store is there
 * for the sentinel to read however the daemon dies after it (S18). NULL:
 * tell the sentinel by the pipe (one adopted across a reload, or no
 * mapping could be made).
 */
static uint8_t *sentinel_shared;
static pid_t sentinel_adopt_pid;      /* handed over by a reload */
static int sentinel_adopt_fd = -1;

/* Our end of a running sentinel's pipe, and its pid, watched from now on. */
static void
sentinel_watch_fd(int fd, pid_t pid)
{
	fcntl(fd, F_SETFL, O_NONBLOCK);
	sentinel_fd = fd;
	sentinel_pid = pid;
	reaper_add(pid, sentinel_died, NULL);
	sentinel_ev = event_new(sentinel_base, fd, EV_WRITE | EV_PERSIST,
	    sentinel_write_cb, NULL);
	if (sentinel_ev == NULL)
		fatal("event_new failed");
}

int
sentinel_start(struct event_base *base, const char *token_prefix,
    void (*replay)(void), bool use_cgroup, char *err, size_t errlen)
{
	char why[512];

	if (sentinel_base != NULL)
		fatal("sentinel_start called twice");
	sentinel_base = base;
	sentinel_prefix = xstrdup(token_prefix);
	sentinel_replay = replay;
	sentinel_retry = evtimer_new(base, sentinel_retry_cb, NULL);
	if (sentinel_retry == NULL)
		fatal("evtimer_new failed");
	if (sentinel_adopt_fd != -1) {
		/* The subtree is the one the reload handed over too. */
		sentinel_in_cgroup = use_cgroup && cgroup_path() != NULL;
		sentinel_watch_fd(sentinel_adopt_fd, sentinel_adopt_pid);
		sentinel_adopt_fd = -1;
		log_debug("sentinel %ld carried over", (long)sentinel_pid);
		return 0;
	}
	/* In the subtree first: the sentinel moves itself out. */
	if (use_cgroup && cgroup_create(why, sizeof why) != 0)
		log_info("tools are not in a cgroup: %s", why);
	else if (use_cgroup && cgroup_enter(why, sizeof why) != 0) {
		log_warn("tools are not in a cgroup: %s", why);
		cgroup_destroy();
	} else if (use_cgroup) {
		sentinel_in_cgroup = true;
		log_info("tools run in cgroup %s", cgroup_path());
	}
	if (sentinel_spawn(err, errlen) != 0) {
		sentinel_stop();
		return -1;
	}
	return 0;
}

/* Fork a sentinel on a new pipe. -1 with err. */
static int
sentinel_spawn(char *err, size_t errlen)
{
	char name[16] = "";
	int fds[2], error;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "cannot create the sentinel's pipe: %s",
		    strerror(errno));
		return -1;
	}
	/* A new sentinel, a new map: the replay fills it. */
	sentinel_unshare();
	sentinel_shared = mmap(NULL, SENTINEL_PIDS / 8, PROT_READ |
	    PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sentinel_shared == MAP_FAILED)
		sentinel_shared = NULL;
	/*
	 * Born with its name, not renamed once it runs: until then a look at
	 * /proc would take it for one more daemon, or a tool's leftover.
	 */
	prctl(PR_GET_NAME, name);
	prctl(PR_SET_NAME, "stexec-sentinel");
	pid = fork();
	if (pid != 0)
		prctl(PR_SET_NAME, name);
	if (pid == -1) {
		error = errno;
		sentinel_unshare();
		close(fds[0]);
		close(fds[1]);
		snprintf(err, errlen, "cannot fork the sentinel: %s",
		    strerror(error));
		return -1;
	}
	if (pid == 0)
		sentinel_main(fds[0]);
	/* No other child of the daemon (a helper that forks) shares it. */
	if (sentinel_shared != NULL)
		madvise(sentinel_shared, SENTINEL_PIDS / 8, MADV_DONTFORK);
	close(fds[0]);
	sentinel_watch_fd(fds[1], pid);
	log_debug("sentinel %ld started", (long)pid);
	return 0;
}

/* ---- the sentinel process ---------------------------------------------- */

static void
sentinel_main(int fd)
{
	struct sentinel_state st = { 0 };
	struct sentinel_msg msg;
	char buf[4096];
	size_t have = 0, off;
	ssize_t n;

	sentinel_detach(fd);
	st.groups = calloc(SENTINEL_PIDS / 8, 1);
	if (st.groups == NULL) {
		log_error("sentinel: out of memory; tools are guarded by "
		    "their token only");
	}
	for (;;) {
		n = read(3, buf + have, sizeof buf - have);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		for (off = 0; off + sizeof msg <= have; off += sizeof msg) {
			memcpy(&msg, buf + off, sizeof msg);
			sentinel_apply(&st, &msg);
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	sentinel_finish(&st);
	_exit(0);
}

/*
 * Become independent of the daemon: out of its cgroup, its descriptors (the
 * pipe goes to fd 3), its signal handlers and its process group, so that
 * nothing aimed at the daemon reaches the sentinel.
 */
static void
sentinel_detach(int fd)
{
	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT,
	    SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2 };
	struct sigaction sa;
	char why[512];
	sigset_t none;
	size_t i;
	int null;

	if (cgroup_path() != NULL && cgroup_leave(why, sizeof why) != 0) {
		/* Killing the subtree would kill us: rely on the rest. */
		log_error("sentinel: %s", why);
		cgroup_forget();
	}
	if (fd != 3 && dup2(fd, 3) != 3)
		_exit(1);
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		dup2(null, 0);
		dup2(null, 1);
	}
	closefrom(4);
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	for (i = 0; i < nitems(ignored); i++)
		sigaction(ignored[i], &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	prctl(PR_SET_NAME, "stexec-sentinel");
}

static void
sentinel_apply(struct sentinel_state *st, const struct sentinel_msg *msg)
{
	uint32_t g = (uint32_t)msg->arg;

	switch (msg->op) {
	case SENTINEL_WATCH:
		if (st->groups != NULL && g > 0 && g < SENTINEL_PIDS)
			st->groups[g / 8] |= (uint8_t)(1U << (g % 8));
		break;
	case SENTINEL_FORGET:
		if (st->groups != NULL && g > 0 && g < SENTINEL_PIDS)
			st->groups[g / 8] &= (uint8_t)~(1U << (g % 8));
		/* An image after a reload forgets by the pipe what an
		 * image before it watched in the map. */
		if (sentinel_shared != NULL && g > 0 && g < SENTINEL_PIDS)
			__atomic_fetch_and(&sentinel_shared[g / 8],
			    (uint8_t)~(1U << (g % 8)), __ATOMIC_RELAXED);
		break;
	case SENTINEL_STOP:
		st->stopped = true;
		st->spare_cgroup = msg->arg != 0;
		break;
	default:
		break;
	}
}

/* The daemon is gone: kill all that is left of its tools. */
static void
sentinel_finish(struct sentinel_state *st)
{
	struct timespec start, tick = { 0, 1000000 };
	bool cg = cgroup_path() != NULL && !st->spare_cgroup;
	int killed = 0, n;

	if (cg && cgroup_destroy() != 0)
		log_error("sentinel: cannot remove the tools' cgroup: %s",
		    strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* Those killed cannot fork; new ones are found on the next pass. */
	while ((n = sentinel_sweep(st)) > 0) {
		killed += n;
		if (sentinel_ms(&start) > SENTINEL_SWEEP_MS) {
			log_error("sentinel: %d processes of tools do not die",
			    n);
			break;
		}
		nanosleep(&tick, NULL);
	}
	if (!st->stopped)
		log_warn("sentinel: the daemon died; killed its tools (%s%d "
		    "processes by group or token)", cg ? "its cgroup and " :
		    "", killed);
	free(st->groups);
}

/* One pass over /proc: SIGKILL every live process of a tool. */
static int
sentinel_sweep(const struct sentinel_state *st)
{
	pid_t self = getpid(), pid, ppid, pgid;
	struct dirent *de;
	char state, *end;
	int n = 0;
	DIR *d;
	long l;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		l = strtol(de->d_name, &end, 10);
		if (*end != '\0' || l <= 1 || (pid_t)l == self)
			continue;
		pid = (pid_t)l;
		if (reaper_stat(pid, &ppid, &pgid, &state) != 0 ||
		    state == 'Z' || state == 'X')
			continue;
		if (sentinel_watched(st, pgid)) {
			if (kill(pid, SIGKILL) == 0)
				n++;
		} else if (sentinel_ours(pid) && kill(pid, SIGKILL) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Is pgid a group of a tool, by the pipe or by the map? */
static bool
sentinel_watched(const struct sentinel_state *st, pid_t pgid)
{
	uint32_t g = (uint32_t)pgid;
	uint8_t bit = (uint8_t)(1U << (g % 8));

	if (pgid <= 0 || g >= SENTINEL_PIDS)
		return false;
	if (st->groups != NULL && (st->groups[g / 8] & bit) != 0)
		return true;
	return sentinel_shared != NULL &&
	    (__atomic_load_n(&sentinel_shared[g / 8], __ATOMIC_RELAXED) &
	    bit) != 0;
}

/* Does pid carry one of this daemon's tokens? */
static bool
sentinel_ours(pid_t pid)
{
	char value[128];

	if (reaper_getenv(pid, "STEXEC_PROC_TOKEN", value, sizeof value) != 0)
		return false;
	return strncmp(value, sentinel_prefix, strlen(sentinel_prefix)) == 0;
}

/* ---- the daemon's side ------------------------------------------------- */

void
sentinel_watch(pid_t pgid)
{
	sentinel_send(SENTINEL_WATCH, pgid);
}

bool
sentinel_handover(pid_t *pid, int *fd)
{
	ssize_t n;

	if (sentinel_fd == -1 || sentinel_pid == 0)
		return false;
	/* A few records at most: the sentinel reads them at once. */
	fcntl(sentinel_fd, F_SETFL, 0);
	while (sentinel_out_off < sentinel_out.len) {
		n = write(sentinel_fd, sentinel_out.data + sentinel_out_off,
		    sentinel_out.len - sentinel_out_off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		sentinel_out_off += (size_t)n;
	}
	handover_keep_fd(sentinel_fd);
	*pid = sentinel_pid;
	*fd = sentinel_fd;
	return true;
}

void
sentinel_adopt(pid_t pid, int fd)
{
	sentinel_adopt_pid = pid;
	sentinel_adopt_fd = fd;
}

void
sentinel_forget(pid_t pgid)
{
	sentinel_send(SENTINEL_FORGET, pgid);
}

static void
sentinel_send(enum sentinel_op op, pid_t arg)
{
	struct sentinel_msg msg = { (int32_t)op, (int32_t)arg };

	uint32_t g = (uint32_t)arg;
	uint8_t bit = (uint8_t)(1U << (g % 8));

	/* None running: the replay after the restart says it all. */
	if (sentinel_fd == -1)
		return;
	if (sentinel_shared != NULL && arg > 0 && g < SENTINEL_PIDS &&
	    (op == SENTINEL_WATCH || op == SENTINEL_FORGET)) {
		if (op == SENTINEL_WATCH)
			__atomic_fetch_or(&sentinel_shared[g / 8], bit,
			    __ATOMIC_RELAXED);
		else
			__atomic_fetch_and(&sentinel_shared[g / 8],
			    (uint8_t)~bit, __ATOMIC_RELAXED);
		return;
	}
	buf_add(&sentinel_out, &msg, sizeof msg);
	sentinel_flush();
	if (sentinel_out.len - sentinel_out_off > SENTINEL_OUT_MAX) {
		/* Stopped or wedged: memory stays bounded, a new one replays. */
		log_error("sentinel %ld does not read; replacing it",
		    (long)sentinel_pid);
		kill(sentinel_pid, SIGKILL);
		sentinel_close();
	}
}

/* Write what the pipe takes; wait for room for the rest. */
static void
sentinel_flush(void)
{
	ssize_t n;

	while (sentinel_out_off < sentinel_out.len) {
		n = write(sentinel_fd, sentinel_out.data + sentinel_out_off,
		    sentinel_out.len - sentinel_out_off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			event_add(sentinel_ev, NULL);
			return;
		}
		/* EPIPE: it died; the reaper tells us, and we restart. */
		if (n == -1)
			break;
		sentinel_out_off += (size_t)n;
	}
	event_del(sentinel_ev);
	buf_reset(&sentinel_out);
	sentinel_out_off = 0;
}

static void
sentinel_write_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	sentinel_flush();
}

/* From the reaper: the sentinel died while the daemon runs. Replace it. */
static void
sentinel_died(pid_t pid, int status, void *arg)
{
	(void)arg;
	log_error("sentinel %ld died (status %#x); starting another",
	    (long)pid, status);
	sentinel_pid = 0;
	sentinel_close();
	sentinel_retry_cb(-1, 0, NULL);
}

static void
sentinel_retry_cb(evutil_socket_t fd, short events, void *arg)
{
	struct timeval tv = { SENTINEL_RETRY_MS / 1000, 0 };
	char err[512];

	(void)fd;
	(void)events;
	(void)arg;
	if (sentinel_spawn(err, sizeof err) != 0) {
		log_error("%s; trying again", err);
		evtimer_add(sentinel_retry, &tv);
		return;
	}
	if (sentinel_replay != NULL)
		sentinel_replay();
}

/* Drop the map shared with the sentinel (it keeps its own mapping). */
static void
sentinel_unshare(void)
{
	if (sentinel_shared != NULL)
		munmap(sentinel_shared, SENTINEL_PIDS / 8);
	sentinel_shared = NULL;
}

/* Drop the pipe to the sentinel and what was not written to it. */
static void
sentinel_close(void)
{
	sentinel_unshare();
	if (sentinel_ev != NULL)
		event_free(sentinel_ev);
	sentinel_ev = NULL;
	if (sentinel_fd != -1)
		close(sentinel_fd);
	sentinel_fd = -1;
	buf_free(&sentinel_out);
	sentinel_out_off = 0;
}

void
sentinel_stop(void)
{
	struct sentinel_msg msg = { SENTINEL_STOP, 0 };
	struct timespec start, tick = { 0, 1000000 };
	struct pollfd pfd;
	char why[512];
	int status;
	ssize_t n;

	if (sentinel_base == NULL)
		return;
	if (sentinel_in_cgroup && cgroup_leave(why, sizeof why) != 0) {
		log_error("%s; the cgroup %s is left behind", why,
		    cgroup_path());
		msg.arg = 1;
	}
	sentinel_in_cgroup = false;
	if (sentinel_fd != -1) {
		/* Shutdown: wait for room, but not for ever. */
		buf_add(&sentinel_out, &msg, sizeof msg);
		pfd.fd = sentinel_fd;
		pfd.events = POLLOUT;
		while (sentinel_out_off < sentinel_out.len &&
		    poll(&pfd, 1, 1000) > 0) {
			n = write(sentinel_fd, sentinel_out.data +
			    sentinel_out_off, sentinel_out.len -
			    sentinel_out_off);
			if (n > 0)
				sentinel_out_off += (size_t)n;
			else if (n == -1 && errno != EINTR && errno != EAGAIN)
				break;
		}
	}
	sentinel_close();
	/* EOF: it sweeps and exits; kill it only if it takes too long. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (sentinel_pid > 0 && waitpid(sentinel_pid, &status, WNOHANG) ==
	    0) {
		if (sentinel_ms(&start) > SENTINEL_STOP_MS) {
			log_error("sentinel %ld does not exit; killing it",
			    (long)sentinel_pid);
			kill(sentinel_pid, SIGKILL);
			waitpid(sentinel_pid, &status, 0);
			break;
		}
		nanosleep(&tick, NULL);
	}
	if (sentinel_pid > 0)
		reaper_remove(sentinel_pid);
	/* No sentinel to remove the subtree (it could not be restarted). */
	else if (msg.arg == 0 && cgroup_destroy() != 0)
		log_error("cannot remove the tools' cgroup: %s",
		    strerror(errno));
	sentinel_pid = 0;
	cgroup_forget();
	if (sentinel_retry != NULL)
		event_free(sentinel_retry);
	sentinel_retry = NULL;
	free(sentinel_prefix);
	sentinel_prefix = NULL;
	sentinel_replay = NULL;
	sentinel_base = NULL;
}

static int64_t
sentinel_ms(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - since->tv_sec) * 1000 +
	    (now.tv_nsec - since->tv_nsec) / 1000000;
}
