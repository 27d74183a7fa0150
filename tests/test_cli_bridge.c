/*
 * stexec-cli bridge end to end: the built binary between a pipe pair and
 * a real daemon, as ssh or kubectl exec would run it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(cli_bridge, .fini = e2e_fini);

extern char **environ;

struct bridge {
	pid_t pid;
	int in;          /* what we write: the bridge's stdin */
	int out;         /* what we read: the bridge's stdout */
	int err;         /* its stderr */
};

/* Start stexec-cli --socket SOCK bridge with pipes on its stdio. */
static struct bridge *
bridge_start(const char *sock)
{
	const char *path = getenv("STEXEC_CLI");
	posix_spawn_file_actions_t fa;
	int in[2], out[2], err[2], k;
	struct bridge *b = calloc(1, sizeof *b);
	char *argv[] = { (char *)path, "--socket", (char *)sock, "bridge",
		NULL };

	cr_assert(path != NULL, "STEXEC_CLI is not set");
	cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
	    pipe2(err, O_CLOEXEC) == 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	k = posix_spawn(&b->pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(k, 0, "cannot run %s: %s", path, strerror(k));
	close(in[0]);
	close(out[1]);
	close(err[1]);
	b->in = in[1];
	b->out = out[0];
	b->err = err[0];
	return b;
}

static void
bridge_send(struct bridge *b, const char *text)
{
	size_t len = strlen(text), off = 0;
	ssize_t n;

	while (off < len) {
		n = write(b->in, text + off, len - off);
		cr_assert(n > 0, "write to the bridge failed");
		off += (size_t)n;
	}
}

/* Everything the bridge prints until it exits; its exit status in *rc. */
static char *
bridge_finish(struct bridge *b, int *rc, char **err)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap), ebuf[4096];
	ssize_t n;
	int status;

	close(b->in);
	while ((n = read(b->out, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	buf[len] = '\0';
	n = read(b->err, ebuf, sizeof ebuf - 1);
	ebuf[n > 0 ? n : 0] = '\0';
	if (err != NULL)
		*err = strdup(ebuf);
	cr_assert_eq(waitpid(b->pid, &status, 0), b->pid);
	*rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	close(b->out);
	close(b->err);
	free(b);
	return buf;
}

/* What the bridge prints until needle is in it (10 s at most). */
static char *
bridge_read_until(struct bridge *b, const char *needle)
{
	struct pollfd p = { b->out, POLLIN, 0 };
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ssize_t n;

	buf[0] = '\0';
	while (strstr(buf, needle) == NULL) {
		cr_assert_eq(poll(&p, 1, e2e_ms(10000)), 1,
		    "no %s from the bridge",
		    needle);
		n = read(b->out, buf + len, cap - len - 1);
		cr_assert(n > 0, "the bridge ended before %s", needle);
		len += (size_t)n;
		buf[len] = '\0';
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	return buf;
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* Many pipelined requests and a whole turn: every reply relayed, then EOF. */
Test(cli_bridge, relays_requests_and_notifications)
{
	struct daemon *d = d_start(NULL);
	struct bridge *b = bridge_start(d->sock);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL);
	char line[512], *out;
	int i, rc;

	for (i = 0; i < 500; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"ping\"}\n", i);
		bridge_send(b, line);
	}
	snprintf(line, sizeof line,
	    "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"subscribe\","
	    "\"params\":{\"sessionId\":\"%s\"}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"addTool\","
	    "\"params\":{\"sessionId\":\"%s\",\"toolUse\":{\"id\":\"t1\","
	    "\"name\":\"bash\",\"input\":{\"command\":\"echo bridged\"}}}}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"drain\","
	    "\"params\":{\"sessionId\":\"%s\"}}\n",
	    json_string_value(sid), json_string_value(sid),
	    json_string_value(sid));
	bridge_send(b, line);
	/* The drain's reply comes last: wait for it before closing stdin. */
	out = bridge_read_until(b, "\"id\":\"d\"");
	cr_assert_not_null(strstr(out, "bridged"), "the result came through");
	cr_assert_not_null(strstr(out, "turn_end"));
	free(out);
	out = bridge_finish(b, &rc, NULL);
	cr_assert_eq(rc, 0, "end of stdin ends the bridge cleanly");
	free(out);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* Byte for byte: the replies are exactly what the daemon sends. */
Test(cli_bridge, pings_in_order)
{
	struct daemon *d = d_start(NULL);
	struct bridge *b = bridge_start(d->sock);
	char line[128], *out, *want = calloc(200, 64);
	int i, rc;

	for (i = 0; i < 200; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"ping\"}\n", i);
		bridge_send(b, line);
		sprintf(want + strlen(want),
		    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{}}\n", i);
	}
	out = bridge_finish(b, &rc, NULL);
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(out, want);
	cr_assert_eq(count(out, "\n"), 200);
	free(out);
	free(want);
	d_stop(d);
}

/* The daemon hanging up (an over-long line) ends the bridge. */
Test(cli_bridge, daemon_hangup_ends_it)
{
	struct daemon *d = d_start("--max-message", "1024", NULL);
	struct bridge *b = bridge_start(d->sock);
	char *big = malloc(4096), *out;
	int rc;

	memset(big, 'x', 4095);
	big[4095] = '\0';
	bridge_send(b, big);
	bridge_send(b, "\n");
	/* Stdin stays open: the bridge must end because the daemon did. */
	out = bridge_read_until(b, "-32600");
	free(out);
	out = bridge_finish(b, &rc, NULL);
	cr_assert_eq(rc, 0);
	free(out);
	free(big);
	d_stop(d);
}

Test(cli_bridge, no_daemon_is_exit_2)
{
	struct bridge *b = bridge_start("/nonexistent/stexec.sock");
	char *out, *err;
	int rc;

	out = bridge_finish(b, &rc, &err);
	cr_assert_eq(rc, 2);
	cr_assert_str_eq(out, "");
	cr_assert_not_null(strstr(err, "cannot connect"), "%s", err);
	free(out);
	free(err);
}
