/* The metrics method's answer (gauges.c). */
#ifndef STEXEC_GAUGES_H
#define STEXEC_GAUGES_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * {metrics: [family]}: the daemon's counters, histograms and gauges, and
 * the figures of uid's own sessions; enforcement is initialize's.
 */
json_t *gauges_json(uid_t, const json_t *enforcement, uint64_t uptime_ms);

#endif
