/*
 * The floors beside the latency and throughput figures (README,
 * Performance): what no daemon and no sandbox can go below on this machine,
 * measured in the same runs as the figures they bound.
 *
 * floor_daemon: the least a daemon can do for a tool call: a child process
 * that reads request lines from a Unix socket and for each spawns /bin/cat
 * with posix_spawn and two pipes (FLOOR_INFLIGHT at once, the rest wait),
 * writes it the input, waits in epoll for its output's end and in a
 * signalfd for its exit, and writes back two lines (the reply at the
 * spawn, the result at the end). No JSON, no journal, no cgroup, no stderr
 * or progress pipe: its cost over the bare spawn is what the Unix socket's
 * round trips and the waits cost here.
 *
 * floor_contract: the least a daemon that keeps the contract can do for
 * one tool call at a time: a child process that reads addTool lines from a
 * Unix socket, parses each (jansson), spawns the command as §4 of the
 * contract says (the input on stdin, then EOF; stdout, stderr and a
 * progress pipe on fd 3 read to their ends; the session's cwd; the
 * environment plus STEXEC_SESSION_ID, STEXEC_TOOL_USE_ID and
 * STEXEC_PROGRESS_FD), reaps it, and writes the lines the daemon writes,
 * byte for byte the same shape: tool_status, state and the reply at the
 * spawn; tool_status, tool_result and state at the end (S15, §3). No
 * journal, no cgroup, no schema, no limits, no sandbox: what the daemon
 * adds over it is its own work beyond the contract.
 *
 * floor_spawn: /bin/cat started by the daemon's own spawn (spawn.h), bare or
 * in a sandbox profile's confinement (sandbox.h: its Landlock ruleset, made
 * ahead as the daemon's TMPDIR worker makes it; its seccomp program; for
 * workspace-write its mount namespace, held past the exit as the daemon
 * holds it; as root, the end of every capability), outside the daemon: the
 * difference is what the kernel charges for the confinement itself.
 */
#ifndef STEXEC_BENCH_FLOOR_H
#define STEXEC_BENCH_FLOOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "supervisor/sandbox.h"

#define FLOOR_INFLIGHT 10

struct floor_daemon {
	int fd;       /* our end of the socket */
	pid_t pid;
};

void	floor_daemon_start(struct floor_daemon *, const char *input);
/* One call, from writing the request to reading the result, in us. */
double	floor_daemon_one(struct floor_daemon *);
/* calls written at once, until every result: calls per second. */
double	floor_daemon_run(struct floor_daemon *, int calls);
void	floor_daemon_stop(struct floor_daemon *);

/* Its pid; *fd: our end of its socket, which takes addTool lines. */
pid_t	floor_contract_start(const char *cmd, const char *sid, int *fd);

void	floor_spawn_init(void);
/* Whether this kernel can confine a tool to the profile. */
bool	floor_spawn_can(enum sandbox_profile);
/* One /bin/cat from spawn to its exit, input in and out, in us. */
double	floor_spawn_one(enum sandbox_profile, const char *input);
void	floor_spawn_done(void);

#endif
