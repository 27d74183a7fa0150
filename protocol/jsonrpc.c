/*
 * JSON-RPC 2.0 codec. Decoding parses with jansson and classifies; encoding
 * writes the envelope text directly and lets jansson dump only the values
 * the caller passes, so no wrapper object is built per message.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"
#include "jsonload.h"
#include "utf8.h"

/* Values are dumped compact; ids and params may be any JSON value. */
/* As deep as jansson's own parser goes. */
#define JSONRPC_MAX_DEPTH 2048

static void	jsonrpc_invalid(struct jsonrpc_msg *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static const char *jsonrpc_classify(struct jsonrpc_msg *);
static int	jsonrpc_valid_id(const json_t *);
static int	jsonrpc_add_value(struct buf *, const json_t *);
static int	jsonrpc_add_json(struct buf *, const json_t *, int);
static int	jsonrpc_add_real(struct buf *, double);
static int	jsonrpc_add_stringn(struct buf *, const char *, size_t);
static int	jsonrpc_add_str(struct buf *, const char *, size_t, bool);
static size_t	jsonrpc_escape(unsigned char, char *);
static bool	jsonrpc_plain8(const unsigned char *);
static int	jsonrpc_add_string(struct buf *, const char *);
static int	jsonrpc_add_call(struct buf *, size_t, const char *,
		    const json_t *);
static int	jsonrpc_add_body(struct buf *, const char *, size_t,
		    bool);
static int	jsonrpc_fail(struct buf *, size_t);

/*
 * Mark msg invalid with a detail safe to send back: the text may quote
 * the client's bytes, so anything that is not valid UTF-8 or is a control
 * character becomes '?', and so does a sequence cut by truncation.
 */
static void
jsonrpc_invalid(struct jsonrpc_msg *msg, int code, const char *fmt, ...)
{
	va_list		 ap;
	unsigned char	*p;
	size_t		 left, n;

	msg->kind = JSONRPC_INVALID;
	msg->code = code;
	msg->message = code == STEXEC_ERR_PARSE ? "Parse error" :
	    "Invalid Request";
	msg->method = NULL;
	msg->params = NULL;
	msg->result = NULL;

	va_start(ap, fmt);
	vsnprintf(msg->detail, sizeof msg->detail, fmt, ap);
	va_end(ap);

	p = (unsigned char *)msg->detail;
	left = strlen(msg->detail);
	while (left > 0) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = '?';
			n = 1;
		} else if ((n = utf8_seq(p, left)) == 0) {
			*p = '?';
			n = 1;
		}
		p += n;
		left -= n;
	}
}

/*
 * Check the JSON-RPC 2.0 shape of msg->root and fill msg. Returns NULL,
 * or what was wrong. The id is kept as soon as it is known to be usable,
 * so that an invalid request can still be answered with its id.
 */
static const char *
jsonrpc_classify(struct jsonrpc_msg *msg)
{
	json_t		*root = msg->root, *id, *version, *method, *params;
	json_t		*result, *error, *code, *message;
	json_int_t	 n;

	if (json_is_array(root) && json_array_size(root) == 0)
		return "an empty batch";
	if (!json_is_object(root))
		return "a message must be a JSON object";

	id = json_object_get(root, "id");
	if (id != NULL && !jsonrpc_valid_id(id))
		return "\"id\" must be a string, number or null";
	msg->id = id;

	version = json_object_get(root, "jsonrpc");
	if (!json_is_string(version) || json_string_length(version) != 3 ||
	    memcmp(json_string_value(version), "2.0", 3) != 0)
		return "\"jsonrpc\" must be \"2.0\"";

	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	result = json_object_get(root, "result");
	error = json_object_get(root, "error");

	if (method != NULL) {
		if (!json_is_string(method))
			return "\"method\" must be a string";
		if (strlen(json_string_value(method)) !=
		    json_string_length(method))
			return "\"method\" must not contain NUL characters";
		if (result != NULL || error != NULL)
			return "a request cannot have \"result\" or \"error\"";
		if (params != NULL && !json_is_object(params) &&
		    !json_is_array(params))
			return "\"params\" must be an object or array";
		msg->kind = id != NULL ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
		msg->method = json_string_value(method);
		msg->params = params;
		return NULL;
	}

	if (result == NULL && error == NULL)
		return "\"method\", \"result\" or \"error\" is required";
	if (result != NULL && error != NULL)
		return "a response cannot have both \"result\" and \"error\"";
	if (id == NULL)
		return "a response must have an \"id\"";
	if (result != NULL) {
		msg->kind = JSONRPC_RESPONSE;
		msg->result = result;
		return NULL;
	}

	if (!json_is_object(error))
		return "\"error\" must be an object";
	code = json_object_get(error, "code");
	if (!json_is_integer(code))
		return "\"error.code\" must be an integer";
	n = json_integer_value(code);
	if (n < INT_MIN || n > INT_MAX)
		return "\"error.code\" is out of range";
	message = json_object_get(error, "message");
	if (!json_is_string(message))
		return "\"error.message\" must be a string";
	msg->kind = JSONRPC_ERROR;
	msg->code = (int)n;
	msg->message = json_string_value(message);
	return NULL;
}

/* JSON-RPC 2.0 §4: an id is a string, a number or null. */
static int
jsonrpc_valid_id(const json_t *id)
{
	return json_is_string(id) || json_is_number(id) || json_is_null(id);
}

/* Duplicate keys are accepted (the last wins); trailing bytes are not. */
void
jsonrpc_decode(const char *line, size_t len, struct jsonrpc_msg *msg)
{
	json_error_t	 error;
	const char	*detail;

	memset(msg, 0, sizeof *msg);
	/*
	 * The fast path first (jsonload.h); what it declines, jansson
	 * parses, or says why not. Values may hold NUL (file contents):
	 * \u0000 is valid JSON.
	 */
	if ((msg->root = jsonload(line, len)) == NULL)
		msg->root = json_loadb(line, len, JSON_DECODE_ANY |
		    JSON_ALLOW_NUL, &error);
	if (msg->root == NULL) {
		jsonrpc_invalid(msg, STEXEC_ERR_PARSE, "%s at column %d",
		    error.text, error.column);
		return;
	}
	if (json_is_array(msg->root) && json_array_size(msg->root) > 0) {
		msg->kind = JSONRPC_BATCH;
		return;
	}
	if ((detail = jsonrpc_classify(msg)) != NULL)
		jsonrpc_invalid(msg, STEXEC_ERR_INVALID_REQUEST, "%s", detail);
}

void
jsonrpc_decode_value(json_t *value, struct jsonrpc_msg *msg)
{
	const char	*detail;

	memset(msg, 0, sizeof *msg);
	msg->root = json_incref(value);
	if (json_is_array(value))
		detail = "a batch cannot hold a batch";
	else
		detail = jsonrpc_classify(msg);
	if (detail != NULL)
		jsonrpc_invalid(msg, STEXEC_ERR_INVALID_REQUEST, "%s", detail);
}

void
jsonrpc_msg_clear(struct jsonrpc_msg *msg)
{
	json_decref(msg->root);
	memset(msg, 0, sizeof *msg);
}

/*
 * Append v as compact JSON, byte for byte what json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) gives, written directly: every reply and notification
 * goes through here, and jansson's dump costs several times more.
 */
static int
jsonrpc_add_value(struct buf *out, const json_t *v)
{
	return jsonrpc_add_json(out, v, 0);
}

static int
jsonrpc_add_json(struct buf *out, const json_t *v, int depth)
{
	const char *key;
	json_t *item;
	size_t i, n;
	void *it;

	if (v == NULL || depth > JSONRPC_MAX_DEPTH)
		return -1;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		buf_add(out, "{", 1);
		n = 0;
		for (it = json_object_iter((json_t *)v); it != NULL;
		    it = json_object_iter_next((json_t *)v, it)) {
			key = json_object_iter_key(it);
			if (n++ > 0)
				buf_add(out, ",", 1);
			if (jsonrpc_add_stringn(out, key,
			    json_object_iter_key_len(it)) != 0)
				return -1;
			buf_add(out, ":", 1);
			if (jsonrpc_add_json(out, json_object_iter_value(it),
			    depth + 1) != 0)
				return -1;
		}
		buf_add(out, "}", 1);
		return 0;
	case JSON_ARRAY:
		buf_add(out, "[", 1);
		json_array_foreach(v, i, item) {
			if (i > 0)
				buf_add(out, ",", 1);
			if (jsonrpc_add_json(out, item, depth + 1) != 0)
				return -1;
		}
		buf_add(out, "]", 1);
		return 0;
	case JSON_STRING:
		return jsonrpc_add_stringn(out, json_string_value(v),
		    json_string_length(v));
	case JSON_INTEGER:
		buf_add_int(out, json_integer_value(v));
		return 0;
	case JSON_REAL:
		return jsonrpc_add_real(out, json_real_value(v));
	case JSON_TRUE:
		buf_add(out, "true", 4);
		return 0;
	case JSON_FALSE:
		buf_add(out, "false", 5);
		return 0;
	case JSON_NULL:
		buf_add(out, "null", 4);
		return 0;
	}
	return -1;
}

/* A real as jansson writes it: %.17g, ".0" when it looks integral. */
static int
jsonrpc_add_real(struct buf *out, double d)
{
	char num[64], *start, *end;
	int n;

	if (isinf(d) || isnan(d))
		return -1;
	n = snprintf(num, sizeof num, "%.17g", d);
	if (n < 0 || (size_t)n >= sizeof num - 3)
		return -1;
	if (strpbrk(num, ".eE") == NULL) {
		num[n++] = '.';
		num[n++] = '0';
		num[n] = '\0';
	}
	/* No '+' and no leading zeros in the exponent: 1e+300 is 1e300. */
	if ((start = strchr(num, 'e')) != NULL) {
		start++;
		end = start + 1;
		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, (size_t)n - (size_t)(end - num) + 1);
			n -= (int)(end - start);
		}
	}
	buf_add(out, num, (size_t)n);
	return 0;
}

/*
 * Append s as a JSON string, escaped as jansson does; -1 when s is not
 * valid UTF-8 (the peer's parser would reject the whole line).
 */
static int
jsonrpc_add_string(struct buf *out, const char *s)
{
	if (s == NULL)
		return -1;
	return jsonrpc_add_stringn(out, s, strlen(s));
}

/*
 * Are the 8 bytes at p all printable ASCII other than '"' and '\\'? The
 * classic tests for a zero byte (x - 0x01..) & ~x & 0x80.., on the word
 * and on it xored with each special byte.
 */
static bool
jsonrpc_plain8(const unsigned char *p)
{
	const uint64_t ones = 0x0101010101010101ULL;
	const uint64_t high = 0x8080808080808080ULL;
	uint64_t w, q, b;

	memcpy(&w, p, 8);
	q = w ^ (ones * '"');
	b = w ^ (ones * '\\');
	return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) |
	    ((b - ones) & ~b)) & high) == 0;
}

/* The same for len bytes, which may hold NUL (escaped as \u0000). */
static int
jsonrpc_add_stringn(struct buf *out, const char *s, size_t len)
{
	if (s == NULL)
		return -1;
	return jsonrpc_add_str(out, s, len, false);
}

/* The escape of an ASCII byte JSON takes only escaped, as jansson writes it. */
static size_t
jsonrpc_escape(unsigned char c, char *e)
{
	static const char hex[] = "0123456789ABCDEF";
	char letter;

	switch (c) {
	case '"':
	case '\\':
		letter = (char)c;
		break;
	case '\b':
		letter = 'b';
		break;
	case '\f':
		letter = 'f';
		break;
	case '\n':
		letter = 'n';
		break;
	case '\r':
		letter = 'r';
		break;
	case '\t':
		letter = 't';
		break;
	default:
		memcpy(e, "\\u00", 4);
		e[4] = hex[c >> 4];
		e[5] = hex[c & 15];
		return 6;
	}
	e[0] = '\\';
	e[1] = letter;
	return 2;
}

/*
 * A JSON string literal: runs of plain and valid UTF-8 bytes are copied
 * whole, the rest escaped; an invalid byte is U+FFFD when repair, else
 * the call fails.
 */
static int
jsonrpc_add_str(struct buf *out, const char *s, size_t len,
    bool repair)
{
	/* Room for the plain case at once, not step by step. */
	buf_grow(out, len + 2);
	buf_add(out, "\"", 1);
	if (jsonrpc_add_body(out, s, len, repair) != 0)
		return -1;
	buf_add(out, "\"", 1);
	return 0;
}

/* The inside of a JSON string literal, as jsonrpc_add_str writes it. */
static int
jsonrpc_add_body(struct buf *out, const char *s, size_t len,
    bool repair)
{
	const unsigned char	*p = (const unsigned char *)s, *run;
	size_t			 left = len, n;
	unsigned char		 c;
	char			*e, *end;

	while (left > 0) {
		for (run = p; left > 0; p += n, left -= n) {
			/* Eight plain bytes at a time: the common case. */
			while (left >= 8 && jsonrpc_plain8(p)) {
				p += 8;
				left -= 8;
			}
			if (left == 0)
				break;
			c = *p;
			if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\')
				n = 1;
			else if (c < 0x80 || (n = utf8_seq(p, left)) == 0)
				break;
		}
		if (p != run)
			buf_add(out, run, (size_t)(p - run));
		if (left == 0)
			break;
		if (*p >= 0x80) {
			if (!repair)
				return -1;
			buf_add(out, "\xef\xbf\xbd", 3);
			p++;
			left--;
			continue;
		}
		/*
		 * Written in place, a run of them at once: a run of control
		 * bytes is 6 times longer; room for many, not a call a byte.
		 */
		if (out->cap - out->len < 7)
			buf_grow(out, 6 * (left < 4096 ? left : 4096));
		e = out->data + out->len;
		end = out->data + out->cap - 7;
		do {
			e += jsonrpc_escape(*p, e);
			p++;
			left--;
		} while (left > 0 && e <= end && (*p < 0x20 || *p == '"' ||
		    *p == '\\'));
		out->len = (size_t)(e - out->data);
		out->data[out->len] = '\0';
	}
	return 0;
}

void
jsonrpc_add_string_repaired(struct buf *out, const char *s,
    size_t len)
{
	jsonrpc_add_str(out, s, len, true);
}

void
jsonrpc_add_string_part(struct buf *out, const char *s, size_t len)
{
	buf_grow(out, len);
	jsonrpc_add_body(out, s, len, true);
}

/* Undo a partly written message: out holds only whole lines. */
static int
jsonrpc_fail(struct buf *out, size_t mark)
{
	out->len = mark;
	if (out->data != NULL)
		out->data[mark] = '\0';
	return -1;
}

/* The end of a request or notification: method, params, "}\n". */
static int
jsonrpc_add_call(struct buf *out, size_t mark, const char *method,
    const json_t *params)
{
	buf_addstr(out, ",\"method\":");
	if (jsonrpc_add_string(out, method) != 0)
		return jsonrpc_fail(out, mark);
	if (params != NULL) {
		buf_addstr(out, ",\"params\":");
		if (jsonrpc_add_value(out, params) != 0)
			return jsonrpc_fail(out, mark);
	}
	buf_addstr(out, "}\n");
	return 0;
}

/* params, when given, must be an object or array (JSON-RPC 2.0 §4.2). */
int
jsonrpc_request(struct buf *out, const json_t *id, const char *method,
    const json_t *params)
{
	size_t	 mark = out->len;

	if (id == NULL || !jsonrpc_valid_id(id))
		return -1;
	if (params != NULL && !json_is_object(params) && !json_is_array(params))
		return -1;
	buf_addstr(out, "{\"jsonrpc\":\"2.0\",\"id\":");
	if (jsonrpc_add_value(out, id) != 0)
		return jsonrpc_fail(out, mark);
	return jsonrpc_add_call(out, mark, method, params);
}

int
jsonrpc_notification(struct buf *out, const char *method,
    const json_t *params)
{
	size_t	 mark = out->len;

	if (params != NULL && !json_is_object(params) && !json_is_array(params))
		return -1;
	buf_addstr(out, "{\"jsonrpc\":\"2.0\"");
	return jsonrpc_add_call(out, mark, method, params);
}

int
jsonrpc_notification_with(struct buf *out, const char *method,
    const json_t *params, const char *more, size_t morelen)
{
	size_t	 mark = out->len;

	if (!json_is_object(params) || morelen == 0 || more[0] != ',' ||
	    jsonrpc_notification(out, method, params) != 0)
		return jsonrpc_fail(out, mark);
	/* Back over "}}\n"; an empty params takes more without its comma. */
	out->len -= 3;
	if (out->data[out->len - 1] == '{') {
		more++;
		morelen--;
	}
	buf_add(out, more, morelen);
	buf_add(out, "}}\n", 3);
	return 0;
}

int
jsonrpc_result(struct buf *out, const json_t *id, const json_t *result)
{
	size_t	 mark = out->len;

	if (id == NULL || !jsonrpc_valid_id(id) || result == NULL)
		return -1;
	buf_addstr(out, "{\"jsonrpc\":\"2.0\",\"id\":");
	if (jsonrpc_add_value(out, id) != 0)
		return jsonrpc_fail(out, mark);
	buf_addstr(out, ",\"result\":");
	if (jsonrpc_add_value(out, result) != 0)
		return jsonrpc_fail(out, mark);
	buf_addstr(out, "}\n");
	return 0;
}

int
jsonrpc_error(struct buf *out, const json_t *id, int code,
    const char *message, const json_t *data)
{
	size_t	 mark = out->len;
	char	 num[32];

	if (id != NULL && !jsonrpc_valid_id(id))
		return -1;
	buf_addstr(out, "{\"jsonrpc\":\"2.0\",\"id\":");
	if (id == NULL)
		buf_addstr(out, "null");
	else if (jsonrpc_add_value(out, id) != 0)
		return jsonrpc_fail(out, mark);
	snprintf(num, sizeof num, "%d", code);
	buf_addstr(out, ",\"error\":{\"code\":");
	buf_addstr(out, num);
	buf_addstr(out, ",\"message\":");
	if (jsonrpc_add_string(out, message) != 0)
		return jsonrpc_fail(out, mark);
	if (data != NULL) {
		buf_addstr(out, ",\"data\":");
		if (jsonrpc_add_value(out, data) != 0)
			return jsonrpc_fail(out, mark);
	}
	buf_addstr(out, "}}\n");
	return 0;
}

int
jsonrpc_dump(struct buf *out, const json_t *v)
{
	size_t	 mark = out->len;

	if (jsonrpc_add_value(out, v) != 0)
		return jsonrpc_fail(out, mark);
	return 0;
}
