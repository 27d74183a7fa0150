/*
 * The built-in tools: the real stexec-tool ($STEXEC_TOOL) run as the daemon
 * runs it, input on stdin in a private directory, exact output and status;
 * and the default ToolDefs, parsed and checked as the daemon will.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "builtin/defs.h"
#include "core/tooldef.h"
#include "util.h"

extern char **environ;

/* What one run of the tool gave. */
struct result {
	int status; /* the exit status, or 128 + the signal */
	char *out;
	size_t outlen;
	char *err;
};

static char base[64];  /* mkdtemp: input and output files live here */
static char *work;     /* base/w: the tool's cwd */
static struct result res;

static void
rm_tree(void)
{
	char *cmd;

	/* nftw cannot remove what chmod 000 hides from it; rm -rf can. */
	xasprintf(&cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", base,
	    base);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", base);
	free(cmd);
}

static void
setup(void)
{
	strcpy(base, "/tmp/stexec-builtin-XXXXXX");
	cr_assert_not_null(mkdtemp(base), "mkdtemp: %s", strerror(errno));
	chmod(base, 0755);
	xasprintf(&work, "%s/w", base);
	cr_assert_eq(mkdir(work, 0777), 0);
	chmod(work, 0777);
	umask(022);
}

static void
teardown(void)
{
	free(res.out);
	free(res.err);
	memset(&res, 0, sizeof res);
	rm_tree();
	free(work);
}

TestSuite(builtin, .init = setup, .fini = teardown);

static const char *
tool_path(void)
{
	const char *p = getenv("STEXEC_TOOL");

	cr_assert(p != NULL && *p != '\0',
	    "set STEXEC_TOOL to the built stexec-tool");
	return p;
}

static char *
slurp(const char *path, size_t *lenp)
{
	struct buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	buf_addstr(&b, "");
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		buf_add(&b, chunk, (size_t)n);
	close(fd);
	if (lenp != NULL)
		*lenp = b.len;
	return b.data;
}

static char *
in_work(const char *rel)
{
	char *p;

	xasprintf(&p, "%s/%s", work, rel);
	return p;
}

/* Open path as fd "to" and nothing else: the tool inherits no more. */
static int
redirect(const char *path, int flags, int to)
{
	int fd = open(path, flags | O_CLOEXEC, 0666);

	return fd < 0 || dup2(fd, to) < 0 ? -1 : 0;
}

/* Run argv in work with input on stdin, as nobody when as_nobody is set. */
static void
run_argv(char *const argv[], const char *input, size_t len, bool as_nobody)
{
	char *in, *out, *err;
	int fd, status;
	pid_t pid;

	free(res.out);
	free(res.err);
	xasprintf(&in, "%s/stdin", base);
	xasprintf(&out, "%s/stdout", base);
	xasprintf(&err, "%s/stderr", base);
	fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, input, len), (ssize_t)len);
	close(fd);

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (redirect(in, O_RDONLY, 0) != 0 ||
		    redirect(out, O_WRONLY | O_CREAT | O_TRUNC, 1) != 0 ||
		    redirect(err, O_WRONLY | O_CREAT | O_TRUNC, 2) != 0)
			_exit(126);
		/* Opened while root: nobody may not reach the build tree (a
		 * checkout in a 0700 home), only execute the binary itself. */
		if ((fd = open(argv[0], O_RDONLY | O_CLOEXEC)) == -1)
			_exit(127);
		if (as_nobody && getuid() == 0 &&
		    (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
		    setuid(65534) != 0))
			_exit(126);
		if (chdir(work) != 0)
			_exit(126);
		fexecve(fd, argv, environ);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	res.status = WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status);
	res.out = slurp(out, &res.outlen);
	res.err = slurp(err, NULL);
	free(in);
	free(out);
	free(err);
}

static void
run_as(const char *tool, const char *input, bool as_nobody)
{
	char *argv[] = { (char *)tool_path(), (char *)tool, NULL };

	run_argv(argv, input, strlen(input), as_nobody);
}

static void
run(const char *tool, const char *input)
{
	run_as(tool, input, false);
}

/* Run and check status, stdout and stderr exactly. */
static void
expect(const char *tool, const char *input, int status, const char *out,
    const char *err)
{
	run(tool, input);
	cr_assert_str_eq(res.out, out, "%s %s: stdout", tool, input);
	cr_assert_str_eq(res.err, err != NULL ? err : "", "%s %s: stderr",
	    tool, input);
	cr_assert_eq(res.status, status, "%s %s: status %d, not %d", tool,
	    input, res.status, status);
}

static void
put_n(const char *rel, const void *data, size_t len)
{
	char *p = in_work(rel), *s;
	int fd;

	/* Create the parent directories too, as mkdir -p would. */
	for (s = p + strlen(work) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		mkdir(p, 0777);
		*s = '/';
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0, "create %s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	free(p);
}

static void
put(const char *rel, const char *text)
{
	put_n(rel, text, strlen(text));
}

static void
mkdirs(const char *rel)
{
	char *keep, *p;

	xasprintf(&keep, "%s/.keep", rel);
	put(keep, "");
	p = in_work(keep);
	unlink(p);
	free(p);
	free(keep);
}

static char *
get(const char *rel, size_t *lenp)
{
	char *p = in_work(rel), *s;

	s = slurp(p, lenp);
	free(p);
	return s;
}

static mode_t
mode_of(const char *rel)
{
	char *p = in_work(rel);
	struct stat sb;

	cr_assert_eq(lstat(p, &sb), 0, "stat %s", p);
	free(p);
	return sb.st_mode;
}

static void
link_to(const char *target, const char *rel)
{
	char *p = in_work(rel);

	cr_assert_eq(symlink(target, p), 0);
	free(p);
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* read_file */

Test(builtin, read_file_numbers_lines)
{
	put("a.txt", "alpha\nbeta\n\ngamma\n");
	expect("read_file", "{\"file_path\": \"a.txt\"}", 0,
	    "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n", NULL);
	put("b.txt", "no newline\nat the end");
	expect("read_file", "{\"file_path\": \"b.txt\"}", 0,
	    "     1\tno newline\n     2\tat the end\n", NULL);
}

Test(builtin, read_file_absolute_path)
{
	char *in, *p = in_work("a.txt");

	put("a.txt", "x\n");
	xasprintf(&in, "{\"file_path\": \"%s\"}", p);
	expect("read_file", in, 0, "     1\tx\n", NULL);
	free(in);
	free(p);
}

Test(builtin, read_file_offset_limit)
{
	struct buf b = { 0 };
	int i;

	for (i = 1; i <= 10; i++)
		buf_printf(&b, "line %d\n", i);
	put("ten", b.data);
	buf_free(&b);
	expect("read_file", "{\"file_path\": \"ten\", \"offset\": 3, "
	    "\"limit\": 2}", 0, "     3\tline 3\n     4\tline 4\n"
	    "… 6 more lines (use offset/limit to read them)\n", NULL);
	expect("read_file", "{\"file_path\": \"ten\", \"offset\": 9}", 0,
	    "     9\tline 9\n    10\tline 10\n", NULL);
	expect("read_file", "{\"file_path\": \"ten\", \"offset\": 10, "
	    "\"limit\": 1}", 0, "    10\tline 10\n", NULL);
	expect("read_file", "{\"file_path\": \"ten\", \"limit\": 9}", 0,
	    "     1\tline 1\n     2\tline 2\n     3\tline 3\n     4\tline 4\n"
	    "     5\tline 5\n     6\tline 6\n     7\tline 7\n     8\tline 8\n"
	    "     9\tline 9\n"
	    "… 1 more lines (use offset/limit to read them)\n", NULL);
	/* JSON Schema counts 2.0 as an integer. */
	expect("read_file", "{\"file_path\": \"ten\", \"offset\": 10.0}", 0,
	    "    10\tline 10\n", NULL);
	expect("read_file", "{\"file_path\": \"ten\", \"offset\": 11}", 1, "",
	    "offset 11 is past the end of ten (10 lines)\n");
}

Test(builtin, read_file_default_limit)
{
	struct buf b = { 0 };
	int i;

	for (i = 1; i <= 2500; i++)
		buf_printf(&b, "%d\n", i);
	put("big", b.data);
	buf_free(&b);
	run("read_file", "{\"file_path\": \"big\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_eq(count_lines(res.out), 2001);
	cr_assert(strncmp(res.out, "     1\t1\n     2\t2\n", 18) == 0);
	cr_assert_not_null(strstr(res.out, "\n  2000\t2000\n"
	    "… 500 more lines (use offset/limit to read them)\n"));
	cr_assert_str_eq(res.err, "");
	run("read_file", "{\"file_path\": \"big\", \"offset\": 2000}");
	cr_assert_eq(count_lines(res.out), 501);
	cr_assert(strncmp(res.out, "  2000\t2000\n", 12) == 0);
	cr_assert_not_null(strstr(res.out, "\n  2500\t2500\n"));
}

Test(builtin, read_file_long_lines)
{
	struct buf b = { 0 }, want = { 0 };
	int i;

	for (i = 0; i < 2500; i++)
		buf_addstr(&b, "x");
	buf_addstr(&b, "\nshort\n");
	put("long", b.data);
	buf_addstr(&want, "     1\t");
	buf_add(&want, b.data, 2000);
	buf_addstr(&want, "… [line truncated]\n     2\tshort\n");
	expect("read_file", "{\"file_path\": \"long\"}", 0, want.data, NULL);

	/* Characters, not bytes: 2001 two-byte characters keep 2000. */
	buf_reset(&b);
	buf_reset(&want);
	for (i = 0; i < 2001; i++)
		buf_addstr(&b, "é");
	put("utf8", b.data);
	buf_addstr(&want, "     1\t");
	buf_add(&want, b.data, 4000);
	buf_addstr(&want, "… [line truncated]\n");
	expect("read_file", "{\"file_path\": \"utf8\"}", 0, want.data, NULL);

	/* Exactly 2000 characters is not cut. */
	buf_reset(&b);
	buf_reset(&want);
	for (i = 0; i < 2000; i++)
		buf_addstr(&b, "y");
	put("exact", b.data);
	buf_printf(&want, "     1\t%s\n", b.data);
	expect("read_file", "{\"file_path\": \"exact\"}", 0, want.data, NULL);
	buf_free(&b);
	buf_free(&want);
}

Test(builtin, read_file_output_budget)
{
	struct buf b = { 0 };
	long shown, more;
	char *last;
	int i;

	/* 2000 lines of 200 bytes is 400 KB: far past the daemon's cap. */
	for (i = 1; i <= 2000; i++)
		buf_printf(&b, "%0199d\n", i);
	put("wide", b.data);
	buf_free(&b);
	run("read_file", "{\"file_path\": \"wide\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_lt(res.outlen, 100000);
	shown = (long)count_lines(res.out) - 1;
	last = strrchr(res.out, '\n');
	*last = '\0';
	last = strrchr(res.out, '\n') + 1;
	cr_assert_eq(sscanf(last, "… %ld more lines (use offset/limit to "
	    "read them)", &more), 1, "trailer: %s", last);
	cr_assert_gt(shown, 400);
	cr_assert_eq(shown + more, 2000);
}

Test(builtin, read_file_empty_and_binary)
{
	char data[10000];

	put("empty", "");
	expect("read_file", "{\"file_path\": \"empty\"}", 0, "(empty file)\n",
	    NULL);
	put_n("bin", "ab\0cd", 5);
	expect("read_file", "{\"file_path\": \"bin\"}", 1, "",
	    "bin looks like a binary file (5 bytes)\n");
	/* A NUL past the first 8 KiB: text, and printed as it is. */
	memset(data, 'a', sizeof data);
	data[9000] = '\0';
	put_n("late", data, sizeof data);
	run("read_file", "{\"file_path\": \"late\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_eq(res.outlen, 7 + 2000 + strlen("… [line truncated]\n"));
}

Test(builtin, read_file_errors)
{
	mkdirs("dir");
	expect("read_file", "{\"file_path\": \"nope.txt\"}", 1, "",
	    "File does not exist: nope.txt\n");
	expect("read_file", "{\"file_path\": \"dir/nope.txt\"}", 1, "",
	    "File does not exist: dir/nope.txt\n");
	expect("read_file", "{\"file_path\": \"dir\"}", 1, "",
	    "dir is a directory, not a file (use list_dir)\n");
	expect("read_file", "{\"file_path\": \"/dev/null\"}", 1, "",
	    "/dev/null is not a regular file\n");
	put("secret", "s\n");
	chmod(work, 0777);
	{
		char *p = in_work("secret");

		chmod(p, 0);
		free(p);
	}
	run_as("read_file", "{\"file_path\": \"secret\"}", true);
	cr_assert_eq(res.status, 1);
	cr_assert_str_eq(res.err, "Permission denied: secret\n");
	cr_assert_str_eq(res.out, "");
}

Test(builtin, read_file_fifo_does_not_hang)
{
	char *p = in_work("fifo");

	cr_assert_eq(mkfifo(p, 0666), 0);
	free(p);
	expect("read_file", "{\"file_path\": \"fifo\"}", 1, "",
	    "fifo is not a regular file\n");
}

/* Input checks: the same for every tool. */

Test(builtin, invalid_input)
{
	expect("read_file", "{}", 2, "",
	    "Invalid input: file_path must be a string\n");
	expect("read_file", "{\"file_path\": 7}", 2, "",
	    "Invalid input: file_path must be a string\n");
	expect("read_file", "{\"file_path\": \"\"}", 2, "",
	    "Invalid input: file_path must not be empty\n");
	expect("read_file", "{\"file_path\": \"a\\u0000b\"}", 2, "",
	    "Invalid input: file_path must not contain NUL characters\n");
	expect("read_file", "{\"file_path\": \"a\", \"offset\": 0}", 2, "",
	    "Invalid input: offset must be at least 1\n");
	expect("read_file", "{\"file_path\": \"a\", \"limit\": \"5\"}", 2, "",
	    "Invalid input: limit must be an integer\n");
	expect("read_file", "{\"file_path\": \"a\", \"limit\": 1.5}", 2, "",
	    "Invalid input: limit must be an integer\n");
	expect("read_file", "[\"a\"]", 2, "",
	    "Invalid input: must be a JSON object\n");
	expect("read_file", "", 2, "",
	    "Invalid input: empty; expected a JSON object on stdin\n");
	expect("read_file", "{\"file_path\": \"a\"} x", 2, "",
	    "Invalid input: not valid JSON: end of file expected near 'x' "
	    "(line 1, column 20)\n");
	expect("write_file", "{\"file_path\": \"a\"}", 2, "",
	    "Invalid input: content must be a string\n");
	expect("write_file", "{\"file_path\": \"a\", \"content\": null}", 2, "",
	    "Invalid input: content must be a string\n");
	expect("glob", "{\"pattern\": [\"*\"]}", 2, "",
	    "Invalid input: pattern must be a string\n");
	expect("glob", "{\"pattern\": \"*\", \"path\": 1}", 2, "",
	    "Invalid input: path must be a string\n");
	expect("grep", "{\"path\": \".\"}", 2, "",
	    "Invalid input: pattern must be a string\n");
	expect("grep", "{\"pattern\": \"x\", \"glob\": true}", 2, "",
	    "Invalid input: glob must be a string\n");
	expect("list_dir", "{}", 2, "",
	    "Invalid input: path must be a string\n");
	expect("list_dir", "null", 2, "",
	    "Invalid input: must be a JSON object\n");
}

Test(builtin, usage)
{
	char *none[] = { (char *)tool_path(), NULL };
	char *bad[] = { (char *)tool_path(), "cat", NULL };

	run_argv(none, "", 0, false);
	cr_assert_eq(res.status, 2);
	cr_assert_str_eq(res.err, "usage: stexec-tool TOOL < INPUT.json\n"
	    "tools: read_file write_file glob grep list_dir edit_file "
	    "multi_edit\n");
	run_argv(bad, "{}", 2, false);
	cr_assert_eq(res.status, 2);
	cr_assert(strncmp(res.err, "stexec-tool: unknown tool \"cat\"\n"
	    "usage: ", 39) == 0, "%s", res.err);
}

/* edit_file and multi_edit */

Test(builtin, edit_file_replaces_one_exact_occurrence_keeping_the_mode)
{
	char *s, *p;

	put("f.py", "x = 1\ny = 2\n");
	p = in_work("f.py");
	chmod(p, 0751);
	free(p);
	expect("edit_file", "{\"file_path\": \"f.py\", \"old_string\": "
	    "\"y = 2\", \"new_string\": \"y = 3\"}", 0,
	    "Edited f.py: 1 replacement\n", NULL);
	s = get("f.py", NULL);
	cr_assert_str_eq(s, "x = 1\ny = 3\n");
	free(s);
	cr_assert_eq(mode_of("f.py") & 07777, 0751);
	/* No temporary file is left behind. */
	expect("list_dir", "{\"path\": \".\"}", 0, "f.py\n", NULL);
}

Test(builtin, edit_file_errors_say_which_and_change_nothing)
{
	char *s;

	put("f.py", "a = 1\nb = 1\n");
	expect("edit_file", "{\"file_path\": \"f.py\", \"old_string\": "
	    "\"= 1\", \"new_string\": \"= 2\"}", 1, "",
	    "old_string occurs 2 times in f.py: include more of the text "
	    "around it to make it unique, or set replace_all to replace every "
	    "one\n");
	expect("edit_file", "{\"file_path\": \"f.py\", \"old_string\": "
	    "\"c = 1\", \"new_string\": \"c = 2\"}", 1, "",
	    "old_string was not found in f.py: it must match the file's text "
	    "exactly, whitespace and indentation included\n");
	expect("edit_file", "{\"file_path\": \"f.py\", \"old_string\": "
	    "\"a = 1\", \"new_string\": \"a = 1\"}", 1, "",
	    "old_string and new_string are the same: there is nothing to "
	    "change\n");
	expect("edit_file", "{\"file_path\": \"nope.py\", \"old_string\": "
	    "\"a\", \"new_string\": \"b\"}", 1, "",
	    "File does not exist: nope.py\n");
	s = get("f.py", NULL);
	cr_assert_str_eq(s, "a = 1\nb = 1\n");
	free(s);
	/* replace_all replaces each. */
	expect("edit_file", "{\"file_path\": \"f.py\", \"old_string\": "
	    "\"= 1\", \"new_string\": \"= 2\", \"replace_all\": true}", 0,
	    "Edited f.py: 2 replacements\n", NULL);
	s = get("f.py", NULL);
	cr_assert_str_eq(s, "a = 2\nb = 2\n");
	free(s);
}

Test(builtin, edit_file_keeps_crlf_and_a_missing_final_newline)
{
	size_t len;
	char *s;

	put("w.txt", "one\r\ntwo\r\nthree");
	/* Written with plain newlines, as models do. */
	expect("edit_file", "{\"file_path\": \"w.txt\", \"old_string\": "
	    "\"one\\ntwo\", \"new_string\": \"1\\n2\\n2.5\"}", 0,
	    "Edited w.txt: 1 replacement\n", NULL);
	s = get("w.txt", &len);
	cr_assert_str_eq(s, "1\r\n2\r\n2.5\r\nthree");
	free(s);
	put("n.txt", "last line");
	expect("edit_file", "{\"file_path\": \"n.txt\", \"old_string\": "
	    "\"last\", \"new_string\": \"final\"}", 0,
	    "Edited n.txt: 1 replacement\n", NULL);
	s = get("n.txt", NULL);
	cr_assert_str_eq(s, "final line");
	free(s);
}

Test(builtin, edit_file_edits_through_a_symlink)
{
	char *s, *link, *target;
	struct stat st;

	put("real.txt", "hello\n");
	link = in_work("link.txt");
	cr_assert_eq(symlink("real.txt", link), 0);
	expect("edit_file", "{\"file_path\": \"link.txt\", \"old_string\": "
	    "\"hello\", \"new_string\": \"bye\"}", 0,
	    "Edited link.txt: 1 replacement\n", NULL);
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced by a file");
	target = in_work("real.txt");
	s = get("real.txt", NULL);
	cr_assert_str_eq(s, "bye\n");
	free(s);
	free(target);
	free(link);
}

Test(builtin, multi_edit_is_all_or_nothing)
{
	char *s;

	put("m.c", "int a;\nint b;\n");
	expect("multi_edit", "{\"file_path\": \"m.c\", \"edits\": ["
	    "{\"old_string\": \"int a\", \"new_string\": \"long a\"}, "
	    "{\"old_string\": \"int c\", \"new_string\": \"long c\"}]}", 1,
	    "", "edits[1].old_string was not found in m.c: it must match the "
	    "file's text exactly, whitespace and indentation included\n"
	    "m.c is unchanged: no edit was applied\n");
	s = get("m.c", NULL);
	cr_assert_str_eq(s, "int a;\nint b;\n");
	free(s);
	/* Each edit sees the ones before it. */
	expect("multi_edit", "{\"file_path\": \"m.c\", \"edits\": ["
	    "{\"old_string\": \"int a\", \"new_string\": \"long a\"}, "
	    "{\"old_string\": \"long a;\\nint b\", \"new_string\": "
	    "\"long a;\\nlong b\"}]}", 0,
	    "Edited m.c: 2 replacements by all edits\n", NULL);
	s = get("m.c", NULL);
	cr_assert_str_eq(s, "long a;\nlong b;\n");
	free(s);
	expect("multi_edit", "{\"file_path\": \"m.c\", \"edits\": []}", 2,
	    "", "Invalid input: edits must be a non-empty array of "
	    "{old_string, new_string, replace_all?}\n");
}

/* write_file */

Test(builtin, write_file_creates_directories)
{
	char *s;

	expect("write_file", "{\"file_path\": \"a/b/c/new.txt\", "
	    "\"content\": \"hello\\nworld\\n\"}", 0,
	    "Wrote 12 bytes to a/b/c/new.txt\n", NULL);
	s = get("a/b/c/new.txt", NULL);
	cr_assert_str_eq(s, "hello\nworld\n");
	free(s);
	cr_assert_eq(mode_of("a/b/c/new.txt") & 07777, 0644);
	cr_assert_eq(mode_of("a/b") & 07777, 0755);
	/* No temporary file is left behind. */
	expect("list_dir", "{\"path\": \"a/b/c\"}", 0, "new.txt\n", NULL);
}

Test(builtin, write_file_replaces_and_keeps_mode)
{
	char *s, *p;

	put("script.sh", "old old old old\n");
	p = in_work("script.sh");
	chmod(p, 0751);
	free(p);
	expect("write_file", "{\"file_path\": \"script.sh\", "
	    "\"content\": \"new\"}", 0, "Wrote 3 bytes to script.sh\n", NULL);
	s = get("script.sh", NULL);
	cr_assert_str_eq(s, "new");
	free(s);
	cr_assert_eq(mode_of("script.sh") & 07777, 0751);
	expect("list_dir", "{\"path\": \".\"}", 0, "script.sh\n", NULL);
}

Test(builtin, write_file_content)
{
	size_t len;
	char *s;

	expect("write_file", "{\"file_path\": \"empty\", \"content\": \"\"}", 0,
	    "Wrote 0 bytes to empty\n", NULL);
	cr_assert_eq(mode_of("empty") & S_IFMT, S_IFREG);
	expect("write_file", "{\"file_path\": \"nul\", "
	    "\"content\": \"a\\u0000b\\u00e9\"}", 0,
	    "Wrote 5 bytes to nul\n", NULL);
	s = get("nul", &len);
	cr_assert_eq(len, 5);
	cr_assert(memcmp(s, "a\0b\xc3\xa9", 5) == 0);
	free(s);
}

Test(builtin, write_file_through_symlink)
{
	char *s;

	put("real.txt", "old\n");
	link_to("real.txt", "link.txt");
	expect("write_file", "{\"file_path\": \"link.txt\", "
	    "\"content\": \"new\\n\"}", 0, "Wrote 4 bytes to link.txt\n", NULL);
	cr_assert(S_ISLNK(mode_of("link.txt")));
	s = get("real.txt", NULL);
	cr_assert_str_eq(s, "new\n");
	free(s);
	/* A dangling link is written through, creating its target. */
	link_to("sub/target.txt", "dangling");
	expect("write_file", "{\"file_path\": \"dangling\", "
	    "\"content\": \"t\"}", 0, "Wrote 1 bytes to dangling\n", NULL);
	cr_assert(S_ISLNK(mode_of("dangling")));
	s = get("sub/target.txt", NULL);
	cr_assert_str_eq(s, "t");
	free(s);
	link_to("loop1", "loop2");
	link_to("loop2", "loop1");
	expect("write_file", "{\"file_path\": \"loop1\", \"content\": \"\"}", 1,
	    "", "Too many levels of symbolic links: loop1\n");
}

Test(builtin, write_file_errors)
{
	char *p;

	mkdirs("dir");
	expect("write_file", "{\"file_path\": \"dir\", \"content\": \"x\"}", 1,
	    "", "dir is a directory, not a file\n");
	expect("write_file", "{\"file_path\": \"new/\", \"content\": \"x\"}", 1,
	    "", "new/ is a directory, not a file\n");
	put("file", "f");
	expect("write_file", "{\"file_path\": \"file/x/y.txt\", "
	    "\"content\": \"x\"}", 1, "",
	    "Cannot create directory file/x: Not a directory\n");
	put("ro.txt", "keep");
	p = in_work("ro.txt");
	chmod(p, 0444);
	free(p);
	run_as("write_file", "{\"file_path\": \"ro.txt\", \"content\": \"x\"}",
	    true);
	cr_assert_str_eq(res.err, "Permission denied: ro.txt\n");
	cr_assert_eq(res.status, 1);
	p = get("ro.txt", NULL);
	cr_assert_str_eq(p, "keep");
	free(p);
}

Test(builtin, write_file_in_unwritable_directory)
{
	char *p, *d;

	/* nobody may write the file but not create files beside it. */
	put("locked/f.txt", "old");
	p = in_work("locked/f.txt");
	d = in_work("locked");
	chmod(p, 0666);
	chmod(d, 0755);
	run_as("write_file", "{\"file_path\": \"locked/f.txt\", "
	    "\"content\": \"new\"}", true);
	cr_assert_str_eq(res.err, "");
	cr_assert_str_eq(res.out, "Wrote 3 bytes to locked/f.txt\n");
	free(p);
	p = get("locked/f.txt", NULL);
	cr_assert_str_eq(p, "new");
	free(p);
	run_as("write_file", "{\"file_path\": \"locked/g.txt\", "
	    "\"content\": \"new\"}", true);
	cr_assert_str_eq(res.err, "Permission denied: locked/g.txt\n");
	cr_assert_eq(res.status, 1);
	free(d);
}

/* glob */

static void
glob_tree(void)
{
	put("README.md", "r\n");
	put("main.c", "int main;\n");
	put("src/a.c", "a\n");
	put("src/a.h", "h\n");
	put("src/deep/er/b.c", "b\n");
	put("src/deep/test_x.py", "t\n");
	put("src/test_y.py", "t\n");
	put("src-c/z.c", "z\n");
	put(".hidden/h.c", "h\n");
	put(".git/objects/o.c", "o\n");
	put("lib/.git/p.c", "p\n");
	link_to("src", "srclink");
}

Test(builtin, glob_double_star)
{
	glob_tree();
	/* Sorted as whole paths: "src-c/" sorts before "src/". */
	expect("glob", "{\"pattern\": \"**/*.c\"}", 0,
	    ".hidden/h.c\nmain.c\nsrc-c/z.c\nsrc/a.c\nsrc/deep/er/b.c\n", NULL);
	expect("glob", "{\"pattern\": \"src/**/test_*.py\"}", 0,
	    "src/deep/test_x.py\nsrc/test_y.py\n", NULL);
	expect("glob", "{\"pattern\": \"src/**/er/*\"}", 0,
	    "src/deep/er/b.c\n", NULL);
	expect("glob", "{\"pattern\": \"**/deep/**\"}", 0,
	    "src/deep/er/b.c\nsrc/deep/test_x.py\n", NULL);
	expect("glob", "{\"pattern\": \"./src/*.?\"}", 0, "src/a.c\nsrc/a.h\n",
	    NULL);
}

Test(builtin, glob_single_level)
{
	glob_tree();
	expect("glob", "{\"pattern\": \"*\"}", 0,
	    "README.md\nmain.c\nsrclink\n", NULL);
	expect("glob", "{\"pattern\": \"*/\"}", 0,
	    ".hidden/\nlib/\nsrc-c/\nsrc/\n", NULL);
	expect("glob", "{\"pattern\": \"src/*.[ch]\"}", 0,
	    "src/a.c\nsrc/a.h\n", NULL);
	expect("glob", "{\"pattern\": \"src/a.{c,h}\"}", 0,
	    "src/a.c\nsrc/a.h\n", NULL);
	expect("glob", "{\"pattern\": \"main.c\"}", 0, "main.c\n", NULL);
}

Test(builtin, glob_path)
{
	char *in, *want, *abs;

	glob_tree();
	expect("glob", "{\"pattern\": \"**/*.c\", \"path\": \"src\"}", 0,
	    "src/a.c\nsrc/deep/er/b.c\n", NULL);
	expect("glob", "{\"pattern\": \"*.c\", \"path\": \"src/\"}", 0,
	    "src/a.c\n", NULL);
	expect("glob", "{\"pattern\": \"*.c\", \"path\": \".\"}", 0,
	    "main.c\n", NULL);
	/* A symlinked directory is searched when named, never followed. */
	expect("glob", "{\"pattern\": \"*.c\", \"path\": \"srclink\"}", 0,
	    "srclink/a.c\n", NULL);
	abs = in_work("src");
	xasprintf(&in, "{\"pattern\": \"%s/*.h\"}", abs);
	xasprintf(&want, "%s/a.h\n", abs);
	expect("glob", in, 0, want, NULL);
	free(in);
	free(want);
	xasprintf(&in, "{\"pattern\": \"deep/*.py\", \"path\": \"%s\"}", abs);
	xasprintf(&want, "%s/deep/test_x.py\n", abs);
	expect("glob", in, 0, want, NULL);
	free(in);
	free(want);
	free(abs);
}

Test(builtin, glob_no_match_and_errors)
{
	glob_tree();
	expect("glob", "{\"pattern\": \"**/*.rs\"}", 0,
	    "No files match **/*.rs\n", NULL);
	expect("glob", "{\"pattern\": \"nodir/**/*.c\"}", 0,
	    "No files match nodir/**/*.c\n", NULL);
	expect("glob", "{\"pattern\": \"*\", \"path\": \"nope\"}", 1, "",
	    "Directory does not exist: nope\n");
	expect("glob", "{\"pattern\": \"*\", \"path\": \"main.c\"}", 1, "",
	    "main.c is not a directory\n");
}

Test(builtin, glob_cap)
{
	char name[32];
	int i;

	for (i = 0; i < 1500; i++) {
		snprintf(name, sizeof name, "d/f%04d.txt", i);
		put(name, "");
	}
	run("glob", "{\"pattern\": \"**/*.txt\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_eq(count_lines(res.out), 1001);
	cr_assert(strncmp(res.out, "d/f0000.txt\nd/f0001.txt\n", 24) == 0);
	cr_assert_not_null(strstr(res.out,
	    "\nd/f0999.txt\n… 500 more matches\n"));
	cr_assert_str_eq(res.err, "");
}

Test(builtin, glob_many_double_stars)
{
	put("a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/b", "");
	expect("glob", "{\"pattern\": \"**/a/**/a/**/a/**/a/**/a/**/a/**/a/"
	    "**/a/**/a/**/a/**/c\"}", 0,
	    "No files match **/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/"
	    "**/c\n", NULL);
	expect("glob", "{\"pattern\": \"**/**/a/**/b\"}", 0,
	    "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/b\n", NULL);
}

/* grep */

static void
grep_tree(void)
{
	put("a.c", "int main(void)\n{\n\treturn 0;\n}\n");
	put("b.h", "int helper(int);\n");
	put("src/x.c", "static int x;\nint y;\n");
	put("src/deep/y.c", "/* int */\n");
	put("src/deep/y.txt", "int in text\n");
	put(".git/HEAD.c", "int git;\n");
	put_n("bin.c", "int\0binary\n", 11);
}

Test(builtin, grep_finds_lines)
{
	grep_tree();
	expect("grep", "{\"pattern\": \"int\"}", 0,
	    "a.c:1:int main(void)\n"
	    "b.h:1:int helper(int);\n"
	    "src/deep/y.c:1:/* int */\n"
	    "src/deep/y.txt:1:int in text\n"
	    "src/x.c:1:static int x;\n"
	    "src/x.c:2:int y;\n", NULL);
	expect("grep", "{\"pattern\": \"^(return|\\t+return) [0-9]+;$\"}", 0,
	    "a.c:3:\treturn 0;\n", NULL);
	expect("grep", "{\"pattern\": \"int\", \"path\": \"src\"}", 0,
	    "src/deep/y.c:1:/* int */\n"
	    "src/deep/y.txt:1:int in text\n"
	    "src/x.c:1:static int x;\n"
	    "src/x.c:2:int y;\n", NULL);
	expect("grep", "{\"pattern\": \"y\", \"path\": \"src/x.c\"}", 0,
	    "src/x.c:2:int y;\n", NULL);
}

Test(builtin, grep_glob_filter)
{
	grep_tree();
	expect("grep", "{\"pattern\": \"int\", \"glob\": \"*.c\"}", 0,
	    "a.c:1:int main(void)\n"
	    "src/deep/y.c:1:/* int */\n"
	    "src/x.c:1:static int x;\n"
	    "src/x.c:2:int y;\n", NULL);
	expect("grep", "{\"pattern\": \"int\", \"glob\": \"*.{h,txt}\"}", 0,
	    "b.h:1:int helper(int);\n"
	    "src/deep/y.txt:1:int in text\n", NULL);
	expect("grep", "{\"pattern\": \"int\", \"glob\": \"src/**/*.c\"}", 0,
	    "src/deep/y.c:1:/* int */\n"
	    "src/x.c:1:static int x;\n"
	    "src/x.c:2:int y;\n", NULL);
	expect("grep", "{\"pattern\": \"int\", \"glob\": \"src/*.c\"}", 0,
	    "src/x.c:1:static int x;\n"
	    "src/x.c:2:int y;\n", NULL);
	expect("grep", "{\"pattern\": \"int\", \"glob\": \"deep/*\", "
	    "\"path\": \"src\"}", 0,
	    "src/deep/y.c:1:/* int */\n"
	    "src/deep/y.txt:1:int in text\n", NULL);
}

Test(builtin, grep_no_match_and_errors)
{
	grep_tree();
	expect("grep", "{\"pattern\": \"zzz\"}", 0, "No matches for zzz\n",
	    NULL);
	expect("grep", "{\"pattern\": \"binary\"}", 0,
	    "No matches for binary\n", NULL);
	expect("grep", "{\"pattern\": \"binary\", \"path\": \"bin.c\"}", 0,
	    "No matches for binary (bin.c is a binary file)\n", NULL);
	expect("grep", "{\"pattern\": \"a(b\"}", 1, "",
	    "Invalid pattern: Unmatched ( or \\(\n");
	expect("grep", "{\"pattern\": \"x\", \"path\": \"nope\"}", 1, "",
	    "Path does not exist: nope\n");
}

Test(builtin, grep_long_lines_and_cap)
{
	struct buf b = { 0 }, want = { 0 };
	int i;

	for (i = 0; i < 600; i++)
		buf_addstr(&b, "a");
	buf_addstr(&b, "\n");
	put("long", b.data);
	buf_addstr(&want, "long:1:");
	buf_add(&want, b.data, 500);
	buf_addstr(&want, "…\n");
	expect("grep", "{\"pattern\": \"a$\"}", 0, want.data, NULL);

	buf_reset(&b);
	for (i = 1; i <= 600; i++)
		buf_printf(&b, "match %d\n", i);
	put("many", b.data);
	run("grep", "{\"pattern\": \"^match\", \"path\": \"many\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_eq(count_lines(res.out), 501);
	cr_assert(strncmp(res.out, "many:1:match 1\n", 15) == 0);
	cr_assert_not_null(strstr(res.out,
	    "\nmany:500:match 500\n… 100 more matches\n"));
	buf_free(&b);
	buf_free(&want);
}

Test(builtin, grep_output_budget)
{
	struct buf b = { 0 };
	unsigned long more;
	long shown;
	char *last;
	int i;

	/* 400 matches of 500 characters: more than the daemon would take. */
	for (i = 0; i < 400; i++) {
		buf_printf(&b, "%03d", i);
		while (b.len % 501 != 500)
			buf_addstr(&b, "w");
		buf_addstr(&b, "\n");
	}
	put("wide", b.data);
	buf_free(&b);
	run("grep", "{\"pattern\": \"w$\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_lt(res.outlen, 100000);
	shown = (long)count_lines(res.out) - 1;
	last = strrchr(res.out, '\n');
	*last = '\0';
	last = strrchr(res.out, '\n') + 1;
	cr_assert_eq(sscanf(last, "… %lu more matches", &more), 1, "%s", last);
	cr_assert_gt(shown, 150);
	cr_assert_eq(shown + (long)more, 400);
	cr_assert(strncmp(res.out, "wide:1:000www", 13) == 0);
}

Test(builtin, grep_line_numbers_across_buffers)
{
	struct buf b = { 0 };
	int i;

	/* 2.5 MB: several buffer fills, matches at both ends and between. */
	for (i = 1; i <= 250000; i++)
		buf_printf(&b, "line %06d\n", i);
	buf_addstr(&b, "last line without newline");
	put("big", b.data);
	buf_free(&b);
	expect("grep", "{\"pattern\": \"^line (000001|100000|250000)$|"
	    "without\"}", 0,
	    "big:1:line 000001\nbig:100000:line 100000\n"
	    "big:250000:line 250000\nbig:250001:last line without newline\n",
	    NULL);
}

Test(builtin, grep_overlong_line)
{
	struct buf b = { 0 }, want = { 0 };
	size_t i;

	/* A 2 MiB line is searched in its first MiB; the count goes on. */
	buf_addstr(&b, "first\n");
	for (i = 0; i < 2 * 1024 * 1024; i++)
		buf_addstr(&b, i == 10 ? "needle" : "x");
	buf_addstr(&b, "needle at the end\nneedle 3\n");
	put("huge", b.data);
	buf_addstr(&want, "huge:2:xxxxxxxxxxneedle");
	for (i = 0; i < 500 - 16; i++)
		buf_addstr(&want, "x");
	buf_addstr(&want, "…\nhuge:3:needle 3\n");
	expect("grep", "{\"pattern\": \"needle\"}", 0, want.data, NULL);
	buf_free(&b);
	buf_free(&want);
}

Test(builtin, grep_empty_matches_and_nul)
{
	char data[9000];

	put("two", "a\nb\n");
	expect("grep", "{\"pattern\": \"x*\"}", 0, "two:1:a\ntwo:2:b\n", NULL);
	expect("grep", "{\"pattern\": \"$\"}", 0, "two:1:a\ntwo:2:b\n", NULL);
	put("crlf", "windows\r\nline\r\n");
	expect("grep", "{\"pattern\": \"line\", \"path\": \"crlf\"}", 0,
	    "crlf:2:line\n", NULL);
	/* A NUL after the first 8 KiB does not hide the rest of its line. */
	memset(data, 'z', sizeof data);
	memcpy(data + 8500, "\0 found it\n", 11);
	put_n("late", data, sizeof data);
	run("grep", "{\"pattern\": \"found it\", \"path\": \"late\"}");
	cr_assert_eq(res.status, 0);
	cr_assert(strncmp(res.out, "late:1:zzz", 10) == 0, "%s", res.out);
	cr_assert_eq(res.outlen, strlen("late:1:") + 500 + strlen("…\n"));
}

/* list_dir */

Test(builtin, list_dir_entries)
{
	put("b.txt", "");
	put(".hidden", "");
	put("A", "");
	mkdirs("dir");
	mkdirs(".config");
	link_to("b.txt", "link");
	link_to("/nowhere", "dangling");
	expect("list_dir", "{\"path\": \".\"}", 0,
	    ".config/\n.hidden\nA\nb.txt\ndangling -> /nowhere\ndir/\n"
	    "link -> b.txt\n", NULL);
	expect("list_dir", "{\"path\": \"dir\"}", 0, "(empty directory)\n",
	    NULL);
}

Test(builtin, list_dir_cap_and_errors)
{
	char name[32];
	int i;

	for (i = 0; i < 1500; i++) {
		snprintf(name, sizeof name, "d/%04d", i);
		put(name, "");
	}
	run("list_dir", "{\"path\": \"d\"}");
	cr_assert_eq(res.status, 0);
	cr_assert_eq(count_lines(res.out), 1001);
	cr_assert(strncmp(res.out, "0000\n0001\n", 10) == 0);
	cr_assert_not_null(strstr(res.out, "\n0999\n… 500 more\n"));
	put("file", "");
	expect("list_dir", "{\"path\": \"nope\"}", 1, "",
	    "Directory does not exist: nope\n");
	expect("list_dir", "{\"path\": \"file\"}", 1, "",
	    "file is not a directory\n");
	expect("list_dir", "{\"path\": \"file/x\"}", 1, "",
	    "Directory does not exist: file/x\n");
}

/* The default ToolDefs */

static const struct {
	const char *name;
	bool safe;
	enum tooldef_interrupt interrupt;
	bool abort_siblings;
	const char *valid;   /* an input the schema accepts */
	const char *invalid; /* and one it rejects */
} defs_table[] = {
	{ "bash", false, TOOLDEF_CANCEL, true, "{\"command\": \"true\"}",
	    "{\"command\": \"ls\", \"timeout\": 0}" },
	{ "read_file", true, TOOLDEF_CANCEL, false,
	    "{\"file_path\": \"a\", \"offset\": 2, \"limit\": 5}",
	    "{\"file_path\": \"a\", \"offset\": 0}" },
	{ "write_file", false, TOOLDEF_BLOCK, false,
	    "{\"file_path\": \"a\", \"content\": \"\"}",
	    "{\"file_path\": \"a\"}" },
	{ "glob", true, TOOLDEF_CANCEL, false,
	    "{\"pattern\": \"**/*.c\", \"path\": \"src\"}",
	    "{\"pattern\": \"*\", \"extra\": 1}" },
	{ "grep", true, TOOLDEF_CANCEL, false,
	    "{\"pattern\": \"x\", \"path\": \"src\", \"glob\": \"*.c\"}",
	    "{\"pattern\": 5}" },
	{ "list_dir", true, TOOLDEF_CANCEL, false, "{\"path\": \".\"}",
	    "{}" },
	{ "edit_file", false, TOOLDEF_BLOCK, false,
	    "{\"file_path\": \"a\", \"old_string\": \"x\", "
	    "\"new_string\": \"y\", \"replace_all\": true}",
	    "{\"file_path\": \"a\", \"old_string\": \"\", "
	    "\"new_string\": \"y\"}" },
	{ "multi_edit", false, TOOLDEF_BLOCK, false,
	    "{\"file_path\": \"a\", \"edits\": [{\"old_string\": \"x\", "
	    "\"new_string\": \"y\"}]}",
	    "{\"file_path\": \"a\", \"edits\": [{\"old_string\": \"x\"}]}" },
	{ "bash_output", true, TOOLDEF_BLOCK, false,
	    "{\"bash_id\": \"j-1\", \"filter\": \"^x\"}", "{}" },
	{ "kill_shell", false, TOOLDEF_BLOCK, false,
	    "{\"shell_id\": \"j-1\"}", "{\"shell_id\": \"\"}" },
	{ "bash_session", false, TOOLDEF_CANCEL, false,
	    "{\"command\": \"true\", \"restart\": true, \"timeout\": 5}",
	    "{\"command\": \"\", \"timeout\": 0}" },
};

static json_t *
load_json(const char *text)
{
	json_error_t e;
	json_t *v;

	v = json_loads(text, 0, &e);
	cr_assert_not_null(v, "bad JSON: %s (line %d column %d)\n%s", e.text,
	    e.line, e.column, text);
	return v;
}

/* A def with the placeholder replaced, as the daemon does at startup. */
static struct tooldef *
load_def(size_t i)
{
	struct tooldef *def;
	char err[512];
	json_t *v;

	v = builtin_defs_load(i, tool_path(), err, sizeof err);
	cr_assert_not_null(v, "%s", err);
	def = tooldef_parse(v, err, sizeof err);
	cr_assert_not_null(def, "%s: %s", builtin_defs[i], err);
	json_decref(v);
	return def;
}

Test(builtin, defs_are_valid)
{
	const json_t *schema, *desc;
	json_t *v, *input, *full;
	struct tooldef *def;
	char err[512];
	size_t i;

	for (i = 0; builtin_defs[i] != NULL; i++) {
		cr_assert_lt(i, nitems(defs_table));
		v = load_json(builtin_defs[i]);
		cr_assert_str_eq(json_string_value(json_object_get(v, "name")),
		    defs_table[i].name);
		desc = json_object_get(v, "description");
		cr_assert_gt(json_string_length(desc), 200, "%s: description",
		    defs_table[i].name);
		schema = json_object_get(v, "inputSchema");
		cr_assert(json_is_false(json_object_get(schema,
		    "additionalProperties")));
		cr_assert(json_is_array(json_object_get(schema, "required")));
		/*
		 * Only bash runs something else than stexec-tool; the job
		 * tools run nothing (the daemon answers them).
		 */
		cr_assert_eq(strstr(builtin_defs[i],
		    BUILTIN_DEFS_PLACEHOLDER) != NULL,
		    strcmp(defs_table[i].name, "bash") != 0 &&
		    json_object_get(v, "internal") == NULL);
		json_decref(v);

		def = load_def(i);
		cr_assert_str_eq(tooldef_name(def), defs_table[i].name);
		cr_assert_eq(tooldef_interrupt(def), defs_table[i].interrupt);
		cr_assert_eq(tooldef_abort_siblings(def),
		    defs_table[i].abort_siblings);
		cr_assert_not(tooldef_requires_permission(def));
		input = load_json(defs_table[i].valid);
		cr_assert(tooldef_check_input(def, input, err, sizeof err),
		    "%s %s: %s", defs_table[i].name, defs_table[i].valid, err);
		cr_assert_eq(tooldef_is_safe(def, input), defs_table[i].safe);
		json_decref(input);
		input = load_json(defs_table[i].invalid);
		cr_assert_not(tooldef_check_input(def, input, err, sizeof err),
		    "%s accepts %s", defs_table[i].name, defs_table[i].invalid);
		json_decref(input);
		/* listTools shows every field. */
		full = tooldef_json(def);
		cr_assert_not_null(json_object_get(full, "timeoutMs"));
		json_decref(full);
		tooldef_unref(def);
	}
	cr_assert_eq(i, nitems(defs_table));
}

Test(builtin, defs_bash)
{
	struct tooldef *def = load_def(0);
	json_t *input;
	char **argv, err[256];

	input = load_json("{\"command\": \"echo hi\", \"timeout\": 5000}");
	cr_assert_eq(tooldef_timeout_ms(def, input), 5000);
	argv = tooldef_argv(def, input, err, sizeof err);
	cr_assert_not_null(argv);
	cr_assert_str_eq(argv[0], access("/bin/bash", X_OK) == 0 ?
	    "/bin/bash" : "/bin/sh");
	cr_assert_str_eq(argv[1], "-c");
	cr_assert_str_eq(argv[2], "echo hi");
	cr_assert_null(argv[3]);
	tooldef_argv_free(argv);
	json_decref(input);
	input = load_json("{\"command\": \"x\", \"timeout\": 99999999}");
	cr_assert_eq(tooldef_timeout_ms(def, input), 600000);
	json_decref(input);
	input = load_json("{\"command\": \"x\"}");
	cr_assert_eq(tooldef_timeout_ms(def, input), 120000);
	json_decref(input);
	tooldef_unref(def);
}

/* Each stexec-tool def, run through its own argv: the daemon's path. */
Test(builtin, defs_run_the_tool)
{
	static const char *inputs[] = {
		NULL,
		"{\"file_path\": \"f.txt\"}",
		"{\"file_path\": \"g.txt\", \"content\": \"g\"}",
		"{\"pattern\": \"*.txt\"}",
		"{\"pattern\": \"^[fg]$\"}",
		"{\"path\": \".\"}",
		"{\"file_path\": \"f.txt\", \"old_string\": \"f\", "
		"\"new_string\": \"F\"}",
		"{\"file_path\": \"f.txt\", \"edits\": [{\"old_string\": "
		"\"F\", \"new_string\": \"f\"}]}",
	};
	static const char *outputs[] = {
		NULL,
		"     1\tf\n",
		"Wrote 1 bytes to g.txt\n",
		"f.txt\ng.txt\n",
		"f.txt:1:f\ng.txt:1:g\n",
		"f.txt\ng.txt\n",
		"Edited f.txt: 1 replacement\n",
		"Edited f.txt: 1 replacement\n",
	};
	struct tooldef *def;
	json_t *input;
	char **argv, err[256];
	size_t i;

	put("f.txt", "f\n");
	for (i = 1; i < nitems(inputs); i++) {
		def = load_def(i);
		input = load_json(inputs[i]);
		argv = tooldef_argv(def, input, err, sizeof err);
		cr_assert_not_null(argv, "%s", err);
		cr_assert_str_eq(argv[0], tool_path());
		cr_assert_str_eq(argv[1], tooldef_name(def));
		run_argv(argv, inputs[i], strlen(inputs[i]), false);
		cr_assert_str_eq(res.out, outputs[i], "%s", tooldef_name(def));
		cr_assert_str_eq(res.err, "");
		cr_assert_eq(res.status, 0);
		tooldef_argv_free(argv);
		json_decref(input);
		tooldef_unref(def);
	}
}
