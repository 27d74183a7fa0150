/*
 * stexec-cli end to end: the built binary ($STEXEC_CLI) against a real
 * daemon on a private socket, checking what it prints and how it exits.
 * Its output is piped, so it is the plain (script) form.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

extern char **environ;

struct cli_proc {
	pid_t pid;
	char out[160], err[160];
};

static void	cli_start(struct daemon *, struct cli_proc *, const char *,
		    va_list);
static struct cli_proc *cli_bg(struct daemon *, const char *, ...);
static int	cli_wait(struct cli_proc *, int, char **, char **);
static int	cli(struct daemon *, char **, char **, const char *, ...);
static bool	wait_for_file(const char *, const char *, int);
static bool	wait_for_status(struct client *, const char *, const char *,
		    const char *, int);
static void	write_file(const char *, const char *);
static char	*only_session(struct client *);

/*
 * Run stexec-cli --socket D ARGS... (NULL-ended) with stdout and stderr
 * going to files in the daemon's directory.
 */
static void
cli_start(struct daemon *d, struct cli_proc *p, const char *arg, va_list ap)
{
	static int seq;
	const char *path = getenv("STEXEC_CLI");
	posix_spawn_file_actions_t fa;
	char *argv[64];
	size_t n = 0;
	int k;

	cr_assert(path != NULL, "STEXEC_CLI is not set");
	seq++;
	snprintf(p->out, sizeof p->out, "%s/cli%d.out", d->dir, seq);
	snprintf(p->err, sizeof p->err, "%s/cli%d.err", d->dir, seq);
	argv[n++] = (char *)path;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	for (; arg != NULL && n < 62; arg = va_arg(ap, const char *))
		argv[n++] = (char *)arg;
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, p->out,
	    O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, p->err,
	    O_WRONLY | O_CREAT | O_TRUNC, 0600);
	k = posix_spawn(&p->pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(k, 0, "cannot run %s: %s", path, strerror(k));
}

static struct cli_proc *
cli_bg(struct daemon *d, const char *arg, ...)
{
	struct cli_proc *p = calloc(1, sizeof *p);
	va_list ap;

	va_start(ap, arg);
	cli_start(d, p, arg, ap);
	va_end(ap);
	return p;
}

/* Wait up to ms for it to exit; its exit status (128+N for signal N). */
static int
cli_wait(struct cli_proc *p, int ms, char **out, char **err)
{
	long long until = e2e_now_ms() + ms;
	int status;
	pid_t r;

	while ((r = waitpid(p->pid, &status, WNOHANG)) == 0) {
		if (e2e_now_ms() > until) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			cr_assert_fail("stexec-cli did not exit within %d ms; "
			    "stderr: %s", ms, e2e_read_file(p->err, NULL));
		}
		usleep(5000);
	}
	cr_assert_eq(r, p->pid);
	if (out != NULL)
		*out = e2e_read_file(p->out, NULL);
	if (err != NULL)
		*err = e2e_read_file(p->err, NULL);
	return WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status);
}

/* Run to completion; the exit status, stdout and stderr (malloc'd). */
static int
cli(struct daemon *d, char **out, char **err, const char *arg, ...)
{
	struct cli_proc p;
	va_list ap;

	va_start(ap, arg);
	cli_start(d, &p, arg, ap);
	va_end(ap);
	return cli_wait(&p, 60000, out, err);
}

static bool
wait_for_file(const char *path, const char *needle, int ms)
{
	long long until = e2e_now_ms() + ms;
	char *text;
	bool found;

	for (;;) {
		text = e2e_read_file(path, NULL);
		found = text != NULL && strstr(text, needle) != NULL;
		free(text);
		if (found)
			return true;
		if (e2e_now_ms() > until)
			return false;
		usleep(10000);
	}
}

/* Poll status until tool id has the given status. */
static bool
wait_for_status(struct client *c, const char *sid, const char *id,
    const char *status, int ms)
{
	long long until = e2e_now_ms() + ms;
	json_t *r, *t;
	size_t i;
	bool found;

	for (;;) {
		r = c_call(c, "status", json_pack("{s:s}", "sessionId", sid));
		found = false;
		json_array_foreach(json_object_get(r, "tools"), i, t)
			if (strcmp(json_string_value(json_object_get(t, "id")),
			    id) == 0 && strcmp(json_string_value(
			    json_object_get(t, "status")), status) == 0)
				found = true;
		json_decref(r);
		if (found)
			return true;
		if (e2e_now_ms() > until)
			return false;
		usleep(10000);
	}
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* The only session's id, from listSessions. */
static char *
only_session(struct client *c)
{
	json_t *r = c_call(c, "listSessions", NULL);
	json_t *list = json_object_get(r, "sessions");
	char *sid;

	cr_assert_eq(json_array_size(list), 1);
	sid = strdup(json_string_value(json_object_get(json_array_get(list, 0),
	    "sessionId")));
	json_decref(r);
	return sid;
}

Test(cli, ping)
{
	struct daemon *d = d_start(NULL);
	char *out, *err;

	cr_assert_eq(cli(d, &out, &err, "ping", NULL), 0, "%s", err);
	cr_assert(strstr(out, "ok") != NULL, "%s", out);
	cr_assert(strstr(out, d->sock) != NULL, "%s", out);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "--json", "ping", NULL), 0);
	cr_assert_str_eq(out, "{}\n");
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, run_one_tool)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *r;
	char *out, *err;

	cr_assert_eq(cli(d, &out, &err, "run", "bash",
	    "{\"command\":\"echo hello\"}", NULL), 0, "%s", err);
	cr_assert_str_eq(out, "hello\n");
	free(out);
	free(err);
	/* run closes the session it made. */
	r = c_call(c, "listSessions", NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "sessions")), 0);
	json_decref(r);
	c_close(c);
	d_stop(d);
}

Test(cli, run_several_in_order)
{
	struct daemon *d = d_start(NULL);
	char *out, *err, file[200], input[300];

	snprintf(file, sizeof file, "%s/f.txt", d->dir);
	write_file(file, "from the file\n");
	snprintf(input, sizeof input, "{\"file_path\":\"%s\"}", file);
	/* The slow first one's result still comes first. */
	cr_assert_eq(cli(d, &out, &err, "run",
	    "bash", "{\"command\":\"sleep 0.3; echo first\"}",
	    "read_file", input,
	    "bash", "{\"command\":\"echo third\"}", NULL), 0, "%s", err);
	cr_assert_str_eq(out, "first\n     1\tfrom the file\nthird\n");
	free(out);
	free(err);

	/* One failing tool makes the exit status 1; the others still print. */
	cr_assert_eq(cli(d, &out, &err, "run",
	    "bash", "{\"command\":\"echo fine\"}",
	    "bash", "{\"command\":\"echo bad; exit 3\"}", NULL), 1);
	cr_assert_str_eq(out, "fine\nbad\nExit code 3\n");
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, run_json_parses_back)
{
	struct daemon *d = d_start(NULL);
	char *out, *err, *line, *save = NULL;
	const char *want[][2] = { { "t1", "ok" }, { "t2", "unknown_tool" } };
	json_error_t jerr;
	json_t *j;
	int n = 0;

	cr_assert_eq(cli(d, &out, &err, "--json", "run",
	    "bash", "{\"command\":\"echo a\"}", "nope", "{}", NULL), 1);
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save), n++) {
		cr_assert_lt(n, 2, "extra line: %s", line);
		j = json_loads(line, 0, &jerr);
		cr_assert(j != NULL, "not JSON: %s: %s", jerr.text, line);
		cr_assert_str_eq(json_string_value(json_object_get(j,
		    "toolUseId")), want[n][0]);
		cr_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(j, "meta"), "reason")), want[n][1]);
		cr_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(j, "result"), "type")), "tool_result");
		json_decref(j);
	}
	cr_assert_eq(n, 2);
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, new_add_drain_status_close)
{
	struct daemon *d = d_start(NULL);
	char *out, *err, sid[128];

	cr_assert_eq(cli(d, &out, &err, "new", "--max-parallel", "2",
	    "--env", "GREETING=hi", NULL), 0, "%s", err);
	cr_assert_eq(sscanf(out, "%127s", sid), 1);
	cr_assert_eq(strncmp(sid, "s-", 2), 0, "%s", out);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "add", sid, "bash",
	    "{\"command\":\"echo $GREETING\"}", "--id", "a", NULL), 0, "%s",
	    err);
	cr_assert_eq(strncmp(out, "a turn=1 ", 9), 0, "%s", out);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "add", sid, "read_file",
	    "{\"file_path\":\"/nonexistent\"}", NULL), 0, "%s", err);
	cr_assert_eq(strncmp(out, "toolu_cli_", 10), 0, "%s", out);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "drain", sid, NULL), 0, "%s", err);
	cr_assert_str_eq(out, "drained turn 1: 2 results\n");
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "add", sid, "bash",
	    "{\"command\":\"sleep 30\"}", "--id", "slow", NULL), 0);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "status", sid, NULL), 0, "%s", err);
	cr_assert(strstr(out, "turn 2") != NULL, "%s", out);
	cr_assert(strstr(out, "ID") != NULL && strstr(out, "PID") != NULL,
	    "%s", out);
	cr_assert(strstr(out, "slow") != NULL && strstr(out, "bash") != NULL,
	    "%s", out);
	free(out);
	free(err);

	/* The events of turn 1 hold the variable's value. */
	cr_assert_eq(cli(d, &out, &err, "--json", "events", sid, NULL), 0);
	cr_assert(strstr(out, "hi\\n") != NULL, "%s", out);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "close", sid, NULL), 0, "%s", err);
	cr_assert_eq(strncmp(out, "closed ", 7), 0);
	free(out);
	free(err);
	cr_assert(d_wait_no_leftovers(d, 5000));

	cr_assert_eq(cli(d, &out, &err, "status", sid, NULL), 1);
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, watch_plain_until_close)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *list;
	const char *s = json_string_value(sid);
	struct cli_proc *w = cli_bg(d, "watch", s, NULL);
	char *out, *err;

	/* Turn 1 only shows that the watch is there (maybe as a replay). */
	json_decref(c_add(c, s, "w", "bash", "{\"command\":\"true\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", s)));
	cr_assert(wait_for_file(w->out, "turn 1 ended (drained)", 10000),
	    "watch shows nothing: %s", e2e_read_file(w->err, NULL));

	/* Turn 2 is seen live: times, names, and a timeline at its end. */
	json_decref(c_add(c, s, "a", "bash",
	    "{\"command\":\"sleep 0.5; echo one\"}"));
	json_decref(c_add(c, s, "b", "read_file",
	    "{\"file_path\":\"/nonexistent\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", s)));
	cr_assert(wait_for_file(w->out, "timeline of turn 2", 10000),
	    "no timeline: %s", e2e_read_file(w->out, NULL));
	json_decref(c_call(c, "closeSession", json_pack("{s:s}", "sessionId",
	    s)));
	list = c_until(c, "session_closed", 5000);
	json_decref(list);

	cr_assert_eq(cli_wait(w, 10000, &out, &err), 0, "%s", err);
	cr_assert(strstr(out, "turn 2  a bash  executing") != NULL, "%s", out);
	cr_assert(strstr(out, "a bash  result ok") != NULL, "%s", out);
	cr_assert(strstr(out, ": one") != NULL, "%s", out);
	cr_assert(strstr(out, "turn 2  b") != NULL, "%s", out);
	cr_assert(strstr(out, "result exit") != NULL, "%s", out);
	cr_assert(strstr(out, "turn 2 ended (drained)") != NULL, "%s", out);
	cr_assert(strstr(out, "timeline of turn 2: 2 tools") != NULL, "%s",
	    out);
	cr_assert(strstr(out, "█") != NULL, "%s", out);
	cr_assert(strstr(out, "session closed") != NULL, "%s", out);
	/* Live event lines carry their time; no colour when piped. */
	cr_assert(strstr(out, "t+") != NULL, "%s", out);
	cr_assert(strchr(out, '\033') == NULL, "colour when piped: %s", out);
	free(out);
	free(err);
	free(w);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(cli, bad_json_argument)
{
	struct daemon *d = d_start(NULL);
	char *out, *err;

	cr_assert_eq(cli(d, &out, &err, "add", "s-x", "bash",
	    "{\"command\":", NULL), 2);
	cr_assert(strncmp(err, "stexec-cli: add: argument 3 is not valid "
	    "JSON: ", 43) == 0, "%s", err);
	cr_assert(strstr(err, "column") != NULL, "%s", err);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "run", "bash", "{nope}", NULL), 2);
	cr_assert(strstr(err, "stexec-cli: run: argument 2 is not valid JSON")
	    != NULL, "%s", err);
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, daemon_not_running)
{
	const char *path = getenv("STEXEC_CLI");
	char cmd[512], buf[1024];
	FILE *f;
	size_t n;
	int status;

	cr_assert(path != NULL);
	snprintf(cmd, sizeof cmd, "%s --socket /nonexistent/stexec/s.sock "
	    "ping 2>&1", path);
	cr_assert((f = popen(cmd, "r")) != NULL);
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	status = pclose(f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%#x", status);
	cr_assert(strstr(buf, "stexec-cli: ping: cannot connect to "
	    "/nonexistent/stexec/s.sock: No such file or directory") != NULL,
	    "%s", buf);
	cr_assert(strstr(buf, "is stexecd running? Start it with: stexecd")
	    != NULL, "%s", buf);
}

Test(cli, unknown_session)
{
	struct daemon *d = d_start(NULL);
	char *out, *err;

	cr_assert_eq(cli(d, &out, &err, "status", "s-nope", NULL), 1);
	cr_assert_str_eq(err, "stexec-cli: status: Unknown session: s-nope "
	    "(-32001)\n");
	cr_assert_str_eq(out, "");
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "watch", "s-nope", NULL), 1);
	cr_assert(strstr(err, "Unknown session: s-nope (-32001)") != NULL,
	    "%s", err);
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, usage_errors)
{
	struct daemon *d = d_start(NULL);
	char *out, *err;

	cr_assert_eq(cli(d, &out, &err, "frobnicate", NULL), 2);
	cr_assert(strstr(err, "unknown command 'frobnicate'") != NULL);
	cr_assert(strstr(err, "usage: stexec-cli") != NULL);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "add", "--help", NULL), 0);
	cr_assert(strncmp(out, "usage: stexec-cli add SESSION TOOL JSON", 39)
	    == 0, "%s", out);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "help", NULL), 0);
	cr_assert(strstr(out, "watch") != NULL && strstr(out, "run") != NULL);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "add", "s-x", NULL), 2);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "drain", "s-x", "--bogus", NULL), 2);
	cr_assert(strstr(err, "unknown option --bogus") != NULL, "%s", err);
	free(out);
	free(err);
	d_stop(d);
}

Test(cli, ctrl_c_interrupts_run)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	struct cli_proc *p = cli_bg(d, "run", "bash",
	    "{\"command\":\"sleep 30\"}", "bash", "{\"command\":\"echo no\"}",
	    NULL);
	long long until = e2e_now_ms() + 10000;
	char *out, *err, *sid;
	json_t *r;

	/* Wait for the session, then for its tool to be running. */
	for (;;) {
		r = c_call(c, "listSessions", NULL);
		if (json_array_size(json_object_get(r, "sessions")) == 1) {
			json_decref(r);
			break;
		}
		json_decref(r);
		cr_assert(e2e_now_ms() < until, "run made no session");
		usleep(10000);
	}
	sid = only_session(c);
	cr_assert(wait_for_status(c, sid, "t1", "executing", 10000));
	kill(p->pid, SIGINT);
	cr_assert_eq(cli_wait(p, 10000, &out, &err), 1, "%s", err);
	/* bash can be cancelled: both get the interrupted result. */
	cr_assert_str_eq(out, "<tool_use_error>Interrupted by user"
	    "</tool_use_error>\n<tool_use_error>Interrupted by user"
	    "</tool_use_error>\n");
	cr_assert(strstr(err, "interrupting") != NULL, "%s", err);
	free(out);
	free(err);
	free(sid);
	free(p);
	cr_assert(d_wait_no_leftovers(d, 5000));
	c_close(c);
	d_stop(d);
}

Test(cli, second_ctrl_c_cancels_a_block_tool)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	char tools[200], *out, *err, *sid;
	struct cli_proc *p;
	int status;

	snprintf(tools, sizeof tools, "%s/slow.json", d->dir);
	write_file(tools, "[{\"name\":\"slow\",\"command\":[\"/bin/sleep\","
	    "\"30\"],\"interruptBehavior\":\"block\"}]");
	p = cli_bg(d, "run", "--tools", tools, "slow", "{}", NULL);
	for (int i = 0; i < 1000; i++) {
		json_t *r = c_call(c, "listSessions", NULL);
		size_t n = json_array_size(json_object_get(r, "sessions"));

		json_decref(r);
		if (n == 1)
			break;
		usleep(10000);
	}
	sid = only_session(c);
	cr_assert(wait_for_status(c, sid, "t1", "executing", 10000));
	kill(p->pid, SIGINT);
	/* A block tool outlives an interrupt. */
	usleep(300000);
	cr_assert_eq(waitpid(p->pid, &status, WNOHANG), 0,
	    "run ended on an interrupt of a block tool");
	kill(p->pid, SIGINT);
	cr_assert_eq(cli_wait(p, 10000, &out, &err), 1, "%s", err);
	cr_assert_str_eq(out, "<tool_use_error>Interrupted by user"
	    "</tool_use_error>\n");
	cr_assert(strstr(err, "cancelling") != NULL, "%s", err);
	free(out);
	free(err);
	free(sid);
	free(p);
	c_close(c);
	d_stop(d);
}

Test(cli, permit_and_tools)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	char tools[200], *out, *err, sid[128];

	snprintf(tools, sizeof tools, "%s/perm.json", d->dir);
	write_file(tools, "{\"name\":\"guarded\",\"description\":\"Echo.\\n"
	    "More.\",\"command\":[\"/bin/echo\",\"granted\"],"
	    "\"requiresPermission\":true,\"concurrencySafe\":true}");
	cr_assert_eq(cli(d, &out, &err, "new", "--tools", tools, NULL), 0,
	    "%s", err);
	cr_assert_eq(sscanf(out, "%127s", sid), 1);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "tools", sid, NULL), 0, "%s", err);
	cr_assert(strstr(out, "guarded") != NULL, "%s", out);
	cr_assert(strstr(out, "yes  Echo.…") != NULL, "%s", out);
	cr_assert(strstr(out, "bash") != NULL, "%s", out);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "add", sid, "guarded", "{}", "--id",
	    "g", NULL), 0, "%s", err);
	free(out);
	free(err);
	cr_assert(wait_for_status(c, sid, "g", "waiting_permission", 5000));
	cr_assert_eq(cli(d, &out, &err, "permit", sid, "g", NULL), 0, "%s",
	    err);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "drain", sid, NULL), 0, "%s", err);
	cr_assert_str_eq(out, "drained turn 1: 1 result\n");
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "events", sid, NULL), 0, "%s", err);
	cr_assert(strstr(out, "asks permission") != NULL, "%s", out);
	cr_assert(strstr(out, "result ok") != NULL, "%s", out);
	cr_assert(strstr(out, "granted") != NULL, "%s", out);
	free(out);
	free(err);

	/* A second one, denied: the turn is cancelled. */
	cr_assert_eq(cli(d, &out, &err, "add", sid, "guarded", "{}", "--id",
	    "h", NULL), 0, "%s", err);
	free(out);
	free(err);
	cr_assert(wait_for_status(c, sid, "h", "waiting_permission", 5000));
	cr_assert_eq(cli(d, &out, &err, "deny", sid, "h", "--message", "no",
	    NULL), 0, "%s", err);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "--json", "events", sid, "--since",
	    "0", NULL), 0, "%s", err);
	cr_assert(strstr(out, "permission_denied") != NULL, "%s", out);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "close", sid, NULL), 0);
	free(out);
	free(err);
	c_close(c);
	d_stop(d);
}

/* Tool output may hold NUL bytes: they reach stdout, and --json as \u0000. */
Test(cli, nul_bytes_in_output_survive)
{
	struct daemon *d = d_start(NULL);
	struct cli_proc *p;
	char *out, *err;
	size_t len;

	cr_assert_eq(cli(d, &out, &err, "--json", "run", "bash",
	    "{\"command\":\"printf 'a\\\\000b'\"}", NULL), 0, "%s", err);
	cr_assert(strstr(out, "\"content\":\"a\\u0000b\"") != NULL, "%s", out);
	free(out);
	free(err);
	p = cli_bg(d, "run", "bash", "{\"command\":\"printf 'a\\\\000b'\"}",
	    NULL);
	cr_assert_eq(cli_wait(p, 60000, NULL, &err), 0, "%s", err);
	free(err);
	out = e2e_read_file(p->out, &len);
	free(p);
	cr_assert_eq(len, 4);
	cr_assert_eq(memcmp(out, "a\0b\n", 4), 0);
	free(out);
	d_stop(d);
}
