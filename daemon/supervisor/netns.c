/* Network namespaces of only `lo`, and listening sockets inside them. */
#include "supervisor/netns.h"

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static int netns_self = -1; /* the daemon's own namespace */
static char netns_why[160];

static bool netns_lo_up(void);
static void netns_back(void);

void
netns_init(void)
{
	char err[160];
	int ns;

	netns_why[0] = '\0';
	if (netns_self == -1 && (netns_self = open("/proc/self/ns/net",
	    O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(netns_why, sizeof netns_why, "cannot open "
		    "/proc/self/ns/net: %s", strerror(errno));
		return;
	}
	/* One made and let go: CAP_SYS_ADMIN, and a kernel that has them. */
	if ((ns = netns_new(err, sizeof err)) == -1)
		snprintf(netns_why, sizeof netns_why, "%s", err);
	else
		close(ns);
}

void
netns_shutdown(void)
{
	if (netns_self != -1)
		close(netns_self);
	netns_self = -1;
}

bool
netns_available(void)
{
	return netns_self != -1 && netns_why[0] == '\0';
}

const char *
netns_error(void)
{
	return netns_available() ? NULL : netns_why[0] != '\0' ? netns_why :
	    "network namespaces were not probed";
}

int
netns_new(char *err, size_t errlen)
{
	int ns;

	if (netns_self == -1) {
		snprintf(err, errlen, "network namespaces were not probed");
		return -1;
	}
	if (unshare(CLONE_NEWNET) == -1) {
		snprintf(err, errlen, "cannot make a network namespace%s: %s",
		    geteuid() != 0 ? " (the daemon is not root)" : "",
		    strerror(errno));
		return -1;
	}
	/* Here, then back before anything else runs on this thread. */
	ns = netns_lo_up() ? open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC) : -1;
	if (ns == -1)
		snprintf(err, errlen, "cannot set up a network namespace: %s",
		    strerror(errno));
	netns_back();
	return ns;
}

int
netns_listen(int ns, uint16_t *port, char *err, size_t errlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof a;
	int fd, saved;

	if (setns(ns, CLONE_NEWNET) == -1) {
		snprintf(err, errlen, "cannot enter the tool's network "
		    "namespace: %s", strerror(errno));
		return -1;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 || bind(fd, (struct sockaddr *)&a, sizeof a) == -1 ||
	    listen(fd, 64) == -1 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) == -1) {
		saved = errno;
		snprintf(err, errlen, "cannot listen in the tool's network "
		    "namespace: %s", strerror(saved));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	netns_back();
	*port = ntohs(a.sin_port);
	return fd;
}

/* `lo` up in the namespace this thread is in. */
static bool
netns_lo_up(void)
{
	struct ifreq r;
	int s, saved;
	bool ok;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return false;
	memset(&r, 0, sizeof r);
	snprintf(r.ifr_name, sizeof r.ifr_name, "lo");
	ok = ioctl(s, SIOCGIFFLAGS, &r) == 0;
	r.ifr_flags |= IFF_UP;
	ok = ok && ioctl(s, SIOCSIFFLAGS, &r) == 0;
	saved = errno;
	close(s);
	errno = saved;
	return ok;
}

/*
 * Back to the daemon's namespace. Failing that, every connection the
 * daemon made would be made from a tool's: nothing may go on.
 */
static void
netns_back(void)
{
	if (setns(netns_self, CLONE_NEWNET) != 0)
		fatal("cannot return to the daemon's network namespace: %s",
		    strerror(errno));
}
