/* RFC 3492 Punycode encoding, for IDN labels (core/netpolicy.c). Pure. */
#ifndef STEXEC_PUNYCODE_H
#define STEXEC_PUNYCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Encode n code points into out (NUL-terminated, without the "xn--"
 * prefix). False when the text would not fit in outlen bytes or a delta
 * would overflow.
 */
bool punycode_encode(const uint32_t *cp, size_t n, char *out, size_t outlen);

#endif
