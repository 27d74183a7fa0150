/*
 * A tool's cgroups (doc/design.md §7, Limits): one cgroup v2 group per tool under the
 * daemon's subtree (cgroup.h), which the tool is born into (spawn.h), that
 * cgroup.kill empties at once, setsid escapees included, and whose
 * cgroup.events says when all of it is gone; and its resource limits, each
 * enforced by the best means this host has:
 *
 *   memory     v2 memory controller > v1 memory hierarchy > RLIMIT_AS
 *   processes  v2 pids controller   > v1 pids hierarchy   > RLIMIT_NPROC
 *   cpu        v2 cpu controller    > v1 cpu hierarchy    > not enforced
 *
 * (v1: hosts with the hybrid layout, whose controllers are all on v1.)
 * RLIMIT_AS bounds each process's address space, not the tool's memory;
 * RLIMIT_NPROC counts every process of the uid and binds no root.
 */
#ifndef STEXEC_TOOLCG_H
#define STEXEC_TOOLCG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct spawn_req;
struct toolcg;

struct toolcg_limits {
	uint64_t memory_bytes;  /* 0: none */
	uint64_t max_processes;
	uint64_t cpu_percent;   /* of one CPU */
};

enum toolcg_hit {
	TOOLCG_HIT_NONE,
	TOOLCG_HIT_MEMORY,
	TOOLCG_HIT_PROCESSES,
};

/*
 * Find what this host offers, after the daemon's v2 subtree is set up (or
 * known to be absent). v1 groups go under stexecd-PID in each hierarchy.
 * meter_all: where v1 holds the memory controller, every tool gets a
 * memory group there to measure it, not only those with a memory limit.
 */
void toolcg_init(bool meter_all);
/* Remove the v1 groups (their processes must be dead). */
void toolcg_shutdown(void);
/* Remove the v1 groups a dead daemon of that pid left (empty by now). */
void toolcg_remove_stale(long pid);
/* initialize's capabilities: {"supervision", "limits": {name: means}}. */
json_t *toolcg_capabilities(void);
/* A tool gets a v2 group of its own: supervision by cgroup. */
bool toolcg_supervises(void);

/*
 * The groups of one tool, with its limits written; fills req's cgroup_fd,
 * join fds and rlimits. NULL with *msg when a limit cannot be set up. A
 * tool without limits on a host without a v2 subtree needs none: NULL,
 * *msg NULL. launch: the child will be launched (spawn_launch), which joins
 * no group; a group that only measures is then entered by toolcg_started.
 */
struct toolcg *toolcg_new(uint64_t token, const struct toolcg_limits *,
    bool launch, struct spawn_req *, char **msg);
/* The child has started (or failed): close what only it needed. */
void toolcg_spawned(struct toolcg *, struct spawn_req *);
/* The child is pid: into the groups it did not join itself. */
void toolcg_started(struct toolcg *, pid_t);
/* Whether some limit's events must be watched while it runs. */
bool toolcg_watched(const struct toolcg *);
/* Which limit it went over, if any (events counted since it started). */
enum toolcg_hit toolcg_hit(const struct toolcg *, uint64_t *limit);
/* cgroup.kill its v2 group; false when it has none. */
bool toolcg_kill(struct toolcg *);
/* 1 while a process is in its v2 group, 0 once empty, -1 unknown. */
int toolcg_populated(struct toolcg *);
/* Peak memory in bytes and CPU time, each where measured (has_*). */
void toolcg_usage(struct toolcg *, bool *has_peak, uint64_t *peak,
    bool *has_cpu, uint64_t *cpu_ms);
/*
 * A reload (doc/design.md §7, Reload): a running tool's groups into obj,
 * its group's descriptor kept across execve; made again from obj in the
 * next image. toolcg_handover first drops the spare groups, whose
 * descriptors do not cross.
 */
void toolcg_handover(void);
json_t *toolcg_save(struct toolcg *);
struct toolcg *toolcg_load(const json_t *);
/*
 * Remove its groups (they must be empty; an empty v2 group without limits
 * is kept for a later tool) and free it. NULL is a no-op.
 */
void toolcg_free(struct toolcg *);

#endif
