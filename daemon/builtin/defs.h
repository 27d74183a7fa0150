/*
 * The built-in default tool set of DESIGN.md §4, served when no --tools-dir
 * is given: bash runs /bin/sh, the others run stexec-tool.
 */
#ifndef STEXEC_BUILTIN_DEFS_H
#define STEXEC_BUILTIN_DEFS_H

/*
 * Stands for the path of stexec-tool in a command; the daemon replaces the
 * command element equal to it (parse first, then replace the string: a path
 * may hold characters that JSON text would need escaped).
 */
#define BUILTIN_DEFS_PLACEHOLDER "@STEXEC_TOOL@"

/* ToolDef JSON texts, NULL-terminated. */
extern const char *const builtin_defs[];

#endif
