/* stexec-tool: pick the tool named by argv[1], read its input, run it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "util.h"

/* The daemon's own message cap is far below this; anything larger is bogus. */
#define MAIN_INPUT_MAX (64 * 1024 * 1024)

static const struct {
	const char *name;
	int (*run)(const json_t *);
} main_tools[] = {
	{ "read_file", read_file_run },
	{ "write_file", write_file_run },
	{ "glob", glob_run },
	{ "grep", grep_run },
	{ "list_dir", list_dir_run },
	{ "edit_file", edit_file_run },
	{ "multi_edit", multi_edit_run },
};

static void	main_usage(FILE *);
static json_t	*main_read_input(void);

static void
main_usage(FILE *f)
{
	size_t i;

	fputs("usage: stexec-tool TOOL < INPUT.json\ntools:", f);
	for (i = 0; i < nitems(main_tools); i++)
		fprintf(f, " %s", main_tools[i].name);
	fputc('\n', f);
}

/* The whole of stdin as one JSON object, or NULL after saying why. */
static json_t *
main_read_input(void)
{
	struct buf b = { 0 };
	char chunk[65536];
	json_error_t e;
	json_t *v;
	ssize_t n;

	for (;;) {
		n = read(STDIN_FILENO, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			out_invalid("cannot read stdin: %s", strerror(errno));
			buf_free(&b);
			return NULL;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > MAIN_INPUT_MAX) {
			out_invalid("larger than %d bytes", MAIN_INPUT_MAX);
			buf_free(&b);
			return NULL;
		}
		buf_add(&b, chunk, (size_t)n);
	}
	if (b.len == 0) {
		out_invalid("empty; expected a JSON object on stdin");
		return NULL;
	}
	/* NUL is allowed so that write_file can write it; paths reject it. */
	v = json_loadb(b.data != NULL ? b.data : "", b.len,
	    JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
	buf_free(&b);
	if (v == NULL) {
		out_invalid("not valid JSON: %s (line %d, column %d)", e.text,
		    e.line, e.column);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		out_invalid("must be a JSON object");
		return NULL;
	}
	return v;
}

int
main(int argc, char **argv)
{
	static char outbuf[65536];
	json_t *input;
	size_t i;
	int rc;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0)) {
		main_usage(stdout);
		return BUILTIN_OK;
	}
	if (argc != 2) {
		main_usage(stderr);
		return BUILTIN_INVALID;
	}
	for (i = 0; i < nitems(main_tools); i++) {
		if (strcmp(argv[1], main_tools[i].name) == 0)
			break;
	}
	if (i == nitems(main_tools)) {
		fprintf(stderr, "stexec-tool: unknown tool \"%s\"\n", argv[1]);
		main_usage(stderr);
		return BUILTIN_INVALID;
	}
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	if ((input = main_read_input()) == NULL)
		return out_finish(BUILTIN_INVALID);
	rc = main_tools[i].run(input);
	json_decref(input);
	return out_finish(rc);
}
