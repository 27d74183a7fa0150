/* Two sockets joined by splice through a pipe each way. See relay.h. */
#include "net/relay.h"

#include <sys/socket.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* One way: from a side's socket, through a pipe, to the other's. */
struct relay_way {
	int pipe[2];
	size_t cap;              /* what the pipe holds */
	size_t in_pipe;          /* bytes in it */
	struct evbuffer *first;  /* to write before the pipe's */
	bool eof;                /* the source ended */
	bool done;               /* ...and all of it was written */
};

struct relay {
	int fd[2];
	struct event *rd[2], *wr[2]; /* a side readable, writable */
	struct relay_way way[2];     /* way[i]: from side i */
	struct relay_ops ops;
	void *arg;
};

static void relay_pump(struct relay *, int);
static void relay_readable(evutil_socket_t, short, void *);
static void relay_writable(evutil_socket_t, short, void *);

struct relay *
relay_new(struct event_base *base, int a, int b,
    struct evbuffer *const first[2], const struct relay_ops *ops, void *arg)
{
	struct relay *r = xcalloc(1, sizeof *r);
	int i, k;

	r->fd[0] = a;
	r->fd[1] = b;
	for (i = 0; i < 2; i++) {
		if (pipe2(r->way[i].pipe, O_NONBLOCK | O_CLOEXEC) == -1) {
			if (i == 1) {
				close(r->way[0].pipe[0]);
				close(r->way[0].pipe[1]);
			}
			free(r);
			return NULL;
		}
		/* Fewer wake-ups per byte; the default (64 KiB) if refused. */
		fcntl(r->way[i].pipe[1], F_SETPIPE_SZ, RELAY_PIPE);
		k = fcntl(r->way[i].pipe[1], F_GETPIPE_SZ);
		r->way[i].cap = k > 0 ? (size_t)k : 65536;
	}
	r->ops = *ops;
	r->arg = arg;
	for (i = 0; i < 2; i++) {
		r->way[i].first = evbuffer_new();
		if (first != NULL && first[i] != NULL)
			evbuffer_add_buffer(r->way[i].first, first[i]);
		r->rd[i] = event_new(base, r->fd[i], EV_READ, relay_readable, r);
		r->wr[i] = event_new(base, r->fd[i], EV_WRITE, relay_writable,
		    r);
	}
	/* Start both ways from the loop, as if both sides were ready. */
	event_active(r->rd[0], EV_READ, 0);
	event_active(r->rd[1], EV_READ, 0);
	return r;
}

void
relay_free(struct relay *r)
{
	int i;

	if (r == NULL)
		return;
	for (i = 0; i < 2; i++) {
		event_free(r->rd[i]);
		event_free(r->wr[i]);
		close(r->way[i].pipe[0]);
		close(r->way[i].pipe[1]);
		evbuffer_free(r->way[i].first);
		close(r->fd[i]);
	}
	free(r);
}

int
relay_fd(const struct relay *r, int side)
{
	return r->fd[side];
}

void
relay_pending(const struct relay *r, int from, struct buf *out)
{
	const struct relay_way *w = &r->way[from];
	size_t n = evbuffer_get_length(w->first);
	int tmp[2];
	ssize_t k;

	buf_grow(out, n + w->in_pipe);
	evbuffer_copyout(w->first, out->data + out->len, n);
	out->len += n;
	if (w->in_pipe == 0 || pipe2(tmp, O_NONBLOCK | O_CLOEXEC) == -1)
		return;
	/* tee copies the pipe's bytes without taking them. */
	fcntl(tmp[1], F_SETPIPE_SZ, RELAY_PIPE);
	if (tee(w->pipe[0], tmp[1], w->in_pipe, SPLICE_F_NONBLOCK) > 0)
		while ((k = read(tmp[0], out->data + out->len, w->in_pipe -
		    (out->len - n))) > 0)
			out->len += (size_t)k;
	out->data[out->len] = '\0';
	close(tmp[0]);
	close(tmp[1]);
}

static void
relay_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;

	relay_pump(r, fd == r->fd[0] ? 0 : 1);
}

static void
relay_writable(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;

	/* Writable side i: the way into it is the other side's. */
	relay_pump(r, fd == r->fd[0] ? 1 : 0);
}

/*
 * Move what way `from` can: its first bytes, then pipe to destination and
 * source to pipe, each as far as it goes, until neither moves (then wait
 * for whichever would block) or the source ended and the pipe is empty
 * (then shut the destination's writing half).
 */
static void
relay_pump(struct relay *r, int from)
{
	struct relay_way *w = &r->way[from];
	int src = r->fd[from], dst = r->fd[1 - from];
	bool moved, want_read, want_write;
	ssize_t k;

	if (w->done)
		return;
	while (evbuffer_get_length(w->first) > 0) {
		if ((k = evbuffer_write(w->first, dst)) < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				event_add(r->wr[1 - from], NULL);
				return;
			}
			goto fail;
		}
		r->ops.moved(r->arg, from, (size_t)k);
	}
	do {
		moved = want_read = want_write = false;
		if (w->in_pipe > 0) {
			k = splice(w->pipe[0], NULL, dst, NULL, w->in_pipe,
			    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (k > 0) {
				w->in_pipe -= (size_t)k;
				r->ops.moved(r->arg, from, (size_t)k);
				moved = true;
			} else if (k < 0 && (errno == EAGAIN || errno == EINTR))
				want_write = true;
			else
				goto fail;
		}
		if (!w->eof && w->in_pipe < w->cap) {
			k = splice(src, NULL, w->pipe[1], NULL, w->cap -
			    w->in_pipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (k >= 0) {
				w->in_pipe += (size_t)k;
				w->eof = k == 0;
				moved = true;
			} else if (errno == EAGAIN || errno == EINTR)
				want_read = true;
			else
				goto fail;
		}
		if (w->eof && w->in_pipe == 0) {
			shutdown(dst, SHUT_WR);
			w->done = true;
			if (r->way[1 - from].done)
				r->ops.done(r->arg);
			return;
		}
	} while (moved);
	if (want_write)
		event_add(r->wr[1 - from], NULL);
	if (want_read)
		event_add(r->rd[from], NULL);
	return;
fail:
	/* A reset or a broken pipe: neither way goes on. */
	r->ops.done(r->arg);
}
