/*
 * Random interleavings of add / progress / exit / kill / abort / discard /
 * drain / permission over random tool mixes, checking the invariants of
 * doc/design.md §2 after every step (exec_sim.c). Seeded: STEXEC_SEED=N
 * reproduces a run, STEXEC_SCHEDULES=N changes how many schedules run
 * (default 10000), STEXEC_TRACE=1 prints every step and effect.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "exec_sim.h"

struct schedule {
	uint64_t seed, rng;
};

static unsigned
schedule_pick(void *arg, unsigned n)
{
	struct schedule *sc = arg;

	/* xorshift64*: small, fast and reproducible everywhere. */
	sc->rng ^= sc->rng >> 12;
	sc->rng ^= sc->rng << 25;
	sc->rng ^= sc->rng >> 27;
	return (unsigned)((sc->rng * 2685821657736338717ULL) % n);
}

static void
schedule_fail(void *arg, const char *step, const char *what)
{
	struct schedule *sc = arg;

	cr_assert_fail("STEXEC_SEED=%" PRIu64 " STEXEC_SCHEDULES=1 "
	    "reproduces; step %s: %s", sc->seed, step, what);
}

static void
schedule_run(uint64_t seed)
{
	static struct sim s;
	struct schedule sc;
	struct sim_ops ops = { .pick = schedule_pick, .fail = schedule_fail,
		.arg = &sc };
	unsigned steps, i;

	sc.seed = sc.rng = seed ? seed : 1;
	sim_start(&s, &ops);
	s.trace = getenv("STEXEC_TRACE") != NULL;
	steps = 10 + schedule_pick(&sc, 80);
	for (i = 0; i < steps && sim_step(&s); i++)
		continue;
	sim_finish(&s);
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
		schedule_run(base + i);
}
