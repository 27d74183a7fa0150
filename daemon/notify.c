/* sd_notify glue and the idle exit. See notify.h. */
#include "notify.h"

#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "net/conn.h"
#include "log.h"
#include "supervisor/proc.h"
#include "session/session.h"

static struct event_base *notify_base;
static struct event *notify_tick, *notify_dog;
static bool notify_activated;
static int notify_idle_s;
static time_t notify_idle_since;
static char notify_last[128];

static void	notify_tick_cb(evutil_socket_t, short, void *);
static void	notify_dog_cb(evutil_socket_t, short, void *);
static void	notify_status(void);

void
notify_init(struct event_base *base, bool activated, int idle_exit_s)
{
	struct timeval one = { 1, 0 }, half;
	uint64_t usec;

	notify_base = base;
	notify_activated = activated;
	notify_idle_s = idle_exit_s;
	/* One tick a second: STATUS when it changed, and the idle check. */
	notify_tick = event_new(base, -1, EV_PERSIST, notify_tick_cb, NULL);
	event_add(notify_tick, &one);
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		half.tv_sec = (time_t)(usec / 2 / 1000000);
		half.tv_usec = (suseconds_t)(usec / 2 % 1000000);
		notify_dog = event_new(base, -1, EV_PERSIST, notify_dog_cb,
		    NULL);
		event_add(notify_dog, &half);
		log_debug("watchdog every %llu us", (unsigned long long)usec);
	}
}

static void
notify_status(void)
{
	char status[128];

	snprintf(status, sizeof status, "STATUS=%u sessions, %u tools "
	    "running, %u clients", session_count(), proc_running(),
	    conn_count());
	if (strcmp(status, notify_last) == 0)
		return;
	memcpy(notify_last, status, sizeof status);
	sd_notify(0, status);
}

void
notify_ready(void)
{
	notify_status();
	sd_notify(0, "READY=1");
}

void
notify_stopping(void)
{
	sd_notify(0, "STOPPING=1\nSTATUS=stopping: killing tools");
}

static void
notify_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	time_t now = time(NULL);

	notify_status();
	if (!notify_activated || notify_idle_s <= 0)
		return;
	if (session_count() > 0 || conn_count() > 0) {
		notify_idle_since = 0;
		return;
	}
	if (notify_idle_since == 0)
		notify_idle_since = now;
	else if (now - notify_idle_since >= notify_idle_s) {
		log_info("idle for %d s: exiting (the socket stays with "
		    "systemd)", notify_idle_s);
		event_base_loopbreak(notify_base);
	}
}

static void
notify_dog_cb(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

void
notify_free(void)
{
	if (notify_tick != NULL)
		event_free(notify_tick);
	if (notify_dog != NULL)
		event_free(notify_dog);
	notify_tick = notify_dog = NULL;
}
