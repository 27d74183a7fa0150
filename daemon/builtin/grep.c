/*
 * The grep tool: a POSIX extended regex over every text file below a path,
 * streamed through a fixed buffer, one "file:line:text" per matching line.
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

#define GREP_MAX_RESULTS 500
#define GREP_MAX_CHARS 500
/* A longer line is searched in its first this many bytes only. */
#define GREP_LINE_MAX (1024 * 1024)
/* The first window one regexec searches; see grep_search. */
#define GREP_WINDOW 4096

struct grep_state {
	regex_t re;
	struct glob_pattern *filter;
	bool filter_base; /* the filter has no '/': match basenames */
	char *buf;        /* GREP_LINE_MAX + 1 bytes, reused for every file */
	unsigned long long matches;
	unsigned long long shown;
	bool full;
};

static void	grep_emit(struct grep_state *, const char *, long long,
		    const char *, size_t);
static void	grep_search(struct grep_state *, const char *, char *, size_t,
		    long long *);
static bool	grep_fd(struct grep_state *, int, const char *);
static enum glob_visit grep_visit(const char *, const char *, mode_t,
		    void *);

static void
grep_emit(struct grep_state *gs, const char *path, long long line,
    const char *s, size_t len)
{
	struct buf b = { 0 };
	size_t cut;

	gs->matches++;
	if (gs->full || gs->shown == GREP_MAX_RESULTS) {
		gs->full = true;
		return;
	}
	if (len > 0 && s[len - 1] == '\r')
		len--;
	cut = out_cut(s, len, GREP_MAX_CHARS);
	buf_printf(&b, "%s:%lld:", path, line);
	buf_add(&b, s, cut);
	buf_addstr(&b, cut < len ? "…\n" : "\n");
	if (out_fits(b.len)) {
		out_add(b.data, b.len);
		gs->shown++;
	} else
		gs->full = true;
	buf_free(&b);
}

/*
 * Search s[0..end), whole lines (the last may lack its newline); *lineno is
 * the number of the line at s and moves past every newline. One regexec
 * covers a window of whole lines that doubles while nothing matches, so
 * sparse matches cost few calls; s[end] must exist, as the window's end is
 * made a NUL for the call (sanitizers' regexec measures the string with
 * strlen despite REG_STARTEND, which would make dense matches quadratic).
 */
static void
grep_search(struct grep_state *gs, const char *path, char *s, size_t end,
    long long *lineno)
{
	size_t pos = 0, counted = 0, win = GREP_WINDOW, stop, m, ls, le;
	const char *nl;
	regmatch_t pm;
	char saved;
	int rc;

	while (pos < end) {
		stop = end;
		if (end - pos > win) {
			nl = memchr(s + pos + win - 1, '\n',
			    end - pos - win + 1);
			if (nl != NULL)
				stop = (size_t)(nl - s) + 1;
		}
		saved = s[stop];
		s[stop] = '\0';
		pm.rm_so = 0;
		pm.rm_eo = (regoff_t)(stop - pos);
		rc = regexec(&gs->re, s + pos, 1, &pm, REG_STARTEND);
		s[stop] = saved;
		m = pos + (size_t)pm.rm_so;
		/* An empty match after the window's last newline is no line. */
		if (rc != 0 || (m == stop && s[stop - 1] == '\n')) {
			pos = stop;
			win = win < end / 2 ? win * 2 : end;
			continue;
		}
		win = GREP_WINDOW;
		nl = memrchr(s + pos, '\n', m - pos);
		ls = nl != NULL ? (size_t)(nl - s) + 1 : pos;
		nl = memchr(s + m, '\n', end - m);
		le = nl != NULL ? (size_t)(nl - s) : end;
		*lineno += (long long)out_count_lines(s + counted, ls - counted);
		grep_emit(gs, path, *lineno, s + ls, le - ls);
		counted = le;
		pos = le + 1;
	}
	*lineno += (long long)out_count_lines(s + counted, end - counted);
}

/*
 * Search an open file, never holding more than GREP_LINE_MAX bytes of it.
 * False when it is binary.
 */
static bool
grep_fd(struct grep_state *gs, int fd, const char *path)
{
	char *buf = gs->buf, *nl;
	size_t len = 0, end;
	long long lineno = 1;
	bool eof = false, probed = false, skipping = false;
	ssize_t n;

	for (;;) {
		while (!eof && len < GREP_LINE_MAX) {
			n = read(fd, buf + len, GREP_LINE_MAX - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				eof = true;
			else
				len += (size_t)n;
		}
		if (!probed) {
			probed = true;
			if (memchr(buf, '\0', len < BUILTIN_PROBE ? len :
			    BUILTIN_PROBE) != NULL)
				return false;
		}
		if (skipping) {
			/* The rest of an overlong line. */
			if ((nl = memchr(buf, '\n', len)) == NULL) {
				len = 0;
				if (eof)
					break;
				continue;
			}
			skipping = false;
			lineno++;
			end = (size_t)(nl - buf) + 1;
			memmove(buf, buf + end, len - end);
			len -= end;
			continue;
		}
		if (eof)
			end = len;
		else if ((nl = memrchr(buf, '\n', len)) != NULL)
			end = (size_t)(nl - buf) + 1;
		else {
			grep_search(gs, path, buf, len, &lineno);
			skipping = true;
			len = 0;
			continue;
		}
		grep_search(gs, path, buf, end, &lineno);
		memmove(buf, buf + end, len - end);
		len -= end;
		if (eof)
			break;
	}
	return true;
}

static enum glob_visit
grep_visit(const char *path, const char *rel, mode_t type, void *arg)
{
	struct grep_state *gs = arg;
	const char *base;
	struct stat sb;
	int fd;

	if (S_ISDIR(type)) {
		if (gs->filter != NULL && !gs->filter_base &&
		    !glob_match_prefix(gs->filter, rel))
			return GLOB_SKIP;
		return GLOB_DESCEND;
	}
	if (!S_ISREG(type))
		return GLOB_SKIP;
	if (gs->filter != NULL) {
		base = strrchr(rel, '/');
		base = gs->filter_base && base != NULL ? base + 1 : rel;
		if (!glob_match(gs->filter, base))
			return GLOB_SKIP;
	}
	/* Unreadable files are skipped, as grep -s would. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
	    O_NOFOLLOW);
	if (fd < 0)
		return GLOB_SKIP;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		grep_fd(gs, fd, path);
	close(fd);
	return GLOB_SKIP;
}

int
grep_run(const json_t *input)
{
	struct grep_state gs = { 0 };
	const char *pattern, *path, *filter;
	char err[256], *note = NULL;
	struct stat sb;
	int fd, rc = BUILTIN_OK;

	if (input_string(input, "pattern", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &pattern, NULL) != 0 ||
	    input_string(input, "path", INPUT_NONEMPTY, &path, NULL) != 0 ||
	    input_string(input, "glob", INPUT_NONEMPTY, &filter, NULL) != 0)
		return BUILTIN_INVALID;
	if ((rc = regcomp(&gs.re, pattern, REG_EXTENDED | REG_NEWLINE)) != 0) {
		regerror(rc, &gs.re, err, sizeof err);
		regfree(&gs.re);
		return out_error("Invalid pattern: %s", err);
	}
	rc = BUILTIN_OK;
	if (filter != NULL) {
		gs.filter_base = strchr(filter, '/') == NULL;
		if ((gs.filter = glob_compile(filter, err, sizeof err)) ==
		    NULL) {
			regfree(&gs.re);
			return out_error("Invalid glob: %s", err);
		}
	}
	/* One more byte for the NUL grep_search puts after a window. */
	gs.buf = xmalloc(GREP_LINE_MAX + 1);

	if (path != NULL && strcmp(path, ".") != 0 && strcmp(path, "./") != 0) {
		if (stat(path, &sb) != 0)
			rc = out_errno(errno, "Path", path);
		else if (S_ISDIR(sb.st_mode)) {
			if (glob_walk(path, grep_visit, &gs) != 0)
				rc = out_errno(errno, "Path", path);
		} else if (!S_ISREG(sb.st_mode))
			rc = out_error("%s is not a regular file or a "
			    "directory", path);
		else if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY |
		    O_NONBLOCK)) < 0)
			rc = out_errno(errno, "Path", path);
		else {
			/* A file named outright is searched, whatever glob. */
			if (!grep_fd(&gs, fd, path))
				xasprintf(&note, " (%s is a binary file)",
				    path);
			close(fd);
		}
	} else if (glob_walk(NULL, grep_visit, &gs) != 0)
		rc = out_errno(errno, "Path", ".");

	if (rc == BUILTIN_OK) {
		if (gs.matches == 0)
			out_printf("No matches for %s%s\n", pattern,
			    note != NULL ? note : "");
		else if (gs.matches > gs.shown)
			out_printf("… %llu more matches\n",
			    gs.matches - gs.shown);
	}
	free(note);
	free(gs.buf);
	glob_free(gs.filter);
	regfree(&gs.re);
	return rc;
}
