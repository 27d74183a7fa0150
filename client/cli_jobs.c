/*
 * stexec-cli jobs and attach: a session's jobs (PROTOCOL.md §4, Jobs) as a
 * table, and one job followed live.
 *
 * attach long-polls readJob by offset and prints what comes, byte for
 * byte, while one poll(2) loop also forwards input: from a terminal in raw
 * mode, keystroke by keystroke through writeJob, with the terminal's size
 * through resizeJob at the start and on every SIGWINCH; from a pipe or a
 * file, as it comes, and EOF as writeJob eof. Ctrl-] detaches and leaves
 * the job running. The daemon answers a connection's long poll later, as
 * it does a drain, so writes go out while a read waits.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "utf8.h"

#define ATTACH_WAIT_MS 30000
#define ATTACH_DETACH 0x1d /* Ctrl-] */

struct attach {
	struct cli *cli;
	const char *sid, *jid;
	bool tty_in;        /* stdin is a terminal, in raw mode */
	bool job_tty;       /* the job runs on a terminal */
	bool stdin_open;    /* still reading stdin */
	bool detached;
	int64_t since;      /* the next readJob's offset */
	int64_t read_req;   /* the readJob waiting, or -1 */
	json_t *end;        /* the last readJob result once the job ended */
	struct utf8_carry carry;
	struct termios saved;
};

static int	jobs_sigpipe[2] = { -1, -1 };

static const char *jobs_str(const json_t *, const char *, const char *);
static void	jobs_bytes(char *, size_t, json_int_t);
static void	attach_on_signal(int);
static void	attach_signals(void);
static int	attach_raw(struct attach *);
static void	attach_restore(struct attach *);
static void	attach_send(struct attach *, const char *, json_t *);
static void	attach_resize(struct attach *);
static void	attach_write(struct attach *, const char *, size_t, bool);
static void	attach_input(struct attach *);
static void	attach_read(struct attach *);
static int	attach_reply(struct attach *, json_t *);
static int	attach_status(const json_t *);

static const char *
jobs_str(const json_t *obj, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? s : def;
}

/* 1234567 → "1.2M", as ls -h does. */
static void
jobs_bytes(char *buf, size_t len, json_int_t n)
{
	const char *units = "kMGT";
	double v = (double)n;
	int u = -1;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%lld", (long long)n);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

int
cmd_jobs(struct cli *cli, struct cli_args *a)
{
	json_t *r = NULL, *list, *j, *arg;
	const json_t *code, *sig;
	char exit[32], bytes[16], age[16], *line;
	const char *status, *sep;
	size_t i, k, len;
	double secs;
	int rc, width = cli->out_tty ? cli_term_width(STDOUT_FILENO) : 0;
	FILE *f;

	if ((rc = cli_connect(cli)) != 0)
		return rc;
	if ((rc = cli_call(cli, "listJobs", json_pack("{s:s}", "sessionId",
	    a->pos[0]), &r)) != 0)
		return rc;
	if (cli->json) {
		cli_print_json(r);
		json_decref(r);
		return 0;
	}
	list = json_object_get(r, "jobs");
	if (json_array_size(list) == 0)
		printf("no jobs\n");
	else
		printf("%-6s %-8s %8s %-10s %7s %8s %-4s %-10s %s\n", "JOB",
		    "STATUS", "PID", "EXIT", "OUTPUT", "STARTED", "TTY",
		    "TOOL", "COMMAND");
	json_array_foreach(list, i, j) {
		status = jobs_str(j, "status", "?");
		code = json_object_get(j, "exitCode");
		sig = json_object_get(j, "signal");
		if (json_is_integer(code))
			snprintf(exit, sizeof exit, "%lld",
			    (long long)json_integer_value(code));
		else if (json_is_integer(sig))
			snprintf(exit, sizeof exit, "signal %lld",
			    (long long)json_integer_value(sig));
		else
			snprintf(exit, sizeof exit, "%s", strcmp(status,
			    "running") == 0 ? "-" : jobs_str(j, "reason", "-"));
		jobs_bytes(bytes, sizeof bytes, json_integer_value(
		    json_object_get(j, "outputBytes")));
		secs = (double)time(NULL) - (double)json_integer_value(
		    json_object_get(j, "startedAt")) / 1000;
		if (secs < 0)
			secs = 0;
		if (secs < 120)
			snprintf(age, sizeof age, "%.0fs ago", secs);
		else if (secs < 7200)
			snprintf(age, sizeof age, "%.0fm ago", secs / 60);
		else
			snprintf(age, sizeof age, "%.0fh ago", secs / 3600);
		line = NULL;
		if ((f = open_memstream(&line, &len)) == NULL)
			abort();
		fprintf(f, "%-6s %-8s ", jobs_str(j, "jobId", "?"), status);
		if (json_is_integer(json_object_get(j, "pid")))
			fprintf(f, "%8lld ", (long long)json_integer_value(
			    json_object_get(j, "pid")));
		else
			fprintf(f, "%8s ", "-");
		fprintf(f, "%-10s %7s %8s %-4s %-10s", exit, bytes, age,
		    json_is_true(json_object_get(j, "tty")) ? "yes" : "no",
		    jobs_str(j, "name", "?"));
		sep = " ";
		json_array_foreach(json_object_get(j, "command"), k, arg) {
			fprintf(f, "%s%s", sep, json_string_value(arg) != NULL ?
			    json_string_value(arg) : "?");
			sep = " ";
		}
		fclose(f);
		/* One row per job: a newline in the command does not break it. */
		for (k = 0; k < len; k++)
			if (line[k] == '\n' || line[k] == '\r')
				line[k] = ' ';
		cli_fit(stdout, line, len, width);
		fputc('\n', stdout);
		free(line);
	}
	json_decref(r);
	return 0;
}

/* Async-signal-safe: the signal's number down the self-pipe. */
static void
attach_on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;

	if (jobs_sigpipe[1] >= 0)
		(void)!write(jobs_sigpipe[1], &b, 1);
	errno = saved;
}

/* SIGINT, SIGTERM, SIGHUP (detach) and SIGWINCH (resize) as events. */
static void
attach_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
	struct sigaction sa;
	size_t i;

	if (jobs_sigpipe[0] < 0 && pipe2(jobs_sigpipe, O_CLOEXEC |
	    O_NONBLOCK) != 0)
		jobs_sigpipe[0] = jobs_sigpipe[1] = -1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = attach_on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &sa, NULL);
}

/*
 * Raw input: every key goes to the job as typed (Ctrl-C included, which a
 * job's terminal turns into SIGINT). For a job without a terminal output
 * processing stays on, so that its lines still start at column 0.
 */
static int
attach_raw(struct attach *at)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &at->saved) != 0)
		return -1;
	t = at->saved;
	t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR |
	    IGNCR | ICRNL | IXON);
	t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
	if (at->job_tty)
		t.c_oflag &= ~(tcflag_t)OPOST;  /* its output has its \r\n */
	t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
	t.c_cflag |= CS8;
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	return tcsetattr(STDIN_FILENO, TCSAFLUSH, &t);
}

static void
attach_restore(struct attach *at)
{
	if (at->tty_in)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &at->saved);
}

/* A request whose reply only matters if it is an error (attach_reply). */
static void
attach_send(struct attach *at, const char *method, json_t *params)
{
	struct stexec_error err = { 0 };

	if (stexec_send(at->cli->c, method, params, &err) < 0)
		cli_rpc_error(at->cli, method, &err);
	stexec_error_clear(&err);
}

/* The job's terminal takes the size of ours. */
static void
attach_resize(struct attach *at)
{
	struct winsize ws;

	if (!at->job_tty || !at->tty_in ||
	    ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 ||
	    ws.ws_row == 0)
		return;
	attach_send(at, "resizeJob", json_pack("{s:s, s:s, s:i, s:i}",
	    "sessionId", at->sid, "jobId", at->jid, "cols",
	    ws.ws_col > 1000 ? 1000 : ws.ws_col, "rows",
	    ws.ws_row > 1000 ? 1000 : ws.ws_row));
}

/*
 * Input for the job: cut at character boundaries (a character split
 * between two reads goes out whole with the next), invalid UTF-8 as
 * U+FFFD, since the data is a JSON string.
 */
static void
attach_write(struct attach *at, const char *data, size_t len, bool eof)
{
	struct buf tmp = { 0 }, fixed = { 0 };
	const char *s = data;
	size_t n = len;
	json_t *params;

	if (len > 0)
		s = utf8_carry_feed(&at->carry, data, len, &tmp, &n);
	if (eof && at->carry.len > 0) {
		buf_add(&tmp, at->carry.bytes, at->carry.len);
		at->carry.len = 0;
		s = tmp.data;
		n = tmp.len;
	}
	utf8_repair(&fixed, s != NULL ? s : "", n);
	if (fixed.len > 0 || eof) {
		params = json_pack("{s:s, s:s, s:s%}", "sessionId", at->sid,
		    "jobId", at->jid, "data", fixed.data != NULL ? fixed.data :
		    "", fixed.len);
		if (eof)
			json_object_set_new(params, "eof", json_true());
		attach_send(at, "writeJob", params);
	}
	buf_free(&fixed);
	buf_free(&tmp);
}

/*
 * What stdin has. From a terminal, Ctrl-] detaches; for a job without a
 * terminal Enter is a newline, Ctrl-C interrupts it and Ctrl-D ends its
 * input, as they would at a shell.
 */
static void
attach_input(struct attach *at)
{
	char in[4096], out[4096];
	ssize_t n;
	size_t i, o = 0;

	n = read(STDIN_FILENO, in, sizeof in);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		at->stdin_open = false;
		attach_write(at, NULL, 0, true);
		return;
	}
	if (!at->tty_in) {
		attach_write(at, in, (size_t)n, false);
		return;
	}
	for (i = 0; i < (size_t)n; i++) {
		if (in[i] == ATTACH_DETACH) {
			at->detached = true;
			break;
		}
		if (!at->job_tty && in[i] == 0x03) {
			attach_write(at, out, o, false);
			o = 0;
			attach_send(at, "signalJob", json_pack("{s:s, s:s, s:s}",
			    "sessionId", at->sid, "jobId", at->jid, "signal",
			    "interrupt"));
			continue;
		}
		if (!at->job_tty && in[i] == 0x04) {
			attach_write(at, out, o, true);
			o = 0;
			at->stdin_open = false;
			return;
		}
		out[o++] = !at->job_tty && in[i] == '\r' ? '\n' : in[i];
	}
	attach_write(at, out, o, false);
}

/* The next long poll, from where the last one stopped. */
static void
attach_read(struct attach *at)
{
	struct stexec_error err = { 0 };

	at->read_req = stexec_send(at->cli->c, "readJob", json_pack(
	    "{s:s, s:s, s:I, s:i}", "sessionId", at->sid, "jobId", at->jid,
	    "since", (json_int_t)at->since, "waitMs", ATTACH_WAIT_MS), &err);
	if (at->read_req < 0)
		cli_rpc_error(at->cli, "readJob", &err);
	stexec_error_clear(&err);
}

/* A reply: output to print, or an error to report. 0, or an exit status. */
static int
attach_reply(struct attach *at, json_t *msg)
{
	struct stexec_error err = { 0 };
	json_t *res = NULL;
	const json_t *text;
	int64_t id = stexec_message_id(msg), next;
	bool mine = id == at->read_req;
	int rc = 0, code;

	if (stexec_reply_decode(msg, &res, &err) != 0) {
		code = err.code;
		rc = cli_rpc_error(at->cli, mine ? "readJob" : "attach", &err);
		stexec_error_clear(&err);
		/* A write to a job whose input is closed: keep following. */
		if (!mine && code == -32005) {
			at->stdin_open = false;
			return 0;
		}
		return rc;
	}
	if (!mine) {
		json_decref(res);
		return 0;
	}
	at->read_req = -1;
	text = json_object_get(res, "text");
	if (json_string_length(text) > 0) {
		fwrite(json_string_value(text), 1, json_string_length(text),
		    stdout);
		fflush(stdout);
	}
	next = json_integer_value(json_object_get(res, "next"));
	if (strcmp(jobs_str(res, "status", "running"), "running") != 0 &&
	    next == at->since) {
		at->end = res;
		return 0;
	}
	at->since = next;
	json_decref(res);
	attach_read(at);
	return 0;
}

/* The exit status for a job that ended: its own, or 128 + its signal. */
static int
attach_status(const json_t *end)
{
	const json_t *code = json_object_get(end, "exitCode");
	const json_t *sig = json_object_get(end, "signal");

	if (json_is_integer(code))
		return (int)(json_integer_value(code) & 0xff);
	if (json_is_integer(sig))
		return 128 + (int)(json_integer_value(sig) & 0x7f);
	return CLI_EXIT_FAIL;
}

int
attach_main(struct cli *cli, struct cli_args *a)
{
	struct attach at = { .cli = cli, .sid = a->pos[0], .jid = a->pos[1],
	    .read_req = -1, .stdin_open = true };
	json_t *r = NULL, *j = NULL, *msg;
	const json_t *code, *sig;
	struct pollfd pfd[3];
	unsigned char sigs[16];
	long long since = 0;
	ssize_t k;
	size_t i;
	int rc, n, s;

	if ((rc = cli_int_opt(cli, a, "since", 0, INT64_MAX, &since)) != 0)
		return rc;
	at.since = since;
	if ((rc = cli_connect(cli)) != 0)
		return rc;
	if ((rc = cli_call(cli, "listJobs", json_pack("{s:s}", "sessionId",
	    at.sid), &r)) != 0)
		return rc;
	json_array_foreach(json_object_get(r, "jobs"), i, j)
		if (strcmp(jobs_str(j, "jobId", ""), at.jid) == 0)
			break;
	if (i == json_array_size(json_object_get(r, "jobs"))) {
		cli_error(cli, "session %s has no job %s (stexec-cli jobs %s)",
		    at.sid, at.jid, at.sid);
		json_decref(r);
		return CLI_EXIT_FAIL;
	}
	at.job_tty = json_is_true(json_object_get(j, "tty"));
	if (strcmp(jobs_str(j, "status", "running"), "running") != 0)
		at.stdin_open = false;
	json_decref(r);
	attach_signals();
	at.tty_in = at.stdin_open && isatty(STDIN_FILENO) &&
	    attach_raw(&at) == 0;
	fprintf(stderr, "%s[attached to job %s of %s%s]%s%s\n",
	    cli_sgr(cli, true, "\033[2m"), at.jid, at.sid, at.tty_in ?
	    "; Ctrl-] detaches" : at.stdin_open ? "; stdin goes to it" : "",
	    cli_sgr(cli, true, "\033[0m"), at.tty_in && at.job_tty ? "\r" :
	    "");
	attach_resize(&at);
	attach_read(&at);
	rc = 0;
	while (at.end == NULL && !at.detached && at.read_req >= 0) {
		if (stexec_pending(cli->c)) {
			msg = stexec_next_message(cli->c, 0, NULL);
			if (msg != NULL && stexec_message_id(msg) >= 0)
				rc = attach_reply(&at, msg);
			json_decref(msg);
			if (rc != 0)
				break;
			continue;
		}
		if (!stexec_is_open(cli->c)) {
			cli_error(cli, "%s", stexec_last_error(cli->c));
			rc = CLI_EXIT_USAGE;
			break;
		}
		pfd[0].fd = stexec_fd(cli->c);
		pfd[0].events = stexec_poll_events(cli->c);
		pfd[1].fd = jobs_sigpipe[0];
		pfd[1].events = POLLIN;
		pfd[2].fd = at.stdin_open ? STDIN_FILENO : -1;
		pfd[2].events = POLLIN;
		pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
		n = poll(pfd, 3, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = CLI_EXIT_FAIL;
			break;
		}
		if (pfd[1].revents & POLLIN)
			while ((k = read(jobs_sigpipe[0], sigs, sizeof sigs)) >
			    0)
				for (s = 0; s < k; s++) {
					if (sigs[s] == SIGWINCH)
						attach_resize(&at);
					else
						at.detached = true;
				}
		if (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))
			attach_input(&at);
		if (pfd[0].revents & POLLOUT)
			stexec_flush(cli->c);
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			stexec_read_ready(cli->c);
	}
	/* What was typed before a detach still goes out. */
	pfd[0].fd = stexec_is_open(cli->c) ? stexec_fd(cli->c) : -1;
	pfd[0].events = POLLOUT;
	while (stexec_is_open(cli->c) && stexec_want_write(cli->c) &&
	    poll(pfd, 1, 1000) > 0)
		if (stexec_flush(cli->c) < 0)
			break;
	attach_restore(&at);
	if (at.end != NULL) {
		code = json_object_get(at.end, "exitCode");
		sig = json_object_get(at.end, "signal");
		fprintf(stderr, "%s[job %s %s", cli_sgr(cli, true, "\033[2m"),
		    at.jid, jobs_str(at.end, "status", "ended"));
		if (json_is_integer(code))
			fprintf(stderr, " with exit code %lld",
			    (long long)json_integer_value(code));
		else if (json_is_integer(sig))
			fprintf(stderr, " by signal %lld",
			    (long long)json_integer_value(sig));
		fprintf(stderr, "]%s\n", cli_sgr(cli, true, "\033[0m"));
		if (rc == 0)
			rc = attach_status(at.end);
		json_decref(at.end);
	} else if (at.detached && rc == 0)
		fprintf(stderr, "\n%s[detached; job %s runs on: stexec-cli "
		    "attach %s %s]%s\n", cli_sgr(cli, true, "\033[2m"), at.jid,
		    at.sid, at.jid, cli_sgr(cli, true, "\033[0m"));
	return rc;
}
