/*
 * MCP server configuration: Claude Code's .mcp.json shape and our
 * extensions (sandbox, limits, timeoutMs, concurrencySafe,
 * interruptBehavior, scope, startTimeoutMs). Pure: no I/O but the file read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "util.h"

static bool	mcp_config_server(struct mcp_server_config *, const char *,
		    const json_t *, bool, char *, size_t);
static bool	mcp_config_strings(const json_t *, const char *,
		    const char *, char *, size_t);
static bool	mcp_config_per_tool(const json_t *, const char *, bool,
		    char *, size_t);
static void	mcp_config_fail(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	mcp_config_server_clear(struct mcp_server_config *);

static void
mcp_config_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct mcp_config *
mcp_config_parse(const json_t *root, bool operator, char *err, size_t errlen)
{
	const json_t *servers = root, *v;
	struct mcp_config *c;
	const char *name;

	if (json_is_object(root) && json_object_get(root, "mcpServers") != NULL)
		servers = json_object_get(root, "mcpServers");
	if (!json_is_object(servers)) {
		mcp_config_fail(err, errlen, "mcpServers: must be an object");
		return NULL;
	}
	if (json_object_size(servers) > MCP_SERVERS_MAX) {
		mcp_config_fail(err, errlen, "mcpServers: at most %d servers",
		    MCP_SERVERS_MAX);
		return NULL;
	}
	c = xcalloc(1, sizeof *c);
	c->servers = xcalloc(json_object_size(servers) + 1,
	    sizeof *c->servers);
	json_object_foreach((json_t *)servers, name, v) {
		if (!mcp_config_server(&c->servers[c->n], name, v, operator,
		    err, errlen)) {
			mcp_config_server_clear(&c->servers[c->n]);
			mcp_config_free(c);
			return NULL;
		}
		c->n++;
	}
	return c;
}

struct mcp_config *
mcp_config_load(const char *path, char *err, size_t errlen)
{
	struct mcp_config *c;
	json_error_t jerr;
	json_t *root;
	char sub[512];

	if ((root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr)) ==
	    NULL) {
		mcp_config_fail(err, errlen, "%s:%d: %s", path, jerr.line,
		    jerr.text);
		return NULL;
	}
	if ((c = mcp_config_parse(root, true, sub, sizeof sub)) == NULL)
		mcp_config_fail(err, errlen, "%s: %s", path, sub);
	json_decref(root);
	return c;
}

static bool
mcp_config_server(struct mcp_server_config *s, const char *name,
    const json_t *o, bool operator, char *err, size_t errlen)
{
	static const char *known[] = { "type", "command", "args", "env", "cwd",
	    "sandbox", "limits", "timeoutMs", "concurrencySafe",
	    "interruptBehavior", "scope", "startTimeoutMs" };
	const json_t *v, *args;
	const char *key, *type;
	char field[MCP_NAME_MAX + 64], sub[256];
	size_t i, n;

	if (*name == '\0' || strlen(name) > MCP_NAME_MAX) {
		mcp_config_fail(err, errlen, "mcpServers: a server name must "
		    "have 1 to %d characters", MCP_NAME_MAX);
		return false;
	}
	if (strstr(name, "__") != NULL) {
		mcp_config_fail(err, errlen, "mcpServers.%s: a server name "
		    "must not contain \"__\" (it separates mcp__SERVER__TOOL)",
		    name);
		return false;
	}
	snprintf(field, sizeof field, "mcpServers.%s", name);
	if (!json_is_object(o)) {
		mcp_config_fail(err, errlen, "%s: must be an object", field);
		return false;
	}
	s->name = xstrdup(name);
	s->timeout_ms = 0;
	json_object_foreach((json_t *)o, key, v) {
		for (i = 0; i < nitems(known); i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (i == nitems(known)) {
			mcp_config_fail(err, errlen, "%s.%s: unknown field "
			    "(known: type, command, args, env, cwd, sandbox, "
			    "limits, timeoutMs, concurrencySafe, "
			    "interruptBehavior, scope, startTimeoutMs)", field,
			    key);
			return false;
		}
	}
	if ((v = json_object_get(o, "type")) != NULL) {
		if (!json_is_string(v)) {
			mcp_config_fail(err, errlen, "%s.type: must be a string",
			    field);
			return false;
		}
		type = json_string_value(v);
		if (strcmp(type, "http") == 0 || strcmp(type, "sse") == 0) {
			mcp_config_fail(err, errlen, "%s.type: \"%s\" servers are "
			    "not run by the daemon: only \"stdio\" (a remote "
			    "server can be a client-run tool)", field, type);
			return false;
		}
		if (strcmp(type, "stdio") != 0) {
			mcp_config_fail(err, errlen, "%s.type: must be \"stdio\"",
			    field);
			return false;
		}
	}
	v = json_object_get(o, "command");
	if (!json_is_string(v) || json_string_length(v) == 0) {
		mcp_config_fail(err, errlen, "%s.command: must be a non-empty "
		    "string", field);
		return false;
	}
	args = json_object_get(o, "args");
	if (args != NULL && !json_is_array(args)) {
		mcp_config_fail(err, errlen, "%s.args: must be an array of "
		    "strings", field);
		return false;
	}
	n = json_array_size(args);
	if (n > MCP_ARGS_MAX) {
		mcp_config_fail(err, errlen, "%s.args: at most %d arguments",
		    field, MCP_ARGS_MAX);
		return false;
	}
	s->argv = xcalloc(n + 2, sizeof *s->argv);
	s->argv[0] = xstrdup(json_string_value(v));
	for (i = 0; i < n; i++) {
		v = json_array_get(args, i);
		if (!json_is_string(v) || strlen(json_string_value(v)) !=
		    json_string_length(v)) {
			mcp_config_fail(err, errlen, "%s.args[%zu]: must be a "
			    "string (without NUL)", field, i);
			return false;
		}
		s->argv[i + 1] = xstrdup(json_string_value(v));
	}
	if ((v = json_object_get(o, "env")) != NULL) {
		snprintf(sub, sizeof sub, "%s.env", field);
		if (!mcp_config_strings(v, sub, "=", err, errlen))
			return false;
		s->env = json_deep_copy(v);
	}
	if ((v = json_object_get(o, "cwd")) != NULL) {
		if (!json_is_string(v) || json_string_value(v)[0] != '/') {
			mcp_config_fail(err, errlen, "%s.cwd: must be an absolute "
			    "path", field);
			return false;
		}
		s->cwd = xstrdup(json_string_value(v));
	}
	snprintf(sub, sizeof sub, "%s.sandbox", field);
	if (!tooldef_parse_sandbox(json_object_get(o, "sandbox"), sub,
	    &s->sandbox, err, errlen))
		return false;
	s->has_sandbox = json_object_get(o, "sandbox") != NULL;
	if ((v = json_object_get(o, "limits")) != NULL &&
	    !tooldef_parse_limits(v, &s->limits, sub, sizeof sub)) {
		mcp_config_fail(err, errlen, "%s.%s", field, sub);
		return false;
	}
	if ((v = json_object_get(o, "timeoutMs")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 24 * 3600 * 1000) {
			mcp_config_fail(err, errlen, "%s.timeoutMs: must be an "
			    "integer from 1 to 86400000", field);
			return false;
		}
		s->timeout_ms = json_integer_value(v);
	}
	if ((v = json_object_get(o, "startTimeoutMs")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > MCP_START_TIMEOUT_MAX) {
			mcp_config_fail(err, errlen, "%s.startTimeoutMs: must be "
			    "an integer from 1 to %d", field,
			    MCP_START_TIMEOUT_MAX);
			return false;
		}
		s->start_timeout_ms = json_integer_value(v);
	}
	if ((v = json_object_get(o, "concurrencySafe")) != NULL) {
		snprintf(sub, sizeof sub, "%s.concurrencySafe", field);
		if (!mcp_config_per_tool(v, sub, true, err, errlen))
			return false;
		s->concurrency_safe = json_deep_copy(v);
	}
	if ((v = json_object_get(o, "interruptBehavior")) != NULL) {
		snprintf(sub, sizeof sub, "%s.interruptBehavior", field);
		if (!mcp_config_per_tool(v, sub, false, err, errlen))
			return false;
		s->interrupt = json_deep_copy(v);
	}
	s->scope = MCP_SCOPE_SESSION;
	if ((v = json_object_get(o, "scope")) != NULL) {
		if (json_is_string(v) && strcmp(json_string_value(v),
		    "daemon") == 0) {
			if (!operator) {
				mcp_config_fail(err, errlen, "%s.scope: \"daemon\" "
				    "is for the operator's --mcp-config only",
				    field);
				return false;
			}
			s->scope = MCP_SCOPE_DAEMON;
		} else if (!json_is_string(v) || strcmp(json_string_value(v),
		    "session") != 0) {
			mcp_config_fail(err, errlen, "%s.scope: must be "
			    "\"session\" or \"daemon\"", field);
			return false;
		}
	}
	return true;
}

/* An object of strings whose keys hold none of bad (env: no '='). */
static bool
mcp_config_strings(const json_t *o, const char *field, const char *bad,
    char *err, size_t errlen)
{
	const json_t *v;
	const char *key;

	if (!json_is_object(o)) {
		mcp_config_fail(err, errlen, "%s: must be an object of strings",
		    field);
		return false;
	}
	json_object_foreach((json_t *)o, key, v) {
		if (*key == '\0' || strpbrk(key, bad) != NULL) {
			mcp_config_fail(err, errlen, "%s: \"%.64s\" is not a "
			    "valid name", field, key);
			return false;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) !=
		    json_string_length(v)) {
			mcp_config_fail(err, errlen, "%s.%.64s: must be a string",
			    field, key);
			return false;
		}
	}
	return true;
}

/* {tool: bool} (concurrencySafe) or {tool: "cancel" | "block"}. */
static bool
mcp_config_per_tool(const json_t *o, const char *field, bool booleans,
    char *err, size_t errlen)
{
	const json_t *v;
	const char *key, *s;

	if (!json_is_object(o)) {
		mcp_config_fail(err, errlen, "%s: must be an object keyed by "
		    "tool name", field);
		return false;
	}
	json_object_foreach((json_t *)o, key, v) {
		if (booleans && !json_is_boolean(v)) {
			mcp_config_fail(err, errlen, "%s.%.64s: must be true or "
			    "false", field, key);
			return false;
		}
		s = json_string_value(v);
		if (!booleans && (s == NULL || (strcmp(s, "cancel") != 0 &&
		    strcmp(s, "block") != 0))) {
			mcp_config_fail(err, errlen, "%s.%.64s: must be "
			    "\"cancel\" or \"block\"", field, key);
			return false;
		}
	}
	return true;
}

static void
mcp_config_server_clear(struct mcp_server_config *s)
{
	size_t i;

	free(s->name);
	if (s->argv != NULL)
		for (i = 0; s->argv[i] != NULL; i++)
			free(s->argv[i]);
	free(s->argv);
	json_decref(s->env);
	free(s->cwd);
	tooldef_sandbox_clear(&s->sandbox);
	json_decref(s->concurrency_safe);
	json_decref(s->interrupt);
	memset(s, 0, sizeof *s);
}

void
mcp_config_free(struct mcp_config *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->n; i++)
		mcp_config_server_clear(&c->servers[i]);
	free(c->servers);
	free(c);
}

const struct mcp_server_config *
mcp_config_find(const struct mcp_config *c, const char *name)
{
	size_t i;

	for (i = 0; c != NULL && i < c->n; i++)
		if (strcmp(c->servers[i].name, name) == 0)
			return &c->servers[i];
	return NULL;
}

int
mcp_config_safe(const struct mcp_server_config *s, const char *tool)
{
	const json_t *v = json_object_get(s->concurrency_safe, tool);

	return v == NULL ? -1 : json_is_true(v);
}

int
mcp_config_cancel(const struct mcp_server_config *s, const char *tool)
{
	const char *v = json_string_value(json_object_get(s->interrupt, tool));

	return v == NULL ? -1 : strcmp(v, "cancel") == 0;
}

char *
mcp_tool_name(const char *server, const char *tool)
{
	char *name, *p;

	xasprintf(&name, "mcp__%s__%s", server, tool);
	for (p = name; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			*p = '_';
	if (strlen(name) > MCP_TOOL_NAME_MAX)
		name[MCP_TOOL_NAME_MAX] = '\0';
	return name;
}
