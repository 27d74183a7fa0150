/* The list_dir tool: one directory's entries, sorted, with their kind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

#define LIST_DIR_MAX_RESULTS 1000

struct list_dir_entry {
	char *name;
	unsigned char type; /* DT_* */
};

static int	list_dir_cmp(const void *, const void *);
static void	list_dir_line(struct buf *, int, const struct list_dir_entry *);

static int
list_dir_cmp(const void *pa, const void *pb)
{
	const struct list_dir_entry *a = pa, *b = pb;

	return strcmp(a->name, b->name);
}

/* "name", "name/" for a directory, "name -> target" for a symlink. */
static void
list_dir_line(struct buf *b, int dfd, const struct list_dir_entry *e)
{
	char target[PATH_MAX];
	ssize_t n;

	buf_reset(b);
	buf_addstr(b, e->name);
	if (e->type == DT_DIR)
		buf_addstr(b, "/");
	else if (e->type == DT_LNK) {
		n = readlinkat(dfd, e->name, target, sizeof target);
		buf_addstr(b, " -> ");
		if (n >= 0)
			buf_add(b, target, (size_t)n);
		else
			buf_addstr(b, "?");
	}
	buf_addstr(b, "\n");
}

int
list_dir_run(const json_t *input)
{
	struct list_dir_entry *e = NULL;
	struct buf line = { 0 };
	size_t n = 0, shown = 0, i;
	struct dirent *de;
	const char *path;
	struct stat sb;
	int fd;
	DIR *d;

	if (input_string(input, "path", INPUT_REQUIRED | INPUT_NONEMPTY, &path,
	    NULL) != 0)
		return BUILTIN_INVALID;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOTDIR && stat(path, &sb) == 0)
		return out_error("%s is not a directory", path);
	if (fd < 0)
		return out_errno(errno, "Directory", path);
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return out_errno(errno, "Directory", path);
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		e = xreallocarray(e, n + 1, sizeof *e);
		e[n].name = xstrdup(de->d_name);
		e[n].type = de->d_type;
		if (de->d_type == DT_UNKNOWN &&
		    fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			e[n].type = IFTODT(sb.st_mode);
		n++;
	}
	if (n > 0)
		qsort(e, n, sizeof *e, list_dir_cmp);
	for (i = 0; i < n && shown < LIST_DIR_MAX_RESULTS; i++) {
		list_dir_line(&line, fd, &e[i]);
		if (!out_fits(line.len))
			break;
		out_add(line.data, line.len);
		shown++;
	}
	if (n == 0)
		out_printf("(empty directory)\n");
	else if (shown < n)
		out_printf("… %zu more\n", n - shown);
	closedir(d);
	for (i = 0; i < n; i++)
		free(e[i].name);
	free(e);
	buf_free(&line);
	return BUILTIN_OK;
}
