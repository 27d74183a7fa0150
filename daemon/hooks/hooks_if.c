/*
 * The `if` field: one permission rule, as Claude Code writes them. Bash
 * rules are checked against every simple command of the line, found by a
 * small shell tokenizer; path rules are globs turned into anchored
 * expressions for the bounded engine (hooks_regex_*).
 */
#include "hooks/hooks.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "util.h"

/* Beyond these the line is not parsed: the hook runs (fail open). */
#define HOOKS_SHELL_MAX (64 * 1024)
#define HOOKS_SHELL_DEPTH 16
#define HOOKS_SHELL_CMDS 256
#define HOOKS_SHELL_WORDS 1024

enum hooks_rule_kind {
	HOOKS_RULE_TOOL,  /* the tool alone: "Bash", "Edit(*)" */
	HOOKS_RULE_BASH,  /* a command pattern */
	HOOKS_RULE_PATH,  /* a path glob */
	HOOKS_RULE_OTHER, /* a specifier this daemon cannot evaluate */
};

struct hooks_rule {
	char *tool;
	char *spec;
	enum hooks_rule_kind kind;
	struct hooks_regex *re;  /* BASH; PATH once the root is known */
	char *re_root;           /* the root re was made for */
};

/* The tokenizer's state: one line, its simple commands so far. */
struct hooks_sh {
	const char *s;
	size_t i;
	int depth;
	char **cmds;
	size_t ncmds;
};

/* The words of the simple command being read at one nesting level. */
struct hooks_sh_cmd {
	struct buf word;
	bool in_word;
	bool skip_target; /* the next word is a redirection's target */
	char **words;
	size_t nwords;
};

static int	hooks_sh_list(struct hooks_sh *, char);
static int	hooks_sh_word_end(struct hooks_sh_cmd *);
static int	hooks_sh_cmd_end(struct hooks_sh *, struct hooks_sh_cmd *);
static int	hooks_sh_nested(struct hooks_sh *, struct hooks_sh_cmd *, char,
    size_t);
static int	hooks_sh_double(struct hooks_sh *, struct hooks_sh_cmd *);
static int	hooks_sh_redirect(struct hooks_sh *, struct hooks_sh_cmd *);
static void	hooks_sh_cmd_clear(struct hooks_sh_cmd *);
static bool	hooks_sh_reserved(const char *);
static bool	hooks_sh_assignment(const char *);
static void	hooks_re_escape(struct buf *, char);
static char	*hooks_bash_regex(const char *);
static char	*hooks_path_regex(const char *, const char *);
static bool	hooks_rule_bash(const struct hooks_rule *, const json_t *);
static bool	hooks_rule_path(struct hooks_rule *, const json_t *,
    const char *, const char *);
static const char *hooks_input_path(const json_t *);

static bool
hooks_sh_reserved(const char *w)
{
	static const char *const words[] = { "if", "then", "else", "elif",
		"fi", "do", "done", "while", "until", "!", "{", "}", "time" };
	size_t i;

	for (i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strcmp(w, words[i]) == 0)
			return true;
	return false;
}

static bool
hooks_sh_assignment(const char *w)
{
	size_t i = 0;

	if (!(isalpha((unsigned char)w[0]) || w[0] == '_'))
		return false;
	while (isalnum((unsigned char)w[i]) || w[i] == '_')
		i++;
	return w[i] == '=';
}

static void
hooks_sh_cmd_clear(struct hooks_sh_cmd *c)
{
	size_t i;

	for (i = 0; i < c->nwords; i++)
		free(c->words[i]);
	free(c->words);
	c->words = NULL;
	c->nwords = 0;
}

static int
hooks_sh_word_end(struct hooks_sh_cmd *c)
{
	if (!c->in_word)
		return 0;
	c->in_word = false;
	if (c->skip_target) {
		c->skip_target = false;
		buf_reset(&c->word);
		return 0;
	}
	if (c->nwords == HOOKS_SHELL_WORDS)
		return -1;
	c->words = xreallocarray(c->words, c->nwords + 1, sizeof *c->words);
	c->words[c->nwords++] = xstrndup(c->word.data != NULL ? c->word.data :
	    "", c->word.len);
	buf_reset(&c->word);
	return 0;
}

/* The command's words, less leading assignments and reserved words. */
static int
hooks_sh_cmd_end(struct hooks_sh *p, struct hooks_sh_cmd *c)
{
	struct buf b = { 0 };
	size_t i = 0;

	if (hooks_sh_word_end(c) == -1 || c->skip_target)
		return -1;
	while (i < c->nwords && (hooks_sh_assignment(c->words[i]) ||
	    hooks_sh_reserved(c->words[i])))
		i++;
	if (i < c->nwords) {
		if (p->ncmds == HOOKS_SHELL_CMDS) {
			hooks_sh_cmd_clear(c);
			return -1;
		}
		for (; i < c->nwords; i++) {
			if (b.len > 0)
				buf_add(&b, " ", 1);
			buf_add(&b, c->words[i], strlen(c->words[i]));
		}
		p->cmds = xreallocarray(p->cmds, p->ncmds + 1,
		    sizeof *p->cmds);
		p->cmds[p->ncmds++] = xstrndup(b.data, b.len);
		buf_free(&b);
	}
	hooks_sh_cmd_clear(c);
	return 0;
}

/*
 * $( ... ), backticks, <( ... ): a command list of its own; its source
 * stays in the word around it, as the shell's text shows it.
 */
static int
hooks_sh_nested(struct hooks_sh *p, struct hooks_sh_cmd *c, char term,
    size_t start)
{
	if (p->depth == HOOKS_SHELL_DEPTH)
		return -1;
	p->depth++;
	if (hooks_sh_list(p, term) == -1)
		return -1;
	p->depth--;
	c->in_word = true;
	buf_add(&c->word, p->s + start, p->i - start);
	return 0;
}

static int
hooks_sh_double(struct hooks_sh *p, struct hooks_sh_cmd *c)
{
	char ch;
	size_t start;

	c->in_word = true;
	p->i++;
	for (;;) {
		ch = p->s[p->i];
		if (ch == '\0')
			return -1;
		if (ch == '"') {
			p->i++;
			return 0;
		}
		if (ch == '\\' && p->s[p->i + 1] != '\0' &&
		    strchr("$`\"\\\n", p->s[p->i + 1]) != NULL) {
			if (p->s[p->i + 1] != '\n')
				buf_add(&c->word, p->s + p->i + 1, 1);
			p->i += 2;
			continue;
		}
		if (ch == '$' && p->s[p->i + 1] == '(') {
			start = p->i;
			p->i += 2;
			if (hooks_sh_nested(p, c, ')', start) == -1)
				return -1;
			continue;
		}
		if (ch == '`') {
			start = p->i++;
			if (hooks_sh_nested(p, c, '`', start) == -1)
				return -1;
			continue;
		}
		buf_add(&c->word, &ch, 1);
		p->i++;
	}
}

/* < > >> <& >& &> <> >| <<< and <( ): the target word is no argument. */
static int
hooks_sh_redirect(struct hooks_sh *p, struct hooks_sh_cmd *c)
{
	const char *s = p->s;
	size_t start = p->i;
	bool fd = c->in_word && c->word.len > 0;
	size_t k;

	/* "2>": the digits before are the descriptor, not a word. */
	for (k = 0; fd && k < c->word.len; k++)
		if (!isdigit((unsigned char)c->word.data[k]))
			fd = false;
	if (fd) {
		buf_reset(&c->word);
		c->in_word = false;
	} else if (hooks_sh_word_end(c) == -1) {
		return -1;
	}
	if (s[p->i] == '<' && s[p->i + 1] == '(') {
		p->i += 2;
		return hooks_sh_nested(p, c, ')', start);
	}
	if (s[p->i] == '<' && s[p->i + 1] == '<' && s[p->i + 2] != '<')
		return -1; /* a here-document: its body is not parsed */
	while (s[p->i] == '<' || s[p->i] == '>' || s[p->i] == '&' ||
	    s[p->i] == '|')
		p->i++;
	c->skip_target = true;
	return 0;
}

/* Commands until term ('\0', ')' or '`'); -1 when it cannot be parsed. */
static int
hooks_sh_list(struct hooks_sh *p, char term)
{
	struct hooks_sh_cmd c = { 0 };
	const char *s = p->s;
	size_t start;
	char ch;
	int rc = -1;

	for (;;) {
		ch = s[p->i];
		if (ch == '\0') {
			if (term != '\0')
				goto out;
			break;
		}
		if (ch == term) {
			p->i++;
			break;
		}
		if (ch == ' ' || ch == '\t') {
			p->i++;
			if (hooks_sh_word_end(&c) == -1)
				goto out;
		} else if (ch == '#' && !c.in_word) {
			while (s[p->i] != '\0' && s[p->i] != '\n')
				p->i++;
		} else if (ch == ';' || ch == '&' || ch == '|' || ch == '\n') {
			if (ch == '&' && s[p->i + 1] == '>') {
				if (hooks_sh_redirect(p, &c) == -1)
					goto out;
				continue;
			}
			if (hooks_sh_cmd_end(p, &c) == -1)
				goto out;
			while (s[p->i] == ';' || s[p->i] == '&' ||
			    s[p->i] == '|' || s[p->i] == '\n')
				p->i++;
		} else if (ch == '(' && !c.in_word) {
			/* A subshell: its commands are commands of the line. */
			if (hooks_sh_cmd_end(p, &c) == -1 ||
			    p->depth == HOOKS_SHELL_DEPTH)
				goto out;
			p->i++;
			p->depth++;
			if (hooks_sh_list(p, ')') == -1)
				goto out;
			p->depth--;
		} else if (ch == ')') {
			goto out; /* one too many */
		} else if (ch == '<' || ch == '>') {
			if (hooks_sh_redirect(p, &c) == -1)
				goto out;
		} else if (ch == '\'') {
			const char *q = strchr(s + p->i + 1, '\'');

			if (q == NULL)
				goto out;
			c.in_word = true;
			buf_add(&c.word, s + p->i + 1, (size_t)(q - s) - p->i - 1);
			p->i = (size_t)(q - s) + 1;
		} else if (ch == '"') {
			if (hooks_sh_double(p, &c) == -1)
				goto out;
		} else if (ch == '\\') {
			if (s[p->i + 1] == '\0')
				goto out;
			if (s[p->i + 1] != '\n') {
				c.in_word = true;
				buf_add(&c.word, s + p->i + 1, 1);
			}
			p->i += 2;
		} else if (ch == '$' && s[p->i + 1] == '(') {
			start = p->i;
			p->i += 2;
			if (hooks_sh_nested(p, &c, ')', start) == -1)
				goto out;
		} else if (ch == '`') {
			start = p->i++;
			if (hooks_sh_nested(p, &c, '`', start) == -1)
				goto out;
		} else {
			c.in_word = true;
			buf_add(&c.word, &ch, 1);
			p->i++;
		}
	}
	rc = hooks_sh_cmd_end(p, &c);
out:
	hooks_sh_cmd_clear(&c);
	buf_free(&c.word);
	return rc;
}

int
hooks_shell_split(const char *line, char ***cmds, size_t *n)
{
	struct hooks_sh p = { .s = line };

	*cmds = NULL;
	*n = 0;
	if (strlen(line) > HOOKS_SHELL_MAX || hooks_sh_list(&p, '\0') == -1) {
		hooks_split_free(p.cmds, p.ncmds);
		return -1;
	}
	*cmds = p.cmds;
	*n = p.ncmds;
	return 0;
}

void
hooks_split_free(char **cmds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(cmds[i]);
	free(cmds);
}

static void
hooks_re_escape(struct buf *b, char ch)
{
	if (strchr("\\^$.|?*+()[]{}/-", ch) != NULL)
		buf_add(b, "\\", 1);
	buf_add(b, &ch, 1);
}

/*
 * A Bash rule's command: * is any text; a final " *" or the legacy ":*"
 * also matches the command with no more words ("ls *" is "ls", "ls -la",
 * never "lsof").
 */
static char *
hooks_bash_regex(const char *spec)
{
	struct buf b = { 0 };
	size_t len = strlen(spec), i;
	bool tail = false;
	char *re;

	if (len >= 2 && (strcmp(spec + len - 2, ":*") == 0 ||
	    strcmp(spec + len - 2, " *") == 0)) {
		tail = true;
		len -= 2;
	}
	buf_add(&b, "(?s)", 4);
	for (i = 0; i < len; i++) {
		if (spec[i] == '*')
			buf_add(&b, ".*", 2);
		else
			hooks_re_escape(&b, spec[i]);
	}
	if (tail)
		buf_add(&b, "(?: .*)?", 8);
	re = xstrndup(b.data, b.len);
	buf_free(&b);
	return re;
}

/*
 * A path rule as Claude Code reads it: "//x" absolute, "~/x" in $HOME,
 * "/x" and any pattern with a slash against the root, a bare name at any
 * depth; "**" any path, "*" and "?" within one name.
 */
static char *
hooks_path_regex(const char *spec, const char *root)
{
	struct buf b = { 0 };
	const char *home = getenv("HOME"), *p = spec;
	char *re;

	buf_add(&b, "(?s)", 4);
	if (strncmp(p, "//", 2) == 0) {
		p++;
	} else if (strncmp(p, "~/", 2) == 0 && home != NULL) {
		for (; *home != '\0'; home++)
			hooks_re_escape(&b, *home);
		p++;
	} else {
		const char *slash = strchr(p, '/');

		for (; *root != '\0'; root++)
			hooks_re_escape(&b, *root);
		if (strncmp(p, "./", 2) == 0)
			p++;
		else if (*p != '/' && (slash == NULL || slash[1] == '\0'))
			buf_add(&b, "(?:/.*)?", 8);
		if (*p != '/')
			buf_add(&b, "/", 1);
	}
	for (; *p != '\0'; p++) {
		if (p[0] == '*' && p[1] == '*' && p[2] == '/') {
			buf_add(&b, "(?:.*/)?", 8);
			p += 2;
		} else if (p[0] == '*' && p[1] == '*') {
			buf_add(&b, ".*", 2);
			p++;
		} else if (*p == '*') {
			buf_add(&b, "[^/]*", 5);
		} else if (*p == '?') {
			buf_add(&b, "[^/]", 4);
		} else {
			hooks_re_escape(&b, *p);
		}
	}
	re = xstrndup(b.data, b.len);
	buf_free(&b);
	return re;
}

struct hooks_rule *
hooks_rule_parse(const char *text, char *err, size_t errlen)
{
	struct hooks_rule *r;
	const char *open = strchr(text, '(');
	size_t len = strlen(text), i, tlen;
	char why[300], *src;

	if (len == 0 || len > HOOKS_PATTERN_MAX) {
		snprintf(err, errlen, "must be a permission rule of at most %d "
		    "bytes, such as \"Bash(rm *)\"", HOOKS_PATTERN_MAX);
		return NULL;
	}
	tlen = open != NULL ? (size_t)(open - text) : len;
	for (i = 0; i < tlen; i++)
		if (!(isalnum((unsigned char)text[i]) || text[i] == '_' ||
		    text[i] == '-'))
			break;
	if (i == 0 || i != tlen || (open != NULL && text[len - 1] != ')')) {
		snprintf(err, errlen, "\"%s\" is not a permission rule such as "
		    "\"Bash(rm *)\" or \"Edit(src/**)\"", text);
		return NULL;
	}
	r = xcalloc(1, sizeof *r);
	r->tool = xstrndup(text, tlen);
	r->spec = open != NULL ? xstrndup(open + 1, len - tlen - 2) :
	    xstrdup("");
	if (r->spec[0] == '\0' || strcmp(r->spec, "*") == 0)
		r->kind = HOOKS_RULE_TOOL;
	else if (strcmp(r->tool, "Bash") == 0 || strcmp(r->tool, "bash") == 0)
		r->kind = HOOKS_RULE_BASH;
	else if (strcmp(r->tool, "Edit") == 0 || strcmp(r->tool, "Write") == 0 ||
	    strcmp(r->tool, "Read") == 0 || strcmp(r->tool, "MultiEdit") == 0 ||
	    strcmp(r->tool, "NotebookEdit") == 0 ||
	    hooks_tool_alias(r->tool) != NULL)
		r->kind = HOOKS_RULE_PATH;
	else
		r->kind = HOOKS_RULE_OTHER;
	if (r->kind == HOOKS_RULE_BASH) {
		src = hooks_bash_regex(r->spec);
		r->re = hooks_regex_compile(src, true, why, sizeof why);
		free(src);
	} else if (r->kind == HOOKS_RULE_PATH) {
		struct hooks_regex *check;

		/* Checked now with a stand-in root; made again per root. */
		src = hooks_path_regex(r->spec, "/");
		check = hooks_regex_compile(src, true, why, sizeof why);
		free(src);
		if (check != NULL) {
			hooks_regex_free(check);
			return r;
		}
	} else {
		return r;
	}
	if (r->re == NULL) {
		snprintf(err, errlen, "\"%s\": %s", text, why);
		hooks_rule_free(r);
		return NULL;
	}
	return r;
}

void
hooks_rule_free(struct hooks_rule *r)
{
	if (r == NULL)
		return;
	free(r->tool);
	free(r->spec);
	hooks_regex_free(r->re);
	free(r->re_root);
	free(r);
}

/* Any simple command matching; a line that cannot be parsed matches. */
static bool
hooks_rule_bash(const struct hooks_rule *r, const json_t *input)
{
	const char *line = json_string_value(json_object_get(input, "command"));
	char **cmds;
	size_t n, i;
	bool hit = false;

	if (line == NULL || hooks_shell_split(line, &cmds, &n) == -1)
		return true;
	for (i = 0; i < n && !hit; i++)
		hit = hooks_regex_match(r->re, cmds[i], strlen(cmds[i])) != 0;
	hooks_split_free(cmds, n);
	return hit;
}

static const char *
hooks_input_path(const json_t *input)
{
	static const char *const keys[] = { "file_path", "notebook_path",
		"path" };
	const char *v;
	size_t i;

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if ((v = json_string_value(json_object_get(input, keys[i]))) !=
		    NULL)
			return v;
	return NULL;
}

/* The rule's expression is made for a root once and kept (a cache). */
static bool
hooks_rule_path(struct hooks_rule *r, const json_t *input, const char *root,
    const char *cwd)
{
	const char *path = hooks_input_path(input);
	char *src, *abs = NULL, why[300];
	int m;

	if (path == NULL)
		return true;
	if (root == NULL)
		root = "/";
	if (r->re == NULL || strcmp(r->re_root, root) != 0) {
		hooks_regex_free(r->re);
		free(r->re_root);
		src = hooks_path_regex(r->spec, root);
		r->re = hooks_regex_compile(src, true, why, sizeof why);
		free(src);
		r->re_root = xstrdup(root);
		if (r->re == NULL)
			return true;
	}
	if (path[0] != '/')
		xasprintf(&abs, "%s/%s", cwd != NULL ? cwd : root, path);
	m = hooks_regex_match(r->re, abs != NULL ? abs : path,
	    strlen(abs != NULL ? abs : path));
	free(abs);
	return m != 0;
}

bool
hooks_rule_match(const struct hooks_rule *cr, const struct hooks_subject *s)
{
	struct hooks_rule *r = (struct hooks_rule *)cr;

	if (strcmp(r->tool, s->name) != 0 &&
	    (s->alias == NULL || strcmp(r->tool, s->alias) != 0))
		return false;
	switch (r->kind) {
	case HOOKS_RULE_BASH:
		return hooks_rule_bash(r, s->input);
	case HOOKS_RULE_PATH:
		return hooks_rule_path(r, s->input, s->root, s->cwd);
	case HOOKS_RULE_TOOL:
	case HOOKS_RULE_OTHER:
		break;
	}
	return true;
}
