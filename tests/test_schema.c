/* The JSON Schema subset: schema_check and schema_validate, every message. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/schema.h"
#include "util.h"

static char err[1024];

/* Parse test JSON; a typo in a test is a test failure, not a crash. */
static json_t *
load(const char *text)
{
	json_error_t e;
	json_t *v;

	v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	cr_assert_not_null(v, "bad test JSON %s: %s", text, e.text);
	return v;
}

static bool
check(const char *schema)
{
	json_t *s = load(schema);
	bool ok;

	err[0] = '\0';
	ok = schema_check(s, err, sizeof err);
	json_decref(s);
	return ok;
}

static bool
validate(const char *schema, const char *input)
{
	json_t *s = load(schema), *i = load(input);
	bool ok;

	err[0] = '\0';
	cr_assert(schema_check(s, err, sizeof err), "schema %s: %s", schema,
	    err);
	ok = schema_validate(s, i, err, sizeof err);
	json_decref(s);
	json_decref(i);
	return ok;
}

/* A chain of n nested "items" schemas below the root. */
static char *
nested_items(int n)
{
	struct buf b = { 0 };
	int i;

	for (i = 0; i < n; i++)
		buf_addstr(&b, "{\"items\":");
	buf_addstr(&b, "{\"type\":\"integer\"}");
	for (i = 0; i < n; i++)
		buf_addstr(&b, "}");
	return b.data;
}

static char *
nested_arrays(int n)
{
	struct buf b = { 0 };
	int i;

	for (i = 0; i < n; i++)
		buf_addstr(&b, "[");
	buf_addstr(&b, "1");
	for (i = 0; i < n; i++)
		buf_addstr(&b, "]");
	return b.data;
}

struct bad_schema {
	const char *schema;
	const char *want;
};

static const struct bad_schema bad_schemas[] = {
	{ "{\"properties\":{\"path\":{\"type\":\"strin\"}}}",
	  "properties.path.type: unknown type \"strin\"" },
	{ "{\"type\":\"strin\"}", "type: unknown type \"strin\"" },
	{ "{\"type\":5}",
	  "type: must be a type name or a non-empty array of type names" },
	{ "{\"type\":[]}",
	  "type: must be a type name or a non-empty array of type names" },
	{ "{\"type\":[\"string\",3]}", "type[1]: must be a type name" },
	{ "{\"type\":[\"string\",\"nope\"]}", "type[1]: unknown type \"nope\"" },
	{ "{\"properties\":[]}", "properties: must be an object" },
	{ "{\"properties\":{\"x\":5}}",
	  "properties.x: must be a schema (an object or a boolean)" },
	{ "{\"properties\":{\"a\":{\"properties\":{\"b\":{\"type\":\"int\"}}}}}",
	  "properties.a.properties.b.type: unknown type \"int\"" },
	{ "{\"required\":\"x\"}", "required: must be an array of strings" },
	{ "{\"required\":[\"a\",1]}", "required[1]: must be a string" },
	{ "{\"additionalProperties\":5}",
	  "additionalProperties: must be a schema (an object or a boolean)" },
	{ "{\"additionalProperties\":{\"type\":\"bad\"}}",
	  "additionalProperties.type: unknown type \"bad\"" },
	{ "{\"items\":\"string\"}",
	  "items: must be a schema (an object or a boolean)" },
	{ "{\"items\":{\"items\":{\"type\":[\"x\"]}}}",
	  "items.items.type[0]: unknown type \"x\"" },
	{ "{\"enum\":{}}", "enum: must be an array" },
	{ "{\"minimum\":\"1\"}", "minimum: must be a number" },
	{ "{\"maximum\":true}", "maximum: must be a number" },
	{ "{\"minLength\":-1}", "minLength: must be a non-negative integer" },
	{ "{\"maxLength\":1.5}", "maxLength: must be a non-negative integer" },
	{ "{\"maxLength\":\"3\"}", "maxLength: must be a non-negative integer" },
	{ "5", "must be a schema (an object or a boolean)" },
	{ "[]", "must be a schema (an object or a boolean)" },
};

Test(schema_check, bad_schemas_name_the_keyword)
{
	size_t i;

	for (i = 0; i < nitems(bad_schemas); i++) {
		cr_expect(!check(bad_schemas[i].schema), "accepted %s",
		    bad_schemas[i].schema);
		cr_expect_str_eq(err, bad_schemas[i].want, "for %s",
		    bad_schemas[i].schema);
	}
}

Test(schema_check, good_schemas)
{
	static const char *good[] = {
		"{}",
		"true",
		"false",
		"{\"type\":\"object\",\"properties\":{\"file_path\":"
		    "{\"type\":\"string\",\"minLength\":1},\"offset\":"
		    "{\"type\":\"integer\",\"minimum\":0,\"maximum\":1e9}},"
		    "\"required\":[\"file_path\"],"
		    "\"additionalProperties\":false}",
		"{\"type\":[\"string\",\"null\"],\"enum\":[\"a\",null]}",
		"{\"type\":\"array\",\"items\":{\"type\":\"object\","
		    "\"additionalProperties\":{\"type\":\"number\"}}}",
		"{\"minLength\":2.0,\"maxLength\":0}",
		"{\"items\":true,\"additionalProperties\":true}",
		"{\"enum\":[]}",
		/* Unknown keywords, even of odd shapes, are ignored. */
		"{\"type\":\"string\",\"format\":\"uri\",\"pattern\":5,"
		    "\"x-extra\":[1],\"$schema\":\"http://json-schema.org/\"}",
	};
	size_t i;

	for (i = 0; i < nitems(good); i++)
		cr_expect(check(good[i]), "rejected %s: %s", good[i], err);
}

Test(schema_check, depth_is_capped)
{
	char *ok = nested_items(63), *deep = nested_items(64);
	struct buf want = { 0 };
	int i;

	cr_expect(check(ok), "63 nested: %s", err);
	cr_expect(!check(deep));
	for (i = 0; i < 64; i++)
		buf_addstr(&want, i == 0 ? "items" : ".items");
	buf_addstr(&want, ": schema nested too deeply (more than 64 levels)");
	cr_expect_str_eq(err, want.data);
	free(ok);
	free(deep);
	buf_free(&want);
}

Test(schema_check, null_error_buffer_is_safe)
{
	json_t *s = load("{\"type\":\"x\"}");

	cr_expect(!schema_check(s, NULL, 0));
	json_decref(s);
}

struct case_ {
	const char *schema;
	const char *input;
	const char *want; /* NULL: valid */
};

static const struct case_ cases[] = {
	/* type */
	{ "{\"type\":\"integer\"}", "5", NULL },
	{ "{\"type\":\"integer\"}", "2.0", NULL },
	{ "{\"type\":\"integer\"}", "2.5",
	  "The input must be an integer, got number" },
	{ "{\"type\":\"number\"}", "7", NULL },
	{ "{\"type\":\"number\"}", "-0.5", NULL },
	{ "{\"type\":\"number\"}", "\"7\"",
	  "The input must be a number, got string" },
	{ "{\"type\":\"string\"}", "\"\"", NULL },
	{ "{\"type\":\"string\"}", "5",
	  "The input must be a string, got integer" },
	{ "{\"type\":\"boolean\"}", "false", NULL },
	{ "{\"type\":\"boolean\"}", "0",
	  "The input must be a boolean, got integer" },
	{ "{\"type\":\"null\"}", "null", NULL },
	{ "{\"type\":\"null\"}", "{}", "The input must be null, got object" },
	{ "{\"type\":\"array\"}", "[]", NULL },
	{ "{\"type\":\"array\"}", "{}", "The input must be an array, got object" },
	{ "{\"type\":\"object\"}", "{}", NULL },
	{ "{\"type\":\"object\"}", "[1]",
	  "The input must be an object, got array" },
	{ "{\"type\":\"object\"}", "null",
	  "The input must be an object, got null" },
	{ "{\"type\":[\"string\",\"null\"]}", "null", NULL },
	{ "{\"type\":[\"string\",\"null\"]}", "true",
	  "The input must be a string or null, got boolean" },
	{ "{\"properties\":{\"offset\":{\"type\":\"integer\"}}}",
	  "{\"offset\":\"10\"}",
	  "The parameter `offset` type is expected as `integer` but provided "
	  "as `string`" },
	{ "{\"properties\":{\"offset\":{\"type\":\"integer\"}}}",
	  "{\"offset\":1.5}",
	  "The parameter `offset` type is expected as `integer` but provided "
	  "as `number`" },
	{ "{\"properties\":{\"x\":{\"type\":[\"string\",\"null\"]}}}",
	  "{\"x\":3}",
	  "The parameter `x` type is expected as `string` or `null` but "
	  "provided as `integer`" },
	{ "{\"properties\":{\"x\":{\"type\":\"object\"}}}", "{\"x\":[]}",
	  "The parameter `x` type is expected as `object` but provided as "
	  "`array`" },
	{ "{\"properties\":{\"x\":{\"type\":\"array\"}}}", "{\"x\":false}",
	  "The parameter `x` type is expected as `array` but provided as "
	  "`boolean`" },
	{ "{\"properties\":{\"x\":{\"type\":\"string\"}}}", "{\"x\":null}",
	  "The parameter `x` type is expected as `string` but provided as "
	  "`null`" },
	/* Keywords of other types do not apply. */
	{ "{\"minLength\":3,\"minimum\":5,\"properties\":{\"a\":false},"
	  "\"items\":false}", "7", NULL },
	{ "{\"minLength\":3,\"minimum\":5}", "\"abc\"", NULL },
	{ "{\"properties\":{\"a\":{\"type\":\"string\"}}}", "[1]", NULL },

	/* required */
	{ "{\"type\":\"object\",\"required\":[\"file_path\"]}", "{}",
	  "The required parameter `file_path` is missing" },
	{ "{\"type\":\"object\",\"required\":[\"file_path\"]}",
	  "{\"file_path\":null}", NULL },
	{ "{\"type\":\"object\",\"required\":[\"a\",\"b\"]}", "{\"a\":1}",
	  "The required parameter `b` is missing" },

	/* additionalProperties */
	{ "{\"properties\":{\"a\":{}},\"additionalProperties\":false}",
	  "{\"a\":1,\"foo\":2}", "An unexpected parameter `foo` was provided" },
	{ "{\"properties\":{\"a\":{}},\"additionalProperties\":false}",
	  "{\"a\":1}", NULL },
	{ "{\"additionalProperties\":false}", "{}", NULL },
	{ "{\"additionalProperties\":false}", "{\"z\":0}",
	  "An unexpected parameter `z` was provided" },
	{ "{\"properties\":{\"a\":{}},\"additionalProperties\":true}",
	  "{\"a\":1,\"foo\":2}", NULL },
	{ "{\"properties\":{\"a\":{}},"
	  "\"additionalProperties\":{\"type\":\"integer\"}}",
	  "{\"a\":\"s\",\"n\":3,\"x\":\"y\"}",
	  "The parameter `x` type is expected as `integer` but provided as "
	  "`string`" },
	{ "{\"properties\":{\"opts\":{\"properties\":{\"v\":{}},"
	  "\"additionalProperties\":false}}}",
	  "{\"opts\":{\"v\":1,\"foo\":true}}",
	  "An unexpected parameter `opts.foo` was provided" },
	{ "{\"properties\":{\"a\":false}}", "{\"a\":1}",
	  "An unexpected parameter `a` was provided" },
	{ "false", "{}", "The input is not accepted" },
	{ "true", "[{\"x\":1}]", NULL },

	/* items and nested paths */
	{ "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}",
	  "[\"a\",\"b\"]", NULL },
	{ "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}",
	  "[\"a\",\"b\",3]",
	  "The parameter `[2]` type is expected as `string` but provided as "
	  "`integer`" },
	{ "{\"properties\":{\"items\":{\"type\":\"array\",\"items\":"
	  "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
	  "\"required\":[\"name\"]}}}}",
	  "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"nome\":\"c\"}]}",
	  "The required parameter `items[2].name` is missing" },
	{ "{\"properties\":{\"items\":{\"type\":\"array\",\"items\":"
	  "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
	  "\"required\":[\"name\"]}}}}",
	  "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":7}]}",
	  "The parameter `items[2].name` type is expected as `string` but "
	  "provided as `integer`" },
	{ "{\"properties\":{\"m\":{\"items\":{\"items\":{\"minimum\":0}}}}}",
	  "{\"m\":[[0,1],[2,-3]]}", "The parameter `m[1][1]` must be >= 0" },
	{ "{\"properties\":{\"a\":{\"properties\":{\"b\":{\"properties\":"
	  "{\"c\":{\"enum\":[1]}}}}}}}", "{\"a\":{\"b\":{\"c\":2}}}",
	  "The parameter `a.b.c` must be one of 1" },
	{ "{\"items\":false}", "[]", NULL },
	{ "{\"items\":false}", "[1]", "An unexpected parameter `[0]` was provided" },

	/* enum */
	{ "{\"properties\":{\"mode\":{\"enum\":[\"r\",\"w\"]}}}",
	  "{\"mode\":\"w\"}", NULL },
	{ "{\"properties\":{\"mode\":{\"enum\":[\"r\",\"w\"]}}}",
	  "{\"mode\":\"a\"}", "The parameter `mode` must be one of \"r\", \"w\"" },
	{ "{\"properties\":{\"mode\":{\"enum\":[\"r\",\"w\"]}}}",
	  "{\"mode\":null}", "The parameter `mode` must be one of \"r\", \"w\"" },
	{ "{\"enum\":[1,2.5,null,true]}", "1.0", NULL },
	{ "{\"enum\":[1,2.5,null,true]}", "2.5", NULL },
	{ "{\"enum\":[1,2.5,null,true]}", "true", NULL },
	{ "{\"enum\":[1,2.5,null,true]}", "false",
	  "The input must be one of 1, 2.5, null, true" },
	{ "{\"enum\":[1,2.5,null,true]}", "\"1\"",
	  "The input must be one of 1, 2.5, null, true" },
	{ "{\"enum\":[{\"a\":[1,\"x\"]}]}", "{\"a\":[1.0,\"x\"]}", NULL },
	{ "{\"enum\":[{\"a\":[1,\"x\"]}]}", "{\"a\":[1,\"x\"],\"b\":0}",
	  "The input must be one of {\"a\":[1,\"x\"]}" },
	{ "{\"enum\":[\"a\\u0000b\"]}", "\"a\"",
	  "The input must be one of \"a\\u0000b\"" },
	{ "{\"enum\":[]}", "1", "The input must be one of " },

	/* minimum / maximum */
	{ "{\"properties\":{\"limit\":{\"type\":\"integer\",\"minimum\":1}}}",
	  "{\"limit\":0}", "The parameter `limit` must be >= 1" },
	{ "{\"properties\":{\"limit\":{\"type\":\"integer\",\"minimum\":1}}}",
	  "{\"limit\":1}", NULL },
	{ "{\"properties\":{\"limit\":{\"maximum\":100}}}",
	  "{\"limit\":100.0}", NULL },
	{ "{\"properties\":{\"limit\":{\"maximum\":100}}}",
	  "{\"limit\":100.5}", "The parameter `limit` must be <= 100" },
	{ "{\"minimum\":0.1}", "0.05", "The input must be >= 0.1" },
	{ "{\"minimum\":-2.5,\"maximum\":2.5}", "-2.5", NULL },
	{ "{\"minimum\":-2.5,\"maximum\":2.5}", "3", "The input must be <= 2.5" },
	/* Integers compare exactly, beyond what a double holds. */
	{ "{\"minimum\":9007199254740993}", "9007199254740992",
	  "The input must be >= 9007199254740993" },
	{ "{\"maximum\":9007199254740992}", "9007199254740993",
	  "The input must be <= 9007199254740992" },

	/* minLength / maxLength in code points */
	{ "{\"properties\":{\"s\":{\"maxLength\":5}}}", "{\"s\":\"h\u00e9llo\"}",
	  NULL },
	{ "{\"properties\":{\"s\":{\"maxLength\":2}}}",
	  "{\"s\":\"\u65e5\u672c\u8a9e\"}",
	  "The parameter `s` must be at most 2 characters long" },
	{ "{\"properties\":{\"s\":{\"maxLength\":3}}}",
	  "{\"s\":\"\u65e5\u672c\u8a9e\"}", NULL },
	{ "{\"properties\":{\"s\":{\"minLength\":2}}}",
	  "{\"s\":\"\\ud83d\\ude00\"}",
	  "The parameter `s` must be at least 2 characters long" },
	{ "{\"properties\":{\"s\":{\"minLength\":1}}}", "{\"s\":\"\"}",
	  "The parameter `s` must be at least 1 character long" },
	{ "{\"properties\":{\"s\":{\"maxLength\":1}}}", "{\"s\":\"ab\"}",
	  "The parameter `s` must be at most 1 character long" },
	{ "{\"minLength\":2,\"maxLength\":2}", "\"\\ud83d\\ude00x\"", NULL },
	{ "{\"maxLength\":0}", "\"\"", NULL },
	{ "{\"minLength\":2.0}", "\"a\"",
	  "The input must be at least 2 characters long" },

	/* Order: properties in schema order, then required, then extras. */
	{ "{\"properties\":{\"a\":{\"type\":\"string\"},"
	  "\"b\":{\"type\":\"string\"}}}", "{\"b\":1,\"a\":2}",
	  "The parameter `a` type is expected as `string` but provided as "
	  "`integer`" },
	{ "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
	  "\"additionalProperties\":false}", "{\"b\":1,\"c\":2}",
	  "The parameter `b` type is expected as `string` but provided as "
	  "`integer`" },
	{ "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
	  "\"additionalProperties\":false}", "{\"b\":\"x\",\"c\":2}",
	  "The required parameter `a` is missing" },
	{ "{\"type\":\"object\",\"enum\":[{}],\"properties\":{\"x\":"
	  "{\"type\":\"string\"}}}", "{\"x\":1}",
	  "The input must be one of {}" },
	{ "{\"type\":\"string\",\"enum\":[\"abc\"]}", "3",
	  "The input must be a string, got integer" },
};

Test(schema_validate, cases)
{
	const struct case_ *c;
	size_t i;
	bool ok;

	for (i = 0; i < nitems(cases); i++) {
		c = &cases[i];
		ok = validate(c->schema, c->input);
		if (c->want == NULL) {
			cr_expect(ok, "%s rejected %s: %s", c->schema, c->input,
			    err);
			continue;
		}
		cr_expect(!ok, "%s accepted %s", c->schema, c->input);
		cr_expect_str_eq(err, c->want, "%s with %s", c->schema,
		    c->input);
	}
}

/* An unchecked schema with keywords of the wrong types constrains nothing. */
Test(schema_validate, malformed_schema_is_safe)
{
	static const char *inputs[] = {
		"{}", "[1,2]", "\"s\"", "3", "null", "{\"a\":{\"b\":[1]}}",
	};
	json_t *s = load("{\"type\":5,\"properties\":[],\"required\":\"a\","
	    "\"enum\":3,\"minimum\":\"a\",\"maxLength\":-1,\"items\":7,"
	    "\"additionalProperties\":\"no\"}");
	json_t *weird = load("{\"type\":[\"strin\",5],\"required\":[1,\"a\"]}");
	json_t *v;
	size_t i;

	for (i = 0; i < nitems(inputs); i++) {
		v = load(inputs[i]);
		cr_expect(schema_validate(s, v, err, sizeof err), "%s: %s",
		    inputs[i], err);
		json_decref(v);
	}
	v = load("{}");
	cr_expect(!schema_validate(weird, v, err, sizeof err));
	cr_expect_str_eq(err, "The input must be a strin, got object");
	cr_expect(schema_validate(NULL, v, err, sizeof err));
	cr_expect(!schema_validate(s, NULL, err, sizeof err));
	cr_expect_str_eq(err, "The input is missing");
	json_decref(v);
	json_decref(weird);
	json_decref(s);
}

Test(schema_validate, deep_nesting_is_capped)
{
	char *ok_schema = nested_items(63), *ok_input = nested_arrays(63);
	char *bad_input = nested_arrays(64);
	json_t *s, *v, *deep;
	int i;

	cr_expect(validate(ok_schema, ok_input), "%s", err);
	/* Too deep a value for the schema is a plain type error. */
	cr_expect(!validate(ok_schema, bad_input));
	cr_expect(strstr(err, "type is expected as `integer` but provided as "
	    "`array`") != NULL, "%s", err);

	/* A schema nobody checked, as deep as it likes. */
	deep = json_object();
	s = deep;
	for (i = 0; i < 200; i++) {
		json_t *next = json_object();

		json_object_set_new(s, "items", next);
		s = next;
	}
	v = load(bad_input);
	cr_expect(!schema_validate(deep, v, err, sizeof err));
	cr_expect(strstr(err, "is nested too deeply (more than 64 levels)") !=
	    NULL, "%s", err);
	cr_expect(strncmp(err, "The parameter `[0][0][0]", 24) == 0, "%s", err);
	json_decref(v);
	json_decref(deep);

	/* enum compares deep values without unbounded recursion. */
	v = json_array();
	for (s = v, i = 0; i < 1000; i++) {
		json_t *next = json_array();

		json_array_append_new(s, next);
		s = next;
	}
	s = json_pack("{s:[O]}", "enum", v);
	cr_expect(!schema_validate(s, v, err, 16));
	cr_expect_eq(strlen(err), 15);
	json_decref(s);
	json_decref(v);

	free(ok_schema);
	free(ok_input);
	free(bad_input);
}

Test(schema_validate, error_buffer_is_bounded)
{
	json_t *s = load("{\"required\":[\"a_rather_long_parameter_name\"]}");
	json_t *v = load("{}");
	char small[12];

	memset(small, 'x', sizeof small);
	cr_expect(!schema_validate(s, v, small, sizeof small));
	cr_expect_str_eq(small, "The require");
	cr_expect(!schema_validate(s, v, NULL, 0));
	json_decref(s);
	json_decref(v);
}

Test(schema_number_text, shortest_round_trip)
{
	static const struct {
		const char *json;
		const char *want;
	} nums[] = {
		{ "0.1", "0.1" }, { "2.0", "2" }, { "5", "5" },
		{ "-3.25", "-3.25" }, { "1e20", "1e+20" },
		{ "123456.789", "123456.789" }, { "-9223372036854775808",
		"-9223372036854775808" }, { "0.30000000000000004",
		"0.30000000000000004" },
	};
	json_t *v;
	char *text;
	size_t i;

	for (i = 0; i < nitems(nums); i++) {
		v = load(nums[i].json);
		text = schema_number_text(v);
		cr_expect_str_eq(text, nums[i].want);
		free(text);
		json_decref(v);
	}
	v = load("\"5\"");
	cr_expect_null(schema_number_text(v));
	json_decref(v);
}
