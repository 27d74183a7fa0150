/*
 * stexec-cli bridge: stdin/stdout relayed to the daemon's socket byte for
 * byte, so a frontend on another host or in a container speaks the
 * protocol through `ssh host stexec-cli bridge` or
 * `kubectl exec POD -- stexec-cli bridge`. Both directions are buffered
 * and non-blocking: a peer that does not read never stops the other way.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BRIDGE_BUF (64 * 1024)

/* One direction: bytes read from `from`, not yet written to `to`. */
struct bridge_pipe {
	int from, to;
	char buf[BRIDGE_BUF];
	size_t off, len;
	bool eof;       /* from has ended; to is shut once buf is written */
	bool done;      /* to has been shut (or failed) */
};

static int	bridge_read(struct bridge_pipe *);
static int	bridge_write(struct bridge_pipe *);
static void	bridge_shut(struct bridge_pipe *, bool);

int
bridge_main(struct cli *cli, struct cli_args *args)
{
	struct bridge_pipe *up, *down;
	struct pollfd pfd[4];
	int rc, fd, i, in_fl, out_fl;

	if ((rc = cli_connect(cli)) != 0)
		return rc;
	/* The library's socket is used raw from here on. */
	if ((fd = fcntl(stexec_fd(cli->c), F_DUPFD_CLOEXEC, 3)) < 0) {
		cli_error(cli, "cannot take the socket: %s", strerror(errno));
		return CLI_EXIT_FAIL;
	}
	stexec_close(cli->c);
	cli->c = NULL;
	up = calloc(1, sizeof *up);
	down = calloc(1, sizeof *down);
	if (up == NULL || down == NULL) {
		cli_error(cli, "out of memory");
		return CLI_EXIT_FAIL;
	}
	*up = (struct bridge_pipe){ .from = STDIN_FILENO, .to = fd };
	*down = (struct bridge_pipe){ .from = fd, .to = STDOUT_FILENO };
	/* stdout that does not drain must not stop stdin's way in. */
	in_fl = fcntl(STDIN_FILENO, F_GETFL);
	out_fl = fcntl(STDOUT_FILENO, F_GETFL);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(STDIN_FILENO, F_SETFL, in_fl | O_NONBLOCK);
	fcntl(STDOUT_FILENO, F_SETFL, out_fl | O_NONBLOCK);

	rc = CLI_EXIT_OK;
	/* The daemon's side ending ends the bridge; stdin's only half of it. */
	while (!down->done) {
		struct bridge_pipe *p[2] = { up, down };

		for (i = 0; i < 2; i++) {
			pfd[2 * i] = (struct pollfd){ .fd = -1 };
			pfd[2 * i + 1] = (struct pollfd){ .fd = -1 };
			if (p[i]->done)
				continue;
			if (p[i]->len == 0 && !p[i]->eof)
				pfd[2 * i] = (struct pollfd){ p[i]->from, POLLIN,
				    0 };
			if (p[i]->len > 0)
				pfd[2 * i + 1] = (struct pollfd){ p[i]->to,
				    POLLOUT, 0 };
		}
		if (poll(pfd, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			cli_error(cli, "poll: %s", strerror(errno));
			rc = CLI_EXIT_FAIL;
			break;
		}
		for (i = 0; i < 2; i++) {
			if (pfd[2 * i].revents != 0 && bridge_read(p[i]) < 0) {
				cli_error(cli, "read: %s", strerror(errno));
				rc = CLI_EXIT_FAIL;
			}
			if ((pfd[2 * i + 1].revents != 0 || p[i]->len > 0) &&
			    bridge_write(p[i]) < 0 && p[i] == down) {
				/* Our reader is gone: nothing to relay to. */
				down->done = true;
			}
			if (p[i]->eof && p[i]->len == 0 && !p[i]->done)
				bridge_shut(p[i], p[i] == up);
		}
		if (rc != CLI_EXIT_OK)
			break;
	}
	fcntl(STDIN_FILENO, F_SETFL, in_fl);
	fcntl(STDOUT_FILENO, F_SETFL, out_fl);
	close(fd);
	free(up);
	free(down);
	return rc;
}

/* Read what is there; EOF (or a reset) marks the direction ended. */
static int
bridge_read(struct bridge_pipe *p)
{
	ssize_t n = read(p->from, p->buf, sizeof p->buf);

	if (n > 0) {
		p->off = 0;
		p->len = (size_t)n;
		return 0;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	p->eof = true;
	return n < 0 && errno != ECONNRESET ? -1 : 0;
}

/* Write what the other side takes now; -1 when it is gone. */
static int
bridge_write(struct bridge_pipe *p)
{
	ssize_t n;

	while (p->len > 0) {
		n = write(p->to, p->buf + p->off, p->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			p->len = 0;
			p->eof = true;
			return -1;
		}
		p->off += (size_t)n;
		p->len -= (size_t)n;
	}
	return 0;
}

/* stdin ended: half-close the socket, so the daemon sees EOF too. */
static void
bridge_shut(struct bridge_pipe *p, bool socket_side)
{
	if (socket_side)
		shutdown(p->to, SHUT_WR);
	p->done = true;
}
