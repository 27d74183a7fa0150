/*
 * A fast path in front of jansson's parser for the lines clients send.
 *
 * jansson reads a line a byte at a time through its stream and string
 * buffer: about 190 instructions a byte, the largest single cost of an
 * addTool in the daemon. jsonload parses the common shape of JSON in one
 * pass over the bytes and builds the same jansson values. It declines
 * (NULL) anything it does not take on: invalid text, surrogate escapes,
 * numbers out of its range, deep nesting. The caller then parses with
 * json_loadb as before, so a declined line gets jansson's value or
 * jansson's error, and the two paths cannot disagree on what a line means.
 * Its cost on a declined line is one more linear pass.
 *
 * What it returns equals json_loadb(text, len, JSON_DECODE_ANY |
 * JSON_ALLOW_NUL) for the same bytes: the same types, members in the same
 * order, duplicate keys taken as jansson takes them (the last value, at
 * the first one's place), strings checked as UTF-8 by jansson itself.
 */
#ifndef STEXEC_JSONLOAD_H
#define STEXEC_JSONLOAD_H

#include <jansson.h>
#include <stddef.h>

json_t *jsonload(const char *text, size_t len);

#endif
