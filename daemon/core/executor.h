/*
 * The executor core (doc/design.md §2): one session's turns as a sans-I/O state
 * machine. Events come in as calls (a tool was added, a process ended, the
 * client aborted...); what must happen goes out as effects through one
 * callback: start this tool's process, kill it, send this notification,
 * answer this drain. It knows no sockets, pids, clocks or event loops.
 *
 * Effect callbacks must not call back into the executor; everything an
 * event causes is emitted before the call that delivered the event returns.
 */
#ifndef STEXEC_EXECUTOR_H
#define STEXEC_EXECUTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "output.h"
#include "core/tooldef.h"
#include "core/tooldef_job.h"

#define EXEC_MAX_PARALLEL_DEFAULT 10
#define EXEC_MAX_PARALLEL_LIMIT 256
#define EXEC_INTERRUPT_MESSAGE \
	"<tool_use_error>Interrupted by user</tool_use_error>"
/*
 * A tool_result whose content is longer comes as an object (params), not
 * as text: the session encodes such a content in slices, across loop
 * passes, so that one long result holds nobody up.
 */
#define EXEC_RESULT_TEXT_MAX (64 * 1024)

struct exec;
struct exec_tool;

enum exec_hook_phase {
	EXEC_HOOK_PRE,        /* PreToolUse */
	EXEC_HOOK_PERMISSION, /* PermissionRequest, before asking (S13) */
	EXEC_HOOK_POST,       /* PostToolUse, or PostToolUseFailure */
};

enum exec_status {
	EXEC_QUEUED,
	EXEC_WAITING_PERMISSION,
	EXEC_EXECUTING,
	EXEC_COMPLETED, /* result held until every earlier one is delivered */
	EXEC_DELIVERED,
	EXEC_HOOKS,     /* its hooks run (exec_config.hooks): in its slot */
};

enum exec_effect_kind {
	EXEC_SPAWN,      /* start the tool's process as spawn says */
	EXEC_KILL,       /* kill its process group; exec_exited follows */
	EXEC_NOTIFY,     /* method + params (or params_text); the session
	                    adds sessionId, seq */
	EXEC_DRAIN_DONE, /* answer the drain with this cookie */
	EXEC_OUTPUT,     /* send a streamOutput chunk as progress {stream,
	                    text}: the session encodes the raw text itself */
	EXEC_HOOKS_CANCEL, /* kill its hooks: no exec_hooks_done follows */
};

/* Everything EXEC_SPAWN needs to start a tool's process. */
struct exec_spawn {
	char *const *argv;
	const json_t *input;   /* written to stdin as compact JSON */
	const char *cwd;       /* the session's, as context modifiers left it */
	const json_t *env;     /* the tool's own variables over the session's
	                          (exec_env); NULL when it has none */
	int64_t timeout_ms;    /* <= 0: none */
	size_t max_output;     /* kept whole up to this, then head + tail */
	bool stream_output;
	const char *name;
	bool safe;             /* concurrency-safe for this input */
	const struct tooldef_sandbox *sandbox; /* the ToolDef's */
	const struct tooldef_limits *limits; /* the ToolDef's; 0: none given */
	const struct tooldef_job_call *job; /* job, stdin, terminal, internal
	                          (tooldef_job.h) for this call */
	const char *stdin_early; /* written to its stdin before it started
	                          (exec_stdin_early): after the input */
	size_t stdin_early_len;
	bool stdin_early_eof;  /* ...and its stdin closed after them */
};

struct exec_effect {
	enum exec_effect_kind kind;
	struct exec_tool *tool; /* SPAWN, KILL; NOTIFY of a tool_result */
	const struct exec_spawn *spawn; /* SPAWN: valid during the call */
	const char *method;     /* NOTIFY */
	json_t *params;         /* NOTIFY: borrowed for the call; NULL when */
	const char *params_text; /* they come encoded (a compact JSON object,
	                           borrowed): tool_status and state, several a
	                           tool, and most tool_results are built
	                           without jansson objects */
	size_t params_len;
	const char *reason;     /* NOTIFY of a tool_result: its meta.reason */
	int64_t duration_ms;    /* ...and meta.durationMs */
	void *cookie;           /* DRAIN_DONE */
	uint64_t turn;          /* DRAIN_DONE: the drained turn */
	unsigned results;       /* DRAIN_DONE: results that turn delivered */
	int error;              /* DRAIN_DONE: 0, or STEXEC_ERR_STATE */
	int fd;                 /* OUTPUT: 1 stdout, 2 stderr */
	const char *text;       /* OUTPUT: raw bytes, not checked as UTF-8 */
	size_t text_len;
};

struct exec_config {
	unsigned max_parallel;         /* 1..256; 0 means the default */
	const char *interrupt_message; /* NULL means the default */
	void (*effect)(void *arg, const struct exec_effect *);
	void *arg;
	/*
	 * May be NULL. Vets the session's cwd before t starts (moved false)
	 * and after t's context modifiers changed it (moved true): NULL keeps
	 * it, else the directory it becomes, and t's output gets the line
	 * "Shell cwd was reset to DIR". Must not call into the executor.
	 */
	const char *(*cwd_check)(void *arg, struct exec_tool *t,
	    const char *cwd, bool moved);
	/*
	 * May be NULL. A tool reaches a hook phase (README, "Hooks"): in its
	 * slot, after safety was decided (S2), before permission (S13) and
	 * the call, with its result (POST only: failed says whether it is an
	 * error, exec_tool_result gives it). True: the I/O layer started
	 * hooks, and exec_hooks_done follows, from the event loop, unless
	 * EXEC_HOOKS_CANCEL comes first. Must not call into the executor.
	 */
	bool (*hooks)(void *arg, struct exec_tool *t, enum exec_hook_phase,
	    bool failed);
};

/*
 * cwd and env (an object of strings) are the session's starting context.
 * env is shared, not copied (it is copied if a context modifier changes
 * it): the caller must not change it afterwards. The config's
 * interrupt_message must outlive the executor.
 */
struct exec *exec_new(const struct exec_config *, const char *cwd,
    const json_t *env);
/* Only once exec_busy() is false: no process may still refer to a tool. */
void exec_free(struct exec *);

/* What addTool answers; tool is NULL once the turn has ended (S12). */
struct exec_added {
	struct exec_tool *tool;
	uint64_t turn;
	enum exec_status status;
	bool safe;
};

/*
 * A tool_use block arrived. def is NULL when the session knows no tool of
 * that name (S1). Returns 0, or STEXEC_ERR_DUPLICATE_TOOL_USE. out may be
 * NULL. input is kept by reference: neither side may change it afterwards
 * (whoever needs it changed works on a copy, as a hook's updatedInput).
 */
int exec_add(struct exec *, const char *id, const char *name,
    struct tooldef *def, const json_t *input, struct exec_added *out);
/* A line the tool wrote to its progress fd, parsed (S6, S14). */
void exec_progress_line(struct exec_tool *, const char *line, size_t len);
/*
 * A chunk of stdout or stderr of a streamOutput tool, as the caller cut it
 * (at character boundaries: see utf8_carry): one EXEC_OUTPUT effect.
 */
void exec_output_chunk(struct exec_tool *, int fd, const char *data,
    size_t len);
/*
 * How a tool's process ended, in the core's own words: the supervisor's
 * report is translated by the session, so the core knows nothing of it.
 */
enum exec_end {
	EXEC_END_EXITED,       /* exited by itself: see status */
	EXEC_END_SIGNALED,     /* died of a signal nobody here sent */
	EXEC_END_TIMED_OUT,    /* killed by its timeout */
	EXEC_END_KILLED,       /* killed on our request, or at shutdown */
	EXEC_END_SPAWN_FAILED, /* never ran: see error */
	EXEC_END_MEMORY_LIMIT, /* killed over its memory limit (limit) */
	EXEC_END_PROCESS_LIMIT, /* killed over its process limit (limit) */
};

struct exec_exit {
	enum exec_end end;
	int status;            /* exit code, EXEC_END_EXITED */
	int signal;            /* terminating signal, when there was one */
	int64_t duration_ms;
	const char *error;     /* EXEC_END_SPAWN_FAILED: why */
	struct output output;  /* valid during the call only */
	const char *output_error; /* the whole content could not be saved */
	uint64_t limit;        /* the limit it went over */
	bool peak_measured;
	uint64_t peak_memory;  /* bytes, when peak_measured */
	bool cpu_measured;
	uint64_t cpu_ms;       /* user + system, when cpu_measured */
	json_t *network;       /* meta.network (borrowed); NULL: no rules */
};

/* The tool's process has ended and every process of it is dead. */
void exec_exited(struct exec_tool *, const struct exec_exit *);
/*
 * A tool without a process of its own (tooldef_runner: a client's, an MCP
 * server's) ended with this result. EXEC_SPAWN started it and EXEC_KILL
 * asked to cancel it; one that was killed, discarded or timed out ends
 * instead with exec_exited (EXEC_END_KILLED, EXEC_END_TIMED_OUT), or here,
 * which then gives the words a killed process gets.
 */
struct exec_done {
	const json_t *content; /* a string or checked content blocks
	                          (content.h), within the tool's bounds */
	bool is_error;
	const json_t *meta;    /* NULL, or members added to the result's meta */
	int64_t duration_ms;
	/*
	 * Or, instead of content, text over the tool's maxResultBytes as a
	 * process's output is kept (S17): head, tail and the file, shown in
	 * the same words.
	 */
	const struct output *output;
	const char *output_error;
};
void exec_finish(struct exec_tool *, const struct exec_done *);
/* A progress notification with this data (S6), for such a tool. */
void exec_progress(struct exec_tool *, const json_t *data);
/*
 * The tool's process runs on as a job of the session (doc/design.md §7,
 * Jobs): the tool completes now with reason "background", this content and
 * meta.job (stolen); the process is no longer the turn's (abort, discard
 * and S3 forget it) and exec_exited must not follow. Only for a tool whose
 * process runs and that nobody is killing (exec_tool_detachable).
 */
void exec_detach(struct exec_tool *, char *content, json_t *job);
/*
 * writeStdin before the start (extension): bytes for the stdin of a tool
 * queued or waiting for permission whose call streams its stdin (stdin
 * "stream", or a terminal), held until EXEC_SPAWN hands them over after
 * its input; eof closes it after them. A tool that completes without
 * them reaching a process (never started, or its spawn failed) says so
 * in meta.warnings. EXEC_STDIN_FULL: the held bytes would exceed max.
 */
enum exec_stdin {
	EXEC_STDIN_OK,
	EXEC_STDIN_NOT_QUEUED,   /* it started or completed */
	EXEC_STDIN_NOT_STREAMED, /* its call writes the input, then EOF */
	EXEC_STDIN_CLOSED,       /* eof was given */
	EXEC_STDIN_FULL,
};
int exec_stdin_early(struct exec_tool *, const char *, size_t, bool eof,
    size_t max);
/* What it holds of them (a reload's handover), NULL when nothing. */
const char *exec_tool_stdin_early(const struct exec_tool *, size_t *len,
    bool *eof);
/*
 * {toolUseId: bytes} of the current turn's tools holding early stdin
 * (new reference): what a discard drops.
 */
json_t *exec_stdin_early_held(const struct exec *);
/* The current turn's tool of that id, or NULL. */
struct exec_tool *exec_find(const struct exec *, const char *id);
bool exec_tool_detachable(const struct exec_tool *);
/*
 * Whether exec_exited will name x's output file in the result: not for a
 * tool killed, interrupted or discarded (its file has no reader).
 */
bool exec_exit_uses_output(const struct exec_tool *, const struct exec_exit *);
/* abort: hard false is "interrupt" (S8), true is "cancel" (S9). */
void exec_abort(struct exec *, bool hard);
/* S11. Returns the number of the discarded turn. */
uint64_t exec_discard(struct exec *);
/* S12: EXEC_DRAIN_DONE with this cookie once the turn has ended. */
void exec_drain(struct exec *, void *cookie);
/*
 * S13. Returns 0, STEXEC_ERR_INVALID_PARAMS when the turn has no such tool,
 * or STEXEC_ERR_STATE when it is not waiting for permission.
 */
int exec_permission(struct exec *, const char *id, bool allow,
    const char *message);
/*
 * After a crash or a reload (doc/design.md §7, Restart): a fresh executor resumes at this
 * turn, whose tools were added before. Those whose results were delivered
 * keep their place; a held result or a tool that never started comes back
 * as it was (a reload); every other one completes now with
 * daemon_restarted (its processes died with the daemon), and the results
 * go out in order.
 */
struct exec_restored {
	const char *id;
	const char *name;
	bool delivered;
	/*
	 * After a reload (SIGHUP) rather than a crash, a tool may also be:
	 * completed, its result (params of tool_result) held for ordering;
	 * or one that never started (requeue), added again with its def
	 * and input, to run now.
	 */
	const json_t *result;
	bool requeue;
	struct tooldef *def;
	const json_t *input;
	/*
	 * Or one whose process the reload handed over: executing as it was
	 * (def and input as for requeue), killed_for what it was told to be
	 * killed for (exec_tool_killed), or -1.
	 */
	bool running;
	int killed_for;
	/* A requeued tool's early stdin (exec_stdin_early), again. */
	const char *stdin_early;
	size_t stdin_early_len;
	bool stdin_early_eof;
};
void exec_restore(struct exec *, uint64_t turn, const struct exec_restored *,
    size_t);
/*
 * The id of the current turn's i-th tool with its status, input and held
 * result (COMPLETED); NULL past the end. For a reload's handover: a tool
 * in its PostToolUse phase is COMPLETED with its result as it stands, one
 * in an earlier hook phase is HOOKS (it starts again, hooks and all).
 */
const char *exec_turn_tool_state(const struct exec *, size_t,
    enum exec_status *, const json_t **input, const json_t **result);
/* The id (and *name) of the current turn's i-th tool; NULL past the end. */
const char *exec_turn_tool(const struct exec *, size_t, const char **name);
/*
 * A reload: a tool of a discarded turn whose process was handed over; it
 * runs on unseen (S11) and counts for S3 until it ends.
 */
struct exec_tool *exec_restore_orphan(struct exec *, const char *id,
    const char *name, struct tooldef *, const json_t *input, int killed_for);
/* The current turn's tool of that id, or NULL. */
struct exec_tool *exec_turn_find(struct exec *, const char *id);
/*
 * A reload: the current turn's abort (S8, S9) and error (S7) state as
 * {abort, errored}, or NULL when it has neither (new reference); and in the
 * next image, given before exec_restore, that state again: tools not yet
 * started complete as they would have, and later ones never start.
 */
json_t *exec_turn_flags(const struct exec *);
void exec_restore_flags(struct exec *, const json_t *);
/* A running tool's context modifiers not yet applied (S14), for a reload. */
const json_t *exec_tool_context(const struct exec_tool *);
void exec_tool_set_context(struct exec_tool *, const json_t *);
/* The cookies of the drains the current turn holds (for a reload). */
size_t exec_drains(const struct exec *, void *const **cookies);
/* What a tool's hooks decided, for exec_hooks_done. */
enum exec_hook_decision {
	EXEC_HOOK_NONE,
	EXEC_HOOK_ALLOW,  /* no permission asked */
	EXEC_HOOK_ASK,    /* a permission_request, with the reason */
	EXEC_HOOK_DENY,   /* PRE: an error result; PERMISSION: S13's deny */
};
struct exec_hooks_done {
	const char *name;             /* the tool's name in hooks' words
	                                 (Bash for bash); NULL: its own */
	enum exec_hook_decision decision;
	const char *reason;
	const json_t *updated_input;  /* PRE, PERMISSION: checked again
	                                 against the schema; safety stays */
	const char *context;          /* additionalContext for the model */
	bool blocked;                 /* POST: reason goes to the model */
	const json_t *updated_output; /* POST: the new content */
	const json_t *runs;           /* appended to meta.hooks.runs */
	bool stop;                    /* continue: false */
	const char *stop_reason;
};
void exec_hooks_done(struct exec_tool *, const struct exec_hooks_done *);
/* The phase of a tool in EXEC_HOOKS. */
enum exec_hook_phase exec_tool_hook_phase(const struct exec_tool *);

/* closeSession: kill every process, deliver nothing more, fail drains. */
void exec_close(struct exec *);

/* The arg of the exec_config. */
void *exec_arg(const struct exec *);
uint64_t exec_turn(const struct exec *);
/* Tools added to the current turn. */
unsigned exec_turn_size(const struct exec *);
bool exec_interruptible(const struct exec *);
/* Tools of the current turn whose result is not delivered yet. */
unsigned exec_unfinished(const struct exec *);
/* Tools of the current turn waiting for their turn to start (S3, S4). */
unsigned exec_queued(const struct exec *);
/* Some tool of this session still has a process. */
bool exec_busy(const struct exec *);
/*
 * The status reply: {turn, interruptible, tools:[...]}; describe (may be
 * NULL) adds what the I/O layer knows of a tool with a process (its pid...).
 */
json_t *exec_status_json(const struct exec *,
    void (*describe)(struct exec_tool *, json_t *));
const char *exec_cwd(const struct exec *);
/* Changes whenever the session's cwd or env changes. */
unsigned exec_context_gen(const struct exec *);
/* A restart or reload: the cwd and env context modifiers had left. */
void exec_restore_context(struct exec *, const char *cwd, const json_t *env);
const json_t *exec_env(const struct exec *);
/* Changes whenever the session's env changes (S14), for caches of it. */
unsigned exec_env_gen(const struct exec *);

struct exec *exec_tool_exec(const struct exec_tool *);
const char *exec_tool_id(const struct exec_tool *);
const char *exec_tool_name(const struct exec_tool *);
/* Its ToolDef; NULL for an unknown tool. */
struct tooldef *exec_tool_def(const struct exec_tool *);
uint64_t exec_tool_turn(const struct exec_tool *);
const char *exec_status_name(enum exec_status);
bool exec_tool_safe(const struct exec_tool *);
/* Its timeout, fixed when it was added (S16). */
int64_t exec_tool_timeout_ms(const struct exec_tool *);
const json_t *exec_tool_input(const struct exec_tool *);
/*
 * A completed tool's tool_result params (for its PostToolUse hooks),
 * until delivered; NULL before or after. Made an object on first use.
 */
const json_t *exec_tool_result(struct exec_tool *);
/* It has a process: spawned (or handed over), its end not yet seen. */
bool exec_tool_running(const struct exec_tool *);
/* Its turn was discarded (or the session closed) while it ran. */
bool exec_tool_discarded(const struct exec_tool *);
/* Why it was told to be killed (an opaque reason), or -1. */
int exec_tool_killed(const struct exec_tool *);
/*
 * The same in words, for whoever is told to cancel it: "interrupt" (S8),
 * "abort" (S9, or a denial, S13), "sibling_error" (S7), "discard" (S11),
 * "closed" (closeSession); NULL when nobody told it to end.
 */
const char *exec_tool_kill_reason(const struct exec_tool *);
/* The I/O layer's handle for the tool's process. */
void exec_tool_set_handle(struct exec_tool *, void *);
void *exec_tool_handle(const struct exec_tool *);
/*
 * Stamps the I/O layer keeps with a tool (times, for the metrics; the
 * core reads no clock and never looks at them): a new tool takes the
 * executor's add stamp, set just before exec_add, since exec_add may
 * already start it. 0: not stamped.
 */
enum exec_stamp {
	EXEC_STAMP_ADDED,
	EXEC_STAMP_STARTED,
	EXEC_STAMP_ENDED,
	EXEC_NSTAMPS,
};
void exec_set_add_stamp(struct exec *, uint64_t);
uint64_t exec_tool_stamp(const struct exec_tool *, enum exec_stamp);
void exec_tool_set_stamp(struct exec_tool *, enum exec_stamp, uint64_t);

#endif
