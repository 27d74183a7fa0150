/*
 * Client connections carried across a reload (doc/design.md §7, Reload):
 * each live connection's descriptor, what it had received and not yet
 * parsed, what was queued for it and not yet written, the sessions it
 * named, its subscriptions (from the seq each would send next) and its
 * pending drains. The client sees no disconnect.
 */
#ifndef STEXEC_CARRY_H
#define STEXEC_CARRY_H

#include <stddef.h>

/* Before the exec: a record each into the handover (journal_append). */
void carry_save(void);
/* In the next image: a record read back, kept until carry_adopt. */
void carry_restore(const char *data, size_t len);
/* Once the sessions are back: every connection made again. */
void carry_adopt(void);

#endif
