/* Cutting text at a character boundary, and repairing JSON. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* x, é, €, 😀: one character of each UTF-8 width. */
static const char *const widths[] = { "x", "\xc3\xa9", "\xe2\x82\xac",
	"\xf0\x9f\x98\x80" };

Test(utf8_cut, ascii_is_cut_where_asked)
{
	cr_assert_eq(utf8_cut("hello", 5, 10), 5);
	cr_assert_eq(utf8_cut("hello", 5, 3), 3);
	cr_assert_eq(utf8_cut("hello", 5, 0), 0);
	cr_assert_eq(utf8_cut("", 0, 4), 0);
}

/* Every width, every alignment, every limit: the largest boundary. */
Test(utf8_cut, every_width_and_alignment)
{
	char s[64];
	size_t w, off, len, max, i, cut, want;

	for (w = 0; w < 4; w++)
		for (off = 0; off < 4; off++) {
			memset(s, 'a', off);
			len = off;
			for (i = 0; i < 8; i++) {
				memcpy(s + len, widths[w], w + 1);
				len += w + 1;
			}
			for (max = 0; max <= len + 2; max++) {
				cut = utf8_cut(s, len, max);
				want = max >= len ? len : max <= off ? max :
				    off + (max - off) / (w + 1) * (w + 1);
				cr_assert_eq(cut, want, "width %zu offset %zu "
				    "max %zu: cut %zu, want %zu", w + 1, off,
				    max, cut, want);
				cr_assert(utf8_valid(s, cut));
			}
		}
}

Test(utf8_cut, a_text_ending_in_half_a_character)
{
	/* The whole length asked for, but the last character is cut. */
	cr_assert_eq(utf8_cut("ab\xe2\x82", 4, 4), 2);
	cr_assert_eq(utf8_cut("ab\xf0\x9f\x98", 5, 5), 2);
	cr_assert_eq(utf8_cut("ab\xc3", 3, 3), 2);
	cr_assert_eq(utf8_cut("\xe2\x82\xac", 3, 3), 3);
}

Test(utf8_cut, invalid_bytes_are_left_alone)
{
	/* Not a cut character: nothing to drop (repair deals with them). */
	cr_assert_eq(utf8_cut("a\xff", 2, 2), 2);
	cr_assert_eq(utf8_cut("a\xc0", 2, 2), 2);
	cr_assert_eq(utf8_cut("\x80\x80\x80\x80", 4, 4), 4);
	cr_assert_eq(utf8_cut("a\xe2\x82\xac\x80", 5, 5), 5);
}

Test(utf8_snprintf, a_long_text_is_cut_at_a_boundary)
{
	char buf[8];

	utf8_snprintf(buf, sizeof buf, "%s", "\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9");
	cr_assert_str_eq(buf, "\xc3\xa9\xc3\xa9\xc3\xa9");
	utf8_snprintf(buf, sizeof buf, "a%s", "\xf0\x9f\x98\x80\xf0\x9f\x98"
	    "\x80");
	cr_assert_str_eq(buf, "a\xf0\x9f\x98\x80");
	utf8_snprintf(buf, sizeof buf, "%s", "\xe2\x82\xac\xe2\x82\xac");
	cr_assert_str_eq(buf, "\xe2\x82\xac\xe2\x82\xac");
	utf8_snprintf(buf, 1, "%s", "abc");
	cr_assert_str_eq(buf, "");
	utf8_snprintf(buf, sizeof buf, "%d-%s", 42, "xyz");
	cr_assert_str_eq(buf, "42-xyz");
}

Test(utf8_snprintf, every_size_gives_valid_text)
{
	char text[64], buf[64];
	size_t w, size;

	for (w = 0; w < 4; w++) {
		text[0] = '\0';
		while (strlen(text) + 4 < 40)
			strcat(text, widths[w]);
		for (size = 1; size < sizeof buf; size++) {
			utf8_snprintf(buf, size, "%s", text);
			cr_assert(strlen(buf) < size);
			cr_assert(utf8_valid(buf, strlen(buf)));
			cr_assert(strncmp(buf, text, strlen(buf)) == 0);
			cr_assert(strlen(buf) + w + 1 >= size ||
			    strlen(buf) == strlen(text));
		}
	}
}

Test(utf8_repair_json, bad_strings_and_keys_are_repaired)
{
	json_t *v = json_object(), *a = json_array(), *fixed, *inner;
	char *text;

	json_object_set_new_nocheck(v, "k\xff", json_stringn_nocheck(
	    "v\xc3", 2));
	json_array_append_new(a, json_stringn_nocheck("\xe2\x82", 2));
	json_array_append_new(a, json_integer(7));
	json_array_append_new(a, json_string("ok \xc3\xa9"));
	json_object_set_new(v, "list", a);
	fixed = utf8_repair_json(v);
	cr_assert_str_eq(json_string_value(json_object_get(fixed,
	    "k\xef\xbf\xbd")), "v\xef\xbf\xbd");
	inner = json_object_get(fixed, "list");
	cr_assert_str_eq(json_string_value(json_array_get(inner, 0)),
	    "\xef\xbf\xbd\xef\xbf\xbd");
	cr_assert_eq(json_integer_value(json_array_get(inner, 1)), 7);
	cr_assert_str_eq(json_string_value(json_array_get(inner, 2)),
	    "ok \xc3\xa9");
	/* What was repaired loads back: it is valid JSON text. */
	text = json_dumps(fixed, JSON_COMPACT);
	json_decref(fixed);
	fixed = json_loads(text, 0, NULL);
	cr_assert_not_null(fixed);
	free(text);
	json_decref(fixed);
	json_decref(v);
}

/* Feed one chunk; what may go out now, as a string. */
static char *
carry_feed(struct utf8_carry *c, const char *data)
{
	struct buf tmp = { 0 };
	const char *out;
	size_t n;
	char *copy;

	out = utf8_carry_feed(c, data, strlen(data), &tmp, &n);
	copy = strndup(out, n);
	buf_free(&tmp);
	return copy;
}

Test(utf8_carry, a_character_split_between_chunks_stays_whole)
{
	struct utf8_carry out = { 0 }, err = { 0 };
	char *s;

	/* "\xe2\x82\xac" is the euro sign: the first chunk ends inside it. */
	cr_assert_str_eq(s = carry_feed(&out, "a\xe2\x82"), "a");
	free(s);
	cr_assert_eq(out.len, 2);
	cr_assert_str_eq(s = carry_feed(&out, "\xac b"), "\xe2\x82\xac b");
	free(s);
	cr_assert_eq(out.len, 0);
	/* A sequence never finished stays in the carry for the caller. */
	cr_assert_str_eq(s = carry_feed(&err, "x\xf0\x9f"), "x");
	free(s);
	cr_assert_eq(err.len, 2);
	cr_assert_eq(memcmp(err.bytes, "\xf0\x9f", 2), 0);
	/* Bytes that cannot start a character are not held back. */
	cr_assert_str_eq(s = carry_feed(&err, "\xff"), "\xf0\x9f\xff");
	free(s);
	cr_assert_eq(err.len, 0);
}
