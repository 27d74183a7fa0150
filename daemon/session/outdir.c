/* Whole-output files: owned by sessions, kept under a budget. See outdir.h. */
#include "session/outdir.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Removed files a set remembers; older ones are forgotten. */
#define OUTDIR_REMOVED_MAX 1024

struct outfile {
	char *path;
	char *tool_use_id;          /* NULL for a file left by an earlier run */
	uint64_t bytes;
	time_t mtime;               /* for ordering the leftovers */
	const char *removed;        /* NULL while on disk, else why */
	struct outdir_set *set;     /* NULL: a leftover */
	TAILQ_ENTRY(outfile) age;   /* on disk, oldest first */
	TAILQ_ENTRY(outfile) owned; /* in its set, in the order written */
};
TAILQ_HEAD(outfile_list, outfile);

struct outdir_set {
	struct outfile_list files;
	size_t nremoved;
	struct event *grace;
	TAILQ_ENTRY(outdir_set) entry; /* released, waiting for the grace */
};
TAILQ_HEAD(outdir_set_list, outdir_set);

static struct event_base *outdir_base;
static uint64_t outdir_budget, outdir_total;
static struct outfile_list outdir_age = TAILQ_HEAD_INITIALIZER(outdir_age);
static struct outdir_set_list outdir_released =
    TAILQ_HEAD_INITIALIZER(outdir_released);

static void	outdir_adopt(const char *);
static int	outdir_by_mtime(const void *, const void *);
static void	outdir_enforce(struct outfile *);
static void	outdir_remove(struct outfile *, const char *);
static void	outdir_forget(struct outfile *);
static void	outdir_grace_cb(evutil_socket_t, short, void *);
static void	outdir_set_free(struct outdir_set *);

void
outdir_init(struct event_base *base, const char *dir, uint64_t budget)
{
	outdir_base = base;
	outdir_budget = budget;
	outdir_adopt(dir);
	outdir_enforce(NULL);
}

uint64_t
outdir_file_max(void)
{
	return outdir_budget;
}

uint64_t
outdir_bytes(void)
{
	return outdir_total;
}

static int
outdir_by_mtime(const void *a, const void *b)
{
	const struct outfile *x = *(struct outfile *const *)a;
	const struct outfile *y = *(struct outfile *const *)b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Files an earlier daemon left (a crash): counted, and the first to go. */
static void
outdir_adopt(const char *dir)
{
	struct outfile **found = NULL, *f;
	struct dirent *de;
	struct stat st;
	size_t n = 0, cap = 0, i, len;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len < 5 ||
		    strcmp(de->d_name + len - 4, ".out") != 0 ||
		    fstatat(dirfd(d), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		f = xcalloc(1, sizeof *f);
		xasprintf(&f->path, "%s/%s", dir, de->d_name);
		f->bytes = (uint64_t)st.st_size;
		f->mtime = st.st_mtime;
		if (n == cap) {
			cap = cap > 0 ? cap * 2 : 16;
			found = xreallocarray(found, cap, sizeof *found);
		}
		found[n++] = f;
	}
	closedir(d);
	if (n == 0)
		return;
	qsort(found, n, sizeof *found, outdir_by_mtime);
	for (i = 0; i < n; i++) {
		TAILQ_INSERT_TAIL(&outdir_age, found[i], age);
		outdir_total += found[i]->bytes;
	}
	log_info("%zu output files (%llu bytes) left in %s by an earlier "
	    "run count toward --output-budget", n,
	    (unsigned long long)outdir_total, dir);
	free(found);
}

struct outdir_set *
outdir_set_new(void)
{
	struct outdir_set *set = xcalloc(1, sizeof *set);

	TAILQ_INIT(&set->files);
	return set;
}

void
outdir_add(struct outdir_set *set, const char *path, uint64_t bytes,
    const char *tool_use_id)
{
	struct outfile *f = xcalloc(1, sizeof *f);

	f->path = xstrdup(path);
	f->tool_use_id = xstrdup(tool_use_id);
	f->bytes = bytes;
	f->set = set;
	TAILQ_INSERT_TAIL(&set->files, f, owned);
	TAILQ_INSERT_TAIL(&outdir_age, f, age);
	outdir_total += bytes;
	outdir_enforce(f);
}

/*
 * Over the budget: remove the oldest files, but never keep. Their sets
 * remember them (the oldest such records are forgotten past a bound).
 */
static void
outdir_enforce(struct outfile *keep)
{
	struct outfile *f, *old;

	while (outdir_budget > 0 && outdir_total > outdir_budget &&
	    (f = TAILQ_FIRST(&outdir_age)) != NULL && f != keep) {
		outdir_remove(f, "budget");
		if (f->set == NULL) {
			free(f->path);
			free(f);
		} else if (++f->set->nremoved > OUTDIR_REMOVED_MAX) {
			TAILQ_FOREACH(old, &f->set->files, owned)
				if (old->removed != NULL)
					break;
			outdir_forget(old);
		}
	}
}

/* Off the disk and out of the budget; f->removed says why. */
static void
outdir_remove(struct outfile *f, const char *why)
{
	if (unlink(f->path) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", f->path, strerror(errno));
	else
		log_debug("removed %s (%s)", f->path, why);
	TAILQ_REMOVE(&outdir_age, f, age);
	outdir_total -= f->bytes;
	f->removed = why;
}

/* Drop a removed file's record from its set. */
static void
outdir_forget(struct outfile *f)
{
	TAILQ_REMOVE(&f->set->files, f, owned);
	f->set->nremoved--;
	free(f->path);
	free(f->tool_use_id);
	free(f);
}

void
outdir_set_release(struct outdir_set *set, unsigned grace_ms)
{
	struct timeval tv = { (time_t)(grace_ms / 1000),
		(suseconds_t)(grace_ms % 1000) * 1000 };

	if (set == NULL)
		return;
	if (grace_ms == 0 || outdir_base == NULL ||
	    TAILQ_EMPTY(&set->files)) {
		outdir_set_free(set);
		return;
	}
	set->grace = evtimer_new(outdir_base, outdir_grace_cb, set);
	evtimer_add(set->grace, &tv);
	TAILQ_INSERT_TAIL(&outdir_released, set, entry);
}

static void
outdir_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct outdir_set *set = arg;

	TAILQ_REMOVE(&outdir_released, set, entry);
	outdir_set_free(set);
}

/* Remove the set's files that are still on disk, and the set. */
static void
outdir_set_free(struct outdir_set *set)
{
	struct outfile *f;

	while ((f = TAILQ_FIRST(&set->files)) != NULL) {
		if (f->removed == NULL) {
			outdir_remove(f, "session closed");
			set->nremoved++;
		}
		outdir_forget(f);
	}
	if (set->grace != NULL)
		event_free(set->grace);
	free(set);
}

json_t *
outdir_set_json(const struct outdir_set *set)
{
	json_t *rows = json_array();
	struct outfile *f;

	if (set == NULL)
		return rows;
	TAILQ_FOREACH(f, &set->files, owned)
		json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:s?}",
		    "path", f->path, "toolUseId", f->tool_use_id, "bytes",
		    (json_int_t)f->bytes, "removed", f->removed));
	return rows;
}

/* A stop closes every session: the graces are cut short. */
void
outdir_shutdown(void)
{
	struct outdir_set *set;
	struct outfile *f;

	while ((set = TAILQ_FIRST(&outdir_released)) != NULL) {
		TAILQ_REMOVE(&outdir_released, set, entry);
		outdir_set_free(set);
	}
	/* Leftovers of an earlier run stay for the next to count. */
	while ((f = TAILQ_FIRST(&outdir_age)) != NULL) {
		TAILQ_REMOVE(&outdir_age, f, age);
		free(f->path);
		free(f);
	}
	outdir_total = 0;
	outdir_base = NULL;
}
