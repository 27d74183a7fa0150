/*
 * Sandboxed tools' private TMPDIRs: OUTDIR/tmp.INSTANCE/N, one for each
 * tool, removed when it ends (with the whole tmp.INSTANCE at shutdown; a
 * crashed daemon's is found by that prefix). Making a directory costs
 * ~70 us on an ordinary ext4 disk, so a worker thread keeps a few made
 * ahead, off the event loop; none is ever reused.
 */
#ifndef STEXEC_TMPDIR_H
#define STEXEC_TMPDIR_H

#include <stdbool.h>
#include <stdint.h>

void tmpdir_init(const char *outdir, const char *instance);
/*
 * A reload (doc/design.md §7, Reload): the names used so far (the ones
 * made ahead are removed), and in the next image, going on after them:
 * the tools handed over keep theirs.
 */
uint64_t tmpdir_handover(void);
void tmpdir_resume(uint64_t next);
/* Stop the worker and remove tmp.INSTANCE with all in it. */
void tmpdir_shutdown(void);
/*
 * A directory for one tool (malloc'd path): one made ahead (*made true),
 * else a fresh name to mkdir (*made false).
 */
char *tmpdir_take(bool *made);

#endif
