/*
 * concurrencySafe rule patterns: what pattern_compile refuses and why, and
 * the bound its refusals are for: every pattern it accepts out of a large
 * generated family compiles (as the daemon compiles it, with the daemon's
 * flags) in under PATTERN_TEST_MS milliseconds of CPU.
 */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pattern.h"
#include "util.h"

/* The bound: regcomp runs on the daemon's event loop. */
#define PATTERN_TEST_MS 50.0

static char err[512];

static double	cpu_ms(void);
static double	regcomp_ms(const char *);
static double	compile_cost(const char *);
static bool	accepted(const char *);

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* regcomp's time on s, with the flags pattern.c uses. */
static double
regcomp_ms(const char *s)
{
	regex_t re;
	double t0 = cpu_ms(), t;
	int rc = regcomp(&re, s, REG_EXTENDED | REG_NOSUB);

	t = cpu_ms() - t0;
	cr_assert_eq(rc, 0, "accepted but regcomp refuses: %s", s);
	regfree(&re);
	return t;
}

/*
 * The longer of the two compiles an accepted pattern costs: as written,
 * and wrapped as pattern.c keeps (and recompiles) it. A time past the
 * bound is measured again, so that a preemption is not a finding.
 */
static double
compile_cost(const char *s)
{
	char *wrapped;
	double t, w;

	xasprintf(&wrapped, "^.*(%s)", s);
	t = regcomp_ms(s);
	w = regcomp_ms(wrapped);
	if (t > PATTERN_TEST_MS || w > PATTERN_TEST_MS) {
		t = regcomp_ms(s) < t ? regcomp_ms(s) : t;
		w = regcomp_ms(wrapped) < w ? regcomp_ms(wrapped) : w;
	}
	free(wrapped);
	return t > w ? t : w;
}

static bool
accepted(const char *s)
{
	struct pattern *p = pattern_compile(s, err, sizeof err);

	pattern_free(p);
	return p != NULL;
}

/*
 * Any repetition that may run more than once, however spelled, of what can
 * match the empty string: regcomp's time is exponential in how many.
 */
Test(pattern, repeating_the_empty_match_is_refused)
{
	static const char *const bad[] = { "(a*){0,}", "a{0,}{0,}",
		"(a|){2,}", "(a?){2,5}", "(|a)+", "(a{0,3})*", "()*", "(^)*",
		"(a*b*)*", "a{0,}*", "(a*){1,}", "(a*){2}", "(a?){,2}",
		"(a{0}){2,}", "(\\b)+", "($){0,}", "(a|b?){1,3}", "a**",
		"(a|(b|)){3,}", "((a*)?){2,}" };
	char msg[256];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect(!accepted(bad[i]), "accepted %s", bad[i]);
		cr_expect(strstr(err, "repeats something that can match the "
		    "empty string") != NULL, "%s: %s", bad[i], err);
	}
	cr_expect(!accepted("x(a*){0,}"));
	snprintf(msg, sizeof msg, "the repetition at byte 5 repeats something "
	    "that can match the empty string (like (a*)* or a**): drop one of "
	    "the two");
	cr_expect_str_eq(err, msg);
}

/* Repetitions that run at most once, or of what cannot match "", are fine. */
Test(pattern, ordinary_patterns_are_accepted)
{
	static const char *const good[] = { "^(cat|ls|grep)( [^;&|]*)?$",
		"a{2,}", "(ab)+", "x*y*", "[a-z]{0,10}", "(a*)?", "(a*){0,1}",
		"(a?){1}", "(a|){1,1}", "(a*){0}", "(xa*)*", "(a*b)*",
		"a{0,}", "(a+){2,5}", "^\\bls\\b( -[a-z]+)*$", "()",
		"(^|[ ;])rm( |$)", "^(git (status|log|diff)|ls)$" };
	size_t i;

	for (i = 0; i < sizeof good / sizeof *good; i++)
		cr_expect(accepted(good[i]), "%s: %s", good[i], err);
}

/* A run of anchors passed without a byte between them: see pattern.c. */
Test(pattern, runs_of_anchors_are_refused)
{
	static const char *const bad[] = {
		/* 9 \b: 18 */
		"\\b\\b\\b\\b\\b\\b\\b\\b\\b",
		/* 5 x 4 */
		"(\\b|\\B)(\\b|\\B)(\\b|\\B)(\\b|\\B)(\\b|\\B)",
		/* 6 x 3: the family test's finding, 10 of them took 180 ms */
		"($|\\b)($|\\b)($|\\b)($|\\b)($|\\b)($|\\b)",
		/* Optional, or one of two: still in a row. */
		"(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)"
		"(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)(a|\\b)",
		"()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?()?"
		"()?()?()?()?()?()?()?()?()?()?()?()?()?",
		/* Repeated, the end of one run meets the start of the next. */
		"(\\b\\b\\b\\b\\b\\ba\\b\\b\\b\\b\\b\\b\\b\\b\\b\\b\\b)+",
		"^(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)(^|$)"
		"(^|$)(^|$)(^|$)(^|$)",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect(!accepted(bad[i]), "accepted %s", bad[i]);
		cr_expect(strstr(err, "anchors") != NULL, "%s: %s", bad[i], err);
	}
	cr_expect(!accepted("\\b\\b\\b\\b\\b\\b\\b\\b\\b"));
	cr_expect_str_eq(err, "too costly: 18 anchors (^, $, \\b, \\<, () ...; "
	    "\\b and \\B count twice) can apply one after the other with no "
	    "byte matched between them, at most 16 are allowed");
	/* A byte between them breaks the run; alternatives alone are cheap. */
	cr_expect(accepted("\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba"
	    "\\ba\\ba\\ba\\ba\\ba\\ba\\ba\\ba"), "%s", err);
	cr_expect(accepted("^ls$|^cat$|^pwd$|^id$|^df$|^du$|^ps$|^w$|^who$|"
	    "^uname$|^date$|^env$|^git status$|^git log$|^git diff$|^free$|"
	    "^uptime$|^hostname$|^whoami$|^groups$"), "%s", err);
	cr_expect(accepted("\\b\\b\\b\\b\\b\\b\\b\\b"), "%s", err);
}

/*
 * Atoms, repetitions, nesting: every shape the refusals are about, and
 * their neighbours that are accepted.
 */
static const char *const atoms[] = { "a", "a*", "a?", "()", "(a|)", "^",
	"\\b", "[ab]", "\\<", "$", "(a|\\b)", "(|)" };
static const char *const ops[] = { "", "*", "+", "?", "{0,}", "{1,}",
	"{2,}", "{0,1}", "{2,5}", "{0,3}" };
#define NATOMS (sizeof atoms / sizeof *atoms)
#define NOPS (sizeof ops / sizeof *ops)

/*
 * A sanitizer build compiles every STEXEC_TEST_BUILD_SCALE-th pattern of
 * the family (the time rule, tests/README.md): the bound is the plain
 * build's to keep, and a third of the family is checked memory-safe.
 */
struct family {
	size_t seen, tried, accepted;
	double worst;
	char worst_pattern[PATTERN_MAX_LEN + 1];
};

static void	family_try(struct family *, const char *);
static void	family_repeat(struct family *, const char *);

/* One pattern: when accepted, its compile must be within the bound. */
static void
family_try(struct family *fam, const char *s)
{
	double t;

	if (strlen(s) > PATTERN_MAX_LEN ||
	    fam->seen++ % STEXEC_TEST_BUILD_SCALE != 0)
		return;
	fam->tried++;
	if (!accepted(s))
		return;
	fam->accepted++;
	t = compile_cost(s);
	cr_expect(t <= PATTERN_TEST_MS, "%s: regcomp took %.1f ms", s, t);
	if (t > fam->worst) {
		fam->worst = t;
		snprintf(fam->worst_pattern, sizeof fam->worst_pattern, "%s", s);
	}
}

/* A piece alone, and concatenated 2, 5, 10 and 20 times, and repeated. */
static void
family_repeat(struct family *fam, const char *piece)
{
	static const size_t times[] = { 1, 2, 5, 10, 20 };
	struct buf b = { 0 };
	size_t i, k, o;

	for (i = 0; i < sizeof times / sizeof *times; i++) {
		buf_reset(&b);
		for (k = 0; k < times[i]; k++)
			buf_printf(&b, "%s", piece);
		family_try(fam, b.data);
		for (o = 1; o < NOPS; o++) {
			buf_reset(&b);
			buf_printf(&b, "(");
			for (k = 0; k < times[i]; k++)
				buf_printf(&b, "%s", piece);
			buf_printf(&b, ")%s", ops[o]);
			family_try(fam, b.data);
		}
	}
	buf_free(&b);
}

Test(pattern, accepted_patterns_compile_within_the_bound,
    .timeout = 120 * STEXEC_TEST_BUILD_SCALE)
{
	struct family fam = { 0 };
	char *p1, *p2, *p3, *alt;
	size_t a, o1, o2, o3, b;

	for (a = 0; a < NATOMS; a++)
		for (o1 = 0; o1 < NOPS; o1++) {
			/* Depth 1: the atom repeated, bare and grouped. */
			xasprintf(&p1, "%s%s", atoms[a], ops[o1]);
			family_repeat(&fam, p1);
			for (o2 = 0; o2 < NOPS; o2++) {
				xasprintf(&p2, "(%s)%s", p1, ops[o2]);
				family_repeat(&fam, p2);
				/* Depth 3, with a neighbour inside. */
				for (o3 = 1; o3 < NOPS; o3++) {
					xasprintf(&p3, "(%sa%s)%s", p2, p2,
					    ops[o3]);
					family_try(&fam, p3);
					free(p3);
					xasprintf(&p3, "((%s)%s)%s", p2,
					    ops[o3], ops[o1]);
					family_repeat(&fam, p3);
					free(p3);
				}
				free(p2);
			}
			/* Two atoms side by side, and one or the other. */
			for (b = 0; b < NATOMS; b++) {
				xasprintf(&p2, "%s%s%s", p1, atoms[b], ops[o1]);
				family_repeat(&fam, p2);
				xasprintf(&alt, "(%s|%s)", p1, atoms[b]);
				family_repeat(&fam, alt);
				free(alt);
				free(p2);
			}
			free(p1);
		}
	cr_log_info("%zu patterns, %zu accepted, the slowest %.2f ms: %s",
	    fam.tried, fam.accepted, fam.worst, fam.worst_pattern);
	fprintf(stderr, "pattern family: %zu patterns, %zu accepted, the "
	    "slowest compile %.2f ms: %s\n", fam.tried, fam.accepted,
	    fam.worst, fam.worst_pattern);
	cr_expect_gt(fam.accepted, 1000);
}
