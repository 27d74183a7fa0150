/* The fast path of JSON parsing in front of jansson's: see jsonload.h. */
#include "jsonload.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting is left to jansson (whose own limit is 2048). */
#define JSONLOAD_DEPTH 64
/* Integers of more digits may not fit: jansson decides them. */
#define JSONLOAD_DIGITS 18
/* Longer real-number text is left to jansson. */
#define JSONLOAD_REAL 64
/* A decoding buffer larger than this is not kept for the next string. */
#define JSONLOAD_KEEP 65536

struct jsonload {
	const char *p, *end;
	char *scratch;          /* a string with escapes, decoded */
	size_t cap;
};

static json_t	*jsonload_value(struct jsonload *, int);

static void
jsonload_space(struct jsonload *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
	    *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int
jsonload_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The escaped string between q and end (its quotes excluded) decoded into
 * the scratch buffer, which it cannot outgrow: no escape is shorter than
 * what it stands for. A surrogate (a pair or a lone half) is declined.
 */
static bool
jsonload_unescape(struct jsonload *j, const char *q, const char *end,
    const char **s, size_t *n)
{
	size_t need = (size_t)(end - q);
	unsigned v;
	char *o;
	int k, d;

	if (need > j->cap) {
		free(j->scratch);
		if ((j->scratch = malloc(need)) == NULL) {
			j->cap = 0;
			return false;
		}
		j->cap = need;
	}
	o = j->scratch;
	while (q < end) {
		if (*q != '\\') {
			*o++ = *q++;
			continue;
		}
		/* The scan that found end saw a byte after each backslash. */
		q++;
		switch (*q++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (end - q < 4)
				return false;
			for (v = 0, k = 0; k < 4; k++) {
				if ((d = jsonload_hex(q[k])) < 0)
					return false;
				v = v << 4 | (unsigned)d;
			}
			q += 4;
			if (v >= 0xd800 && v <= 0xdfff)
				return false;
			if (v < 0x80)
				*o++ = (char)v;
			else if (v < 0x800) {
				*o++ = (char)(0xc0 | v >> 6);
				*o++ = (char)(0x80 | (v & 0x3f));
			} else {
				*o++ = (char)(0xe0 | v >> 12);
				*o++ = (char)(0x80 | (v >> 6 & 0x3f));
				*o++ = (char)(0x80 | (v & 0x3f));
			}
			break;
		default:
			return false;
		}
	}
	*s = j->scratch;
	*n = (size_t)(o - j->scratch);
	return true;
}

/*
 * The string whose opening quote is at j->p: its bytes in *s, *n, in the
 * input when it has no escape (most strings), else in the scratch buffer.
 * UTF-8 is not checked here: jansson's setters check it.
 */
static bool
jsonload_string(struct jsonload *j, const char **s, size_t *n, bool *esc)
{
	const char *q = j->p + 1, *start = q;
	unsigned char c;

	*esc = false;
	for (;;) {
		if (q == j->end)
			return false;
		c = (unsigned char)*q;
		if (c == '"')
			break;
		if (c < 0x20)
			return false;
		if (c == '\\') {
			*esc = true;
			if (++q == j->end)
				return false;
		}
		q++;
	}
	j->p = q + 1;
	if (!*esc) {
		*s = start;
		*n = (size_t)(q - start);
		return true;
	}
	return jsonload_unescape(j, start, q, s, n);
}

static bool
jsonload_digit(const struct jsonload *j, const char *q)
{
	return q < j->end && *q >= '0' && *q <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as jansson reads it. */
static json_t *
jsonload_number(struct jsonload *j)
{
	const char *q = j->p, *digits;
	char text[JSONLOAD_REAL + 1], *e;
	bool neg = false, real = false;
	json_int_t v = 0;
	double d;
	size_t n;

	if (*q == '-') {
		neg = true;
		q++;
	}
	if (!jsonload_digit(j, q))
		return NULL;
	digits = q;
	if (*q == '0')
		q++;
	else
		while (jsonload_digit(j, q))
			q++;
	if (q < j->end && *q == '.') {
		real = true;
		if (!jsonload_digit(j, ++q))
			return NULL;
		while (jsonload_digit(j, q))
			q++;
	}
	if (q < j->end && (*q == 'e' || *q == 'E')) {
		real = true;
		q++;
		if (q < j->end && (*q == '+' || *q == '-'))
			q++;
		if (!jsonload_digit(j, q))
			return NULL;
		while (jsonload_digit(j, q))
			q++;
	}
	if (!real) {
		if (q - digits > JSONLOAD_DIGITS)
			return NULL;
		for (; digits < q; digits++)
			v = v * 10 + (*digits - '0');
		j->p = q;
		return json_integer(neg ? -v : v);
	}
	if ((n = (size_t)(q - j->p)) > JSONLOAD_REAL)
		return NULL;
	memcpy(text, j->p, n);
	text[n] = '\0';
	/* jansson refuses an overflow; an underflow is its nearest value. */
	d = strtod(text, &e);
	if (e != text + n || isinf(d))
		return NULL;
	j->p = q;
	return json_real(d);
}

static json_t *
jsonload_word(struct jsonload *j, const char *word, size_t len, json_t *v)
{
	if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len) != 0)
		return NULL;
	j->p += len;
	return v;
}

/*
 * After a member or an element: 1 past a comma (more follow), 0 past the
 * closing bracket, -1 at anything else.
 */
static int
jsonload_next(struct jsonload *j, char close)
{
	jsonload_space(j);
	if (j->p < j->end && (*j->p == ',' || *j->p == close))
		return *j->p++ == ',';
	return -1;
}

/* Past the opening bracket: true if the closing one follows (empty). */
static bool
jsonload_empty(struct jsonload *j, char close)
{
	j->p++;
	jsonload_space(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return true;
	}
	return false;
}

static json_t *
jsonload_object(struct jsonload *j, int depth)
{
	json_t *obj = json_object(), *v;
	const char *key;
	size_t klen;
	int more = 1;
	bool esc;

	if (jsonload_empty(j, '}'))
		return obj;
	while (obj != NULL && more == 1) {
		/*
		 * A key with an escape would sit in the scratch buffer, which
		 * the value's strings reuse: such keys (rare; \u0000 in one is
		 * an error of jansson's) are left to jansson.
		 */
		jsonload_space(j);
		if (j->p == j->end || *j->p != '"' ||
		    !jsonload_string(j, &key, &klen, &esc) || esc)
			break;
		jsonload_space(j);
		if (j->p == j->end || *j->p != ':')
			break;
		j->p++;
		/* Checks the key's UTF-8; the last of duplicate keys wins. */
		if ((v = jsonload_value(j, depth + 1)) == NULL ||
		    json_object_setn_new(obj, key, klen, v) != 0)
			break;
		if ((more = jsonload_next(j, '}')) == 0)
			return obj;
	}
	json_decref(obj);
	return NULL;
}

static json_t *
jsonload_array(struct jsonload *j, int depth)
{
	json_t *arr = json_array(), *v;
	int more = 1;

	if (jsonload_empty(j, ']'))
		return arr;
	while (arr != NULL && more == 1) {
		if ((v = jsonload_value(j, depth + 1)) == NULL ||
		    json_array_append_new(arr, v) != 0)
			break;
		if ((more = jsonload_next(j, ']')) == 0)
			return arr;
	}
	json_decref(arr);
	return NULL;
}

/* The value at j->p, after any space; NULL: declined. */
static json_t *
jsonload_value(struct jsonload *j, int depth)
{
	const char *s;
	json_t *v;
	size_t n;
	bool esc;

	jsonload_space(j);
	if (j->p == j->end || depth > JSONLOAD_DEPTH)
		return NULL;
	switch (*j->p) {
	case '{':
		return jsonload_object(j, depth);
	case '[':
		return jsonload_array(j, depth);
	case '"':
		if (!jsonload_string(j, &s, &n, &esc))
			return NULL;
		/* NULL when not UTF-8: jansson's check, as its parser's. */
		v = json_stringn(s, n);
		if (j->cap > JSONLOAD_KEEP) {
			free(j->scratch);
			j->scratch = NULL;
			j->cap = 0;
		}
		return v;
	case 't':
		return jsonload_word(j, "true", 4, json_true());
	case 'f':
		return jsonload_word(j, "false", 5, json_false());
	case 'n':
		return jsonload_word(j, "null", 4, json_null());
	default:
		return *j->p == '-' || (*j->p >= '0' && *j->p <= '9') ?
		    jsonload_number(j) : NULL;
	}
}

json_t *
jsonload(const char *text, size_t len)
{
	struct jsonload j = { text, text + len, NULL, 0 };
	json_t *v = jsonload_value(&j, 0);

	jsonload_space(&j);
	if (v != NULL && j.p != j.end) {
		json_decref(v);
		v = NULL;
	}
	free(j.scratch);
	return v;
}
