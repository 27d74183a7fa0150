/*
 * Compiling a client's concurrencySafe patterns outside the daemon first.
 * The cost rules (core/pattern.h) refuse every shape known to make glibc's
 * regcomp slow, but they are measured, not proven; so the patterns of one
 * request are first compiled, all in one child process, within one
 * deadline and a memory cap, and the ToolDef whose pattern overruns either
 * is refused. The daemon then compiles them itself, known to be quick. One
 * fork per request, and at worst the loop waits the deadline once: many
 * tools do not multiply either.
 */
#ifndef STEXEC_PROBE_H
#define STEXEC_PROBE_H

#include <stddef.h>

#define PROBE_DEADLINE_MS 50   /* the default; --pattern-deadline-ms */
#define PROBE_MEMORY_MAX (256 * 1024 * 1024)

void probe_set_deadline(int ms);

/*
 * 0 when all n patterns compile in time (or are refused anyway: tooldef
 * says why); -1 with *bad the index of the one that overran the deadline or
 * the memory cap, and err saying which.
 */
int probe_patterns(const char *const *patterns, size_t n, size_t *bad,
    char *err, size_t errlen);

#endif
