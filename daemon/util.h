/* Allocation that cannot fail (out of memory is fatal) and small helpers. */
#ifndef STEXEC_UTIL_H
#define STEXEC_UTIL_H

#include <stdarg.h>
#include <stddef.h>

#include "buf.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
void *xreallocarray(void *, size_t, size_t);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
int xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));

/* Broken invariant or out of memory: log and abort. */
void fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));


#endif
