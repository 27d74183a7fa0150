/*
 * End-to-end test support: start the real stexecd on a private socket in a
 * temporary directory, talk to it over the wire, and check afterwards that
 * no tool process is left. Every process the daemon starts inherits
 * STEXEC_E2E_TAG=<unique>, which is how leftovers are found.
 */
#ifndef STEXEC_E2E_H
#define STEXEC_E2E_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct daemon {
	pid_t pid;
	char dir[64];     /* the temporary directory */
	char sock[96];    /* dir/s.sock */
	char out[96];     /* dir/out: --output-dir */
	char tag[64];
	char log[96];     /* dir/daemon.log: its stderr */
	bool exited;      /* reaped already (d_terminate, d_kill) */
	int status;       /* its wait status then */
};

struct client {
	int fd;
	char *buf;        /* bytes read, not yet a whole line */
	size_t len, cap;
	size_t scanned;   /* of buf, known to hold no newline */
	json_t *queue;    /* notifications received, not yet taken */
	json_t *responses; /* responses read while waiting for something
	                     else, not yet taken (c_response, c_call) */
	int next_id;
	bool eof;         /* the daemon closed the connection */
	json_t *last_error;
};

/* Start the daemon; extra arguments after the socket options, NULL-ended. */
struct daemon *d_start(const char *arg, ...);
/*
 * d_start with the daemon run through a wrapper, e.g. {"valgrind", "-q",
 * NULL}: argv = wrapper..., $STEXEC_DAEMON, options, args.
 */
struct daemon *d_start_wrapped(const char *const *wrapper, const char *arg,
    ...);
/* SIGTERM, wait, check it exited 0 and left no process behind. */
void d_stop(struct daemon *);
/* SIGTERM and wait (up to 30 s); the wait status. d_stop still checks. */
int d_terminate(struct daemon *);
/* Send sig and wait for the daemon to die (e.g. SIGKILL: a crash). */
void d_kill(struct daemon *, int sig);
/*
 * After d_kill: start a daemon again in the same directory, on the same
 * socket and tag (the log is appended to); returns once it accepts
 * connections, so a stale socket file left behind must have been replaced.
 */
void d_restart(struct daemon *, const char *arg, ...);
/*
 * Processes (other than the daemon and, while it runs, its sentinel)
 * carrying the daemon's tag.
 */
int d_leftovers(struct daemon *);
/* SIGKILL them (so that a failed test leaves nothing); how many there were. */
int d_kill_leftovers(struct daemon *);
/* Wait (up to ms) until no tool process is left; false if some remain. */
bool d_wait_no_leftovers(struct daemon *, int ms);
/* Its sentinel's pid (a child named stexec-sentinel), or 0. */
pid_t d_sentinel(struct daemon *);
/* A path inside the daemon's temporary directory. */
const char *d_path(struct daemon *, const char *name);

struct client *c_open(struct daemon *);
/*
 * A socket connected by a child running as uid (the daemon reads the peer
 * credentials of connect(2) time, so the caller may use it); see c_adopt.
 */
int d_connect_as(struct daemon *, uid_t uid);
/* A client over a socket already connected (e.g. by another uid). */
struct client *c_adopt(int fd);
void c_close(struct client *);
/* Send one raw line (a '\n' is added). */
void c_send_raw(struct client *, const char *);
/* Call and return the result (new reference); a JSON-RPC error fails. */
json_t *c_call(struct client *, const char *method, json_t *params);
/* Call and return the error object (new reference); a result fails. */
json_t *c_call_error(struct client *, const char *method, json_t *params);
/*
 * Read the next message of any kind off the socket (new reference), or
 * NULL at EOF or timeout; what c_keep kept is not read again here.
 */
json_t *c_read(struct client *, int timeout_ms);
/*
 * A message read with c_read that the caller does not want (takes the
 * reference): a response waits for c_response or c_call, a notification
 * for c_wait or c_until. A loop that collects one kind never drops the
 * other.
 */
void c_keep(struct client *, json_t *);
/*
 * A message read with c_read that the caller is done with (takes the
 * reference; NULL is fine): a notification is dropped, a response kept
 * as by c_keep.
 */
void c_drop(struct client *, json_t *);
/* The next response (has an id), notifications queued; NULL on EOF or
 * timeout. For requests sent with c_send_raw. */
json_t *c_response(struct client *, int timeout_ms);
/* The same, the response to id only (others stay kept). */
json_t *c_response_to(struct client *, int id, int timeout_ms);
/* The next notification with this method (others stay queued). */
json_t *c_wait(struct client *, const char *method, int timeout_ms);
/*
 * The next notification with this method about this tool (params.toolUseId)
 * and, unless NULL, with this params.status; the others stay queued.
 */
json_t *c_wait_tool(struct client *, const char *method,
    const char *tool_use_id, const char *status, int timeout_ms);
/* Every queued notification and those that arrive until one with method
 * (included), as an array of notification objects. */
json_t *c_until(struct client *, const char *method, int timeout_ms);
/* The same, only those with method want (their params, as e2e_filter). */
json_t *c_until_only(struct client *, const char *method, const char *want,
    int timeout_ms);

/* A field of /proc/PID/status given in kB (VmRSS, VmHWM), in bytes. */
long long d_status_bytes(pid_t, const char *field);
/* VmHWM counts from now (proc(5), clear_refs). */
void d_reset_peak(pid_t);
/*
 * A tool_result of a ceiling-size result: its content is n bytes, each b;
 * and the daemon's peak over base grew by at most 8x n (ASan's quarantine
 * added under ASan).
 */
void e2e_assert_content_bytes(const json_t *msg, size_t n, char b);
void e2e_expect_growth(long long base, long long peak, size_t n);

/* Helpers for the common shapes. */
/* The daemon's resident memory (stats.rssBytes), > 0. */
long long c_rss(struct client *);
json_t *c_session(struct client *, json_t *create_params);
json_t *c_add(struct client *, const char *sid, const char *id,
    const char *name, const char *input_json);
/* The params of each notification of `method` in a list, in order. */
json_t *e2e_filter(json_t *list, const char *method);
/* "id:reason" for each tool_result in a list, comma-separated. */
char *e2e_results(json_t *list);
/* The ToolDef JSON text -> object, failing the test on bad JSON. */
json_t *e2e_json(const char *);
/* o[key] as a string (NULL if absent or not one) and as an integer. */
const char *e2e_str(const json_t *o, const char *key);
long long e2e_int(const json_t *o, const char *key);
/* Of tool_result params: result.content, meta.reason, result.is_error. */
const char *e2e_content(const json_t *result_params);
const char *e2e_reason(const json_t *result_params);
bool e2e_is_error(const json_t *result_params);
/* A JSON-RPC error object's code. */
int e2e_code(const json_t *error);
/* A ping answered: the daemon still serves this client. */
void c_ping(struct client *);
/*
 * Whether the daemon can enforce the sandbox profile here (initialize's
 * capabilities.enforcement.sandbox.profiles): a host, a chroot or a
 * container may lack what one needs.
 */
bool c_can(struct client *, const char *profile);
/*
 * Whether this process has the capability in its effective set (a
 * container's root lacks some), and so an unconfined tool of its daemon.
 */
bool e2e_has_cap(int cap);
/*
 * For TestSuite(..., .fini = e2e_fini): a failed assertion leaves the test
 * before d_stop, so stop every daemon this test process started and did not
 * stop (SIGTERM, then SIGKILL), and through it every tool. PDEATHSIG would
 * kill them anyway when the process ends, but not gracefully.
 */
void e2e_fini(void);
/*
 * Time in tests (tests/README.md): a test waits for an event with one
 * generous guard, and every duration it chooses (a guard, an idle timeout,
 * a grace, a deadline) is scaled by one factor: $STEXEC_TEST_TIME_SCALE
 * (tests/run sets it), else STEXEC_TEST_BUILD_SCALE (3 in a sanitizer
 * build, 1 otherwise). The guards of c_read, c_response, c_wait, c_until,
 * c_call and d_wait_no_leftovers are scaled here; a test scales the rest.
 */
double e2e_scale(void);
/* ms (a guard, or a duration given to the daemon) times the factor. */
int e2e_ms(int ms);
/* The same for whole seconds (a daemon option in seconds), rounded up. */
int e2e_s(int s);
/* Milliseconds since the epoch. */
long long e2e_now_ms(void);
/* A whole file, NUL-terminated (malloc'd), or NULL. */
char *e2e_read_file(const char *path, size_t *len);

#endif
