/*
 * Running the real stexecd for tests and benchmarks, with no test framework
 * in it: tests/e2e.c turns its failures into criterion assertions,
 * tests/bench/bench.c into bench_fail.
 */
#ifndef STEXEC_LAUNCH_H
#define STEXEC_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Fork and exec wrapper... (may be NULL), $STEXEC_DAEMON, --socket sock,
 * --output-dir out, --state-dir (out's directory)/state, the words of $STEXEC_DAEMON_ARGS (a suite run in
 * another mode: "--no-cgroup"), then args (NULL-ended), with stderr appended to log and
 * env_extra (a "NAME=value", or NULL) added to the environment. The daemon
 * gets SIGKILL if the caller dies first. Its pid, or -1 with err.
 */
pid_t launch_daemon(const char *const *wrapper, const char *sock,
    const char *out, const char *log, const char *env_extra,
    const char *const *args, char *err, size_t errlen);
/*
 * Wait until sock accepts a connection from the daemon launched as pid (or
 * a process under it, behind a wrapper): 0; -1 when the daemon exited
 * first (its wait status in *status); -2 after timeout_ms.
 */
int launch_wait_serving(pid_t, const char *sock, int timeout_ms, int *status);
/*
 * SIGTERM and wait up to timeout_ms, then SIGKILL (*killed set); the wait
 * status.
 */
int launch_stop(pid_t, int timeout_ms, bool *killed);

#endif
