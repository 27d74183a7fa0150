/*
 * The daemon's cgroup v2 subtree, where toolcg.h hangs the per-tool
 * cgroups with their limits. PARENT/stexecd-PID, where PARENT is the
 * cgroup the daemon was started in, holds the daemon itself in its "daemon"
 * leaf, so every tool and every descendant, setsid escapees included, is
 * inside it and dies with one write to its cgroup.kill. Only where the v2
 * hierarchy is mounted, PARENT is writable and the kernel has cgroup.kill.
 */
#ifndef STEXEC_CGROUP_H
#define STEXEC_CGROUP_H

#include <stddef.h>

/* Create the subtree (a stale one of this pid is removed). -1 with err. */
int cgroup_create(char *err, size_t errlen);
/*
 * A reload: the subtree this process is in already, with its tools (the
 * image before made it), and the parent it was made under.
 */
void cgroup_adopt(const char *dir, const char *parent);
const char *cgroup_parent_path(void);
/* Move this process into the subtree's daemon leaf. -1 with err. */
int cgroup_enter(char *err, size_t errlen);
/* Move this process back to PARENT. -1 with err. */
int cgroup_leave(char *err, size_t errlen);
/*
 * Kill everything in the subtree, wait (up to 10 s) until it is empty and
 * remove it. -1 if it could not be removed.
 */
int cgroup_destroy(void);
/*
 * The subtree an earlier daemon left at dir (it died with its sentinel):
 * kill what is in it, wait (up to 2 s) until it is empty, remove it.
 */
int cgroup_destroy_stale(const char *dir);
/* Forget the subtree without touching it (e.g. in a process that left). */
void cgroup_forget(void);
/* The subtree's directory, or NULL when there is none. */
const char *cgroup_path(void);

#endif
