/*
 * read_file on an image (doc/design.md §7, Content blocks): the file's magic
 * bytes say it is PNG, JPEG, GIF or WebP, its header says its size, and it
 * goes back whole as an image block on fd 3, as Claude Code's Read returns
 * one. One over the API's limits is refused in words, never rescaled.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "core/content.h"
#include "util.h"

static bool	image_size(const char *, const unsigned char *, size_t,
		    unsigned *, unsigned *);
static bool	image_jpeg_size(const unsigned char *, size_t, unsigned *,
		    unsigned *);
static char	*image_base64(const unsigned char *, size_t, size_t *);

const char *
image_kind(const char *probe, size_t len)
{
	return content_sniff((const unsigned char *)probe, len);
}

static unsigned
image_be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static unsigned
image_le16(const unsigned char *p)
{
	return p[0] | (unsigned)p[1] << 8;
}

/* Width and height from the header of a file of that media type. */
static bool
image_size(const char *media, const unsigned char *p, size_t n, unsigned *w,
    unsigned *h)
{
	if (strcmp(media, "image/png") == 0) {
		if (n < 24 || memcmp(p + 12, "IHDR", 4) != 0)
			return false;
		*w = (unsigned)p[16] << 24 | (unsigned)p[17] << 16 |
		    image_be16(p + 18);
		*h = (unsigned)p[20] << 24 | (unsigned)p[21] << 16 |
		    image_be16(p + 22);
		return true;
	}
	if (strcmp(media, "image/gif") == 0) {
		if (n < 10)
			return false;
		*w = image_le16(p + 6);
		*h = image_le16(p + 8);
		return true;
	}
	if (strcmp(media, "image/webp") == 0) {
		if (n >= 30 && memcmp(p + 12, "VP8 ", 4) == 0) {
			*w = image_le16(p + 26) & 0x3fff;
			*h = image_le16(p + 28) & 0x3fff;
			return true;
		}
		if (n >= 25 && memcmp(p + 12, "VP8L", 4) == 0) {
			*w = (p[21] | (unsigned)(p[22] & 0x3f) << 8) + 1;
			*h = ((unsigned)p[22] >> 6 | (unsigned)p[23] << 2 |
			    (unsigned)(p[24] & 0x0f) << 10) + 1;
			return true;
		}
		if (n >= 30 && memcmp(p + 12, "VP8X", 4) == 0) {
			*w = (p[24] | (unsigned)p[25] << 8 |
			    (unsigned)p[26] << 16) + 1;
			*h = (p[27] | (unsigned)p[28] << 8 |
			    (unsigned)p[29] << 16) + 1;
			return true;
		}
		return false;
	}
	return image_jpeg_size(p, n, w, h);
}

/* The first start-of-frame marker's size, walking the segments. */
static bool
image_jpeg_size(const unsigned char *p, size_t n, unsigned *w, unsigned *h)
{
	size_t i = 2, len;
	unsigned char m;

	while (i + 4 <= n) {
		if (p[i] != 0xff)
			return false;
		m = p[i + 1];
		if (m == 0xff) {
			i++;
			continue;
		}
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
			i += 2;
			continue;
		}
		len = image_be16(p + i + 2);
		if (len < 2)
			return false;
		if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 &&
		    m != 0xcc) {
			if (i + 9 > n)
				return false;
			*h = image_be16(p + i + 5);
			*w = image_be16(p + i + 7);
			return true;
		}
		i += 2 + len;
	}
	return false;
}

static char *
image_base64(const unsigned char *p, size_t n, size_t *outlen)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
	    "qrstuvwxyz0123456789+/";
	char *out = xmalloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i;
	uint32_t v;

	for (i = 0; i + 2 < n; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = abc[v >> 18];
		*o++ = abc[(v >> 12) & 63];
		*o++ = abc[(v >> 6) & 63];
		*o++ = abc[v & 63];
	}
	if (i < n) {
		v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 :
		    0);
		*o++ = abc[v >> 18];
		*o++ = abc[(v >> 12) & 63];
		*o++ = i + 1 < n ? abc[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return out;
}

/*
 * The whole file (probe: what was read of it already) as an image block
 * on fd 3. The size is checked before the file is read.
 */
int
image_read(int fd, const char *path, const struct stat *sb, const char *media,
    const char *probe, size_t len)
{
	size_t size = (size_t)sb->st_size, b64len;
	unsigned char *data;
	unsigned w = 0, h = 0;
	json_t *line;
	char *b64, *text;
	ssize_t n;
	int rc;

	if ((uint64_t)sb->st_size > (uint64_t)CONTENT_IMAGE_MAX / 4 * 3)
		return out_error("%s is an image of %lld bytes: its base64 "
		    "would be over the API's limit of %u bytes for an image "
		    "(it is not rescaled)", path, (long long)sb->st_size,
		    CONTENT_IMAGE_MAX);
	data = xmalloc(size > len ? size : len);
	memcpy(data, probe, len);
	while (len < size) {
		n = read(fd, data + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(data);
			return out_error("Cannot read %s: %s", path,
			    strerror(errno));
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (!image_size(media, data, len, &w, &h)) {
		free(data);
		return out_error("%s looks like an image (%s) but its header "
		    "does not say its size: it is damaged or cut short", path,
		    media);
	}
	if (w > CONTENT_IMAGE_SIDE_MAX || h > CONTENT_IMAGE_SIDE_MAX) {
		free(data);
		return out_error("%s is an image of %u x %u pixels: over the "
		    "API's limit of %u pixels on a side (it is not rescaled)",
		    path, w, h, CONTENT_IMAGE_SIDE_MAX);
	}
	b64 = image_base64(data, len, &b64len);
	free(data);
	line = json_pack("{s:[{s:s, s:{s:s, s:s, s:s%}}]}", "content", "type",
	    "image", "source", "type", "base64", "media_type", media, "data",
	    b64, b64len);
	free(b64);
	text = json_dumps(line, JSON_COMPACT);
	json_decref(line);
	rc = out_fd3_line(text);
	free(text);
	return rc;
}
