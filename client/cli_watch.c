/*
 * stexec-cli watch: a session's notifications rendered for a person as
 * they arrive, and at each turn's end a timeline of what ran when. The
 * times are those of arrival here, so replayed events (from before the
 * watch began) are marked and their turns get no timeline. On a terminal
 * every line is cut to its width, so nothing wraps.
 */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WATCH_LABEL_MAX 28
#define WATCH_RECONNECTS 5
#define WATCH_TICK_MS 250  /* status is asked this often while a turn runs */

/* A tool seen in a turn not yet charted. */
struct watch_tool {
	char *id;
	char *name;         /* NULL while unknown */
	long long turn;
	double first;       /* seconds since the watch began */
	double exec;        /* executing from; < 0: never */
	double done;        /* completed at; < 0: not yet */
	long long duration; /* meta.durationMs; < 0: unknown */
	char reason[24];
	bool error;
	bool asked;         /* status was asked for its name */
	size_t order;       /* add order when status told it, for the chart */
};

struct watch {
	struct cli *cli;
	const char *sid;
	double t0;
	uint64_t replayed;   /* seqs up to this one are a replay */
	long long status_turn;
	struct watch_tool *tools;
	size_t n, cap;
	size_t created;      /* tools ever tracked: the order of the others */
	bool busy;           /* the last state was in progress */
	int width;           /* columns to fit in; 0: piped, no limit */
};

static struct watch_tool *watch_tool(struct watch *, long long, const char *,
		    bool);
static const char *watch_name(struct watch *, long long, const char *);
static void	watch_learn(struct watch *, const json_t *);
static void	watch_track(struct watch *, const char *, const json_t *,
		    double);
static void	watch_chart(struct watch *, long long, double);
static void	watch_forget(struct watch *, long long);
static int	watch_by_order(const void *, const void *);
static void	watch_snippet(const json_t *, size_t, char *, size_t);
static void	watch_line(struct watch *, char *, size_t);
static void	watch_right(const struct watch_tool *, char *, size_t);
static const char *watch_str(const json_t *, const char *);
static int	watch_header(struct watch *);
static void	watch_refresh(struct watch *);
static int	watch_subscribe(struct watch *, const struct cli_args *);
static int	watch_reconnect(struct watch *);

static struct watch_tool *
watch_tool(struct watch *w, long long turn, const char *id, bool create)
{
	struct watch_tool *t;
	size_t i;

	for (i = 0; i < w->n; i++)
		if (w->tools[i].turn == turn && strcmp(w->tools[i].id, id) == 0)
			return &w->tools[i];
	if (!create)
		return NULL;
	if (w->n == w->cap) {
		w->cap = w->cap == 0 ? 16 : w->cap * 2;
		if ((w->tools = realloc(w->tools, w->cap *
		    sizeof *w->tools)) == NULL)
			abort();
	}
	t = &w->tools[w->n++];
	memset(t, 0, sizeof *t);
	if ((t->id = strdup(id)) == NULL)
		abort();
	t->turn = turn;
	t->first = cli_now() - w->t0;
	t->exec = t->done = -1;
	t->duration = -1;
	/* After every tool whose place status told. */
	t->order = (size_t)1 << 20 | w->created++;
	return t;
}

/* Names of the current turn's tools, from status. */
static void
watch_learn(struct watch *w, const json_t *status)
{
	long long turn = json_integer_value(json_object_get(status, "turn"));
	const char *id, *name;
	struct watch_tool *t;
	json_t *tool;
	size_t i;

	w->status_turn = turn;
	json_array_foreach(json_object_get(status, "tools"), i, tool) {
		id = json_string_value(json_object_get(tool, "id"));
		name = json_string_value(json_object_get(tool, "name"));
		if (id == NULL || name == NULL)
			continue;
		t = watch_tool(w, turn, id, true);
		t->order = i;
		if (t->name == NULL && (t->name = strdup(name)) == NULL)
			abort();
	}
}

/*
 * Notifications name a tool only by id; its name comes from status, asked
 * once per tool and only while its turn can still be the current one.
 */
static const char *
watch_name(struct watch *w, long long turn, const char *id)
{
	struct watch_tool *t = watch_tool(w, turn, id, true);

	if (t->name != NULL || t->asked || turn < w->status_turn)
		return t->name;
	t->asked = true;
	watch_refresh(w);
	return watch_tool(w, turn, id, true)->name;
}

/*
 * Ask status for the names of the current turn's tools. Asked while a
 * turn runs too: a tool that never starts is otherwise first seen in its
 * result, often after its turn ended and status tells no more of it.
 */
static void
watch_refresh(struct watch *w)
{
	json_t *status = NULL;

	if (stexec_call(w->cli->c, "status", json_pack("{s:s}", "sessionId",
	    w->sid), &status, NULL) == 0)
		watch_learn(w, status);
	json_decref(status);
}

static const char *
watch_str(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? v : "?";
}

/* The session as it is now: its turn and every tool of it. */
static int
watch_header(struct watch *w)
{
	struct stexec_error err = { 0 };
	json_t *status = NULL, *t;
	char *line = NULL;
	size_t i, len = 0;
	FILE *f;
	int rc;

	if (stexec_call(w->cli->c, "status", json_pack("{s:s}", "sessionId",
	    w->sid), &status, &err) != 0) {
		rc = cli_rpc_error(w->cli, "status", &err);
		stexec_error_clear(&err);
		return rc;
	}
	watch_learn(w, status);
	if ((f = open_memstream(&line, &len)) == NULL)
		abort();
	fprintf(f, "%ssession %s, turn %lld%s: ", cli_sgr(w->cli, false,
	    "\033[1m"), w->sid, (long long)json_integer_value(json_object_get(
	    status, "turn")), cli_sgr(w->cli, false, "\033[0m"));
	if (json_array_size(json_object_get(status, "tools")) == 0)
		fprintf(f, "idle, no tools");
	json_array_foreach(json_object_get(status, "tools"), i, t)
		fprintf(f, "%s%s %s %s", i > 0 ? ", " : "",
		    watch_str(t, "id"), watch_str(t, "name"),
		    watch_str(t, "status"));
	fputc('\n', f);
	fclose(f);
	watch_line(w, line, len);
	free(line);
	json_decref(status);
	return 0;
}

/* A rendered line (ending in a newline) to stdout, fitted on a terminal. */
static void
watch_line(struct watch *w, char *line, size_t len)
{
	if (w->width <= 0) {
		fwrite(line, 1, len, stdout);
		return;
	}
	if (len > 0 && line[len - 1] == '\n')
		line[--len] = '\0';
	cli_fit(stdout, line, len, w->width);
	fputc('\n', stdout);
}

/* Compact JSON, or the first line of a string, cut to max columns. */
static void
watch_snippet(const json_t *v, size_t max, char *buf, size_t len)
{
	char *text;

	if (json_is_string(v)) {
		cli_first_line(json_string_value(v), json_string_length(v), max,
		    buf, len);
		return;
	}
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	cli_first_line(text != NULL ? text : "?", text != NULL ?
	    strlen(text) : 1, max, buf, len);
	free(text);
}

/*
 * One notification as a line, without the time (watch prints the time,
 * events the seq). name is the tool's when known.
 */
void
watch_describe(const struct cli *cli, FILE *f, const json_t *msg,
    const char *name)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *p = json_object_get(msg, "params"), *data, *v;
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	const char *s, *off = cli_sgr(cli, false, "\033[0m");
	size_t max = 160, i;
	char snip[1024];
	json_t *meta;
	bool error;

	if (cli->out_tty && cli_term_width(STDOUT_FILENO) > 70)
		max = (size_t)cli_term_width(STDOUT_FILENO) - 50;
	if (method == NULL)
		method = "?";
	if (id != NULL) {
		fprintf(f, "turn %lld  %s%s%s%s%s  ", (long long)
		    json_integer_value(json_object_get(p, "turn")),
		    cli_sgr(cli, false, "\033[1m"), id, name != NULL ? " " : "",
		    name != NULL ? name : "", off);
	}
	if (strcmp(method, "tool_status") == 0) {
		s = json_string_value(json_object_get(p, "status"));
		fprintf(f, "%s%s%s\n", cli_sgr(cli, false, s != NULL &&
		    strcmp(s, "executing") == 0 ? "\033[36m" : "\033[32m"),
		    s != NULL ? s : "?", off);
	} else if (strcmp(method, "progress") == 0) {
		data = json_object_get(p, "data");
		v = json_object_get(data, "text");
		watch_snippet(json_is_string(v) ? v : data, max, snip,
		    sizeof snip);
		fprintf(f, "progress%s%s: %s\n", json_is_string(json_object_get(
		    data, "stream")) ? " " : "", json_is_string(json_object_get(
		    data, "stream")) ? json_string_value(json_object_get(data,
		    "stream")) : "", snip);
	} else if (strcmp(method, "tool_result") == 0) {
		meta = json_object_get(p, "meta");
		error = json_is_true(json_object_get(json_object_get(p,
		    "result"), "is_error"));
		s = json_string_value(json_object_get(meta, "reason"));
		watch_snippet(json_object_get(json_object_get(p, "result"),
		    "content"), max, snip, sizeof snip);
		fprintf(f, "result %s%s%s (%lld ms): %s\n", cli_sgr(cli, false,
		    error ? "\033[1;31m" : "\033[1;32m"), s != NULL ? s : "?",
		    off, (long long)json_integer_value(json_object_get(meta,
		    "durationMs")), snip);
	} else if (strcmp(method, "permission_request") == 0) {
		watch_snippet(json_object_get(p, "input"), max, snip,
		    sizeof snip);
		fprintf(f, "%sasks permission%s: %s\n", cli_sgr(cli, false,
		    "\033[33m"), off, snip);
	} else if (strcmp(method, "state") == 0) {
		v = json_object_get(p, "inProgress");
		fprintf(f, "state: %s", json_array_size(v) == 0 ? "idle" :
		    "in progress");
		for (i = 0; i < json_array_size(v); i++)
			fprintf(f, "%s%s", i == 0 ? " " : ", ",
			    json_string_value(json_array_get(v, i)) != NULL ?
			    json_string_value(json_array_get(v, i)) : "?");
		fprintf(f, "%s\n", json_is_true(json_object_get(p,
		    "interruptible")) ? " (interruptible)" : "");
	} else if (strcmp(method, "turn_end") == 0) {
		s = json_string_value(json_object_get(p, "reason"));
		fprintf(f, "%sturn %lld ended (%s)%s\n", cli_sgr(cli, false,
		    "\033[1m"), (long long)json_integer_value(json_object_get(p,
		    "turn")), s != NULL ? s : "?", off);
	} else if (strcmp(method, "session_closed") == 0)
		fprintf(f, "%ssession closed%s\n", cli_sgr(cli, false,
		    "\033[1m"), off);
	else {
		watch_snippet(p, max, snip, sizeof snip);
		fprintf(f, "%s %s\n", method, snip);
	}
}

/* Remember when each tool of a turn started and ended, for the chart. */
static void
watch_track(struct watch *w, const char *method, const json_t *p, double now)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	long long turn = json_integer_value(json_object_get(p, "turn"));
	const json_t *meta = json_object_get(p, "meta");
	const char *s;
	struct watch_tool *t;

	if (id == NULL)
		return;
	t = watch_tool(w, turn, id, true);
	if (strcmp(method, "permission_request") == 0 && t->name == NULL &&
	    (s = json_string_value(json_object_get(p, "name"))) != NULL &&
	    (t->name = strdup(s)) == NULL)
		abort();
	if (strcmp(method, "tool_status") == 0) {
		s = json_string_value(json_object_get(p, "status"));
		if (s != NULL && strcmp(s, "executing") == 0 && t->exec < 0)
			t->exec = now;
		else if (s != NULL && strcmp(s, "completed") == 0 &&
		    t->done < 0)
			t->done = now;
	} else if (strcmp(method, "tool_result") == 0) {
		if (t->done < 0)
			t->done = now;
		s = json_string_value(json_object_get(meta, "reason"));
		snprintf(t->reason, sizeof t->reason, "%s", s != NULL ? s : "");
		if (json_is_integer(json_object_get(meta, "durationMs")) &&
		    t->exec >= 0)
			t->duration = json_integer_value(json_object_get(meta,
			    "durationMs"));
		t->error = json_is_true(json_object_get(json_object_get(p,
		    "result"), "is_error"));
	}
}

/* The right column of a chart row: how long it ran, or why it did not. */
static void
watch_right(const struct watch_tool *t, char *buf, size_t len)
{
	if (t->exec < 0)
		snprintf(buf, len, "%s", t->reason[0] != '\0' ? t->reason :
		    "not run");
	else if (t->duration >= 0)
		snprintf(buf, len, "%.3fs", (double)t->duration / 1000);
	else if (t->done >= 0)
		snprintf(buf, len, "%.3fs", t->done - t->exec);
	else
		snprintf(buf, len, "running");
}

/*
 * The turn's tools on one time axis, from its first event to its end:
 * '█' while a tool executed, '·' otherwise, fitted to the terminal.
 */
static void
watch_chart(struct watch *w, long long turn, double end)
{
	const char *off = cli_sgr(w->cli, false, "\033[0m");
	double start = end, span, from, to, x;
	size_t i, tools = 0, lw = 0, rw = 0, bw, len;
	char label[WATCH_LABEL_MAX + 1], right[32], *line;
	struct watch_tool *t;
	int width = w->width > 0 ? w->width : 80, c, c0, c1;
	bool on;
	FILE *f;

	/* Rows in add order. */
	qsort(w->tools, w->n, sizeof *w->tools, watch_by_order);
	for (i = 0; i < w->n; i++) {
		t = &w->tools[i];
		if (t->turn != turn)
			continue;
		tools++;
		if (t->first < start)
			start = t->first;
		snprintf(label, sizeof label, "%s %s", t->id, t->name != NULL ?
		    t->name : "");
		if (strlen(label) > lw)
			lw = strlen(label);
		watch_right(t, right, sizeof right);
		if (strlen(right) > rw)
			rw = strlen(right);
	}
	if (tools == 0)
		return;
	span = end - start;
	/* "  " label " |" bar "| " right: the bar takes what is left. */
	bw = (size_t)width > lw + rw + 6 + 10 ? (size_t)width - lw - rw - 6 :
	    10;
	if (bw > 120)
		bw = 120;
	len = 0;
	line = NULL;
	if ((f = open_memstream(&line, &len)) == NULL)
		abort();
	fprintf(f, "  %stimeline of turn %lld: %zu tool%s, %.3fs%s\n",
	    cli_sgr(w->cli, false, "\033[1m"), turn, tools, tools == 1 ? "" :
	    "s", span, off);
	fclose(f);
	watch_line(w, line, len);
	free(line);
	for (i = 0; i < w->n; i++) {
		t = &w->tools[i];
		if (t->turn != turn)
			continue;
		snprintf(label, sizeof label, "%s %s", t->id, t->name != NULL ?
		    t->name : "");
		c0 = c1 = -1;
		if (t->exec >= 0) {
			from = t->exec;
			to = t->done >= 0 ? t->done : end;
			if (span > 0) {
				/* Both are >= 0: truncation is floor. */
				x = (from - start) / span * (double)bw;
				c0 = (int)x;
				x = (to - start) / span * (double)bw;
				c1 = (int)x + ((double)(int)x < x);
			} else {
				c0 = 0;
				c1 = (int)bw;
			}
			if (c0 >= (int)bw)
				c0 = (int)bw - 1;
			if (c1 <= c0)
				c1 = c0 + 1;
			if (c1 > (int)bw)
				c1 = (int)bw;
		}
		len = 0;
		line = NULL;
		if ((f = open_memstream(&line, &len)) == NULL)
			abort();
		fprintf(f, "  %-*s |", (int)lw, label);
		/* One colour change per run of cells, not per cell. */
		for (c = 0; c < (int)bw; c++) {
			on = c >= c0 && c < c1;
			if (c == 0 || on != (c - 1 >= c0 && c - 1 < c1))
				fprintf(f, "%s%s", c == 0 ? "" : off,
				    cli_sgr(w->cli, false, !on ? "\033[2m" :
				    t->error ? "\033[31m" : "\033[32m"));
			fputs(on ? "█" : "·", f);
		}
		watch_right(t, right, sizeof right);
		fprintf(f, "%s| %s\n", off, right);
		fclose(f);
		watch_line(w, line, len);
		free(line);
	}
}

static int
watch_by_order(const void *a, const void *b)
{
	const struct watch_tool *x = a, *y = b;

	if (x->turn != y->turn)
		return x->turn < y->turn ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Drop a charted turn's tools (and any of older turns). */
static void
watch_forget(struct watch *w, long long turn)
{
	size_t i, k = 0;

	for (i = 0; i < w->n; i++) {
		if (w->tools[i].turn <= turn) {
			free(w->tools[i].id);
			free(w->tools[i].name);
		} else
			w->tools[k++] = w->tools[i];
	}
	w->n = k;
}

/*
 * Subscribe with the requested start. By default that is the oldest
 * retained notification: on a replay gap, start at the oldest kept.
 */
static int
watch_subscribe(struct watch *w, const struct cli_args *a)
{
	struct stexec_error err = { 0 };
	long long since = 0;
	json_int_t oldest;
	int rc;

	if ((rc = cli_int_opt(w->cli, a, "since", -1, LLONG_MAX, &since)) != 0)
		return rc;
	if (stexec_subscribe(w->cli->c, w->sid, since, &w->replayed,
	    &err) != 0) {
		oldest = json_integer_value(json_object_get(err.data,
		    "oldestSeq"));
		if (err.code != STEXEC_ERR_LIMIT ||
		    cli_opt(a, "since") != NULL || oldest < 1 ||
		    stexec_subscribe(w->cli->c, w->sid, oldest - 1,
		    &w->replayed, &err) != 0) {
			rc = cli_rpc_error(w->cli, "subscribe", &err);
			stexec_error_clear(&err);
			return rc;
		}
		if (!w->cli->json)
			printf("(notifications before seq %lld are no longer "
			    "retained)\n", (long long)oldest);
	}
	if (since < 0)
		w->replayed = 0;
	stexec_error_clear(&err);
	return 0;
}

/* The daemon hung up: try again for a while, then resume exactly. */
static int
watch_reconnect(struct watch *w)
{
	struct stexec_error err = { 0 };
	char why[768];
	int i, rc;

	snprintf(why, sizeof why, "%s", stexec_last_error(w->cli->c));
	for (i = 0; i < WATCH_RECONNECTS; i++) {
		usleep(200000);
		if (stexec_reconnect(w->cli->c, NULL, 0) == 0)
			break;
	}
	if (i == WATCH_RECONNECTS) {
		cli_error(w->cli, "%s, and reconnecting failed: %s", why,
		    stexec_last_error(w->cli->c));
		return CLI_EXIT_USAGE;
	}
	if (stexec_last_seq(w->cli->c, w->sid) == 0 &&
	    stexec_subscribe(w->cli->c, w->sid, 0, NULL, &err) != 0) {
		rc = cli_rpc_error(w->cli, "subscribe", &err);
		stexec_error_clear(&err);
		return rc;
	}
	if (stexec_resubscribe(w->cli->c, &err) != 0) {
		rc = cli_rpc_error(w->cli, "subscribe", &err);
		stexec_error_clear(&err);
		return rc;
	}
	if (!w->cli->json)
		printf("%s(reconnected)%s\n", cli_sgr(w->cli, false, "\033[2m"),
		    cli_sgr(w->cli, false, "\033[0m"));
	return 0;
}

int
watch_main(struct cli *cli, struct cli_args *a)
{
	struct watch w = { .cli = cli, .sid = a->pos[0] };
	const char *method, *id;
	char *line = NULL;
	json_t *msg, *p;
	uint64_t seq;
	size_t len = 0;
	double now;
	bool replay;
	FILE *f;
	int k, rc;

	cli_catch_sigint();
	if ((rc = cli_connect(cli)) != 0)
		return rc;
	w.t0 = cli_now();
	w.width = cli->out_tty ? cli_term_width(STDOUT_FILENO) : 0;
	/* Subscribed first: nothing happens between the header and events. */
	if ((rc = watch_subscribe(&w, a)) != 0)
		goto out;
	if (!cli->json && (rc = watch_header(&w)) != 0)
		goto out;
	for (;;) {
		fflush(stdout);
		k = cli_next_wait(cli, &msg, w.busy ? WATCH_TICK_MS : -1);
		if (k == 2) {
			watch_refresh(&w);
			continue;
		}
		if (k == 0) {
			rc = CLI_EXIT_INT;
			break;
		}
		if (k < 0) {
			if ((rc = watch_reconnect(&w)) != 0)
				break;
			continue;
		}
		method = json_string_value(json_object_get(msg, "method"));
		p = json_object_get(msg, "params");
		id = json_string_value(json_object_get(p, "sessionId"));
		/* Replies (to status) were taken by their calls. */
		if (method == NULL || id == NULL || strcmp(id, w.sid) != 0) {
			json_decref(msg);
			continue;
		}
		if (cli->json) {
			cli_print_json(msg);
			fflush(stdout);
		} else {
			now = cli_now() - w.t0;
			seq = (uint64_t)json_integer_value(json_object_get(p,
			    "seq"));
			replay = seq <= w.replayed;
			watch_track(&w, method, p, now);
			if (strcmp(method, "state") == 0)
				w.busy = json_array_size(json_object_get(p,
				    "inProgress")) > 0;
			if ((f = open_memstream(&line, &len)) == NULL)
				abort();
			if (replay)
				fprintf(f, "%s  replay%s  ", cli_sgr(cli, false,
				    "\033[2m"), cli_sgr(cli, false, "\033[0m"));
			else
				fprintf(f, "%st+%.3fs%s  ", cli_sgr(cli, false,
				    "\033[2m"), now, cli_sgr(cli, false,
				    "\033[0m"));
			id = json_string_value(json_object_get(p, "toolUseId"));
			watch_describe(cli, f, msg, id == NULL ? NULL :
			    watch_name(&w, json_integer_value(json_object_get(p,
			    "turn")), id));
			fclose(f);
			watch_line(&w, line, len);
			free(line);
			line = NULL;
			if (strcmp(method, "turn_end") == 0) {
				w.busy = false;
				if (!replay)
					watch_chart(&w, json_integer_value(
					    json_object_get(p, "turn")), now);
				watch_forget(&w, json_integer_value(
				    json_object_get(p, "turn")));
			}
			fflush(stdout);
		}
		k = strcmp(method, "session_closed") == 0;
		json_decref(msg);
		if (k) {
			rc = CLI_EXIT_OK;
			break;
		}
	}
out:
	watch_forget(&w, LLONG_MAX);
	free(w.tools);
	return rc;
}
