/*
 * The JSON-RPC methods: strict parameter checks with errors that name the
 * field (-32602), then one call into the session or the executor.
 */
#include "rpc/methods.h"
#include "rpc/call.h"
#include "rpc/gauges.h"
#include "rpc/probe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "net/conn.h"
#include "core/executor.h"
#include "hooks/hooks.h"
#include "jsonrpc.h"
#include "mcp/mcp.h"
#include "session/job.h"
#include "session/session.h"
#include "stexec/protocol.h"
#include "utf8.h"
#include "core/tooldef.h"
#include "util.h"

#define METHODS_EVENTS_MAX 10000

struct method {
	const char *name;
	void (*fn)(struct call *);
};

static struct methods_config methods_cfg;

static uint64_t	methods_now_ms(void);
static long	methods_rss(void);

static void	methods_initialize(struct call *);
static void	methods_create_session(struct call *);
static bool	methods_hooks(struct call *);
static bool	methods_probe(struct call *, const json_t *);
static void	methods_close_session(struct call *);
static void	methods_list_sessions(struct call *);
static void	methods_list_tools(struct call *);
static void	methods_respond_mcp(struct call *);
static bool	methods_mcp_servers(struct call *, struct mcp_config **,
		    bool *, bool *);
static void	methods_add_tool(struct call *);
static void	methods_abort(struct call *);
static void	methods_discard(struct call *);
static void	methods_drain(struct call *);
static void	methods_respond_permission(struct call *);
static void	methods_client_error(struct call *, int, char *);
static void	methods_serve_tools(struct call *);
static void	methods_complete_tool(struct call *);
static void	methods_tool_progress(struct call *);
static void	methods_subscribe(struct call *);
static void	methods_unsubscribe(struct call *);
static void	methods_events(struct call *);
static void	methods_status(struct call *);
static void	methods_ping(struct call *);
static void	methods_stats(struct call *);
static void	methods_metrics(struct call *);
static void	methods_output_files(struct call *);

static const struct method methods[] = {
	{ "initialize", methods_initialize },
	{ "createSession", methods_create_session },
	{ "closeSession", methods_close_session },
	{ "listSessions", methods_list_sessions },
	{ "listTools", methods_list_tools },
	{ "addTool", methods_add_tool },
	{ "abort", methods_abort },
	{ "discard", methods_discard },
	{ "drain", methods_drain },
	{ "respondPermission", methods_respond_permission },
	{ "respondMcp", methods_respond_mcp },
	{ "serveTools", methods_serve_tools },
	{ "completeTool", methods_complete_tool },
	{ "toolProgress", methods_tool_progress },
	{ "subscribe", methods_subscribe },
	{ "unsubscribe", methods_unsubscribe },
	{ "events", methods_events },
	{ "status", methods_status },
	{ "ping", methods_ping },
	{ "stats", methods_stats },
	{ "metrics", methods_metrics },
	{ "outputFiles", methods_output_files },
	{ "listJobs", job_methods_list },
	{ "readJob", job_methods_read },
	{ "writeJob", job_methods_write },
	{ "signalJob", job_methods_signal },
	{ "resizeJob", job_methods_resize },
	{ "writeStdin", job_methods_write_stdin },
};

const struct conn_ops methods_conn_ops = {
	.dispatch = methods_call,
	.sub_pump = session_sub_pump,
	.sub_free = session_sub_free,
	.unrefer = session_unrefer,
	.closed = session_client_conn_closed,
};

/*
 * The rule patterns of a createSession's tools, compiled aside first, all
 * together (probe.h); false once the error is sent.
 */
static bool
methods_probe(struct call *call, const json_t *tools)
{
	const char **patterns = xcalloc(json_array_size(tools) + 1,
	    sizeof *patterns);
	size_t *index = xcalloc(json_array_size(tools) + 1, sizeof *index);
	const json_t *def;
	size_t i, n = 0, bad;
	char why[128], field[64];
	bool ok = true;

	json_array_foreach(tools, i, def) {
		patterns[n] = json_string_value(json_object_get(
		    json_object_get(def, "concurrencySafe"), "pattern"));
		if (patterns[n] != NULL)
			index[n++] = i;
	}
	if (probe_patterns(patterns, n, &bad, why, sizeof why) != 0) {
		snprintf(field, sizeof field, "tools[%zu]", index[bad]);
		methods_bad_param(call, field, "concurrencySafe.pattern: %s",
		    why);
		ok = false;
	}
	free(patterns);
	free(index);
	return ok;
}

void
methods_init(const struct methods_config *cfg)
{
	methods_cfg = *cfg;
	methods_cfg.start_ms = methods_now_ms();
}

void
methods_call(struct conn *c, const char *name, const json_t *id,
    const json_t *params)
{
	struct call call = { c, id, params };
	json_t *empty = NULL;
	size_t i;

	for (i = 0; i < nitems(methods); i++)
		if (strcmp(methods[i].name, name) == 0)
			break;
	if (i == nitems(methods)) {
		conn_error(c, id, STEXEC_ERR_METHOD_NOT_FOUND, NULL,
		    "Method not found: %s", name);
		return;
	}
	if (params == NULL)
		call.params = empty = json_object();
	else if (!json_is_object(params)) {
		methods_bad_param(&call, "params", "must be an object");
		return;
	}
	methods[i].fn(&call);
	json_decref(empty);
}

void
methods_bad_param(struct call *call, const char *field, const char *fmt, ...)
{
	char problem[512];
	va_list ap;
	json_t *data;

	va_start(ap, fmt);
	utf8_vsnprintf(problem, sizeof problem, fmt, ap);
	va_end(ap);
	data = json_pack("{s:s}", "field", field);
	conn_error(call->c, call->id, STEXEC_ERR_INVALID_PARAMS, data,
	    "Invalid params: %s: %s", field, problem);
	json_decref(data);
}

/* A string field; false (with the error sent) when it is wrong. */
bool
methods_param_string(struct call *call, const char *field, bool required,
    const char **out)
{
	const json_t *v = json_object_get(call->params, field);

	*out = NULL;
	if (v == NULL || (json_is_null(v) && !required)) {
		if (required)
			methods_bad_param(call, field, "required");
		return !required;
	}
	if (!json_is_string(v)) {
		methods_bad_param(call, field, "must be a string");
		return false;
	}
	*out = json_string_value(v);
	/* Used as C strings: a NUL would silently cut them. */
	if (strlen(*out) != json_string_length(v)) {
		methods_bad_param(call, field, "must not contain NUL characters");
		return false;
	}
	return true;
}

/* An integer field within [min, max]; *out untouched when absent. */
bool
methods_param_uint(struct call *call, const char *field, uint64_t min,
    uint64_t max, bool required, uint64_t *out)
{
	const json_t *v = json_object_get(call->params, field);
	json_int_t n;

	if (v == NULL || json_is_null(v)) {
		if (required)
			methods_bad_param(call, field, "required");
		return !required;
	}
	if (!json_is_integer(v) || (n = json_integer_value(v)) < 0 ||
	    (uint64_t)n < min || (uint64_t)n > max) {
		methods_bad_param(call, field, "must be an integer from %llu to %llu",
		    (unsigned long long)min, (unsigned long long)max);
		return false;
	}
	*out = (uint64_t)n;
	return true;
}

/* The session named by sessionId, owned by the caller. */
struct session *
methods_param_session(struct call *call)
{
	struct session *s;
	const char *id;
	int code;

	if (!methods_param_string(call, "sessionId", true, &id))
		return NULL;
	if ((s = session_find(id, conn_uid(call->c), &code)) != NULL) {
		session_refer(s, call->c);
		return s;
	}
	if (code == STEXEC_ERR_NOT_PERMITTED)
		conn_error(call->c, call->id, code, NULL, "Not permitted: "
		    "the session belongs to another user");
	else
		conn_error(call->c, call->id, code, NULL,
		    "Unknown session: %s", id);
	return NULL;
}

static uint64_t
methods_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
methods_initialize(struct call *call)
{
	conn_reply(call->c, call->id, json_pack("{s:{s:s, s:s, s:s?}, s:i, "
	    "s:{s:b, s:b, s:b, s:b, s:b, s:I, s:I, s:O*, s:{s:i, s:I}}}",
	    "server", "name", "stexecd", "version", STEXEC_VERSION,
	    "instance", methods_cfg.instance, "protocolVersion", STEXEC_PROTOCOL_VERSION,
	    "capabilities", "subscribe", 1, "events", 1, "permissions", 1,
	    "contextModifiers", 1, "streamOutput", 1, "maxMessage",
	    (json_int_t)methods_cfg.max_message, "maxResultBytes",
	    (json_int_t)tooldef_result_ceiling(), "enforcement",
	    methods_cfg.enforcement, "jobs", "maxPerSession",
	    (int)job_config()->max_per_session, "outputBytes",
	    (json_int_t)job_config()->output_bytes));
}

/*
 * createSession's hooks (README, "Hooks"): Claude Code's "hooks" object,
 * checked; -32602 names the place ("hooks.PreToolUse[0].hooks[1].timeout").
 */
static bool
methods_hooks(struct call *call)
{
	const json_t *v = json_object_get(call->params, "hooks");
	char err[1024], field[256];
	struct hooks *hk;
	const char *sep;
	json_t *wrap;
	int rc;

	if (v == NULL || json_is_null(v))
		return true;
	/* A hook runs unconfined: past the operator's floor, none may. */
	if (session_min_sandbox() > TOOLDEF_SANDBOX_NONE) {
		methods_bad_param(call, "hooks", "this daemon sandboxes every "
		    "tool (--min-sandbox %s) and hooks run outside the sandbox: "
		    "only the operator's --hooks run here",
		    tooldef_sandbox_name(session_min_sandbox()));
		return false;
	}
	wrap = json_pack("{s:O}", "hooks", v);
	hk = hooks_new();
	rc = hooks_add_json(hk, wrap, err, sizeof err);
	json_decref(wrap);
	hooks_free(hk);
	if (rc == 0)
		return true;
	if ((sep = strstr(err, ": ")) == NULL || (size_t)(sep - err) >=
	    sizeof field) {
		methods_bad_param(call, "hooks", "%s", err);
		return false;
	}
	snprintf(field, sizeof field, "%.*s", (int)(sep - err), err);
	methods_bad_param(call, field, "%s", sep + 2);
	return false;
}

static void
methods_create_session(struct call *call)
{
	const json_t *tools = json_object_get(call->params, "tools");
	const json_t *env = json_object_get(call->params, "env"), *v;
	struct tooldef_sandbox sandbox;
	struct session_shell shell = { 0 };
	enum tooldef_sandbox_mode mode;
	struct tooldef **defs = NULL;
	struct mcp_config *mcp = NULL;
	bool sampling = false, elicitation = false;
	struct session *s;
	uint64_t max_parallel = EXEC_MAX_PARALLEL_DEFAULT;
	uint64_t grace = SESSION_OUTPUT_GRACE_DEFAULT_MS;
	const char *cwd, *key;
	char err[512], field[64];
	struct stat st;
	size_t i, n = 0;
	int code;

	if (!methods_param_uint(call, "maxParallel", 1, EXEC_MAX_PARALLEL_LIMIT,
	    false, &max_parallel) || !methods_param_string(call, "cwd", false, &cwd) ||
	    !methods_param_uint(call, "outputGraceMs", 0, SESSION_OUTPUT_GRACE_MAX_MS,
	    false, &grace))
		return;
	if (cwd != NULL && (cwd[0] != '/' || stat(cwd, &st) != 0 ||
	    !S_ISDIR(st.st_mode))) {
		methods_bad_param(call, "cwd", cwd[0] != '/' ? "must be an absolute "
		    "path" : "%s is not a directory", cwd);
		return;
	}
	if (env != NULL && !json_is_null(env)) {
		if (!json_is_object(env)) {
			methods_bad_param(call, "env", "must be an object");
			return;
		}
		json_object_foreach((json_t *)env, key, v)
			if (!json_is_string(v) && !json_is_null(v)) {
				utf8_snprintf(field, sizeof field, "env.%s",
				    key);
				methods_bad_param(call, field, "must be a string or null");
				return;
			}
	}
	if (!methods_hooks(call))
		return;
	if (!session_shell_parse(json_object_get(call->params, "shell"),
	    &shell, field, sizeof field, err, sizeof err)) {
		methods_bad_param(call, field, "%s", err);
		return;
	}
	if (!tooldef_parse_sandbox(json_object_get(call->params, "sandbox"),
	    "sandbox", &sandbox, err, sizeof err)) {
		methods_bad_param(call, "sandbox", "%s", err);
		session_shell_clear(&shell);
		return;
	}
	if (!session_network_allowed(&sandbox, err, sizeof err)) {
		methods_bad_param(call, "sandbox.network", "%s", err);
		goto out;
	}
	if (sandbox.mode != TOOLDEF_SANDBOX_UNSET &&
	    sandbox.mode < session_min_sandbox()) {
		methods_bad_param(call, "sandbox", "\"%s\" is below this "
		    "daemon's floor, \"%s\" (--min-sandbox)",
		    tooldef_sandbox_name(sandbox.mode),
		    tooldef_sandbox_name(session_min_sandbox()));
		goto out;
	}
	if (tools != NULL && !json_is_null(tools)) {
		if (!json_is_array(tools)) {
			methods_bad_param(call, "tools", "must be an array of ToolDefs");
			goto out;
		}
		if (!methods_probe(call, tools))
			goto out;
		defs = xcalloc(json_array_size(tools) + 1, sizeof *defs);
		for (n = 0; n < json_array_size(tools); n++) {
			snprintf(field, sizeof field, "tools[%zu]", n);
			defs[n] = tooldef_parse(json_array_get(tools, n), err,
			    sizeof err);
			if (defs[n] == NULL) {
				methods_bad_param(call, field, "%s", err);
				goto out;
			}
			if (!session_network_allowed(tooldef_sandbox(defs[n]),
			    err, sizeof err)) {
				snprintf(field, sizeof field,
				    "tools[%zu].sandbox.network", n);
				methods_bad_param(call, field, "%s", err);
				n++;
				goto out;
			}
			mode = tooldef_sandbox(defs[n])->mode;
			if (mode != TOOLDEF_SANDBOX_UNSET &&
			    mode < session_min_sandbox()) {
				snprintf(field, sizeof field, "tools[%zu].sandbox",
				    n);
				methods_bad_param(call, field, "\"%s\" is below "
				    "this daemon's floor, \"%s\" (--min-sandbox)",
				    tooldef_sandbox_name(mode),
				    tooldef_sandbox_name(session_min_sandbox()));
				n++;
				goto out;
			}
			for (i = 0; i < n; i++)
				if (strcmp(tooldef_name(defs[i]),
				    tooldef_name(defs[n])) == 0) {
					methods_bad_param(call, field, "name: \"%s\" is "
					    "defined twice", tooldef_name(defs[n]));
					n++;
					goto out;
				}
		}
	}
	if (!methods_mcp_servers(call, &mcp, &sampling, &elicitation))
		goto out;
	s = session_create(conn_uid(call->c), defs, n, (unsigned)max_parallel,
	    cwd, env, (unsigned)grace, &sandbox, &shell,
	    json_object_get(call->params, "hooks"), &code, err, sizeof err);
	if (s == NULL)
		conn_error(call->c, call->id, code, NULL, "%s", err);
	else {
		/* Its MCP servers start now, in parallel; nobody waits. */
		session_mcp_start(s, mcp, json_object_get(call->params,
		    "mcpServers"), sampling, elicitation);
		mcp = NULL;
		session_refer(s, call->c);
		conn_reply(call->c, call->id, json_pack("{s:s}", "sessionId",
		    session_id(s)));
	}
out:
	mcp_config_free(mcp);
	for (i = 0; i < n; i++)
		tooldef_unref(defs[i]);
	free(defs);
	tooldef_sandbox_clear(&sandbox);
	session_shell_clear(&shell);
}

/*
 * createSession's mcpServers (.mcp.json's shape) and mcpAnswers (which of
 * a server's requests the client answers: "sampling", "elicitation");
 * false once the error is sent.
 */
static bool
methods_mcp_servers(struct call *call, struct mcp_config **out,
    bool *sampling, bool *elicitation)
{
	const json_t *v = json_object_get(call->params, "mcpServers");
	const json_t *answers = json_object_get(call->params, "mcpAnswers"), *a;
	char err[512], *dot;
	size_t i;

	if (answers != NULL && !json_is_null(answers)) {
		if (!json_is_array(answers)) {
			methods_bad_param(call, "mcpAnswers", "must be an array "
			    "of \"sampling\" and \"elicitation\"");
			return false;
		}
		json_array_foreach(answers, i, a) {
			if (json_is_string(a) && strcmp(json_string_value(a),
			    "sampling") == 0)
				*sampling = true;
			else if (json_is_string(a) && strcmp(
			    json_string_value(a), "elicitation") == 0)
				*elicitation = true;
			else {
				methods_bad_param(call, "mcpAnswers", "[%zu]: must "
				    "be \"sampling\" or \"elicitation\"", i);
				return false;
			}
		}
	}
	if (v == NULL || json_is_null(v))
		return true;
	if ((*out = mcp_config_parse(v, false, err, sizeof err)) == NULL ||
	    session_mcp_check(*out, err, sizeof err) != 0) {
		/* err starts with the field: "mcpServers.fs.args[1]: ..." */
		dot = strstr(err, ": ");
		if (dot != NULL) {
			*dot = '\0';
			methods_bad_param(call, err, "%s", dot + 2);
		} else
			methods_bad_param(call, "mcpServers", "%s", err);
		return false;
	}
	return true;
}

static void
methods_close_session(struct call *call)
{
	struct session *s = methods_param_session(call);

	if (s != NULL)
		session_close(s, conn_ticket(call->c, call->id));
}

static void
methods_list_sessions(struct call *call)
{
	conn_reply(call->c, call->id, json_pack("{s:o}", "sessions",
	    session_list_json(conn_uid(call->c))));
}

static void
methods_list_tools(struct call *call)
{
	struct session *s = NULL;

	if (!json_is_null(json_object_get(call->params, "sessionId")) &&
	    json_object_get(call->params, "sessionId") != NULL &&
	    (s = methods_param_session(call)) == NULL)
		return;
	conn_reply(call->c, call->id, s != NULL ? json_pack("{s:o, s:o}",
	    "tools", session_tools_json(s), "mcpServers", session_mcp_json(s)) :
	    json_pack("{s:o}", "tools", session_tools_json(s)));
}

static void
methods_add_tool(struct call *call)
{
	const json_t *use = json_object_get(call->params, "toolUse"), *input;
	struct buf reply = { 0 };
	struct session *s;
	struct exec_added added;
	const char *id, *name;
	int rc;

	if ((s = methods_param_session(call)) == NULL)
		return;
	if (!json_is_object(use)) {
		methods_bad_param(call, "toolUse", use == NULL ? "required" :
		    "must be an object {id, name, input}");
		return;
	}
	id = json_string_value(json_object_get(use, "id"));
	name = json_string_value(json_object_get(use, "name"));
	input = json_object_get(use, "input");
	if (id == NULL || *id == '\0' || strlen(id) != json_string_length(
	    json_object_get(use, "id"))) {
		methods_bad_param(call, "toolUse.id", "must be a non-empty string "
		    "without NUL characters");
		return;
	}
	if (name == NULL || strlen(name) != json_string_length(
	    json_object_get(use, "name"))) {
		methods_bad_param(call, "toolUse.name", "must be a string without NUL "
		    "characters");
		return;
	}
	if (session_turn_full(s)) {
		conn_error(call->c, call->id, STEXEC_ERR_LIMIT, NULL,
		    "Limit exceeded: turn %llu already has %u tools",
		    (unsigned long long)exec_turn(session_exec(s)),
		    exec_turn_size(session_exec(s)));
		return;
	}
	/* Any input is taken: one that is not an object fails validation
	 * and becomes the tool's invalid_input result (S2), so the model's
	 * tool_use still gets its tool_result (S10). */
	rc = session_add(s, id, name, json_is_null(input) ? NULL : input,
	    &added);
	if (rc != 0) {
		conn_error(call->c, call->id, rc, NULL, "Duplicate tool use id "
		    "in this turn: %s", id);
		return;
	}
	/* Written as text, as its object would encode: every addTool. */
	buf_grow(&reply, 96 + 6 * strlen(id));
	buf_addstr(&reply, "{\"toolUseId\":");
	jsonrpc_add_string_repaired(&reply, id, strlen(id));
	buf_addstr(&reply, ",\"turn\":");
	buf_add_int(&reply, (long long)added.turn);
	buf_addstr(&reply, ",\"status\":\"");
	buf_addstr(&reply, exec_status_name(added.status));
	buf_addstr(&reply, added.safe ? "\",\"concurrencySafe\":true}" :
	    "\",\"concurrencySafe\":false}");
	conn_reply_raw(call->c, call->id, reply.data, reply.len);
	buf_free(&reply);
}

static void
methods_abort(struct call *call)
{
	struct session *s;
	const char *reason;
	uint64_t turn;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "reason", true, &reason))
		return;
	if (strcmp(reason, "interrupt") != 0 && strcmp(reason, "cancel") != 0) {
		methods_bad_param(call, "reason", "must be \"interrupt\" or \"cancel\"");
		return;
	}
	turn = exec_turn(session_exec(s));
	exec_abort(session_exec(s), strcmp(reason, "cancel") == 0);
	conn_reply(call->c, call->id, json_pack("{s:I}", "turn",
	    (json_int_t)turn));
}

static void
methods_discard(struct call *call)
{
	struct session *s;
	json_t *dropped, *reply;
	uint64_t old;

	if ((s = methods_param_session(call)) == NULL)
		return;
	/* Queued tools never start: stdin written to them is dropped. */
	dropped = exec_stdin_early_held(session_exec(s));
	old = exec_discard(session_exec(s));
	reply = json_pack("{s:I, s:I}", "discardedTurn", (json_int_t)old,
	    "turn", (json_int_t)exec_turn(session_exec(s)));
	if (json_object_size(dropped) > 0)
		json_object_set(reply, "stdinDropped", dropped);
	json_decref(dropped);
	conn_reply(call->c, call->id, reply);
}

static void
methods_drain(struct call *call)
{
	struct session *s;

	if ((s = methods_param_session(call)) != NULL)
		exec_drain(session_exec(s), conn_ticket(call->c, call->id));
}

static void
methods_respond_permission(struct call *call)
{
	struct session *s;
	const char *tid, *decision, *message;
	int rc;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "toolUseId", true, &tid) ||
	    !methods_param_string(call, "decision", true, &decision) ||
	    !methods_param_string(call, "message", false, &message))
		return;
	if (strcmp(decision, "allow") != 0 && strcmp(decision, "deny") != 0) {
		methods_bad_param(call, "decision", "must be \"allow\" or \"deny\"");
		return;
	}
	rc = exec_permission(session_exec(s), tid, strcmp(decision, "allow") ==
	    0, message);
	if (rc == STEXEC_ERR_INVALID_PARAMS)
		methods_bad_param(call, "toolUseId", "no tool %s in the current turn",
		    tid);
	else if (rc == STEXEC_ERR_STATE)
		conn_error(call->c, call->id, rc, NULL, "State conflict: tool "
		    "%s is not waiting for permission", tid);
	else
		conn_reply(call->c, call->id, json_object());
}

/*
 * The answer to a server's sampling or elicitation request (mcp_request):
 * result, or error (a text the server gets as a JSON-RPC error).
 */
static void
methods_respond_mcp(struct call *call)
{
	const json_t *result = json_object_get(call->params, "result");
	struct session *s;
	const char *rid, *error;
	char err[256];

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "requestId", true, &rid) ||
	    !methods_param_string(call, "error", false, &error))
		return;
	if ((result == NULL || json_is_null(result)) == (error == NULL)) {
		methods_bad_param(call, "result", "give either result (an "
		    "object) or error (a string)");
		return;
	}
	if (result != NULL && !json_is_null(result) && !json_is_object(result)) {
		methods_bad_param(call, "result", "must be an object");
		return;
	}
	if (session_mcp_respond(s, rid, error == NULL ? result : NULL, error,
	    err, sizeof err) != 0) {
		methods_bad_param(call, "requestId", "%s", err);
		return;
	}
	conn_reply(call->c, call->id, json_object());
}

/*
 * A client-run tool method's error: -32602's "FIELD: problem" names its
 * field in data, as every -32602 does (PROTOCOL.md §6).
 */
static void
methods_client_error(struct call *call, int rc, char *err)
{
	char *sep = strstr(err, ": ");

	if (rc != STEXEC_ERR_INVALID_PARAMS || sep == NULL) {
		conn_error(call->c, call->id, rc, NULL, "%s", err);
		return;
	}
	*sep = '\0';
	methods_bad_param(call, err, "%s", sep + 2);
}

/* Client-run tools (doc/design.md §7, Client-run tools). */
static void
methods_serve_tools(struct call *call)
{
	const json_t *take = json_object_get(call->params, "takeOver");
	struct session *s;
	json_t *served;
	char err[512];
	int rc;

	if ((s = methods_param_session(call)) == NULL)
		return;
	if (take != NULL && !json_is_boolean(take)) {
		methods_bad_param(call, "takeOver", "must be a boolean");
		return;
	}
	rc = session_client_serve(s, call->c, json_object_get(call->params,
	    "names"), json_is_true(take), &served, err, sizeof err);
	if (rc != 0)
		methods_client_error(call, rc, err);
	else
		conn_reply(call->c, call->id, json_pack("{s:o}", "names",
		    served));
}

static void
methods_complete_tool(struct call *call)
{
	const json_t *content = json_object_get(call->params, "content");
	const json_t *is_error = json_object_get(call->params, "isError");
	struct session *s;
	const char *tid;
	char err[512];
	int rc;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "toolUseId", true, &tid))
		return;
	if (content == NULL) {
		methods_bad_param(call, "content", "required: a string or an "
		    "array of content blocks");
		return;
	}
	if (is_error != NULL && !json_is_boolean(is_error)) {
		methods_bad_param(call, "isError", "must be a boolean");
		return;
	}
	rc = session_client_complete(s, call->c, tid, content,
	    json_is_true(is_error), err, sizeof err);
	if (rc != 0)
		methods_client_error(call, rc, err);
	else
		conn_reply(call->c, call->id, json_object());
}

static void
methods_tool_progress(struct call *call)
{
	const json_t *progress = json_object_get(call->params, "progress");
	struct session *s;
	const char *tid;
	char err[512];
	int rc;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "toolUseId", true, &tid))
		return;
	if (progress == NULL) {
		methods_bad_param(call, "progress", "required");
		return;
	}
	rc = session_client_progress(s, call->c, tid, progress, err,
	    sizeof err);
	if (rc != 0)
		methods_client_error(call, rc, err);
	else
		conn_reply(call->c, call->id, json_object());
}

static void
methods_subscribe(struct call *call)
{
	struct session *s;
	struct sub *sub;
	uint64_t since = 0, last, oldest;
	int64_t from = -1;
	json_t *data;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_uint(call, "since", 0, INT64_MAX, false, &since))
		return;
	if (json_object_get(call->params, "since") != NULL &&
	    !json_is_null(json_object_get(call->params, "since")))
		from = (int64_t)since;
	if (session_subscribe(s, call->c, from, &sub, &last, &oldest) != 0) {
		data = json_pack("{s:I}", "oldestSeq", (json_int_t)oldest);
		conn_error(call->c, call->id, STEXEC_ERR_LIMIT, data, "Replay "
		    "gap: the oldest retained notification is seq %llu",
		    (unsigned long long)oldest);
		json_decref(data);
		return;
	}
	/* The reply first, then the replay, then live notifications. */
	conn_reply(call->c, call->id, json_pack("{s:I}", "lastSeq",
	    (json_int_t)last));
	session_sub_pump(sub);
}

static void
methods_unsubscribe(struct call *call)
{
	struct session *s;

	if ((s = methods_param_session(call)) == NULL)
		return;
	session_unsubscribe(s, call->c);
	conn_reply(call->c, call->id, json_object());
}

static void
methods_events(struct call *call)
{
	struct session *s;
	struct buf b = { 0 };
	uint64_t since = 0, max = 1000, last, oldest;
	json_t *data;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_uint(call, "since", 0, INT64_MAX, false, &since) ||
	    !methods_param_uint(call, "max", 1, METHODS_EVENTS_MAX, false, &max))
		return;
	buf_addstr(&b, "{\"notifications\":");
	/* Without since: from the oldest notification retained. */
	if (session_events(s, json_is_null(json_object_get(call->params,
	    "since")) || json_object_get(call->params, "since") == NULL ? -1 :
	    (int64_t)since, max, &b, &last, &oldest) != 0) {
		data = json_pack("{s:I}", "oldestSeq", (json_int_t)oldest);
		conn_error(call->c, call->id, STEXEC_ERR_LIMIT, data, "Replay "
		    "gap: the oldest retained notification is seq %llu",
		    (unsigned long long)oldest);
		json_decref(data);
		buf_free(&b);
		return;
	}
	buf_printf(&b, ",\"lastSeq\":%llu}", (unsigned long long)last);
	conn_reply_raw(call->c, call->id, b.data, b.len);
	buf_free(&b);
}

static void
methods_status(struct call *call)
{
	struct session *s;

	if ((s = methods_param_session(call)) != NULL)
		conn_reply(call->c, call->id, exec_status_json(session_exec(s),
		    session_tool_describe));
}

static void
methods_output_files(struct call *call)
{
	struct session *s;

	if ((s = methods_param_session(call)) != NULL)
		conn_reply(call->c, call->id, json_pack("{s:o}", "files",
		    session_output_files_json(s)));
}

static void
methods_ping(struct call *call)
{
	conn_reply(call->c, call->id, json_object());
}

/* Resident set size from /proc/self/statm, in bytes. */
static long
methods_rss(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * sysconf(_SC_PAGESIZE);
}

static void
methods_stats(struct call *call)
{
	session_tools_check();
	conn_reply(call->c, call->id, json_pack("{s:i, s:I, s:i, s:i, s:i, "
	    "s:I, s:I, s:I}", "pid", (int)getpid(), "uptimeMs",
	    (json_int_t)(methods_now_ms() - methods_cfg.start_ms), "sessions",
	    (int)session_count(), "connections", (int)conn_count(),
	    "toolsRunning", (int)session_tools_running(), "toolsStarted",
	    (json_int_t)session_tools_started(), "toolsCompleted",
	    (json_int_t)session_tools_completed(), "rssBytes",
	    (json_int_t)methods_rss()));
}

/* Any uid may ask: the totals are not secret, the sessions are its own. */
static void
methods_metrics(struct call *call)
{
	session_tools_check();
	conn_reply(call->c, call->id, gauges_json(conn_uid(call->c),
	    methods_cfg.enforcement, methods_now_ms() - methods_cfg.start_ms));
}
