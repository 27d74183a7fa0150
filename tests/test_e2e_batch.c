/*
 * JSON-RPC 2.0 batches (§6 of the JSON-RPC specification) and the answer to
 * a client that speaks LSP's Content-Length framing, against the real
 * daemon.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "e2e.h"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(e2e_batch, .fini = e2e_fini);

/* The reply in arr whose id is the integer id. */
static json_t *
batch_reply(json_t *arr, int id)
{
	json_t *m;
	size_t i;

	json_array_foreach(arr, i, m)
		if (json_integer_value(json_object_get(m, "id")) == id)
			return m;
	cr_assert_fail("no reply with id %d in the batch", id);
	return NULL;
}

/* The next message that is not a notification (those are skipped). */
static json_t *
next_reply(struct client *c)
{
	json_t *m;

	while ((m = c_read(c, 5000)) != NULL && json_is_object(m) &&
	    json_object_get(m, "method") != NULL)
		json_decref(m);
	return m;
}

static int
error_code(const json_t *reply)
{
	return (int)json_integer_value(json_object_get(
	    json_object_get(reply, "error"), "code"));
}

static void
ping_still_answers(struct client *c)
{
	json_decref(c_call(c, "ping", NULL));
}

Test(e2e_batch, requests_get_an_array_of_replies)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *arr;

	c_send_raw(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}]");
	arr = c_read(c, 5000);
	cr_assert(json_is_array(arr), "a batch is answered with an array");
	cr_assert_eq(json_array_size(arr), 2);
	cr_assert(json_is_object(json_object_get(batch_reply(arr, 1),
	    "result")));
	cr_assert_eq(error_code(batch_reply(arr, 2)), -32601);
	json_decref(arr);
	ping_still_answers(c);
	c_close(c);
	d_stop(d);
}

Test(e2e_batch, notifications_only_get_nothing)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *m;

	/* An unknown method and bad params in notifications: no reply. */
	c_send_raw(c, "[{\"jsonrpc\":\"2.0\",\"method\":\"ping\"},"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"nope\"},"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"status\",\"params\":{}}]");
	c_send_raw(c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
	m = c_read(c, 5000);
	cr_assert(json_is_object(m));
	cr_assert_eq(json_integer_value(json_object_get(m, "id")), 7,
	    "the first reply is the ping's: the batch got none");
	json_decref(m);
	c_close(c);
	d_stop(d);
}

Test(e2e_batch, empty_and_invalid_elements)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *m, *e;
	size_t i;

	c_send_raw(c, "[]");
	m = c_read(c, 5000);
	cr_assert(json_is_object(m), "[] gets one error, not an array");
	cr_assert_eq(error_code(m), -32600);
	cr_assert(json_is_null(json_object_get(m, "id")));
	json_decref(m);

	c_send_raw(c, "[1,2]");
	m = c_read(c, 5000);
	cr_assert(json_is_array(m));
	cr_assert_eq(json_array_size(m), 2);
	json_array_foreach(m, i, e) {
		cr_assert_eq(error_code(e), -32600);
		cr_assert(json_is_null(json_object_get(e, "id")));
	}
	json_decref(m);

	/* A batch inside a batch is one invalid element. */
	c_send_raw(c, "[[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}],"
	    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]");
	m = c_read(c, 5000);
	cr_assert_eq(json_array_size(m), 2);
	cr_assert(json_is_object(json_object_get(batch_reply(m, 3),
	    "result")));
	json_decref(m);
	ping_still_answers(c);
	c_close(c);
	d_stop(d);
}

Test(e2e_batch, too_many_requests_get_one_error)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	char *line = malloc(101 * 48 + 4), *p = line;
	json_t *m;
	int i;

	*p++ = '[';
	for (i = 0; i < 101; i++)
		p += sprintf(p, "%s{\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"ping\"}", i > 0 ? "," : "", i);
	strcpy(p, "]");
	c_send_raw(c, line);
	free(line);
	m = c_read(c, 5000);
	cr_assert(json_is_object(m));
	cr_assert_eq(error_code(m), -32600);
	cr_assert_not_null(strstr(json_string_value(json_object_get(
	    json_object_get(m, "error"), "message")), "at most 100"));
	json_decref(m);
	ping_still_answers(c);
	c_close(c);
	d_stop(d);
}

/* A drain in a batch holds the array back until the turn has drained. */
Test(e2e_batch, drain_in_a_batch)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *m, *r;
	const char *s = json_string_value(sid);
	char line[512];

	json_decref(c_add(c, s, "t1", "bash",
	    "{\"command\":\"sleep 0.3; echo done\"}"));
	snprintf(line, sizeof line, "[{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"drain\",\"params\":{\"sessionId\":\"%s\"}},"
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]", s);
	c_send_raw(c, line);
	m = next_reply(c);
	cr_assert(json_is_array(m), "the array comes after the drain");
	r = json_object_get(batch_reply(m, 1), "result");
	cr_assert_eq(json_integer_value(json_object_get(r, "results")), 1);
	cr_assert(json_is_object(json_object_get(batch_reply(m, 2),
	    "result")));
	json_decref(m);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* The client leaves while a batch waits for its drain: nothing breaks. */
Test(e2e_batch, client_gone_before_the_batch_completes)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *c2;
	json_t *sid = c_session(c, NULL);
	const char *s = json_string_value(sid);
	char line[512];

	json_decref(c_add(c, s, "t1", "bash", "{\"command\":\"sleep 0.3\"}"));
	snprintf(line, sizeof line, "[{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"drain\",\"params\":{\"sessionId\":\"%s\"}}]", s);
	c_send_raw(c, line);
	c_close(c);
	c2 = c_open(d);
	json_decref(c_call(c2, "drain", json_pack("{s:s}", "sessionId", s)));
	ping_still_answers(c2);
	json_decref(sid);
	c_close(c2);
	d_stop(d);
}

Test(e2e_batch, lsp_framing_is_named)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *c2;
	json_t *m;

	c_send_raw(c, "Content-Length: 40\r");
	m = c_read(c, 5000);
	cr_assert_eq(error_code(m), -32700);
	cr_assert_not_null(strstr(json_string_value(json_object_get(
	    json_object_get(m, "error"), "message")),
	    "newline-delimited JSON"));
	json_decref(m);
	cr_assert_null(c_read(c, 5000), "the connection is closed after it");
	c2 = c_open(d);
	ping_still_answers(c2);
	c_close(c2);
	c_close(c);
	d_stop(d);
}
