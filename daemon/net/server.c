/* The listening socket: created with care, accepted from the loop. */
#include "net/server.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/conn.h"
#include "log.h"
#include "socket_path.h"
#include "supervisor/reaper.h"
#include "stexec/protocol.h"
#include "util.h"

static int server_fd = -1;
static struct event *server_ev, *server_retry;
static char *server_path;

static bool	server_owner_lives(int, pid_t *);
static void	server_accept_cb(evutil_socket_t, short, void *);
static void	server_retry_cb(evutil_socket_t, short, void *);
static int	server_make_dir(const char *, mode_t, char *, size_t);

const char *
server_default_path(const char *option, char *buf, size_t len)
{
	if (option != NULL)
		return option;
	if (socket_path_default(buf, len) != 0)
		return NULL;
	return buf;
}

/* Create the socket's directory if it is missing; never loosen one. */
static int
server_make_dir(const char *path, mode_t mode, char *err, size_t errlen)
{
	char *dir = xstrdup(path), *slash = strrchr(dir, '/');
	mode_t dmode = 0700;

	if (slash == NULL || slash == dir) {
		free(dir);
		return 0;
	}
	*slash = '\0';
	/* Those the socket is shared with must be able to reach it. */
	if (mode & 0060)
		dmode |= 0010;
	if (mode & 0006)
		dmode |= 0001;
	if (mkdir(dir, dmode) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir,
		    strerror(errno));
		free(dir);
		return -1;
	}
	free(dir);
	return 0;
}

/*
 * Whether the process that listens on a connected socket still runs. A
 * crashed daemon's socket still takes connections while a process it
 * started holds it open, one not yet exec'd, say, in the moment before
 * it is killed too; nobody will ever accept them. The credentials are
 * the listen() caller's; when it cannot be named (another pid
 * namespace), it is taken to live. *owner: its pid, when it is gone.
 */
static bool
server_owner_lives(int fd, pid_t *owner)
{
	struct ucred cred;
	socklen_t len = sizeof cred;
	pid_t ppid, pgid;
	char state;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    cred.pid <= 0)
		return true;
	/* A zombie has closed everything: the holder is someone else. */
	if (kill(cred.pid, 0) == 0 || errno != ESRCH) {
		if (reaper_stat(cred.pid, &ppid, &pgid, &state) != 0 ||
		    (state != 'Z' && state != 'X'))
			return true;
	}
	*owner = cred.pid;
	return false;
}

int
server_listen(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct sockaddr_un tmp = { .sun_family = AF_UNIX };
	struct stat st;
	pid_t owner = 0;
	mode_t old;
	int fd, probe, k, error;

	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(err, errlen, "socket path too long (%zu bytes, at "
		    "most %zu): %s", strlen(path), sizeof sun.sun_path - 1,
		    path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (server_make_dir(path, mode, err, errlen) != 0)
		return -1;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; "
			    "remove it or choose another --socket", path);
			return -1;
		}
		/*
		 * A daemon that answers owns it; one that does not is gone.
		 * Not blocking: a listener whose queue is full would hold a
		 * blocking connect (and the start) for as long as it lives.
		 */
		if ((probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0)) == -1) {
			snprintf(err, errlen, "cannot ask who serves %s: "
			    "socket: %s", path, strerror(errno));
			return -1;
		}
		k = connect(probe, (struct sockaddr *)&sun, sizeof sun);
		error = errno;
		if (k == 0 && server_owner_lives(probe, &owner)) {
			close(probe);
			snprintf(err, errlen, "another stexecd is already "
			    "serving %s", path);
			return -1;
		}
		close(probe);
		if (k != 0 && error == EAGAIN) {
			snprintf(err, errlen, "a process listens on %s but "
			    "accepts nothing (its queue is full); stop it or "
			    "remove the file", path);
			return -1;
		}
		if (owner > 0)
			log_info("removing stale socket %s: its daemon (pid "
			    "%ld) is gone, a process it left holds it open",
			    path, (long)owner);
		else
			log_info("removing stale socket %s", path);
		unlink(path);
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/*
	 * Bind a temporary name and rename it into place once listening:
	 * the path never names a socket that refuses connections.
	 */
	if ((size_t)snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s.%ld",
	    path, (long)getpid()) >= sizeof tmp.sun_path)
		snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s", path);
	unlink(tmp.sun_path);
	/* No window in which the socket has looser permissions. */
	old = umask(0777 & ~mode);
	if (bind(fd, (struct sockaddr *)&tmp, sizeof tmp) != 0) {
		umask(old);
		snprintf(err, errlen, "cannot bind %s: %s", tmp.sun_path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(tmp.sun_path, mode) != 0 || listen(fd, SOMAXCONN) != 0 ||
	    rename(tmp.sun_path, sun.sun_path) != 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", sun.sun_path,
		    strerror(errno));
		close(fd);
		unlink(tmp.sun_path);
		return -1;
	}
	return fd;
}

void
server_start(struct event_base *base, int fd, const char *unlink_path)
{
	server_fd = fd;
	server_path = unlink_path != NULL ? xstrdup(unlink_path) : NULL;
	evutil_make_socket_nonblocking(fd);
	server_ev = event_new(base, fd, EV_READ | EV_PERSIST,
	    server_accept_cb, NULL);
	server_retry = evtimer_new(base, server_retry_cb, NULL);
	event_add(server_ev, NULL);
}

static void
server_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval one = { 1, 0 };
	int c;

	for (;;) {
		c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c >= 0) {
			conn_accept(c);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			/* Out of descriptors: stop accepting for a moment. */
			log_warn("accept: %s; pausing for a second",
			    strerror(errno));
			event_del(server_ev);
			evtimer_add(server_retry, &one);
		}
		return;
	}
}

static void
server_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	event_add(server_ev, NULL);
}

void
server_stop(void)
{
	if (server_ev != NULL) {
		event_free(server_ev);
		event_free(server_retry);
		server_ev = server_retry = NULL;
	}
	if (server_fd >= 0) {
		close(server_fd);
		server_fd = -1;
	}
	if (server_path != NULL) {
		unlink(server_path);
		free(server_path);
		server_path = NULL;
	}
}

int
server_socket(const char **unlink_path)
{
	*unlink_path = server_path;
	return server_fd;
}
