/* A cgroup v2 subtree for the daemon and its tools: create, enter, kill. */
#include "supervisor/cgroup.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* How long cgroup_destroy waits for the killed processes to be gone. */
#define CGROUP_EMPTY_MS 10000

static int cgroup_find(char **, char *, size_t);
static char *cgroup_own(void);
static int cgroup_write(const char *, const char *, const char *);
static int cgroup_populated(const char *);
static int cgroup_remove(const char *);

static char *cgroup_parent; /* where the daemon was started */
static char *cgroup_dir;    /* cgroup_parent/stexecd-PID */

/*
 * Our v2 cgroup's directory: the cgroup2 mount from mountinfo, joined with
 * our path from /proc/self/cgroup less the mount's root.
 */
static int
cgroup_find(char **dir, char *err, size_t errlen)
{
	char line[4096], root[4096], mnt[4096], *own, *rel, *sep;
	size_t rlen;
	FILE *f;
	int found = 0;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL) {
		snprintf(err, errlen, "cannot read mountinfo: %s",
		    strerror(errno));
		return -1;
	}
	while (!found && fgets(line, sizeof line, f) != NULL) {
		sep = strstr(line, " - ");
		if (sep == NULL || strncmp(sep, " - cgroup2 ", 11) != 0)
			continue;
		/* Escaped names (\040 for a space) are not worth decoding. */
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) == 2 &&
		    strchr(root, '\\') == NULL && strchr(mnt, '\\') == NULL)
			found = 1;
	}
	fclose(f);
	if (!found) {
		snprintf(err, errlen, "no cgroup v2 hierarchy is mounted");
		return -1;
	}
	if ((own = cgroup_own()) == NULL) {
		snprintf(err, errlen, "no cgroup v2 path in /proc/self/cgroup");
		return -1;
	}
	rlen = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(own, root, rlen) != 0 ||
	    (own[rlen] != '/' && own[rlen] != '\0')) {
		snprintf(err, errlen, "our cgroup %s is outside the mount of "
		    "%s", own, root);
		free(own);
		return -1;
	}
	rel = own + rlen;
	while (*rel == '/')
		rel++;
	if (*rel == '\0')
		*dir = xstrdup(mnt);
	else
		xasprintf(dir, "%s/%s", mnt, rel);
	free(own);
	return 0;
}

/* The "0::PATH" line of /proc/self/cgroup, or NULL. */
static char *
cgroup_own(void)
{
	char line[4096], *own = NULL;
	size_t len;
	FILE *f;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return NULL;
	while (own == NULL && fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "0::/", 4) != 0)
			continue;
		len = strcspn(line + 3, "\n");
		own = xstrndup(line + 3, len);
	}
	fclose(f);
	return own;
}

int
cgroup_create(char *err, size_t errlen)
{
	char *leaf, *kill;
	bool ok = false;

	if (cgroup_dir != NULL)
		fatal("cgroup_create called twice");
	if (cgroup_find(&cgroup_parent, err, errlen) != 0)
		return -1;
	xasprintf(&cgroup_dir, "%s/stexecd-%ld", cgroup_parent,
	    (long)getpid());
	xasprintf(&leaf, "%s/daemon", cgroup_dir);
	xasprintf(&kill, "%s/cgroup.kill", cgroup_dir);
	/* A daemon of the same pid died with its sentinel: reuse the name. */
	if (access(cgroup_dir, F_OK) == 0 && cgroup_remove(cgroup_dir) != 0)
		snprintf(err, errlen, "cannot remove the stale %s: %s",
		    cgroup_dir, strerror(errno));
	else if (mkdir(cgroup_dir, 0755) != 0)
		snprintf(err, errlen, "cannot create %s: %s", cgroup_dir,
		    strerror(errno));
	else if (mkdir(leaf, 0755) != 0 || access(kill, W_OK) != 0) {
		snprintf(err, errlen, "cannot use %s: %s", cgroup_dir,
		    errno == ENOENT ? "no cgroup.kill (Linux < 5.14)" :
		    strerror(errno));
		cgroup_remove(cgroup_dir);
	} else
		ok = true;
	free(leaf);
	free(kill);
	if (!ok)
		cgroup_forget();
	return ok ? 0 : -1;
}

void
cgroup_adopt(const char *dir, const char *parent)
{
	cgroup_forget();
	cgroup_dir = xstrdup(dir);
	cgroup_parent = xstrdup(parent);
}

const char *
cgroup_parent_path(void)
{
	return cgroup_parent;
}

/* Write text to dir/file. -1 with errno. */
static int
cgroup_write(const char *dir, const char *file, const char *text)
{
	char *path;
	ssize_t n;
	int fd, error;

	xasprintf(&path, "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	free(path);
	if (fd == -1)
		return -1;
	n = write(fd, text, strlen(text));
	error = errno;
	close(fd);
	errno = error;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

int
cgroup_enter(char *err, size_t errlen)
{
	char *leaf, pid[32];
	int rc;

	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	xasprintf(&leaf, "%s/daemon", cgroup_dir);
	rc = cgroup_write(leaf, "cgroup.procs", pid);
	if (rc != 0)
		snprintf(err, errlen, "cannot move into %s: %s", leaf,
		    strerror(errno));
	free(leaf);
	return rc;
}

int
cgroup_leave(char *err, size_t errlen)
{
	char pid[32];

	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	if (cgroup_write(cgroup_parent, "cgroup.procs", pid) != 0) {
		snprintf(err, errlen, "cannot move back to %s: %s",
		    cgroup_parent, strerror(errno));
		return -1;
	}
	return 0;
}

/* 1 while any process is in dir, 0 when empty, -1 if unknown. */
static int
cgroup_populated(const char *dir)
{
	char *path, line[128];
	int populated = -1;
	FILE *f;

	xasprintf(&path, "%s/cgroup.events", dir);
	f = fopen(path, "re");
	free(path);
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "populated ", 10) == 0)
			populated = line[10] == '1';
	}
	fclose(f);
	return populated;
}

int
cgroup_destroy(void)
{
	struct timespec tick = { 0, 1000000 };
	int i, rc;

	if (cgroup_dir == NULL)
		return 0;
	/* Recursive: the leaves, and whatever they hold, die at once. */
	cgroup_write(cgroup_dir, "cgroup.kill", "1");
	for (i = 0; i < CGROUP_EMPTY_MS && cgroup_populated(cgroup_dir) == 1;
	    i++)
		nanosleep(&tick, NULL);
	rc = cgroup_remove(cgroup_dir);
	cgroup_forget();
	return rc;
}

int
cgroup_destroy_stale(const char *dir)
{
	struct timespec tick = { 0, 1000000 };
	int i;

	if (access(dir, F_OK) != 0)
		return 0;
	cgroup_write(dir, "cgroup.kill", "1");
	for (i = 0; i < 2000 && cgroup_populated(dir) == 1; i++)
		nanosleep(&tick, NULL);
	return cgroup_remove(dir);
}

/* rmdir a cgroup and its children, deepest first. -1 with errno. */
static int
cgroup_remove(const char *dir)
{
	struct dirent *de;
	char *sub;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR || strcmp(de->d_name, ".") ==
			    0 || strcmp(de->d_name, "..") == 0)
				continue;
			xasprintf(&sub, "%s/%s", dir, de->d_name);
			cgroup_remove(sub);
			free(sub);
		}
		closedir(d);
	}
	if (rmdir(dir) != 0 && errno != ENOENT)
		return -1;
	return 0;
}

void
cgroup_forget(void)
{
	free(cgroup_dir);
	cgroup_dir = NULL;
	free(cgroup_parent);
	cgroup_parent = NULL;
}

const char *
cgroup_path(void)
{
	return cgroup_dir;
}
