/*
 * The sandbox's rulesets, built outside a spawn: what a TMPDIR's ruleset
 * lends, and to what.
 */
#include <criterion/criterion.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/sandbox.h"

static char sbx_dir[] = "/tmp/stexec-sandbox-XXXXXX";
static char sbx_real[64], sbx_link[64];

static void
sbx_setup(void)
{
	sandbox_init();
	cr_assert_not_null(mkdtemp(sbx_dir));
	snprintf(sbx_real, sizeof sbx_real, "%s/real", sbx_dir);
	snprintf(sbx_link, sizeof sbx_link, "%s/link", sbx_dir);
	cr_assert_eq(mkdir(sbx_real, 0700), 0);
	cr_assert_eq(symlink(sbx_real, sbx_link), 0);
}

static void
sbx_teardown(void)
{
	unlink(sbx_link);
	rmdir(sbx_real);
	rmdir(sbx_dir);
	sandbox_shutdown();
}

/*
 * A TMPDIR is the daemon's own directory. Were a symlink put in its place,
 * its ruleset would lend every right to wherever the link points: it is
 * refused instead, and the real directory still gets one.
 */
Test(sandbox, a_tmpdir_that_is_a_symlink_gets_no_ruleset,
    .init = sbx_setup, .fini = sbx_teardown)
{
	int fd;

	if (!sandbox_can(SANDBOX_READ_ONLY))
		cr_skip_test("this kernel cannot enforce read-only: %s",
		    sandbox_error(SANDBOX_READ_ONLY));
	fd = sandbox_ruleset(sbx_real);
	cr_assert_geq(fd, 0, "the real directory: %s", strerror(errno));
	close(fd);
	errno = 0;
	cr_assert_eq(sandbox_ruleset(sbx_link), -1);
	cr_assert_eq(errno, ENOTDIR, "errno %d (%s)", errno, strerror(errno));
}
