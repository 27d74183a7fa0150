/*
 * A private copy of bytes that are read once, front to back: what has been
 * read goes back to the kernel as reading goes on, so a long text being
 * encoded is not held whole beside its encoding.
 */
#ifndef STEXEC_READONCE_H
#define STEXEC_READONCE_H

#include <stddef.h>

struct readonce;

/* A copy of data[0, len); out of memory is fatal. */
struct readonce *readonce_new(const char *data, size_t len);
/* The copy: valid from the first byte not yet released to its end. */
const char	*readonce_data(const struct readonce *);
size_t		 readonce_len(const struct readonce *);
/* Bytes before upto will not be read again: their whole pages are freed. */
void		 readonce_release(struct readonce *, size_t upto);
void		 readonce_free(struct readonce *);

#endif
