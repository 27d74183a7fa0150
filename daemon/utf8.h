/* UTF-8 repair: JSON strings must be valid UTF-8, tool output need not be. */
#ifndef STEXEC_UTF8_H
#define STEXEC_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* Is the whole of s[0..len) valid UTF-8? */
bool utf8_valid(const char *s, size_t len);
/* Append s to b with every invalid sequence replaced by U+FFFD. */
void utf8_repair(struct buf *b, const char *s, size_t len);

#endif
