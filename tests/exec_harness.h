/*
 * Drives the executor core with scripted events and records every effect
 * as a short line, so tests read as "this happened, then this".
 *   spawn ID | kill ID | status ID executing|completed | progress ID DATA
 *   result ID REASON CONTENT | permission ID | state 0|1 [ID,...]
 *   turn_end N drained|discarded | drain N results=K | drain N error=E
 */
#ifndef STEXEC_EXEC_HARNESS_H
#define STEXEC_EXEC_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/executor.h"

struct harness {
	struct exec *ex;
	char **log;
	size_t nlog, cap;
	size_t seen;            /* lines already checked by h_expect */
	struct tooldef *defs[32];
	size_t ndefs;
	/* What the fake supervisor holds: tools with a process. */
	struct exec_tool *running[4096];
	size_t nrunning;
	json_t *last_result;    /* params of the last tool_result */
};

struct harness *h_new(unsigned max_parallel, const char *interrupt_message);
void h_free(struct harness *);

/* The test tool set; see exec_harness.c for each definition. */
struct tooldef *h_def(struct harness *, const char *name);

/* addTool: name may be unknown; input is JSON text (NULL: {}). */
struct exec_tool *h_add(struct harness *, const char *id, const char *name,
    const char *input);
int h_add_rc(struct harness *, const char *id, const char *name,
    const char *input);
/* The tool's process ends by itself. */
void h_exit(struct harness *, struct exec_tool *, int status,
    const char *output);
void h_signal(struct harness *, struct exec_tool *, int sig);
void h_timeout(struct harness *, struct exec_tool *, const char *output);
void h_spawn_failed(struct harness *, struct exec_tool *, const char *why);
/* The supervisor reports a killed tool dead (after an EXEC_KILL). */
void h_killed(struct harness *, struct exec_tool *);
/* A tool without a process (runner client) ends with this content. */
void h_finish(struct harness *, struct exec_tool *, const char *content_json,
    bool is_error);
/* Exit with a full struct exec_exit. */
void h_exit_with(struct harness *, struct exec_tool *,
    const struct exec_exit *);
struct exec_tool *h_find(struct harness *, const char *id);
bool h_is_running(struct harness *, struct exec_tool *);

/* Compare the lines logged since the last call with the NULL-ended list. */
void h_expect(struct harness *, const char *, ...);
/* Forget lines not yet checked. */
void h_skip(struct harness *);
/* Does any unchecked line equal s? */
bool h_logged(struct harness *, const char *);

#endif
