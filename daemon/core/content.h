/*
 * Content blocks (doc/design.md §7, Content blocks): a tool_result's
 * content is a string, or an array of the Messages API's blocks, text and
 * base64 images. Checking what a client, a tool's fd 3 or an MCP server
 * hands us, and measuring it against a result's bounds. Pure: no I/O.
 */
#ifndef STEXEC_CONTENT_H
#define STEXEC_CONTENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The API's limits: base64 bytes of one image, blocks of one result. */
#define CONTENT_IMAGE_MAX (5U * 1024 * 1024)
#define CONTENT_IMAGE_SIDE_MAX 8000
#define CONTENT_BLOCKS_MAX 1000

/*
 * Whether v is content: a string, or an array of at most
 * CONTENT_BLOCKS_MAX blocks, {"type":"text","text":S} or {"type":"image",
 * "source":{"type":"base64","media_type":M,"data":B}} with M one of
 * image/png, image/jpeg, image/gif, image/webp and B base64 of at most
 * CONTENT_IMAGE_MAX bytes. Other members of a block are refused too: what
 * we pass on must be what the API takes. False with err naming the place
 * ("content[2].source.media_type: ...").
 */
bool content_check(const json_t *v, char *err, size_t errlen);
/* The text bytes of checked content (a string's, or its text blocks'). */
size_t content_text_bytes(const json_t *);
/* The base64 bytes of its images. */
size_t content_image_bytes(const json_t *);
/* The media type of an image's first bytes (magic numbers), or NULL. */
const char *content_sniff(const unsigned char *, size_t);

#endif
