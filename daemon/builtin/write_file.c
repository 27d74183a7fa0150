/*
 * The write_file tool: a temporary file in the same directory, renamed over
 * the target, so a reader sees the old content or the new, never half.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

/* As many links as the kernel follows in one lookup. */
#define WRITE_FILE_MAX_LINKS 40

static char	*write_file_dirname(const char *);
static int	write_file_all(int, const char *, size_t);
static int	write_file_in_place(const char *, const char *, const char *,
		    size_t);

/* Everything before the last '/': "." when there is none. */
static char *
write_file_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return xstrdup(".");
	while (slash > path && slash[-1] == '/')
		slash--;
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

/*
 * The file a write through path lands in: symlinks are followed, even to a
 * target that does not exist yet, so the link itself is never replaced.
 * NULL with errno set on a loop or an unreadable link.
 */
char *
write_file_resolve(const char *path)
{
	char *p = xstrdup(path), *dir, *next, target[PATH_MAX];
	struct stat sb;
	ssize_t n;
	int i;

	for (i = 0; lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode); i++) {
		if (i == WRITE_FILE_MAX_LINKS) {
			free(p);
			errno = ELOOP;
			return NULL;
		}
		n = readlink(p, target, sizeof target);
		if (n < 0 || (size_t)n == sizeof target) {
			if (n >= 0)
				errno = ENAMETOOLONG;
			free(p);
			return NULL;
		}
		target[n] = '\0';
		if (target[0] == '/')
			next = xstrdup(target);
		else {
			dir = write_file_dirname(p);
			next = glob_join(dir, target);
			free(dir);
		}
		free(p);
		p = next;
	}
	return p;
}

static int
write_file_all(int fd, const char *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * A writable file in a directory we may not create files in: rewriting it
 * in place is the only way, and what a shell redirection would do.
 */
static int
write_file_in_place(const char *given, const char *target,
    const char *content, size_t len)
{
	int fd;

	fd = open(target, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return out_errno(errno, "File", given);
	if (write_file_all(fd, content, len) != 0 || fsync(fd) != 0) {
		out_error("Cannot write %s: %s", given, strerror(errno));
		close(fd);
		return BUILTIN_ERROR;
	}
	if (close(fd) != 0)
		return out_error("Cannot write %s: %s", given, strerror(errno));
	return BUILTIN_OK;
}

int
write_file_run(const json_t *input)
{
	const char *path, *content;
	char *target;
	size_t len;
	int rc;

	if (input_string(input, "file_path", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &path, NULL) != 0 ||
	    input_string(input, "content", INPUT_REQUIRED | INPUT_ALLOW_NUL,
	    &content, &len) != 0)
		return BUILTIN_INVALID;
	if (path[strlen(path) - 1] == '/')
		return out_error("%s is a directory, not a file", path);
	if ((target = write_file_resolve(path)) == NULL)
		return out_errno(errno, "File", path);
	rc = write_file_commit(path, target, content, len);
	if (rc == BUILTIN_OK)
		out_printf("Wrote %zu bytes to %s\n", len, path);
	free(target);
	return rc;
}

int
write_file_commit(const char *path, const char *target, const char *content,
    size_t len)
{
	char *dir = NULL, *tmp = NULL;
	bool exists = false;
	struct stat sb;
	mode_t mode, mask;
	int fd = -1, rc = BUILTIN_ERROR;

	if (stat(target, &sb) == 0) {
		if (S_ISDIR(sb.st_mode)) {
			rc = out_error("%s is a directory, not a file", path);
			goto out;
		}
		if (!S_ISREG(sb.st_mode)) {
			rc = out_error("%s is not a regular file", path);
			goto out;
		}
		/* Renaming over a read-only file would ignore its mode. */
		if (access(target, W_OK) != 0) {
			rc = out_errno(errno, "File", path);
			goto out;
		}
		exists = true;
		mode = sb.st_mode & 07777;
	} else {
		mask = umask(0);
		umask(mask);
		mode = 0666 & ~mask;
	}

	dir = write_file_dirname(target);
	if (util_mkdirs(dir, 0777) != 0) {
		out_error("Cannot create directory %s: %s", dir, strerror(errno));
		goto out;
	}
	tmp = glob_join(dir, ".stexec-tmp-XXXXXX");
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		if (exists && (errno == EACCES || errno == EPERM))
			rc = write_file_in_place(path, target, content, len);
		else
			rc = out_errno(errno, "File", path);
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if (exists && fchown(fd, sb.st_uid, sb.st_gid) != 0) {
		/* Only root may give a file away; anyone else keeps theirs. */
	}
	if (fchmod(fd, mode) != 0 || write_file_all(fd, content, len) != 0 ||
	    fsync(fd) != 0) {
		rc = out_error("Cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = out_error("Cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, target) != 0) {
		rc = out_error("Cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	rc = BUILTIN_OK;
out:
	if (fd >= 0)
		close(fd);
	if (tmp != NULL && rc != BUILTIN_OK)
		unlink(tmp);
	free(tmp);
	free(dir);
	return rc;
}
