/*
 * The edit_file and multi_edit tools, with the exact-string semantics
 * agents are trained on: old_string must occur exactly once (or, with
 * replace_all, at least once) and differ from new_string. The file is read
 * whole, edited in memory and written back atomically (write_file_commit),
 * so a failed edit, or any failed edit of a multi_edit, changes nothing.
 * Line endings are kept: in a file of CRLF lines, an old_string written
 * with LF matches its CRLF text, and new_string gets CRLF too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

/* One edit as given. */
struct edit {
	const char *old_s, *new_s;
	size_t old_len, new_len;
	bool all;
};

static int	edit_read(const char *, const char *, struct buf *);
static char	*edit_crlf(const char *, size_t, size_t *);
static size_t	edit_count(const struct buf *, const char *, size_t);
static int	edit_apply(struct buf *, const struct edit *, const char *,
		    const char *, size_t *);
static int	edit_parse(const json_t *, const char *, struct edit *);
static int	edit_commit(const char *, struct buf *, const struct edit *,
		    size_t);

/* The whole of a text file; an error printed otherwise. */
static int
edit_read(const char *path, const char *target, struct buf *b)
{
	char chunk[65536];
	struct stat sb;
	ssize_t n;
	int fd;

	if ((fd = open(target, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return out_errno(errno, "File", path);
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return out_error("%s is %s", path, S_ISDIR(sb.st_mode) ?
		    "a directory, not a file" : "not a regular file");
	}
	if (sb.st_size > EDIT_FILE_MAX) {
		close(fd);
		return out_error("%s is %lld bytes: the edit tools read files "
		    "of at most %d bytes; use write_file or bash", path,
		    (long long)sb.st_size, EDIT_FILE_MAX);
	}
	buf_addstr(b, "");
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		buf_add(b, chunk, (size_t)n);
	close(fd);
	if (n < 0)
		return out_errno(errno, "File", path);
	if (memchr(b->data, '\0', b->len < BUILTIN_PROBE ? b->len :
	    BUILTIN_PROBE) != NULL)
		return out_error("%s is a binary file: the edit tools change "
		    "text", path);
	return BUILTIN_OK;
}

/* s with every LF not already after a CR turned into CRLF. */
static char *
edit_crlf(const char *s, size_t len, size_t *out_len)
{
	struct buf b = { 0 };
	size_t i;

	buf_addstr(&b, "");
	for (i = 0; i < len; i++) {
		if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r'))
			buf_add(&b, "\r", 1);
		buf_add(&b, s + i, 1);
	}
	*out_len = b.len;
	return b.data;
}

/* Occurrences of s (not overlapping) in b. */
static size_t
edit_count(const struct buf *b, const char *s, size_t len)
{
	const char *p = b->data, *end = b->data + b->len, *hit;
	size_t n = 0;

	while ((hit = memmem(p, (size_t)(end - p), s, len)) != NULL) {
		n++;
		p = hit + len;
	}
	return n;
}

/*
 * Apply one edit to b; the number made in *made. what names it in
 * errors ("old_string", "edits[2].old_string").
 */
static int
edit_apply(struct buf *b, const struct edit *e, const char *path,
    const char *what, size_t *made)
{
	const char *old_s = e->old_s, *new_s = e->new_s, *p, *hit, *end;
	size_t old_len = e->old_len, new_len = e->new_len, n;
	char *crlf_old = NULL, *crlf_new = NULL;
	struct buf out = { 0 };
	int rc = BUILTIN_OK;

	n = edit_count(b, old_s, old_len);
	/* A CRLF file edited with LF text, as models write it. */
	if (n == 0 && memchr(old_s, '\n', old_len) != NULL &&
	    memmem(b->data, b->len, "\r\n", 2) != NULL) {
		crlf_old = edit_crlf(old_s, old_len, &old_len);
		crlf_new = edit_crlf(new_s, new_len, &new_len);
		old_s = crlf_old;
		new_s = crlf_new;
		n = edit_count(b, old_s, old_len);
	}
	if (n == 0)
		rc = out_error("%s was not found in %s: it must match the "
		    "file's text exactly, whitespace and indentation included",
		    what, path);
	else if (n > 1 && !e->all)
		rc = out_error("%s occurs %zu times in %s: include more of the "
		    "text around it to make it unique, or set replace_all to "
		    "replace every one", what, n, path);
	if (rc != BUILTIN_OK)
		goto done;
	buf_addstr(&out, "");
	for (p = b->data, end = b->data + b->len;
	    (hit = memmem(p, (size_t)(end - p), old_s, old_len)) != NULL;
	    p = hit + old_len) {
		buf_add(&out, p, (size_t)(hit - p));
		buf_add(&out, new_s, new_len);
	}
	buf_add(&out, p, (size_t)(end - p));
	buf_free(b);
	*b = out;
	*made = n;
done:
	free(crlf_old);
	free(crlf_new);
	return rc;
}

/* One edit object: old_string, new_string, replace_all? */
static int
edit_parse(const json_t *obj, const char *prefix, struct edit *e)
{
	const json_t *all = json_object_get(obj, "replace_all");
	char field[64];

	snprintf(field, sizeof field, "%sold_string", prefix);
	if (!json_is_object(obj))
		return out_invalid("%s must be an object", prefix);
	if (input_string(obj, "old_string", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &e->old_s, &e->old_len) != 0 ||
	    input_string(obj, "new_string", INPUT_REQUIRED, &e->new_s,
	    &e->new_len) != 0)
		return BUILTIN_INVALID;
	if (all != NULL && !json_is_null(all) && !json_is_boolean(all))
		return out_invalid("%sreplace_all must be true or false",
		    prefix);
	e->all = json_is_true(all);
	if (e->old_len == e->new_len &&
	    memcmp(e->old_s, e->new_s, e->old_len) == 0)
		return out_error("%s and %snew_string are the same: there is "
		    "nothing to change", field, prefix);
	return BUILTIN_OK;
}

/* Read file_path, apply n edits in order, write it back if all apply. */
static int
edit_commit(const char *path, struct buf *b, const struct edit *edits,
    size_t n)
{
	char *target, what[64];
	size_t i, made, total = 0;
	int rc;

	if ((target = write_file_resolve(path)) == NULL)
		return out_errno(errno, "File", path);
	rc = edit_read(path, target, b);
	for (i = 0; rc == BUILTIN_OK && i < n; i++) {
		if (n == 1)
			snprintf(what, sizeof what, "old_string");
		else
			snprintf(what, sizeof what, "edits[%zu].old_string", i);
		rc = edit_apply(b, &edits[i], path, what, &made);
		total += made;
	}
	if (rc == BUILTIN_OK)
		rc = write_file_commit(path, target, b->data, b->len);
	if (rc == BUILTIN_OK)
		out_printf("Edited %s: %zu replacement%s%s\n", path, total,
		    total == 1 ? "" : "s", n > 1 ? " by all edits" : "");
	else if (n > 1)
		out_error("%s is unchanged: no edit was applied", path);
	free(target);
	return rc;
}

int
edit_file_run(const json_t *input)
{
	struct buf b = { 0 };
	struct edit e;
	const char *path;
	int rc;

	if (input_string(input, "file_path", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &path, NULL) != 0)
		return BUILTIN_INVALID;
	if ((rc = edit_parse(input, "", &e)) != BUILTIN_OK)
		return rc;
	rc = edit_commit(path, &b, &e, 1);
	buf_free(&b);
	return rc;
}

int
multi_edit_run(const json_t *input)
{
	const json_t *list = json_object_get(input, "edits");
	struct buf b = { 0 };
	struct edit *edits;
	const char *path;
	char prefix[32];
	size_t i, n;
	int rc = BUILTIN_OK;

	if (input_string(input, "file_path", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &path, NULL) != 0)
		return BUILTIN_INVALID;
	if (!json_is_array(list) || json_array_size(list) == 0)
		return out_invalid("edits must be a non-empty array of "
		    "{old_string, new_string, replace_all?}");
	n = json_array_size(list);
	edits = xcalloc(n, sizeof *edits);
	for (i = 0; rc == BUILTIN_OK && i < n; i++) {
		snprintf(prefix, sizeof prefix, "edits[%zu].", i);
		rc = edit_parse(json_array_get(list, i), prefix, &edits[i]);
	}
	if (rc == BUILTIN_OK)
		rc = edit_commit(path, &b, edits, n);
	free(edits);
	buf_free(&b);
	return rc;
}
