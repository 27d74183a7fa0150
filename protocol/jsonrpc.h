/*
 * JSON-RPC 2.0 messages over NDJSON (doc/design.md §3). Encoding produces one
 * line ending in '\n'; decoding classifies an incoming line.
 */
#ifndef STEXEC_JSONRPC_H
#define STEXEC_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"
#include "stexec/protocol.h"

enum jsonrpc_kind {
	JSONRPC_REQUEST,      /* method + id (a string, number or null) */
	JSONRPC_NOTIFICATION, /* method, no id */
	JSONRPC_RESPONSE,     /* id + result */
	JSONRPC_ERROR,        /* id + error {code, message, data?} */
	JSONRPC_INVALID,      /* see code/message: parse error or invalid request */
	JSONRPC_BATCH,        /* a non-empty array: decode each element alone */
};

struct jsonrpc_msg {
	enum jsonrpc_kind kind;
	json_t *root;         /* owned: the whole parsed message, or NULL */
	json_t *id;           /* borrowed from root; NULL for notifications */
	const char *method;   /* borrowed */
	json_t *params;       /* borrowed; NULL when absent */
	json_t *result;       /* borrowed, responses */
	int code;             /* errors and INVALID */
	const char *message;  /* errors and INVALID (static or borrowed) */
	char detail[160];     /* INVALID: what was wrong, for the reply */
};

/*
 * Parse one line. Always fills msg; kind INVALID with code -32700 for bad
 * JSON and -32600 for a JSON value that is not a valid JSON-RPC 2.0 message.
 * For -32600 msg->id holds the request's id when it had a usable one.
 */
void jsonrpc_decode(const char *line, size_t len, struct jsonrpc_msg *msg);
/*
 * Classify one element of a batch (msg->root of a JSONRPC_BATCH), as
 * jsonrpc_decode would a line holding only it; a batch inside a batch is
 * invalid. Takes a reference of its own.
 */
void jsonrpc_decode_value(json_t *value, struct jsonrpc_msg *msg);
void jsonrpc_msg_clear(struct jsonrpc_msg *);

/*
 * Encoders append one complete line ('\n' terminated) to *out, growing it
 * with realloc; data stays NUL-terminated. They steal no references.
 * Return 0, or -1 when a value cannot be encoded (not valid UTF-8, an id
 * that is not a string, number or null, params not an object or array):
 * then out is left as it was.
 */
int jsonrpc_request(struct buf *, const json_t *id, const char *method,
    const json_t *params);
int jsonrpc_notification(struct buf *, const char *method,
    const json_t *params);
/*
 * A notification whose params object ends with more members, written as
 * given: more is their JSON text, each member preceded by a comma
 * (",\"seq\":4"). For the fields every note of a session carries, which
 * would otherwise be set into params, two values and two keys a note.
 */
int jsonrpc_notification_with(struct buf *, const char *method,
    const json_t *params, const char *more, size_t morelen);
int jsonrpc_result(struct buf *, const json_t *id, const json_t *result);
/* id NULL encodes "id": null. data may be NULL. */
int jsonrpc_error(struct buf *, const json_t *id, int code,
    const char *message, const json_t *data);

/* Compact JSON text of a value appended to out (no newline). */
int jsonrpc_dump(struct buf *, const json_t *);
/*
 * A JSON string literal of len bytes of text, each byte that is not valid
 * UTF-8 replaced by U+FFFD: for tool output, which need not be UTF-8.
 */
void jsonrpc_add_string_repaired(struct buf *, const char *,
    size_t);
/*
 * The same without the quotes, for a long string written in parts (each
 * cut at a character boundary) between a '"' appended before and after.
 */
void jsonrpc_add_string_part(struct buf *, const char *, size_t);

#endif
