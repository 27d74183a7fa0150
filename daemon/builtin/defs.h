/*
 * The built-in default tool set of doc/design.md §4, served when no --tools-dir
 * is given: bash runs bash (/bin/sh where there is none), the others run
 * stexec-tool.
 */
#ifndef STEXEC_BUILTIN_DEFS_H
#define STEXEC_BUILTIN_DEFS_H

/*
 * Stands for the path of stexec-tool in a command; the daemon replaces the
 * command element equal to it (parse first, then replace the string: a path
 * may hold characters that JSON text would need escaped).
 */
#define BUILTIN_DEFS_PLACEHOLDER "@STEXEC_TOOL@"
/* Stands for the shell bash runs: builtin_defs_shell(). */
#define BUILTIN_DEFS_SHELL "@STEXEC_SHELL@"

#include <jansson.h>
#include <stddef.h>

/* ToolDef JSON texts, NULL-terminated. */
extern const char *const builtin_defs[];

/* /bin/bash when it can be run, else /bin/sh. */
const char	*builtin_defs_shell(void);
/* Def i parsed, its placeholders replaced; NULL with err on bad JSON. */
json_t		*builtin_defs_load(size_t, const char *, char *, size_t);

#endif
