/* Tool definitions (doc/design.md §4): parsing a ToolDef, the per-call rules. */
#include "core/tooldef.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/netpolicy.h"
#include "core/pattern.h"
#include "core/schema.h"
#include "core/tooldef_job.h"
#include "utf8.h"
#include "util.h"

#define TOOLDEF_NAME_MAX 128
/* Keeps every millisecond and byte count far from overflow downstream. */
#define TOOLDEF_INT_MAX 2147483647

/* One element of command: literal text, or the input field replacing it. */
struct tooldef_arg {
	char *text;
	char *field; /* NULL for a literal */
};

static size_t tooldef_ceiling = TOOLDEF_RESULT_CEILING_DEFAULT;

struct tooldef {
	int refs;

	char *name;
	struct tooldef_arg *command;
	size_t ncommand;
	json_t *schema;

	bool safe;          /* the answer when there is no rule */
	bool has_rule;      /* concurrencySafe is {pointer, pattern} */
	char **pointer;     /* the pointer's reference tokens, decoded */
	size_t npointer;
	struct pattern *pattern; /* mutable: it keeps a match cache */

	enum tooldef_runner runner;
	enum tooldef_interrupt interrupt;
	bool abort_siblings;
	bool requires_permission;
	bool stream_output;
	struct tooldef_sandbox sandbox;
	struct tooldef_limits limits;
	int64_t timeout_ms;
	int64_t max_timeout_ms;
	char *timeout_field;
	size_t max_result_bytes;
	json_t *env;
	struct tooldef_job job;

	json_t *json; /* the whole definition, defaults filled in */
};

static void tooldef_fail(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void tooldef_free(struct tooldef *);
static const json_t *tooldef_get(const json_t *, const char *);
static bool tooldef_has_nul(const json_t *);
static const char *tooldef_placeholder(const char *);
static bool tooldef_parse_name(struct tooldef *, const json_t *, char *,
    size_t);
static bool tooldef_parse_command(struct tooldef *, const json_t *, char *,
    size_t);
static bool tooldef_parse_runner_field(struct tooldef *, const json_t *,
    bool, char *, size_t);
static bool tooldef_parse_schema(struct tooldef *, const json_t *, char *,
    size_t);
static bool tooldef_parse_pointer(struct tooldef *, const char *, char *,
    size_t);
static bool tooldef_parse_safe(struct tooldef *, const json_t *, char *,
    size_t);
static bool tooldef_parse_bool(const json_t *, const char *, bool *, char *,
    size_t);
static bool tooldef_parse_int(const json_t *, const char *, int64_t,
    int64_t *, char *, size_t);
static bool tooldef_parse_env(struct tooldef *, const json_t *, char *,
    size_t);
static json_t *tooldef_build_json(const struct tooldef *, const json_t *);
static const json_t *tooldef_resolve(const struct tooldef *, const json_t *);
static const json_t *tooldef_field(const char *, const json_t *, char *,
    size_t);

static void
tooldef_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	utf8_vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void
tooldef_free(struct tooldef *def)
{
	size_t i;

	free(def->name);
	for (i = 0; i < def->ncommand; i++) {
		free(def->command[i].text);
		free(def->command[i].field);
	}
	free(def->command);
	tooldef_job_clear(&def->job);
	json_decref(def->schema);
	for (i = 0; i < def->npointer; i++)
		free(def->pointer[i]);
	free(def->pointer);
	pattern_free(def->pattern);
	free(def->timeout_field);
	json_decref(def->env);
	json_decref(def->json);
	tooldef_sandbox_clear(&def->sandbox);
	free(def);
}

/* An optional field; null counts as absent, as many serializers write it. */
static const json_t *
tooldef_get(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* A C string cannot carry what an embedded NUL would cut off. */
static bool
tooldef_has_nul(const json_t *s)
{
	return strlen(json_string_value(s)) != json_string_length(s);
}

/* The field an element "{field}" names, or NULL for a literal. */
static const char *
tooldef_placeholder(const char *s)
{
	size_t len = strlen(s);

	if (len < 3 || s[0] != '{' || s[len - 1] != '}')
		return NULL;
	if (strcspn(s + 1, "{}") != len - 2)
		return NULL;
	return s + 1;
}

static bool
tooldef_parse_name(struct tooldef *def, const json_t *obj, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, "name");
	const char *s;

	if (v == NULL) {
		tooldef_fail(err, errlen, "name: required");
		return false;
	}
	if (!json_is_string(v)) {
		tooldef_fail(err, errlen, "name: must be a string");
		return false;
	}
	s = json_string_value(v);
	if (json_string_length(v) == 0) {
		tooldef_fail(err, errlen, "name: must not be empty");
		return false;
	}
	if (json_string_length(v) > TOOLDEF_NAME_MAX) {
		tooldef_fail(err, errlen, "name: must be at most %d characters",
		    TOOLDEF_NAME_MAX);
		return false;
	}
	if (tooldef_has_nul(v) || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(s)) {
		tooldef_fail(err, errlen, "name: may only contain A-Z, a-z, "
		    "0-9, '_', '.' and '-'");
		return false;
	}
	def->name = xstrdup(s);
	return true;
}

static bool
tooldef_parse_command(struct tooldef *def, const json_t *obj, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, "command"), *item;
	const char *field;
	size_t i;

	/* A tool the daemon answers itself runs nothing. */
	if (v == NULL && tooldef_get(obj, "internal") != NULL)
		return true;
	if (def->runner != TOOLDEF_RUNNER_PROCESS)
		return true;
	if (v == NULL) {
		tooldef_fail(err, errlen, "command: required");
		return false;
	}
	if (!json_is_array(v) || json_array_size(v) == 0) {
		tooldef_fail(err, errlen,
		    "command: must be a non-empty array of strings");
		return false;
	}
	json_array_foreach(v, i, item) {
		if (!json_is_string(item)) {
			tooldef_fail(err, errlen,
			    "command[%zu]: must be a string", i);
			return false;
		}
		if (tooldef_has_nul(item)) {
			tooldef_fail(err, errlen,
			    "command[%zu]: must not contain NUL characters", i);
			return false;
		}
	}
	if (json_string_length(json_array_get(v, 0)) == 0) {
		tooldef_fail(err, errlen, "command[0]: must not be empty");
		return false;
	}
	def->ncommand = json_array_size(v);
	def->command = xcalloc(def->ncommand, sizeof *def->command);
	json_array_foreach(v, i, item) {
		def->command[i].text = xstrdup(json_string_value(item));
		field = tooldef_placeholder(def->command[i].text);
		if (field != NULL) {
			def->command[i].field = xstrndup(field,
			    strlen(field) - 1);
		}
	}
	return true;
}

/* inputSchema must be a usable schema that accepts objects. */
static bool
tooldef_parse_schema(struct tooldef *def, const json_t *obj, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, "inputSchema"), *type, *t, *props;
	const char *field;
	char detail[512];
	bool object = false;
	size_t i;

	if (v == NULL) {
		def->schema = json_pack("{s:s}", "type", "object");
		return true;
	}
	if (!json_is_object(v)) {
		tooldef_fail(err, errlen, "inputSchema: must be an object");
		return false;
	}
	if (!schema_check(v, detail, sizeof detail)) {
		tooldef_fail(err, errlen, "inputSchema.%s", detail);
		return false;
	}
	if ((type = json_object_get(v, "type")) != NULL) {
		if (json_is_string(type))
			object = strcmp(json_string_value(type), "object") == 0;
		json_array_foreach(type, i, t)
			object |= strcmp(json_string_value(t), "object") == 0;
		if (!object) {
			tooldef_fail(err, errlen, "inputSchema.type: must "
			    "allow \"object\" (a tool's input is an object)");
			return false;
		}
	}
	/* A placeholder the schema forbids would make every call fail. */
	props = json_object_get(v, "properties");
	if (json_is_false(json_object_get(v, "additionalProperties"))) {
		for (i = 0; i < def->ncommand; i++) {
			field = def->command[i].field;
			if (field == NULL ||
			    json_object_get(props, field) != NULL)
				continue;
			tooldef_fail(err, errlen, "command[%zu]: \"%s\" names "
			    "no property of inputSchema", i,
			    def->command[i].text);
			return false;
		}
	}
	def->schema = json_deep_copy(v);
	return true;
}

/* RFC 6901: split on '/', then ~1 is '/' and ~0 is '~'. */
static bool
tooldef_parse_pointer(struct tooldef *def, const char *s, char *err,
    size_t errlen)
{
	const char *p, *end;
	char *token, *out;

	if (*s != '\0' && *s != '/') {
		tooldef_fail(err, errlen, "concurrencySafe.pointer: must be "
		    "\"\" or start with \"/\"");
		return false;
	}
	for (p = s; *p == '/'; p = end) {
		end = p + 1 + strcspn(p + 1, "/");
		token = out = xmalloc((size_t)(end - p));
		for (p++; p < end; p++) {
			if (*p != '~')
				*out++ = *p;
			else if (p + 1 < end && (p[1] == '0' || p[1] == '1'))
				*out++ = *++p == '0' ? '~' : '/';
			else {
				free(token);
				tooldef_fail(err, errlen,
				    "concurrencySafe.pointer: '~' must be "
				    "followed by 0 or 1");
				return false;
			}
		}
		*out = '\0';
		def->pointer = xreallocarray(def->pointer, def->npointer + 1,
		    sizeof *def->pointer);
		def->pointer[def->npointer++] = token;
	}
	return true;
}

static bool
tooldef_parse_safe(struct tooldef *def, const json_t *obj, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, "concurrencySafe"), *ptr, *pat;
	char detail[320];

	if (v == NULL || json_is_boolean(v)) {
		def->safe = json_is_true(v);
		return true;
	}
	if (!json_is_object(v)) {
		tooldef_fail(err, errlen, "concurrencySafe: must be a boolean "
		    "or an object {\"pointer\", \"pattern\"}");
		return false;
	}
	ptr = json_object_get(v, "pointer");
	pat = json_object_get(v, "pattern");
	if (ptr == NULL) {
		tooldef_fail(err, errlen, "concurrencySafe.pointer: required");
		return false;
	}
	if (!json_is_string(ptr) || tooldef_has_nul(ptr)) {
		tooldef_fail(err, errlen,
		    "concurrencySafe.pointer: must be a JSON pointer string");
		return false;
	}
	if (pat == NULL) {
		tooldef_fail(err, errlen, "concurrencySafe.pattern: required");
		return false;
	}
	if (!json_is_string(pat) || tooldef_has_nul(pat)) {
		tooldef_fail(err, errlen,
		    "concurrencySafe.pattern: must be a string");
		return false;
	}
	if (!tooldef_parse_pointer(def, json_string_value(ptr), err, errlen))
		return false;
	def->pattern = pattern_compile(json_string_value(pat), detail,
	    sizeof detail);
	if (def->pattern == NULL) {
		tooldef_fail(err, errlen, "concurrencySafe.pattern: %s", detail);
		return false;
	}
	def->has_rule = true;
	return true;
}

static bool
tooldef_parse_bool(const json_t *obj, const char *key, bool *out, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, key);

	if (v == NULL) {
		*out = false;
		return true;
	}
	if (!json_is_boolean(v)) {
		tooldef_fail(err, errlen, "%s: must be a boolean", key);
		return false;
	}
	*out = json_is_true(v);
	return true;
}

/* A positive integer (2.0 counts, as in JSON Schema), at most INT32_MAX. */
static bool
tooldef_parse_int(const json_t *obj, const char *key, int64_t dflt,
    int64_t *out, char *err, size_t errlen)
{
	const json_t *v = tooldef_get(obj, key);
	double d;

	if (v == NULL) {
		*out = dflt;
		return true;
	}
	if (json_is_integer(v) && json_integer_value(v) > 0)
		d = (double)json_integer_value(v);
	else if (json_is_real(v) && json_real_value(v) > 0 &&
	    (json_real_value(v) > TOOLDEF_INT_MAX ||
	    json_real_value(v) == (double)(int64_t)json_real_value(v)))
		d = json_real_value(v);
	else {
		tooldef_fail(err, errlen, "%s: must be a positive integer",
		    key);
		return false;
	}
	if (d > TOOLDEF_INT_MAX) {
		tooldef_fail(err, errlen, "%s: must be at most %d", key,
		    TOOLDEF_INT_MAX);
		return false;
	}
	*out = (int64_t)d;
	return true;
}

bool
tooldef_parse_limits(const json_t *obj, struct tooldef_limits *out,
    char *err, size_t errlen)
{
	static const struct {
		const char *key;
		uint64_t min, max;
		size_t off;
	} fields[] = {
		{ "memoryBytes", TOOLDEF_MEMORY_MIN, TOOLDEF_MEMORY_MAX,
		    offsetof(struct tooldef_limits, memory_bytes) },
		{ "maxProcesses", 1, TOOLDEF_PROCESSES_MAX,
		    offsetof(struct tooldef_limits, max_processes) },
		{ "cpuPercent", 1, TOOLDEF_CPU_PERCENT_MAX,
		    offsetof(struct tooldef_limits, cpu_percent) },
	};
	const json_t *v;
	const char *key;
	uint64_t n;
	double d;
	size_t i;

	memset(out, 0, sizeof *out);
	if (!json_is_object(obj)) {
		tooldef_fail(err, errlen, "limits: must be an object");
		return false;
	}
	json_object_foreach((json_t *)obj, key, v) {
		for (i = 0; i < nitems(fields); i++)
			if (strcmp(key, fields[i].key) == 0)
				break;
		if (i == nitems(fields)) {
			tooldef_fail(err, errlen, "limits.%s: unknown field "
			    "(known: memoryBytes, maxProcesses, cpuPercent)",
			    key);
			return false;
		}
		if (json_is_null(v))
			continue;
		d = json_is_integer(v) ? (double)json_integer_value(v) :
		    json_is_real(v) ? json_real_value(v) : -1;
		n = d >= 1 && d <= (double)fields[i].max ? (uint64_t)d : 0;
		if (n < fields[i].min || (double)n != d) {
			tooldef_fail(err, errlen, "limits.%s: must be an integer "
			    "from %" PRIu64 " to %" PRIu64, key, fields[i].min,
			    fields[i].max);
			return false;
		}
		*(uint64_t *)(void *)((char *)out + fields[i].off) = n;
	}
	return true;
}

static bool
tooldef_parse_env(struct tooldef *def, const json_t *obj, char *err,
    size_t errlen)
{
	const json_t *v = tooldef_get(obj, "env"), *value;
	const char *key;

	if (v == NULL) {
		def->env = json_object();
		return true;
	}
	if (!json_is_object(v)) {
		tooldef_fail(err, errlen, "env: must be an object");
		return false;
	}
	/* jansson's iterators are not const-correct. */
	json_object_foreach((json_t *)v, key, value) {
		if (*key == '\0' || strchr(key, '=') != NULL) {
			tooldef_fail(err, errlen, "env.%s: invalid variable "
			    "name (empty or containing '=')", key);
			return false;
		}
		if (!json_is_string(value) && !json_is_null(value)) {
			tooldef_fail(err, errlen,
			    "env.%s: must be a string or null", key);
			return false;
		}
		if (json_is_string(value) && tooldef_has_nul(value)) {
			tooldef_fail(err, errlen,
			    "env.%s: must not contain NUL characters", key);
			return false;
		}
	}
	def->env = json_deep_copy(v);
	return true;
}

/* The definition as listTools shows it, in the order of doc/design.md §4. */
static json_t *
tooldef_build_json(const struct tooldef *def, const json_t *obj)
{
	const json_t *description = tooldef_get(obj, "description");
	const json_t *rule = json_object_get(obj, "concurrencySafe");
	json_t *json, *command, *safe;
	size_t i;

	if (def->has_rule) {
		safe = json_pack("{s:O, s:O}", "pointer",
		    json_object_get(rule, "pointer"), "pattern",
		    json_object_get(rule, "pattern"));
	} else
		safe = json_boolean(def->safe);

	command = json_array();
	for (i = 0; i < def->ncommand; i++) {
		json_array_append_new(command,
		    json_string(def->command[i].text));
	}
	json = json_pack("{s:s, s:o, s:o, s:O, s:o, s:s, s:b, s:b, s:I, s:I,"
	    " s:o, s:I, s:b, s:O}",
	    "name", def->name,
	    "description", description != NULL ?
	    json_deep_copy(description) : json_string(""),
	    "command", command,
	    "inputSchema", def->schema,
	    "concurrencySafe", safe,
	    "interruptBehavior",
	    def->interrupt == TOOLDEF_CANCEL ? "cancel" : "block",
	    "abortSiblingsOnError", (int)def->abort_siblings,
	    "requiresPermission", (int)def->requires_permission,
	    "timeoutMs", (json_int_t)def->timeout_ms,
	    "maxTimeoutMs", (json_int_t)def->max_timeout_ms,
	    "timeoutFromInput", def->timeout_field != NULL ?
	    json_string(def->timeout_field) : json_null(),
	    "maxResultBytes", (json_int_t)def->max_result_bytes,
	    "streamOutput", (int)def->stream_output,
	    "env", def->env);
	if (json == NULL)
		fatal("%s: cannot build the definition", __func__);
	/* The extensions, only when given: UNSET is the daemon's choice. */
	if (def->sandbox.mode != TOOLDEF_SANDBOX_UNSET)
		json_object_set_new(json, "sandbox",
		    tooldef_sandbox_json(&def->sandbox));
	if (json_object_get(obj, "limits") != NULL)
		json_object_set(json, "limits", json_object_get(obj, "limits"));
	tooldef_job_json(&def->job, json);
	if (def->job.internal != TOOLDEF_INTERNAL_NONE)
		json_object_del(json, "command");
	if (def->runner != TOOLDEF_RUNNER_PROCESS) {
		json_object_del(json, "command");
		json_object_del(json, "streamOutput");
		json_object_del(json, "env");
		json_object_del(json, "timeoutFromInput");
		json_object_set_new(json, "runner", json_string(def->runner ==
		    TOOLDEF_RUNNER_CLIENT ? "client" : "mcp"));
	}
	return json;
}

void
tooldef_set_result_ceiling(size_t max)
{
	tooldef_ceiling = max;
}

size_t
tooldef_result_ceiling(void)
{
	return tooldef_ceiling;
}

/*
 * runner: "process" (the default) or "client"; a tool without a process
 * of its own takes none of the fields that shape one.
 */
static bool
tooldef_parse_runner_field(struct tooldef *def, const json_t *obj,
    bool ours, char *err, size_t errlen)
{
	static const char *process_only[] = { "command", "streamOutput",
	    "env", "sandbox", "limits", "background", "backgroundFromInput",
	    "yieldMs", "yieldFromInput", "stdin", "tty", "ttyFromInput",
	    "ttySize", "internal", "timeoutFromInput" };
	const json_t *v = tooldef_get(obj, "runner");
	size_t i;

	if (!ours && v != NULL) {
		if (!json_is_string(v) || (strcmp(json_string_value(v),
		    "process") != 0 && strcmp(json_string_value(v),
		    "client") != 0)) {
			tooldef_fail(err, errlen, "runner: must be \"process\" "
			    "or \"client\"");
			return false;
		}
		if (strcmp(json_string_value(v), "client") == 0)
			def->runner = TOOLDEF_RUNNER_CLIENT;
	}
	if (def->runner == TOOLDEF_RUNNER_PROCESS)
		return true;
	for (i = 0; i < nitems(process_only); i++)
		if (tooldef_get(obj, process_only[i]) != NULL) {
			tooldef_fail(err, errlen, "%s: not allowed for a tool "
			    "without a process (runner \"%s\")",
			    process_only[i], def->runner ==
			    TOOLDEF_RUNNER_CLIENT ? "client" : "mcp");
			return false;
		}
	return true;
}

struct tooldef *
tooldef_parse(const json_t *obj, char *err, size_t errlen)
{
	return tooldef_parse_runner(obj, TOOLDEF_RUNNER_PROCESS, err, errlen);
}

/* TOOLDEF_RUNNER_PROCESS: the client's own definition, runner and all. */
struct tooldef *
tooldef_parse_runner(const json_t *obj, enum tooldef_runner runner,
    char *err, size_t errlen)
{
	struct tooldef *def;
	const json_t *v;
	int64_t n;

	if (!json_is_object(obj)) {
		tooldef_fail(err, errlen, "tool definition: must be an object");
		return NULL;
	}
	def = xcalloc(1, sizeof *def);
	def->refs = 1;
	if (!tooldef_parse_name(def, obj, err, errlen))
		goto fail;
	v = tooldef_get(obj, "description");
	if (v != NULL && !json_is_string(v)) {
		tooldef_fail(err, errlen, "description: must be a string");
		goto fail;
	}
	def->runner = runner;
	if (!tooldef_parse_runner_field(def, obj, runner !=
	    TOOLDEF_RUNNER_PROCESS, err, errlen) ||
	    !tooldef_parse_command(def, obj, err, errlen) ||
	    !tooldef_parse_schema(def, obj, err, errlen) ||
	    !tooldef_parse_safe(def, obj, err, errlen))
		goto fail;

	if ((v = tooldef_get(obj, "interruptBehavior")) == NULL)
		def->interrupt = TOOLDEF_BLOCK;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "block") == 0)
		def->interrupt = TOOLDEF_BLOCK;
	else if (json_is_string(v) &&
	    strcmp(json_string_value(v), "cancel") == 0)
		def->interrupt = TOOLDEF_CANCEL;
	else {
		tooldef_fail(err, errlen,
		    "interruptBehavior: must be \"block\" or \"cancel\"");
		goto fail;
	}
	if (!tooldef_parse_bool(obj, "abortSiblingsOnError",
	    &def->abort_siblings, err, errlen) ||
	    !tooldef_parse_bool(obj, "requiresPermission",
	    &def->requires_permission, err, errlen) ||
	    !tooldef_parse_bool(obj, "streamOutput", &def->stream_output, err,
	    errlen))
		goto fail;

	if (!tooldef_parse_int(obj, "timeoutMs", TOOLDEF_TIMEOUT_DEFAULT,
	    &def->timeout_ms, err, errlen))
		goto fail;
	/* An explicit long timeoutMs raises the default ceiling with it. */
	n = def->timeout_ms > TOOLDEF_MAX_TIMEOUT_DEFAULT ? def->timeout_ms :
	    TOOLDEF_MAX_TIMEOUT_DEFAULT;
	if (!tooldef_parse_int(obj, "maxTimeoutMs", n, &def->max_timeout_ms,
	    err, errlen))
		goto fail;
	if (def->timeout_ms > def->max_timeout_ms) {
		tooldef_fail(err, errlen, "timeoutMs: must not exceed "
		    "maxTimeoutMs (%" PRId64 ")", def->max_timeout_ms);
		goto fail;
	}
	if ((v = tooldef_get(obj, "timeoutFromInput")) != NULL) {
		if (!json_is_string(v) || json_string_length(v) == 0 ||
		    tooldef_has_nul(v)) {
			tooldef_fail(err, errlen, "timeoutFromInput: must be a "
			    "non-empty string or null");
			goto fail;
		}
		def->timeout_field = xstrdup(json_string_value(v));
	}
	if (!tooldef_parse_int(obj, "maxResultBytes",
	    TOOLDEF_MAX_RESULT_DEFAULT < tooldef_ceiling ?
	    TOOLDEF_MAX_RESULT_DEFAULT : (int64_t)tooldef_ceiling, &n,
	    err, errlen))
		goto fail;
	/* A result is encoded and held whole: its size must stay sane. */
	if ((uint64_t)n > tooldef_ceiling) {
		tooldef_fail(err, errlen, "maxResultBytes: must be at most %zu "
		    "(the daemon's --max-result-bytes)", tooldef_ceiling);
		goto fail;
	}
	def->max_result_bytes = (size_t)n;
	if (!tooldef_parse_env(def, obj, err, errlen))
		goto fail;

	if (!tooldef_parse_sandbox(tooldef_get(obj, "sandbox"), "sandbox",
	    &def->sandbox, err, errlen))
		goto fail;
	if ((v = tooldef_get(obj, "limits")) != NULL &&
	    !tooldef_parse_limits(v, &def->limits, err, errlen))
		goto fail;
	if (!tooldef_job_parse(obj, &def->job, err, errlen))
		goto fail;

	def->json = tooldef_build_json(def, obj);
	return def;

fail:
	tooldef_free(def);
	return NULL;
}

struct tooldef *
tooldef_ref(struct tooldef *def)
{
	def->refs++;
	return def;
}

void
tooldef_unref(struct tooldef *def)
{
	if (def == NULL)
		return;
	if (def->refs <= 0)
		fatal("%s: %s: bad reference count %d", __func__, def->name,
		    def->refs);
	if (--def->refs == 0)
		tooldef_free(def);
}

enum tooldef_runner
tooldef_runner(const struct tooldef *def)
{
	return def->runner;
}

const char *
tooldef_name(const struct tooldef *def)
{
	return def->name;
}

json_t *
tooldef_json(const struct tooldef *def)
{
	return json_deep_copy(def->json);
}

enum tooldef_interrupt
tooldef_interrupt(const struct tooldef *def)
{
	return def->interrupt;
}

bool
tooldef_abort_siblings(const struct tooldef *def)
{
	return def->abort_siblings;
}

bool
tooldef_requires_permission(const struct tooldef *def)
{
	return def->requires_permission;
}

bool
tooldef_stream_output(const struct tooldef *def)
{
	return def->stream_output;
}

const struct tooldef_sandbox *
tooldef_sandbox(const struct tooldef *def)
{
	return &def->sandbox;
}

static const char *const tooldef_sandbox_names[] = {
	[TOOLDEF_SANDBOX_NONE] = "none",
	[TOOLDEF_SANDBOX_WORKSPACE_WRITE] = "workspace-write",
	[TOOLDEF_SANDBOX_READ_ONLY] = "read-only",
};

const char *
tooldef_sandbox_name(enum tooldef_sandbox_mode mode)
{
	return mode == TOOLDEF_SANDBOX_UNSET ? NULL :
	    tooldef_sandbox_names[mode];
}

enum tooldef_sandbox_mode
tooldef_sandbox_mode(const char *name)
{
	size_t i;

	for (i = TOOLDEF_SANDBOX_NONE; i < nitems(tooldef_sandbox_names); i++)
		if (strcmp(name, tooldef_sandbox_names[i]) == 0)
			return (enum tooldef_sandbox_mode)i;
	return TOOLDEF_SANDBOX_UNSET;
}

/* writableRoots: at most TOOLDEF_MAX_ROOTS absolute paths. */
static bool
tooldef_parse_roots(const json_t *v, const char *field, json_t **out,
    char *err, size_t errlen)
{
	const json_t *e;
	const char *p;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) > TOOLDEF_MAX_ROOTS) {
		tooldef_fail(err, errlen, "%s.writableRoots: must be an array of "
		    "at most %d absolute paths", field, TOOLDEF_MAX_ROOTS);
		return false;
	}
	json_array_foreach(v, i, e) {
		p = json_string_value(e);
		if (p == NULL || p[0] != '/' || json_string_length(e) >= 4096 ||
		    strlen(p) != json_string_length(e)) {
			tooldef_fail(err, errlen, "%s.writableRoots[%zu]: must be "
			    "an absolute path", field, i);
			return false;
		}
	}
	*out = json_deep_copy(v);
	return true;
}

bool
tooldef_parse_sandbox(const json_t *v, const char *field,
    struct tooldef_sandbox *sb, char *err, size_t errlen)
{
	const json_t *mode = v, *x;
	const char *key;
	char path[256];

	memset(sb, 0, sizeof *sb);
	sb->network = -1;
	if (v == NULL || json_is_null(v))
		return true;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, x) {
			if (strcmp(key, "mode") != 0 &&
			    strcmp(key, "writableRoots") != 0 &&
			    strcmp(key, "network") != 0) {
				tooldef_fail(err, errlen, "%s: unknown field "
				    "(known: mode, writableRoots, network)",
				    field);
				return false;
			}
		}
		mode = json_object_get(v, "mode");
	}
	if (json_is_string(mode))
		sb->mode = tooldef_sandbox_mode(json_string_value(mode));
	if (sb->mode == TOOLDEF_SANDBOX_UNSET) {
		tooldef_fail(err, errlen, "%s%s: must be \"read-only\", "
		    "\"workspace-write\" or \"none\"", field,
		    json_is_object(v) ? ".mode" : "");
		return false;
	}
	if (!json_is_object(v))
		return true;
	x = json_object_get(v, "network");
	if (json_is_object(x)) {
		if (sb->mode == TOOLDEF_SANDBOX_NONE) {
			tooldef_fail(err, errlen, "%s.network: rules hold only "
			    "in a sandbox; ask for read-only or "
			    "workspace-write", field);
			return false;
		}
		snprintf(path, sizeof path, "%s.network", field);
		if ((sb->policy = netpolicy_parse_json(x, path, err,
		    errlen)) == NULL)
			return false;
		sb->network = TOOLDEF_NETWORK_RULES;
	} else if (x != NULL && !json_is_boolean(x)) {
		tooldef_fail(err, errlen, "%s.network: must be a boolean or "
		    "{\"allow\": [RULE...], \"deny\": [RULE...]}", field);
		return false;
	} else if (x != NULL)
		sb->network = json_is_true(x);
	if (sb->network == 1 && sb->mode == TOOLDEF_SANDBOX_READ_ONLY) {
		tooldef_fail(err, errlen, "%s.network: a read-only tool has no "
		    "open network; ask for workspace-write, or name the hosts "
		    "({\"allow\": [...]})", field);
		return false;
	}
	x = json_object_get(v, "writableRoots");
	if (x != NULL && sb->mode == TOOLDEF_SANDBOX_READ_ONLY &&
	    json_array_size(x) > 0) {
		tooldef_fail(err, errlen, "%s.writableRoots: a read-only tool "
		    "writes nothing; ask for workspace-write", field);
		return false;
	}
	if (x != NULL && !tooldef_parse_roots(x, field, &sb->roots, err,
	    errlen)) {
		tooldef_sandbox_clear(sb);
		return false;
	}
	return true;
}

void
tooldef_sandbox_clear(struct tooldef_sandbox *sb)
{
	json_decref(sb->roots);
	sb->roots = NULL;
	netpolicy_free(sb->policy);
	sb->policy = NULL;
}

void
tooldef_sandbox_copy(struct tooldef_sandbox *dst,
    const struct tooldef_sandbox *src)
{
	*dst = *src;
	dst->roots = json_incref(src->roots);
	dst->policy = src->policy != NULL ? netpolicy_merge(src->policy,
	    NULL) : NULL;
}

/* The short form where it says all, else the object. */
json_t *
tooldef_sandbox_json(const struct tooldef_sandbox *sb)
{
	json_t *o;

	if (sb->network == -1 && sb->roots == NULL)
		return json_string(tooldef_sandbox_name(sb->mode));
	o = json_pack("{s:s}", "mode", tooldef_sandbox_name(sb->mode));
	if (sb->policy != NULL)
		json_object_set_new(o, "network", netpolicy_json(sb->policy));
	else if (sb->network != -1)
		json_object_set_new(o, "network", json_boolean(sb->network));
	if (sb->roots != NULL)
		json_object_set(o, "writableRoots", sb->roots);
	return o;
}

const struct tooldef_limits *
tooldef_limits(const struct tooldef *def)
{
	return &def->limits;
}

size_t
tooldef_max_result_bytes(const struct tooldef *def)
{
	return def->max_result_bytes;
}

const json_t *
tooldef_env(const struct tooldef *def)
{
	return def->env;
}

/* The value a "{field}" element stands for, or NULL with err set. */
static const json_t *
tooldef_field(const char *field, const json_t *input, char *err,
    size_t errlen)
{
	const json_t *v = json_object_get(input, field);

	if (v == NULL) {
		tooldef_fail(err, errlen,
		    "The required parameter `%s` is missing", field);
		return NULL;
	}
	if (json_is_null(v)) {
		tooldef_fail(err, errlen,
		    "The required parameter `%s` must not be null", field);
		return NULL;
	}
	if (json_is_string(v) && tooldef_has_nul(v)) {
		tooldef_fail(err, errlen, "The parameter `%s` must not "
		    "contain NUL characters", field);
		return NULL;
	}
	return v;
}

bool
tooldef_check_input(const struct tooldef *def, const json_t *input,
    char *err, size_t errlen)
{
	json_t *object;
	size_t i;
	bool ok;

	/* A tool's input is an object even when its schema does not say so. */
	if (!json_is_object(input)) {
		object = json_pack("{s:s}", "type", "object");
		ok = schema_validate(object, input, err, errlen);
		json_decref(object);
		if (!ok)
			return false;
	}
	if (!schema_validate(def->schema, input, err, errlen))
		return false;
	for (i = 0; i < def->ncommand; i++) {
		if (def->command[i].field != NULL &&
		    tooldef_field(def->command[i].field, input, err,
		    errlen) == NULL)
			return false;
	}
	return true;
}

/* Follow the concurrencySafe pointer into input; NULL if it leads nowhere. */
static const json_t *
tooldef_resolve(const struct tooldef *def, const json_t *input)
{
	const json_t *v = input;
	const char *token;
	char *end;
	unsigned long long idx;
	size_t i;

	for (i = 0; i < def->npointer && v != NULL; i++) {
		token = def->pointer[i];
		if (json_is_object(v))
			v = json_object_get(v, token);
		else if (json_is_array(v)) {
			/* Canonical indexes only: never "01" or "-". */
			if (token[0] < '0' || token[0] > '9' ||
			    (token[0] == '0' && token[1] != '\0'))
				return NULL;
			idx = strtoull(token, &end, 10);
			if (*end != '\0' || idx >= json_array_size(v))
				return NULL;
			v = json_array_get(v, (size_t)idx);
		} else
			return NULL;
	}
	return v;
}

bool
tooldef_is_safe(const struct tooldef *def, const json_t *input)
{
	const json_t *v;

	if (!def->has_rule)
		return def->safe;
	if (input == NULL || (v = tooldef_resolve(def, input)) == NULL)
		return false;
	if (!json_is_string(v) || tooldef_has_nul(v))
		return false;
	/* Too long a subject for the pattern's cost: cannot be evaluated. */
	return pattern_match(def->pattern, json_string_value(v),
	    json_string_length(v)) == 1;
}

int64_t
tooldef_timeout_ms(const struct tooldef *def, const json_t *input)
{
	const json_t *v;
	double d;

	if (def->timeout_field == NULL || !json_is_object(input))
		return def->timeout_ms;
	v = json_object_get(input, def->timeout_field);
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 1)
			return 1;
		if (json_integer_value(v) > def->max_timeout_ms)
			return def->max_timeout_ms;
		return json_integer_value(v);
	}
	if (!json_is_real(v))
		return def->timeout_ms;
	/* Clamp before converting: a huge double does not fit an int64_t. */
	d = json_real_value(v);
	if (!(d >= 1))
		return 1;
	if (d > (double)def->max_timeout_ms)
		return def->max_timeout_ms;
	return (int64_t)d;
}

char **
tooldef_argv(const struct tooldef *def, const json_t *input, char *err,
    size_t errlen)
{
	const json_t *v;
	char **argv;
	size_t i;

	argv = xcalloc(def->ncommand + 1, sizeof *argv);
	for (i = 0; i < def->ncommand; i++) {
		if (def->command[i].field == NULL) {
			argv[i] = xstrdup(def->command[i].text);
			continue;
		}
		v = tooldef_field(def->command[i].field, input, err, errlen);
		if (v == NULL) {
			tooldef_argv_free(argv);
			return NULL;
		}
		if (json_is_string(v))
			argv[i] = xstrdup(json_string_value(v));
		else if (json_is_number(v))
			argv[i] = schema_number_text(v);
		else
			argv[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (argv[i] == NULL) {
			tooldef_fail(err, errlen, "%s: cannot be made an "
			    "argument", def->command[i].field);
			tooldef_argv_free(argv);
			return NULL;
		}
	}
	return argv;
}

void
tooldef_argv_free(char **argv)
{
	size_t i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

const struct tooldef_job *
tooldef_job(const struct tooldef *def)
{
	return &def->job;
}
