/* Child subreaper: SIGCHLD by signalfd, a waitpid loop, orphans from /proc. */
#include "supervisor/reaper.h"

#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "util.h"

#define REAPER_BUCKETS 64
/* /proc/PID/environ can be up to the exec argument limit; read no more. */
#define REAPER_ENVIRON_MAX (4U << 20)
/* Shutdown gives up on children that will not die (D state) after this. */
#define REAPER_KILL_ALL_MS 10000

struct reaper_entry {
	pid_t pid;
	reaper_cb cb;
	void *arg;
	LIST_ENTRY(reaper_entry) entry;
};
LIST_HEAD(reaper_list, reaper_entry);

static int	reaper_children(void (*)(const struct reaper_orphan *, void *),
		    void *);
static void	reaper_scan_all(void (*)(const struct reaper_orphan *,
		    void *), void *);
static void	reaper_consider(pid_t, void (*)(const struct reaper_orphan *,
		    void *), void *);
static void reaper_signal(evutil_socket_t, short, void *);
static struct reaper_entry *reaper_find(pid_t);
static void reaper_kill_orphan(const struct reaper_orphan *, void *);
static void reaper_kill_child(pid_t);

static struct event *reaper_event;
static int reaper_sigfd = -1;
static struct reaper_list reaper_table[REAPER_BUCKETS];
static pid_t reaper_self;

int
reaper_init(struct event_base *base, char *err, size_t errlen)
{
	sigset_t set;
	size_t i;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		snprintf(err, errlen, "cannot become a child subreaper: %s",
		    strerror(errno));
		return -1;
	}
	for (i = 0; i < nitems(reaper_table); i++)
		LIST_INIT(&reaper_table[i]);
	reaper_self = getpid();
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
	    (reaper_sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) ==
	    -1) {
		snprintf(err, errlen, "cannot read SIGCHLD from a signalfd: %s",
		    strerror(errno));
		return -1;
	}
	reaper_event = event_new(base, reaper_sigfd, EV_READ | EV_PERSIST,
	    reaper_signal, NULL);
	if (reaper_event == NULL || event_add(reaper_event, NULL) != 0) {
		snprintf(err, errlen, "cannot install the SIGCHLD event");
		if (reaper_event != NULL)
			event_free(reaper_event);
		reaper_event = NULL;
		close(reaper_sigfd);
		reaper_sigfd = -1;
		return -1;
	}
	return 0;
}

void
reaper_free(void)
{
	struct reaper_entry *re;
	size_t i;

	if (reaper_event != NULL)
		event_free(reaper_event);
	reaper_event = NULL;
	if (reaper_sigfd != -1)
		close(reaper_sigfd);
	reaper_sigfd = -1;
	for (i = 0; i < nitems(reaper_table); i++) {
		while ((re = LIST_FIRST(&reaper_table[i])) != NULL) {
			LIST_REMOVE(re, entry);
			free(re);
		}
	}
}

static struct reaper_entry *
reaper_find(pid_t pid)
{
	struct reaper_entry *re;

	LIST_FOREACH(re, &reaper_table[(size_t)pid % REAPER_BUCKETS], entry) {
		if (re->pid == pid)
			return re;
	}
	return NULL;
}

void
reaper_add(pid_t pid, reaper_cb cb, void *arg)
{
	struct reaper_entry *re;

	if (reaper_find(pid) != NULL)
		fatal("pid %ld registered twice", (long)pid);
	re = xcalloc(1, sizeof *re);
	re->pid = pid;
	re->cb = cb;
	re->arg = arg;
	LIST_INSERT_HEAD(&reaper_table[(size_t)pid % REAPER_BUCKETS], re,
	    entry);
}

void
reaper_remove(pid_t pid)
{
	struct reaper_entry *re;

	if ((re = reaper_find(pid)) != NULL) {
		LIST_REMOVE(re, entry);
		free(re);
	}
}

static void
reaper_signal(evutil_socket_t fd, short events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	/* One SIGCHLD is pending at most; the loop below reaps them all. */
	if (read(fd, &si, sizeof si) == -1 && errno != EAGAIN)
		log_warn("SIGCHLD: cannot read the signalfd: %s",
		    strerror(errno));
	reaper_reap();
}

void
reaper_reap(void)
{
	struct reaper_entry *re;
	reaper_cb cb;
	void *arg;
	pid_t pid;
	int status;

	for (;;) {
		pid = waitpid(-1, &status, WNOHANG);
		if (pid == -1 && errno == EINTR)
			continue;
		if (pid <= 0)
			break;
		if ((re = reaper_find(pid)) == NULL)
			continue;
		/* Unregister first: the callback may register a new pid. */
		cb = re->cb;
		arg = re->arg;
		LIST_REMOVE(re, entry);
		free(re);
		cb(pid, status, arg);
	}
}

int
reaper_stat(pid_t pid, pid_t *ppid, pid_t *pgid, char *state)
{
	char path[64], line[1024], *p;
	long pp, pg;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, line, sizeof line - 1);
	close(fd);
	if (n <= 0)
		return -1;
	line[n] = '\0';
	/* The command name may hold spaces and ')': skip to the last one. */
	if ((p = strrchr(line, ')')) == NULL)
		return -1;
	if (sscanf(p + 1, " %c %ld %ld", state, &pp, &pg) != 3)
		return -1;
	*ppid = (pid_t)pp;
	*pgid = (pid_t)pg;
	return 0;
}

void
reaper_orphans(void (*cb)(const struct reaper_orphan *, void *), void *arg)
{
	/* Re-parented processes are our children: ask the kernel for those
	 * (one small file per thread) rather than read every process. */
	if (reaper_children(cb, arg) == 0)
		return;
	reaper_scan_all(cb, arg);
}

/* A child that is not a registered pid: report it. */
static void
reaper_consider(pid_t pid, void (*cb)(const struct reaper_orphan *, void *),
    void *arg)
{
	struct reaper_orphan ro;
	pid_t ppid, pgid;
	char state;

	if (pid == reaper_self || reaper_find(pid) != NULL)
		return;
	if (reaper_stat(pid, &ppid, &pgid, &state) != 0 ||
	    ppid != reaper_self)
		return;
	ro.pid = pid;
	ro.pgid = pgid;
	ro.zombie = (state == 'Z' || state == 'X');
	cb(&ro, arg);
}

/*
 * Our children, from the main thread's /proc children file: the kernel
 * gives re-parented orphans to a subreaper's first live thread, the main
 * one. -1 if the kernel has no such file (CONFIG_PROC_CHILDREN).
 */
static int
reaper_children(void (*cb)(const struct reaper_orphan *, void *), void *arg)
{
	char path[64], chunk[4096], *p, *end;
	struct buf list = { 0 };
	ssize_t n;
	long l;
	int fd;

	snprintf(path, sizeof path, "/proc/self/task/%ld/children",
	    (long)reaper_self);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	/* The whole list first: a pid may straddle two reads. */
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		buf_add(&list, chunk, (size_t)n);
	close(fd);
	for (p = list.data; p != NULL && *p != '\0'; p = end) {
		l = strtol(p, &end, 10);
		if (end == p) {
			end++;
			continue;
		}
		if (l > 0)
			reaper_consider((pid_t)l, cb, arg);
	}
	buf_free(&list);
	return 0;
}

/* Every process, for kernels without the children files. */
static void
reaper_scan_all(void (*cb)(const struct reaper_orphan *, void *), void *arg)
{
	struct dirent *de;
	char *end;
	DIR *d;
	long l;

	if ((d = opendir("/proc")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		l = strtol(de->d_name, &end, 10);
		if (*end != '\0' || l <= 0)
			continue;
		reaper_consider((pid_t)l, cb, arg);
	}
	closedir(d);
}

int
reaper_getenv(pid_t pid, const char *name, char *value, size_t len)
{
	struct buf b = { 0 };
	char path[64], chunk[16384];
	size_t nlen = strlen(name), off;
	const char *s;
	ssize_t n;
	int fd, found = -1;

	snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (b.len < REAPER_ENVIRON_MAX) {
		n = read(fd, chunk, sizeof chunk);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf_add(&b, chunk, (size_t)n);
	}
	close(fd);
	for (off = 0; off < b.len; off += strlen(s) + 1) {
		s = b.data + off;
		if (strncmp(s, name, nlen) == 0 && s[nlen] == '=') {
			snprintf(value, len, "%s", s + nlen + 1);
			found = 0;
			break;
		}
	}
	buf_free(&b);
	return found;
}

static void
reaper_kill_child(pid_t pid)
{
	kill(pid, SIGKILL);
}

static void
reaper_kill_orphan(const struct reaper_orphan *ro, void *arg)
{
	(void)arg;
	if (!ro->zombie)
		reaper_kill_child(ro->pid);
}

void
reaper_kill_all(void)
{
	struct timespec ts = { 0, 1000000 };
	struct reaper_entry *re;
	pid_t pid;
	size_t i;
	int waited, status;

	for (waited = 0; waited < REAPER_KILL_ALL_MS; waited++) {
		for (i = 0; i < nitems(reaper_table); i++) {
			LIST_FOREACH(re, &reaper_table[i], entry)
				reaper_kill_child(re->pid);
		}
		reaper_orphans(reaper_kill_orphan, NULL);
		/* Reap without callbacks: this is shutdown. */
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			reaper_remove(pid);
		if (pid == -1 && errno == ECHILD)
			break;
		nanosleep(&ts, NULL);
	}
}
