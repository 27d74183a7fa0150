/*
 * The whole request path (conn -> methods -> session -> executor) in one
 * process: the daemon's own objects on a private event base, with
 * proc_fake.c in place of the supervisor, and the fuzzer's bytes as what
 * clients write on two socketpair connections. Each line goes out, the loop
 * runs a few iterations, and every line the daemon writes back must be a
 * JSON-RPC 2.0 response or notification. A crash, a leak, a fatal() or an
 * undefined behaviour anywhere on the way is a finding.
 *
 * STEXEC_TRACE=1 prints the daemon's log and every line it writes.
 *
 * The bytes, line by line (the last line may lack its newline):
 *   "$SID" anywhere   becomes the sessionId createSession last gave
 *   "@2" first        the line is written on the second connection
 *   "@close2"         the second connection goes away
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "net/conn.h"
#include "jsonrpc.h"
#include "log.h"
#include "rpc/methods.h"
#include "ndjson.h"
#include "supervisor/proc.h"
#include "session/registry.h"
#include "session/job.h"
#include "session/session.h"
#include "util.h"

/* Small, so that the fuzzer reaches the too-long line too. */
#define FUZZ_DAEMON_MAX_MESSAGE 4096
#define FUZZ_DAEMON_SPINS 6
#define FUZZ_DAEMON_CONNS 2

/* The client's end of one connection. */
struct fuzz_daemon_client {
	int fd;
	struct ndjson in;
	json_t *unanswered; /* compact id -> requests sent, not yet answered */
};

static struct event_base *fuzz_daemon_base;
static struct fuzz_daemon_client fuzz_daemon_clients[FUZZ_DAEMON_CONNS];
static char fuzz_daemon_sid[64];
static bool fuzz_daemon_trace;

static void	fuzz_daemon_connect(struct fuzz_daemon_client *);
static void	fuzz_daemon_hangup(struct fuzz_daemon_client *);
static void	fuzz_daemon_expect(struct fuzz_daemon_client *, const char *,
		    size_t);
static void	fuzz_daemon_count(struct fuzz_daemon_client *, const json_t *,
		    int);
static void	fuzz_daemon_message(struct fuzz_daemon_client *, json_t *,
		    bool);
static void	fuzz_daemon_check(struct fuzz_daemon_client *, const char *,
		    size_t);
static bool	fuzz_daemon_read(struct fuzz_daemon_client *);
static void	fuzz_daemon_spin(unsigned);
static void	fuzz_daemon_write(struct fuzz_daemon_client *, const char *,
		    size_t);
static void	fuzz_daemon_line(const char *, size_t, bool);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct proc_config pcfg = { 0 };
	char err[256];

	fuzz_daemon_trace = getenv("STEXEC_TRACE") != NULL;
	log_set_level(fuzz_daemon_trace ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	if ((fuzz_daemon_base = event_base_new()) == NULL)
		fatal("cannot create the event loop");
	if (proc_init(fuzz_daemon_base, &pcfg, err, sizeof err) != 0 ||
	    registry_load_builtin("/nonexistent/stexec-tool", err,
	    sizeof err) != 0)
		fatal("%s", err);
	return 0;
}

static void
fuzz_daemon_connect(struct fuzz_daemon_client *cl)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) != 0)
		fatal("socketpair: %s", strerror(errno));
	conn_accept(sv[0]);
	cl->fd = sv[1];
	ndjson_init(&cl->in, SIZE_MAX / 4);
	cl->unanswered = json_object();
}

static void
fuzz_daemon_hangup(struct fuzz_daemon_client *cl)
{
	if (cl->fd < 0)
		return;
	close(cl->fd);
	cl->fd = -1;
	ndjson_free(&cl->in);
	json_decref(cl->unanswered);
	cl->unanswered = NULL;
}

/*
 * Count the requests of a line as the daemon reads it: one, or one per
 * element of a batch it will execute; only ids it can answer with count.
 */
static void
fuzz_daemon_expect(struct fuzz_daemon_client *cl, const char *line,
    size_t len)
{
	struct jsonrpc_msg msg, el;
	size_t i;

	jsonrpc_decode(line, len, &msg);
	if (msg.kind == JSONRPC_BATCH && json_array_size(msg.root) <= 100)
		for (i = 0; i < json_array_size(msg.root); i++) {
			jsonrpc_decode_value(json_array_get(msg.root, i), &el);
			fuzz_daemon_count(cl, el.id, 1);
			jsonrpc_msg_clear(&el);
		}
	else if (msg.kind != JSONRPC_BATCH)
		fuzz_daemon_count(cl, msg.id, 1);
	jsonrpc_msg_clear(&msg);
}

/* Add n to the requests with this id not yet answered; a reply is -1. */
static void
fuzz_daemon_count(struct fuzz_daemon_client *cl, const json_t *idv, int n)
{
	json_int_t have;
	char *id;

	if (idv == NULL || json_is_null(idv))
		return;
	id = json_dumps(idv, JSON_COMPACT | JSON_ENCODE_ANY);
	have = json_integer_value(json_object_get(cl->unanswered, id));
	FUZZ_CHECK(have + n >= 0, "a reply to no request, or a second");
	json_object_set_new(cl->unanswered, id, json_integer(have + n));
	free(id);
}

/*
 * A line from the daemon: one JSON-RPC 2.0 response or notification, or a
 * batch's array of responses; a response answers a request of this
 * connection not answered yet.
 */
static void
fuzz_daemon_check(struct fuzz_daemon_client *cl, const char *line,
    size_t len)
{
	json_error_t jerr;
	json_t *m, *el;
	size_t i;

	if (fuzz_daemon_trace)
		fprintf(stderr, "<- %.*s\n", (int)len, line);
	m = json_loadb(line, len, 0, &jerr);
	if (m == NULL)
		fprintf(stderr, "fuzz_daemon: %s in %.*s\n", jerr.text,
		    (int)(len > 500 ? 500 : len), line);
	if (json_is_array(m)) {
		FUZZ_CHECK(json_array_size(m) > 0, "an empty batch reply");
		json_array_foreach(m, i, el)
			fuzz_daemon_message(cl, el, true);
	} else
		fuzz_daemon_message(cl, m, false);
	json_decref(m);
}

static void
fuzz_daemon_message(struct fuzz_daemon_client *cl, json_t *m, bool in_batch)
{
	json_t *v, *r;

	FUZZ_CHECK(json_is_object(m), "the daemon wrote a non-object");
	v = json_object_get(m, "jsonrpc");
	FUZZ_CHECK(json_is_string(v) && strcmp(json_string_value(v), "2.0") ==
	    0, "the daemon wrote no \"jsonrpc\": \"2.0\"");
	if ((v = json_object_get(m, "method")) != NULL) {
		FUZZ_CHECK(!in_batch, "a notification inside a batch reply");
		FUZZ_CHECK(json_is_string(v) && json_object_get(m, "id") ==
		    NULL, "a malformed notification");
		r = json_object_get(m, "params");
		FUZZ_CHECK(json_is_object(r), "a notification without params");
		/* S2, S10: a tool_result carries a paste-ready result. */
		if (strcmp(json_string_value(v), "tool_result") == 0)
			FUZZ_CHECK(json_is_object(json_object_get(r, "result")),
			    "a tool_result without result");
	} else {
		FUZZ_CHECK(json_object_get(m, "id") != NULL,
		    "a response without id");
		fuzz_daemon_count(cl, json_object_get(m, "id"), -1);
		v = json_object_get(m, "error");
		r = json_object_get(m, "result");
		FUZZ_CHECK((v == NULL) != (r == NULL),
		    "a response needs result or error, not both");
		if (v != NULL)
			FUZZ_CHECK(json_is_integer(json_object_get(v, "code")) &&
			    json_string_length(json_object_get(v,
			    "message")) > 0, "an error without code or message");
		/* Keep the id a later "$SID" stands for. */
		v = json_object_get(r, "sessionId");
		if (json_is_string(v) && json_string_length(v) <
		    sizeof fuzz_daemon_sid)
			strcpy(fuzz_daemon_sid, json_string_value(v));
	}
}

/* Read what the daemon wrote, and check each line; false if nothing came. */
static bool
fuzz_daemon_read(struct fuzz_daemon_client *cl)
{
	enum ndjson_status st;
	bool got = false;
	ssize_t n;
	size_t len;
	char *line;

	if (cl->fd < 0)
		return false;
	for (;;) {
		n = read(cl->fd, ndjson_space(&cl->in, 65536), 65536);
		if (n <= 0)
			break;
		got = true;
		ndjson_commit(&cl->in, (size_t)n);
		while ((st = ndjson_next(&cl->in, &line, &len)) == NDJSON_LINE)
			fuzz_daemon_check(cl, line, len);
	}
	FUZZ_CHECK(n == 0 || errno == EAGAIN, "read from the daemon failed");
	return got;
}

/*
 * Run the loop up to `times` passes, reading as a client does; stop early
 * once two passes in a row brought nothing and no process is left to tick.
 */
static void
fuzz_daemon_spin(unsigned times)
{
	unsigned quiet = 0;
	bool got;
	size_t i;

	while (times-- > 0 && quiet < 2) {
		event_base_loop(fuzz_daemon_base, EVLOOP_NONBLOCK);
		got = false;
		for (i = 0; i < FUZZ_DAEMON_CONNS; i++)
			got |= fuzz_daemon_read(&fuzz_daemon_clients[i]);
		quiet = got || proc_running() > 0 ? 0 : quiet + 1;
	}
}

/*
 * Write all of it, letting the daemon read when the socket is full; give
 * up as a client would when it stops reading (e.g. after a too-long line).
 */
static void
fuzz_daemon_write(struct fuzz_daemon_client *cl, const char *data,
    size_t len)
{
	unsigned stuck = 0;
	ssize_t n;

	while (len > 0 && cl->fd >= 0 && stuck < FUZZ_DAEMON_SPINS) {
		n = send(cl->fd, data, len, MSG_NOSIGNAL);
		if (n > 0) {
			data += n;
			len -= (size_t)n;
			stuck = 0;
		} else if (n < 0 && errno == EAGAIN) {
			fuzz_daemon_spin(1);
			stuck++;
		} else
			break; /* the daemon closed this connection */
	}
}

/* One line of the fuzzer's, rewritten as the header says, then sent. */
static void
fuzz_daemon_line(const char *line, size_t len, bool newline)
{
	struct fuzz_daemon_client *cl = &fuzz_daemon_clients[0];
	struct buf b = { 0 };
	const char *p, *end = line + len;

	if (len == 7 && memcmp(line, "@close2", 7) == 0) {
		fuzz_daemon_hangup(&fuzz_daemon_clients[1]);
		fuzz_daemon_spin(FUZZ_DAEMON_SPINS);
		return;
	}
	if (len >= 2 && memcmp(line, "@2", 2) == 0) {
		cl = &fuzz_daemon_clients[1];
		line += 2;
	}
	while ((p = memmem(line, (size_t)(end - line), "$SID", 4)) != NULL) {
		buf_add(&b, line, (size_t)(p - line));
		buf_addstr(&b, fuzz_daemon_sid);
		line = p + 4;
	}
	buf_add(&b, line, (size_t)(end - line));
	if (newline)
		buf_add(&b, "\n", 1);
	if (fuzz_daemon_trace)
		fprintf(stderr, "-> %s%s", cl == fuzz_daemon_clients ? "" : "@2",
		    b.data);
	/* Only a whole line is a request; count it before it can be answered. */
	if (newline && cl->fd >= 0)
		fuzz_daemon_expect(cl, b.data, b.len - 1);
	fuzz_daemon_write(cl, b.data, b.len);
	buf_free(&b);
	fuzz_daemon_spin(FUZZ_DAEMON_SPINS);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session_config scfg = { 0 };
	struct methods_config mcfg = { 0 };
	struct job_config jcfg = { 4096, 2 };
	const char *p = (const char *)data, *end = p + size, *nl;
	size_t i;

	scfg.retention_bytes = 64 * 1024;
	scfg.max_sessions = 4;
	scfg.max_tools_per_turn = 64;
	scfg.base_env = json_pack("{s:s}", "PATH", "/usr/bin:/bin");
	scfg.base_cwd = "/";
	scfg.base = fuzz_daemon_base;
	session_init(&scfg);
	job_init(fuzz_daemon_base, &jcfg);
	conn_init(fuzz_daemon_base, FUZZ_DAEMON_MAX_MESSAGE, &methods_conn_ops);
	mcfg.max_message = FUZZ_DAEMON_MAX_MESSAGE;
	methods_init(&mcfg);
	fuzz_daemon_sid[0] = '\0';
	for (i = 0; i < FUZZ_DAEMON_CONNS; i++)
		fuzz_daemon_connect(&fuzz_daemon_clients[i]);

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL) {
			fuzz_daemon_line(p, (size_t)(end - p), false);
			break;
		}
		fuzz_daemon_line(p, (size_t)(nl - p), true);
	}
	/* Let running tools finish, as far as they will by themselves. */
	fuzz_daemon_spin(4 * FUZZ_DAEMON_SPINS);

	/* The daemon's shutdown: every session, tool and connection. */
	session_shutdown();
	conn_shutdown();
	fuzz_daemon_spin(1);
	for (i = 0; i < FUZZ_DAEMON_CONNS; i++)
		fuzz_daemon_hangup(&fuzz_daemon_clients[i]);
	FUZZ_CHECK(proc_running() == 0, "a process outlived the shutdown");
	FUZZ_CHECK(session_count() == 0 && conn_count() == 0,
	    "a session or connection outlived the shutdown");
	json_decref(scfg.base_env);
	return 0;
}
