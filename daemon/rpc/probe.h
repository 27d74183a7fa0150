/*
 * Compiling a client's concurrencySafe pattern outside the daemon first.
 * The cost rules (core/pattern.h) refuse every shape known to make glibc's
 * regcomp slow, but they are measured, not proven; so a pattern from a
 * client is first compiled in a child process with a deadline and a memory
 * cap, and a ToolDef whose pattern overruns either is refused. The daemon
 * then compiles it itself, known to be quick. At worst the loop waits the
 * deadline, once, for a hostile pattern.
 */
#ifndef STEXEC_PROBE_H
#define STEXEC_PROBE_H

#include <stddef.h>

#define PROBE_DEADLINE_MS 50   /* the default; --pattern-deadline-ms */
#define PROBE_MEMORY_MAX (256 * 1024 * 1024)

void probe_set_deadline(int ms);

/* 0 when pattern compiles in time (or is refused anyway: tooldef says
 * why); -1 with err when it overran the deadline or the memory cap. */
int probe_pattern(const char *pattern, char *err, size_t errlen);

#endif
