/*
 * Rules S11-S14 and S16-S20 of doc/design.md §2 end to end, as a client sees
 * them over the wire: the real daemon, real tool processes. What ran when is
 * proven by the tools' own timestamps and marker files, and tools that must
 * stay put wait for a file the test creates, so no test depends on a sleep
 * being long enough.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* A ToolDef body that runs input.command with /bin/sh -c. */
#define SH "\"command\": [\"/bin/sh\", \"-c\", \"{command}\"], " \
	"\"inputSchema\": {\"type\": \"object\", \"properties\": " \
	"{\"command\": {\"type\": \"string\"}}, \"required\": [\"command\"]}"

/* Every session gets these: unsafe or safe, cancel or block. */
#define STD_TOOLS "[" \
	"{\"name\": \"u_cancel\", " SH ", \"interruptBehavior\": \"cancel\"}," \
	"{\"name\": \"u_block\", " SH "}," \
	"{\"name\": \"s_cancel\", " SH ", \"concurrencySafe\": true, " \
	"\"interruptBehavior\": \"cancel\"}," \
	"{\"name\": \"s_block\", " SH ", \"concurrencySafe\": true}]"

/* Shell: wait until the test creates file F (in the session's cwd). */
#define WAIT_FOR(f) "while [ ! -e " f " ]; do sleep 0.01; done"
/* Shell: the time in ns into file F, atomically: a reader never sees half. */
#define STAMP(f) "date +%s%N > " f ".tmp && mv " f ".tmp " f

#define INTERRUPTED "<tool_use_error>Interrupted by user</tool_use_error>"

#define START(...) d_start(__VA_ARGS__)

TestSuite(S11, .fini = e2e_fini);
TestSuite(S12, .fini = e2e_fini);
TestSuite(S13, .fini = e2e_fini);
TestSuite(S14, .fini = e2e_fini);
TestSuite(S16, .fini = e2e_fini);
TestSuite(S17, .fini = e2e_fini);
TestSuite(S18, .fini = e2e_fini);
TestSuite(S19, .fini = e2e_fini);
TestSuite(S20, .fini = e2e_fini);

/*
 * A session whose cwd is the daemon's temporary directory, so tools and the
 * test share marker files by relative name; with the standard tools, the
 * tools of `extra` (a JSON array text) and the members of `params` (a JSON
 * object text) on top. Subscribed.
 */
static json_t *
session_with(struct client *c, struct daemon *d, const char *extra,
    const char *params)
{
	json_t *tools = e2e_json(STD_TOOLS), *p, *x;

	if (extra != NULL) {
		x = e2e_json(extra);
		json_array_extend(tools, x);
		json_decref(x);
	}
	p = e2e_json(params != NULL ? params : "{}");
	json_object_set_new(p, "cwd", json_string(d->dir));
	json_object_set_new(p, "tools", tools);
	return c_session(c, p);
}

static json_t *
session(struct client *c, struct daemon *d)
{
	return session_with(c, d, NULL, NULL);
}

/* addTool {command: cmd}; checks the status right after the add when
 * want is not NULL; returns the turn the tool joined. */
static json_int_t
add(struct client *c, json_t *sid, const char *id, const char *name,
    const char *cmd, const char *want)
{
	json_t *r = c_call(c, "addTool", json_pack(
	    "{s:O, s:{s:s, s:s, s:{s:s}}}", "sessionId", sid, "toolUse",
	    "id", id, "name", name, "input", "command", cmd));
	json_int_t turn = e2e_int(r, "turn");

	if (want != NULL)
		cr_assert_str_eq(e2e_str(r, "status"), want,
		    "tool %s is %s right after addTool, expected %s", id,
		    e2e_str(r, "status"), want);
	json_decref(r);
	return turn;
}

/* A method that takes only the session and returns its result. */
static json_t *
call_s(struct client *c, const char *method, json_t *sid)
{
	return c_call(c, method, json_pack("{s:O}", "sessionId", sid));
}

/* The error code of a method that takes only the session. */
static json_int_t
call_s_error(struct client *c, const char *method, json_t *sid)
{
	json_t *e = c_call_error(c, method, json_pack("{s:O}", "sessionId",
	    sid));
	json_int_t code = e2e_int(e, "code");

	json_decref(e);
	return code;
}

/* The status of one tool of the current turn, from `status` (static). */
static const char *
status_of(struct client *c, json_t *sid, const char *id)
{
	static char out[32];
	json_t *r = call_s(c, "status", sid), *t;
	size_t i;

	out[0] = '\0';
	json_array_foreach(json_object_get(r, "tools"), i, t)
		if (strcmp(e2e_str(t, "id"), id) == 0)
			snprintf(out, sizeof out, "%s", e2e_str(t, "status"));
	json_decref(r);
	cr_assert(out[0] != '\0', "status does not list tool %s", id);
	return out;
}

/* Send a request without waiting for its reply; returns its id. */
static int
send_req(struct client *c, const char *method, json_t *params)
{
	int id = c->next_id++;
	json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0",
	    "id", id, "method", method, "params", params);
	char *text = json_dumps(req, JSON_COMPACT);

	c_send_raw(c, text);
	free(text);
	json_decref(req);
	return id;
}

/*
 * The reply (whole message) to request id, or NULL if none came within ms.
 * Notifications read meanwhile are queued, so when it returns the queue
 * holds exactly what arrived before the reply.
 */
static json_t *
reply_to(struct client *c, int id, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
	long long left;
	json_t *msg;

	for (;;) {
		left = until - e2e_now_ms();
		msg = c_read(c, left > 0 ? (int)left : 0);
		if (msg == NULL)
			return NULL;
		if (json_object_get(msg, "id") == NULL) {
			json_array_append_new(c->queue, msg);
			continue;
		}
		cr_assert_eq(e2e_int(msg, "id"), id, "a reply to another request");
		return msg;
	}
}

/* Read up to and including the next notification `method`, appending all
 * read to log; returns its params (owned by log). */
static json_t *
until_method(struct client *c, json_t *log, const char *method, int ms)
{
	json_t *list = c_until(c, method, ms), *p;

	p = json_object_get(json_array_get(list, json_array_size(list) - 1),
	    "params");
	json_array_extend(log, list);
	json_decref(list);
	return p;
}

/* Read until the tool_result of `id`, appending all read to log; returns
 * its params (owned by log). */
static json_t *
until_result(struct client *c, json_t *log, const char *id, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
	json_t *p;

	for (;;) {
		cr_assert(e2e_now_ms() < until, "no tool_result for %s within "
		    "%d ms", id, ms);
		p = until_method(c, log, "tool_result",
		    (int)(until - e2e_now_ms()));
		if (strcmp(e2e_str(p, "toolUseId"), id) == 0)
			return p;
	}
}

/* The params of the tool_result of id in a list of notifications. */
static json_t *
result_in(json_t *list, const char *id)
{
	json_t *msg, *p;
	size_t i;

	json_array_foreach(list, i, msg) {
		p = json_object_get(msg, "params");
		if (strcmp(e2e_str(msg, "method"), "tool_result") == 0 &&
		    strcmp(e2e_str(p, "toolUseId"), id) == 0)
			return p;
	}
	cr_assert_fail("no tool_result for %s", id);
	return NULL;
}

/* The position of the first notification `method` (of tool id when not
 * NULL) in a list, or -1. */
static long
index_of(json_t *list, const char *method, const char *id)
{
	json_t *msg;
	const char *tid;
	size_t i;

	json_array_foreach(list, i, msg) {
		tid = e2e_str(json_object_get(msg, "params"), "toolUseId");
		if (strcmp(e2e_str(msg, "method"), method) == 0 && (id == NULL ||
		    (tid != NULL && strcmp(tid, id) == 0)))
			return (long)i;
	}
	return -1;
}

/* "id:reason,..." of the tool_results of turn in a list (free it). */
static char *
results_of_turn(json_t *list, json_int_t turn)
{
	json_t *keep = json_array(), *msg;
	char *out;
	size_t i;

	json_array_foreach(list, i, msg)
		if (e2e_int(json_object_get(msg, "params"), "turn") == turn)
			json_array_append(keep, msg);
	out = e2e_results(keep);
	json_decref(keep);
	return out;
}

/*
 * drain, and read up to its turn_end (an older turn_end may still be
 * queued); checks the drained turn and returns "id:reason,..." of the
 * turn's results (free it): those in log too when log is not NULL (the
 * notifications read go there).
 */
static char *
drain(struct client *c, json_t *sid, json_int_t turn, json_t *log)
{
	json_t *r = call_s(c, "drain", sid), *all = json_array(), *p;
	char *got;

	cr_assert_eq(e2e_int(r, "turn"), turn, "drained turn %lld, expected %lld",
	    (long long)e2e_int(r, "turn"), (long long)turn);
	json_decref(r);
	do
		p = until_method(c, all, "turn_end", 5000);
	while (e2e_int(p, "turn") != turn);
	cr_assert_str_eq(e2e_str(p, "reason"), "drained");
	if (log != NULL) {
		json_array_extend(log, all);
		got = results_of_turn(log, turn);
	} else
		got = results_of_turn(all, turn);
	json_decref(all);
	return got;
}

static void
drain_expect(struct client *c, json_t *sid, json_int_t turn, json_t *log,
    const char *want)
{
	char *got = drain(c, sid, turn, log);

	cr_assert_str_eq(got, want);
	free(got);
}

static bool
exists(struct daemon *d, const char *name)
{
	struct stat st;

	return stat(d_path(d, name), &st) == 0;
}

static void
touch(struct daemon *d, const char *name)
{
	FILE *f = fopen(d_path(d, name), "we");

	cr_assert(f != NULL, "cannot create %s", name);
	fclose(f);
}

static void
wait_file(struct daemon *d, const char *name, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);

	while (!exists(d, name)) {
		cr_assert(e2e_now_ms() < until, "no file %s after %d ms", name,
		    ms);
		usleep(5000);
	}
}

/*
 * A file a tool writes with `echo N > name`: it exists from the redirect,
 * before the echo, so wait for its newline too (a tool killed in between,
 * as a cgroup kill may, would leave it empty).
 */
static void
wait_written(struct daemon *d, const char *name, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
	char *text;

	for (;;) {
		text = e2e_read_file(d_path(d, name), NULL);
		if (text != NULL && strchr(text, '\n') != NULL) {
			free(text);
			return;
		}
		free(text);
		cr_assert(e2e_now_ms() < until, "%s not written after %d ms",
		    name, ms);
		usleep(5000);
	}
}

/* The number in a file the test or a tool wrote (a STAMP or a pid). */
static long long
number_in(struct daemon *d, const char *name)
{
	FILE *f = fopen(d_path(d, name), "re");
	long long n = -1;

	cr_assert(f != NULL, "no file %s", name);
	cr_assert_eq(fscanf(f, "%lld", &n), 1, "no number in %s", name);
	fclose(f);
	return n;
}

/* A STAMP file in milliseconds, comparable with e2e_now_ms. */
static long long
stamp_ms(struct daemon *d, const char *name)
{
	return number_in(d, name) / 1000000;
}

/* Is pid a live process (a zombie is dead)? */
static bool
pid_alive(long long pid)
{
	char path[64], state = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%lld/stat", pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(f);
	return state != 'Z';
}

static void
wait_pid_dead(long long pid, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);

	while (pid_alive(pid)) {
		cr_assert(e2e_now_ms() < until, "process %lld still alive "
		    "after %d ms", pid, ms);
		usleep(5000);
	}
}

/* The text of a whole file (free it); its size in *len. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	cr_assert(f != NULL, "cannot open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/*
 * S11: after discard nothing of the turn reaches the client; the cancel tool
 * dies, the queued one never starts, the block one runs on silently.
 */
Test(S11, discard_delivers_nothing_more_of_the_turn)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *log = json_array(), *p, *r, *msg;
	size_t i;

	add(c, sid, "a", "s_cancel", "echo $$ > a.pid; "
	    "echo '{\"progress\":\"early\"}' >&3; sleep 30", "executing");
	add(c, sid, "b", "s_block", WAIT_FOR("go") "; "
	    "echo '{\"progress\":\"late\"}' >&3; echo b-out; " STAMP("b_end"),
	    "executing");
	add(c, sid, "q", "u_block", "touch q_ran", "queued");
	/* Progress flows before the discard, so its absence later means
	 * something. */
	p = until_method(c, log, "progress", 5000);
	cr_assert_str_eq(e2e_str(p, "toolUseId"), "a");

	r = call_s(c, "discard", sid);
	cr_assert_eq(e2e_int(r, "discardedTurn"), 1);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);
	p = until_method(c, log, "turn_end", 5000);
	cr_assert_eq(e2e_int(p, "turn"), 1);
	cr_assert_str_eq(e2e_str(p, "reason"), "discarded");

	/* The cancel tool is killed, the block tool goes on to its end. */
	wait_pid_dead(number_in(d, "a.pid"), 5000);
	touch(d, "go");
	wait_file(d, "b_end", 10000);

	/* An unsafe tool of turn 2 starts only after b ended, so anything b
	 * could still have sent would be on the wire before its result. */
	cr_assert_eq(add(c, sid, "x", "u_block", "echo x", NULL), 2);
	drain_expect(c, sid, 2, log, "x:ok");

	json_array_foreach(log, i, msg) {
		p = json_object_get(msg, "params");
		if (e2e_int(p, "turn") != 1)
			continue;
		cr_assert(strcmp(e2e_str(msg, "method"), "tool_result") != 0,
		    "a tool_result of the discarded turn: %s",
		    e2e_str(p, "toolUseId"));
		if (strcmp(e2e_str(msg, "method"), "progress") == 0)
			cr_assert_str_eq(e2e_str(p, "data"), "early",
			    "progress of the discarded turn after discard");
		if (strcmp(e2e_str(msg, "method"), "tool_status") == 0)
			cr_assert(strcmp(e2e_str(p, "toolUseId"), "q") != 0 ||
			    strcmp(e2e_str(p, "status"), "executing") != 0,
			    "the queued tool started");
	}
	cr_assert(!exists(d, "q_ran"), "a queued tool of a discarded turn ran");
	/* "Nothing more of that turn": after its turn_end, no notification
	 * of any of its tools at all. */
	for (i = (size_t)index_of(log, "turn_end", NULL) + 1;
	    i < json_array_size(log); i++) {
		msg = json_array_get(log, i);
		p = json_object_get(msg, "params");
		cr_assert(e2e_int(p, "turn") != 1 || e2e_str(p, "toolUseId") == NULL,
		    "%s of tool %s of the discarded turn after its turn_end",
		    e2e_str(msg, "method"), e2e_str(p, "toolUseId"));
	}

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S11: a block tool of a discarded turn still counts as executing for S3. */
Test(S11, block_tool_of_discarded_turn_blocks_the_next_turn)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *r;

	add(c, sid, "b", "u_block", STAMP("b_start") "; " WAIT_FOR("go")
	    "; " STAMP("b_end"), "executing");
	wait_file(d, "b_start", 5000);
	r = call_s(c, "discard", sid);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);

	cr_assert_eq(add(c, sid, "x", "u_cancel", STAMP("x_start"), "queued"),
	    2);
	cr_assert_eq(add(c, sid, "s", "s_block", STAMP("s_start"), "queued"),
	    2);
	touch(d, "go");
	drain_expect(c, sid, 2, NULL, "x:ok,s:ok");
	cr_assert_geq(number_in(d, "x_start"), number_in(d, "b_end"),
	    "an unsafe tool started while a block tool of the discarded turn "
	    "still ran");
	cr_assert_geq(number_in(d, "s_start"), number_in(d, "b_end"),
	    "a safe tool started while an unsafe block tool of the discarded "
	    "turn still ran");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/*
 * S11: a cancel tool killed by discard runs until it is dead (its group
 * ignores SIGTERM: it lives for the kill grace); an unsafe tool of the next
 * turn starts only then.
 */
Test(S11, killed_cancel_tool_blocks_next_turn_until_dead)
{
	struct daemon *d = START("--kill-grace-ms", "500", NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *log = json_array();

	add(c, sid, "k", "u_cancel", "trap '' TERM; echo $$ > k.pid; "
	    "sleep 30", "executing");
	wait_written(d, "k.pid", 5000);
	json_decref(call_s(c, "discard", sid));
	add(c, sid, "x", "u_block", "p=$(cat k.pid); if [ -e /proc/$p ] && "
	    "[ \"$(cut -d' ' -f3 /proc/$p/stat)\" != Z ]; then echo alive; "
	    "else echo dead; fi", NULL);
	drain_expect(c, sid, 2, log, "x:ok");
	cr_assert_str_eq(e2e_content(result_in(log, "x")), "dead\n",
	    "an unsafe tool started while a killed tool of the discarded turn "
	    "still ran");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S11/S12: a drain pending when its turn is discarded gets -32005. */
Test(S11, pending_drain_gets_state_conflict)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d), *c2 = c_open(d);
	json_t *sid = session(c, d), *r, *err;
	int id;

	add(c, sid, "a", "u_cancel", "sleep 30", "executing");
	id = send_req(c2, "drain", json_pack("{s:O}", "sessionId", sid));
	/* c2's lines are handled in order: once ping is answered, the drain
	 * is pending (it cannot end while a sleeps). */
	json_decref(c_call(c2, "ping", NULL));
	cr_assert_null(reply_to(c2, id, 100), "drain answered while a tool "
	    "of the turn runs");

	r = call_s(c, "discard", sid);
	cr_assert_eq(e2e_int(r, "discardedTurn"), 1);
	json_decref(r);
	r = reply_to(c2, id, 5000);
	cr_assert_not_null(r, "the pending drain got no reply");
	err = json_object_get(r, "error");
	cr_assert_not_null(err, "the pending drain of a discarded turn "
	    "succeeded");
	cr_assert_eq(e2e_int(err, "code"), -32005);
	json_decref(r);
	json_decref(c_wait(c, "turn_end", 5000));

	json_decref(sid);
	c_close(c2);
	c_close(c);
	d_stop(d);
}

/* S11: an empty turn can be discarded too; turn numbers go on. */
Test(S11, discard_empty_turn_starts_next)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *r, *n;

	r = call_s(c, "discard", sid);
	cr_assert_eq(e2e_int(r, "discardedTurn"), 1);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);
	n = c_wait(c, "turn_end", 5000);
	cr_assert_eq(e2e_int(json_object_get(n, "params"), "turn"), 1);
	cr_assert_str_eq(e2e_str(json_object_get(n, "params"), "reason"),
	    "discarded");
	json_decref(n);
	r = call_s(c, "status", sid);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);
	/* The same tool-use id is fine in a new turn. */
	cr_assert_eq(add(c, sid, "a", "u_block", "true", NULL), 2);
	r = call_s(c, "discard", sid);
	cr_assert_eq(e2e_int(r, "discardedTurn"), 2);
	cr_assert_eq(e2e_int(r, "turn"), 3);
	json_decref(r);
	cr_assert_eq(add(c, sid, "a", "u_block", "true", NULL), 3);
	drain_expect(c, sid, 3, NULL, "a:ok");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S12: a drain of a turn without tools answers at once, after turn_end. */
Test(S12, empty_turn_drains_at_once)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *r, *n;
	long long t0 = e2e_now_ms();
	long i;

	r = call_s(c, "drain", sid);
	cr_assert_lt(e2e_now_ms() - t0, e2e_ms(1000), "drain of an empty turn "
	    "took %lld ms", e2e_now_ms() - t0);
	cr_assert_eq(e2e_int(r, "turn"), 1);
	cr_assert_eq(e2e_int(r, "results"), 0);
	json_decref(r);
	/* On the wire before the reply: already in the queue. */
	i = index_of(c->queue, "turn_end", NULL);
	cr_assert_geq(i, 0, "the drain reply came before turn_end");
	n = json_object_get(json_array_get(c->queue, (size_t)i), "params");
	cr_assert_eq(e2e_int(n, "turn"), 1);
	cr_assert_str_eq(e2e_str(n, "reason"), "drained");
	json_array_clear(c->queue);

	r = call_s(c, "drain", sid);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);
	cr_assert_eq(add(c, sid, "a", "u_block", "echo a", NULL), 3);
	drain_expect(c, sid, 3, NULL, "a:ok");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S12: the reply follows the last tool_result and turn_end on the wire. */
Test(S12, reply_follows_last_result_and_turn_end)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *r, *q;
	long ra, rb, te;
	int id;

	add(c, sid, "a", "u_block", WAIT_FOR("go") "; echo A", "executing");
	add(c, sid, "b", "s_block", "echo B", "queued");
	json_array_clear(c->queue);
	id = send_req(c, "drain", json_pack("{s:O}", "sessionId", sid));
	cr_assert_null(reply_to(c, id, 300), "drain answered while a tool of "
	    "the turn waits");
	touch(d, "go");
	r = reply_to(c, id, 10000);
	cr_assert_not_null(r, "no drain reply");
	cr_assert_null(json_object_get(r, "error"), "drain failed");
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "turn"), 1);
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "results"), 2);
	json_decref(r);

	/* The queue holds exactly what came before the reply. */
	q = c->queue;
	ra = index_of(q, "tool_result", "a");
	rb = index_of(q, "tool_result", "b");
	te = index_of(q, "turn_end", NULL);
	cr_assert(ra >= 0 && rb >= 0, "a tool_result came after the drain "
	    "reply");
	cr_assert_geq(te, 0, "turn_end came after the drain reply");
	cr_assert_lt(ra, rb);
	cr_assert_lt(rb, te, "turn_end before the last tool_result");
	cr_assert_str_eq(e2e_str(json_object_get(json_array_get(q, (size_t)te),
	    "params"), "reason"), "drained");
	cr_assert_str_eq(e2e_content(result_in(q, "a")), "A\n");
	json_array_clear(q);

	cr_assert_eq(add(c, sid, "c", "u_block", "true", NULL), 2,
	    "the next turn did not start at once");
	drain_expect(c, sid, 2, NULL, "c:ok");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S12: tools added while a drain is pending join the draining turn. */
Test(S12, tools_added_while_draining_join_the_turn)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *r, *q;
	int id;

	add(c, sid, "a", "u_block", WAIT_FOR("go") "; echo A", "executing");
	id = send_req(c, "drain", json_pack("{s:O}", "sessionId", sid));
	/* a waits for go, so the drain is still pending for these. */
	cr_assert_eq(add(c, sid, "b", "s_block", "echo B", "queued"), 1);
	cr_assert_eq(add(c, sid, "c", "nope", "true", NULL), 1);
	touch(d, "go");
	r = reply_to(c, id, 10000);
	cr_assert_not_null(r, "no drain reply");
	cr_assert_null(json_object_get(r, "error"), "drain failed");
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "turn"), 1);
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "results"), 3);
	json_decref(r);
	q = c->queue;
	cr_assert_lt(index_of(q, "tool_result", "c"),
	    index_of(q, "turn_end", NULL));
	cr_assert_geq(index_of(q, "tool_result", "c"), 0);
	cr_assert_str_eq(e2e_content(result_in(q, "b")), "B\n");
	json_array_clear(q);

	r = call_s(c, "status", sid);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "tools")), 0);
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

#define PERM_TOOLS "[" \
	"{\"name\": \"u_perm\", " SH ", \"requiresPermission\": true, " \
	"\"interruptBehavior\": \"cancel\"}," \
	"{\"name\": \"s_perm\", " SH ", \"requiresPermission\": true, " \
	"\"concurrencySafe\": true}]"

static json_t *
respond(struct client *c, json_t *sid, const char *id, const char *decision,
    const char *message, bool want_error)
{
	json_t *p = json_pack("{s:O, s:s, s:s}", "sessionId", sid, "toolUseId",
	    id, "decision", decision);

	if (message != NULL)
		json_object_set_new(p, "message", json_string(message));
	return want_error ? c_call_error(c, "respondPermission", p) :
	    c_call(c, "respondPermission", p);
}

/*
 * S13: the request comes when S3 lets the tool start; from then on it counts
 * as executing; its process starts only on allow.
 */
Test(S13, request_when_s3_allows_and_no_process_before_allow)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *log = json_array(), *p, *r;

	add(c, sid, "x", "u_block", WAIT_FOR("go") "; echo X", "executing");
	add(c, sid, "p", "u_perm", STAMP("p_start") "; echo P; "
	    STAMP("p_end"), "queued");
	add(c, sid, "s", "s_block", STAMP("s_start"), "queued");
	cr_assert_eq(index_of(c->queue, "permission_request", NULL), -1,
	    "permission asked while an unsafe tool executes");
	cr_assert_str_eq(status_of(c, sid, "p"), "queued");

	touch(d, "go");
	p = until_method(c, log, "permission_request", 5000);
	cr_assert_str_eq(e2e_str(p, "toolUseId"), "p");
	cr_assert_str_eq(e2e_str(p, "name"), "u_perm");
	cr_assert_eq(e2e_int(p, "turn"), 1);
	cr_assert_str_eq(e2e_str(json_object_get(p, "input"), "command"),
	    STAMP("p_start") "; echo P; " STAMP("p_end"));
	cr_assert_str_eq(status_of(c, sid, "p"), "waiting_permission");
	/* Waiting for permission counts as executing: the safe s may not
	 * join an unsafe tool. */
	cr_assert_str_eq(status_of(c, sid, "s"), "queued");
	/* Not an ordering proof, only a chance for a wrong spawn to show. */
	usleep((useconds_t)e2e_ms(300) * 1000);
	cr_assert(!exists(d, "p_start"), "the tool ran before allow");
	cr_assert(!exists(d, "s_start"), "a tool started beside a tool "
	    "waiting for permission");

	json_decref(respond(c, sid, "p", "allow", NULL, false));
	drain_expect(c, sid, 1, log, "x:ok,p:ok,s:ok");
	cr_assert_str_eq(e2e_content(result_in(log, "p")), "P\n");
	cr_assert_lt(index_of(log, "permission_request", "p"),
	    index_of(log, "tool_status", "p"));
	cr_assert_geq(number_in(d, "s_start"), number_in(d, "p_end"));
	r = call_s(c, "status", sid);
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13: deny gives permission_denied with the message and hard-aborts the
 * turn as S9: a running block tool is killed, queued and later ones never
 * start. */
Test(S13, deny_hard_aborts_the_turn)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *log = json_array(), *p;

	add(c, sid, "r", "s_block", "echo $$ > r.pid; touch r_ready; "
	    "sleep 30", "executing");
	wait_file(d, "r_ready", 5000);
	add(c, sid, "p", "s_perm", "touch p_ran", "waiting_permission");
	p = until_method(c, log, "permission_request", 5000);
	cr_assert_str_eq(e2e_str(p, "toolUseId"), "p");
	add(c, sid, "q", "u_block", "touch q_ran", "queued");

	json_decref(respond(c, sid, "p", "deny", "not allowed here", false));
	add(c, sid, "z", "u_block", "touch z_ran", NULL);
	drain_expect(c, sid, 1, log, "r:interrupted,p:permission_denied,"
	    "q:interrupted,z:interrupted");

	p = result_in(log, "p");
	cr_assert(e2e_is_error(p));
	cr_assert_str_eq(e2e_content(p), "not allowed here");
	cr_assert_str_eq(e2e_content(result_in(log, "r")), INTERRUPTED);
	cr_assert(e2e_is_error(result_in(log, "r")));
	cr_assert_str_eq(e2e_content(result_in(log, "q")), INTERRUPTED);
	cr_assert_str_eq(e2e_content(result_in(log, "z")), INTERRUPTED);
	cr_assert(!pid_alive(number_in(d, "r.pid")), "the block tool lives on");
	cr_assert(!exists(d, "p_ran"), "a denied tool ran");
	cr_assert(!exists(d, "q_ran"), "a queued tool of an aborted turn ran");
	cr_assert(!exists(d, "z_ran"), "a tool added after deny ran");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13: deny without a message gives the (configured) interrupt message. */
Test(S13, deny_without_message_gives_interrupt_message)
{
	struct daemon *d = START("--interrupt-message", "Stopped: no.",
	    NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *log = json_array(), *p;

	add(c, sid, "p", "u_perm", "touch p_ran", "waiting_permission");
	json_decref(c_wait(c, "permission_request", 5000));
	json_decref(respond(c, sid, "p", "deny", NULL, false));
	drain_expect(c, sid, 1, log, "p:permission_denied");
	p = result_in(log, "p");
	cr_assert(e2e_is_error(p));
	cr_assert_str_eq(e2e_content(p), "Stopped: no.");
	cr_assert(!exists(d, "p_ran"));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13: a tool waiting for permission has not started: interrupt treats it
 * like a queued tool; answering it afterwards is a state conflict. */
Test(S13, waiting_tool_is_treated_as_queued_by_abort)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *log = json_array(), *e;

	add(c, sid, "p", "s_perm", "touch p_ran", "waiting_permission");
	json_decref(c_wait(c, "permission_request", 5000));
	json_decref(c_call(c, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sid, "reason", "interrupt")));
	e = respond(c, sid, "p", "allow", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32005);
	json_decref(e);
	drain_expect(c, sid, 1, log, "p:interrupted");
	cr_assert_str_eq(e2e_content(result_in(log, "p")), INTERRUPTED);
	cr_assert_eq(index_of(log, "tool_status", NULL),
	    index_of(log, "tool_status", "p"));
	cr_assert_str_eq(e2e_str(json_object_get(json_array_get(log,
	    (size_t)index_of(log, "tool_status", "p")), "params"), "status"),
	    "completed", "a tool interrupted while waiting was started");
	cr_assert(!exists(d, "p_ran"));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13 + S7: a sibling error cancels a tool waiting for permission like a
 * queued one; it never runs and can no longer be answered. */
Test(S13, waiting_tool_is_cancelled_by_sibling_error)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *log = json_array(), *e, *sid;

	sid = session_with(c, d, "[{\"name\": \"s_fail\", " SH
	    ", \"concurrencySafe\": true, \"abortSiblingsOnError\": true},"
	    "{\"name\": \"s_perm\", " SH ", \"requiresPermission\": true, "
	    "\"concurrencySafe\": true}]", NULL);
	add(c, sid, "f", "s_fail", WAIT_FOR("go") "; exit 1", "executing");
	add(c, sid, "p", "s_perm", "touch p_ran", "waiting_permission");
	json_decref(c_wait(c, "permission_request", 5000));
	touch(d, "go");
	/* Completed, still in the current turn: no longer waiting. */
	until_result(c, log, "p", 10000);
	e = respond(c, sid, "p", "allow", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32005);
	json_decref(e);
	drain_expect(c, sid, 1, log, "f:exit,p:sibling_error");
	/* DESC: the first 40 characters of the command, then an ellipsis. */
	cr_assert_str_eq(e2e_content(result_in(log, "p")), "<tool_use_error>"
	    "Cancelled: parallel tool call s_fail(while [ ! -e go ]; do sleep "
	    "0.01; done; \xe2\x80\xa6) errored</tool_use_error>");
	cr_assert(!exists(d, "p_ran"));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13 + S11: discard drops a tool waiting for permission like a queued
 * one: it never runs, nothing of it is delivered, it cannot be answered. */
Test(S13, discard_drops_waiting_tool)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *log = json_array(), *e;

	add(c, sid, "p", "u_perm", "touch p_ran", "waiting_permission");
	json_decref(c_wait(c, "permission_request", 5000));
	json_decref(call_s(c, "discard", sid));
	e = respond(c, sid, "p", "allow", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32602, "a tool of a discarded turn "
	    "is not in the current turn");
	json_decref(e);
	/* An unsafe tool of the next turn is not held back by it. */
	add(c, sid, "x", "u_block", "echo x", NULL);
	drain_expect(c, sid, 2, log, "x:ok");
	cr_assert_eq(index_of(log, "tool_result", "p"), -1);
	cr_assert(!exists(d, "p_ran"));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S13: respondPermission errors: unknown id -32602 naming toolUseId; a
 * tool not waiting (never asked, already answered) -32005. */
Test(S13, respond_permission_errors)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, PERM_TOOLS, NULL);
	json_t *e;

	add(c, sid, "x", "u_block", "echo X", NULL);
	add(c, sid, "p", "u_perm", "echo P", NULL);
	json_decref(c_wait(c, "permission_request", 5000));

	e = respond(c, sid, "nope", "allow", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32602);
	cr_assert_str_eq(e2e_str(json_object_get(e, "data"), "field"),
	    "toolUseId");
	json_decref(e);
	e = respond(c, sid, "x", "allow", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32005, "a tool never asked");
	json_decref(e);
	json_decref(respond(c, sid, "p", "allow", NULL, false));
	e = respond(c, sid, "p", "deny", NULL, true);
	cr_assert_eq(e2e_int(e, "code"), -32005, "a tool already answered");
	json_decref(e);
	drain_expect(c, sid, 1, NULL, "x:ok,p:ok");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* Shell: the cwd and the test's variables, one per line. */
#define SHOW_CONTEXT "pwd -P; env | grep -E '^(FOO|BAR|KEEP)=' | sort"

/* What SHOW_CONTEXT prints in dir/sub (sub may be "") with these lines. */
static char *
context_text(struct daemon *d, const char *sub, const char *vars)
{
	char real[PATH_MAX], *out;

	cr_assert_not_null(realpath(d->dir, real));
	if (asprintf(&out, "%s%s%s\n%s", real, *sub ? "/" : "", sub,
	    vars) < 0)
		abort();
	return out;
}

static void
assert_context(json_t *result, struct daemon *d, const char *sub,
    const char *vars)
{
	char *want = context_text(d, sub, vars);

	cr_assert_str_eq(e2e_content(result), want);
	free(want);
}

/* S14: an unsafe tool's context changes cwd (relative to the current one)
 * and env of tools started later, also when it exits non-zero. */
Test(S14, context_changes_cwd_and_env_of_later_tools)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid, *log = json_array();
	char *cmd;

	cr_assert_eq(mkdir(d_path(d, "sub"), 0700), 0);
	cr_assert_eq(mkdir(d_path(d, "sub/deeper"), 0700), 0);
	sid = session_with(c, d, NULL,
	    "{\"env\": {\"FOO\": \"0\", \"BAR\": \"b\", \"KEEP\": \"k\"}}");
	add(c, sid, "v0", "u_block", SHOW_CONTEXT, NULL);
	add(c, sid, "m", "u_block", "echo '{\"context\":{\"cwd\":\"sub\","
	    "\"env\":{\"FOO\":\"1\",\"BAR\":null}}}' >&3; echo set", NULL);
	add(c, sid, "v1", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 1, log, "v0:ok,m:ok,v1:ok");
	assert_context(result_in(log, "v0"), d, "", "BAR=b\nFOO=0\nKEEP=k\n");
	assert_context(result_in(log, "v1"), d, "sub", "FOO=1\nKEEP=k\n");
	json_array_clear(log);

	/* Next turn: still in effect; a non-zero exit still applies. */
	add(c, sid, "v2", "u_block", SHOW_CONTEXT, NULL);
	add(c, sid, "m2", "u_block", "echo '{\"context\":{\"cwd\":\"deeper\","
	    "\"env\":{\"BAR\":\"2\"}}}' >&3; exit 3", NULL);
	add(c, sid, "v3", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 2, log, "v2:ok,m2:exit,v3:ok");
	assert_context(result_in(log, "v2"), d, "sub", "FOO=1\nKEEP=k\n");
	assert_context(result_in(log, "v3"), d, "sub/deeper",
	    "BAR=2\nFOO=1\nKEEP=k\n");
	json_array_clear(log);

	/* An absolute cwd replaces the current one. */
	if (asprintf(&cmd, "echo '{\"context\":{\"cwd\":\"%s/sub\","
	    "\"env\":{\"FOO\":null}}}' >&3", d->dir) < 0)
		abort();
	add(c, sid, "m3", "u_block", cmd, NULL);
	add(c, sid, "v4", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 3, log, "m3:ok,v4:ok");
	assert_context(result_in(log, "v4"), d, "sub", "BAR=2\nKEEP=k\n");
	free(cmd);

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S14: a context line without a final newline counts at EOF (fd 3 is
 * NDJSON, PROTOCOL.md §7). */
Test(S14, context_line_without_newline_counts)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid, *log = json_array();

	cr_assert_eq(mkdir(d_path(d, "sub"), 0700), 0);
	sid = session_with(c, d, NULL, "{\"env\": {\"KEEP\": \"k\"}}");
	add(c, sid, "m", "u_block", "printf '{\"context\":{\"cwd\":\"sub\"}}' "
	    ">&3", NULL);
	add(c, sid, "v", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 1, log, "m:ok,v:ok");
	assert_context(result_in(log, "v"), d, "sub", "KEEP=k\n");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S14: the context of a killed tool (interrupted, timed out) is dropped. */
Test(S14, killed_tool_context_is_not_applied)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d);
	json_t *sid, *log = json_array(), *p;

	cr_assert_eq(mkdir(d_path(d, "sub"), 0700), 0);
	sid = session_with(c, d, "[{\"name\": \"u_slow\", " SH
	    ", \"timeoutMs\": 300}]", "{\"env\": {\"KEEP\": \"k\"}}");
	add(c, sid, "k", "u_cancel", "echo '{\"context\":{\"cwd\":\"sub\","
	    "\"env\":{\"FOO\":\"2\"}}}' >&3; echo '{\"progress\":\"emitted\"}' "
	    ">&3; sleep 30", "executing");
	/* The progress line follows the context line on fd 3: once it is
	 * here, the daemon has read the context. */
	p = until_method(c, log, "progress", 5000);
	cr_assert_str_eq(e2e_str(p, "toolUseId"), "k");
	json_decref(c_call(c, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sid, "reason", "interrupt")));
	drain_expect(c, sid, 1, log, "k:interrupted");

	add(c, sid, "t", "u_slow", "echo '{\"context\":{\"cwd\":\"sub\","
	    "\"env\":{\"FOO\":\"3\"}}}' >&3; echo '{\"progress\":\"emitted\"}' "
	    ">&3; sleep 30", "executing");
	add(c, sid, "v", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 2, log, "t:timeout,v:ok");
	cr_assert_geq(index_of(log, "progress", "t"), 0, "the timed-out tool "
	    "was killed before its context was read; the test proves nothing");
	assert_context(result_in(log, "v"), d, "", "KEEP=k\n");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S14: a safe tool's context is ignored and reported in meta.warnings. */
Test(S14, safe_tool_context_is_ignored_with_a_warning)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid, *log = json_array(), *p, *w, *s;
	bool found = false;
	size_t i;

	cr_assert_eq(mkdir(d_path(d, "sub"), 0700), 0);
	sid = session_with(c, d, NULL, "{\"env\": {\"KEEP\": \"k\"}}");
	add(c, sid, "s", "s_block", "echo '{\"context\":{\"cwd\":\"sub\","
	    "\"env\":{\"FOO\":\"3\"}}}' >&3; echo safe", "executing");
	add(c, sid, "v", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(c, sid, 1, log, "s:ok,v:ok");
	p = result_in(log, "s");
	cr_assert_str_eq(e2e_content(p), "safe\n");
	w = json_object_get(json_object_get(p, "meta"), "warnings");
	json_array_foreach(w, i, s)
		if (json_is_string(s) && strstr(json_string_value(s),
		    "context modifier ignored") != NULL)
			found = true;
	cr_assert(found, "no warning about the ignored context modifier");
	cr_assert_eq(json_array_size(json_object_get(json_object_get(
	    result_in(log, "v"), "meta"), "warnings")), 0);
	assert_context(result_in(log, "v"), d, "", "KEEP=k\n");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* An unsafe cancel tool that times out after 500 ms and, failing, cancels
 * its siblings. */
#define SLOW_TOOL "[{\"name\": \"u_slow\", " SH ", \"timeoutMs\": 500, " \
	"\"interruptBehavior\": \"cancel\", \"abortSiblingsOnError\": true}]"

/*
 * S16: past timeoutMs the group gets SIGTERM, SIGKILL after the grace; the
 * result says so and comes when the process is dead. The tool must have
 * started before its timeout (it notes its start, then says "started"), so
 * the timeout and the grace grow with the test time scale: a slow machine
 * may take longer than 500 ms to start a shell.
 */
Test(S16, timeout_term_then_kill_after_grace)
{
	int timeout = e2e_ms(500), grace = e2e_ms(400);
	char tools[512], grace_arg[16], said[64];
	struct daemon *d;
	struct client *c;
	json_t *sid, *log = json_array(), *p, *meta;
	long long start, term;

	snprintf(tools, sizeof tools, "[{\"name\": \"u_slow\", " SH
	    ", \"timeoutMs\": %d}]", timeout);
	snprintf(grace_arg, sizeof grace_arg, "%d", grace);
	snprintf(said, sizeof said, "timed out after %d ms", timeout);
	d = START("--kill-grace-ms", grace_arg, NULL);
	c = c_open(d);
	sid = session_with(c, d, tools, NULL);

	/* The shell survives TERM (its trap notes the time), so only the
	 * KILL ends it. */
	add(c, sid, "t", "u_slow", "trap 'date +%s%N > term_at' TERM; "
	    STAMP("t_start") "; echo started; while :; do sleep 0.05; done",
	    "executing");
	p = until_result(c, log, "t", 10000);
	cr_assert_eq(d_leftovers(d), 0, "the timeout result came before the "
	    "process was dead");
	meta = json_object_get(p, "meta");
	cr_assert_str_eq(e2e_reason(p), "timeout");
	cr_assert(e2e_is_error(p));
	cr_assert(strstr(e2e_content(p), "started\n") == e2e_content(p),
	    "the output before the timeout is lost: %s", e2e_content(p));
	cr_assert_not_null(strstr(e2e_content(p), said), "content: %s",
	    e2e_content(p));
	cr_assert_eq(e2e_int(meta, "signal"), 9, "it died of SIGKILL");

	/*
	 * The trap ran, so TERM came first; the daemon's own clock says the
	 * process lived through the timeout and the grace (the trap's stamp
	 * is no measure: under load it is written late). Less 10 ms:
	 * libevent's timers run on the coarse monotonic clock, a tick (up to
	 * 4 ms) apart from the one durationMs is read from, twice.
	 */
	start = stamp_ms(d, "t_start");
	term = stamp_ms(d, "term_at");
	cr_assert_geq(term, start, "SIGTERM before the tool started");
	cr_assert_geq(e2e_int(meta, "durationMs"), timeout + grace - 10,
	    "killed %lld ms after its start: the timeout is %d ms, the grace "
	    "%d ms", (long long)e2e_int(meta, "durationMs"), timeout, grace);
	drain_expect(c, sid, 1, log, "t:timeout");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/*
 * S16: the timeout runs on while the tool's output is paused because the
 * subscriber does not read (backpressure): a second connection sees it end
 * in time; then the stalled subscriber reads on (or resumes after being
 * dropped) and gets the timeout result.
 */
Test(S16, timeout_runs_while_output_is_paused)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d), *c2 = c_open(d);
	json_t *sid = session_with(c, d, "[{\"name\": \"u_stream\", " SH
	    ", \"streamOutput\": true, \"timeoutMs\": 1500, "
	    "\"interruptBehavior\": \"cancel\"}]", NULL);
	json_t *msg, *p = NULL, *r;
	long long until, done = 0, start, last_seq = 0;
	const char *st;

	add(c, sid, "t", "u_stream", "trap '' TERM; " STAMP("t_start") "; "
	    "yes 0123456789abcdef | head -c 30000000; " STAMP("t_end"),
	    "executing");
	wait_file(d, "t_start", 5000);
	until = e2e_now_ms() + e2e_ms(15000);
	while (done == 0) {
		st = status_of(c2, sid, "t");
		if (strcmp(st, "completed") == 0 ||
		    strcmp(st, "delivered") == 0)
			done = e2e_now_ms();
		cr_assert(e2e_now_ms() < until, "the tool still %s 15 s after "
		    "its 1.5 s timeout while its subscriber did not read", st);
		usleep(20000);
	}
	start = stamp_ms(d, "t_start");
	cr_assert(!exists(d, "t_end"), "the output was never paused: 30 MB "
	    "went to a subscriber that read nothing");
	cr_assert_geq(done - start, 1400);
	cr_assert_lt(done - start, e2e_ms(6000), "a 1.5 s timeout ended the "
	    "tool after %lld ms while its output was paused", done - start);
	cr_assert_eq(d_leftovers(d), 0);

	/* Read on; a subscriber dropped for lagging resumes with since. */
	json_array_clear(c->queue);
	until = e2e_now_ms() + e2e_ms(30000);
	while (p == NULL) {
		cr_assert(e2e_now_ms() < until, "no tool_result after the "
		    "subscriber read on");
		msg = c_read(c, 5000);
		if (msg == NULL) {
			cr_assert(c->eof, "the stream stalled");
			c_close(c);
			c = c_open(d);
			r = c_call(c, "subscribe", json_pack("{s:O, s:I}",
			    "sessionId", sid, "since", (json_int_t)last_seq));
			json_decref(r);
			continue;
		}
		if (json_object_get(msg, "id") == NULL) {
			last_seq = e2e_int(json_object_get(msg, "params"), "seq");
			if (strcmp(e2e_str(msg, "method"), "tool_result") == 0)
				p = json_incref(json_object_get(msg, "params"));
		}
		c_drop(c, msg);
	}
	cr_assert_str_eq(e2e_reason(p), "timeout");
	cr_assert_not_null(strstr(e2e_content(p), "timed out after 1500 ms"),
	    "content ends: %s", e2e_content(p) + (strlen(e2e_content(p)) > 200 ?
	    strlen(e2e_content(p)) - 200 : 0));
	json_decref(p);
	drain_expect(c, sid, 1, NULL, "");

	json_decref(sid);
	c_close(c2);
	c_close(c);
	d_stop(d);
}

/* S16: timeoutFromInput is clamped to maxTimeoutMs. */
Test(S16, timeout_from_input_is_clamped)
{
	struct daemon *d = START("--kill-grace-ms", "200", NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, "[{\"name\": \"u_t\", " SH
	    ", \"timeoutFromInput\": \"timeout\", \"timeoutMs\": 300, "
	    "\"maxTimeoutMs\": 400}]", NULL);
	json_t *log = json_array(), *p;

	json_decref(c_call(c, "addTool", json_pack("{s:O, s:{s:s, s:s, "
	    "s:{s:s, s:i}}}", "sessionId", sid, "toolUse", "id", "t", "name",
	    "u_t", "input", "command", "sleep 30", "timeout", 100000)));
	drain_expect(c, sid, 1, log, "t:timeout");
	p = result_in(log, "t");
	cr_assert_not_null(strstr(e2e_content(p), "timed out after 400 ms"),
	    "content: %s", e2e_content(p));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S16 + S7: a timeout is an error: the queued sibling is cancelled. */
Test(S16, timeout_cancels_siblings)
{
	struct daemon *d = START("--kill-grace-ms", "200", NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, SLOW_TOOL, NULL);
	json_t *log = json_array(), *p;

	add(c, sid, "t", "u_slow", "trap '' TERM; sleep 30", "executing");
	add(c, sid, "q", "u_block", "touch q_ran", NULL);
	drain_expect(c, sid, 1, log, "t:timeout,q:sibling_error");
	p = result_in(log, "t");
	cr_assert_not_null(strstr(e2e_content(p), "timed out after 500 ms"),
	    "content: %s", e2e_content(p));
	p = result_in(log, "q");
	cr_assert(e2e_is_error(p));
	cr_assert_str_eq(e2e_content(p), "<tool_use_error>Cancelled: parallel "
	    "tool call u_slow(trap '' TERM; sleep 30) errored"
	    "</tool_use_error>");
	cr_assert(!exists(d, "q_ran"), "a cancelled sibling ran");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S16: the built-in bash takes its timeout from input.timeout. */
Test(S16, timeout_from_input_of_builtin_bash)
{
	struct daemon *d = START("--kill-grace-ms", "200", NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *log = json_array(), *p, *r;
	long long t0 = e2e_now_ms(), took;

	r = c_call(c, "addTool", json_pack("{s:O, s:{s:s, s:s, s:{s:s, s:i}}}",
	    "sessionId", sid, "toolUse", "id", "t", "name", "bash", "input",
	    "command", "trap '' TERM; sleep 30", "timeout", 300));
	json_decref(r);
	add(c, sid, "q", "bash", "touch q_ran", NULL);
	p = until_result(c, log, "t", 10000);
	took = e2e_now_ms() - t0;
	cr_assert_eq(d_leftovers(d), 0);
	cr_assert_str_eq(e2e_reason(p), "timeout");
	cr_assert_not_null(strstr(e2e_content(p), "timed out after 300 ms"),
	    "content: %s", e2e_content(p));
	/* input.timeout, as the content says: not the default (2 min). */
	cr_assert_geq(took, 300);
	drain_expect(c, sid, 1, log, "t:timeout,q:sibling_error");
	cr_assert_str_eq(e2e_content(result_in(log, "q")), "<tool_use_error>"
	    "Cancelled: parallel tool call bash(trap '' TERM; sleep 30) "
	    "errored</tool_use_error>");
	cr_assert(!exists(d, "q_ran"));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S17: output past maxResultBytes goes whole to a file in --output-dir; the
 * content is head, a line naming the file and size, and tail. */
Test(S17, large_output_is_kept_whole_in_a_file)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, "[{\"name\": \"u_big\", " SH
	    ", \"maxResultBytes\": 1000}]", NULL);
	json_t *log = json_array(), *p, *meta;
	size_t total = 4 + 300000 + 7 + 1 + 9, len, outlen;
	char *want = malloc(total + 1), *file, *marker, *real_out, *real_file;
	const char *content, *path;
	struct stat st;

	/* stdout without a final newline, then stderr (§4). */
	memcpy(want, "HEAD", 4);
	memset(want + 4, 'x', 300000);
	memcpy(want + 300004, "END-OUT\nERR-TAIL\n", 17);
	want[total] = '\0';
	add(c, sid, "big", "u_big", "printf HEAD; head -c 300000 /dev/zero | "
	    "tr '\\0' x; printf END-OUT; printf 'ERR-TAIL\\n' >&2", NULL);
	drain_expect(c, sid, 1, log, "big:ok");
	p = result_in(log, "big");
	meta = json_object_get(p, "meta");
	content = e2e_content(p);

	cr_assert(json_is_true(json_object_get(meta, "truncated")));
	path = e2e_str(meta, "fullOutputPath");
	cr_assert_not_null(path, "no meta.fullOutputPath");
	real_out = realpath(d->out, NULL);
	real_file = realpath(path, NULL);
	cr_assert_not_null(real_file, "%s does not exist", path);
	cr_assert_not_null(real_out);
	cr_assert(strncmp(real_file, real_out, strlen(real_out)) == 0 &&
	    real_file[strlen(real_out)] == '/' &&
	    strchr(real_file + strlen(real_out) + 1, '/') == NULL,
	    "%s is not in the output directory %s", path, d->out);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "the output file is mode %o",
	    (unsigned)(st.st_mode & 0777));
	file = slurp(path, &len);
	cr_assert_eq(len, total, "the file holds %zu bytes, the output was "
	    "%zu", len, total);
	cr_assert(memcmp(file, want, total) == 0, "the file is not the whole "
	    "combined output");

	/* Head and tail around the marker line (PROTOCOL.md §5). */
	outlen = strlen(content);
	cr_assert_lt(outlen, 2000);
	cr_assert(strncmp(content, want, 500) == 0, "content does not start "
	    "with the head: %.40s", content);
	cr_assert(outlen > 1000 && memcmp(content + outlen - 500,
	    want + total - 500, 500) == 0, "content does not end with the "
	    "tail: %s", content + (outlen > 40 ? outlen - 40 : 0));
	if (asprintf(&marker, "\n\n[... output truncated: %zu bytes in total, "
	    "the whole output is in %s; the first 500 and the last 500 bytes "
	    "are shown ...]\n\n", total, path) < 0)
		abort();
	cr_assert_eq(outlen, 1000 + strlen(marker), "content: %s", content);
	cr_assert(strncmp(content + 500, marker, strlen(marker)) == 0,
	    "the marker line is not %s: %.*s", marker, (int)(outlen - 1000),
	    content + 500);

	free(marker);
	free(file);
	free(want);
	free(real_out);
	free(real_file);
	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S17: output of exactly maxResultBytes is whole; one byte more is cut. */
Test(S17, output_at_the_limit_is_not_truncated)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, "[{\"name\": \"u_big\", " SH
	    ", \"maxResultBytes\": 1000}]", NULL);
	json_t *log = json_array(), *p, *meta;

	add(c, sid, "a", "u_big", "head -c 1000 /dev/zero | tr '\\0' y",
	    NULL);
	add(c, sid, "b", "u_big", "head -c 1001 /dev/zero | tr '\\0' y",
	    NULL);
	drain_expect(c, sid, 1, log, "a:ok,b:ok");
	p = result_in(log, "a");
	meta = json_object_get(p, "meta");
	cr_assert_eq(strlen(e2e_content(p)), 1000);
	cr_assert(json_is_false(json_object_get(meta, "truncated")));
	cr_assert(json_is_null(json_object_get(meta, "fullOutputPath")));
	p = result_in(log, "b");
	meta = json_object_get(p, "meta");
	cr_assert(json_is_true(json_object_get(meta, "truncated")));
	cr_assert_not_null(strstr(e2e_content(p), "1001 bytes"), "content: %s",
	    e2e_content(p));
	cr_assert(json_is_string(json_object_get(meta, "fullOutputPath")));

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* Shell: children that ignore SIGTERM (so only a KILL ends them), in the
 * tool's process group; then signal readiness and wait. */
#define STUBBORN_CHILDREN \
	"(trap '' TERM; sleep 30) & " \
	"(trap '' TERM; sleep 30 & wait) & " \
	"sleep 30 & "

/* S18: an interrupt kills the whole group; the result comes only when every
 * process of the tool is dead. */
Test(S18, interrupt_result_only_when_whole_group_is_dead)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *log = json_array(), *p;

	add(c, sid, "t", "u_cancel", STUBBORN_CHILDREN "touch ready; wait",
	    "executing");
	wait_file(d, "ready", 5000);
	cr_assert_geq(d_leftovers(d), 4);
	json_decref(c_call(c, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sid, "reason", "interrupt")));
	p = until_result(c, log, "t", 10000);
	cr_assert_eq(d_leftovers(d), 0, "the interrupted result came while "
	    "processes of the tool lived");
	cr_assert_str_eq(e2e_reason(p), "interrupted");
	cr_assert_str_eq(e2e_content(p), INTERRUPTED);
	drain_expect(c, sid, 1, log, "t:interrupted");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S18 + S7: a sibling_error result of a killed cancel tool comes only when
 * all its processes are dead. */
Test(S18, sibling_error_result_only_when_whole_group_is_dead)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d);
	json_t *sid = session_with(c, d, "[{\"name\": \"s_fail\", " SH
	    ", \"concurrencySafe\": true, \"abortSiblingsOnError\": true}]",
	    NULL);
	json_t *log = json_array(), *p;

	add(c, sid, "x", "s_cancel", STUBBORN_CHILDREN "touch ready; wait",
	    "executing");
	add(c, sid, "f", "s_fail", WAIT_FOR("ready") "; exit 1", "executing");
	p = until_result(c, log, "x", 10000);
	cr_assert_eq(d_leftovers(d), 0, "the sibling_error result came while "
	    "processes of the tool lived");
	cr_assert_str_eq(e2e_reason(p), "sibling_error");
	cr_assert_str_eq(e2e_content(p), "<tool_use_error>Cancelled: parallel "
	    "tool call s_fail(while [ ! -e ready ]; do sleep 0.01; don"
	    "\xe2\x80\xa6) errored</tool_use_error>");
	drain_expect(c, sid, 1, log, "x:sibling_error,f:exit");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S18: a kill also reaches a descendant that left the group with setsid. */
Test(S18, interrupt_kills_setsid_escapee_before_result)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d), *log = json_array(), *p;

	add(c, sid, "t", "u_cancel", "setsid sh -c \"trap '' TERM; "
	    "echo \\$\\$ > esc.pid; sleep 30\" & touch ready; wait",
	    "executing");
	wait_file(d, "ready", 5000);
	wait_written(d, "esc.pid", 5000);
	json_decref(c_call(c, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sid, "reason", "interrupt")));
	p = until_result(c, log, "t", 10000);
	cr_assert_eq(d_leftovers(d), 0, "the interrupted result came while "
	    "a setsid descendant lived");
	cr_assert(!pid_alive(number_in(d, "esc.pid")));
	cr_assert_str_eq(e2e_reason(p), "interrupted");
	drain_expect(c, sid, 1, log, "t:interrupted");

	json_decref(log);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* S18: closeSession kills every tool (block ones too) and replies only when
 * all their processes are dead. */
Test(S18, close_session_replies_when_all_is_dead)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d), *c2 = c_open(d);
	json_t *sid = session(c, d), *n, *r;
	int id;

	add(c, sid, "b", "s_block", STUBBORN_CHILDREN "touch b_ready; wait",
	    "executing");
	add(c, sid, "x", "s_cancel", "setsid sleep 30 & " STUBBORN_CHILDREN
	    "touch x_ready; wait", "executing");
	wait_file(d, "b_ready", 5000);
	wait_file(d, "x_ready", 5000);
	cr_assert_geq(d_leftovers(d), 8);
	id = send_req(c2, "drain", json_pack("{s:O}", "sessionId", sid));
	json_decref(c_call(c2, "ping", NULL));
	json_decref(call_s(c, "closeSession", sid));
	cr_assert_eq(d_leftovers(d), 0, "closeSession answered while tool "
	    "processes lived");
	/* PROTOCOL.md: a drain pending on a closed session gets -32005. */
	r = reply_to(c2, id, 5000);
	cr_assert_not_null(r, "the pending drain got no reply");
	cr_assert_eq(e2e_int(json_object_get(r, "error"), "code"), -32005);
	json_decref(r);
	n = c_wait(c, "session_closed", 5000);
	cr_assert_str_eq(e2e_str(json_object_get(n, "params"), "sessionId"),
	    json_string_value(sid));
	json_decref(n);
	cr_assert_eq(call_s_error(c, "status", sid), -32001);

	json_decref(sid);
	c_close(c2);
	c_close(c);
	d_stop(d);
}

/* S18: SIGTERM to the daemon leaves no tool process of any session (d_stop
 * checks), whatever they were doing. */
Test(S18, daemon_shutdown_leaves_nothing)
{
	struct daemon *d = START("--kill-grace-ms", "300", NULL);
	struct client *c = c_open(d), *c2 = c_open(d);
	json_t *sa = session(c, d), *sb = session(c2, d);

	add(c, sa, "b", "u_block", STUBBORN_CHILDREN "touch a_ready; wait",
	    "executing");
	add(c, sa, "q", "u_block", "touch q_ran", "queued");
	add(c2, sb, "x", "s_cancel", "setsid sleep 30 & (sleep 30 &); "
	    STUBBORN_CHILDREN "touch b_ready; wait", "executing");
	wait_file(d, "a_ready", 5000);
	wait_file(d, "b_ready", 5000);
	cr_assert_geq(d_leftovers(d), 8);

	json_decref(sa);
	json_decref(sb);
	c_close(c2);
	c_close(c);
	d_stop(d);
}

/* S19: abort, discard and a sibling error in one session leave another's
 * tools, turn and notifications alone. */
Test(S19, one_session_does_not_touch_another)
{
	struct daemon *d = START(NULL);
	struct client *ca = c_open(d), *cb = c_open(d);
	json_t *sa = session(ca, d), *sb = session(cb, d);
	json_t *log = json_array(), *r, *msg;
	char *got;
	size_t i;

	add(cb, sb, "b1", "u_cancel", WAIT_FOR("go") "; echo b1",
	    "executing");
	add(cb, sb, "b2", "u_cancel", "echo b2", "queued");
	add(cb, sb, "b3", "s_block", WAIT_FOR("go") "; echo b3", "queued");

	/* Session A: a sibling error, both aborts, a drain, a discard. */
	add(ca, sa, "a1", "bash", "exit 3", NULL);
	add(ca, sa, "a2", "u_cancel", "touch a2_ran", NULL);
	got = drain(ca, sa, 1, NULL);
	cr_assert_str_eq(got, "a1:exit,a2:sibling_error");
	free(got);
	add(ca, sa, "a3", "u_cancel", "sleep 30", "executing");
	json_decref(c_call(ca, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sa, "reason", "interrupt")));
	json_decref(c_call(ca, "abort", json_pack("{s:O, s:s}", "sessionId",
	    sa, "reason", "cancel")));
	add(ca, sa, "a4", "u_cancel", "sleep 30", NULL);
	r = call_s(ca, "discard", sa);
	cr_assert_eq(e2e_int(r, "discardedTurn"), 2);
	json_decref(r);
	add(ca, sa, "a5", "s_cancel", "sleep 30", NULL);
	r = call_s(ca, "discard", sa);
	json_decref(r);

	/* B is as it was. */
	r = call_s(cb, "status", sb);
	cr_assert_eq(e2e_int(r, "turn"), 1);
	json_decref(r);
	cr_assert_str_eq(status_of(cb, sb, "b1"), "executing");
	cr_assert_str_eq(status_of(cb, sb, "b2"), "queued");
	touch(d, "go");
	got = drain(cb, sb, 1, log);
	cr_assert_str_eq(got, "b1:ok,b2:ok,b3:ok");
	free(got);
	cr_assert_str_eq(e2e_content(result_in(log, "b1")), "b1\n");
	json_array_extend(log, cb->queue);
	json_array_foreach(log, i, msg)
		cr_assert_str_eq(e2e_str(json_object_get(msg, "params"),
		    "sessionId"), json_string_value(sb),
		    "session B's client got a notification of session A");
	cr_assert(!exists(d, "a2_ran"));

	json_decref(log);
	json_decref(sa);
	json_decref(sb);
	c_close(cb);
	c_close(ca);
	d_stop(d);
}

/* S19: a context modifier changes its own session only. */
Test(S19, context_of_one_session_stays_there)
{
	struct daemon *d = START(NULL);
	struct client *ca = c_open(d), *cb = c_open(d);
	json_t *sa, *sb, *log = json_array();

	cr_assert_eq(mkdir(d_path(d, "sub"), 0700), 0);
	sa = session_with(ca, d, NULL, "{\"env\": {\"KEEP\": \"a\"}}");
	sb = session_with(cb, d, NULL, "{\"env\": {\"KEEP\": \"b\"}}");
	add(ca, sa, "m", "u_block", "echo '{\"context\":{\"cwd\":\"sub\","
	    "\"env\":{\"FOO\":\"1\",\"KEEP\":null}}}' >&3", NULL);
	drain_expect(ca, sa, 1, NULL, "m:ok");
	add(cb, sb, "v", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(cb, sb, 1, log, "v:ok");
	assert_context(result_in(log, "v"), d, "", "KEEP=b\n");
	json_array_clear(log);
	add(ca, sa, "v", "u_block", SHOW_CONTEXT, NULL);
	drain_expect(ca, sa, 2, log, "v:ok");
	assert_context(result_in(log, "v"), d, "sub", "FOO=1\n");

	json_decref(log);
	json_decref(sa);
	json_decref(sb);
	c_close(cb);
	c_close(ca);
	d_stop(d);
}

/* S19: S3 is per session: an unsafe tool of one session does not hold back
 * an unsafe tool of another (a waits for a file only b creates). */
Test(S19, unsafe_tools_of_two_sessions_run_together)
{
	struct daemon *d = START(NULL);
	struct client *ca = c_open(d), *cb = c_open(d);
	json_t *sa = session(ca, d), *sb = session(cb, d);

	add(ca, sa, "a", "u_block", WAIT_FOR("b_ran") "; echo a", "executing");
	add(cb, sb, "b", "u_block", "touch b_ran", "executing");
	drain_expect(cb, sb, 1, NULL, "b:ok");
	drain_expect(ca, sa, 1, NULL, "a:ok");

	json_decref(sa);
	json_decref(sb);
	c_close(cb);
	c_close(ca);
	d_stop(d);
}

/* S19: --max-procs is shared: with 1, B's tool waits for A's to end. */
Test(S19, max_procs_is_shared_between_sessions)
{
	struct daemon *d = START("--max-procs", "1", NULL);
	struct client *ca = c_open(d), *cb = c_open(d);
	json_t *sa = session(ca, d), *sb = session(cb, d);

	add(ca, sa, "a", "u_block", STAMP("a_start") "; " WAIT_FOR("go") "; "
	    STAMP("a_end"), "executing");
	wait_file(d, "a_start", 5000);
	add(cb, sb, "b", "u_block", STAMP("b_start"), NULL);
	/* Not an ordering proof, only a chance for a wrong start to show. */
	usleep((useconds_t)e2e_ms(300) * 1000);
	cr_assert(!exists(d, "b_start"), "B's tool started beyond --max-procs");
	touch(d, "go");
	drain_expect(cb, sb, 1, NULL, "b:ok");
	drain_expect(ca, sa, 1, NULL, "a:ok");
	cr_assert_geq(number_in(d, "b_start"), number_in(d, "a_end"),
	    "B's tool started before A's ended with --max-procs 1");

	json_decref(sa);
	json_decref(sb);
	c_close(cb);
	c_close(ca);
	d_stop(d);
}

/*
 * S20: run a tool that leaves `cmd`'s leftovers behind, then check the
 * result comes though they hold stdout open (they sleep an hour: a result
 * held by them never comes within the guard), and they are dead right
 * after it.
 */
static void
leftover_case(struct daemon *d, struct client *c, json_t *sid,
    json_int_t turn, const char *cmd)
{
	json_t *log = json_array(), *p;
	long long t0 = e2e_now_ms(), took;
	int left;
	char *got;

	add(c, sid, "t", "u_block", cmd, "executing");
	p = until_result(c, log, "t", 20000);
	took = e2e_now_ms() - t0;
	left = d_leftovers(d);
	cr_assert(d_wait_no_leftovers(d, 500), "%d leftovers of `%s` outlived "
	    "its result by 500 ms", d_leftovers(d), cmd);
	if (left > 0)
		cr_log_warn("`%s`: %d leftover(s) still alive when the result "
		    "arrived, gone within 500 ms", cmd, left);
	cr_log_info("the result of `%s` took %lld ms", cmd, took);
	cr_assert_str_eq(e2e_reason(p), "ok");
	cr_assert_str_eq(e2e_content(p), "done\n");
	got = drain(c, sid, turn, log);
	cr_assert_str_eq(got, "t:ok");
	free(got);
	json_decref(log);
}

Test(S20, background_job_is_killed_and_result_is_prompt)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d);

	leftover_case(d, c, sid, 1, "sleep 3600 & echo done");
	leftover_case(d, c, sid, 2, "(trap '' TERM HUP; sleep 3600) & "
	    "echo done");
	/* Holding only the progress pipe, then only stderr. */
	leftover_case(d, c, sid, 3, "sleep 3600 >/dev/null 2>&1 & echo done");
	leftover_case(d, c, sid, 4, "sleep 3600 >/dev/null 3>&- & echo done");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(S20, double_fork_is_killed)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d);

	leftover_case(d, c, sid, 1, "(sleep 3600 &); echo done");
	leftover_case(d, c, sid, 2, "sh -c 'sh -c \"sleep 3600 &\" &'; "
	    "echo done");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(S20, setsid_escapee_is_killed)
{
	struct daemon *d = START(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c, d);

	/* Holding stdout open, then with every fd closed: only the daemon's
	 * own tracking can find the second. */
	leftover_case(d, c, sid, 1, "setsid sleep 3600 & echo done");
	leftover_case(d, c, sid, 2, "setsid sh -c 'sleep 3600 & exit' "
	    "</dev/null >/dev/null 2>&1 3>&- & echo done");
	leftover_case(d, c, sid, 3, "(setsid sleep 3600 </dev/null >/dev/null "
	    "2>&1 3>&- &); echo done");

	json_decref(sid);
	c_close(c);
	d_stop(d);
}
