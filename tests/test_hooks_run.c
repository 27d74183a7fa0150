/*
 * Hooks run for real: scripts as users write them (bash with jq, Python
 * reading stdin) under the supervisor, in parallel, cancelled, timed out.
 * Every test checks that no child of the test process is left.
 */
#include <criterion/criterion.h>

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "hooks/hooks.h"
#include "supervisor/proc.h"
#include "util.h"

/* One guard against a hang, never a bound under test (times the scale). */
#define GUARD_MS 60000
/* The build's time factor (tests/meson.build): 3 under a sanitizer. */
#ifndef STEXEC_TEST_BUILD_SCALE
#define STEXEC_TEST_BUILD_SCALE 1
#endif

static struct event_base *base;
static struct event *tick;
static char dir[64];
static char err[1024];
static const char *test_env[] = { "PATH=/usr/bin:/bin", "LC_ALL=C",
	"TEAM=core", NULL };

struct done {
	bool called;
	enum hooks_perm perm;
	char *reason;
	char *context;
	json_t *updated_input;
	json_t *runs;
	bool blocked;
};

static int
count_children(void)
{
	char path[300], line[1024], *p;
	struct dirent *de;
	long ppid;
	int n = 0, fd;
	ssize_t len;
	DIR *d = opendir("/proc");

	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		len = read(fd, line, sizeof line - 1);
		close(fd);
		if (len <= 0)
			continue;
		line[len] = '\0';
		if ((p = strrchr(line, ')')) != NULL &&
		    sscanf(p + 1, " %*c %ld", &ppid) == 1 && ppid == getpid())
			n++;
	}
	closedir(d);
	return n;
}

static void
tick_cb(evutil_socket_t fd, short events, void *arg)
{
}

static void
setup(void)
{
	struct proc_config cfg = { 0 };
	struct timeval tv = { 0, 20000 };
	char e[256];

	snprintf(dir, sizeof dir, "/tmp/test_hooks_run.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	base = event_base_new();
	tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(tick, &tv);
	cfg.kill_grace_ms = 500;
	cfg.output_dir = dir;
	cr_assert_eq(proc_init(base, &cfg, e, sizeof e), 0, "%s", e);
}

static void
teardown(void)
{
	char cmd[200];

	proc_shutdown();
	cr_expect_eq(count_children(), 0, "children left");
	event_free(tick);
	event_base_free(base);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(hooks_run, .init = setup, .fini = teardown,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE);

static void
on_done(void *arg, const struct hooks_decision *d)
{
	struct done *r = arg;

	r->called = true;
	r->perm = d->perm;
	r->blocked = d->blocked;
	r->reason = d->reason != NULL ? strdup(d->reason) : NULL;
	r->context = d->context != NULL ? strdup(d->context) : NULL;
	r->updated_input = json_incref(d->updated_input);
	r->runs = json_incref(d->runs);
}

static void
done_clear(struct done *r)
{
	free(r->reason);
	free(r->context);
	json_decref(r->updated_input);
	json_decref(r->runs);
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The time rule (tests/README.md): STEXEC_TEST_TIME_SCALE, else the
 * build's factor, multiplies every guard.
 */
static int64_t
guard_ms(void)
{
	const char *s = getenv("STEXEC_TEST_TIME_SCALE");
	double f = s != NULL && *s != '\0' ? atof(s) :
	    STEXEC_TEST_BUILD_SCALE;

	return (int64_t)(GUARD_MS * (f >= 1 ? f : 1.0));
}

static bool
run_until(bool (*cond)(void *), void *arg)
{
	int64_t t0 = now_ms(), guard = guard_ms();

	while (!cond(arg)) {
		if (now_ms() - t0 > guard)
			return false;
		event_base_loop(base, EVLOOP_ONCE);
	}
	return true;
}

static bool
is_called(void *arg)
{
	return ((struct done *)arg)->called;
}

/* A script in the temp dir; its path (static buffer per call site). */
static char *
script(const char *name, const char *text)
{
	char *path;
	FILE *f;

	xasprintf(&path, "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, 0755);
	return path;
}

/* Handlers from a hooks JSON text; the config stays alive in *hk. */
static size_t
handlers(struct hooks **hk, const char *text, enum hooks_event e,
    const char *name, const char *alias, const json_t *input,
    const struct hooks_handler **out)
{
	json_t *j = json_loads(text, 0, NULL);
	struct hooks_subject s = { .name = name, .alias = alias, .input = input,
		.root = dir };

	cr_assert_not_null(j, "%s", text);
	*hk = hooks_new();
	cr_assert_eq(hooks_add_json(*hk, j, err, sizeof err), 0, "%s", err);
	json_decref(j);
	return hooks_select(*hk, e, &s, out, HOOKS_MAX_HANDLERS);
}

static json_t *
event_json(const char *event, const char *tool, json_t *input)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "session_id", "s-1",
	    "cwd", dir, "hook_event_name", event, "tool_name", tool,
	    "tool_input", input, "tool_use_id", "toolu_1");
}

static void
run(struct hooks **hk, const char *config, enum hooks_event e,
    const char *tool, json_t *input, struct done *r, struct hooks_run **out)
{
	const struct hooks_handler *h[HOOKS_MAX_HANDLERS];
	json_t *ev = event_json(hooks_event_name(e), tool, json_incref(input));
	struct hooks_run_spec spec = { .event = e, .input = ev, .cwd = dir,
		.envp = (char *const *)test_env, .project_dir = dir,
		.spill_dir = dir };
	size_t n = handlers(hk, config, e, tool, NULL, input, h);
	struct hooks_run *hr;

	cr_assert_gt(n, 0);
	memset(r, 0, sizeof *r);
	hr = hooks_run_start(h, n, &spec, on_done, r);
	json_decref(ev);
	if (out != NULL)
		*out = hr;
}

static char *
config1(const char *event, const char *matcher, const char *command,
    const char *extra)
{
	char *c;

	xasprintf(&c, "{\"hooks\":{\"%s\":[{\"matcher\":\"%s\",\"hooks\":"
	    "[{\"type\":\"command\",\"command\":\"%s\"%s}]}]}}", event, matcher,
	    command, extra != NULL ? extra : "");
	return c;
}

Test(hooks_run, bash_jq_guard_blocks_rm_rf_and_lets_ls_through)
{
	char *guard = script("guard.sh",
	    "#!/bin/bash\n"
	    "cmd=$(jq -r '.tool_input.command')\n"
	    "if echo \"$cmd\" | grep -qE 'rm -rf'; then\n"
	    "  echo \"Blocked: rm -rf is not allowed ($TEAM)\" >&2\n"
	    "  exit 2\n"
	    "fi\n"
	    "exit 0\n");
	char *cfg = config1("PreToolUse", "Bash", guard, NULL);
	json_t *in = json_pack("{s:s}", "command", "rm -rf /tmp/x");
	struct hooks *hk;
	struct done r;

	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Bash", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(r.reason, "Blocked: rm -rf is not allowed (core)");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);

	in = json_pack("{s:s}", "command", "ls");
	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Bash", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_NONE);
	cr_assert_null(r.reason);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    r.runs, 0), "outcome")), "ok");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
	free(guard);
}

Test(hooks_run, python_reads_stdin_and_answers_json)
{
	char *py = script("protect.py",
	    "#!/usr/bin/env python3\n"
	    "import json, os, sys\n"
	    "ev = json.load(sys.stdin)\n"
	    "path = ev['tool_input'].get('file_path', '')\n"
	    "assert ev['hook_event_name'] == 'PreToolUse'\n"
	    "assert ev['tool_use_id'] == 'toolu_1'\n"
	    "assert os.environ['CLAUDE_PROJECT_DIR'] == ev['cwd']\n"
	    "assert os.isatty(0) is False\n"
	    "if path.endswith('.env'):\n"
	    "    print(json.dumps({'hookSpecificOutput': {\n"
	    "        'hookEventName': 'PreToolUse',\n"
	    "        'permissionDecision': 'deny',\n"
	    "        'permissionDecisionReason': '.env is protected'}}))\n"
	    "else:\n"
	    "    print(json.dumps({'hookSpecificOutput': {\n"
	    "        'hookEventName': 'PreToolUse',\n"
	    "        'additionalContext': 'checked ' + os.path.basename(path),\n"
	    "        'updatedInput': dict(ev['tool_input'], content='x')}}))\n");
	char *cfg = config1("PreToolUse", "Edit|Write", py, NULL);
	json_t *in = json_pack("{s:s, s:s}", "file_path", "/p/.env", "content",
	    "SECRET=1");
	struct hooks *hk;
	struct done r;

	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Write", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_DENY, "%s", json_dumps(r.runs, 0));
	cr_assert_str_eq(r.reason, ".env is protected");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);

	in = json_pack("{s:s, s:s}", "file_path", "/p/a.txt", "content", "y");
	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Write", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_NONE);
	cr_assert_str_eq(r.context, "checked a.txt");
	cr_assert_str_eq(json_string_value(json_object_get(r.updated_input,
	    "content")), "x");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
	free(py);
}

/* Each hook writes its start and end; the two intervals overlap. */
Test(hooks_run, hooks_run_side_by_side)
{
	char *cfg;
	json_t *in = json_pack("{s:s}", "pattern", "x");
	struct hooks *hk;
	struct done r;
	long a0, a1, b0, b1;
	char path[200];
	FILE *f;

	xasprintf(&cfg, "{\"hooks\":{\"PreToolUse\":[{\"hooks\":["
	    "{\"type\":\"command\",\"command\":\"date +%%s%%N > %s/a0; "
	    "sleep 1; date +%%s%%N > %s/a1\"},"
	    "{\"type\":\"command\",\"command\":\"date +%%s%%N > %s/b0; "
	    "sleep 1; date +%%s%%N > %s/b1\"}]}]}}", dir, dir, dir, dir);
	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Grep", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(json_array_size(r.runs), 2);
#define READ(name, v) do { \
	snprintf(path, sizeof path, "%s/%s", dir, name); \
	f = fopen(path, "r"); \
	cr_assert_not_null(f); \
	cr_assert_eq(fscanf(f, "%ld", &v), 1); \
	fclose(f); \
} while (0)
	READ("a0", a0);
	READ("a1", a1);
	READ("b0", b0);
	READ("b1", b1);
	cr_assert(a0 < b1 && b0 < a1, "a %ld..%ld, b %ld..%ld", a0, a1, b0, b1);
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
}

static bool
pid_file_gone(void *arg)
{
	const char *path = arg;
	FILE *f = fopen(path, "r");
	long pid = 0;
	bool gone;

	if (f == NULL)
		return false;
	gone = fscanf(f, "%ld", &pid) == 1 && kill((pid_t)pid, 0) == -1 &&
	    errno == ESRCH;
	fclose(f);
	return gone;
}

static bool
file_has_pid(void *arg)
{
	const char *path = arg;
	FILE *f = fopen(path, "r");
	long pid = 0;
	bool ok;

	if (f == NULL)
		return false;
	ok = fscanf(f, "%ld", &pid) == 1;
	fclose(f);
	return ok;
}

static bool
no_children(void *arg)
{
	return count_children() == 0;
}

Test(hooks_run, cancel_kills_a_hanging_hook_and_its_children)
{
	char *cfg, pidfile[200];
	json_t *in = json_pack("{s:s}", "command", "ls");
	struct hooks *hk;
	struct hooks_run *hr;
	struct done r;

	snprintf(pidfile, sizeof pidfile, "%s/child.pid", dir);
	cfg = config1("PreToolUse", "*", "sleep 300 & echo $! > child.pid; "
	    "wait", NULL);
	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Bash", in, &r, &hr);
	cr_assert(run_until(file_has_pid, pidfile));
	cr_assert(!pid_file_gone(pidfile));
	hooks_run_cancel(hr);
	cr_assert(run_until(pid_file_gone, pidfile));
	cr_assert(run_until(no_children, NULL));
	cr_assert(!r.called, "no callback after a cancel");
	hooks_free(hk);
	json_decref(in);
	free(cfg);
}

Test(hooks_run, a_timed_out_hook_gives_no_decision)
{
	char *cfg = config1("PreToolUse", "*", "sleep 300; exit 2", 
	    ",\"timeout\":0.5");
	json_t *in = json_pack("{s:s}", "command", "ls");
	struct hooks *hk;
	struct done r;

	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Bash", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_NONE);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    r.runs, 0), "outcome")), "timedOut");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
}

Test(hooks_run, missing_command_is_a_non_blocking_error)
{
	char *cfg = config1("PostToolUse", "*", "/no/such/hook.sh", NULL);
	json_t *in = json_pack("{s:s}", "command", "ls");
	struct hooks *hk;
	struct done r;

	run(&hk, cfg, HOOKS_POST_TOOL_USE, "Bash", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert(!r.blocked);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(r.runs,
	    0), "exitCode")), 127);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    r.runs, 0), "outcome")), "error");
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
}

/* Text over 10,000 characters is cut; the whole of it goes to a file. */
Test(hooks_run, long_text_goes_to_a_file)
{
	char *cfg = config1("PreToolUse", "*", "head -c 12000 /dev/zero | "
	    "tr '\\\\0' r >&2; exit 2", NULL);
	json_t *in = json_pack("{s:s}", "command", "ls");
	struct hooks *hk;
	struct done r;
	const char *at;
	char path[256];
	FILE *f;
	long size;

	run(&hk, cfg, HOOKS_PRE_TOOL_USE, "Bash", in, &r, NULL);
	cr_assert(run_until(is_called, &r));
	cr_assert_eq(r.perm, HOOKS_PERM_DENY);
	cr_assert_eq(strspn(r.reason, "r"), HOOKS_TEXT_MAX, "%.80s", r.reason);
	at = strstr(r.reason, "the whole of it is in ");
	cr_assert_not_null(at, "%s", r.reason + HOOKS_TEXT_MAX);
	cr_assert_eq(sscanf(at + 22, "%255[^]]", path), 1);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fclose(f);
	cr_assert_eq(size, 12000);
	done_clear(&r);
	hooks_free(hk);
	json_decref(in);
	free(cfg);
}
