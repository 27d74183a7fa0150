/*
 * What a reload (doc/design.md §7, Reload) carries across execve besides
 * the sessions' records: descriptors kept open for the next image, and raw
 * bytes beside a record's JSON. A record of the handover is its JSON text,
 * a NUL, then its bytes; the JSON names each piece by [offset, length].
 */
#ifndef STEXEC_HANDOVER_H
#define STEXEC_HANDOVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/*
 * The format of the handover. A new image is asked first whether it reads
 * this one (stexecd --check-handover N); a reload into one that does not
 * is refused.
 */
#define HANDOVER_VERSION 6

/* A record being written: its JSON and its bytes. */
struct handover_rec {
	json_t *json;
	struct buf bytes;
};

/* A record read back: bytes point into the loaded payload. */
struct handover_in {
	json_t *json;
	const char *bytes;
	size_t len;
};

/* Keep fd open across execve (its close-on-exec flag cleared). */
void handover_keep_fd(int fd);
/* The kept descriptors as "3,7,9" (static; "" when none). */
const char *handover_kept(void);
/*
 * The next image: every descriptor above 2 that is not in list (and not
 * one of extra, -1 ended) is closed; those in it are close-on-exec again.
 */
void handover_close_others(const char *list, const int *extra);
/*
 * Whether fd was named in the list the image was given and not claimed
 * yet; true claims it. A corrupt record naming a descriptor twice, or one
 * another record owns, gets false: one owner each.
 */
bool handover_claim_fd(int fd);
/* The descriptor a record's value names, claimed (above); else -1. */
int handover_take_fd(const json_t *);
/*
 * After the records: close what the image before named and no record
 * claimed (a corrupt or dropped record's), so none leaks; their count.
 */
unsigned handover_close_unclaimed(void);

/* bytes under key in obj, an object of the record's JSON. */
void handover_put(struct handover_rec *, json_t *obj, const char *key,
    const void *, size_t);
/* Encode the record (JSON, NUL, bytes) into out; frees the record. */
void handover_encode(struct handover_rec *, struct buf *out);
/* Decode a payload; false when it is not a record. */
bool handover_decode(const char *data, size_t len, struct handover_in *);
/* The bytes under key in obj (len 0 and "" when absent). */
const char *handover_get(const struct handover_in *, const json_t *obj,
    const char *key, size_t *len);

#endif
