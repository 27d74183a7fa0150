/*
 * The read_file tool: lines numbered like cat -n, a window of them chosen by
 * offset and limit, read in one pass with a fixed buffer; an image goes
 * back as an image block (image.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

#define READ_FILE_LIMIT 2000
#define READ_FILE_MAX_CHARS 2000
/* A line is kept up to this many bytes; a character is at most 4. */
#define READ_FILE_LINE_KEEP (READ_FILE_MAX_CHARS * 4 + 4)

struct read_file_state {
	long long offset;
	long long last;    /* the last line to show */
	long long line;    /* the number of the line being read */
	long long shown;
	bool done;         /* nothing more is shown, lines are only counted */
	struct buf text;   /* the line being read, up to READ_FILE_LINE_KEEP */
	struct buf out;
};

static void	read_file_end_line(struct read_file_state *);
static void	read_file_chunk(struct read_file_state *, const char *,
		    size_t);

/* A line is complete: show it if it is in the window and fits. */
static void
read_file_end_line(struct read_file_state *rs)
{
	size_t cut;

	if (!rs->done && rs->line >= rs->offset) {
		cut = out_cut(rs->text.data, rs->text.len, READ_FILE_MAX_CHARS);
		buf_reset(&rs->out);
		buf_printf(&rs->out, "%6lld\t", rs->line);
		buf_add(&rs->out, rs->text.data, cut);
		if (cut < rs->text.len)
			buf_addstr(&rs->out, "… [line truncated]");
		buf_addstr(&rs->out, "\n");
		/* The first line always fits: it is far below the budget. */
		if (out_fits(rs->out.len)) {
			out_add(rs->out.data, rs->out.len);
			rs->shown++;
			rs->done = rs->line == rs->last;
		} else
			rs->done = true;
	}
	buf_reset(&rs->text);
	rs->line++;
}

static void
read_file_chunk(struct read_file_state *rs, const char *p, size_t len)
{
	const char *end = p + len, *nl;
	size_t n, room;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = (nl != NULL ? nl : end) - p;
		if (!rs->done && rs->line >= rs->offset) {
			room = READ_FILE_LINE_KEEP - rs->text.len;
			buf_add(&rs->text, p, n < room ? n : room);
		}
		if (nl == NULL)
			break;
		read_file_end_line(rs);
		p = nl + 1;
	}
}

int
read_file_run(const json_t *input)
{
	struct read_file_state rs = { 0 };
	const char *path, *media;
	json_int_t offset, limit;
	char buf[65536];
	bool partial = false;
	long long total;
	struct stat sb;
	size_t len = 0;
	ssize_t n;
	int fd, rc = BUILTIN_OK;

	if (input_string(input, "file_path", INPUT_REQUIRED | INPUT_NONEMPTY,
	    &path, NULL) != 0 ||
	    input_integer(input, "offset", 1, 1, &offset) != 0 ||
	    input_integer(input, "limit", READ_FILE_LIMIT, 1, &limit) != 0)
		return BUILTIN_INVALID;
	/* Non-blocking, so that a FIFO cannot hang the open. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return out_errno(errno, "File", path);
	if (fstat(fd, &sb) != 0) {
		rc = out_errno(errno, "File", path);
		goto out;
	}
	if (S_ISDIR(sb.st_mode)) {
		rc = out_error("%s is a directory, not a file (use list_dir)",
		    path);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = out_error("%s is not a regular file", path);
		goto out;
	}

	/* The probe for NUL bytes is the start of the file's stream. */
	while (len < BUILTIN_PROBE) {
		n = read(fd, buf + len, BUILTIN_PROBE - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = out_error("Cannot read %s: %s", path,
			    strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if ((media = image_kind(buf, len)) != NULL) {
		rc = image_read(fd, path, &sb, media, buf, len);
		goto out;
	}
	if (memchr(buf, '\0', len) != NULL) {
		rc = out_error("%s looks like a binary file (%lld bytes)", path,
		    (long long)sb.st_size);
		goto out;
	}
	if (len == 0) {
		out_printf("(empty file)\n");
		goto out;
	}

	rs.offset = offset;
	rs.last = limit > LLONG_MAX - offset ? LLONG_MAX : offset + limit - 1;
	rs.line = 1;
	buf_addstr(&rs.text, "");
	do {
		partial = buf[len - 1] != '\n';
		if (rs.done)
			rs.line += (long long)out_count_lines(buf, len);
		else
			read_file_chunk(&rs, buf, len);
		do
			n = read(fd, buf, sizeof buf);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			rc = out_error("Cannot read %s: %s", path,
			    strerror(errno));
			goto out;
		}
		len = (size_t)n;
	} while (len > 0);
	if (partial) {
		if (rs.done)
			rs.line++;
		else
			read_file_end_line(&rs);
	}

	total = rs.line - 1;
	if (offset > total)
		rc = out_error("offset %lld is past the end of %s (%lld lines)",
		    (long long)offset, path, total);
	else if (total - (offset - 1) > rs.shown)
		out_printf("… %lld more lines (use offset/limit to read "
		    "them)\n", total - (offset - 1) - rs.shown);
out:
	buf_free(&rs.text);
	buf_free(&rs.out);
	close(fd);
	return rc;
}
