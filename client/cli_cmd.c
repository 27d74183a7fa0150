/*
 * stexec-cli subcommands that map one to one onto a method: build the
 * params, call, print the result for a person (or raw with --json).
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static json_t	*cmd_session_params(const char *);
static int	cmd_simple(struct cli *, const char *, json_t *, json_t **);
static int	cmd_by_name(const void *, const void *);
static const char *cmd_safety(const json_t *);
static int	cmd_env(struct cli *, const struct cli_args *, json_t *);
static void	cmd_tool_id(char *, size_t);
static const char *cmd_str(const json_t *, const char *, const char *);

static json_t *
cmd_session_params(const char *sid)
{
	return json_pack("{s:s}", "sessionId", sid);
}

static const char *
cmd_str(const json_t *obj, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s != NULL ? s : def;
}

/* Connect and call; with --json print the result, which is then done. */
static int
cmd_simple(struct cli *cli, const char *method, json_t *params,
    json_t **result)
{
	int rc;

	*result = NULL;
	if (params == NULL) {
		cli_error(cli, "an argument is not valid UTF-8");
		return CLI_EXIT_USAGE;
	}
	if ((rc = cli_connect(cli)) != 0) {
		json_decref(params);
		return rc;
	}
	if ((rc = cli_call(cli, method, params, result)) != 0)
		return rc;
	if (cli->json)
		cli_print_json(*result);
	return 0;
}

int
cmd_ping(struct cli *cli, struct cli_args *a)
{
	json_t *r, *init = NULL;
	const char *version = NULL;
	double t0, ms;
	int rc;

	if ((rc = cli_connect(cli)) != 0)
		return rc;
	t0 = cli_now();
	if ((rc = cli_call(cli, "ping", json_object(), &r)) != 0)
		return rc;
	ms = (cli_now() - t0) * 1000;
	if (cli->json) {
		cli_print_json(r);
		json_decref(r);
		return 0;
	}
	json_decref(r);
	/* initialize is optional: a daemon without it still answered. */
	if (stexec_call(cli->c, "initialize", json_pack("{s:{s:s,s:s}}",
	    "client", "name", "stexec-cli", "version", STEXEC_VERSION), &init,
	    NULL) == 0)
		version = json_string_value(json_object_get(
		    json_object_get(init, "server"), "version"));
	printf("stexecd%s%s at %s: ok (%.2f ms)\n", version != NULL ? " " : "",
	    version != NULL ? version : "", stexec_path(cli->c), ms);
	json_decref(init);
	return 0;
}

int
cmd_sessions(struct cli *cli, struct cli_args *a)
{
	json_t *r, *list, *s;
	size_t i;
	int rc;

	if ((rc = cmd_simple(cli, "listSessions", json_object(), &r)) != 0 ||
	    cli->json) {
		json_decref(r);
		return rc;
	}
	list = json_object_get(r, "sessions");
	if (json_array_size(list) == 0)
		printf("no sessions\n");
	else
		printf("%-24s %6s %10s\n", "SESSION", "TURN", "UNFINISHED");
	json_array_foreach(list, i, s)
		printf("%-24s %6lld %10lld\n", cmd_str(s, "sessionId", "?"),
		    (long long)json_integer_value(json_object_get(s, "turn")),
		    (long long)json_integer_value(json_object_get(s,
		    "unfinished")));
	json_decref(r);
	return 0;
}

static int
cmd_by_name(const void *a, const void *b)
{
	return strcmp(cmd_str(*(json_t *const *)a, "name", ""),
	    cmd_str(*(json_t *const *)b, "name", ""));
}

static const char *
cmd_safety(const json_t *tool)
{
	const json_t *safe = json_object_get(tool, "concurrencySafe");

	if (json_is_object(safe))
		return "rule";
	return json_is_true(safe) ? "yes" : "no";
}

int
cmd_tools(struct cli *cli, struct cli_args *a)
{
	json_t *r, *tools, **sorted;
	const char *desc;
	char line[1024];
	size_t i, n, w = 4;
	int rc, width;

	if ((rc = cmd_simple(cli, "listTools", a->npos > 0 ?
	    cmd_session_params(a->pos[0]) : json_object(), &r)) != 0 ||
	    cli->json) {
		json_decref(r);
		return rc;
	}
	/* The daemon's order is unspecified: sort for a stable listing. */
	tools = json_object_get(r, "tools");
	n = json_array_size(tools);
	if ((sorted = calloc(n + 1, sizeof *sorted)) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		sorted[i] = json_array_get(tools, i);
		if (strlen(cmd_str(sorted[i], "name", "")) > w)
			w = strlen(cmd_str(sorted[i], "name", ""));
	}
	qsort(sorted, n, sizeof *sorted, cmd_by_name);
	width = cli->out_tty ? cli_term_width(STDOUT_FILENO) - (int)w - 8 : 100;
	if (width < 20)
		width = 20;
	printf("%-*s %-4s %s\n", (int)w, "NAME", "SAFE", "DESCRIPTION");
	for (i = 0; i < n; i++) {
		desc = cmd_str(sorted[i], "description", "");
		cli_first_line(desc, strlen(desc), (size_t)width, line,
		    sizeof line);
		printf("%-*s %-4s %s\n", (int)w, cmd_str(sorted[i], "name",
		    "?"), cmd_safety(sorted[i]), line);
	}
	free(sorted);
	json_decref(r);
	return 0;
}

/* A session's MCP servers and their states (listTools' mcpServers). */
int
cmd_mcp_servers(struct cli *cli, struct cli_args *a)
{
	const json_t *list, *srv;
	json_t *r;
	size_t i;
	int rc;

	if ((rc = cmd_simple(cli, "listTools", cmd_session_params(a->pos[0]),
	    &r)) != 0 || cli->json) {
		json_decref(r);
		return rc;
	}
	list = json_object_get(r, "mcpServers");
	printf("%-20s %-10s %-7s %5s %5s %8s %s\n", "NAME", "STATE", "SCOPE",
	    "TOOLS", "CALLS", "RESTARTS", "WHY");
	json_array_foreach(list, i, srv)
		printf("%-20s %-10s %-7s %5lld %5lld %8lld %s\n", cmd_str(srv,
		    "name", "?"), cmd_str(srv, "state", "?"), cmd_str(srv,
		    "scope", "session"), (long long)
		    json_integer_value(json_object_get(srv, "tools")),
		    (long long)json_integer_value(json_object_get(srv, "calls")),
		    (long long)json_integer_value(json_object_get(srv,
		    "restarts")), cmd_str(srv, "why", ""));
	json_decref(r);
	return 0;
}

/* Every --env K=V (set) or --env K (unset) into env. */
static int
cmd_env(struct cli *cli, const struct cli_args *a, json_t *env)
{
	const char *v, *eq;
	char *key;
	int i;

	for (i = 0; i < a->nopts; i++) {
		if (strncmp(a->opts[i].name, "env=", 4) != 0)
			continue;
		v = a->opts[i].value;
		eq = strchr(v, '=');
		if (eq == v || *v == '\0') {
			cli_error(cli, "--env '%s': expected NAME=VALUE (or "
			    "NAME to unset it)", v);
			return CLI_EXIT_USAGE;
		}
		key = strndup(v, eq != NULL ? (size_t)(eq - v) : strlen(v));
		if (key == NULL)
			abort();
		if (json_object_set_new(env, key, eq != NULL ?
		    json_string(eq + 1) : json_null()) != 0) {
			free(key);
			cli_error(cli, "--env '%s' is not valid UTF-8", v);
			return CLI_EXIT_USAGE;
		}
		free(key);
	}
	return 0;
}

int
cmd_new(struct cli *cli, struct cli_args *a)
{
	json_t *params = json_object(), *env = json_object(), *tools, *r;
	const char *cwd = cli_opt(a, "cwd"), *tools_path = cli_opt(a, "tools");
	long long maxp = 0;
	char here[PATH_MAX], *abs = NULL;
	int rc;

	if ((rc = cli_int_opt(cli, a, "max-parallel", 1, 256, &maxp)) != 0 ||
	    (rc = cmd_env(cli, a, env)) != 0)
		goto out;
	if (maxp > 0)
		json_object_set_new(params, "maxParallel", json_integer(maxp));
	if (json_object_size(env) > 0)
		json_object_set(params, "env", env);
	/* The daemon wants an absolute path; its cwd is not ours. */
	if (cwd != NULL) {
		if (cwd[0] != '/' && getcwd(here, sizeof here) != NULL &&
		    asprintf(&abs, "%s/%s", here, cwd) < 0)
			abort();
		json_object_set_new(params, "cwd", json_string(abs != NULL ?
		    abs : cwd));
	}
	if (tools_path != NULL) {
		if ((rc = cli_load_tools(cli, tools_path, &tools)) != 0)
			goto out;
		json_object_set_new(params, "tools", tools);
	}
	rc = cmd_simple(cli, "createSession", params, &r);
	params = NULL;
	if (rc == 0 && !cli->json)
		printf("%s\n", cmd_str(r, "sessionId", "?"));
	json_decref(r);
out:
	free(abs);
	json_decref(env);
	json_decref(params);
	return rc;
}

/* A tool-use id unlikely to collide with any other in the turn. */
static void
cmd_tool_id(char *buf, size_t len)
{
	unsigned char rnd[6];
	size_t i;

	if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
		unsigned long x = (unsigned long)time(NULL) ^
		    ((unsigned long)getpid() << 16);

		for (i = 0; i < sizeof rnd; i++, x >>= 5)
			rnd[i] = (unsigned char)x;
	}
	snprintf(buf, len, "toolu_cli_%02x%02x%02x%02x%02x%02x", rnd[0],
	    rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
}

int
cmd_add(struct cli *cli, struct cli_args *a)
{
	json_t *input, *r;
	const char *id = cli_opt(a, "id");
	char gen[32];
	int rc;

	if ((rc = cli_parse_json(cli, 3, a->pos[2], &input)) != 0)
		return rc;
	if (id == NULL) {
		cmd_tool_id(gen, sizeof gen);
		id = gen;
	}
	if ((rc = cmd_simple(cli, "addTool", json_pack("{s:s, s:{s:s, s:s, "
	    "s:o}}", "sessionId", a->pos[0], "toolUse", "id", id, "name",
	    a->pos[1], "input", input), &r)) != 0 || cli->json) {
		json_decref(r);
		return rc;
	}
	printf("%s turn=%lld status=%s safe=%s\n", cmd_str(r, "toolUseId", id),
	    (long long)json_integer_value(json_object_get(r, "turn")),
	    cmd_str(r, "status", "?"), json_is_true(json_object_get(r,
	    "concurrencySafe")) ? "yes" : "no");
	json_decref(r);
	return 0;
}

int
cmd_abort(struct cli *cli, struct cli_args *a)
{
	const char *reason = cli_flag(a, "cancel") ? "cancel" : "interrupt";
	json_t *r;
	int rc;

	if ((rc = cmd_simple(cli, "abort", json_pack("{s:s, s:s}",
	    "sessionId", a->pos[0], "reason", reason), &r)) == 0 && !cli->json)
		printf("aborted turn %lld (%s)\n",
		    (long long)json_integer_value(json_object_get(r, "turn")),
		    reason);
	json_decref(r);
	return rc;
}

int
cmd_discard(struct cli *cli, struct cli_args *a)
{
	json_t *r;
	int rc;

	if ((rc = cmd_simple(cli, "discard", cmd_session_params(a->pos[0]),
	    &r)) == 0 && !cli->json)
		printf("discarded turn %lld; turn %lld is current\n",
		    (long long)json_integer_value(json_object_get(r,
		    "discardedTurn")),
		    (long long)json_integer_value(json_object_get(r, "turn")));
	json_decref(r);
	return rc;
}

int
cmd_drain(struct cli *cli, struct cli_args *a)
{
	json_t *r;
	long long n;
	int rc;

	if ((rc = cmd_simple(cli, "drain", cmd_session_params(a->pos[0]),
	    &r)) == 0 && !cli->json) {
		n = json_integer_value(json_object_get(r, "results"));
		printf("drained turn %lld: %lld result%s\n",
		    (long long)json_integer_value(json_object_get(r, "turn")),
		    n, n == 1 ? "" : "s");
	}
	json_decref(r);
	return rc;
}

int
cmd_status(struct cli *cli, struct cli_args *a)
{
	json_t *r, *tools, *t, *pid;
	size_t i, wid = 2, wname = 4;
	char pidtext[24];
	int rc;

	if ((rc = cmd_simple(cli, "status", cmd_session_params(a->pos[0]),
	    &r)) != 0 || cli->json) {
		json_decref(r);
		return rc;
	}
	tools = json_object_get(r, "tools");
	printf("turn %lld, %s\n", (long long)json_integer_value(
	    json_object_get(r, "turn")), json_array_size(tools) == 0 ?
	    "no tools" : json_is_true(json_object_get(r, "interruptible")) ?
	    "interruptible" : "not interruptible");
	json_array_foreach(tools, i, t) {
		if (strlen(cmd_str(t, "id", "")) > wid)
			wid = strlen(cmd_str(t, "id", ""));
		if (strlen(cmd_str(t, "name", "")) > wname)
			wname = strlen(cmd_str(t, "name", ""));
	}
	if (json_array_size(tools) > 0)
		printf("%-*s  %-*s  %-18s  %-4s  %s\n", (int)wid, "ID",
		    (int)wname, "NAME", "STATUS", "SAFE", "PID");
	json_array_foreach(tools, i, t) {
		pid = json_object_get(t, "pid");
		if (json_is_integer(pid))
			snprintf(pidtext, sizeof pidtext, "%lld",
			    (long long)json_integer_value(pid));
		else
			snprintf(pidtext, sizeof pidtext, "-");
		printf("%-*s  %-*s  %-18s  %-4s  %s\n", (int)wid,
		    cmd_str(t, "id", "?"), (int)wname, cmd_str(t, "name", "?"),
		    cmd_str(t, "status", "?"), json_is_true(json_object_get(t,
		    "concurrencySafe")) ? "yes" : "no", pidtext);
	}
	json_decref(r);
	return 0;
}

int
cmd_permit(struct cli *cli, struct cli_args *a)
{
	json_t *r;
	int rc;

	if ((rc = cmd_simple(cli, "respondPermission", json_pack("{s:s, s:s, "
	    "s:s}", "sessionId", a->pos[0], "toolUseId", a->pos[1],
	    "decision", "allow"), &r)) == 0 && !cli->json)
		printf("allowed %s\n", a->pos[1]);
	json_decref(r);
	return rc;
}

int
cmd_deny(struct cli *cli, struct cli_args *a)
{
	const char *message = cli_opt(a, "message");
	json_t *params, *r;
	int rc;

	params = json_pack("{s:s, s:s, s:s}", "sessionId", a->pos[0],
	    "toolUseId", a->pos[1], "decision", "deny");
	if (params != NULL && message != NULL &&
	    json_object_set_new(params, "message", json_string(message)) != 0) {
		json_decref(params);
		params = NULL;
	}
	if ((rc = cmd_simple(cli, "respondPermission", params, &r)) == 0 &&
	    !cli->json)
		printf("denied %s\n", a->pos[1]);
	json_decref(r);
	return rc;
}

int
cmd_close(struct cli *cli, struct cli_args *a)
{
	json_t *r;
	int rc;

	if ((rc = cmd_simple(cli, "closeSession", cmd_session_params(a->pos[0]),
	    &r)) == 0 && !cli->json)
		printf("closed %s\n", a->pos[0]);
	json_decref(r);
	return rc;
}

int
cmd_stats(struct cli *cli, struct cli_args *a)
{
	json_t *r, *v;
	const char *key;
	long long n;

	int rc;

	if ((rc = cmd_simple(cli, "stats", json_object(), &r)) != 0 ||
	    cli->json) {
		json_decref(r);
		return rc;
	}
	json_object_foreach(r, key, v) {
		if (!json_is_integer(v)) {
			printf("%-16s ", key);
			cli_print_json(v);
			continue;
		}
		n = json_integer_value(v);
		if (strcmp(key, "uptimeMs") == 0)
			printf("%-16s %lld (%.1f s)\n", key, n,
			    (double)n / 1000);
		else if (strcmp(key, "rssBytes") == 0)
			printf("%-16s %lld (%.1f MiB)\n", key, n,
			    (double)n / (1024 * 1024));
		else
			printf("%-16s %lld\n", key, n);
	}
	json_decref(r);
	return 0;
}

int
cmd_events(struct cli *cli, struct cli_args *a)
{
	json_t *params = cmd_session_params(a->pos[0]), *r, *n;
	long long since = -1, max = -1;
	size_t i;
	int rc;

	if ((rc = cli_int_opt(cli, a, "since", 0, LLONG_MAX, &since)) != 0 ||
	    (rc = cli_int_opt(cli, a, "max", 1, LLONG_MAX, &max)) != 0) {
		json_decref(params);
		return rc;
	}
	if (params != NULL && since >= 0)
		json_object_set_new(params, "since", json_integer(since));
	if (params != NULL && max >= 1)
		json_object_set_new(params, "max", json_integer(max));
	if ((rc = cmd_simple(cli, "events", params, &r)) != 0 || cli->json) {
		json_decref(r);
		return rc;
	}
	json_array_foreach(json_object_get(r, "notifications"), i, n) {
		printf("#%-5lld ", (long long)json_integer_value(
		    json_object_get(json_object_get(n, "params"), "seq")));
		watch_describe(cli, stdout, n, NULL);
	}
	printf("(last seq %lld)\n", (long long)json_integer_value(
	    json_object_get(r, "lastSeq")));
	json_decref(r);
	return 0;
}
