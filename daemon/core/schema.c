/* The JSON Schema subset of doc/design.md §4: check a schema, validate input. */
#include "core/schema.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "util.h"

/* Deeper schemas are refused, so neither walk can exhaust the stack. */
#define SCHEMA_MAX_DEPTH 64

/* Where a walk is and where its error goes. */
struct schema_ctx {
	struct buf path; /* the keyword path, or the parameter path */
	int depth;
	char *err;
	size_t errlen;
};

static const char *schema_types[] = {
	"object", "array", "string", "number", "integer", "boolean", "null",
};

static void schema_fail(struct schema_ctx *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static size_t schema_push_key(struct buf *, const char *);
static size_t schema_push_index(struct buf *, size_t);
static void schema_pop(struct buf *, size_t);
static bool	schema_out_of_bound(struct schema_ctx *, const char *,
		    const json_t *, const char *);
static bool schema_known_type(const char *);
static bool schema_is_integer(const json_t *);
static bool schema_is_count(const json_t *);
static const char *schema_type_of(const json_t *);
static bool schema_type_matches(const char *, const json_t *);
static bool schema_equal(const json_t *, const json_t *, int);
static int schema_compare(const json_t *, const json_t *);
static void schema_format_number(struct buf *, const json_t *);
static bool schema_check_type(struct schema_ctx *, const json_t *);
static bool schema_check_subschema(struct schema_ctx *, const char *,
    const json_t *);
static bool schema_check_node(struct schema_ctx *, const json_t *);
static void schema_subject(struct schema_ctx *, struct buf *);
static bool schema_validate_type(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_enum(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_number(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_string(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_object(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_array(struct schema_ctx *, const json_t *,
    const json_t *);
static bool schema_validate_node(struct schema_ctx *, const json_t *,
    const json_t *);

static void
schema_fail(struct schema_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->err == NULL || ctx->errlen == 0)
		return;
	va_start(ap, fmt);
	utf8_vsnprintf(ctx->err, ctx->errlen, fmt, ap);
	va_end(ap);
}

/* Append ".key" (or "key" at the root); returns the length to pop back to. */
static size_t
schema_push_key(struct buf *path, const char *key)
{
	size_t old = path->len;

	if (path->len != 0)
		buf_addstr(path, ".");
	buf_addstr(path, key);
	return old;
}

static size_t
schema_push_index(struct buf *path, size_t i)
{
	size_t old = path->len;

	buf_printf(path, "[%zu]", i);
	return old;
}

static void
schema_pop(struct buf *path, size_t len)
{
	path->len = len;
	if (path->data != NULL)
		path->data[len] = '\0';
}

static bool
schema_known_type(const char *name)
{
	size_t i;

	for (i = 0; i < nitems(schema_types); i++) {
		if (strcmp(name, schema_types[i]) == 0)
			return true;
	}
	return false;
}

/* JSON Schema counts 2.0 as an integer. */
static bool
schema_is_integer(const json_t *v)
{
	double d;

	if (json_is_integer(v))
		return true;
	if (!json_is_real(v))
		return false;
	d = json_real_value(v);
	/* Past 2^53 every double is whole (jansson reals are finite). */
	if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
		return true;
	return d == (double)(int64_t)d;
}

/* A non-negative integer that fits a size_t, as minLength wants. */
static bool
schema_is_count(const json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v) >= 0;
	return schema_is_integer(v) && json_real_value(v) >= 0 &&
	    json_real_value(v) < 9007199254740992.0;
}

static const char *
schema_type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return schema_is_integer(v) ? "integer" : "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static bool
schema_type_matches(const char *type, const json_t *v)
{
	if (strcmp(type, "object") == 0)
		return json_is_object(v);
	if (strcmp(type, "array") == 0)
		return json_is_array(v);
	if (strcmp(type, "string") == 0)
		return json_is_string(v);
	if (strcmp(type, "number") == 0)
		return json_is_number(v);
	if (strcmp(type, "integer") == 0)
		return schema_is_integer(v);
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(type, "null") == 0)
		return json_is_null(v);
	return false;
}

/* Equality as enum wants it: 1 equals 1.0, unlike json_equal. */
static bool
schema_equal(const json_t *a, const json_t *b, int depth)
{
	const char *key;
	json_t *va;
	size_t i, key_len;

	if (depth > SCHEMA_MAX_DEPTH)
		return false;
	if (json_is_number(a) && json_is_number(b))
		return schema_compare(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		    memcmp(json_string_value(a), json_string_value(b),
		    json_string_length(a)) == 0;
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (i = 0; i < json_array_size(a); i++) {
			if (!schema_equal(json_array_get(a, i),
			    json_array_get(b, i), depth + 1))
				return false;
		}
		return true;
	case JSON_OBJECT:
		if (json_object_size(a) != json_object_size(b))
			return false;
		/* jansson's iterators are not const-correct. */
		json_object_keylen_foreach((json_t *)a, key, key_len, va) {
			json_t *vb = json_object_getn(b, key, key_len);

			if (vb == NULL || !schema_equal(va, vb, depth + 1))
				return false;
		}
		return true;
	default:
		return true;
	}
}

/* Compare two numbers; exact when both are integers. */
static int
schema_compare(const json_t *a, const json_t *b)
{
	double da, db;

	if (json_is_integer(a) && json_is_integer(b)) {
		json_int_t ia = json_integer_value(a);
		json_int_t ib = json_integer_value(b);

		return (ia > ib) - (ia < ib);
	}
	da = json_number_value(a);
	db = json_number_value(b);
	return (da > db) - (da < db);
}

/* The shortest text that reads back as the same number: 0.1, not 0.1…01. */
static void
schema_format_number(struct buf *b, const json_t *v)
{
	char tmp[64];
	double d;
	int prec;

	if (json_is_integer(v)) {
		buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	}
	d = json_real_value(v);
	/* Whole numbers as digits: a tool wants 1500, not 1.5e+03. */
	if (d > -1e16 && d < 1e16 && d == (double)(int64_t)d) {
		buf_printf(b, "%.0f", d);
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	snprintf(tmp, sizeof tmp, "%.*g", prec, d);
	buf_addstr(b, tmp);
}

static bool
schema_check_type(struct schema_ctx *ctx, const json_t *type)
{
	const json_t *t;
	size_t i;

	if (json_is_string(type)) {
		if (!schema_known_type(json_string_value(type))) {
			schema_fail(ctx, "%s: unknown type \"%s\"",
			    ctx->path.data, json_string_value(type));
			return false;
		}
		return true;
	}
	if (!json_is_array(type) || json_array_size(type) == 0) {
		schema_fail(ctx, "%s: must be a type name or a non-empty array "
		    "of type names", ctx->path.data);
		return false;
	}
	json_array_foreach(type, i, t) {
		if (!json_is_string(t)) {
			schema_fail(ctx, "%s[%zu]: must be a type name",
			    ctx->path.data, i);
			return false;
		}
		if (!schema_known_type(json_string_value(t))) {
			schema_fail(ctx, "%s[%zu]: unknown type \"%s\"",
			    ctx->path.data, i, json_string_value(t));
			return false;
		}
	}
	return true;
}

/* A schema is an object; true and false are schemas too (accept, reject). */
static bool
schema_check_subschema(struct schema_ctx *ctx, const char *key,
    const json_t *schema)
{
	size_t old = schema_push_key(&ctx->path, key);
	bool ok;

	if (json_is_boolean(schema))
		ok = true;
	else if (!json_is_object(schema)) {
		schema_fail(ctx, "%s: must be a schema (an object or a "
		    "boolean)", ctx->path.data);
		ok = false;
	} else if (ctx->depth + 1 >= SCHEMA_MAX_DEPTH) {
		schema_fail(ctx, "%s: schema nested too deeply (more than %d "
		    "levels)", ctx->path.data, SCHEMA_MAX_DEPTH);
		ok = false;
	} else {
		ctx->depth++;
		ok = schema_check_node(ctx, schema);
		ctx->depth--;
	}
	schema_pop(&ctx->path, old);
	return ok;
}

/* Check the keywords of one schema object, in a fixed order. */
static bool
schema_check_node(struct schema_ctx *ctx, const json_t *schema)
{
	static const char *numbers[] = { "minimum", "maximum" };
	static const char *counts[] = { "minLength", "maxLength" };
	const json_t *v, *item;
	const char *key;
	size_t i, old;
	bool ok;

	if ((v = json_object_get(schema, "type")) != NULL) {
		old = schema_push_key(&ctx->path, "type");
		ok = schema_check_type(ctx, v);
		schema_pop(&ctx->path, old);
		if (!ok)
			return false;
	}
	if ((v = json_object_get(schema, "properties")) != NULL) {
		old = schema_push_key(&ctx->path, "properties");
		if (!json_is_object(v)) {
			schema_fail(ctx, "%s: must be an object",
			    ctx->path.data);
			return false;
		}
		/* jansson's iterators are not const-correct. */
		json_object_foreach((json_t *)v, key, item) {
			if (!schema_check_subschema(ctx, key, item))
				return false;
		}
		schema_pop(&ctx->path, old);
	}
	if ((v = json_object_get(schema, "required")) != NULL) {
		old = schema_push_key(&ctx->path, "required");
		if (!json_is_array(v)) {
			schema_fail(ctx, "%s: must be an array of strings",
			    ctx->path.data);
			return false;
		}
		json_array_foreach(v, i, item) {
			if (!json_is_string(item)) {
				schema_fail(ctx, "%s[%zu]: must be a string",
				    ctx->path.data, i);
				return false;
			}
		}
		schema_pop(&ctx->path, old);
	}
	if ((v = json_object_get(schema, "additionalProperties")) != NULL &&
	    !schema_check_subschema(ctx, "additionalProperties", v))
		return false;
	if ((v = json_object_get(schema, "items")) != NULL &&
	    !schema_check_subschema(ctx, "items", v))
		return false;
	if ((v = json_object_get(schema, "enum")) != NULL &&
	    !json_is_array(v)) {
		schema_push_key(&ctx->path, "enum");
		schema_fail(ctx, "%s: must be an array", ctx->path.data);
		return false;
	}
	for (i = 0; i < nitems(numbers); i++) {
		v = json_object_get(schema, numbers[i]);
		if (v != NULL && !json_is_number(v)) {
			schema_push_key(&ctx->path, numbers[i]);
			schema_fail(ctx, "%s: must be a number",
			    ctx->path.data);
			return false;
		}
	}
	for (i = 0; i < nitems(counts); i++) {
		v = json_object_get(schema, counts[i]);
		if (v != NULL && !schema_is_count(v)) {
			schema_push_key(&ctx->path, counts[i]);
			schema_fail(ctx, "%s: must be a non-negative integer",
			    ctx->path.data);
			return false;
		}
	}
	return true;
}

char *
schema_number_text(const json_t *v)
{
	struct buf b = { 0 };

	if (!json_is_number(v))
		return NULL;
	schema_format_number(&b, v);
	return b.data;
}

bool
schema_check(const json_t *schema, char *err, size_t errlen)
{
	struct schema_ctx ctx = { .err = err, .errlen = errlen };
	bool ok;

	if (json_is_boolean(schema))
		return true;
	if (!json_is_object(schema)) {
		schema_fail(&ctx, "must be a schema (an object or a boolean)");
		return false;
	}
	buf_addstr(&ctx.path, "");
	ok = schema_check_node(&ctx, schema);
	buf_free(&ctx.path);
	return ok;
}

/* "The parameter `a.b`", or "The input" at the root. */
static void
schema_subject(struct schema_ctx *ctx, struct buf *b)
{
	if (ctx->path.len == 0)
		buf_addstr(b, "The input");
	else
		buf_printf(b, "The parameter `%s`", ctx->path.data);
}

static bool
schema_validate_type(struct schema_ctx *ctx, const json_t *type,
    const json_t *v)
{
	struct buf b = { 0 };
	const json_t *t;
	const char *name;
	size_t i, n;

	if (json_is_string(type)) {
		if (schema_type_matches(json_string_value(type), v))
			return true;
	} else if (json_is_array(type)) {
		json_array_foreach(type, i, t) {
			if (json_is_string(t) &&
			    schema_type_matches(json_string_value(t), v))
				return true;
		}
	} else
		return true;

	if (ctx->path.len == 0)
		buf_addstr(&b, "The input must be ");
	else {
		buf_printf(&b, "The parameter `%s` type is expected as ",
		    ctx->path.data);
	}
	n = json_is_array(type) ? json_array_size(type) : 1;
	for (i = 0; i < n; i++) {
		t = json_is_array(type) ? json_array_get(type, i) : type;
		if ((name = json_string_value(t)) == NULL)
			continue;
		if (i != 0)
			buf_addstr(&b, " or ");
		if (ctx->path.len != 0)
			buf_printf(&b, "`%s`", name);
		else if (strcmp(name, "null") == 0)
			buf_addstr(&b, name);
		else if (strchr("aeiou", name[0]) != NULL)
			buf_printf(&b, "an %s", name);
		else
			buf_printf(&b, "a %s", name);
	}
	if (ctx->path.len == 0)
		buf_printf(&b, ", got %s", schema_type_of(v));
	else
		buf_printf(&b, " but provided as `%s`", schema_type_of(v));
	schema_fail(ctx, "%s", b.data);
	buf_free(&b);
	return false;
}

static bool
schema_validate_enum(struct schema_ctx *ctx, const json_t *values,
    const json_t *v)
{
	struct buf b = { 0 };
	const json_t *item;
	char *text;
	size_t i;

	if (!json_is_array(values))
		return true;
	json_array_foreach(values, i, item) {
		if (schema_equal(item, v, 0))
			return true;
	}
	schema_subject(ctx, &b);
	buf_addstr(&b, " must be one of ");
	json_array_foreach(values, i, item) {
		if (i != 0)
			buf_addstr(&b, ", ");
		if (json_is_number(item)) {
			schema_format_number(&b, item);
			continue;
		}
		text = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
		buf_addstr(&b, text != NULL ? text : "?");
		free(text);
	}
	schema_fail(ctx, "%s", b.data);
	buf_free(&b);
	return false;
}

/*
 * Fail with "<subject><relation><bound>", then " <unit> long" (plural
 * unless the bound is 1) when a unit is given. Always false.
 */
static bool
schema_out_of_bound(struct schema_ctx *ctx, const char *relation,
    const json_t *bound, const char *unit)
{
	struct buf b = { 0 };

	schema_subject(ctx, &b);
	buf_addstr(&b, relation);
	schema_format_number(&b, bound);
	if (unit != NULL)
		buf_printf(&b, " %s%s long", unit,
		    json_number_value(bound) == 1 ? "" : "s");
	schema_fail(ctx, "%s", b.data);
	buf_free(&b);
	return false;
}

static bool
schema_validate_number(struct schema_ctx *ctx, const json_t *schema,
    const json_t *v)
{
	const json_t *min = json_object_get(schema, "minimum");
	const json_t *max = json_object_get(schema, "maximum");

	if (!json_is_number(v))
		return true;
	if (json_is_number(min) && schema_compare(v, min) < 0)
		return schema_out_of_bound(ctx, " must be >= ", min, NULL);
	if (json_is_number(max) && schema_compare(v, max) > 0)
		return schema_out_of_bound(ctx, " must be <= ", max, NULL);
	return true;
}

static bool
schema_validate_string(struct schema_ctx *ctx, const json_t *schema,
    const json_t *v)
{
	const json_t *min = json_object_get(schema, "minLength");
	const json_t *max = json_object_get(schema, "maxLength");
	double n;

	if (!json_is_string(v))
		return true;
	n = (double)utf8_chars(json_string_value(v),
	    json_string_length(v));
	if (schema_is_count(min) && n < json_number_value(min))
		return schema_out_of_bound(ctx, " must be at least ", min,
		    "character");
	if (schema_is_count(max) && n > json_number_value(max))
		return schema_out_of_bound(ctx, " must be at most ", max,
		    "character");
	return true;
}

/* Properties in schema order, then required, then additionalProperties. */
static bool
schema_validate_object(struct schema_ctx *ctx, const json_t *schema,
    const json_t *v)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *req = json_object_get(schema, "required");
	const json_t *extra = json_object_get(schema, "additionalProperties");
	const json_t *sub, *item;
	const char *key;
	size_t i, key_len, old;

	if (!json_is_object(v))
		return true;
	if (!json_is_object(props))
		props = NULL;
	if (props != NULL) {
		/* jansson's iterators are not const-correct. */
		json_object_keylen_foreach((json_t *)props, key, key_len, sub) {
			if ((item = json_object_getn(v, key, key_len)) == NULL)
				continue;
			old = schema_push_key(&ctx->path, key);
			if (!schema_validate_node(ctx, sub, item))
				return false;
			schema_pop(&ctx->path, old);
		}
	}
	if (json_is_array(req)) {
		json_array_foreach(req, i, item) {
			if (!json_is_string(item))
				continue;
			if (json_object_getn(v, json_string_value(item),
			    json_string_length(item)) != NULL)
				continue;
			schema_push_key(&ctx->path, json_string_value(item));
			schema_fail(ctx,
			    "The required parameter `%s` is missing",
			    ctx->path.data);
			return false;
		}
	}
	if (extra == NULL || json_is_true(extra))
		return true;
	json_object_keylen_foreach((json_t *)v, key, key_len, item) {
		if (props != NULL &&
		    json_object_getn(props, key, key_len) != NULL)
			continue;
		old = schema_push_key(&ctx->path, key);
		if (!schema_validate_node(ctx, extra, item))
			return false;
		schema_pop(&ctx->path, old);
	}
	return true;
}

static bool
schema_validate_array(struct schema_ctx *ctx, const json_t *schema,
    const json_t *v)
{
	const json_t *items = json_object_get(schema, "items");
	const json_t *item;
	size_t i, old;

	if (!json_is_array(v) || items == NULL || json_is_true(items))
		return true;
	json_array_foreach(v, i, item) {
		old = schema_push_index(&ctx->path, i);
		if (!schema_validate_node(ctx, items, item))
			return false;
		schema_pop(&ctx->path, old);
	}
	return true;
}

/*
 * One value against one schema. On failure the path is left pointing at the
 * bad value; the caller frees it.
 */
static bool
schema_validate_node(struct schema_ctx *ctx, const json_t *schema,
    const json_t *v)
{
	bool ok;

	if (json_is_false(schema)) {
		if (ctx->path.len == 0)
			schema_fail(ctx, "The input is not accepted");
		else {
			schema_fail(ctx, "An unexpected parameter `%s` was "
			    "provided", ctx->path.data);
		}
		return false;
	}
	/* Anything else that is not an object constrains nothing. */
	if (!json_is_object(schema))
		return true;
	if (ctx->depth >= SCHEMA_MAX_DEPTH) {
		if (ctx->path.len == 0)
			schema_fail(ctx, "The input is nested too deeply");
		else {
			schema_fail(ctx, "The parameter `%s` is nested too "
			    "deeply (more than %d levels)", ctx->path.data,
			    SCHEMA_MAX_DEPTH);
		}
		return false;
	}
	ctx->depth++;
	ok = schema_validate_type(ctx, json_object_get(schema, "type"), v) &&
	    schema_validate_enum(ctx, json_object_get(schema, "enum"), v) &&
	    schema_validate_number(ctx, schema, v) &&
	    schema_validate_string(ctx, schema, v) &&
	    schema_validate_object(ctx, schema, v) &&
	    schema_validate_array(ctx, schema, v);
	ctx->depth--;
	return ok;
}

bool
schema_validate(const json_t *schema, const json_t *instance, char *err,
    size_t errlen)
{
	struct schema_ctx ctx = { .err = err, .errlen = errlen };
	bool ok;

	if (instance == NULL) {
		schema_fail(&ctx, "The input is missing");
		return false;
	}
	buf_addstr(&ctx.path, "");
	ok = schema_validate_node(&ctx, schema, instance);
	buf_free(&ctx.path);
	return ok;
}
