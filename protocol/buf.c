/* The growable byte buffer: see buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_grow(struct buf *b, size_t n)
{
	size_t need, cap;
	char *p;

	if (n > SIZE_MAX - 1 - b->len) {
		fprintf(stderr, "buf: size overflow\n");
		abort();
	}
	need = b->len + n + 1;
	if (need <= b->cap)
		return;
	cap = b->cap != 0 ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if ((p = realloc(b->data, cap)) == NULL) {
		fprintf(stderr, "buf: out of memory (%zu bytes)\n", cap);
		abort();
	}
	b->data = p;
	b->cap = cap;
}

/* buf_add when it must grow first. */
void
buf_add_grown(struct buf *b, const void *p, size_t n)
{
	buf_grow(b, n);
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
buf_addstr(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

size_t
buf_fmt_u64(char *out, uint64_t v, unsigned base)
{
	char tmp[BUF_U64_MAX];
	size_t n = 0, i;

	/*
	 * Each base by its constant: a shift or a multiply per digit, where
	 * dividing by a variable took a 64-bit divide (tens of cycles).
	 */
	if (base == 16)
		do {
			tmp[n++] = "0123456789abcdef"[v & 15];
			v >>= 4;
		} while (v != 0);
	else
		do {
			tmp[n++] = (char)('0' + v % 10);
			v /= 10;
		} while (v != 0);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

void
buf_add_int(struct buf *b, long long v)
{
	char num[BUF_U64_MAX + 1];
	size_t n = 0;

	if (v < 0)
		num[n++] = '-';
	/* -(v + 1) + 1: LLONG_MIN has no positive counterpart. */
	n += buf_fmt_u64(num + n, v < 0 ? (uint64_t)-(v + 1) + 1 :
	    (uint64_t)v, 10);
	buf_add(b, num, n);
}

void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t room;
	int n;

	/* Format in place; grow and format again only when it did not fit. */
	buf_grow(b, 64);
	room = b->cap - b->len;
	va_start(ap, fmt);
	n = vsnprintf(b->data + b->len, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		fprintf(stderr, "buf: bad format\n");
		abort();
	}
	if ((size_t)n >= room) {
		buf_grow(b, (size_t)n);
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
