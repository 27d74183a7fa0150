/*
 * libstexec: against a scripted fake server in this process (the replies
 * are written before the request is made, so no thread is needed: the
 * client does not care when bytes arrived), and against the real daemon
 * for subscribe/resume.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "e2e.h"
#include "stexec/client.h"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(client, .fini = e2e_fini);

struct fake {
	char dir[64];
	char path[96];
	int lfd;  /* listening */
	int fd;   /* the accepted client */
	char *buf;
	size_t len;
};

static void	fake_start(struct fake *);
static struct stexec *fake_connect(struct fake *);
static void	fake_accept(struct fake *);
static void	fake_send(struct fake *, const char *);
static json_t	*fake_recv(struct fake *);
static void	fake_stop(struct fake *);
static long long seq_of(const json_t *);

static void
fake_start(struct fake *f)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/stexec-client-XXXXXX");
	cr_assert(mkdtemp(f->dir) != NULL);
	snprintf(f->path, sizeof f->path, "%s/s.sock", f->dir);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(bind(f->lfd, (struct sockaddr *)&sun, sizeof sun) == 0);
	cr_assert(listen(f->lfd, 8) == 0);
	f->fd = -1;
}

/* The listen backlog lets connect() finish before accept(). */
static void
fake_accept(struct fake *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert(f->fd >= 0);
	f->len = 0;
}

static struct stexec *
fake_connect(struct fake *f)
{
	char err[512];
	struct stexec *c = stexec_connect(f->path, err, sizeof err);

	cr_assert(c != NULL, "%s", err);
	fake_accept(f);
	return c;
}

static void
fake_send(struct fake *f, const char *line)
{
	size_t len = strlen(line);

	cr_assert_eq(write(f->fd, line, len), (ssize_t)len);
	cr_assert_eq(write(f->fd, "\n", 1), 1);
}

/* The next line the client sent, parsed. */
static json_t *
fake_recv(struct fake *f)
{
	struct pollfd p = { .fd = f->fd, .events = POLLIN };
	json_error_t jerr;
	char *nl;
	json_t *j;
	ssize_t n;

	for (;;) {
		if (f->len > 0 && (nl = memchr(f->buf, '\n', f->len)) != NULL) {
			j = json_loadb(f->buf, (size_t)(nl - f->buf), 0, &jerr);
			cr_assert(j != NULL, "client sent bad JSON: %s",
			    jerr.text);
			f->len -= (size_t)(nl - f->buf) + 1;
			memmove(f->buf, nl + 1, f->len);
			return j;
		}
		cr_assert(poll(&p, 1, e2e_ms(5000)) == 1,
		    "client sent nothing");
		f->buf = realloc(f->buf, f->len + 65536);
		n = read(f->fd, f->buf + f->len, 65536);
		cr_assert(n > 0, "client closed");
		f->len += (size_t)n;
	}
}

static void
fake_stop(struct fake *f)
{
	char cmd[128];

	if (f->fd >= 0)
		close(f->fd);
	close(f->lfd);
	free(f->buf);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	cr_assert(system(cmd) == 0);
}

static long long
seq_of(const json_t *msg)
{
	return json_integer_value(json_object_get(json_object_get(msg,
	    "params"), "seq"));
}

Test(client, connect_errors_say_what_to_do)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char err[512], dir[64] = "/tmp/stexec-client-XXXXXX", path[96];
	struct stexec *c;
	int fd;

	c = stexec_connect("/nonexistent/s.sock", err, sizeof err);
	cr_assert_null(c);
	cr_assert_str_eq(err, "cannot connect to /nonexistent/s.sock: No such "
	    "file or directory — is stexecd running? Start it with: stexecd "
	    "--socket /nonexistent/s.sock");

	/* A socket file nobody listens on: stale. */
	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/s.sock", dir);
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0);
	close(fd);
	c = stexec_connect(path, err, sizeof err);
	cr_assert_null(c);
	cr_assert(strstr(err, "Connection refused — the socket is stale") !=
	    NULL, "%s", err);
	unlink(path);

	/*
	 * Nothing at $XDG_RUNTIME_DIR's socket: the system daemon's is tried
	 * next, here one of the test's own ($STEXEC_FALLBACK_SOCKET), so that
	 * a daemon serving the machine's /run/stexec cannot answer.
	 */
	unsetenv("STEXEC_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/nonexistent/run", 1);
	snprintf(path, sizeof path, "%s/system.sock", dir);
	setenv("STEXEC_FALLBACK_SOCKET", path, 1);
	c = stexec_connect(NULL, err, sizeof err);
	cr_assert_null(c, "connected to %s", c != NULL ? stexec_path(c) : "");
	cr_assert(strstr(err, "cannot connect to /nonexistent/run/stexec/"
	    "stexecd.sock (nor ") != NULL && strstr(err, path) != NULL &&
	    strstr(err, "Start it with: stexecd") != NULL, "%s", err);
	/* And reached when a daemon listens there. */
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0);
	cr_assert(listen(fd, 1) == 0);
	c = stexec_connect(NULL, err, sizeof err);
	cr_assert_not_null(c, "%s", err);
	cr_assert_str_eq(stexec_path(c), path);
	stexec_close(c);
	close(fd);
	unlink(path);
	unsetenv("STEXEC_FALLBACK_SOCKET");
	rmdir(dir);

	/* The default rules of doc/design.md §3. */
	setenv("STEXEC_SOCKET", "/x/env.sock", 1);
	cr_assert_eq(stexec_default_socket(path, sizeof path), 0);
	cr_assert_str_eq(path, "/x/env.sock");
	unsetenv("STEXEC_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/nonexistent/run", 1);
	cr_assert_eq(stexec_default_socket(path, sizeof path), 0);
	cr_assert_str_eq(path, "/nonexistent/run/stexec/stexecd.sock");
	/* A relative XDG_RUNTIME_DIR is ignored, by daemon and client alike. */
	setenv("XDG_RUNTIME_DIR", "relative/run", 1);
	cr_assert_eq(stexec_default_socket(path, sizeof path), 0);
	cr_assert_str_eq(path, "/run/stexec/stexecd.sock");
	unsetenv("XDG_RUNTIME_DIR");
	cr_assert_eq(stexec_default_socket(path, sizeof path), 0);
	cr_assert_str_eq(path, "/run/stexec/stexecd.sock");
}

Test(client, call_queues_notifications)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	json_t *r, *n, *req;

	fake_start(&f);
	c = fake_connect(&f);
	cr_assert(fcntl(stexec_fd(c), F_GETFD) & FD_CLOEXEC);
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"progress\",\"params\":"
	    "{\"sessionId\":\"s\",\"seq\":1,\"data\":\"a\\u0000b\"}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"state\",\"params\":"
	    "{\"sessionId\":\"s\",\"seq\":2}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":7}}");
	cr_assert_eq(stexec_call(c, "ping", json_object(), &r, &err), 0, "%s",
	    err.message);
	cr_assert_eq(json_integer_value(json_object_get(r, "x")), 7);
	json_decref(r);
	req = fake_recv(&f);
	cr_assert_str_eq(json_string_value(json_object_get(req, "method")),
	    "ping");
	cr_assert_eq(json_integer_value(json_object_get(req, "id")), 1);
	json_decref(req);

	/* Nothing was lost while waiting, and the order holds. */
	cr_assert(stexec_pending(c));
	n = stexec_next_notification(c, 0);
	cr_assert_not_null(n);
	cr_assert_eq(seq_of(n), 1);
	/* NUL in tool output survives (\u0000). */
	cr_assert_eq(json_string_length(json_object_get(json_object_get(n,
	    "params"), "data")), 3);
	json_decref(n);
	n = stexec_next_notification(c, 0);
	cr_assert_eq(seq_of(n), 2);
	json_decref(n);
	cr_assert_null(stexec_next_notification(c, 0));
	cr_assert(stexec_is_open(c));
	stexec_close(c);
	fake_stop(&f);
}

Test(client, rpc_errors_carry_code_message_data)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	json_t *r;

	fake_start(&f);
	c = fake_connect(&f);
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{"
	    "\"code\":-32602,\"message\":\"Invalid params: toolUse.input: "
	    "must be an object\","
	    "\"data\":{\"field\":\"toolUse.input\"}}}");
	cr_assert_eq(stexec_call(c, "addTool", json_object(), &r, &err), -1);
	cr_assert_null(r);
	cr_assert_eq(err.code, STEXEC_ERR_INVALID_PARAMS);
	cr_assert_str_eq(err.message, "Invalid params: toolUse.input: must be "
	    "an object");
	cr_assert_str_eq(json_string_value(json_object_get(err.data,
	    "field")), "toolUse.input");
	/* Reused without clearing: the old data is released. */
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{"
	    "\"code\":-32001,\"message\":\"Unknown session: s\"}}");
	cr_assert_eq(stexec_call(c, "status", NULL, NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_ERR_UNKNOWN_SESSION);
	cr_assert_null(err.data);
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, async_replies_out_of_order)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	struct pollfd p;
	json_t *m, *r;
	int64_t a, b;
	int n;

	fake_start(&f);
	c = fake_connect(&f);
	a = stexec_send(c, "drain", json_pack("{s:s}", "sessionId", "s"), &err);
	b = stexec_send(c, "ping", NULL, &err);
	cr_assert_eq(a, 1);
	cr_assert_eq(b, 2);
	cr_assert(!stexec_want_write(c));
	json_decref(fake_recv(&f));
	json_decref(fake_recv(&f));
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"turn_end\",\"params\":"
	    "{\"sessionId\":\"s\",\"seq\":1}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"turn\":1}}");

	/* The event-loop way: poll, read, take while pending. */
	p.fd = stexec_fd(c);
	p.events = stexec_poll_events(c);
	cr_assert_eq(poll(&p, 1, e2e_ms(5000)), 1);
	n = stexec_read_ready(c);
	cr_assert_eq(n, 3);
	cr_assert(stexec_pending(c));
	m = stexec_next_message(c, 0, &err);
	cr_assert_eq(stexec_message_id(m), b);
	json_decref(m);
	m = stexec_next_message(c, 0, &err);
	cr_assert_eq(stexec_message_id(m), -1);
	json_decref(m);
	m = stexec_next_message(c, 0, &err);
	cr_assert_eq(stexec_message_id(m), a);
	cr_assert_eq(stexec_reply_decode(m, &r, &err), 0);
	cr_assert_eq(json_integer_value(json_object_get(r, "turn")), 1);
	json_decref(r);
	json_decref(m);
	cr_assert(!stexec_pending(c));
	cr_assert_null(stexec_next_message(c, 0, &err));
	cr_assert_eq(err.code, STEXEC_CLIENT_ERR_TIMEOUT);

	/* wait_reply picks its own reply and leaves the rest queued. */
	a = stexec_send(c, "x", NULL, &err);
	b = stexec_send(c, "y", NULL, &err);
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"y\":1}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"x\":1}}");
	cr_assert_eq(stexec_wait_reply(c, a, 5000, &r, &err), 0);
	cr_assert_not_null(json_object_get(r, "x"));
	json_decref(r);
	cr_assert(stexec_pending(c));
	cr_assert_eq(stexec_wait_reply(c, b, 0, &r, &err), 0);
	cr_assert_not_null(json_object_get(r, "y"));
	json_decref(r);
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, timeout_drops_the_late_reply)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };

	fake_start(&f);
	c = fake_connect(&f);
	stexec_set_timeout(c, 100);
	cr_assert_eq(stexec_call(c, "drain", NULL, NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_CLIENT_ERR_TIMEOUT);
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{}}");
	/* Nobody waits for reply 1 any more: only the notification comes. */
	json_decref(stexec_next_notification(c, e2e_ms(5000)));
	cr_assert(!stexec_pending(c));
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, hangup_reports_the_daemons_last_words)
{
	const char *refusal = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{"
	    "\"code\":-32600,\"message\":\"Invalid Request: message longer "
	    "than 10 bytes\"}}";
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	char errbuf[512];
	int64_t a, b;
	json_t *m;

	fake_start(&f);
	c = fake_connect(&f);
	/* One request unanswered: the refusal with id null is its reply. */
	a = stexec_send(c, "ping", NULL, &err);
	json_decref(fake_recv(&f));
	fake_send(&f, refusal);
	close(f.fd);
	f.fd = -1;
	cr_assert_eq(stexec_wait_reply(c, a, 5000, NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_ERR_INVALID_REQUEST);
	cr_assert_str_eq(err.message, "Invalid Request: message longer than "
	    "10 bytes");
	cr_assert_null(stexec_next_message(c, 1000, &err));
	cr_assert_eq(err.code, STEXEC_CLIENT_ERR_IO);
	cr_assert(!stexec_is_open(c));
	cr_assert_eq(stexec_fd(c), -1);

	/* Two unanswered: it cannot be told whose; it says why we lost. */
	cr_assert_eq(stexec_reconnect(c, errbuf, sizeof errbuf), 0, "%s",
	    errbuf);
	fake_accept(&f);
	a = stexec_send(c, "drain", NULL, &err);
	b = stexec_send(c, "ping", NULL, &err);
	cr_assert(a > 0 && b > a);
	json_decref(fake_recv(&f));
	json_decref(fake_recv(&f));
	fake_send(&f, refusal);
	close(f.fd);
	f.fd = -1;
	cr_assert_eq(stexec_wait_reply(c, b, 5000, NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_CLIENT_ERR_IO);
	cr_assert_str_eq(err.message, "stexecd closed the connection: Invalid "
	    "Request: message longer than 10 bytes (-32600)");
	/* The refusal itself is there for whoever reads messages: id 0. */
	cr_assert_null(stexec_next_notification(c, 0));
	m = stexec_next_message(c, 0, &err);
	cr_assert_not_null(m);
	cr_assert_eq(stexec_message_id(m), 0);
	cr_assert_eq(stexec_reply_decode(m, NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_ERR_INVALID_REQUEST);
	json_decref(m);
	/* Writing to a closed connection fails; no SIGPIPE kills us. */
	cr_assert_eq(stexec_send(c, "ping", NULL, &err), -1);
	cr_assert_eq(err.code, STEXEC_CLIENT_ERR_IO);
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, no_sigpipe_on_a_peer_that_left)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	char big[65536];
	int i;

	fake_start(&f);
	c = fake_connect(&f);
	close(f.fd);
	f.fd = -1;
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	/* Keep writing until the kernel reports the hangup: EPIPE. */
	for (i = 0; i < 100 && stexec_is_open(c); i++)
		stexec_send(c, "ping", json_pack("{s:s}", "pad", big), &err);
	cr_assert(!stexec_is_open(c));
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, overlong_line_breaks_the_connection)
{
	struct fake f;
	struct stexec *c;
	size_t chunk = 1 << 20, sent = 0;
	char *junk = malloc(chunk);
	ssize_t n;

	fake_start(&f);
	c = fake_connect(&f);
	memset(junk, 'x', chunk);
	fcntl(f.fd, F_SETFL, O_NONBLOCK);
	while (stexec_is_open(c) && sent < (size_t)STEXEC_CLIENT_MAX_LINE +
	    2 * chunk) {
		n = write(f.fd, junk, chunk);
		if (n > 0)
			sent += (size_t)n;
		stexec_read_ready(c);
	}
	cr_assert(!stexec_is_open(c));
	cr_assert(strstr(stexec_last_error(c), "longer than") != NULL, "%s",
	    stexec_last_error(c));
	free(junk);
	stexec_close(c);
	fake_stop(&f);
}

Test(client, resubscribe_continues_exactly)
{
	struct fake f;
	struct stexec *c;
	struct stexec_error err = { 0 };
	char line[256], errbuf[512];
	uint64_t last;
	json_t *req, *n;
	int i;

	fake_start(&f);
	c = fake_connect(&f);
	/* subscribe since 0: lastSeq 3, replay 1..3, then live 4. */
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"
	    "{\"lastSeq\":3}}");
	for (i = 1; i <= 4; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"progress\",\"params\":{\"sessionId\":\"s\",\"seq\":%d}}",
		    i);
		fake_send(&f, line);
	}
	cr_assert_eq(stexec_subscribe(c, "s", 0, &last, &err), 0);
	cr_assert_eq(last, 3);
	req = fake_recv(&f);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(req,
	    "params"), "since")), 0);
	json_decref(req);
	n = stexec_next_notification(c, e2e_ms(5000));
	cr_assert_eq(seq_of(n), 1);
	json_decref(n);
	/* 2..4 arrive; the caller has taken only 1. */
	while (stexec_last_seq(c, "s") < 4)
		cr_assert(stexec_read_ready(c) >= 0);

	/* Reconnect: the queue survives; resume after 4, the last had. */
	cr_assert_eq(stexec_reconnect(c, errbuf, sizeof errbuf), 0, "%s",
	    errbuf);
	fake_accept(&f);
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":"
	    "{\"lastSeq\":6}}");
	/* A server that replays too much: 3 and 4 must be dropped. */
	for (i = 3; i <= 6; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"progress\",\"params\":{\"sessionId\":\"s\",\"seq\":%d}}",
		    i);
		fake_send(&f, line);
	}
	cr_assert_eq(stexec_resubscribe(c, &err), 0, "%s", err.message);
	req = fake_recv(&f);
	cr_assert_str_eq(json_string_value(json_object_get(req, "method")),
	    "subscribe");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(req,
	    "params"), "since")), 4);
	json_decref(req);
	for (i = 2; i <= 6; i++) {
		n = stexec_next_notification(c, e2e_ms(5000));
		cr_assert_not_null(n);
		cr_assert_eq(seq_of(n), i);
		json_decref(n);
	}
	cr_assert_null(stexec_next_notification(c, 100));
	cr_assert_eq(stexec_last_seq(c, "s"), 6);

	/* session_closed ends the subscription. */
	fake_send(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"session_closed\","
	    "\"params\":{\"sessionId\":\"s\",\"seq\":7}}");
	json_decref(stexec_next_notification(c, e2e_ms(5000)));
	cr_assert_eq(stexec_last_seq(c, "s"), 0);
	stexec_error_clear(&err);
	stexec_close(c);
	fake_stop(&f);
}

/* The real daemon: a subscriber that loses its connection misses nothing. */
Test(client, resume_against_the_daemon)
{
	struct daemon *d = d_start(NULL);
	struct stexec_error err = { 0 };
	struct client *other = c_open(d);
	struct stexec *c;
	char errbuf[512];
	const char *sid;
	json_t *r, *n, *sidj;
	long long want = 1;
	bool ended = false;

	c = stexec_connect(d->sock, errbuf, sizeof errbuf);
	cr_assert_not_null(c, "%s", errbuf);
	cr_assert_eq(stexec_call(c, "createSession", json_object(), &r, &err),
	    0, "%s", err.message);
	sidj = json_incref(json_object_get(r, "sessionId"));
	sid = json_string_value(sidj);
	json_decref(r);
	cr_assert_eq(stexec_subscribe(c, sid, 0, NULL, &err), 0);
	json_decref(c_add(other, sid, "a", "bash", "{\"command\":\"echo 1\"}"));
	n = stexec_next_notification(c, e2e_ms(5000));
	cr_assert_eq(seq_of(n), want++);
	json_decref(n);

	/* Gone for a while; the session goes on. */
	cr_assert_eq(stexec_reconnect(c, errbuf, sizeof errbuf), 0);
	json_decref(c_add(other, sid, "b", "bash", "{\"command\":\"echo 2\"}"));
	json_decref(c_call(other, "drain", json_pack("{s:s}", "sessionId",
	    sid)));
	cr_assert_eq(stexec_resubscribe(c, &err), 0, "%s", err.message);
	while (!ended) {
		n = stexec_next_notification(c, e2e_ms(5000));
		cr_assert_not_null(n, "stream stopped after seq %lld",
		    want - 1);
		cr_assert_eq(seq_of(n), want, "seq %lld, want %lld", seq_of(n),
		    want);
		want++;
		ended = strcmp(json_string_value(json_object_get(n, "method")),
		    "turn_end") == 0;
		json_decref(n);
	}
	cr_assert_eq(stexec_call(c, "closeSession", json_pack("{s:s}",
	    "sessionId", sid), NULL, &err), 0);
	json_decref(sidj);
	stexec_error_clear(&err);
	stexec_close(c);
	c_close(other);
	d_stop(d);
}
