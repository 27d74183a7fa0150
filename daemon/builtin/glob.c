/*
 * Glob patterns with ** and {a,b}, a sorted directory walk that follows no
 * symlink and skips .git, and the glob tool built on both.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builtin.h"
#include "util.h"

#define GLOB_MAX_RESULTS 1000
/* Brace expansion multiplies; past this the pattern is refused. */
#define GLOB_MAX_ALTS 256
/* No path is longer; it also bounds the recursion of brace expansion. */
#define GLOB_MAX_PATTERN 4096
/* Deeper than any real tree; stops a bind-mount loop. */
#define GLOB_MAX_DEPTH 256

/* One brace alternative: its segments, a "**" segment matching any depth. */
struct glob_alt {
	char **seg;
	size_t nseg;
};

struct glob_pattern {
	struct glob_alt *alt;
	size_t nalt;
	bool dirs_only; /* the pattern ends with '/' */
};

struct glob_entry {
	char *name;
	size_t len;
	mode_t type;
};

/* The glob tool's walk: what matches and how much of it is printed. */
struct glob_state {
	struct glob_pattern *pattern;
	unsigned long long matches;
	unsigned long long shown;
	bool full;
};

static const char *glob_brace(const char *, const char **);
static int	glob_expand(struct glob_pattern *, const char *);
static void	glob_add_alt(struct glob_pattern *, const char *);
static char   **glob_split(const char *, size_t *);
static void	glob_free_segs(char **, size_t);
static bool	glob_match_segs(const struct glob_alt *, char **, size_t,
		    bool);
static bool	glob_match_any(const struct glob_pattern *, const char *,
		    bool);
static int	glob_entry_cmp(const void *, const void *);
static int	glob_walk_dir(const char *, struct buf *, int, glob_walk_cb,
		    void *);
static bool	glob_is_literal(const char *, size_t);
static enum glob_visit glob_visit(const char *, const char *, mode_t,
		    void *);
static void	glob_emit(struct glob_state *, const char *, bool);

/*
 * The first "{...}" at or after s that holds a top-level comma: returns its
 * '{' and sets *end to its '}', or NULL when there is none.
 */
static const char *
glob_brace(const char *s, const char **end)
{
	const char *open, *p;
	int depth;
	bool comma;

	for (open = s; *open != '\0'; open++) {
		if (*open == '\\' && open[1] != '\0') {
			open++;
			continue;
		}
		if (*open != '{')
			continue;
		depth = 0;
		comma = false;
		for (p = open; *p != '\0'; p++) {
			if (*p == '\\' && p[1] != '\0')
				p++;
			else if (*p == '{')
				depth++;
			else if (*p == ',' && depth == 1)
				comma = true;
			else if (*p == '}' && --depth == 0)
				break;
		}
		if (*p == '}' && comma) {
			*end = p;
			return open;
		}
	}
	return NULL;
}

/* Expand the braces of s into alternatives; -1 when there are too many. */
static int
glob_expand(struct glob_pattern *gp, const char *s)
{
	const char *open, *close, *p, *start;
	char *alt;
	int depth;

	if ((open = glob_brace(s, &close)) == NULL) {
		if (gp->nalt == GLOB_MAX_ALTS)
			return -1;
		glob_add_alt(gp, s);
		return 0;
	}
	depth = 0;
	start = open + 1;
	for (p = open + 1; p <= close; p++) {
		if (*p == '\\' && p + 1 < close) {
			p++;
			continue;
		}
		if (*p == '{')
			depth++;
		else if (*p == '}' && depth > 0)
			depth--;
		else if ((*p == ',' && depth == 0) || p == close) {
			xasprintf(&alt, "%.*s%.*s%s", (int)(open - s), s,
			    (int)(p - start), start, close + 1);
			if (glob_expand(gp, alt) != 0) {
				free(alt);
				return -1;
			}
			free(alt);
			start = p + 1;
		}
	}
	return 0;
}

static void
glob_add_alt(struct glob_pattern *gp, const char *s)
{
	struct glob_alt *a;

	gp->alt = xreallocarray(gp->alt, gp->nalt + 1, sizeof *gp->alt);
	a = &gp->alt[gp->nalt++];
	a->seg = glob_split(s, &a->nseg);
}

/*
 * The segments of a path or pattern: empty and "." segments dropped, and
 * runs of "**" made one, which matches the same and is much cheaper.
 */
static char **
glob_split(const char *s, size_t *np)
{
	char **seg = NULL;
	size_t n = 0, len;

	while (*s != '\0') {
		len = strcspn(s, "/");
		if ((len == 1 && s[0] == '.') || len == 0)
			;
		else if (len == 2 && strncmp(s, "**", 2) == 0 && n > 0 &&
		    strcmp(seg[n - 1], "**") == 0)
			;
		else {
			seg = xreallocarray(seg, n + 1, sizeof *seg);
			seg[n++] = xstrndup(s, len);
		}
		s += len;
		if (*s == '/')
			s++;
	}
	*np = n;
	return seg;
}

static void
glob_free_segs(char **seg, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(seg[i]);
	free(seg);
}

/*
 * Compile a pattern: '/' separates segments, each an fnmatch(3) pattern
 * except "**", which matches any number of directories. NULL with err set
 * when the braces expand too far.
 */
struct glob_pattern *
glob_compile(const char *s, char *err, size_t errlen)
{
	struct glob_pattern *gp = xcalloc(1, sizeof *gp);
	size_t len = strlen(s);

	if (len > GLOB_MAX_PATTERN) {
		snprintf(err, errlen, "longer than %d bytes", GLOB_MAX_PATTERN);
		free(gp);
		return NULL;
	}
	gp->dirs_only = len > 0 && s[len - 1] == '/';
	if (glob_expand(gp, s) != 0) {
		snprintf(err, errlen, "more than %d alternatives in {...}",
		    GLOB_MAX_ALTS);
		glob_free(gp);
		return NULL;
	}
	return gp;
}

void
glob_free(struct glob_pattern *gp)
{
	size_t i;

	if (gp == NULL)
		return;
	for (i = 0; i < gp->nalt; i++)
		glob_free_segs(gp->alt[i].seg, gp->alt[i].nseg);
	free(gp->alt);
	free(gp);
}

/*
 * Does the alternative match the path segments, or with prefix, could it
 * match something below them? Dynamic programming over (pattern segment,
 * path segment) keeps many "**" from going exponential.
 */
static bool
glob_match_segs(const struct glob_alt *a, char **seg, size_t nseg,
    bool prefix)
{
	size_t np = a->nseg, w = nseg + 1, i, j;
	bool small[256], *m, result;

	m = (np + 1) * w <= nitems(small) ? small :
	    xreallocarray(NULL, (np + 1) * w, sizeof *m);
	/* m[i * w + j]: pattern segments i.. match path segments j.. */
	for (j = 0; j < nseg; j++)
		m[np * w + j] = false;
	m[np * w + nseg] = !prefix;
	for (i = np; i-- > 0;) {
		m[i * w + nseg] = prefix || (strcmp(a->seg[i], "**") == 0 &&
		    m[(i + 1) * w + nseg]);
		for (j = nseg; j-- > 0;) {
			if (strcmp(a->seg[i], "**") == 0)
				m[i * w + j] = m[(i + 1) * w + j] ||
				    m[i * w + j + 1];
			else
				m[i * w + j] = m[(i + 1) * w + j + 1] &&
				    fnmatch(a->seg[i], seg[j], 0) == 0;
		}
	}
	result = m[0];
	if (m != small)
		free(m);
	return result;
}

static bool
glob_match_any(const struct glob_pattern *gp, const char *path, bool prefix)
{
	char **seg;
	size_t nseg, i;
	bool match = false;

	seg = glob_split(path, &nseg);
	for (i = 0; i < gp->nalt && !match; i++)
		match = glob_match_segs(&gp->alt[i], seg, nseg, prefix);
	glob_free_segs(seg, nseg);
	return match;
}

/* Does the relative path match? */
bool
glob_match(const struct glob_pattern *gp, const char *path)
{
	return glob_match_any(gp, path, false);
}

/* Could anything below the relative directory path match? */
bool
glob_match_prefix(const struct glob_pattern *gp, const char *path)
{
	return glob_match_any(gp, path, true);
}

/*
 * Sort a directory as its children would sort in full paths: a directory
 * name compares as if followed by '/', so a walk in this order prints every
 * path in strcmp order without collecting them.
 */
static int
glob_entry_cmp(const void *pa, const void *pb)
{
	const struct glob_entry *a = pa, *b = pb;
	size_t i;
	int ca, cb;

	for (i = 0;; i++) {
		ca = i < a->len ? (unsigned char)a->name[i] :
		    i == a->len && S_ISDIR(a->type) ? '/' : -1;
		cb = i < b->len ? (unsigned char)b->name[i] :
		    i == b->len && S_ISDIR(b->type) ? '/' : -1;
		if (ca != cb || ca == -1)
			return ca - cb;
	}
}

/* Joins dir and name with one '/'; dir NULL means name alone. */
char *
glob_join(const char *dir, const char *name)
{
	char *s;
	size_t len;

	if (dir == NULL)
		return xstrdup(name);
	len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len == 1 && dir[0] == '/')
		xasprintf(&s, "/%s", name);
	else
		xasprintf(&s, "%.*s/%s", (int)len, dir, name);
	return s;
}

static int
glob_walk_dir(const char *root, struct buf *rel, int depth, glob_walk_cb cb,
    void *arg)
{
	struct glob_entry *e = NULL;
	size_t n = 0, i, save;
	struct dirent *de;
	struct stat sb;
	char *path;
	DIR *d;

	path = rel->len == 0 ? xstrdup(root != NULL ? root : ".") :
	    glob_join(root, rel->data);
	d = opendir(path);
	free(path);
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		e = xreallocarray(e, n + 1, sizeof *e);
		e[n].len = strlen(de->d_name);
		e[n].name = xstrndup(de->d_name, e[n].len);
		e[n].type = DTTOIF(de->d_type);
		if (de->d_type == DT_UNKNOWN) {
			if (fstatat(dirfd(d), de->d_name, &sb,
			    AT_SYMLINK_NOFOLLOW) == 0)
				e[n].type = sb.st_mode & S_IFMT;
		}
		n++;
	}
	/* Children are walked after closing, so depth costs no descriptors. */
	closedir(d);
	if (n > 0)
		qsort(e, n, sizeof *e, glob_entry_cmp);
	for (i = 0; i < n; i++) {
		if (S_ISDIR(e[i].type) && strcmp(e[i].name, ".git") == 0)
			continue;
		save = rel->len;
		if (save > 0)
			buf_add(rel, "/", 1);
		buf_add(rel, e[i].name, e[i].len);
		path = glob_join(root, rel->data);
		if (cb(path, rel->data, e[i].type, arg) == GLOB_DESCEND &&
		    S_ISDIR(e[i].type) && depth < GLOB_MAX_DEPTH)
			glob_walk_dir(root, rel, depth + 1, cb, arg);
		free(path);
		rel->len = save;
		rel->data[save] = '\0';
	}
	for (i = 0; i < n; i++)
		free(e[i].name);
	free(e);
	return 0;
}

/*
 * Walk everything below root (NULL for the cwd) in sorted order. Returns -1
 * with errno set when root cannot be read; unreadable subdirectories are
 * skipped.
 */
int
glob_walk(const char *root, glob_walk_cb cb, void *arg)
{
	struct buf rel = { 0 };
	int rc;

	buf_addstr(&rel, "");
	rc = glob_walk_dir(root, &rel, 0, cb, arg);
	buf_free(&rel);
	return rc;
}

/* A segment with no pattern character can be walked to directly. */
static bool
glob_is_literal(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (strchr("*?[]{}\\", s[i]) != NULL)
			return false;
	}
	return true;
}

static void
glob_emit(struct glob_state *gs, const char *path, bool dir)
{
	size_t len = strlen(path) + (dir ? 1 : 0) + 1;

	gs->matches++;
	if (gs->full || gs->shown == GLOB_MAX_RESULTS || !out_fits(len)) {
		gs->full = true;
		return;
	}
	out_printf("%s%s\n", path, dir ? "/" : "");
	gs->shown++;
}

static enum glob_visit
glob_visit(const char *path, const char *rel, mode_t type, void *arg)
{
	struct glob_state *gs = arg;

	if (S_ISDIR(type)) {
		if (gs->pattern->dirs_only && glob_match(gs->pattern, rel))
			glob_emit(gs, path, true);
		return glob_match_prefix(gs->pattern, rel) ? GLOB_DESCEND :
		    GLOB_SKIP;
	}
	if (!gs->pattern->dirs_only && glob_match(gs->pattern, rel))
		glob_emit(gs, path, false);
	return GLOB_SKIP;
}

/*
 * The glob tool: the leading literal directories of the pattern become part
 * of the root, so "src/..." walks only src; an absolute pattern ignores path.
 */
int
glob_run(const json_t *input)
{
	struct glob_state gs = { 0 };
	const char *pattern, *path, *s, *rest;
	char *root = NULL, *seg, *next, err[128];
	struct stat sb;
	size_t len;
	int rc = BUILTIN_OK;

	if (input_string(input, "pattern", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &pattern, NULL) != 0 ||
	    input_string(input, "path", INPUT_NONEMPTY, &path, NULL) != 0)
		return BUILTIN_INVALID;
	if (path != NULL) {
		if (stat(path, &sb) != 0)
			return out_errno(errno, "Directory", path);
		if (!S_ISDIR(sb.st_mode))
			return out_error("%s is not a directory", path);
		if (strcmp(path, ".") == 0 || strcmp(path, "./") == 0)
			path = NULL;
	}

	s = pattern;
	if (*s == '/') {
		root = xstrdup("/");
		while (*s == '/')
			s++;
	} else if (path != NULL)
		root = xstrdup(path);
	for (;;) {
		len = strcspn(s, "/");
		if (s[len] != '/' || !glob_is_literal(s, len))
			break;
		rest = s + len + strspn(s + len, "/");
		if (*rest == '\0')
			break;
		if (!(len == 1 && s[0] == '.')) {
			xasprintf(&seg, "%.*s", (int)len, s);
			next = glob_join(root, seg);
			free(seg);
			free(root);
			root = next;
		}
		s = rest;
	}
	if ((gs.pattern = glob_compile(s, err, sizeof err)) == NULL) {
		free(root);
		return out_error("Invalid pattern: %s", err);
	}
	if (root == NULL || (stat(root, &sb) == 0 && S_ISDIR(sb.st_mode))) {
		if (glob_walk(root, glob_visit, &gs) != 0)
			rc = out_errno(errno, "Directory", root != NULL ? root :
			    ".");
	}
	if (rc == BUILTIN_OK) {
		if (gs.matches == 0)
			out_printf("No files match %s\n", pattern);
		else if (gs.matches > gs.shown)
			out_printf("… %llu more matches\n",
			    gs.matches - gs.shown);
	}
	glob_free(gs.pattern);
	free(root);
	return rc;
}
