/*
 * A process's captured output (doc/design.md §4, S17): the combined content is
 * stdout, then stderr, with a newline between them when both are non-empty
 * and stdout does not end with one. It is kept whole in memory while it fits
 * in max bytes; beyond, only a head (the first max/2 bytes) and a tail (the
 * last max - max/2 bytes) stay in memory and the whole content goes to a file.
 * Memory stays bounded by about 2 * max whatever the process writes.
 */
#ifndef STEXEC_CAPTURE_H
#define STEXEC_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <sys/types.h>

#include "output.h"

struct capture;

/*
 * The output file, when one is needed, is DIR/NAME-PID-ID.out (mode 0600);
 * name is cut to a safe set of characters.
 */
struct capture *capture_create(size_t max, const char *dir, const char *name,
    long pid, uint64_t id);
/*
 * Write no file for a combined content beyond max bytes (0: no limit): the
 * head and tail stay right, and the error says why.
 */
void capture_limit_file(struct capture *, uint64_t max);
/* The output file belongs to this user (a tool run as another uid). */
void capture_set_owner(struct capture *, uid_t, gid_t);
/* Add bytes the process wrote to fd 1 or 2. Writes to disk as it goes. */
void capture_add(struct capture *, int fd, const void *, size_t);
/*
 * Once the process is done: assemble the file and the head and tail. Does a
 * bounded amount of disk work per call: returns 1 while more remains (call
 * again from the loop), 0 when the output is ready.
 */
int capture_finish(struct capture *);
/* The result, valid until capture_free. */
void capture_output(struct capture *, struct output *);
/* Why the whole content could not be saved, or NULL. */
const char *capture_error(struct capture *);
/*
 * A reload (doc/design.md §7, Reload): a capture still adding, its state
 * into obj and its bytes into the record, its files kept open across
 * execve; and made again from that in the next image.
 */
struct handover_rec;
struct handover_in;
void capture_save(struct capture *, struct handover_rec *, json_t *obj);
struct capture *capture_load(const struct handover_in *, const json_t *obj);
/* Free it; the output file is removed unless keep_file. */
void capture_free(struct capture *, bool keep_file);

#endif
