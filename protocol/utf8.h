/* UTF-8 repair: JSON strings must be valid UTF-8, tool output need not be. */
#ifndef STEXEC_UTF8_H
#define STEXEC_UTF8_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/*
 * The one UTF-8 decoder (RFC 3629: no overlongs, no surrogates): the length
 * of the well-formed sequence at s[0..left), left > 0, or 0 if none.
 */
size_t utf8_seq(const unsigned char *s, size_t left);
/* Characters in s[0..len), which must be valid UTF-8. */
size_t utf8_chars(const char *s, size_t len);
/* Is the whole of s[0..len) valid UTF-8? */
bool utf8_valid(const char *s, size_t len);
/* Append s to b with every invalid sequence replaced by U+FFFD. */
void utf8_repair(struct buf *b, const char *s, size_t len);
/*
 * The length of the longest prefix of s[0..len) of at most max bytes that
 * does not end inside a character: where to cut a text to fit max bytes.
 */
size_t utf8_cut(const char *s, size_t len, size_t max);
/*
 * A byte stream cut into chunks at arbitrary places, re-cut at character
 * boundaries: the start of a character a chunk ends in is held back and
 * goes out with the next chunk, so that no character is split in two.
 */
struct utf8_carry {
	char bytes[4];
	size_t len;
};

/*
 * Feed a chunk. Returns what may go out now, *out_len bytes: data itself,
 * or the carry and data joined in tmp (buf_free it afterwards).
 */
const char *utf8_carry_feed(struct utf8_carry *, const char *data,
    size_t len, struct buf *tmp, size_t *out_len);
/* vsnprintf, but a text that does not fit is cut at a character boundary. */
void utf8_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void utf8_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * A deep copy of v with every string and key that is not valid UTF-8
 * repaired: a last resort for a message that could not be encoded.
 */
json_t *utf8_repair_json(const json_t *v);

#endif
