/* Matchers as Claude Code documents them, and the regular expressions under them. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "hooks/hooks.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Backtracking steps and nesting one match may take: far beyond any
   sane tool-name pattern, far below a stalled event loop. */
#define HOOKS_MATCH_LIMIT 100000
#define HOOKS_DEPTH_LIMIT 1000
#define HOOKS_HEAP_LIMIT_KIB 1024
/* Names in one exact list. */
#define HOOKS_NAMES_MAX 64

struct hooks_regex {
	pcre2_code *code;
	pcre2_match_context *mctx;
	pcre2_match_data *md;   /* reused: the daemon matches on one thread */
};

struct hooks_matcher {
	bool all;
	char **names;      /* an exact name or list, or NULL */
	size_t nnames;
	struct hooks_regex *re;
};

static bool	hooks_matcher_plain(const char *);
static bool	hooks_matcher_names(struct hooks_matcher *, const char *);
static bool	hooks_regex_try(const struct hooks_regex *, const char *);

static const char *const hooks_aliases[][2] = {
	{ "bash", "Bash" },
	{ "read_file", "Read" },
	{ "write_file", "Write" },
	{ "edit_file", "Edit" },
	{ "multi_edit", "MultiEdit" },
	{ "glob", "Glob" },
	{ "grep", "Grep" },
	{ "list_dir", "LS" },
	{ "bash_output", "BashOutput" },
	{ "kill_shell", "KillShell" },
};

const char *
hooks_tool_alias(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof hooks_aliases / sizeof hooks_aliases[0]; i++)
		if (strcmp(hooks_aliases[i][0], name) == 0)
			return hooks_aliases[i][1];
	return NULL;
}

/*
 * JavaScript's dialect in PCRE2's terms: UTF (names are UTF-8; the u flag's
 * code points), ALT_BSUX and EXTRA_ALT_BSUX (\uhhhh, \u{h...}, \xhh as JS
 * reads them; \U is a plain U), MATCH_UNSET_BACKREF (a reference to a group
 * that did not take part matches empty), ALLOW_EMPTY_CLASS ([] matches
 * nothing, [^] anything), DOLLAR_ENDONLY ($ is the end, not before a final
 * newline). NEVER_BACKSLASH_C: \C could split a UTF-8 character. No JIT:
 * the interpreter honours the match, depth and heap limits.
 */
struct hooks_regex *
hooks_regex_compile(const char *src, bool anchored, char *err, size_t errlen)
{
	struct hooks_regex *re;
	pcre2_compile_context *cctx;
	PCRE2_UCHAR msg[256];
	PCRE2_SIZE off;
	int code;
	uint32_t opts = PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_MATCH_UNSET_BACKREF |
	    PCRE2_ALLOW_EMPTY_CLASS | PCRE2_DOLLAR_ENDONLY |
	    PCRE2_NEVER_BACKSLASH_C;

	if (strlen(src) > HOOKS_PATTERN_MAX) {
		snprintf(err, errlen, "longer than %d bytes", HOOKS_PATTERN_MAX);
		return NULL;
	}
	if (anchored)
		opts |= PCRE2_ANCHORED | PCRE2_ENDANCHORED;
	if ((cctx = pcre2_compile_context_create(NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	pcre2_set_compile_extra_options(cctx, PCRE2_EXTRA_ALT_BSUX);
	/* Nesting bounded as the rest of a rule is. */
	pcre2_set_parens_nest_limit(cctx, 64);
	re = xcalloc(1, sizeof *re);
	re->code = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, opts,
	    &code, &off, cctx);
	pcre2_compile_context_free(cctx);
	if (re->code == NULL) {
		pcre2_get_error_message(code, msg, sizeof msg);
		snprintf(err, errlen, "not a regular expression at offset %zu: "
		    "%s", (size_t)off, (const char *)msg);
		free(re);
		return NULL;
	}
	if ((re->mctx = pcre2_match_context_create(NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	pcre2_set_match_limit(re->mctx, HOOKS_MATCH_LIMIT);
	pcre2_set_depth_limit(re->mctx, HOOKS_DEPTH_LIMIT);
	pcre2_set_heap_limit(re->mctx, HOOKS_HEAP_LIMIT_KIB);
	if ((re->md = pcre2_match_data_create_from_pattern(re->code, NULL)) ==
	    NULL)
		fatal("%s: out of memory", __func__);
	return re;
}

void
hooks_regex_free(struct hooks_regex *re)
{
	if (re == NULL)
		return;
	pcre2_code_free(re->code);
	pcre2_match_context_free(re->mctx);
	pcre2_match_data_free(re->md);
	free(re);
}

int
hooks_regex_match(const struct hooks_regex *re, const char *s, size_t len)
{
	int rc;

	rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0, re->md,
	    re->mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	/* A limit, or a subject that is not UTF-8. */
	return -1;
}

/* Only letters, digits, _ - , | and spaces: names, not a pattern. */
static bool
hooks_matcher_plain(const char *s)
{
	for (; *s != '\0'; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') ||
		    ('0' <= *s && *s <= '9') || strchr("_-,| ", *s) != NULL))
			return false;
	return true;
}

static bool
hooks_matcher_names(struct hooks_matcher *m, const char *s)
{
	const char *p = s, *end;

	while (*p != '\0') {
		while (*p == ' ' || *p == '|' || *p == ',')
			p++;
		end = p + strcspn(p, " |,");
		if (end > p) {
			if (m->nnames == HOOKS_NAMES_MAX)
				return false;
			m->names = xreallocarray(m->names, m->nnames + 1,
			    sizeof *m->names);
			m->names[m->nnames++] = xstrndup(p, (size_t)(end - p));
		}
		p = end;
	}
	return true;
}

struct hooks_matcher *
hooks_matcher_compile(const char *s, char *err, size_t errlen)
{
	struct hooks_matcher *m = xcalloc(1, sizeof *m);
	char why[300];

	if (s == NULL || *s == '\0' || strcmp(s, "*") == 0) {
		m->all = true;
		return m;
	}
	if (strlen(s) > HOOKS_PATTERN_MAX) {
		snprintf(err, errlen, "longer than %d bytes", HOOKS_PATTERN_MAX);
		free(m);
		return NULL;
	}
	if (hooks_matcher_plain(s)) {
		if (!hooks_matcher_names(m, s)) {
			snprintf(err, errlen, "more than %d names",
			    HOOKS_NAMES_MAX);
			hooks_matcher_free(m);
			return NULL;
		}
		/* Only separators: no name, so every tool, as empty is. */
		m->all = m->nnames == 0;
		return m;
	}
	if ((m->re = hooks_regex_compile(s, false, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "%s", why);
		free(m);
		return NULL;
	}
	return m;
}

void
hooks_matcher_free(struct hooks_matcher *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->nnames; i++)
		free(m->names[i]);
	free(m->names);
	hooks_regex_free(m->re);
	free(m);
}

/* A limit that stopped the match runs the hook: a guard is not skipped. */
static bool
hooks_regex_try(const struct hooks_regex *re, const char *name)
{
	return hooks_regex_match(re, name, strlen(name)) != 0;
}

bool
hooks_matcher_match(const struct hooks_matcher *m, const char *name,
    const char *alias)
{
	size_t i;

	if (m->all)
		return true;
	if (alias != NULL && strcmp(alias, name) == 0)
		alias = NULL;
	if (m->re != NULL)
		return hooks_regex_try(m->re, name) ||
		    (alias != NULL && hooks_regex_try(m->re, alias));
	for (i = 0; i < m->nnames; i++)
		if (strcmp(m->names[i], name) == 0 ||
		    (alias != NULL && strcmp(m->names[i], alias) == 0))
			return true;
	return false;
}
