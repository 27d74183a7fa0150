/* The result on stdout within a budget, and error messages on stderr. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"

/* Bytes written to stdout so far. */
static size_t	out_used;

static void	out_verror(const char *, const char *, va_list)
		    __attribute__((format(printf, 2, 0)));

static void
out_verror(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* Would n more bytes stay within the budget? */
bool
out_fits(size_t n)
{
	return n <= OUT_BUDGET - out_used;
}

void
out_add(const void *p, size_t n)
{
	fwrite(p, 1, n, stdout);
	out_used += n;
}

void
out_printf(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vfprintf(stdout, fmt, ap);
	va_end(ap);
	if (n > 0)
		out_used += (size_t)n;
}

/* Print an error for the agent; returns the exit status that goes with it. */
int
out_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out_verror("", fmt, ap);
	va_end(ap);
	return BUILTIN_ERROR;
}

int
out_invalid(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out_verror("Invalid input: ", fmt, ap);
	va_end(ap);
	return BUILTIN_INVALID;
}

/* The usual ways opening path fails, worded for an agent. */
int
out_errno(int error, const char *what, const char *path)
{
	switch (error) {
	case ENOENT:
	case ENOTDIR:
		return out_error("%s does not exist: %s", what, path);
	case EACCES:
	case EPERM:
		return out_error("Permission denied: %s", path);
	case ELOOP:
		return out_error("Too many levels of symbolic links: %s", path);
	default:
		return out_error("Cannot open %s: %s", path, strerror(error));
	}
}

/*
 * Bytes of s[0..len) that hold at most max characters, cut between two
 * characters. A character is a byte that is not a UTF-8 continuation byte
 * with at most three continuation bytes after it, so bad input cannot make
 * one character longer than four bytes.
 */
size_t
out_cut(const char *s, size_t len, size_t max)
{
	size_t i, chars = 0, cont = 0;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if ((c & 0xc0) == 0x80 && chars > 0 && cont < 3) {
			cont++;
			continue;
		}
		if (chars == max)
			return i;
		chars++;
		cont = 0;
	}
	return len;
}

/* Flush stdout: a result that did not reach the daemon is an error. */
int
out_finish(int rc)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "stexec-tool: cannot write output: %s\n",
		    strerror(errno));
		return BUILTIN_ERROR;
	}
	return rc;
}

size_t
out_count_lines(const char *s, size_t len)
{
	const char *end = s + len;
	size_t n = 0;

	while ((s = memchr(s, '\n', (size_t)(end - s))) != NULL) {
		n++;
		s++;
	}
	return n;
}

/*
 * A line for the daemon on fd 3 (STEXEC_PROGRESS_FD), written whole: a
 * content block must not be cut.
 */
int
out_fd3_line(const char *line)
{
	size_t len = strlen(line), done = 0;
	ssize_t n;

	while (done <= len) {
		n = done < len ? write(3, line + done, len - done) :
		    write(3, "\n", 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return out_error("cannot write to fd 3 (is this run by "
			    "stexecd?): %s", strerror(errno));
		done += (size_t)n;
		if (done == len + 1)
			break;
	}
	return BUILTIN_OK;
}
