/*
 * A simulated session around the executor core that checks the invariants
 * of doc/design.md §2 after every step: at most maxParallel executing, an
 * unsafe tool only alone, results once each and in order, nothing for a
 * discarded turn, every drain answered, no process left. Every choice is
 * asked of a picker, so one simulation serves both the seeded random
 * schedules (test_executor_random.c) and the fuzzer (fuzz/fuzz_executor.c).
 */
#ifndef STEXEC_EXEC_SIM_H
#define STEXEC_EXEC_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/executor.h"

#define SIM_MAX_RECS 512
#define SIM_MAX_TURNS 512

/* What the simulation knows of one added tool. */
struct sim_rec {
	uint64_t turn;
	bool known, safe, stream;
	struct exec_tool *t; /* valid while running */
	bool running;        /* has a process */
	bool waiting;        /* in its slot without a process: permission
	                        requested, or its hooks run */
	int hooks;           /* 1 + enum exec_hook_phase while its hooks
	                        run (exec_config.hooks said so), else 0 */
	bool asked;          /* a permission_request came */
	bool killed;
	bool completed;
	int results;
};

struct sim_ops {
	/* A choice in [0, n). */
	unsigned (*pick)(void *arg, unsigned n);
	/* Bytes for a progress line, output chunk or exit output; NULL:
	   the usual ones. Must stay valid until the next call. */
	const char *(*text)(void *arg, size_t *len);
	/* An invariant broke: report it (does not return). */
	void (*fail)(void *arg, const char *step, const char *what);
	void *arg;
};

struct sim {
	struct sim_ops ops;
	unsigned max_parallel;
	struct exec *ex;
	struct tooldef *defs[16];
	size_t ndefs;
	struct sim_rec recs[SIM_MAX_RECS];
	size_t nrecs;
	size_t turn_start[SIM_MAX_TURNS], turn_cursor[SIM_MAX_TURNS];
	bool turn_discarded[SIM_MAX_TURNS];
	uint64_t turn;
	unsigned n_exec, n_exec_unsafe;
	unsigned drains_pending, drains_answered;
	bool hooks;          /* this schedule's tools may have hooks */
	struct sim_rec *exiting; /* during its exec_exited call */
	const char *step;
	bool trace;          /* print every step and effect */
};

/* Parse the tool set and start an executor with maxParallel from ops. */
void sim_start(struct sim *, const struct sim_ops *);
/* One event chosen by the picker; false once no more turns fit. */
bool sim_step(struct sim *);
/* Let everything finish, drain, check the pairing, free everything. */
void sim_finish(struct sim *);

#endif
