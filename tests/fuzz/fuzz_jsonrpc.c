/*
 * The JSON-RPC codec: the fuzzer's bytes are one incoming line. Decoding
 * must classify it consistently; what was decoded is encoded back (request,
 * notification, result, error, and the error reply an invalid line gets)
 * and must decode to the same message; every value dump must be byte for
 * byte what jansson's json_dumps gives (the codec promises it); and the
 * bytes as tool output must become a JSON string that reads back as their
 * UTF-8 repair. What the fast parser (jsonload.h) takes, jansson must parse
 * to an equal value with the same member order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jsonload.h"
#include "jsonrpc.h"
#include "stexec/protocol.h"
#include "utf8.h"

static void	fuzz_jsonrpc_dump(const json_t *);
static void	fuzz_jsonrpc_again(const struct jsonrpc_msg *);
static void	fuzz_jsonrpc_repair(const uint8_t *, size_t);
static void	fuzz_jsonrpc_fast(const uint8_t *, size_t);

/* jsonload against json_loadb: a line it takes means what jansson reads. */
static void
fuzz_jsonrpc_fast(const uint8_t *data, size_t size)
{
	json_t *fast = jsonload((const char *)data, size), *want;
	char *a, *b;

	if (fast == NULL)
		return;
	want = json_loadb((const char *)data, size, JSON_DECODE_ANY |
	    JSON_ALLOW_NUL, NULL);
	FUZZ_CHECK(want != NULL, "jsonload took what jansson refuses");
	FUZZ_CHECK(json_equal(fast, want), "jsonload's value differs");
	a = json_dumps(fast, JSON_COMPACT | JSON_ENCODE_ANY);
	b = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
	FUZZ_CHECK(a != NULL && b != NULL && strcmp(a, b) == 0,
	    "jsonload's member order differs");
	free(a);
	free(b);
	json_decref(fast);
	json_decref(want);
}

/* jsonrpc_dump against json_dumps, for the whole parsed value. */
static void
fuzz_jsonrpc_dump(const json_t *v)
{
	struct buf out = { 0 };
	char *want;

	want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	FUZZ_CHECK(want != NULL, "jansson cannot dump what it parsed");
	FUZZ_CHECK(jsonrpc_dump(&out, v) == 0, "a parsed value not encodable");
	FUZZ_CHECK(strcmp(out.data, want) == 0, "dump differs from jansson's");
	free(want);
	buf_free(&out);
}

/* Encode what was decoded, decode that, and compare. */
static void
fuzz_jsonrpc_again(const struct jsonrpc_msg *m)
{
	struct buf out = { 0 };
	struct jsonrpc_msg back;
	json_t *detail = NULL;
	int rc = -1;

	switch (m->kind) {
	case JSONRPC_REQUEST:
		rc = jsonrpc_request(&out, m->id, m->method, m->params);
		break;
	case JSONRPC_NOTIFICATION:
		rc = jsonrpc_notification(&out, m->method, m->params);
		break;
	case JSONRPC_RESPONSE:
		rc = jsonrpc_result(&out, m->id, m->result);
		break;
	case JSONRPC_ERROR:
		rc = jsonrpc_error(&out, m->id, m->code, m->message, NULL);
		break;
	case JSONRPC_INVALID:
		/* The daemon's answer: the detail must be sendable. */
		detail = json_string(m->detail);
		FUZZ_CHECK(detail != NULL, "invalid detail is not UTF-8");
		rc = jsonrpc_error(&out, m->id, m->code, m->message, detail);
		break;
	case JSONRPC_BATCH:
		FUZZ_CHECK(0, "a batch reached the round trip");
		break;
	}
	FUZZ_CHECK(rc == 0, "a decoded message cannot be encoded");
	FUZZ_CHECK(out.len > 0 && out.data[out.len - 1] == '\n' &&
	    memchr(out.data, '\n', out.len - 1) == NULL,
	    "an encoded message is not one line");
	jsonrpc_decode(out.data, out.len - 1, &back);
	FUZZ_CHECK(back.kind == (m->kind == JSONRPC_INVALID ? JSONRPC_ERROR :
	    m->kind), "the kind changed in a round trip");
	FUZZ_CHECK((m->id == NULL && back.id == NULL) ||
	    (m->kind == JSONRPC_INVALID && m->id == NULL &&
	    json_is_null(back.id)) || json_equal(m->id, back.id),
	    "the id changed in a round trip");
	switch (m->kind) {
	case JSONRPC_REQUEST:
	case JSONRPC_NOTIFICATION:
		FUZZ_CHECK(strcmp(m->method, back.method) == 0,
		    "the method changed in a round trip");
		FUZZ_CHECK((m->params == NULL && back.params == NULL) ||
		    json_equal(m->params, back.params),
		    "the params changed in a round trip");
		break;
	case JSONRPC_RESPONSE:
		FUZZ_CHECK(json_equal(m->result, back.result),
		    "the result changed in a round trip");
		break;
	case JSONRPC_ERROR:
	case JSONRPC_INVALID:
		FUZZ_CHECK(back.code == m->code && strcmp(back.message,
		    m->message) == 0, "the error changed in a round trip");
		break;
	case JSONRPC_BATCH:
		break;
	}
	jsonrpc_msg_clear(&back);
	json_decref(detail);
	buf_free(&out);
}

/* The bytes as tool output: a string literal that reads back repaired. */
static void
fuzz_jsonrpc_repair(const uint8_t *data, size_t size)
{
	struct buf out = { 0 };
	struct buf want = { 0 };
	json_error_t jerr;
	json_t *v;

	jsonrpc_add_string_repaired(&out, (const char *)data, size);
	v = json_loadb(out.data, out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL,
	    &jerr);
	FUZZ_CHECK(json_is_string(v), "repaired output is not a JSON string");
	utf8_repair(&want, (const char *)data, size);
	FUZZ_CHECK(json_string_length(v) == want.len &&
	    (want.len == 0 || memcmp(json_string_value(v), want.data,
	    want.len) == 0), "repair differs from utf8_repair");
	FUZZ_CHECK(!utf8_valid((const char *)data, size) || (want.len == size &&
	    memcmp(want.data, data, size) == 0), "valid UTF-8 was changed");
	json_decref(v);
	buf_free(&want);
	buf_free(&out);
}

/* What must hold of one decoded message (a line, or a batch's element). */
static void
fuzz_jsonrpc_message(struct jsonrpc_msg *m)
{
	const char *p;

	switch (m->kind) {
	case JSONRPC_INVALID:
		FUZZ_CHECK(m->code == STEXEC_ERR_PARSE ||
		    m->code == STEXEC_ERR_INVALID_REQUEST, "odd invalid code");
		FUZZ_CHECK((m->code == STEXEC_ERR_PARSE) == (m->root == NULL),
		    "parse error iff nothing parsed");
		FUZZ_CHECK(utf8_valid(m->detail, strlen(m->detail)),
		    "the detail is not UTF-8");
		for (p = m->detail; *p != '\0'; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f,
			    "a control character in the detail");
		break;
	case JSONRPC_REQUEST:
	case JSONRPC_NOTIFICATION:
		FUZZ_CHECK(m->method != NULL, "a request without method");
		FUZZ_CHECK((m->id != NULL) == (m->kind == JSONRPC_REQUEST),
		    "id and kind disagree");
		FUZZ_CHECK(m->params == NULL || json_is_object(m->params) ||
		    json_is_array(m->params), "params neither object nor array");
		break;
	case JSONRPC_RESPONSE:
	case JSONRPC_ERROR:
		FUZZ_CHECK(m->id != NULL, "a response without id");
		break;
	case JSONRPC_BATCH:
		FUZZ_CHECK(0, "a batch where a message was expected");
		break;
	}
	fuzz_jsonrpc_again(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jsonrpc_msg m, el;
	size_t i;

	jsonrpc_decode((const char *)data, size, &m);
	if (m.root != NULL)
		fuzz_jsonrpc_dump(m.root);
	if (m.kind == JSONRPC_BATCH) {
		FUZZ_CHECK(json_is_array(m.root) && json_array_size(m.root) > 0,
		    "a batch that is not a non-empty array");
		for (i = 0; i < json_array_size(m.root); i++) {
			jsonrpc_decode_value(json_array_get(m.root, i), &el);
			fuzz_jsonrpc_message(&el);
			jsonrpc_msg_clear(&el);
		}
	} else
		fuzz_jsonrpc_message(&m);
	jsonrpc_msg_clear(&m);
	fuzz_jsonrpc_repair(data, size);
	fuzz_jsonrpc_fast(data, size);
	return 0;
}
