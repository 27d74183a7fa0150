/*
 * stexec-cli run: one turn in a throwaway session. Every addTool and the
 * drain go out at once (the daemon handles a connection's requests in
 * order, so the drain covers them all) and then a single loop handles
 * replies, notifications and Ctrl-C as they come.
 *
 * On a terminal, stderr ends with a live block, one line per tool not yet
 * delivered (running with its elapsed time, queued, done and held for
 * order), redrawn every tick and cleared before anything else is printed.
 * Piped, the same changes are plain lines.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN_TICK_MS 100
#define RUN_LIVE_ROWS 8    /* tool rows in the live block, then "… N more" */
#define RUN_PART_MAX 4096  /* a streamed line held back on a terminal */

enum run_state { RUN_QUEUED, RUN_ASKING, RUN_RUNNING, RUN_DONE, RUN_DELIVERED };

struct run_tool {
	char id[24];
	const char *name;
	json_t *input;
	int64_t req;   /* the addTool request */
	bool bol;      /* streamed output: at the start of a line */
	enum run_state state;
	double exec;   /* cli_now() when it started executing; < 0: never */
	double done;   /* when it completed; < 0: not yet */
	char *part;    /* live: streamed output after its last newline */
	size_t partlen;
	bool job;      /* its call became a job (--background) */
};

struct run {
	struct cli *cli;
	struct run_tool *tools;
	size_t n;
	const char *sid;
	int64_t drain_req;
	bool failed;   /* an error result or a failed request */
	bool allow;    /* --allow: grant permission requests */
	bool background; /* --background: every call a job */
	size_t jobs;   /* calls that became jobs */
	bool live;     /* stderr is a terminal: the live block */
	int drawn;     /* rows of the live block on the screen */
	size_t results;/* results printed */
};

static struct run_tool *run_tool(struct run *, const char *);
static void	run_prefix(struct run *, const struct run_tool *,
		    const char *);
static void	run_clear(struct run *);
static void	run_draw(struct run *);
static double	run_seconds(const struct run_tool *, const json_t *);
static void	run_status(struct run *, const json_t *);
static void	run_stream(struct run *, struct run_tool *, const char *,
		    const char *, size_t);
static void	run_progress(struct run *, const json_t *);
static void	run_result(struct run *, const json_t *);
static void	run_permission(struct run *, const json_t *);
static int	run_reply(struct run *, json_t *, bool *);
static int	run_interrupt(struct run *);
static int	run_loop(struct run *);
static int	run_setup(struct run *, const struct cli_args *, json_t **);
static int	run_as_jobs(struct run *);
static bool	run_job(struct run *, struct run_tool *, const json_t *);

static struct run_tool *
run_tool(struct run *r, const char *id)
{
	size_t i;

	for (i = 0; id != NULL && i < r->n; i++)
		if (strcmp(r->tools[i].id, id) == 0)
			return &r->tools[i];
	return NULL;
}

/* "[t1 bash] " on stderr, dimmed when stderr is a terminal. */
static void
run_prefix(struct run *r, const struct run_tool *t, const char *id)
{
	fprintf(stderr, "%s[%s %s]%s ", cli_sgr(r->cli, true, "\033[2m"),
	    t != NULL ? t->id : id, t != NULL ? t->name : "?",
	    cli_sgr(r->cli, true, "\033[0m"));
}

/* Take the live block off the screen before printing anything else. */
static void
run_clear(struct run *r)
{
	if (r->drawn > 0)
		fprintf(stderr, "\033[%dF\033[J", r->drawn);
	r->drawn = 0;
}

/*
 * The live block: a row per tool not yet delivered, each cut to the
 * terminal's width so that no row wraps and the block can be erased by
 * moving up as many rows as were drawn.
 */
static void
run_draw(struct run *r)
{
	int width = cli_term_width(STDERR_FILENO), rows = 0;
	double now = cli_now();
	const char *dim = cli_sgr(r->cli, true, "\033[2m");
	const char *off = cli_sgr(r->cli, true, "\033[0m");
	char state[64], snip[256], *line = NULL;
	struct run_tool *t;
	size_t i, more = 0, len = 0;
	FILE *f;

	if (!r->live)
		return;
	run_clear(r);
	for (i = 0; i < r->n; i++) {
		t = &r->tools[i];
		if (t->state == RUN_DELIVERED)
			continue;
		if (rows == RUN_LIVE_ROWS) {
			more++;
			continue;
		}
		switch (t->state) {
		case RUN_QUEUED:
			snprintf(state, sizeof state, "%squeued%s", dim, off);
			break;
		case RUN_ASKING:
			snprintf(state, sizeof state, "asks permission");
			break;
		case RUN_RUNNING:
			snprintf(state, sizeof state, "%srunning%s %.1fs",
			    cli_sgr(r->cli, true, "\033[36m"), off,
			    now - t->exec);
			break;
		default:
			snprintf(state, sizeof state, "done %.1fs, %swaits for "
			    "the results before it%s", t->exec >= 0 ?
			    t->done - t->exec : 0.0, dim, off);
			break;
		}
		cli_input_summary(t->input, snip, sizeof snip);
		if ((f = open_memstream(&line, &len)) == NULL)
			abort();
		fprintf(f, "  %s%s %s%s  %s  %s%s%s", cli_sgr(r->cli, true,
		    "\033[1m"), t->id, t->name, off, state, dim, snip, off);
		fclose(f);
		cli_fit(stderr, line, len, width - 1);
		fputc('\n', stderr);
		free(line);
		rows++;
	}
	if (more > 0) {
		fprintf(stderr, "  %s… %zu more%s\n", dim, more, off);
		rows++;
	}
	r->drawn = rows;
	fflush(stderr);
}

/*
 * How long a tool ran: the daemon's durationMs, or what was seen here
 * when the daemon substituted the result (an interrupt reports 0).
 */
static double
run_seconds(const struct run_tool *t, const json_t *meta)
{
	json_int_t ms = json_integer_value(json_object_get(meta,
	    "durationMs"));

	if (ms > 0 || t == NULL || t->exec < 0)
		return (double)ms / 1000;
	return (t->done >= 0 ? t->done : cli_now()) - t->exec;
}

/* tool_status: the live block shows it; piped, a line says it. */
static void
run_status(struct run *r, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	const char *s = json_string_value(json_object_get(p, "status"));
	struct run_tool *t = run_tool(r, id);

	if (t == NULL || s == NULL)
		return;
	if (strcmp(s, "executing") == 0 && t->exec < 0) {
		t->exec = cli_now();
		t->state = RUN_RUNNING;
		if (!r->live) {
			run_prefix(r, t, id);
			fprintf(stderr, "started\n");
		}
	} else if (strcmp(s, "completed") == 0 && t->done < 0) {
		t->done = cli_now();
		t->state = RUN_DONE;
		if (!r->live && t->exec >= 0) {
			run_prefix(r, t, id);
			fprintf(stderr, "finished after %.3fs\n",
			    t->done - t->exec);
		}
	}
}

/*
 * Streamed output, a prefix per line. It may end mid-line: piped, the
 * tool remembers where it is; live, the rest of the line is held until
 * its newline (or the result) so that the block never splits a line.
 */
static void
run_stream(struct run *r, struct run_tool *t, const char *id, const char *s,
    size_t len)
{
	const char *nl;
	size_t n;

	while (len > 0) {
		nl = memchr(s, '\n', len);
		n = nl != NULL ? (size_t)(nl - s) + 1 : len;
		if (r->live && nl == NULL && t->id[0] != '\0' &&
		    t->partlen + n < RUN_PART_MAX) {
			if ((t->part = realloc(t->part, t->partlen + n)) ==
			    NULL)
				abort();
			memcpy(t->part + t->partlen, s, n);
			t->partlen += n;
			return;
		}
		if (t->bol)
			run_prefix(r, t->id[0] != '\0' ? t : NULL, id);
		if (t->partlen > 0)
			fwrite(t->part, 1, t->partlen, stderr);
		t->partlen = 0;
		fwrite(s, 1, n, stderr);
		t->bol = nl != NULL;
		if (r->live && !t->bol) {
			fputc('\n', stderr);
			t->bol = true;
		}
		s += n;
		len -= n;
	}
}

/*
 * Progress goes to stderr at once, a prefix per line: streamed output
 * ({stream, text}) may end mid-line, so the tool remembers where it is;
 * a fd-3 line ({text}) is one line; any other JSON is shown compact.
 */
static void
run_progress(struct run *r, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	const json_t *data = json_object_get(p, "data");
	const json_t *text = json_object_get(data, "text");
	struct run_tool *t = run_tool(r, id), none = { .bol = true };
	const char *s;
	size_t len;

	if (t == NULL)
		t = &none;
	run_clear(r);
	if (!json_is_string(text)) {
		run_prefix(r, t != &none ? t : NULL, id);
		json_dumpf(data, stderr, JSON_COMPACT | JSON_ENCODE_ANY);
		fputc('\n', stderr);
		return;
	}
	s = json_string_value(text);
	len = json_string_length(text);
	if (json_object_get(data, "stream") == NULL) {
		run_prefix(r, t != &none ? t : NULL, id);
		fwrite(s, 1, len, stderr);
		fputc('\n', stderr);
		return;
	}
	run_stream(r, t, id, s, len);
}

/*
 * A result as delivered: its content, headed on a terminal. Piped, with
 * more than one tool, each result is headed as head(1) heads files, by a
 * line that also counts the lines that follow, so a script can split.
 */
static void
run_result(struct run *r, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	const json_t *result = json_object_get(p, "result");
	const json_t *meta = json_object_get(p, "meta");
	const json_t *content = json_object_get(result, "content");
	struct run_tool *t = run_tool(r, id);
	bool error = json_is_true(json_object_get(result, "is_error"));
	const char *reason = json_string_value(json_object_get(meta, "reason"));
	const char *text = json_string_value(content);
	size_t len = json_string_length(content), lines = 0, i;
	const json_t *b, *v;
	char *joined = NULL;
	double secs;
	FILE *f;

	if (error)
		r->failed = true;
	run_clear(r);
	/* Streamed output that ended mid-line: finish the line first. */
	if (t != NULL && t->partlen > 0)
		run_stream(r, t, t->id, "\n", 1);
	if (t != NULL && !t->bol) {
		fputc('\n', stderr);
		t->bol = true;
	}
	if (t != NULL && t->done < 0)
		t->done = cli_now();
	secs = run_seconds(t, meta);
	if (t != NULL)
		t->state = RUN_DELIVERED;
	if (reason == NULL)
		reason = "?";
	if (id == NULL)
		id = "?";
	if (strcmp(reason, "background") == 0 && run_job(r, t, meta)) {
		r->results++;
		return;
	}
	if (r->cli->json) {
		cli_print_json(p);
		fflush(stdout);
		r->results++;
		return;
	}
	/* Content blocks: their text, and what each other block is. */
	if (json_is_array(content) && (f = open_memstream(&joined, &len)) !=
	    NULL) {
		json_array_foreach(content, i, b) {
			if (i > 0)
				fputc('\n', f);
			if ((v = json_object_get(b, "text")) != NULL)
				fwrite(json_string_value(v), 1,
				    json_string_length(v), f);
			else
				fprintf(f, "[%s block%s%s]", json_string_value(
				    json_object_get(b, "type")) != NULL ?
				    json_string_value(json_object_get(b, "type")) :
				    "a", json_object_get(json_object_get(b,
				    "source"), "media_type") != NULL ? ": " : "",
				    json_string_value(json_object_get(
				    json_object_get(b, "source"), "media_type")) !=
				    NULL ? json_string_value(json_object_get(
				    json_object_get(b, "source"), "media_type")) :
				    "");
		}
		fclose(f);
		text = joined;
	}
	for (i = 0; i < len; i++)
		lines += text[i] == '\n';
	lines += len > 0 && text[len - 1] != '\n';
	if (r->cli->out_tty)
		printf("%s── %s %s: %s, %.3fs%s\n", cli_sgr(r->cli, false,
		    error ? "\033[1;31m" : "\033[1;32m"), id,
		    t != NULL ? t->name : "?", reason, secs,
		    cli_sgr(r->cli, false, "\033[0m"));
	else if (r->n > 1)
		printf("%s==> %s %s (%s%s, %.3fs, %zu line%s) <==\n",
		    r->results > 0 ? "\n" : "", id, t != NULL ? t->name : "?",
		    error ? "error: " : "", reason, secs, lines,
		    lines == 1 ? "" : "s");
	if (len > 0) {
		fwrite(text, 1, len, stdout);
		if (text[len - 1] != '\n')
			fputc('\n', stdout);
	}
	fflush(stdout);
	free(joined);
	r->results++;
}

/*
 * A call that became a job (PROTOCOL.md §4, Jobs): stdout gets "SESSION
 * JOB", which attach and signal take, and stderr how to follow and end it.
 * The session stays open, since closing it would kill the job.
 */
static bool
run_job(struct run *r, struct run_tool *t, const json_t *meta)
{
	const json_t *job = json_object_get(meta, "job");
	const char *jid = json_string_value(json_object_get(job, "jobId"));

	if (jid == NULL)
		return false;
	if (t != NULL)
		t->job = true;
	r->jobs++;
	if (r->cli->json)
		return false;  /* the tool_result says it all */
	printf("%s %s\n", r->sid, jid);
	fflush(stdout);
	run_prefix(r, t, t != NULL ? t->id : "?");
	fprintf(stderr, "runs in the background as job %s (pid %lld): "
	    "stexec-cli attach %s %s follows it, stexec-cli close %s ends "
	    "it\n", jid, (long long)json_integer_value(json_object_get(job,
	    "pid")), r->sid, jid, r->sid);
	return true;
}

/*
 * --background: each call is made a job, through the input field its
 * ToolDef names in backgroundFromInput (bash: run_in_background), unless
 * the ToolDef makes every call one already.
 */
static int
run_as_jobs(struct run *r)
{
	json_t *res = NULL, *def, *found;
	const char *field;
	size_t i, k;
	int rc;

	if ((rc = cli_call(r->cli, "listTools", json_pack("{s:s}",
	    "sessionId", r->sid), &res)) != 0)
		return rc;
	for (i = 0; i < r->n; i++) {
		def = NULL;
		json_array_foreach(json_object_get(res, "tools"), k, found)
			if (json_is_string(json_object_get(found, "name")) &&
			    strcmp(json_string_value(json_object_get(found,
			    "name")), r->tools[i].name) == 0)
				def = found;
		if (def == NULL || json_is_true(json_object_get(def,
		    "background")))
			continue;  /* no such tool: its result says so */
		field = json_string_value(json_object_get(def,
		    "backgroundFromInput"));
		if (field == NULL || !json_is_object(r->tools[i].input)) {
			cli_error(r->cli, "%s cannot run in the background: its "
			    "ToolDef has neither background nor "
			    "backgroundFromInput", r->tools[i].name);
			json_decref(res);
			return CLI_EXIT_USAGE;
		}
		json_object_set_new(r->tools[i].input, field, json_true());
	}
	json_decref(res);
	return 0;
}

/* run has nobody to ask: --allow grants, otherwise the tool is denied. */
static void
run_permission(struct run *r, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	struct stexec_error err = { 0 };
	json_t *params;
	struct run_tool *t = run_tool(r, id);

	if (t != NULL && t->state == RUN_QUEUED)
		t->state = RUN_ASKING;
	run_clear(r);
	run_prefix(r, t, id != NULL ? id : "?");
	fprintf(stderr, "asks for permission: %s\n", r->allow ? "allowed "
	    "(--allow)" : "denied (run with --allow to grant it)");
	params = json_pack("{s:s, s:s, s:s}", "sessionId", r->sid,
	    "toolUseId", id != NULL ? id : "", "decision", r->allow ? "allow" :
	    "deny");
	if (!r->allow)
		json_object_set_new(params, "message", json_string(
		    "<tool_use_error>Permission denied: stexec-cli run grants "
		    "permissions only with --allow</tool_use_error>"));
	if (stexec_send(r->cli->c, "respondPermission", params, &err) < 0)
		cli_rpc_error(r->cli, "respondPermission", &err);
	stexec_error_clear(&err);
}

/* A reply: an addTool that failed is reported; the drain ends the turn. */
static int
run_reply(struct run *r, json_t *msg, bool *done)
{
	struct stexec_error err = { 0 };
	int64_t id = stexec_message_id(msg);
	char what[64];
	size_t i;

	if (stexec_reply_decode(msg, NULL, &err) == 0) {
		*done = id == r->drain_req;
		return 0;
	}
	run_clear(r);
	/* Id 0: a request the daemon could not read, whichever it was. */
	snprintf(what, sizeof what, "%s", id == 0 ? "a request" : "a reply");
	for (i = 0; i < r->n; i++)
		if (r->tools[i].req == id)
			snprintf(what, sizeof what, "addTool %s",
			    r->tools[i].id);
	if (id == r->drain_req) {
		snprintf(what, sizeof what, "drain");
		*done = true;
	}
	cli_rpc_error(r->cli, what, &err);
	stexec_error_clear(&err);
	r->failed = true;
	return 0;
}

/* Ctrl-C: interrupt, then cancel, then give up. */
static int
run_interrupt(struct run *r)
{
	struct stexec_error err = { 0 };
	const char *reason;

	run_clear(r);
	if (!r->live)
		fputc('\n', stderr);
	if (r->cli->interrupts >= 3) {
		cli_error(r->cli, "giving up; session %s is still open "
		    "(stexec-cli close %s)", r->sid, r->sid);
		return CLI_EXIT_INT;
	}
	reason = r->cli->interrupts == 1 ? "interrupt" : "cancel";
	cli_error(r->cli, "%s", r->cli->interrupts == 1 ? "interrupting the "
	    "turn (Ctrl-C again to kill every tool)" : "cancelling the turn "
	    "(Ctrl-C again to give up waiting)");
	if (stexec_send(r->cli->c, "abort", json_pack("{s:s, s:s}",
	    "sessionId", r->sid, "reason", reason), &err) < 0) {
		stexec_error_clear(&err);
		return -1;
	}
	return 0;
}

static int
run_loop(struct run *r)
{
	const char *method;
	json_t *msg, *params;
	bool done = false;
	int k, rc;

	while (!done) {
		/* Redraw once what has arrived is handled, and every tick. */
		if (r->live && !stexec_pending(r->cli->c))
			run_draw(r);
		k = cli_next_wait(r->cli, &msg, r->live ? RUN_TICK_MS : -1);
		if (k == 2)
			continue;
		if (k < 0) {
			run_clear(r);
			cli_error(r->cli, "%s", stexec_last_error(r->cli->c));
			return CLI_EXIT_USAGE;
		}
		if (k == 0) {
			if ((rc = run_interrupt(r)) > 0)
				return rc;
			continue;
		}
		if (stexec_message_id(msg) >= 0) {
			run_reply(r, msg, &done);
			json_decref(msg);
			continue;
		}
		method = json_string_value(json_object_get(msg, "method"));
		params = json_object_get(msg, "params");
		if (method == NULL)
			;
		else if (strcmp(method, "tool_status") == 0)
			run_status(r, params);
		else if (strcmp(method, "progress") == 0)
			run_progress(r, params);
		else if (strcmp(method, "tool_result") == 0)
			run_result(r, params);
		else if (strcmp(method, "permission_request") == 0)
			run_permission(r, params);
		json_decref(msg);
	}
	run_clear(r);
	return 0;
}

/* Check every argument before anything is sent: bad JSON is exit 2. */
static int
run_setup(struct run *r, const struct cli_args *a, json_t **create)
{
	const char *cwd = cli_opt(a, "cwd"), *tools_path = cli_opt(a, "tools");
	json_t *tools;
	char here[PATH_MAX], *abs = NULL;
	long long maxp = 0;
	size_t i;
	int rc;

	if (a->npos % 2 != 0) {
		cli_error(r->cli, "TOOL and JSON come in pairs: '%s' has no "
		    "input", a->pos[a->npos - 1]);
		return CLI_EXIT_USAGE;
	}
	r->n = (size_t)a->npos / 2;
	if ((r->tools = calloc(r->n, sizeof *r->tools)) == NULL)
		abort();
	for (i = 0; i < r->n; i++) {
		snprintf(r->tools[i].id, sizeof r->tools[i].id, "t%zu", i + 1);
		r->tools[i].name = a->pos[2 * i];
		r->tools[i].bol = true;
		r->tools[i].exec = r->tools[i].done = -1;
		if ((rc = cli_parse_json(r->cli, (int)(2 * i + 2),
		    a->pos[2 * i + 1], &r->tools[i].input)) != 0)
			return rc;
	}
	if ((rc = cli_int_opt(r->cli, a, "max-parallel", 1, 256, &maxp)) != 0)
		return rc;
	*create = json_object();
	if (maxp > 0)
		json_object_set_new(*create, "maxParallel", json_integer(maxp));
	/* Tools run where the caller is, as a command run here would. */
	if (cwd == NULL || cwd[0] != '/') {
		if (getcwd(here, sizeof here) == NULL) {
			cli_error(r->cli, "cannot tell the current directory "
			    "(%s): give --cwd DIR", strerror(errno));
			return CLI_EXIT_USAGE;
		}
		if (cwd != NULL && asprintf(&abs, "%s/%s", here, cwd) < 0)
			abort();
	}
	json_object_set_new(*create, "cwd", json_string(abs != NULL ? abs :
	    cwd != NULL ? cwd : here));
	free(abs);
	if (tools_path != NULL) {
		if ((rc = cli_load_tools(r->cli, tools_path, &tools)) != 0)
			return rc;
		json_object_set_new(*create, "tools", tools);
	}
	return 0;
}

int
run_main(struct cli *cli, struct cli_args *a)
{
	struct run r = { .cli = cli, .drain_req = -1 };
	struct stexec_error err = { 0 };
	json_t *create = NULL, *res = NULL, *sid = NULL;
	size_t i;
	int rc, k;

	r.allow = cli_flag(a, "allow");
	r.background = cli_flag(a, "background");
	r.live = isatty(STDERR_FILENO);
	if ((rc = run_setup(&r, a, &create)) != 0)
		goto out;
	cli_catch_sigint();
	if ((rc = cli_connect(cli)) != 0)
		goto out;
	rc = cli_call(cli, "createSession", create, &res);
	create = NULL;
	if (rc != 0)
		goto out;
	sid = json_incref(json_object_get(res, "sessionId"));
	r.sid = json_string_value(sid);
	if (r.sid == NULL) {
		cli_error(cli, "createSession returned no sessionId");
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (r.background && (rc = run_as_jobs(&r)) != 0)
		goto close;
	if (stexec_subscribe(cli->c, r.sid, 0, NULL, &err) != 0) {
		rc = cli_rpc_error(cli, "subscribe", &err);
		goto close;
	}
	for (i = 0; i < r.n; i++) {
		r.tools[i].req = stexec_send(cli->c, "addTool",
		    json_pack("{s:s, s:{s:s, s:s, s:O}}", "sessionId", r.sid,
		    "toolUse", "id", r.tools[i].id, "name", r.tools[i].name,
		    "input", r.tools[i].input), &err);
		if (r.tools[i].req < 0) {
			rc = cli_rpc_error(cli, "addTool", &err);
			goto close;
		}
	}
	r.drain_req = stexec_send(cli->c, "drain", json_pack("{s:s}",
	    "sessionId", r.sid), &err);
	if (r.drain_req < 0) {
		rc = cli_rpc_error(cli, "drain", &err);
		goto close;
	}
	if ((rc = run_loop(&r)) != 0)
		goto out;
	/* An interrupted turn is 130, as for any command stopped by Ctrl-C. */
	rc = cli->interrupts > 0 ? CLI_EXIT_INT : r.failed ? CLI_EXIT_FAIL :
	    CLI_EXIT_OK;
close:
	/* Also after a Ctrl-C during setup; a lost connection was reported.
	 * A session with jobs stays open: closing it would kill them. */
	if (r.jobs > 0 && cli->interrupts == 0)
		;
	else if (stexec_is_open(cli->c)) {
		if (stexec_call(cli->c, "closeSession", json_pack("{s:s}",
		    "sessionId", r.sid), NULL, &err) != 0) {
			k = cli_rpc_error(cli, "closeSession", &err);
			if (k == CLI_EXIT_INT || rc == CLI_EXIT_OK)
				rc = k;
		}
	}
out:
	stexec_error_clear(&err);
	run_clear(&r);
	for (i = 0; i < r.n; i++) {
		json_decref(r.tools[i].input);
		free(r.tools[i].part);
	}
	free(r.tools);
	json_decref(create);
	json_decref(res);
	json_decref(sid);
	return rc;
}
