/*
 * A concurrencySafe rule pattern (doc/design.md §4): a POSIX ERE whose cost the
 * event loop can afford. Compiling refuses back-references (their matching
 * is exponential), repetitions of what can match the empty string (their
 * compiling is), patterns longer than PATTERN_MAX_LEN bytes and patterns
 * whose counted repetitions expand past PATTERN_MAX_SIZE nodes or that can
 * pass more than PATTERN_MAX_ANCHORS anchors (^, \b, () ...) one after the
 * other without matching a byte (compiling them costs a high power of it).
 * Matching is one pass over the subject, and a subject too long for the
 * pattern's size is not matched at all: the rule cannot be evaluated.
 * Pure: no I/O.
 */
#ifndef STEXEC_PATTERN_H
#define STEXEC_PATTERN_H

#include <stddef.h>

#define PATTERN_MAX_LEN 1024
#define PATTERN_MAX_SIZE 256
#define PATTERN_MAX_ANCHORS 16
/* Subject bytes x size x size allowed in one match (see pattern_match). */
#define PATTERN_MATCH_BUDGET (1UL << 22)
#define PATTERN_SUBJECT_MAX (64 * 1024)

struct pattern;

/* NULL with a reason in err (e.g. "back-references (\1) are not allowed"). */
struct pattern *pattern_compile(const char *, char *err, size_t errlen);
void pattern_free(struct pattern *);
/* The expanded size the cost bounds count. */
size_t pattern_size(const struct pattern *);
/* The longest subject pattern_match evaluates. */
size_t pattern_subject_max(const struct pattern *);
/*
 * 1 when the subject (no NUL) matches, 0 when not, -1 when it is longer than
 * pattern_subject_max and so cannot be evaluated.
 */
int pattern_match(struct pattern *, const char *, size_t len);

#endif
