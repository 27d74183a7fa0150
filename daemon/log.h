/*
 * Logging: readable lines on stderr, with syslog priorities instead of level
 * words when stderr is journald's stream (log.c).
 */
#ifndef STEXEC_LOG_H
#define STEXEC_LOG_H

enum log_level {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

/* Parse "error", "warn", "info" or "debug"; -1 if it is none of them. */
int log_parse_level(const char *);
void log_set_level(enum log_level);
void log_msg(enum log_level, const char *, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * A line about a session, or one of its tools (tool_use_id and tool_name
 * NULL otherwise). Under journald it carries the fields SESSION_ID=,
 * TOOL_USE_ID= and TOOL_NAME=, so that `journalctl SESSION_ID=s-…` lists
 * one session's lines; anywhere, the text starts with the same ids.
 */
void log_about(enum log_level, const char *session_id,
    const char *tool_use_id, const char *tool_name, const char *, ...)
    __attribute__((format(printf, 5, 6)));

/* The same with a HOOK= field: a hook's run (README, "Hooks"). */
void log_hook(enum log_level, const char *session_id,
    const char *tool_use_id, const char *tool_name, const char *hook,
    const char *, ...) __attribute__((format(printf, 6, 7)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
