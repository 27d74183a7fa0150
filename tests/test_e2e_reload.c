/*
 * Live reload (doc/design.md §7, Reload): SIGHUP re-executes the daemon's
 * binary in the same process, once it has said it reads the handover.
 * Running tools are handed over, never signalled, and deliver their real
 * results once; nobody waits for them; tools added meanwhile run; a client
 * resuming with `since` misses nothing, and the listening socket never
 * closes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
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

#define SLOW 30000

TestSuite(reload, .fini = e2e_fini);

static char	*instance_try(struct client *);
static void	 wait_new_image(struct daemon *, const char *, int);
static void	 wait_file(const char *);
static void	 make_file(const char *);

/* Until a tool has made path (the guard: SLOW, scaled). */
static void
wait_file(const char *path)
{
	long long until = e2e_now_ms() + e2e_ms(SLOW);

	while (access(path, F_OK) != 0) {
		cr_assert(e2e_now_ms() < until, "no %s within %d ms", path,
		    e2e_ms(SLOW));
		usleep(10 * 1000);
	}
}

/* Make path (for a tool that waits for it). */
static void
make_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	close(fd);
}

/*
 * SIGHUP, then wait until a fresh connection meets the new image; c, which
 * is carried across, is answered by it. What c is sent meanwhile stays
 * kept for c_response and c_wait.
 */
static void
reload(struct daemon *d, struct client *c)
{
	char *before;

	before = instance_try(c);
	cr_assert_not_null(before);
	kill(d->pid, SIGHUP);
	wait_new_image(d, before, SLOW);
	free(before);
	/* Connections are carried across (doc/design.md §7, Reload). */
	c_ping(c);
	cr_assert(!c->eof, "the reload closed the connection");
	cr_assert_eq(kill(d->pid, 0), 0, "the daemon is gone");
}

/* Every notification of the session from seq 1, checked gap-free. */
static json_t *
all_notes(struct client *c, const char *sid)
{
	json_t *r = c_call(c, "events", json_pack("{s:s, s:i}", "sessionId",
	    sid, "since", 0)), *list, *n;
	json_int_t expect = 1;
	size_t i;

	list = json_incref(json_object_get(r, "notifications"));
	json_decref(r);
	json_array_foreach(list, i, n)
		cr_assert_eq(e2e_int(json_object_get(n, "params"), "seq"),
		    expect++, "seq %lld missing", (long long)expect - 1);
	return list;
}

static const json_t *
result_of(const json_t *list, const char *id)
{
	const json_t *n, *p;
	size_t i;

	json_array_foreach(list, i, n) {
		p = json_object_get(n, "params");
		if (strcmp(e2e_str(n, "method"), "tool_result") == 0 &&
		    strcmp(e2e_str(p, "toolUseId"), id) == 0)
			return p;
	}
	return NULL;
}

Test(reload, running_tools_keep_running_and_deliver_their_results)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL), *list;
	const char *sid = json_string_value(sid_j);
	pid_t pid = d->pid;
	const json_t *r;

	/* t1 runs through the reload; t2 waits behind it (S3). */
	json_decref(c_add(c, sid, "t1", "bash",
	    "{\"command\":\"sleep 1; echo one\"}"));
	json_decref(c_add(c, sid, "t2", "bash", "{\"command\":\"echo two\"}"));
	json_decref(c_wait_tool(c, "tool_status", "t1", "executing", SLOW));
	reload(d, c);
	c_close(c);
	cr_assert_eq(d->pid, pid);

	c = c_open(d);
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = all_notes(c, sid);
	cr_assert_not_null(r = result_of(list, "t1"));
	cr_assert_str_eq(e2e_reason(r), "ok");
	cr_assert_str_eq(e2e_content(r), "one\n");
	cr_assert_not_null(r = result_of(list, "t2"));
	cr_assert_str_eq(e2e_reason(r), "ok", "%s", e2e_content(r));
	cr_assert_str_eq(e2e_content(r), "two\n");
	json_decref(list);
	cr_assert(d_wait_no_leftovers(d, 2000));
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/*
 * A result that completed but waits for an earlier one (S5) is handed over
 * as it stands: its bytes (a NUL and non-ASCII among them), once, in order.
 */
Test(reload, a_held_result_is_handed_over_and_delivered_in_order)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *tools = json_array(), *sid_j, *list, *n;
	const json_t *r;
	const char *sid;
	char gate[512], cmd[600];
	size_t i, first = 0, second = 0;

	snprintf(gate, sizeof gate, "%s/gate", d->dir);
	snprintf(cmd, sizeof cmd, "until [ -e %s ]; do sleep 0.01; done; "
	    "echo first", gate);
	json_array_append_new(tools, json_pack("{s:s, s:[s,s,s], s:b}",
	    "name", "gated", "command", "/bin/sh", "-c", cmd,
	    "concurrencySafe", 1));
	/* printf's own escapes: the bytes are C3 A9 (é) and a NUL. */
	json_array_append_new(tools, json_pack("{s:s, s:[s,s], s:b}", "name",
	    "quick", "command", "/usr/bin/printf", "held \\303\\251 \\000 end",
	    "concurrencySafe", 1));
	sid_j = c_session(c, json_pack("{s:o}", "tools", tools));
	sid = json_string_value(sid_j);
	json_decref(c_add(c, sid, "g", "gated", NULL));
	json_decref(c_add(c, sid, "q", "quick", NULL));
	json_decref(c_wait_tool(c, "tool_status", "q", "completed", SLOW));
	reload(d, c);
	make_file(gate);
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = all_notes(c, sid);
	json_array_foreach(list, i, n)
		if (strcmp(e2e_str(n, "method"), "tool_result") == 0)
			*(first == 0 ? &first : &second) = i;
	cr_assert_str_eq(e2e_str(json_object_get(json_array_get(list, first),
	    "params"), "toolUseId"), "g", "results in order (S5)");
	cr_assert_neq(second, 0, "two results");
	cr_assert_not_null(r = result_of(list, "q"));
	cr_assert_str_eq(e2e_reason(r), "ok");
	cr_assert_eq(json_string_length(json_object_get(json_object_get(r,
	    "result"), "content")), 13);
	cr_assert_eq(memcmp(e2e_content(r), "held \303\251 \0 end", 13), 0);
	json_decref(list);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/*
 * A tool's peak memory is its own across a reload (README, Limits): tool
 * groups without limits are reused, and where initialize says "all" on
 * cgroup v2 (Linux 6.12 on) a reused group's memory.peak is reset through a
 * descriptor kept with it, which a reload hands on with the peak the group
 * held at the reset. A 16 MiB tool runs through the reload in a group a
 * tool used before; after it, `true` in the groups handed over reports its
 * own small peak. Where initialize says "limited" or "none", no tool
 * without a limit reports a peak, before the reload or after.
 */
Test(reload, a_tools_peak_memory_stays_its_own)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *tools = json_array(), *caps, *sid_j, *r, *meta;
	const char *sid, *who;
	char ready[512], go[512], cmd[1400], id[16];
	bool all;
	int k;

	caps = c_call(c, "initialize", json_object());
	who = e2e_str(json_object_get(json_object_get(caps, "capabilities"),
	    "enforcement"), "peakMemory");
	all = who != NULL && strcmp(who, "all") == 0;
	snprintf(ready, sizeof ready, "%s/ready", d->dir);
	snprintf(go, sizeof go, "%s/go", d->dir);
	snprintf(cmd, sizeof cmd, "import os, time\n"
	    "b = bytearray(16 << 20)\n"
	    "open('%s', 'w').close()\n"
	    "while not os.path.exists('%s'):\n"
	    "    time.sleep(0.01)\n", ready, go);
	json_array_append_new(tools, json_pack("{s:s, s:[s,s,s]}", "name",
	    "big", "command", "/usr/bin/python3", "-c", cmd));
	json_array_append_new(tools, json_pack("{s:s, s:[s]}", "name",
	    "small", "command", "/bin/true"));
	sid_j = c_session(c, json_pack("{s:o}", "tools", tools));
	sid = json_string_value(sid_j);

	/* A group used before, for the tool the reload hands over. */
	json_decref(c_add(c, sid, "warm", "small", NULL));
	json_decref(c_wait_tool(c, "tool_result", "warm", NULL, SLOW));
	json_decref(c_add(c, sid, "big", "big", NULL));
	wait_file(ready);
	reload(d, c);
	make_file(go);
	r = c_wait_tool(c, "tool_result", "big", NULL, SLOW);
	meta = json_object_get(json_object_get(r, "params"), "meta");
	cr_assert_str_eq(e2e_reason(json_object_get(r, "params")), "ok");
	cr_assert_eq(json_object_get(meta, "peakMemoryBytes") != NULL, all,
	    "peakMemory %s", who != NULL ? who : "none");
	if (all)
		cr_assert_geq(e2e_int(meta, "peakMemoryBytes"), 16LL << 20);
	json_decref(r);
	for (k = 0; k < 3; k++) {
		snprintf(id, sizeof id, "small%d", k);
		json_decref(c_add(c, sid, id, "small", NULL));
		r = c_wait_tool(c, "tool_result", id, NULL, SLOW);
		meta = json_object_get(json_object_get(r, "params"), "meta");
		cr_assert_eq(json_object_get(meta, "peakMemoryBytes") != NULL,
		    all);
		if (all)
			cr_assert_lt(e2e_int(meta, "peakMemoryBytes"), 8LL << 20,
			    "%s reports the 16 MiB tool's peak", id);
		json_decref(r);
	}
	json_decref(caps);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

Test(reload, a_pending_drain_is_answered_and_streams_come_whole)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j, *r, *list, *n = NULL;
	const char *sid;
	char text[64] = "", line[512];
	size_t i;

	/* talk ends only once the test lets it: after the reload. */
	snprintf(line, sizeof line, "{\"name\":\"talk\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"printf hello; while [ ! -e %s ]; do "
	    "sleep 0.05; done; printf world\"],\"streamOutput\":true}",
	    d_path(d, "go"));
	sid_j = c_session(c, json_pack("{s:[o]}", "tools", e2e_json(line)));
	sid = json_string_value(sid_j);
	json_decref(c_add(c, sid, "t", "talk", NULL));
	/* A drain pending across the reload: the new image answers it. */
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":99,"
	    "\"method\":\"drain\",\"params\":{\"sessionId\":\"%s\"}}", sid);
	c_send_raw(c, line);
	json_decref(c_wait_tool(c, "tool_status", "t", "executing", SLOW));
	reload(d, c);
	make_file(d_path(d, "go"));
	r = c_response_to(c, 99, SLOW);
	cr_assert_not_null(r, "the carried drain was not answered");
	cr_assert_eq(e2e_int(r, "id"), 99);
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "turn"), 1);
	cr_assert_eq(e2e_int(json_object_get(r, "result"), "results"), 1);
	json_decref(r);
	list = all_notes(c, sid);
	json_array_foreach(list, i, n) {
		const json_t *data = json_object_get(json_object_get(n,
		    "params"), "data");

		if (e2e_str(data, "stream") != NULL)
			strncat(text, e2e_str(data, "text"), sizeof text -
			    strlen(text) - 1);
	}
	/* Not a byte lost or doubled across the exec, and none elided. */
	cr_assert_str_eq(text, "helloworld");
	json_decref(list);
	/* Sent again, a drain drains the turn that is current now. */
	r = c_call(c, "drain", json_pack("{s:s}", "sessionId", sid));
	cr_assert_eq(e2e_int(r, "turn"), 2);
	json_decref(r);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/* A bare connect to the daemon's socket: true when not refused. */
static bool
connects(struct daemon *d)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", d->sock);
	ok = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
	close(fd);
	return ok;
}

/*
 * addTool on w, then a ping; a connection the reload closed first is
 * opened again and the call made again (a duplicate id means the first
 * one got through). Returns the connection in use.
 */
static struct client *
add_again(struct daemon *d, struct client *w, const char *sid,
    const char *id, const char *input)
{
	json_t *req, *r;
	char *text;
	int tries;

	for (tries = 0; tries < 20; tries++) {
		if (w->eof) {
			c_close(w);
			w = c_open(d);
		}
		req = json_pack("{s:s, s:i, s:s, s:{s:s, s:{s:s, s:s, s:o}}}",
		    "jsonrpc", "2.0", "id", 1000 + tries, "method", "addTool",
		    "params", "sessionId", sid, "toolUse", "id", id, "name",
		    "bash", "input", e2e_json(input));
		text = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		/* A write into a closed connection fails: open it again. */
		if (write(w->fd, text, strlen(text)) != (ssize_t)strlen(text) ||
		    write(w->fd, "\n", 1) != 1) {
			w->eof = true;
			free(text);
			continue;
		}
		free(text);
		if ((r = c_response(w, 10000)) == NULL)
			continue;
		cr_assert(json_object_get(r, "result") != NULL ||
		    e2e_code(json_object_get(r, "error")) == -32002,
		    "addTool %s: %s", id, json_dumps(r, JSON_COMPACT));
		json_decref(r);
		return w;
	}
	cr_assert_fail("addTool %s: no answer", id);
	return w;
}

Test(reload, tools_added_meanwhile_run_after_it_and_no_connect_is_refused)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *w = c_open(d);
	json_t *sid_j = c_session(c, NULL), *list;
	const char *sid = json_string_value(sid_j);
	char id[16], input[64];
	const json_t *r;
	int i, refused = 0;

	json_decref(c_add(c, sid, "slow", "bash",
	    "{\"command\":\"sleep 1; echo slow\"}"));
	json_decref(c_wait_tool(c, "tool_status", "slow", "executing", SLOW));
	kill(d->pid, SIGHUP);
	/*
	 * Meanwhile: more tools, pings, connects. The reload closes
	 * connections (it does not carry them yet): one closed under a
	 * request is opened again and the request sent again.
	 */
	for (i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "n%d", i);
		snprintf(input, sizeof input, "{\"command\":\"echo %d\"}", i);
		w = add_again(d, w, sid, id, input);
	}
	/* Through the reload and a while after it. */
	for (i = 0; i < 60; i++) {
		json_decref(c_read(c, 20));
		refused += !connects(d);
	}
	cr_assert(!c->eof, "the reload closed the connection");
	cr_assert_eq(refused, 0, "%d connection attempts were refused",
	    refused);
	c_close(c);
	c_close(w);

	c = c_open(d);
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = all_notes(c, sid);
	cr_assert_str_eq(e2e_content(result_of(list, "slow")), "slow\n");
	for (i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "n%d", i);
		snprintf(input, sizeof input, "%d\n", i);
		cr_assert_not_null(r = result_of(list, id), "no result %s",
		    id);
		cr_assert_str_eq(e2e_content(r), input);
	}
	json_decref(list);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/* Copy the file at from to to (through a new inode: rename over). */
static void
install(const char *from, const char *to)
{
	char cmd[1024];

	snprintf(cmd, sizeof cmd, "cp '%s' '%s.new' && chmod 755 '%s.new' && "
	    "mv -f '%s.new' '%s'", from, to, to, to, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The daemon's version, as initialize says it (malloc'd). */
static char *
version_of(struct client *c)
{
	json_t *r = c_call(c, "initialize", json_object());
	char *v = strdup(e2e_str(json_object_get(r, "server"), "version"));

	json_decref(r);
	return v;
}

/*
 * A different build at path: the same code with its version string (the
 * one initialize answers; a sanitized build has it twice) changed to want,
 * of the same length.
 */
static void
rebuild(const char *path, const char *have, const char *want)
{
	size_t len, n = strlen(have) + 1;
	char *bin = e2e_read_file(path, &len), *at = NULL;
	int found = 0;
	FILE *f;

	cr_assert(bin != NULL && strlen(want) + 1 == n);
	while ((at = memmem(at != NULL ? at + n : bin, len - (size_t)((at !=
	    NULL ? at + n : bin) - bin), have, n)) != NULL) {
		memcpy(at, want, n);
		found++;
	}
	cr_assert_gt(found, 0, "no version string in %s", path);
	cr_assert((f = fopen(path, "we")) != NULL);
	cr_assert_eq(fwrite(bin, 1, len, f), len);
	fclose(f);
	free(bin);
}

Test(reload, a_different_build_installed_meanwhile_is_the_one_executed)
{
	const char *built = getenv("STEXEC_DAEMON");
	char bin[512], *v1, *v2;
	struct daemon *d;
	struct client *c;

	cr_assert(built != NULL);
	snprintf(bin, sizeof bin, "/tmp/stexec-reload-%ld", (long)getpid());
	install(built, bin);
	setenv("STEXEC_DAEMON", bin, 1);
	d = d_start(NULL);
	c = c_open(d);
	v1 = version_of(c);
	/* An upgrade: another build, at the same path, as a new file. */
	v2 = strdup(v1);
	v2[strlen(v2) - 1] = v2[strlen(v2) - 1] == '9' ? '8' : '9';
	install(built, bin);
	rebuild(bin, v1, v2);
	reload(d, c);
	c_close(c);

	c = c_open(d);
	free(v1);
	v1 = version_of(c);
	cr_assert_str_eq(v1, v2, "the new build does not answer");
	free(v1);
	free(v2);
	c_close(c);
	d_stop(d);
	unlink(bin);
}

Test(reload, safe_tools_finish_and_a_permission_is_asked_again)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *tools = json_array(), *sid_j, *list, *p;
	const char *sid;
	const json_t *r;
	json_int_t asked_seq;

	json_array_append_new(tools, e2e_json("{\"name\":\"peek\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"sleep 0.5; echo peek\"],"
	    "\"concurrencySafe\":true}"));
	json_array_append_new(tools, e2e_json("{\"name\":\"ask\",\"command\":"
	    "[\"/bin/echo\",\"asked\"],\"concurrencySafe\":true,"
	    "\"requiresPermission\":true}"));
	sid_j = c_session(c, json_pack("{s:o}", "tools", tools));
	sid = json_string_value(sid_j);
	json_decref(c_add(c, sid, "p1", "peek", NULL));
	json_decref(c_add(c, sid, "p2", "peek", NULL));
	json_decref(c_add(c, sid, "a", "ask", NULL));
	p = c_wait(c, "permission_request", SLOW);
	asked_seq = e2e_int(json_object_get(p, "params"), "seq");
	json_decref(p);
	reload(d, c);
	c_close(c);

	/* The new image asks again: the old answer would have had no tool. */
	c = c_open(d);
	json_decref(c_call(c, "subscribe", json_pack("{s:s, s:I}",
	    "sessionId", sid, "since", asked_seq)));
	p = c_wait(c, "permission_request", SLOW);
	cr_assert_str_eq(e2e_str(json_object_get(p, "params"), "toolUseId"),
	    "a");
	json_decref(p);
	json_decref(c_call(c, "respondPermission", json_pack("{s:s, s:s, s:s}",
	    "sessionId", sid, "toolUseId", "a", "decision", "allow")));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	json_decref(c_until(c, "turn_end", SLOW));
	list = all_notes(c, sid);
	cr_assert_str_eq(e2e_content(r = result_of(list, "p1")), "peek\n");
	cr_assert_str_eq(e2e_reason(r), "ok");
	cr_assert_str_eq(e2e_content(result_of(list, "p2")), "peek\n");
	cr_assert_str_eq(e2e_content(result_of(list, "a")), "asked\n");
	json_decref(list);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/* This image's id, as initialize says it (malloc'd): new at each reload. */
static char *
instance_of(struct client *c)
{
	json_t *r = c_call(c, "initialize", json_object());
	const char *v = e2e_str(json_object_get(r, "server"), "instance");
	char *s;

	cr_assert_not_null(v, "initialize names no server.instance");
	s = strdup(v);
	json_decref(r);
	return s;
}

Test(reload, a_binary_that_cannot_read_the_handover_is_not_executed)
{
	const char *built = getenv("STEXEC_DAEMON");
	char bin[512], script[600], *i1, *i2, *log = NULL;
	struct daemon *d;
	struct client *c;
	long long until;
	FILE *f;

	cr_assert(built != NULL);
	snprintf(bin, sizeof bin, "/tmp/stexec-refuse-%ld", (long)getpid());
	install(built, bin);
	setenv("STEXEC_DAEMON", bin, 1);
	d = d_start(NULL);
	c = c_open(d);
	i1 = instance_of(c);
	/* A build that reads another handover format: it says no. */
	snprintf(script, sizeof script, "%s.sh", bin);
	cr_assert((f = fopen(script, "we")) != NULL);
	fprintf(f, "#!/bin/sh\n[ \"$1\" = --check-handover ] && "
	    "{ echo 'no: reads handover format 99 only'; exit 1; }\n"
	    "exit 3\n");
	fclose(f);
	install(script, bin);
	unlink(script);
	kill(d->pid, SIGHUP);
	/* The log line is the event; the one guard, scaled. */
	for (until = e2e_now_ms() + e2e_ms(SLOW); e2e_now_ms() < until;
	    usleep(50 * 1000)) {
		log = e2e_read_file(d->log, NULL);
		if (log != NULL && strstr(log, "reload refused") != NULL)
			break;
		free(log);
		log = NULL;
	}
	cr_assert_not_null(log, "no log line says the reload was refused");
	cr_assert_not_null(strstr(log, "format 99"), "%s", log);
	free(log);
	/* The old image goes on serving, on the same connection. */
	c_ping(c);
	i2 = instance_of(c);
	cr_assert_str_eq(i1, i2);
	cr_assert_eq(kill(d->pid, 0), 0);
	free(i1);
	free(i2);
	c_close(c);
	d_stop(d);
	unlink(bin);
	setenv("STEXEC_DAEMON", built, 1);
}

/* Wait until initialize on a fresh connection names another image. */
/* server.instance, or NULL when the connection closed first. */
static char *
instance_try(struct client *c)
{
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":7,"
	    "\"method\":\"initialize\"}\n";
	const char *v;
	char *s = NULL;
	json_t *r;

	if (write(c->fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1) ||
	    (r = c_response_to(c, 7, 5000)) == NULL)
		return NULL;
	v = e2e_str(json_object_get(json_object_get(r, "result"), "server"),
	    "instance");
	if (v != NULL)
		s = strdup(v);
	json_decref(r);
	return s;
}

static void
wait_new_image(struct daemon *d, const char *before, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
	struct client *c;
	char *now;
	bool changed = false;

	while (!changed && e2e_now_ms() < until) {
		c = c_open(d);
		/* The old image may close it before it answers: try again. */
		now = instance_try(c);
		changed = now != NULL && strcmp(now, before) != 0;
		free(now);
		c_close(c);
		if (!changed)
			usleep(20 * 1000);
	}
	cr_assert(changed, "no new image within %d ms", e2e_ms(ms));
}

Test(reload, it_does_not_wait_for_a_long_tool_which_delivers_once)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d), *w = c_open(d);
	json_t *sid_j = c_session(c, NULL), *wsid_j = c_session(w, NULL);
	const char *sid = json_string_value(sid_j);
	const char *wsid = json_string_value(wsid_j);
	json_t *list, *r;
	const json_t *res;
	char *before = instance_of(w), *now, cmd[512];
	size_t i, n = 0;

	/* long runs until the test lets it end: only then can it. */
	snprintf(cmd, sizeof cmd, "{\"command\":\"echo start; touch %s; "
	    "while [ ! -e %s ]; do sleep 0.05; done; echo done\"}",
	    d_path(d, "started"), d_path(d, "go"));
	json_decref(c_add(c, sid, "long", "bash", cmd));
	wait_file(d_path(d, "started"));
	kill(d->pid, SIGHUP);
	/* Another client's quick tool, in the new image, while long runs. */
	wait_new_image(d, before, SLOW);
	/* The same connection: not closed, and it sees the new image. */
	now = instance_of(w);
	cr_assert_str_neq(now, before);
	free(now);
	json_decref(c_add(w, wsid, "quick", "bash",
	    "{\"command\":\"echo quick\"}"));
	r = c_call(w, "drain", json_pack("{s:s}", "sessionId", wsid));
	json_decref(r);
	list = all_notes(w, wsid);
	cr_assert_str_eq(e2e_content(result_of(list, "quick")), "quick\n");
	json_decref(list);
	/* The long tool was not touched: its real output, once, in order. */
	make_file(d_path(d, "go"));
	c_close(c);
	c = c_open(d);
	r = c_call(c, "drain", json_pack("{s:s}", "sessionId", sid));
	json_decref(r);
	list = all_notes(c, sid);
	json_array_foreach(list, i, r)
		if (strcmp(e2e_str(r, "method"), "tool_result") == 0)
			n++;
	cr_assert_eq(n, 1, "%zu results", n);
	cr_assert_not_null(res = result_of(list, "long"));
	cr_assert_str_eq(e2e_reason(res), "ok");
	cr_assert_str_eq(e2e_content(res), "start\ndone\n");
	json_decref(list);
	cr_assert(d_wait_no_leftovers(d, 2000));
	free(before);
	json_decref(sid_j);
	json_decref(wsid_j);
	c_close(c);
	c_close(w);
	d_stop(d);
}

/*
 * A subscribed client across a reload: the same connection, a request cut
 * in two by the exec answered whole, every notification once, in seq order.
 */
Test(reload, a_subscribed_connection_is_carried_with_its_half_line)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL), *m, *r;
	const char *sid = json_string_value(sid_j), *method;
	long long next = 0, seq;
	char *before = instance_of(c), *now;
	bool got_result = false, got_ping = false;
	long long until;
	static const char half[] = "{\"jsonrpc\":\"2.0\",\"id\":77,";

	json_decref(c_call(c, "subscribe", json_pack("{s:s}", "sessionId",
	    sid)));
	json_decref(c_add(c, sid, "later", "bash",
	    "{\"command\":\"sleep 0.5; echo later\"}"));
	cr_assert_eq(write(c->fd, half, sizeof half - 1),
	    (ssize_t)(sizeof half - 1));
	/* A moment for the daemon to read the half line (a set-up, scaled). */
	usleep((useconds_t)e2e_ms(100) * 1000);
	kill(d->pid, SIGHUP);
	wait_new_image(d, before, SLOW);
	/* The rest of the line, to the new image, on the same socket. */
	c_send_raw(c, "\"method\":\"ping\"}");
	until = e2e_now_ms() + e2e_ms(SLOW);
	while ((!got_result || !got_ping) && e2e_now_ms() < until &&
	    (m = c_read(c, 1000)) != NULL) {
		if (json_object_get(m, "id") != NULL) {
			cr_assert_eq(e2e_int(m, "id"), 77, "%s",
			    json_dumps(m, JSON_COMPACT));
			got_ping = json_is_object(json_object_get(m, "result"));
		} else if ((method = e2e_str(m, "method")) != NULL) {
			seq = e2e_int(json_object_get(m, "params"), "seq");
			cr_assert(next == 0 || seq == next, "seq %lld after %lld",
			    seq, next - 1);
			next = seq + 1;
			if (strcmp(method, "tool_result") == 0) {
				cr_assert(!got_result, "a second tool_result");
				cr_assert_str_eq(e2e_content(json_object_get(m,
				    "params")), "later\n");
				got_result = true;
			}
		}
		json_decref(m);
	}
	cr_assert(!c->eof, "the reload closed the connection");
	cr_assert(got_ping, "the request cut by the exec was not answered");
	cr_assert(got_result, "the subscription did not go on");
	now = instance_of(c);
	cr_assert_str_neq(now, before);
	r = c_call(c, "drain", json_pack("{s:s}", "sessionId", sid));
	json_decref(r);
	free(now);
	free(before);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/* The notifications the session still retains (new reference). */
static json_t *
recent_notes(struct client *c, const char *sid)
{
	json_t *r = c_call(c, "events", json_pack("{s:s}", "sessionId", sid));
	json_t *list = json_incref(json_object_get(r, "notifications"));

	json_decref(r);
	return list;
}

/*
 * What a turn was told before a reload holds after it: an interrupted turn
 * starts nothing new (S8), and a running tool's context modifier is still
 * applied when it ends (S14).
 */
Test(reload, an_interrupt_and_a_context_change_are_carried)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j, *list, *r;
	const char *sid;
	char *before = instance_of(c), blk[256], ctx[256];

	/* Each runs until the test lets it end (a file it makes). */
	snprintf(blk, sizeof blk, "{\"name\":\"blk\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"while [ ! -e %s ]; do sleep 0.05; done; "
	    "echo done\"]}", d_path(d, "blk_go"));
	snprintf(ctx, sizeof ctx, "{\"name\":\"ctx\",\"command\":"
	    "[\"/bin/sh\",\"-c\",\"echo '{\\\"context\\\":{\\\"env\\\":"
	    "{\\\"CARRIED\\\":\\\"yes\\\"}}}' >&3; while [ ! -e %s ]; "
	    "do sleep 0.05; done\"]}", d_path(d, "ctx_go"));
	sid_j = c_session(c, json_pack("{s:[o, o]}", "tools", e2e_json(blk),
	    e2e_json(ctx)));
	sid = json_string_value(sid_j);

	/* Turn 1: ctx's modifier is pending when the reload comes. */
	json_decref(c_add(c, sid, "c1", "ctx", NULL));
	json_decref(c_wait_tool(c, "tool_status", "c1", "executing", SLOW));
	kill(d->pid, SIGHUP);
	wait_new_image(d, before, SLOW);
	free(before);
	make_file(d_path(d, "ctx_go"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	json_decref(c_add(c, sid, "e1", "bash",
	    "{\"command\":\"echo $CARRIED\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = recent_notes(c, sid);
	cr_assert_str_eq(e2e_content(result_of(list, "e1")), "yes\n",
	    "the context change made before the reload was lost");
	json_decref(list);

	/* Turn 3: interrupted while blk (block) runs, then a reload. */
	before = instance_of(c);
	json_decref(c_add(c, sid, "b1", "blk", NULL));
	r = c_call(c, "abort", json_pack("{s:s, s:s}", "sessionId", sid,
	    "reason", "interrupt"));
	json_decref(r);
	kill(d->pid, SIGHUP);
	wait_new_image(d, before, SLOW);
	free(before);
	json_decref(c_add(c, sid, "b2", "blk", NULL));
	make_file(d_path(d, "blk_go"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = recent_notes(c, sid);
	cr_assert_str_eq(e2e_content(result_of(list, "b1")), "done\n");
	cr_assert_str_eq(e2e_reason(result_of(list, "b2")), "interrupted",
	    "a tool added to an interrupted turn started after a reload");
	json_decref(list);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

Test(reload, a_tool_that_ends_during_the_exec_delivers_its_real_result)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL), *list;
	const char *sid = json_string_value(sid_j);
	const json_t *res;
	char *before = instance_of(c);
	char id[16], cmd[128];
	int i;

	/* Ending around the exec, one of them in it (2 ms apart). */
	for (i = 0; i < 20; i++) {
		snprintf(id, sizeof id, "t%d", i);
		json_decref(c_add(c, sid, id, "read_file",
		    "{\"file_path\":\"/etc/hostname\"}"));
	}
	/* Its end aimed at the exec, in units scaled together. */
	snprintf(cmd, sizeof cmd, "{\"command\":\"sleep %.3f; echo bye; "
	    "exit 3\"}", e2e_ms(300) / 1000.0);
	json_decref(c_add(c, sid, "exit3", "bash", cmd));
	usleep((useconds_t)e2e_ms(295) * 1000);
	kill(d->pid, SIGHUP);
	wait_new_image(d, before, SLOW);
	c_close(c);
	c = c_open(d);
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = all_notes(c, sid);
	cr_assert_not_null(res = result_of(list, "exit3"));
	cr_assert_str_eq(e2e_reason(res), "exit", "%s", e2e_content(res));
	cr_assert_not_null(strstr(e2e_content(res), "bye\n"));
	json_decref(list);
	cr_assert(d_wait_no_leftovers(d, 2000));
	free(before);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/*
 * The stream of the test below: addTool of "bad" to sid over its own
 * connection, one after the other, until told to stop (a byte on stop);
 * one byte on ready after the first is answered, then the count at its
 * end, or -1 if a call failed.
 */
static void
reload_stream(struct daemon *d, const char *sid, int attempt, int stop,
    int ready)
{
	struct client *w = c_open(d);
	struct pollfd pfd = { stop, POLLIN, 0 };
	char line[512];
	int n = 0;
	json_t *r;

	while (poll(&pfd, 1, 0) == 0) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"addTool\",\"params\":{\"sessionId\":\"%s\","
		    "\"toolUse\":{\"id\":\"b%d-%d\",\"name\":\"bad\","
		    "\"input\":{}}}}", n + 1, sid, attempt, n);
		c_send_raw(w, line);
		if ((r = c_response(w, SLOW)) == NULL ||
		    json_object_get(r, "result") == NULL) {
			json_decref(r);
			n = -1;
			break;
		}
		json_decref(r);
		if (n++ == 0 && write(ready, "r", 1) != 1)
			_exit(1);
	}
	if (write(ready, &n, sizeof n) != (ssize_t)sizeof n)
		_exit(1);
	_exit(0);
}

/* Lines of the daemon's log that contain what. */
static int
log_count(struct daemon *d, const char *what)
{
	char *text = e2e_read_file(d->log, NULL), *p;
	int n = 0;

	for (p = text; p != NULL && (p = strstr(p, what)) != NULL; p++)
		n++;
	free(text);
	return n;
}

/*
 * A tool started beside a running one does not wait for its exec (the
 * child shares the daemon's memory until then and reports a failure
 * there). One whose exec fails, started a moment before a reload, still
 * gets spawn_failed with its step, never the exit 127 the next image would
 * see: the reload waits for such children to pass their exec and hands
 * a failure over as the tool's error. The moment is microseconds wide: a
 * stream of such tools goes on through reloads until the daemon's log
 * says one was caught in it.
 */
Test(reload, a_failure_just_before_the_exec_is_still_spawn_failed,
    .timeout = 240 * STEXEC_TEST_BUILD_SCALE)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *hold_j = c_session(c, NULL), *sid_j, *list, *r;
	const char *sid;
	char bad[128], def[300], *before, got;
	int attempt, hits = 0, total = 0, n, fd, stop[2], ready[2];
	size_t i, results;
	pid_t w;

	snprintf(bad, sizeof bad, "%s/not-a-program", d->dir);
	fd = open(bad, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	cr_assert(fd != -1);
	cr_assert_eq(write(fd, "no magic, no #!\n", 16), 16);
	close(fd);
	snprintf(def, sizeof def, "{\"name\":\"bad\",\"command\":[\"%s\"],"
	    "\"concurrencySafe\":true}", bad);
	sid_j = c_session(c, json_pack("{s:[o], s:i}", "tools", e2e_json(def),
	    "maxParallel", 256));
	sid = json_string_value(sid_j);
	/* Running through it all: every spawn of the stream is launched. */
	json_decref(c_add(c, json_string_value(hold_j), "hold", "bash",
	    "{\"command\":\"sleep 600\"}"));
	json_decref(c_wait(c, "tool_status", SLOW));

	for (attempt = 0; attempt < 40 && hits == 0; attempt++) {
		cr_assert_eq(pipe2(stop, O_CLOEXEC), 0);
		cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
		before = instance_of(c);
		if ((w = fork()) == 0)
			reload_stream(d, sid, attempt, stop[0], ready[1]);
		cr_assert(w > 0);
		close(ready[1]);
		cr_assert_eq(read(ready[0], &got, 1), 1, "no addTool answered");
		kill(d->pid, SIGHUP);
		wait_new_image(d, before, SLOW);
		free(before);
		cr_assert_eq(write(stop[1], "s", 1), 1);
		cr_assert_eq(read(ready[0], &n, sizeof n), (ssize_t)sizeof n);
		cr_assert_eq(waitpid(w, NULL, 0), w);
		close(stop[0]);
		close(stop[1]);
		close(ready[0]);
		cr_assert_geq(n, 1, "an addTool of the stream failed");
		total += n;

		/* Every one of them: its failure, whichever image read it. */
		json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId",
		    sid)));
		list = c_until_only(c, "turn_end", "tool_result", SLOW);
		results = 0;
		json_array_foreach(list, i, r) {
			if (strcmp(e2e_str(r, "sessionId"), sid) != 0)
				continue;
			results++;
			cr_assert_str_eq(e2e_reason(r), "spawn_failed",
			    "%s: %s (reload %d)", e2e_str(r, "toolUseId"),
			    e2e_content(r), attempt + 1);
			cr_assert_not_null(strstr(e2e_content(r),
			    "Exec format error"), "%s", e2e_content(r));
		}
		json_decref(list);
		cr_assert_eq(results, (size_t)n, "%zu results of %d tools",
		    results, n);
		hits = log_count(d, "failed before its exec, handed over");
	}
	fprintf(stderr, "reload: %d reload(s) caught %d tool(s) failing "
	    "before their exec (%d tools in all)\n", attempt, hits, total);
	cr_assert_gt(hits, 0, "no reload came in the moment before an exec "
	    "(%d reloads, %d tools)", attempt, total);
	json_decref(sid_j);
	json_decref(hold_j);
	c_close(c);
	d_stop(d);
}
