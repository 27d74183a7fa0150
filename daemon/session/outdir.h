/*
 * The output directory's whole-output files: each belongs to the session
 * whose tool wrote it (a set), is removed a grace after that session
 * closes, and all of them together stay within a byte budget, the oldest
 * removed first. What was removed, and why, is remembered while the session
 * lives, so a client can ask.
 */
#ifndef STEXEC_OUTDIR_H
#define STEXEC_OUTDIR_H

#include <jansson.h>
#include <stdint.h>

struct event_base;
struct outdir_set;

/*
 * budget: bytes of files kept at once (0: no budget). Output files found in
 * dir (left by an earlier daemon) are counted first, as the oldest.
 */
void outdir_init(struct event_base *, const char *dir, uint64_t budget);
/* Remove every file that belongs to a set, free everything. */
void outdir_shutdown(void);
/* The largest file worth writing (the budget), 0: no limit. */
uint64_t outdir_file_max(void);
/* Bytes of the files kept now (what counts toward the budget). */
uint64_t outdir_bytes(void);

struct outdir_set *outdir_set_new(void);
/*
 * A finished file now belongs to the set; the oldest files of any set are
 * removed while the total is over the budget (never this one).
 */
void outdir_add(struct outdir_set *, const char *path, uint64_t bytes,
    const char *tool_use_id);
/* The owner closed: its files go after grace_ms, and the set with them. */
void outdir_set_release(struct outdir_set *, unsigned grace_ms);
/* outputFiles: [{path, toolUseId, bytes, removed}] in the order written. */
json_t *outdir_set_json(const struct outdir_set *);

#endif
