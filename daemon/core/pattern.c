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
 * One group level of the scan: its size so far and its last piece's, and
 * which parts can match the empty string: the alternatives closed so far,
 * the current one before its last piece, and the last piece.
 */
struct pattern_frame {
	uint64_t sum;
	uint64_t last;
	bool has_last;
	bool alt_empty, prev_empty, last_empty;
};

static uint64_t	pattern_cap(uint64_t);
static void	pattern_repeat(struct pattern_frame *, uint64_t);
static void	pattern_piece(struct pattern_frame *, uint64_t, bool);
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

/* The last piece repeated: glibc's regcomp copies it count times. */
static void
pattern_repeat(struct pattern_frame *f, uint64_t count)
{
	uint64_t grown = pattern_cap(f->last * count + 1);

	f->sum = pattern_cap(f->sum - f->last + grown);
	f->last = grown;
}

/* A new piece of size n after the last one; empty: it can match "". */
static void
pattern_piece(struct pattern_frame *f, uint64_t n, bool empty)
{
	f->prev_empty = f->prev_empty && f->last_empty;
	f->sum = pattern_cap(f->sum + n);
	f->last = n;
	f->last_empty = empty;
	f->has_last = true;
}

/* A group or an alternative starts: nothing in it yet. */
static void
pattern_open(struct pattern_frame *f)
{
	f->has_last = false;
	f->prev_empty = f->last_empty = true;
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
	if (!more_than_once || !f->has_last || !f->last_empty)
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
	bool ok = false, empty, more;

	pattern_open(&f[0]);

	while (s[i] != '\0') {
		switch (s[i]) {
		case '\\':
			if (s[i + 1] >= '1' && s[i + 1] <= '9') {
				snprintf(err, errlen, "back-references (\\%c) "
				    "are not allowed", s[i + 1]);
				goto out;
			}
			/* \b, \<, \` ... match the empty string. */
			pattern_piece(&f[depth], 1, s[i + 1] != '\0' &&
			    strchr("bB<>`'", s[i + 1]) != NULL);
			i += s[i + 1] != '\0' ? 2 : 1;
			break;
		case '[':
			pattern_piece(&f[depth], 1, false);
			i = pattern_bracket(s, i);
			break;
		case '(':
			depth++;
			f[depth].sum = f[depth].last = 0;
			f[depth].alt_empty = false;
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
			empty = f[depth].alt_empty || (f[depth].prev_empty &&
			    f[depth].last_empty);
			depth--;
			pattern_piece(&f[depth], count, empty);
			i++;
			break;
		case '|':
			f[depth].alt_empty = f[depth].alt_empty ||
			    (f[depth].prev_empty && f[depth].last_empty);
			f[depth].sum = pattern_cap(f[depth].sum + 1);
			f[depth].last = 0;
			pattern_open(&f[depth]);
			i++;
			break;
		case '*':
		case '+':
			if (!pattern_loop(&f[depth], true, i, err, errlen))
				goto out;
			pattern_repeat(&f[depth], s[i] == '+' ? 2 : 1);
			f[depth].last_empty = f[depth].last_empty || s[i] == '*';
			i++;
			break;
		case '?':
			pattern_repeat(&f[depth], 1);
			f[depth].last_empty = true;
			i++;
			break;
		case '{':
			if ((next = pattern_interval(s, i, &count, &min,
			    &more)) != 0) {
				if (!pattern_loop(&f[depth], more, i, err,
				    errlen))
					goto out;
				pattern_repeat(&f[depth], count);
				f[depth].last_empty = f[depth].last_empty ||
				    min == 0;
				i = next;
				break;
			}
			__attribute__((fallthrough)); /* a literal { */
		default:
			/* ^ and $ match the empty string; the rest a byte. */
			pattern_piece(&f[depth], 1, s[i] == '^' || s[i] == '$');
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
