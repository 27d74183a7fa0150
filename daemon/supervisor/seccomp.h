/*
 * The system-call filter of the sandbox profiles (doc/design.md §7,
 * Sandbox): what Landlock cannot say. Every profile refuses sockets but
 * AF_INET/AF_INET6 where the network is allowed (no Unix socket, so no way
 * to the daemon's own), io_uring (which would bypass this filter), System V
 * and POSIX message IPC, keys, bpf, userfaultfd, perf events, mounts and
 * namespaces, and TIOCSTI; read-only also refuses every change of file
 * metadata (mode, owner, times, extended attributes, inode flags), which
 * Landlock does not cover. Where Landlock cannot scope signals (ABI < 6)
 * the SIGNALS variants also refuse every signal but kill(0, ...), the
 * tool's own process group. A refusal is EPERM (clone3: ENOSYS, so that
 * libc falls back to clone, whose flags can be checked), never a kill.
 * Built once at start; the programs are shared by every spawn.
 */
#ifndef STEXEC_SECCOMP_H
#define STEXEC_SECCOMP_H

#include <stdbool.h>

struct sock_fprog;

enum seccomp_kind {
	SECCOMP_READ_ONLY,
	SECCOMP_WORKSPACE,
	SECCOMP_WORKSPACE_NET,
	SECCOMP_READ_ONLY_NET,  /* read-only with an allow-list */
	SECCOMP_NPROFILES,      /* at most SECCOMP_SIGNALS */
};
/* Or'ed into a kind: signals are kept in by the filter, not Landlock. */
#define SECCOMP_SIGNALS 4
#define SECCOMP_NKINDS (SECCOMP_SIGNALS * 2)

/* Build the programs; false when this architecture has none. */
bool seccomp_init(void);
/* The program of a kind, or NULL before seccomp_init or without one. */
const struct sock_fprog *seccomp_program(int kind);

#endif
