/*
 * Sessions: an executor, its tools, its processes and its notification log.
 * A session belongs to the uid that created it and outlives connections.
 * Every notification gets the next seq and goes into the log; subscribers
 * pull from the log as their sockets drain, so a slow one never makes the
 * daemon drop anything: past a watermark the session stops reading its
 * tools' pipes (backpressure), and only past a hard cap is the laggard
 * disconnected, free to resume from its last seq.
 */
#ifndef STEXEC_SESSION_H
#define STEXEC_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/executor.h"
#include "util.h"

struct conn;
struct session;
struct sub;
struct ticket;

/* createSession's shell (session_shell.c). */
struct session_shell {
	bool keep_cwd;           /* the built-in bash's cwd carries over */
	bool keep_env;           /* ...and what its commands export */
	char *env_file;          /* sourced first; NULL: the daemon's */
};
#define SESSION_SHELL_MAX_ALLOW 64
/* The operator's: --shell-allow-dir, --shell-env-file. */
struct session_shell_config {
	struct tooldef *def;     /* the built-in bash; NULL: none */
	const char *const *allow; /* more dirs a shell's cwd may be in */
	size_t nallow;
	const char *env_file;
};
void session_shell_init(const struct session_shell_config *);
/*
 * createSession's shell (NULL: the defaults); false with the field
 * ("shell", "shell.keepCwd"...) and the problem.
 */
bool session_shell_parse(const json_t *, struct session_shell *,
    char *field, size_t fieldlen, char *err, size_t errlen);
void session_shell_clear(struct session_shell *);
json_t *session_shell_json(const struct session_shell *);

struct session_config {
	size_t retention_bytes;  /* log budget per session */
	unsigned max_sessions;
	unsigned max_tools_per_turn;
	const char *interrupt_message;
	json_t *base_env;        /* the daemon's environment, less systemd's */
	char *base_cwd;
	bool other_uids;         /* sessions of other users run tools as us */
	struct event_base *base; /* for idle timers; NULL: none */
	unsigned idle_timeout_s; /* close sessions idle this long; 0: never */
	bool safe_read_only;     /* tools safe for their input and without a
	                            sandbox field run read-only */
	enum tooldef_sandbox_mode default_sandbox; /* for tools without one */
	enum tooldef_sandbox_mode min_sandbox;     /* the floor */
	struct tooldef_limits limits; /* for tools that give none */
	struct netpolicy *network_deny;      /* --network-deny (owned) */
	struct netpolicy *network_allow_max; /* --network-allow-max (owned) */
	struct session_shell_config shell;
	int kill_grace_ms;       /* a block client tool's, once cancelled */
	int client_grace_ms;     /* a client tool whose name nobody serves */
	const char *output_dir;  /* whole-output files */
	int64_t mcp_start_timeout_ms; /* --mcp-start-timeout-ms; 0: 30 s */
};

void session_init(const struct session_config *);


/*
 * Whether a session's or a ToolDef's sandbox asks for no more network than
 * the operator allows (--network-allow-max; with it or --network-deny,
 * network: true too); else false and err names the rule.
 */
bool session_network_allowed(const struct tooldef_sandbox *, char *err,
    size_t errlen);
/* Close every session and kill its tools; for shutdown. */
void session_shutdown(void);
unsigned session_count(void);
/* A large result is still being encoded, a slice per loop pass. */
bool session_encoding(void);
/* A session is closing: its tools are being killed (for a reload). */
bool session_closing(void);

/*
 * createSession. tools is an array of parsed session ToolDefs (borrowed:
 * the session takes references). Returns NULL with a JSON-RPC error code
 * and message when a limit is reached.
 */
struct session *session_create(uid_t, struct tooldef **tools, size_t ntools,
    unsigned max_parallel, const char *cwd, const json_t *env,
    unsigned output_grace_ms, const struct tooldef_sandbox *,
    const struct session_shell *, const json_t *hooks, int *code, char *err,
    size_t errlen);
/* The operator's floor (--min-sandbox): nothing may ask for less. */
enum tooldef_sandbox_mode session_min_sandbox(void);
/* NULL and an error code (-32001 or -32003) when it cannot be had. */
struct session *session_find(const char *id, uid_t, int *code);
const char *session_id(const struct session *);
struct exec *session_exec(struct session *);
/* The session's tool of that name, else the daemon's, else NULL. */
struct tooldef *session_tool(struct session *, const char *name);
/*
 * MCP servers (session_mcp.c): the operator's (--mcp-config, owned from
 * now), a createSession's checked against them, started with the session
 * (own is owned from then on), their states for listTools, and the
 * client's answer to a server's request (mcp_request, respondMcp).
 */
struct mcp_config;
void session_mcp_set_operator(struct mcp_config *);
/* The operator's config (its shared servers start from it), or NULL. */
const struct mcp_config *session_mcp_operator_config(void);
int session_mcp_check(const struct mcp_config *own, char *err,
    size_t errlen);
void session_mcp_start(struct session *, struct mcp_config *own,
    const json_t *servers, bool sampling, bool elicitation);
/* metrics: the caller's sessions' servers (calls by outcome, restarts). */
void session_mcp_metrics(uid_t, json_t *families);
/* A session restored (a reload, a restart): its servers from its record. */
void session_mcp_restore(struct session *, const json_t *rec);
json_t *session_mcp_json(struct session *);
int session_mcp_respond(struct session *, const char *id,
    const json_t *result, const char *error, char *err, size_t errlen);
void session_mcp_roots_changed(struct session *);
/* listTools: the merged set. */
json_t *session_tools_json(struct session *);
/* listSessions rows of the sessions uid owns. */
json_t *session_list_json(uid_t);
/*
 * Whole-output files of the session's tools are removed this long after it
 * closes (createSession outputGraceMs).
 */
#define SESSION_OUTPUT_GRACE_DEFAULT_MS 60000
#define SESSION_OUTPUT_GRACE_MAX_MS 86400000
/* outputFiles: the session's whole-output files, kept and removed. */
json_t *session_output_files_json(struct session *);
/*
 * addTool (exec_add), journaled first so that a restart knows the tool was
 * added even if the daemon dies before its result.
 */
int session_add(struct session *, const char *id, const char *name,
    const json_t *input, struct exec_added *);

/*
 * The crash journal (journal.h): what compaction writes (every open
 * session, its current turn's tools, its retained notifications; streamed
 * chunks elided unless whole, as a reload's handover wants them), and the
 * restore at start: every record, then session_restore_done, which
 * returns how many sessions came back. session_journal_init gives the
 * sessions the hooks through which they journal what happens.
 */
void session_journal_init(void);
void session_journal_snapshot(bool whole);
/*
 * Reload (SIGHUP), once no process runs: after the snapshot, the current
 * turns' held results and never-started tools, for the next image.
 */
void session_journal_handover(void);
void session_restore(char kind, const char *data, size_t len);
unsigned session_restore_done(void);

/* Turns in which more tools are refused (-32004). */
bool session_turn_full(struct session *);

/*
 * closeSession: the ticket (NULL: nobody waits) is answered once every
 * process is dead.
 */
void session_close(struct session *, struct ticket *);

/*
 * Idle sessions (--session-idle-timeout): a session is idle while no
 * connection refers to it (one that created it or named it in a request and
 * is still open), none is subscribed, and no tool process of it runs or
 * waits for a slot. One idle for the whole timeout is closed.
 */
void session_refer(struct session *, struct conn *);
/* A connection that referred to the session of this id closed. */
void session_unrefer(const char *id);

/*
 * subscribe (since < 0: live only): -32004 with the oldest retained seq in
 * *oldest when since is too old. The caller replies, then calls
 * session_sub_pump.
 */
int session_subscribe(struct session *, struct conn *, int64_t since,
    struct sub **, uint64_t *last_seq, uint64_t *oldest);
void session_unsubscribe(struct session *, struct conn *);
/* The connection is going away: drop its subscription. */
void session_sub_free(struct sub *);
/* A subscription's session and the seq it sends next (a reload's). */
void session_sub_where(const struct sub *, const char **session_id,
    uint64_t *next);
/* The connection drained below its low watermark: pull more. */
void session_sub_pump(struct sub *);
/*
 * events: the retained notifications after since (since < 0: from the
 * oldest retained; at most max) as one JSON array text appended to out;
 * returns -32004 (oldest in *oldest) on a gap.
 */
int session_events(struct session *, int64_t since, size_t max,
    struct buf *out, uint64_t *last_seq, uint64_t *oldest);

/*
 * writeStdin: more input for a running tool of the current turn; -1 with
 * *why when it does not run or its stdin is closed.
 */
int session_tool_write(struct exec_tool *, const char *, size_t, bool eof,
    const char **why);

/*
 * Jobs running in every session, and calls that may still become one
 * (doc/design.md §7, Jobs).
 */
unsigned session_jobs_running(void);
/*
 * A reload: every background call whose process has started becomes a
 * job now rather than at its yieldMs, so that it is carried as a job.
 */
void session_jobs_yield_now(void);

/*
 * Learn which tools' processes have exec'd since (proc_count_execs):
 * before session_tools_started or the metrics are read.
 */
void session_tools_check(void);
/*
 * For stats: tool processes started (their exec happened, as the metric
 * counts them) and tools ended since this image started, and running now.
 */
uint64_t session_tools_started(void);
uint64_t session_tools_completed(void);
unsigned session_tools_running(void);
/* What the metrics method reads of a session (session_metrics.c). */
struct session_figures {
	const char *id;
	uid_t uid;
	uint64_t turn;
	unsigned processes;      /* tools with a process, or waiting for a
	                            --max-procs slot */
	unsigned queued;         /* current-turn tools waiting to start */
	unsigned unfinished;     /* current-turn tools without a result yet */
	unsigned clients;        /* open connections referring to it */
	uint64_t retained_bytes; /* its notification log */
};
/* Each open session's figures, in no order. */
void session_figures(void (*)(const struct session_figures *, void *),
    void *);
/*
 * status: a running tool's pid, and its peak memory and CPU time so far
 * where a cgroup measures them (extension).
 */
void session_tool_describe(struct exec_tool *, json_t *);

/*
 * Client-run tools (doc/design.md §7, Client-run tools; session_client.c):
 * serveTools, completeTool and toolProgress for a connection, 0 or a
 * JSON-RPC error code with err the message (for -32602, "FIELD: problem");
 * and a connection's end.
 */
#define SESSION_CLIENT_NAMES_MAX 256
int session_client_serve(struct session *, struct conn *, const json_t *names,
    bool take_over, json_t **served, char *err, size_t errlen);
int session_client_complete(struct session *, struct conn *, const char *id,
    const json_t *content, bool is_error, char *err, size_t errlen);
int session_client_progress(struct session *, struct conn *, const char *id,
    const json_t *progress, char *err, size_t errlen);
void session_client_conn_closed(struct conn *);
/*
 * A reload carries claims with their connections (rpc/carry.c): what a
 * connection serves, [{s, names}]; and in the next image, once its
 * sessions are back, a session's claims for the adopted connection, whose
 * calls go on there without a new tool_start (fd: the descriptor both
 * images share). Then session_client_carried_all: calls whose connection
 * did not come back wait for a claim, as after a close.
 */
json_t *session_client_conn_json(struct conn *);
void session_client_carried(struct session *, struct conn *, int fd,
    const json_t *names);
void session_client_carried_all(void);
/* The names this session's connections serve. */
json_t *session_client_served_json(struct session *);

/*
 * Hooks (README, "Hooks"): the operator's (--hooks, kept by the caller),
 * a hook's default timeout (<= 0: 600 s) and where long texts go. A
 * session's own come with session_create (createSession's "hooks",
 * already checked; NULL: none).
 */
struct hooks;
void session_hook_config(struct hooks *operator_hooks, int64_t timeout_ms,
    const char *dir);

#endif
