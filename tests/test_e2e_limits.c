/*
 * Fair sharing (doc/design.md §7, Hostile input): connection caps and the descriptor reserve,
 * idle sessions closed after --session-idle-timeout, whole-output files
 * owned by their session under a disk budget, and sessions of other uids
 * on a root daemon. Each against the real daemon with real processes.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
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

#define ERR_NOT_PERMITTED -32003
#define ERR_LIMIT -32004

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(conns, .fini = e2e_fini);
TestSuite(idle, .fini = e2e_fini);
TestSuite(outputs, .fini = e2e_fini);
TestSuite(uids, .fini = e2e_fini);

static const char *
message_of(const json_t *err)
{
	const char *m = json_string_value(json_object_get(err, "message"));

	return m != NULL ? m : "";
}

/* Run one tool to its result in a subscribed session; the result params. */
static json_t *
run_tool(struct client *c, const char *sid, const char *id, const char *name,
    const char *input)
{
	json_t *list, *msg, *p, *found = NULL;
	size_t i;

	json_decref(c_add(c, sid, id, name, input));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = c_until(c, "turn_end", SLOW);
	json_array_foreach(list, i, msg) {
		p = json_object_get(msg, "params");
		if (strcmp(json_string_value(json_object_get(msg, "method")),
		    "tool_result") == 0 && strcmp(json_string_value(
		    json_object_get(p, "toolUseId")), id) == 0)
			found = json_incref(p);
	}
	json_decref(list);
	cr_assert(found != NULL, "no tool_result for %s", id);
	return found;
}

/* The ids of the caller's sessions, as one comma-separated string. */
static char *
session_ids(struct daemon *d)
{
	struct client *c = c_open(d);
	json_t *r = c_call(c, "listSessions", NULL), *row;
	struct buf { char s[4096]; size_t n; } b = { .n = 0 };
	size_t i;

	b.s[0] = '\0';
	json_array_foreach(json_object_get(r, "sessions"), i, row)
		b.n += (size_t)snprintf(b.s + b.n, sizeof b.s - b.n, "%s,",
		    json_string_value(json_object_get(row, "sessionId")));
	json_decref(r);
	c_close(c);
	return strdup(b.s);
}

static bool
has_session(struct daemon *d, const char *sid)
{
	char *ids = session_ids(d);
	bool yes = strstr(ids, sid) != NULL;

	free(ids);
	return yes;
}

/* Wait until the session is gone from listSessions; false on timeout. */
static bool
wait_gone(struct daemon *d, const char *sid, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);

	while (has_session(d, sid)) {
		if (e2e_now_ms() > until)
			return false;
		usleep(50000);
	}
	return true;
}

/*
 * A connection just made: its first message is either the answer to a
 * ping (accepted: 1) or a -32004 error line followed by EOF (refused: 0,
 * the message in msg).
 */
static int
accepted(struct client *c, char *msg, size_t len)
{
	static const char ping[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	json_t *r;

	/* A refused one may be closed already: EPIPE is no failure here. */
	if (send(c->fd, ping, sizeof ping - 1, MSG_NOSIGNAL) < 0)
		cr_assert(errno == EPIPE || errno == ECONNRESET, "send: %s",
		    strerror(errno));
	r = c_read(c, SLOW);
	cr_assert(r != NULL, "neither an answer nor a refusal");
	if (json_object_get(r, "result") != NULL) {
		json_decref(r);
		return 1;
	}
	cr_assert_eq(e2e_code(json_object_get(r, "error")), ERR_LIMIT,
	    "refused with %s", json_dumps(r, JSON_COMPACT));
	cr_assert(json_is_null(json_object_get(r, "id")));
	snprintf(msg, len, "%s", message_of(json_object_get(r, "error")));
	json_decref(r);
	cr_assert_null(c_read(c, SLOW), "a refused connection stays open");
	return 0;
}

/* A connection that is the daemon's only one (d_start's probe is gone). */
static struct client *
c_alone(struct daemon *d)
{
	long long until = e2e_now_ms() + e2e_ms(SLOW);
	struct client *c;
	json_t *r;
	int n;

	for (;;) {
		c = c_open(d);
		r = c_call(c, "stats", NULL);
		n = (int)json_integer_value(json_object_get(r, "connections"));
		json_decref(r);
		if (n == 1)
			return c;
		c_close(c);
		cr_assert(e2e_now_ms() < until, "%d connections remain", n);
		usleep(20000);
	}
}

/* ------------------------------------------------------------------ */

Test(conns, idle_connections_cannot_starve_a_tool)
{
	static const char *const prlimit[] = { "prlimit", "--nofile=134:134",
		"--", NULL };
	enum { IDLE = 150 };
	struct client *c, *idle[IDLE];
	struct daemon *d;
	json_t *r, *list;
	char msg[256] = "", *sid;
	int i, in = 1, k;

	/* 134 descriptors, two tools at once: 66 are kept for the tools. */
	d = d_start_wrapped(prlimit, "--max-procs", "2", NULL);
	c = c_alone(d);
	r = c_session(c, NULL);
	sid = strdup(json_string_value(r));
	json_decref(r);
	for (i = 0; i < IDLE; i++)
		idle[i] = c_open(d);
	for (i = 0; i < IDLE; i++)
		in += accepted(idle[i], msg, sizeof msg);
	cr_assert_eq(in, 134 - 66, "%d connections were let in", in);
	cr_assert_str_eq(msg, "Limit exceeded: 68 connections are open "
	    "(--max-connections)");

	/* Every tool still gets its pipes, two at a time. */
	for (k = 0; k < 3; k++) {
		char id[32];

		snprintf(id, sizeof id, "t%d", k);
		json_decref(c_add(c, sid, id, "bash",
		    "{\"command\":\"echo fine\"}"));
	}
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	list = c_until(c, "turn_end", SLOW);
	r = e2e_filter(list, "tool_result");
	json_decref(list);
	cr_assert_eq(json_array_size(r), 3);
	for (k = 0; k < 3; k++)
		cr_assert_str_eq(e2e_content(json_array_get(r, (size_t)k)),
		    "fine\n", "a tool failed: %s", json_dumps(json_array_get(r,
		    (size_t)k), JSON_COMPACT));
	json_decref(r);

	/* A closed connection makes room for another. */
	c_close(idle[0]);
	for (k = 0; k < 100; k++) {
		struct client *more = c_open(d);

		i = accepted(more, msg, sizeof msg);
		c_close(more);
		if (i == 1)
			break;
		usleep(20000);
	}
	cr_assert_eq(i, 1, "no room after a client left");
	for (i = 1; i < IDLE; i++)
		c_close(idle[i]);
	free(sid);
	c_close(c);
	d_stop(d);
}

Test(conns, one_uid_is_capped_others_are_not)
{
	struct client *c[4], *nobody;
	struct daemon *d;
	char msg[256] = "";
	int i, ok;

	d = d_start("--max-connections-per-uid", "3", "--socket-mode", "0666",
	    NULL);
	c[0] = c_alone(d);
	for (i = 1; i < 4; i++)
		c[i] = c_open(d);
	for (i = 1; i < 3; i++)
		cr_assert_eq(accepted(c[i], msg, sizeof msg), 1);
	cr_assert_eq(accepted(c[3], msg, sizeof msg), 0);
	cr_assert(strstr(msg, "has 3 connections open "
	    "(--max-connections-per-uid)") != NULL, "%s", msg);
	c_close(c[3]);

	if (geteuid() == 0) {
		cr_assert_eq(chmod(d->dir, 0711), 0);
		nobody = c_adopt(d_connect_as(d, 65534));
		cr_assert_eq(accepted(nobody, msg, sizeof msg), 1,
		    "another uid was refused: %s", msg);
		c_close(nobody);
	}
	/* The count follows clients that leave. */
	c_close(c[0]);
	for (i = 0, ok = 0; i < e2e_ms(100) && !ok; i++) {
		c[0] = c_open(d);
		ok = accepted(c[0], msg, sizeof msg);
		if (!ok) {
			c_close(c[0]);
			usleep(20000);
		}
	}
	cr_assert(ok, "the uid's count did not go down");
	for (i = 0; i < 3; i++)
		c_close(c[i]);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

Test(idle, only_sessions_nobody_refers_to_are_closed)
{
	struct client *creator, *keeper, *creator2, *watcher, *runner;
	struct daemon *d;
	json_t *r, *a, *b, *cs, *busy;
	const char *sa, *sb, *sc, *sbusy;
	char idle[16], cmd[256];
	FILE *f;

	snprintf(idle, sizeof idle, "%d", e2e_s(1));
	d = d_start("--session-idle-timeout", idle, NULL);

	/* a: its creator leaves. */
	creator = c_open(d);
	r = c_call(creator, "createSession", NULL);
	a = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	sa = json_string_value(a);
	c_close(creator);

	/* b: its creator stays connected, without subscribing. */
	keeper = c_open(d);
	r = c_call(keeper, "createSession", NULL);
	b = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	sb = json_string_value(b);

	/* c: its creator leaves, another connection subscribed. */
	creator2 = c_open(d);
	r = c_call(creator2, "createSession", NULL);
	cs = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	sc = json_string_value(cs);
	watcher = c_open(d);
	json_decref(c_call(watcher, "subscribe", json_pack("{s:s}",
	    "sessionId", sc)));
	c_close(creator2);

	/* busy: a tool runs after its only client left. */
	runner = c_open(d);
	busy = c_session(runner, NULL);
	sbusy = json_string_value(busy);
	/* It runs until the test lets it end. */
	snprintf(cmd, sizeof cmd, "{\"command\":\"while [ ! -e %s ]; do "
	    "sleep 0.05; done\"}", d_path(d, "go"));
	json_decref(c_add(runner, sbusy, "slow", "bash", cmd));
	c_close(runner);

	cr_assert(wait_gone(d, sa, SLOW), "an abandoned session lives on");
	/* Past the others' idle timeout, had they been idle (scaled). */
	usleep((useconds_t)e2e_ms(1500) * 1000);
	cr_assert(has_session(d, sb), "a session with a client was closed");
	cr_assert(has_session(d, sc), "a subscribed session was closed");
	cr_assert(has_session(d, sbusy), "a session with a running tool was "
	    "closed");
	/* Once its tool is done, the busy one goes too. */
	cr_assert((f = fopen(d_path(d, "go"), "w")) != NULL);
	fclose(f);
	cr_assert(wait_gone(d, sbusy, SLOW));
	cr_assert(d_wait_no_leftovers(d, SLOW));
	/* And the subscribed one once its subscriber leaves. */
	c_close(watcher);
	cr_assert(wait_gone(d, sc, SLOW));
	cr_assert(has_session(d, sb));
	json_decref(a);
	json_decref(b);
	json_decref(cs);
	json_decref(busy);
	c_close(keeper);
	d_stop(d);
}

Test(idle, zero_means_never)
{
	struct client *c;
	struct daemon *d;
	json_t *r, *sid;

	d = d_start("--session-idle-timeout", "0", NULL);
	c = c_open(d);
	r = c_call(c, "createSession", NULL);
	sid = json_incref(json_object_get(r, "sessionId"));
	json_decref(r);
	c_close(c);
	usleep((useconds_t)e2e_ms(1500) * 1000);
	cr_assert(has_session(d, json_string_value(sid)));
	json_decref(sid);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

Test(uids, a_root_daemon_refuses_sessions_of_other_uids)
{
	struct client *root, *nobody;
	struct daemon *d;
	json_t *err, *r, *sid;

	if (geteuid() != 0)
		cr_skip("needs root to act as another uid");
	d = d_start("--socket-mode", "0666", NULL);
	cr_assert_eq(chmod(d->dir, 0711), 0);
	nobody = c_adopt(d_connect_as(d, 65534));
	err = c_call_error(nobody, "createSession", NULL);
	cr_assert_eq(e2e_code(err), ERR_NOT_PERMITTED);
	cr_assert_str_eq(message_of(err), "Not permitted: this daemon serves "
	    "only uid 0 (--allow-other-uids runs each user's tools as that "
	    "user), not uid 65534");
	json_decref(err);
	/* The connection still serves what needs no session. */
	json_decref(c_call(nobody, "ping", NULL));
	c_close(nobody);
	/* Root itself is served. */
	root = c_open(d);
	sid = c_session(root, NULL);
	r = run_tool(root, json_string_value(sid), "id", "bash",
	    "{\"command\":\"id -u\"}");
	cr_assert_str_eq(e2e_content(r), "0\n");
	json_decref(r);
	json_decref(sid);
	c_close(root);
	d_stop(d);

	/* Allowed by the option: the tools run as that user. */
	d = d_start("--socket-mode", "0666", "--allow-other-uids", NULL);
	cr_assert_eq(chmod(d->dir, 0711), 0);
	nobody = c_adopt(d_connect_as(d, 65534));
	sid = c_session(nobody, NULL);
	r = run_tool(nobody, json_string_value(sid), "id", "bash",
	    "{\"command\":\"id -u\"}");
	cr_assert_str_eq(e2e_content(r), "65534\n");
	json_decref(r);
	json_decref(sid);
	c_close(nobody);
	d_stop(d);
}

/* ------------------------------------------------------------------ */

/* 100000 bytes of output, of which 1000 fit in the result: a file. */
#define BIG_TOOL "[{\"name\":\"big\",\"command\":[\"/bin/sh\",\"-c\"," \
	"\"yes x | head -c 100000; sleep ${PAUSE:-0}\"]," \
	"\"maxResultBytes\":1000}]"

static json_t *
big_session(struct client *c, int grace_ms)
{
	json_t *p = json_pack("{s:o}", "tools", e2e_json(BIG_TOOL));

	if (grace_ms >= 0)
		json_object_set_new(p, "outputGraceMs", json_integer(grace_ms));
	return c_session(c, p);
}

static const char *
path_of(const json_t *result)
{
	return json_string_value(json_object_get(json_object_get(result,
	    "meta"), "fullOutputPath"));
}

static bool
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Output files in the daemon's output directory. */
static int
count_files(struct daemon *d)
{
	struct dirent *de;
	DIR *dir = opendir(d->out);
	int n = 0;

	cr_assert(dir != NULL);
	while ((de = readdir(dir)) != NULL)
		n += de->d_name[0] != '.';
	closedir(dir);
	return n;
}

Test(outputs, the_budget_removes_the_oldest_and_says_so)
{
	struct daemon *d = d_start("--output-budget", "250000", NULL);
	struct client *c = c_open(d);
	json_t *sid = big_session(c, -1), *r, *files, *row;
	const char *s = json_string_value(sid);
	char *paths[4], id[32];
	size_t i;

	for (i = 0; i < 4; i++) {
		snprintf(id, sizeof id, "b%zu", i);
		r = run_tool(c, s, id, "big", NULL);
		cr_assert(path_of(r) != NULL, "no file: %s", e2e_content(r));
		paths[i] = strdup(path_of(r));
		json_decref(r);
	}
	/* 4 x 100000 bytes in a budget of 250000: the first two went. */
	cr_assert(!exists(paths[0]) && !exists(paths[1]));
	cr_assert(exists(paths[2]) && exists(paths[3]));
	r = c_call(c, "outputFiles", json_pack("{s:s}", "sessionId", s));
	files = json_object_get(r, "files");
	cr_assert_eq(json_array_size(files), 4, "%s", json_dumps(r, 0));
	json_array_foreach(files, i, row) {
		snprintf(id, sizeof id, "b%zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(row,
		    "toolUseId")), id);
		cr_assert_str_eq(json_string_value(json_object_get(row,
		    "path")), paths[i]);
		cr_assert_eq(json_integer_value(json_object_get(row, "bytes")),
		    100000);
		if (i < 2)
			cr_assert_str_eq(json_string_value(json_object_get(row,
			    "removed")), "budget");
		else
			cr_assert(json_is_null(json_object_get(row,
			    "removed")));
	}
	json_decref(r);
	/* Closed with the default grace (a minute): the files stay a while. */
	json_decref(c_call(c, "closeSession", json_pack("{s:s}", "sessionId",
	    s)));
	cr_assert(exists(paths[2]) && exists(paths[3]));
	json_decref(sid);
	c_close(c);
	/* A stop closes every session: no file outlives it. */
	d_stop(d);
	cr_assert(!exists(paths[2]) && !exists(paths[3]));
	for (i = 0; i < 4; i++)
		free(paths[i]);
}

Test(outputs, files_go_when_the_grace_after_close_ends)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *now = big_session(c, 0), *later = big_session(c,
	    e2e_ms(1000)), *r;
	long long until;
	char *p0, *p1;

	r = run_tool(c, json_string_value(now), "n", "big", NULL);
	p0 = strdup(path_of(r));
	json_decref(r);
	r = run_tool(c, json_string_value(later), "l", "big", NULL);
	p1 = strdup(path_of(r));
	json_decref(r);
	cr_assert(exists(p0) && exists(p1));
	json_decref(c_call(c, "closeSession", json_pack("{s:O}", "sessionId",
	    now)));
	cr_assert(!exists(p0), "outputGraceMs 0 kept the file");
	json_decref(c_call(c, "closeSession", json_pack("{s:O}", "sessionId",
	    later)));
	cr_assert(exists(p1), "the grace was not kept");
	for (until = e2e_now_ms() + e2e_ms(SLOW); exists(p1);
	    usleep(20 * 1000))
		cr_assert_lt(e2e_now_ms(), until,
		    "the file outlived its grace");
	cr_assert_eq(count_files(d), 0);
	free(p0);
	free(p1);
	json_decref(now);
	json_decref(later);
	c_close(c);
	d_stop(d);
}

Test(outputs, a_killed_or_discarded_tool_leaves_no_file)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, json_pack("{s:o, s:{s:s}}", "tools",
	    e2e_json(BIG_TOOL), "env", "PAUSE", "3")), *list, *r;
	const char *s = json_string_value(sid), *how[] = { "abort", "discard" };
	long long until;
	size_t i;

	for (i = 0; i < 2; i++) {
		json_decref(c_add(c, s, how[i], "big", NULL));
		/* The output is on disk once the file shows up. */
		until = e2e_now_ms() + e2e_ms(SLOW);
		while (count_files(d) == 0) {
			cr_assert(e2e_now_ms() < until, "no output file");
			usleep(20000);
		}
		json_decref(c_call(c, how[i], json_pack("{s:s, s:s}",
		    "sessionId", s, "reason", "cancel")));
		if (i == 0) {
			json_decref(c_call(c, "drain", json_pack("{s:s}",
			    "sessionId", s)));
			list = c_until(c, "turn_end", SLOW);
			r = e2e_filter(list, "tool_result");
			cr_assert(json_is_null(json_object_get(json_object_get(
			    json_array_get(r, 0), "meta"), "fullOutputPath")));
			json_decref(r);
			json_decref(list);
		}
		/* A discarded tool runs on (S11) and ends unseen. */
		cr_assert(d_wait_no_leftovers(d, SLOW));
		until = e2e_now_ms() + e2e_ms(SLOW);
		while (count_files(d) != 0) {
			cr_assert(e2e_now_ms() < until, "a file nobody was "
			    "told of was left");
			usleep(20000);
		}
	}
	r = c_call(c, "outputFiles", json_pack("{s:s}", "sessionId", s));
	cr_assert_eq(json_array_size(json_object_get(r, "files")), 0);
	json_decref(r);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(outputs, no_file_beyond_the_budget_and_leftovers_count)
{
	struct daemon *d = d_start("--output-budget", "50000", NULL);
	struct client *c = c_open(d);
	json_t *sid = big_session(c, -1), *r;
	char left[160];
	FILE *f;
	int i;

	r = run_tool(c, json_string_value(sid), "x", "big", NULL);
	cr_assert(path_of(r) == NULL);
	cr_assert(strstr(e2e_content(r), "the whole output could not be saved "
	    "(the whole output is larger than --output-budget: File too "
	    "large)") != NULL, "content: %s", e2e_content(r));
	/* And meta says so, for a client that reads no content. */
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(
	    json_object_get(r, "meta"), "warnings"), 0)), "the whole output "
	    "(100000 bytes) was not kept: the whole output is larger than "
	    "--output-budget: File too large");
	json_decref(r);
	cr_assert_eq(count_files(d), 0);
	json_decref(sid);
	c_close(c);

	/* A crash leaves a file: the next daemon counts it, oldest first. */
	d_kill(d, SIGKILL);
	snprintf(left, sizeof left, "%s/left-1-1.out", d->out);
	cr_assert((f = fopen(left, "w")) != NULL);
	for (i = 0; i < 40000; i++)
		fputc('y', f);
	fclose(f);
	d_restart(d, "--output-budget", "150000", NULL);
	c = c_open(d);
	sid = big_session(c, -1);
	r = run_tool(c, json_string_value(sid), "y", "big", NULL);
	cr_assert(path_of(r) != NULL && exists(path_of(r)));
	cr_assert(exists(left), "a leftover under the budget was removed");
	json_decref(r);
	r = run_tool(c, json_string_value(sid), "z", "big", NULL);
	cr_assert(!exists(left), "the leftover was not the first to go");
	json_decref(r);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* The throwaway user of the test below, removed however it ends. */
static char uids_user[32];

static void
uids_remove_user(void)
{
	char cmd[96];

	snprintf(cmd, sizeof cmd, "userdel %s >/dev/null 2>&1", uids_user);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove the test user %s\n", uids_user);
}

Test(uids, another_users_tools_run_as_that_user)
{
	struct client *c;
	struct daemon *d;
	struct passwd *pw;
	struct stat st;
	json_t *sid, *r;
	char cmd[256], want[256];

	if (geteuid() != 0)
		cr_skip("needs root to make a user and act as it");
	snprintf(uids_user, sizeof uids_user, "stexec-t%ld",
	    (long)getpid() % 100000);
	snprintf(cmd, sizeof cmd, "useradd -M -d /nonexistent-%s -s /bin/sh "
	    "%s >/dev/null 2>&1", uids_user, uids_user);
	if (system(cmd) != 0)
		cr_skip("useradd cannot make a user here");
	atexit(uids_remove_user);
	cr_assert((pw = getpwnam(uids_user)) != NULL);

	d = d_start("--socket-mode", "0666", "--allow-other-uids", NULL);
	cr_assert_eq(chmod(d->dir, 0711), 0);
	c = c_adopt(d_connect_as(d, pw->pw_uid));
	sid = c_session(c, json_pack("{s:[{s:s, s:[s, s, s], s:i}, "
	    "{s:s, s:[s, s, s], s:s}, {s:s, s:[s, s, s], s:s}]}", "tools",
	    "name", "big", "command", "/bin/sh", "-c", "yes x | head -c 100000",
	    "maxResultBytes", 1000,
	    "name", "tmp", "command", "/bin/sh", "-c", "stat -c '%u %a' $TMPDIR",
	    "sandbox", "read-only",
	    "name", "ww", "command", "/bin/sh", "-c", "id -u; touch $TMPDIR/x",
	    "sandbox", "workspace-write"));
	r = run_tool(c, json_string_value(sid), "id", "bash",
	    "{\"command\":\"id -u; id -g; echo $HOME $USER $LOGNAME\"}");
	snprintf(want, sizeof want, "%u\n%u\n%s %s %s\n",
	    (unsigned)pw->pw_uid, (unsigned)pw->pw_gid, pw->pw_dir, uids_user,
	    uids_user);
	cr_assert_str_eq(e2e_content(r), want);
	json_decref(r);
	/* Its TMPDIR and whole-output file are its own, and private. */
	r = run_tool(c, json_string_value(sid), "big", "big", "{}");
	cr_assert(json_is_true(json_object_get(json_object_get(r, "meta"),
	    "truncated")), "%s", e2e_content(r));
	cr_assert(stat(e2e_str(json_object_get(r, "meta"), "fullOutputPath"),
	    &st) == 0);
	cr_assert_eq(st.st_uid, pw->pw_uid);
	cr_assert_eq(st.st_mode & 077, 0);
	json_decref(r);
	r = run_tool(c, json_string_value(sid), "tmp", "tmp", "{}");
	snprintf(want, sizeof want, "%u 700\n", (unsigned)pw->pw_uid);
	cr_assert_str_eq(e2e_content(r), want);
	json_decref(r);
	/*
	 * A sandbox made as root (its mount namespace) still runs it as it,
	 * where the daemon can make one; else the tool is refused.
	 */
	r = run_tool(c, json_string_value(sid), "ww", "ww", "{}");
	if (c_can(c, "workspace-write")) {
		snprintf(want, sizeof want, "%u\n", (unsigned)pw->pw_uid);
		cr_assert_str_eq(e2e_content(r), want);
	} else {
		cr_assert_str_eq(e2e_reason(r), "spawn_failed", "%s",
		    e2e_content(r));
	}
	json_decref(r);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}
