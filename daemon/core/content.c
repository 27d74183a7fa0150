/* Content blocks: checking and measuring them (content.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/content.h"
#include "utf8.h"

static bool	content_fail(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static bool	content_check_block(const json_t *, size_t, char *, size_t);
static bool	content_check_image(const json_t *, size_t, char *, size_t);
static bool	content_base64(const char *, size_t);

static const char *content_media_types[] = { "image/png", "image/jpeg",
    "image/gif", "image/webp" };

static bool
content_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	utf8_vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return false;
}

bool
content_check(const json_t *v, char *err, size_t errlen)
{
	const json_t *block;
	size_t i;

	if (json_is_string(v))
		return true;
	if (!json_is_array(v))
		return content_fail(err, errlen, "content: must be a string or "
		    "an array of content blocks");
	if (json_array_size(v) > CONTENT_BLOCKS_MAX)
		return content_fail(err, errlen, "content: at most %u blocks",
		    CONTENT_BLOCKS_MAX);
	json_array_foreach(v, i, block)
		if (!content_check_block(block, i, err, errlen))
			return false;
	return true;
}

static bool
content_check_block(const json_t *b, size_t i, char *err, size_t errlen)
{
	const char *type, *key;
	const json_t *v;

	if (!json_is_object(b))
		return content_fail(err, errlen, "content[%zu]: must be an "
		    "object", i);
	type = json_string_value(json_object_get(b, "type"));
	if (type != NULL && strcmp(type, "image") == 0)
		return content_check_image(b, i, err, errlen);
	if (type == NULL || strcmp(type, "text") != 0)
		return content_fail(err, errlen, "content[%zu].type: must be "
		    "\"text\" or \"image\"", i);
	if (!json_is_string(json_object_get(b, "text")))
		return content_fail(err, errlen, "content[%zu].text: must be a "
		    "string", i);
	json_object_foreach((json_t *)b, key, v)
		if (strcmp(key, "type") != 0 && strcmp(key, "text") != 0)
			return content_fail(err, errlen, "content[%zu]: unknown "
			    "member \"%s\" in a text block", i, key);
	return true;
}

static bool
content_check_image(const json_t *b, size_t i, char *err, size_t errlen)
{
	const json_t *src = json_object_get(b, "source"), *data, *v;
	const char *media, *key;
	size_t k;

	json_object_foreach((json_t *)b, key, v)
		if (strcmp(key, "type") != 0 && strcmp(key, "source") != 0)
			return content_fail(err, errlen, "content[%zu]: unknown "
			    "member \"%s\" in an image block", i, key);
	if (!json_is_object(src) || !json_is_string(json_object_get(src,
	    "type")) || strcmp(json_string_value(json_object_get(src, "type")),
	    "base64") != 0)
		return content_fail(err, errlen, "content[%zu].source: must be "
		    "{\"type\": \"base64\", \"media_type\", \"data\"}", i);
	media = json_string_value(json_object_get(src, "media_type"));
	for (k = 0; media != NULL && k < sizeof content_media_types /
	    sizeof *content_media_types; k++)
		if (strcmp(media, content_media_types[k]) == 0)
			break;
	if (media == NULL || k == sizeof content_media_types /
	    sizeof *content_media_types)
		return content_fail(err, errlen, "content[%zu].source."
		    "media_type: must be image/png, image/jpeg, image/gif or "
		    "image/webp", i);
	data = json_object_get(src, "data");
	if (!json_is_string(data))
		return content_fail(err, errlen, "content[%zu].source.data: "
		    "must be a base64 string", i);
	if (json_string_length(data) > CONTENT_IMAGE_MAX)
		return content_fail(err, errlen, "content[%zu].source.data: "
		    "the image is %zu bytes of base64, over the API's limit of "
		    "%u", i, json_string_length(data), CONTENT_IMAGE_MAX);
	if (!content_base64(json_string_value(data), json_string_length(data)))
		return content_fail(err, errlen, "content[%zu].source.data: "
		    "not base64 (A-Z a-z 0-9 + /, padded with = to a multiple "
		    "of 4)", i);
	json_object_foreach((json_t *)src, key, v)
		if (strcmp(key, "type") != 0 && strcmp(key, "media_type") != 0 &&
		    strcmp(key, "data") != 0)
			return content_fail(err, errlen, "content[%zu].source: "
			    "unknown member \"%s\"", i, key);
	return true;
}

/* Standard base64 with its padding, as the API takes it. */
static bool
content_base64(const char *s, size_t n)
{
	size_t i, pad = 0;

	if (n == 0 || n % 4 != 0)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '=' && i >= n - 2) {
			pad++;
			continue;
		}
		if (pad > 0 || !((c >= 'A' && c <= 'Z') || (c >= 'a' &&
		    c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
		    c == '/'))
			return false;
	}
	return true;
}

size_t
content_text_bytes(const json_t *v)
{
	const json_t *b;
	size_t i, n = 0;

	if (json_is_string(v))
		return json_string_length(v);
	json_array_foreach(v, i, b)
		n += json_string_length(json_object_get(b, "text"));
	return n;
}

size_t
content_image_bytes(const json_t *v)
{
	const json_t *b;
	size_t i, n = 0;

	json_array_foreach(v, i, b)
		n += json_string_length(json_object_get(json_object_get(b,
		    "source"), "data"));
	return n;
}

const char *
content_sniff(const unsigned char *p, size_t n)
{
	if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && memcmp(p, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (n >= 6 && (memcmp(p, "GIF87a", 6) == 0 ||
	    memcmp(p, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 12 && memcmp(p, "RIFF", 4) == 0 &&
	    memcmp(p + 8, "WEBP", 4) == 0)
		return "image/webp";
	return NULL;
}
