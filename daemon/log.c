/*
 * Logging to stderr, one line per message, filtered by level. Under
 * journald (stderr is the stream named by $JOURNAL_STREAM) each line
 * carries its syslog priority as a "<N>" prefix instead of a level word,
 * and a line about a session or a tool goes to the journal directly, with
 * its ids as fields.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "utf8.h"

static enum log_level log_level = LOG_LEVEL_INFO;
static int log_journal = -1; /* unknown yet */
static const char *log_names[] = { "error", "warn", "info", "debug" };
static const int log_priorities[] = { 3, 4, 6, 7 };

static int	log_to_journal(void);
static void	log_line(enum log_level, const char *);

int
log_parse_level(const char *s)
{
	int i;

	for (i = 0; i <= LOG_LEVEL_DEBUG; i++)
		if (strcmp(s, log_names[i]) == 0)
			return i;
	return -1;
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

/* Is stderr the journal stream systemd connected us to? */
static int
log_to_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(2, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (level > log_level)
		return;
	if (log_journal < 0)
		log_journal = log_to_journal();
	va_start(ap, fmt);
	utf8_vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	log_line(level, line);
}

/* One write per line, so lines of concurrent writers do not mix. */
static void
log_line(enum log_level level, const char *line)
{
	if (log_journal)
		fprintf(stderr, "<%d>%s\n", log_priorities[level], line);
	else
		fprintf(stderr, "stexecd: %s: %s\n", log_names[level], line);
}

void
log_about(enum log_level level, const char *sid, const char *tid,
    const char *tname, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t n;

	if (level > log_level)
		return;
	if (log_journal < 0)
		log_journal = log_to_journal();
	if (tid != NULL)
		utf8_snprintf(line, sizeof line, "session %s: tool %s (%s): ",
		    sid, tid, tname != NULL ? tname : "?");
	else
		utf8_snprintf(line, sizeof line, "session %s: ", sid);
	n = strlen(line);
	va_start(ap, fmt);
	utf8_vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	/*
	 * The journal's native protocol, one datagram a line; the stream's
	 * line if that fails (no journald socket), so nothing is lost.
	 */
	if (log_journal && (tid != NULL ? sd_journal_send("MESSAGE=%s", line,
	    "PRIORITY=%d", log_priorities[level], "SYSLOG_IDENTIFIER=stexecd",
	    "SESSION_ID=%s", sid, "TOOL_USE_ID=%s", tid, "TOOL_NAME=%s",
	    tname != NULL ? tname : "", NULL) : sd_journal_send("MESSAGE=%s",
	    line, "PRIORITY=%d", log_priorities[level],
	    "SYSLOG_IDENTIFIER=stexecd", "SESSION_ID=%s", sid, NULL)) == 0)
		return;
	log_line(level, line);
}

/* A hook's run: log_about's fields and HOOK=, its event and command. */
void
log_hook(enum log_level level, const char *sid, const char *tid,
    const char *tname, const char *hook, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t n;

	if (level > log_level)
		return;
	if (log_journal < 0)
		log_journal = log_to_journal();
	if (tid != NULL)
		utf8_snprintf(line, sizeof line, "session %s: tool %s (%s): "
		    "hook %s: ", sid, tid, tname != NULL ? tname : "?", hook);
	else
		utf8_snprintf(line, sizeof line, "session %s: hook %s: ", sid,
		    hook);
	n = strlen(line);
	va_start(ap, fmt);
	utf8_vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	if (log_journal && sd_journal_send("MESSAGE=%s", line, "PRIORITY=%d",
	    log_priorities[level], "SYSLOG_IDENTIFIER=stexecd",
	    "SESSION_ID=%s", sid, "TOOL_USE_ID=%s", tid != NULL ? tid : "",
	    "TOOL_NAME=%s", tname != NULL ? tname : "", "HOOK=%s", hook,
	    NULL) == 0)
		return;
	log_line(level, line);
}
