/*
 * What hooks decide, from their exit codes and JSON, as Claude Code
 * documents it; several hooks' decisions merged in configuration order.
 * Pure: a hook's end in, a decision out.
 */
#include "hooks/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "util.h"

static json_t	*hooks_parse_out(const struct hooks_outcome *, bool *);
static char	*hooks_text(struct hooks_decision *, const char *, size_t);
static void	hooks_append(struct hooks_decision *, char **, const char *,
    size_t);
static const char *hooks_reason(const json_t *, const json_t *);
static void	hooks_perm(struct hooks_decision *, enum hooks_perm,
    const char *, size_t);
static enum hooks_perm hooks_perm_parse(const char *);
static void	hooks_json(struct hooks_decision *, const json_t *, json_t *);

static const char *const hooks_perm_names[] = {
	"none", "allow", "ask", "defer", "deny",
};

const char *
hooks_perm_name(enum hooks_perm p)
{
	return hooks_perm_names[p];
}

static enum hooks_perm
hooks_perm_parse(const char *s)
{
	if (s == NULL)
		return HOOKS_PERM_NONE;
	if (strcmp(s, "allow") == 0 || strcmp(s, "approve") == 0)
		return HOOKS_PERM_ALLOW;
	if (strcmp(s, "ask") == 0)
		return HOOKS_PERM_ASK;
	if (strcmp(s, "defer") == 0)
		return HOOKS_PERM_DEFER;
	if (strcmp(s, "deny") == 0 || strcmp(s, "block") == 0)
		return HOOKS_PERM_DENY;
	return HOOKS_PERM_NONE;
}

void
hooks_decision_init(struct hooks_decision *d, enum hooks_event e)
{
	memset(d, 0, sizeof *d);
	d->event = e;
	d->runs = json_array();
}

void
hooks_decision_clear(struct hooks_decision *d)
{
	free(d->reason);
	json_decref(d->updated_input);
	json_decref(d->updated_output);
	free(d->context);
	free(d->stop_reason);
	json_decref(d->runs);
	d->reason = d->context = d->stop_reason = NULL;
	d->updated_input = d->updated_output = d->runs = NULL;
}

/*
 * At most HOOKS_TEXT_MAX characters; the rest is named by a file that
 * holds the whole text (S17), when the caller can write one.
 */
static char *
hooks_text(struct hooks_decision *d, const char *s, size_t len)
{
	struct buf b = { 0 };
	size_t i, chars = 0;
	char *path = NULL, *out;

	for (i = 0; i < len; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 &&
		    chars++ == HOOKS_TEXT_MAX)
			break;
	}
	if (i == len)
		return xstrndup(s, len);
	buf_add(&b, s, i);
	if (d->spill != NULL)
		path = d->spill(d->spill_arg, s, len);
	if (path != NULL)
		buf_printf(&b, "\n[hook output cut at %d characters; the whole "
		    "of it is in %s]", HOOKS_TEXT_MAX, path);
	else
		buf_printf(&b, "\n[hook output cut at %d characters]",
		    HOOKS_TEXT_MAX);
	free(path);
	out = xstrndup(b.data, b.len);
	buf_free(&b);
	return out;
}

/* Texts of several hooks, one line apart, in configuration order. */
static void
hooks_append(struct hooks_decision *d, char **to, const char *s, size_t len)
{
	char *t, *joined;

	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	if (len == 0)
		return;
	t = hooks_text(d, s, len);
	if (*to == NULL) {
		*to = t;
		return;
	}
	xasprintf(&joined, "%s\n%s", *to, t);
	free(*to);
	free(t);
	*to = joined;
}

/* Deny beats defer, defer ask, ask allow; a tie keeps the first reason. */
static void
hooks_perm(struct hooks_decision *d, enum hooks_perm p, const char *reason,
    size_t len)
{
	if (p <= d->perm)
		return;
	d->perm = p;
	free(d->reason);
	d->reason = NULL;
	while (len > 0 && (reason[len - 1] == '\n' || reason[len - 1] == '\r'))
		len--;
	if (reason != NULL && len > 0)
		d->reason = hooks_text(d, reason, len);
}

static const char *
hooks_reason(const json_t *top, const json_t *specific)
{
	const char *r;

	if ((r = json_string_value(json_object_get(specific,
	    "permissionDecisionReason"))) != NULL)
		return r;
	if ((r = json_string_value(json_object_get(json_object_get(specific,
	    "decision"), "message"))) != NULL)
		return r;
	return json_string_value(json_object_get(top, "reason"));
}

/* stdout that starts with '{' is JSON; *bad when it is not valid. */
static json_t *
hooks_parse_out(const struct hooks_outcome *o, bool *bad)
{
	size_t i = 0;
	json_t *j;

	*bad = false;
	while (i < o->out_len && (o->out[i] == ' ' || o->out[i] == '\t' ||
	    o->out[i] == '\n' || o->out[i] == '\r'))
		i++;
	if (i == o->out_len || o->out[i] != '{')
		return NULL;
	j = json_loadb(o->out + i, o->out_len - i, JSON_DISABLE_EOF_CHECK,
	    NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		*bad = true;
		return NULL;
	}
	return j;
}

/* The JSON of a hook that did not block, honoured whatever its exit code. */
static void
hooks_json(struct hooks_decision *d, const json_t *top, json_t *run)
{
	const json_t *spec = json_object_get(top, "hookSpecificOutput");
	const json_t *v;
	const char *s, *reason = hooks_reason(top, spec);
	enum hooks_perm p = HOOKS_PERM_NONE;

	/* For the user, not the model: the client shows it. */
	if ((s = json_string_value(json_object_get(top, "systemMessage"))) !=
	    NULL)
		json_object_set_new(run, "systemMessage", json_string(s));
	if (json_is_false(json_object_get(top, "continue"))) {
		d->stop = true;
		s = json_string_value(json_object_get(top, "stopReason"));
		if (s != NULL && d->stop_reason == NULL)
			d->stop_reason = hooks_text(d, s, strlen(s));
	}
	if ((s = json_string_value(json_object_get(spec,
	    "additionalContext"))) != NULL)
		hooks_append(d, &d->context, s, strlen(s));
	switch (d->event) {
	case HOOKS_PRE_TOOL_USE:
		p = hooks_perm_parse(json_string_value(json_object_get(spec,
		    "permissionDecision")));
		/* The older top-level "decision": approve or block. */
		if (p == HOOKS_PERM_NONE)
			p = hooks_perm_parse(json_string_value(
			    json_object_get(top, "decision")));
		v = json_object_get(spec, "updatedInput");
		if (json_is_object(v) && d->updated_input == NULL)
			d->updated_input = json_deep_copy(v);
		break;
	case HOOKS_PERMISSION_REQUEST:
		v = json_object_get(spec, "decision");
		s = json_string_value(json_object_get(v, "behavior"));
		if (s != NULL && (strcmp(s, "allow") == 0 ||
		    strcmp(s, "deny") == 0))
			p = hooks_perm_parse(s);
		v = json_object_get(v, "updatedInput");
		if (json_is_object(v) && d->updated_input == NULL)
			d->updated_input = json_deep_copy(v);
		break;
	case HOOKS_POST_TOOL_USE:
	case HOOKS_POST_TOOL_USE_FAILURE:
		s = json_string_value(json_object_get(top, "decision"));
		if (s != NULL && strcmp(s, "block") == 0) {
			d->blocked = true;
			json_object_set_new(run, "decision", json_string("block"));
			s = json_string_value(json_object_get(top, "reason"));
			if (s != NULL)
				hooks_append(d, &d->reason, s, strlen(s));
		}
		v = json_object_get(spec, "updatedToolOutput");
		if (v == NULL)
			v = json_object_get(spec, "updatedMCPToolOutput");
		if (v != NULL && d->event == HOOKS_POST_TOOL_USE &&
		    d->updated_output == NULL)
			d->updated_output = json_deep_copy(v);
		break;
	case HOOKS_SESSION_START:
	case HOOKS_SESSION_END:
	case HOOKS_NEVENTS:
		break;
	}
	if (p != HOOKS_PERM_NONE) {
		json_object_set_new(run, "decision",
		    json_string(hooks_perm_name(p)));
		hooks_perm(d, p, reason, reason != NULL ? strlen(reason) : 0);
	}
}

void
hooks_decide(struct hooks_decision *d, const struct hooks_outcome *o)
{
	json_t *run, *top;
	const char *reason;
	bool bad;

	run = json_pack("{s:s, s:s, s:I}", "event",
	    hooks_event_name(d->event), "command", o->command, "durationMs",
	    (json_int_t)o->duration_ms);
	json_array_append_new(d->runs, run);
	switch (o->end) {
	case HOOKS_END_TIMED_OUT:
		json_object_set_new(run, "outcome", json_string("timedOut"));
		return;
	case HOOKS_END_KILLED:
		json_object_set_new(run, "outcome", json_string("killed"));
		return;
	case HOOKS_END_FAILED:
		json_object_set_new(run, "outcome", json_string("error"));
		json_object_set_new(run, "error", json_stringn(o->err,
		    o->err_len));
		d->errors++;
		return;
	case HOOKS_END_EXITED:
		break;
	}
	json_object_set_new(run, "exitCode", json_integer(o->status));
	top = hooks_parse_out(o, &bad);
	if (o->status == 2) {
		/* Blocks even when its JSON says allow. */
		json_object_set_new(run, "outcome", json_string("blocked"));
		reason = hooks_reason(top, json_object_get(top,
		    "hookSpecificOutput"));
		switch (d->event) {
		case HOOKS_PRE_TOOL_USE:
		case HOOKS_PERMISSION_REQUEST:
			json_object_set_new(run, "decision",
			    json_string("deny"));
			if (reason != NULL)
				hooks_perm(d, HOOKS_PERM_DENY, reason,
				    strlen(reason));
			else
				hooks_perm(d, HOOKS_PERM_DENY, o->err,
				    o->err_len);
			break;
		case HOOKS_POST_TOOL_USE:
		case HOOKS_POST_TOOL_USE_FAILURE:
			json_object_set_new(run, "decision",
			    json_string("block"));
			d->blocked = true;
			if (reason != NULL)
				hooks_append(d, &d->reason, reason,
				    strlen(reason));
			else
				hooks_append(d, &d->reason, o->err, o->err_len);
			break;
		case HOOKS_SESSION_START:
		case HOOKS_SESSION_END:
		case HOOKS_NEVENTS:
			break;
		}
		json_decref(top);
		return;
	}
	if (o->status == 0 && !bad) {
		json_object_set_new(run, "outcome", json_string("ok"));
	} else {
		/* Not blocking; a missing command (127) is told apart. */
		json_object_set_new(run, "outcome", json_string("error"));
		if (bad)
			json_object_set_new(run, "error", json_string(
			    "its output starts with '{' but is not a JSON "
			    "object"));
		else if (o->status == 127)
			json_object_set_new(run, "error", json_string(
			    "command not found (exit 127)"));
		else if (o->err_len > 0)
			json_object_set_new(run, "error", json_stringn(o->err,
			    o->err_len > 1000 ? 1000 : o->err_len));
		d->errors++;
		if (o->status == 127)
			d->missing++;
	}
	if (top != NULL)
		hooks_json(d, top, run);
	else if (o->status == 0 && !bad && d->event == HOOKS_SESSION_START)
		/* SessionStart's plain stdout is context, as documented. */
		hooks_append(d, &d->context, o->out, o->out_len);
	json_decref(top);
}
