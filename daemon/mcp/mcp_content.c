/*
 * An MCP tools/call result as a tool_result (doc/design.md §7, MCP
 * servers): the API takes text and base64 images, so every other kind of
 * MCP content becomes text that says what it was. Pure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/content.h"
#include "mcp/mcp.h"

static json_t	*mcp_content_block(const json_t *, size_t);
static json_t	*mcp_content_text(json_t *);
static const char *mcp_content_str(const json_t *, const char *,
		    const char *);

static const char *
mcp_content_str(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : dflt;
}

/* A text block holding s (stolen). */
static json_t *
mcp_content_text(json_t *s)
{
	return json_pack("{s:s, s:o}", "type", "text", "text", s);
}

/* One MCP content block as an API block. */
static json_t *
mcp_content_block(const json_t *b, size_t i)
{
	const char *type = mcp_content_str(b, "type", ""), *mime;
	const json_t *r, *data;
	json_t *img;
	char err[256];

	if (strcmp(type, "text") == 0 && json_is_string(json_object_get(b,
	    "text")))
		return mcp_content_text(json_copy(json_object_get(b, "text")));
	if (strcmp(type, "image") == 0 || strcmp(type, "audio") == 0) {
		mime = mcp_content_str(b, "mimeType", "an unknown type");
		data = json_object_get(b, "data");
		if (strcmp(type, "image") == 0 && json_is_string(data)) {
			img = json_pack("[{s:s, s:{s:s, s:s, s:O}}]", "type",
			    "image", "source", "type", "base64", "media_type",
			    mime, "data", data);
			if (img != NULL && content_check(img, err, sizeof err)) {
				json_incref(json_array_get(img, 0));
				r = json_array_get(img, 0);
				json_decref(img);
				return (json_t *)r;
			}
			json_decref(img);
			return mcp_content_text(json_sprintf("[an image (%s, "
			    "%zu bytes of base64) the server returned, not "
			    "shown: %s]", mime, json_string_length(data),
			    err));
		}
		return mcp_content_text(json_sprintf("[%s (%s, %zu bytes of "
		    "base64) the server returned, not shown: a tool result "
		    "holds only text and images]", type, mime,
		    json_string_length(data)));
	}
	if (strcmp(type, "resource_link") == 0)
		return mcp_content_text(json_sprintf("[a resource link: %s <%s>"
		    "%s%s%s%s]", mcp_content_str(b, "name", "(no name)"),
		    mcp_content_str(b, "uri", "(no uri)"),
		    json_object_get(b, "mimeType") != NULL ? ", " : "",
		    mcp_content_str(b, "mimeType", ""),
		    json_object_get(b, "description") != NULL ? ": " : "",
		    mcp_content_str(b, "description", "")));
	if (strcmp(type, "resource") == 0 && json_is_object(r =
	    json_object_get(b, "resource"))) {
		if (json_is_string(json_object_get(r, "text")))
			return mcp_content_text(json_sprintf("[an embedded "
			    "resource <%s>%s%s]\n%s", mcp_content_str(r, "uri",
			    "(no uri)"), json_object_get(r, "mimeType") != NULL ?
			    ", " : "", mcp_content_str(r, "mimeType", ""),
			    mcp_content_str(r, "text", "")));
		return mcp_content_text(json_sprintf("[an embedded resource "
		    "<%s>%s%s: %zu bytes of base64, not shown]",
		    mcp_content_str(r, "uri", "(no uri)"),
		    json_object_get(r, "mimeType") != NULL ? ", " : "",
		    mcp_content_str(r, "mimeType", ""), json_string_length(
		    json_object_get(r, "blob"))));
	}
	return mcp_content_text(json_sprintf("[content[%zu] of type \"%.64s\" "
	    "the server returned, not shown]", i, type));
}

int
mcp_content_result(const json_t *result, json_t **content, bool *is_error,
    json_t **meta, char *err, size_t errlen)
{
	const json_t *c, *b, *sc;
	json_t *mcp;
	char *text;
	size_t i;

	*content = *meta = NULL;
	*is_error = false;
	if (!json_is_object(result)) {
		snprintf(err, errlen, "the result is not an object");
		return -1;
	}
	c = json_object_get(result, "content");
	if (c != NULL && !json_is_array(c)) {
		snprintf(err, errlen, "result.content: must be an array");
		return -1;
	}
	if (json_array_size(c) > CONTENT_BLOCKS_MAX) {
		snprintf(err, errlen, "result.content: %zu blocks, over the "
		    "%d a result may hold", json_array_size(c),
		    CONTENT_BLOCKS_MAX);
		return -1;
	}
	*is_error = json_is_true(json_object_get(result, "isError"));
	*content = json_array();
	json_array_foreach(c, i, b)
		json_array_append_new(*content, mcp_content_block(b, i));
	sc = json_object_get(result, "structuredContent");
	if (sc != NULL) {
		mcp = json_pack("{s:O}", "structuredContent", sc);
		*meta = json_pack("{s:o}", "mcp", mcp);
	}
	/* Structured content alone still tells the model what came back. */
	if (json_array_size(*content) == 0 && sc != NULL) {
		text = json_dumps(sc, JSON_COMPACT);
		json_array_append_new(*content, mcp_content_text(json_string(
		    text != NULL ? text : "")));
		free(text);
	}
	return 0;
}
