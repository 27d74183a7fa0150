/*
 * Running an event's hooks: each a supervised process of its own group
 * (supervisor/proc.h), all at once, the event's JSON on stdin, no
 * terminal; one callback with the decision when the last has ended.
 */
#include "hooks/hooks.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "supervisor/proc.h"
#include "util.h"

/* stdout and stderr kept of one hook: JSON far larger is no decision. */
#define HOOKS_OUT_MAX (1024 * 1024)
#define HOOKS_ERR_MAX (64 * 1024)

struct hooks_run;

struct hooks_one {
	struct hooks_run *run;
	struct proc *proc;
	char *command;
	struct buf out, err;
	bool ended;
	enum hooks_end end;
	int status;
	int64_t duration_ms;
};

struct hooks_run {
	enum hooks_event event;
	struct hooks_one *hooks;
	size_t n, left;
	bool cancelled;
	char *spill_dir;
	hooks_done_fn *done;
	void *arg;
	void (*arg_free)(void *);
	struct hooks_run *prev, *next; /* every run, for hooks_run_shutdown */
};

static unsigned hooks_nrunning;
static struct hooks_run *hooks_runs;

static void	hooks_run_chunk(void *, int, const char *, size_t);
static void	hooks_run_exit(void *, const struct proc_exit *);
static void	hooks_run_finish(struct hooks_run *);
static void	hooks_run_free(struct hooks_run *);
static char	**hooks_run_env(const struct hooks_run_spec *);
static char	*hooks_run_spill(void *, const char *, size_t);

static const struct proc_ops hooks_run_ops = {
	.chunk = hooks_run_chunk,
	.exit = hooks_run_exit,
};

/* The session's environment with CLAUDE_PROJECT_DIR (and CLAUDE_ENV_FILE). */
static char **
hooks_run_env(const struct hooks_run_spec *spec)
{
	char **env;
	size_t n = 0, i, k = 0;

	while (spec->envp != NULL && spec->envp[n] != NULL)
		n++;
	env = xcalloc(n + 3, sizeof *env);
	for (i = 0; i < n; i++) {
		if (strncmp(spec->envp[i], "CLAUDE_PROJECT_DIR=", 19) == 0 ||
		    strncmp(spec->envp[i], "CLAUDE_ENV_FILE=", 16) == 0)
			continue;
		env[k++] = xstrdup(spec->envp[i]);
	}
	if (spec->project_dir != NULL)
		xasprintf(&env[k++], "CLAUDE_PROJECT_DIR=%s", spec->project_dir);
	if (spec->env_file != NULL)
		xasprintf(&env[k++], "CLAUDE_ENV_FILE=%s", spec->env_file);
	return env;
}

struct hooks_run *
hooks_run_start(const struct hooks_handler *const *handlers, size_t n,
    const struct hooks_run_spec *spec, hooks_done_fn *done, void *arg)
{
	struct hooks_run *run = xcalloc(1, sizeof *run);
	struct proc_spec ps = { 0 };
	char **env = hooks_run_env(spec), *input;
	char *argv[4] = { "bash", "-c", NULL, NULL };
	int64_t t;
	size_t i;

	run->event = spec->event;
	run->hooks = xcalloc(n, sizeof *run->hooks);
	run->n = run->left = n;
	run->spill_dir = spec->spill_dir != NULL ? xstrdup(spec->spill_dir) :
	    NULL;
	run->done = done;
	run->arg = arg;
	run->arg_free = spec->arg_free;
	if ((run->next = hooks_runs) != NULL)
		hooks_runs->prev = run;
	hooks_runs = run;
	input = json_dumps(spec->input, JSON_COMPACT);
	if (input == NULL)
		fatal("%s: cannot encode the event", __func__);
	ps.argv = argv;
	ps.envp = env;
	ps.cwd = spec->cwd;
	ps.input = input;
	ps.input_len = strlen(input);
	ps.max_output = HOOKS_OUT_MAX;
	ps.stream_output = true;
	ps.name = "hook";
	ps.user = spec->user;
	for (i = 0; i < n; i++) {
		struct hooks_one *h = &run->hooks[i];

		h->run = run;
		h->command = xstrdup(hooks_handler_command(handlers[i]));
		argv[2] = h->command;
		t = hooks_handler_timeout_ms(handlers[i]);
		ps.timeout_ms = t > 0 ? t : spec->timeout_ms > 0 ?
		    spec->timeout_ms : HOOKS_TIMEOUT_DEFAULT_MS;
		hooks_nrunning++;
		h->proc = proc_spawn(&ps, &hooks_run_ops, h);
	}
	free(input);
	for (i = 0; env[i] != NULL; i++)
		free(env[i]);
	free(env);
	return run;
}

static void
hooks_run_chunk(void *arg, int fd, const char *data, size_t len)
{
	struct hooks_one *h = arg;
	struct buf *b = fd == 1 ? &h->out : &h->err;
	size_t max = fd == 1 ? HOOKS_OUT_MAX : HOOKS_ERR_MAX;

	if (b->len < max)
		buf_add(b, data, len < max - b->len ? len : max - b->len);
}

static void
hooks_run_exit(void *arg, const struct proc_exit *x)
{
	struct hooks_one *h = arg;
	struct hooks_run *run = h->run;

	hooks_nrunning--;
	h->proc = NULL;
	h->ended = true;
	h->duration_ms = x->duration_ms;
	h->status = x->status;
	/* The whole output is in our buffers: no file is kept for it. */
	if (x->output.path != NULL)
		unlink(x->output.path);
	switch (x->end) {
	case PROC_EXITED:
		h->end = HOOKS_END_EXITED;
		break;
	case PROC_TIMED_OUT:
		h->end = HOOKS_END_TIMED_OUT;
		break;
	case PROC_KILLED:
		h->end = HOOKS_END_KILLED;
		break;
	case PROC_SIGNALED:
	case PROC_LIMIT_HIT:
		h->end = HOOKS_END_FAILED;
		buf_reset(&h->err);
		buf_printf(&h->err, "killed by signal %d", x->signal);
		break;
	case PROC_SPAWN_FAILED:
		h->end = HOOKS_END_FAILED;
		buf_reset(&h->err);
		buf_addstr(&h->err, x->error != NULL ? x->error :
		    "cannot be started");
		break;
	}
	if (--run->left > 0)
		return;
	if (!run->cancelled)
		hooks_run_finish(run);
	hooks_run_free(run);
}

static char *
hooks_run_spill(void *arg, const char *text, size_t len)
{
	const char *dir = arg;
	char *path;
	int fd;

	xasprintf(&path, "%s/hook-XXXXXX.txt", dir);
	if ((fd = mkstemps(path, 4)) == -1) {
		free(path);
		return NULL;
	}
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		free(path);
		return NULL;
	}
	close(fd);
	return path;
}

/* Every hook has ended: their outcomes folded in configuration order. */
static void
hooks_run_finish(struct hooks_run *run)
{
	struct hooks_decision d;
	struct hooks_outcome o;
	size_t i;

	hooks_decision_init(&d, run->event);
	if (run->spill_dir != NULL) {
		d.spill = hooks_run_spill;
		d.spill_arg = run->spill_dir;
	}
	for (i = 0; i < run->n; i++) {
		struct hooks_one *h = &run->hooks[i];

		o = (struct hooks_outcome){
			.command = h->command, .end = h->end,
			.status = h->status, .duration_ms = h->duration_ms,
			.out = h->out.data != NULL ? h->out.data : "",
			.out_len = h->out.len,
			.err = h->err.data != NULL ? h->err.data : "",
			.err_len = h->err.len,
		};
		hooks_decide(&d, &o);
		while (o.err_len > 0 && o.err[o.err_len - 1] == '\n')
			o.err_len--;
		if (o.end == HOOKS_END_EXITED && o.status == 127)
			log_warn("hook command not found (exit 127): %s: %.*s",
			    h->command, (int)(o.err_len > 500 ? 500 :
			    o.err_len), o.err);
	}
	run->done(run->arg, &d);
	hooks_decision_clear(&d);
}

static void
hooks_run_free(struct hooks_run *run)
{
	size_t i;

	if (run->prev != NULL)
		run->prev->next = run->next;
	else
		hooks_runs = run->next;
	if (run->next != NULL)
		run->next->prev = run->prev;
	for (i = 0; i < run->n; i++) {
		free(run->hooks[i].command);
		buf_free(&run->hooks[i].out);
		buf_free(&run->hooks[i].err);
	}
	free(run->hooks);
	free(run->spill_dir);
	free(run);
}

void
hooks_run_cancel(struct hooks_run *run)
{
	size_t i;

	run->cancelled = true;
	for (i = 0; i < run->n; i++)
		if (run->hooks[i].proc != NULL)
			proc_kill(run->hooks[i].proc);
}

void
hooks_run_kill_all(void)
{
	struct hooks_run *run;
	size_t i;

	for (run = hooks_runs; run != NULL; run = run->next)
		for (i = 0; i < run->n; i++)
			if (run->hooks[i].proc != NULL)
				proc_signal(run->hooks[i].proc, SIGKILL);
}

void
hooks_run_shutdown(void)
{
	struct hooks_run *run;

	while ((run = hooks_runs) != NULL) {
		if (run->arg_free != NULL && !run->cancelled)
			run->arg_free(run->arg);
		hooks_nrunning -= (unsigned)run->left;
		hooks_run_free(run);
	}
}

unsigned
hooks_running(void)
{
	return hooks_nrunning;
}
