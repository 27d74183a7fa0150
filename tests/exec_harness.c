/* A fake session around the executor core: records effects as lines. */
#include "exec_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/tooldef.h"
#include "utf8.h"
#include "util.h"

static const char *h_tool_json[] = {
	/* Safe reads that run in parallel. */
	"{\"name\":\"read\",\"command\":[\"cat\",\"{file_path}\"],"
	"\"concurrencySafe\":true,\"inputSchema\":{\"type\":\"object\","
	"\"properties\":{\"file_path\":{\"type\":\"string\"}},"
	"\"required\":[\"file_path\"]}}",
	/* A side effect that must run alone and finish once started. */
	"{\"name\":\"write\",\"command\":[\"tee\",\"{file_path}\"],"
	"\"inputSchema\":{\"type\":\"object\",\"properties\":"
	"{\"file_path\":{\"type\":\"string\"}},\"required\":[\"file_path\"]}}",
	/* Like the built-in bash: unsafe, cancel, errors cascade. */
	"{\"name\":\"bash\",\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
	"\"interruptBehavior\":\"cancel\",\"abortSiblingsOnError\":true,"
	"\"timeoutFromInput\":\"timeout\",\"inputSchema\":{\"type\":\"object\","
	"\"properties\":{\"command\":{\"type\":\"string\"},"
	"\"timeout\":{\"type\":\"integer\"}},\"required\":[\"command\"]}}",
	/* Safe only for read-only commands (the pointer + ERE rule). */
	"{\"name\":\"sh\",\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
	"\"interruptBehavior\":\"cancel\",\"concurrencySafe\":"
	"{\"pointer\":\"/command\",\"pattern\":\"^(ls|cat|grep)( |$)\"}}",
	/* A safe tool that may be cancelled. */
	"{\"name\":\"search\",\"command\":[\"grep\",\"-r\",\"{pattern}\"],"
	"\"concurrencySafe\":true,\"interruptBehavior\":\"cancel\"}",
	/* A safe, blocking tool whose errors cascade. */
	"{\"name\":\"fetch\",\"command\":[\"curl\",\"{url}\"],"
	"\"concurrencySafe\":true,\"abortSiblingsOnError\":true}",
	/* Needs the user's permission first. */
	"{\"name\":\"deploy\",\"command\":[\"deploy\"],"
	"\"requiresPermission\":true}",
	/* Needs permission and is safe. */
	"{\"name\":\"peek\",\"command\":[\"peek\"],\"concurrencySafe\":true,"
	"\"requiresPermission\":true}",
	/* Unsafe, its stdin streamed (writeStdin). */
	"{\"name\":\"feed\",\"command\":[\"cat\"],\"stdin\":\"stream\"}",
	/* The same after the user's permission. */
	"{\"name\":\"gated\",\"command\":[\"cat\"],\"stdin\":\"stream\","
	"\"requiresPermission\":true}",	/* Run by the client (runner client): unsafe and blocking. */
	"{\"name\":\"todo\",\"runner\":\"client\"}",
	/* Run by the client: safe, cancel, its errors cascade. */
	"{\"name\":\"task\",\"runner\":\"client\",\"concurrencySafe\":true,"
	"\"interruptBehavior\":\"cancel\",\"abortSiblingsOnError\":true}",
};

static void	h_effect(void *, const struct exec_effect *);
static bool	h_hooks(void *, struct exec_tool *, enum exec_hook_phase,
    bool);
static void	h_log(struct harness *, char *);
static void	h_forget(struct harness *, struct exec_tool *);

struct harness *
h_new(unsigned max_parallel, const char *interrupt_message)
{
	struct harness *h = xcalloc(1, sizeof *h);
	struct exec_config cfg = { 0 };
	json_t *env = json_pack("{s:s}", "PATH", "/usr/bin:/bin");
	json_error_t jerr;
	char err[256];
	json_t *j;
	size_t i;

	for (i = 0; i < nitems(h_tool_json); i++) {
		j = json_loads(h_tool_json[i], 0, &jerr);
		cr_assert(j != NULL, "bad test tool json: %s", jerr.text);
		h->defs[i] = tooldef_parse(j, err, sizeof err);
		cr_assert(h->defs[i] != NULL, "bad test tool: %s", err);
		json_decref(j);
	}
	h->ndefs = nitems(h_tool_json);
	cfg.max_parallel = max_parallel;
	cfg.interrupt_message = interrupt_message;
	cfg.effect = h_effect;
	cfg.hooks = h_hooks;
	cfg.arg = h;
	h->ex = exec_new(&cfg, "/work", env);
	json_decref(env);
	return h;
}

void
h_free(struct harness *h)
{
	size_t i;

	/* Whatever still runs is killed and reported dead, as at close. */
	exec_close(h->ex);
	while (h->nrunning > 0)
		h_killed(h, h->running[0]);
	exec_free(h->ex);
	json_decref(h->last_result);
	for (i = 0; i < h->ndefs; i++)
		tooldef_unref(h->defs[i]);
	for (i = 0; i < h->nlog; i++)
		free(h->log[i]);
	free(h->log);
	free(h);
}

struct tooldef *
h_def(struct harness *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->ndefs; i++)
		if (strcmp(tooldef_name(h->defs[i]), name) == 0)
			return h->defs[i];
	return NULL;
}

static void
h_log(struct harness *h, char *line)
{
	if (h->nlog == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->log = xreallocarray(h->log, h->cap, sizeof *h->log);
	}
	h->log[h->nlog++] = line;
}

static void
h_forget(struct harness *h, struct exec_tool *t)
{
	size_t i;

	for (i = 0; i < h->nrunning; i++)
		if (h->running[i] == t) {
			h->running[i] = h->running[--h->nrunning];
			return;
		}
	cr_assert_fail("tool %s is not running", exec_tool_id(t));
}

bool
h_is_running(struct harness *h, struct exec_tool *t)
{
	size_t i;

	for (i = 0; i < h->nrunning; i++)
		if (h->running[i] == t)
			return true;
	return false;
}

static bool
h_hooks(void *arg, struct exec_tool *t, enum exec_hook_phase ph,
    bool failed)
{
	static const char *const names[] = { "pre", "permission", "post" };
	struct harness *h = arg;
	char *line;

	if ((h->hook_phases & (1U << ph)) == 0)
		return false;
	xasprintf(&line, "hooks %s %s", exec_tool_id(t), names[ph]);
	h_log(h, line);
	return true;
}

static void
h_effect(void *arg, const struct exec_effect *e)
{
	struct harness *h = arg;
	/* Encoded params (tool_status, state, a tool_result) read back. */
	json_t *parsed = e->params_text != NULL ? json_loadb(e->params_text,
	    e->params_len, JSON_ALLOW_NUL, NULL) : NULL;
	const json_t *p = parsed != NULL ? parsed : e->params, *r, *ids;
	char *line = NULL, *data, *content;
	struct buf b = { 0 };
	size_t i;

	cr_assert(e->params_text == NULL || parsed != NULL,
	    "params that are not JSON: %.*s", (int)e->params_len,
	    e->params_text);
	switch (e->kind) {
	case EXEC_SPAWN:
		cr_assert(h->nrunning < nitems(h->running));
		cr_assert(!h_is_running(h, e->tool), "spawned twice");
		h->running[h->nrunning++] = e->tool;
		/* Stdin written before the start, when there is some. */
		if (e->spawn->stdin_early_len > 0 || e->spawn->stdin_early_eof)
			xasprintf(&line, "spawn %s stdin=%.*s%s",
			    exec_tool_id(e->tool),
			    (int)e->spawn->stdin_early_len,
			    e->spawn->stdin_early, e->spawn->stdin_early_eof ?
			    "+eof" : "");
		else
			xasprintf(&line, "spawn %s", exec_tool_id(e->tool));
		break;
	case EXEC_HOOKS_CANCEL:
		xasprintf(&line, "hooks-cancel %s", exec_tool_id(e->tool));
		break;
	case EXEC_KILL:
		cr_assert(h_is_running(h, e->tool), "kill of a tool not running");
		xasprintf(&line, "kill %s", exec_tool_id(e->tool));
		break;
	case EXEC_OUTPUT:
		/* As the session sends it: progress {stream, text}. */
		utf8_repair(&b, e->text, e->text_len);
		r = json_pack("{s:s, s:s%}", "stream", e->fd == 2 ? "stderr" :
		    "stdout", "text", b.data != NULL ? b.data : "", b.len);
		buf_free(&b);
		data = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref((json_t *)r);
		xasprintf(&line, "progress %s %s", exec_tool_id(e->tool), data);
		free(data);
		break;
	case EXEC_DRAIN_DONE:
		if (e->error != 0)
			xasprintf(&line, "drain %llu error=%d",
			    (unsigned long long)e->turn, e->error);
		else
			xasprintf(&line, "drain %llu results=%u",
			    (unsigned long long)e->turn, e->results);
		break;
	case EXEC_NOTIFY:
		if (strcmp(e->method, "tool_status") == 0)
			xasprintf(&line, "status %s %s",
			    json_string_value(json_object_get(p, "toolUseId")),
			    json_string_value(json_object_get(p, "status")));
		else if (strcmp(e->method, "progress") == 0) {
			data = json_dumps(json_object_get(p, "data"),
			    JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
			xasprintf(&line, "progress %s %s",
			    json_string_value(json_object_get(p, "toolUseId")),
			    data);
			free(data);
		} else if (strcmp(e->method, "tool_result") == 0) {
			r = json_object_get(p, "result");
			cr_assert_str_eq(json_string_value(json_object_get(r,
			    "type")), "tool_result");
			cr_assert_str_eq(json_string_value(json_object_get(r,
			    "tool_use_id")), json_string_value(
			    json_object_get(p, "toolUseId")));
			/* is_error is exactly "the reason is not ok". */
			cr_assert_eq(json_is_true(json_object_get(r,
			    "is_error")), strcmp(json_string_value(
			    json_object_get(json_object_get(p, "meta"),
			    "reason")), "ok") != 0);
			json_decref(h->last_result);
			h->last_result = json_deep_copy(p);
			/* Content blocks show as their compact JSON. */
			content = json_is_string(json_object_get(r, "content")) ?
			    xstrdup(json_string_value(json_object_get(r,
			    "content"))) : json_dumps(json_object_get(r,
			    "content"), JSON_COMPACT);
			xasprintf(&line, "result %s %s %s",
			    json_string_value(json_object_get(p, "toolUseId")),
			    json_string_value(json_object_get(json_object_get(
			    p, "meta"), "reason")), content);
			free(content);
		} else if (strcmp(e->method, "permission_request") == 0)
			xasprintf(&line, "permission %s",
			    json_string_value(json_object_get(p, "toolUseId")));
		else if (strcmp(e->method, "state") == 0) {
			ids = json_object_get(p, "inProgress");
			buf_printf(&b, "state %d [",
			    json_is_true(json_object_get(p, "interruptible")));
			for (i = 0; i < json_array_size(ids); i++)
				buf_printf(&b, "%s%s", i ? "," : "",
				    json_string_value(json_array_get(ids, i)));
			buf_addstr(&b, "]");
			line = b.data;
		} else if (strcmp(e->method, "turn_end") == 0)
			xasprintf(&line, "turn_end %lld %s",
			    (long long)json_integer_value(json_object_get(p,
			    "turn")),
			    json_string_value(json_object_get(p, "reason")));
		else
			cr_assert_fail("unknown notification %s", e->method);
		break;
	}
	h_log(h, line);
	json_decref(parsed);
}

int
h_add_rc(struct harness *h, const char *id, const char *name,
    const char *input)
{
	json_t *in = NULL;
	json_error_t jerr;
	int rc;

	if (input != NULL) {
		in = json_loads(input, JSON_DECODE_ANY, &jerr);
		cr_assert(in != NULL, "bad input json: %s", jerr.text);
	}
	rc = exec_add(h->ex, id, name, h_def(h, name), in, NULL);
	json_decref(in);
	return rc;
}

struct exec_tool *
h_add(struct harness *h, const char *id, const char *name, const char *input)
{
	cr_assert_eq(h_add_rc(h, id, name, input), 0, "addTool %s failed", id);
	return h_find(h, id);
}

void
h_finish(struct harness *h, struct exec_tool *t, const char *content_json,
    bool is_error)
{
	json_t *content = json_loads(content_json, JSON_DECODE_ANY, NULL);
	struct exec_done d = { .content = content, .is_error = is_error };

	cr_assert(content != NULL, "bad content: %s", content_json);
	h_forget(h, t);
	exec_finish(t, &d);
	json_decref(content);
}

struct exec_tool *
h_find(struct harness *h, const char *id)
{
	size_t i;

	for (i = 0; i < h->nrunning; i++)
		if (strcmp(exec_tool_id(h->running[i]), id) == 0)
			return h->running[i];
	return NULL;
}

void
h_exit_with(struct harness *h, struct exec_tool *t, const struct exec_exit *x)
{
	cr_assert(t != NULL, "no such running tool");
	h_forget(h, t);
	exec_exited(t, x);
}

void
h_exit(struct harness *h, struct exec_tool *t, int status, const char *output)
{
	struct exec_exit x = { .end = EXEC_END_EXITED, .status = status };

	x.output.head = output != NULL ? output : "";
	x.output.head_len = strlen(x.output.head);
	x.output.total = x.output.head_len;
	x.duration_ms = 5;
	h_exit_with(h, t, &x);
}

void
h_signal(struct harness *h, struct exec_tool *t, int sig)
{
	struct exec_exit x = { .end = EXEC_END_SIGNALED, .signal = sig };

	x.output.head = "";
	h_exit_with(h, t, &x);
}

void
h_timeout(struct harness *h, struct exec_tool *t, const char *output)
{
	struct exec_exit x = { .end = EXEC_END_TIMED_OUT, .signal = SIGTERM };

	x.output.head = output != NULL ? output : "";
	x.output.head_len = strlen(x.output.head);
	h_exit_with(h, t, &x);
}

void
h_spawn_failed(struct harness *h, struct exec_tool *t, const char *why)
{
	struct exec_exit x = { .end = EXEC_END_SPAWN_FAILED, .error = why };

	x.output.head = "";
	h_exit_with(h, t, &x);
}

void
h_killed(struct harness *h, struct exec_tool *t)
{
	struct exec_exit x = { .end = EXEC_END_KILLED, .signal = SIGTERM };

	x.output.head = "partial output";
	x.output.head_len = strlen(x.output.head);
	h_exit_with(h, t, &x);
}

void
h_expect(struct harness *h, const char *first, ...)
{
	struct buf want = { 0 }, got = { 0 };
	const char *s;
	va_list ap;
	size_t i;

	va_start(ap, first);
	for (s = first; s != NULL; s = va_arg(ap, const char *))
		buf_printf(&want, "  %s\n", s);
	va_end(ap);
	for (i = h->seen; i < h->nlog; i++)
		buf_printf(&got, "  %s\n", h->log[i]);
	h->seen = h->nlog;
	cr_assert_str_eq(got.data != NULL ? got.data : "",
	    want.data != NULL ? want.data : "",
	    "effects differ.\n got:\n%s want:\n%s",
	    got.data != NULL ? got.data : "", want.data != NULL ? want.data :
	    "");
	buf_free(&want);
	buf_free(&got);
}

void
h_skip(struct harness *h)
{
	h->seen = h->nlog;
}

bool
h_logged(struct harness *h, const char *s)
{
	size_t i;

	for (i = h->seen; i < h->nlog; i++)
		if (strcmp(h->log[i], s) == 0)
			return true;
	return false;
}
