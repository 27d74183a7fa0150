/* The simulated session of exec_sim.h: effects checked as they come. */
#include "exec_sim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stexec/protocol.h"
#include "core/tooldef.h"
#include "utf8.h"
#include "util.h"

static const char *sim_tool_json[] = {
	"{\"name\":\"read\",\"command\":[\"cat\",\"{file_path}\"],"
	"\"concurrencySafe\":true,\"inputSchema\":{\"type\":\"object\","
	"\"properties\":{\"file_path\":{\"type\":\"string\"}},"
	"\"required\":[\"file_path\"]}}",
	"{\"name\":\"search\",\"command\":[\"grep\"],\"concurrencySafe\":true,"
	"\"interruptBehavior\":\"cancel\"}",
	"{\"name\":\"write\",\"command\":[\"tee\"]}",
	"{\"name\":\"bash\",\"command\":[\"sh\"],\"interruptBehavior\":"
	"\"cancel\",\"abortSiblingsOnError\":true}",
	"{\"name\":\"fetch\",\"command\":[\"curl\"],\"concurrencySafe\":true,"
	"\"abortSiblingsOnError\":true}",
	"{\"name\":\"deploy\",\"command\":[\"d\"],\"requiresPermission\":true}",
	"{\"name\":\"peek\",\"command\":[\"p\"],\"concurrencySafe\":true,"
	"\"requiresPermission\":true,\"interruptBehavior\":\"cancel\"}",
	"{\"name\":\"tail\",\"command\":[\"tail\"],\"streamOutput\":true,"
	"\"concurrencySafe\":{\"pointer\":\"/command\",\"pattern\":\"^ls\"}}",
};

#define CHECK(s, cond, ...) do { \
	if (!(cond)) \
		sim_fail((s), __VA_ARGS__); \
} while (0)

static void	sim_fail(struct sim *, const char *, ...)
		    __attribute__((format(printf, 2, 3), noreturn));
static unsigned	sim_pick(struct sim *, unsigned);
static const char *sim_text(struct sim *, const char *, size_t *);
static struct sim_rec *sim_rec(struct sim *, const json_t *);
static void	sim_leave(struct sim *, struct sim_rec *);
static void	sim_effect(void *, const struct exec_effect *);
static void	sim_check(struct sim *);
static struct sim_rec *sim_pick_rec(struct sim *, bool);
static void	sim_exit(struct sim *, struct sim_rec *);
static void	sim_add(struct sim *);
static bool	sim_hooks(void *, struct exec_tool *, enum exec_hook_phase,
    bool);
static void	sim_hooks_done(struct sim *, struct sim_rec *);

static void
sim_fail(struct sim *s, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	s->ops.fail(s->ops.arg, s->step, what);
	abort();
}

static unsigned
sim_pick(struct sim *s, unsigned n)
{
	return s->ops.pick(s->ops.arg, n) % n;
}

/* The picker's bytes, or the usual ones when it has none to give. */
static const char *
sim_text(struct sim *s, const char *usual, size_t *len)
{
	if (s->ops.text != NULL)
		return s->ops.text(s->ops.arg, len);
	*len = strlen(usual);
	return usual;
}

static struct sim_rec *
sim_rec(struct sim *s, const json_t *params)
{
	const char *id = json_string_value(json_object_get(params,
	    "toolUseId"));
	unsigned long k;

	CHECK(s, id != NULL && id[0] == 't', "notification without tool id");
	k = strtoul(id + 1, NULL, 10);
	CHECK(s, k < s->nrecs, "unknown tool %s", id);
	CHECK(s, s->recs[k].turn == (uint64_t)json_integer_value(
	    json_object_get(params, "turn")), "wrong turn for %s", id);
	return &s->recs[k];
}

static void
sim_leave(struct sim *s, struct sim_rec *r)
{
	s->n_exec--;
	if (!r->safe)
		s->n_exec_unsafe--;
}

static void
sim_effect(void *arg, const struct exec_effect *e)
{
	struct sim *s = arg;
	struct sim_rec *r;
	/* Encoded params (tool_status, state, a tool_result) read back. */
	json_t *parsed = e->params_text != NULL ? json_loadb(e->params_text,
	    e->params_len, JSON_ALLOW_NUL, NULL) : NULL;
	const json_t *p = parsed != NULL ? parsed : e->params;
	size_t k;
	uint64_t turn;
	char *dump;

	if (s->trace) {
		dump = p != NULL ? json_dumps(p, JSON_COMPACT) : NULL;
		fprintf(stderr, "  effect %d %s %s %s\n", e->kind,
		    e->tool != NULL ? exec_tool_id(e->tool) : "",
		    e->method != NULL ? e->method : "", dump ? dump : "");
		free(dump);
	}
	CHECK(s, e->params_text == NULL || parsed != NULL,
	    "params that are not JSON: %.*s", (int)e->params_len,
	    e->params_text);

	switch (e->kind) {
	case EXEC_HOOKS_CANCEL:
		k = (size_t)strtoul(exec_tool_id(e->tool) + 1, NULL, 10);
		CHECK(s, k < s->nrecs && s->recs[k].hooks != 0,
		    "hooks cancelled of a tool without hooks running");
		s->recs[k].hooks = 0;
		break;
	case EXEC_SPAWN:
		k = (size_t)strtoul(exec_tool_id(e->tool) + 1, NULL, 10);
		r = &s->recs[k];
		CHECK(s, !r->running && !r->completed, "spawn of t%zu twice", k);
		CHECK(s, r->hooks == 0, "spawn of t%zu in its hooks", k);
		CHECK(s, !s->turn_discarded[r->turn], "spawn in a discarded turn");
		if (r->waiting)
			r->waiting = false;
		else {
			s->n_exec++;
			if (!r->safe)
				s->n_exec_unsafe++;
		}
		r->running = true;
		r->t = e->tool;
		exec_tool_set_handle(e->tool, r);
		break;
	case EXEC_KILL:
		r = exec_tool_handle(e->tool);
		CHECK(s, r->running, "kill of a tool that does not run");
		r->killed = true;
		break;
	case EXEC_DRAIN_DONE:
		s->drains_answered++;
		break;
	case EXEC_OUTPUT:
		/* A character held back is flushed as the tool ends. */
		r = exec_tool_handle(e->tool);
		CHECK(s, (r->running || r == s->exiting) && r->results == 0,
		    "output after result");
		break;
	case EXEC_NOTIFY:
		if (strcmp(e->method, "state") == 0)
			break;
		turn = (uint64_t)json_integer_value(json_object_get(p, "turn"));
		CHECK(s, turn < SIM_MAX_TURNS && !s->turn_discarded[turn],
		    "%s delivered for discarded turn %" PRIu64, e->method, turn);
		if (strcmp(e->method, "turn_end") == 0) {
			if (strcmp(json_string_value(json_object_get(p,
			    "reason")), "discarded") == 0) {
				s->turn_discarded[turn] = true;
				/* Waiting tools of that turn stop counting. */
				for (k = s->turn_start[turn]; k < s->nrecs; k++)
					if (s->recs[k].waiting) {
						CHECK(s, s->recs[k].hooks == 0,
						    "t%zu's hooks not cancelled", k);
						s->recs[k].waiting = false;
						sim_leave(s, &s->recs[k]);
					}
			} else {
				for (k = s->turn_start[turn]; k < s->nrecs; k++)
					CHECK(s, s->recs[k].results == 1,
					    "drained turn without result t%zu", k);
			}
			s->turn = turn + 1;
			s->turn_start[s->turn] = s->nrecs;
			s->turn_cursor[s->turn] = s->nrecs;
			break;
		}
		r = sim_rec(s, p);
		k = (size_t)(r - s->recs);
		if (strcmp(e->method, "permission_request") == 0) {
			CHECK(s, !r->asked && !r->running && r->hooks == 0,
			    "permission twice");
			r->asked = true;
			/* After its hooks it is in its slot already. */
			if (!r->waiting) {
				r->waiting = true;
				s->n_exec++;
				if (!r->safe)
					s->n_exec_unsafe++;
			}
		} else if (strcmp(e->method, "progress") == 0) {
			CHECK(s, r->results == 0, "progress after result t%zu", k);
		} else if (strcmp(e->method, "tool_status") == 0) {
			if (strcmp(json_string_value(json_object_get(p,
			    "status")), "completed") == 0) {
				CHECK(s, !r->completed, "completed twice t%zu", k);
				CHECK(s, !r->running, "completed while running");
				CHECK(s, r->hooks == 0, "completed in its hooks");
				r->completed = true;
				if (r->waiting) {
					r->waiting = false;
					sim_leave(s, r);
				}
			}
		} else if (strcmp(e->method, "tool_result") == 0) {
			CHECK(s, r->completed, "result before completion t%zu", k);
			CHECK(s, r->results == 0, "second result for t%zu", k);
			CHECK(s, s->turn_cursor[r->turn] == k,
			    "result of t%zu out of order (expected t%zu)", k,
			    s->turn_cursor[r->turn]);
			CHECK(s, json_is_object(json_object_get(p, "result")),
			    "tool_result without result t%zu", k);
			r->results++;
			s->turn_cursor[r->turn]++;
		}
		break;
	}
	json_decref(parsed);
}

/* The current turn's queued tools, as status reports them. */
static unsigned
sim_queued(struct sim *s)
{
	json_t *st = exec_status_json(s->ex, NULL), *t;
	unsigned n = 0;
	size_t i;

	json_array_foreach(json_object_get(st, "tools"), i, t)
		n += strcmp(json_string_value(json_object_get(t, "status")),
		    "queued") == 0;
	json_decref(st);
	return n;
}

static void
sim_check(struct sim *s)
{
	unsigned limit = s->max_parallel;

	CHECK(s, s->n_exec <= limit, "%u executing, maxParallel %u", s->n_exec,
	    limit);
	CHECK(s, s->n_exec_unsafe == 0 || s->n_exec == 1,
	    "an unsafe tool executes beside %u others", s->n_exec - 1);
	CHECK(s, exec_unfinished(s->ex) == s->nrecs - s->turn_cursor[s->turn],
	    "unfinished count disagrees");
	CHECK(s, exec_queued(s->ex) == sim_queued(s), "queued count %u "
	    "disagrees with status's %u", exec_queued(s->ex), sim_queued(s));
}

/* A random running or waiting tool, or NULL. */
static struct sim_rec *
sim_pick_rec(struct sim *s, bool waiting)
{
	struct sim_rec *found[SIM_MAX_RECS];
	size_t i, n = 0;

	for (i = 0; i < s->nrecs; i++)
		if (waiting ? s->recs[i].waiting && s->recs[i].hooks == 0 :
		    s->recs[i].running)
			found[n++] = &s->recs[i];
	return n == 0 ? NULL : found[sim_pick(s, (unsigned)n)];
}

static void
sim_exit(struct sim *s, struct sim_rec *r)
{
	struct exec_exit x = { .end = EXEC_END_EXITED };
	struct exec_tool *t = r->t;

	x.output.head = sim_text(s, "out", &x.output.head_len);
	x.output.total = x.output.head_len;
	if (r->killed)
		x.end = EXEC_END_KILLED;
	else
		switch (sim_pick(s, 6)) {
		case 0:
			x.status = 1;
			break;
		case 1:
			x.end = EXEC_END_SIGNALED;
			x.signal = 9;
			break;
		case 2:
			x.end = EXEC_END_TIMED_OUT;
			break;
		case 3:
			x.end = EXEC_END_SPAWN_FAILED;
			x.error = "cannot run";
			break;
		default:
			break;
		}
	r->running = false;
	r->t = NULL;
	sim_leave(s, r);
	s->exiting = r;
	exec_exited(t, &x);
	s->exiting = NULL;
}

static void
sim_add(struct sim *s)
{
	static const char *inputs[] = { "{\"file_path\":\"/a\"}",
		"{\"file_path\":5}", "{\"command\":\"ls\"}", "{}" };
	const char *name;
	struct exec_added added;
	struct sim_rec *r;
	const char *text;
	size_t len;
	json_t *in;
	char id[16], err[256];
	unsigned pick = sim_pick(s, (unsigned)s->ndefs + 1), k;
	int rc;

	if (s->nrecs == SIM_MAX_RECS)
		return;
	name = pick == s->ndefs ? "nope" : tooldef_name(s->defs[pick]);
	k = sim_pick(s, nitems(inputs) + (s->ops.text != NULL));
	if (k < nitems(inputs))
		in = json_loads(inputs[k], 0, NULL);
	else {
		/* The picker's own input, as a client may send anything. */
		text = s->ops.text(s->ops.arg, &len);
		if ((in = json_loadb(text, len, JSON_DECODE_ANY, NULL)) == NULL)
			in = json_object();
	}
	snprintf(id, sizeof id, "t%zu", s->nrecs);
	r = &s->recs[s->nrecs];
	memset(r, 0, sizeof *r);
	r->turn = s->turn;
	r->known = pick != s->ndefs;
	r->stream = r->known && tooldef_stream_output(s->defs[pick]);
	/* S2, as an oracle independent of the core: known before any effect. */
	r->safe = r->known && tooldef_check_input(s->defs[pick], in, err,
	    sizeof err) && tooldef_is_safe(s->defs[pick], in);
	s->nrecs++;
	rc = exec_add(s->ex, id, name, pick == s->ndefs ? NULL :
	    s->defs[pick], in, &added);
	CHECK(s, rc == 0, "add failed");
	CHECK(s, added.safe == r->safe, "S2 safety differs");
	CHECK(s, added.turn == r->turn, "added to turn %" PRIu64, added.turn);
	json_decref(in);
	/* The same id again in this turn is refused. */
	if (sim_pick(s, 20) == 0)
		CHECK(s, exec_add(s->ex, id, "read", s->defs[0], NULL, NULL) ==
		    STEXEC_ERR_DUPLICATE_TOOL_USE, "duplicate accepted");
}

void
sim_start(struct sim *s, const struct sim_ops *ops)
{
	struct exec_config cfg = { 0 };
	char err[256];
	json_t *j;
	size_t i;

	memset(s, 0, sizeof *s);
	s->ops = *ops;
	s->step = "start";
	for (i = 0; i < nitems(sim_tool_json); i++) {
		j = json_loads(sim_tool_json[i], 0, NULL);
		s->defs[i] = tooldef_parse(j, err, sizeof err);
		CHECK(s, s->defs[i] != NULL, "%s", err);
		json_decref(j);
	}
	s->ndefs = nitems(sim_tool_json);
	s->max_parallel = 1 + sim_pick(s, 4);
	cfg.max_parallel = s->max_parallel;
	cfg.effect = sim_effect;
	cfg.hooks = sim_hooks;
	cfg.arg = s;
	s->hooks = sim_pick(s, 2) == 0;
	s->ex = exec_new(&cfg, "/", NULL);
	s->turn = 1;
}

bool
sim_step(struct sim *s)
{
	struct sim_rec *r;
	unsigned what = sim_pick(s, 100);
	const char *text;
	size_t len, k;
	char id[16];

	if (s->turn >= SIM_MAX_TURNS - 2)
		return false;
	if (what < 30) {
		s->step = "add";
		sim_add(s);
	} else if (what < 55) {
		s->step = "exit";
		if ((r = sim_pick_rec(s, false)) != NULL)
			sim_exit(s, r);
	} else if (what < 65) {
		s->step = "progress";
		if ((r = sim_pick_rec(s, false)) != NULL) {
			text = sim_text(s, "{\"progress\":1}", &len);
			if (r->stream && sim_pick(s, 2) == 0)
				exec_output_chunk(r->t, 1 + (int)sim_pick(s,
				    2), text, len);
			else
				exec_progress_line(r->t, text, len);
		}
	} else if (what < 70 && s->hooks) {
		s->step = "hooks";
		for (k = 0, r = NULL; k < s->nrecs && r == NULL; k++)
			if (s->recs[k].hooks != 0 && sim_pick(s, 2) == 0)
				r = &s->recs[k];
		if (r != NULL)
			sim_hooks_done(s, r);
	} else if (what < 75) {
		s->step = "permission";
		CHECK(s, exec_permission(s->ex, "nope", true, NULL) ==
		    STEXEC_ERR_INVALID_PARAMS, "permission of no tool");
		if ((r = sim_pick_rec(s, true)) != NULL) {
			snprintf(id, sizeof id, "t%zu", (size_t)(r - s->recs));
			/* A deny message comes from JSON: always UTF-8. */
			text = s->ops.text != NULL ? sim_text(s, "", &len) :
			    NULL;
			if (text != NULL && (len == 0 || !utf8_valid(text, len)))
				text = NULL;
			CHECK(s, exec_permission(s->ex, id, sim_pick(s, 3) != 0,
			    text) == 0, "permission refused");
		}
	} else if (what < 80) {
		s->step = "interrupt";
		exec_abort(s->ex, false);
	} else if (what < 83) {
		s->step = "cancel";
		exec_abort(s->ex, true);
	} else if (what < 88) {
		s->step = "discard";
		exec_discard(s->ex);
	} else {
		s->step = "drain";
		s->drains_pending++;
		exec_drain(s->ex, NULL);
	}
	if (s->trace)
		fprintf(stderr, "step %s: n_exec %u unsafe %u\n", s->step,
		    s->n_exec, s->n_exec_unsafe);
	sim_check(s);
	return true;
}

void
sim_finish(struct sim *s)
{
	struct sim_rec *r;
	size_t k;
	char id[16];

	s->step = "finish";
	for (;;) {
		for (k = 0, r = NULL; k < s->nrecs && r == NULL; k++)
			if (s->recs[k].hooks != 0)
				r = &s->recs[k];
		if (r != NULL)
			sim_hooks_done(s, r);
		else if ((r = sim_pick_rec(s, true)) != NULL) {
			snprintf(id, sizeof id, "t%zu", (size_t)(r - s->recs));
			CHECK(s, exec_permission(s->ex, id, true, NULL) == 0,
			    "permission refused");
		} else if ((r = sim_pick_rec(s, false)) != NULL)
			sim_exit(s, r);
		else
			break;
		sim_check(s);
	}
	s->drains_pending++;
	exec_drain(s->ex, NULL);
	CHECK(s, s->drains_answered == s->drains_pending,
	    "%u drains unanswered", s->drains_pending - s->drains_answered);
	CHECK(s, !exec_busy(s->ex), "processes left");
	CHECK(s, exec_unfinished(s->ex) == 0, "unfinished tools left");
	/* S10: exactly one result each, but for discarded turns. */
	for (k = 0; k < s->nrecs; k++) {
		r = &s->recs[k];
		CHECK(s, s->turn_discarded[r->turn] ? r->results <= 1 :
		    r->results == 1, "t%zu has %d results", k, r->results);
	}
	exec_close(s->ex);
	exec_free(s->ex);
	for (k = 0; k < s->ndefs; k++)
		tooldef_unref(s->defs[k]);
}

/*
 * exec_config.hooks: a tool reaches a hook phase; a third of them have
 * hooks. Before the call that puts it in its slot (the same count as a
 * permission's wait); after, it keeps the slot its process had.
 */
static bool
sim_hooks(void *arg, struct exec_tool *t, enum exec_hook_phase ph,
    bool failed)
{
	struct sim *s = arg;
	struct sim_rec *r;
	size_t k = (size_t)strtoul(exec_tool_id(t) + 1, NULL, 10);

	CHECK(s, k < s->nrecs, "hooks of an unknown tool");
	r = &s->recs[k];
	CHECK(s, r->hooks == 0 && !r->running && !r->completed,
	    "t%zu reaches hooks twice", k);
	CHECK(s, (ph == EXEC_HOOK_POST) == (exec_tool_result(t) != NULL),
	    "a result only after the call");
	CHECK(s, ph == EXEC_HOOK_POST || !failed, "failed only after the call");
	CHECK(s, ph != EXEC_HOOK_POST || failed == json_is_true(json_object_get(
	    json_object_get(exec_tool_result(t), "result"), "is_error")),
	    "failed as the result says");
	if (!s->hooks || sim_pick(s, 3) != 0)
		return false;
	r->hooks = 1 + (int)ph;
	r->t = t;
	if (!r->waiting) {
		r->waiting = true;
		s->n_exec++;
		if (!r->safe)
			s->n_exec_unsafe++;
	}
	return true;
}

/* The hooks of r's phase decide, at random (and rewrite the input). */
static void
sim_hooks_done(struct sim *s, struct sim_rec *r)
{
	static const char *const inputs[] = { NULL, "{\"file_path\":\"/b\"}",
		"{\"file_path\":7}", "{\"command\":\"ls\"}" };
	struct exec_hooks_done d = { 0 };
	struct exec_tool *t = r->t;
	json_t *in = NULL;
	unsigned k;

	d.decision = (enum exec_hook_decision)sim_pick(s, 4);
	d.reason = sim_pick(s, 2) ? "a hook's reason" : NULL;
	d.context = sim_pick(s, 2) ? "context" : NULL;
	d.blocked = sim_pick(s, 4) == 0;
	k = sim_pick(s, nitems(inputs));
	if (inputs[k] != NULL)
		in = json_loads(inputs[k], 0, NULL);
	d.updated_input = in;
	d.stop = sim_pick(s, 8) == 0;
	/* Its slot goes with its completion (a POST's, or a deny's). */
	r->hooks = 0;
	exec_hooks_done(t, &d);
	json_decref(in);
}
