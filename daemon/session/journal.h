/*
 * The crash journal (doc/design.md §7, Restart): an append-only file in the state directory
 * of what a client needs after the daemon died: its sessions, the tools
 * each turn added, and the retained notifications, so that the next daemon
 * restores every session, continues its seq and gives each tool whose
 * result was not delivered exactly one daemon_restarted result.
 *
 * A record is a header line "K LEN CRC\n" (K a kind letter, LEN the
 * payload's length, CRC its CRC-32C in hex), then the payload and "\n". A
 * torn or corrupt record is skipped and counted, never fatal.
 *
 * Durability: each record is written with write(2) before what it records
 * can reach a client (a note is journaled before any subscriber is sent
 * it), so a crash of the daemon, SIGKILL included, loses nothing; the
 * kernel is asked to write the file back every second (sync_file_range,
 * which does not wait), so a power loss loses at most about a second. The
 * loop never waits for the disk but at compaction, which rewrites the live
 * state to a new file and renames it over the old one whenever the journal
 * has grown by twice its size after the last compaction (and 16 MiB).
 */
#ifndef STEXEC_JOURNAL_H
#define STEXEC_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* Kinds of record. */
#define JOURNAL_INSTANCE 'I' /* a daemon started: its token prefix, cgroup */
#define JOURNAL_SESSION 'S'  /* createSession: JSON */
#define JOURNAL_CLOSE 'C'    /* closeSession: the id */
#define JOURNAL_ADD 'A'      /* addTool: JSON {s, t, id, name} */
#define JOURNAL_NOTE 'N'     /* a notification: "SID SEQ " then its line */
#define JOURNAL_IDLE 'T'     /* idle since: "SID MS" (wall clock; 0: not) */
#define JOURNAL_CONTEXT 'X'  /* a session's cwd and env (S14): JSON */
/* Only in a reload's handover: */
#define JOURNAL_HELD 'R'     /* a result held for ordering: JSON */
#define JOURNAL_REQUEUE 'Q'  /* a tool that never started: JSON */
#define JOURNAL_RUNNING 'P'  /* a tool whose process runs on (handover.h) */
#define JOURNAL_CONN 'K'     /* a client connection (handover.h) */
#define JOURNAL_JOB 'J'      /* a job, its output and process (handover.h) */
#define JOURNAL_TURN 'U'     /* a turn's abort and error state: JSON */
#define JOURNAL_MCP 'M'      /* an MCP server handed over (handover.h) */

struct journal_loaded {
	unsigned records;  /* read whole */
	unsigned dropped;  /* corrupt ones skipped */
	bool torn;         /* the last one was cut short (a crash mid-write) */
	uint64_t good_end; /* where the last whole record ends */
};

/*
 * Open (creating) DIR/NAME, locked against other daemons. -1 with err:
 * the daemon then runs without a journal. journal_name gives the name for
 * a daemon's socket: one journal per socket, so that daemons on other
 * sockets (a test's, a user's) never restore each other's sessions.
 */
int journal_open(struct event_base *, const char *dir, const char *name,
    char *err, size_t errlen);
/* "journal-HASH" of the socket path (17 bytes and a NUL in name). */
void journal_name(const char *socket, char name[32]);
/* Whether a journal is open. */
bool journal_active(void);
/* Its size in bytes (0: none open), for the metrics. */
uint64_t journal_bytes(void);
/* Every record of the file, in order, then the counts. */
void journal_load(void (*cb)(char kind, const char *data, size_t len,
    void *arg), void *arg, struct journal_loaded *);
/* The same, from another file of records (a reload's handover). */
void journal_load_fd(int fd, void (*cb)(char kind, const char *data,
    size_t len, void *arg), void *arg, struct journal_loaded *);
/*
 * Send what journal_append writes to fd until journal_redirect_end(the
 * returned value): a reload's handover file.
 */
int journal_redirect(int fd);
void journal_redirect_end(int old);
/*
 * Append a record (payload a then b); on a write error the journal stops.
 * With a loop, the records of one pass are written together at its end,
 * or at journal_flush: call it before anything reaches a client.
 */
void journal_append(char kind, const char *a, size_t alen, const char *b,
    size_t blen);
void journal_flush(void);
/*
 * A record too large for one loop pass (a large result's note), in
 * journal_append's layout: journal_big_new copies a (short) and keeps b,
 * which must outlive it; each journal_big_step does at most max bytes of
 * its work, the CRC and then the writes, and is true once the record is in
 * the file (or there is no journal). One is written at a time with nothing
 * between its slices: a record pending behind it, a compaction or a
 * redirect waits for it (finishes it first). A SIGKILL between slices
 * leaves a torn end, which journal_load cuts off: the record is whole or
 * absent, and what it records must not reach a client before it is true.
 */
struct journal_big;
struct journal_big *journal_big_new(char kind, const char *a, size_t alen,
    const char *b, size_t blen);
bool journal_big_step(struct journal_big *, size_t max);
void journal_big_free(struct journal_big *);
/*
 * Compaction writes the live state through journal_append from this
 * callback (set once): into a new file that replaces the journal.
 */
void journal_set_snapshot(void (*)(void));
/* Rewrite it now, without what is closed or trimmed. */
void journal_compact(void);
/* The same from the loop, once what is running now is done. */
void journal_compact_soon(void);
void journal_close(void);

/* CRC-32C (Castagnoli), for the record format and its tests. */
unsigned long journal_crc32(const char *, size_t);

#endif
