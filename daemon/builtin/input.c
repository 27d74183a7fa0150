/*
 * Input fields. The daemon has checked the inputSchema already; this is
 * defence in depth, so a field of the wrong type is still a clear error.
 */
#include <string.h>

#include "builtin.h"

/*
 * A string field into *out (NULL when an optional one is absent or null) and
 * its length into *lenp. Returns 0, or -1 after printing why.
 */
int
input_string(const json_t *in, const char *field, int flags,
    const char **out, size_t *lenp)
{
	const json_t *v = json_object_get(in, field);
	size_t len;

	*out = NULL;
	if (lenp != NULL)
		*lenp = 0;
	if (v == NULL || json_is_null(v)) {
		if (~flags & INPUT_REQUIRED)
			return 0;
		out_invalid("%s must be a string", field);
		return -1;
	}
	if (!json_is_string(v)) {
		out_invalid("%s must be a string", field);
		return -1;
	}
	len = json_string_length(v);
	if ((flags & INPUT_NONEMPTY) && len == 0) {
		out_invalid("%s must not be empty", field);
		return -1;
	}
	if ((~flags & INPUT_ALLOW_NUL) &&
	    memchr(json_string_value(v), '\0', len) != NULL) {
		out_invalid("%s must not contain NUL characters", field);
		return -1;
	}
	*out = json_string_value(v);
	if (lenp != NULL)
		*lenp = len;
	return 0;
}

/*
 * An optional integer field of at least min into *out, dflt when absent or
 * null. Returns 0, or -1 after printing why.
 */
int
input_integer(const json_t *in, const char *field, json_int_t dflt,
    json_int_t min, json_int_t *out)
{
	const json_t *v = json_object_get(in, field);
	double d;

	*out = dflt;
	if (v == NULL || json_is_null(v))
		return 0;
	if (json_is_integer(v))
		*out = json_integer_value(v);
	else if (json_is_real(v)) {
		/* JSON Schema counts 2.0 as an integer, and so do we. */
		d = json_real_value(v);
		if (!(d >= -9e15 && d <= 9e15) ||
		    d != (double)(json_int_t)d) {
			out_invalid("%s must be an integer", field);
			return -1;
		}
		*out = (json_int_t)d;
	} else {
		out_invalid("%s must be an integer", field);
		return -1;
	}
	if (*out < min) {
		out_invalid("%s must be at least %" JSON_INTEGER_FORMAT, field,
		    min);
		return -1;
	}
	return 0;
}
