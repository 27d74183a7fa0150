/* Output capture: whole in memory, or head + tail in memory and a file. */
#include "supervisor/capture.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handover.h"
#include "util.h"

/* Bytes moved from the stderr spill into the output file per step. */
#define CAPTURE_STEP (4U << 20)
/* Output file names: how many collisions to step over. */
#define CAPTURE_TRIES 100

enum capture_state {
	CAPTURE_ADDING,
	CAPTURE_COPYING,
	CAPTURE_DONE,
};

/* One of stdout and stderr. */
struct capture_stream {
	struct buf mem;     /* everything, or only the head once spilled */
	char *ring;         /* the last tail_size bytes, once spilled */
	size_t ring_start;
	size_t ring_len;
	uint64_t len;       /* bytes written by the process */
	char last;          /* its last byte */
	bool spilled;       /* past max: the rest goes to disk */
};

struct capture {
	size_t max;
	uint64_t file_max;   /* no file for more than this; 0: no limit */
	bool owned;          /* the output file goes to uid, gid */
	uid_t uid;
	gid_t gid;
	size_t head_size;
	size_t tail_size;
	char *dir;
	char *name;
	long pid;
	uint64_t id;
	enum capture_state state;

	struct capture_stream out;
	struct capture_stream err;
	int out_fd;          /* the output file, holding the whole content */
	char *path;
	int err_fd;          /* stderr spill: it goes after stdout, so waits */
	uint64_t copied;     /* stderr spill bytes already in the output file */
	bool no_copy_range;  /* copy_file_range failed: use pread and write */
	uint64_t total;
	bool sep;

	char *error;
	struct buf head;
	struct buf tail;
};

static void capture_close_files(struct capture *);
static void capture_fail(struct capture *, const char *, int);
static void capture_write(struct capture *, int, const void *, size_t);
static int capture_open_output(struct capture *);
static int capture_open_spill(struct capture *);
static void capture_spill(struct capture *, struct capture_stream *);
static void capture_ring_add(struct capture *, struct capture_stream *,
    const char *, size_t);
static void capture_stream_copy(struct capture *,
    const struct capture_stream *, uint64_t, size_t, struct buf *);
static void capture_range(struct capture *, uint64_t, size_t, struct buf *);
static int capture_copy_step(struct capture *);
static void capture_assemble(struct capture *);

struct capture *
capture_create(size_t max, const char *dir, const char *name, long pid,
    uint64_t id)
{
	struct capture *c;
	char *p;

	c = xcalloc(1, sizeof *c);
	c->max = max;
	c->head_size = max / 2;
	c->tail_size = max - c->head_size;
	c->dir = xstrdup(dir);
	if (name == NULL || *name == '\0')
		name = "proc";
	c->name = xstrndup(name, strnlen(name, 64));
	/* The name ends up in a path: nothing that could leave the dir. */
	for (p = c->name; *p != '\0'; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			*p = '_';
	}
	c->pid = pid;
	c->id = id;
	c->out_fd = -1;
	c->err_fd = -1;
	return c;
}

void
capture_free(struct capture *c, bool keep_file)
{
	if (c == NULL)
		return;
	capture_close_files(c);
	if (c->path != NULL && !keep_file)
		unlink(c->path);
	buf_free(&c->out.mem);
	buf_free(&c->err.mem);
	free(c->out.ring);
	free(c->err.ring);
	buf_free(&c->head);
	buf_free(&c->tail);
	free(c->error);
	free(c->path);
	free(c->name);
	free(c->dir);
	free(c);
}

/* The descriptors of the whole-output file, closed once. */
static void
capture_close_files(struct capture *c)
{
	if (c->out_fd != -1)
		close(c->out_fd);
	c->out_fd = -1;
	if (c->err_fd != -1)
		close(c->err_fd);
	c->err_fd = -1;
}

/* Remember the first failure; from then on nothing more goes to disk. */
static void
capture_fail(struct capture *c, const char *what, int error)
{
	if (c->error == NULL) {
		xasprintf(&c->error, "%s: %s", what, strerror(error));
	}
	capture_close_files(c);
}

static void
capture_write(struct capture *c, int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;
	char *what;
	int error;

	if (c->error != NULL || fd == -1)
		return;
	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			error = errno;
			xasprintf(&what, "cannot write %s", fd == c->out_fd ?
			    c->path : "the stderr spill file");
			capture_fail(c, what, error);
			free(what);
			return;
		}
		p += n;
		len -= (size_t)n;
	}
}

static int
capture_open_output(struct capture *c)
{
	char *what;
	int i, fd = -1, error;

	for (i = 0; i < CAPTURE_TRIES; i++) {
		free(c->path);
		if (i == 0) {
			xasprintf(&c->path, "%s/%s-%ld-%llu.out", c->dir,
			    c->name, c->pid, (unsigned long long)c->id);
		} else {
			xasprintf(&c->path, "%s/%s-%ld-%llu-%d.out", c->dir,
			    c->name, c->pid, (unsigned long long)c->id, i);
		}
		fd = open(c->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600);
		if (fd != -1 || errno != EEXIST)
			break;
	}
	if (fd == -1) {
		error = errno;
		xasprintf(&what, "cannot create %s", c->path);
		capture_fail(c, what, error);
		free(what);
		free(c->path);
		c->path = NULL;
		return -1;
	}
	if (c->owned && fchown(fd, c->uid, c->gid) != 0) {
		error = errno;
		xasprintf(&what, "cannot give %s to uid %u", c->path,
		    (unsigned)c->uid);
		capture_fail(c, what, error);
		free(what);
		close(fd);
		unlink(c->path);
		free(c->path);
		c->path = NULL;
		return -1;
	}
	c->out_fd = fd;
	return 0;
}

/* An anonymous file in the output dir, gone by itself once closed. */
static int
capture_open_spill(struct capture *c)
{
	char *path, *what;
	int fd, error;

	fd = open(c->dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
	if (fd == -1) {
		/* Not every file system has O_TMPFILE: create, then unlink. */
		xasprintf(&path, "%s/.%s-%ld-%llu.err", c->dir, c->name,
		    c->pid, (unsigned long long)c->id);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd != -1)
			unlink(path);
		else {
			error = errno;
			xasprintf(&what, "cannot create %s", path);
			capture_fail(c, what, error);
			free(what);
		}
		free(path);
	}
	c->err_fd = fd;
	return fd == -1 ? -1 : 0;
}

/* The stream went past max: keep its head and tail, the rest on disk. */
static void
capture_spill(struct capture *c, struct capture_stream *s)
{
	int fd = -1;

	if (s == &c->out) {
		if (c->error == NULL && capture_open_output(c) == 0)
			fd = c->out_fd;
	} else {
		if (c->error == NULL && capture_open_spill(c) == 0)
			fd = c->err_fd;
	}
	capture_write(c, fd, s->mem.data, s->mem.len);

	s->ring = xmalloc(c->tail_size + 1);
	s->ring_start = s->ring_len = 0;
	capture_ring_add(c, s, s->mem.data, s->mem.len);

	s->mem.len = c->head_size;
	s->mem.data = xrealloc(s->mem.data, c->head_size + 1);
	s->mem.data[s->mem.len] = '\0';
	s->mem.cap = c->head_size + 1;
	s->spilled = true;
}

static void
capture_ring_add(struct capture *c, struct capture_stream *s, const char *p,
    size_t n)
{
	size_t cap = c->tail_size, end, k;

	if (cap == 0)
		return;
	if (n >= cap) {
		memcpy(s->ring, p + n - cap, cap);
		s->ring_start = 0;
		s->ring_len = cap;
		return;
	}
	while (n > 0) {
		end = (s->ring_start + s->ring_len) % cap;
		k = n < cap - end ? n : cap - end;
		memcpy(s->ring + end, p, k);
		if (s->ring_len + k > cap) {
			s->ring_start = (s->ring_start + s->ring_len + k -
			    cap) % cap;
			s->ring_len = cap;
		} else
			s->ring_len += k;
		p += k;
		n -= k;
	}
}

void
capture_set_owner(struct capture *c, uid_t uid, gid_t gid)
{
	c->owned = true;
	c->uid = uid;
	c->gid = gid;
}

void
capture_limit_file(struct capture *c, uint64_t max)
{
	c->file_max = max;
}

void
capture_add(struct capture *c, int fd, const void *data, size_t len)
{
	struct capture_stream *s = fd == 2 ? &c->err : &c->out;

	if (len == 0)
		return;
	if (c->state != CAPTURE_ADDING)
		fatal("output added after the capture was finished");
	s->len += len;
	/* Past the budget a file would only push every other one out. */
	if (c->file_max > 0 && c->out.len + c->err.len > c->file_max &&
	    c->error == NULL)
		capture_fail(c, "the whole output is larger than "
		    "--output-budget", EFBIG);
	s->last = ((const char *)data)[len - 1];
	if (!s->spilled) {
		buf_add(&s->mem, data, len);
		if (s->mem.len > c->max)
			capture_spill(c, s);
		return;
	}
	capture_write(c, s == &c->out ? c->out_fd : c->err_fd, data, len);
	capture_ring_add(c, s, data, len);
}

/* Append bytes [off, off + n) of one stream to dst, from what is kept. */
static void
capture_stream_copy(struct capture *c, const struct capture_stream *s,
    uint64_t off, size_t n, struct buf *dst)
{
	uint64_t ring_off;
	size_t i, k;

	if (n == 0)
		return;
	if (off + n <= s->mem.len) {
		buf_add(dst, s->mem.data + off, n);
		return;
	}
	ring_off = s->len - s->ring_len;
	if (!s->spilled || off < ring_off || off + n > s->len)
		fatal("capture: bytes %llu+%zu are not kept",
		    (unsigned long long)off, n);
	i = (s->ring_start + (size_t)(off - ring_off)) % c->tail_size;
	while (n > 0) {
		k = n < c->tail_size - i ? n : c->tail_size - i;
		buf_add(dst, s->ring + i, k);
		n -= k;
		i = 0;
	}
}

/* Append bytes [off, off + n) of the combined content to dst. */
static void
capture_range(struct capture *c, uint64_t off, size_t n, struct buf *dst)
{
	uint64_t end = off + n, a, b;
	uint64_t olen = c->out.len, elen = c->err.len;
	uint64_t estart = olen + (c->sep ? 1 : 0);

	a = off;
	b = end < olen ? end : olen;
	if (a < b)
		capture_stream_copy(c, &c->out, a, (size_t)(b - a), dst);
	if (c->sep && off <= olen && end > olen)
		buf_add(dst, "\n", 1);
	a = off > estart ? off - estart : 0;
	b = end > estart ? end - estart : 0;
	if (b > elen)
		b = elen;
	if (a < b)
		capture_stream_copy(c, &c->err, a, (size_t)(b - a), dst);
}

/* Move a bounded piece of the stderr spill to the end of the output file. */
static int
capture_copy_step(struct capture *c)
{
	char chunk[65536];
	uint64_t left = c->err.len - c->copied;
	size_t want = left < CAPTURE_STEP ? (size_t)left : CAPTURE_STEP;
	size_t done = 0;
	loff_t off = (loff_t)c->copied;
	ssize_t n;

	if (c->error != NULL || want == 0)
		return 0;
	if (!c->no_copy_range) {
		n = copy_file_range(c->err_fd, &off, c->out_fd, NULL, want, 0);
		if (n == -1 && errno == EINTR)
			return 1;
		if (n > 0) {
			c->copied += (uint64_t)n;
			return c->copied < c->err.len;
		}
		/* Not between these files (or short): read and write. */
		c->no_copy_range = true;
	}
	while (done < want && c->error == NULL) {
		n = pread(c->err_fd, chunk, sizeof chunk, (off_t)c->copied);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			capture_fail(c, "cannot read the stderr spill file",
			    n == 0 ? EIO : errno);
			return 0;
		}
		capture_write(c, c->out_fd, chunk, (size_t)n);
		c->copied += (uint64_t)n;
		done += (size_t)n;
	}
	return c->error == NULL && c->copied < c->err.len;
}

/* Take the head and the tail of the combined content from memory. */
static void
capture_assemble(struct capture *c)
{
	buf_reset(&c->head);
	buf_reset(&c->tail);
	if (c->total <= c->max && c->err.len == 0 && !c->out.spilled) {
		/* stdout alone, whole: its buffer is the head, not a copy. */
		buf_free(&c->head);
		c->head = c->out.mem;
		memset(&c->out.mem, 0, sizeof c->out.mem);
		return;
	}
	if (c->total <= c->max) {
		capture_range(c, 0, (size_t)c->total, &c->head);
		return;
	}
	capture_range(c, 0, c->head_size, &c->head);
	capture_range(c, c->total - c->tail_size, c->tail_size, &c->tail);
	capture_close_files(c);
	/* A file missing part of the content would lie: drop it. */
	if (c->error != NULL && c->path != NULL) {
		unlink(c->path);
		free(c->path);
		c->path = NULL;
	}
}

int
capture_finish(struct capture *c)
{
	switch (c->state) {
	case CAPTURE_ADDING:
		c->sep = c->out.len > 0 && c->err.len > 0 &&
		    c->out.last != '\n';
		c->total = c->out.len + (c->sep ? 1 : 0) + c->err.len;
		if (c->total <= c->max) {
			c->state = CAPTURE_DONE;
			capture_assemble(c);
			return 0;
		}
		if (!c->out.spilled && c->error == NULL &&
		    capture_open_output(c) == 0)
			capture_write(c, c->out_fd, c->out.mem.data,
			    c->out.len);
		if (c->sep)
			capture_write(c, c->out_fd, "\n", 1);
		if (!c->err.spilled) {
			capture_write(c, c->out_fd, c->err.mem.data,
			    c->err.len);
			c->state = CAPTURE_DONE;
			capture_assemble(c);
			return 0;
		}
		c->state = CAPTURE_COPYING;
		return 1;
	case CAPTURE_COPYING:
		if (capture_copy_step(c))
			return 1;
		c->state = CAPTURE_DONE;
		capture_assemble(c);
		return 0;
	case CAPTURE_DONE:
		break;
	}
	return 0;
}

void
capture_output(struct capture *c, struct output *o)
{
	if (c->state != CAPTURE_DONE)
		fatal("capture output read before it was finished");
	o->head = c->head.data != NULL ? c->head.data : "";
	o->head_len = c->head.len;
	o->tail = c->tail.data != NULL ? c->tail.data : "";
	o->tail_len = c->tail.len;
	o->total = c->total;
	o->path = c->path;
}

const char *
capture_error(struct capture *c)
{
	return c->error;
}

/* One stream: its head (or whole) in memory, its tail in order. */
static void
capture_save_stream(struct capture *c, const struct capture_stream *s,
    struct handover_rec *r, json_t *obj)
{
	struct buf ring = { 0 };
	size_t first;

	json_object_set_new(obj, "len", json_integer((json_int_t)s->len));
	json_object_set_new(obj, "last", json_integer((unsigned char)
	    s->last));
	json_object_set_new(obj, "spilled", json_boolean(s->spilled));
	handover_put(r, obj, "mem", s->mem.data, s->mem.len);
	if (s->spilled && c->tail_size > 0) {
		first = c->tail_size - s->ring_start;
		if (first > s->ring_len)
			first = s->ring_len;
		buf_add(&ring, s->ring + s->ring_start, first);
		buf_add(&ring, s->ring, s->ring_len - first);
	}
	handover_put(r, obj, "ring", ring.data, ring.len);
	buf_free(&ring);
}

void
capture_save(struct capture *c, struct handover_rec *r, json_t *obj)
{
	json_t *out = json_object(), *err = json_object();

	if (c->state != CAPTURE_ADDING)
		fatal("a capture handed over after it was finished");
	json_object_set_new(obj, "max", json_integer((json_int_t)c->max));
	json_object_set_new(obj, "fileMax", json_integer((json_int_t)
	    c->file_max));
	if (c->owned) {
		json_object_set_new(obj, "uid", json_integer(c->uid));
		json_object_set_new(obj, "gid", json_integer(c->gid));
	}
	json_object_set_new(obj, "dir", json_string(c->dir));
	json_object_set_new(obj, "name", json_string(c->name));
	json_object_set_new(obj, "pid", json_integer(c->pid));
	json_object_set_new(obj, "id", json_integer((json_int_t)c->id));
	if (c->path != NULL)
		json_object_set_new(obj, "path", json_string(c->path));
	if (c->error != NULL)
		json_object_set_new(obj, "error", json_string(c->error));
	/* The files' offsets go with their descriptors. */
	json_object_set_new(obj, "outFd", json_integer(c->out_fd));
	json_object_set_new(obj, "errFd", json_integer(c->err_fd));
	handover_keep_fd(c->out_fd);
	handover_keep_fd(c->err_fd);
	capture_save_stream(c, &c->out, r, out);
	capture_save_stream(c, &c->err, r, err);
	json_object_set_new(obj, "out", out);
	json_object_set_new(obj, "err", err);
}

static void
capture_load_stream(struct capture *c, struct capture_stream *s,
    const struct handover_in *in, const json_t *obj)
{
	const char *p;
	size_t n;

	s->len = (uint64_t)json_integer_value(json_object_get(obj, "len"));
	s->last = (char)json_integer_value(json_object_get(obj, "last"));
	s->spilled = json_is_true(json_object_get(obj, "spilled"));
	p = handover_get(in, obj, "mem", &n);
	buf_add(&s->mem, p, n);
	if (s->spilled) {
		s->ring = xmalloc(c->tail_size + 1);
		s->ring_start = s->ring_len = 0;
		p = handover_get(in, obj, "ring", &n);
		capture_ring_add(c, s, p, n);
	}
}

struct capture *
capture_load(const struct handover_in *in, const json_t *obj)
{
	struct capture *c;
	const json_t *v;
	int fd;

	c = capture_create((size_t)json_integer_value(json_object_get(obj,
	    "max")), json_string_value(json_object_get(obj, "dir")) != NULL ?
	    json_string_value(json_object_get(obj, "dir")) : "/tmp",
	    json_string_value(json_object_get(obj, "name")),
	    (long)json_integer_value(json_object_get(obj, "pid")),
	    (uint64_t)json_integer_value(json_object_get(obj, "id")));
	c->file_max = (uint64_t)json_integer_value(json_object_get(obj,
	    "fileMax"));
	if ((v = json_object_get(obj, "uid")) != NULL)
		capture_set_owner(c, (uid_t)json_integer_value(v),
		    (gid_t)json_integer_value(json_object_get(obj, "gid")));
	if ((v = json_object_get(obj, "path")) != NULL)
		c->path = xstrdup(json_string_value(v));
	if ((v = json_object_get(obj, "error")) != NULL)
		c->error = xstrdup(json_string_value(v));
	fd = (int)json_integer_value(json_object_get(obj, "outFd"));
	c->out_fd = fd >= 0 && handover_claim_fd(fd) ? fd : -1;
	fd = (int)json_integer_value(json_object_get(obj, "errFd"));
	c->err_fd = fd >= 0 && handover_claim_fd(fd) ? fd : -1;
	capture_load_stream(c, &c->out, in, json_object_get(obj, "out"));
	capture_load_stream(c, &c->err, in, json_object_get(obj, "err"));
	return c;
}
