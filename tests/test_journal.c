/*
 * The crash journal's file (daemon/journal.c): records come back as
 * written, damage costs only the damaged record, a torn append is told
 * apart, a large record written in slices is whole or absent, compaction
 * replaces the file, and a second daemon is locked out.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session/journal.h"

struct seen {
	char kinds[64];
	char text[64][128];
	int n;
};

static void
collect(char kind, const char *data, size_t len, void *arg)
{
	struct seen *s = arg;

	cr_assert_lt(s->n, 64);
	s->kinds[s->n] = kind;
	snprintf(s->text[s->n], sizeof s->text[0], "%.*s", (int)len, data);
	s->n++;
}

static char dir[64];
static char path[128];

static void
setup(void)
{
	char err[256];

	snprintf(dir, sizeof dir, "/tmp/stexec-journal-XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/journal", dir);
	cr_assert_eq(journal_open(NULL, dir, "journal", err, sizeof err), 0,
	    "%s", err);
}

static void
teardown(void)
{
	char cmd[128];

	journal_close();
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(journal, .init = setup, .fini = teardown);

static struct seen
reload(struct journal_loaded *got)
{
	struct seen s = { 0 };
	char err[256];

	journal_close();
	cr_assert_eq(journal_open(NULL, dir, "journal", err, sizeof err), 0,
	    "%s", err);
	journal_load(collect, &s, got);
	return s;
}

Test(journal, records_come_back_as_written_even_with_newlines)
{
	struct journal_loaded got;
	struct seen s;

	journal_append('S', "{\"id\":\"s-1\"}", 12, NULL, 0);
	journal_append('N', "s-1 1 ", 6, "{\"line\":1}\n", 11);
	journal_append('C', "s-1", 3, NULL, 0);
	s = reload(&got);
	cr_assert_eq(got.records, 3);
	cr_assert_eq(got.dropped, 0);
	cr_assert(!got.torn);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.text[1], "s-1 1 {\"line\":1}\n");
	cr_assert_eq(s.kinds[2], 'C');
}

Test(journal, a_damaged_record_costs_only_itself)
{
	struct journal_loaded got;
	struct seen s;
	struct stat st;
	int fd;

	journal_append('A', "first", 5, NULL, 0);
	cr_assert_eq(stat(path, &st), 0);
	journal_append('A', "second\nwith lines\nA 3 0\nxyz", 27, NULL, 0);
	journal_append('A', "third", 5, NULL, 0);
	/* A byte of the second payload flipped: its CRC fails. */
	fd = open(path, O_WRONLY);
	cr_assert_eq(pwrite(fd, "S", 1, st.st_size + 12), 1);
	close(fd);
	s = reload(&got);
	cr_assert_eq(got.dropped, 1);
	cr_assert(!got.torn);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.text[0], "first");
	cr_assert_str_eq(s.text[1], "third");
}

Test(journal, a_torn_append_is_told_apart)
{
	struct journal_loaded got;
	struct seen s;
	int fd;

	journal_append('A', "whole", 5, NULL, 0);
	fd = open(path, O_WRONLY | O_APPEND);
	cr_assert_eq(write(fd, "N 100 deadbeef\ns-1 2 {\"jso", 26), 26);
	close(fd);
	s = reload(&got);
	cr_assert_eq(s.n, 1);
	cr_assert(got.torn);
	/* Appends after the torn one still read back. */
	journal_append('A', "after", 5, NULL, 0);
	s = reload(&got);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.text[1], "after");
}

/* A large record, a slice at a time: whole, and in order with the rest. */
Test(journal, a_large_record_in_slices_comes_back_whole_and_in_order)
{
	size_t blen = 300000, i;
	char *b = malloc(blen);
	struct journal_big *jb;
	struct journal_loaded got;
	struct seen s;
	unsigned steps = 0;

	cr_assert_not_null(b);
	for (i = 0; i < blen; i++)
		b[i] = (char)('a' + i % 26);
	journal_append('A', "before", 6, NULL, 0);
	jb = journal_big_new('N', "s-1 7 ", 6, b, blen);
	while (!journal_big_step(jb, 4096))
		steps++;
	/* The CRC's slices, then the writes'. */
	cr_assert_gt(steps, 2 * blen / 4096 - 2);
	journal_big_free(jb);
	/* One cut short by another record, after its CRC: finished first. */
	jb = journal_big_new('N', "s-1 8 ", 6, b, blen);
	for (i = 0; i < 100; i++)
		cr_assert(!journal_big_step(jb, 4096));
	journal_append('A', "after", 5, NULL, 0);
	cr_assert(journal_big_step(jb, 1), "the append did not finish it");
	journal_big_free(jb);
	s = reload(&got);
	cr_assert_eq(got.records, 4);
	cr_assert_eq(got.dropped, 0);
	cr_assert(!got.torn);
	cr_assert_str_eq(s.text[0], "before");
	cr_assert_eq(strncmp(s.text[1], "s-1 7 abcdef", 12), 0);
	cr_assert_eq(strncmp(s.text[2], "s-1 8 abcdef", 12), 0);
	cr_assert_str_eq(s.text[3], "after");
	free(b);
}

/* Killed between its slices: the record is absent, the rest whole. */
Test(journal, a_large_record_cut_short_by_a_kill_is_absent)
{
	size_t blen = 300000;
	char *b = malloc(blen);
	struct journal_big *jb;
	struct journal_loaded got;
	struct seen s;
	struct stat st;
	int status, i;
	pid_t pid;

	cr_assert_not_null(b);
	memset(b, 'x', blen);
	journal_append('A', "whole", 5, NULL, 0);
	if ((pid = fork()) == 0) {
		jb = journal_big_new('N', "s-1 2 ", 6, b, blen);
		/* The CRC (75 slices), then some of the writes. */
		for (i = 0; i < 100; i++)
			journal_big_step(jb, 4096);
		raise(SIGKILL);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status));
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_gt(st.st_size, 20 * 4096, "no slice was written");
	s = reload(&got);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.text[0], "whole");
	cr_assert(got.torn);
	journal_append('A', "after", 5, NULL, 0);
	s = reload(&got);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.text[1], "after");
	free(b);
}

static void
snapshot(void)
{
	journal_append('S', "live", 4, NULL, 0);
}

Test(journal, compaction_replaces_the_file_with_the_live_state)
{
	struct journal_loaded got;
	struct seen s;
	int i;

	for (i = 0; i < 50; i++)
		journal_append('N', "dead record", 11, NULL, 0);
	journal_set_snapshot(snapshot);
	journal_compact();
	journal_append('A', "new", 3, NULL, 0);
	s = reload(&got);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.text[0], "live");
	cr_assert_str_eq(s.text[1], "new");
	journal_set_snapshot(NULL);
}

Test(journal, a_second_daemon_is_locked_out)
{
	char err[256];
	pid_t pid;
	int status;

	/* Another process, as another daemon would be. */
	if ((pid = fork()) == 0) {
		journal_close();
		_exit(journal_open(NULL, dir, "journal", err, sizeof err) == -1 &&
		    strstr(err, "in use by another daemon") != NULL ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(journal, each_socket_has_a_journal_of_its_own)
{
	char a[32], b[32], a2[32];

	journal_name("/run/stexec/stexecd.sock", a);
	journal_name("/tmp/test/s.sock", b);
	journal_name("/run/stexec/stexecd.sock", a2);
	cr_assert_str_eq(a, a2);
	cr_assert_str_neq(a, b);
	cr_assert_eq(strncmp(a, "journal-", 8), 0);
	cr_assert_eq(strlen(a), 24);
}

Test(journal, the_checksum_is_crc32c)
{
	/* The check value of CRC-32C, on both paths (8 bytes, then 1). */
	cr_assert_eq(journal_crc32("123456789", 9), 0xe3069283UL);
	cr_assert_eq(journal_crc32("", 0), 0);
}
