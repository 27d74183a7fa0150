/* concurrencySafe rule patterns: POSIX ERE with a bounded cost. */
#include "core/pattern.h"

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Sizes saturate here: far past any bound, far from overflow. */
#define PATTERN_SATURATE ((uint64_t)1 << 40)
/* A repetition count this large is refused by regcomp anyway. */
#define PATTERN_COUNT_MAX 100000
/* Subject bytes x size matched before the DFA state cache is dropped. */
#define PATTERN_RECOMPILE ((uint64_t)1 << 16)

struct pattern {
	char *wrapped;  /* "^.*(SOURCE)": one pass over the subject */
	regex_t re;
	size_t size;
	size_t subject_max;
	uint64_t used;  /* subject bytes x size since re was compiled */
};

/*
 * What a piece (or a run of pieces) holds of the anchors (^, $, \b, \<, ()
 * ...: pieces that match the empty string only at some places) glibc's
 * regcomp can pass one after the other without matching a byte. Each such
 * anchor copies what can follow it with its condition attached, so the
 * time grows as a high power of how many are in a row: 64 \b took 4 s,
 * 64 (a|\b) or 12 (\b|\B) a tenth of a second, 10 ($|\b) 180 ms: hence
 * PATTERN_MAX_ANCHORS is 16. Counted: over a match of the empty string
 * (n, when empty), at the start (s) and the end (p) of a match, and
 * anywhere inside (m). Alternatives add up: their anchors are all passed
 * at the same point.
 */
struct pattern_run {
	bool empty;     /* it can match "" */
	uint64_t n, s, p, m;
};

/*
 * One group level of the scan: its size so far and its last piece's, and
 * the runs of the alternatives closed so far, of the current one before
 * its last piece, and of the last piece.
 */
struct pattern_frame {
	uint64_t sum;
	uint64_t last;
	bool has_last, has_alt;
	struct pattern_run alt, prev, piece;
};

static uint64_t	pattern_cap(uint64_t);
static uint64_t	pattern_max(uint64_t, uint64_t);
static struct pattern_run pattern_then(struct pattern_run,
		    struct pattern_run);
static struct pattern_run pattern_or(struct pattern_run, struct pattern_run);
static struct pattern_run pattern_anchor(uint64_t);
static struct pattern_run pattern_branch(const struct pattern_frame *);
static void	pattern_repeat(struct pattern_frame *, uint64_t, bool,
		    uint64_t);
static void	pattern_piece(struct pattern_frame *, uint64_t,
		    struct pattern_run);
static void	pattern_open(struct pattern_frame *);
static bool	pattern_loop(struct pattern_frame *, bool, size_t, char *,
		    size_t);
static size_t	pattern_bracket(const char *, size_t);
static size_t	pattern_interval(const char *, size_t, uint64_t *,
		    uint64_t *, bool *);
static bool	pattern_scan(const char *, size_t *, char *, size_t);
static int	pattern_regcomp(regex_t *, const char *, char *, size_t);

static uint64_t
pattern_cap(uint64_t v)
{
	return v > PATTERN_SATURATE ? PATTERN_SATURATE : v;
}

static uint64_t
pattern_max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* x then y: a run across them needs what lies between to match "". */
static struct pattern_run
pattern_then(struct pattern_run x, struct pattern_run y)
{
	struct pattern_run r;

	r.empty = x.empty && y.empty;
	r.n = r.empty ? pattern_cap(x.n + y.n) : 0;
	r.s = x.empty ? pattern_max(x.s, pattern_cap(x.n + y.s)) : x.s;
	r.p = y.empty ? pattern_max(y.p, pattern_cap(x.p + y.n)) : y.p;
	r.m = pattern_max(pattern_max(x.m, y.m), pattern_cap(x.p + y.s));
	return r;
}

/*
 * x or y: their leading anchors are passed at the same point, so they add
 * up for what comes before; one layer of them alone is cheap (64 \bls\b
 * alternatives compile in 0.1 ms).
 */
static struct pattern_run
pattern_or(struct pattern_run x, struct pattern_run y)
{
	struct pattern_run r;

	r.empty = x.empty || y.empty;
	r.s = pattern_cap(x.s + y.s);
	r.n = r.empty ? r.s : 0;
	r.p = pattern_cap(x.p + y.p);
	r.m = pattern_max(x.m, y.m);
	return r;
}

/* An anchor of weight w (a byte or a bracket expression: weight 0, "no"). */
static struct pattern_run
pattern_anchor(uint64_t w)
{
	struct pattern_run r = { w > 0, w, w, w, w };

	return r;
}

/* The current alternative so far. */
static struct pattern_run
pattern_branch(const struct pattern_frame *f)
{
	return f->has_last ? pattern_then(f->prev, f->piece) : f->prev;
}

/*
 * The last piece repeated: glibc's regcomp copies it count times. When it
 * may run more than once, the end of one run meets the start of the next
 * (its operand cannot match "": pattern_loop); with min 0 it may be
 * skipped, which passes its leading anchors too.
 */
static void
pattern_repeat(struct pattern_frame *f, uint64_t count, bool more_than_once,
    uint64_t min)
{
	uint64_t grown = pattern_cap(f->last * count + 1);

	f->sum = pattern_cap(f->sum - f->last + grown);
	f->last = grown;
	if (more_than_once)
		f->piece.m = pattern_max(f->piece.m,
		    pattern_cap(f->piece.p + f->piece.s));
	if (min == 0) {
		f->piece.empty = true;
		f->piece.n = f->piece.s;
	}
}

/* A new piece of size n after the last one. */
static void
pattern_piece(struct pattern_frame *f, uint64_t n, struct pattern_run run)
{
	f->prev = pattern_branch(f);
	f->sum = pattern_cap(f->sum + n);
	f->last = n;
	f->piece = run;
	f->has_last = true;
}

/* A group or an alternative starts: nothing in it yet. */
static void
pattern_open(struct pattern_frame *f)
{
	f->has_last = false;
	f->prev = pattern_anchor(0);
	f->prev.empty = true;
}

/*
 * A repetition that may run more than once over a piece that can match
 * the empty string ((a*)*, a**, (a|b?)+): glibc's regcomp takes time
 * exponential in how many of them a pattern holds (20 of (a*)* cost a
 * second, 40 never finish), and they mean nothing the inner piece does not.
 */
static bool
pattern_loop(struct pattern_frame *f, bool more_than_once, size_t at,
    char *err, size_t errlen)
{
	if (!more_than_once || !f->has_last || !f->piece.empty)
		return true;
	snprintf(err, errlen, "the repetition at byte %zu repeats something "
	    "that can match the empty string (like (a*)* or a**): drop one of "
	    "the two", at);
	return false;
}

/* The index just past the bracket expression opening at s[i]. */
static size_t
pattern_bracket(const char *s, size_t i)
{
	char kind;

	i++;
	if (s[i] == '^')
		i++;
	if (s[i] == ']')
		i++;
	while (s[i] != '\0' && s[i] != ']') {
		if (s[i] == '[' && (s[i + 1] == ':' || s[i + 1] == '=' ||
		    s[i + 1] == '.')) {
			kind = s[i + 1];
			for (i += 2; s[i] != '\0' &&
			    !(s[i] == kind && s[i + 1] == ']'); i++)
				;
			if (s[i] != '\0')
				i += 2;
		} else
			i++;
	}
	return s[i] == ']' ? i + 1 : i;
}

/*
 * An interval {m}, {m,}, {,n} or {m,n} at s[i]: the index past it, the
 * copies regcomp makes, the least number of runs, and whether its operand
 * may run more than once ({m,} is as unbounded as *, {m,n} with n > 1
 * repeats however regcomp lays the copies out); 0 when it is not one
 * (regcomp judges the text).
 */
static size_t
pattern_interval(const char *s, size_t i, uint64_t *count, uint64_t *min,
    bool *more_than_once)
{
	uint64_t m = 0, n = 0;
	bool has_m = false, comma = false, has_n = false;

	for (i++; s[i] >= '0' && s[i] <= '9'; i++, has_m = true)
		if ((m = m * 10 + (uint64_t)(s[i] - '0')) > PATTERN_COUNT_MAX)
			m = PATTERN_COUNT_MAX;
	if (s[i] == ',') {
		comma = true;
		for (i++; s[i] >= '0' && s[i] <= '9'; i++, has_n = true)
			if ((n = n * 10 + (uint64_t)(s[i] - '0')) >
			    PATTERN_COUNT_MAX)
				n = PATTERN_COUNT_MAX;
	}
	if (s[i] != '}' || (!has_m && !has_n))
		return 0;
	*min = m;
	*more_than_once = comma ? !has_n || n > 1 : m > 1;
	if (!comma)
		*count = m;
	else if (!has_n)
		*count = m + 1;
	else
		*count = n > m ? n : m;
	if (*count == 0)
		*count = 1;
	return i + 1;
}

/*
 * Refuse what regcomp would accept but the loop cannot afford, and a ')'
 * without its '(' (regcomp takes it as a literal, which would break the
 * wrapping). The expanded size goes to *size. Syntax is regcomp's business.
 */
static bool
pattern_scan(const char *s, size_t *size, char *err, size_t errlen)
{
	size_t len = strlen(s), depth = 0, i = 0, next;
	struct pattern_frame *f = xcalloc(len + 1, sizeof *f);
	uint64_t count, min;
	struct pattern_run run;
	bool ok = false, more;

	pattern_open(&f[0]);

	while (s[i] != '\0') {
		switch (s[i]) {
		case '\\':
			if (s[i + 1] >= '1' && s[i + 1] <= '9') {
				snprintf(err, errlen, "back-references (\\%c) "
				    "are not allowed", s[i + 1]);
				goto out;
			}
			/*
			 * \<, \` ... are anchors; \b and \B two each (glibc
			 * makes them one of two).
			 */
			pattern_piece(&f[depth], 1, pattern_anchor(
			    s[i + 1] == '\0' ? 0 : strchr("bB", s[i + 1]) !=
			    NULL ? 2 : strchr("<>`'", s[i + 1]) != NULL));
			i += s[i + 1] != '\0' ? 2 : 1;
			break;
		case '[':
			pattern_piece(&f[depth], 1, pattern_anchor(0));
			i = pattern_bracket(s, i);
			break;
		case '(':
			depth++;
			f[depth].sum = f[depth].last = 0;
			f[depth].has_alt = false;
			pattern_open(&f[depth]);
			i++;
			break;
		case ')':
			if (depth == 0) {
				snprintf(err, errlen, "unmatched ')' at byte "
				    "%zu (write \\) for a literal one)", i);
				goto out;
			}
			count = pattern_cap(f[depth].sum + 1);
			/* () stays in the tree: an anchor matching anywhere. */
			if (!f[depth].has_alt && !f[depth].has_last)
				run = pattern_anchor(1);
			else if (!f[depth].has_alt)
				run = pattern_branch(&f[depth]);
			else
				run = pattern_or(f[depth].alt,
				    pattern_branch(&f[depth]));
			depth--;
			pattern_piece(&f[depth], count, run);
			i++;
			break;
		case '|':
			f[depth].alt = f[depth].has_alt ? pattern_or(
			    f[depth].alt, pattern_branch(&f[depth])) :
			    pattern_branch(&f[depth]);
			f[depth].has_alt = true;
			f[depth].sum = pattern_cap(f[depth].sum + 1);
			f[depth].last = 0;
			pattern_open(&f[depth]);
			i++;
			break;
		case '*':
		case '+':
			if (!pattern_loop(&f[depth], true, i, err, errlen))
				goto out;
			pattern_repeat(&f[depth], s[i] == '+' ? 2 : 1, true,
			    s[i] == '+');
			i++;
			break;
		case '?':
			pattern_repeat(&f[depth], 1, false, 0);
			i++;
			break;
		case '{':
			if ((next = pattern_interval(s, i, &count, &min,
			    &more)) != 0) {
				if (!pattern_loop(&f[depth], more, i, err,
				    errlen))
					goto out;
				pattern_repeat(&f[depth], count, more, min);
				i = next;
				break;
			}
			__attribute__((fallthrough)); /* a literal { */
		default:
			/* ^ and $ match the empty string; the rest a byte. */
			pattern_piece(&f[depth], 1, pattern_anchor(s[i] == '^' ||
			    s[i] == '$'));
			i++;
			break;
		}
	}
	/* An unclosed group: regcomp says so; its size still counts. */
	for (; depth > 0; depth--)
		f[depth - 1].sum = pattern_cap(f[depth - 1].sum + f[depth].sum);
	if (f[0].sum > PATTERN_MAX_SIZE) {
		snprintf(err, errlen, "too costly: its repetitions expand to "
		    "%s%llu nodes, at most %d are allowed",
		    f[0].sum == PATTERN_SATURATE ? "over " : "",
		    (unsigned long long)f[0].sum, PATTERN_MAX_SIZE);
		goto out;
	}
	run = f[0].has_alt ? pattern_or(f[0].alt, pattern_branch(&f[0])) :
	    pattern_branch(&f[0]);
	if (run.m > PATTERN_MAX_ANCHORS) {
		snprintf(err, errlen, "too costly: %llu anchors (^, $, \\b, "
		    "\\<, () ...; \\b and \\B count twice) can apply one after "
		    "the other with no byte matched between them, at most %d "
		    "are allowed", (unsigned long long)run.m,
		    PATTERN_MAX_ANCHORS);
		goto out;
	}
	*size = (size_t)f[0].sum;
	ok = true;
out:
	free(f);
	return ok;
}

static int
pattern_regcomp(regex_t *re, const char *s, char *err, size_t errlen)
{
	char detail[256];
	int rc;

	if ((rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB)) == 0)
		return 0;
	regerror(rc, re, detail, sizeof detail);
	regfree(re);
	snprintf(err, errlen, "invalid regular expression: %s", detail);
	return -1;
}

struct pattern *
pattern_compile(const char *s, char *err, size_t errlen)
{
	struct pattern *p;
	regex_t re;
	size_t size, len = strlen(s);
	uint64_t max;

	if (len > PATTERN_MAX_LEN) {
		snprintf(err, errlen, "%zu bytes long, at most %d are allowed",
		    len, PATTERN_MAX_LEN);
		return NULL;
	}
	if (!pattern_scan(s, &size, err, errlen) ||
	    pattern_regcomp(&re, s, err, errlen) != 0)
		return NULL;
	regfree(&re);
	p = xcalloc(1, sizeof *p);
	xasprintf(&p->wrapped, "^.*(%s)", s);
	if (pattern_regcomp(&p->re, p->wrapped, err, errlen) != 0) {
		free(p->wrapped);
		free(p);
		return NULL;
	}
	/* The wrapping adds its own few nodes to what the cost counts. */
	p->size = size + 4;
	max = PATTERN_MATCH_BUDGET / ((uint64_t)p->size * p->size);
	p->subject_max = max < PATTERN_SUBJECT_MAX ? (size_t)max :
	    PATTERN_SUBJECT_MAX;
	return p;
}

void
pattern_free(struct pattern *p)
{
	if (p == NULL)
		return;
	regfree(&p->re);
	free(p->wrapped);
	free(p);
}

size_t
pattern_size(const struct pattern *p)
{
	return p->size;
}

size_t
pattern_subject_max(const struct pattern *p)
{
	return p->subject_max;
}

/*
 * Anchored at ^.*, glibc's matcher makes one pass over the subject instead
 * of one per start position (quadratic). What remains is its lazily built
 * DFA: a new state per subject byte at worst, each costing about size²
 * steps and size nodes of memory, kept in the regex_t. Hence the subject
 * bound, and a fresh compile once enough states may have piled up.
 */
int
pattern_match(struct pattern *p, const char *subject, size_t len)
{
	char err[300];

	if (len > p->subject_max)
		return -1;
	if (p->used >= PATTERN_RECOMPILE) {
		regfree(&p->re);
		if (pattern_regcomp(&p->re, p->wrapped, err, sizeof err) != 0)
			fatal("%s: %s", __func__, err);
		p->used = 0;
	}
	p->used += (uint64_t)len * p->size;
	return regexec(&p->re, subject, 0, NULL, 0) == 0;
}
