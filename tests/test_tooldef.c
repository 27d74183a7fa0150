/* ToolDef parsing and the per-call rules: validation, safety, argv, timeout. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tooldef.h"
#include "util.h"

static char err[1024];

static json_t *
load(const char *text)
{
	json_error_t e;
	json_t *v;

	v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	cr_assert_not_null(v, "bad test JSON %s: %s", text, e.text);
	return v;
}

static struct tooldef *
parse(const char *text)
{
	json_t *v = load(text);
	struct tooldef *def;

	err[0] = '\0';
	def = tooldef_parse(v, err, sizeof err);
	json_decref(v);
	return def;
}

static struct tooldef *
must_parse(const char *text)
{
	struct tooldef *def = parse(text);

	cr_assert_not_null(def, "rejected %s: %s", text, err);
	return def;
}

static bool
check_input(const struct tooldef *def, const char *input)
{
	json_t *v = load(input);
	bool ok;

	err[0] = '\0';
	ok = tooldef_check_input(def, v, err, sizeof err);
	json_decref(v);
	return ok;
}

static bool
is_safe(const struct tooldef *def, const char *input)
{
	json_t *v = load(input);
	bool safe = tooldef_is_safe(def, v);

	json_decref(v);
	return safe;
}

static int64_t
timeout_of(const struct tooldef *def, const char *input)
{
	json_t *v = load(input);
	int64_t ms = tooldef_timeout_ms(def, v);

	json_decref(v);
	return ms;
}

static char **
argv_of(const struct tooldef *def, const char *input)
{
	json_t *v = load(input);
	char **argv;

	err[0] = '\0';
	argv = tooldef_argv(def, v, err, sizeof err);
	json_decref(v);
	return argv;
}

/* The definition of the built-in bash tool, doc/design.md §4. */
static const char bash_def[] =
    "{\"name\":\"bash\",\"description\":\"Run a shell command\","
    "\"command\":[\"/bin/sh\",\"-c\",\"{command}\"],"
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\"},\"timeout\":{\"type\":\"number\"}},"
    "\"required\":[\"command\"]},"
    "\"concurrencySafe\":false,\"interruptBehavior\":\"cancel\","
    "\"abortSiblingsOnError\":true,\"timeoutFromInput\":\"timeout\"}";

Test(tooldef_parse, defaults_filled_in)
{
	struct tooldef *def = must_parse("{\"name\":\"t\","
	    "\"command\":[\"/bin/true\"]}");
	json_t *got = tooldef_json(def);
	json_t *want = load("{\"name\":\"t\",\"description\":\"\","
	    "\"command\":[\"/bin/true\"],\"inputSchema\":{\"type\":\"object\"},"
	    "\"concurrencySafe\":false,\"interruptBehavior\":\"block\","
	    "\"abortSiblingsOnError\":false,\"requiresPermission\":false,"
	    "\"timeoutMs\":120000,\"maxTimeoutMs\":600000,"
	    "\"timeoutFromInput\":null,\"maxResultBytes\":100000,"
	    "\"streamOutput\":false,\"env\":{}}");
	char *text = json_dumps(got, JSON_COMPACT);

	cr_expect(json_equal(got, want), "got %s", text);
	cr_expect_str_eq(tooldef_name(def), "t");
	cr_expect_eq(tooldef_interrupt(def), TOOLDEF_BLOCK);
	cr_expect(!tooldef_abort_siblings(def));
	cr_expect(!tooldef_requires_permission(def));
	cr_expect(!tooldef_stream_output(def));
	cr_expect_eq(tooldef_max_result_bytes(def), TOOLDEF_MAX_RESULT_DEFAULT);
	cr_expect(json_is_object(tooldef_env(def)));
	cr_expect_eq(json_object_size(tooldef_env(def)), 0);
	cr_expect_eq(tooldef_timeout_ms(def, NULL), TOOLDEF_TIMEOUT_DEFAULT);
	cr_expect(!is_safe(def, "{}"));
	cr_expect(check_input(def, "{\"anything\":[1]}"), "%s", err);
	free(text);
	json_decref(got);
	json_decref(want);
	tooldef_unref(def);
}

Test(tooldef_parse, every_field)
{
	struct tooldef *def = must_parse("{\"name\":\"Grep.v2-x_y\","
	    "\"description\":\"d\",\"command\":[\"/usr/bin/grep\",\"-e\","
	    "\"{pattern}\"],\"inputSchema\":{\"type\":\"object\","
	    "\"properties\":{\"pattern\":{\"type\":\"string\"}},"
	    "\"additionalProperties\":false},"
	    "\"concurrencySafe\":{\"pointer\":\"/pattern\",\"pattern\":\"^a\"},"
	    "\"interruptBehavior\":\"cancel\",\"abortSiblingsOnError\":true,"
	    "\"requiresPermission\":true,\"timeoutMs\":5000,"
	    "\"maxTimeoutMs\":9000,\"timeoutFromInput\":\"t\","
	    "\"maxResultBytes\":77,\"streamOutput\":true,"
	    "\"env\":{\"LC_ALL\":\"C\",\"HOME\":null},"
	    "\"futureField\":{\"anything\":1}}");
	json_t *got = tooldef_json(def), *again;
	struct tooldef *copy;

	cr_expect_str_eq(tooldef_name(def), "Grep.v2-x_y");
	cr_expect_eq(tooldef_interrupt(def), TOOLDEF_CANCEL);
	cr_expect(tooldef_abort_siblings(def));
	cr_expect(tooldef_requires_permission(def));
	cr_expect(tooldef_stream_output(def));
	cr_expect_eq(tooldef_max_result_bytes(def), 77);
	cr_expect_str_eq(json_string_value(json_object_get(tooldef_env(def),
	    "LC_ALL")), "C");
	cr_expect(json_is_null(json_object_get(tooldef_env(def), "HOME")));
	cr_expect_eq(timeout_of(def, "{}"), 5000);
	cr_expect_null(json_object_get(got, "futureField"));
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(got,
	    "concurrencySafe"), "pointer")), "/pattern");
	cr_expect_eq(json_integer_value(json_object_get(got, "maxTimeoutMs")),
	    9000);

	/* What listTools shows parses back to the same definition. */
	copy = tooldef_parse(got, err, sizeof err);
	cr_assert_not_null(copy, "%s", err);
	again = tooldef_json(copy);
	cr_expect(json_equal(got, again));
	json_decref(again);
	tooldef_unref(copy);
	json_decref(got);
	tooldef_unref(def);
}

Test(tooldef_parse, null_means_default)
{
	struct tooldef *def = must_parse("{\"name\":\"t\",\"command\":[\"x\"],"
	    "\"description\":null,\"inputSchema\":null,\"concurrencySafe\":null,"
	    "\"interruptBehavior\":null,\"abortSiblingsOnError\":null,"
	    "\"requiresPermission\":null,\"timeoutMs\":null,"
	    "\"maxTimeoutMs\":null,\"timeoutFromInput\":null,"
	    "\"maxResultBytes\":null,\"streamOutput\":null,\"env\":null}");
	json_t *got = tooldef_json(def);
	json_t *want = load("{\"name\":\"t\",\"description\":\"\","
	    "\"command\":[\"x\"],\"inputSchema\":{\"type\":\"object\"},"
	    "\"concurrencySafe\":false,\"interruptBehavior\":\"block\","
	    "\"abortSiblingsOnError\":false,\"requiresPermission\":false,"
	    "\"timeoutMs\":120000,\"maxTimeoutMs\":600000,"
	    "\"timeoutFromInput\":null,\"maxResultBytes\":100000,"
	    "\"streamOutput\":false,\"env\":{}}");

	cr_expect(json_equal(got, want));
	json_decref(got);
	json_decref(want);
	tooldef_unref(def);
}

Test(tooldef_parse, timeouts)
{
	struct tooldef *def;

	/* A long timeoutMs raises the default ceiling with it. */
	def = must_parse("{\"name\":\"t\",\"command\":[\"x\"],"
	    "\"timeoutMs\":900000}");
	cr_expect_eq(timeout_of(def, "{}"), 900000);
	tooldef_unref(def);
	def = must_parse("{\"name\":\"t\",\"command\":[\"x\"],"
	    "\"timeoutMs\":1000.0,\"maxTimeoutMs\":1000}");
	cr_expect_eq(timeout_of(def, "{}"), 1000);
	tooldef_unref(def);
	def = must_parse("{\"name\":\"t\",\"command\":[\"x\"],"
	    "\"timeoutMs\":2147483647}");
	cr_expect_eq(timeout_of(def, "{}"), 2147483647);
	tooldef_unref(def);
}

struct bad_def {
	const char *def;
	const char *want;
};

#define CMD "\"command\":[\"x\"]"
#define NAMED "{\"name\":\"t\"," CMD ","

static const struct bad_def bad_defs[] = {
	{ "[]", "tool definition: must be an object" },
	{ "\"bash\"", "tool definition: must be an object" },
	{ "{" CMD "}", "name: required" },
	{ "{\"name\":null," CMD "}", "name: required" },
	{ "{\"name\":5," CMD "}", "name: must be a string" },
	{ "{\"name\":\"\"," CMD "}", "name: must not be empty" },
	{ "{\"name\":\"a b\"," CMD "}",
	  "name: may only contain A-Z, a-z, 0-9, '_', '.' and '-'" },
	{ "{\"name\":\"a/b\"," CMD "}",
	  "name: may only contain A-Z, a-z, 0-9, '_', '.' and '-'" },
	{ "{\"name\":\"caf\u00e9\"," CMD "}",
	  "name: may only contain A-Z, a-z, 0-9, '_', '.' and '-'" },
	{ "{\"name\":\"a\\u0000b\"," CMD "}",
	  "name: may only contain A-Z, a-z, 0-9, '_', '.' and '-'" },
	{ "{\"name\":\"t\",\"description\":5," CMD "}",
	  "description: must be a string" },
	{ "{\"name\":\"t\"}", "command: required" },
	{ "{\"name\":\"t\",\"command\":\"/bin/ls\"}",
	  "command: must be a non-empty array of strings" },
	{ "{\"name\":\"t\",\"command\":[]}",
	  "command: must be a non-empty array of strings" },
	{ "{\"name\":\"t\",\"command\":[\"a\",\"b\",3]}",
	  "command[2]: must be a string" },
	{ "{\"name\":\"t\",\"command\":[null]}", "command[0]: must be a string" },
	{ "{\"name\":\"t\",\"command\":[\"\"]}", "command[0]: must not be empty" },
	{ "{\"name\":\"t\",\"command\":[\"a\",\"x\\u0000y\"]}",
	  "command[1]: must not contain NUL characters" },
	{ NAMED "\"inputSchema\":[]}", "inputSchema: must be an object" },
	{ NAMED "\"inputSchema\":true}", "inputSchema: must be an object" },
	{ NAMED "\"inputSchema\":{\"type\":\"object\",\"properties\":"
	  "{\"x\":{\"type\":\"strin\"}}}}",
	  "inputSchema.properties.x.type: unknown type \"strin\"" },
	{ NAMED "\"inputSchema\":{\"required\":\"x\"}}",
	  "inputSchema.required: must be an array of strings" },
	{ NAMED "\"inputSchema\":{\"type\":\"string\"}}",
	  "inputSchema.type: must allow \"object\" (a tool's input is an "
	  "object)" },
	{ NAMED "\"inputSchema\":{\"type\":[\"array\",\"null\"]}}",
	  "inputSchema.type: must allow \"object\" (a tool's input is an "
	  "object)" },
	{ "{\"name\":\"t\",\"command\":[\"x\",\"{x}\",\"{y}\"],\"inputSchema\":"
	  "{\"properties\":{\"x\":{}},\"additionalProperties\":false}}",
	  "command[2]: \"{y}\" names no property of inputSchema" },
	{ NAMED "\"concurrencySafe\":\"yes\"}",
	  "concurrencySafe: must be a boolean or an object {\"pointer\", "
	  "\"pattern\"}" },
	{ NAMED "\"concurrencySafe\":1}",
	  "concurrencySafe: must be a boolean or an object {\"pointer\", "
	  "\"pattern\"}" },
	{ NAMED "\"concurrencySafe\":{\"pattern\":\"x\"}}",
	  "concurrencySafe.pointer: required" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":5,\"pattern\":\"x\"}}",
	  "concurrencySafe.pointer: must be a JSON pointer string" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":\"command\",\"pattern\":\"x\"}}",
	  "concurrencySafe.pointer: must be \"\" or start with \"/\"" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":\"/a~2\",\"pattern\":\"x\"}}",
	  "concurrencySafe.pointer: '~' must be followed by 0 or 1" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":\"/a/b~\",\"pattern\":\"x\"}}",
	  "concurrencySafe.pointer: '~' must be followed by 0 or 1" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":\"/a\"}}",
	  "concurrencySafe.pattern: required" },
	{ NAMED "\"concurrencySafe\":{\"pointer\":\"/a\",\"pattern\":[]}}",
	  "concurrencySafe.pattern: must be a string" },
	{ NAMED "\"interruptBehavior\":\"stop\"}",
	  "interruptBehavior: must be \"block\" or \"cancel\"" },
	{ NAMED "\"interruptBehavior\":true}",
	  "interruptBehavior: must be \"block\" or \"cancel\"" },
	{ NAMED "\"abortSiblingsOnError\":\"yes\"}",
	  "abortSiblingsOnError: must be a boolean" },
	{ NAMED "\"requiresPermission\":1}",
	  "requiresPermission: must be a boolean" },
	{ NAMED "\"streamOutput\":{}}", "streamOutput: must be a boolean" },
	{ NAMED "\"timeoutMs\":0}", "timeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":-5}", "timeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":1.5}", "timeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":\"1000\"}",
	  "timeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":true}", "timeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":2147483648}",
	  "timeoutMs: must be at most 2147483647" },
	{ NAMED "\"timeoutMs\":1e300}", "timeoutMs: must be at most 2147483647" },
	{ NAMED "\"maxTimeoutMs\":0}", "maxTimeoutMs: must be a positive integer" },
	{ NAMED "\"timeoutMs\":5000,\"maxTimeoutMs\":1000}",
	  "timeoutMs: must not exceed maxTimeoutMs (1000)" },
	{ NAMED "\"maxTimeoutMs\":1000}",
	  "timeoutMs: must not exceed maxTimeoutMs (1000)" },
	{ NAMED "\"timeoutFromInput\":5}",
	  "timeoutFromInput: must be a non-empty string or null" },
	{ NAMED "\"timeoutFromInput\":\"\"}",
	  "timeoutFromInput: must be a non-empty string or null" },
	{ NAMED "\"maxResultBytes\":0}",
	  "maxResultBytes: must be a positive integer" },
	{ NAMED "\"maxResultBytes\":\"big\"}",
	  "maxResultBytes: must be a positive integer" },
	{ NAMED "\"env\":[]}", "env: must be an object" },
	{ NAMED "\"env\":\"A=B\"}", "env: must be an object" },
	{ NAMED "\"env\":{\"OK\":\"1\",\"FOO\":1}}",
	  "env.FOO: must be a string or null" },
	{ NAMED "\"env\":{\"FOO\":{}}}", "env.FOO: must be a string or null" },
	{ NAMED "\"env\":{\"A=B\":\"x\"}}",
	  "env.A=B: invalid variable name (empty or containing '=')" },
	{ NAMED "\"env\":{\"\":\"x\"}}",
	  "env.: invalid variable name (empty or containing '=')" },
	{ NAMED "\"env\":{\"FOO\":\"a\\u0000b\"}}",
	  "env.FOO: must not contain NUL characters" },
};

Test(tooldef_parse, bad_definitions_name_the_field)
{
	struct tooldef *def;
	size_t i;

	for (i = 0; i < nitems(bad_defs); i++) {
		def = parse(bad_defs[i].def);
		cr_expect_null(def, "accepted %s", bad_defs[i].def);
		cr_expect_str_eq(err, bad_defs[i].want, "for %s",
		    bad_defs[i].def);
		tooldef_unref(def);
	}
}

Test(tooldef_parse, name_length)
{
	char text[512], name[130];
	struct tooldef *def;

	memset(name, 'n', 128);
	name[128] = '\0';
	snprintf(text, sizeof text, "{\"name\":\"%s\"," CMD "}", name);
	def = must_parse(text);
	cr_expect_eq(strlen(tooldef_name(def)), 128);
	tooldef_unref(def);

	name[128] = 'n';
	name[129] = '\0';
	snprintf(text, sizeof text, "{\"name\":\"%s\"," CMD "}", name);
	cr_expect_null(parse(text));
	cr_expect_str_eq(err, "name: must be at most 128 characters");
}

Test(tooldef_parse, bad_regex_reports_regerror)
{
	char want[512], detail[256];
	regex_t re;
	int rc;

	rc = regcomp(&re, "(ls", REG_EXTENDED | REG_NOSUB);
	cr_assert_neq(rc, 0);
	regerror(rc, &re, detail, sizeof detail);
	regfree(&re);
	snprintf(want, sizeof want,
	    "concurrencySafe.pattern: invalid regular expression: %s", detail);

	cr_expect_null(parse(NAMED "\"concurrencySafe\":{\"pointer\":"
	    "\"/command\",\"pattern\":\"(ls\"}}"));
	cr_expect_str_eq(err, want);
	cr_expect_neq(strlen(detail), 0);
}

Test(tooldef_parse, error_buffer_is_optional)
{
	json_t *v = load("{\"name\":\"\"}");

	cr_expect_null(tooldef_parse(v, NULL, 0));
	cr_expect_null(tooldef_parse(NULL, NULL, 0));
	json_decref(v);
}

Test(tooldef_input, schema_and_placeholders)
{
	struct tooldef *def = must_parse(bash_def);

	cr_expect(check_input(def, "{\"command\":\"ls\"}"), "%s", err);
	cr_expect(check_input(def, "{\"command\":\"ls\",\"timeout\":5}"), "%s",
	    err);
	cr_expect(!check_input(def, "{}"));
	cr_expect_str_eq(err, "The required parameter `command` is missing");
	cr_expect(!check_input(def, "{\"command\":7}"));
	cr_expect_str_eq(err, "The parameter `command` type is expected as "
	    "`string` but provided as `integer`");
	cr_expect(!check_input(def, "{\"command\":\"ls\",\"timeout\":\"5\"}"));
	cr_expect_str_eq(err, "The parameter `timeout` type is expected as "
	    "`number` but provided as `string`");
	cr_expect(!check_input(def, "[\"ls\"]"));
	cr_expect_str_eq(err, "The input must be an object, got array");
	cr_expect(!tooldef_check_input(def, NULL, err, sizeof err));
	cr_expect_str_eq(err, "The input is missing");
	tooldef_unref(def);
}

/* The schema does not require the field, but command does. */
Test(tooldef_input, placeholder_fields_must_be_present)
{
	struct tooldef *def = must_parse("{\"name\":\"t\","
	    "\"command\":[\"/bin/echo\",\"{a}\",\"{b}\"],"
	    "\"inputSchema\":{\"properties\":{\"a\":{}}}}");

	cr_expect(check_input(def, "{\"a\":1,\"b\":[]}"), "%s", err);
	cr_expect(!check_input(def, "{\"a\":1}"));
	cr_expect_str_eq(err, "The required parameter `b` is missing");
	cr_expect(!check_input(def, "{\"a\":null,\"b\":2}"));
	cr_expect_str_eq(err, "The required parameter `a` must not be null");
	cr_expect(!check_input(def, "{\"a\":\"x\\u0000y\",\"b\":2}"));
	cr_expect_str_eq(err, "The parameter `a` must not contain NUL "
	    "characters");
	/* Even without a type in the schema, input is an object. */
	cr_expect(!check_input(def, "\"a\""));
	cr_expect_str_eq(err, "The input must be an object, got string");
	tooldef_unref(def);
}

Test(tooldef_safe, booleans)
{
	struct tooldef *yes = must_parse(NAMED "\"concurrencySafe\":true}");
	struct tooldef *no = must_parse(NAMED "\"concurrencySafe\":false}");

	cr_expect(is_safe(yes, "{}"));
	cr_expect(tooldef_is_safe(yes, NULL));
	cr_expect(!is_safe(no, "{}"));
	tooldef_unref(yes);
	tooldef_unref(no);
}

Test(tooldef_safe, pointer_and_pattern)
{
	struct tooldef *def = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/command\",\"pattern\":\"^(ls|cat|git status)( |$)\"}}");

	cr_expect(is_safe(def, "{\"command\":\"ls -l\"}"));
	cr_expect(is_safe(def, "{\"command\":\"cat\"}"));
	cr_expect(is_safe(def, "{\"command\":\"git status\"}"));
	cr_expect(!is_safe(def, "{\"command\":\"rm -rf /\"}"));
	cr_expect(!is_safe(def, "{\"command\":\"lsblk\"}"));
	cr_expect(!is_safe(def, "{\"command\":\"\"}"));
	/* Missing, not a string, or not evaluable: unsafe. */
	cr_expect(!is_safe(def, "{}"));
	cr_expect(!is_safe(def, "{\"command\":null}"));
	cr_expect(!is_safe(def, "{\"command\":5}"));
	cr_expect(!is_safe(def, "{\"command\":[\"ls\"]}"));
	cr_expect(!is_safe(def, "[\"ls\"]"));
	cr_expect(!is_safe(def, "\"ls\""));
	cr_expect(!tooldef_is_safe(def, NULL));
	/* regexec would stop at the NUL and see only "ls". */
	cr_expect(!is_safe(def, "{\"command\":\"ls\\u0000; rm -rf /\"}"));
	tooldef_unref(def);
}

Test(tooldef_safe, pointer_escapes_and_indexes)
{
	struct tooldef *def = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/a~1b/c~0d/1\",\"pattern\":\"^ok$\"}}");
	struct tooldef *root = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"\",\"pattern\":\"\"}}");
	struct tooldef *empty_key = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/\",\"pattern\":\"^y\"}}");
	struct tooldef *tilde = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/~01\",\"pattern\":\"y\"}}");

	cr_expect(is_safe(def, "{\"a/b\":{\"c~d\":[\"no\",\"ok\"]}}"));
	cr_expect(!is_safe(def, "{\"a/b\":{\"c~d\":[\"ok\",\"no\"]}}"));
	cr_expect(!is_safe(def, "{\"a/b\":{\"c~d\":[\"ok\"]}}"));
	cr_expect(!is_safe(def, "{\"a~1b\":{\"c~0d\":[\"no\",\"ok\"]}}"));
	cr_expect(!is_safe(def, "{\"a/b\":{\"c~d\":{\"1\":\"no\"}}}"));
	cr_expect(is_safe(def, "{\"a/b\":{\"c~d\":{\"1\":\"ok\"}}}"));
	cr_expect(!is_safe(def, "{\"a/b\":\"ok\"}"));
	/* The whole input is an object, never a string. */
	cr_expect(!is_safe(root, "{}"));
	cr_expect(is_safe(empty_key, "{\"\":\"yes\"}"));
	/* "~01" is "~1", not "/". */
	cr_expect(is_safe(tilde, "{\"~1\":\"y\"}"));
	cr_expect(!is_safe(tilde, "{\"/\":\"y\"}"));
	tooldef_unref(def);
	tooldef_unref(root);
	tooldef_unref(empty_key);
	tooldef_unref(tilde);
}

Test(tooldef_safe, non_canonical_indexes_are_unsafe)
{
	struct tooldef *def = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/a/01\",\"pattern\":\"x\"}}");
	struct tooldef *dash = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/a/-\",\"pattern\":\"x\"}}");
	struct tooldef *huge = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/a/99999999999999999999999\",\"pattern\":\"x\"}}");
	struct tooldef *zero = must_parse(NAMED "\"concurrencySafe\":{"
	    "\"pointer\":\"/a/0\",\"pattern\":\"x\"}}");

	cr_expect(!is_safe(def, "{\"a\":[\"x\",\"x\"]}"));
	cr_expect(is_safe(def, "{\"a\":{\"01\":\"x\"}}"));
	cr_expect(!is_safe(dash, "{\"a\":[\"x\"]}"));
	cr_expect(!is_safe(huge, "{\"a\":[\"x\"]}"));
	cr_expect(is_safe(zero, "{\"a\":[\"x\"]}"));
	cr_expect(!is_safe(zero, "{\"a\":[]}"));
	tooldef_unref(def);
	tooldef_unref(dash);
	tooldef_unref(huge);
	tooldef_unref(zero);
}

Test(tooldef_argv, substitution)
{
	struct tooldef *def = must_parse("{\"name\":\"t\",\"command\":["
	    "\"/bin/echo\",\"{s}\",\"{n}\",\"{r}\",\"{b}\",\"{o}\",\"{a}\","
	    "\"lit{s}\",\"{}\",\"{s\",\"{{s}}\",\"{ s }\"]}");
	char **argv = argv_of(def, "{\"s\":\"hi there\",\"n\":42,\"r\":0.1,"
	    "\"b\":true,\"o\":{\"k\":[1,\"x\"]},\"a\":[1,2],\" s \":\"\"}");
	static const char *want[] = {
		"/bin/echo", "hi there", "42", "0.1", "true",
		"{\"k\":[1,\"x\"]}", "[1,2]", "lit{s}", "{}", "{s", "{{s}}", "",
	};
	size_t i;

	cr_assert_not_null(argv, "%s", err);
	for (i = 0; i < nitems(want); i++)
		cr_expect_str_eq(argv[i], want[i], "argv[%zu]", i);
	cr_expect_null(argv[nitems(want)]);
	tooldef_argv_free(argv);

	argv = argv_of(def, "{\"s\":\"\",\"n\":-1.5e3,\"r\":2.0,\"b\":false,"
	    "\"o\":{},\"a\":[],\" s \":\"x\"}");
	cr_assert_not_null(argv, "%s", err);
	cr_expect_str_eq(argv[1], "");
	cr_expect_str_eq(argv[2], "-1500");
	cr_expect_str_eq(argv[3], "2");
	cr_expect_str_eq(argv[4], "false");
	cr_expect_str_eq(argv[5], "{}");
	cr_expect_str_eq(argv[6], "[]");
	cr_expect_str_eq(argv[11], "x");
	tooldef_argv_free(argv);
	tooldef_unref(def);
}

Test(tooldef_argv, missing_and_null_fields)
{
	struct tooldef *def = must_parse(bash_def);
	char **argv;

	argv = argv_of(def, "{\"command\":\"echo \\\"$HOME\\\"; ls\"}");
	cr_assert_not_null(argv, "%s", err);
	cr_expect_str_eq(argv[0], "/bin/sh");
	cr_expect_str_eq(argv[1], "-c");
	cr_expect_str_eq(argv[2], "echo \"$HOME\"; ls");
	cr_expect_null(argv[3]);
	tooldef_argv_free(argv);

	cr_expect_null(argv_of(def, "{}"));
	cr_expect_str_eq(err, "The required parameter `command` is missing");
	cr_expect_null(argv_of(def, "{\"command\":null}"));
	cr_expect_str_eq(err, "The required parameter `command` must not be "
	    "null");
	cr_expect_null(argv_of(def, "[]"));
	cr_expect_str_eq(err, "The required parameter `command` is missing");
	cr_expect_null(tooldef_argv(def, NULL, NULL, 0));
	tooldef_argv_free(NULL);
	tooldef_unref(def);
}

Test(tooldef_timeout, from_input_clamped)
{
	struct tooldef *def = must_parse(bash_def);
	struct tooldef *capped = must_parse("{\"name\":\"t\",\"command\":[\"x\"],"
	    "\"timeoutMs\":1000,\"maxTimeoutMs\":5000,"
	    "\"timeoutFromInput\":\"wait\"}");
	struct tooldef *plain = must_parse(NAMED "\"timeoutMs\":3000}");

	cr_expect_eq(timeout_of(def, "{\"command\":\"x\"}"), 120000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":5000}"), 5000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":1500.7}"), 1500);
	cr_expect_eq(timeout_of(def, "{\"timeout\":0}"), 1);
	cr_expect_eq(timeout_of(def, "{\"timeout\":-7}"), 1);
	cr_expect_eq(timeout_of(def, "{\"timeout\":0.5}"), 1);
	cr_expect_eq(timeout_of(def, "{\"timeout\":-1e300}"), 1);
	cr_expect_eq(timeout_of(def, "{\"timeout\":600000}"), 600000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":600001}"), 600000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":1e300}"), 600000);
	cr_expect_eq(timeout_of(def,
	    "{\"timeout\":9223372036854775807}"), 600000);
	/* Not a number, or absent: timeoutMs. */
	cr_expect_eq(timeout_of(def, "{\"timeout\":\"5000\"}"), 120000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":null}"), 120000);
	cr_expect_eq(timeout_of(def, "{\"timeout\":true}"), 120000);
	cr_expect_eq(timeout_of(def, "[5000]"), 120000);
	cr_expect_eq(tooldef_timeout_ms(def, NULL), 120000);

	cr_expect_eq(timeout_of(capped, "{}"), 1000);
	cr_expect_eq(timeout_of(capped, "{\"wait\":4000}"), 4000);
	cr_expect_eq(timeout_of(capped, "{\"wait\":60000}"), 5000);
	cr_expect_eq(timeout_of(capped, "{\"timeout\":4000}"), 1000);
	/* Without timeoutFromInput nothing in the input matters. */
	cr_expect_eq(timeout_of(plain, "{\"timeout\":10,\"timeoutMs\":10}"),
	    3000);
	tooldef_unref(def);
	tooldef_unref(capped);
	tooldef_unref(plain);
}

Test(tooldef_ref, counting)
{
	struct tooldef *def = must_parse(bash_def);
	struct tooldef *other;

	other = tooldef_ref(def);
	cr_expect_eq(other, def);
	tooldef_unref(def);
	/* Still alive: ASan would flag a use after free here. */
	cr_expect_str_eq(tooldef_name(other), "bash");
	cr_expect_eq(tooldef_interrupt(other), TOOLDEF_CANCEL);
	tooldef_ref(other);
	tooldef_unref(other);
	cr_expect_str_eq(tooldef_name(other), "bash");
	tooldef_unref(other);
	tooldef_unref(NULL);
}

Test(tooldef_json, is_a_private_copy)
{
	struct tooldef *def = must_parse(bash_def);
	json_t *a = tooldef_json(def), *b;

	json_object_set_new(a, "name", json_string("changed"));
	json_object_clear(json_object_get(a, "inputSchema"));
	b = tooldef_json(def);
	cr_expect_str_eq(json_string_value(json_object_get(b, "name")), "bash");
	cr_expect(json_object_size(json_object_get(b, "inputSchema")) > 0);
	cr_expect(!check_input(def, "{}"));
	cr_expect_str_eq(json_string_value(json_object_get(b,
	    "timeoutFromInput")), "timeout");
	cr_expect_str_eq(json_string_value(json_object_get(b,
	    "interruptBehavior")), "cancel");
	cr_expect(json_is_true(json_object_get(b, "abortSiblingsOnError")));
	json_decref(a);
	json_decref(b);
	tooldef_unref(def);
}

/* The definition keeps its own copies, not the caller's objects. */
Test(tooldef_parse, does_not_alias_the_source)
{
	json_t *src = load("{\"name\":\"t\",\"command\":[\"x\",\"{a}\"],"
	    "\"inputSchema\":{\"required\":[\"a\"]},\"env\":{\"K\":\"v\"}}");
	struct tooldef *def = tooldef_parse(src, err, sizeof err);

	cr_assert_not_null(def, "%s", err);
	json_object_clear(json_object_get(src, "inputSchema"));
	json_object_clear(json_object_get(src, "env"));
	json_decref(src);
	cr_expect(!check_input(def, "{}"));
	cr_expect_str_eq(err, "The required parameter `a` is missing");
	cr_expect_str_eq(json_string_value(json_object_get(tooldef_env(def),
	    "K")), "v");
	tooldef_unref(def);
}

/* A rule tool on /command with this pattern (JSON-escaped), or NULL. */
static struct tooldef *
rule(const char *pattern)
{
	struct buf b = { 0 };
	struct tooldef *def;

	buf_printf(&b, NAMED "\"concurrencySafe\":{\"pointer\":\"/command\","
	    "\"pattern\":\"%s\"}}", pattern);
	def = parse(b.data);
	buf_free(&b);
	return def;
}

/* Whether input {"command": subject} is safe under def. */
static bool
safe_for(const struct tooldef *def, const char *subject)
{
	json_t *v = json_pack("{s:s}", "command", subject);
	bool safe = tooldef_is_safe(def, v);

	json_decref(v);
	return safe;
}

/* A string of n copies of c (malloc'd). */
static char *
repeat(char c, size_t n)
{
	char *s = xmalloc(n + 1);

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

Test(tooldef_pattern, back_references_are_refused)
{
	cr_expect_null(rule("^(.*)(.*)(.*)(.*)(.*)\\\\5\\\\4\\\\3\\\\2\\\\1x$"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: back-references (\\5) "
	    "are not allowed");
	cr_expect_null(rule("(a)\\\\1"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: back-references (\\1) "
	    "are not allowed");
	/* In a bracket expression, or after an escaped backslash: literals. */
	struct tooldef *def = rule("^[\\\\1]x\\\\\\\\1$");

	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "1x\\1"));
	cr_expect(safe_for(def, "\\x\\1"));
	cr_expect(!safe_for(def, "1x\\"));
	tooldef_unref(def);
}

/*
 * A repetition of what can match "" ((a*)*, a**) costs regcomp time
 * exponential in how many a pattern holds: the fuzzer's 67 stars in a row
 * took 15 s. Refused; the same without the outer repetition is fine.
 */
Test(tooldef_pattern, repeating_the_empty_match_is_refused)
{
	static const char *const bad[] = { "^(l*******)", "(l*)*", "(l?)+",
		"(a|b*)*", "(a|)*", "a{0,3}*", "(a*b*){2}", "(^)*",
		"(a*){0,}", "a{0,}{0,}", "(a|){2,}", "(a?){2,5}" };
	static const char *const good[] = { "(l*)?", "(l+)*", "(xl*)*",
		"^(cd( [^ ]+)*;)*$", "a{0,3}", "a{2}{3}", "(a*b)*" };
	struct tooldef *def;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect_null(rule(bad[i]), "%s", bad[i]);
		cr_expect(strstr(err, "repeats something that can match the "
		    "empty string") != NULL, "%s: %s", bad[i], err);
	}
	cr_expect_null(rule("(l*)*"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: the repetition at "
	    "byte 4 repeats something that can match the empty string (like "
	    "(a*)* or a**): drop one of the two");
	for (i = 0; i < sizeof good / sizeof *good; i++) {
		def = rule(good[i]);
		cr_expect_not_null(def, "%s: %s", good[i], err);
		tooldef_unref(def);
	}
	def = rule("^(xl*)*$");
	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "xlllxxl"));
	cr_expect(!safe_for(def, "lx"));
	tooldef_unref(def);
}

/* Anchors passed one after the other cost regcomp a high power of it. */
Test(tooldef_pattern, runs_of_anchors_are_refused)
{
	cr_expect_null(rule("(a|\\\\b)(a|\\\\b)(a|\\\\b)(a|\\\\b)"
	    "(a|\\\\b)(a|\\\\b)(a|\\\\b)(a|\\\\b)(a|\\\\b)"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: too costly: 18 "
	    "anchors (^, $, \\b, \\<, () ...; \\b and \\B count twice) can "
	    "apply one after the other with no byte matched between them, at "
	    "most 16 are allowed");
}

Test(tooldef_pattern, length_is_capped)
{
	char *body = repeat('a', 1022), *pat;
	struct tooldef *def;

	/* One bracket expression: long, but of size 1. */
	xasprintf(&pat, "[%s]", body);
	def = rule(pat);
	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "a"));
	tooldef_unref(def);
	free(pat);

	xasprintf(&pat, "[%sb]", body);
	cr_expect_null(rule(pat));
	cr_expect_str_eq(err, "concurrencySafe.pattern: 1025 bytes long, at "
	    "most 1024 are allowed");
	free(pat);
	free(body);
}

Test(tooldef_pattern, compile_cost_is_capped)
{
	struct tooldef *def;

	cr_expect_null(rule("^(((a{1,100}){1,100}){1,100})$"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: too costly: its "
	    "repetitions expand to 1020204 nodes, at most 256 are allowed");
	/* The product saturates instead of overflowing. */
	cr_expect_null(rule("((((a{32767}){32767}){32767}){32767}){32767}"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: too costly: its "
	    "repetitions expand to over 1099511627776 nodes, at most 256 are "
	    "allowed");
	/* a{1,255} is 256 nodes: a, 254 more copies... counted as 255 + 1. */
	cr_expect_null(rule("a{1,256}"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: too costly: its "
	    "repetitions expand to 257 nodes, at most 256 are allowed");
	def = rule("a{1,255}");
	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "xa"));
	tooldef_unref(def);
	/* + copies its operand once. */
	cr_expect_null(rule("(a{1,128})+"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: too costly: its "
	    "repetitions expand to 261 nodes, at most 256 are allowed");
	/* Not an interval: regcomp judges the text. */
	def = rule("^x\\\\{1,100000}$");
	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "x{1,100000}"));
	tooldef_unref(def);
}

Test(tooldef_pattern, unmatched_parenthesis_is_refused)
{
	struct tooldef *def;

	cr_expect_null(rule("a)|(b"));
	cr_expect_str_eq(err, "concurrencySafe.pattern: unmatched ')' at byte "
	    "1 (write \\) for a literal one)");
	def = rule("a\\\\)");
	cr_assert_not_null(def, "%s", err);
	cr_expect(safe_for(def, "a)"));
	tooldef_unref(def);
}

/* The one-pass wrapping keeps the meaning of anchors and alternatives. */
Test(tooldef_pattern, matching_keeps_its_meaning)
{
	static const struct {
		const char *pattern, *subject;
		bool safe;
	} cases[] = {
		{ "ls|cat", "xcat y", true },
		{ "ls|cat", "xca", false },
		{ "^ls|^cat", "xcat", false },
		{ "^ls|^cat", "cat", true },
		{ "^(ls|cat)( |$)", "cat /etc", true },
		{ "^(ls|cat)( |$)", "cats", false },
		{ "a$|^b", "xa", true },
		{ "a$|^b", "ab", false },
		{ "(a|aa)*x", "aaaax", true },
		{ "^(é)+$", "éé", true },
		{ "x", "\xc3\xa9x", true },
		{ "", "", true },
		{ "^$", "a", false },
	};
	struct tooldef *def;
	size_t i;

	for (i = 0; i < nitems(cases); i++) {
		def = rule(cases[i].pattern);
		cr_assert_not_null(def, "%s: %s", cases[i].pattern, err);
		cr_expect_eq(safe_for(def, cases[i].subject), cases[i].safe,
		    "%s against %s", cases[i].pattern, cases[i].subject);
		tooldef_unref(def);
	}
}

/*
 * Past its subject bound the rule cannot be evaluated: unsafe (S2). The
 * bound is min(65536, 4194304 / (size + 4)²).
 */
Test(tooldef_pattern, long_subjects_are_unsafe)
{
	struct tooldef *def = rule("^a");
	char *s = repeat('a', 65537);

	cr_assert_not_null(def, "%s", err);
	cr_expect(!safe_for(def, s));
	s[65536] = '\0';
	cr_expect(safe_for(def, s));
	tooldef_unref(def);
	free(s);

	/* Size 243 + 4: 4194304 / 247² = 68 bytes. */
	def = rule("a(b|c){60}d");
	cr_assert_not_null(def, "%s", err);
	s = repeat('x', 69);
	s[0] = 'a';
	memset(s + 1, 'b', 60);
	s[61] = 'd';
	cr_expect(!safe_for(def, s), "69 bytes is past the bound");
	s[68] = '\0';
	cr_expect(safe_for(def, s));
	tooldef_unref(def);
	free(s);
}

/* Many matches: the state cache is dropped and rebuilt, answers unchanged. */
Test(tooldef_pattern, answers_survive_recompiling)
{
	struct tooldef *def = rule("^(ls|cat)( |$)");
	char subject[64];
	int i;

	cr_assert_not_null(def, "%s", err);
	for (i = 0; i < 5000; i++) {
		snprintf(subject, sizeof subject, "%s %d", i % 2 ? "ls" : "rm",
		    i);
		cr_expect_eq(safe_for(def, subject), i % 2 == 1, "%s", subject);
	}
	tooldef_unref(def);
}

Test(tooldef_parse, max_result_bytes_has_a_ceiling)
{
	struct tooldef *def;
	json_t *j;

	def = must_parse(NAMED "\"maxResultBytes\":16777216}");
	cr_expect_eq(tooldef_max_result_bytes(def), 16777216);
	tooldef_unref(def);
	cr_expect_null(parse(NAMED "\"maxResultBytes\":16777217}"));
	cr_expect_str_eq(err, "maxResultBytes: must be at most 16777216 (the "
	    "daemon's --max-result-bytes)");

	/* A ceiling below the default lowers the default. */
	tooldef_set_result_ceiling(50000);
	cr_expect_eq(tooldef_result_ceiling(), 50000);
	def = must_parse(NAMED "\"description\":\"d\"}");
	cr_expect_eq(tooldef_max_result_bytes(def), 50000);
	j = tooldef_json(def);
	cr_expect_eq(json_integer_value(json_object_get(j, "maxResultBytes")),
	    50000);
	json_decref(j);
	tooldef_unref(def);
	cr_expect_null(parse(NAMED "\"maxResultBytes\":50001}"));
	cr_expect_str_eq(err, "maxResultBytes: must be at most 50000 (the "
	    "daemon's --max-result-bytes)");
	tooldef_set_result_ceiling(TOOLDEF_RESULT_CEILING_DEFAULT);
}

Test(tooldef_runner, a_client_tool_has_no_command_and_says_its_runner)
{
	struct tooldef *def = must_parse("{\"name\":\"TodoWrite\","
	    "\"runner\":\"client\",\"concurrencySafe\":false,"
	    "\"interruptBehavior\":\"block\",\"timeoutMs\":5000}");
	json_t *j = tooldef_json(def);

	cr_assert_eq(tooldef_runner(def), TOOLDEF_RUNNER_CLIENT);
	cr_assert_str_eq(json_string_value(json_object_get(j, "runner")),
	    "client");
	cr_assert_null(json_object_get(j, "command"));
	cr_assert_null(json_object_get(j, "env"));
	json_decref(j);
	tooldef_unref(def);
	def = must_parse(bash_def);
	cr_assert_eq(tooldef_runner(def), TOOLDEF_RUNNER_PROCESS);
	tooldef_unref(def);
}

Test(tooldef_runner, what_shapes_a_process_is_refused_for_a_client_tool)
{
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":\"client\","
	    "\"command\":[\"true\"]}"));
	cr_assert_str_eq(err, "command: not allowed for a tool without a "
	    "process (runner \"client\")");
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":\"client\","
	    "\"sandbox\":\"none\"}"));
	cr_assert(strncmp(err, "sandbox: not allowed", 20) == 0, "%s", err);
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":\"client\","
	    "\"background\":true}"));
	cr_assert(strncmp(err, "background: not allowed", 23) == 0, "%s", err);
}

Test(tooldef_runner, a_client_cannot_define_an_mcp_tool_or_another_runner)
{
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":\"mcp\"}"));
	cr_assert_str_eq(err, "runner: must be \"process\" or \"client\"");
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":7}"));
	cr_assert_str_eq(err, "runner: must be \"process\" or \"client\"");
	/* A process tool still needs its command. */
	cr_assert_null(parse("{\"name\":\"t\",\"runner\":\"process\"}"));
	cr_assert_str_eq(err, "command: required");
}

Test(tooldef_runner, the_daemon_makes_mcp_tools_whatever_the_object_says)
{
	json_t *v = load("{\"name\":\"mcp__fs__read\",\"runner\":\"client\","
	    "\"concurrencySafe\":true,\"interruptBehavior\":\"cancel\"}");
	struct tooldef *def = tooldef_parse_runner(v, TOOLDEF_RUNNER_MCP, err,
	    sizeof err);

	cr_assert_not_null(def, "%s", err);
	cr_assert_eq(tooldef_runner(def), TOOLDEF_RUNNER_MCP);
	tooldef_unref(def);
	json_decref(v);
}
