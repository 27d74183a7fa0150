/*
 * Tool definitions (doc/design.md §4): parsing and validating a ToolDef, and the
 * per-call questions the executor asks of one (is this input valid, is it
 * concurrency-safe, what argv and timeout does it get). Pure: no I/O.
 */
#ifndef STEXEC_TOOLDEF_H
#define STEXEC_TOOLDEF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOOLDEF_TIMEOUT_DEFAULT 120000
#define TOOLDEF_MAX_TIMEOUT_DEFAULT 600000
#define TOOLDEF_MAX_RESULT_DEFAULT 100000
/* The daemon's --max-result-bytes: no maxResultBytes may exceed it. */
#define TOOLDEF_RESULT_CEILING_DEFAULT (16 * 1024 * 1024)

enum tooldef_interrupt {
	TOOLDEF_BLOCK,
	TOOLDEF_CANCEL,
};

/*
 * sandbox (extension, doc/design.md §7): a profile, ordered from the
 * weakest to the strictest, so that a floor is a comparison. UNSET leaves
 * the choice to the session and the daemon.
 */
enum tooldef_sandbox_mode {
	TOOLDEF_SANDBOX_UNSET,
	TOOLDEF_SANDBOX_NONE,
	TOOLDEF_SANDBOX_WORKSPACE_WRITE,
	TOOLDEF_SANDBOX_READ_ONLY,
};
#define TOOLDEF_MAX_ROOTS 16

/* A ToolDef's or a session's sandbox field. */
struct netpolicy;

struct tooldef_sandbox {
	enum tooldef_sandbox_mode mode;
	int network;        /* -1: not said; 0, 1; TOOLDEF_NETWORK_RULES */
	struct netpolicy *policy; /* network: {allow, deny}, else NULL */
	json_t *roots;      /* writableRoots: absolute paths; NULL: none */
};
/* network is an allow-list, reached through the daemon's proxy. */
#define TOOLDEF_NETWORK_RULES 2

/* limits (extension): 0 where the ToolDef gives none (the daemon's applies). */
struct tooldef_limits {
	uint64_t memory_bytes;
	uint64_t max_processes;
	uint64_t cpu_percent;   /* of one CPU: 200 is two CPUs */
};
#define TOOLDEF_MEMORY_MIN (1024 * 1024)
#define TOOLDEF_MEMORY_MAX (1ULL << 50)
#define TOOLDEF_PROCESSES_MAX 4194304
#define TOOLDEF_CPU_PERCENT_MAX 100000

/*
 * Set the ceiling of maxResultBytes (once, at start): a larger value is
 * refused, and the default is lowered to it.
 */
void tooldef_set_result_ceiling(size_t);
size_t tooldef_result_ceiling(void);

/* Reference-counted and immutable once parsed. */
struct tooldef;

/*
 * Who runs a call (runner, extension): a process the daemon spawns (the
 * command), the client connection that serves the name (serveTools), or an
 * MCP server of the session. The last is the daemon's own: a client
 * cannot define one.
 */
enum tooldef_runner {
	TOOLDEF_RUNNER_PROCESS,
	TOOLDEF_RUNNER_CLIENT,
	TOOLDEF_RUNNER_MCP,
};

/*
 * Parse a ToolDef object. On error returns NULL and writes a message that
 * names the bad field into err, e.g. "command[1]: must be a string".
 */
struct tooldef *tooldef_parse(const json_t *, char *err, size_t errlen);
/*
 * The same for a definition the daemon makes itself, with this runner
 * whatever the object says (an MCP server's tool: no command).
 */
struct tooldef *tooldef_parse_runner(const json_t *, enum tooldef_runner,
    char *err, size_t errlen);
enum tooldef_runner tooldef_runner(const struct tooldef *);
struct tooldef *tooldef_ref(struct tooldef *);
void tooldef_unref(struct tooldef *);

const char *tooldef_name(const struct tooldef *);
/*
 * The definition as listTools shows it: every field, defaults filled in.
 * A new object (a copy) owned by the caller.
 */
json_t *tooldef_json(const struct tooldef *);
enum tooldef_interrupt tooldef_interrupt(const struct tooldef *);
bool tooldef_abort_siblings(const struct tooldef *);
bool tooldef_requires_permission(const struct tooldef *);
bool tooldef_stream_output(const struct tooldef *);
const struct tooldef_sandbox *tooldef_sandbox(const struct tooldef *);
/*
 * Parse a sandbox field ("read-only", "workspace-write", "none", or
 * {mode, writableRoots?, network?}); false with err naming field.
 * tooldef_sandbox_clear frees what a parsed one holds.
 */
bool tooldef_parse_sandbox(const json_t *, const char *field,
    struct tooldef_sandbox *, char *err, size_t errlen);
void tooldef_sandbox_clear(struct tooldef_sandbox *);
/* dst holds what src holds, its own copy (src's roots, policy). */
void tooldef_sandbox_copy(struct tooldef_sandbox *dst,
    const struct tooldef_sandbox *);
json_t *tooldef_sandbox_json(const struct tooldef_sandbox *);
/* "read-only"...; UNSET: NULL. And back: UNSET for an unknown name. */
const char *tooldef_sandbox_name(enum tooldef_sandbox_mode);
enum tooldef_sandbox_mode tooldef_sandbox_mode(const char *);
const struct tooldef_limits *tooldef_limits(const struct tooldef *);
/*
 * Check a limits object (a ToolDef's, or the daemon's defaults given as
 * JSON); false with err naming the bad field.
 */
bool tooldef_parse_limits(const json_t *, struct tooldef_limits *,
    char *err, size_t errlen);
size_t tooldef_max_result_bytes(const struct tooldef *);
/* Its job fields (tooldef_job.h). */
struct tooldef_job;
const struct tooldef_job *tooldef_job(const struct tooldef *);
/* The definition's env object: string values (null unsets). Borrowed. */
const json_t *tooldef_env(const struct tooldef *);

/*
 * Check input against inputSchema and the {field} substitutions of command.
 * Returns true, or false with a readable detail in err (the text that goes
 * after "InputValidationError: ").
 */
bool tooldef_check_input(const struct tooldef *, const json_t *input,
    char *err, size_t errlen);

/* The concurrencySafe rule for this input; false when it cannot be evaluated. */
bool tooldef_is_safe(const struct tooldef *, const json_t *input);

/* timeoutMs, or the timeoutFromInput field clamped to maxTimeoutMs. */
int64_t tooldef_timeout_ms(const struct tooldef *, const json_t *input);

/*
 * The argv for this input with every "{field}" element substituted; NULL
 * with err set when a field is missing or null. Free with tooldef_argv_free.
 */
char **tooldef_argv(const struct tooldef *, const json_t *input, char *err,
    size_t errlen);
void tooldef_argv_free(char **);

#endif
