/*
 * Sandboxed tools' private TMPDIRs: OUTDIR/tmp.INSTANCE/N, one for each
 * tool at a time (the whole tmp.INSTANCE is removed at shutdown; a
 * crashed daemon's is found by that prefix). Making a directory costs
 * ~70 us on an ordinary ext4 disk and removing one ~30 us, so a worker
 * thread keeps a few made ahead, off the event loop, and takes back each
 * one a tool leaves: reused when the tool left it empty (then it is owned
 * by the daemon, 0700, without extended attributes, as new), else removed.
 * With each it keeps its Landlock ruleset (sandbox_ruleset), which then
 * costs a spawn nothing: a dozen system calls off the loop, made once for
 * the directory's life (or the next tool's, after a workspace-write one).
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
 * else a fresh name to mkdir (*made false); *ruleset is its read-only
 * ruleset, or -1. Both are the tool's until it gives them back.
 */
char *tmpdir_take(bool *made, int *ruleset);
/*
 * A tool is done with its directory (made), its ruleset and the mount
 * namespace it had (or -1 each): all are taken (and path freed). The
 * namespace is let go first, off the loop.
 */
void tmpdir_give(char *path, int ruleset, int mntns);

#endif
