/*
 * What a reload hands over besides records: each named descriptor has one
 * owner, and those no record claims are closed, not leaked. The steps run
 * in a child of the test's: the next image's first step closes every
 * descriptor the list does not name, criterion's own among them.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handover.h"

/* A failed check: the child exits with its line (mod 250, plus one). */
#define CHECK(x) do { if (!(x)) _exit(__LINE__ % 250 + 1); } while (0)

static bool	is_open(int);
static void	next_image(void);

static bool
is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static void
next_image(void)
{
	int a[2], b[2], stray, keep[1] = { -1 };
	char list[64];
	json_t *v;

	CHECK(pipe(a) == 0 && pipe(b) == 0);
	stray = dup(a[0]);
	snprintf(list, sizeof list, "%d,%d,%d,%d", a[0], a[1], b[0], b[1]);
	handover_close_others(list, keep);
	/* Not named: closed at once. Named: close-on-exec again. */
	CHECK(!is_open(stray));
	CHECK(fcntl(a[0], F_GETFD) & FD_CLOEXEC);

	v = json_integer(a[0]);
	CHECK(handover_take_fd(v) == a[0]);
	/* A corrupt record naming it again gets nothing: one owner. */
	CHECK(handover_take_fd(v) == -1);
	json_decref(v);
	CHECK(handover_claim_fd(b[1]));
	CHECK(!handover_claim_fd(b[1]));
	CHECK(!handover_claim_fd(stray));
	v = json_string("7");
	CHECK(handover_take_fd(v) == -1);
	json_decref(v);

	/* a[1] and b[0] were named and left: a dropped record's. */
	CHECK(handover_close_unclaimed() == 2);
	CHECK(!is_open(a[1]) && !is_open(b[0]));
	CHECK(is_open(a[0]) && is_open(b[1]));
	CHECK(handover_close_unclaimed() == 0);
	_exit(0);
}

Test(handover, a_descriptor_has_one_owner_and_the_unclaimed_are_closed)
{
	pid_t pid;
	int st;

	cr_assert_neq(pid = fork(), -1);
	if (pid == 0)
		next_image();
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "the child died of signal %d", WTERMSIG(st));
	cr_assert_eq(WEXITSTATUS(st), 0, "the check on line %d (mod 250) of "
	    "%s failed", WEXITSTATUS(st) - 1, __FILE__);
}
