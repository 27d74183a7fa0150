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
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(cli, .fini = e2e_fini);

extern char **environ;

struct cli_proc {
	pid_t pid;
	char out[160], err[160];
	int pty;       /* the terminal's master side, or -1 */
	bool pty_in;   /* stdin on the terminal too (else /dev/null) */
	const char *in; /* else stdin from this file */
	char *text;    /* what the terminal showed */
	size_t len;
};

/* Where the next stexec-cli runs (NULL: here). */
static const char *cli_dir;

static void	cli_start(struct daemon *, struct cli_proc *, const char *,
		    va_list);
static void	cli_start_args(struct daemon *, struct cli_proc *,
		    const char *, ...);
static struct cli_proc *cli_bg(struct daemon *, const char *, ...);
static int	cli_wait(struct cli_proc *, int, char **, char **);
static int	cli(struct daemon *, char **, char **, const char *, ...);
static bool	wait_for_file(const char *, const char *, int);
static bool	wait_for_status(struct client *, const char *, const char *,
		    const char *, int);
static void	write_file(const char *, const char *);
static char	*only_session(struct client *);
static struct cli_proc *cli_pty(struct daemon *, int, const char *, ...);
static bool	pty_pump(struct cli_proc *, const char *, int);
static int	pty_wait(struct cli_proc *, int);
static char	*plain(const char *);
static int	widest_line(const char *);

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
	if (p->pty >= 0 && p->pty_in)
		posix_spawn_file_actions_addopen(&fa, 0, ptsname(p->pty),
		    O_RDWR | O_NOCTTY, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, p->in != NULL ?
		    p->in : "/dev/null", O_RDONLY, 0);
	if (p->pty >= 0) {
		/* Both on the terminal, as for a person. */
		posix_spawn_file_actions_addopen(&fa, 1, ptsname(p->pty),
		    O_RDWR | O_NOCTTY, 0);
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	} else {
		posix_spawn_file_actions_addopen(&fa, 1, p->out,
		    O_WRONLY | O_CREAT | O_TRUNC, 0600);
		posix_spawn_file_actions_addopen(&fa, 2, p->err,
		    O_WRONLY | O_CREAT | O_TRUNC, 0600);
	}
	if (cli_dir != NULL)
		posix_spawn_file_actions_addchdir_np(&fa, cli_dir);
	k = posix_spawn(&p->pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(k, 0, "cannot run %s: %s", path, strerror(k));
}

/* cli_start with the arguments given here (NULL-ended). */
static void
cli_start_args(struct daemon *d, struct cli_proc *p, const char *arg, ...)
{
	va_list ap;

	va_start(ap, arg);
	cli_start(d, p, arg, ap);
	va_end(ap);
}

static struct cli_proc *
cli_bg(struct daemon *d, const char *arg, ...)
{
	struct cli_proc *p = calloc(1, sizeof *p);
	va_list ap;

	p->pty = -1;
	va_start(ap, arg);
	cli_start(d, p, arg, ap);
	va_end(ap);
	return p;
}

/* Wait up to ms for it to exit; its exit status (128+N for signal N). */
static int
cli_wait(struct cli_proc *p, int ms, char **out, char **err)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
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
	struct cli_proc p = { .pty = -1 };
	va_list ap;

	va_start(ap, arg);
	cli_start(d, &p, arg, ap);
	va_end(ap);
	return cli_wait(&p, 60000, out, err);
}

static bool
wait_for_file(const char *path, const char *needle, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
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
	long long until = e2e_now_ms() + e2e_ms(ms);
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

/* stexec-cli on a terminal cols wide (stdout and stderr), in the background. */
static struct cli_proc *
cli_pty(struct daemon *d, int cols, const char *arg, ...)
{
	struct cli_proc *p = calloc(1, sizeof *p);
	struct winsize ws = { .ws_row = 40, .ws_col = (unsigned short)cols };
	va_list ap;

	cr_assert(p != NULL);
	p->pty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert(p->pty >= 0 && grantpt(p->pty) == 0 &&
	    unlockpt(p->pty) == 0, "no pty: %s", strerror(errno));
	cr_assert_eq(ioctl(p->pty, TIOCSWINSZ, &ws), 0);
	va_start(ap, arg);
	cli_start(d, p, arg, ap);
	va_end(ap);
	return p;
}

/* Read what the terminal shows until needle appears (or ms pass). */
static bool
pty_pump(struct cli_proc *p, const char *needle, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);
	struct pollfd pfd = { .fd = p->pty, .events = POLLIN };
	char buf[4096];
	ssize_t n;

	for (;;) {
		if (needle != NULL && p->text != NULL &&
		    strstr(p->text, needle) != NULL)
			return true;
		if (e2e_now_ms() > until)
			return false;
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		/* EIO: every writer is gone. */
		if ((n = read(p->pty, buf, sizeof buf)) <= 0)
			return needle == NULL;
		p->text = realloc(p->text, p->len + (size_t)n + 1);
		cr_assert(p->text != NULL);
		memcpy(p->text + p->len, buf, (size_t)n);
		p->len += (size_t)n;
		p->text[p->len] = '\0';
	}
}

/* Read the terminal until the command exits; its exit status. */
static int
pty_wait(struct cli_proc *p, int ms)
{
	cr_assert(pty_pump(p, NULL, ms), "stexec-cli still writing after %d "
	    "ms: %s", ms, p->text);
	close(p->pty);
	return cli_wait(p, 5000, NULL, NULL);
}

/* The text without escape sequences and carriage returns. */
static char *
plain(const char *text)
{
	char *out = strdup(text != NULL ? text : ""), *o = out;
	const char *s;

	cr_assert(out != NULL);
	for (s = text != NULL ? text : ""; *s != '\0'; s++) {
		if (s[0] == '\033' && s[1] == '[') {
			for (s += 2; *s != '\0' && !(*s >= '@' && *s <= '~');
			    s++)
				;
			if (*s == '\0')
				break;
			continue;
		}
		if (*s != '\r')
			*o++ = *s;
	}
	*o = '\0';
	return out;
}

/* The most columns any line takes (a UTF-8 sequence is one). */
static int
widest_line(const char *text)
{
	int cols = 0, most = 0;

	for (; *text != '\0'; text++) {
		if (*text == '\n')
			cols = 0;
		else if (((unsigned char)*text & 0xc0) != 0x80 && ++cols > most)
			most = cols;
	}
	return most;
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
	/* Piped, several results are headed so a script can split them. */
	cr_assert(strncmp(out, "==> t1 bash (ok, 0.", 19) == 0, "%s", out);
	cr_assert(strstr(out, "s, 1 line) <==\nfirst\n\n==> t2 read_file "
	    "(ok, ") != NULL, "%s", out);
	cr_assert(strstr(out, "s, 1 line) <==\n     1\tfrom the file\n\n"
	    "==> t3 bash (ok, ") != NULL, "%s", out);
	cr_assert(strstr(out, "s, 1 line) <==\nthird\n") != NULL, "%s", out);
	cr_assert_eq(strstr(out, "third\n")[6], '\0', "%s", out);
	/* stderr is no terminal: what the live block shows, as lines. */
	cr_assert(strstr(err, "[t1 bash] started\n[t1 bash] finished after "
	    "0.") != NULL, "%s", err);
	cr_assert(strstr(err, "[t3 bash] started\n") != NULL, "%s", err);
	free(out);
	free(err);

	/* One failing tool makes the exit status 1; the others still print. */
	cr_assert_eq(cli(d, &out, &err, "run",
	    "bash", "{\"command\":\"echo fine\"}",
	    "bash", "{\"command\":\"echo bad; exit 3\"}", NULL), 1);
	cr_assert(strstr(out, "<==\nfine\n\n==> t2 bash (error: exit, ") !=
	    NULL, "%s", out);
	cr_assert(strstr(out, "s, 2 lines) <==\nbad\nExit code 3\n") != NULL,
	    "%s", out);
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
	long long until = e2e_now_ms() + e2e_ms(10000);
	char *out, *err, *sid;
	double secs;
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
	usleep((useconds_t)e2e_ms(400) * 1000);
	kill(p->pid, SIGINT);
	/* 130, as the help says, like any command stopped by Ctrl-C. */
	cr_assert_eq(cli_wait(p, 10000, &out, &err), 130, "%s", err);
	/* bash can be cancelled: both get the interrupted result; the one
	 * that ran shows how long it did (the daemon reports 0 ms). */
	cr_assert(sscanf(out, "==> t1 bash (error: interrupted, %lfs, 1 line) "
	    "<==", &secs) == 1, "%s", out);
	cr_assert(secs >= 0.3 && secs < 5, "%f: %s", secs, out);
	cr_assert(strstr(out, "<==\n<tool_use_error>Interrupted by user"
	    "</tool_use_error>\n\n==> t2 bash (error: interrupted, 0.000s, "
	    "1 line) <==\n<tool_use_error>Interrupted by user"
	    "</tool_use_error>\n") != NULL, "%s", out);
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
	for (int i = 0; i < e2e_ms(1000); i++) {
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
	usleep((useconds_t)e2e_ms(300) * 1000);
	cr_assert_eq(waitpid(p->pid, &status, WNOHANG), 0,
	    "run ended on an interrupt of a block tool");
	kill(p->pid, SIGINT);
	cr_assert_eq(cli_wait(p, 10000, &out, &err), 130, "%s", err);
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

/* run works where it is run from, as any command does. */
Test(cli, run_in_the_callers_directory)
{
	struct daemon *d = d_start(NULL);
	char *out, *err, file[200], sub[200], want[300];

	snprintf(file, sizeof file, "%s/here.txt", d->dir);
	write_file(file, "found here\n");
	snprintf(sub, sizeof sub, "%s/sub", d->dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	cli_dir = d->dir;
	cr_assert_eq(cli(d, &out, &err, "run", "bash", "{\"command\":\"pwd\"}",
	    "read_file", "{\"file_path\":\"here.txt\"}", NULL), 0, "%s", err);
	snprintf(want, sizeof want, "<==\n%s\n\n", d->dir);
	cr_assert(strstr(out, want) != NULL, "%s", out);
	cr_assert(strstr(out, "     1\tfound here\n") != NULL, "%s", out);
	free(out);
	free(err);
	/* --cwd, relative to the caller's directory. */
	cr_assert_eq(cli(d, &out, &err, "run", "--cwd", "sub", "bash",
	    "{\"command\":\"pwd\"}", NULL), 0, "%s", err);
	cli_dir = NULL;
	snprintf(want, sizeof want, "%s\n", sub);
	cr_assert_str_eq(out, want);
	free(out);
	free(err);
	d_stop(d);
}

/* The built-in bash is bash: models write bash for it. */
Test(cli, builtin_bash_is_bash)
{
	struct daemon *d = d_start(NULL);
	char *out, *err;

	if (access("/bin/bash", X_OK) != 0)
		cr_skip_test("no /bin/bash: the tool runs /bin/sh");
	cr_assert_eq(cli(d, &out, &err, "run", "bash", "{\"command\":"
	    "\"a=(x y z); [[ ${#a[@]} == 3 && $BASH_VERSION == [0-9]* ]] && "
	    "echo ${a[2]} ${BASH_VERSINFO[0]}\"}", NULL), 0, "%s", err);
	cr_assert(strncmp(out, "z ", 2) == 0 && atoi(out + 2) >= 4, "%s", out);
	free(out);
	free(err);
	d_stop(d);
}

/*
 * On a terminal run shows a live block: the running tool with its time,
 * the queued ones, streamed lines as they come; nothing wider than the
 * terminal; the block erased before the results.
 */
Test(cli, run_live_on_a_terminal)
{
	struct daemon *d = d_start(NULL);
	char tools[200], file[200], input[300], *text;
	struct cli_proc *p;
	const char *one, *head;

	snprintf(tools, sizeof tools, "%s/talk.json", d->dir);
	write_file(tools, "[{\"name\":\"talk\",\"command\":[\"/bin/sh\",\"-c\","
	    "\"echo one; sleep 0.8; echo two\"],\"streamOutput\":true}]");
	snprintf(file, sizeof file, "%s/f.txt", d->dir);
	write_file(file, "from the file\n");
	snprintf(input, sizeof input, "{\"file_path\":\"%s\"}", file);
	p = cli_pty(d, 60, "run", "--tools", tools, "talk", "{}",
	    "read_file", input, "bash", "{\"command\":\"true # a command much "
	    "longer than the sixty columns of this terminal, cut\"}", NULL);
	cr_assert_eq(pty_wait(p, 30000), 0, "%s", p->text);
	text = plain(p->text);
	cr_assert(strstr(text, "t1 talk  running 0.") != NULL, "%s", text);
	cr_assert(strstr(text, "t2 read_file  queued") != NULL, "%s", text);
	cr_assert(strstr(text, "t3 bash  queued  true # a command much") !=
	    NULL, "%s", text);
	one = strstr(text, "[t1 talk] one\n");
	head = strstr(text, "── t1 talk: ok, ");
	cr_assert(one != NULL && head != NULL && one < head, "%s", text);
	/* About its 0.8 s sleep: the clock starts when the CLI sees it start. */
	cr_assert(atof(head + strlen("── t1 talk: ok, ")) >= 0.7, "%s", text);
	cr_assert(strstr(text, "── t2 read_file: ok, ") != NULL, "%s", text);
	cr_assert(strstr(text, "     1\tfrom the file\n") != NULL, "%s", text);
	cr_assert_leq(widest_line(text), 60, "%s", text);
	/* The block is taken away (cursor up, erase) before the results. */
	cr_assert(strstr(p->text, "F\033[J") != NULL);
	cr_assert(strstr(text, "queued") < head);
	free(text);
	free(p->text);
	free(p);
	d_stop(d);
}

/*
 * watch on a terminal 56 columns wide: a header for an idle session,
 * every line cut to the width, and a tool that never started shown with
 * its name in the lines and the timeline.
 */
Test(cli, watch_fits_a_terminal)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL);
	const char *s = json_string_value(sid);
	struct cli_proc *w = cli_pty(d, 56, "watch", s, NULL);
	char want[128], *text, cmd[256];

	snprintf(want, sizeof want, "session %s, turn 1", s);
	cr_assert(pty_pump(w, "no tools", 10000), "%s", w->text);
	/* a ends once b is added: the test lets it. */
	snprintf(cmd, sizeof cmd, "{\"command\":\"while [ ! -e %s ]; do "
	    "sleep 0.05; done; echo a long line of output, longer than the "
	    "terminal is wide; exit 1\"}", d_path(d, "go"));
	json_decref(c_add(c, s, "a", "bash", cmd));
	/* b comes after a's start (when watch first asks for names) and
	 * never starts: it is first seen in its result, after the turn. */
	cr_assert(pty_pump(w, "executing", 10000), "%s", w->text);
	json_decref(c_add(c, s, "b", "read_file",
	    "{\"file_path\":\"/etc/hostname\"}"));
	/* A moment for watch to ask b's name (scaled), then a ends. */
	usleep((useconds_t)e2e_ms(500) * 1000);
	write_file(d_path(d, "go"), "");
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", s)));
	cr_assert(pty_pump(w, "sibling_error\r\n", 10000), "%s", w->text);
	json_decref(c_call(c, "closeSession", json_pack("{s:s}", "sessionId",
	    s)));
	cr_assert_eq(pty_wait(w, 10000), 0, "%s", w->text);
	text = plain(w->text);
	cr_assert(strstr(text, want) != NULL, "%s", text);
	cr_assert(strstr(text, ": idle, no tools\n") != NULL, "%s", text);
	cr_assert(strstr(text, "a bash  result exit (") != NULL, "%s", text);
	cr_assert(strstr(text, "b read_file  result sibling_error") != NULL,
	    "%s", text);
	cr_assert(strstr(text, "  b read_file |····") != NULL, "%s", text);
	cr_assert(strstr(text, "…") != NULL, "%s", text);
	cr_assert_leq(widest_line(text), 56, "%s", text);
	free(text);
	free(w->text);
	free(w);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/*
 * Jobs (PROTOCOL.md §4, Jobs): run --background prints SESSION JOB and
 * leaves the session open, jobs lists it, attach with a file on stdin
 * feeds it, ends with it and prints what it wrote.
 */
Test(cli, run_background_jobs_attach)
{
	struct daemon *d = d_start(NULL);
	struct cli_proc p = { .pty = -1 };
	char *out, *err, sid[128], jid[32], in[200];

	cr_assert_eq(cli(d, &out, &err, "run", "--background", "bash",
	    "{\"command\":\"echo hi; while read l; do echo got:$l; done; "
	    "echo bye\"}", NULL), 0, "%s", err);
	cr_assert_eq(sscanf(out, "%127s %31s", sid, jid), 2, "%s", out);
	cr_assert_str_eq(jid, "j-1");
	cr_assert(strstr(err, "stexec-cli attach ") != NULL, "%s", err);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "jobs", sid, NULL), 0, "%s", err);
	cr_assert(strstr(out, "JOB ") != NULL && strstr(out, "COMMAND") !=
	    NULL, "%s", out);
	cr_assert(strstr(out, "j-1") != NULL && strstr(out, "running") !=
	    NULL && strstr(out, "bash") != NULL, "%s", out);
	free(out);
	free(err);

	/* Its stdin holds the input first, then what attach forwards. */
	snprintf(in, sizeof in, "%s/in.txt", d->dir);
	write_file(in, "\none\ntwo\n");
	p.in = in;
	cli_start_args(d, &p, "attach", sid, "j-1", NULL);
	cr_assert_eq(cli_wait(&p, 30000, &out, &err), 0, "%s", err);
	cr_assert(strncmp(out, "hi\n", 3) == 0, "%s", out);
	cr_assert(strstr(out, "got:one\ngot:two\nbye\n") != NULL, "%s", out);
	cr_assert(strstr(err, "[job j-1 exited with exit code 0]") != NULL,
	    "%s", err);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "--json", "jobs", sid, NULL), 0);
	cr_assert(strstr(out, "\"status\":\"exited\"") != NULL, "%s", out);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "attach", sid, "j-9", NULL), 1);
	cr_assert(strstr(err, "has no job j-9") != NULL, "%s", err);
	free(out);
	free(err);
	cr_assert_eq(cli(d, &out, &err, "run", "--background", "read_file",
	    "{\"file_path\":\"/etc/hostname\"}", NULL), 2);
	cr_assert(strstr(err, "cannot run in the background") != NULL, "%s",
	    err);
	free(out);
	free(err);

	cr_assert_eq(cli(d, &out, &err, "close", sid, NULL), 0, "%s", err);
	free(out);
	free(err);
	cr_assert(d_wait_no_leftovers(d, 5000));
	d_stop(d);
}

/*
 * attach on a terminal: raw keys to a job's terminal, which takes this
 * one's size; bc answers; Ctrl-] detaches and the job runs on.
 */
Test(cli, attach_a_terminal_job)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	struct winsize ws = { .ws_row = 40, .ws_col = 100 };
	struct cli_proc *p;
	char tools[200], *out, *err, sid[128], *text;

	snprintf(tools, sizeof tools, "%s/bc.json", d->dir);
	write_file(tools, "[{\"name\":\"calc\",\"command\":[\"/bin/sh\","
	    "\"-c\",\"read x; stty size; exec bc -q\"],\"tty\":true,"
	    "\"background\":true}]");
	cr_assert_eq(cli(d, &out, &err, "new", "--tools", tools, NULL), 0,
	    "%s", err);
	cr_assert_eq(sscanf(out, "%127s", sid), 1);
	free(out);
	free(err);
	json_decref(c_add(c, sid, "b", "calc", "{}"));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", sid)));

	p = calloc(1, sizeof *p);
	cr_assert(p != NULL);
	p->pty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	cr_assert(p->pty >= 0 && grantpt(p->pty) == 0 &&
	    unlockpt(p->pty) == 0, "no pty: %s", strerror(errno));
	cr_assert_eq(ioctl(p->pty, TIOCSWINSZ, &ws), 0);
	p->pty_in = true;
	cli_start_args(d, p, "attach", sid, "j-1", NULL);
	cr_assert(pty_pump(p, "Ctrl-] detaches", 10000), "%s", p->text);
	cr_assert_eq(write(p->pty, "go\r", 3), 3);
	cr_assert(pty_pump(p, "40 100", 10000), "%s", p->text);
	cr_assert_eq(write(p->pty, "2+2\r", 4), 4);
	cr_assert(pty_pump(p, "4\r\n", 10000), "%s", p->text);
	cr_assert_eq(write(p->pty, "\x1d", 1), 1);
	cr_assert_eq(pty_wait(p, 10000), 0, "%s", p->text);
	text = plain(p->text);
	cr_assert(strstr(text, "[detached; job j-1 runs on") != NULL, "%s",
	    text);
	free(text);
	free(p->text);
	free(p);

	cr_assert_eq(cli(d, &out, &err, "jobs", sid, NULL), 0, "%s", err);
	cr_assert(strstr(out, "running") != NULL && strstr(out, "yes") !=
	    NULL, "%s", out);
	free(out);
	free(err);
	json_decref(c_call(c, "closeSession", json_pack("{s:s}", "sessionId",
	    sid)));
	c_close(c);
	cr_assert(d_wait_no_leftovers(d, 5000));
	d_stop(d);
}
