/* TMPDIRs made ahead by a worker thread. */
#include "supervisor/tmpdir.h"

#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define TMPDIR_AHEAD 4

static pthread_mutex_t tmpdir_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tmpdir_wake = PTHREAD_COND_INITIALIZER;
static pthread_t tmpdir_thread;
static bool tmpdir_running;  /* the worker was started */
static char *tmpdir_parent;  /* OUTDIR/tmp.INSTANCE, made at first need */
static bool tmpdir_made;
/* Under the lock: */
static bool tmpdir_stop;
static uint64_t tmpdir_next;
static char *tmpdir_ready[TMPDIR_AHEAD];
static size_t tmpdir_nready;
static bool tmpdir_broken;   /* mkdir failed: wait for the next take */

static void	*tmpdir_work(void *);

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
	while (tmpdir_nready > 0) {
		rmdir(tmpdir_ready[--tmpdir_nready]);
		free(tmpdir_ready[tmpdir_nready]);
	}
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

static void *
tmpdir_work(void *arg)
{
	char *path;
	int error;

	(void)arg;
	pthread_mutex_lock(&tmpdir_lock);
	while (!tmpdir_stop) {
		if (tmpdir_nready == TMPDIR_AHEAD || tmpdir_broken) {
			pthread_cond_wait(&tmpdir_wake, &tmpdir_lock);
			continue;
		}
		path = tmpdir_name();
		pthread_mutex_unlock(&tmpdir_lock);
		error = mkdir(path, 0700) == 0 ? 0 : errno;
		pthread_mutex_lock(&tmpdir_lock);
		if (error == 0)
			tmpdir_ready[tmpdir_nready++] = path;
		else {
			/* The spawn that needs one will say why. */
			tmpdir_broken = true;
			free(path);
		}
	}
	pthread_mutex_unlock(&tmpdir_lock);
	return NULL;
}

/* Make tmp.INSTANCE and start the worker, at the first tool that needs it. */
static int
tmpdir_start(void)
{
	sigset_t all, old;

	/* 0711: another user's tool must reach its own TMPDIR (0700) in it. */
	if (mkdir(tmpdir_parent, 0711) != 0 && errno != EEXIST)
		return -1;
	chmod(tmpdir_parent, 0711);
	tmpdir_made = true;
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
tmpdir_take(bool *made)
{
	char *path;

	/* Without tmp.INSTANCE the tool's own mkdir fails, saying why. */
	if (!tmpdir_made && tmpdir_start() != 0)
		log_warn("cannot create %s: %s", tmpdir_parent,
		    strerror(errno));
	pthread_mutex_lock(&tmpdir_lock);
	*made = tmpdir_nready > 0;
	path = *made ? tmpdir_ready[--tmpdir_nready] : tmpdir_name();
	tmpdir_broken = false;
	pthread_cond_signal(&tmpdir_wake);
	pthread_mutex_unlock(&tmpdir_lock);
	return path;
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
		free(tmpdir_ready[--tmpdir_nready]);
	if (tmpdir_made && util_rmtree(tmpdir_parent) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", tmpdir_parent,
		    strerror(errno));
	tmpdir_made = false;
	free(tmpdir_parent);
	tmpdir_parent = NULL;
}
