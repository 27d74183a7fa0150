/*
 * Client connections: NDJSON in with a line cap, JSON-RPC requests handed to
 * the dispatcher given at init, replies and notifications out through a
 * bounded buffer that
 * is flushed once per loop iteration. A connection that stops reading is
 * not read from either (its replies would pile up), and a subscriber's
 * notifications are pulled from the session's log as the socket drains.
 */
#ifndef STEXEC_CONN_H
#define STEXEC_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct event_base;
struct conn;
struct ticket;

/* Out-buffer levels: pull notifications below LOW, stop reading above HIGH. */
#define CONN_OUT_LOW (256 * 1024)
#define CONN_OUT_HIGH (4 * 1024 * 1024)

struct sub;

/*
 * What a connection calls upward, given once at init so that data flows one
 * way (socket -> conn -> methods -> session) and this file knows nothing of
 * methods or sessions: dispatch a request (id set) or client notification
 * (id NULL); pull a subscription's notifications when the output has room;
 * free a subscription when its connection goes; tell that a session the
 * connection named is no longer referred to by it.
 */
struct conn_ops {
	void (*dispatch)(struct conn *, const char *method, const json_t *id,
	    const json_t *params);
	void (*sub_pump)(struct sub *);
	void (*sub_free)(struct sub *);
	void (*unrefer)(const char *session_id);
	/* It is gone (not carried by a reload): what it served is free. */
	void (*closed)(struct conn *);
};

void conn_init(struct event_base *, size_t max_message,
    const struct conn_ops *);
/*
 * Connections at once, in all and per uid (0: no cap). One more is answered
 * with a -32004 error line naming the limit and closed.
 */
void conn_set_limits(unsigned total, unsigned per_uid);
/*
 * Who may not connect at all: check(pid) names the sandboxed tool that
 * peer belongs to, or NULL. Such a connection gets a -32003 line, closed.
 */
void conn_set_peer_check(const char *(*check)(pid_t));
/*
 * Called before any write to a client: the crash journal writes what it
 * gathered, so a client never sees what is not journaled yet.
 */
void conn_set_before_write(void (*)(void));
/* Take over an accepted socket. */
void conn_accept(int fd);
/* Close every connection, flushing what can be written without blocking. */
void conn_shutdown(void);
unsigned conn_count(void);

uid_t conn_uid(const struct conn *);
/* Bytes waiting to be written. */
size_t conn_queued(const struct conn *);
/* Append a complete line (with its newline) to the output. */
void conn_write(struct conn *, const char *, size_t);
/* The same without a copy: done(data, len, arg) once it is written or
 * dropped, which may be at once. */
void conn_write_ref(struct conn *, const char *, size_t,
    void (*done)(const void *, size_t, void *), void *arg);
/* Close after what is queued has been written. */
void conn_close_after_flush(struct conn *);

/* Replies. id is the request's id (NULL: a notification, no reply). */
void conn_reply(struct conn *, const json_t *id, json_t *result);
/* A reply whose result is JSON text already (len bytes). */
void conn_reply_raw(struct conn *, const json_t *id, const char *result,
    size_t len);
void conn_error(struct conn *, const json_t *id, int code, const json_t *data,
    const char *, ...) __attribute__((format(printf, 5, 6)));

/*
 * A reply given later (drain, closeSession): it outlives the connection;
 * answering a ticket whose connection is gone does nothing. Answering frees
 * the ticket.
 */
struct ticket *conn_ticket(struct conn *, const json_t *id);
void conn_ticket_reply(struct ticket *, json_t *result);
void conn_ticket_error(struct ticket *, int code, const char *, ...)
    __attribute__((format(printf, 3, 4)));
void conn_ticket_drop(struct ticket *);
/* The connection a ticket answers on, or NULL once it is gone. */
struct conn *conn_ticket_conn(const struct ticket *);

/*
 * The connection named (created, or sent a request about) the session of
 * this id: it refers to it until it closes (session_unrefer then). True the
 * first time.
 */
bool conn_refer(struct conn *, const char *session_id);

/* Subscriptions the connection holds: see session.h. */
void conn_add_sub(struct conn *, struct sub *);
void conn_remove_sub(struct conn *, struct sub *);

/*
 * A reload (doc/design.md §7, Reload) carries the connections: conn_next
 * walks the live ones (NULL to start); conn_pending writes what the socket
 * takes and gives what is left of its input (not yet a whole line) and
 * output; conn_carry keeps its descriptor open across the exec (it is not
 * closed, and nothing more is written, at conn_shutdown). In the next
 * image conn_adopt makes it again, and conn_resume, once its sessions are
 * back, reads the whole lines it carried.
 */
struct conn *conn_next(struct conn *);
int conn_fd(const struct conn *);
void conn_pending(struct conn *, const char **in, size_t *inlen,
    const char **out, size_t *outlen);
struct sub *const *conn_subs(const struct conn *, size_t *);
json_t *conn_refs_json(const struct conn *);
const json_t *conn_ticket_id(const struct ticket *);
void conn_carry(struct conn *);
struct conn *conn_adopt(int fd, uid_t, const char *in, size_t inlen,
    const char *out, size_t outlen);
void conn_resume(struct conn *);

#endif
