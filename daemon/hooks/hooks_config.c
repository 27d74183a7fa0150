/* Hook configuration in the shape of Claude Code's settings.json, its sources added up. */
#include "hooks/hooks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "util.h"

/* A hook's own timeout, in seconds as Claude Code's: at most a day. */
#define HOOKS_TIMEOUT_MAX_S 86400
/* Tool names whose matching a configuration remembers. */
#define HOOKS_SEEN_MAX 1024

struct hooks_handler {
	char *command;
	char *shell;           /* NULL: bash */
	char *if_text;         /* NULL: none */
	struct hooks_rule *rule;
	int64_t timeout_ms;    /* 0: the default */
};

/* One matcher group, shared by the configurations it was merged into. */
struct hooks_group {
	int refs;
	struct hooks_matcher *matcher;
	struct hooks_handler *handlers;
	size_t nhandlers;
};

/*
 * What the matchers of each event said of one tool name (and alias): a
 * matcher looks at names only, so a tool no hook matches costs one lookup.
 */
struct hooks_seen {
	char *key;        /* name, '\n', alias */
	unsigned known;   /* bit e: event e's matchers were run */
	unsigned matched; /* bit e: one of them matched */
};

struct hooks {
	struct hooks_group **groups[HOOKS_NEVENTS];
	size_t ngroups[HOOKS_NEVENTS];
	size_t nhandlers;
	struct idmap seen;        /* key -> struct hooks_seen */
	struct hooks_seen **seen_list;
	size_t nseen;
};

static const char *const hooks_event_names[HOOKS_NEVENTS] = {
	"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
	"SessionStart", "SessionEnd",
};

/* Claude Code's events with no counterpart here: accepted and not run. */
static const char *const hooks_foreign_events[] = {
	"UserPromptSubmit", "Stop", "StopFailure", "SubagentStart",
	"SubagentStop", "Notification", "PreCompact", "PostCompact",
	"PermissionDenied", "Setup", "InstructionsLoaded", "ConfigChange",
	"WorktreeCreate", "WorktreeRemove", "TeammateIdle", "TaskCreated",
	"TaskCompleted", "Elicitation", "ElicitationResult", "CwdChanged",
	"FileChanged", "UserPromptExpansion",
};

static void	hooks_fail(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void	hooks_group_unref(struct hooks_group *);
static void	hooks_handler_clear(struct hooks_handler *);
static int	hooks_parse_handler(const json_t *, const char *,
    struct hooks_handler *, char *, size_t);
static struct hooks_group *hooks_parse_group(const json_t *, const char *,
    char *, size_t);
static bool	hooks_same(const struct hooks_handler *,
    const struct hooks_handler *);
static bool	hooks_foreign(const char *);
static void	hooks_seen_clear(struct hooks *);
static struct hooks_seen *hooks_seen_get(struct hooks *, const char *,
    const char *);

const char *
hooks_event_name(enum hooks_event e)
{
	return e < HOOKS_NEVENTS ? hooks_event_names[e] : "?";
}

static void
hooks_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct hooks *
hooks_new(void)
{
	return xcalloc(1, sizeof(struct hooks));
}

static void
hooks_handler_clear(struct hooks_handler *h)
{
	free(h->command);
	free(h->shell);
	free(h->if_text);
	hooks_rule_free(h->rule);
}

static void
hooks_group_unref(struct hooks_group *g)
{
	size_t i;

	if (g == NULL || --g->refs > 0)
		return;
	for (i = 0; i < g->nhandlers; i++)
		hooks_handler_clear(&g->handlers[i]);
	free(g->handlers);
	hooks_matcher_free(g->matcher);
	free(g);
}

void
hooks_free(struct hooks *hk)
{
	size_t e, i;

	if (hk == NULL)
		return;
	for (e = 0; e < HOOKS_NEVENTS; e++) {
		for (i = 0; i < hk->ngroups[e]; i++)
			hooks_group_unref(hk->groups[e][i]);
		free(hk->groups[e]);
	}
	hooks_seen_clear(hk);
	free(hk);
}

static bool
hooks_foreign(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof hooks_foreign_events /
	    sizeof hooks_foreign_events[0]; i++)
		if (strcmp(name, hooks_foreign_events[i]) == 0)
			return true;
	return false;
}

/* One {"type":"command", ...}; place is where it is ("hooks.X[0].hooks[1]"). */
static int
hooks_parse_handler(const json_t *obj, const char *place,
    struct hooks_handler *h, char *err, size_t errlen)
{
	const json_t *v;
	const char *type, *s;
	char why[400];
	double secs;

	if (!json_is_object(obj)) {
		hooks_fail(err, errlen, "%s: must be an object", place);
		return -1;
	}
	if ((type = json_string_value(json_object_get(obj, "type"))) == NULL) {
		hooks_fail(err, errlen, "%s.type: must be \"command\"", place);
		return -1;
	}
	if (strcmp(type, "prompt") == 0 || strcmp(type, "agent") == 0 ||
	    strcmp(type, "mcp_tool") == 0 || strcmp(type, "http") == 0) {
		hooks_fail(err, errlen, "%s.type: \"%s\" hooks are not "
		    "supported by stexec: only \"command\" hooks run", place,
		    type);
		return -1;
	}
	if (strcmp(type, "command") != 0) {
		hooks_fail(err, errlen, "%s.type: unknown hook type \"%s\": "
		    "must be \"command\"", place, type);
		return -1;
	}
	s = json_string_value(json_object_get(obj, "command"));
	if (s == NULL || *s == '\0') {
		hooks_fail(err, errlen, "%s.command: must be a non-empty string",
		    place);
		return -1;
	}
	h->command = xstrdup(s);
	if ((v = json_object_get(obj, "timeout")) != NULL) {
		secs = json_number_value(v);
		if (!json_is_number(v) || !(secs > 0)) {
			hooks_fail(err, errlen, "%s.timeout: must be a positive "
			    "number", place);
			return -1;
		}
		if (secs > HOOKS_TIMEOUT_MAX_S) {
			hooks_fail(err, errlen, "%s.timeout: at most %d seconds",
			    place, HOOKS_TIMEOUT_MAX_S);
			return -1;
		}
		h->timeout_ms = (int64_t)(secs * 1000);
		if (h->timeout_ms == 0)
			h->timeout_ms = 1;
	}
	if ((v = json_object_get(obj, "shell")) != NULL) {
		s = json_string_value(v);
		if (s == NULL || strcmp(s, "bash") != 0) {
			hooks_fail(err, errlen, "%s.shell: only \"bash\" is "
			    "supported", place);
			return -1;
		}
		h->shell = xstrdup(s);
	}
	if ((v = json_object_get(obj, "if")) != NULL) {
		if ((s = json_string_value(v)) == NULL) {
			hooks_fail(err, errlen, "%s.if: must be a string", place);
			return -1;
		}
		if ((h->rule = hooks_rule_parse(s, why, sizeof why)) == NULL) {
			hooks_fail(err, errlen, "%s.if: %s", place, why);
			return -1;
		}
		h->if_text = xstrdup(s);
	}
	if (json_is_true(json_object_get(obj, "async")) ||
	    json_is_true(json_object_get(obj, "asyncRewake"))) {
		hooks_fail(err, errlen, "%s.async: async hooks are not "
		    "supported by stexec: every hook runs before the tool goes "
		    "on", place);
		return -1;
	}
	return 0;
}

static struct hooks_group *
hooks_parse_group(const json_t *obj, const char *place, char *err,
    size_t errlen)
{
	struct hooks_group *g;
	const json_t *v, *list;
	const char *m = NULL;
	char why[400], *at;
	size_t i;

	if (!json_is_object(obj)) {
		hooks_fail(err, errlen, "%s: must be an object", place);
		return NULL;
	}
	if ((v = json_object_get(obj, "matcher")) != NULL && !json_is_null(v) &&
	    (m = json_string_value(v)) == NULL) {
		hooks_fail(err, errlen, "%s.matcher: must be a string", place);
		return NULL;
	}
	list = json_object_get(obj, "hooks");
	if (!json_is_array(list)) {
		hooks_fail(err, errlen, "%s.hooks: must be an array", place);
		return NULL;
	}
	g = xcalloc(1, sizeof *g);
	g->refs = 1;
	if ((g->matcher = hooks_matcher_compile(m, why, sizeof why)) == NULL) {
		hooks_fail(err, errlen, "%s.matcher: %s", place, why);
		hooks_group_unref(g);
		return NULL;
	}
	if (json_array_size(list) > HOOKS_MAX_HANDLERS) {
		hooks_fail(err, errlen, "%s.hooks: more than %d hooks", place,
		    HOOKS_MAX_HANDLERS);
		hooks_group_unref(g);
		return NULL;
	}
	g->handlers = xcalloc(json_array_size(list) + 1, sizeof *g->handlers);
	for (i = 0; i < json_array_size(list); i++) {
		xasprintf(&at, "%s.hooks[%zu]", place, i);
		if (hooks_parse_handler(json_array_get(list, i), at,
		    &g->handlers[i], err, errlen) == -1) {
			g->nhandlers = i + 1;
			free(at);
			hooks_group_unref(g);
			return NULL;
		}
		free(at);
	}
	g->nhandlers = i;
	return g;
}

int
hooks_add_json(struct hooks *hk, const json_t *settings, char *err,
    size_t errlen)
{
	struct hooks *add;
	const json_t *events, *list;
	const char *name;
	char *place;
	size_t e, i;
	int rc;

	if (!json_is_object(settings)) {
		hooks_fail(err, errlen, "must be an object");
		return -1;
	}
	if ((events = json_object_get(settings, "hooks")) == NULL ||
	    json_is_null(events))
		return 0;
	if (!json_is_object(events)) {
		hooks_fail(err, errlen, "hooks: must be an object");
		return -1;
	}
	add = hooks_new();
	json_object_foreach((json_t *)events, name, list) {
		for (e = 0; e < HOOKS_NEVENTS; e++)
			if (strcmp(name, hooks_event_names[e]) == 0)
				break;
		if (e == HOOKS_NEVENTS && hooks_foreign(name))
			continue;
		if (e == HOOKS_NEVENTS) {
			hooks_fail(err, errlen, "hooks.%s: unknown event: one of "
			    "PreToolUse, PostToolUse, PostToolUseFailure, "
			    "PermissionRequest, SessionStart, SessionEnd", name);
			hooks_free(add);
			return -1;
		}
		if (!json_is_array(list)) {
			hooks_fail(err, errlen, "hooks.%s: must be an array",
			    name);
			hooks_free(add);
			return -1;
		}
		for (i = 0; i < json_array_size(list); i++) {
			struct hooks_group *g;

			xasprintf(&place, "hooks.%s[%zu]", name, i);
			g = hooks_parse_group(json_array_get(list, i), place,
			    err, errlen);
			free(place);
			if (g == NULL) {
				hooks_free(add);
				return -1;
			}
			add->groups[e] = xreallocarray(add->groups[e],
			    add->ngroups[e] + 1, sizeof *add->groups[e]);
			add->groups[e][add->ngroups[e]++] = g;
			add->nhandlers += g->nhandlers;
			if (add->nhandlers > HOOKS_MAX_HANDLERS)
				break;
		}
	}
	if (hk->nhandlers + add->nhandlers > HOOKS_MAX_HANDLERS) {
		hooks_fail(err, errlen, "hooks: more than %d hooks in all",
		    HOOKS_MAX_HANDLERS);
		hooks_free(add);
		return -1;
	}
	rc = hooks_merge(hk, add, err, errlen);
	hooks_free(add);
	return rc;
}

int
hooks_add_file(struct hooks *hk, const char *path, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root;
	char why[600];
	int rc;

	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		hooks_fail(err, errlen, "%s:%d:%d: %s", path, jerr.line,
		    jerr.column, jerr.text);
		return -1;
	}
	rc = hooks_add_json(hk, root, why, sizeof why);
	json_decref(root);
	if (rc == -1)
		hooks_fail(err, errlen, "%s: %s", path, why);
	return rc;
}

int
hooks_merge(struct hooks *dst, const struct hooks *src, char *err,
    size_t errlen)
{
	size_t e, i;

	hooks_seen_clear(dst);
	for (e = 0; e < HOOKS_NEVENTS; e++) {
		if (src->ngroups[e] == 0)
			continue;
		dst->groups[e] = xreallocarray(dst->groups[e],
		    dst->ngroups[e] + src->ngroups[e], sizeof *dst->groups[e]);
		for (i = 0; i < src->ngroups[e]; i++) {
			src->groups[e][i]->refs++;
			dst->groups[e][dst->ngroups[e]++] = src->groups[e][i];
		}
	}
	dst->nhandlers += src->nhandlers;
	return 0;
}

size_t
hooks_count(const struct hooks *hk, enum hooks_event e)
{
	size_t i, n = 0;

	for (i = 0; hk != NULL && i < hk->ngroups[e]; i++)
		n += hk->groups[e][i]->nhandlers;
	return n;
}

static bool
hooks_same(const struct hooks_handler *a, const struct hooks_handler *b)
{
	return strcmp(a->command, b->command) == 0 &&
	    strcmp(a->shell != NULL ? a->shell : "bash",
	    b->shell != NULL ? b->shell : "bash") == 0 &&
	    strcmp(a->if_text != NULL ? a->if_text : "",
	    b->if_text != NULL ? b->if_text : "") == 0;
}

static void
hooks_seen_clear(struct hooks *hk)
{
	size_t i;

	for (i = 0; i < hk->nseen; i++) {
		free(hk->seen_list[i]->key);
		free(hk->seen_list[i]);
	}
	free(hk->seen_list);
	hk->seen_list = NULL;
	hk->nseen = 0;
	idmap_free(&hk->seen);
}

/* The entry of a name and alias, made if there is room; else NULL. */
static struct hooks_seen *
hooks_seen_get(struct hooks *hk, const char *name, const char *alias)
{
	struct hooks_seen *seen;
	char buf[512];
	int len;

	/* Looked up without an allocation: this is every call's cost. */
	len = snprintf(buf, sizeof buf, "%s\n%s", name, alias != NULL ? alias :
	    "");
	if (len < 0 || (size_t)len >= sizeof buf)
		return NULL;
	if ((seen = idmap_get(&hk->seen, buf)) != NULL ||
	    hk->nseen == HOOKS_SEEN_MAX)
		return seen;
	seen = xcalloc(1, sizeof *seen);
	seen->key = xstrdup(buf);
	hk->seen_list = xreallocarray(hk->seen_list, hk->nseen + 1,
	    sizeof *hk->seen_list);
	hk->seen_list[hk->nseen++] = seen;
	idmap_put(&hk->seen, seen->key, seen);
	return seen;
}

size_t
hooks_select(const struct hooks *chk, enum hooks_event e,
    const struct hooks_subject *s, const struct hooks_handler **out,
    size_t max)
{
	struct hooks *hk = (struct hooks *)chk; /* the cache is mutable */
	const struct hooks_group *g;
	const struct hooks_handler *h;
	struct hooks_seen *seen;
	size_t i, j, k, n = 0;
	bool tool = e <= HOOKS_PERMISSION_REQUEST, any = false;

	if (hk == NULL || hk->ngroups[e] == 0)
		return 0;
	seen = hooks_seen_get(hk, s->name, s->alias);
	if (seen != NULL && (seen->known & (1U << e)) != 0 &&
	    (seen->matched & (1U << e)) == 0)
		return 0;
	for (i = 0; i < hk->ngroups[e]; i++) {
		g = hk->groups[e][i];
		if (!hooks_matcher_match(g->matcher, s->name, s->alias))
			continue;
		any = true;
		for (j = 0; j < g->nhandlers && n < max; j++) {
			h = &g->handlers[j];
			for (k = 0; k < n; k++)
				if (hooks_same(out[k], h))
					break;
			if (k < n)
				continue;
			/* `if` applies to tool events only, as documented. */
			if (h->rule != NULL && tool &&
			    !hooks_rule_match(h->rule, s))
				continue;
			out[n++] = h;
		}
	}
	if (seen != NULL) {
		seen->known |= 1U << e;
		if (any)
			seen->matched |= 1U << e;
	}
	return n;
}

const char *
hooks_handler_command(const struct hooks_handler *h)
{
	return h->command;
}

int64_t
hooks_handler_timeout_ms(const struct hooks_handler *h)
{
	return h->timeout_ms;
}
