/*
 * Telling the service manager how we are (sd_notify): READY=1 once serving,
 * STATUS= with a short summary when it changes, WATCHDOG=1 when a watchdog
 * is set, STOPPING=1 on shutdown; and the idle exit of a socket-activated
 * daemon. Harmless without systemd: sd_notify does nothing then.
 */
#ifndef STEXEC_NOTIFY_H
#define STEXEC_NOTIFY_H

#include <stdbool.h>

struct event_base;

/* idle_exit_s > 0: leave the loop after that long with no session and no
 * client (only when activated: systemd starts us again on demand). */
void notify_init(struct event_base *, bool activated, int idle_exit_s);
void notify_ready(void);
void notify_stopping(void);
void notify_free(void);

#endif
