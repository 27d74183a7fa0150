/*
 * What session.c shares with session_journal.c (and session_metrics.c,
 * which only reads, and job.c, which keeps a session's jobs in it and
 * calls session.c only through the hooks job.h names), and nobody else: the session and its notes, the few
 * steps the journal's restore needs, and the hooks through which
 * session.c tells the journal what happened. The journal calls session.c;
 * session.c never calls the journal by name.
 */
#ifndef STEXEC_SESSION_INT_H
#define STEXEC_SESSION_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "idmap.h"
#include "core/tooldef.h"
#include "supervisor/proc.h"
#include "session/session.h"

struct shared;
struct slicer;
struct waiter;
struct tooldef;

/* One notification as sent: a whole line, newline included. */
struct note {
	uint64_t seq;
	char *line;               /* NULL while it is being encoded */
	size_t len;
	struct shared *shared;    /* line's owner when it is shared */
	uint64_t end; /* bytes of every note up to and including this one */
	bool output;              /* a streamOutput chunk: journaled elided */
};

struct session {
	char id[24];
	uid_t uid;
	struct exec *ex;
	struct idmap tools;       /* the session's own ToolDefs by name */

	struct note *notes;       /* a ring of the retained notifications */
	size_t cap, head, count;
	uint64_t last_seq;
	uint64_t bytes_end;       /* `end` of the newest note */
	uint64_t prev_turn_seq;   /* first seq of the previous turn */
	uint64_t cur_turn_seq;    /* first seq of the current turn */
	struct sub *subs;
	bool paused;

	char **envp;              /* exec_env as "K=V", built at first spawn */
	unsigned envp_gen;

	struct exec_tool **running; /* tools with a process */
	size_t nrunning, caprunning;

	struct outdir_set *files; /* its tools' whole-output files */
	unsigned output_grace_ms;

	unsigned refs;            /* open connections referring to it */
	struct event *idle;       /* pending while the session is idle */
	int64_t idle_since;       /* wall clock (ms) it became idle; 0: not
	                             idle. Journaled: a restart counts the
	                             time it was down */

	bool closing;
	bool finish_wanted;       /* close once the slicers are done */
	struct ticket **closers;
	size_t nclosers;

	struct slicer *slicers, **slicers_tail;
	struct waiter *waiters, **waiters_tail;
	struct session *slice_next; /* in session_slicing, when queued */
	bool slice_queued;

	struct tooldef_sandbox sandbox; /* createSession's: for its tools
	                             without one */
	struct session_shell shell; /* createSession's */
	char *root;               /* its cwd at createSession: a shell's
	                             falls back to it */
	unsigned context_gen;     /* exec_context_gen last journaled */
	struct proc_user *user;   /* a root daemon's client of another uid:
	                             its tools run as it; NULL: as us */

	char *journal;            /* its createSession, as journaled (text:
	                             a JSON tree would triple an idle
	                             session's memory) */

	struct session_netns *netns; /* a network namespace per policy */
	size_t nnetns;
	struct proxy_quota *net_quota; /* its tools' proxy connections */

	struct job *jobs;         /* its jobs, oldest first (job.h) */
	unsigned njobs;           /* ids given */
	unsigned jobs_running;
	unsigned jobs_pending;    /* background calls not yet jobs */
	struct shell *live_shell; /* bash_session's (shell.h), or NULL */
	struct client_call *client_calls; /* its client-run calls running */
	struct session_hook *hook; /* its hooks (session_hook.c), or NULL */
	struct session_mcp *mcp;  /* its MCP servers (session_mcp.c), or NULL */

	struct session *prev, *next;
};

extern struct idmap session_map;
extern struct session *session_list;
extern bool session_stopping;
/* True while the journal is read back: nothing is journaled. */
extern bool session_journal_restoring;

/* A session of this id (NULL: a new random one), in the map and list. */
struct session *session_new(const char *id, uid_t, struct tooldef **,
    size_t, unsigned max_parallel, const char *cwd, const json_t *env);
void session_free(struct session *);
/* A new note at the end of the log, with the next seq and no line yet. */
struct note *session_log_note(struct session *, bool turn_end);
void session_trim(struct session *);
void session_idle_update(struct session *);

/*
 * What a session reports as it happens, each before a client can see it:
 * made (createSession, with what makes it again), a note logged (journal_as:
 * the line to keep instead, for a streamed chunk), a tool added, closed.
 * journaling: whether notes are kept at all, so that a chunk's elided copy
 * is built only then.
 */
struct journal_big;

struct session_hooks {
	void (*created)(struct session *, struct tooldef **, size_t,
	    unsigned max_parallel, const char *cwd, const json_t *env);
	void (*logged)(struct session *, const struct note *);
	void (*added)(struct session *, uint64_t turn, const char *id,
	    const char *name);
	void (*closed)(struct session *);
	void (*idled)(struct session *);  /* idle_since changed */
	void (*contexted)(struct session *); /* its cwd or env changed */
	bool (*journaling)(void);
	void (*remade)(struct session *);  /* its record (s->journal) grew */
	/* logged, for a line too long for one pass: written in slices */
	struct journal_big *(*logged_big)(struct session *,
	    const struct note *);
};

/*
 * A reload (doc/design.md §7, Reload): whether the tool's process runs and
 * is handed over; its process and the part of a character its streams
 * held back, into obj; and in the next image, the tool given that process
 * again.
 */
struct handover_rec;
struct handover_in;
bool session_tool_carried(struct exec_tool *);
void session_tool_save(struct exec_tool *, struct handover_rec *, json_t *);
void session_tool_adopt(struct session *, struct exec_tool *,
    const struct handover_in *, const json_t *);

/*
 * Network rules (session_net.c): a tool's policy (its ToolDef's network
 * rules, else the session's, with the operator's --network-deny), NULL
 * when it has none; the namespace of the session's tools of that policy,
 * made at the first, -1 if it cannot be; a listening socket in it served
 * by the proxy, and its port; and what a closing session lets go.
 */
struct netpolicy;
struct proxy_tool;
extern struct session_config session_net_cfg; /* session_init's */
struct netpolicy *session_net_policy(const struct session *,
    const struct tooldef_sandbox *);
int session_net_ns(struct session *, const struct netpolicy *);
struct proxy_tool *session_net_proxy(struct session *, int ns,
    const struct netpolicy *, const char *tool_use_id, const char *name,
    uint16_t *port);
void session_net_free(struct session *);
/* A reload's next image: a carried tool's namespace, in the list once. */
int session_net_adopt(struct session *, const json_t *policy,
    const json_t *fd);

/* Install the hooks (NULL: none); the journal does at start. */
void session_set_hooks(const struct session_hooks *);

/*
 * The built-in bash (session_shell.c): the argv that wraps its command for
 * this session, run with envp (free the array only), or NULL to run it as
 * it is; and the executor's cwd_check.
 */
struct exec_spawn;
char **session_shell_argv(struct session *, struct exec_tool *,
    const struct exec_spawn *, char *const *envp);
const char *session_shell_cwd_check(void *, struct exec_tool *,
    const char *cwd, bool moved);

/*
 * Client-run tools (session_client.c, below session.c): EXEC_SPAWN and
 * EXEC_KILL of one; a session's claims go with it. What it tells the
 * session goes through the hooks of its config: a call's end (d, or else
 * x), and a whole-output file that is now the session's.
 */
struct client_call;
struct exec_spawn;
struct exec_done;
struct exec_exit;
struct event_base;
struct session_client_config {
	struct event_base *base;
	int kill_grace_ms;       /* a block tool's, once cancelled */
	int client_grace_ms;     /* a call whose name nobody serves */
	const char *output_dir;  /* whole-output files */
	void (*finish)(struct exec_tool *, const struct exec_done *,
	    const struct exec_exit *);
	void (*keep_file)(struct session *, const char *path, uint64_t bytes,
	    const char *tool_use_id);
};
void session_client_init(const struct session_client_config *);
struct client_call *session_client_start(struct session *, struct exec_tool *,
    const struct exec_spawn *);
void session_client_cancel(struct client_call *);
/* Its tool is done with it (session_tool_done): freed, nobody told. */
void session_client_drop(struct client_call *);
void session_client_free(struct session *);
/* status: what a client's call is doing (runner, elapsedMs, waiting). */
void session_client_describe(const struct client_call *, json_t *);
/* A reload: a call into its handover record, and back in the next image. */
void session_client_save(const struct client_call *, json_t *);
struct client_call *session_client_adopt(struct session *, struct exec_tool *,
    const json_t *);
/*
 * MCP servers (session_mcp.c): the ToolDef of an mcp__SERVER__TOOL name,
 * EXEC_SPAWN and EXEC_KILL of one of their calls, and what a closing
 * session lets go. The end goes through the same hooks as a client's
 * (finish, keep_file).
 */
struct session_mcp;
struct mcp_run;
struct sandbox_spec;
/* What session_mcp.c needs of session.c, given as hooks (no circle). */
struct session_mcp_config {
	struct session_client_config client; /* base, output_dir, finish,
	                                        keep_file */
	/* A tool's sandbox as a spawn gets it; the session's env. */
	void (*sandbox)(struct session *, const struct exec_spawn *,
	    struct sandbox_spec *, const char **roots);
	char **(*env_strings)(struct session *);
	/* A notification of the session's own (sessionId, seq added; stolen). */
	void (*emit)(struct session *, const char *method, json_t *params);
	/* s->journal grew (its MCP servers): the journal gets it again. */
	void (*rejournal)(struct session *);
	/* A closing session's last server is gone: it may finish. */
	void (*gone)(struct session *);
	int64_t start_timeout_ms; /* --mcp-start-timeout-ms; 0: default */
};
void session_mcp_init(const struct session_mcp_config *);
struct tooldef *session_mcp_tool(struct session *, const char *name);
void session_mcp_tools_json(struct session *, json_t *tools);
struct mcp_run *session_mcp_call(struct session *, struct exec_tool *,
    const struct exec_spawn *);
void session_mcp_cancel(struct mcp_run *);
void session_mcp_drop(struct mcp_run *);
/* status: runner mcp, its server, elapsedMs, whether it waits for it. */
void session_mcp_describe(const struct mcp_run *, json_t *);
void session_mcp_free(struct session *);
/*
 * A live reload: whether the call goes on in the next image (its server
 * is handed over), its part of the tool's record, and each session's
 * servers into the handover (JOURNAL_MCP). In the next image, once every
 * record is read: the servers adopted or started, then each call taken
 * back (NULL never: a call whose server did not come back ends killed),
 * then the calls no tool took cancelled.
 */
bool session_mcp_carried(const struct mcp_run *);
void session_mcp_save(const struct mcp_run *, json_t *);
void session_mcp_handover(struct session *);
struct handover_in;
void session_mcp_restored(struct session *, const struct handover_in *,
    size_t);
struct mcp_run *session_mcp_adopt(struct session *, struct exec_tool *,
    const json_t *);
void session_mcp_adopted(struct session *);
/*
 * closeSession: its servers' stdin closes, then TERM, KILL (S18); whether
 * every one is gone (the reply waits for that, as for a tool's process).
 */
void session_mcp_close(struct session *);
bool session_mcp_gone(const struct session *);


/*
 * Hooks (session_hook.c, below session.c): the executor's hook phases, a
 * tool's hooks killed (EXEC_HOOKS_CANCEL), SessionEnd, and what a session
 * lets go. What it needs of the session comes through its ops: the
 * session's env as "K=V" (hooks get it too), and a word that the hooks of
 * a tool have decided (the session may have become idle). The shell env
 * file, the session's own or the daemon's, is session_shell.c's.
 */
struct session_hook;
struct session_hook_ops {
	char **(*env)(struct session *);
	void (*decided)(struct session *);
};
void session_hook_init(const struct session_hook_ops *);
/*
 * The operator's hooks and own (createSession's "hooks" object, checked;
 * NULL: none) for s; start: SessionStart runs (not for a session a
 * restart or reload makes again). Its own, as given, for the journal.
 */
void session_hook_attach(struct session *, const json_t *own, bool start);
const json_t *session_hook_own(const struct session *);
bool session_hook_phase(void *, struct exec_tool *, enum exec_hook_phase,
    bool);
void session_hook_cancel(struct session *, struct exec_tool *);
void session_hook_end(struct session *);
void session_hook_free(struct session *);
const char *session_shell_env_file(const struct session *);

#endif
