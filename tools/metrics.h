/*
 * Live pools' statistics in the Prometheus text format (version 0.0.4) and
 * in OpenMetrics 1.0 (tools/metrics.c): what `stepring metrics` serves.
 * docs/metrics.md lists the metrics.
 */
#ifndef SR_TOOLS_METRICS_H
#define SR_TOOLS_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "stats_read.h"

/* A growing text buffer; on allocation failure it stops growing and sets
 * oom (the text is then cut short: callers check it). */
struct mbuf {
	char *p;
	size_t len, cap;
	bool oom;
};
void mbuf_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mbuf_free(struct mbuf *b);

/* One pool to render: its name, a snapshot for the counters and the
 * instantaneous gauges, and the rates of the last sampling interval (for
 * the gauges of shares and utilisation; NULL: none yet). */
struct metrics_pool {
	const char *name;
	const struct stats_snap *snap;
	const struct stats_rates *rates;
};

/* Append the exposition of @n pools to @b: every family once (HELP, TYPE,
 * then its samples of every pool), label values escaped. @openmetrics:
 * the OpenMetrics text format (counter families named without _total,
 * "# EOF" at the end) instead of Prometheus'. */
void metrics_render(struct mbuf *b, const struct metrics_pool *pools, int n, bool openmetrics);

/* @s escaped as a label value ('\\', '"' and newline escaped, other control
 * bytes and bytes that are not UTF-8 replaced by '?'), appended to @b. */
void metrics_label_value(struct mbuf *b, const char *s, size_t len);

/* The Content-Type of each format. */
#define METRICS_CT_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

#endif
