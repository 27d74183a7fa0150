/*
 * Claude Code's hooks (README, "Hooks"): command handlers an operator or a
 * session registers around tool calls, in the shape of Claude Code's
 * settings.json. Configuration, matching and the merging of decisions are
 * pure; running a hook is a supervised process (supervisor/proc.h). This
 * layer knows nothing of sessions or the executor: the session asks which
 * handlers an event selects, runs them, and applies the decision.
 */
#ifndef STEXEC_HOOKS_H
#define STEXEC_HOOKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Handlers one configuration may hold, and one event may select. */
#define HOOKS_MAX_HANDLERS 256
/* Characters of hook text (reasons, context) kept inline. */
#define HOOKS_TEXT_MAX 10000
/* Claude Code's default timeout for a command hook. */
#define HOOKS_TIMEOUT_DEFAULT_MS (600 * 1000)
/* Longest matcher or `if` rule, as rule patterns are bounded. */
#define HOOKS_PATTERN_MAX 1024

enum hooks_event {
	HOOKS_PRE_TOOL_USE,
	HOOKS_POST_TOOL_USE,
	HOOKS_POST_TOOL_USE_FAILURE,
	HOOKS_PERMISSION_REQUEST,
	HOOKS_SESSION_START,
	HOOKS_SESSION_END,
	HOOKS_NEVENTS,
};

const char *hooks_event_name(enum hooks_event);

struct hooks;
struct hooks_handler;

/* hooks_config.c: a configuration, its sources added up. */
struct hooks *hooks_new(void);
void hooks_free(struct hooks *);
/*
 * Add the "hooks" of a settings object (other keys are ignored). -1 with
 * err naming the place (e.g. "hooks.PreToolUse[0].hooks[1].timeout: must
 * be a positive number"); nothing is added then.
 */
int hooks_add_json(struct hooks *, const json_t *settings, char *err,
    size_t errlen);
/* The same from a file; err starts with its path. */
int hooks_add_file(struct hooks *, const char *path, char *err,
    size_t errlen);
/*
 * Every entry of src added to dst (shared, not copied). Always 0: each
 * source was capped at HOOKS_MAX_HANDLERS when it was added.
 */
int hooks_merge(struct hooks *dst, const struct hooks *src, char *err,
    size_t errlen);
/* Handlers configured for an event (before matching and deduplication). */
size_t hooks_count(const struct hooks *, enum hooks_event);

/* What an event is about: a tool (its stexec and Claude Code names). */
struct hooks_subject {
	const char *name;    /* stexec's name, or a session event's matcher
	                        value (SessionStart "startup") */
	const char *alias;   /* Claude Code's name (hookName), or NULL */
	const json_t *input; /* the tool's input, or NULL */
	const char *root;    /* the session root: `if` paths are against it */
	const char *cwd;     /* a relative path in the input is against it
	                        (NULL: the root) */
};
/*
 * The handlers of an event that match, in configuration order, each
 * distinct handler (command, shell, if) once: up to max in out. How many.
 * It remembers which events no matcher of a name matches (a cache: a
 * tool no hook matches costs one lookup).
 */
size_t hooks_select(const struct hooks *, enum hooks_event,
    const struct hooks_subject *, const struct hooks_handler **out,
    size_t max);
const char *hooks_handler_command(const struct hooks_handler *);
/* Its own timeout, or 0 for the default. */
int64_t hooks_handler_timeout_ms(const struct hooks_handler *);

/* hooks_match.c: a matcher as Claude Code documents it. */
struct hooks_matcher;
struct hooks_matcher *hooks_matcher_compile(const char *, char *err,
    size_t errlen);
void hooks_matcher_free(struct hooks_matcher *);
/* Whether it matches name (or alias, when not NULL). */
bool hooks_matcher_match(const struct hooks_matcher *, const char *name,
    const char *alias);
/* Claude Code's name of a built-in tool (bash: Bash), or NULL. */
const char *hooks_tool_alias(const char *name);
/*
 * A JavaScript-dialect regular expression, compiled and run by PCRE2
 * within match limits; also the engine of `if` globs. anchored: the
 * whole subject. match: 1, 0, or -1 when a limit stopped it.
 */
struct hooks_regex;
struct hooks_regex *hooks_regex_compile(const char *, bool anchored,
    char *err, size_t errlen);
void hooks_regex_free(struct hooks_regex *);
int hooks_regex_match(const struct hooks_regex *, const char *, size_t);

/* hooks_if.c: an `if` permission rule, such as Bash(rm *) or Edit(src/...). */
struct hooks_rule;
struct hooks_rule *hooks_rule_parse(const char *, char *err, size_t errlen);
void hooks_rule_free(struct hooks_rule *);
bool hooks_rule_match(const struct hooks_rule *,
    const struct hooks_subject *);
/*
 * The simple commands of a shell command line, across && || ; | & and
 * newlines, and inside $(), backticks and <(), each as its words joined by
 * one space, leading assignments and redirections left out. -1 when it
 * cannot be parsed. The strings are malloc'd: free with hooks_split_free.
 */
int hooks_shell_split(const char *, char ***cmds, size_t *n);
void hooks_split_free(char **, size_t);

/* hooks_decide.c: one hook's end, and what all of an event's decide. */
enum hooks_end {
	HOOKS_END_EXITED,
	HOOKS_END_TIMED_OUT, /* no decision */
	HOOKS_END_KILLED,    /* cancelled: no decision */
	HOOKS_END_FAILED,    /* could not be run */
};

struct hooks_outcome {
	const char *command;
	enum hooks_end end;
	int status;            /* exit code, HOOKS_END_EXITED */
	const char *out;       /* stdout */
	size_t out_len;
	const char *err;       /* stderr, or why it could not run */
	size_t err_len;
	int64_t duration_ms;
};

enum hooks_perm {
	HOOKS_PERM_NONE,
	HOOKS_PERM_ALLOW,
	HOOKS_PERM_ASK,
	HOOKS_PERM_DEFER,
	HOOKS_PERM_DENY,
};

struct hooks_decision {
	enum hooks_event event;
	enum hooks_perm perm;  /* PreToolUse, PermissionRequest */
	char *reason;          /* the deciding hook's reason, or NULL */
	json_t *updated_input; /* the first rewrite in configuration order */
	bool blocked;          /* PostToolUse(Failure): decision "block" or
	                          exit 2: reason goes to the model */
	json_t *updated_output; /* PostToolUse: the first replacement */
	char *context;         /* additionalContext of all, in order */
	bool stop;             /* continue: false */
	char *stop_reason;
	json_t *runs;          /* meta.hooks: [{event, command, durationMs,
	                          outcome, exitCode?, decision?}] */
	unsigned errors;       /* hooks that failed without blocking */
	unsigned missing;      /* of them, exit 127: a missing command */
	/* Text over HOOKS_TEXT_MAX characters: whole into a file, its path
	   returned (malloc'd) or NULL. NULL: the text is only cut. */
	char *(*spill)(void *arg, const char *text, size_t len);
	void *spill_arg;
};

void hooks_decision_init(struct hooks_decision *, enum hooks_event);
void hooks_decision_clear(struct hooks_decision *);
/* Fold one hook's outcome in; call in configuration order. */
void hooks_decide(struct hooks_decision *, const struct hooks_outcome *);
const char *hooks_perm_name(enum hooks_perm);

/* hooks_run.c: the selected handlers run in parallel, supervised. */
struct proc_user;
struct hooks_run_spec {
	enum hooks_event event;
	const json_t *input;     /* the event's JSON, written to stdin */
	const char *cwd;
	char *const *envp;       /* the session's environment */
	const char *project_dir; /* CLAUDE_PROJECT_DIR */
	const char *env_file;    /* CLAUDE_ENV_FILE (SessionStart), or NULL */
	int64_t timeout_ms;      /* a handler without its own; <= 0: 600 s */
	const char *spill_dir;   /* for texts over the cap; NULL: cut only */
	void (*arg_free)(void *); /* hooks_run_shutdown frees the arg so */
	const struct proc_user *user; /* run as this user (the session's);
	                          NULL: as the daemon */
};

struct hooks_run;
/*
 * Called once, from the event loop, when every hook has ended: the
 * combined decision, valid during the call. Never after hooks_run_cancel.
 */
typedef void hooks_done_fn(void *arg, const struct hooks_decision *);
/* n >= 1. The spec is copied. */
struct hooks_run *hooks_run_start(const struct hooks_handler *const *,
    size_t n, const struct hooks_run_spec *, hooks_done_fn *, void *arg);
/*
 * Kill every hook's process group; no callback follows. The run frees
 * itself once they are reaped.
 */
void hooks_run_cancel(struct hooks_run *);
/*
 * A reload hands no hook over: every hook's process group gets SIGKILL
 * now, and the next image reaps them (its tools' hooks run again there).
 */
void hooks_run_kill_all(void);
/*
 * After proc_shutdown (which ends processes without callbacks): every run
 * still held is freed, with arg_free for its arg.
 */
void hooks_run_shutdown(void);
/* Hook processes running now (metrics). */
unsigned hooks_running(void);

#endif
