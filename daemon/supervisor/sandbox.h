/*
 * The sandbox profiles (doc/design.md §7, Sandbox). A sandboxed tool, and
 * everything it starts, may read and execute what the daemon can and
 * write its private TMPDIR; workspace-write also writes the session's cwd
 * and the writable roots, with their existing .git/hooks and .git/config
 * kept read-only. Neither may signal, trace or inspect a process outside
 * the tool, open a socket (workspace-write with the network: AF_INET and
 * AF_INET6 only), or change anything else.
 *
 * Layers, each enforced by the kernel in the child just before execve
 * (spawn.h): Landlock for files, and from ABI 6 on for signals and
 * abstract Unix sockets, scoped to the tool; seccomp for what Landlock
 * cannot say (seccomp.h), signals included before ABI 6 (the tool may then
 * signal only its own process group); for workspace-write a private mount namespace in
 * which everything is read-only but the writable areas, which keeps the
 * metadata of every other file, and .git's hooks and config, unchanged;
 * and for a root tool, no capabilities. A profile that one of these is
 * missing for is refused, never run weaker.
 */
#ifndef STEXEC_SANDBOX_H
#define STEXEC_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct spawn_req;

enum sandbox_profile {
	SANDBOX_NONE,
	SANDBOX_WORKSPACE_WRITE,
	SANDBOX_READ_ONLY,
};

/* What a tool's profile allows besides its TMPDIR. */
#define SANDBOX_MAX_ROOTS 32 /* a ToolDef's 16 and its session's */

struct sandbox_spec {
	enum sandbox_profile profile;
	bool network;               /* workspace-write: AF_INET, AF_INET6 */
	/*
	 * Network rules: AF_INET and AF_INET6 in this network namespace
	 * (netns.h), where only the daemon's proxy listens; -1: none could
	 * be made, and the tool is refused.
	 */
	bool net_rules;
	int netns;
	const char *const *roots;   /* writable roots, absolute */
	size_t nroots;
};

/* Probe the kernel once, at start, and build what every spawn shares. */
void sandbox_init(void);
void sandbox_shutdown(void);
/* Whether this kernel can enforce the profile; else sandbox_error says. */
bool sandbox_can(enum sandbox_profile);
const char *sandbox_error(enum sandbox_profile);
/* What enforces them, for initialize: Landlock's ABI (0: none) ... */
int sandbox_abi(void);
bool sandbox_seccomp(void);
bool sandbox_mount_ns(void);

/*
 * The Landlock ruleset of a TMPDIR, all of read-only's and the start of
 * workspace-write's, made ahead of the tools that will have it (tmpdir.h);
 * -1 with errno. Safe in any thread.
 */
int sandbox_ruleset(const char *tmpdir);

/*
 * Fill req for one tool: its Landlock ruleset (ruleset, the TMPDIR's from
 * sandbox_ruleset, if it is not -1: lent, never closed here; a
 * workspace-write tool's areas are added to it, so it must serve no other
 * tool after that one), its seccomp program and, for workspace-write, the
 * mounts of its namespace (cwd: the tool's working directory, writable,
 * where it starts). NULL, or why it cannot run (malloc'd).
 * sandbox_release frees what req was given, whether the spawn happened or
 * not.
 */
struct sandbox_prep;
char *sandbox_prepare(const struct sandbox_spec *, const char *tmpdir,
    int ruleset, const char *cwd, uid_t, struct spawn_req *,
    struct sandbox_prep **);
void sandbox_release(struct sandbox_prep *);

#endif
