/*
 * The daemon under abuse: bad input on the wire, other users, a second
 * daemon, dropped clients, floods of output, stubborn and leaky tools, and
 * valgrind. Each test checks the exact error (doc/design.md §3) and that the
 * daemon keeps serving: the same connection where the protocol says it
 * stays usable, and always a second client.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* Waits that only a broken daemon runs out of, even on a loaded machine. */
#define SLOW 30000

#define ERR_PARSE -32700
#define ERR_INVALID_REQUEST -32600
#define ERR_METHOD_NOT_FOUND -32601
#define ERR_INVALID_PARAMS -32602
#define ERR_UNKNOWN_SESSION -32001
#define ERR_DUPLICATE -32002
#define ERR_NOT_PERMITTED -32003
#define ERR_LIMIT -32004

#define NO_SUCH_SESSION "s-0123456789abcdef"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(framing, .fini = e2e_fini);
TestSuite(kill, .fini = e2e_fini);
TestSuite(leftovers, .fini = e2e_fini);
TestSuite(lifecycle, .fini = e2e_fini);
TestSuite(memory, .fini = e2e_fini);
TestSuite(output, .fini = e2e_fini);
TestSuite(ownership, .fini = e2e_fini);
TestSuite(params, .fini = e2e_fini);
TestSuite(resume, .fini = e2e_fini);
TestSuite(valgrind, .fini = e2e_fini);

extern char **environ;

static const char *
method_of(json_t *msg)
{
	const char *m = json_string_value(json_object_get(msg, "method"));

	return m != NULL ? m : "";
}

static json_int_t
seq_of(json_t *msg)
{
	return json_integer_value(json_object_get(json_object_get(msg,
	    "params"), "seq"));
}

/* Send every byte, in as few writes as the socket takes. */
static void
send_all(struct client *c, const char *data, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(c->fd, data, len, MSG_NOSIGNAL);
		cr_assert(n > 0 || errno == EINTR, "send: %s", strerror(errno));
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		}
	}
}

/* Send what the daemon takes before it hangs up (EPIPE is expected). */
static void
send_until_hangup(struct client *c, const char *data, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(c->fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return;
		cr_assert(n > 0 || errno == EINTR, "send: %s", strerror(errno));
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		}
	}
}

/* A raw line, and the response it gets. */
static json_t *
raw_reply(struct client *c, const char *line)
{
	json_t *r;

	c_send_raw(c, line);
	r = c_response(c, SLOW);
	cr_assert(r != NULL, "no reply to %s", line);
	return r;
}

/* msg is an error response with this code and this id (JSON text). */
static void
expect_error(json_t *msg, int code, const char *id_json, const char *what)
{
	json_t *err = json_object_get(msg, "error");
	json_t *id = json_object_get(msg, "id"), *want = e2e_json(id_json);
	char *text = json_dumps(msg, JSON_COMPACT);

	cr_assert(err != NULL, "%s: not an error: %s", what, text);
	cr_assert_eq(e2e_code(err), code, "%s: want code %d: %s", what, code,
	    text);
	cr_assert(json_is_string(json_object_get(err, "message")),
	    "%s: no message: %s", what, text);
	cr_assert(id != NULL && json_equal(id, want), "%s: want id %s: %s",
	    what, id_json, text);
	free(text);
	json_decref(want);
}

/* A call that must fail with -32602 naming field (message and data). */
static void
expect_bad_param(struct client *c, const char *method, json_t *params,
    const char *field)
{
	char *text = json_dumps(params, JSON_COMPACT);
	json_t *e = c_call_error(c, method, params);
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *got = json_string_value(json_object_get(json_object_get(e,
	    "data"), "field"));

	cr_assert_eq(e2e_code(e), ERR_INVALID_PARAMS, "%s %s: code %d, want "
	    "-32602", method, text, e2e_code(e));
	cr_assert(msg != NULL && strstr(msg, field) != NULL, "%s %s: the "
	    "message \"%s\" does not name %s", method, text, msg, field);
	cr_assert(got != NULL && strcmp(got, field) == 0, "%s %s: data.field "
	    "is %s, want %s", method, text, got, field);
	json_decref(e);
	free(text);
}

/* A call that must fail with code. */
static void
expect_code(struct client *c, const char *method, json_t *params, int code)
{
	char *text = json_dumps(params, JSON_COMPACT);
	json_t *e = c_call_error(c, method, params);

	cr_assert_eq(e2e_code(e), code, "%s %s: code %d, want %d (%s)", method,
	    text, e2e_code(e), code, json_string_value(json_object_get(e,
	    "message")));
	json_decref(e);
	free(text);
}

/* Another client, new to the daemon, is served. */
static void
second_client_ok(struct daemon *d)
{
	struct client *c = c_open(d);

	c_ping(c);
	c_close(c);
}

/* A session with these session ToolDefs (JSON array text), subscribed. */
static json_t *
tool_session(struct client *c, const char *tools_json)
{
	return c_session(c, json_pack("{s:o}", "tools", e2e_json(tools_json)));
}

/* The params of the tool_result for id in a list of notifications. */
static json_t *
result_of(json_t *list, const char *id)
{
	json_t *msg, *p;
	size_t i;

	json_array_foreach(list, i, msg) {
		p = json_object_get(msg, "params");
		if (strcmp(method_of(msg), "tool_result") == 0 &&
		    strcmp(json_string_value(json_object_get(p, "toolUseId")),
		    id) == 0)
			return p;
	}
	cr_assert_fail("no tool_result for %s", id);
	return NULL;
}

/* Seqs in list run first, first + 1, ... with no gap and no repeat. */
static void
expect_contiguous(json_t *list, json_int_t first)
{
	json_t *msg;
	size_t i;

	json_array_foreach(list, i, msg)
		cr_assert_eq(seq_of(msg), first + (json_int_t)i, "notification "
		    "%zu (%s) has seq %lld, want %lld", i, method_of(msg),
		    (long long)seq_of(msg), (long long)(first + (json_int_t)i));
}

/* drain, and every notification up to the turn_end. */
static json_t *
drain(struct client *c, const char *sid)
{
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	return c_until(c, "turn_end", SLOW);
}

/* ------------------------------------------------------------------ */

Test(framing, malformed_json_is_a_parse_error_and_the_connection_stays)
{
	static const char *bad[] = {
		"{\"jsonrpc\":",
		"not json at all",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing",
		/* Invalid UTF-8 is not JSON either. */
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}",
	};
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	size_t i;
	json_t *r;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = raw_reply(c, bad[i]);
		expect_error(r, ERR_PARSE, "null", bad[i]);
		json_decref(r);
		/* The same connection goes on after the newline. */
		c_ping(c);
	}
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

Test(framing, json_that_is_not_a_request_is_invalid)
{
	static const struct {
		const char *line, *id;
	} bad[] = {
		/* An empty batch; other batches: see test_e2e_batch.c. */
		{ "[]", "null" },
		{ "42", "null" },
		{ "\"ping\"", "null" },
		{ "null", "null" },
		/* With a usable id the error carries it (PROTOCOL.md §1). */
		{ "{\"id\":7,\"method\":\"ping\"}", "7" },
		{ "{\"jsonrpc\":\"1.0\",\"id\":8,\"method\":\"ping\"}", "8" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":5}", "9" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":null}", "\"x\"" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\","
		    "\"params\":3}", "10" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":11}", "11" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}",
		    "null" },
	};
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	size_t i;
	json_t *r;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = raw_reply(c, bad[i].line);
		expect_error(r, ERR_INVALID_REQUEST, bad[i].id, bad[i].line);
		json_decref(r);
	}
	c_ping(c);
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

Test(framing, unknown_method_is_method_not_found)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *r;

	r = raw_reply(c, "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":"
	    "\"frobnicate\",\"params\":{}}");
	expect_error(r, ERR_METHOD_NOT_FOUND, "\"q\"", "frobnicate");
	cr_assert(strstr(json_string_value(json_object_get(json_object_get(r,
	    "error"), "message")), "frobnicate") != NULL,
	    "the message does not name the method");
	json_decref(r);
	/* Names are case-sensitive: no lenient matching. */
	r = raw_reply(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"PING\"}");
	expect_error(r, ERR_METHOD_NOT_FOUND, "2", "PING");
	json_decref(r);
	c_ping(c);
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

Test(framing, client_notifications_and_empty_lines_get_no_reply)
{
	static const char *silent[] = {
		"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"frobnicate\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"addTool\",\"params\":{}}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"status\",\"params\":"
		    "{\"sessionId\":\"" NO_SUCH_SESSION "\"}}",
		/* A response from the client: nothing to answer either. */
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}",
		"",
		"\r",
	};
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	size_t i;
	json_t *r;

	for (i = 0; i < sizeof silent / sizeof *silent; i++)
		c_send_raw(c, silent[i]);
	/* Replies come in order, so the first one must be this one's. */
	r = raw_reply(c, "{\"jsonrpc\":\"2.0\",\"id\":\"after\","
	    "\"method\":\"ping\"}");
	cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "after",
	    "a notification was answered: %s", json_dumps(r, JSON_COMPACT));
	cr_assert(json_object_get(r, "result") != NULL);
	json_decref(r);
	r = c_read(c, 300);
	cr_assert_null(r, "an unexpected message: %s", r != NULL ?
	    json_dumps(r, JSON_COMPACT) : "");
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

Test(framing, pipelined_requests_are_all_answered_in_order)
{
	enum { N = 600 };
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	size_t len = 0, cap = N * 128;
	char *buf = malloc(cap);
	json_t *r;
	int i;

	/* Successes and errors mixed, in one write. */
	for (i = 0; i < N; i++) {
		switch (i % 4) {
		case 0:
			len += (size_t)snprintf(buf + len, cap - len,
			    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			    "\"ping\"}\n", i);
			break;
		case 1:
			len += (size_t)snprintf(buf + len, cap - len,
			    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			    "\"nope%d\"}\n", i, i);
			break;
		case 2:
			len += (size_t)snprintf(buf + len, cap - len,
			    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			    "\"status\",\"params\":{\"sessionId\":\""
			    NO_SUCH_SESSION "\"}}\n", i);
			break;
		default:
			len += (size_t)snprintf(buf + len, cap - len,
			    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			    "\"listSessions\"}\n", i);
			break;
		}
	}
	send_all(c, buf, len);
	free(buf);
	for (i = 0; i < N; i++) {
		r = c_response(c, SLOW);
		cr_assert(r != NULL, "only %d of %d requests were answered", i,
		    N);
		cr_assert_eq(json_integer_value(json_object_get(r, "id")), i,
		    "reply %d has id %lld", i, (long long)json_integer_value(
		    json_object_get(r, "id")));
		if (i % 4 == 1)
			cr_assert_eq(e2e_code(json_object_get(r, "error")),
			    ERR_METHOD_NOT_FOUND);
		else if (i % 4 == 2)
			cr_assert_eq(e2e_code(json_object_get(r, "error")),
			    ERR_UNKNOWN_SESSION);
		else
			cr_assert(json_object_get(r, "result") != NULL);
		json_decref(r);
	}
	c_ping(c);
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

/* A request line of exactly len bytes (newline excluded). */
static char *
ping_of_length(int id, size_t len)
{
	char head[64], *line;
	size_t n = (size_t)snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\","
	    "\"id\":%d,\"method\":\"ping\",\"params\":{\"pad\":\"", id);

	cr_assert(len > n + 3);
	line = malloc(len + 1);
	memcpy(line, head, n);
	memset(line + n, 'x', len - n - 3);
	memcpy(line + len - 3, "\"}}", 4);
	return line;
}

Test(framing, overlong_line_closes_only_that_connection)
{
	struct daemon *d = d_start("--max-message", "65536", NULL);
	struct client *other = c_open(d), *c = c_open(d), *c2;
	json_t *sid = c_session(other, NULL), *r, *list;
	const char *s = json_string_value(sid);
	char *line, *got;

	/* The cap counts the line without its newline: 65536 is fine... */
	line = ping_of_length(1, 65536);
	r = raw_reply(c, line);
	cr_assert(json_object_get(r, "result") != NULL, "a line of exactly "
	    "--max-message bytes was refused: %s", json_dumps(r,
	    JSON_COMPACT));
	json_decref(r);
	free(line);

	/* ...65537 is not: one error, then the connection is closed. */
	line = ping_of_length(2, 65537);
	/* The daemon may hang up before it has read it all. */
	send_until_hangup(c, line, strlen(line));
	send_until_hangup(c, "\n", 1);
	free(line);
	r = c_read(c, SLOW);
	cr_assert(r != NULL, "no error for an over-long line");
	expect_error(r, ERR_INVALID_REQUEST, "null", "over-long line");
	cr_assert(strstr(json_string_value(json_object_get(json_object_get(r,
	    "error"), "message")), "65536") != NULL);
	json_decref(r);
	r = c_read(c, SLOW);
	cr_assert_null(r, "more after the over-long line error");
	cr_assert(c->eof, "the connection was not closed");
	c_close(c);

	/* Without any newline at all: the cap, not the newline, decides. */
	c2 = c_open(d);
	line = malloc(1 << 20);
	memset(line, 'x', 1 << 20);
	send_until_hangup(c2, line, 1 << 20);
	free(line);
	r = c_read(c2, SLOW);
	cr_assert(r != NULL, "no error for 1 MiB without a newline");
	expect_error(r, ERR_INVALID_REQUEST, "null", "1 MiB, no newline");
	json_decref(r);
	cr_assert_null(c_read(c2, SLOW));
	cr_assert(c2->eof);
	c_close(c2);

	/* The other client and its session are untouched. */
	c_ping(other);
	json_decref(c_add(other, s, "a", "bash", "{\"command\":\"echo ok\"}"));
	list = drain(other, s);
	got = e2e_results(list);
	cr_assert_str_eq(got, "a:ok");
	free(got);
	json_decref(list);
	second_client_ok(d);
	json_decref(sid);
	c_close(other);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

Test(params, wrong_types_and_ranges_name_the_field)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *r, *e;
	const char *s = json_string_value(sid), *f;

	expect_bad_param(c, "addTool", json_pack("{s:i, s:{s:s, s:s, s:{}}}",
	    "sessionId", 5, "toolUse", "id", "a", "name", "bash", "input"),
	    "sessionId");
	expect_bad_param(c, "addTool", json_pack("{s:s}", "sessionId", s),
	    "toolUse");
	expect_bad_param(c, "addTool", json_pack("{s:s, s:s}", "sessionId", s,
	    "toolUse", "bash"), "toolUse");
	expect_bad_param(c, "addTool", json_pack("{s:s, s:{s:s, s:{}}}",
	    "sessionId", s, "toolUse", "name", "bash", "input"), "toolUse.id");
	expect_bad_param(c, "addTool", json_pack("{s:s, s:{s:s, s:s}}",
	    "sessionId", s, "toolUse", "id", "", "name", "bash"),
	    "toolUse.id");
	expect_bad_param(c, "addTool", json_pack("{s:s, s:{s:s, s:i}}",
	    "sessionId", s, "toolUse", "id", "a", "name", 7), "toolUse.name");
	expect_bad_param(c, "status", json_pack("{s:i}", "sessionId", 5),
	    "sessionId");
	expect_bad_param(c, "status", json_object(), "sessionId");
	expect_bad_param(c, "createSession", json_pack("{s:i}", "maxParallel",
	    0), "maxParallel");
	expect_bad_param(c, "createSession", json_pack("{s:i}", "maxParallel",
	    300), "maxParallel");
	expect_bad_param(c, "createSession", json_pack("{s:s}", "maxParallel",
	    "3"), "maxParallel");
	expect_bad_param(c, "createSession", json_pack("{s:s}", "cwd",
	    "relative/dir"), "cwd");
	expect_bad_param(c, "createSession", json_pack("{s:{s:i}}", "env",
	    "A", 1), "env.A");
	expect_bad_param(c, "abort", json_pack("{s:s, s:s}", "sessionId", s,
	    "reason", "x"), "reason");
	expect_bad_param(c, "abort", json_pack("{s:s}", "sessionId", s),
	    "reason");
	expect_bad_param(c, "subscribe", json_pack("{s:s, s:i}", "sessionId",
	    s, "since", -1), "since");
	expect_bad_param(c, "subscribe", json_pack("{s:s, s:s}", "sessionId",
	    s, "since", "1"), "since");
	expect_bad_param(c, "events", json_pack("{s:s, s:i}", "sessionId", s,
	    "since", -1), "since");
	expect_bad_param(c, "events", json_pack("{s:s, s:i}", "sessionId", s,
	    "max", 0), "max");
	expect_bad_param(c, "respondPermission", json_pack("{s:s, s:s, s:s}",
	    "sessionId", s, "toolUseId", "a", "decision", "maybe"),
	    "decision");
	expect_bad_param(c, "respondPermission", json_pack("{s:s, s:s}",
	    "sessionId", s, "decision", "allow"), "toolUseId");
	expect_bad_param(c, "ping", json_pack("[i]", 1), "params");

	/* A ToolDef that does not parse: the field is the tool's path. */
	e = c_call_error(c, "createSession", json_pack("{s:[{s:s}]}",
	    "tools", "name", "x"));
	cr_assert_eq(e2e_code(e), ERR_INVALID_PARAMS);
	f = json_string_value(json_object_get(json_object_get(e, "data"),
	    "field"));
	cr_assert(f != NULL && strncmp(f, "tools[0]", 8) == 0,
	    "data.field %s does not name tools[0]", f);
	json_decref(e);

	/* None of it touched the session, and the connection goes on. */
	r = c_call(c, "status", json_pack("{s:s}", "sessionId", s));
	cr_assert_eq(json_integer_value(json_object_get(r, "turn")), 1);
	cr_assert_eq(json_array_size(json_object_get(r, "tools")), 0,
	    "a rejected addTool added a tool");
	json_decref(r);
	r = c_call(c, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 1,
	    "a rejected createSession created a session");
	json_decref(r);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(params, unknown_session_everywhere)
{
	static const char *methods[] = { "status", "abort", "discard",
		"drain", "subscribe", "unsubscribe", "events", "closeSession",
		"listTools", "addTool", "respondPermission" };
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid, *r, *p;
	size_t i;

	for (i = 0; i < sizeof methods / sizeof *methods; i++) {
		/* Otherwise valid params: only the session is wrong. */
		p = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:s, s:s}",
		    "sessionId", NO_SUCH_SESSION, "reason", "interrupt",
		    "toolUse", "id", "a", "name", "bash", "input", "toolUseId",
		    "a", "decision", "allow");
		expect_code(c, methods[i], p, ERR_UNKNOWN_SESSION);
	}

	/* A closed session is unknown from then on. */
	r = c_call(c, "createSession", NULL);
	sid = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	json_decref(c_call(c, "closeSession", json_pack("{s:O}", "sessionId",
	    sid)));
	expect_code(c, "status", json_pack("{s:O}", "sessionId", sid),
	    ERR_UNKNOWN_SESSION);
	expect_code(c, "closeSession", json_pack("{s:O}", "sessionId", sid),
	    ERR_UNKNOWN_SESSION);
	r = c_call(c, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 0);
	json_decref(r);
	c_ping(c);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(params, duplicate_tool_use_id_in_a_turn)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *r, *list, *e;
	const char *s = json_string_value(sid);
	char *got;

	json_decref(c_add(c, s, "a", "bash", "{\"command\":\"echo one\"}"));
	e = c_call_error(c, "addTool", json_pack("{s:s, s:{s:s, s:s, s:{s:s}}}",
	    "sessionId", s, "toolUse", "id", "a", "name", "bash", "input",
	    "command", "echo two"));
	cr_assert_eq(e2e_code(e), ERR_DUPLICATE);
	cr_assert(strstr(json_string_value(json_object_get(e, "message")),
	    "a") != NULL);
	json_decref(e);
	/* Whatever the name: the id is what is taken. */
	expect_code(c, "addTool", json_pack("{s:s, s:{s:s, s:s}}", "sessionId",
	    s, "toolUse", "id", "a", "name", "nope"), ERR_DUPLICATE);
	list = drain(c, s);
	got = e2e_results(list);
	/* Exactly one result for a: the duplicates were not added. */
	cr_assert_str_eq(got, "a:ok");
	cr_assert_str_eq(e2e_content(result_of(list, "a")), "one\n");
	free(got);
	json_decref(list);

	/* The same id in the next turn is a new tool. */
	r = c_add(c, s, "a", "bash", "{\"command\":\"echo three\"}");
	cr_assert_eq(json_integer_value(json_object_get(r, "turn")), 2);
	json_decref(r);
	list = drain(c, s);
	got = e2e_results(list);
	cr_assert_str_eq(got, "a:ok");
	cr_assert_str_eq(e2e_content(result_of(list, "a")), "three\n");
	free(got);
	json_decref(list);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

Test(ownership, the_socket_is_private_by_default)
{
	struct daemon *d = d_start(NULL);
	struct stat st;

	cr_assert_eq(stat(d->sock, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "socket mode %o, want 0600",
	    (unsigned)(st.st_mode & 07777));
	second_client_ok(d);
	d_stop(d);
}

Test(ownership, a_session_belongs_to_its_uid)
{
	static const char *methods[] = { "addTool", "status", "subscribe",
		"unsubscribe", "events", "abort", "discard", "drain",
		"closeSession", "listTools", "respondPermission" };
	struct daemon *d;
	struct client *c, *nobody;
	json_t *sid, *nsid, *r, *list, *p;
	const char *s;
	size_t i;

	if (geteuid() != 0)
		cr_skip("needs root to act as another uid");
	/* nobody may create sessions here: see uids in test_e2e_limits.c. */
	d = d_start("--socket-mode", "0666", "--allow-other-uids", NULL);
	/* The private directory must let the other user reach the socket. */
	cr_assert_eq(chmod(d->dir, 0711), 0);
	c = c_open(d);
	sid = c_session(c, NULL);
	s = json_string_value(sid);
	json_decref(c_add(c, s, "a", "bash", "{\"command\":\"echo mine\"}"));
	list = drain(c, s);
	json_decref(list);

	nobody = c_adopt(d_connect_as(d, 65534));
	for (i = 0; i < sizeof methods / sizeof *methods; i++) {
		p = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:s, s:s}",
		    "sessionId", s, "reason", "cancel", "toolUse", "id", "x",
		    "name", "bash", "input", "toolUseId", "a", "decision",
		    "deny");
		expect_code(nobody, methods[i], p, ERR_NOT_PERMITTED);
	}
	r = c_call(nobody, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 0,
	    "another uid sees root's sessions: %s", json_dumps(r,
	    JSON_COMPACT));
	json_decref(r);

	/* Its own session is just as closed to root. */
	r = c_call(nobody, "createSession", NULL);
	nsid = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	expect_code(c, "status", json_pack("{s:O}", "sessionId", nsid),
	    ERR_NOT_PERMITTED);
	r = c_call(c, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    json_object_get(r, "sessions"), 0), "sessionId")), s);
	json_decref(r);
	r = c_call(nobody, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 1);
	cr_assert(json_equal(json_object_get(json_array_get(json_object_get(r,
	    "sessions"), 0), "sessionId"), nsid));
	json_decref(r);
	json_decref(c_call(nobody, "closeSession", json_pack("{s:O}",
	    "sessionId", nsid)));

	/* Root's session survived every attempt: same turn, its result. */
	r = c_call(c, "status", json_pack("{s:s}", "sessionId", s));
	cr_assert_eq(json_integer_value(json_object_get(r, "turn")), 2);
	json_decref(r);
	r = c_call(c, "events", json_pack("{s:s, s:i}", "sessionId", s,
	    "since", 0));
	cr_assert(json_array_size(json_object_get(r, "notifications")) > 0);
	json_decref(r);
	second_client_ok(d);
	json_decref(nsid);
	json_decref(sid);
	c_close(nobody);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

/* Run another daemon on d's socket to its end; its wait status. */
static int
run_other_daemon(struct daemon *d, const char *log)
{
	const char *daemon = getenv("STEXEC_DAEMON");
	char *argv[] = { (char *)daemon, "--socket", d->sock, "--output-dir",
		d->out, NULL };
	posix_spawn_file_actions_t fa;
	long long until = e2e_now_ms() + e2e_ms(SLOW);
	int status, k;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT |
	    O_TRUNC, 0600);
	k = posix_spawn(&pid, daemon, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(k, 0, "cannot start %s: %s", daemon, strerror(k));
	while (waitpid(pid, &status, WNOHANG) != pid) {
		if (e2e_now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			cr_assert_fail("a second daemon kept running on a live "
			    "socket");
		}
		usleep(10000);
	}
	return status;
}

/* Another daemon on d's socket fails at once, its log saying why (want). */
static void
other_daemon_refuses(struct daemon *d, const char *want)
{
	char log[128], *text;
	int status;

	snprintf(log, sizeof log, "%s", d_path(d, "second.log"));
	status = run_other_daemon(d, log);
	text = e2e_read_file(log, NULL);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0,
	    "the other daemon did not fail (status %#x): %s", status, text);
	cr_assert(text != NULL && strstr(text, want) != NULL,
	    "no clear message from the other daemon: %s", text);
	free(text);
}

Test(lifecycle, a_second_daemon_refuses_a_live_socket)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL);
	struct stat before, after;

	cr_assert_eq(stat(d->sock, &before), 0);
	other_daemon_refuses(d, "already serving");

	/* It left the first one's socket alone, and its clients. */
	cr_assert_eq(stat(d->sock, &after), 0);
	cr_assert_eq(before.st_ino, after.st_ino, "the socket was replaced");
	c_ping(c);
	json_decref(c_call(c, "status", json_pack("{s:O}", "sessionId", sid)));
	json_decref(sid);
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

Test(lifecycle, a_stale_socket_is_replaced_on_restart)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL);
	struct stat st;

	c_close(c);
	/* A crash: no chance to remove the socket file. */
	d_kill(d, SIGKILL);
	cr_assert_eq(stat(d->sock, &st), 0, "no stale socket to test with");
	cr_assert(S_ISSOCK(st.st_mode));
	d_restart(d, NULL);
	c = c_open(d);
	c_ping(c);
	/* A new daemon, the old one's sessions restored. */
	json_decref(c_call(c, "status", json_pack("{s:O}", "sessionId", sid)));
	json_decref(sid);
	second_client_ok(d);
	c_close(c);
	d_stop(d);
}

/*
 * A process that listens on the path and accepts nothing, its queue full:
 * a blocking connect would wait for as long as it lives. The daemon's
 * probe does not block; it refuses with a clear message and exits.
 */
Test(lifecycle, a_socket_with_a_full_queue_is_refused_not_waited_on)
{
	struct daemon *d = d_start(NULL);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int listener, queued[64], n = 0;

	d_kill(d, SIGKILL);
	cr_assert_eq(unlink(d->sock), 0);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", d->sock);
	listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(listener != -1 && bind(listener, (struct sockaddr *)&sun,
	    sizeof sun) == 0 && listen(listener, 0) == 0);
	/* Fill its queue: connect until one would have to wait. */
	for (;;) {
		cr_assert(n < (int)(sizeof queued / sizeof queued[0]),
		    "the queue never filled");
		queued[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0);
		if (connect(queued[n], (struct sockaddr *)&sun,
		    sizeof sun) != 0) {
			cr_assert_eq(errno, EAGAIN, "connect: %s",
			    strerror(errno));
			close(queued[n]);
			break;
		}
		n++;
	}
	other_daemon_refuses(d, "accepts nothing");
	while (n > 0)
		close(queued[--n]);
	close(listener);
	/* A file nobody listens on: the next start takes it over. */
	d_restart(d, NULL);
	d_stop(d);
}

/*
 * A crashed daemon's socket held open by a process it left behind (as a
 * child between its clone and its execve holds every descriptor): the
 * path still takes connections, yet nobody will accept them. Here the
 * listener is made by a child that then exits, leaving a grandchild that
 * holds it; the restarted daemon must take the path over, not refuse it.
 */
Test(lifecycle, a_socket_a_dead_daemon_left_held_is_replaced)
{
	struct daemon *d = d_start(NULL);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int hold[2], pids[2], fd, status;
	struct client *c;
	pid_t owner, holder = 0;
	char *text, byte;

	d_kill(d, SIGKILL);
	cr_assert_eq(unlink(d->sock), 0);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", d->sock);
	/* Close-on-exec: the daemon started below must not hold them. */
	cr_assert_eq(pipe2(hold, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(pids, O_CLOEXEC), 0);
	if ((owner = fork()) == 0) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd == -1 || bind(fd, (struct sockaddr *)&sun,
		    sizeof sun) != 0 || listen(fd, 8) != 0)
			_exit(1);
		if ((holder = fork()) == 0) {
			/* The leftover: holds the socket until hold[1] closes. */
			close(hold[1]);
			while (read(hold[0], &byte, 1) == -1 && errno == EINTR)
				;
			_exit(0);
		}
		_exit(write(pids[1], &holder, sizeof holder) ==
		    sizeof holder ? 0 : 1);
	}
	cr_assert_eq(waitpid(owner, &status, 0), owner);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_eq(read(pids[0], &holder, sizeof holder), sizeof holder);
	close(pids[0]);
	close(pids[1]);
	close(hold[0]);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0,
	    "the held socket does not take connections: nothing to test");
	close(fd);

	d_restart(d, NULL);
	c = c_open(d);
	c_ping(c);
	text = e2e_read_file(d->log, NULL);
	cr_assert(text != NULL && strstr(text, "is gone, a process it left "
	    "holds it open") != NULL, "no word of the held socket: %s", text);
	free(text);
	c_close(c);
	d_stop(d);
	/* The leftover goes with its pipe; reaped here if we are its reaper. */
	close(hold[1]);
	while (waitpid(holder, NULL, 0) == -1 && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ */

/* Pull every notification after since with events, max per page. */
static json_t *
pull(struct client *c, const char *sid, json_int_t since, int max)
{
	json_t *all = json_array(), *r, *page;

	for (;;) {
		r = c_call(c, "events", json_pack("{s:s, s:I, s:i}",
		    "sessionId", sid, "since", since, "max", max));
		page = json_object_get(r, "notifications");
		if (json_array_size(page) == 0) {
			json_decref(r);
			return all;
		}
		cr_assert(json_array_size(page) <= (size_t)max);
		json_array_extend(all, page);
		since = json_integer_value(json_object_get(r, "lastSeq"));
		cr_assert_eq(since, seq_of(json_array_get(all,
		    json_array_size(all) - 1)), "lastSeq is not the last seq "
		    "returned");
		json_decref(r);
	}
}

Test(resume, a_client_that_reconnects_with_since_misses_nothing)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *msg, *before = json_array();
	json_t *after, *r, *res, *pulled, *p;
	const char *s = json_string_value(sid);
	json_int_t last = 0, value;
	bool seen[41] = { false };
	size_t i;

	json_decref(c_add(c, s, "p", "bash", "{\"command\":\"for i in $(seq 1 "
	    "40); do printf '{\\\"progress\\\":%d}\\\\n' $i >&3; sleep 0.03; "
	    "done; echo finished\"}"));
	/* Read up to the fifth progress, then drop the connection. */
	for (;;) {
		msg = c_read(c, SLOW);
		cr_assert(msg != NULL, "the stream stopped");
		if (json_object_get(msg, "id") != NULL) {
			c_keep(c, msg);
			continue;
		}
		json_array_append_new(before, msg);
		last = seq_of(msg);
		if (strcmp(method_of(msg), "progress") == 0 &&
		    json_integer_value(json_object_get(json_object_get(msg,
		    "params"), "data")) == 5)
			break;
	}
	/* Taken together with what c_add queued, 1..last without a gap. */
	json_array_foreach(c->queue, i, msg)
		cr_assert(seq_of(msg) < seq_of(json_array_get(before, 0)));
	json_array_extend(c->queue, before);
	json_decref(before);
	before = json_copy(c->queue);
	expect_contiguous(before, 1);
	c_close(c);
	/* The tool goes on meanwhile. */
	usleep((useconds_t)e2e_ms(300) * 1000);

	c = c_open(d);
	r = c_call(c, "subscribe", json_pack("{s:s, s:I}", "sessionId", s,
	    "since", last));
	cr_assert_geq(json_integer_value(json_object_get(r, "lastSeq")), last);
	json_decref(r);
	after = drain(c, s);
	expect_contiguous(after, last + 1);
	/* Every later progress exactly once, and the result. */
	json_array_foreach(after, i, msg) {
		if (strcmp(method_of(msg), "progress") != 0)
			continue;
		value = json_integer_value(json_object_get(json_object_get(msg,
		    "params"), "data"));
		cr_assert(value > 5 && value <= 40, "progress %lld again",
		    (long long)value);
		seen[value] = true;
	}
	for (i = 6; i <= 40; i++)
		cr_assert(seen[i], "progress %zu is missing", i);
	res = result_of(after, "p");
	cr_assert_str_eq(e2e_reason(res), "ok");
	cr_assert_str_eq(e2e_content(res), "finished\n");

	/* events returns the very objects that were pushed, page by page. */
	pulled = pull(c, s, last, 7);
	cr_assert(json_array_size(pulled) >= json_array_size(after));
	json_array_foreach(after, i, msg)
		cr_assert(json_equal(msg, json_array_get(pulled, i)),
		    "events differs from the push at seq %lld: %s vs %s",
		    (long long)seq_of(msg), json_dumps(msg, JSON_COMPACT),
		    json_dumps(json_array_get(pulled, i), JSON_COMPACT));
	json_decref(pulled);
	pulled = pull(c, s, 0, 1000);
	json_array_foreach(before, i, msg) {
		p = json_array_get(pulled, i);
		cr_assert(json_equal(msg, p), "events differs from the push at "
		    "seq %lld", (long long)seq_of(msg));
	}
	json_decref(pulled);
	second_client_ok(d);
	json_decref(before);
	json_decref(after);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(resume, since_older_than_retention_is_a_replay_gap)
{
	struct daemon *d = d_start("--retention-bytes", "4096", NULL);
	struct client *c = c_open(d), *c2;
	json_t *sid = c_session(c, NULL), *list, *e, *r;
	const char *s = json_string_value(sid);
	json_int_t oldest;
	char *got;

	/* Far more than 4096 bytes of notifications in turn 1. */
	json_decref(c_add(c, s, "noisy", "bash", "{\"command\":\"for i in "
	    "$(seq 1 300); do echo \\\"{\\\\\\\"progress\\\\\\\":\\\\\\\"line "
	    "$i, padded to be a good deal longer than a seq\\\\\\\"}\\\" >&3; "
	    "done\"}"));
	list = drain(c, s);
	got = e2e_results(list);
	cr_assert_str_eq(got, "noisy:ok");
	free(got);
	cr_assert_gt(json_array_size(list), 300);
	json_decref(list);
	json_decref(c_add(c, s, "b", "bash", "{\"command\":\"echo b\"}"));
	json_decref(drain(c, s));
	json_decref(drain(c, s));

	c2 = c_open(d);
	e = c_call_error(c2, "subscribe", json_pack("{s:s, s:i}", "sessionId",
	    s, "since", 1));
	cr_assert_eq(e2e_code(e), ERR_LIMIT, "code %d", e2e_code(e));
	oldest = json_integer_value(json_object_get(json_object_get(e, "data"),
	    "oldestSeq"));
	cr_assert_gt(oldest, 2, "data.oldestSeq missing or too old: %s",
	    json_dumps(e, JSON_COMPACT));
	json_decref(e);
	e = c_call_error(c2, "events", json_pack("{s:s, s:i}", "sessionId", s,
	    "since", 1));
	cr_assert_eq(e2e_code(e), ERR_LIMIT);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(e,
	    "data"), "oldestSeq")), oldest);
	json_decref(e);
	/* The boundary: since = oldest - 1 is whole, oldest - 2 is not. */
	expect_code(c2, "events", json_pack("{s:s, s:I}", "sessionId", s,
	    "since", oldest - 2), ERR_LIMIT);
	r = c_call(c2, "events", json_pack("{s:s, s:I, s:i}", "sessionId", s,
	    "since", oldest - 1, "max", 1));
	cr_assert_eq(seq_of(json_array_get(json_object_get(r, "notifications"),
	    0)), oldest);
	json_decref(r);
	r = c_call(c2, "subscribe", json_pack("{s:s, s:I}", "sessionId", s,
	    "since", oldest - 1));
	json_decref(r);
	/* The replay starts at oldest. */
	r = c_read(c2, SLOW);
	cr_assert(r != NULL);
	cr_assert_eq(seq_of(r), oldest);
	json_decref(r);
	c_ping(c2);
	c_ping(c);
	json_decref(sid);
	c_close(c2);
	c_close(c);
	d_stop(d);
}

/*
 * PROTOCOL.md §4 events: "Without `since`: from the oldest retained
 * notification" -- also once older ones have been dropped.
 */
Test(resume, events_without_since_starts_at_the_oldest_retained)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *r, *e, *list;
	const char *s = json_string_value(sid);
	json_int_t oldest;
	char *text;
	int turn;

	/* Three turns: the first is older than the previous turn. */
	for (turn = 0; turn < 3; turn++) {
		json_decref(c_add(c, s, "a", "bash", "{\"command\":\"echo\"}"));
		json_decref(drain(c, s));
	}
	e = c_call_error(c, "events", json_pack("{s:s, s:i}", "sessionId", s,
	    "since", 0));
	cr_assert_eq(e2e_code(e), ERR_LIMIT, "turn 1 is still retained");
	oldest = json_integer_value(json_object_get(json_object_get(e, "data"),
	    "oldestSeq"));
	json_decref(e);

	if (asprintf(&text, "{\"jsonrpc\":\"2.0\",\"id\":\"nosince\",\"method\":"
	    "\"events\",\"params\":{\"sessionId\":\"%s\"}}", s) < 0)
		abort();
	r = raw_reply(c, text);
	free(text);
	text = json_dumps(r, JSON_COMPACT);
	list = json_object_get(json_object_get(r, "result"), "notifications");
	cr_assert(list != NULL, "events without since failed: %s", text);
	cr_assert_gt(json_array_size(list), 0);
	cr_assert_eq(seq_of(json_array_get(list, 0)), oldest, "events without "
	    "since starts at %lld, the oldest retained is %lld",
	    (long long)seq_of(json_array_get(list, 0)), (long long)oldest);
	free(text);
	json_decref(r);
	c_ping(c);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

/*
 * NUL is valid UTF-8 and JSON has \u0000 for it: tool output holding NULs
 * (binary files, /dev/zero) must come back whole, not cut at the first.
 */
Test(output, nul_bytes_in_tool_output_are_kept)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = tool_session(c, "[{\"name\":\"nul\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"printf 'a\\\\000b\\\\n'; printf "
	    "'err\\\\000x' >&2\"]},{\"name\":\"nuls\",\"command\":[\"/bin/sh\","
	    "\"-c\",\"head -c 1000 /dev/zero; echo end\"],"
	    "\"maxResultBytes\":100}]");
	const char *s = json_string_value(sid), *content;
	json_t *list, *res, *v;
	size_t len;

	json_decref(c_add(c, s, "n", "nul", NULL));
	json_decref(c_add(c, s, "t", "nuls", NULL));
	list = drain(c, s);

	res = result_of(list, "n");
	cr_assert_str_eq(e2e_reason(res), "ok");
	v = json_object_get(json_object_get(res, "result"), "content");
	len = json_string_length(v);
	cr_assert(len == 9 && memcmp(json_string_value(v), "a\0b\nerr\0x",
	    9) == 0, "content of %zu bytes, want the 9 of \"a\\0b\\nerr\\0x\": "
	    "cut at the first NUL", len);

	/* Truncated: the line naming the file and the tail must be there. */
	res = result_of(list, "t");
	v = json_object_get(json_object_get(res, "result"), "content");
	content = json_string_value(v);
	len = json_string_length(v);
	cr_assert(json_is_true(json_object_get(json_object_get(res, "meta"),
	    "truncated")));
	cr_assert(memmem(content, len, "output truncated", 16) != NULL,
	    "no truncation line in %zu bytes of content", len);
	cr_assert(len >= 4 && memcmp(content + len - 4, "end\n", 4) == 0,
	    "the tail of the output is lost");
	json_decref(list);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

#define RSS_BOUND (200LL << 20)
#define GIGABYTE 1073741824LL

Test(memory, a_gigabyte_of_output_is_cut_and_saved_with_bounded_memory)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *watch = c_open(d);
	json_t *sid = tool_session(c, "[{\"name\":\"flood\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"head -c 1073741824 /dev/zero\"],"
	    "\"maxResultBytes\":100000,\"timeoutMs\":600000}]");
	const char *s = json_string_value(sid), *content, *path;
	long long rss, max_rss = 0, t0 = e2e_now_ms();
	json_t *msg = NULL, *res, *meta;
	struct stat st;
	size_t len;
	char want[64];

	json_decref(c_add(c, s, "f", "flood", NULL));
	/* Watch the daemon's memory from another client until the result. */
	for (;;) {
		if ((rss = c_rss(watch)) > max_rss)
			max_rss = rss;
		msg = c_read(c, 100);
		if (msg != NULL && strcmp(method_of(msg), "tool_result") == 0)
			break;
		c_drop(c, msg);
		cr_assert(e2e_now_ms() - t0 < e2e_ms(240000),
		    "no result in 4 minutes");
	}
	cr_log_info("1 GiB through the daemon in %lld ms, rss at most %lld KiB",
	    e2e_now_ms() - t0, max_rss / 1024);
	cr_assert_lt(max_rss, RSS_BOUND, "the daemon grew to %lld MiB",
	    max_rss >> 20);
	res = json_object_get(msg, "params");
	meta = json_object_get(res, "meta");
	cr_assert_str_eq(e2e_reason(res), "ok");
	cr_assert(json_is_true(json_object_get(meta, "truncated")));
	path = json_string_value(json_object_get(meta, "fullOutputPath"));
	cr_assert(path != NULL, "no fullOutputPath");
	cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq((long long)st.st_size, GIGABYTE, "the saved output has "
	    "%lld bytes", (long long)st.st_size);
	/* A gigabyte on disk need not wait for d_stop. */
	unlink(path);
	content = json_string_value(json_object_get(json_object_get(res,
	    "result"), "content"));
	len = json_string_length(json_object_get(json_object_get(res,
	    "result"), "content"));
	/* Head and tail around a line naming the file and the size. */
	cr_assert(len > 100000 && len < 100000 + 4096, "content of %zu bytes",
	    len);
	snprintf(want, sizeof want, "%lld", GIGABYTE);
	cr_assert(memmem(content, len, want, strlen(want)) != NULL,
	    "the content does not state the full size");
	cr_assert(memmem(content, len, path, strlen(path)) != NULL,
	    "the content does not name the file");
	json_decref(msg);
	second_client_ok(d);
	json_decref(sid);
	c_close(watch);
	c_close(c);
	d_stop(d);
}

#define SPEW_BYTES 67108864LL
#define SPEW_LINE "0123456789abcdefghijklmnopqrstuvwxyz\n"

Test(memory, a_subscriber_that_does_not_read_gets_backpressure_not_loss)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *ctl = c_open(d);
	json_t *sid = tool_session(c, "[{\"name\":\"spew\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"yes 0123456789abcdefghijklmnopqrstuvwxyz | "
	    "head -c 67108864\"],\"streamOutput\":true,"
	    "\"maxResultBytes\":1000}]");
	const char *s = json_string_value(sid), *text, *line = SPEW_LINE;
	long long max_rss = 0, rss, total = 0, t0;
	json_t *msg, *r, *p, *data;
	json_int_t next = 0;
	size_t n, k, period = strlen(SPEW_LINE);
	bool done = false;

	json_decref(c_add(ctl, s, "s", "spew", NULL));
	/* c is subscribed but reads nothing for three seconds. */
	for (t0 = e2e_now_ms(); e2e_now_ms() - t0 < e2e_ms(3000);) {
		if ((rss = c_rss(ctl)) > max_rss)
			max_rss = rss;
		usleep((useconds_t)e2e_ms(100) * 1000);
	}
	/* Unthrottled, 64 MiB take well under a second: it must be held. */
	r = c_call(ctl, "status", json_pack("{s:s}", "sessionId", s));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    json_object_get(r, "tools"), 0), "status")), "executing",
	    "the tool ran on while its subscriber did not read");
	json_decref(r);
	cr_log_info("rss at most %lld KiB while the subscriber slept",
	    max_rss / 1024);
	cr_assert_lt(max_rss, RSS_BOUND, "the daemon grew to %lld MiB",
	    max_rss >> 20);

	/* Now read: every chunk once, in order, contiguous seqs. */
	while (!done) {
		msg = c_read(c, SLOW);
		cr_assert(msg != NULL, "the stream stopped at seq %lld (eof %d)",
		    (long long)next, c->eof);
		p = json_object_get(msg, "params");
		if (next == 0)
			next = seq_of(msg);
		cr_assert_eq(seq_of(msg), next, "seq %lld after %lld",
		    (long long)seq_of(msg), (long long)next - 1);
		next++;
		if (strcmp(method_of(msg), "progress") == 0) {
			data = json_object_get(p, "data");
			cr_assert_str_eq(json_string_value(json_object_get(data,
			    "stream")), "stdout");
			text = json_string_value(json_object_get(data, "text"));
			n = json_string_length(json_object_get(data, "text"));
			for (k = 0; k < n; k++)
				cr_assert_eq(text[k], line[(total + (long long)k) %
				    (long long)period], "output lost or repeated "
				    "at byte %lld", total + (long long)k);
			total += (long long)n;
		} else if (strcmp(method_of(msg), "tool_result") == 0) {
			cr_assert_str_eq(e2e_reason(p), "ok");
			cr_assert(json_is_true(json_object_get(json_object_get(p,
			    "meta"), "truncated")));
			done = true;
		}
		json_decref(msg);
	}
	cr_assert_eq(total, SPEW_BYTES, "%lld bytes of progress, want %lld",
	    total, SPEW_BYTES);
	c_ping(c);
	second_client_ok(d);
	json_decref(sid);
	c_close(ctl);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

/*
 * The grace given is longer than the default (2000 ms), scaled: a kill
 * no sooner than it shows the option's grace was kept, whatever the load;
 * one at all, within the guard, that the tool was killed.
 */
#define KILL_GRACE_MS e2e_ms(3000)

Test(kill, a_tool_that_ignores_sigterm_is_killed_after_the_grace)
{
	struct daemon *d;
	struct client *c;
	json_t *sid, *msg, *res;
	const char *s;
	long long t0, took;
	char grace[16];

	snprintf(grace, sizeof grace, "%d", KILL_GRACE_MS);
	d = d_start("--kill-grace-ms", grace, NULL);
	c = c_open(d);
	sid = c_session(c, NULL);
	s = json_string_value(sid);
	/* The ignored TERM is inherited by sleep: the group ignores it. */
	json_decref(c_add(c, s, "stubborn", "bash", "{\"command\":\"trap '' "
	    "TERM; echo ready >&3; sleep 600; echo never\"}"));
	json_decref(c_wait(c, "progress", SLOW));
	t0 = e2e_now_ms();
	json_decref(c_call(c, "abort", json_pack("{s:s, s:s}", "sessionId", s,
	    "reason", "interrupt")));
	msg = c_wait(c, "tool_result", SLOW);
	took = e2e_now_ms() - t0;
	/* S18: a killed tool's result comes once its processes are dead. */
	cr_assert_eq(d_leftovers(d), 0, "the result came before the kill");
	res = json_object_get(msg, "params");
	cr_assert_str_eq(e2e_reason(res), "interrupted");
	cr_assert(json_is_true(json_object_get(json_object_get(res, "result"),
	    "is_error")));
	cr_assert_str_eq(e2e_content(res),
	    "<tool_use_error>Interrupted by user</tool_use_error>");
	cr_log_info("interrupt of a TERM-ignoring tool took %lld ms", took);
	/* The grace given, not none, nor the default 2000 ms. */
	cr_assert_geq(took, KILL_GRACE_MS * 95 / 100, "killed after %lld ms: "
	    "not --kill-grace-ms %d", took, KILL_GRACE_MS);
	json_decref(msg);
	json_decref(drain(c, s));
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(kill, a_timed_out_tool_that_ignores_sigterm_is_killed_after_the_grace)
{
	struct daemon *d;
	struct client *c;
	json_t *sid, *list, *res;
	const char *s;
	long long t0, took;
	char grace[16], cmd[128], said[64];
	int timeout = e2e_ms(300);

	snprintf(grace, sizeof grace, "%d", KILL_GRACE_MS);
	d = d_start("--kill-grace-ms", grace, NULL);
	c = c_open(d);
	sid = c_session(c, NULL);
	s = json_string_value(sid);
	snprintf(cmd, sizeof cmd, "{\"command\":\"trap '' TERM; sleep 600\","
	    "\"timeout\":%d}", timeout);
	t0 = e2e_now_ms();
	json_decref(c_add(c, s, "slow", "bash", cmd));
	list = drain(c, s);
	took = e2e_now_ms() - t0;
	res = result_of(list, "slow");
	cr_assert_str_eq(e2e_reason(res), "timeout");
	snprintf(said, sizeof said, "timed out after %d ms", timeout);
	cr_assert(strstr(e2e_content(res), said) != NULL, "content: %s",
	    e2e_content(res));
	/* Its timeout, then the grace given (not the default 2000 ms). */
	cr_assert_geq(took, (timeout + KILL_GRACE_MS) * 95LL / 100,
	    "done after %lld ms", took);
	cr_assert_eq(d_leftovers(d), 0);
	json_decref(list);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

Test(leftovers, a_background_process_holding_stdout_does_not_hold_the_result)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *list;
	const char *s = json_string_value(sid);
	long long t0 = e2e_now_ms(), took;
	char *got;

	/*
	 * Each leaves a sleeper with the tool's stdout open, for an hour:
	 * results held by them would never come within drain's guard.
	 */
	json_decref(c_add(c, s, "bg", "bash", "{\"command\":\"sleep 3600 & "
	    "echo one\"}"));
	json_decref(c_add(c, s, "dbl", "bash", "{\"command\":\"(sleep 3601 &); "
	    "echo two\"}"));
	json_decref(c_add(c, s, "sid", "bash", "{\"command\":\"setsid sleep "
	    "3602 & echo three\"}"));
	list = drain(c, s);
	took = e2e_now_ms() - t0;
	/* S20: the leftovers are dead before the results are delivered. */
	cr_assert_eq(d_leftovers(d), 0, "a leftover outlived its tool");
	got = e2e_results(list);
	cr_assert_str_eq(got, "bg:ok,dbl:ok,sid:ok");
	free(got);
	cr_assert_str_eq(e2e_content(result_of(list, "bg")), "one\n");
	cr_assert_str_eq(e2e_content(result_of(list, "dbl")), "two\n");
	cr_assert_str_eq(e2e_content(result_of(list, "sid")), "three\n");
	cr_log_info("three tools with leftovers took %lld ms", took);
	json_decref(list);
	second_client_ok(d);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

/*
 * valgrind's fd report: every descriptor open at exit that the daemon did
 * not inherit, as text (empty when there is none).
 */
static char *
fd_leaks(const char *log)
{
	const char *p = log, *next, *end;
	char *out = calloc(1, 1), *more;

	/* "==PID== Open ...": valgrind's, not some daemon log line. */
	while ((p = strstr(p, "== Open ")) != NULL) {
		p += 3;
		/* One report runs to its blank "==PID== " line. */
		next = strstr(p, "== Open ");
		end = strstr(p, "== \n");
		if (end == NULL || (next != NULL && next < end))
			end = next != NULL ? next : p + strlen(p);
		if (memmem(p, (size_t)(end - p), "inherited from parent",
		    21) == NULL) {
			if (asprintf(&more, "%s%.*s", out, (int)(end - p), p) < 0)
				abort();
			free(out);
			out = more;
		}
		p = end;
	}
	return out;
}

Test(valgrind, a_full_session_is_clean_under_valgrind,
    .timeout = 280 * STEXEC_TEST_BUILD_SCALE)
{
	static const char *vg[] = { "valgrind", "--leak-check=full",
		"--errors-for-leak-kinds=definite", "--track-fds=yes",
		"--error-exitcode=99", "--child-silent-after-fork=yes", NULL };
	struct daemon *d;
	struct client *c, *c2;
	json_t *sid, *list;
	const char *s;
	char *got, *log, *leaks;
	json_int_t last;
	int status;

	if (system("valgrind --version >/dev/null 2>&1") != 0)
		cr_skip("valgrind is not installed");
	/* A sanitized daemon cannot run under valgrind: the plain build's
	 * run of this test is the one that counts. */
	if (getenv("STEXEC_SANITIZE") != NULL &&
	    strcmp(getenv("STEXEC_SANITIZE"), "none") != 0)
		cr_skip("the daemon is built with -fsanitize=%s",
		    getenv("STEXEC_SANITIZE"));
	d = d_start_wrapped(vg, "--kill-grace-ms", "200", NULL);
	c = c_open(d);
	sid = c_session(c, NULL);
	s = json_string_value(sid);

	/* A turn through most paths: ok, safe, unknown, exit, and S7. */
	json_decref(c_add(c, s, "a", "bash", "{\"command\":\"echo hi; echo "
	    "'{\\\"progress\\\":1}' >&3\"}"));
	json_decref(c_add(c, s, "b", "read_file", "{\"file_path\":\"/etc/"
	    "hostname\"}"));
	json_decref(c_add(c, s, "c", "nope", NULL));
	json_decref(c_add(c, s, "d", "bash", "{\"command\":\"exit 3\"}"));
	json_decref(c_add(c, s, "e", "bash", "{}"));
	list = drain(c, s);
	got = e2e_results(list);
	/*
	 * valgrind knows no Landlock system calls, so the daemon has no
	 * read-only sandbox and refuses read_file: the refusal path.
	 */
	cr_assert_str_eq(got, "a:ok,b:spawn_failed,c:unknown_tool,d:exit,"
	    "e:sibling_error");
	free(got);
	json_decref(list);
	json_decref(c_add(c, s, "f", "bash", "{}"));
	list = drain(c, s);
	got = e2e_results(list);
	cr_assert_str_eq(got, "f:invalid_input");
	free(got);
	json_decref(list);
	/* A kill, and a discard with a tool still running. */
	json_decref(c_add(c, s, "k", "bash", "{\"command\":\"sleep 30\"}"));
	json_decref(c_call(c, "abort", json_pack("{s:s, s:s}", "sessionId", s,
	    "reason", "cancel")));
	list = drain(c, s);
	last = seq_of(json_array_get(list, json_array_size(list) - 1));
	json_decref(list);
	json_decref(c_add(c, s, "g", "bash", "{\"command\":\"sleep 30\"}"));
	json_decref(c_call(c, "discard", json_pack("{s:s}", "sessionId", s)));
	/* Bad input, other methods, a client that leaves subscribed. */
	json_decref(raw_reply(c, "{\"jsonrpc\":"));
	json_decref(c_call(c, "events", json_pack("{s:s, s:I}", "sessionId", s,
	    "since", last)));
	json_decref(c_call(c, "listTools", NULL));
	json_decref(c_call(c, "stats", NULL));
	c2 = c_open(d);
	json_decref(c_call(c2, "subscribe", json_pack("{s:s}", "sessionId",
	    s)));
	c_close(c2);
	json_decref(c_call(c, "closeSession", json_pack("{s:s}", "sessionId",
	    s)));
	/* And a session left open for shutdown to close. */
	json_decref(c_session(c, NULL));

	status = d_terminate(d);
	log = e2e_read_file(d->log, NULL);
	cr_assert(log != NULL);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "under valgrind the daemon exited with status %#x:\n%s", status,
	    log);
	cr_assert(strstr(log, "FILE DESCRIPTORS") != NULL,
	    "no fd report from valgrind:\n%s", log);
	leaks = fd_leaks(log);
	cr_assert_str_empty(leaks, "descriptors left open at exit:\n%s",
	    leaks);
	free(leaks);
	free(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* The model's tool_use must get its tool_result (S10) whatever it sent:
 * an input that is not an object is the tool's invalid_input result. */
Test(params, an_input_that_is_not_an_object_is_an_invalid_input_result)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *list, *res;
	const char *s = json_string_value(sid);

	json_decref(c_call(c, "addTool", json_pack("{s:s, s:{s:s, s:s, s:s}}",
	    "sessionId", s, "toolUse", "id", "a", "name", "bash", "input",
	    "{\"command\":\"ls\"}")));
	list = drain(c, s);
	res = e2e_filter(list, "tool_result");
	cr_assert_eq(json_array_size(res), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    json_array_get(res, 0), "meta"), "reason")), "invalid_input");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    json_array_get(res, 0), "result"), "content")),
	    "<tool_use_error>InputValidationError: The input must be an "
	    "object, got string</tool_use_error>");
	json_decref(res);
	json_decref(list);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}
