/* Allocation that cannot fail (out of memory is fatal) and small helpers. */
#ifndef STEXEC_UTIL_H
#define STEXEC_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
void *xreallocarray(void *, size_t, size_t);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
int xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));

/*
 * mkdir -p: dir and its missing parents, created with mode. -1 with errno
 * set when one cannot be made or dir is not a directory (ENOTDIR).
 */
int util_mkdirs(const char *dir, mode_t mode);
/* rm -rf dir, symlinks not followed. -1 with errno if something stays. */
int util_rmtree(const char *dir);
/* Wall-clock time in ms since the epoch (what survives a restart). */
int64_t util_wall_ms(void);

/* Broken invariant or out of memory: log and abort. */
void fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));


#endif
