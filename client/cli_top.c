/*
 * stexec-cli top: every session the caller may see, refreshed in place
 * (systemd-cgtop, htop): the tools of each current turn with their elapsed
 * time, CPU and peak memory where the daemon measures them (status), the
 * queued ones, and the clients of each session (metrics); then a row per
 * MCP server (metrics: its session or "daemon" for a shared one, state,
 * pid, calls in flight and done, restarts). Sortable by a
 * key. A frame is drawn over the last in one write (cursor home, each line
 * cleared to its end, the rest of the screen cleared) on the alternate
 * screen, so it does not flicker and leaves the shell's screen as it was;
 * only the common ANSI sequences are used, so it works over ssh. --once
 * prints one plain frame for scripts.
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

struct top_row {
	char session[40];
	long long turn, clients;
	char id[64], name[64], status[24];
	size_t order;           /* add order within the session */
	double elapsed;         /* s; < 0: no process */
	long long cpu_ms;       /* < 0: not measured */
	double cpu_pct;         /* < 0: not known yet */
	long long mem;          /* peak bytes; < 0: not measured */
	char what[256];         /* its input's summary (cli_input_summary) */
};

struct top_prev {
	char key[104];          /* session/id */
	long long cpu_ms;
	double at;
};

struct top {
	struct cli *cli;
	struct top_row *rows;
	size_t nrows, cap;
	struct top_prev *prev;
	size_t nprev;
	char sort;              /* e, c, m, s, n */
	char head[256];
	json_t *metrics;        /* the last metrics, for the MCP rows */
};

static volatile sig_atomic_t top_quit, top_resized;
static struct termios top_saved;
static bool top_raw;

static void	top_on_signal(int);
static int	top_gather(struct top *);
static void	top_sort(struct top *);
static void	top_frame(struct top *, FILE *, int, int, bool);
static void	top_restore(void);
static void	top_prefix(char *, size_t, const char *);
static long long top_mcp_value(const json_t *, const char *, const char *,
		    const char *);
static int	top_mcp_frame(struct top *, FILE *, int, int, bool, int);

static const char *
top_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

/* A sample of a metrics family: the one without labels, or session's. */
static long long
top_sample(const json_t *fams, const char *name, const char *session)
{
	const json_t *f, *s;
	const char *label;
	size_t i, j;

	json_array_foreach(fams, i, f) {
		if (strcmp(top_str(f, "name"), name) != 0)
			continue;
		json_array_foreach(json_object_get(f, "samples"), j, s) {
			label = top_str(json_object_get(s, "labels"),
			    "session");
			if (session == NULL || strcmp(label, session) == 0)
				return (long long)json_number_value(
				    json_object_get(s, "value"));
		}
	}
	return -1;
}

static struct top_row *
top_add(struct top *t)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 32;
		t->rows = realloc(t->rows, t->cap * sizeof *t->rows);
		if (t->rows == NULL) {
			fprintf(stderr, "stexec-cli: out of memory\n");
			exit(CLI_EXIT_FAIL);
		}
	}
	memset(&t->rows[t->nrows], 0, sizeof t->rows[t->nrows]);
	return &t->rows[t->nrows++];
}

/* CPU percent since the last frame (or over its life, the first time). */
static void
top_cpu(struct top *t, struct top_row *r, struct top_prev *next, size_t *n,
    double now)
{
	char key[104];
	size_t i;

	r->cpu_pct = -1;
	if (r->cpu_ms < 0)
		return;
	snprintf(key, sizeof key, "%s/%s", r->session, r->id);
	for (i = 0; i < t->nprev; i++)
		if (strcmp(t->prev[i].key, key) == 0)
			break;
	if (i < t->nprev && now > t->prev[i].at)
		r->cpu_pct = (double)(r->cpu_ms - t->prev[i].cpu_ms) / 10 /
		    (now - t->prev[i].at);
	else if (r->elapsed > 0)
		r->cpu_pct = (double)r->cpu_ms / 10 / r->elapsed;
	memcpy(next[*n].key, key, sizeof key);
	next[*n].cpu_ms = r->cpu_ms;
	next[(*n)++].at = now;
}

/* One snapshot: metrics for the totals and clients, status per session. */
static int
top_gather(struct top *t)
{
	json_t *m, *ls, *st, *fams, *s, *tool, *v;
	struct top_prev *next;
	struct top_row *r;
	const char *sid;
	size_t i, j, n = 0, before;
	double now;
	int rc;

	t->nrows = 0;
	if ((rc = cli_call(t->cli, "metrics", json_object(), &m)) != 0)
		return rc;
	if ((rc = cli_call(t->cli, "listSessions", json_object(), &ls)) != 0) {
		json_decref(m);
		return rc;
	}
	fams = json_object_get(m, "metrics");
	snprintf(t->head, sizeof t->head, "sessions %lld  connections %lld  "
	    "running %lld  queued %lld  waiting for a slot %lld  started %lld",
	    top_sample(fams, "stexec_sessions", NULL),
	    top_sample(fams, "stexec_connections", NULL),
	    top_sample(fams, "stexec_tools_running", NULL),
	    top_sample(fams, "stexec_tools_queued", NULL),
	    top_sample(fams, "stexec_tools_waiting_slot", NULL),
	    top_sample(fams, "stexec_tools_started_total", NULL));
	json_array_foreach(json_object_get(ls, "sessions"), i, s) {
		sid = top_str(s, "sessionId");
		/* A session closed meanwhile is simply not shown. */
		if (stexec_call(t->cli->c, "status", json_pack("{s:s}",
		    "sessionId", sid), &st, NULL) != 0)
			continue;
		before = t->nrows;
		json_array_foreach(json_object_get(st, "tools"), j, tool) {
			if (strcmp(top_str(tool, "status"), "delivered") == 0)
				continue;
			r = top_add(t);
			r->order = j;
			snprintf(r->id, sizeof r->id, "%s", top_str(tool,
			    "id"));
			snprintf(r->name, sizeof r->name, "%s", top_str(tool,
			    "name"));
			snprintf(r->status, sizeof r->status, "%s",
			    top_str(tool, "status"));
			cli_input_summary(json_object_get(tool, "input"),
			    r->what, sizeof r->what);
			/* A tool the client runs has no process to show. */
			if ((v = json_object_get(tool, "runner")) != NULL)
				top_prefix(r->what, sizeof r->what,
				    json_string_value(v));
			r->elapsed = (v = json_object_get(tool, "elapsedMs")) !=
			    NULL ? (double)json_integer_value(v) / 1000 : -1;
			r->cpu_ms = (v = json_object_get(tool, "cpuMs")) !=
			    NULL ? json_integer_value(v) : -1;
			r->mem = (v = json_object_get(tool,
			    "peakMemoryBytes")) != NULL ?
			    json_integer_value(v) : -1;
		}
		/* An idle session still shows, as one row without a tool. */
		if (t->nrows == before) {
			r = top_add(t);
			r->elapsed = -1;
			r->cpu_ms = r->mem = -1;
		}
		for (j = before; j < t->nrows; j++) {
			r = &t->rows[j];
			snprintf(r->session, sizeof r->session, "%s", sid);
			r->turn = json_integer_value(json_object_get(st,
			    "turn"));
			r->clients = top_sample(fams, "stexec_session_clients",
			    sid);
		}
		json_decref(st);
	}
	json_decref(t->metrics);
	t->metrics = m;
	json_decref(ls);
	now = cli_now();
	next = calloc(t->nrows + 1, sizeof *next);
	if (next == NULL)
		return CLI_EXIT_FAIL;
	for (i = 0; i < t->nrows; i++)
		top_cpu(t, &t->rows[i], next, &n, now);
	free(t->prev);
	t->prev = next;
	t->nprev = n;
	top_sort(t);
	return 0;
}

/* "client: " before an input summary. */
static void
top_prefix(char *what, size_t size, const char *runner)
{
	char was[256];

	snprintf(was, sizeof was, "%s", what);
	snprintf(what, size, "%.32s: %.200s", runner != NULL ? runner : "?",
	    was);
}

static char top_key;

static int
top_cmp(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	int c;

	switch (top_key) {
	case 'c':
		if (x->cpu_pct != y->cpu_pct)
			return x->cpu_pct < y->cpu_pct ? 1 : -1;
		break;
	case 'm':
		if (x->mem != y->mem)
			return x->mem < y->mem ? 1 : -1;
		break;
	case 'n':
		if ((c = strcmp(x->name, y->name)) != 0)
			return c;
		break;
	case 'e':
		if (x->elapsed != y->elapsed)
			return x->elapsed < y->elapsed ? 1 : -1;
		break;
	}
	if ((c = strcmp(x->session, y->session)) != 0)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void
top_sort(struct top *t)
{
	top_key = t->sort;
	if (t->nrows > 1)
		qsort(t->rows, t->nrows, sizeof *t->rows, top_cmp);
}

static void
top_size(char *buf, size_t len, long long bytes)
{
	const char *units = "KMGT";
	double v = (double)bytes;
	int u = -1;

	if (bytes < 0) {
		snprintf(buf, len, "-");
		return;
	}
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%lldB", bytes);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

/*
 * A frame: a head line, the column titles, a row per tool, cut to width
 * and (live) to height. live: each line ends clearing to its end.
 */
static void
top_frame(struct top *t, FILE *f, int width, int height, bool live)
{
	static const char *sorts[] = { "e", "elapsed", "c", "cpu", "m",
	    "memory", "s", "session", "n", "name" };
	const char *eol = live ? "\033[K\n" : "\n";
	char line[512], el[32], cpu[32], cput[32], mem[32];
	const char *sortname = "elapsed";
	struct top_row *r;
	int n, rows = 0;
	size_t i;
	time_t now = time(NULL);
	struct tm tm;

	for (i = 0; i < sizeof sorts / sizeof sorts[0]; i += 2)
		if (sorts[i][0] == t->sort)
			sortname = sorts[i + 1];
	localtime_r(&now, &tm);
	n = snprintf(line, sizeof line, "stexec top  %02d:%02d:%02d  %s",
	    tm.tm_hour, tm.tm_min, tm.tm_sec, t->head);
	cli_fit(f, line, (size_t)n, width);
	fputs(eol, f);
	if (live) {
		n = snprintf(line, sizeof line, "sort: %s  (keys: e elapsed, "
		    "c cpu, m memory, s session, n name; q quits)", sortname);
		cli_fit(f, line, (size_t)n, width);
		fputs(eol, f);
		rows++;
	}
	n = snprintf(line, sizeof line, "%s%-20s %5s %4s %-24s %-12s %-10s "
	    "%8s %6s %8s %8s  %s%s", live ? "\033[7m" : "", "SESSION",
	    "TURN", "CLI", "TOOL", "NAME", "STATUS", "ELAPSED", "CPU%", "CPU",
	    "PEAK", "INPUT", live ? "\033[0m" : "");
	cli_fit(f, line, (size_t)n, width);
	fputs(eol, f);
	rows += 2;
	for (i = 0; i < t->nrows && (!live || rows < height - 1); i++,
	    rows++) {
		r = &t->rows[i];
		snprintf(el, sizeof el, r->elapsed >= 0 ? "%.1fs" : "-",
		    r->elapsed);
		snprintf(cpu, sizeof cpu, r->cpu_pct >= 0 ? "%.1f" : "-",
		    r->cpu_pct);
		snprintf(cput, sizeof cput, r->cpu_ms >= 0 ? "%.3fs" : "-",
		    (double)r->cpu_ms / 1000);
		top_size(mem, sizeof mem, r->mem);
		n = snprintf(line, sizeof line, "%-20s %5lld %4lld %-24.24s "
		    "%-12.12s %-10s %8s %6s %8s %8s  %s", r->session, r->turn,
		    r->clients < 0 ? 0 : r->clients, r->id[0] != '\0' ?
		    r->id : "-", r->name[0] != '\0' ? r->name : "-",
		    r->status[0] != '\0' ? r->status : "idle", el, cpu, cput,
		    mem, r->what);
		cli_fit(f, line, n < (int)sizeof line ? (size_t)n :
		    sizeof line - 1, width);
		fputs(eol, f);
	}
	if (t->nrows == 0) {
		cli_fit(f, "(no sessions)", 13, width);
		fputs(eol, f);
		rows++;
	}
	top_mcp_frame(t, f, width, height, live, rows);
	if (live)
		fputs("\033[J", f);
}

/* The value of family's sample for one MCP server, -1 when none. */
static long long
top_mcp_value(const json_t *fams, const char *family, const char *session,
    const char *server)
{
	const json_t *f, *s, *l;
	size_t i, j;

	json_array_foreach(fams, i, f) {
		if (strcmp(top_str(f, "name"), family) != 0)
			continue;
		json_array_foreach(json_object_get(f, "samples"), j, s) {
			l = json_object_get(s, "labels");
			if (strcmp(top_str(l, "session"), session) == 0 &&
			    strcmp(top_str(l, "server"), server) == 0)
				return (long long)json_number_value(
				    json_object_get(s, "value"));
		}
	}
	return -1;
}

/* A row per MCP server under the tools; the rows drawn so far come in. */
static int
top_mcp_frame(struct top *t, FILE *f, int width, int height, bool live,
    int rows)
{
	const char *eol = live ? "\033[K\n" : "\n";
	const json_t *fams = json_object_get(t->metrics, "metrics"), *fam;
	const json_t *servers = NULL, *s, *l;
	const char *sid, *name;
	char line[512], pid[24];
	size_t i;
	int n;

	json_array_foreach(fams, i, fam)
		if (strcmp(top_str(fam, "name"), "stexec_mcp_server") == 0)
			servers = json_object_get(fam, "samples");
	if (json_array_size(servers) == 0 || (live && rows >= height - 2))
		return rows;
	n = snprintf(line, sizeof line, "%s%-20s %-16s %-10s %8s %8s %8s "
	    "%8s%s", live ? "\033[7m" : "", "MCP SESSION", "SERVER", "STATE",
	    "PID", "INFLIGHT", "DONE", "RESTARTS", live ? "\033[0m" : "");
	cli_fit(f, line, (size_t)n, width);
	fputs(eol, f);
	rows++;
	json_array_foreach(servers, i, s) {
		if (live && rows >= height - 1)
			break;
		l = json_object_get(s, "labels");
		sid = top_str(l, "session");
		name = top_str(l, "server");
		if (json_integer_value(json_object_get(s, "value")) > 0)
			snprintf(pid, sizeof pid, "%lld", (long long)
			    json_integer_value(json_object_get(s, "value")));
		else
			snprintf(pid, sizeof pid, "-");
		n = snprintf(line, sizeof line, "%-20s %-16.16s %-10s %8s "
		    "%8lld %8lld %8lld", sid, name, top_str(l, "state"), pid,
		    top_mcp_value(fams, "stexec_mcp_calls_in_flight", sid,
		    name), top_mcp_value(fams, "stexec_mcp_calls_done_total",
		    sid, name), top_mcp_value(fams,
		    "stexec_mcp_restarts_total", sid, name));
		cli_fit(f, line, n < (int)sizeof line ? (size_t)n :
		    sizeof line - 1, width);
		fputs(eol, f);
		rows++;
	}
	return rows;
}

static void
top_on_signal(int sig)
{
	if (sig == SIGWINCH)
		top_resized = 1;
	else
		top_quit = 1;
}

static void
top_restore(void)
{
	static const char leave[] = "\033[?25h\033[?1049l";

	if (!top_raw)
		return;
	(void)!write(STDOUT_FILENO, leave, sizeof leave - 1);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &top_saved);
	top_raw = false;
}

/* Keys without Enter, no echo; the alternate screen, no cursor. */
static void
top_enter(void)
{
	static const char enter[] = "\033[?1049h\033[?25l";
	struct termios raw;
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = top_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &top_saved) == 0) {
		raw = top_saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
	}
	top_raw = true;
	(void)!write(STDOUT_FILENO, enter, sizeof enter - 1);
}

static int
top_height(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
		return ws.ws_row;
	return 24;
}

/* A frame built in memory and written at once: no half frame is seen. */
static void
top_draw(struct top *t)
{
	char *data = NULL;
	size_t len = 0, off = 0;
	ssize_t n;
	FILE *f;

	if ((f = open_memstream(&data, &len)) == NULL)
		return;
	fputs("\033[H", f);
	top_frame(t, f, cli_term_width(STDOUT_FILENO), top_height(), true);
	fclose(f);
	while (off < len && ((n = write(STDOUT_FILENO, data + off, len -
	    off)) > 0 || (n == -1 && errno == EINTR)))
		if (n > 0)
			off += (size_t)n;
	free(data);
}

int
cmd_top(struct cli *cli, struct cli_args *a)
{
	struct top t = { .cli = cli, .sort = 'e' };
	const char *iv = cli_opt(a, "interval"), *sort = cli_opt(a, "sort");
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	double interval = 1, due;
	char *end, key;
	int rc, ms;

	if (iv != NULL && ((interval = strtod(iv, &end)) < 0.1 ||
	    interval > 3600 || *end != '\0')) {
		cli_error(cli, "--interval: a number of seconds from 0.1 to "
		    "3600, not %s", iv);
		return CLI_EXIT_USAGE;
	}
	if (sort != NULL) {
		if (strlen(sort) < 1 || strchr("ecmsn", sort[0]) == NULL) {
			cli_error(cli, "--sort: elapsed, cpu, memory, session "
			    "or name, not %s", sort);
			return CLI_EXIT_USAGE;
		}
		t.sort = sort[0];
	}
	if ((rc = cli_connect(cli)) != 0)
		return rc;
	/* Once, or not on a terminal: one plain frame. */
	if (cli_flag(a, "once") || !isatty(STDOUT_FILENO)) {
		if ((rc = top_gather(&t)) == 0)
			top_frame(&t, stdout, 1 << 16, 0, false);
		free(t.rows);
		free(t.prev);
		json_decref(t.metrics);
		return rc;
	}
	if (!isatty(STDIN_FILENO))
		pfd.fd = -1; /* no keys: poll only waits */
	top_enter();
	atexit(top_restore);
	while (!top_quit) {
		if ((rc = top_gather(&t)) != 0)
			break;
		top_draw(&t);
		due = cli_now() + interval;
		while (!top_quit && !top_resized && (ms = (int)((due -
		    cli_now()) * 1000)) > 0) {
			if (poll(&pfd, 1, ms) <= 0 || read(STDIN_FILENO, &key,
			    1) != 1)
				continue;
			if (key == 'q' || key == 'Q' || key == 3)
				top_quit = 1;
			else if (strchr("ecmsn", key) != NULL) {
				t.sort = key;
				top_sort(&t);
				top_draw(&t);
			} else if (key == ' ' || key == 12) /* now; ^L */
				break;
		}
		top_resized = 0;
	}
	top_restore();
	free(t.rows);
	free(t.prev);
	json_decref(t.metrics);
	return rc;
}
