/*
 * Random interleavings of add / progress / exit / kill / abort / discard /
 * drain / permission over random tool mixes, checking the invariants of
 * DESIGN.md §2 after every step. Seeded: STEXEC_SEED=N reproduces a run,
 * STEXEC_SCHEDULES=N changes how many schedules run (default 10000).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor.h"
#include "stexec/protocol.h"
#include "util.h"

#define MAX_RECS 512
#define MAX_TURNS 512

struct rec {
	uint64_t turn;
	bool known, safe;
	struct exec_tool *t; /* valid while running */
	bool running;        /* has a process */
	bool waiting;        /* permission requested, not yet answered */
	bool killed;
	bool completed;
	int results;
};

struct sim {
	uint64_t seed, rng;
	unsigned max_parallel;
	struct exec *ex;
	struct tooldef *defs[8];
	size_t ndefs;
	struct rec recs[MAX_RECS];
	size_t nrecs;
	size_t turn_start[MAX_TURNS], turn_cursor[MAX_TURNS];
	bool turn_discarded[MAX_TURNS];
	uint64_t turn;
	unsigned n_exec, n_exec_unsafe;
	unsigned drains_pending, drains_answered;
	const char *step;
	bool trace;          /* STEXEC_TRACE=1: print every step and effect */
};

static const char *tool_json[] = {
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
};

#define CHECK(s, cond, fmt, ...) \
	cr_assert(cond, "STEXEC_SEED=%" PRIu64 " STEXEC_SCHEDULES=1 " \
	    "reproduces; step %s: " fmt, (s)->seed, (s)->step, ##__VA_ARGS__)

static uint64_t
sim_rand(struct sim *s)
{
	/* xorshift64*: small, fast and reproducible everywhere. */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ULL;
}

static unsigned
sim_pick(struct sim *s, unsigned n)
{
	return (unsigned)(sim_rand(s) % n);
}

static struct rec *
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
sim_leave(struct sim *s, struct rec *r)
{
	s->n_exec--;
	if (!r->safe)
		s->n_exec_unsafe--;
}

static void
sim_effect(void *arg, const struct exec_effect *e)
{
	struct sim *s = arg;
	struct rec *r;
	const json_t *p = e->params;
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

	switch (e->kind) {
	case EXEC_SPAWN:
		k = (size_t)strtoul(exec_tool_id(e->tool) + 1, NULL, 10);
		r = &s->recs[k];
		CHECK(s, !r->running && !r->completed, "spawn of t%zu twice", k);
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
		r = exec_tool_handle(e->tool);
		CHECK(s, r->running && r->results == 0, "output after result");
		break;
	case EXEC_NOTIFY:
		if (strcmp(e->method, "state") == 0)
			break;
		turn = (uint64_t)json_integer_value(json_object_get(p, "turn"));
		CHECK(s, turn < MAX_TURNS && !s->turn_discarded[turn],
		    "%s delivered for discarded turn %" PRIu64, e->method, turn);
		if (strcmp(e->method, "turn_end") == 0) {
			if (strcmp(json_string_value(json_object_get(p,
			    "reason")), "discarded") == 0) {
				s->turn_discarded[turn] = true;
				/* Waiting tools of that turn stop counting. */
				for (k = s->turn_start[turn]; k < s->nrecs; k++)
					if (s->recs[k].waiting) {
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
			CHECK(s, !r->waiting && !r->running, "permission twice");
			r->waiting = true;
			s->n_exec++;
			if (!r->safe)
				s->n_exec_unsafe++;
		} else if (strcmp(e->method, "progress") == 0) {
			CHECK(s, r->results == 0, "progress after result t%zu", k);
		} else if (strcmp(e->method, "tool_status") == 0) {
			if (strcmp(json_string_value(json_object_get(p,
			    "status")), "completed") == 0) {
				CHECK(s, !r->completed, "completed twice t%zu", k);
				CHECK(s, !r->running, "completed while running");
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
			r->results++;
			s->turn_cursor[r->turn]++;
		}
		break;
	}
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
}

/* A random running or waiting tool, or NULL. */
static struct rec *
sim_pick_rec(struct sim *s, bool waiting)
{
	struct rec *found[MAX_RECS];
	size_t i, n = 0;

	for (i = 0; i < s->nrecs; i++)
		if (waiting ? s->recs[i].waiting : s->recs[i].running)
			found[n++] = &s->recs[i];
	return n == 0 ? NULL : found[sim_pick(s, (unsigned)n)];
}

static void
sim_exit(struct sim *s, struct rec *r)
{
	struct proc_exit x = { .end = PROC_EXITED };
	struct exec_tool *t = r->t;

	x.output.head = "out";
	x.output.head_len = 3;
	x.output.total = 3;
	if (r->killed)
		x.end = PROC_KILLED;
	else
		switch (sim_pick(s, 6)) {
		case 0:
			x.status = 1;
			break;
		case 1:
			x.end = PROC_SIGNALED;
			x.signal = 9;
			break;
		case 2:
			x.end = PROC_TIMED_OUT;
			break;
		case 3:
			x.end = PROC_SPAWN_FAILED;
			x.error = "cannot run";
			break;
		default:
			break;
		}
	r->running = false;
	r->t = NULL;
	sim_leave(s, r);
	exec_exited(t, &x);
}

static void
sim_add(struct sim *s)
{
	static const char *inputs[] = { "{\"file_path\":\"/a\"}",
		"{\"file_path\":5}", "{\"command\":\"ls\"}", "{}" };
	const char *name;
	struct exec_added added;
	struct rec *r;
	json_t *in;
	char id[16], err[256];
	unsigned pick = sim_pick(s, (unsigned)s->ndefs + 1);
	int rc;

	if (s->nrecs == MAX_RECS)
		return;
	name = pick == s->ndefs ? "nope" : tooldef_name(s->defs[pick]);
	in = json_loads(inputs[sim_pick(s, nitems(inputs))], 0, NULL);
	snprintf(id, sizeof id, "t%zu", s->nrecs);
	r = &s->recs[s->nrecs];
	memset(r, 0, sizeof *r);
	r->turn = s->turn;
	r->known = pick != s->ndefs;
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

static void
sim_step(struct sim *s)
{
	struct rec *r;
	unsigned what = sim_pick(s, 100);

	if (what < 30) {
		s->step = "add";
		sim_add(s);
	} else if (what < 55) {
		s->step = "exit";
		if ((r = sim_pick_rec(s, false)) != NULL)
			sim_exit(s, r);
	} else if (what < 65) {
		s->step = "progress";
		if ((r = sim_pick_rec(s, false)) != NULL)
			exec_progress_line(r->t, "{\"progress\":1}", 14);
	} else if (what < 75) {
		s->step = "permission";
		CHECK(s, exec_permission(s->ex, "nope", true, NULL) ==
		    STEXEC_ERR_INVALID_PARAMS, "permission of no tool");
		if ((r = sim_pick_rec(s, true)) != NULL) {
			char id[16];

			snprintf(id, sizeof id, "t%zu", (size_t)(r - s->recs));
			CHECK(s, exec_permission(s->ex, id, sim_pick(s, 3) != 0,
			    NULL) == 0, "permission refused");
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
}

/* Let everything finish, drain, and check the pairing of every turn. */
static void
sim_finish(struct sim *s)
{
	struct rec *r;
	size_t k;
	char id[16];

	s->step = "finish";
	for (;;) {
		if ((r = sim_pick_rec(s, true)) != NULL) {
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
}

static void
sim_run(uint64_t seed)
{
	static struct sim s;
	struct exec_config cfg = { 0 };
	char err[256];
	json_t *j;
	size_t i;
	unsigned steps;

	memset(&s, 0, sizeof s);
	s.seed = s.rng = seed ? seed : 1;
	s.trace = getenv("STEXEC_TRACE") != NULL;
	for (i = 0; i < nitems(tool_json); i++) {
		j = json_loads(tool_json[i], 0, NULL);
		s.defs[i] = tooldef_parse(j, err, sizeof err);
		cr_assert(s.defs[i] != NULL, "%s", err);
		json_decref(j);
	}
	s.ndefs = nitems(tool_json);
	s.max_parallel = 1 + sim_pick(&s, 4);
	cfg.max_parallel = s.max_parallel;
	cfg.effect = sim_effect;
	cfg.arg = &s;
	s.ex = exec_new(&cfg, "/", NULL);
	s.turn = 1;
	steps = 10 + sim_pick(&s, 80);
	for (i = 0; i < steps && s.turn < MAX_TURNS - 2; i++)
		sim_step(&s);
	sim_finish(&s);
	exec_close(s.ex);
	exec_free(s.ex);
	for (i = 0; i < s.ndefs; i++)
		tooldef_unref(s.defs[i]);
}

Test(random, schedules_keep_every_invariant)
{
	const char *env_seed = getenv("STEXEC_SEED");
	const char *env_n = getenv("STEXEC_SCHEDULES");
	uint64_t base = env_seed != NULL ? strtoull(env_seed, NULL, 10) :
	    (uint64_t)time(NULL);
	unsigned long n = env_n != NULL ? strtoul(env_n, NULL, 10) : 10000;
	unsigned long i;

	/* Schedule i runs with seed base + i. */
	cr_log_info("STEXEC_SEED=%" PRIu64 ", %lu schedules", base, n);
	for (i = 0; i < n; i++)
		sim_run(base + i);
}
