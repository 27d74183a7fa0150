/* Content blocks (core/content.h): what passes for a result's content. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/content.h"
#include "util.h"

static char err[512];

static bool
check(const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	bool ok;

	cr_assert_not_null(v, "bad test JSON %s", text);
	err[0] = '\0';
	ok = content_check(v, err, sizeof err);
	json_decref(v);
	return ok;
}

#define IMG(media, data) "{\"type\":\"image\",\"source\":{\"type\":" \
	"\"base64\",\"media_type\":\"" media "\",\"data\":\"" data "\"}}"

Test(content, strings_and_the_apis_blocks_pass)
{
	cr_assert(check("\"plain\""));
	cr_assert(check("[]"));
	cr_assert(check("[{\"type\":\"text\",\"text\":\"a\"}," IMG("image/png",
	    "iVBORw0KGgo=") "," IMG("image/webp", "UklGRg==") "]"), "%s", err);
}

Test(content, each_refusal_names_the_place)
{
	cr_assert(!check("7"));
	cr_assert_str_eq(err, "content: must be a string or an array of "
	    "content blocks");
	cr_assert(!check("[\"x\"]"));
	cr_assert_str_eq(err, "content[0]: must be an object");
	cr_assert(!check("[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
	    "\"document\"}]"));
	cr_assert_str_eq(err, "content[1].type: must be \"text\" or \"image\"");
	cr_assert(!check("[{\"type\":\"text\"}]"));
	cr_assert_str_eq(err, "content[0].text: must be a string");
	cr_assert(!check("[{\"type\":\"text\",\"text\":\"a\",\"cache\":1}]"));
	cr_assert_str_eq(err, "content[0]: unknown member \"cache\" in a text "
	    "block");
	cr_assert(!check("[" IMG("image/tiff", "AAAA") "]"));
	cr_assert_str_eq(err, "content[0].source.media_type: must be "
	    "image/png, image/jpeg, image/gif or image/webp");
	cr_assert(!check("[{\"type\":\"image\",\"source\":{\"type\":\"url\","
	    "\"url\":\"http://x\"}}]"));
	cr_assert(strncmp(err, "content[0].source: must be", 26) == 0, "%s",
	    err);
}

Test(content, data_must_be_padded_base64)
{
	cr_assert(!check("[" IMG("image/png", "abc") "]"));
	cr_assert(strstr(err, "not base64") != NULL, "%s", err);
	cr_assert(!check("[" IMG("image/png", "ab=c") "]"));
	cr_assert(!check("[" IMG("image/png", "a*bc") "]"));
	cr_assert(!check("[" IMG("image/png", "") "]"));
	cr_assert(check("[" IMG("image/png", "ab==") "]"), "%s", err);
}

Test(content, an_image_over_the_apis_limit_is_refused_in_words)
{
	size_t n = CONTENT_IMAGE_MAX + 4;
	char *data = xmalloc(n + 1);
	json_t *v;

	memset(data, 'A', n);
	data[n] = '\0';
	v = json_pack("[{s:s, s:{s:s, s:s, s:s}}]", "type", "image", "source",
	    "type", "base64", "media_type", "image/png", "data", data);
	cr_assert(!content_check(v, err, sizeof err));
	cr_assert(strstr(err, "over the API's limit") != NULL, "%s", err);
	json_decref(v);
	free(data);
}

Test(content, too_many_blocks_are_refused)
{
	json_t *v = json_array();
	unsigned i;

	for (i = 0; i <= CONTENT_BLOCKS_MAX; i++)
		json_array_append_new(v, json_pack("{s:s, s:s}", "type",
		    "text", "text", ""));
	cr_assert(!content_check(v, err, sizeof err));
	json_decref(v);
}

Test(content, sizes_and_sniffing)
{
	json_t *v = json_loads("[{\"type\":\"text\",\"text\":\"abc\"},"
	    IMG("image/png", "iVBORw0KGgo=") "]", 0, NULL);

	cr_assert_eq(content_text_bytes(v), 3);
	cr_assert_eq(content_image_bytes(v), 12);
	json_decref(v);
	cr_assert_str_eq(content_sniff((const unsigned char *)
	    "\x89PNG\r\n\x1a\n....", 12), "image/png");
	cr_assert_str_eq(content_sniff((const unsigned char *)"\xff\xd8\xff\xe0",
	    4), "image/jpeg");
	cr_assert_str_eq(content_sniff((const unsigned char *)"GIF89a..", 8),
	    "image/gif");
	cr_assert_str_eq(content_sniff((const unsigned char *)
	    "RIFF\0\0\0\0WEBPVP8 ", 16), "image/webp");
	cr_assert_null(content_sniff((const unsigned char *)"%PDF-1.7", 8));
}
