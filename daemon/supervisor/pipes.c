/* A tool's four pipes, and one set made ahead (pipes.h). */
#include "supervisor/pipes.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static struct pipes pipes_ahead;
static bool pipes_ready;

int
pipes_high(int fd)
{
	int nfd, error;

	if (fd > 3)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 4);
	error = errno;
	close(fd);
	errno = error;
	return nfd;
}

int
pipes_make(struct pipes *ps)
{
	int fds[2], i, error;

	for (i = 0; i < 4; i++)
		ps->ours[i] = ps->child[i] = -1;
	for (i = 0; i < 4; i++) {
		if (pipe2(fds, O_CLOEXEC) != 0)
			goto fail;
		/* stdin: the child reads; the others: it writes. */
		ps->ours[i] = fds[i == 0 ? 1 : 0];
		if ((ps->child[i] = pipes_high(fds[i == 0 ? 0 : 1])) == -1)
			goto fail;
		if (i > 0 && fcntl(ps->ours[i], F_SETFL, O_NONBLOCK) != 0)
			goto fail;
	}
	return 0;
fail:
	error = errno;
	pipes_close(ps);
	return error;
}

void
pipes_close(struct pipes *ps)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (ps->ours[i] != -1)
			close(ps->ours[i]);
		if (ps->child[i] != -1)
			close(ps->child[i]);
		ps->ours[i] = ps->child[i] = -1;
	}
}

bool
pipes_take(struct pipes *ps)
{
	if (!pipes_ready)
		return false;
	*ps = pipes_ahead;
	pipes_ready = false;
	return true;
}

void
pipes_fill(void)
{
	if (!pipes_ready)
		pipes_ready = pipes_make(&pipes_ahead) == 0;
}

void
pipes_drop(void)
{
	if (pipes_ready)
		pipes_close(&pipes_ahead);
	pipes_ready = false;
}
