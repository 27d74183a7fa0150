/*
 * A supervisor that runs nothing: the proc.h interface for the whole-path
 * fuzz target, linked in place of proc.c so the daemon's objects can serve
 * a fuzzer's requests without forking. A "process" lives a few loop
 * iterations chosen from its argv and input, writes each argv element after
 * the first as a progress line (so the client's input reaches the progress
 * parser), streams its argv to a streamOutput tool, and ends as its argv
 * says: "sleep" runs until killed or timed out, a "nosuch" argv[0] fails to
 * spawn, otherwise it exits 0 or 1, or dies of a signal, by a hash of what
 * it was given. Every report comes from the loop, as proc.c promises.
 */
#include "rpc/probe.h"
#include "supervisor/proc.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "util.h"

struct proc {
	struct proc_ops ops;
	void *arg;
	char **argv;
	struct buf output;   /* what it "wrote": argv, then its input */
	size_t max_output;
	bool stream, sleeps, killed, paused, timed, tty, stdin_open;
	unsigned ticks;      /* loop iterations left before it ends */
	unsigned hash;
	pid_t pid;
	struct event *ev;
	struct proc *prev, *next;
};

static struct event_base *proc_base;
static struct proc *proc_list;
static unsigned proc_n;
static uint64_t proc_n_started;
static pid_t proc_next_pid = 1000;

static void	proc_fake_tick(evutil_socket_t, short, void *);
static void	proc_fake_later(struct proc *);
static void	proc_fake_end(struct proc *);
static void	proc_fake_free(struct proc *);

int
proc_init(struct event_base *base, const struct proc_config *cfg, char *err,
    size_t errlen)
{
	proc_base = base;
	return 0;
}

void
proc_shutdown(void)
{
	while (proc_list != NULL)
		proc_fake_free(proc_list);
}

unsigned
proc_running(void)
{
	return proc_n;
}

uint64_t
proc_started(void)
{
	return proc_n_started;
}

/* A fake process has no exec to wait for: it starts at once. */
void
proc_count_execs(void)
{
}

bool
proc_execd(struct proc *p)
{
	(void)p;
	return true;
}

struct proc *
proc_spawn(const struct proc_spec *spec, const struct proc_ops *ops,
    void *arg)
{
	struct proc *p = xcalloc(1, sizeof *p);
	size_t i, n;
	const char *s;

	p->ops = *ops;
	p->arg = arg;
	for (n = 0; spec->argv[n] != NULL; n++)
		continue;
	p->argv = xcalloc(n + 1, sizeof *p->argv);
	p->hash = 5381;
	for (i = 0; i < n; i++) {
		p->argv[i] = xstrdup(spec->argv[i]);
		buf_addstr(&p->output, spec->argv[i]);
		buf_addstr(&p->output, "\n");
		if (strstr(spec->argv[i], "sleep") != NULL)
			p->sleeps = true;
	}
	buf_add(&p->output, spec->input, spec->input_len);
	for (s = p->output.data; s != NULL && *s != '\0'; s++)
		p->hash = p->hash * 33 + (unsigned char)*s;
	p->max_output = spec->max_output;
	p->stream = spec->stream_output;
	p->tty = spec->tty;
	p->stdin_open = spec->stdin_stream || spec->tty;
	p->ticks = 1 + p->hash % 4;
	/* A short timeout ends a sleeper in a few iterations. */
	p->timed = p->sleeps && spec->timeout_ms > 0 &&
	    spec->timeout_ms <= 1000;
	p->pid = proc_next_pid++;
	p->ev = event_new(proc_base, -1, 0, proc_fake_tick, p);
	p->next = proc_list;
	if (proc_list != NULL)
		proc_list->prev = p;
	proc_list = p;
	proc_n++;
	proc_n_started++;
	proc_fake_later(p);
	return p;
}

/* The next step comes from the next loop iteration. */
static void
proc_fake_later(struct proc *p)
{
	struct timeval now = { 0, 0 };

	event_add(p->ev, &now);
}

static void
proc_fake_tick(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	size_t i;

	if (p->killed || (p->timed && p->ticks == 0)) {
		proc_fake_end(p);
		return;
	}
	if (p->paused)
		return;
	if (p->ticks > 0 && --p->ticks == 0 && !p->sleeps) {
		proc_fake_end(p);
		return;
	}
	/* The callbacks may kill or pause it: look again after each. */
	for (i = 1; p->argv[i] != NULL && !p->killed && !p->paused; i++)
		p->ops.line(p->arg, p->argv[i], strlen(p->argv[i]));
	if (p->stream && !p->killed && !p->paused)
		p->ops.chunk(p->arg, 1 + (int)(p->hash % 2), p->output.data,
		    p->output.len);
	if (p->ticks > 0 || p->timed || p->killed)
		proc_fake_later(p);
}

/* The one exit report, then the proc is gone. */
static void
proc_fake_end(struct proc *p)
{
	struct proc_exit x = { .end = PROC_EXITED };
	size_t len = p->output.len, half;

	x.duration_ms = p->hash % 1000;
	if (p->killed) {
		x.end = PROC_KILLED;
		x.signal = 15;
	} else if (p->timed) {
		x.end = PROC_TIMED_OUT;
		x.signal = 15;
	} else if (strstr(p->argv[0], "nosuch") != NULL) {
		x.end = PROC_SPAWN_FAILED;
		x.error = "cannot run nosuch: No such file or directory";
		len = 0;
	} else if (p->hash % 11 == 0) {
		x.end = PROC_SIGNALED;
		x.signal = 9;
	} else
		x.status = p->hash % 3 == 0;
	x.output.head = p->output.data != NULL ? p->output.data : "";
	x.output.head_len = len;
	x.output.total = len;
	if (p->max_output > 0 && len > p->max_output) {
		/* As proc.c: head and tail of the cap; the file is not saved. */
		half = p->max_output / 2;
		x.output.head_len = half;
		x.output.tail = x.output.head + len - (p->max_output - half);
		x.output.tail_len = p->max_output - half;
		x.output_error = "cannot write the output file: fake";
		p->output.data[half] = '\0';
	}
	p->ops.exit(p->arg, &x);
	proc_fake_free(p);
}

void
proc_kill(struct proc *p)
{
	if (p == NULL || p->killed)
		return;
	p->killed = true;
	proc_fake_later(p);
}

void
proc_pause(struct proc *p, bool on)
{
	p->paused = on;
	if (!on)
		proc_fake_later(p);
}

pid_t
proc_pid(const struct proc *p)
{
	return p != NULL ? p->pid : 0;
}

/* Input is taken and dropped; eof closes it, as proc.c does. */
int
proc_write(struct proc *p, const char *data, size_t len, bool eof,
    const char **why)
{
	(void)data;
	(void)len;
	if (!p->stdin_open || p->killed) {
		*why = "its stdin is closed";
		return -1;
	}
	p->stdin_open = !eof;
	return 0;
}

void
proc_signal(struct proc *p, int sig)
{
	(void)sig;
	proc_kill(p);
}

/* The fake's terminal has no foreground but the process: it ends. */
int
proc_signal_fg(struct proc *p, int sig)
{
	(void)sig;
	if (!p->tty)
		return -1;
	proc_kill(p);
	return (int)p->pid;
}

int
proc_resize(struct proc *p, unsigned cols, unsigned rows)
{
	(void)cols;
	(void)rows;
	return p->tty ? 0 : -1;
}

void
proc_detach(struct proc *p)
{
	p->timed = false;
}

void
proc_rebind(struct proc *p, const struct proc_ops *ops, void *arg)
{
	p->ops = *ops;
	p->arg = arg;
}

/* A fake process has no cgroup: nothing is measured. */
void
proc_usage(const struct proc *p, bool *has_peak, uint64_t *peak,
    bool *has_cpu, uint64_t *cpu_ms)
{
	(void)p;
	*has_peak = false;
	*peak = 0;
	*has_cpu = false;
	*cpu_ms = 0;
}

static void
proc_fake_free(struct proc *p)
{
	size_t i;

	if (p->prev != NULL)
		p->prev->next = p->next;
	else
		proc_list = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	proc_n--;
	event_free(p->ev);
	for (i = 0; p->argv[i] != NULL; i++)
		free(p->argv[i]);
	free(p->argv);
	buf_free(&p->output);
	free(p);
}

/* No child per pattern in the fuzzer: fuzz_tooldef times the compiles. */
int
probe_patterns(const char *const *patterns, size_t n, size_t *bad,
    char *err, size_t errlen)
{
	(void)patterns;
	(void)n;
	(void)bad;
	(void)err;
	(void)errlen;
	return 0;
}

/* A reload is not fuzzed: nothing runs across one here. */
bool
proc_carried(const struct proc *p)
{
	(void)p;
	return false;
}

void
proc_save(struct proc *p, struct handover_rec *r, json_t *o)
{
	(void)p;
	(void)r;
	(void)o;
}

struct proc *
proc_adopt(const struct handover_in *in, const json_t *o,
    const struct proc_ops *ops, void *arg)
{
	struct proc_spec spec = { 0 };
	char *argv[] = { (char *)"nosuch", NULL };

	(void)in;
	(void)o;
	spec.argv = argv;
	return proc_spawn(&spec, ops, arg);
}

