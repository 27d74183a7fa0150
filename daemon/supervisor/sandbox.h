/*
 * The read-only sandbox (doc/design.md §7, Sandbox): a tool that runs "read-only" may read
 * and execute everything the daemon can, but write only its own private
 * directory (its TMPDIR) and the usual device files. Enforced by Landlock:
 * the parent builds the ruleset, the child restricts itself with it just
 * before execve (spawn.h), and nothing it starts can lift it.
 */
#ifndef STEXEC_SANDBOX_H
#define STEXEC_SANDBOX_H

/* Probe the kernel once, at start: the Landlock ABI version, or 0. */
int sandbox_init(void);
void sandbox_shutdown(void);
/* The ABI sandbox_init found; 0: read-only tools cannot run. */
int sandbox_abi(void);
/* Why there is no sandbox ("this kernel has no Landlock..."), or NULL. */
const char *sandbox_error(void);
/*
 * A ruleset fd for one read-only tool whose private directory is tmpdir,
 * to pass to the child; -1 with errno.
 */
int sandbox_ruleset(const char *tmpdir);

#endif
