/*
 * stexec-cli mcp: an MCP server on stdio (newline-delimited JSON-RPC, MCP's
 * stdio transport) backed by one stexecd session. tools/list lists the
 * session's tools; each tools/call is an addTool to the session's current
 * turn, answered when its tool_result is delivered, so parallel calls keep
 * the daemon's rules: safe tools run together, unsafe ones alone, results
 * in call order. When no call is outstanding the turn is drained, so an
 * error that cancels siblings (S7) or a cancellation only touches the calls
 * that were in flight together: once a result is an error or a call was
 * cancelled, calls that arrive wait for that turn to drain and go into the
 * next one.
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonrpc.h"
#include "ndjson.h"

/* Protocol versions we speak, newest first (the tools part is the same). */
static const char *const mcp_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
};

struct mcp_call {
	json_t *req_id;       /* the MCP request's id */
	json_t *token;        /* its _meta.progressToken, or NULL */
	json_t *tool_use;     /* {id, name, input} for addTool */
	char tool_id[32];
	json_int_t progress;  /* progress notifications sent */
	bool added;           /* in the daemon's turn (else waits for a drain) */
	bool cancelled;       /* notifications/cancelled: no response */
	struct mcp_call *next;
};

struct mcp {
	struct cli *cli;
	const char *sid;
	struct mcp_call *calls, **tail;  /* in the order received */
	unsigned outstanding;             /* added, result not yet delivered */
	int64_t drain_req;                /* the pending drain, or 0 */
	bool hold;                        /* new calls wait for the next turn */
	unsigned long seq;                /* toolUse ids mcp-1, mcp-2, ... */
	bool allow;                       /* --allow: grant permissions */
	struct ndjson in;
	struct buf out;
};

static void	mcp_send(struct mcp *);
static void	mcp_result(struct mcp *, const json_t *, json_t *);
static void	mcp_error(struct mcp *, const json_t *, int, const char *);
static void	mcp_line(struct mcp *, const char *, size_t);
static void	mcp_request(struct mcp *, const char *, const json_t *,
		    const json_t *);
static void	mcp_initialize(struct mcp *, const json_t *, const json_t *);
static void	mcp_list(struct mcp *, const json_t *);
static bool	mcp_servers_starting(const json_t *);
static void	mcp_call(struct mcp *, const json_t *, const json_t *);
static void	mcp_cancel(struct mcp *, const json_t *);
static void	mcp_add(struct mcp *, struct mcp_call *);
static void	mcp_daemon(struct mcp *, json_t *);
static void	mcp_delivered(struct mcp *, const json_t *);
static void	mcp_progress(struct mcp *, const json_t *);
static void	mcp_permission(struct mcp *, const json_t *);
static struct mcp_call *mcp_find(struct mcp *, const char *, const json_t *);
static void	mcp_forget(struct mcp *, struct mcp_call *);
static int	mcp_loop(struct mcp *);
static int	mcp_setup(struct mcp *, const struct cli_args *);

/* Write what is encoded in m->out to stdout, whole. */
static void
mcp_send(struct mcp *m)
{
	size_t off = 0;
	ssize_t n;

	while (off < m->out.len) {
		n = write(STDOUT_FILENO, m->out.data + off, m->out.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;  /* the client is gone: stdin's EOF ends us */
		off += (size_t)n;
	}
	m->out.len = 0;
}

/* Steals result. */
static void
mcp_result(struct mcp *m, const json_t *id, json_t *result)
{
	if (jsonrpc_result(&m->out, id, result) == 0)
		mcp_send(m);
	else
		mcp_error(m, id, STEXEC_ERR_INTERNAL,
		    "the result cannot be encoded");
	json_decref(result);
}

static void
mcp_error(struct mcp *m, const json_t *id, int code, const char *message)
{
	if (jsonrpc_error(&m->out, id, code, message, NULL) == 0)
		mcp_send(m);
}

static void
mcp_line(struct mcp *m, const char *line, size_t len)
{
	struct jsonrpc_msg msg, el;
	size_t i;

	jsonrpc_decode(line, len, &msg);
	/* Batches (MCP 2025-03-26): each element as if alone, answered alone. */
	if (msg.kind == JSONRPC_BATCH) {
		for (i = 0; i < json_array_size(msg.root); i++) {
			jsonrpc_decode_value(json_array_get(msg.root, i), &el);
			if (el.kind == JSONRPC_REQUEST ||
			    el.kind == JSONRPC_NOTIFICATION)
				mcp_request(m, el.method, el.id, el.params);
			jsonrpc_msg_clear(&el);
		}
	} else if (msg.kind == JSONRPC_REQUEST ||
	    msg.kind == JSONRPC_NOTIFICATION)
		mcp_request(m, msg.method, msg.id, msg.params);
	else if (msg.kind == JSONRPC_INVALID)
		mcp_error(m, msg.id, msg.code, msg.message);
	jsonrpc_msg_clear(&msg);
}

/* One request (id set) or notification (id NULL) from the MCP client. */
static void
mcp_request(struct mcp *m, const char *method, const json_t *id,
    const json_t *params)
{
	char msg[256];

	if (strcmp(method, "notifications/cancelled") == 0)
		mcp_cancel(m, params);
	else if (id == NULL)
		return;  /* notifications/initialized and the like */
	else if (strcmp(method, "initialize") == 0)
		mcp_initialize(m, id, params);
	else if (strcmp(method, "ping") == 0)
		mcp_result(m, id, json_object());
	else if (strcmp(method, "tools/list") == 0)
		mcp_list(m, id);
	else if (strcmp(method, "tools/call") == 0)
		mcp_call(m, id, params);
	else {
		snprintf(msg, sizeof msg, "Method not found: %.200s", method);
		mcp_error(m, id, STEXEC_ERR_METHOD_NOT_FOUND, msg);
	}
}

static void
mcp_initialize(struct mcp *m, const json_t *id, const json_t *params)
{
	const char *want = json_string_value(json_object_get(params,
	    "protocolVersion"));
	const char *version = mcp_versions[0];
	size_t i;

	/* The client's version if we speak it, else our newest (the spec). */
	for (i = 0; want != NULL && i < sizeof mcp_versions /
	    sizeof *mcp_versions; i++)
		if (strcmp(want, mcp_versions[i]) == 0)
			version = mcp_versions[i];
	mcp_result(m, id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}",
	    "protocolVersion", version,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "stexec", "version", STEXEC_VERSION,
	    "instructions", "Tools run in a stexecd session. Calls made "
	    "together run as one turn: read-only tools in parallel, others "
	    "one at a time, results in call order; a failing bash call "
	    "cancels the calls still running beside it."));
}

/* Whether an MCP server of the session is still to give its tools. */
static bool
mcp_servers_starting(const json_t *r)
{
	const json_t *srv;
	const char *st;
	size_t i;

	json_array_foreach(json_object_get(r, "mcpServers"), i, srv) {
		st = json_string_value(json_object_get(srv, "state"));
		if (st != NULL && (strcmp(st, "starting") == 0 ||
		    strcmp(st, "restarting") == 0))
			return true;
	}
	return false;
}

/*
 * The session's tools, as MCP tools (annotations from the ToolDef, or an
 * MCP server's own): the session's MCP servers' too, so tools/list waits
 * (up to 30 s) for those still starting.
 */
static void
mcp_list(struct mcp *m, const json_t *id)
{
	struct stexec_error err = { 0 };
	json_t *r, *tools, *t, *schema, *tool, *object = json_pack("{s:s}",
	    "type", "object");
	size_t i;
	int waits = 0;

	for (;;) {
		if (stexec_call(m->cli->c, "listTools", json_pack("{s:s}",
		    "sessionId", m->sid), &r, &err) != 0) {
			mcp_error(m, id, err.code < 0 ? err.code :
			    STEXEC_ERR_INTERNAL, err.message);
			stexec_error_clear(&err);
			json_decref(object);
			return;
		}
		if (!mcp_servers_starting(r) || ++waits > 300)
			break;
		json_decref(r);
		poll(NULL, 0, 100);
	}
	tools = json_array();
	json_array_foreach(json_object_get(r, "tools"), i, t) {
		schema = json_object_get(t, "inputSchema");
		tool = json_pack("{s:O, s:O}", "name", json_object_get(t, "name"),
		    "inputSchema", json_is_object(schema) ? schema : object);
		if (json_is_string(json_object_get(t, "description")))
			json_object_set(tool, "description",
			    json_object_get(t, "description"));
		if (json_is_object(json_object_get(t, "annotations")))
			json_object_set(tool, "annotations", json_object_get(t,
			    "annotations"));
		else
			json_object_set_new(tool, "annotations", json_pack(
			    "{s:b}", "readOnlyHint", json_is_true(
			    json_object_get(t, "concurrencySafe"))));
		json_array_append_new(tools, tool);
	}
	json_decref(r);
	json_decref(object);
	mcp_result(m, id, json_pack("{s:o}", "tools", tools));
}

static void
mcp_call(struct mcp *m, const json_t *id, const json_t *params)
{
	const json_t *name = json_object_get(params, "name");
	const json_t *args = json_object_get(params, "arguments");
	const json_t *token = json_object_get(json_object_get(params, "_meta"),
	    "progressToken");
	struct mcp_call *call;

	if (!json_is_string(name)) {
		mcp_error(m, id, STEXEC_ERR_INVALID_PARAMS,
		    "Invalid params: name must be a string");
		return;
	}
	if (args != NULL && !json_is_object(args)) {
		mcp_error(m, id, STEXEC_ERR_INVALID_PARAMS,
		    "Invalid params: arguments must be an object");
		return;
	}
	call = calloc(1, sizeof *call);
	if (call == NULL) {
		mcp_error(m, id, STEXEC_ERR_INTERNAL, "out of memory");
		return;
	}
	snprintf(call->tool_id, sizeof call->tool_id, "mcp-%lu", ++m->seq);
	call->req_id = json_deep_copy(id);
	call->token = token != NULL ? json_deep_copy(token) : NULL;
	call->tool_use = json_pack("{s:s, s:O, s:o}", "id", call->tool_id,
	    "name", name, "input", args != NULL ? json_deep_copy(args) :
	    json_object());
	*m->tail = call;
	m->tail = &call->next;
	if (m->drain_req == 0 && !m->hold)
		mcp_add(m, call);
}

/* Into the daemon's current turn; a refusal answers the call at once. */
static void
mcp_add(struct mcp *m, struct mcp_call *call)
{
	struct stexec_error err = { 0 };

	if (stexec_call(m->cli->c, "addTool", json_pack("{s:s, s:O}",
	    "sessionId", m->sid, "toolUse", call->tool_use), NULL,
	    &err) != 0) {
		if (!call->cancelled)
			mcp_error(m, call->req_id, err.code < 0 ? err.code :
			    STEXEC_ERR_INTERNAL, err.message);
		stexec_error_clear(&err);
		mcp_forget(m, call);
		return;
	}
	call->added = true;
	m->outstanding++;
}

/*
 * The client gave up on a call: it gets no response. One not yet in the
 * daemon is dropped; one that is interrupts the turn (S8), as a person's
 * Ctrl-C would: the calls in flight beside it that can be cancelled end
 * as interrupted too.
 */
static void
mcp_cancel(struct mcp *m, const json_t *params)
{
	struct mcp_call *call = mcp_find(m, NULL, json_object_get(params,
	    "requestId"));
	struct stexec_error err = { 0 };

	if (call == NULL || call->cancelled)
		return;
	call->cancelled = true;
	if (!call->added) {
		mcp_forget(m, call);
		return;
	}
	m->hold = true;
	if (stexec_call(m->cli->c, "abort", json_pack("{s:s, s:s}",
	    "sessionId", m->sid, "reason", "interrupt"), NULL, &err) != 0) {
		cli_error(m->cli, "abort: %s", err.message);
		stexec_error_clear(&err);
	}
}

/* A message from the daemon: the drain's reply, or a notification. */
static void
mcp_daemon(struct mcp *m, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *params = json_object_get(msg, "params");
	struct mcp_call *call;

	if (method == NULL) {
		if (m->drain_req != 0 && stexec_message_id(msg) ==
		    m->drain_req) {
			m->drain_req = 0;
			m->hold = false;
			/* The calls that came meanwhile start the next turn. */
			for (call = m->calls; call != NULL; ) {
				struct mcp_call *next = call->next;

				if (!call->added)
					mcp_add(m, call);
				call = next;
			}
		}
	} else if (strcmp(method, "tool_result") == 0)
		mcp_delivered(m, params);
	else if (strcmp(method, "progress") == 0)
		mcp_progress(m, params);
	else if (strcmp(method, "permission_request") == 0)
		mcp_permission(m, params);
	json_decref(msg);
}

/*
 * The API's blocks as MCP content: text as it is, a base64 image as MCP's
 * {type: image, data, mimeType}.
 */
static json_t *
mcp_blocks(const json_t *content)
{
	const json_t *b, *src;
	json_t *out = json_array();
	size_t i;

	json_array_foreach(content, i, b) {
		src = json_object_get(b, "source");
		if (src != NULL)
			json_array_append_new(out, json_pack("{s:s, s:O, s:O}",
			    "type", "image", "data", json_object_get(src,
			    "data"), "mimeType", json_object_get(src,
			    "media_type")));
		else
			json_array_append(out, (json_t *)b);
	}
	return out;
}

static void
mcp_delivered(struct mcp *m, const json_t *p)
{
	struct mcp_call *call = mcp_find(m, json_string_value(
	    json_object_get(p, "toolUseId")), NULL);
	const json_t *result = json_object_get(p, "result");
	const json_t *content = json_object_get(result, "content");
	struct stexec_error err = { 0 };
	json_t *blocks;

	if (call == NULL)
		return;
	/* The turn may be errored (S7): later calls go to the next one. */
	if (json_is_true(json_object_get(result, "is_error")))
		m->hold = true;
	if (!call->cancelled) {
		/* The model API's content: a string, or its blocks. */
		if (json_is_array(content))
			blocks = mcp_blocks(content);
		else
			blocks = json_pack("[{s:s, s:s%}]", "type", "text",
			    "text", json_is_string(content) ?
			    json_string_value(content) : "", json_is_string(
			    content) ? json_string_length(content) : 0);
		mcp_result(m, call->req_id, json_pack("{s:o, s:b}", "content",
		    blocks, "isError", json_is_true(json_object_get(result,
		    "is_error"))));
	}
	mcp_forget(m, call);
	m->outstanding--;
	if (m->outstanding == 0 && m->drain_req == 0) {
		m->drain_req = stexec_send(m->cli->c, "drain",
		    json_pack("{s:s}", "sessionId", m->sid), &err);
		if (m->drain_req < 0) {
			m->drain_req = 0;
			stexec_error_clear(&err);
		}
	}
}

/* Progress for a call that asked for it (a progressToken). */
static void
mcp_progress(struct mcp *m, const json_t *p)
{
	struct mcp_call *call = mcp_find(m, json_string_value(
	    json_object_get(p, "toolUseId")), NULL);
	const json_t *data = json_object_get(p, "data");
	const json_t *text = json_object_get(data, "text");
	json_t *params;
	char *dump = NULL;

	if (call == NULL || call->token == NULL || call->cancelled)
		return;
	params = json_pack("{s:O, s:I}", "progressToken", call->token,
	    "progress", ++call->progress);
	if (json_is_string(text))
		json_object_set_new(params, "message", json_stringn(
		    json_string_value(text), json_string_length(text)));
	else if ((dump = json_dumps(data, JSON_COMPACT |
	    JSON_ENCODE_ANY)) != NULL)
		json_object_set_new(params, "message", json_string(dump));
	free(dump);
	if (jsonrpc_notification(&m->out, "notifications/progress",
	    params) == 0)
		mcp_send(m);
	json_decref(params);
}

/* MCP has no way to ask the person here: --allow decides for them. */
static void
mcp_permission(struct mcp *m, const json_t *p)
{
	struct stexec_error err = { 0 };
	json_t *params = json_pack("{s:s, s:O, s:s}", "sessionId", m->sid,
	    "toolUseId", json_object_get(p, "toolUseId"), "decision",
	    m->allow ? "allow" : "deny");

	if (!m->allow)
		json_object_set_new(params, "message", json_string(
		    "<tool_use_error>Permission denied: stexec-cli mcp was "
		    "started without --allow</tool_use_error>"));
	if (stexec_call(m->cli->c, "respondPermission", params, NULL,
	    &err) != 0) {
		cli_error(m->cli, "respondPermission: %s", err.message);
		stexec_error_clear(&err);
	}
}

/* A call by its toolUse id, or by the MCP request id. */
static struct mcp_call *
mcp_find(struct mcp *m, const char *tool_id, const json_t *req_id)
{
	struct mcp_call *call;

	for (call = m->calls; call != NULL; call = call->next)
		if (tool_id != NULL ? strcmp(call->tool_id, tool_id) == 0 :
		    req_id != NULL && json_equal(call->req_id, req_id))
			return call;
	return NULL;
}

static void
mcp_forget(struct mcp *m, struct mcp_call *call)
{
	struct mcp_call **pp;

	for (pp = &m->calls; *pp != call; pp = &(*pp)->next)
		;
	*pp = call->next;
	if (m->tail == &call->next)
		m->tail = pp;
	json_decref(call->req_id);
	json_decref(call->token);
	json_decref(call->tool_use);
	free(call);
}

/* Until stdin ends (0) or the daemon goes away (1). */
static int
mcp_loop(struct mcp *m)
{
	struct pollfd pfd[2];
	enum ndjson_status st;
	size_t len;
	ssize_t n;
	char *p, *line;
	json_t *msg;

	for (;;) {
		while (stexec_pending(m->cli->c))
			if ((msg = stexec_next_message(m->cli->c, 0,
			    NULL)) != NULL)
				mcp_daemon(m, msg);
		if (!stexec_is_open(m->cli->c)) {
			cli_error(m->cli, "the daemon went away: %s",
			    stexec_last_error(m->cli->c));
			return CLI_EXIT_FAIL;
		}
		pfd[0] = (struct pollfd){ STDIN_FILENO, POLLIN, 0 };
		pfd[1] = (struct pollfd){ stexec_fd(m->cli->c),
		    stexec_poll_events(m->cli->c), 0 };
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			cli_error(m->cli, "poll: %s", strerror(errno));
			return CLI_EXIT_FAIL;
		}
		if (pfd[1].revents & POLLOUT)
			stexec_flush(m->cli->c);
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))
			stexec_read_ready(m->cli->c);
		if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		p = ndjson_space(&m->in, 64 * 1024);
		n = read(STDIN_FILENO, p, 64 * 1024);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return CLI_EXIT_OK;
		ndjson_commit(&m->in, (size_t)n);
		while ((st = ndjson_next(&m->in, &line, &len)) == NDJSON_LINE)
			mcp_line(m, line, len);
		if (st == NDJSON_TOO_LONG) {
			mcp_error(m, NULL, STEXEC_ERR_INVALID_REQUEST,
			    "Invalid Request: message too long");
			cli_error(m->cli, "a message longer than %zu bytes: "
			    "giving up", m->in.max);
			return CLI_EXIT_FAIL;
		}
	}
}

/* Connect, create the session in our cwd (or --cwd), subscribe. */
static int
mcp_setup(struct mcp *m, const struct cli_args *a)
{
	struct stexec_error err = { 0 };
	const char *cwd = cli_opt(a, "cwd"), *path = cli_opt(a, "tools");
	json_t *params = json_object(), *r, *tools;
	long long max_parallel = 0;
	char here[4096];
	int rc;

	if ((rc = cli_int_opt(m->cli, a, "max-parallel", 1, 256,
	    &max_parallel)) != 0)
		goto out;
	if (path != NULL) {
		if ((rc = cli_load_tools(m->cli, path, &tools)) != 0)
			goto out;
		json_object_set_new(params, "tools", tools);
	}
	if (max_parallel > 0)
		json_object_set_new(params, "maxParallel",
		    json_integer(max_parallel));
	if (cwd == NULL && (cwd = getcwd(here, sizeof here)) == NULL) {
		cli_error(m->cli, "cannot tell the current directory: %s",
		    strerror(errno));
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	json_object_set_new(params, "cwd", json_string(cwd));
	if ((rc = cli_connect(m->cli)) != 0)
		goto out;
	if ((rc = cli_call(m->cli, "createSession", params, &r)) != 0)
		return rc;
	m->sid = strdup(json_string_value(json_object_get(r, "sessionId")));
	json_decref(r);
	if (stexec_subscribe(m->cli->c, m->sid, -1, NULL, &err) != 0) {
		rc = cli_rpc_error(m->cli, "subscribe", &err);
		stexec_error_clear(&err);
	}
	return rc;
out:
	json_decref(params);
	return rc;
}

int
mcp_main(struct cli *cli, struct cli_args *args)
{
	struct mcp m = { .cli = cli, .allow = cli_flag(args, "allow") };
	int rc;

	m.tail = &m.calls;
	ndjson_init(&m.in, STEXEC_MAX_MESSAGE_DEFAULT);
	if ((rc = mcp_setup(&m, args)) == 0) {
		rc = mcp_loop(&m);
		/* The client is gone: so is the session and what still runs. */
		if (stexec_is_open(cli->c))
			cli_call(cli, "closeSession", json_pack("{s:s}",
			    "sessionId", m.sid), NULL);
	}
	while (m.calls != NULL)
		mcp_forget(&m, m.calls);
	free((char *)m.sid);
	ndjson_free(&m.in);
	buf_free(&m.out);
	return rc;
}
