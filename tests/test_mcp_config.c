/*
 * MCP configuration (.mcp.json and its extensions) and the mapping of a
 * tools/call result to content blocks: pure logic, table by table.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "core/content.h"
#include "mcp/mcp.h"

static struct mcp_config *
parse(const char *text, bool operator, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *v = json_loads(text, 0, &jerr);
	struct mcp_config *c;

	cr_assert_not_null(v, "%s: %s", text, jerr.text);
	c = mcp_config_parse(v, operator, err, errlen);
	json_decref(v);
	return c;
}

Test(mcp_config, claude_code_shape)
{
	char err[256] = "";
	struct mcp_config *c = parse("{\"mcpServers\": {\"fs\": {\"type\": "
	    "\"stdio\", \"command\": \"npx\", \"args\": [\"-y\", \"srv\"], "
	    "\"env\": {\"A\": \"1\"}}, \"vcs\": {\"command\": \"/bin/vcs-mcp\", "
	    "\"cwd\": \"/tmp\", \"timeoutMs\": 5000, \"startTimeoutMs\": 90000, "
	    "\"sandbox\": {\"mode\": "
	    "\"workspace-write\", \"network\": {\"allow\": [\"api.example.com\"]}}, "
	    "\"limits\": {\"memoryBytes\": 100000000}, \"concurrencySafe\": "
	    "{\"log\": true, \"push\": false}, \"interruptBehavior\": {\"push\": "
	    "\"cancel\"}}}}", false, err, sizeof err);
	const struct mcp_server_config *fs, *vcs;

	cr_assert_not_null(c, "%s", err);
	cr_assert_eq(c->n, 2);
	fs = mcp_config_find(c, "fs");
	vcs = mcp_config_find(c, "vcs");
	cr_assert_not_null(fs);
	cr_assert_not_null(vcs);
	cr_assert_str_eq(fs->argv[0], "npx");
	cr_assert_str_eq(fs->argv[2], "srv");
	cr_assert_null(fs->argv[3]);
	cr_assert_str_eq(json_string_value(json_object_get(fs->env, "A")), "1");
	cr_assert_null(fs->cwd);
	cr_assert_not(fs->has_sandbox);
	cr_assert_eq(fs->scope, MCP_SCOPE_SESSION);
	cr_assert_str_eq(vcs->cwd, "/tmp");
	cr_assert_eq(vcs->timeout_ms, 5000);
	cr_assert_eq(vcs->start_timeout_ms, 90000);
	cr_assert_eq(fs->start_timeout_ms, 0);
	cr_assert(vcs->has_sandbox);
	cr_assert_eq(vcs->sandbox.mode, TOOLDEF_SANDBOX_WORKSPACE_WRITE);
	cr_assert_eq(vcs->sandbox.network, TOOLDEF_NETWORK_RULES);
	cr_assert_eq(vcs->limits.memory_bytes, 100000000);
	cr_assert_eq(mcp_config_safe(vcs, "log"), 1);
	cr_assert_eq(mcp_config_safe(vcs, "push"), 0);
	cr_assert_eq(mcp_config_safe(vcs, "other"), -1);
	cr_assert_eq(mcp_config_cancel(vcs, "push"), 1);
	cr_assert_eq(mcp_config_cancel(vcs, "log"), -1);
	mcp_config_free(c);
}

Test(mcp_config, errors_name_the_field)
{
	static const struct {
		const char *text;
		bool operator;
		const char *err;
	} cases[] = {
		{ "{\"mcpServers\": []}", true, "mcpServers: must be an object" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"args\": "
		    "[\"a\", 1]}}}", true,
		    "mcpServers.fs.args[1]: must be a string" },
		{ "{\"mcpServers\": {\"fs\": {\"args\": []}}}", true,
		    "mcpServers.fs.command: must be a non-empty string" },
		{ "{\"mcpServers\": {\"r\": {\"type\": \"http\", \"url\": "
		    "\"https://x\"}}}", true, "mcpServers.r.url: unknown field" },
		{ "{\"mcpServers\": {\"r\": {\"type\": \"http\", \"command\": "
		    "\"x\"}}}", true, "mcpServers.r.type: \"http\" servers are "
		    "not run by the daemon" },
		{ "{\"mcpServers\": {\"r\": {\"type\": \"sse\", \"command\": "
		    "\"x\"}}}", true, "mcpServers.r.type: \"sse\" servers" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"scope\": "
		    "\"daemon\"}}}", false, "mcpServers.fs.scope: \"daemon\" is "
		    "for the operator" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"scope\": "
		    "\"world\"}}}", true, "mcpServers.fs.scope: must be" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"env\": "
		    "{\"A\": 1}}}}", true, "mcpServers.fs.env.A: must be a string" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"cwd\": "
		    "\"rel\"}}}", true, "mcpServers.fs.cwd: must be an absolute" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"sandbox\": "
		    "\"tight\"}}}", true, "mcpServers.fs.sandbox" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"limits\": "
		    "{\"memoryBytes\": 1}}}}", true, "mcpServers.fs.limits" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", "
		    "\"concurrencySafe\": {\"t\": \"yes\"}}}}", true,
		    "mcpServers.fs.concurrencySafe.t: must be true or false" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", "
		    "\"interruptBehavior\": {\"t\": \"stop\"}}}}", true,
		    "mcpServers.fs.interruptBehavior.t: must be \"cancel\"" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", \"timeoutMs\": "
		    "0}}}", true, "mcpServers.fs.timeoutMs: must be an integer" },
		{ "{\"mcpServers\": {\"fs\": {\"command\": \"x\", "
		    "\"startTimeoutMs\": 3600001}}}", true,
		    "mcpServers.fs.startTimeoutMs: must be an integer from 1 to "
		    "3600000" },
		{ "{\"mcpServers\": {\"a__b\": {\"command\": \"x\"}}}", true,
		    "mcpServers.a__b: a server name must not contain" },
	};
	char err[512];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = '\0';
		cr_assert_null(parse(cases[i].text, cases[i].operator, err,
		    sizeof err), "%s", cases[i].text);
		cr_expect(strstr(err, cases[i].err) == err ||
		    strncmp(err, cases[i].err, strlen(cases[i].err)) == 0,
		    "%s: got \"%s\", want \"%s\"", cases[i].text, err,
		    cases[i].err);
	}
}

Test(mcp_config, daemon_scope_from_the_operator)
{
	char err[256];
	struct mcp_config *c = parse("{\"fs\": {\"command\": \"x\", \"scope\": "
	    "\"daemon\"}}", true, err, sizeof err);

	cr_assert_not_null(c, "%s", err);
	cr_assert_eq(c->servers[0].scope, MCP_SCOPE_DAEMON);
	mcp_config_free(c);
}

Test(mcp_config, tool_names)
{
	static const char *cases[][3] = {
		{ "fs", "read_text_file", "mcp__fs__read_text_file" },
		{ "my.srv", "a/b c", "mcp__my_srv__a_b_c" },
		{ "x", "d\xc3\xa9j\xc3\xa0", "mcp__x__d__j__" },
		{ "s-1", "get-tiny-image", "mcp__s-1__get-tiny-image" },
	};
	char *name, *longer, big[300];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		name = mcp_tool_name(cases[i][0], cases[i][1]);
		cr_expect_str_eq(name, cases[i][2]);
		free(name);
	}
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	longer = mcp_tool_name("s", big);
	cr_expect_eq(strlen(longer), MCP_TOOL_NAME_MAX);
	free(longer);
}

static json_t *
map(const char *text, bool *is_error, json_t **meta)
{
	json_t *r = json_loads(text, 0, NULL), *content = NULL;
	char err[256];

	cr_assert_not_null(r, "%s", text);
	cr_assert_eq(mcp_content_result(r, &content, is_error, meta, err,
	    sizeof err), 0, "%s", err);
	json_decref(r);
	cr_assert(content_check(content, err, sizeof err), "%s", err);
	return content;
}

Test(mcp_content, blocks)
{
	bool is_error;
	json_t *meta, *c;
	const char *t;

	c = map("{\"content\": [{\"type\": \"text\", \"text\": \"hi\"}, "
	    "{\"type\": \"image\", \"mimeType\": \"image/png\", \"data\": "
	    "\"iVBORw0KGgo=\"}, {\"type\": \"audio\", \"mimeType\": "
	    "\"audio/wav\", \"data\": \"UklGRg==\"}, {\"type\": "
	    "\"resource_link\", \"uri\": \"file:///a/b.txt\", \"name\": \"b\", "
	    "\"mimeType\": \"text/plain\", \"description\": \"a file\"}, "
	    "{\"type\": \"resource\", \"resource\": {\"uri\": \"mem://x\", "
	    "\"mimeType\": \"text/plain\", \"text\": \"inside\"}}, {\"type\": "
	    "\"resource\", \"resource\": {\"uri\": \"mem://y\", \"blob\": "
	    "\"AAAA\"}}, {\"type\": \"hologram\"}, {\"type\": \"image\", "
	    "\"mimeType\": \"image/tiff\", \"data\": \"AAAA\"}]}", &is_error,
	    &meta);
	cr_assert_not(is_error);
	cr_assert_null(meta);
	cr_assert_eq(json_array_size(c), 8);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(c,
	    0), "text")), "hi");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(
	    json_array_get(c, 1), "source"), "media_type")), "image/png");
	t = json_string_value(json_object_get(json_array_get(c, 2), "text"));
	cr_expect(strstr(t, "audio (audio/wav, 8 bytes of base64)") != NULL,
	    "%s", t);
	t = json_string_value(json_object_get(json_array_get(c, 3), "text"));
	cr_expect_str_eq(t, "[a resource link: b <file:///a/b.txt>, "
	    "text/plain: a file]");
	t = json_string_value(json_object_get(json_array_get(c, 4), "text"));
	cr_expect_str_eq(t, "[an embedded resource <mem://x>, text/plain]\n"
	    "inside");
	t = json_string_value(json_object_get(json_array_get(c, 5), "text"));
	cr_expect(strstr(t, "<mem://y>: 4 bytes of base64, not shown") != NULL,
	    "%s", t);
	t = json_string_value(json_object_get(json_array_get(c, 6), "text"));
	cr_expect(strstr(t, "\"hologram\"") != NULL, "%s", t);
	t = json_string_value(json_object_get(json_array_get(c, 7), "text"));
	cr_expect(strstr(t, "image/tiff") != NULL && strstr(t, "not shown"),
	    "%s", t);
	json_decref(c);
}

Test(mcp_content, structured_and_error)
{
	bool is_error;
	json_t *meta, *c;

	c = map("{\"content\": [{\"type\": \"text\", \"text\": \"{}\"}], "
	    "\"structuredContent\": {\"temp\": 21}, \"isError\": true}",
	    &is_error, &meta);
	cr_assert(is_error);
	cr_assert_not_null(meta);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(
	    json_object_get(meta, "mcp"), "structuredContent"), "temp")), 21);
	json_decref(c);
	json_decref(meta);
	/* Structured content alone is still shown to the model. */
	c = map("{\"structuredContent\": {\"a\": 1}}", &is_error, &meta);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(c,
	    0), "text")), "{\"a\":1}");
	json_decref(c);
	json_decref(meta);
}

Test(mcp_content, an_image_over_the_limit_is_refused_in_words)
{
	size_t n = CONTENT_IMAGE_MAX + 4;
	char *data = malloc(n + 1);
	json_t *r, *content, *meta;
	const char *t;
	bool is_error;
	char err[256];

	cr_assert_not_null(data);
	memset(data, 'A', n);
	data[n] = '\0';
	r = json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type", "image",
	    "mimeType", "image/png", "data", data);
	free(data);
	cr_assert_eq(mcp_content_result(r, &content, &is_error, &meta, err,
	    sizeof err), 0, "%s", err);
	t = json_string_value(json_object_get(json_array_get(content, 0),
	    "text"));
	cr_assert_not_null(t);
	cr_expect(strstr(t, "an image (image/png, 5242884 bytes of base64) the "
	    "server returned, not shown") != NULL, "%s", t);
	cr_assert(content_check(content, err, sizeof err), "%s", err);
	json_decref(content);
	json_decref(r);
}

Test(mcp_content, not_a_result)
{
	static const char *bad[] = { "[]", "{\"content\": \"x\"}" };
	json_t *r, *content, *meta;
	bool is_error;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = json_loads(bad[i], JSON_DECODE_ANY, NULL);
		cr_expect_eq(mcp_content_result(r, &content, &is_error, &meta,
		    err, sizeof err), -1, "%s", bad[i]);
		json_decref(r);
	}
}
