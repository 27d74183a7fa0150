/*
 * The built-in bash as a session's shell (doc/design.md §7, Shell): its
 * cwd carries from call to call, an env file is sourced before each
 * command, and with keepEnv what a command exports carries over too. A
 * small wrapper runs the command and, on its way out, writes what it left
 * as context modifiers (S14) on a copy of fd 3; the cwd it leaves must lie
 * in the session's root, its writable roots or a --shell-allow-dir.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/executor.h"
#include "session/session.h"
#include "session/session_int.h"
#include "utf8.h"
#include "util.h"

/* The variables bash sets itself, or the daemon per call: never carried. */
#define SHELL_VOLATILE \
	"PWD|OLDPWD|SHLVL|_|BASHOPTS|SHELLOPTS|BASH_ENV|STEXEC_SESSION_ID|" \
	"STEXEC_TOOL_USE_ID|STEXEC_PROGRESS_FD"

/*
 * $1 the command, $2 what to report (c: the cwd, e: exported variables),
 * $3 the env file. The copy of fd 3 is on 63 (9 in a sh without bash):
 * the command may close or reuse 3. The EXIT trap runs after `exit`, a
 * failure under `set -e` and the end alike; `exec` or a trap of the
 * command's own replaces it, and then nothing carries over.
 */
static const char session_shell_script[] =
    "__stexec_c=$1 __stexec_k=$2 __stexec_f=$3 __stexec_o=9\n"
    "set --\n"
    "[ -n \"$BASH_VERSION\" ] && __stexec_o=63\n"
    "eval \"exec $__stexec_o>&3\"\n"
    "if [ -n \"$__stexec_f\" ] && [ -r \"$__stexec_f\" ]; then "
    ". \"$__stexec_f\"; fi\n"
    "__stexec_exit() {\n"
    "\t__stexec_s=$?\n"
    "\tset +eu\n"
    "\tIFS=' \t\n'\n"
    "\tcase $__stexec_k in *c*) __stexec_put '\"cwd\":' \"$PWD\" ;; esac\n"
    "\tcase $__stexec_k in *e*) [ -n \"$BASH_VERSION\" ] && __stexec_env "
    ";; esac\n"
    "\treturn $__stexec_s\n"
    "}\n"
    "__stexec_put() {\n"
    "\t__stexec_j=$2\n"
    "\tif [ -n \"$BASH_VERSION\" ]; then\n"
    "\t\t__stexec_q\n"
    "\telse\n"
    "\t\tcase $2 in *[\\\"\\\\]*|*[![:print:]]*) return ;; esac\n"
    "\tfi\n"
    "\teval 'printf \"{\\\"context\\\":{%s\\\"%s\\\"%s}}\\n\" \"$1\" "
    "\"$__stexec_j\" \"$3\" >&'$__stexec_o\n"
    "} 2>/dev/null\n"
    "__stexec_q() {\n"
    "\tlocal i c\n"
    "\t__stexec_j=${__stexec_j//\\\\/\\\\\\\\}\n"
    "\t__stexec_j=${__stexec_j//\\\"/\\\\\\\"}\n"
    "\tcase $__stexec_j in *[[:cntrl:]]*) ;; *) return ;; esac\n"
    "\tfor i in {1..31} 127; do\n"
    "\t\tprintf -v c \"\\\\$(printf %03o $i)\"\n"
    "\t\t__stexec_j=${__stexec_j//$c/$(printf '\\\\u%04x' $i)}\n"
    "\tdone\n"
    "}\n"
    "__stexec_env() {\n"
    "\tlocal n\n"
    "\tfor n in $(compgen -e); do\n"
    "\t\tcase $n in " SHELL_VOLATILE ") continue ;; esac\n"
    "\t\tif [[ ! -v __stexec_e0[$n] || ${__stexec_e0[$n]} != \"${!n}\" ]]"
    "; then\n"
    "\t\t\t__stexec_put \"\\\"env\\\":{\\\"$n\\\":\" \"${!n}\" \"}\"\n"
    "\t\tfi\n"
    "\t\tunset \"__stexec_e0[$n]\"\n"
    "\tdone\n"
    "\tfor n in \"${!__stexec_e0[@]}\"; do\n"
    "\t\tcase $n in " SHELL_VOLATILE ") continue ;; esac\n"
    "\t\teval 'printf \"{\\\"context\\\":{\\\"env\\\":{\\\"%s\\\":null}}}"
    "\\n\" \"$n\" >&'$__stexec_o\n"
    "\tdone 2>/dev/null\n"
    "}\n"
    "case $__stexec_k in *e*)\n"
    "\tif [ -n \"$BASH_VERSION\" ]; then\n"
    "\t\tdeclare -A __stexec_e0\n"
    "\t\tfor __stexec_n in $(compgen -e); do "
    "__stexec_e0[$__stexec_n]=${!__stexec_n}; done\n"
    "\t\tunset __stexec_n\n"
    "\tfi ;;\n"
    "esac\n"
    "trap __stexec_exit EXIT\n"
    "eval \"$__stexec_c\"\n";

static struct session_shell_config shell_cfg;

static bool	session_shell_bool(const json_t *, const char *, bool *,
		    char *, size_t, char *, size_t);
static bool	session_shell_wraps(const struct session *,
		    const struct exec_tool *);
static bool	session_shell_under(const char *, const char *);
static bool	session_shell_allowed(const struct session *, const char *);

void
session_shell_init(const struct session_shell_config *cfg)
{
	shell_cfg = *cfg;
}

static bool
session_shell_bool(const json_t *obj, const char *key, bool *out,
    char *field, size_t fieldlen, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		snprintf(field, fieldlen, "shell.%s", key);
		snprintf(err, errlen, "must be a boolean");
		return false;
	}
	*out = json_is_true(v);
	return true;
}

bool
session_shell_parse(const json_t *v, struct session_shell *out, char *field,
    size_t fieldlen, char *err, size_t errlen)
{
	const json_t *f;
	const char *key;
	json_t *m;

	out->keep_cwd = true;
	out->keep_env = false;
	out->env_file = NULL;
	if (v == NULL || json_is_null(v))
		return true;
	snprintf(field, fieldlen, "shell");
	if (!json_is_object(v)) {
		snprintf(err, errlen, "must be an object");
		return false;
	}
	json_object_foreach((json_t *)v, key, m)
		if (strcmp(key, "keepCwd") != 0 && strcmp(key, "keepEnv") !=
		    0 && strcmp(key, "envFile") != 0) {
			utf8_snprintf(err, errlen, "unknown member \"%s\" "
			    "(keepCwd, keepEnv and envFile are known)", key);
			return false;
		}
	if (!session_shell_bool(v, "keepCwd", &out->keep_cwd, field,
	    fieldlen, err, errlen) || !session_shell_bool(v, "keepEnv",
	    &out->keep_env, field, fieldlen, err, errlen))
		return false;
	f = json_object_get(v, "envFile");
	if (f == NULL || json_is_null(f))
		return true;
	snprintf(field, fieldlen, "shell.envFile");
	if (!json_is_string(f)) {
		snprintf(err, errlen, "must be a string");
		return false;
	}
	if (strlen(json_string_value(f)) != json_string_length(f)) {
		snprintf(err, errlen, "must not contain NUL characters");
		return false;
	}
	if (json_string_value(f)[0] != '/') {
		utf8_snprintf(err, errlen, "must be an absolute path, not "
		    "\"%s\"", json_string_value(f));
		return false;
	}
	out->env_file = xstrdup(json_string_value(f));
	return true;
}

void
session_shell_clear(struct session_shell *sh)
{
	free(sh->env_file);
	sh->env_file = NULL;
}

json_t *
session_shell_json(const struct session_shell *sh)
{
	return json_pack("{s:b, s:b, s:s?}", "keepCwd", sh->keep_cwd,
	    "keepEnv", sh->keep_env, "envFile", sh->env_file);
}

/* The daemon's own bash (a session's ToolDef of that name is another). */
static bool
session_shell_wraps(const struct session *s, const struct exec_tool *t)
{
	(void)s;
	return shell_cfg.def != NULL && exec_tool_def(t) == shell_cfg.def;
}

char **
session_shell_argv(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req)
{
	const char *file = s->shell.env_file != NULL ? s->shell.env_file :
	    shell_cfg.env_file;
	char **argv;

	if (!session_shell_wraps(s, t) || req->argv[0] == NULL ||
	    req->argv[1] == NULL || req->argv[2] == NULL)
		return NULL;
	if (!s->shell.keep_cwd && !s->shell.keep_env && file == NULL)
		return NULL;
	/* A job's context is never applied: it only sources the file. */
	argv = xcalloc(7, sizeof *argv);
	argv[0] = req->argv[0];
	argv[1] = "-c";
	argv[2] = (char *)session_shell_script;
	argv[3] = req->argv[0];
	argv[4] = req->argv[2];
	argv[5] = req->job->background ? "" : s->shell.keep_cwd &&
	    s->shell.keep_env ? "ce" : s->shell.keep_cwd ? "c" :
	    s->shell.keep_env ? "e" : "";
	argv[6] = NULL;
	if (file != NULL) {
		argv = xreallocarray(argv, 8, sizeof *argv);
		argv[6] = (char *)file;
		argv[7] = NULL;
	}
	return argv;
}

/* Whether path is dir or lies below it. */
static bool
session_shell_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' ||
	    path[n] == '/');
}

/* Resolved, so that neither a symlink nor ".." leads out unseen. */
static bool
session_shell_allowed(const struct session *s, const char *cwd)
{
	char real[PATH_MAX], dir[PATH_MAX];
	const char *roots[2 + SESSION_SHELL_MAX_ALLOW];
	const json_t *v;
	size_t i, n = 0;

	if (realpath(cwd, real) == NULL)
		return false;
	roots[n++] = s->root;
	for (i = 0; i < shell_cfg.nallow && n < nitems(roots); i++)
		roots[n++] = shell_cfg.allow[i];
	for (i = 0; i < n; i++)
		if (session_shell_under(real, realpath(roots[i], dir) != NULL ?
		    dir : roots[i]))
			return true;
	json_array_foreach(s->sandbox.roots, i, v)
		if (session_shell_under(real, realpath(json_string_value(v),
		    dir) != NULL ? dir : json_string_value(v)))
			return true;
	return false;
}

/* The executor's cwd_check: a gone cwd, or a shell's outside, go back. */
const char *
session_shell_cwd_check(void *arg, struct exec_tool *t, const char *cwd,
    bool moved)
{
	struct session *s = arg;
	struct stat st;

	if (moved)
		return session_shell_wraps(s, t) && s->shell.keep_cwd &&
		    !session_shell_allowed(s, cwd) ? s->root : NULL;
	if (strcmp(cwd, s->root) == 0 || (stat(cwd, &st) == 0 &&
	    S_ISDIR(st.st_mode)))
		return NULL;
	return s->root;
}

const char *
session_shell_env_file(const struct session *s)
{
	return s->shell.env_file != NULL ? s->shell.env_file :
	    shell_cfg.env_file;
}
