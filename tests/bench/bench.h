/*
 * Benchmark support (README, Benchmarks): start a private stexecd, speak the wire
 * with a raw socket and a minimal line reader (so the figures measure the
 * daemon, not a client library), time, summarize, and print one line per
 * figure:
 *
 *   NAME  median M UNIT  min A  max B | limit L UNIT | COMPARISON PASS|MISS
 *
 * A figure that misses its target is still printed and the program still
 * exits 0; only something that broke (the daemon died, a tool failed, bytes
 * went missing) ends it with status 1.
 *
 * Environment: STEXEC_DAEMON (the stexecd binary, required),
 * STEXEC_BENCH_REPS (repetitions, default 5), STEXEC_BENCH_N (each
 * program's main count; see the program's comment).
 */
#ifndef STEXEC_BENCH_H
#define STEXEC_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_daemon {
	pid_t pid;
	char dir[64];  /* the mkdtemp directory, removed by bench_daemon_stop */
	char sock[96]; /* dir/s.sock */
	char out[96];  /* dir/out: --output-dir */
	char log[96];  /* dir/daemon.log: its stderr */
};

/* A connection read line by line; lines may be of any length. */
struct bench_conn {
	int fd;
	char *buf;
	size_t start; /* first byte not yet returned as a line */
	size_t scan;  /* bytes before this hold no '\n' */
	size_t len;
	size_t cap;
	int64_t next_id;
	bool eof;
};

struct bench_sum {
	double med, min, max;
};

/* Start $STEXEC_DAEMON; extra arguments follow, NULL-terminated. */
void	bench_daemon_start(struct bench_daemon *, const char *arg, ...);
/* SIGTERM, wait, remove the directory. */
void	bench_daemon_stop(struct bench_daemon *);
/*
 * Create n sessions (createSession {}, pipelined in batches of 500); keep
 * the ids of the first keep of them in ids.
 */
void	bench_sessions(struct bench_conn *, int n, char (*ids)[32], int keep);
/* Remove every file in dir (the output files of a repetition). */
void	bench_clean_dir(const char *dir);

/* A blocking Unix stream connection to path; fails the bench if none. */
int	bench_connect(const char *path);
struct bench_conn *bench_conn_open(const char *path);
struct bench_conn *bench_conn_adopt(int fd);
void	bench_conn_close(struct bench_conn *);
/* Write everything (polls when the fd is non-blocking). */
void	bench_write(int fd, const void *, size_t);
/*
 * One read into the buffer: bytes read, 0 at EOF, -1 when a non-blocking
 * fd has nothing (EAGAIN).
 */
ssize_t	bench_fill(struct bench_conn *);
/*
 * The next complete line already buffered, NUL-terminated in place (valid
 * until the next call on c), or NULL.
 */
char	*bench_take_line(struct bench_conn *, size_t *len);
/* The next line, reading (and polling) as needed; fails at EOF. */
char	*bench_line(struct bench_conn *, size_t *len);
/*
 * Blocking request; params is JSON text (NULL: none). Skips the
 * notifications that arrive meanwhile; a JSON-RPC error fails the bench.
 * Returns the result (new reference).
 */
json_t	*bench_call(struct bench_conn *, const char *method,
	    const char *params);
/*
 * One tool use "t<k>" of tool with input (JSON text) added on a subscribed
 * connection: microseconds from writing its addTool to reading its
 * tool_result, which must be no error and have content (JSON text of the
 * string, as the line has it). The addTool reply is read untimed.
 */
double	bench_tool_us(struct bench_conn *, const char *sid, const char *tool,
	    const char *input, const char *content, int k);
/*
 * One call "t<k>" of the client-run tool noop (runner client), which this
 * connection serves and answers with "done" the moment its tool_start
 * comes: microseconds from writing its addTool to reading its tool_result
 * (another session's results on the connection are passed over).
 */
double	bench_client_tool_us(struct bench_conn *, const char *sid, int k);
/* qsort's comparison of doubles. */
int	bench_cmp_double(const void *, const void *);
/*
 * order[0..count) a permutation drawn anew (Fisher-Yates, xorshift64 from
 * *rng, which the caller seeds once, so runs repeat). A call pays for what
 * the one before it left the kernel to do (a process reaped, a sandbox
 * torn down, a CPU left idle): in an order drawn for each iteration,
 * every call follows every other as often.
 */
void	bench_shuffle(int *order, int count, uint64_t *rng);
#define BENCH_SEED 0x9e3779b97f4a7c15ULL
/* stats.rssBytes, after a round trip so earlier requests are done. */
long long bench_rss(struct bench_conn *);

/*
 * Cheap classification of a daemon line. The payloads are the bench's
 * own, so substring matching cannot be fooled: inside a JSON string a
 * quote is always escaped, so `"method":"` only matches a real key.
 */
/* The notification's method name (not NUL-terminated), or NULL. */
const char *bench_method(const char *line, size_t *len);
bool	bench_is_method(const char *line, const char *method);
/* The numeric "id" of a response, or -1. */
int64_t	bench_response_id(const char *line);
bool	bench_is_error(const char *line);

/* A tool stdin/stdout pipe pair, the child spawned with posix_spawn. */
pid_t	bench_spawn_piped(char *const argv[], int *in_fd, int *out_fd);

int64_t	bench_now_ns(void);
/*
 * pid's CPU time so far (user + system, all its threads), in us: its
 * process CPU clock, to the nanosecond, not /proc's 10 ms ticks, so that
 * a round of a thousand tools gives the daemon's CPU per tool to 0.1 us.
 */
double	bench_cpu_us(pid_t);
long	bench_env_long(const char *name, long def, long min, long max);
int	bench_reps(void);
long	bench_n(long def, long min, long max);
void	bench_raise_nofile(void);
/*
 * Pin pid (0: the bench) to the k-th CPU the bench was allowed to use at
 * its first call; false (and nothing changed) when there is no such CPU.
 */
bool	bench_pin(pid_t, int k);

void	bench_summarize(const double *, int n, struct bench_sum *);
/* Print one figure line; limit and cmp are the preformatted middle parts. */
void	bench_report(const char *name, const char *unit,
	    const struct bench_sum *, const char *limit, const char *cmp,
	    bool pass);

/* Zeroed memory; never NULL (the bench fails instead). */
void	*bench_alloc(size_t)
	    __attribute__((malloc, returns_nonnull));

/* Clean up (stop the daemon, remove its directory) and exit 1. */
void	bench_fail(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif
