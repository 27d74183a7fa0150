/*
 * Hostile input (doc/design.md §7): long non-ASCII text in every place an error
 * quotes it. The daemon cuts its messages to a bounded size; each test
 * sends characters of 1, 2, 3 and 4 bytes at every alignment before the
 * cut, and checks the exact error, that the answer is valid UTF-8 (c_read
 * parses with jansson, which refuses anything else), that the daemon still
 * serves a second connection, and that no process is left.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* Waits that only a broken daemon runs out of, even on a loaded machine. */
#define SLOW 30000

#define ERR_METHOD_NOT_FOUND -32601
#define ERR_INVALID_PARAMS -32602
#define ERR_UNKNOWN_SESSION -32001
#define ERR_DUPLICATE -32002

/* Longer than every buffer a message passes through (the longest: 1024). */
#define HOSTILE_BYTES 3000

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(hostile, .fini = e2e_fini);

/* x, é, €, 😀: one character of each UTF-8 width. */
static const char *const widths[] = { "x", "\xc3\xa9", "\xe2\x82\xac",
	"\xf0\x9f\x98\x80" };

/* One hostile text: what a path does with it, given a client. */
typedef json_t *(*hostile_fn)(struct client *, const char *sid,
    const char *text, int n);

/* `offset` ASCII letters, then characters of one width up to ~3000 bytes. */
static char *
hostile_text(const char *ch, int offset)
{
	size_t w = strlen(ch), len = 0;
	char *s = malloc(HOSTILE_BYTES + 8);
	int i;

	cr_assert(s != NULL);
	for (i = 0; i < offset; i++)
		s[len++] = 'a';
	while (len + w <= HOSTILE_BYTES) {
		memcpy(s + len, ch, w);
		len += w;
	}
	s[len] = '\0';
	return s;
}

/*
 * The error must have the code, a message that begins as expected and was
 * cut to fit (so the cut was exercised), and for -32602 its data.field.
 */
static void
check_error(json_t *err, int code, const char *prefix)
{
	const char *msg = json_string_value(json_object_get(err, "message"));
	json_t *data = json_object_get(err, "data");

	cr_assert_not_null(err, "no answer: the daemon died?");
	cr_assert_eq(json_integer_value(json_object_get(err, "code")), code,
	    "code %lld, want %d", json_integer_value(json_object_get(err,
	    "code")), code);
	cr_assert_not_null(msg);
	cr_assert(strncmp(msg, prefix, strlen(prefix)) == 0,
	    "message %.80s does not begin with %s", msg, prefix);
	cr_assert(strlen(msg) < HOSTILE_BYTES, "message was not cut");
	if (code == ERR_INVALID_PARAMS)
		cr_assert_not_null(json_string_value(json_object_get(data,
		    "field")), "no data.field");
}

/*
 * Every width at every alignment through one path, then a second client
 * is served and the daemon stops cleanly with no process left.
 */
static void
hostile_run(json_t *create, hostile_fn fn)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *other;
	json_t *sid = NULL;
	char *text;
	size_t w;
	int off;

	if (create != NULL)
		sid = c_session(c, create);
	for (w = 0; w < sizeof widths / sizeof widths[0]; w++)
		for (off = 0; off < 4; off++) {
			text = hostile_text(widths[w], off);
			json_decref(fn(c, json_string_value(sid), text,
			    (int)(w * 4 + (size_t)off)));
			free(text);
		}
	c_ping(c);
	other = c_open(d);
	c_ping(other);
	c_close(other);
	c_close(c);
	json_decref(sid);
	d_stop(d);
}

static json_t *
via_method(struct client *c, const char *sid, const char *text, int n)
{
	json_t *req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id",
	    1000 + n, "method", text), *resp;
	char *line = json_dumps(req, JSON_COMPACT);

	(void)sid;
	c_send_raw(c, line);
	free(line);
	json_decref(req);
	resp = c_response(c, SLOW);
	cr_assert_not_null(resp, "no answer: the daemon died?");
	cr_assert_eq(json_integer_value(json_object_get(resp, "id")),
	    1000 + n);
	check_error(json_object_get(resp, "error"), ERR_METHOD_NOT_FOUND,
	    "Method not found: ");
	return resp;
}

Test(hostile, method_name)
{
	hostile_run(NULL, via_method);
}

static json_t *
via_session_id(struct client *c, const char *sid, const char *text, int n)
{
	json_t *e = c_call_error(c, n % 2 ? "closeSession" : "subscribe",
	    json_pack("{s:s}", "sessionId", text));

	(void)sid;
	check_error(e, ERR_UNKNOWN_SESSION, "Unknown session: ");
	return e;
}

Test(hostile, unknown_session_id)
{
	hostile_run(NULL, via_session_id);
}

static json_t *
via_session_env_key(struct client *c, const char *sid, const char *text,
    int n)
{
	json_t *env = json_object(), *e;

	(void)sid;
	(void)n;
	json_object_set_new(env, text, json_integer(1));
	e = c_call_error(c, "createSession", json_pack("{s:o}", "env", env));
	check_error(e, ERR_INVALID_PARAMS, "Invalid params: env.");
	return e;
}

Test(hostile, session_env_key)
{
	hostile_run(NULL, via_session_env_key);
}

static json_t *
via_session_cwd(struct client *c, const char *sid, const char *text, int n)
{
	char *cwd;
	json_t *e;

	(void)sid;
	(void)n;
	cr_assert(asprintf(&cwd, "/%s", text) > 0);
	e = c_call_error(c, "createSession", json_pack("{s:s}", "cwd", cwd));
	free(cwd);
	check_error(e, ERR_INVALID_PARAMS, "Invalid params: cwd: /");
	return e;
}

Test(hostile, session_cwd)
{
	hostile_run(NULL, via_session_cwd);
}

/* A createSession with one ToolDef that must be refused. */
static json_t *
bad_tooldef(struct client *c, json_t *def)
{
	json_t *e = c_call_error(c, "createSession", json_pack("{s:[o]}",
	    "tools", def));

	check_error(e, ERR_INVALID_PARAMS, "Invalid params: tools[0]: ");
	return e;
}

static json_t *
via_tooldef_env_key(struct client *c, const char *sid, const char *text,
    int n)
{
	json_t *env = json_object();

	(void)sid;
	(void)n;
	json_object_set_new(env, text, json_integer(1));
	return bad_tooldef(c, json_pack("{s:s, s:[s], s:o}", "name", "t",
	    "command", "/bin/true", "env", env));
}

Test(hostile, tooldef_env_key)
{
	hostile_run(NULL, via_tooldef_env_key);
}

static json_t *
via_schema_property(struct client *c, const char *sid, const char *text,
    int n)
{
	json_t *props = json_object();

	(void)sid;
	(void)n;
	json_object_set_new(props, text, json_integer(5));
	return bad_tooldef(c, json_pack("{s:s, s:[s], s:{s:s, s:o}}", "name",
	    "t", "command", "/bin/true", "inputSchema", "type", "object",
	    "properties", props));
}

Test(hostile, schema_property_name)
{
	hostile_run(NULL, via_schema_property);
}

static json_t *
via_placeholder(struct client *c, const char *sid, const char *text, int n)
{
	char *arg;
	json_t *e;

	(void)sid;
	(void)n;
	cr_assert(asprintf(&arg, "{%s}", text) > 0);
	e = bad_tooldef(c, json_pack("{s:s, s:[s, s], s:{s:s, s:b}}", "name",
	    "t", "command", "/bin/echo", arg, "inputSchema", "type", "object",
	    "additionalProperties", 0));
	free(arg);
	return e;
}

Test(hostile, command_placeholder)
{
	hostile_run(NULL, via_placeholder);
}

static json_t *
via_duplicate_id(struct client *c, const char *sid, const char *text, int n)
{
	json_t *e;

	(void)n;
	/* An unknown tool completes at once but keeps its id in the turn. */
	json_decref(c_call(c, "addTool", json_pack("{s:s, s:{s:s, s:s}}",
	    "sessionId", sid, "toolUse", "id", text, "name", "nope")));
	e = c_call_error(c, "addTool", json_pack("{s:s, s:{s:s, s:s}}",
	    "sessionId", sid, "toolUse", "id", text, "name", "nope"));
	check_error(e, ERR_DUPLICATE, "Duplicate tool use id");
	return e;
}

Test(hostile, duplicate_tool_use_id)
{
	hostile_run(json_object(), via_duplicate_id);
}

static json_t *
via_permission_id(struct client *c, const char *sid, const char *text, int n)
{
	json_t *e = c_call_error(c, "respondPermission", json_pack("{s:s, "
	    "s:s, s:s}", "sessionId", sid, "toolUseId", text, "decision",
	    n % 2 ? "allow" : "deny"));

	check_error(e, ERR_INVALID_PARAMS, "Invalid params: toolUseId: ");
	return e;
}

Test(hostile, permission_tool_use_id)
{
	hostile_run(json_object(), via_permission_id);
}

/*
 * The tool path: the input is refused by the schema, and the tool_result
 * must still carry its result, the InputValidationError (S2, S10).
 */
static json_t *
tool_refused(struct client *c, const char *sid, json_t *input, int n)
{
	json_t *r, *p, *result;
	const char *content, *id;
	char want[16];

	snprintf(want, sizeof want, "u%d", n);
	json_decref(c_call(c, "addTool", json_pack("{s:s, s:{s:s, s:s, s:o}}",
	    "sessionId", sid, "toolUse", "id", want, "name", "t", "input",
	    input)));
	r = c_wait(c, "tool_result", SLOW);
	cr_assert_not_null(r, "no tool_result");
	p = json_object_get(r, "params");
	id = json_string_value(json_object_get(p, "toolUseId"));
	cr_assert_str_eq(id, want);
	result = json_object_get(p, "result");
	cr_assert_not_null(result, "tool_result without result");
	cr_assert_not_null(json_object_get(p, "meta"));
	cr_assert_str_eq(json_string_value(json_object_get(result,
	    "tool_use_id")), want);
	cr_assert(json_is_true(json_object_get(result, "is_error")));
	content = json_string_value(json_object_get(result, "content"));
	cr_assert_not_null(content);
	cr_assert(strncmp(content, "<tool_use_error>InputValidationError: ",
	    38) == 0, "content: %.80s", content);
	cr_assert(strlen(content) < HOSTILE_BYTES, "detail was not cut");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p,
	    "meta"), "reason")), "invalid_input");
	return r;
}

/* A session whose tool's schema allows only the long text. */
static json_t *
via_enum(struct client *c, const char *sid, const char *text, int n)
{
	json_t *own = c_session(c, json_pack("{s:[{s:s, s:[s], s:{s:s, "
	    "s:{s:{s:[s, s]}}}}]}", "tools", "name", "t", "command",
	    "/bin/true", "inputSchema", "type", "object", "properties", "x",
	    "enum", text, text)), *r;

	(void)sid;
	r = tool_refused(c, json_string_value(own), json_pack("{s:s}", "x",
	    "no"), n);
	json_decref(own);
	return r;
}

Test(hostile, enum_values_in_detail)
{
	hostile_run(NULL, via_enum);
}

static json_t *
via_unexpected_key(struct client *c, const char *sid, const char *text,
    int n)
{
	json_t *input = json_object();

	json_object_set_new(input, text, json_integer(1));
	return tool_refused(c, sid, input, n);
}

Test(hostile, additional_property_name)
{
	hostile_run(json_pack("{s:[{s:s, s:[s], s:{s:s, s:b}}]}", "tools",
	    "name", "t", "command", "/bin/true", "inputSchema", "type",
	    "object", "additionalProperties", 0), via_unexpected_key);
}

/* A placeholder the input lacks: the detail quotes its long name. */
static json_t *
via_missing_placeholder(struct client *c, const char *sid, const char *text,
    int n)
{
	char *arg;
	json_t *own, *r;

	(void)sid;
	cr_assert(asprintf(&arg, "{%s}", text) > 0);
	own = c_session(c, json_pack("{s:[{s:s, s:[s, s]}]}", "tools", "name",
	    "t", "command", "/bin/echo", arg));
	free(arg);
	r = tool_refused(c, json_string_value(own), json_object(), n);
	json_decref(own);
	return r;
}

Test(hostile, missing_placeholder)
{
	hostile_run(NULL, via_missing_placeholder);
}

/* An unknown tool's result names it whole (S1): nothing is cut there. */
static json_t *
via_unknown_tool(struct client *c, const char *sid, const char *text, int n)
{
	json_t *r, *result;
	const char *content;
	char id[16];

	snprintf(id, sizeof id, "k%d", n);
	json_decref(c_call(c, "addTool", json_pack("{s:s, s:{s:s, s:s}}",
	    "sessionId", sid, "toolUse", "id", id, "name", text)));
	r = c_wait(c, "tool_result", SLOW);
	cr_assert_not_null(r, "no tool_result");
	result = json_object_get(json_object_get(r, "params"), "result");
	cr_assert_not_null(result, "tool_result without result");
	content = json_string_value(json_object_get(result, "content"));
	cr_assert_not_null(content);
	cr_assert(strstr(content, text) != NULL, "the name is not whole");
	return r;
}

Test(hostile, unknown_tool_name)
{
	hostile_run(json_object(), via_unknown_tool);
}

/* Run the daemon with these options; its exit status (it must exit). */
static int
daemon_exit_status(const char *opt, const char *value)
{
	const char *bin = getenv("STEXEC_DAEMON");
	char dir[] = "/tmp/stexec-hostile-XXXXXX", sock[64];
	long long deadline;
	pid_t pid;
	int status;

	cr_assert_not_null(bin, "STEXEC_DAEMON is not set");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof sock, "%s/s.sock", dir);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execl(bin, bin, "--socket", sock, opt, value, (char *)NULL);
		_exit(127);
	}
	/* One that accepts the option would serve forever: stop it. */
	for (deadline = e2e_now_ms() + e2e_ms(SLOW);
	    waitpid(pid, &status, WNOHANG) == 0; usleep(10000))
		if (e2e_now_ms() > deadline) {
			kill(pid, SIGTERM);
			waitpid(pid, &status, 0);
			unlink(sock);
			rmdir(dir);
			if (strcmp(opt, "--output-dir") == 0)
				rmdir(value);
			cr_assert_fail("stexecd %s %s did not exit", opt,
			    value);
		}
	cr_assert(access(sock, F_OK) != 0, "it listened");
	rmdir(dir);
	return status;
}

/* Options whose text reaches clients in results must be valid UTF-8. */
Test(hostile, options_shown_to_clients)
{
	int st;

	st = daemon_exit_status("--output-dir", "/tmp/stexec-\xff");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
	st = daemon_exit_status("--interrupt-message", "cut \xe2\x82");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
}
