/* Landlock rulesets for read-only tools: read everywhere, write in TMPDIR. */
#include "supervisor/sandbox.h"

#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Rights newer than the build's headers; the kernel says which it has. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

#define SANDBOX_READ (LANDLOCK_ACCESS_FS_EXECUTE | \
    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* What a device file needs for `> /dev/null` and a prompt on the tty. */
#define SANDBOX_DEVICE (LANDLOCK_ACCESS_FS_READ_FILE | \
    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

/* Writable device files: each kept open (O_PATH) for the daemon's life. */
static const char *const sandbox_device_paths[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts",
};

static int sandbox_version;
static char sandbox_why[128];
static uint64_t sandbox_handled; /* every filesystem right this ABI has */
static int sandbox_root = -1;
static int sandbox_devices[nitems(sandbox_device_paths)];

static int sandbox_add(int, int, uint64_t);

int
sandbox_init(void)
{
	long abi;
	size_t i;

	for (i = 0; i < nitems(sandbox_devices); i++)
		sandbox_devices[i] = -1;
	sandbox_why[0] = '\0';
	abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1) {
		snprintf(sandbox_why, sizeof sandbox_why, "%s",
		    errno == EOPNOTSUPP ? "Landlock is disabled in this kernel "
		    "(boot with lsm=...,landlock)" : errno == ENOSYS ?
		    "this kernel has no Landlock (Linux >= 5.13 needed)" :
		    strerror(errno));
		return 0;
	}
	sandbox_handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		sandbox_handled |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		sandbox_handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if ((sandbox_root = open("/", O_PATH | O_CLOEXEC)) == -1) {
		snprintf(sandbox_why, sizeof sandbox_why, "cannot open /: %s",
		    strerror(errno));
		return 0;
	}
	for (i = 0; i < nitems(sandbox_devices); i++)
		sandbox_devices[i] = open(sandbox_device_paths[i],
		    O_PATH | O_CLOEXEC);
	sandbox_version = (int)abi;
	return sandbox_version;
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
}

int
sandbox_abi(void)
{
	return sandbox_version;
}

const char *
sandbox_error(void)
{
	return sandbox_version == 0 && sandbox_why[0] != '\0' ? sandbox_why :
	    NULL;
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

int
sandbox_ruleset(const char *tmpdir)
{
	struct landlock_ruleset_attr attr;
	int ruleset, dir, error = 0;
	size_t i;

	if (sandbox_version == 0) {
		errno = ENOSYS;
		return -1;
	}
	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = sandbox_handled;
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr,
	    sizeof attr, 0);
	if (ruleset == -1)
		return -1;
	if ((dir = open(tmpdir, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    sandbox_add(ruleset, sandbox_root, SANDBOX_READ) == -1 ||
	    sandbox_add(ruleset, dir, sandbox_handled) == -1)
		error = errno;
	/* A device this machine lacks needs no rule. */
	for (i = 0; error == 0 && i < nitems(sandbox_devices); i++) {
		if (sandbox_devices[i] != -1 && sandbox_add(ruleset,
		    sandbox_devices[i], SANDBOX_DEVICE) == -1)
			error = errno;
	}
	if (dir != -1)
		close(dir);
	if (error != 0) {
		close(ruleset);
		errno = error;
		return -1;
	}
	return ruleset;
}
