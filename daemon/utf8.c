/* UTF-8 validation and repair (RFC 3629: no overlongs, no surrogates). */
#include "utf8.h"

#include <stdint.h>

static size_t	utf8_seq(const unsigned char *, size_t);

/* Length of the valid sequence at s, or 0 if it is not one. */
static size_t
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

bool
utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;

	while (i < len) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		if ((n = utf8_seq(p + i, len - i)) == 0)
			return false;
		i += n;
	}
	return true;
}

void
utf8_repair(struct buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0, n;

	/* Copy valid runs whole; one U+FFFD per invalid byte. */
	while (i < len) {
		if (p[i] < 0x80)
			n = 1;
		else
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
