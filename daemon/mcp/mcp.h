/*
 * MCP servers on stdio (doc/design.md §7, MCP servers): their configuration
 * in Claude Code's .mcp.json shape, one supervised server process speaking
 * newline-delimited JSON-RPC on its pipes, and its tool results as content
 * blocks. Knows nothing of sessions or the executor: it reports through
 * callbacks and a void *; the caller gives each spawn its sandbox.
 */
#ifndef STEXEC_MCP_H
#define STEXEC_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tooldef.h"

struct event_base;
struct handover_in;
struct handover_rec;
struct proc_spec;

/* Bounds (every one explicit): servers of a config, args, env entries. */
#define MCP_SERVERS_MAX 64
#define MCP_ARGS_MAX 256
#define MCP_NAME_MAX 64
/* A ToolDef name's bound (tooldef.c): mcp__SERVER__TOOL is cut to it. */
#define MCP_TOOL_NAME_MAX 128
/* A message line from a server; a longer one is discarded to its newline. */
#define MCP_LINE_MAX (16U * 1024 * 1024)
/* The server's stderr kept, its tail. */
#define MCP_STDERR_TAIL 2048
/* Tools of one server, and tools/list pages followed. */
#define MCP_TOOLS_MAX 1000
#define MCP_PAGES_MAX 100
/* Restarts: this many failures within the window leave it failed. */
#define MCP_FAILURES_MAX 5
#define MCP_FAILURE_WINDOW_MS 60000
#define MCP_START_TIMEOUT_DEFAULT 30000
/* startTimeoutMs and --mcp-start-timeout-ms: at most an hour. */
#define MCP_START_TIMEOUT_MAX 3600000

enum mcp_scope {
	MCP_SCOPE_SESSION, /* one process per session, in its cwd */
	MCP_SCOPE_DAEMON,  /* one shared process (the operator's only) */
};

/* One server of an mcpServers object. */
struct mcp_server_config {
	char *name;
	char **argv;             /* command, then args; NULL-terminated */
	json_t *env;             /* {NAME: string}, or NULL */
	char *cwd;               /* NULL: the session's */
	bool has_sandbox;
	struct tooldef_sandbox sandbox;
	struct tooldef_limits limits;
	int64_t timeout_ms;      /* per call; 0: the ToolDef default */
	int64_t start_timeout_ms; /* to ready; 0: the daemon's */
	json_t *concurrency_safe; /* {tool: bool}, or NULL */
	json_t *interrupt;       /* {tool: "cancel" | "block"}, or NULL */
	enum mcp_scope scope;
};

struct mcp_config {
	size_t n;
	struct mcp_server_config *servers;
};

/* mcp_config.c */
/*
 * Parse {"mcpServers": {...}} (or the inner object itself when bare). From a
 * client (operator false), scope "daemon" is refused. NULL with err naming
 * the field ("mcpServers.fs.args[1]: must be a string").
 */
struct mcp_config *mcp_config_parse(const json_t *, bool operator,
    char *err, size_t errlen);
/* The same from a file (--mcp-config). */
struct mcp_config *mcp_config_load(const char *path, char *err,
    size_t errlen);
void mcp_config_free(struct mcp_config *);
/* A server's config by name, or NULL. */
const struct mcp_server_config *mcp_config_find(const struct mcp_config *,
    const char *name);
/* The override for one tool: 1 or 0, -1 when none is given. */
int mcp_config_safe(const struct mcp_server_config *, const char *tool);
int mcp_config_cancel(const struct mcp_server_config *, const char *tool);
/*
 * "mcp__SERVER__TOOL" with every character outside [A-Za-z0-9_-] made '_',
 * cut to MCP_TOOL_NAME_MAX bytes. malloc'd.
 */
char *mcp_tool_name(const char *server, const char *tool);

/* mcp_server.c */
enum mcp_state {
	MCP_STARTING,
	MCP_READY,
	MCP_FAILED,
	MCP_RESTARTING,
};

struct mcp_server;
struct mcp_call;

struct mcp_server_ops {
	/*
	 * Before each spawn: the caller completes the spec (sandbox, limits,
	 * environment, cwd); what it points to must live until spawn returns.
	 */
	void (*prepare)(void *arg, struct mcp_server *, struct proc_spec *);
	/* Its state changed (mcp_server_state, mcp_server_why). */
	void (*state)(void *arg, struct mcp_server *);
	/* Its tools were listed (anew: list_changed). */
	void (*tools)(void *arg, struct mcp_server *);
	/*
	 * sampling/createMessage or elicitation/create: answer later with
	 * mcp_server_respond (id is the server's, borrowed for the call:
	 * copy it). NULL: the server is told nobody answers them.
	 */
	void (*request)(void *arg, struct mcp_server *, const json_t *id,
	    const char *method, const json_t *params);
	/* roots/list: an array of {uri, name} (a new reference). */
	json_t *(*roots)(void *arg, struct mcp_server *);
	/* notifications/message, and bounded events of bad input: to the log. */
	void (*log)(void *arg, struct mcp_server *, int level,
	    const char *text);
};

struct mcp_server_params {
	const struct mcp_server_config *cfg;
	const char *cwd;             /* when cfg gives none */
	bool sampling;               /* advertised to the server */
	bool elicitation;
	int64_t start_timeout_ms;    /* to ready; <= 0: the default */
	int64_t stop_grace_ms;       /* stdin closed -> TERM; <= 0: 1000 */
	int64_t backoff_ms;          /* first restart's; <= 0: 250 */
};

/*
 * Start a server (now, in the background). The params and config are
 * copied. Never NULL: a failure is a state.
 */
struct mcp_server *mcp_server_start(struct event_base *,
    const struct mcp_server_params *, const struct mcp_server_ops *,
    void *arg);
/*
 * Close: no callback after this but gone (NULL: not wanted). Its calls are
 * dropped; its stdin closes, then TERM, then KILL to its group (S18).
 * Freed once its process is gone, and then gone(arg) is called, from the
 * loop; true instead when no process is left (gone is not called).
 */
bool mcp_server_close(struct mcp_server *, void (*gone)(void *),
    void *arg);
/*
 * At daemon exit, before proc_shutdown (which kills and forgets every
 * process): servers let go of their processes; those closing are freed,
 * the others once closed (at once, then).
 */
void mcp_shutdown(void);

const char *mcp_server_name(const struct mcp_server *);
enum mcp_state mcp_server_state(const struct mcp_server *);
const char *mcp_state_name(enum mcp_state);
/* Why it failed or restarts (with its stderr's tail), or NULL. */
const char *mcp_server_why(const struct mcp_server *);
/* The tools of its last complete tools/list (borrowed), never NULL. */
const json_t *mcp_server_tools(const struct mcp_server *);
/* {name, state, why?, tools, calls, restarts, protocolVersion?, pid?}. */
json_t *mcp_server_json(const struct mcp_server *);
/* The session's roots changed: notifications/roots/list_changed. */
void mcp_server_roots_changed(struct mcp_server *);
/* The answer to a request (result, or error text). */
void mcp_server_respond(struct mcp_server *, const json_t *id,
    const json_t *result, const char *error);
uint64_t mcp_server_restarts(const struct mcp_server *);
/* Its calls in flight (sent or waiting for it) and those ended. */
size_t mcp_server_calls_in_flight(const struct mcp_server *);
uint64_t mcp_server_calls_done(const struct mcp_server *);
/* Its process's id (its group's too), 0 while it has none. */
int mcp_server_pid(const struct mcp_server *);

struct mcp_call_ops {
	/* notifications/progress: {progress, total?, message?}. */
	void (*progress)(void *arg, const json_t *params);
	/*
	 * The end: the tools/call result, or error (why it could not be had:
	 * failed server, crash with its exit and stderr tail, JSON-RPC error).
	 * The call is freed when this returns.
	 */
	void (*done)(void *arg, const json_t *result, const char *error);
};

/*
 * tools/call of tool (the server's name for it, or mcp__SERVER__TOOL,
 * resolved when it is sent), now or once the server is ready (it waits out a start or a
 * restart). done always comes, from the event loop, never from inside this
 * call, unless mcp_call_cancel or mcp_server_close comes first.
 */
struct mcp_call *mcp_server_call(struct mcp_server *, const char *tool,
    const json_t *arguments, const struct mcp_call_ops *, void *arg);
/*
 * notifications/cancelled (reason) for a call sent; no callback after. A
 * late answer is dropped.
 */
void mcp_call_cancel(struct mcp_call *, const char *reason);

/*
 * A live reload (doc/design.md §7, Reload). Whether a server can be handed
 * over as it is: ready, nothing of its handshake or listing under way,
 * every call sent. Its record then holds its process and pipes (proc_save),
 * the bytes read and not parsed, its stderr's tail, its tools, protocol
 * version, next id and the ids of its calls in flight.
 */
bool mcp_server_carriable(const struct mcp_server *);
void mcp_server_save(struct mcp_server *, struct handover_rec *, json_t *o);
/*
 * The next image: the server back from its record, ready, with no second
 * initialize; its calls in flight wait for mcp_call_adopt. NULL when the
 * record does not serve: its process is then killed (mcp_server_discard).
 */
struct mcp_server *mcp_server_adopt(struct event_base *,
    const struct mcp_server_params *, const struct mcp_server_ops *,
    void *arg, const struct handover_in *, const json_t *o);
/* A record's process that no server takes back: killed (its group). */
void mcp_server_discard(const struct handover_in *, const json_t *o);
/* A call handed over, by its request id, given its ops again; or NULL. */
struct mcp_call *mcp_call_adopt(struct mcp_server *, int64_t id,
    const struct mcp_call_ops *, void *arg);
/* Every tool is back: the calls none took are cancelled. */
void mcp_server_adopted(struct mcp_server *);
/* Its request id (0 while queued). */
int64_t mcp_call_id(const struct mcp_call *);

/* mcp_content.c */
/*
 * A tools/call result as a tool_result's: content blocks (text and images as
 * they are; audio, resource links and embedded resources as text saying
 * what they are), is_error, and meta {"mcp": {structuredContent}} or NULL.
 * New references. -1 with err when the result is not one.
 */
int mcp_content_result(const json_t *result, json_t **content,
    bool *is_error, json_t **meta, char *err, size_t errlen);

#endif
