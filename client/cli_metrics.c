/*
 * stexec-cli metrics: the metrics method's families in the Prometheus text
 * exposition format 0.0.4, for node_exporter's textfile collector (the way
 * daemons without an HTTP server are scraped). The families come named
 * and typed from the daemon (PROTOCOL.md, metrics): nothing here knows one
 * by name, so a metric the daemon adds needs no change here.
 */
#include "cli.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool	metrics_name_ok(const char *, bool);
static void	metrics_escape(FILE *, const char *, bool);
static void	metrics_number(FILE *, const json_t *);
static void	metrics_labels(FILE *, const json_t *, const char *,
		    const char *);
static void	metrics_family(FILE *, const json_t *);
static int	metrics_write_file(struct cli *, const char *, const json_t *);

/* [a-zA-Z_:][a-zA-Z0-9_:]* (a label name: no ':'). */
static bool
metrics_name_ok(const char *s, bool label)
{
	size_t i;

	if (s == NULL || *s == '\0')
		return false;
	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || s[i] == '_' || (s[i] == ':' && !label) ||
		    (i > 0 && s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* HELP text escapes \ and newline; a label value also the double quote. */
static void
metrics_escape(FILE *f, const char *s, bool quote)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (*s == '"' && quote)
			fputs("\\\"", f);
		else
			fputc(*s, f);
	}
}

/* Integers as they are; reals in the fewest digits that read back. */
static void
metrics_number(FILE *f, const json_t *v)
{
	char buf[64];
	double d;
	int prec;

	if (json_is_integer(v)) {
		fprintf(f, "%lld", (long long)json_integer_value(v));
		return;
	}
	d = json_number_value(v);
	if (isinf(d)) {
		fputs(d > 0 ? "+Inf" : "-Inf", f);
		return;
	}
	for (prec = 6; prec < 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	snprintf(buf, sizeof buf, "%.*g", prec, d);
	fputs(buf, f);
}

/* {a="x",b="y"} with an extra label (le) last; nothing when empty. */
static void
metrics_labels(FILE *f, const json_t *labels, const char *extra,
    const char *extra_value)
{
	const char *key;
	json_t *v;
	int n = 0;

	json_object_foreach((json_t *)labels, key, v) {
		if (!metrics_name_ok(key, true) || !json_is_string(v))
			continue;
		fprintf(f, "%s%s=\"", n++ == 0 ? "{" : ",", key);
		metrics_escape(f, json_string_value(v), true);
		fputc('"', f);
	}
	if (extra != NULL)
		fprintf(f, "%s%s=\"%s\"", n++ == 0 ? "{" : ",", extra,
		    extra_value);
	if (n > 0)
		fputc('}', f);
}

static void
metrics_family(FILE *f, const json_t *fam)
{
	const char *name = json_string_value(json_object_get(fam, "name"));
	const char *type = json_string_value(json_object_get(fam, "type"));
	const char *help = json_string_value(json_object_get(fam, "help"));
	const json_t *samples = json_object_get(fam, "samples"), *s;
	char le[64];
	size_t i;

	if (!metrics_name_ok(name, false) || type == NULL)
		return;
	/* Untyped and empty families say nothing a scraper could use. */
	if (strcmp(type, "histogram") != 0 && json_array_size(samples) == 0)
		return;
	fprintf(f, "# HELP %s ", name);
	metrics_escape(f, help != NULL ? help : "", false);
	fprintf(f, "\n# TYPE %s %s\n", name, strcmp(type, "counter") == 0 ||
	    strcmp(type, "histogram") == 0 ? type : "gauge");
	if (strcmp(type, "histogram") == 0) {
		json_array_foreach(json_object_get(fam, "buckets"), i, s) {
			snprintf(le, sizeof le, "%.15g", json_number_value(
			    json_object_get(s, "le")));
			fprintf(f, "%s_bucket", name);
			metrics_labels(f, NULL, "le", le);
			fputc(' ', f);
			metrics_number(f, json_object_get(s, "count"));
			fputc('\n', f);
		}
		fprintf(f, "%s_bucket", name);
		metrics_labels(f, NULL, "le", "+Inf");
		fputc(' ', f);
		metrics_number(f, json_object_get(fam, "count"));
		fprintf(f, "\n%s_sum ", name);
		metrics_number(f, json_object_get(fam, "sum"));
		fprintf(f, "\n%s_count ", name);
		metrics_number(f, json_object_get(fam, "count"));
		fputc('\n', f);
		return;
	}
	json_array_foreach(samples, i, s) {
		fputs(name, f);
		metrics_labels(f, json_object_get(s, "labels"), NULL, NULL);
		fputc(' ', f);
		metrics_number(f, json_object_get(s, "value"));
		fputc('\n', f);
	}
}

/*
 * The textfile collector reads whatever is in its directory when scraped:
 * write a temporary file beside FILE (a name it does not read, not ending
 * in .prom) and rename it over, so a scrape sees the old file or the new,
 * never half of one.
 */
static int
metrics_write_file(struct cli *cli, const char *path, const json_t *fams)
{
	char *copy = strdup(path), *tmp = NULL;
	const char *dir, *base;
	size_t i;
	FILE *f = NULL;
	int fd = -1, rc = CLI_EXIT_FAIL;

	if (copy == NULL)
		return CLI_EXIT_FAIL;
	dir = dirname(copy);
	base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
	if (asprintf(&tmp, "%s/.%s.XXXXXX", dir, base) < 0) {
		tmp = NULL;
		goto out;
	}
	if ((fd = mkstemp(tmp)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		cli_error(cli, "cannot create a file in %s: %s", dir,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		goto out;
	}
	for (i = 0; i < json_array_size(fams); i++)
		metrics_family(f, json_array_get(fams, i));
	/* mkstemp makes it 0600; the collector may run as another user. */
	if (fchmod(fileno(f), 0644) != 0 || fflush(f) != 0 ||
	    fsync(fileno(f)) != 0 || fclose(f) != 0) {
		cli_error(cli, "cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) != 0) {
		cli_error(cli, "cannot rename %s to %s: %s", tmp, path,
		    strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	free(copy);
	return rc;
}

int
cmd_metrics(struct cli *cli, struct cli_args *a)
{
	const char *out = cli_opt(a, "output");
	json_t *r, *fams;
	size_t i;
	int rc;

	if ((rc = cli_connect(cli)) != 0 ||
	    (rc = cli_call(cli, "metrics", json_object(), &r)) != 0)
		return rc;
	if (cli->json && out == NULL) {
		cli_print_json(r);
		json_decref(r);
		return 0;
	}
	fams = json_object_get(r, "metrics");
	if (out != NULL)
		rc = metrics_write_file(cli, out, fams);
	else {
		for (i = 0; i < json_array_size(fams); i++)
			metrics_family(stdout, json_array_get(fams, i));
		if (fflush(stdout) != 0)
			rc = CLI_EXIT_FAIL;
	}
	json_decref(r);
	return rc;
}
