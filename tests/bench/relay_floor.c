/*
 * The floor of any proxy's throughput here: one TCP connection forwarded
 * to ADDR:PORT by splice through a pipe each way, in a poll loop, with no
 * parsing, policy or event library. bench_proxy downloads through it
 * beside the daemon's proxy, so the price of passing the bytes through a
 * second TCP connection (which no proxy escapes) is measured apart from
 * the proxy's own.
 *
 *   relay_floor ADDR PORT   prints the port it listens on (127.0.0.1),
 *                           then serves connections one at a time
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_BYTES (1024 * 1024)

/* Both ways until both sources end; the pipes are the only buffers. */
static void
forward(int a, int b)
{
	int fd[2] = { a, b }, p[2][2], i;
	size_t in[2] = { 0, 0 };
	int eof[2] = { 0, 0 };
	ssize_t k;

	for (i = 0; i < 2; i++) {
		if (pipe2(p[i], O_CLOEXEC) == -1)
			return;
		fcntl(p[i][1], F_SETPIPE_SZ, PIPE_BYTES);
	}
	while (!(eof[0] && eof[1] && in[0] == 0 && in[1] == 0)) {
		struct pollfd pf[2] = { { a, 0, 0 }, { b, 0, 0 } };

		for (i = 0; i < 2; i++) {
			if (!eof[i] && in[i] == 0)
				pf[i].events |= POLLIN;
			if (in[i] > 0)
				pf[1 - i].events |= POLLOUT;
		}
		if (poll(pf, 2, -1) < 0)
			break;
		for (i = 0; i < 2; i++) {
			if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !eof[i] && in[i] == 0) {
				k = splice(fd[i], NULL, p[i][1], NULL,
				    PIPE_BYTES, SPLICE_F_MOVE);
				if (k <= 0) {
					eof[i] = 1;
					shutdown(fd[1 - i], SHUT_WR);
				} else
					in[i] = (size_t)k;
			}
			if (in[i] > 0 && (pf[1 - i].revents & POLLOUT)) {
				k = splice(p[i][0], NULL, fd[1 - i], NULL, in[i],
				    SPLICE_F_MOVE);
				if (k <= 0)
					return;
				in[i] -= (size_t)k;
				if (in[i] == 0 && eof[i])
					shutdown(fd[1 - i], SHUT_WR);
			}
		}
	}
	for (i = 0; i < 2; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in l = { .sin_family = AF_INET }, t = {
	    .sin_family = AF_INET };
	socklen_t len = sizeof l;
	int s, c, u;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &t.sin_addr) != 1) {
		fprintf(stderr, "usage: relay_floor ADDR PORT\n");
		return 2;
	}
	t.sin_port = htons((uint16_t)atoi(argv[2]));
	l.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(s, (struct sockaddr *)&l, sizeof l) == -1 ||
	    listen(s, 16) == -1 ||
	    getsockname(s, (struct sockaddr *)&l, &len) == -1) {
		perror("relay_floor");
		return 1;
	}
	printf("%u\n", ntohs(l.sin_port));
	fflush(stdout);
	while ((c = accept4(s, NULL, NULL, SOCK_CLOEXEC)) != -1) {
		u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (u != -1 && connect(u, (struct sockaddr *)&t, sizeof t) == 0)
			forward(c, u);
		if (u != -1)
			close(u);
		close(c);
	}
	return 0;
}
