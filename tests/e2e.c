/* End-to-end test support: a real daemon, a blocking client. See e2e.h. */
#include "e2e.h"
#include "launch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* Daemons started and not yet stopped, for e2e_fini. */
static struct daemon *e2e_live[16];

static bool	e2e_has_tag(pid_t, const char *);
static int	e2e_scan(struct daemon *, bool);
static void	c_fill(struct client *, int);
static json_t	*c_read_until(struct client *, long long);
static json_t	*c_next(struct client *, long long);
static json_t	*c_take_response(struct client *, int);
static bool	c_is_tool(const json_t *, const char *, const char *,
		    const char *);
static void	e2e_track(struct daemon *, bool);

const char *
e2e_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

long long
e2e_int(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

const char *
e2e_content(const json_t *result_params)
{
	return e2e_str(json_object_get(result_params, "result"), "content");
}

const char *
e2e_reason(const json_t *result_params)
{
	return e2e_str(json_object_get(result_params, "meta"), "reason");
}

bool
e2e_is_error(const json_t *result_params)
{
	return json_is_true(json_object_get(json_object_get(result_params,
	    "result"), "is_error"));
}

int
e2e_code(const json_t *error)
{
	return (int)e2e_int(error, "code");
}

void
c_ping(struct client *c)
{
	json_decref(c_call(c, "ping", NULL));
}

bool
e2e_has_cap(int cap)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	cr_assert(f != NULL);
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> cap) & 1;
}

bool
c_can(struct client *c, const char *profile)
{
	json_t *caps = c_call(c, "initialize", json_object()), *p;
	bool yes = false;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(json_object_get(
	    json_object_get(caps, "capabilities"), "enforcement"), "sandbox"),
	    "profiles"), i, p)
		yes = yes || strcmp(json_string_value(p), profile) == 0;
	json_decref(caps);
	return yes;
}

#ifndef STEXEC_TEST_BUILD_SCALE
#define STEXEC_TEST_BUILD_SCALE 1
#endif

double
e2e_scale(void)
{
	static double scale;
	const char *v;
	char *end;

	if (scale > 0)
		return scale;
	scale = STEXEC_TEST_BUILD_SCALE;
	if ((v = getenv("STEXEC_TEST_TIME_SCALE")) != NULL && *v != '\0') {
		scale = strtod(v, &end);
		cr_assert(*end == '\0' && scale >= 1 && scale <= 100,
		    "STEXEC_TEST_TIME_SCALE=%s: a factor from 1 to 100 was "
		    "expected", v);
	}
	return scale;
}

int
e2e_ms(int ms)
{
	return (int)(ms * e2e_scale() + 0.5);
}

int
e2e_s(int s)
{
	double v = s * e2e_scale();

	return (int)v < v ? (int)v + 1 : (int)v;
}

long long
e2e_now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/*
 * Run the daemon (behind wrapper, if any) on d's paths, then wait until it
 * accepts a connection (a stale socket file may be there from the start:
 * d_restart).
 */
static void
d_spawn(struct daemon *d, const char *const *wrapper, const char *arg,
    va_list ap)
{
	const char *args[96];
	char tagvar[96], err[256];
	size_t n = 0;
	int status, k;

	args[n++] = "--log-level";
	args[n++] = "debug";
	/* A pattern compiles aside under a deadline (50 ms by default) that a
	 * sanitized daemon's fork on a loaded machine can overrun; tests give
	 * it room, and those about the deadline set their own after this. */
	args[n++] = "--pattern-deadline-ms";
	args[n++] = "10000";
	for (; arg != NULL && n < 95; arg = va_arg(ap, const char *))
		args[n++] = arg;
	args[n] = NULL;
	/* Every process the daemon starts inherits the tag. */
	snprintf(tagvar, sizeof tagvar, "STEXEC_E2E_TAG=%s", d->tag);
	d->pid = launch_daemon(wrapper, d->sock, d->out, d->log, tagvar, args,
	    err, sizeof err);
	cr_assert(d->pid > 0, "%s", err);
	d->exited = false;
	/* Generous: a wrapper such as valgrind starts slowly. */
	if ((k = launch_wait_serving(d->pid, d->sock, e2e_ms(30000),
	    &status)) == -1) {
		d->exited = true;
		d->status = status;
		cr_assert_fail("the daemon exited (status %#x) before serving "
		    "%s; see %s", status, d->sock, d->log);
	}
	cr_assert(k == 0, "the daemon did not serve %s within %d ms; see %s",
	    d->sock, e2e_ms(30000), d->log);
}

static void
e2e_track(struct daemon *d, bool live)
{
	size_t i;

	for (i = 0; i < sizeof e2e_live / sizeof *e2e_live; i++)
		if (e2e_live[i] == (live ? NULL : d)) {
			e2e_live[i] = live ? d : NULL;
			return;
		}
	/* An untracked daemon would outlive a failed assertion. */
	cr_assert(!live, "more than %zu daemons at once: grow e2e_live",
	    sizeof e2e_live / sizeof *e2e_live);
}

void
e2e_fini(void)
{
	struct daemon *d;
	bool killed;
	size_t i;

	for (i = 0; i < sizeof e2e_live / sizeof *e2e_live; i++) {
		if ((d = e2e_live[i]) == NULL)
			continue;
		e2e_live[i] = NULL;
		/* Not started (launch_daemon failed): nothing to stop. */
		if (!d->exited && d->pid > 0) {
			launch_stop(d->pid, e2e_ms(5000), &killed);
			d->exited = true;
		}
		d_kill_leftovers(d);
	}
}

static struct daemon *
d_startv(const char *const *wrapper, const char *arg, va_list ap)
{
	struct daemon *d = calloc(1, sizeof *d);

	snprintf(d->dir, sizeof d->dir, "/tmp/stexec-e2e-XXXXXX");
	cr_assert(mkdtemp(d->dir) != NULL);
	snprintf(d->sock, sizeof d->sock, "%s/s.sock", d->dir);
	snprintf(d->out, sizeof d->out, "%s/out", d->dir);
	snprintf(d->log, sizeof d->log, "%s/daemon.log", d->dir);
	snprintf(d->tag, sizeof d->tag, "%ld-%ld", (long)getpid(),
	    (long)e2e_now_ms());
	e2e_track(d, true);
	d_spawn(d, wrapper, arg, ap);
	return d;
}

struct daemon *
d_start(const char *arg, ...)
{
	struct daemon *d;
	va_list ap;

	va_start(ap, arg);
	d = d_startv(NULL, arg, ap);
	va_end(ap);
	return d;
}

struct daemon *
d_start_wrapped(const char *const *wrapper, const char *arg, ...)
{
	struct daemon *d;
	va_list ap;

	va_start(ap, arg);
	d = d_startv(wrapper, arg, ap);
	va_end(ap);
	return d;
}

void
d_restart(struct daemon *d, const char *arg, ...)
{
	va_list ap;

	cr_assert(d->exited, "d_restart: the daemon still runs");
	va_start(ap, arg);
	d_spawn(d, NULL, arg, ap);
	va_end(ap);
}

void
d_kill(struct daemon *d, int sig)
{
	int status;

	cr_assert(!d->exited);
	kill(d->pid, sig);
	cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
	d->exited = true;
	d->status = status;
}

/* Does pid's environment hold STEXEC_E2E_TAG=tag? */
static bool
e2e_has_tag(pid_t pid, const char *tag)
{
	char path[64], buf[65536], want[96];
	size_t n, off;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);

		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	snprintf(want, sizeof want, "STEXEC_E2E_TAG=%s", tag);
	for (off = 0; off < n; off += strlen(buf + off) + 1)
		if (strcmp(buf + off, want) == 0)
			return true;
	return false;
}

/* Count (and with kill_them, SIGKILL) the tool processes left. */
static int
e2e_scan(struct daemon *d, bool kill_them)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;
	char path[64], comm[32], state = 0;
	int count = 0;
	long ppid;
	pid_t pid;
	FILE *f;

	cr_assert(dir != NULL);
	while ((de = readdir(dir)) != NULL) {
		pid = (pid_t)atol(de->d_name);
		if (pid <= 0 || pid == d->pid || !e2e_has_tag(pid, d->tag))
			continue;
		/* A zombie not yet reaped is dead: it does not count. */
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "re")) != NULL) {
			if (fscanf(f, "%*d (%31[^)]) %c %ld", comm, &state,
			    &ppid) != 3)
				state = 0;
			fclose(f);
		}
		/* The running daemon's sentinel is the daemon's, not a tool. */
		if (state != 0 && !d->exited && ppid == (long)d->pid &&
		    strcmp(comm, "stexec-sentinel") == 0)
			continue;
		if (state != 'Z') {
			count++;
			if (kill_them)
				kill(pid, SIGKILL);
		}
	}
	closedir(dir);
	return count;
}

int
d_leftovers(struct daemon *d)
{
	return e2e_scan(d, false);
}

int
d_kill_leftovers(struct daemon *d)
{
	return e2e_scan(d, true);
}

bool
d_wait_no_leftovers(struct daemon *d, int ms)
{
	long long until = e2e_now_ms() + e2e_ms(ms);

	while (d_leftovers(d) > 0) {
		if (e2e_now_ms() > until)
			return false;
		usleep(5000);
	}
	return true;
}

/* Its sentinel's pid (a child named stexec-sentinel), or 0. */
pid_t
d_sentinel(struct daemon *d)
{
	char path[64], comm[32];
	struct dirent *de;
	pid_t pid, found = 0;
	long ppid;
	DIR *dir;
	FILE *f;

	cr_assert((dir = opendir("/proc")) != NULL);
	while (found == 0 && (de = readdir(dir)) != NULL) {
		if ((pid = (pid_t)atol(de->d_name)) <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		if (fscanf(f, "%*d (%31[^)]) %*c %ld", comm, &ppid) == 2 &&
		    ppid == (long)d->pid && strcmp(comm, "stexec-sentinel") ==
		    0)
			found = pid;
		fclose(f);
	}
	closedir(dir);
	return found;
}

const char *
d_path(struct daemon *d, const char *name)
{
	static char path[512];

	snprintf(path, sizeof path, "%s/%s", d->dir, name);
	return path;
}

int
d_terminate(struct daemon *d)
{
	bool killed;

	if (d->exited)
		return d->status;
	/* 30 s: under valgrind the exit leak check takes a while. */
	d->status = launch_stop(d->pid, e2e_ms(30000), &killed);
	d->exited = true;
	/* Killed, it leaves nothing behind a failed test. */
	cr_assert(!killed, "the daemon did not exit on SIGTERM; see %s",
	    d->log);
	return d->status;
}

void
d_stop(struct daemon *d)
{
	int status = d_terminate(d);
	char cmd[600], *log;
	size_t len = 0;

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* Its last words say why, and the directory is kept. */
		log = e2e_read_file(d->log, &len);
		cr_assert_fail("the daemon did not exit 0 (status %#x); see %s; "
		    "it ends with:\n%s", status, d->log, log == NULL ? "" :
		    log + (len > 3000 ? len - 3000 : 0));
	}
	cr_assert_eq(d_leftovers(d), 0, "tool processes outlived the daemon");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", d->dir);
	e2e_track(d, false);
	free(d);
}

struct client *
c_open(struct daemon *d)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", d->sock);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0,
	    "connect: %s", strerror(errno));
	return c_adopt(fd);
}

struct client *
c_adopt(int fd)
{
	struct client *c = calloc(1, sizeof *c);

	c->fd = fd;
	c->queue = json_array();
	c->responses = json_array();
	c->next_id = 1;
	return c;
}

void
c_close(struct client *c)
{
	close(c->fd);
	json_decref(c->queue);
	json_decref(c->responses);
	json_decref(c->last_error);
	free(c->buf);
	free(c);
}

void
c_send_raw(struct client *c, const char *line)
{
	size_t len = strlen(line), off = 0;
	ssize_t n;

	while (off < len) {
		n = write(c->fd, line + off, len - off);
		cr_assert(n > 0 || errno == EINTR, "write: %s", strerror(errno));
		if (n > 0)
			off += (size_t)n;
	}
	cr_assert_eq(write(c->fd, "\n", 1), 1);
}

/* Read what the socket has, waiting up to ms for something. */
static void
c_fill(struct client *c, int ms)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return;
	if (c->cap - c->len < 65536) {
		c->cap = c->cap * 2 + 65536;
		c->buf = realloc(c->buf, c->cap);
	}
	n = read(c->fd, c->buf + c->len, c->cap - c->len);
	if (n > 0)
		c->len += (size_t)n;
	else if (n == 0)
		c->eof = true;
}

json_t *
c_read(struct client *c, int timeout_ms)
{
	return c_read_until(c, e2e_now_ms() + e2e_ms(timeout_ms));
}

void
c_keep(struct client *c, json_t *msg)
{
	json_array_append_new(json_object_get(msg, "id") != NULL ?
	    c->responses : c->queue, msg);
}

void
c_drop(struct client *c, json_t *msg)
{
	if (msg != NULL && json_object_get(msg, "id") != NULL)
		c_keep(c, msg);
	else
		json_decref(msg);
}

/* The next notification off the socket, responses kept; NULL at the end. */
static json_t *
c_next(struct client *c, long long until)
{
	json_t *msg;

	while ((msg = c_read_until(c, until)) != NULL) {
		if (json_object_get(msg, "id") == NULL)
			return msg;
		json_array_append_new(c->responses, msg);
	}
	return NULL;
}

/* A kept response: the oldest (id < 0), or the one of id; else NULL. */
static json_t *
c_take_response(struct client *c, int id)
{
	json_t *msg;
	size_t i;

	json_array_foreach(c->responses, i, msg) {
		if (id >= 0 && e2e_int(msg, "id") != id)
			continue;
		json_incref(msg);
		json_array_remove(c->responses, i);
		return msg;
	}
	return NULL;
}

/* c_read to an absolute deadline (e2e_now_ms). */
static json_t *
c_read_until(struct client *c, long long until)
{
	json_error_t jerr;
	char *nl;
	json_t *j;
	size_t n;

	for (;;) {
		/* Only the new bytes are searched: lines may be 100 MB. */
		if (c->len > c->scanned && (nl = memchr(c->buf + c->scanned,
		    '\n', c->len - c->scanned)) != NULL) {
			n = (size_t)(nl - c->buf);
			c->scanned = 0;
			/* Tool output may hold NULs, sent as \u0000. */
			j = json_loadb(c->buf, n, JSON_ALLOW_NUL, &jerr);
			cr_assert(j != NULL, "the daemon sent bad JSON: %s: %.*s",
			    jerr.text, (int)(n > 200 ? 200 : n), c->buf);
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return j;
		}
		c->scanned = c->len;
		if (c->eof)
			return NULL;
		/* Past the deadline, still take what has already come. */
		if (e2e_now_ms() >= until) {
			n = c->len;
			c_fill(c, 0);
			if (c->len == n)
				return NULL;
			continue;
		}
		c_fill(c, (int)(until - e2e_now_ms()));
	}
}

json_t *
c_response(struct client *c, int timeout_ms)
{
	long long until = e2e_now_ms() + e2e_ms(timeout_ms);
	json_t *msg;

	if ((msg = c_take_response(c, -1)) != NULL)
		return msg;
	for (;;) {
		msg = c_read_until(c, until);
		if (msg == NULL || json_object_get(msg, "id") != NULL)
			return msg;
		json_array_append_new(c->queue, msg);
	}
}

json_t *
c_response_to(struct client *c, int id, int timeout_ms)
{
	long long until = e2e_now_ms() + e2e_ms(timeout_ms);
	json_t *msg;

	while ((msg = c_take_response(c, id)) == NULL) {
		if ((msg = c_read_until(c, until)) == NULL)
			return NULL;
		c_keep(c, msg);
	}
	return msg;
}

static json_t *
c_request(struct client *c, const char *method, json_t *params,
    bool want_error)
{
	int id = c->next_id++;
	json_t *req, *msg, *out;
	char *text;

	req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", id,
	    "method", method);
	if (params != NULL)
		json_object_set_new(req, "params", params);
	text = json_dumps(req, JSON_COMPACT);
	c_send_raw(c, text);
	free(text);
	json_decref(req);
	/* Another request's answer (one sent raw) waits for c_response. */
	msg = c_response_to(c, id, 30000);
	cr_assert(msg != NULL, "no reply to %s", method);
	if (want_error) {
		out = json_object_get(msg, "error");
		cr_assert(out != NULL, "%s succeeded, an error was expected",
		    method);
	} else {
		out = json_object_get(msg, "result");
		if (out == NULL) {
			text = json_dumps(msg, JSON_COMPACT);
			cr_assert_fail("%s failed: %s", method, text);
		}
	}
	json_incref(out);
	json_decref(msg);
	return out;
}

json_t *
c_call(struct client *c, const char *method, json_t *params)
{
	return c_request(c, method, params, false);
}

json_t *
c_call_error(struct client *c, const char *method, json_t *params)
{
	return c_request(c, method, params, true);
}

json_t *
c_wait(struct client *c, const char *method, int timeout_ms)
{
	long long until = e2e_now_ms() + e2e_ms(timeout_ms);
	json_t *msg;
	size_t i;

	for (i = 0; i < json_array_size(c->queue); i++) {
		msg = json_array_get(c->queue, i);
		if (strcmp(json_string_value(json_object_get(msg, "method")),
		    method) == 0) {
			json_incref(msg);
			json_array_remove(c->queue, i);
			return msg;
		}
	}
	for (;;) {
		msg = c_next(c, until);
		cr_assert(msg != NULL, "no %s notification within %d ms", method,
		    e2e_ms(timeout_ms));
		if (strcmp(e2e_str(msg, "method"), method) == 0)
			return msg;
		json_array_append_new(c->queue, msg);
	}
}

static bool
c_is_tool(const json_t *msg, const char *method, const char *id,
    const char *status)
{
	const json_t *p = json_object_get(msg, "params");

	return strcmp(e2e_str(msg, "method"), method) == 0 &&
	    e2e_str(p, "toolUseId") != NULL &&
	    strcmp(e2e_str(p, "toolUseId"), id) == 0 && (status == NULL ||
	    (e2e_str(p, "status") != NULL &&
	    strcmp(e2e_str(p, "status"), status) == 0));
}

json_t *
c_wait_tool(struct client *c, const char *method, const char *tool_use_id,
    const char *status, int timeout_ms)
{
	long long until = e2e_now_ms() + e2e_ms(timeout_ms);
	json_t *msg;
	size_t i;

	json_array_foreach(c->queue, i, msg) {
		if (!c_is_tool(msg, method, tool_use_id, status))
			continue;
		json_incref(msg);
		json_array_remove(c->queue, i);
		return msg;
	}
	for (;;) {
		msg = c_next(c, until);
		cr_assert(msg != NULL, "no %s %s%s%s within %d ms", method,
		    tool_use_id, status != NULL ? " " : "", status != NULL ?
		    status : "", e2e_ms(timeout_ms));
		if (c_is_tool(msg, method, tool_use_id, status))
			return msg;
		json_array_append_new(c->queue, msg);
	}
}

json_t *
c_until(struct client *c, const char *method, int timeout_ms)
{
	long long until = e2e_now_ms() + e2e_ms(timeout_ms);
	json_t *list = json_array(), *msg;
	size_t i;

	for (i = 0; i < json_array_size(c->queue); i++) {
		msg = json_array_get(c->queue, i);
		json_array_append(list, msg);
		if (strcmp(json_string_value(json_object_get(msg, "method")),
		    method) == 0) {
			json_array_remove(c->queue, i);
			while (i-- > 0)
				json_array_remove(c->queue, 0);
			return list;
		}
	}
	json_array_clear(c->queue);
	for (;;) {
		msg = c_next(c, until);
		cr_assert(msg != NULL, "no %s notification within %d ms", method,
		    e2e_ms(timeout_ms));
		json_array_append_new(list, msg);
		if (strcmp(e2e_str(msg, "method"), method) == 0)
			return list;
	}
}

json_t *
c_session(struct client *c, json_t *create_params)
{
	json_t *r = c_call(c, "createSession", create_params != NULL ?
	    create_params : json_object());
	json_t *sid = json_incref(json_object_get(r, "sessionId"));
	json_t *sub;

	json_decref(r);
	sub = c_call(c, "subscribe", json_pack("{s:O}", "sessionId", sid));
	json_decref(sub);
	return sid;
}

json_t *
c_add(struct client *c, const char *sid, const char *id, const char *name,
    const char *input_json)
{
	return c_call(c, "addTool", json_pack("{s:s, s:{s:s, s:s, s:o}}",
	    "sessionId", sid, "toolUse", "id", id, "name", name, "input",
	    e2e_json(input_json != NULL ? input_json : "{}")));
}

json_t *
e2e_filter(json_t *list, const char *method)
{
	json_t *out = json_array(), *msg;
	size_t i;

	json_array_foreach(list, i, msg)
		if (strcmp(json_string_value(json_object_get(msg, "method")),
		    method) == 0)
			json_array_append(out, json_object_get(msg, "params"));
	return out;
}

json_t *
c_until_only(struct client *c, const char *method, const char *want,
    int timeout_ms)
{
	json_t *all = c_until(c, method, timeout_ms);
	json_t *some = e2e_filter(all, want);

	json_decref(all);
	return some;
}

char *
e2e_results(json_t *list)
{
	json_t *results = e2e_filter(list, "tool_result"), *p;
	char *out = calloc(1, 1), *next;
	size_t i;

	json_array_foreach(results, i, p) {
		if (asprintf(&next, "%s%s%s:%s", out, i ? "," : "",
		    json_string_value(json_object_get(p, "toolUseId")),
		    json_string_value(json_object_get(json_object_get(p,
		    "meta"), "reason"))) < 0)
			abort();
		free(out);
		out = next;
	}
	json_decref(results);
	return out;
}

json_t *
e2e_json(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);

	cr_assert(j != NULL, "bad JSON in the test: %s: %s", jerr.text, text);
	return j;
}

char *
e2e_read_file(const char *path, size_t *lenp)
{
	size_t len = 0, cap = 65536;
	char *buf;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	buf = malloc(cap);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	buf[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return buf;
}

int
d_connect_as(struct daemon *d, uid_t uid)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), status;
	pid_t pid;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", d->sock);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 ||
		    setuid(uid) != 0)
			_exit(2);
		_exit(connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0 ?
		    0 : 3);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "uid %u could not connect (status %#x)", (unsigned)uid, status);
	return fd;
}

/* A field of /proc/PID/status given in kB (VmRSS, VmHWM), in bytes. */
long long
d_status_bytes(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long long kib = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	cr_assert_not_null(f = fopen(path, "r"), "%s: %s", path,
	    strerror(errno));
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			kib = atoll(line + n + 1);
	fclose(f);
	cr_assert_geq(kib, 0, "%s has no %s", path, field);
	return kib * 1024;
}

/* VmHWM is the peak since now (proc(5), clear_refs). */
void
d_reset_peak(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/clear_refs", (long)pid);
	cr_assert_neq(fd = open(path, O_WRONLY), -1, "%s: %s", path,
	    strerror(errno));
	cr_assert_eq(write(fd, "5", 1), 1, "%s: %s", path, strerror(errno));
	close(fd);
}

void
e2e_assert_content_bytes(const json_t *msg, size_t n, char b)
{
	const json_t *v = json_object_get(json_object_get(json_object_get(msg,
	    "params"), "result"), "content");
	const char *content = json_string_value(v);
	size_t len = json_string_length(v), i;

	cr_assert_eq(len, n);
	for (i = 0; i < len && content[i] == b; i++)
		;
	cr_assert_eq(i, len, "byte %zu is %d", i, content[i]);
}

void
e2e_expect_growth(long long base, long long peak, size_t n)
{
	long long bound = 8LL * (long long)n;

	/* ASan's quarantine keeps up to 256 MiB of freed blocks resident. */
	if (strstr(getenv("STEXEC_SANITIZE") ?: "", "address") != NULL)
		bound += 256LL << 20;
	cr_expect_leq(peak - base, bound, "the daemon grew by %.2fx the "
	    "result", (double)(peak - base) / (double)n);
}

long long
c_rss(struct client *c)
{
	json_t *r = c_call(c, "stats", NULL);
	long long rss = json_integer_value(json_object_get(r, "rssBytes"));

	json_decref(r);
	cr_assert_gt(rss, 0);
	return rss;
}
