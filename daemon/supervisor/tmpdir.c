/* TMPDIRs made ahead, and taken back for reuse, by a worker thread. */
#include "supervisor/tmpdir.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <dirent.h>
#include <fcntl.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "supervisor/sandbox.h"
#include "util.h"

#define TMPDIR_AHEAD 8
/* Ready ones kept, made or taken back; and given back, waiting. */
#define TMPDIR_POOL 16
#define TMPDIR_BACK 64
/*
 * The worker is not woken at each take and give (a futex call on the loop,
 * and a thread scheduled just when the tool's result is on its way). While
 * some wait to be taken back it wakes itself every TMPDIR_QUIET_MS, and
 * takes them all back when the pool is short or no give came for that
 * long, so what a tool left is still removed soon after it. A take wakes
 * it only when this few are left, a give when it sleeps for good or this
 * many wait.
 */
#define TMPDIR_LOW 1
#define TMPDIR_BACKLOG 8
#define TMPDIR_QUIET_MS 10

static pthread_mutex_t tmpdir_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tmpdir_wake = PTHREAD_COND_INITIALIZER;
static pthread_t tmpdir_thread;
static bool tmpdir_running;  /* the worker was started */
static char *tmpdir_parent;  /* OUTDIR/tmp.INSTANCE, made at first need */
static bool tmpdir_made;
/* Under the lock: */
static bool tmpdir_stop;
static uint64_t tmpdir_next;
/*
 * A directory and its ruleset (sandbox_ruleset), or -1; given back, also
 * the mount namespace its tool had (workspace-write), held so that its
 * teardown (an expedited RCU grace period) is the worker's, not the tool's
 * exit's.
 */
struct tmpdir {
	char *path;
	int ruleset;
	int mntns;
};
static struct tmpdir tmpdir_ready[TMPDIR_POOL];
static size_t tmpdir_nready;
static struct tmpdir tmpdir_back[TMPDIR_BACK];
static size_t tmpdir_nback;
static bool tmpdir_broken;   /* mkdir failed: wait for the next take */
static struct timespec tmpdir_last_give; /* CLOCK_MONOTONIC */
static bool tmpdir_timed;    /* the worker wakes itself */

static void	*tmpdir_work(void *);
static bool	tmpdir_clean(const char *);
static void	tmpdir_drop(struct tmpdir *, bool);

void
tmpdir_init(const char *outdir, const char *instance)
{
	xasprintf(&tmpdir_parent, "%s/tmp.%s", outdir, instance);
	tmpdir_made = tmpdir_running = tmpdir_stop = false;
	tmpdir_next = 0;
}

uint64_t
tmpdir_handover(void)
{
	uint64_t next;

	pthread_mutex_lock(&tmpdir_lock);
	tmpdir_stop = true;
	while (tmpdir_nready > 0)
		tmpdir_drop(&tmpdir_ready[--tmpdir_nready], true);
	next = tmpdir_next;
	pthread_mutex_unlock(&tmpdir_lock);
	return next;
}

void
tmpdir_resume(uint64_t next)
{
	tmpdir_next = next;
	tmpdir_made = next > 0;
}

/* A fresh name, under the lock. */
static char *
tmpdir_name(void)
{
	char *path;

	xasprintf(&path, "%s/%" PRIu64, tmpdir_parent, ++tmpdir_next);
	return path;
}

/* Forget a directory (and remove it, empty as it is, if rm). */
static void
tmpdir_drop(struct tmpdir *t, bool rm)
{
	if (rm)
		rmdir(t->path);
	if (t->ruleset != -1)
		close(t->ruleset);
	if (t->mntns != -1)
		close(t->mntns);
	free(t->path);
	t->path = NULL;
	t->ruleset = t->mntns = -1;
}

/* Ready for a tool: with its ruleset, where Landlock is. */
static struct tmpdir
tmpdir_ready_one(struct tmpdir t)
{
	if (t.ruleset == -1 && sandbox_can(SANDBOX_READ_ONLY))
		t.ruleset = sandbox_ruleset(t.path);
	return t;
}

/*
 * Whether a directory a tool had is as good as new: empty, no extended
 * attribute (an ACL is one) that could carry anything to the next tool,
 * ours again and 0700. Else it is removed.
 */
static bool
tmpdir_clean(const char *path)
{
	struct dirent *de;
	struct stat st;
	bool ok = true;
	DIR *d;
	int fd;

	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return false;
	if (fstat(fd, &st) != 0 || flistxattr(fd, NULL, 0) != 0 ||
	    (st.st_uid != geteuid() && fchown(fd, geteuid(), getegid()) != 0) ||
	    ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0) ||
	    (d = fdopendir(fd)) == NULL) {
		close(fd);
		return false;
	}
	while (ok && (de = readdir(d)) != NULL)
		ok = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
	closedir(d);
	return ok;
}

/*
 * Under the lock: whether no give came for TMPDIR_QUIET_MS; else *until
 * is when that will be (CLOCK_MONOTONIC, the worker's condition clock).
 */
static bool
tmpdir_quiet(struct timespec *until)
{
	struct timespec now;

	*until = tmpdir_last_give;
	until->tv_nsec += TMPDIR_QUIET_MS * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > until->tv_sec || (now.tv_sec == until->tv_sec &&
	    now.tv_nsec >= until->tv_nsec);
}

static void *
tmpdir_work(void *arg)
{
	struct timespec until = { 0, 0 };
	struct tmpdir t;
	bool draining = false, timedout = false;
	int error;

	(void)arg;
	pthread_mutex_lock(&tmpdir_lock);
	while (!tmpdir_stop) {
		/*
		 * One given back is reused when a tool left it clean: making
		 * and removing directories is what costs (ext4 scans for
		 * recently deleted inodes at each mkdir). Once begun, all of
		 * them.
		 */
		if (tmpdir_nback > 0 && (draining ||
		    tmpdir_nready <= TMPDIR_LOW ||
		    (timedout && tmpdir_nready < TMPDIR_AHEAD) ||
		    tmpdir_nback >= TMPDIR_BACKLOG || tmpdir_quiet(&until))) {
			draining = true;
			t = tmpdir_back[--tmpdir_nback];
			pthread_mutex_unlock(&tmpdir_lock);
			if (t.mntns != -1)
				close(t.mntns);
			t.mntns = -1;
			if (!tmpdir_clean(t.path)) {
				if (util_rmtree(t.path) != 0 && errno != ENOENT)
					log_warn("cannot remove %s: %s", t.path,
					    strerror(errno));
				tmpdir_drop(&t, false);
			} else
				t = tmpdir_ready_one(t);
			pthread_mutex_lock(&tmpdir_lock);
			if (t.path != NULL && tmpdir_nready < TMPDIR_POOL)
				tmpdir_ready[tmpdir_nready++] = t;
			else if (t.path != NULL) {
				pthread_mutex_unlock(&tmpdir_lock);
				tmpdir_drop(&t, true);
				pthread_mutex_lock(&tmpdir_lock);
			}
			continue;
		}
		draining = timedout = false;
		if (tmpdir_nback > 0) {
			tmpdir_timed = true;
			timedout = pthread_cond_timedwait(&tmpdir_wake,
			    &tmpdir_lock, &until) == ETIMEDOUT;
			tmpdir_timed = false;
			continue;
		}
		if (tmpdir_nready >= TMPDIR_AHEAD || tmpdir_broken) {
			pthread_cond_wait(&tmpdir_wake, &tmpdir_lock);
			continue;
		}
		t.path = tmpdir_name();
		t.ruleset = t.mntns = -1;
		pthread_mutex_unlock(&tmpdir_lock);
		error = mkdir(t.path, 0700) == 0 ? 0 : errno;
		if (error == 0)
			t = tmpdir_ready_one(t);
		pthread_mutex_lock(&tmpdir_lock);
		if (error == 0)
			tmpdir_ready[tmpdir_nready++] = t;
		else {
			/* The spawn that needs one will say why. */
			tmpdir_broken = true;
			free(t.path);
		}
	}
	pthread_mutex_unlock(&tmpdir_lock);
	return NULL;
}

/* Make tmp.INSTANCE and start the worker, at the first tool that needs it. */
static int
tmpdir_start(void)
{
	pthread_condattr_t attr;
	sigset_t all, old;

	/* 0711: another user's tool must reach its own TMPDIR (0700) in it. */
	if (mkdir(tmpdir_parent, 0711) != 0 && errno != EEXIST)
		return -1;
	chmod(tmpdir_parent, 0711);
	tmpdir_made = true;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&tmpdir_wake, &attr);
	pthread_condattr_destroy(&attr);
	/* Signals are the loop's: the worker takes none. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	tmpdir_running = pthread_create(&tmpdir_thread, NULL, tmpdir_work,
	    NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!tmpdir_running)
		log_warn("no TMPDIR worker: sandboxed tools' directories are "
		    "made as they start");
	return 0;
}

char *
tmpdir_take(bool *made, int *ruleset)
{
	char *path;

	/* Without tmp.INSTANCE the tool's own mkdir fails, saying why. */
	if (!tmpdir_made && tmpdir_start() != 0)
		log_warn("cannot create %s: %s", tmpdir_parent,
		    strerror(errno));
	pthread_mutex_lock(&tmpdir_lock);
	*made = tmpdir_nready > 0;
	*ruleset = -1;
	if (*made) {
		path = tmpdir_ready[--tmpdir_nready].path;
		*ruleset = tmpdir_ready[tmpdir_nready].ruleset;
	} else
		path = tmpdir_name();
	if (tmpdir_nready <= TMPDIR_LOW || tmpdir_broken) {
		tmpdir_broken = false;
		pthread_cond_signal(&tmpdir_wake);
	}
	pthread_mutex_unlock(&tmpdir_lock);
	return path;
}

void
tmpdir_give(char *path, int ruleset, int mntns)
{
	pthread_mutex_lock(&tmpdir_lock);
	if (tmpdir_running && tmpdir_nback < TMPDIR_BACK) {
		tmpdir_back[tmpdir_nback++] = (struct tmpdir){ path, ruleset,
		    mntns };
		clock_gettime(CLOCK_MONOTONIC, &tmpdir_last_give);
		if (!tmpdir_timed || tmpdir_nback >= TMPDIR_BACKLOG)
			pthread_cond_signal(&tmpdir_wake);
		path = NULL;
	}
	pthread_mutex_unlock(&tmpdir_lock);
	/* No worker, or it is behind: remove it here. */
	if (path != NULL && mntns != -1)
		close(mntns);
	if (path != NULL && util_rmtree(path) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", path, strerror(errno));
	if (path != NULL && ruleset != -1)
		close(ruleset);
	free(path);
}

void
tmpdir_shutdown(void)
{
	if (tmpdir_running) {
		pthread_mutex_lock(&tmpdir_lock);
		tmpdir_stop = true;
		pthread_cond_signal(&tmpdir_wake);
		pthread_mutex_unlock(&tmpdir_lock);
		pthread_join(tmpdir_thread, NULL);
		tmpdir_running = false;
	}
	while (tmpdir_nready > 0)
		tmpdir_drop(&tmpdir_ready[--tmpdir_nready], false);
	while (tmpdir_nback > 0)
		tmpdir_drop(&tmpdir_back[--tmpdir_nback], false);
	if (tmpdir_made && util_rmtree(tmpdir_parent) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", tmpdir_parent,
		    strerror(errno));
	tmpdir_made = false;
	free(tmpdir_parent);
	tmpdir_parent = NULL;
}
