/*
 * libstexec: the C client of stexecd (doc/design.md §3, protocol/PROTOCOL.md).
 *
 * One struct stexec is one connection. It can be used two ways:
 *
 * - Blocking: stexec_call() sends a request and waits for its reply;
 *   notifications that arrive meanwhile are queued, never lost, and are
 *   taken with stexec_next_notification().
 * - From an event loop: poll stexec_fd() for stexec_poll_events(); when it
 *   is readable call stexec_read_ready(), when writable stexec_flush();
 *   then take messages with stexec_next_message(c, 0, ...) while
 *   stexec_pending() says some are queued. Requests go out with
 *   stexec_send(), which never blocks and returns the id the reply will
 *   carry.
 *
 * Subscriptions remember the seq of the last notification received for
 * each session, so after stexec_reconnect() a stexec_resubscribe()
 * continues each stream exactly: replayed notifications the client already
 * has (seq <= last) are dropped, none is missed.
 *
 * Conventions: JSON values are jansson's. Functions that take `params`
 * steal the reference (even on failure); NULL params sends none. Every
 * json_t * returned is a new reference for the caller to json_decref().
 * Functions returning int return 0 on success and -1 on failure with
 * *err filled (err may be NULL). An err must start zeroed
 * (struct stexec_error err = {0};); filling it releases what it held, so
 * one can be reused; stexec_error_clear() it at the end. A struct stexec
 * is not thread-safe.
 * The socket is CLOEXEC, and writes never raise SIGPIPE.
 */
#ifndef STEXEC_CLIENT_H
#define STEXEC_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stexec/protocol.h"

/*
 * Local error codes, in stexec_error.code. They are positive, so they never
 * collide with JSON-RPC error codes (negative, STEXEC_ERR_* in protocol.h).
 */
#define STEXEC_CLIENT_ERR_IO 1       /* connection lost, closed or unusable */
#define STEXEC_CLIENT_ERR_TIMEOUT 2  /* no reply within the timeout */
#define STEXEC_CLIENT_ERR_INTR 3     /* a signal interrupted the wait */
#define STEXEC_CLIENT_ERR_PROTOCOL 4 /* the daemon sent something unusable */
#define STEXEC_CLIENT_ERR_USAGE 5    /* bad argument to a library function */

/*
 * Longest line accepted from the daemon, newline excluded. A tool_result
 * can be several times its maxResultBytes once JSON-escaped, so this is
 * well above the daemon's own limit; past it the connection is unusable.
 */
#define STEXEC_CLIENT_MAX_LINE (STEXEC_MAX_MESSAGE_DEFAULT * 4)

/*
 * Most bytes of messages held unread in the queue. Reading past it would
 * grow without bound, so the connection fails instead (STEXEC_CLIENT_ERR_IO)
 * and can be resumed with stexec_reconnect() + stexec_resubscribe().
 */
#define STEXEC_CLIENT_MAX_QUEUED ((size_t)256 * 1024 * 1024)

struct stexec;

/* Why a call failed. */
struct stexec_error {
	/* A JSON-RPC error code (< 0) or a STEXEC_CLIENT_ERR_* (> 0). */
	int code;
	/* The daemon's message, or what went wrong locally. */
	char message[512];
	/* The error's "data" member, or NULL; owned, see stexec_error_clear. */
	json_t *data;
};

/* Release err->data and reset *err. Safe on an error never filled. */
void stexec_error_clear(struct stexec_error *err);

/*
 * The socket path used when none is given (doc/design.md §3): $STEXEC_SOCKET,
 * else $XDG_RUNTIME_DIR/stexec/stexecd.sock if XDG_RUNTIME_DIR is absolute,
 * else /run/stexec/stexecd.sock: the daemon's own rule. Writes it to buf; returns 0, or -1 if it does not fit.
 */
int stexec_default_socket(char *buf, size_t len);

/*
 * Connect to the daemon at path, or when path is NULL at the default path
 * (stexec_default_socket; when $STEXEC_SOCKET is unset and nothing listens
 * at the $XDG_RUNTIME_DIR path, /run/stexec/stexecd.sock is tried next).
 * Returns the connection, or NULL with a message for a person in err, e.g.
 * "cannot connect to /x/s.sock: No such file or directory — is stexecd
 * running? Start it with: stexecd --socket /x/s.sock".
 */
struct stexec *stexec_connect(const char *path, char *err, size_t errlen);

/*
 * Connect again to the same path after the connection was lost (or to
 * replace a healthy one). Queued messages and the seq remembered per
 * subscribed session are kept; requests still waiting for a reply will
 * never get one (stexec_wait_reply reports STEXEC_CLIENT_ERR_IO). Does not
 * subscribe again: call stexec_resubscribe() next. Returns 0 or -1 with a
 * message in err.
 */
int stexec_reconnect(struct stexec *c, char *err, size_t errlen);

/* Close the connection and free everything, queued messages too. */
void stexec_close(struct stexec *c);

/* The socket path this connection uses. */
const char *stexec_path(const struct stexec *c);

/* Whether the connection is up (false after EOF, an error, or overflow). */
bool stexec_is_open(const struct stexec *c);

/* Why the connection ended, or "" while it is up. */
const char *stexec_last_error(const struct stexec *c);

/*
 * How long blocking functions (stexec_call, stexec_subscribe, ...) wait
 * for a reply, in milliseconds; -1 (the default) waits for ever. A drain
 * can legitimately take as long as its slowest tool.
 */
void stexec_set_timeout(struct stexec *c, int timeout_ms);

/*
 * Blocking request: send method with params (stolen) and wait for its
 * reply. On success returns 0 and *result (if result is not NULL) gets the
 * result. On failure returns -1: a JSON-RPC error from the daemon fills
 * err with its code, message and data; otherwise err->code is a
 * STEXEC_CLIENT_ERR_*. Notifications and replies to other requests that
 * arrive while waiting are queued.
 */
int stexec_call(struct stexec *c, const char *method, json_t *params,
    json_t **result, struct stexec_error *err);

/*
 * Asynchronous request: queue method with params (stolen) for sending and
 * write as much as the socket takes now, without blocking. Returns the
 * request id (>= 1), which the reply carries, or -1 with err filled. If
 * stexec_want_write() is then true, poll for POLLOUT and stexec_flush().
 */
int64_t stexec_send(struct stexec *c, const char *method, json_t *params,
    struct stexec_error *err);

/*
 * Wait up to timeout_ms (-1: for ever, 0: only look at what is queued and
 * readable now) for the reply to request id, queueing everything else.
 * Returns 0 with *result set (if result is not NULL), or -1 with err: the
 * daemon's JSON-RPC error, or STEXEC_CLIENT_ERR_TIMEOUT/INTR/IO.
 */
int stexec_wait_reply(struct stexec *c, int64_t id, int timeout_ms,
    json_t **result, struct stexec_error *err);

/*
 * The next notification, whole ({"jsonrpc","method","params"}): queued ones
 * first, then from the socket, waiting up to timeout_ms (-1: for ever, 0:
 * not at all). Replies stay queued for stexec_wait_reply(). Returns NULL on
 * timeout, when a signal interrupted the wait, or when the connection
 * ended (then stexec_is_open() is false and stexec_last_error() says why).
 */
json_t *stexec_next_notification(struct stexec *c, int timeout_ms);

/*
 * The next message of either kind, in arrival order: a reply (see
 * stexec_message_id and stexec_reply_decode) or a notification. Waits up
 * to timeout_ms like stexec_next_notification. Returns NULL with err
 * filled (STEXEC_CLIENT_ERR_TIMEOUT/INTR/IO).
 */
json_t *stexec_next_message(struct stexec *c, int timeout_ms,
    struct stexec_error *err);

/*
 * The id of a message taken from stexec_next_message: a reply's id (>= 1),
 * -1 for a notification, or 0 for an error the daemon sent with id null
 * because it could not read one of the requests (e.g. a line too long)
 * while several were unanswered, so it cannot be told whose it is. (With
 * one request unanswered such an error becomes that request's reply.)
 */
int64_t stexec_message_id(const json_t *msg);

/*
 * Split a reply into its result (0, *result a new reference if result is
 * not NULL) or its JSON-RPC error (-1, err filled). Does not take msg.
 */
int stexec_reply_decode(const json_t *msg, json_t **result,
    struct stexec_error *err);

/* The socket, to poll; -1 while the connection is down. */
int stexec_fd(const struct stexec *c);

/* What to poll stexec_fd() for: POLLIN, plus POLLOUT while output waits. */
short stexec_poll_events(const struct stexec *c);

/*
 * Read what the socket has without blocking (call when poll says it is
 * readable) and queue the complete messages. Returns how many messages
 * were queued (maybe 0), or -1 when the connection ended (EOF or error;
 * stexec_last_error() says why). Messages already queued stay takeable.
 */
int stexec_read_ready(struct stexec *c);

/* Whether messages are queued: take them before polling again. */
bool stexec_pending(const struct stexec *c);

/* Whether output is waiting for the socket to become writable. */
bool stexec_want_write(const struct stexec *c);

/* Write queued output without blocking. Returns 0 or -1 (connection lost). */
int stexec_flush(struct stexec *c);

/*
 * Subscribe to a session's notifications. since: -1 for live ones only,
 * otherwise replay every retained notification with seq > since first (0:
 * from the beginning). *last_seq (if not NULL) gets the session's newest
 * seq at the time of the subscribe. From then on the connection remembers
 * the seq of the last notification of the session it received, and drops
 * any with a seq not above it (duplicates of a replay). Returns 0 or -1;
 * a replay gap is -32004 with err->data {"oldestSeq": N}.
 */
int stexec_subscribe(struct stexec *c, const char *session_id,
    int64_t since, uint64_t *last_seq, struct stexec_error *err);

/* Stop a subscription and forget the session's seq. */
int stexec_unsubscribe(struct stexec *c, const char *session_id,
    struct stexec_error *err);

/*
 * After stexec_reconnect(): subscribe again to every session subscribed
 * before, each since the last seq received, so every stream continues with
 * no gap and no duplicate. A session that no longer exists (-32001) is
 * forgotten. Tries them all; returns -1 with the first failure in err.
 */
int stexec_resubscribe(struct stexec *c, struct stexec_error *err);

/*
 * The seq of the last notification of session_id received on this client
 * (queued or taken), or 0 when none or when the session is not subscribed.
 */
uint64_t stexec_last_seq(const struct stexec *c, const char *session_id);

#endif
