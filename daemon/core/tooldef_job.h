/*
 * The job fields of a ToolDef (doc/design.md §7, Jobs): whether a call runs
 * on as a job, how long its result waits, its stdin and its terminal, and
 * the tools the daemon answers itself. Pure, like tooldef.c.
 */
#ifndef STEXEC_TOOLDEF_JOB_H
#define STEXEC_TOOLDEF_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define TOOLDEF_YIELD_MAX_MS 600000
#define TOOLDEF_TTY_MAX 1000

enum tooldef_internal {
	TOOLDEF_INTERNAL_NONE,
	TOOLDEF_INTERNAL_JOB_OUTPUT,  /* "job_output": bash_output */
	TOOLDEF_INTERNAL_JOB_KILL,    /* "job_kill": kill_shell */
	TOOLDEF_INTERNAL_SHELL,       /* "shell": bash_session */
};

struct tooldef_job {
	bool background;
	char *background_field;  /* backgroundFromInput */
	int64_t yield_ms;
	char *yield_field;       /* yieldFromInput */
	bool stdin_stream;       /* stdin: "stream" */
	bool tty;
	char *tty_field;         /* ttyFromInput */
	unsigned cols, rows;     /* ttySize */
	enum tooldef_internal internal;
};

/* What one call gets: the fields above with its input applied. */
struct tooldef_job_call {
	bool background;
	int64_t yield_ms;
	bool stdin_stream;
	bool tty;
	unsigned cols, rows;
	enum tooldef_internal internal;
};

/* Parse the fields of obj; false with err naming the bad one. */
bool tooldef_job_parse(const json_t *obj, struct tooldef_job *, char *err,
    size_t errlen);
void tooldef_job_clear(struct tooldef_job *);
/* Add the fields that differ from their defaults to a listTools object. */
void tooldef_job_json(const struct tooldef_job *, json_t *);
void tooldef_job_call(const struct tooldef_job *, const json_t *input,
    struct tooldef_job_call *);
const char *tooldef_internal_name(enum tooldef_internal);

#endif
