/*
 * stexec-cli run: one turn in a throwaway session. Every addTool and the
 * drain go out at once (the daemon handles a connection's requests in
 * order, so the drain covers them all) and then a single loop handles
 * replies, notifications and Ctrl-C as they come.
 */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct run_tool {
	char id[24];
	const char *name;
	json_t *input;
	int64_t req;   /* the addTool request */
	bool bol;      /* streamed output: at the start of a line */
};

struct run {
	struct cli *cli;
	struct run_tool *tools;
	size_t n;
	const char *sid;
	int64_t drain_req;
	bool failed;   /* an error result or a failed request */
	bool allow;    /* --allow: grant permission requests */
};

static struct run_tool *run_tool(struct run *, const char *);
static void	run_prefix(struct run *, const struct run_tool *,
		    const char *);
static void	run_progress(struct run *, const json_t *);
static void	run_result(struct run *, const json_t *);
static void	run_permission(struct run *, const json_t *);
static int	run_reply(struct run *, json_t *, bool *);
static int	run_interrupt(struct run *);
static int	run_loop(struct run *);
static int	run_setup(struct run *, const struct cli_args *, json_t **);

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
	const char *s, *nl;
	size_t len, n;

	if (t == NULL)
		t = &none;
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
	while (len > 0) {
		if (t->bol)
			run_prefix(r, t != &none ? t : NULL, id);
		nl = memchr(s, '\n', len);
		n = nl != NULL ? (size_t)(nl - s) + 1 : len;
		fwrite(s, 1, n, stderr);
		t->bol = nl != NULL;
		s += n;
		len -= n;
	}
}

/* A result as delivered: its content, headed on a terminal. */
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
	size_t len = json_string_length(content);

	if (error)
		r->failed = true;
	/* Streamed output that ended mid-line: finish the line first. */
	if (t != NULL && !t->bol) {
		fputc('\n', stderr);
		t->bol = true;
	}
	if (r->cli->json) {
		cli_print_json(p);
		fflush(stdout);
		return;
	}
	if (r->cli->out_tty)
		printf("%s── %s %s: %s, %.3fs%s\n", cli_sgr(r->cli, false,
		    error ? "\033[1;31m" : "\033[1;32m"), id != NULL ? id : "?",
		    t != NULL ? t->name : "?", reason != NULL ? reason : "?",
		    (double)json_integer_value(json_object_get(meta,
		    "durationMs")) / 1000, cli_sgr(r->cli, false, "\033[0m"));
	if (len > 0) {
		fwrite(json_string_value(content), 1, len, stdout);
		if (json_string_value(content)[len - 1] != '\n')
			fputc('\n', stdout);
	}
	fflush(stdout);
}

/* run has nobody to ask: --allow grants, otherwise the tool is denied. */
static void
run_permission(struct run *r, const json_t *p)
{
	const char *id = json_string_value(json_object_get(p, "toolUseId"));
	struct stexec_error err = { 0 };
	json_t *params;

	run_prefix(r, run_tool(r, id), id != NULL ? id : "?");
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
		if ((k = cli_next(r->cli, &msg)) < 0) {
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
		else if (strcmp(method, "progress") == 0)
			run_progress(r, params);
		else if (strcmp(method, "tool_result") == 0)
			run_result(r, params);
		else if (strcmp(method, "permission_request") == 0)
			run_permission(r, params);
		json_decref(msg);
	}
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
		if ((rc = cli_parse_json(r->cli, (int)(2 * i + 2),
		    a->pos[2 * i + 1], &r->tools[i].input)) != 0)
			return rc;
	}
	if ((rc = cli_int_opt(r->cli, a, "max-parallel", 1, 256, &maxp)) != 0)
		return rc;
	*create = json_object();
	if (maxp > 0)
		json_object_set_new(*create, "maxParallel", json_integer(maxp));
	if (cwd != NULL) {
		if (cwd[0] != '/' && getcwd(here, sizeof here) != NULL &&
		    asprintf(&abs, "%s/%s", here, cwd) < 0)
			abort();
		json_object_set_new(*create, "cwd", json_string(abs != NULL ?
		    abs : cwd));
		free(abs);
	}
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
	rc = r.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
close:
	/* Also after a Ctrl-C during setup; a lost connection was reported. */
	if (stexec_is_open(cli->c)) {
		if (stexec_call(cli->c, "closeSession", json_pack("{s:s}",
		    "sessionId", r.sid), NULL, &err) != 0) {
			k = cli_rpc_error(cli, "closeSession", &err);
			if (k == CLI_EXIT_INT || rc == CLI_EXIT_OK)
				rc = k;
		}
	}
out:
	stexec_error_clear(&err);
	for (i = 0; i < r.n; i++)
		json_decref(r.tools[i].input);
	free(r.tools);
	json_decref(create);
	json_decref(res);
	json_decref(sid);
	return rc;
}
