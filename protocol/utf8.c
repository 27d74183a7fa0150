/* UTF-8 validation and repair (RFC 3629: no overlongs, no surrogates). */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static json_t	*utf8_repair_string(const char *, size_t);
static size_t	utf8_ascii(const unsigned char *, size_t);

size_t
utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else
		return 0;
	if (left < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t
utf8_chars(const char *s, size_t len)
{
	size_t i, n = 0;

	/* Every byte that does not continue a sequence starts a character. */
	for (i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}

bool
utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;

	while (i < len) {
		if ((i += utf8_ascii(p + i, len - i)) == len)
			break;
		if ((n = utf8_seq(p + i, len - i)) == 0)
			return false;
		i += n;
	}
	return true;
}

/* The ASCII bytes at p: eight at a time, then one by one. */
static size_t
utf8_ascii(const unsigned char *p, size_t len)
{
	uint64_t w;
	size_t i = 0;

	for (; len - i >= 8; i += 8) {
		memcpy(&w, p + i, 8);
		if ((w & 0x8080808080808080ULL) != 0)
			break;
	}
	while (i < len && p[i] < 0x80)
		i++;
	return i;
}

void
utf8_repair(struct buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0, n;

	/* s may be NULL (an empty buffer's data); b still gets its NUL. */
	if (len == 0) {
		buf_add(b, "", 0);
		return;
	}
	/* Copy valid runs whole; one U+FFFD per invalid byte. */
	while (i < len) {
		if ((i += utf8_ascii(p + i, len - i)) == len)
			break;
		n = utf8_seq(p + i, len - i);
		if (n == 0) {
			buf_add(b, s + run, i - run);
			buf_add(b, "\xef\xbf\xbd", 3);
			i++;
			run = i;
			continue;
		}
		i += n;
	}
	buf_add(b, s + run, i - run);
}

size_t
utf8_cut(const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = len < max ? len : max, back, need;
	unsigned char c;

	/* Drop a lead byte (and what follows it) whose sequence is cut. */
	for (back = 1; back <= 3 && back <= n; back++) {
		c = p[n - back];
		if ((c & 0xc0) == 0x80)
			continue;
		if (c < 0xc2 || c > 0xf4)
			return n;
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		return need > back ? n - back : n;
	}
	return n;
}

const char *
utf8_carry_feed(struct utf8_carry *c, const char *data, size_t len,
    struct buf *tmp, size_t *out_len)
{
	size_t keep;

	if (c->len > 0) {
		buf_add(tmp, c->bytes, c->len);
		buf_add(tmp, data, len);
		data = tmp->data;
		len = tmp->len;
	}
	keep = len - utf8_cut(data, len, len);
	memcpy(c->bytes, data + len - keep, keep);
	c->len = keep;
	*out_len = len - keep;
	return data;
}

void
utf8_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	int n;

	if (size == 0)
		return;
	n = vsnprintf(buf, size, fmt, ap);
	if (n < 0)
		buf[0] = '\0';
	else if ((size_t)n >= size)
		buf[utf8_cut(buf, size - 1, size - 1)] = '\0';
}

void
utf8_snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* A JSON string of s[0..len), repaired if it is not valid UTF-8. */
static json_t *
utf8_repair_string(const char *s, size_t len)
{
	struct buf b = { 0 };
	json_t *v;

	if (utf8_valid(s, len))
		return json_stringn(s, len);
	utf8_repair(&b, s, len);
	v = json_stringn(b.data, b.len);
	buf_free(&b);
	return v;
}

json_t *
utf8_repair_json(const json_t *v)
{
	const char *key;
	json_t *copy, *item, *k;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return utf8_repair_string(json_string_value(v),
		    json_string_length(v));
	case JSON_ARRAY:
		copy = json_array();
		json_array_foreach(v, i, item)
			json_array_append_new(copy, utf8_repair_json(item));
		return copy;
	case JSON_OBJECT:
		copy = json_object();
		json_object_foreach((json_t *)v, key, item) {
			k = utf8_repair_string(key, strlen(key));
			json_object_set_new(copy, json_string_value(k),
			    utf8_repair_json(item));
			json_decref(k);
		}
		return copy;
	default:
		return json_deep_copy(v);
	}
}
