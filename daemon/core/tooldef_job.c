/* The job fields of a ToolDef: parsed once, applied to each call's input. */
#include "core/tooldef_job.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "utf8.h"

static const char *tooldef_job_internals[] = { NULL, "job_output",
    "job_kill", "shell" };

static bool tooldef_job_fail(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static bool
tooldef_job_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return false;
}

/* A member, null being the same as absent (the default). */
static const json_t *
tooldef_job_get(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

static bool
tooldef_job_bool(const json_t *obj, const char *key, bool *out, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_job_get(obj, key);

	if (v != NULL && !json_is_boolean(v))
		return tooldef_job_fail(err, errlen, "%s: must be a boolean",
		    key);
	*out = json_is_true(v);
	return true;
}

/* An input field's name, like timeoutFromInput. */
static bool
tooldef_job_field(const json_t *obj, const char *key, char **out, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_job_get(obj, key);

	if (v == NULL)
		return true;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return tooldef_job_fail(err, errlen, "%s: must be a non-empty "
		    "string or null", key);
	*out = xstrdup(json_string_value(v));
	return true;
}

static bool
tooldef_job_int(const json_t *v, const char *key, int64_t min, int64_t max,
    int64_t *out, char *err, size_t errlen)
{
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return tooldef_job_fail(err, errlen, "%s: must be an integer "
		    "from %lld to %lld", key, (long long)min, (long long)max);
	*out = json_integer_value(v);
	return true;
}

static bool
tooldef_job_size(const json_t *v, struct tooldef_job *job, char *err,
    size_t errlen)
{
	int64_t cols, rows;

	if (!json_is_object(v) || json_object_size(v) != 2)
		return tooldef_job_fail(err, errlen, "ttySize: must be an "
		    "object {cols, rows}");
	if (!tooldef_job_int(json_object_get(v, "cols"), "ttySize.cols", 1,
	    TOOLDEF_TTY_MAX, &cols, err, errlen) ||
	    !tooldef_job_int(json_object_get(v, "rows"), "ttySize.rows", 1,
	    TOOLDEF_TTY_MAX, &rows, err, errlen))
		return false;
	job->cols = (unsigned)cols;
	job->rows = (unsigned)rows;
	return true;
}

bool
tooldef_job_parse(const json_t *obj, struct tooldef_job *job, char *err,
    size_t errlen)
{
	const json_t *v;
	size_t i;

	job->cols = 80;
	job->rows = 24;
	if (!tooldef_job_bool(obj, "background", &job->background, err,
	    errlen) ||
	    !tooldef_job_field(obj, "backgroundFromInput",
	    &job->background_field, err, errlen) ||
	    !tooldef_job_field(obj, "yieldFromInput", &job->yield_field, err,
	    errlen) ||
	    !tooldef_job_bool(obj, "tty", &job->tty, err, errlen) ||
	    !tooldef_job_field(obj, "ttyFromInput", &job->tty_field, err,
	    errlen))
		return false;
	if ((v = tooldef_job_get(obj, "yieldMs")) != NULL &&
	    !tooldef_job_int(v, "yieldMs", 0, TOOLDEF_YIELD_MAX_MS,
	    &job->yield_ms, err, errlen))
		return false;
	if ((v = tooldef_job_get(obj, "ttySize")) != NULL &&
	    !tooldef_job_size(v, job, err, errlen))
		return false;
	if ((v = tooldef_job_get(obj, "stdin")) != NULL) {
		if (json_is_string(v) && strcmp(json_string_value(v),
		    "stream") == 0)
			job->stdin_stream = true;
		else if (!json_is_string(v) || strcmp(json_string_value(v),
		    "input") != 0)
			return tooldef_job_fail(err, errlen, "stdin: must be "
			    "\"input\" or \"stream\"");
	}
	if ((v = tooldef_job_get(obj, "internal")) != NULL) {
		for (i = 1; i < nitems(tooldef_job_internals); i++)
			if (json_is_string(v) && strcmp(json_string_value(v),
			    tooldef_job_internals[i]) == 0)
				job->internal = (enum tooldef_internal)i;
		if (job->internal == TOOLDEF_INTERNAL_NONE)
			return tooldef_job_fail(err, errlen, "internal: must "
			    "be \"job_output\", \"job_kill\" or \"shell\"");
		if (json_object_get(obj, "command") != NULL)
			return tooldef_job_fail(err, errlen, "internal: a "
			    "tool the daemon answers has no command");
		if (job->background || job->background_field != NULL ||
		    job->tty || job->tty_field != NULL)
			return tooldef_job_fail(err, errlen, "internal: a "
			    "tool the daemon answers is never a job and has "
			    "no terminal");
	}
	return true;
}

void
tooldef_job_clear(struct tooldef_job *job)
{
	free(job->background_field);
	free(job->yield_field);
	free(job->tty_field);
	memset(job, 0, sizeof *job);
}

void
tooldef_job_json(const struct tooldef_job *job, json_t *o)
{
	if (job->background)
		json_object_set_new(o, "background", json_true());
	if (job->background_field != NULL)
		json_object_set_new(o, "backgroundFromInput",
		    json_string(job->background_field));
	if (job->yield_ms > 0)
		json_object_set_new(o, "yieldMs", json_integer(job->yield_ms));
	if (job->yield_field != NULL)
		json_object_set_new(o, "yieldFromInput",
		    json_string(job->yield_field));
	if (job->stdin_stream)
		json_object_set_new(o, "stdin", json_string("stream"));
	if (job->tty)
		json_object_set_new(o, "tty", json_true());
	if (job->tty_field != NULL)
		json_object_set_new(o, "ttyFromInput",
		    json_string(job->tty_field));
	if (job->tty || job->tty_field != NULL)
		json_object_set_new(o, "ttySize", json_pack("{s:i, s:i}",
		    "cols", (int)job->cols, "rows", (int)job->rows));
	if (job->internal != TOOLDEF_INTERNAL_NONE)
		json_object_set_new(o, "internal",
		    json_string(tooldef_internal_name(job->internal)));
}

void
tooldef_job_call(const struct tooldef_job *job, const json_t *input,
    struct tooldef_job_call *call)
{
	const json_t *v;
	double ms;

	call->background = job->background;
	if (job->background_field != NULL &&
	    json_is_true(json_object_get(input, job->background_field)))
		call->background = true;
	call->yield_ms = job->yield_ms;
	/* Like timeoutFromInput: a number, clamped; anything else ignored. */
	if (job->yield_field != NULL && json_is_number(v =
	    json_object_get(input, job->yield_field))) {
		ms = json_number_value(v);
		call->yield_ms = ms <= 0 ? 0 : ms >= TOOLDEF_YIELD_MAX_MS ?
		    TOOLDEF_YIELD_MAX_MS : (int64_t)ms;
	}
	call->tty = job->tty;
	if (job->tty_field != NULL &&
	    json_is_true(json_object_get(input, job->tty_field)))
		call->tty = true;
	call->cols = job->cols;
	call->rows = job->rows;
	/* A job's stdin stays open for writeJob. */
	call->stdin_stream = job->stdin_stream || call->background;
	call->internal = job->internal;
}

const char *
tooldef_internal_name(enum tooldef_internal i)
{
	return tooldef_job_internals[i];
}
