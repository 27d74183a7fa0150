/*
 * doc/design.md §2 rules S1-S10 and S15 end to end, as a client sees them on the
 * wire: the real daemon, real /bin/sh tools defined by each session.
 *
 * Timing never comes from fixed sleeps. Tools record their own start/end
 * times and pids in files under the daemon's temp dir ($T in the session
 * env), and tools that must wait do so on a gate file that the test creates
 * when it wants them to go on; so orderings such as "b finishes before a"
 * are deterministic. Negative checks ("no result yet") use t_sync: a ping
 * whose answer comes after every notification the daemon emitted before it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* Waits are generous: the suite runs on loaded 2-core machines. */
#define WAIT_MS 10000

/*
 * Script fragments. A gate gives up after ~30 s so that a failed test never
 * leaves a tool polling forever.
 */
#define GATE(g) "i=0; while [ ! -e \"$T/" g "\" ] && [ $i -lt 1500 ]; " \
	"do sleep 0.02; i=$((i+1)); done; "
#define STAMP(what) "date +%s%N > \"$T/$STEXEC_TOOL_USE_ID." what "\"; "
#define PID "echo $$ > \"$T/$STEXEC_TOOL_USE_ID.pid\"; "
/*
 * A descendant in the tool's process group, to see the whole group die. It
 * ignores SIGTERM, so it outlives a shell that dies of one: a result must
 * still wait for it.
 */
#define CHILD "(trap '' TERM; exec sleep 1000) & " \
	"echo $! > \"$T/$STEXEC_TOOL_USE_ID.child\"; "
#define RAN "touch \"$T/$STEXEC_TOOL_USE_ID.ran\"; "

#define INTERRUPTED "<tool_use_error>Interrupted by user</tool_use_error>"

/* One test's daemon, client, session and everything it was told. */
struct t {
	struct daemon *d;
	struct client *c;
	json_t *sidj;
	const char *sid;
	json_t *log;  /* every notification received, in order */
	json_t *adds; /* toolUseId -> the latest addTool answer */
};

/* Criterion runs each test in a process of its own. */
static struct t T_;

TestSuite(S1, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S2, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S3, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S4, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S5, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S6, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S7, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S8, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S9, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S10, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);
TestSuite(S15, .fini = e2e_fini, .timeout = 90 * STEXEC_TEST_BUILD_SCALE);

/* A tool running its input's `command` with /bin/sh -c. */
static json_t *
shell_tool(const char *name, bool safe, bool cancel, bool flag, bool perm)
{
	return json_pack("{s:s, s:[s,s,s], s:b, s:s, s:b, s:b, "
	    "s:{s:s, s:{s:{s:s}}, s:[s]}}",
	    "name", name, "command", "/bin/sh", "-c", "{command}",
	    "concurrencySafe", safe,
	    "interruptBehavior", cancel ? "cancel" : "block",
	    "abortSiblingsOnError", flag, "requiresPermission", perm,
	    "inputSchema", "type", "object", "properties", "command", "type",
	    "string", "required", "command");
}

/*
 * Start a session on d with the shell tools below plus `extra` (a JSON
 * array of ToolDefs, or NULL); max_parallel 0 leaves the default.
 */
static struct t *
t_open(struct daemon *d, int max_parallel, const char *extra)
{
	struct t *t = &T_;
	json_t *tools = json_array(), *p;

	t->d = d;
	t->c = c_open(d);
	t->log = json_array();
	t->adds = json_object();
	json_array_append_new(tools,
	    shell_tool("safe", true, false, false, false));
	json_array_append_new(tools,
	    shell_tool("safe_cancel", true, true, false, false));
	json_array_append_new(tools,
	    shell_tool("unsafe", false, false, false, false));
	json_array_append_new(tools,
	    shell_tool("unsafe_cancel", false, true, false, false));
	json_array_append_new(tools,
	    shell_tool("safe_flag", true, false, true, false));
	json_array_append_new(tools,
	    shell_tool("unsafe_flag", false, false, true, false));
	json_array_append_new(tools,
	    shell_tool("perm", true, false, false, true));
	if (extra != NULL) {
		p = e2e_json(extra);
		json_array_extend(tools, p);
		json_decref(p);
	}
	p = json_pack("{s:o, s:{s:s}}", "tools", tools, "env", "T", d->dir);
	if (max_parallel > 0)
		json_object_set_new(p, "maxParallel",
		    json_integer(max_parallel));
	t->sidj = c_session(t->c, p);
	t->sid = json_string_value(t->sidj);
	return t;
}

/* Every test ends here: d_stop checks exit 0 and that no process is left. */
static void
t_close(struct t *t)
{
	struct daemon *d = t->d;

	c_close(t->c);
	json_decref(t->log);
	json_decref(t->adds);
	json_decref(t->sidj);
	t->d = NULL;
	d_stop(d);
}

/* Move the notifications c_call set aside into the log, in order. */
static void
t_flush(struct t *t)
{
	json_array_extend(t->log, t->c->queue);
	json_array_clear(t->c->queue);
}

/* Read one more message into the log, waiting up to ms. */
static bool
t_read(struct t *t, int ms)
{
	json_t *m;

	t_flush(t);
	if ((m = c_read(t->c, ms)) == NULL)
		return false;
	cr_assert(json_object_get(m, "id") == NULL &&
	    json_object_get(m, "method") != NULL,
	    "a response nobody asked for");
	json_array_append_new(t->log, m);
	return true;
}

/*
 * Everything the daemon emitted before it answered this ping is in the log
 * afterwards: its effects of an event are emitted before the next request
 * is handled, and one connection's lines arrive in order.
 */
static void
t_sync(struct t *t)
{
	json_decref(c_call(t->c, "ping", NULL));
	t_flush(t);
}

/*
 * The params of the n-th (1-based) logged notification with this method
 * (and toolUseId and status, unless NULL), or NULL.
 */
static json_t *
t_find_n(struct t *t, const char *method, const char *id,
    const char *status, int n)
{
	json_t *m, *p;
	size_t i;

	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), method) != 0 ||
		    (id != NULL && (e2e_str(p, "toolUseId") == NULL ||
		    strcmp(e2e_str(p, "toolUseId"), id) != 0)) ||
		    (status != NULL && (e2e_str(p, "status") == NULL ||
		    strcmp(e2e_str(p, "status"), status) != 0)))
			continue;
		if (--n == 0)
			return p;
	}
	return NULL;
}

static json_t *
t_find(struct t *t, const char *method, const char *id, const char *status)
{
	return t_find_n(t, method, id, status, 1);
}

static int
t_count(struct t *t, const char *method, const char *id, const char *status)
{
	int n = 0;

	while (t_find_n(t, method, id, status, n + 1) != NULL)
		n++;
	return n;
}

/* Wait for the n-th such notification; its params. */
static json_t *
t_await_n(struct t *t, const char *method, const char *id,
    const char *status, int n)
{
	long long until = e2e_now_ms() + e2e_ms(WAIT_MS);
	json_t *p;

	for (;;) {
		t_flush(t);
		if ((p = t_find_n(t, method, id, status, n)) != NULL)
			return p;
		cr_assert(e2e_now_ms() < until,
		    "no %s #%d (tool %s, status %s) within %d ms", method, n,
		    id != NULL ? id : "-", status != NULL ? status : "-",
		    WAIT_MS);
		t_read(t, (int)(until - e2e_now_ms()));
	}
}

static json_t *
t_await(struct t *t, const char *method, const char *id, const char *status)
{
	return t_await_n(t, method, id, status, 1);
}

static long long
seq(const json_t *p)
{
	cr_assert(p != NULL);
	return e2e_int(p, "seq");
}

/* addTool; the answer's status (valid until the test ends). */
static const char *
t_add_input(struct t *t, const char *id, const char *name, json_t *input)
{
	json_t *r = c_call(t->c, "addTool",
	    json_pack("{s:s, s:{s:s, s:s, s:o}}", "sessionId", t->sid,
	    "toolUse", "id", id, "name", name, "input", input));

	t_flush(t);
	json_object_set_new(t->adds, id, r);
	return e2e_str(r, "status");
}

static const char *
t_add(struct t *t, const char *id, const char *name, const char *script)
{
	return t_add_input(t, id, name,
	    json_pack("{s:s}", "command", script));
}

/* The concurrencySafe addTool answered for id. */
static bool
t_add_safe(struct t *t, const char *id)
{
	json_t *r = json_object_get(t->adds, id);

	cr_assert(r != NULL);
	return json_is_true(json_object_get(r, "concurrencySafe"));
}

/* drain: wait for the turn to end; the number of results it delivered. */
static long long
t_drain(struct t *t)
{
	json_t *r = c_call(t->c, "drain", json_pack("{s:s}", "sessionId",
	    t->sid));
	long long n = e2e_int(r, "results");

	json_decref(r);
	t_flush(t);
	return n;
}

static void
t_abort(struct t *t, const char *why)
{
	json_decref(c_call(t->c, "abort", json_pack("{s:s, s:s}",
	    "sessionId", t->sid, "reason", why)));
	t_flush(t);
}

/* "id:reason,..." of the logged tool_results of a turn, in order. */
static char *
t_results(struct t *t, long long turn)
{
	char *out = calloc(1, 1), *next;
	json_t *m, *p;
	size_t i;

	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), "tool_result") != 0 ||
		    e2e_int(p, "turn") != turn)
			continue;
		cr_assert(asprintf(&next, "%s%s%s:%s", out, *out ? "," : "",
		    e2e_str(p, "toolUseId"), e2e_reason(p)) >= 0);
		free(out);
		out = next;
	}
	return out;
}

static void
t_expect_results(struct t *t, long long turn, const char *want)
{
	char *got = t_results(t, turn);

	cr_assert_str_eq(got, want, "turn %lld results: got %s, want %s",
	    turn, got, want);
	free(got);
}

/* The ids of tool_status executing notifications, in order. */
static char *
t_exec_order(struct t *t)
{
	char *out = calloc(1, 1), *next;
	json_t *m, *p;
	size_t i;

	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), "tool_status") != 0 ||
		    strcmp(e2e_str(p, "status"), "executing") != 0)
			continue;
		cr_assert(asprintf(&next, "%s%s%s", out, *out ? "," : "",
		    e2e_str(p, "toolUseId")) >= 0);
		free(out);
		out = next;
	}
	return out;
}

/* The status RPC's status of a tool of the current turn. */
static const char *
t_status(struct t *t, const char *id)
{
	static char out[32];
	json_t *r = c_call(t->c, "status", json_pack("{s:s}", "sessionId",
	    t->sid)), *tool;
	size_t i;

	t_flush(t);
	snprintf(out, sizeof out, "(absent)");
	json_array_foreach(json_object_get(r, "tools"), i, tool)
		if (strcmp(e2e_str(tool, "id"), id) == 0)
			snprintf(out, sizeof out, "%s", e2e_str(tool, "status"));
	json_decref(r);
	return out;
}

/* Open a gate: create the file the tools wait for. */
static void
t_go(struct t *t, const char *gate)
{
	int fd = open(d_path(t->d, gate), O_WRONLY | O_CREAT | O_CLOEXEC,
	    0600);

	cr_assert(fd >= 0, "cannot create gate %s", gate);
	close(fd);
}

static bool
t_exists(struct t *t, const char *name)
{
	struct stat st;

	return stat(d_path(t->d, name), &st) == 0;
}

/* The number a tool wrote to $T/ID.WHAT, once the line is complete. */
static long long
t_num(struct t *t, const char *id, const char *what)
{
	long long until = e2e_now_ms() + e2e_ms(WAIT_MS);
	char name[128], buf[64];
	ssize_t n;
	int fd;

	snprintf(name, sizeof name, "%s.%s", id, what);
	for (;;) {
		n = 0;
		if ((fd = open(d_path(t->d, name), O_RDONLY | O_CLOEXEC)) >=
		    0) {
			n = read(fd, buf, sizeof buf - 1);
			close(fd);
		}
		if (n > 0 && buf[n - 1] == '\n')
			break;
		cr_assert(e2e_now_ms() < until, "no %s written", name);
		usleep(5000);
	}
	buf[n] = '\0';
	return atoll(buf);
}

/* Is pid a live (not zombie) process of this daemon's tools? */
static bool
t_alive(struct t *t, long long pid)
{
	char path[64], buf[65536], want[96], state = 0;
	size_t n = 0, off;
	ssize_t r;
	FILE *f;
	int fd;

	snprintf(path, sizeof path, "/proc/%lld/stat", pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(f);
	if (state == 'Z' || state == 0)
		return false;
	/* The pid may have been reused: only the tag makes it ours. */
	snprintf(path, sizeof path, "/proc/%lld/environ", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	snprintf(want, sizeof want, "STEXEC_E2E_TAG=%s", t->d->tag);
	for (off = 0; off < n; off += strlen(buf + off) + 1)
		if (strcmp(buf + off, want) == 0)
			return true;
	return false;
}

/* The tool's shell and its background child (PID, CHILD) are both dead. */
static void
t_expect_dead(struct t *t, const char *id)
{
	long long pid = t_num(t, id, "pid"), child = t_num(t, id, "child");

	cr_assert(!t_alive(t, pid),
	    "the result of %s came while its process %lld still lived", id,
	    pid);
	cr_assert(!t_alive(t, child),
	    "the result of %s came while its child %lld still lived", id,
	    child);
}

/* S7's sibling-error content for a failing tool described as desc. */
static char *
sibling_content(const char *desc)
{
	char *s;

	cr_assert(asprintf(&s, "<tool_use_error>Cancelled: parallel tool call "
	    "%s errored</tool_use_error>", desc) >= 0);
	return s;
}

/* DESC of a tool whose input.command is an ASCII script. */
static char *
desc_of(const char *name, const char *script)
{
	char *s;

	cr_assert(asprintf(&s, "%s(%.40s%s)", name, script,
	    strlen(script) > 40 ? "\xe2\x80\xa6" : "") >= 0);
	return s;
}

/* "true:a,b" for a state notification. */
static char *
state_str(const json_t *p)
{
	char *out, *next;
	json_t *id;
	size_t i;

	cr_assert(asprintf(&out, "%s:",
	    json_is_true(json_object_get(p, "interruptible")) ? "true" :
	    "false") >= 0);
	json_array_foreach(json_object_get(p, "inProgress"), i, id) {
		cr_assert(asprintf(&next, "%s%s%s", out, i ? "," : "",
		    json_string_value(id)) >= 0);
		free(out);
		out = next;
	}
	return out;
}

/* Wait for the n-th state notification and check it. */
static void
t_expect_state(struct t *t, int n, const char *want)
{
	char *got = state_str(t_await_n(t, "state", NULL, NULL, n));

	cr_assert_str_eq(got, want, "state #%d: got %s, want %s", n, got,
	    want);
	free(got);
}

/* ------------------------------------------------------------------ S1 */

Test(S1, unknown_tool_completes_at_once_with_the_exact_error)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *x, *a_done;

	cr_assert_str_eq(t_add(t, "a", "safe", GATE("go_a") "echo a"),
	    "executing");
	/* Completed at once, but its result is held behind a's (S5). */
	cr_assert_str_eq(t_add_input(t, "x", "mcp__srv__no-such.tool",
	    json_pack("{s:s}", "command", "echo x")), "completed");
	cr_assert(!t_add_safe(t, "x"));
	t_await(t, "tool_status", "x", "completed");
	/* Blocks nobody: had x counted as an unsafe tool, c would wait. */
	cr_assert_str_eq(t_add(t, "c", "safe", "echo c"), "executing");
	t_await(t, "tool_status", "c", "completed");
	t_sync(t);
	cr_assert_eq(t_count(t, "tool_result", NULL, NULL), 0,
	    "a result overtook the running tool a");
	cr_assert_null(t_find(t, "tool_status", "x", "executing"));

	t_go(t, "go_a");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "a:ok,x:unknown_tool,c:ok");
	x = t_find(t, "tool_result", "x", NULL);
	cr_assert_str_eq(e2e_content(x), "<tool_use_error>Error: No such tool "
	    "available: mcp__srv__no-such.tool</tool_use_error>");
	cr_assert(e2e_is_error(x));
	cr_assert_str_eq(e2e_str(json_object_get(x, "result"), "tool_use_id"),
	    "x");
	cr_assert_str_eq(e2e_str(json_object_get(x, "result"), "type"),
	    "tool_result");
	cr_assert(json_is_null(json_object_get(json_object_get(x, "meta"),
	    "exitCode")));
	/* x completed long before a did, and still came after it. */
	a_done = t_find(t, "tool_status", "a", "completed");
	cr_assert_lt(seq(t_find(t, "tool_status", "x", "completed")),
	    seq(a_done));
	t_close(t);
}

Test(S1, unknown_tool_first_in_the_turn_is_delivered_at_once)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	const char *st;

	st = t_add_input(t, "x", "Bash", json_object());
	cr_assert(strcmp(st, "completed") == 0 || strcmp(st, "delivered") == 0,
	    "status %s", st);
	/* Nothing executes: the unsafe tool after it starts at once. */
	cr_assert_str_eq(t_add(t, "u", "unsafe", GATE("go_u") "echo u"),
	    "executing");
	/* Its result does not wait for anything: it is first. */
	cr_assert_str_eq(e2e_content(t_await(t, "tool_result", "x", NULL)),
	    "<tool_use_error>Error: No such tool available: Bash"
	    "</tool_use_error>");
	cr_assert_null(t_find(t, "tool_status", "u", "completed"));
	t_go(t, "go_u");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "x:unknown_tool,u:ok");
	t_close(t);
}

Test(S1, unknown_tool_does_not_wait_for_a_running_unsafe_tool)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	cr_assert_str_eq(t_add(t, "u", "unsafe", GATE("go_u") "echo u"),
	    "executing");
	cr_assert_str_eq(t_add_input(t, "x", "nope", json_object()),
	    "completed");
	/* Completed while u still runs, never queued behind it. */
	t_await(t, "tool_status", "x", "completed");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_status", "u", "completed"));
	cr_assert_null(t_find(t, "tool_result", NULL, NULL));
	t_go(t, "go_u");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "u:ok,x:unknown_tool");
	t_close(t);
}

/* ------------------------------------------------------------------ S2 */

#define STRICT_TOOL "{\"name\":\"strict\",\"command\":[\"/bin/sh\",\"-c\"," \
	"\"{command}\"],\"concurrencySafe\":true,\"inputSchema\":{" \
	"\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}," \
	"\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}}," \
	"\"required\":[\"command\",\"n\"],\"additionalProperties\":false}}"

Test(S2, invalid_input_gets_the_exact_error_and_spawns_nothing)
{
	struct t *t = t_open(d_start(NULL), 0, "[" STRICT_TOOL "]");
	/* Each with command RAN, which would leave ID.ran had it run. */
	static const char *bad[] = {
		"{\"n\":\"3\"}",          /* type */
		"{}",                     /* required */
		"{\"n\":9}",              /* maximum */
		"{\"n\":0}",              /* minimum */
		"{\"n\":2,\"x\":1}",      /* additionalProperties */
		"{\"n\":2.5}",            /* integer */
	};
	const char *pre = "<tool_use_error>InputValidationError: ";
	const char *post = "</tool_use_error>";
	char id[16], ran[32];
	const char *c;
	json_t *r, *input;
	size_t i, len;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(id, sizeof id, "i%zu", i);
		input = e2e_json(bad[i]);
		json_object_set_new(input, "command", json_string(RAN));
		/* Nothing executes: its time comes at once. */
		cr_assert_str_eq(t_add_input(t, id, "strict", input),
		    "delivered", "tool %s: %s", id, bad[i]);
		cr_assert(!t_add_safe(t, id), "invalid input %s is safe",
		    bad[i]);
	}
	cr_assert_str_eq(t_add_input(t, "ok", "strict", json_pack("{s:s, s:i}",
	    "command", RAN "echo fine", "n", 2)), "executing");
	cr_assert(t_add_safe(t, "ok"));
	cr_assert_eq(t_drain(t), 7);
	t_expect_results(t, 1, "i0:invalid_input,i1:invalid_input,"
	    "i2:invalid_input,i3:invalid_input,i4:invalid_input,"
	    "i5:invalid_input,ok:ok");
	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(id, sizeof id, "i%zu", i);
		snprintf(ran, sizeof ran, "%s.ran", id);
		r = t_find(t, "tool_result", id, NULL);
		c = e2e_content(r);
		len = strlen(c);
		cr_assert(e2e_is_error(r));
		cr_assert(strncmp(c, pre, strlen(pre)) == 0 &&
		    len > strlen(pre) + strlen(post) &&
		    strcmp(c + len - strlen(post), post) == 0,
		    "content of %s: %s", id, c);
		cr_log_info("S2 %s: %s", id, c);
		cr_assert_null(t_find(t, "tool_status", id, "executing"),
		    "a process was started for %s", id);
		cr_assert(!t_exists(t, ran), "%s ran", id);
	}
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "ok", NULL)),
	    "fine\n");
	cr_assert(t_exists(t, "ok.ran"));
	t_close(t);
}

Test(S2, invalid_input_makes_a_safe_tool_unsafe_until_its_time_comes)
{
	struct t *t = t_open(d_start(NULL), 0, "[" STRICT_TOOL "]");
	json_t *b_done;

	cr_assert_str_eq(t_add(t, "a", "safe", STAMP("start") GATE("go_a")
	    STAMP("end") "echo a"), "executing");
	/* strict is safe, but not with this input. */
	cr_assert_str_eq(t_add_input(t, "b", "strict",
	    json_pack("{s:s, s:s}", "command", RAN, "n", "x")), "queued");
	cr_assert(!t_add_safe(t, "b"));
	/* b is an unsafe queued tool now: safe c may not overtake it. */
	cr_assert_str_eq(t_add(t, "c", "safe", STAMP("start") "echo c"),
	    "queued");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_status", "b", "completed"),
	    "b completed before its time came");
	cr_assert_str_eq(t_status(t, "b"), "queued");

	t_go(t, "go_a");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "a:ok,b:invalid_input,c:ok");
	b_done = t_find(t, "tool_status", "b", "completed");
	cr_assert_gt(seq(b_done), seq(t_find(t, "tool_status", "a",
	    "completed")));
	cr_assert_gt(seq(t_find(t, "tool_status", "c", "executing")),
	    seq(b_done));
	cr_assert_geq(t_num(t, "c", "start"), t_num(t, "a", "end"));
	cr_assert(!t_exists(t, "b.ran"));
	t_close(t);
}

Test(S2, missing_or_null_command_field_is_invalid_input)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"argv\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"" "touch \\\"$T/"
	    "$STEXEC_TOOL_USE_ID.ran\\\"; echo \\\"$0\\\"\",\"{word}\"],"
	    "\"concurrencySafe\":true}]");
	json_t *r;

	cr_assert_str_eq(t_add_input(t, "missing", "argv", json_object()),
	    "delivered");
	cr_assert(!t_add_safe(t, "missing"));
	cr_assert_str_eq(t_add_input(t, "null", "argv",
	    json_pack("{s:n}", "word")), "delivered");
	cr_assert(!t_add_safe(t, "null"));
	t_add_input(t, "given", "argv", json_pack("{s:s}", "word", "hello"));
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1,
	    "missing:invalid_input,null:invalid_input,given:ok");
	r = t_find(t, "tool_result", "missing", NULL);
	cr_assert(strncmp(e2e_content(r), "<tool_use_error>InputValidationError: ",
	    38) == 0, "content %s", e2e_content(r));
	cr_assert(!t_exists(t, "missing.ran"));
	cr_assert(!t_exists(t, "null.ran"));
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "given", NULL)),
	    "hello\n");
	t_close(t);
}

Test(S2, safety_rule_is_decided_at_add_and_unsafe_when_unevaluable)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"ruled\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
	    "\"concurrencySafe\":{\"pointer\":\"/mode\","
	    "\"pattern\":\"^(read|list)$\"}}]");
	static const struct {
		const char *id, *mode; /* mode JSON, NULL: absent */
		bool safe;
	} cases[] = {
		{ "r1", "\"read\"", true },
		{ "r2", "\"list\"", true },
		{ "r3", "\"write\"", false },
		{ "r4", "7", false },      /* not a string: cannot evaluate */
		{ "r5", NULL, false },     /* no such value */
		{ "r6", "\"reader\"", false },
		{ "r7", "[\"read\"]", false },
	};
	const char *script = STAMP("start") GATE("go") STAMP("end");
	json_t *input, *st, *tool;
	size_t i, j;

	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		input = json_pack("{s:s}", "command", script);
		if (cases[i].mode != NULL)
			json_object_set_new(input, "mode",
			    e2e_json(cases[i].mode));
		t_add_input(t, cases[i].id, "ruled", input);
		cr_assert_eq(t_add_safe(t, cases[i].id), cases[i].safe,
		    "%s: mode %s", cases[i].id, cases[i].mode);
	}
	/* The two safe ones run together; everything after waits. */
	t_await(t, "tool_status", "r1", "executing");
	t_await(t, "tool_status", "r2", "executing");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_status", "r3", "executing"));
	/* Executing means spawned; wait until both really run, then go. */
	t_num(t, "r1", "start");
	t_num(t, "r2", "start");
	/* status reports the same safety, decided once. */
	st = c_call(t->c, "status", json_pack("{s:s}", "sessionId", t->sid));
	t_flush(t);
	json_array_foreach(json_object_get(st, "tools"), j, tool)
		cr_assert_eq(json_is_true(json_object_get(tool,
		    "concurrencySafe")), t_add_safe(t, e2e_str(tool, "id")));
	json_decref(st);

	t_go(t, "go");
	cr_assert_eq(t_drain(t), 7);
	t_expect_results(t, 1, "r1:ok,r2:ok,r3:ok,r4:ok,r5:ok,r6:ok,r7:ok");
	cr_assert_lt(t_num(t, "r2", "start"), t_num(t, "r1", "end"));
	cr_assert_lt(t_num(t, "r1", "start"), t_num(t, "r2", "end"));
	cr_assert_geq(t_num(t, "r3", "start"), t_num(t, "r1", "end"));
	cr_assert_geq(t_num(t, "r3", "start"), t_num(t, "r2", "end"));
	for (i = 3; i < sizeof cases / sizeof *cases; i++)
		cr_assert_geq(t_num(t, cases[i].id, "start"),
		    t_num(t, cases[i - 1].id, "end"),
		    "%s overlapped %s", cases[i].id, cases[i - 1].id);
	t_close(t);
}

/* ------------------------------------------------------------------ S3 */

Test(S3, safe_tools_run_in_parallel)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	const char *script = STAMP("start") GATE("go") STAMP("end") "echo x";
	static const char *ids[] = { "s1", "s2", "s3" };
	long long max_start = 0, min_end = -1, v;
	size_t i;

	for (i = 0; i < 3; i++)
		cr_assert_str_eq(t_add(t, ids[i], "safe", script),
		    "executing");
	/* All three processes are up before any may finish. */
	for (i = 0; i < 3; i++)
		t_num(t, ids[i], "start");
	t_go(t, "go");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "s1:ok,s2:ok,s3:ok");
	for (i = 0; i < 3; i++) {
		if ((v = t_num(t, ids[i], "start")) > max_start)
			max_start = v;
		if ((v = t_num(t, ids[i], "end")) < min_end || min_end < 0)
			min_end = v;
	}
	cr_assert_lt(max_start, min_end, "the safe tools did not overlap");
	t_close(t);
}

Test(S3, unsafe_tool_waits_for_safe_ones_and_runs_alone)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	cr_assert_str_eq(t_add(t, "s1", "safe", STAMP("start") GATE("go_s1")
	    STAMP("end")), "executing");
	cr_assert_str_eq(t_add(t, "u", "unsafe", STAMP("start") GATE("go_u")
	    STAMP("end")), "queued");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "u"), "queued");

	t_go(t, "go_s1");
	t_await(t, "tool_status", "u", "executing");
	/* Now a safe tool may not join the unsafe one. */
	cr_assert_str_eq(t_add(t, "s2", "safe", STAMP("start") STAMP("end")),
	    "queued");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "s2"), "queued");

	t_go(t, "go_u");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "s1:ok,u:ok,s2:ok");
	cr_assert_geq(t_num(t, "u", "start"), t_num(t, "s1", "end"));
	cr_assert_geq(t_num(t, "s2", "start"), t_num(t, "u", "end"));
	t_close(t);
}

Test(S3, max_parallel_of_the_session_limits_safe_tools)
{
	struct t *t = t_open(d_start(NULL), 2, NULL);
	static const char *ids[] = { "s1", "s2", "s3", "s4" };
	long long start[4], end[4];
	json_t *st;
	int i, j, k, most = 0;

	cr_assert_str_eq(t_add(t, "s1", "safe", STAMP("start") GATE("go_s1")
	    STAMP("end")), "executing");
	cr_assert_str_eq(t_add(t, "s2", "safe", STAMP("start") GATE("go_s2")
	    STAMP("end")), "executing");
	cr_assert_str_eq(t_add(t, "s3", "safe", STAMP("start") GATE("go_s3")
	    STAMP("end")), "queued");
	cr_assert_str_eq(t_add(t, "s4", "safe", STAMP("start") GATE("go_s4")
	    STAMP("end")), "queued");
	t_sync(t);
	st = t_find_n(t, "state", NULL, NULL, t_count(t, "state", NULL,
	    NULL));
	cr_assert_eq(json_array_size(json_object_get(st, "inProgress")), 2);

	t_go(t, "go_s2");
	t_await(t, "tool_status", "s3", "executing");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "s4"), "queued");
	t_go(t, "go_s1");
	t_await(t, "tool_status", "s4", "executing");
	t_go(t, "go_s3");
	t_go(t, "go_s4");
	cr_assert_eq(t_drain(t), 4);
	t_expect_results(t, 1, "s1:ok,s2:ok,s3:ok,s4:ok");
	for (i = 0; i < 4; i++) {
		start[i] = t_num(t, ids[i], "start");
		end[i] = t_num(t, ids[i], "end");
	}
	cr_assert_geq(start[2], end[1]);
	cr_assert_geq(start[3], end[0]);
	/* Never more than two alive at once, by the tools' own clocks. */
	for (i = 0; i < 4; i++) {
		for (k = 0, j = 0; j < 4; j++)
			if (start[j] <= start[i] && start[i] < end[j])
				k++;
		if (k > most)
			most = k;
	}
	cr_assert_leq(most, 2, "%d tools ran at once with maxParallel 2",
	    most);
	t_close(t);
}

Test(S3, max_parallel_defaults_to_ten)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	/* A slower poll: eleven tools wait here at once. */
	const char *script = STAMP("start")
	    "i=0; while [ ! -e \"$T/go\" ] && [ $i -lt 300 ]; "
	    "do sleep 0.1; i=$((i+1)); done; " STAMP("end");
	long long first_end = -1, v;
	char id[8];
	int i;

	for (i = 0; i < 11; i++) {
		snprintf(id, sizeof id, "s%d", i);
		cr_assert_str_eq(t_add(t, id, "safe", script),
		    i < 10 ? "executing" : "queued", "tool %s", id);
	}
	t_sync(t);
	cr_assert_eq(t_count(t, "tool_status", NULL, "executing"), 10);
	cr_assert_str_eq(t_status(t, "s10"), "queued");
	t_go(t, "go");
	cr_assert_eq(t_drain(t), 11);
	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof id, "s%d", i);
		v = t_num(t, id, "end");
		if (first_end < 0 || v < first_end)
			first_end = v;
	}
	cr_assert_geq(t_num(t, "s10", "start"), first_end);
	t_close(t);
}

Test(S3, max_parallel_must_be_1_to_256)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *e;
	static const int bad[] = { 0, 257, -1 };
	size_t i;

	T_.d = d; /* for t_cleanup */

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		e = c_call_error(c, "createSession", json_pack("{s:i}",
		    "maxParallel", bad[i]));
		cr_assert_eq(e2e_int(e, "code"), -32602, "maxParallel %d",
		    bad[i]);
		cr_assert(strstr(e2e_str(e, "message"), "maxParallel") != NULL,
		    "message %s", e2e_str(e, "message"));
		json_decref(e);
	}
	json_decref(c_call(c, "createSession", json_pack("{s:i}",
	    "maxParallel", 1)));
	json_decref(c_call(c, "createSession", json_pack("{s:i}",
	    "maxParallel", 256)));
	c_close(c);
	T_.d = NULL;
	d_stop(d);
}

Test(S3, a_tool_waiting_for_permission_counts_as_executing)
{
	struct t *t = t_open(d_start(NULL), 1, NULL);

	cr_assert_str_eq(t_add(t, "p", "perm", STAMP("start") STAMP("end")),
	    "waiting_permission");
	t_await(t, "permission_request", "p", NULL);
	/* One slot, and p holds it while it waits. */
	cr_assert_str_eq(t_add(t, "s", "safe", STAMP("start") STAMP("end")),
	    "queued");
	cr_assert_str_eq(t_add(t, "u", "unsafe", STAMP("start")), "queued");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_status", "s", "executing"));
	json_decref(c_call(t->c, "respondPermission", json_pack("{s:s, s:s, "
	    "s:s}", "sessionId", t->sid, "toolUseId", "p", "decision",
	    "allow")));
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "p:ok,s:ok,u:ok");
	cr_assert_geq(t_num(t, "s", "start"), t_num(t, "p", "end"));
	cr_assert_geq(t_num(t, "u", "start"), t_num(t, "s", "end"));
	t_close(t);
}

/* ------------------------------------------------------------------ S4 */

Test(S4, a_later_safe_tool_never_overtakes_a_queued_unsafe_one)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	char *order;

	cr_assert_str_eq(t_add(t, "a", "safe", STAMP("start") GATE("go_a")
	    STAMP("end")), "executing");
	cr_assert_str_eq(t_add(t, "u", "unsafe", STAMP("start") GATE("go_u")
	    STAMP("end")), "queued");
	/* S3 alone would let b join a; u is in the way. */
	cr_assert_str_eq(t_add(t, "b", "safe", STAMP("start") STAMP("end")),
	    "queued");
	t_go(t, "go_a");
	t_await(t, "tool_status", "u", "executing");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "b"), "queued");
	t_go(t, "go_u");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "a:ok,u:ok,b:ok");
	order = t_exec_order(t);
	cr_assert_str_eq(order, "a,u,b");
	free(order);
	cr_assert_geq(t_num(t, "u", "start"), t_num(t, "a", "end"));
	cr_assert_geq(t_num(t, "b", "start"), t_num(t, "u", "end"));
	t_close(t);
}

Test(S4, a_completion_starts_every_eligible_tool_up_to_an_unsafe_one)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	static const char *s[] = { "s1", "s2", "s3" };
	long long last_end = 0, v;
	char *order;
	size_t i;

	cr_assert_str_eq(t_add(t, "u1", "unsafe", STAMP("start")
	    GATE("go_u1") STAMP("end")), "executing");
	for (i = 0; i < 3; i++)
		cr_assert_str_eq(t_add(t, s[i], "safe", STAMP("start")
		    GATE("go_s") STAMP("end")), "queued");
	cr_assert_str_eq(t_add(t, "u2", "unsafe", STAMP("start")
	    GATE("go_u2") STAMP("end")), "queued");
	cr_assert_str_eq(t_add(t, "s4", "safe", STAMP("start") STAMP("end")),
	    "queued");

	/* One completion: the scan starts s1..s3 and stops at u2. */
	t_go(t, "go_u1");
	for (i = 0; i < 3; i++)
		t_await(t, "tool_status", s[i], "executing");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "u2"), "queued");
	cr_assert_str_eq(t_status(t, "s4"), "queued");
	/* All three really run at once: each is up before any may end. */
	for (i = 0; i < 3; i++)
		t_num(t, s[i], "start");

	t_go(t, "go_s");
	t_await(t, "tool_status", "u2", "executing");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "s4"), "queued");
	t_go(t, "go_u2");
	cr_assert_eq(t_drain(t), 6);
	t_expect_results(t, 1, "u1:ok,s1:ok,s2:ok,s3:ok,u2:ok,s4:ok");
	order = t_exec_order(t);
	cr_assert_str_eq(order, "u1,s1,s2,s3,u2,s4");
	free(order);
	for (i = 0; i < 3; i++) {
		cr_assert_geq(t_num(t, s[i], "start"), t_num(t, "u1", "end"));
		if ((v = t_num(t, s[i], "end")) > last_end)
			last_end = v;
	}
	cr_assert_geq(t_num(t, "u2", "start"), last_end);
	cr_assert_geq(t_num(t, "s4", "start"), t_num(t, "u2", "end"));
	t_close(t);
}

Test(S4, safe_tools_held_by_max_parallel_start_in_add_order_before_unsafe)
{
	struct t *t = t_open(d_start(NULL), 1, NULL);
	char *order;

	cr_assert_str_eq(t_add(t, "s1", "safe", STAMP("start") GATE("go_s1")
	    STAMP("end")), "executing");
	cr_assert_str_eq(t_add(t, "s2", "safe", STAMP("start") GATE("go_s2")
	    STAMP("end")), "queued");
	cr_assert_str_eq(t_add(t, "u", "unsafe", STAMP("start") STAMP("end")),
	    "queued");
	cr_assert_str_eq(t_add(t, "s3", "safe", STAMP("start") STAMP("end")),
	    "queued");
	t_go(t, "go_s1");
	t_await(t, "tool_status", "s2", "executing");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "u"), "queued");
	cr_assert_str_eq(t_status(t, "s3"), "queued");
	t_go(t, "go_s2");
	cr_assert_eq(t_drain(t), 4);
	order = t_exec_order(t);
	cr_assert_str_eq(order, "s1,s2,u,s3");
	free(order);
	cr_assert_geq(t_num(t, "u", "start"), t_num(t, "s2", "end"));
	cr_assert_geq(t_num(t, "s3", "start"), t_num(t, "u", "end"));
	t_close(t);
}

/* ------------------------------------------------------------------ S5 */

Test(S5, results_come_in_add_order_whatever_order_tools_finish_in)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *ra, *rb, *rc;

	t_add(t, "a", "safe", GATE("go_a") "echo a");
	t_add(t, "b", "safe", GATE("go_b") "echo b");
	t_add(t, "c", "safe", GATE("go_c") "echo c");
	t_go(t, "go_c");
	t_await(t, "tool_status", "c", "completed");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_result", NULL, NULL));
	cr_assert_str_eq(t_status(t, "c"), "completed");
	cr_assert_str_eq(t_status(t, "a"), "executing");
	t_go(t, "go_b");
	t_await(t, "tool_status", "b", "completed");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_result", NULL, NULL));
	t_go(t, "go_a");
	rc = t_await(t, "tool_result", "c", NULL);
	ra = t_find(t, "tool_result", "a", NULL);
	rb = t_find(t, "tool_result", "b", NULL);
	cr_assert(ra != NULL && rb != NULL);
	cr_assert_lt(seq(t_find(t, "tool_status", "a", "completed")),
	    seq(ra));
	cr_assert_lt(seq(ra), seq(rb));
	cr_assert_lt(seq(rb), seq(rc));
	cr_assert_str_eq(e2e_content(ra), "a\n");
	cr_assert_str_eq(e2e_content(rb), "b\n");
	cr_assert_str_eq(e2e_content(rc), "c\n");
	cr_assert_eq(t_drain(t), 3);
	t_expect_results(t, 1, "a:ok,b:ok,c:ok");
	t_close(t);
}

Test(S5, failed_and_unknown_tools_keep_their_place)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *rb;

	t_add(t, "a", "safe", GATE("go_a") "echo a");
	cr_assert_str_eq(t_add(t, "b", "unsafe", "echo b; exit 4"), "queued");
	t_add(t, "c", "no_such", "x");
	t_add(t, "d", "safe", "echo d");
	t_await(t, "tool_status", "c", "completed");
	t_go(t, "go_a");
	cr_assert_eq(t_drain(t), 4);
	t_expect_results(t, 1, "a:ok,b:exit,c:unknown_tool,d:ok");
	/* c was done first of all, delivered third. */
	cr_assert_lt(seq(t_find(t, "tool_status", "c", "completed")),
	    seq(t_find(t, "tool_status", "a", "completed")));
	rb = t_find(t, "tool_result", "b", NULL);
	cr_assert(e2e_is_error(rb));
	cr_assert_str_eq(e2e_content(rb), "b\nExit code 4");
	cr_assert_eq(e2e_int(json_object_get(rb, "meta"), "exitCode"), 4);
	t_close(t);
}

/* ------------------------------------------------------------------ S6 */

Test(S6, progress_is_not_held_behind_an_earlier_running_tool)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *p1, *p2, *rb, *w;

	t_add(t, "a", "safe", GATE("go_a") "echo a");
	t_add(t, "b", "safe", "printf '{\"progress\":{\"step\":1}}\\n' >&3; "
	    GATE("go_b") "printf '{\"progress\":{\"step\":2}}\\n' >&3; "
	    "echo b");
	/* Arrives while a (earlier) and b itself still run. */
	p1 = t_await(t, "progress", "b", NULL);
	w = e2e_json("{\"step\":1}");
	cr_assert(json_equal(json_object_get(p1, "data"), w));
	json_decref(w);
	cr_assert_eq(e2e_int(p1, "turn"), 1);
	cr_assert_null(t_find(t, "tool_status", "a", "completed"));
	t_go(t, "go_b");
	p2 = t_await_n(t, "progress", "b", NULL, 2);
	w = e2e_json("{\"step\":2}");
	cr_assert(json_equal(json_object_get(p2, "data"), w));
	json_decref(w);
	t_await(t, "tool_status", "b", "completed");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_result", NULL, NULL));
	t_go(t, "go_a");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "a:ok,b:ok");
	rb = t_find(t, "tool_result", "b", NULL);
	cr_assert_lt(seq(t_find_n(t, "progress", "b", NULL, 2)), seq(rb));
	cr_assert_eq(t_count(t, "progress", "b", NULL), 2);
	t_close(t);
}

Test(S6, progress_arrives_while_the_tool_runs_in_order_before_its_result)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	static const char *want[] = { "{\"n\":1}", "{\"text\":\"plain\"}",
		"\"str\"", "{\"text\":\"{\\\"other\\\":1}\"}", "{\"n\":2}" };
	json_t *r, *w;
	int i;

	t_add(t, "t", "unsafe", "printf '{\"progress\":{\"n\":1}}\\n' >&3; "
	    "echo plain >&3; printf '{\"progress\":\"str\"}\\n' >&3; "
	    "printf '{\"other\":1}\\n' >&3; " GATE("go")
	    "printf '{\"progress\":{\"n\":2}}\\n' >&3; echo out");
	/* Four lines come before the tool may end. */
	t_await_n(t, "progress", "t", NULL, 4);
	cr_assert_null(t_find(t, "tool_status", "t", "completed"));
	t_go(t, "go");
	r = t_await(t, "tool_result", "t", NULL);
	cr_assert_str_eq(e2e_content(r), "out\n");
	cr_assert_eq(t_count(t, "progress", "t", NULL), 5);
	for (i = 0; i < 5; i++) {
		w = e2e_json(want[i]);
		cr_assert(json_equal(json_object_get(t_find_n(t, "progress",
		    "t", NULL, i + 1), "data"), w), "progress #%d", i + 1);
		json_decref(w);
		cr_assert_lt(seq(t_find_n(t, "progress", "t", NULL, i + 1)),
		    seq(r));
	}
	cr_assert_eq(t_drain(t), 1);
	t_close(t);
}

Test(S6, a_burst_of_progress_at_exit_all_comes_before_the_result)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *r, *p;
	int i, n;

	/* The process exits right after writing: a race between the fd 3
	 * pipe and the exit that the daemon must always win for progress. */
	for (n = 0; n < 3; n++) {
		char id[8];

		snprintf(id, sizeof id, "b%d", n);
		t_add(t, id, "safe", "i=0; while [ $i -lt 300 ]; do "
		    "printf '{\"progress\":%d}\\n' $i; i=$((i+1)); done >&3");
	}
	cr_assert_eq(t_drain(t), 3);
	for (n = 0; n < 3; n++) {
		char id[8];

		snprintf(id, sizeof id, "b%d", n);
		r = t_find(t, "tool_result", id, NULL);
		cr_assert_eq(t_count(t, "progress", id, NULL), 300,
		    "tool %s: %d progress", id, t_count(t, "progress", id,
		    NULL));
		for (i = 0; i < 300; i++) {
			p = t_find_n(t, "progress", id, NULL, i + 1);
			cr_assert_eq(json_integer_value(json_object_get(p,
			    "data")), i);
			cr_assert_lt(seq(p), seq(r));
		}
	}
	t_close(t);
}

Test(S6, streamed_output_is_progress_before_the_result)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"stream\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
	    "\"streamOutput\":true}]");
	json_t *r, *p, *m;
	char out[256] = "", err[256] = "";
	size_t i;

	t_add(t, "s", "stream", "echo line1; " GATE("go")
	    "echo line2 >&2; echo line3");
	p = t_await(t, "progress", "s", NULL);
	cr_assert_str_eq(e2e_str(json_object_get(p, "data"), "stream"),
	    "stdout");
	cr_assert_str_eq(e2e_str(json_object_get(p, "data"), "text"),
	    "line1\n");
	t_go(t, "go");
	r = t_await(t, "tool_result", "s", NULL);
	cr_assert_str_eq(e2e_content(r), "line1\nline3\nline2\n");
	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), "progress") != 0)
			continue;
		cr_assert_lt(seq(p), seq(r));
		strncat(strcmp(e2e_str(json_object_get(p, "data"), "stream"),
		    "stdout") == 0 ? out : err, e2e_str(json_object_get(p, "data"),
		    "text"), 100);
	}
	cr_assert_str_eq(out, "line1\nline3\n");
	cr_assert_str_eq(err, "line2\n");
	cr_assert_eq(t_drain(t), 1);
	t_close(t);
}

/*
 * A character cut between two reads of the pipe goes out whole, in the
 * later progress; one the tool never finishes goes out repaired at exit.
 */
Test(S6, streamed_output_never_splits_a_character)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"stream\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
	    "\"streamOutput\":true}]");
	json_t *r, *p, *m;
	char out[256] = "", err[256] = "";
	size_t i;

	/* The euro sign is e2 82 ac: the gate holds its last byte back. */
	t_add(t, "s", "stream", "printf 'a\\342\\202'; " GATE("go")
	    "printf '\\254 b'; printf 'x\\360\\237' >&2");
	p = t_await(t, "progress", "s", NULL);
	cr_assert_str_eq(e2e_str(json_object_get(p, "data"), "text"), "a");
	t_go(t, "go");
	r = t_await(t, "tool_result", "s", NULL);
	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), "progress") != 0)
			continue;
		cr_assert_lt(seq(p), seq(r));
		strncat(strcmp(e2e_str(json_object_get(p, "data"), "stream"),
		    "stdout") == 0 ? out : err, e2e_str(json_object_get(p, "data"),
		    "text"), 100);
	}
	cr_assert_str_eq(out, "a\xe2\x82\xac b");
	cr_assert_str_eq(err, "x\xef\xbf\xbd\xef\xbf\xbd");
	cr_assert_eq(t_drain(t), 1);
	t_close(t);
}

/* ------------------------------------------------------------------ S7 */

Test(S7, a_flagged_error_cancels_queued_and_cancel_tools_block_ones_finish)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	const char *fscript = GATE("go_f") "echo boom; exit 3";
	char *desc = desc_of("safe_flag", fscript), *want = sibling_content(desc);
	json_t *r;

	cr_assert_str_eq(t_add(t, "c", "safe_cancel", PID CHILD
	    GATE("never")), "executing");
	cr_assert_str_eq(t_add(t, "b", "safe", GATE("go_b") "echo b-real"),
	    "executing");
	cr_assert_str_eq(t_add(t, "f", "safe_flag", fscript), "executing");
	cr_assert_str_eq(t_add(t, "u", "unsafe", RAN), "queued");
	t_num(t, "c", "child");

	t_go(t, "go_f");
	r = t_await(t, "tool_result", "c", NULL);
	/* Killed ones are reported only once dead (S18). */
	t_expect_dead(t, "c");
	cr_assert_str_eq(e2e_content(r), want);
	cr_assert_str_eq(e2e_reason(r), "sibling_error");
	cr_assert(e2e_is_error(r));
	/* b (block) runs on; u is done without ever starting. */
	t_await(t, "tool_status", "u", "completed");
	t_sync(t);
	cr_assert_null(t_find(t, "tool_result", "b", NULL));
	cr_assert_str_eq(t_status(t, "b"), "executing");
	/* The turn stays errored: a tool added now never starts. */
	cr_assert_str_eq(t_add(t, "late", "unsafe", RAN), "completed");

	t_go(t, "go_b");
	cr_assert_eq(t_drain(t), 5);
	t_expect_results(t, 1, "c:sibling_error,b:ok,f:exit,u:sibling_error,"
	    "late:sibling_error");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "b", NULL)),
	    "b-real\n");
	r = t_find(t, "tool_result", "f", NULL);
	cr_assert_str_eq(e2e_content(r), "boom\nExit code 3");
	cr_assert_eq(e2e_int(json_object_get(r, "meta"), "exitCode"), 3);
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "u", NULL)), want);
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "late", NULL)),
	    want);
	cr_assert_null(t_find(t, "tool_status", "u", "executing"));
	cr_assert_null(t_find(t, "tool_status", "late", "executing"));
	cr_assert(!t_exists(t, "u.ran") && !t_exists(t, "late.ran"));

	/* The next turn is not errored. */
	cr_assert_str_eq(t_add(t, "n", "unsafe", "echo next"), "executing");
	cr_assert_eq(t_drain(t), 1);
	t_expect_results(t, 2, "n:ok");
	free(desc);
	free(want);
	t_close(t);
}

Test(S7, desc_names_the_failing_tool_and_its_summary)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"failer\","
	    "\"command\":[\"/bin/sh\",\"-c\",\"exit 1\"],"
	    "\"abortSiblingsOnError\":true}]");
	static const struct {
		const char *tool, *input, *desc;
	} cases[] = {
		{ "failer", "{\"command\":\"make test\"}", "failer(make test)" },
		{ "failer",
		  "{\"command\":\"0123456789012345678901234567890123456789\"}",
		  "failer(0123456789012345678901234567890123456789)" },
		{ "failer",
		  "{\"command\":\"0123456789012345678901234567890123456789X\"}",
		  "failer(0123456789012345678901234567890123456789\xe2\x80\xa6)" },
		{ "failer", "{\"file_path\":\"/etc/passwd\"}",
		  "failer(/etc/passwd)" },
		{ "failer", "{\"pattern\":\"**/*.c\"}", "failer(**/*.c)" },
		{ "failer", "{}", "failer" },
		{ "failer", "{\"command\":\"\",\"file_path\":\"/p\"}",
		  "failer(/p)" },
		{ "failer", "{\"command\":5,\"pattern\":\"pat\"}",
		  "failer(pat)" },
		{ "failer",
		  "{\"pattern\":\"pat\",\"file_path\":\"/f\",\"command\":\"cmd\"}",
		  "failer(cmd)" },
		{ "failer", "{\"file_path\":\"\",\"other\":\"x\"}", "failer" },
		/* 45 two-byte characters: 40 characters, not 40 bytes. */
		{ "failer", "{\"command\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\"}",
		  "failer(\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		  "\xc3\xa9\xe2\x80\xa6)" },
		/* The built-in bash has the flag too. */
		{ "bash", "{\"command\":\"echo oops; exit 2\"}",
		  "bash(echo oops; exit 2)" },
	};
	char fid[16], vid[16], want_res[64], *want;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		snprintf(fid, sizeof fid, "f%zu", i);
		snprintf(vid, sizeof vid, "v%zu", i);
		t_add_input(t, fid, cases[i].tool, e2e_json(cases[i].input));
		/* Queued behind f, or added after it failed: cancelled. */
		t_add(t, vid, "unsafe", RAN);
		cr_assert_eq(t_drain(t), 2);
		snprintf(want_res, sizeof want_res, "%s:exit,%s:sibling_error",
		    fid, vid);
		t_expect_results(t, (long long)i + 1, want_res);
		want = sibling_content(cases[i].desc);
		cr_assert_str_eq(e2e_content(t_find(t, "tool_result", vid, NULL)),
		    want, "case %zu, input %s", i, cases[i].input);
		free(want);
	}
	t_close(t);
}

Test(S7, every_kind_of_error_of_a_flagged_tool_triggers_it)
{
	struct t *t = t_open(d_start(NULL), 0, "["
	    "{\"name\":\"sig_flag\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"kill -9 $$\"],\"abortSiblingsOnError\":true},"
	    "{\"name\":\"slow_flag\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"sleep 30\"],\"abortSiblingsOnError\":true,\"timeoutMs\":300},"
	    "{\"name\":\"nospawn_flag\",\"command\":"
	    "[\"/nonexistent/stexec-e2e-no-such-program\"],"
	    "\"abortSiblingsOnError\":true},"
	    "{\"name\":\"strict_flag\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"exit 0\"],\"abortSiblingsOnError\":true,\"inputSchema\":{"
	    "\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
	    "\"required\":[\"n\"]}},"
	    "{\"name\":\"exit_flag\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"exit 1\"],\"abortSiblingsOnError\":true},"
	    "{\"name\":\"ok_flag\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"echo fine\"],\"abortSiblingsOnError\":true}]");
	static const struct {
		const char *tool, *reason;
	} cases[] = {
		{ "exit_flag", "exit" },
		{ "sig_flag", "signal" },
		{ "slow_flag", "timeout" },
		{ "nospawn_flag", "spawn_failed" },
		{ "strict_flag", "invalid_input" },
	};
	char fid[16], vid[16], want_res[80], *want, vran[32];
	json_t *r;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		snprintf(fid, sizeof fid, "f%zu", i);
		snprintf(vid, sizeof vid, "v%zu", i);
		snprintf(vran, sizeof vran, "%s.ran", vid);
		t_add_input(t, fid, cases[i].tool, json_object());
		t_add(t, vid, "unsafe", RAN);
		cr_assert_eq(t_drain(t), 2);
		snprintf(want_res, sizeof want_res, "%s:%s,%s:sibling_error",
		    fid, cases[i].reason, vid);
		t_expect_results(t, (long long)i + 1, want_res);
		/* The input has no command/file_path/pattern: DESC = name. */
		want = sibling_content(cases[i].tool);
		cr_assert_str_eq(e2e_content(t_find(t, "tool_result", vid, NULL)),
		    want);
		free(want);
		cr_assert(!t_exists(t, vran), "%s ran", vid);
	}
	r = t_find(t, "tool_result", "f2", NULL);
	cr_assert(strstr(e2e_content(r), "timed out after 300 ms") != NULL,
	    "timeout content: %s", e2e_content(r));
	/* A flagged tool that succeeds affects nobody. */
	t_add_input(t, "fine", "ok_flag", json_object());
	t_add(t, "after", "unsafe", "echo after");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 6, "fine:ok,after:ok");
	t_close(t);
}

Test(S7, errors_of_tools_without_the_flag_affect_nobody)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	t_add(t, "c", "safe_cancel", GATE("go_c") "echo c");
	t_add(t, "e", "safe", "echo e; exit 5");
	t_add(t, "k", "safe", "kill -9 $$");
	t_add(t, "u", "unsafe", "echo u; exit 6");
	t_add(t, "w", "unsafe", "echo w");
	t_await(t, "tool_status", "e", "completed");
	t_await(t, "tool_status", "k", "completed");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "c"), "executing");
	t_go(t, "go_c");
	cr_assert_eq(t_drain(t), 5);
	t_expect_results(t, 1, "c:ok,e:exit,k:signal,u:exit,w:ok");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "w", NULL)),
	    "w\n");
	t_close(t);
}

Test(S7, a_cancelled_sibling_that_ignores_sigterm_is_reported_once_dead)
{
	struct t *t = t_open(d_start("--kill-grace-ms", "300", NULL), 0,
	    NULL);
	json_t *r;

	t_add(t, "c", "safe_cancel", "trap '' TERM; " PID CHILD
	    GATE("never"));
	t_num(t, "c", "child");
	t_add(t, "f", "safe_flag", "exit 1");
	r = t_await(t, "tool_result", "c", NULL);
	t_expect_dead(t, "c");
	cr_assert_eq(d_leftovers(t->d), 0);
	cr_assert_str_eq(e2e_reason(r), "sibling_error");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "c:sibling_error,f:exit");
	t_close(t);
}

/* ------------------------------------------------------------------ S8 */

Test(S8, interrupt_kills_cancel_tools_block_tools_finish_queued_never_start)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *r;

	cr_assert_str_eq(t_add(t, "c", "safe_cancel", PID CHILD
	    GATE("never")), "executing");
	cr_assert_str_eq(t_add(t, "b", "safe", GATE("go_b") "echo b-real"),
	    "executing");
	cr_assert_str_eq(t_add(t, "u", "unsafe", RAN), "queued");
	t_num(t, "c", "child");
	r = c_call(t->c, "abort", json_pack("{s:s, s:s}", "sessionId", t->sid,
	    "reason", "interrupt"));
	cr_assert_eq(e2e_int(r, "turn"), 1);
	json_decref(r);

	r = t_await(t, "tool_result", "c", NULL);
	t_expect_dead(t, "c");
	cr_assert_str_eq(e2e_content(r), INTERRUPTED);
	cr_assert_str_eq(e2e_reason(r), "interrupted");
	cr_assert(e2e_is_error(r));
	/* Added after the interrupt in the same turn: never starts. */
	cr_assert_str_eq(t_add(t, "late", "safe", RAN), "completed");
	t_await(t, "tool_status", "u", "completed");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "b"), "executing");
	cr_assert_null(t_find(t, "tool_result", "b", NULL));

	t_go(t, "go_b");
	cr_assert_eq(t_drain(t), 4);
	t_expect_results(t, 1, "c:interrupted,b:ok,u:interrupted,"
	    "late:interrupted");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "b", NULL)),
	    "b-real\n");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "u", NULL)),
	    INTERRUPTED);
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "late", NULL)),
	    INTERRUPTED);
	cr_assert(!t_exists(t, "u.ran") && !t_exists(t, "late.ran"));
	cr_assert_null(t_find(t, "tool_status", "u", "executing"));

	/* The interrupt ends with the turn. */
	cr_assert_str_eq(t_add(t, "n", "safe", "echo n"), "executing");
	cr_assert_eq(t_drain(t), 1);
	t_expect_results(t, 2, "n:ok");
	t_close(t);
}

Test(S8, the_configured_interrupt_message_is_used)
{
	const char *msg = "Stopped: the user pressed Esc \"now\"";
	struct t *t = t_open(d_start("--interrupt-message", msg, NULL), 0,
	    NULL);

	t_add(t, "c", "unsafe_cancel", GATE("never"));
	t_add(t, "q", "unsafe", RAN);
	t_await(t, "tool_status", "c", "executing");
	t_abort(t, "interrupt");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "c:interrupted,q:interrupted");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "c", NULL)), msg);
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "q", NULL)), msg);
	t_close(t);
}

Test(S8, interrupting_the_builtin_bash_kills_it_before_the_result)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *r;

	t_add_input(t, "b", "bash", json_pack("{s:s}", "command",
	    "sleep 60 & sleep 60"));
	t_await(t, "tool_status", "b", "executing");
	t_abort(t, "interrupt");
	r = t_await(t, "tool_result", "b", NULL);
	cr_assert_eq(d_leftovers(t->d), 0,
	    "the interrupted result came before the processes died");
	cr_assert_str_eq(e2e_content(r), INTERRUPTED);
	cr_assert_eq(t_drain(t), 1);
	t_close(t);
}

Test(S8, interrupt_before_any_tool_stops_every_later_one_of_the_turn)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	t_abort(t, "interrupt");
	cr_assert_str_eq(t_add(t, "a", "safe", RAN), "delivered");
	cr_assert_str_eq(t_add(t, "b", "unsafe_cancel", RAN), "delivered");
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "a:interrupted,b:interrupted");
	cr_assert(!t_exists(t, "a.ran") && !t_exists(t, "b.ran"));
	/* Turn 2 runs normally. */
	t_add(t, "c", "safe", RAN "echo c");
	cr_assert_eq(t_drain(t), 1);
	t_expect_results(t, 2, "c:ok");
	t_close(t);
}

/* ------------------------------------------------------------------ S9 */

Test(S9, hard_abort_kills_block_tools_too)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *r;

	cr_assert_str_eq(t_add(t, "b", "safe", PID CHILD GATE("never")),
	    "executing");
	cr_assert_str_eq(t_add(t, "c", "safe_cancel", PID CHILD
	    GATE("never")), "executing");
	cr_assert_str_eq(t_add(t, "u", "unsafe", RAN), "queued");
	t_num(t, "b", "child");
	t_num(t, "c", "child");
	t_abort(t, "cancel");
	r = t_await(t, "tool_result", "b", NULL);
	t_expect_dead(t, "b");
	cr_assert_str_eq(e2e_content(r), INTERRUPTED);
	cr_assert_str_eq(e2e_reason(r), "interrupted");
	r = t_await(t, "tool_result", "c", NULL);
	t_expect_dead(t, "c");
	cr_assert_eq(d_leftovers(t->d), 0);
	cr_assert_str_eq(t_add(t, "late", "safe", RAN), "delivered");
	cr_assert_eq(t_drain(t), 4);
	t_expect_results(t, 1, "b:interrupted,c:interrupted,u:interrupted,"
	    "late:interrupted");
	cr_assert_str_eq(e2e_content(t_find(t, "tool_result", "late", NULL)),
	    INTERRUPTED);
	cr_assert(!t_exists(t, "u.ran") && !t_exists(t, "late.ran"));
	t_close(t);
}

Test(S9, hard_abort_of_a_tool_ignoring_sigterm_waits_for_its_death)
{
	struct t *t = t_open(d_start("--kill-grace-ms", "300", NULL), 0,
	    NULL);
	json_t *r;

	t_add(t, "b", "unsafe", "trap '' TERM; " PID CHILD GATE("never"));
	t_num(t, "b", "child");
	t_abort(t, "cancel");
	r = t_await(t, "tool_result", "b", NULL);
	t_expect_dead(t, "b");
	cr_assert_eq(d_leftovers(t->d), 0);
	cr_assert_str_eq(e2e_reason(r), "interrupted");
	cr_assert_eq(t_drain(t), 1);
	t_close(t);
}

Test(S9, hard_abort_after_an_interrupt_kills_the_block_tools_left)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *r;

	t_add(t, "b", "safe", PID CHILD GATE("never"));
	t_add(t, "c", "safe_cancel", GATE("never"));
	t_num(t, "b", "child");
	t_abort(t, "interrupt");
	t_await(t, "tool_status", "c", "completed");
	t_sync(t);
	cr_assert_str_eq(t_status(t, "b"), "executing");
	t_abort(t, "cancel");
	r = t_await(t, "tool_result", "b", NULL);
	t_expect_dead(t, "b");
	cr_assert_str_eq(e2e_content(r), INTERRUPTED);
	cr_assert_eq(t_drain(t), 2);
	t_expect_results(t, 1, "b:interrupted,c:interrupted");
	t_close(t);
}

/* ------------------------------------------------------------------ S10 */

/* Every tool_result of the log, counted per (turn, id): each exactly once. */
static void
t_expect_paired(struct t *t, json_t *added /* "turn/id" -> true */)
{
	json_t *seen = json_object(), *m, *p;
	const char *key;
	char k[96];
	size_t i;

	json_array_foreach(t->log, i, m) {
		p = json_object_get(m, "params");
		if (strcmp(e2e_str(m, "method"), "tool_result") != 0)
			continue;
		snprintf(k, sizeof k, "%lld/%s", e2e_int(p, "turn"),
		    e2e_str(p, "toolUseId"));
		cr_assert_null(json_object_get(seen, k),
		    "a second tool_result for %s", k);
		cr_assert_not_null(json_object_get(added, k),
		    "a tool_result for %s, never added", k);
		json_object_set_new(seen, k, json_true());
	}
	json_object_foreach(added, key, m)
		cr_assert_not_null(json_object_get(seen, key),
		    "no tool_result for %s", key);
	json_decref(seen);
}

Test(S10, every_kind_of_tool_gets_exactly_one_result)
{
	struct t *t = t_open(d_start(NULL), 0, "[{\"name\":\"nospawn\","
	    "\"command\":[\"/nonexistent/stexec-e2e-no-such-program\"]}]");
	json_t *added = json_object(), *ev, *n;
	static const char *ids[] = { "ok", "unk", "inv", "fail", "sig", "sp",
		"un", "p" };
	char k[32];
	size_t i;
	int count;

	t_add(t, "ok", "safe", "echo ok");
	t_add(t, "unk", "no_such_tool", "x");
	t_add_input(t, "inv", "safe", json_object());
	t_add(t, "fail", "safe", "exit 2");
	t_add(t, "sig", "safe", "kill -9 $$");
	t_add_input(t, "sp", "nospawn", json_object());
	t_add(t, "un", "unsafe", "echo un");
	t_add(t, "p", "perm", "echo p");
	/* A duplicate id is refused and gets no second result. */
	ev = c_call_error(t->c, "addTool", json_pack("{s:s, s:{s:s, s:s, "
	    "s:{s:s}}}", "sessionId", t->sid, "toolUse", "id", "ok", "name",
	    "safe", "input", "command", "echo again"));
	cr_assert_eq(e2e_int(ev, "code"), -32002);
	json_decref(ev);
	t_await(t, "permission_request", "p", NULL);
	json_decref(c_call(t->c, "respondPermission", json_pack("{s:s, s:s, "
	    "s:s}", "sessionId", t->sid, "toolUseId", "p", "decision",
	    "allow")));
	cr_assert_eq(t_drain(t), 8);
	t_expect_results(t, 1, "ok:ok,unk:unknown_tool,inv:invalid_input,"
	    "fail:exit,sig:signal,sp:spawn_failed,un:ok,p:ok");
	for (i = 0; i < sizeof ids / sizeof *ids; i++) {
		snprintf(k, sizeof k, "1/%s", ids[i]);
		json_object_set_new(added, k, json_true());
	}
	/* Nothing more comes later either. */
	t_sync(t);
	t_expect_paired(t, added);
	/* The pull interface tells the same story. */
	ev = c_call(t->c, "events", json_pack("{s:s, s:i}", "sessionId",
	    t->sid, "since", 0));
	count = 0;
	json_array_foreach(json_object_get(ev, "notifications"), i, n)
		if (strcmp(e2e_str(n, "method"), "tool_result") == 0)
			count++;
	cr_assert_eq(count, 8);
	json_decref(ev);
	json_decref(added);
	t_close(t);
}

Test(S10, exactly_one_result_each_when_aborts_race_completions)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *added = json_object();
	static const char *names[] = { "a", "b", "c", "d", "e", "f", "g" };
	char id[16], k[64], script[64];
	int turn, j;

	for (turn = 1; turn <= 16; turn++) {
		snprintf(id, sizeof id, "a%d", turn);
		snprintf(script, sizeof script, "sleep 0.0%d", turn % 4);
		t_add(t, id, "safe_cancel", script);
		snprintf(id, sizeof id, "b%d", turn);
		snprintf(script, sizeof script, "sleep 0.0%d", (turn + 1) % 4);
		t_add(t, id, "safe", script);
		snprintf(id, sizeof id, "c%d", turn);
		t_add(t, id, "unsafe_cancel", "echo c");
		snprintf(id, sizeof id, "d%d", turn);
		t_add(t, id, "no_such_tool", "x");
		snprintf(id, sizeof id, "e%d", turn);
		t_add(t, id, "safe_flag", turn % 3 == 0 ? "exit 1" : "true");
		snprintf(id, sizeof id, "f%d", turn);
		t_add(t, id, "unsafe", "echo f");
		/* Abort at varying points of the tools' lives. */
		usleep((useconds_t)(turn % 5) * 8000);
		t_abort(t, turn % 2 ? "interrupt" : "cancel");
		if (turn % 3 == 1)
			t_abort(t, turn % 2 ? "cancel" : "interrupt");
		snprintf(id, sizeof id, "g%d", turn);
		t_add(t, id, "safe", "echo g");
		cr_assert_eq(t_drain(t), 7, "turn %d", turn);
		for (j = 0; j < 7; j++) {
			snprintf(k, sizeof k, "%d/%s%d", turn, names[j], turn);
			json_object_set_new(added, k, json_true());
		}
	}
	t_sync(t);
	t_expect_paired(t, added);
	cr_assert_eq(t_count(t, "turn_end", NULL, NULL), 16);
	json_decref(added);
	t_close(t);
}

/* ------------------------------------------------------------------ S15 */

Test(S15, state_tells_interruptible_and_in_progress_on_each_change)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *st;

	t_add(t, "sc", "safe_cancel", GATE("go_sc"));
	t_expect_state(t, 1, "true:sc");
	t_add(t, "sb", "safe", GATE("go_sb"));
	t_expect_state(t, 2, "false:sc,sb");
	/* A queued tool is not in progress: no change, no state. */
	cr_assert_str_eq(t_add(t, "u", "unsafe_cancel", GATE("go_u")),
	    "queued");
	t_sync(t);
	cr_assert_eq(t_count(t, "state", NULL, NULL), 2);
	st = c_call(t->c, "status", json_pack("{s:s}", "sessionId", t->sid));
	cr_assert(json_is_false(json_object_get(st, "interruptible")));
	json_decref(st);

	t_go(t, "go_sb");
	t_expect_state(t, 3, "true:sc");
	st = c_call(t->c, "status", json_pack("{s:s}", "sessionId", t->sid));
	cr_assert(json_is_true(json_object_get(st, "interruptible")));
	json_decref(st);
	/* sc ends and u starts in one event. */
	t_go(t, "go_sc");
	t_expect_state(t, 4, "true:u");
	t_go(t, "go_u");
	t_expect_state(t, 5, "false:");
	cr_assert_eq(t_drain(t), 3);
	t_sync(t);
	cr_assert_eq(t_count(t, "state", NULL, NULL), 5,
	    "a state notification without a change");
	t_close(t);
}

Test(S15, an_interrupt_leaves_the_block_tools_in_progress)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	t_add(t, "sc", "safe_cancel", GATE("never"));
	t_expect_state(t, 1, "true:sc");
	t_add(t, "sb", "safe", GATE("go_sb"));
	t_expect_state(t, 2, "false:sc,sb");
	t_abort(t, "interrupt");
	t_expect_state(t, 3, "false:sb");
	t_go(t, "go_sb");
	t_expect_state(t, 4, "false:");
	cr_assert_eq(t_drain(t), 2);
	t_sync(t);
	cr_assert_eq(t_count(t, "state", NULL, NULL), 4);
	t_close(t);
}

Test(S15, a_tool_waiting_for_permission_is_in_progress)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);

	t_add(t, "p", "perm", GATE("go_p"));
	t_await(t, "permission_request", "p", NULL);
	t_expect_state(t, 1, "false:p");
	t_add(t, "q", "perm", "echo q");
	t_await(t, "permission_request", "q", NULL);
	t_expect_state(t, 2, "false:p,q");
	/* Allowed, p runs: still in progress, still not interruptible. */
	json_decref(c_call(t->c, "respondPermission", json_pack("{s:s, s:s, "
	    "s:s}", "sessionId", t->sid, "toolUseId", "p", "decision",
	    "allow")));
	t_await(t, "tool_status", "p", "executing");
	t_sync(t);
	cr_assert_eq(t_count(t, "state", NULL, NULL), 2);
	json_decref(c_call(t->c, "respondPermission", json_pack("{s:s, s:s, "
	    "s:s}", "sessionId", t->sid, "toolUseId", "q", "decision",
	    "allow")));
	t_expect_state(t, 3, "false:p");
	t_go(t, "go_p");
	t_expect_state(t, 4, "false:");
	cr_assert_eq(t_drain(t), 2);
	t_close(t);
}

Test(S15, in_progress_holds_only_current_turn_tools)
{
	struct t *t = t_open(d_start(NULL), 0, NULL);
	json_t *st, *r;
	int n;

	t_add(t, "sb", "safe", GATE("go_sb") "echo sb");
	t_expect_state(t, 1, "false:sb");
	r = c_call(t->c, "discard", json_pack("{s:s}", "sessionId", t->sid));
	json_decref(r);
	t_await(t, "turn_end", NULL, NULL);
	/* sb runs on silently, but is no tool of the current turn. */
	st = t_await_n(t, "state", NULL, NULL, 2);
	cr_assert_eq(json_array_size(json_object_get(st, "inProgress")), 0);
	t_add(t, "n", "safe_cancel", GATE("go_n"));
	st = t_await_n(t, "state", NULL, NULL, 3);
	cr_assert_eq(json_array_size(json_object_get(st, "inProgress")), 1);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(st,
	    "inProgress"), 0)), "n");
	t_go(t, "go_sb");
	t_go(t, "go_n");
	cr_assert_eq(t_drain(t), 1);
	cr_assert(d_wait_no_leftovers(t->d, WAIT_MS));
	t_sync(t);
	n = t_count(t, "state", NULL, NULL);
	st = t_find_n(t, "state", NULL, NULL, n);
	cr_assert_eq(json_array_size(json_object_get(st, "inProgress")), 0);
	cr_assert(json_is_false(json_object_get(st, "interruptible")));
	cr_assert_null(t_find(t, "tool_result", "sb", NULL));
	t_close(t);
}
