/* The crash journal: append, load, compact. See journal.h. */
#include "session/journal.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "buf.h"
#include "log.h"
#include "util.h"

/* Compaction once the file has grown by this much and twice its size. */
#define JOURNAL_GROWTH_MIN (16U << 20)
/* A payload longer than this is corruption, not a record. */
#define JOURNAL_PAYLOAD_MAX (1U << 30)
/* Pending records past this are written at once, not at the pass's end. */
#define JOURNAL_PENDING_MAX (256U << 10)

static int journal_fd = -1;
static char *journal_path;
static char *journal_dir;
static uint64_t journal_written; /* bytes since the last compaction */
static uint64_t journal_base;    /* the file's size after it */
static bool journal_dirty;
static bool journal_compacting;
static void (*journal_snapshot)(void);
static struct event *journal_sync_ev;
static struct event *journal_compact_ev;
static struct event *journal_flush_ev;
static struct buf journal_pending; /* records not yet written */
static const struct timeval journal_now = { 0, 0 };

struct journal_big {
	char head[64];   /* "K LEN CRC\n", once the CRC is known */
	size_t hlen;     /* 0 until then */
	char kind;
	char *a;
	size_t alen;
	const char *b;
	size_t blen;
	uint32_t crc;
	size_t crc_done; /* of a, then b */
	size_t written;  /* of head, a, b, "\n" */
	bool done;
};
/* The large record with bytes in the file, not yet all. */
static struct journal_big *journal_big_cur;
/* A compaction waits for it. */
static bool journal_compact_wanted;

static void journal_sync_cb(evutil_socket_t, short, void *);
static void journal_compact_cb(evutil_socket_t, short, void *);
static void journal_flush_cb(evutil_socket_t, short, void *);
static void journal_write(const struct iovec *, int, size_t);
static void journal_big_finish(void);
static uint32_t journal_crc_more(uint32_t, const char *, size_t);
static int journal_lock_open(const char *, int, char *, size_t);

/*
 * CRC-32C (Castagnoli): the SSE 4.2 instruction where there is one, 8
 * bytes a step; a table otherwise. Every notification goes through it, so
 * it must keep up with streamed output (a byte-wise table made the
 * journal the bottleneck at ~220 MB/s).
 */
static uint32_t
journal_crc_table(uint32_t crc, const char *data, size_t len)
{
	static uint32_t table[256];
	uint32_t c;
	size_t i;
	int k;

	if (table[1] == 0)
		for (i = 0; i < 256; i++) {
			for (c = (uint32_t)i, k = 0; k < 8; k++)
				c = c & 1 ? 0x82f63b78U ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	for (i = 0; i < len; i++)
		crc = table[(crc ^ (unsigned char)data[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
journal_crc_sse42(uint32_t crc, const char *data, size_t len)
{
	uint64_t c = crc, v;

	for (; len >= 8; data += 8, len -= 8) {
		memcpy(&v, data, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	crc = (uint32_t)c;
	for (; len > 0; data++, len--)
		crc = __builtin_ia32_crc32qi(crc, (unsigned char)*data);
	return crc;
}
#endif

/* Continue a CRC-32C over more data: start from 0. */
static uint32_t
journal_crc_more(uint32_t crc, const char *data, size_t len)
{
	crc ^= 0xffffffffU;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		crc = journal_crc_sse42(crc, data, len);
	else
#endif
		crc = journal_crc_table(crc, data, len);
	return crc ^ 0xffffffffU;
}

unsigned long
journal_crc32(const char *data, size_t len)
{
	return journal_crc_more(0, data, len);
}

/* Open path with flags, locked (no waiting) against other daemons. */
static int
journal_lock_open(const char *path, int flags, char *err, size_t errlen)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd == -1) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		snprintf(err, errlen, "%s is in use by another daemon "
		    "(give each its own --state-dir)", path);
		close(fd);
		return -1;
	}
	return fd;
}

void
journal_name(const char *socket, char name[32])
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *socket != '\0'; socket++)
		h = (h ^ (unsigned char)*socket) * 0x100000001b3ULL;
	snprintf(name, 32, "journal-%016" PRIx64, h);
}

int
journal_open(struct event_base *base, const char *dir, const char *name,
    char *err, size_t errlen)
{
	struct timeval second = { 1, 0 };
	struct stat st;

	if (util_mkdirs(dir, 0700) != 0) {
		snprintf(err, errlen, "cannot create %s: %s", dir,
		    strerror(errno));
		return -1;
	}
	xasprintf(&journal_path, "%s/%s", dir, name);
	journal_fd = journal_lock_open(journal_path, O_RDWR | O_CREAT |
	    O_APPEND, err, errlen);
	if (journal_fd == -1 || fstat(journal_fd, &st) != 0) {
		if (journal_fd != -1)
			close(journal_fd);
		journal_fd = -1;
		free(journal_path);
		journal_path = NULL;
		return -1;
	}
	journal_dir = xstrdup(dir);
	journal_base = (uint64_t)st.st_size;
	journal_written = 0;
	if (base != NULL) {
		journal_sync_ev = event_new(base, -1, EV_PERSIST,
		    journal_sync_cb, NULL);
		journal_compact_ev = event_new(base, -1, 0,
		    journal_compact_cb, NULL);
		journal_flush_ev = event_new(base, -1, 0, journal_flush_cb,
		    NULL);
		if (journal_sync_ev == NULL || journal_compact_ev == NULL ||
		    journal_flush_ev == NULL)
			fatal("event_new failed");
		event_add(journal_sync_ev, &second);
	}
	return 0;
}

bool
journal_active(void)
{
	return journal_fd != -1;
}

uint64_t
journal_bytes(void)
{
	return journal_fd != -1 ? journal_base + journal_written : 0;
}

void
journal_load(void (*cb)(char, const char *, size_t, void *), void *arg,
    struct journal_loaded *out)
{
	journal_load_fd(journal_fd, cb, arg, out);
	/*
	 * Bad up to the end: the append a crash cut short, most likely. Cut it
	 * off, or the next append would be glued to it and lost too.
	 */
	if (out->torn && journal_fd != -1 &&
	    ftruncate(journal_fd, (off_t)out->good_end) != 0)
		log_warn("cannot cut the torn end of %s: %s", journal_path,
		    strerror(errno));
}

void
journal_load_fd(int from, void (*cb)(char, const char *, size_t, void *),
    void *arg, struct journal_loaded *out)
{
	char *line = NULL, *payload, kind, end;
	size_t cap = 0, len;
	unsigned long crc;
	long at = 0, at_good = 0;
	FILE *f;
	int fd;
	bool ok, skipping = false;

	memset(out, 0, sizeof *out);
	if (from == -1 || (fd = dup(from)) == -1)
		return;
	if ((f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return;
	}
	rewind(f);
	while (getline(&line, &cap, f) > 0) {
		payload = NULL;
		ok = sscanf(line, "%c %zu %lx%c", &kind, &len, &crc, &end) ==
		    4 && end == '\n' && len <= JOURNAL_PAYLOAD_MAX &&
		    (payload = malloc(len + 1)) != NULL &&
		    fread(payload, 1, len, f) == len &&
		    fread(&end, 1, 1, f) == 1 && end == '\n' &&
		    journal_crc32(payload, len) == crc;
		if (!ok) {
			/*
			 * Not a record: count it once, then try each next
			 * line as a header (a payload holds lines too).
			 */
			free(payload);
			if (!skipping)
				out->dropped++;
			skipping = true;
			if (fseek(f, at, SEEK_SET) != 0 ||
			    getline(&line, &cap, f) <= 0)
				break;
			at = ftell(f);
			continue;
		}
		skipping = false;
		payload[len] = '\0';
		out->records++;
		cb(kind, payload, len, arg);
		free(payload);
		at = at_good = ftell(f);
	}
	out->torn = skipping;
	out->good_end = (uint64_t)at_good;
	free(line);
	fclose(f);
}

/*
 * Records are gathered in memory and written with one write(2) per loop
 * pass (group commit): at the end of the pass, or earlier whenever a
 * client is about to be written to (journal_flush, called by the
 * connections before every write), so that a record still reaches the
 * file before what it records can reach a client (doc/design.md §7,
 * Restart). Without a loop (the tests, a restore) each is written at once,
 * and so is a record too large to gather: copying a large result's line
 * would hold it twice.
 */
void
journal_append(char kind, const char *a, size_t alen, const char *b,
    size_t blen)
{
	char head[64];
	struct iovec iov[4];
	unsigned long crc;
	int hlen;

	if (journal_fd == -1)
		return;
	crc = journal_crc_more(journal_crc_more(0, a, alen), b, blen);
	/* "%c %zu %lx\n", without snprintf: a record per note. */
	head[0] = kind;
	head[1] = ' ';
	hlen = 2 + (int)buf_fmt_u64(head + 2, alen + blen, 10);
	head[hlen++] = ' ';
	hlen += (int)buf_fmt_u64(head + hlen, crc, 16);
	head[hlen++] = '\n';
	if ((size_t)hlen + alen + blen + 1 > JOURNAL_PENDING_MAX) {
		/* What is pending goes first: the records stay in order. */
		journal_big_finish();
		journal_flush();
		iov[0].iov_base = head;
		iov[0].iov_len = (size_t)hlen;
		iov[1].iov_base = (void *)a;
		iov[1].iov_len = alen;
		iov[2].iov_base = (void *)b;
		iov[2].iov_len = blen;
		iov[3].iov_base = "\n";
		iov[3].iov_len = 1;
		journal_write(iov, 4, (size_t)hlen + alen + blen + 1);
		return;
	}
	if (journal_pending.len == 0 && journal_flush_ev != NULL)
		event_active(journal_flush_ev, EV_TIMEOUT, 1);
	buf_grow(&journal_pending, (size_t)hlen + alen + blen + 1);
	buf_add(&journal_pending, head, (size_t)hlen);
	buf_add(&journal_pending, a, alen);
	buf_add(&journal_pending, b, blen);
	buf_add(&journal_pending, "\n", 1);
	if (journal_flush_ev == NULL ||
	    journal_pending.len >= JOURNAL_PENDING_MAX)
		journal_flush();
}

void
journal_flush(void)
{
	struct iovec iov;

	if (journal_pending.len == 0)
		return;
	/* Nothing between a large record's slices. */
	journal_big_finish();
	if (journal_pending.len == 0)
		return;
	iov.iov_base = journal_pending.data;
	iov.iov_len = journal_pending.len;
	journal_pending.len = 0;
	journal_write(&iov, 1, iov.iov_len);
	if (journal_pending.cap > JOURNAL_PENDING_MAX * 2) {
		buf_free(&journal_pending);
		memset(&journal_pending, 0, sizeof journal_pending);
	}
}

/* Write want bytes to the journal at once; a failure closes it. */
static void
journal_write(const struct iovec *iov, int cnt, size_t want)
{
	ssize_t n;

	if (journal_fd == -1)
		return;
	do
		n = writev(journal_fd, iov, cnt);
	while (n == -1 && errno == EINTR);
	if (n == -1 || (size_t)n != want) {
		log_error("cannot write %s: %s; the daemon goes on without a "
		    "crash journal", journal_path, n == -1 ? strerror(errno) :
		    "short write");
		journal_close();
		return;
	}
	journal_dirty = true;
	journal_written += (uint64_t)want;
	/*
	 * A timer, not event_active: the loop polls I/O first, so that a
	 * large record and the compaction it calls for are two waits for
	 * other clients, not one.
	 */
	if (!journal_compacting && journal_compact_ev != NULL &&
	    journal_written > JOURNAL_GROWTH_MIN &&
	    journal_written > 2 * journal_base &&
	    !evtimer_pending(journal_compact_ev, NULL))
		evtimer_add(journal_compact_ev, &journal_now);
}

static void
journal_flush_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	journal_flush();
}

struct journal_big *
journal_big_new(char kind, const char *a, size_t alen, const char *b,
    size_t blen)
{
	struct journal_big *jb = xcalloc(1, sizeof *jb);

	jb->kind = kind;
	jb->a = xmalloc(alen + 1);
	memcpy(jb->a, a, alen);
	jb->alen = alen;
	jb->b = b;
	jb->blen = blen;
	return jb;
}

bool
journal_big_step(struct journal_big *jb, size_t max)
{
	struct iovec iov[4];
	const char *part[4];
	size_t len[4], at, n, want = 0, total;
	int i, cnt = 0;

	if (jb->done || journal_fd == -1) {
		if (journal_big_cur == jb)
			journal_big_cur = NULL;
		jb->done = true;
		return true;
	}
	total = jb->alen + jb->blen;
	if (jb->hlen == 0) {
		/* The CRC first: the header that carries it comes first. */
		while (jb->crc_done < total && max > 0) {
			at = jb->crc_done;
			n = at < jb->alen ? jb->alen - at : total - at;
			n = n < max ? n : max;
			jb->crc = journal_crc_more(jb->crc, at < jb->alen ?
			    jb->a + at : jb->b + (at - jb->alen), n);
			jb->crc_done += n;
			max -= n;
		}
		if (jb->crc_done < total)
			return false;
		jb->hlen = (size_t)snprintf(jb->head, sizeof jb->head,
		    "%c %zu %lx\n", jb->kind, total, (unsigned long)jb->crc);
	}
	if (journal_big_cur != jb) {
		if (journal_big_cur != NULL) {
			/* One at a time; at shutdown (no limit) finish it. */
			if (max != SIZE_MAX)
				return false;
			journal_big_finish();
		}
		/* What is pending goes first: the records stay in order. */
		journal_flush();
		if (journal_fd == -1)
			return journal_big_step(jb, 0);
		journal_big_cur = jb;
	}
	part[0] = jb->head;
	len[0] = jb->hlen;
	part[1] = jb->a;
	len[1] = jb->alen;
	part[2] = jb->b;
	len[2] = jb->blen;
	part[3] = "\n";
	len[3] = 1;
	for (at = jb->written, i = 0; i < 4 && want < max; i++) {
		if (at >= len[i]) {
			at -= len[i];
			continue;
		}
		n = len[i] - at < max - want ? len[i] - at : max - want;
		iov[cnt].iov_base = (void *)(part[i] + at);
		iov[cnt++].iov_len = n;
		want += n;
		at = 0;
	}
	if (cnt > 0)
		journal_write(iov, cnt, want);
	jb->written += want;
	if (journal_fd != -1 && jb->written < jb->hlen + total + 1)
		return false;
	jb->done = true;
	journal_big_cur = NULL;
	if (journal_compact_wanted && journal_fd != -1) {
		journal_compact_wanted = false;
		journal_compact_soon();
	}
	return true;
}

void
journal_big_free(struct journal_big *jb)
{
	if (jb == NULL)
		return;
	/* Cut short (the journal closed under it): its torn end is cut at load. */
	if (journal_big_cur == jb)
		journal_big_cur = NULL;
	free(jb->a);
	free(jb);
}

/* The large record being written, whole now: another record follows. */
static void
journal_big_finish(void)
{
	if (journal_big_cur != NULL)
		journal_big_step(journal_big_cur, SIZE_MAX);
}

int
journal_redirect(int fd)
{
	int old = journal_fd;

	/* What is pending belongs to the journal, not to fd. */
	journal_big_finish();
	journal_flush();
	/* No compaction meanwhile; a write error closes only fd. */
	journal_fd = fd;
	journal_compacting = true;
	return old;
}

void
journal_redirect_end(int old)
{
	journal_flush();
	journal_fd = old;
	journal_compacting = false;
}

void
journal_set_snapshot(void (*snapshot)(void))
{
	journal_snapshot = snapshot;
}

void
journal_compact(void)
{
	char err[512], *tmp;
	int old = journal_fd, fd, dfd;
	struct stat st;

	if (journal_fd == -1 || journal_snapshot == NULL)
		return;
	/* Not under a large record's slices: it would go with the old file. */
	if (journal_big_cur != NULL) {
		journal_compact_wanted = true;
		return;
	}
	journal_flush();
	if (journal_fd == -1)
		return;
	xasprintf(&tmp, "%s.new", journal_path);
	if ((fd = journal_lock_open(tmp, O_WRONLY | O_CREAT | O_TRUNC |
	    O_APPEND, err, sizeof err)) == -1) {
		log_error("cannot compact the journal: %s", err);
		free(tmp);
		return;
	}
	journal_fd = fd;
	journal_compacting = true;
	journal_snapshot();
	journal_flush();
	journal_compacting = false;
	if (journal_fd == -1) {
		/* A write failed: the old file is still whole. */
		unlink(tmp);
		journal_fd = old;
		free(tmp);
		return;
	}
	if (fdatasync(fd) != 0 || rename(tmp, journal_path) != 0) {
		log_error("cannot compact the journal: %s", strerror(errno));
		close(fd);
		unlink(tmp);
		journal_fd = old;
		free(tmp);
		return;
	}
	if ((dfd = open(journal_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) !=
	    -1) {
		fsync(dfd);
		close(dfd);
	}
	close(old);
	free(tmp);
	journal_base = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	journal_written = 0;
	journal_dirty = false;
}

void
journal_compact_soon(void)
{
	if (journal_compact_ev != NULL)
		event_active(journal_compact_ev, EV_TIMEOUT, 1);
	else
		journal_compact();
}

static void
journal_compact_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	journal_compact();
}

/* Start writing back what was appended, without waiting for it. */
static void
journal_sync_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	if (journal_fd != -1 && journal_dirty) {
		sync_file_range(journal_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		journal_dirty = false;
	}
}

void
journal_close(void)
{
	journal_flush();
	if (journal_fd != -1) {
		if (!journal_compacting)
			fdatasync(journal_fd);
		close(journal_fd);
	}
	journal_fd = -1;
	/* A large record cut short: journal_load cuts its torn end off. */
	journal_big_cur = NULL;
	if (journal_compacting)
		return;
	if (journal_sync_ev != NULL)
		event_free(journal_sync_ev);
	if (journal_compact_ev != NULL)
		event_free(journal_compact_ev);
	if (journal_flush_ev != NULL)
		event_free(journal_flush_ev);
	journal_sync_ev = journal_compact_ev = journal_flush_ev = NULL;
	buf_free(&journal_pending);
	memset(&journal_pending, 0, sizeof journal_pending);
	free(journal_path);
	free(journal_dir);
	journal_path = journal_dir = NULL;
}
