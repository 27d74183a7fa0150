/*
 * Client connections: NDJSON framing, JSON-RPC dispatch, bounded output.
 * See conn.h.
 */
#include "net/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "handover.h"
#include "idmap.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "ndjson.h"
#include "utf8.h"
#include "util.h"

/* Bytes read per read(2), and reads per wakeup: fairness across clients. */
#define CONN_READ_SIZE (64 * 1024)
#define CONN_READS_PER_WAKEUP 16
/* Requests in one batch: their replies go out as one array, so bound it. */
#define CONN_BATCH_MAX 100

/*
 * The replies of a JSON-RPC batch, collected until the last one is in:
 * pending counts the tickets still to answer (drain, closeSession), plus
 * one while the batch is being dispatched.
 */
struct batch {
	struct buf out;  /* "[" and the replies so far, comma-separated */
	unsigned pending;
};

struct ticket {
	struct conn *c;
	json_t *id;
	struct batch *batch;   /* the batch it answers in, or NULL */
	LIST_ENTRY(ticket) entry;
};

/* Connections of one uid, for --max-connections-per-uid. */
struct conn_user {
	char key[16];
	unsigned n;
};

struct conn {
	int fd;
	uid_t uid;
	struct conn_user *user;
	struct idmap refs;  /* ids of the sessions it named (key = value) */
	struct event *rev, *wev;
	struct ndjson in;
	struct evbuffer *out;
	struct buf scratch; /* replies are encoded here, then queued */
	bool reading;       /* rev is armed */
	bool throttled;     /* not reading: the client does not read replies */
	bool closing;       /* close once out is flushed */
	bool dead;          /* waiting to be freed from the loop */
	bool dirty;         /* on the flush list */
	bool carried;       /* a reload hands its descriptor over */
	TAILQ_ENTRY(conn) flush_entry;
	struct sub **subs;
	size_t nsubs;
	LIST_HEAD(, ticket) tickets;
	struct batch *batch;  /* while a batch is dispatched: replies go there */
	LIST_ENTRY(conn) entry; /* on conn_list, then on conn_dead */
};

static struct event_base *conn_base;
static size_t conn_max_message;
static struct conn_ops conn_ops;
static LIST_HEAD(, conn) conn_list = LIST_HEAD_INITIALIZER(conn_list);
static unsigned conn_n;
static struct event *conn_reaper;
static LIST_HEAD(, conn) conn_dead = LIST_HEAD_INITIALIZER(conn_dead);
/* Connections with output to write at the end of this loop pass. */
static struct event *conn_flusher;
static TAILQ_HEAD(, conn) conn_dirty = TAILQ_HEAD_INITIALIZER(conn_dirty);
static unsigned conn_max_total, conn_max_per_uid;
static const char *(*conn_peer_check)(pid_t);
static void (*conn_before_write)(void);
static struct idmap conn_users;
static time_t conn_last_refusal;

static void	conn_read_cb(evutil_socket_t, short, void *);
static void	conn_write_cb(evutil_socket_t, short, void *);
static void	conn_reap_cb(evutil_socket_t, short, void *);
static void	conn_flush_cb(evutil_socket_t, short, void *);
static void	conn_flush(struct conn *);
static void	conn_lines(struct conn *);
static void	conn_line(struct conn *, const char *, size_t);
static void	conn_message(struct conn *, struct jsonrpc_msg *);
static void	conn_batch(struct conn *, json_t *);
static void	conn_send_reply(struct conn *, struct batch *);
static void	conn_error_to(struct conn *, struct batch *, const json_t *,
		    int, const json_t *, const char *);
static void	conn_batch_release(struct conn *, struct batch *);
static void	conn_kill(struct conn *);
static void	conn_free(struct conn *);
static void	conn_queue(struct conn *);
static void	conn_set_reading(struct conn *, bool);
static void	conn_internal_error(struct conn *, struct batch *,
		    const json_t *, const char *);
static bool	conn_refuse(int, const struct ucred *, struct conn_user *);
static void	conn_drop_refs(struct conn *);
static struct conn *conn_new(int, uid_t);

void
conn_init(struct event_base *base, size_t max_message,
    const struct conn_ops *ops)
{
	conn_ops = *ops;
	conn_base = base;
	conn_max_message = max_message;
	conn_reaper = event_new(base, -1, 0, conn_reap_cb, NULL);
	conn_flusher = event_new(base, -1, 0, conn_flush_cb, NULL);
}

void
conn_set_limits(unsigned total, unsigned per_uid)
{
	conn_max_total = total;
	conn_max_per_uid = per_uid;
}

unsigned
conn_count(void)
{
	return conn_n;
}

void
conn_set_peer_check(const char *(*check)(pid_t))
{
	conn_peer_check = check;
}

void
conn_set_before_write(void (*fn)(void))
{
	conn_before_write = fn;
}

void
conn_accept(int fd)
{
	struct conn_user *u;
	struct ucred cred;
	socklen_t len = sizeof cred;
	char key[16];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		log_warn("cannot read the peer's credentials: %s",
		    strerror(errno));
		close(fd);
		return;
	}
	snprintf(key, sizeof key, "%u", (unsigned)cred.uid);
	u = idmap_get(&conn_users, key);
	if (conn_refuse(fd, &cred, u)) {
		metrics_count(METRICS_CONN_REFUSED);
		return;
	}
	metrics_count(METRICS_CONN_ACCEPTED);
	conn_new(fd, cred.uid);
	log_debug("client connected (pid %ld, uid %u)", (long)cred.pid,
	    (unsigned)cred.uid);
}

/* A connection of uid on fd, counted, reading. */
static struct conn *
conn_new(int fd, uid_t uid)
{
	struct conn_user *u;
	struct conn *c;
	char key[16];

	snprintf(key, sizeof key, "%u", (unsigned)uid);
	if ((u = idmap_get(&conn_users, key)) == NULL) {
		u = xcalloc(1, sizeof *u);
		memcpy(u->key, key, sizeof key);
		idmap_put(&conn_users, u->key, u);
	}
	u->n++;
	c = xcalloc(1, sizeof *c);
	c->fd = fd;
	c->uid = uid;
	c->user = u;
	ndjson_init(&c->in, conn_max_message);
	c->out = evbuffer_new();
	c->rev = event_new(conn_base, fd, EV_READ | EV_PERSIST, conn_read_cb,
	    c);
	c->wev = event_new(conn_base, fd, EV_WRITE | EV_PERSIST,
	    conn_write_cb, c);
	conn_set_reading(c, true);
	LIST_INIT(&c->tickets);
	LIST_INSERT_HEAD(&conn_list, c, entry);
	conn_n++;
	return c;
}

/*
 * Past a connection cap: one error line (a fresh socket has room for it, so
 * the write cannot block), then close. True when refused.
 */
static bool
conn_refuse(int fd, const struct ucred *cred, struct conn_user *u)
{
	struct buf out = { 0 };
	const char *tool;
	uid_t uid = cred->uid;
	char msg[200];
	int code = STEXEC_ERR_LIMIT;

	if (conn_peer_check != NULL && (tool = conn_peer_check(cred->pid)) !=
	    NULL) {
		code = STEXEC_ERR_NOT_PERMITTED;
		utf8_snprintf(msg, sizeof msg, "Not permitted: pid %ld is a "
		    "process of the sandboxed tool %s, which may not reach "
		    "this daemon", (long)cred->pid, tool);
	} else if (conn_max_total > 0 && conn_n >= conn_max_total)
		snprintf(msg, sizeof msg, "Limit exceeded: %u connections are "
		    "open (--max-connections)", conn_n);
	else if (conn_max_per_uid > 0 && u != NULL && u->n >= conn_max_per_uid)
		snprintf(msg, sizeof msg, "Limit exceeded: uid %u has %u "
		    "connections open (--max-connections-per-uid)",
		    (unsigned)uid, u->n);
	else
		return false;
	/* A client retrying in a loop must not flood the journal. */
	if (time(NULL) - conn_last_refusal >= 10) {
		log_warn("refusing a connection of uid %u: %s", (unsigned)uid,
		    msg);
		conn_last_refusal = time(NULL);
	} else
		log_debug("refusing a connection of uid %u: %s", (unsigned)uid,
		    msg);
	if (jsonrpc_error(&out, NULL, code, msg, NULL) == 0 &&
	    write(fd, out.data, out.len) < 0)
		log_debug("cannot tell a refused client why: %s",
		    strerror(errno));
	buf_free(&out);
	close(fd);
	return true;
}

uid_t
conn_uid(const struct conn *c)
{
	return c->uid;
}

size_t
conn_queued(const struct conn *c)
{
	return evbuffer_get_length(c->out);
}

static void
conn_set_reading(struct conn *c, bool on)
{
	if (on == c->reading)
		return;
	c->reading = on;
	if (on)
		event_add(c->rev, NULL);
	else
		event_del(c->rev);
}

/*
 * Output is written once per loop pass, after every callback of the pass
 * has queued its part (one write for many messages), by an event made
 * active now: no epoll change and no extra wakeup. Only a socket that is
 * full waits for EPOLLOUT.
 */
static void
conn_queue(struct conn *c)
{
	if (c->dirty || event_pending(c->wev, EV_WRITE, NULL))
		return;
	c->dirty = true;
	TAILQ_INSERT_TAIL(&conn_dirty, c, flush_entry);
	event_active(conn_flusher, EV_TIMEOUT, 0);
}

static void
conn_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&conn_dirty)) != NULL) {
		TAILQ_REMOVE(&conn_dirty, c, flush_entry);
		c->dirty = false;
		if (!c->dead)
			conn_flush(c);
	}
}

void
conn_write(struct conn *c, const char *data, size_t len)
{
	if (c->dead)
		return;
	evbuffer_add(c->out, data, len);
	conn_queue(c);
}

void
conn_write_ref(struct conn *c, const char *data, size_t len,
    void (*done)(const void *, size_t, void *), void *arg)
{
	if (c->dead) {
		done(data, len, arg);
		return;
	}
	if (evbuffer_add_reference(c->out, data, len, done, arg) != 0)
		fatal("out of memory");
	conn_queue(c);
}

void
conn_close_after_flush(struct conn *c)
{
	c->closing = true;
	conn_set_reading(c, false);
	if (evbuffer_get_length(c->out) == 0)
		conn_kill(c);
}

static void
conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	ssize_t n;
	char *p;
	int i;

	for (i = 0; i < CONN_READS_PER_WAKEUP; i++) {
		p = ndjson_space(&c->in, CONN_READ_SIZE);
		n = read(fd, p, CONN_READ_SIZE);
		if (n == 0) {
			/* It may only have shut its side: answer, then close. */
			log_debug("client disconnected");
			conn_close_after_flush(c);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_debug("read from client: %s",
				    strerror(errno));
				conn_kill(c);
			}
			return;
		}
		ndjson_commit(&c->in, (size_t)n);
		conn_lines(c);
		if (!c->reading || c->dead)
			return;
	}
}

/* Handle the complete lines held, while the client reads its replies. */
static void
conn_lines(struct conn *c)
{
	enum ndjson_status st;
	size_t len;
	char *line;

	while (!c->dead && !c->closing) {
		if (evbuffer_get_length(c->out) > CONN_OUT_HIGH) {
			c->throttled = true;
			conn_set_reading(c, false);
			return;
		}
		st = ndjson_next(&c->in, &line, &len);
		if (st == NDJSON_MORE)
			return;
		if (st == NDJSON_TOO_LONG) {
			/* Framing is lost: say why, then hang up. */
			conn_error(c, NULL, STEXEC_ERR_INVALID_REQUEST, NULL,
			    "Invalid Request: message longer than %zu bytes",
			    conn_max_message);
			conn_close_after_flush(c);
			return;
		}
		conn_line(c, line, len);
	}
}

static void
conn_line(struct conn *c, const char *line, size_t len)
{
	static const char lsp[] = "Content-Length:";
	struct jsonrpc_msg msg;

	/* A client speaking LSP's framing: say so, then hang up. */
	if (len >= sizeof lsp - 1 && strncasecmp(line, lsp, sizeof lsp - 1) == 0) {
		conn_error(c, NULL, STEXEC_ERR_PARSE, NULL, "Parse error: "
		    "stexecd speaks newline-delimited JSON (one JSON-RPC "
		    "message per line), not LSP's Content-Length framing");
		conn_close_after_flush(c);
		return;
	}
	jsonrpc_decode(line, len, &msg);
	if (msg.kind == JSONRPC_BATCH)
		conn_batch(c, msg.root);
	else
		conn_message(c, &msg);
	jsonrpc_msg_clear(&msg);
}

static void
conn_message(struct conn *c, struct jsonrpc_msg *msg)
{
	switch (msg->kind) {
	case JSONRPC_REQUEST:
	case JSONRPC_NOTIFICATION:
		conn_ops.dispatch(c, msg->method, msg->id, msg->params);
		break;
	case JSONRPC_INVALID:
		conn_error(c, msg->id, msg->code, NULL, "%s: %s",
		    msg->message, msg->detail);
		break;
	default:
		/* Responses: we send no requests, so there is nothing to do. */
		break;
	}
}

/*
 * JSON-RPC 2.0 §6: each element is handled as if alone, and the replies go
 * out together as one array once the last is in (a drain in the batch
 * holds it back); a batch of notifications only gets no reply at all.
 */
static void
conn_batch(struct conn *c, json_t *array)
{
	struct jsonrpc_msg msg;
	struct batch *b;
	size_t i;

	if (json_array_size(array) > CONN_BATCH_MAX) {
		conn_error(c, NULL, STEXEC_ERR_INVALID_REQUEST, NULL,
		    "Invalid Request: a batch holds at most %d requests",
		    CONN_BATCH_MAX);
		return;
	}
	b = xcalloc(1, sizeof *b);
	b->pending = 1;
	c->batch = b;
	for (i = 0; i < json_array_size(array) && !c->dead; i++) {
		jsonrpc_decode_value(json_array_get(array, i), &msg);
		conn_message(c, &msg);
		jsonrpc_msg_clear(&msg);
	}
	c->batch = NULL;
	conn_batch_release(c, b);
}

/* One reply of the batch is in; the last one sends the array. */
static void
conn_batch_release(struct conn *c, struct batch *b)
{
	if (--b->pending > 0)
		return;
	if (c != NULL && b->out.len > 0) {
		buf_add(&b->out, "]\n", 2);
		conn_write(c, b->out.data, b->out.len);
	}
	buf_free(&b->out);
	free(b);
}

/* Send the reply line in c->scratch, or add it to the batch it belongs to. */
static void
conn_send_reply(struct conn *c, struct batch *b)
{
	if (b == NULL) {
		conn_write(c, c->scratch.data, c->scratch.len);
		return;
	}
	buf_add(&b->out, b->out.len == 0 ? "[" : ",", 1);
	buf_add(&b->out, c->scratch.data, c->scratch.len - 1);
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_flush(arg);
}

/* Write what is queued; wait for EPOLLOUT only if the socket is full. */
static void
conn_flush(struct conn *c)
{
	size_t i;

	if (conn_before_write != NULL)
		conn_before_write();
	if (evbuffer_write(c->out, c->fd) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		log_debug("write to client: %s", strerror(errno));
		conn_kill(c);
		return;
	}
	if (evbuffer_get_length(c->out) > 0) {
		if (!event_pending(c->wev, EV_WRITE, NULL))
			event_add(c->wev, NULL);
		return;
	}
	if (event_pending(c->wev, EV_WRITE, NULL))
		event_del(c->wev);
	if (c->closing) {
		conn_kill(c);
		return;
	}
	/* Room again: pull notifications, then take requests again. */
	for (i = 0; i < c->nsubs && !c->dead; i++)
		conn_ops.sub_pump(c->subs[i]);
	if (c->throttled && evbuffer_get_length(c->out) < CONN_OUT_LOW) {
		c->throttled = false;
		conn_lines(c);
		if (!c->throttled && !c->dead && !c->closing)
			conn_set_reading(c, true);
	}
}

static void
conn_reply_to(struct conn *c, struct batch *b, const json_t *id,
    json_t *result)
{
	if (id != NULL && !c->dead) {
		c->scratch.len = 0;
		if (jsonrpc_result(&c->scratch, id, result) == 0)
			conn_send_reply(c, b);
		else
			conn_internal_error(c, b, id, "a reply");
	}
	json_decref(result);
}

void
conn_reply(struct conn *c, const json_t *id, json_t *result)
{
	conn_reply_to(c, c->batch, id, result);
}

void
conn_reply_raw(struct conn *c, const json_t *id, const char *result,
    size_t len)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
	static const char mid[] = ",\"result\":";

	if (id == NULL || c->dead)
		return;
	c->scratch.len = 0;
	buf_add(&c->scratch, head, sizeof head - 1);
	if (jsonrpc_dump(&c->scratch, id) != 0) {
		conn_internal_error(c, c->batch, NULL, "a reply id");
		return;
	}
	buf_add(&c->scratch, mid, sizeof mid - 1);
	buf_add(&c->scratch, result, len);
	buf_add(&c->scratch, "}\n", 2);
	conn_send_reply(c, c->batch);
}

void
conn_error(struct conn *c, const json_t *id, int code, const json_t *data,
    const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	conn_error_to(c, c->batch, id, code, data, msg);
}

static void
conn_error_to(struct conn *c, struct batch *b, const json_t *id, int code,
    const json_t *data, const char *msg)
{
	/* Parse errors and invalid requests are answered even without id. */
	if (c->dead || (id == NULL && code != STEXEC_ERR_PARSE &&
	    code != STEXEC_ERR_INVALID_REQUEST))
		return;
	c->scratch.len = 0;
	if (jsonrpc_error(&c->scratch, id, code, msg, data) == 0)
		conn_send_reply(c, b);
	else
		conn_internal_error(c, b, id, "an error");
}

/*
 * A reply that cannot be encoded (text that is not valid UTF-8) is a bug,
 * never the client's fault and never worth the daemon: answer -32603.
 */
static void
conn_internal_error(struct conn *c, struct batch *b, const json_t *id,
    const char *what)
{
	static const char msg[] = "Internal error: the daemon could not "
	    "encode its answer (see its log)";

	log_error("cannot encode %s; answered %d instead", what,
	    STEXEC_ERR_INTERNAL);
	c->scratch.len = 0;
	if (jsonrpc_error(&c->scratch, id, STEXEC_ERR_INTERNAL, msg,
	    NULL) != 0 && jsonrpc_error(&c->scratch, NULL,
	    STEXEC_ERR_INTERNAL, msg, NULL) != 0) {
		conn_kill(c);
		return;
	}
	conn_send_reply(c, b);
}

struct ticket *
conn_ticket(struct conn *c, const json_t *id)
{
	struct ticket *tk = xcalloc(1, sizeof *tk);

	tk->c = c;
	tk->id = id != NULL ? json_deep_copy(id) : NULL;
	if ((tk->batch = c->batch) != NULL)
		tk->batch->pending++;
	LIST_INSERT_HEAD(&c->tickets, tk, entry);
	return tk;
}

void
conn_ticket_drop(struct ticket *tk)
{
	if (tk->c != NULL)
		LIST_REMOVE(tk, entry);
	if (tk->batch != NULL)
		conn_batch_release(tk->c, tk->batch);
	json_decref(tk->id);
	free(tk);
}

struct conn *
conn_ticket_conn(const struct ticket *tk)
{
	return tk->c;
}

void
conn_ticket_reply(struct ticket *tk, json_t *result)
{
	if (tk->c != NULL)
		conn_reply_to(tk->c, tk->batch, tk->id, result);
	else
		json_decref(result);
	conn_ticket_drop(tk);
}

void
conn_ticket_error(struct ticket *tk, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (tk->c != NULL)
		conn_error_to(tk->c, tk->batch, tk->id, code, NULL, msg);
	conn_ticket_drop(tk);
}

bool
conn_refer(struct conn *c, const char *session_id)
{
	char *id;

	if (c->dead || idmap_get(&c->refs, session_id) != NULL)
		return false;
	id = xstrdup(session_id);
	idmap_put(&c->refs, id, id);
	return true;
}

void
conn_add_sub(struct conn *c, struct sub *sub)
{
	c->subs = xreallocarray(c->subs, c->nsubs + 1, sizeof *c->subs);
	c->subs[c->nsubs++] = sub;
}

void
conn_remove_sub(struct conn *c, struct sub *sub)
{
	size_t i;

	for (i = 0; i < c->nsubs; i++)
		if (c->subs[i] == sub) {
			c->subs[i] = c->subs[--c->nsubs];
			return;
		}
}

/* Never free inside the connection's own callback: defer to the loop. */
static void
conn_kill(struct conn *c)
{
	struct ticket *tk;

	if (c->dead)
		return;
	c->dead = true;
	event_del(c->rev);
	event_del(c->wev);
	/* The reaper frees it: it must not be on the flush list then. */
	if (c->dirty) {
		TAILQ_REMOVE(&conn_dirty, c, flush_entry);
		c->dirty = false;
	}
	/* Its subscriptions and pending replies go at once. */
	while (c->nsubs > 0)
		conn_ops.sub_free(c->subs[0]);
	if (conn_ops.closed != NULL)
		conn_ops.closed(c);
	conn_drop_refs(c);
	LIST_FOREACH(tk, &c->tickets, entry)
		tk->c = NULL;
	LIST_INIT(&c->tickets);
	LIST_REMOVE(c, entry);
	conn_n--;
	if (--c->user->n == 0) {
		idmap_del(&conn_users, c->user->key);
		free(c->user);
	}
	c->user = NULL;
	LIST_INSERT_HEAD(&conn_dead, c, entry);
	event_active(conn_reaper, EV_TIMEOUT, 0);
}

/* The sessions it named may now be idle. */
static void
conn_drop_refs(struct conn *c)
{
	size_t i;
	char *id;

	for (i = 0; i < c->refs.cap; i++)
		if ((id = c->refs.slots[i].value) != NULL) {
			conn_ops.unrefer(id);
			free(id);
		}
	idmap_free(&c->refs);
}

static void
conn_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c;

	while ((c = LIST_FIRST(&conn_dead)) != NULL) {
		LIST_REMOVE(c, entry);
		conn_free(c);
	}
}

static void
conn_free(struct conn *c)
{
	event_free(c->rev);
	event_free(c->wev);
	if (!c->carried)
		close(c->fd);
	ndjson_free(&c->in);
	evbuffer_free(c->out);
	buf_free(&c->scratch);
	free(c->subs);
	free(c);
}

void
conn_shutdown(void)
{
	struct conn *c;

	if (conn_before_write != NULL)
		conn_before_write();
	while ((c = LIST_FIRST(&conn_list)) != NULL) {
		/* One last non-blocking write of what is queued. */
		if (!c->carried)
			evbuffer_write(c->out, c->fd);
		conn_kill(c);
	}
	conn_reap_cb(-1, 0, NULL);
	if (conn_reaper != NULL)
		event_free(conn_reaper);
	if (conn_flusher != NULL)
		event_free(conn_flusher);
	conn_reaper = conn_flusher = NULL;
	TAILQ_INIT(&conn_dirty);
	idmap_free(&conn_users);
}

/*
 * A reload (doc/design.md §7, Reload) carries connections: the live ones in
 * turn, what each holds, and the mark that keeps its descriptor open.
 */
struct conn *
conn_next(struct conn *c)
{
	c = c == NULL ? LIST_FIRST(&conn_list) : LIST_NEXT(c, entry);
	while (c != NULL && (c->dead || c->closing))
		c = LIST_NEXT(c, entry);
	return c;
}

int
conn_fd(const struct conn *c)
{
	return c->fd;
}

void
conn_pending(struct conn *c, const char **in, size_t *inlen,
    const char **out, size_t *outlen)
{
	/* One last try: what the socket takes now need not be carried. */
	evbuffer_write(c->out, c->fd);
	*in = c->in.buf + c->in.start;
	*inlen = c->in.len - c->in.start;
	*outlen = evbuffer_get_length(c->out);
	*out = *outlen > 0 ? (const char *)evbuffer_pullup(c->out, -1) : "";
}

struct sub *const *
conn_subs(const struct conn *c, size_t *n)
{
	*n = c->nsubs;
	return c->subs;
}

json_t *
conn_refs_json(const struct conn *c)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < c->refs.cap; i++)
		if (c->refs.slots[i].value != NULL)
			json_array_append_new(a, json_string(
			    c->refs.slots[i].value));
	return a;
}

const json_t *
conn_ticket_id(const struct ticket *tk)
{
	return tk->id;
}

void
conn_carry(struct conn *c)
{
	c->carried = true;
	handover_keep_fd(c->fd);
}

struct conn *
conn_adopt(int fd, uid_t uid, const char *in, size_t inlen, const char *out,
    size_t outlen)
{
	struct conn *c;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	c = conn_new(fd, uid);
	if (outlen > 0) {
		evbuffer_add(c->out, out, outlen);
		conn_queue(c);
	}
	ndjson_feed(&c->in, in, inlen);
	return c;
}

void
conn_resume(struct conn *c)
{
	conn_lines(c);
}
