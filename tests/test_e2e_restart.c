/*
 * Crash recovery (doc/design.md §7, Restart) end to end: a daemon killed (a real SIGKILL, its sentinel
 * stopped first so that the new daemon has leftovers to find) or stopped,
 * then started again on the same --state-dir: sessions come back, every
 * tool of the turn whose result was not delivered gets one daemon_restarted
 * result, none is repeated, seq goes on, and no process is left.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

#define SLOW 30000

TestSuite(restart, .fini = e2e_fini);

/*
 * A crash that takes the sentinel with it: tools survive the daemon. The
 * daemon is stopped first, so that it cannot start a new sentinel, and the
 * sentinel is killed, not merely stopped: a stopped sentinel left behind
 * by its dead parent is in an orphaned process group, which the kernel
 * sends SIGHUP and SIGCONT, and it would wake and kill the tools.
 */
static void
crash(struct daemon *d)
{
	pid_t sentinel = d_sentinel(d);
	int status;

	cr_assert_neq(sentinel, 0, "no sentinel");
	cr_assert_eq(kill(d->pid, SIGSTOP), 0);
	cr_assert_eq(waitpid(d->pid, &status, WUNTRACED), d->pid);
	cr_assert(WIFSTOPPED(status), "the daemon ended: %#x", status);
	/* A SIGKILL sent ends it before it runs any code of its own again. */
	cr_assert_eq(kill(sentinel, SIGKILL), 0);
	d_kill(d, SIGKILL);
}

static bool
listed(struct client *c, const char *sid)
{
	json_t *r = c_call(c, "listSessions", NULL), *row;
	bool found = false;
	size_t i;

	json_array_foreach(json_object_get(r, "sessions"), i, row)
		found |= strcmp(e2e_str(row, "sessionId"), sid) == 0;
	json_decref(r);
	return found;
}

/* Subscribe from since; the notifications until the first turn_end. */
static json_t *
resume(struct client *c, const char *sid, json_int_t since)
{
	json_decref(c_call(c, "subscribe", json_pack("{s:s, s:I}",
	    "sessionId", sid, "since", since)));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	return c_until(c, "turn_end", SLOW);
}

Test(restart, a_crash_mid_turn_keeps_the_pairing_and_leaves_nothing)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL), *seen, *after, *results, *r;
	char *sid = strdup(json_string_value(sid_j));
	json_int_t last, prev;
	size_t i;

	json_decref(c_add(c, sid, "t1", "bash", "{\"command\":\"echo one\"}"));
	json_decref(c_wait(c, "tool_result", SLOW));
	json_decref(c_add(c, sid, "t2", "bash", "{\"command\":\"sleep 60\"}"));
	json_decref(c_add(c, sid, "t3", "bash", "{\"command\":\"echo three\"}"));
	json_decref(c_wait_tool(c, "tool_status", "t2", "executing", SLOW));
	/* The last seq the client has been sent so far. */
	seen = c_call(c, "events", json_pack("{s:s}", "sessionId", sid));
	last = e2e_int(seen, "lastSeq");
	cr_assert_gt(last, 3);
	json_decref(seen);
	c_close(c);

	crash(d);
	/*
	 * With no sentinel, the tools run on for the new daemon to find: by
	 * their token, or in the cgroup the journal names.
	 */
	cr_assert_gt(d_leftovers(d), 0, "the crash left no tool to find");
	d_restart(d, NULL);
	cr_assert(d_wait_no_leftovers(d, 3000), "%d processes of the old "
	    "daemon's tools are left", d_leftovers(d));

	c = c_open(d);
	cr_assert(listed(c, sid), "the session is not listed after restart");
	after = resume(c, sid, last);
	/* Nothing the client saw is sent again; seq goes on. */
	prev = last;
	json_array_foreach(after, i, r) {
		json_int_t seq = e2e_int(json_object_get(r, "params"), "seq");

		cr_assert_gt(seq, prev, "seq %lld after %lld", seq, prev);
		prev = seq;
	}
	results = e2e_filter(after, "tool_result");
	cr_assert_eq(json_array_size(results), 2, "%zu results",
	    json_array_size(results));
	r = json_array_get(results, 0);
	cr_assert_str_eq(e2e_str(json_object_get(r, "result"), "tool_use_id"),
	    "t2");
	cr_assert(e2e_is_error(r));
	cr_assert_str_eq(e2e_reason(r), "daemon_restarted");
	cr_assert(strstr(e2e_content(r), "restarted") != NULL);
	r = json_array_get(results, 1);
	cr_assert_str_eq(e2e_str(json_object_get(r, "result"), "tool_use_id"),
	    "t3");
	cr_assert_str_eq(e2e_reason(r), "daemon_restarted");
	json_decref(results);
	json_decref(after);

	/* The session goes on: the next turn runs tools. */
	json_decref(c_add(c, sid, "t4", "bash", "{\"command\":\"echo four\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	after = c_until(c, "turn_end", SLOW);
	results = e2e_filter(after, "tool_result");
	cr_assert_eq(json_array_size(results), 1);
	cr_assert_str_eq(e2e_content(json_array_get(results, 0)), "four\n");
	json_decref(results);
	json_decref(after);

	json_decref(sid_j);
	free(sid);
	c_close(c);
	d_stop(d);
}

Test(restart, streamed_chunks_keep_their_place_not_their_text)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, json_pack("{s:[o]}", "tools", e2e_json(
	    "{\"name\":\"talk\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"printf hello; sleep 60\"],\"streamOutput\":true}"))), *all, *p;
	const char *sid = json_string_value(sid_j);
	json_int_t expect = 1;
	bool chunk = false;
	size_t i;

	json_decref(c_add(c, sid, "t", "talk", NULL));
	json_decref(c_wait(c, "progress", SLOW));
	c_close(c);
	crash(d);
	d_restart(d, NULL);

	c = c_open(d);
	all = resume(c, sid, 0);
	json_array_foreach(all, i, p) {
		const json_t *params = json_object_get(p, "params");
		const json_t *data = json_object_get(params, "data");

		/* Every seq from 1, none missing. */
		cr_assert_eq(e2e_int(params, "seq"), expect++);
		if (e2e_str(data, "stream") != NULL) {
			cr_assert_str_eq(e2e_str(data, "text"), "");
			cr_assert_eq(e2e_int(data, "elided"), 5);
			chunk = true;
		}
	}
	cr_assert(chunk, "the streamed chunk is not in the replay");
	json_decref(all);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

/* Entries of the daemon's output directory named tmp.* (TMPDIRs). */
static int
tmpdirs(struct daemon *d)
{
	struct dirent *de;
	DIR *dir = opendir(d->out);
	int n = 0;

	cr_assert(dir != NULL);
	while ((de = readdir(dir)) != NULL)
		n += strncmp(de->d_name, "tmp.", 4) == 0;
	closedir(dir);
	return n;
}

Test(restart, a_dead_daemons_tmpdirs_are_removed)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, json_pack("{s:[o]}", "tools", e2e_json(
	    "{\"name\":\"ro\",\"command\":[\"/bin/sleep\",\"60\"],"
	    "\"concurrencySafe\":true,\"sandbox\":\"read-only\"}")));

	json_decref(c_add(c, json_string_value(sid_j), "t", "ro", NULL));
	json_decref(c_wait_tool(c, "tool_status", "t", "executing", SLOW));
	cr_assert_eq(tmpdirs(d), 1, "the read-only tool has no TMPDIR");
	c_close(c);
	crash(d);
	d_restart(d, NULL);
	cr_assert_eq(tmpdirs(d), 0, "the dead daemon's TMPDIR is left");
	cr_assert(d_wait_no_leftovers(d, 3000));
	json_decref(sid_j);
	d_stop(d);
}

/* A turn of one bash call, its log, a SIGKILL and a restart: the same log. */
static void
log_survives(struct daemon *d, struct client **cp, const char *sid,
    const char *input)
{
	struct client *c = *cp;
	json_t *before, *after, *ev;
	char *a, *b;

	json_decref(c_add(c, sid, "t1", "bash", input));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));
	json_decref(c_until(c, "turn_end", SLOW));
	ev = c_call(c, "events", json_pack("{s:s, s:i}", "sessionId", sid,
	    "since", 0));
	before = json_incref(json_object_get(ev, "notifications"));
	json_decref(ev);
	c_close(c);

	d_kill(d, SIGKILL);
	d_restart(d, NULL);
	*cp = c = c_open(d);
	ev = c_call(c, "events", json_pack("{s:s, s:i}", "sessionId", sid,
	    "since", 0));
	after = json_object_get(ev, "notifications");
	cr_assert_gt(json_array_size(after), 0);
	a = json_dumps(before, JSON_COMPACT | JSON_SORT_KEYS);
	b = json_dumps(after, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(a, b, "the log changed across the restart");
	free(a);
	free(b);
	json_decref(ev);
	json_decref(before);
}

/*
 * A result whose line is larger than the journal gathers per loop pass
 * (90,000 control bytes: 540 KB of JSON) is written on its own, in its
 * place among the others.
 */
Test(restart, a_large_result_comes_back_whole_in_its_place)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL);
	const char *sid = json_string_value(sid_j);

	log_survives(d, &c, sid, "{\"command\":\"echo one; head -c 90000 "
	    "/dev/zero | tr '\\\\000' '\\\\001'; echo; echo two\"}");
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

Test(restart, a_finished_turn_and_its_log_come_back_whole)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid_j = c_session(c, NULL), *ev;
	const char *sid = json_string_value(sid_j);

	log_survives(d, &c, sid, "{\"command\":\"echo one\"}");

	/* Its next turn is turn 2. */
	c_close(c);
	c = c_open(d);
	json_decref(c_call(c, "subscribe", json_pack("{s:s}", "sessionId",
	    sid)));
	ev = c_add(c, sid, "t2", "bash", "{\"command\":\"echo two\"}");
	cr_assert_eq(e2e_int(ev, "turn"), 2);
	json_decref(ev);
	json_decref(sid_j);
	c_close(c);
	d_stop(d);
}

Test(restart, a_stop_keeps_the_sessions_and_close_ends_them)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *keep = c_session(c, NULL), *gone = c_session(c, NULL), *after;
	json_t *results;

	json_decref(c_add(c, json_string_value(keep), "t", "bash",
	    "{\"command\":\"sleep 60\"}"));
	json_decref(c_call(c, "closeSession", json_pack("{s:O}", "sessionId",
	    gone)));
	json_decref(c_wait_tool(c, "tool_status", "t", "executing", SLOW));
	c_close(c);
	/* SIGTERM: the tools are killed, the sessions stay in the journal. */
	cr_assert_eq(d_terminate(d), 0);
	d_restart(d, NULL);

	c = c_open(d);
	cr_assert(listed(c, json_string_value(keep)));
	cr_assert(!listed(c, json_string_value(gone)), "a closed session "
	    "came back");
	after = resume(c, json_string_value(keep), 0);
	results = e2e_filter(after, "tool_result");
	cr_assert_eq(json_array_size(results), 1);
	cr_assert_str_eq(e2e_reason(json_array_get(results, 0)),
	    "daemon_restarted");
	json_decref(results);
	json_decref(after);
	json_decref(keep);
	json_decref(gone);
	c_close(c);
	d_stop(d);
}

/* Overwrite n bytes at offset off of path with junk. */
static void
scribble(const char *path, off_t off, size_t n)
{
	char junk[64];
	int fd = open(path, O_WRONLY);

	cr_assert(fd >= 0, "cannot open %s", path);
	memset(junk, '#', sizeof junk);
	cr_assert(n <= sizeof junk);
	cr_assert_eq(pwrite(fd, junk, n, off), (ssize_t)n);
	close(fd);
}

/* The one journal file in the daemon's state directory. */
static void
journal_of(struct daemon *d, char *path, size_t len)
{
	DIR *dir = opendir(d_path(d, "state"));
	struct dirent *de;
	int n = 0;

	cr_assert(dir != NULL);
	while ((de = readdir(dir)) != NULL)
		if (strncmp(de->d_name, "journal-", 8) == 0 &&
		    strchr(de->d_name, '.') == NULL) {
			snprintf(path, len, "%s/%s", d_path(d, "state"),
			    de->d_name);
			n++;
		}
	closedir(dir);
	cr_assert_eq(n, 1, "%d journals in %s", n, d_path(d, "state"));
}

Test(restart, a_corrupt_journal_is_reported_and_the_daemon_serves)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *one = c_session(c, NULL), *two, *three;
	char journal[512], *log;
	struct stat st;
	int fd;

	two = c_session(c, NULL);
	three = c_session(c, NULL);
	c_close(c);
	d_kill(d, SIGKILL);

	journal_of(d, journal, sizeof journal);
	cr_assert_eq(stat(journal, &st), 0);
	/* A record in the middle damaged, and a torn append at the end. */
	scribble(journal, st.st_size / 2, 16);
	fd = open(journal, O_WRONLY | O_APPEND);
	cr_assert_eq(write(fd, "N 500 1234abcd\ns-00 9 {\"json", 28), 28);
	close(fd);

	d_restart(d, NULL);
	c = c_open(d);
	c_ping(c);
	/* What was not damaged is back. */
	cr_assert(listed(c, json_string_value(one)) ||
	    listed(c, json_string_value(three)));
	log = e2e_read_file(d->log, NULL);
	cr_assert(strstr(log, "corrupt") != NULL && strstr(log,
	    "cut short") != NULL, "the log does not say what was dropped");
	free(log);
	json_decref(one);
	json_decref(two);
	json_decref(three);
	c_close(c);
	d_stop(d);
}

/*
 * A state directory serves every daemon that uses it, each socket with a
 * journal of its own: a daemon on another socket (a test's, a user's)
 * starts empty and never restores, or kills the tools of, the other's.
 */
Test(restart, daemons_on_other_sockets_never_see_each_others_sessions)
{
	struct daemon *a = d_start(NULL), *b;
	struct client *c;
	char state[512];
	json_t *sid;

	c = c_open(a);
	sid = c_session(c, NULL);
	c_close(c);
	cr_assert_eq(d_terminate(a), 0);
	snprintf(state, sizeof state, "%s", d_path(a, "state"));
	b = d_start("--state-dir", state, NULL);
	c = c_open(b);
	cr_assert(!listed(c, json_string_value(sid)), "b restored a's session");
	json_decref(c_session(c, NULL));
	c_close(c);
	d_stop(b);
	/* a comes back with its own session, and not b's. */
	d_restart(a, NULL);
	c = c_open(a);
	cr_assert(listed(c, json_string_value(sid)), "a lost its session");
	cr_assert(!listed(c, "none"));
	{
		json_t *r = c_call(c, "listSessions", NULL);

		cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 1);
		json_decref(r);
	}
	c_close(c);
	json_decref(sid);
	d_stop(a);
}

/* A journal of the layout before, DIR/journal, is the default socket's. */
Test(restart, the_old_journal_becomes_the_default_sockets)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	char journal[512], old[512];
	json_t *sid = c_session(c, NULL);

	c_close(c);
	cr_assert_eq(d_terminate(d), 0);
	journal_of(d, journal, sizeof journal);
	snprintf(old, sizeof old, "%s", d_path(d, "state/journal"));
	cr_assert_eq(rename(journal, old), 0);
	/* This daemon's socket is the default one where $STEXEC_SOCKET says. */
	setenv("STEXEC_SOCKET", d->sock, 1);
	d_restart(d, NULL);
	unsetenv("STEXEC_SOCKET");
	c = c_open(d);
	cr_assert(listed(c, json_string_value(sid)), "the old journal's "
	    "session was not restored");
	c_close(c);
	journal_of(d, journal, sizeof journal);
	cr_assert(access(old, F_OK) != 0, "the old journal is still there");
	json_decref(sid);
	d_stop(d);
}

/* Whether sid is listed within ms, scaled (gone: false once it is not). */
static bool
listed_within(struct daemon *d, const char *sid, bool want, int ms)
{
	struct client *c = c_open(d);
	bool is = listed(c, sid);

	for (ms = ms > 0 ? e2e_ms(ms) : 0; is != want && ms > 0; ms -= 50) {
		usleep(50 * 1000);
		is = listed(c, sid);
	}
	c_close(c);
	return is;
}

/*
 * The idle clock is wall time and journaled: a session idle longer than
 * --session-idle-timeout across a restart is gone after it, one idle for
 * less keeps the time it has left. Without that, a daemon restarted more
 * often than the timeout never expired an abandoned session.
 */
Test(restart, the_idle_clock_counts_the_time_the_daemon_was_down)
{
	/*
	 * Every duration in units of the timeout T, scaled (the time rule):
	 * old is idle 3/4 T before young is, and the daemon is down until
	 * old has been idle past T; young then has 3/4 T left, in which the
	 * restart and the look at the list must fit.
	 */
	int t = e2e_s(4);
	char timeout[16];
	long long old_since;
	struct client *c;
	json_t *old, *young;
	struct daemon *d;

	snprintf(timeout, sizeof timeout, "%d", t);
	d = d_start("--session-idle-timeout", timeout, NULL);
	c = c_open(d);
	old = c_session(c, NULL);
	c_close(c);                     /* old is idle from now */
	old_since = e2e_now_ms();
	usleep((useconds_t)t * 750 * 1000);
	c = c_open(d);
	young = c_session(c, NULL);
	c_close(c);                     /* young from now */
	cr_assert_eq(d_terminate(d), 0);
	while (e2e_now_ms() < old_since + t * 1000LL + 200)
		usleep(20 * 1000);
	d_restart(d, "--session-idle-timeout", timeout, NULL);
	cr_assert(listed_within(d, json_string_value(young), true, 0),
	    "a session within its timeout was lost");
	cr_assert(!listed_within(d, json_string_value(old), false, 5000),
	    "a session idle past the timeout came back");
	/* And young still goes when its own time is up. */
	cr_assert(!listed_within(d, json_string_value(young), false,
	    t * 1000 + 5000));
	json_decref(old);
	json_decref(young);
	d_stop(d);
}
