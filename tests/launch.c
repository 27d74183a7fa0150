/* Running the real stexecd for tests and benchmarks: see launch.h. */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long
launch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

pid_t
launch_daemon(const char *const *wrapper, const char *sock, const char *out,
    const char *log, const char *env_extra, const char *const *args,
    char *err, size_t errlen)
{
	const char *daemon = getenv("STEXEC_DAEMON");
	const char *mode = getenv("STEXEC_DAEMON_ARGS");
	char *argv[128], **envp, *modes = NULL, *tok, *save, state[4096];
	pid_t parent = getpid(), pid;
	size_t n = 0, ne = 0, i;
	int fd;

	if (daemon == NULL || *daemon == '\0') {
		snprintf(err, errlen, "STEXEC_DAEMON is not set");
		return -1;
	}
	for (; wrapper != NULL && *wrapper != NULL && n < 32; wrapper++)
		argv[n++] = (char *)*wrapper;
	argv[n++] = (char *)daemon;
	argv[n++] = "--socket";
	argv[n++] = (char *)sock;
	argv[n++] = "--output-dir";
	argv[n++] = (char *)out;
	/* Its own crash journal beside out/, never the user's. */
	snprintf(state, sizeof state, "%.*s/state", (int)(strrchr(out, '/') !=
	    NULL ? strrchr(out, '/') - out : 1), strrchr(out, '/') != NULL ?
	    out : ".");
	argv[n++] = "--state-dir";
	argv[n++] = state;
	/* A whole suite in another mode, e.g. "--no-cgroup". */
	if (mode != NULL && (modes = strdup(mode)) != NULL)
		for (tok = strtok_r(modes, " ", &save); tok != NULL && n < 64;
		    tok = strtok_r(NULL, " ", &save))
			argv[n++] = tok;
	for (; args != NULL && *args != NULL && n < 126; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;

	while (environ[ne] != NULL)
		ne++;
	if ((envp = calloc(ne + 2, sizeof *envp)) == NULL) {
		snprintf(err, errlen, "out of memory");
		free(modes);
		return -1;
	}
	for (i = 0; i < ne; i++)
		envp[i] = environ[i];
	envp[ne] = (char *)env_extra;
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		free(envp);
		free(modes);
		return -1;
	}
	if (pid == 0) {
		/* The daemon must not outlive a caller that died. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent)
			_exit(126);
		/* Appended to: a restarted daemon's log follows the first. */
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		    0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(126);
		/* execvpe: a wrapper may be named without its path. */
		execvpe(argv[0], argv, envp);
		_exit(127);
	}
	free(envp);
	free(modes);
	return pid;
}

/* Is pid the daemon launched as root, or a process it started (a wrapper's)? */
static bool
launch_is_ours(pid_t pid, pid_t root)
{
	char path[64], line[512], *end;
	int depth, fd;
	ssize_t n;

	for (depth = 0; depth < 8 && pid > 1; depth++) {
		if (pid == root)
			return true;
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			return false;
		n = read(fd, line, sizeof line - 1);
		close(fd);
		if (n <= 0)
			return false;
		line[n] = '\0';
		/* "pid (comm) state ppid": comm may hold anything, even ") ". */
		if ((end = strrchr(line, ')')) == NULL)
			return false;
		pid = (pid_t)strtol(end + 3, NULL, 10);
	}
	return false;
}

int
launch_wait_serving(pid_t pid, const char *sock, int timeout_ms, int *status)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	long long until = launch_now_ms() + timeout_ms;
	struct stat st, foreign = { 0 };
	struct ucred cred;
	socklen_t len;
	bool ours, seen;
	int fd, k;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock);
	for (;;) {
		/*
		 * The listener must be the one launched: a dead daemon's socket
		 * may still take connections while a process it left holds the
		 * socket open (until that one is killed too). Such a socket is
		 * asked once: each connection stays in its queue, unaccepted,
		 * and a full queue would make the daemon's own probe fail. The
		 * daemon renames its socket into place: another file (the
		 * inode number may be the old one's again, not its ctime too).
		 */
		seen = stat(sock, &st) == 0;
		ours = false;
		if (seen && (st.st_ino != foreign.st_ino ||
		    st.st_ctim.tv_sec != foreign.st_ctim.tv_sec ||
		    st.st_ctim.tv_nsec != foreign.st_ctim.tv_nsec)) {
			fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
			    SOCK_NONBLOCK, 0);
			k = connect(fd, (struct sockaddr *)&sun, sizeof sun);
			len = sizeof cred;
			ours = k == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED,
			    &cred, &len) == 0 && launch_is_ours(cred.pid, pid);
			if (k == 0 && !ours)
				foreign = st;
			close(fd);
		}
		if (ours)
			return 0;
		if (waitpid(pid, status, WNOHANG) == pid)
			return -1;
		if (launch_now_ms() > until)
			return -2;
		usleep(5000);
	}
}

int
launch_stop(pid_t pid, int timeout_ms, bool *killed)
{
	long long until = launch_now_ms() + timeout_ms;
	int status = 0;

	*killed = false;
	/* 0 or -1 would signal our process group or every process. */
	if (pid <= 0)
		return 0;
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (launch_now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			*killed = true;
			break;
		}
		usleep(2000);
	}
	return status;
}
