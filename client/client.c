/*
 * libstexec: one connection to stexecd. Bytes come in through the shared
 * NDJSON reader and every complete line is classified at once and put on
 * one queue in arrival order, so subscription bookkeeping (the last seq of
 * each session) happens exactly in wire order. Requests are encoded with
 * the shared JSON-RPC codec into an output buffer written without
 * blocking. See stexec/client.h.
 */
#include "stexec/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jsonrpc.h"
#include "ndjson.h"
#include "socket_path.h"

/* Bytes per read(2), and per stexec_read_ready() before yielding. */
#define CLIENT_READ_SIZE (64 * 1024)
#define CLIENT_READ_BUDGET (1024 * 1024)

/* Unsent output beyond this means the daemon stopped reading us. */
#define CLIENT_MAX_OUT ((size_t)64 * 1024 * 1024)


/* A message taken off the wire, not yet handed to the caller. */
struct client_msg {
	json_t *msg;
	int64_t id; /* the reply's id; 0: an error with id null; -1: a
		     * notification */
	size_t bytes;
	struct client_msg *next;
};

/* A subscribed session and the seq of its last notification received. */
struct client_sub {
	char *session;
	uint64_t last;
	struct client_sub *next;
};

/* A subscribe or unsubscribe sent, whose reply updates the subs. */
struct client_track {
	int64_t id;
	char *session;
	int64_t since; /* -1: live only */
	bool unsubscribe;
	struct client_track *next;
};

struct stexec {
	int fd;
	char path[sizeof ((struct sockaddr_un *)0)->sun_path];
	struct ndjson in;
	struct buf out;
	size_t out_off;      /* bytes of out already written */
	int64_t next_id;
	int64_t conn_first;  /* first id sent on the current connection */
	struct client_msg *head, *tail;
	size_t queued_bytes;
	uint64_t enqueued;   /* messages ever queued */
	struct client_sub *subs;
	struct client_track *tracks;
	int64_t *abandoned;  /* ids whose replies nobody waits for any more */
	size_t nabandoned;
	int64_t *inflight;   /* ids sent on this connection, not yet answered */
	size_t ninflight, capinflight;
	int timeout_ms;
	char error[512];     /* why the connection ended */
	char null_error[256];/* the last error the daemon sent with id null */
};

enum client_kind {
	CLIENT_NOTIFICATION,
	CLIENT_REPLY,
	CLIENT_NULL_ERROR,
	CLIENT_JUNK,
};

typedef struct client_msg *(*client_find_fn)(struct stexec *, int64_t);

static void	client_err(struct stexec_error *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	client_fail(struct stexec *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static int	client_open(const char *, int *);
static void	client_connect_error(char *, size_t, const char *,
		    const char *, int, bool);
static int64_t	client_now_ms(void);
static enum client_kind client_classify(json_t *, int64_t *);
static void	client_line(struct stexec *, const char *, size_t);
static bool	client_accept_notification(struct stexec *, const json_t *);
static void	client_track_reply(struct stexec *, int64_t, const json_t *);
static bool	client_take_abandoned(struct stexec *, int64_t);
static void	client_abandon(struct stexec *, int64_t);
static void	client_enqueue(struct stexec *, json_t *, int64_t, size_t);
static json_t	*client_unlink(struct stexec *, struct client_msg *);
static struct client_msg *client_find_reply(struct stexec *, int64_t);
static struct client_msg *client_find_notification(struct stexec *, int64_t);
static struct client_msg *client_find_any(struct stexec *, int64_t);
static int	client_wait(struct stexec *, client_find_fn, int64_t, int,
		    struct client_msg **, struct stexec_error *);
static struct client_sub *client_sub_find(const struct stexec *,
		    const char *);
static void	client_sub_set(struct stexec *, const char *, uint64_t);
static void	client_sub_remove(struct stexec *, const char *);
static void	client_track_add(struct stexec *, int64_t, const char *,
		    const json_t *);
static void	client_tracks_free(struct stexec *);
static int	client_inflight_add(struct stexec *, int64_t);
static void	client_inflight_remove(struct stexec *, int64_t);
static void	client_drop_connection(struct stexec *);

void
stexec_error_clear(struct stexec_error *err)
{
	if (err == NULL)
		return;
	json_decref(err->data);
	memset(err, 0, sizeof *err);
}

/* Fill err (if any), releasing what it held. */
static void
client_err(struct stexec_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return;
	stexec_error_clear(err);
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
}

/*
 * The connection is unusable: close it and remember why. Queued messages
 * stay takeable; requests without a reply will fail.
 */
static void
client_fail(struct stexec *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof c->error, fmt, ap);
	va_end(ap);
	client_drop_connection(c);
}

static void
client_drop_connection(struct stexec *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	ndjson_free(&c->in);
	c->out.len = c->out_off = 0;
	if (c->out.data != NULL)
		c->out.data[0] = '\0';
	client_tracks_free(c);
}

static int64_t
client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
stexec_default_socket(char *buf, size_t len)
{
	return socket_path_default(buf, len);
}

/* Connect a CLOEXEC socket to path; returns 0, or -1 with errno. */
static int
client_open(const char *path, int *fdp)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, saved;

	if (strlen(path) >= sizeof sun.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	/* Blocking connect: a Unix socket connects at once or not at all. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	*fdp = fd;
	return 0;
}

/* A message that says what is wrong and what to do about it. */
static void
client_connect_error(char *buf, size_t len, const char *path,
    const char *also, int error, bool default_path)
{
	char start[160], tried[160] = "";

	if (buf == NULL || len == 0)
		return;
	if (also != NULL)
		snprintf(tried, sizeof tried, " (nor %s)", also);
	if (default_path)
		snprintf(start, sizeof start, "stexecd");
	else
		snprintf(start, sizeof start, "stexecd --socket %s", path);

	switch (error) {
	case ENOENT:
	case ENOTDIR:
		snprintf(buf, len, "cannot connect to %s%s: %s — is stexecd "
		    "running? Start it with: %s", path, tried, strerror(error),
		    start);
		break;
	case ECONNREFUSED:
		snprintf(buf, len, "cannot connect to %s%s: %s — the socket "
		    "is stale, stexecd is not running. Start it with: %s",
		    path, tried, strerror(error), start);
		break;
	case EPERM:
		/* Not the socket's mode (EACCES): no socket may be made. */
		snprintf(buf, len, "cannot connect to %s: %s — this process "
		    "may not open sockets (a sandboxed tool cannot reach "
		    "stexecd)", path, strerror(error));
		break;
	case EACCES:
		snprintf(buf, len, "cannot connect to %s: %s — the socket "
		    "belongs to another user (mode 0600); run as that user, "
		    "or start stexecd with --socket-mode", path,
		    strerror(error));
		break;
	case ENAMETOOLONG:
		snprintf(buf, len, "cannot connect to %s: the path is too "
		    "long for a Unix socket (at most %zu bytes)", path,
		    sizeof ((struct sockaddr_un *)0)->sun_path - 1);
		break;
	default:
		snprintf(buf, len, "cannot connect to %s: %s", path,
		    strerror(error));
		break;
	}
}

/*
 * With no path the daemon's own rule decides; when it is the
 * $XDG_RUNTIME_DIR one and nothing listens there, a system daemon on
 * /run/stexec (or $STEXEC_FALLBACK_SOCKET) is the next best guess
 * (doc/design.md §3: look in that order).
 */
struct stexec *
stexec_connect(const char *path, char *err, size_t errlen)
{
	char def[sizeof ((struct sockaddr_un *)0)->sun_path * 2];
	const char *env = getenv(STEXEC_SOCKET_ENV), *also = NULL;
	const char *fallback = socket_path_fallback();
	struct stexec *c;
	bool by_default = path == NULL;
	int fd = -1, error = 0, first_error;

	if (path == NULL) {
		if (stexec_default_socket(def, sizeof def) != 0) {
			client_connect_error(err, errlen, def, NULL,
			    ENAMETOOLONG, true);
			return NULL;
		}
		path = def;
	}
	if (client_open(path, &fd) != 0) {
		error = first_error = errno;
		if (by_default && (env == NULL || *env == '\0') &&
		    strcmp(path, fallback) != 0 &&
		    (error == ENOENT || error == ECONNREFUSED ||
		    error == ENOTDIR)) {
			also = fallback;
			if (client_open(also, &fd) == 0) {
				path = also;
				error = 0;
			} else
				error = first_error;
		}
		if (error != 0) {
			client_connect_error(err, errlen, path, also, error,
			    by_default || (env != NULL &&
			    strcmp(env, path) == 0));
			return NULL;
		}
	}
	if ((c = calloc(1, sizeof *c)) == NULL) {
		close(fd);
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->fd = fd;
	/* It connected, so it fits: client_open checked the length. */
	memcpy(c->path, path, strlen(path) + 1);
	ndjson_init(&c->in, STEXEC_CLIENT_MAX_LINE);
	c->next_id = c->conn_first = 1;
	c->timeout_ms = -1;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	return c;
}

int
stexec_reconnect(struct stexec *c, char *err, size_t errlen)
{
	int fd;

	client_drop_connection(c);
	if (client_open(c->path, &fd) != 0) {
		client_connect_error(c->error, sizeof c->error, c->path, NULL,
		    errno, false);
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s", c->error);
		return -1;
	}
	c->fd = fd;
	c->conn_first = c->next_id;
	c->error[0] = c->null_error[0] = '\0';
	ndjson_init(&c->in, STEXEC_CLIENT_MAX_LINE);
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	return 0;
}

void
stexec_close(struct stexec *c)
{
	struct client_msg *m, *mnext;
	struct client_sub *s, *snext;

	if (c == NULL)
		return;
	client_drop_connection(c);
	buf_free(&c->out);
	for (m = c->head; m != NULL; m = mnext) {
		mnext = m->next;
		json_decref(m->msg);
		free(m);
	}
	for (s = c->subs; s != NULL; s = snext) {
		snext = s->next;
		free(s->session);
		free(s);
	}
	free(c->abandoned);
	free(c->inflight);
	free(c);
}

const char *
stexec_path(const struct stexec *c)
{
	return c->path;
}

bool
stexec_is_open(const struct stexec *c)
{
	return c->fd >= 0;
}

const char *
stexec_last_error(const struct stexec *c)
{
	return c->fd >= 0 ? "" : c->error;
}

void
stexec_set_timeout(struct stexec *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms < 0 ? -1 : timeout_ms;
}

int
stexec_fd(const struct stexec *c)
{
	return c->fd;
}

short
stexec_poll_events(const struct stexec *c)
{
	return POLLIN | (stexec_want_write(c) ? POLLOUT : 0);
}

bool
stexec_pending(const struct stexec *c)
{
	return c->head != NULL;
}

bool
stexec_want_write(const struct stexec *c)
{
	return c->fd >= 0 && c->out_off < c->out.len;
}

int
stexec_flush(struct stexec *c)
{
	ssize_t n;
	int error;

	while (c->fd >= 0 && c->out_off < c->out.len) {
		n = send(c->fd, c->out.data + c->out_off,
		    c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0) {
			/* Its last words and replies may be in before the EOF:
			 * take them, and the reason it hung up. */
			error = errno;
			stexec_read_ready(c);
			if (c->fd >= 0)
				client_fail(c, "cannot write to stexecd at %s: "
				    "%s", c->path, strerror(error));
			return -1;
		}
		c->out_off += (size_t)n;
	}
	if (c->fd < 0)
		return -1;
	/* All written: start the buffer over instead of growing it. */
	c->out.len = c->out_off = 0;
	if (c->out.data != NULL)
		c->out.data[0] = '\0';
	return 0;
}

int
stexec_read_ready(struct stexec *c)
{
	uint64_t before = c->enqueued;
	size_t total = 0, len;
	char *buf, *line;
	ssize_t n;

	while (c->fd >= 0 && total < CLIENT_READ_BUDGET) {
		buf = ndjson_space(&c->in, CLIENT_READ_SIZE);
		n = read(c->fd, buf, CLIENT_READ_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			client_fail(c, "cannot read from stexecd at %s: %s",
			    c->path, strerror(errno));
			break;
		}
		if (n == 0) {
			if (c->null_error[0] != '\0')
				client_fail(c, "stexecd closed the connection: "
				    "%s", c->null_error);
			else
				client_fail(c, "stexecd closed the connection");
			break;
		}
		ndjson_commit(&c->in, (size_t)n);
		total += (size_t)n;
		for (;;) {
			switch (ndjson_next(&c->in, &line, &len)) {
			case NDJSON_LINE:
				client_line(c, line, len);
				if (c->fd < 0)
					goto out;
				continue;
			case NDJSON_MORE:
				break;
			case NDJSON_TOO_LONG:
				client_fail(c, "stexecd sent a line longer "
				    "than %u bytes", STEXEC_CLIENT_MAX_LINE);
				goto out;
			}
			break;
		}
	}
out:
	return c->fd < 0 ? -1 : (int)(c->enqueued - before);
}

/*
 * Only what a daemon sends is of interest: replies (ours have integer ids),
 * errors about a line it could not read (null id) and notifications, told
 * apart by the protocol's own classifier.
 */
static enum client_kind
client_classify(json_t *root, int64_t *id)
{
	struct jsonrpc_msg msg;
	enum client_kind kind = CLIENT_JUNK;

	*id = -1;
	jsonrpc_decode_value(root, &msg);
	switch (msg.kind) {
	case JSONRPC_NOTIFICATION:
		kind = CLIENT_NOTIFICATION;
		break;
	case JSONRPC_ERROR:
	case JSONRPC_RESPONSE:
		if (msg.kind == JSONRPC_ERROR && json_is_null(msg.id))
			kind = CLIENT_NULL_ERROR;
		else if (json_is_integer(msg.id)) {
			*id = json_integer_value(msg.id);
			kind = CLIENT_REPLY;
		}
		break;
	default:
		break; /* a request to us is not in the protocol */
	}
	jsonrpc_msg_clear(&msg);
	return kind;
}

/*
 * One line from the daemon. It is parsed with JSON_ALLOW_NUL, not by
 * jsonrpc_decode(), because tool output may hold NUL characters, sent as
 * \u0000; client_classify then uses the protocol's classifier.
 */
static void
client_line(struct stexec *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *root, *e;
	int64_t id;

	root = json_loadb(line, len, JSON_ALLOW_NUL, &jerr);
	if (root == NULL)
		return; /* not JSON: nothing to hand anyone */
	switch (client_classify(root, &id)) {
	case CLIENT_NOTIFICATION:
		if (!client_accept_notification(c, root)) {
			json_decref(root);
			return;
		}
		client_enqueue(c, root, -1, len);
		return;
	case CLIENT_REPLY:
		client_inflight_remove(c, id);
		client_track_reply(c, id, root);
		if (client_take_abandoned(c, id)) {
			json_decref(root);
			return;
		}
		client_enqueue(c, root, id, len);
		return;
	case CLIENT_NULL_ERROR:
		/*
		 * A line of ours the daemon could not read. With one request
		 * unanswered it can only be that one's: make it its reply,
		 * or its caller would wait for ever.
		 */
		if (c->ninflight == 1) {
			id = c->inflight[0];
			json_object_set_new(root, "id", json_integer(id));
			client_inflight_remove(c, id);
			client_track_reply(c, id, root);
			if (client_take_abandoned(c, id))
				json_decref(root);
			else
				client_enqueue(c, root, id, len);
			return;
		}
		/* Otherwise whose it is cannot be told: the caller sees it
		 * as id 0, and it explains a hangup that may follow. */
		e = json_object_get(root, "error");
		snprintf(c->null_error, sizeof c->null_error, "%s (%lld)",
		    json_string_value(json_object_get(e, "message")) != NULL ?
		    json_string_value(json_object_get(e, "message")) : "error",
		    (long long)json_integer_value(json_object_get(e, "code")));
		client_enqueue(c, root, 0, len);
		return;
	case CLIENT_JUNK:
		json_decref(root);
		return;
	}
}

/*
 * Seq bookkeeping of subscribed sessions: a notification at or below the
 * last seq received is a duplicate from a replay. session_closed ends the
 * subscription.
 */
static bool
client_accept_notification(struct stexec *c, const json_t *root)
{
	const json_t *params = json_object_get(root, "params");
	const char *sid, *method;
	struct client_sub *s;
	json_int_t seq;

	sid = json_string_value(json_object_get(params, "sessionId"));
	if (sid == NULL || (s = client_sub_find(c, sid)) == NULL)
		return true;
	seq = json_integer_value(json_object_get(params, "seq"));
	if (seq <= 0)
		return true;
	if ((uint64_t)seq <= s->last)
		return false;
	/* Checked before the seq is taken: a message not queued is not had. */
	if (c->queued_bytes > STEXEC_CLIENT_MAX_QUEUED)
		return true;
	s->last = (uint64_t)seq;
	method = json_string_value(json_object_get(root, "method"));
	if (strcmp(method, "session_closed") == 0)
		client_sub_remove(c, sid);
	return true;
}

/* A reply to a subscribe or unsubscribe updates the subs, in wire order. */
static void
client_track_reply(struct stexec *c, int64_t id, const json_t *root)
{
	struct client_track **tp, *t;
	const json_t *result = json_object_get(root, "result");
	json_int_t last;
	uint64_t from;

	for (tp = &c->tracks; *tp != NULL; tp = &(*tp)->next)
		if ((*tp)->id == id)
			break;
	if ((t = *tp) == NULL)
		return;
	*tp = t->next;
	if (t->unsubscribe) {
		if (result != NULL)
			client_sub_remove(c, t->session);
	} else if (result != NULL) {
		last = json_integer_value(json_object_get(result, "lastSeq"));
		if (last < 0)
			last = 0;
		/* Live only: the stream starts after lastSeq. A since beyond
		 * it replays nothing, and live ones follow lastSeq. */
		from = (uint64_t)last;
		if (t->since >= 0 && (uint64_t)t->since < from)
			from = (uint64_t)t->since;
		client_sub_set(c, t->session, from);
	} else
		client_sub_remove(c, t->session);
	free(t->session);
	free(t);
}

static bool
client_take_abandoned(struct stexec *c, int64_t id)
{
	size_t i;

	for (i = 0; i < c->nabandoned; i++) {
		if (c->abandoned[i] == id) {
			c->abandoned[i] = c->abandoned[--c->nabandoned];
			return true;
		}
	}
	return false;
}

/* A blocking call gave up on id: its reply, if it ever comes, is dropped. */
static void
client_abandon(struct stexec *c, int64_t id)
{
	int64_t *a;

	if (id < c->conn_first || c->fd < 0)
		return; /* no reply can come any more */
	a = realloc(c->abandoned, (c->nabandoned + 1) * sizeof *a);
	if (a == NULL)
		return; /* then the reply is merely queued */
	c->abandoned = a;
	c->abandoned[c->nabandoned++] = id;
}

static void
client_enqueue(struct stexec *c, json_t *msg, int64_t id, size_t bytes)
{
	struct client_msg *m;

	if (c->queued_bytes > STEXEC_CLIENT_MAX_QUEUED) {
		json_decref(msg);
		client_fail(c, "more than %zu bytes of messages are queued "
		    "unread: take notifications with stexec_next_notification",
		    (size_t)STEXEC_CLIENT_MAX_QUEUED);
		return;
	}
	if ((m = calloc(1, sizeof *m)) == NULL) {
		json_decref(msg);
		client_fail(c, "out of memory");
		return;
	}
	m->msg = msg;
	m->id = id;
	m->bytes = bytes;
	if (c->tail != NULL)
		c->tail->next = m;
	else
		c->head = m;
	c->tail = m;
	c->queued_bytes += bytes;
	c->enqueued++;
}

/* Remove m from the queue and return its message. */
static json_t *
client_unlink(struct stexec *c, struct client_msg *m)
{
	struct client_msg **mp, *prev = NULL;
	json_t *msg = m->msg;

	for (mp = &c->head; *mp != m; mp = &(*mp)->next)
		prev = *mp;
	*mp = m->next;
	if (c->tail == m)
		c->tail = prev;
	c->queued_bytes -= m->bytes;
	free(m);
	return msg;
}

static struct client_msg *
client_find_reply(struct stexec *c, int64_t id)
{
	struct client_msg *m;

	for (m = c->head; m != NULL; m = m->next)
		if (m->id == id)
			return m;
	return NULL;
}

static struct client_msg *
client_find_notification(struct stexec *c, int64_t unused)
{
	return client_find_reply(c, -1);
}

static struct client_msg *
client_find_any(struct stexec *c, int64_t unused)
{
	return c->head;
}

/*
 * Read and write until find() sees its message in the queue, the timeout
 * passes, a signal arrives, or the connection ends. For a reply, arg is
 * its id: one sent on an earlier connection can no longer come.
 */
static int
client_wait(struct stexec *c, client_find_fn find, int64_t arg,
    int timeout_ms, struct client_msg **found, struct stexec_error *err)
{
	struct pollfd pfd;
	int64_t deadline = timeout_ms < 0 ? -1 : client_now_ms() + timeout_ms;
	int left, r;
	bool polled = false;

	for (;;) {
		if ((*found = find(c, arg)) != NULL)
			return 0;
		if (c->fd < 0) {
			client_err(err, STEXEC_CLIENT_ERR_IO, "%s",
			    c->error[0] != '\0' ? c->error :
			    "not connected to stexecd");
			return -1;
		}
		if (find == client_find_reply && arg < c->conn_first) {
			client_err(err, STEXEC_CLIENT_ERR_IO, "the connection "
			    "to stexecd was lost before the reply came");
			return -1;
		}
		left = -1;
		if (deadline >= 0) {
			int64_t d = deadline - client_now_ms();

			left = d < 0 ? 0 : d > 0x7fffffff ? 0x7fffffff : (int)d;
			if (left == 0 && polled) {
				client_err(err, STEXEC_CLIENT_ERR_TIMEOUT,
				    "no answer from stexecd within %d ms",
				    timeout_ms);
				return -1;
			}
		}
		pfd.fd = c->fd;
		pfd.events = stexec_poll_events(c);
		pfd.revents = 0;
		r = poll(&pfd, 1, left);
		polled = true;
		if (r < 0 && errno == EINTR) {
			client_err(err, STEXEC_CLIENT_ERR_INTR,
			    "interrupted by a signal");
			return -1;
		}
		if (r < 0) {
			client_err(err, STEXEC_CLIENT_ERR_IO, "poll: %s",
			    strerror(errno));
			return -1;
		}
		if (pfd.revents & POLLOUT)
			stexec_flush(c);
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
			stexec_read_ready(c);
	}
}

int64_t
stexec_send(struct stexec *c, const char *method, json_t *params,
    struct stexec_error *err)
{
	struct client_msg *m;
	json_t *id, *msg;
	int64_t n;
	int r;

	if (method == NULL || (params != NULL && !json_is_object(params) &&
	    !json_is_array(params))) {
		json_decref(params);
		client_err(err, STEXEC_CLIENT_ERR_USAGE, "%s", method == NULL ?
		    "no method" : "params must be an object or an array");
		return -1;
	}
	if (c->fd < 0) {
		json_decref(params);
		client_err(err, STEXEC_CLIENT_ERR_IO, "%s",
		    c->error[0] != '\0' ? c->error :
		    "not connected to stexecd");
		return -1;
	}
	if (c->out.len - c->out_off > CLIENT_MAX_OUT) {
		json_decref(params);
		client_err(err, STEXEC_CLIENT_ERR_IO, "more than %zu bytes are "
		    "waiting to be sent: stexecd does not read them",
		    CLIENT_MAX_OUT);
		return -1;
	}
	n = c->next_id;
	id = json_integer(n);
	r = id == NULL ? -1 : jsonrpc_request(&c->out, id, method, params);
	json_decref(id);
	if (r != 0) {
		json_decref(params);
		client_err(err, STEXEC_CLIENT_ERR_USAGE, "cannot encode the "
		    "%s request (strings must be valid UTF-8)", method);
		return -1;
	}
	c->next_id++;
	if (client_inflight_add(c, n) != 0) {
		json_decref(params);
		client_fail(c, "out of memory");
		client_err(err, STEXEC_CLIENT_ERR_IO, "%s", c->error);
		return -1;
	}
	if (strcmp(method, "subscribe") == 0 ||
	    strcmp(method, "unsubscribe") == 0)
		client_track_add(c, n, method, params);
	json_decref(params);
	if (stexec_flush(c) != 0) {
		/* It may have answered (or refused) it, then hung up. */
		if ((m = client_find_reply(c, n)) != NULL) {
			if (json_object_get(m->msg, "error") == NULL)
				return n;
			msg = client_unlink(c, m);
			stexec_reply_decode(msg, NULL, err);
			json_decref(msg);
			return -1;
		}
		client_err(err, STEXEC_CLIENT_ERR_IO, "%s", c->error);
		return -1;
	}
	return n;
}

int
stexec_reply_decode(const json_t *msg, json_t **result,
    struct stexec_error *err)
{
	const json_t *r = json_object_get(msg, "result"), *e, *m;

	if (result != NULL)
		*result = NULL;
	if (r != NULL) {
		if (result != NULL)
			*result = json_incref((json_t *)r);
		return 0;
	}
	e = json_object_get(msg, "error");
	m = json_object_get(e, "message");
	client_err(err, (int)json_integer_value(json_object_get(e, "code")),
	    "%s", json_is_string(m) ? json_string_value(m) : "error");
	if (err != NULL && json_object_get(e, "data") != NULL)
		err->data = json_incref(json_object_get(e, "data"));
	return -1;
}

int
stexec_wait_reply(struct stexec *c, int64_t id, int timeout_ms,
    json_t **result, struct stexec_error *err)
{
	struct client_msg *m;
	json_t *msg;
	int r;

	if (result != NULL)
		*result = NULL;
	if (client_wait(c, client_find_reply, id, timeout_ms, &m, err) != 0)
		return -1;
	msg = client_unlink(c, m);
	r = stexec_reply_decode(msg, result, err);
	json_decref(msg);
	return r;
}

int
stexec_call(struct stexec *c, const char *method, json_t *params,
    json_t **result, struct stexec_error *err)
{
	struct stexec_error local = { 0 };
	int64_t id;
	int r;

	if (result != NULL)
		*result = NULL;
	if ((id = stexec_send(c, method, params, err)) < 0)
		return -1;
	r = stexec_wait_reply(c, id, c->timeout_ms, result, &local);
	if (r != 0 && local.code > 0)
		client_abandon(c, id);
	if (r != 0 && err != NULL) {
		stexec_error_clear(err);
		*err = local;
	} else
		stexec_error_clear(&local);
	return r;
}

json_t *
stexec_next_notification(struct stexec *c, int timeout_ms)
{
	struct client_msg *m;

	if (client_wait(c, client_find_notification, 0, timeout_ms, &m,
	    NULL) != 0)
		return NULL;
	return client_unlink(c, m);
}

json_t *
stexec_next_message(struct stexec *c, int timeout_ms,
    struct stexec_error *err)
{
	struct client_msg *m;

	if (client_wait(c, client_find_any, 0, timeout_ms, &m, err) != 0)
		return NULL;
	return client_unlink(c, m);
}

int64_t
stexec_message_id(const json_t *msg)
{
	const json_t *id = json_object_get(msg, "id");

	if (json_is_integer(id))
		return json_integer_value(id);
	return json_is_null(id) ? 0 : -1;
}

static struct client_sub *
client_sub_find(const struct stexec *c, const char *session)
{
	struct client_sub *s;

	for (s = c->subs; s != NULL; s = s->next)
		if (strcmp(s->session, session) == 0)
			return s;
	return NULL;
}

static void
client_sub_set(struct stexec *c, const char *session, uint64_t last)
{
	struct client_sub *s;

	if ((s = client_sub_find(c, session)) == NULL) {
		if ((s = calloc(1, sizeof *s)) == NULL ||
		    (s->session = strdup(session)) == NULL) {
			free(s);
			return; /* then no dedup for it: duplicates, not loss */
		}
		s->next = c->subs;
		c->subs = s;
	}
	s->last = last;
}

static void
client_sub_remove(struct stexec *c, const char *session)
{
	struct client_sub **sp, *s;

	for (sp = &c->subs; *sp != NULL; sp = &(*sp)->next) {
		if (strcmp((*sp)->session, session) == 0) {
			s = *sp;
			*sp = s->next;
			free(s->session);
			free(s);
			return;
		}
	}
}

/* Remember a (un)subscribe by id, whoever sent it, to act on its reply. */
static void
client_track_add(struct stexec *c, int64_t id, const char *method,
    const json_t *params)
{
	const char *sid = json_string_value(json_object_get(params,
	    "sessionId"));
	const json_t *since = json_object_get(params, "since");
	struct client_track *t;

	if (sid == NULL || (t = calloc(1, sizeof *t)) == NULL)
		return;
	if ((t->session = strdup(sid)) == NULL) {
		free(t);
		return;
	}
	t->id = id;
	t->unsubscribe = strcmp(method, "unsubscribe") == 0;
	t->since = json_is_integer(since) && json_integer_value(since) >= 0 ?
	    json_integer_value(since) : -1;
	t->next = c->tracks;
	c->tracks = t;
}

static void
client_tracks_free(struct stexec *c)
{
	struct client_track *t, *next;

	for (t = c->tracks; t != NULL; t = next) {
		next = t->next;
		free(t->session);
		free(t);
	}
	c->tracks = NULL;
	c->nabandoned = 0;
	c->ninflight = 0;
}

static int
client_inflight_add(struct stexec *c, int64_t id)
{
	int64_t *a;
	size_t cap;

	if (c->ninflight == c->capinflight) {
		cap = c->capinflight == 0 ? 16 : c->capinflight * 2;
		if ((a = realloc(c->inflight, cap * sizeof *a)) == NULL)
			return -1;
		c->inflight = a;
		c->capinflight = cap;
	}
	c->inflight[c->ninflight++] = id;
	return 0;
}

/* Replies mostly come in request order: search from the oldest. */
static void
client_inflight_remove(struct stexec *c, int64_t id)
{
	size_t i;

	for (i = 0; i < c->ninflight; i++) {
		if (c->inflight[i] == id) {
			memmove(c->inflight + i, c->inflight + i + 1,
			    (c->ninflight - i - 1) * sizeof *c->inflight);
			c->ninflight--;
			return;
		}
	}
}

int
stexec_subscribe(struct stexec *c, const char *session_id, int64_t since,
    uint64_t *last_seq, struct stexec_error *err)
{
	json_t *params, *result;
	json_int_t last;

	if (last_seq != NULL)
		*last_seq = 0;
	if (session_id == NULL) {
		client_err(err, STEXEC_CLIENT_ERR_USAGE, "no session id");
		return -1;
	}
	params = json_pack("{s:s}", "sessionId", session_id);
	if (params == NULL) {
		client_err(err, STEXEC_CLIENT_ERR_USAGE, "the session id is "
		    "not valid UTF-8");
		return -1;
	}
	if (since >= 0)
		json_object_set_new(params, "since", json_integer(since));
	if (stexec_call(c, "subscribe", params, &result, err) != 0)
		return -1;
	last = json_integer_value(json_object_get(result, "lastSeq"));
	if (last_seq != NULL)
		*last_seq = last > 0 ? (uint64_t)last : 0;
	json_decref(result);
	return 0;
}

int
stexec_unsubscribe(struct stexec *c, const char *session_id,
    struct stexec_error *err)
{
	json_t *params;

	if (session_id == NULL ||
	    (params = json_pack("{s:s}", "sessionId", session_id)) == NULL) {
		client_err(err, STEXEC_CLIENT_ERR_USAGE, "bad session id");
		return -1;
	}
	return stexec_call(c, "unsubscribe", params, NULL, err);
}

int
stexec_resubscribe(struct stexec *c, struct stexec_error *err)
{
	struct stexec_error one = { 0 };
	struct client_sub *s;
	char **names;
	uint64_t *lasts;
	size_t n = 0, i;
	int rc = 0;

	for (s = c->subs; s != NULL; s = s->next)
		n++;
	/* A copy: a failed subscribe removes its session from the list. */
	names = calloc(n + 1, sizeof *names);
	lasts = calloc(n + 1, sizeof *lasts);
	if (names == NULL || lasts == NULL) {
		free(names);
		free(lasts);
		client_err(err, STEXEC_CLIENT_ERR_IO, "out of memory");
		return -1;
	}
	for (i = 0, s = c->subs; s != NULL; s = s->next, i++) {
		names[i] = strdup(s->session);
		lasts[i] = s->last;
	}
	for (i = 0; i < n; i++) {
		if (names[i] == NULL)
			continue;
		if (stexec_subscribe(c, names[i], (int64_t)lasts[i], NULL,
		    &one) != 0 && rc == 0) {
			rc = -1;
			if (err != NULL) {
				stexec_error_clear(err);
				*err = one;
				memset(&one, 0, sizeof one);
			}
		}
		stexec_error_clear(&one);
		free(names[i]);
	}
	free(names);
	free(lasts);
	return rc;
}

uint64_t
stexec_last_seq(const struct stexec *c, const char *session_id)
{
	struct client_sub *s = client_sub_find(c, session_id);

	return s != NULL ? s->last : 0;
}
