/* The sandbox profiles: what the kernel offers, and one tool's share. */
#include "supervisor/sandbox.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/netns.h"
#include "supervisor/seccomp.h"
#include "supervisor/spawn.h"
#include "util.h"

/* Rights and scopes newer than the build's headers (6.1's). */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define SANDBOX_FS_IOCTL_DEV (1ULL << 15)          /* ABI 5 */
#define SANDBOX_SCOPE_ABSTRACT_UNIX (1ULL << 0)    /* ABI 6 */
#define SANDBOX_SCOPE_SIGNAL (1ULL << 1)           /* ABI 6 */
#define SANDBOX_SCOPE_ABI 6

/* landlock_ruleset_attr as ABI 6 has it. */
struct sandbox_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

#define SANDBOX_READ (LANDLOCK_ACCESS_FS_EXECUTE | \
    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* What a device file needs for `> /dev/null`, a prompt, a terminal. */
#define SANDBOX_DEVICE (LANDLOCK_ACCESS_FS_READ_FILE | \
    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
    SANDBOX_FS_IOCTL_DEV)

/* Writable device files: each kept open (O_PATH) for the daemon's life. */
static const char *const sandbox_device_paths[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts",
};

/* Kept read-only under a writable root: they run code outside later. */
static const char *const sandbox_protected[] = {
	".git/hooks", ".git/config",
};

#define SANDBOX_MAX_MOUNTS (2 + SANDBOX_MAX_ROOTS * \
    (1 + nitems(sandbox_protected)) + nitems(sandbox_protected))

/* What one tool's spawn was given, freed by sandbox_release. */
struct sandbox_prep {
	struct spawn_ns ns;
	struct spawn_mount mounts[SANDBOX_MAX_MOUNTS];
	char *paths[SANDBOX_MAX_MOUNTS];
	char uid_map[32], gid_map[32];
	int ruleset;
	bool lent;  /* ruleset is the TMPDIR's: not ours to close */
};

static int sandbox_version;
static bool sandbox_filter, sandbox_ns;
static char sandbox_why[3][160];
static uint64_t sandbox_handled; /* every filesystem right this ABI has */
static int sandbox_root = -1;
static int sandbox_devices[nitems(sandbox_device_paths)];

static int sandbox_add(int, int, uint64_t);
static int sandbox_workspace(int, const struct sandbox_spec *, const char *);
static char *sandbox_mounts(struct sandbox_prep *, const struct sandbox_spec *,
    const char *, const char *);

/* Whether this process may make a mount namespace: try it in a child. */
static bool
sandbox_probe_ns(char *why, size_t len)
{
	int flags = CLONE_NEWNS | (geteuid() != 0 ? CLONE_NEWUSER : 0);
	int status, error = 0;
	pid_t pid;

	if ((pid = fork()) == 0)
		_exit(unshare(flags) == 0 ? 0 : errno);
	if (pid == -1)
		error = errno;
	else if (waitpid(pid, &status, 0) == -1 || !WIFEXITED(status))
		error = ECHILD;
	else
		error = WEXITSTATUS(status);
	if (error != 0)
		snprintf(why, len, "cannot make a private mount namespace%s: %s",
		    geteuid() != 0 ? " (user namespaces)" : "",
		    strerror(error));
	return error == 0;
}

void
sandbox_init(void)
{
	long abi;
	size_t i;

	for (i = 0; i < nitems(sandbox_devices); i++)
		sandbox_devices[i] = -1;
	memset(sandbox_why, 0, sizeof sandbox_why);
	abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		snprintf(sandbox_why[SANDBOX_READ_ONLY], sizeof sandbox_why[0],
		    "%s", errno == EOPNOTSUPP ? "Landlock is disabled in this "
		    "kernel (boot with lsm=...,landlock)" : errno == ENOSYS ?
		    "this kernel has no Landlock (Linux >= 5.13 needed)" :
		    strerror(errno));
	else if (!(sandbox_filter = seccomp_init()))
		snprintf(sandbox_why[SANDBOX_READ_ONLY], sizeof sandbox_why[0],
		    "no seccomp filter for this architecture");
	else if ((sandbox_root = open("/", O_PATH | O_CLOEXEC)) == -1)
		snprintf(sandbox_why[SANDBOX_READ_ONLY], sizeof sandbox_why[0],
		    "cannot open /: %s", strerror(errno));
	if (sandbox_why[SANDBOX_READ_ONLY][0] != '\0') {
		memcpy(sandbox_why[SANDBOX_WORKSPACE_WRITE],
		    sandbox_why[SANDBOX_READ_ONLY], sizeof sandbox_why[0]);
		return;
	}
	sandbox_handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		sandbox_handled |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		sandbox_handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		sandbox_handled |= SANDBOX_FS_IOCTL_DEV;
	for (i = 0; i < nitems(sandbox_devices); i++)
		sandbox_devices[i] = open(sandbox_device_paths[i],
		    O_PATH | O_CLOEXEC);
	sandbox_version = (int)abi;
	sandbox_ns = sandbox_probe_ns(sandbox_why[SANDBOX_WORKSPACE_WRITE],
	    sizeof sandbox_why[0]);
}

void
sandbox_shutdown(void)
{
	size_t i;

	if (sandbox_root != -1)
		close(sandbox_root);
	sandbox_root = -1;
	for (i = 0; i < nitems(sandbox_devices); i++) {
		if (sandbox_devices[i] != -1)
			close(sandbox_devices[i]);
		sandbox_devices[i] = -1;
	}
	sandbox_version = 0;
	sandbox_ns = sandbox_filter = false;
}

bool
sandbox_can(enum sandbox_profile profile)
{
	return profile == SANDBOX_NONE || (sandbox_version > 0 &&
	    (profile == SANDBOX_READ_ONLY || sandbox_ns));
}

const char *
sandbox_error(enum sandbox_profile profile)
{
	return sandbox_can(profile) ? NULL : sandbox_why[profile][0] != '\0' ?
	    sandbox_why[profile] : "the sandbox was not probed";
}

int
sandbox_abi(void)
{
	return sandbox_version;
}

bool
sandbox_seccomp(void)
{
	return sandbox_filter;
}

bool
sandbox_mount_ns(void)
{
	return sandbox_ns;
}

/* Allow rights (less what this ABI lacks) beneath the file fd refers to. */
static int
sandbox_add(int ruleset, int fd, uint64_t rights)
{
	struct landlock_path_beneath_attr pb;

	memset(&pb, 0, sizeof pb);
	pb.allowed_access = rights & sandbox_handled;
	pb.parent_fd = fd;
	return (int)syscall(SYS_landlock_add_rule, ruleset,
	    LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
}

/*
 * Allow every right beneath path; -1 with errno. flags: 0, or O_NOFOLLOW |
 * O_DIRECTORY for a path that must be the directory itself (a symlink put
 * in its place would otherwise lend its rights to wherever it points).
 */
static int
sandbox_add_path(int ruleset, const char *path, int flags)
{
	int fd = open(path, O_PATH | O_CLOEXEC | flags), rc, error;

	if (fd == -1)
		return -1;
	rc = sandbox_add(ruleset, fd, sandbox_handled);
	error = errno;
	close(fd);
	errno = error;
	return rc;
}

/*
 * The ruleset every profile starts from: read and execute everywhere,
 * everything in tmpdir, the device files; signals and abstract sockets
 * scoped to the tool. This is all of read-only's. A ruleset fd, or -1 with
 * errno.
 */
int
sandbox_ruleset(const char *tmpdir)
{
	struct sandbox_attr attr;
	int ruleset, error = 0;
	size_t i;

	/* Before ABI 6 the attr ends at handled_access_fs (4: at _net). */
	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = sandbox_handled;
	if (sandbox_version >= SANDBOX_SCOPE_ABI)
		attr.scoped = SANDBOX_SCOPE_ABSTRACT_UNIX | SANDBOX_SCOPE_SIGNAL;
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr,
	    sandbox_version >= SANDBOX_SCOPE_ABI ? sizeof attr :
	    sizeof attr.handled_access_fs, 0);
	if (ruleset == -1)
		return -1;
	if (sandbox_add(ruleset, sandbox_root, SANDBOX_READ) == -1 ||
	    sandbox_add_path(ruleset, tmpdir, O_NOFOLLOW |
	    O_DIRECTORY) == -1)
		error = errno;
	/* A device this machine lacks needs no rule. */
	for (i = 0; error == 0 && i < nitems(sandbox_devices); i++) {
		if (sandbox_devices[i] != -1 && sandbox_add(ruleset,
		    sandbox_devices[i], SANDBOX_DEVICE) == -1)
			error = errno;
	}
	if (error != 0) {
		close(ruleset);
		errno = error;
		return -1;
	}
	return ruleset;
}

/* What workspace-write adds: everything in cwd and the roots. 0, or -1. */
static int
sandbox_workspace(int ruleset, const struct sandbox_spec *spec,
    const char *cwd)
{
	size_t i;

	if (cwd != NULL && sandbox_add_path(ruleset, cwd, 0) == -1)
		return -1;
	for (i = 0; i < spec->nroots; i++)
		if (sandbox_add_path(ruleset, spec->roots[i], 0) == -1)
			return -1;
	return 0;
}

/* One bind of path as it is now (followed), writable or not; 0 or errno. */
static int
sandbox_mount(struct sandbox_prep *prep, const char *path, bool writable)
{
	struct spawn_mount *m;
	struct stat st;

	if (stat(path, &st) == -1)
		return errno;
	if (prep->ns.nmounts == SANDBOX_MAX_MOUNTS)
		return E2BIG;
	m = &prep->mounts[prep->ns.nmounts];
	prep->paths[prep->ns.nmounts++] = xstrdup(path);
	m->path = prep->paths[prep->ns.nmounts - 1];
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->writable = writable;
	return 0;
}

/*
 * The mounts of a workspace-write tool: tmpdir, cwd and the roots
 * writable; then, over them, each existing protected file read-only.
 */
static char *
sandbox_mounts(struct sandbox_prep *prep, const struct sandbox_spec *spec,
    const char *tmpdir, const char *cwd)
{
	const char *writable[2 + SANDBOX_MAX_ROOTS];
	char path[4096], *msg = NULL;
	struct stat st, root;
	size_t n = 0, i, j;
	int error;

	writable[n++] = tmpdir;
	writable[n++] = cwd;
	for (i = 0; i < spec->nroots && i < SANDBOX_MAX_ROOTS; i++)
		writable[n++] = spec->roots[i];
	/* A workspace of / would make every file writable: no sandbox. */
	if (fstat(sandbox_root, &root) != 0) {
		xasprintf(&msg, "cannot stat /: %s", strerror(errno));
		return msg;
	}
	for (i = 1; i < n; i++)
		if (stat(writable[i], &st) == 0 &&
		    st.st_dev == root.st_dev && st.st_ino == root.st_ino) {
			xasprintf(&msg, "cannot run workspace-write with / as %s: "
			    "give the session a working directory of its own",
			    i == 1 ? "its working directory" : "a writable root");
			return msg;
		}
	for (i = 0; i < n; i++)
		if ((error = sandbox_mount(prep, writable[i], true)) != 0) {
			xasprintf(&msg, "cannot make %s writable: %s",
			    writable[i], strerror(error));
			return msg;
		}
	for (i = 1; i < n; i++)
		for (j = 0; j < nitems(sandbox_protected); j++) {
			if ((size_t)snprintf(path, sizeof path, "%s/%s",
			    writable[i], sandbox_protected[j]) >= sizeof path ||
			    lstat(path, &st) == -1 || S_ISLNK(st.st_mode))
				continue;
			if ((error = sandbox_mount(prep, path, false)) != 0) {
				xasprintf(&msg, "cannot protect %s: %s", path,
				    strerror(error));
				return msg;
			}
		}
	if (stat(cwd, &st) == -1) {
		xasprintf(&msg, "cannot chdir to %s: %s", cwd, strerror(errno));
		return msg;
	}
	prep->ns.cwd = cwd;
	prep->ns.cwd_dev = st.st_dev;
	prep->ns.cwd_ino = st.st_ino;
	prep->ns.mounts = prep->mounts;
	prep->ns.user = geteuid() != 0;
	snprintf(prep->uid_map, sizeof prep->uid_map, "%u %u 1",
	    (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(prep->gid_map, sizeof prep->gid_map, "%u %u 1",
	    (unsigned)getegid(), (unsigned)getegid());
	prep->ns.uid_map = prep->uid_map;
	prep->ns.gid_map = prep->gid_map;
	return NULL;
}

char *
sandbox_prepare(const struct sandbox_spec *spec, const char *tmpdir,
    int ruleset, const char *cwd, uid_t uid, struct spawn_req *req,
    struct sandbox_prep **out)
{
	static const char *const names[] = { "unsandboxed", "workspace-write",
	    "read-only" };
	struct sandbox_prep *prep;
	char *msg = NULL;

	*out = NULL;
	if (!sandbox_can(spec->profile)) {
		xasprintf(&msg, "cannot run %s: %s", names[spec->profile],
		    sandbox_error(spec->profile));
		return msg;
	}
	if (spec->net_rules && spec->netns == -1) {
		xasprintf(&msg, "cannot run %s with network rules: %s",
		    names[spec->profile], netns_available() ? "no network "
		    "namespace could be made for it (the daemon's log says "
		    "why)" : netns_error());
		return msg;
	}
	prep = *out = xcalloc(1, sizeof *prep);
	prep->ruleset = -1;
	if (spec->profile == SANDBOX_WORKSPACE_WRITE) {
		if (cwd == NULL)
			cwd = "/";
		if ((msg = sandbox_mounts(prep, spec, tmpdir, cwd)) != NULL)
			return msg;
		req->ns = &prep->ns;
	}
	/*
	 * The TMPDIR's ruleset is lent; workspace-write adds its areas to
	 * it, which is why that tool's caller lets it go afterwards.
	 */
	prep->lent = ruleset != -1;
	if ((prep->ruleset = ruleset) == -1)
		prep->ruleset = sandbox_ruleset(tmpdir);
	if (prep->ruleset == -1 || (spec->profile == SANDBOX_WORKSPACE_WRITE &&
	    sandbox_workspace(prep->ruleset, spec, cwd) == -1)) {
		xasprintf(&msg, "cannot build the %s sandbox: %s",
		    names[spec->profile], strerror(errno));
		return msg;
	}
	req->landlock_fd = prep->ruleset;
	if (spec->net_rules) {
		req->join_netns = true;
		req->netns_fd = spec->netns;
	}
	req->seccomp = seccomp_program((spec->profile == SANDBOX_READ_ONLY ?
	    (spec->net_rules ? SECCOMP_READ_ONLY_NET : SECCOMP_READ_ONLY) :
	    spec->network || spec->net_rules ? SECCOMP_WORKSPACE_NET :
	    SECCOMP_WORKSPACE) | (sandbox_version < SANDBOX_SCOPE_ABI ?
	    SECCOMP_SIGNALS : 0));
	req->drop_caps = uid == 0;
	return NULL;
}

void
sandbox_release(struct sandbox_prep *prep)
{
	size_t i;

	if (prep == NULL)
		return;
	if (prep->ruleset != -1 && !prep->lent)
		close(prep->ruleset);
	for (i = 0; i < prep->ns.nmounts; i++)
		free(prep->paths[i]);
	free(prep);
}
