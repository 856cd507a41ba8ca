/*
 * The exposition of live pools' statistics (metrics.h).
 *
 * Names follow Prometheus' conventions: a stepring_ prefix, base units
 * (seconds, bytes) in the name, counters ending in _total (in OpenMetrics
 * the family is named without it and its sample with it), ratios in
 * [0, 1] ending in _ratio. Every series of a pool carries the labels pool
 * (its ring name), env (the env id), worker_kind (threads, procs,
 * procs_inline), mode (sync, async) and, for a pool that is one rank of
 * an MPI pool, rank. Families come one after the other, each with its
 * HELP and TYPE lines once, because both formats require a family's
 * samples to be contiguous.
 */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "stepring/checkpoint.h" /* SR_CKPT_STATE_* */

void mbuf_printf(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = b->cap ? b->cap : 4096;
			char *p;

			while (cap - b->len <= (size_t)n)
				cap *= 2;
			p = realloc(b->p, cap);
			if (!p) {
				b->oom = true;
				return;
			}
			b->p = p;
			b->cap = cap;
		}
	}
}

void mbuf_free(struct mbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Length of the valid UTF-8 sequence at @s (at most @n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF. */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

void metrics_label_value(struct mbuf *b, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t k;

		if (u[i] == '\\' || u[i] == '"') {
			mbuf_printf(b, "\\%c", u[i]);
			i++;
		} else if (u[i] == '\n') {
			mbuf_printf(b, "\\n");
			i++;
		} else if (u[i] < 0x20 || u[i] == 0x7f) {
			mbuf_printf(b, "?");
			i++;
		} else if ((k = utf8_len(u + i, len - i)) == 0) {
			mbuf_printf(b, "?");
			i++;
		} else {
			mbuf_printf(b, "%.*s", (int)k, s + i);
			i += k;
		}
	}
}

/* A sample value: integers exactly, NaN and infinities by name. */
static void value(struct mbuf *b, double v)
{
	if (isnan(v))
		mbuf_printf(b, "NaN");
	else if (isinf(v))
		mbuf_printf(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		mbuf_printf(b, "%.0f", v);
	else
		mbuf_printf(b, "%.9g", v);
}

enum ftype { F_COUNTER, F_GAUGE, F_SUMMARY };

static const char *const type_name[] = {"counter", "gauge", "summary"};

struct ctx {
	struct mbuf *b;
	bool om;
};

/* name[suffix]{the pool's labels[,extra]} value */
static void sample(struct ctx *c, const struct metrics_pool *p, const char *name,
		   const char *suffix, const char *extra, double v)
{
	const sr_stats_shm *a = &p->snap->agg;

	mbuf_printf(c->b, "%s%s{pool=\"", name, suffix);
	metrics_label_value(c->b, p->name, strlen(p->name));
	mbuf_printf(c->b, "\",env=\"");
	metrics_label_value(c->b, a->env_id, strnlen(a->env_id, sizeof(a->env_id)));
	mbuf_printf(c->b, "\",worker_kind=\"%s\",mode=\"%s\"", stats_worker_kind(a->worker_kind),
		    a->mode ? "async" : "sync");
	if (a->mpi_size)
		mbuf_printf(c->b, ",rank=\"%u\"", a->mpi_rank);
	if (extra)
		mbuf_printf(c->b, ",%s", extra);
	mbuf_printf(c->b, "} ");
	value(c->b, v);
	mbuf_printf(c->b, "\n");
}

#define AGG(f) offsetof(sr_stats_shm, f)

/* A family's HELP and TYPE: in Prometheus' format counters are named with
 * _total, in OpenMetrics without. */
static void head(struct ctx *c, const char *base, enum ftype t, const char *help)
{
	const char *sfx = t == F_COUNTER && !c->om ? "_total" : "";

	mbuf_printf(c->b, "# HELP %s%s %s\n# TYPE %s%s %s\n", base, sfx, help, base, sfx,
		    type_name[t]);
}

/* A counter with one sample per pool, the uint64_t at @off of the block
 * times @scale; @v2: a field of version 2 (left out for older blocks). */
static void counter_u64(struct ctx *c, const struct metrics_pool *pools, int n, const char *base,
			const char *help, size_t off, double scale, bool v2)
{
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= !v2 || pools[i].snap->agg.version >= 2;
	if (!any)
		return;
	head(c, base, F_COUNTER, help);
	for (int i = 0; i < n; i++) {
		uint64_t v;

		if (v2 && pools[i].snap->agg.version < 2)
			continue;
		memcpy(&v, (const char *)&pools[i].snap->agg + off, sizeof(v));
		sample(c, &pools[i], base, "_total", NULL, (double)v * scale);
	}
}

typedef double (*getter)(const struct metrics_pool *p);

/* A gauge with one sample per pool; @want filters pools (NULL: all). */
static void gauge(struct ctx *c, const struct metrics_pool *pools, int n, const char *name,
		  const char *help, getter get, bool (*want)(const struct metrics_pool *))
{
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= !want || want(&pools[i]);
	if (!any)
		return;
	head(c, name, F_GAUGE, help);
	for (int i = 0; i < n; i++)
		if (!want || want(&pools[i]))
			sample(c, &pools[i], name, "", NULL, get(&pools[i]));
}

static bool is_v2(const struct metrics_pool *p)
{
	return p->snap->agg.version >= 2;
}

static bool has_rates(const struct metrics_pool *p)
{
	return p->rates && p->rates->dt_s > 0;
}

static bool has_rates_v2(const struct metrics_pool *p)
{
	return has_rates(p) && p->rates->has_v2;
}

static double g_envs(const struct metrics_pool *p)
{
	return p->snap->agg.num_envs;
}

static double g_workers(const struct metrics_pool *p)
{
	return p->snap->agg.num_threads;
}

static double g_batch(const struct metrics_pool *p)
{
	return p->snap->agg.batch_size;
}

static double g_return(const struct metrics_pool *p)
{
	return p->snap->agg.mean_return;
}

static double g_length(const struct metrics_pool *p)
{
	return p->snap->agg.mean_length;
}

static double g_ring_cap(const struct metrics_pool *p)
{
	return (double)p->snap->agg.ring_capacity;
}

static double g_ckpt_bytes(const struct metrics_pool *p)
{
	return (double)p->snap->agg.ckpt_bytes;
}

static double g_rss(const struct metrics_pool *p)
{
	return (double)p->snap->agg.rss_bytes;
}

static double g_sps(const struct metrics_pool *p)
{
	return p->rates->steps_per_sec;
}

static double g_cpu_usage(const struct metrics_pool *p)
{
	return p->rates->cpu_usage;
}

static double g_uptime(const struct metrics_pool *p)
{
	const sr_stats_shm *a = &p->snap->agg;

	return a->now_ns > a->start_ns ? (double)(a->now_ns - a->start_ns) / 1e9 : 0;
}

static double g_pending(const struct metrics_pool *p)
{
	const sr_stats_shm *a = &p->snap->agg;

	return (double)(a->ring_head >= a->ring_cursor ? a->ring_head - a->ring_cursor : 0);
}

static double g_replay_fill(const struct metrics_pool *p)
{
	const sr_stats_shm *a = &p->snap->agg;
	uint64_t live = a->ring_head < a->ring_capacity ? a->ring_head : a->ring_capacity;

	return a->ring_capacity ? (double)live / (double)a->ring_capacity : 0;
}

static void latency_summary(struct ctx *c, const struct metrics_pool *pools, int n)
{
	const char *name = "stepring_batch_latency_seconds";

	head(c, name, F_SUMMARY,
	     "Latency of one pool call that returns a batch (sr_pool_step, or send + "
	     "recv); quantiles over the last 256 batches");
	for (int i = 0; i < n; i++) {
		const sr_stats_shm *a = &pools[i].snap->agg;

		sample(c, &pools[i], name, "", "quantile=\"0.5\"", a->p50_us / 1e6);
		sample(c, &pools[i], name, "", "quantile=\"0.99\"", a->p99_us / 1e6);
		if (a->version >= 2) {
			sample(c, &pools[i], name, "_sum", NULL, (double)a->lat_sum_ns / 1e9);
			sample(c, &pools[i], name, "_count", NULL, (double)a->lat_count);
		}
	}
}

static void time_parts(struct ctx *c, const struct metrics_pool *pools, int n)
{
	static const struct {
		const char *part;
		size_t off;
	} parts[] = {
		{"env_step", AGG(ns_env_step)}, {"ring_publish", AGG(ns_ring_publish)},
		{"collect", AGG(ns_collect)},   {"wait", AGG(ns_wait)},
		{"send", AGG(ns_send)},
	};
	const char *name = "stepring_time_seconds";
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= is_v2(&pools[i]);
	if (!any)
		return;
	head(c, name, F_COUNTER,
	     "Time spent, summed over the workers (env_step, ring_publish, wait: idle "
	     "workers and recv waiting for them) and the collector (collect, send)");
	for (int i = 0; i < n; i++) {
		if (!is_v2(&pools[i]))
			continue;
		for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
			char extra[32];
			uint64_t v;

			memcpy(&v, (const char *)&pools[i].snap->agg + parts[k].off, sizeof(v));
			snprintf(extra, sizeof(extra), "part=\"%s\"", parts[k].part);
			sample(c, &pools[i], name, "_total", extra, (double)v / 1e9);
		}
	}
}

static void time_shares(struct ctx *c, const struct metrics_pool *pools, int n)
{
	const char *name = "stepring_time_share_ratio";
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= has_rates_v2(&pools[i]);
	if (!any)
		return;
	head(c, name, F_GAUGE,
	     "Where the trainer thread's time went over the last sampling interval: env "
	     "and ring (per worker), copy (collect and send), wait (for the workers), caller "
	     "(outside the pool's calls: the caller's own work); the parts sum to 1");
	for (int i = 0; i < n; i++) {
		if (!has_rates_v2(&pools[i]))
			continue;
		for (int k = 0; k < STATS_SHARES; k++) {
			char extra[32];

			snprintf(extra, sizeof(extra), "part=\"%s\"", stats_share_names[k]);
			sample(c, &pools[i], name, "", extra, pools[i].rates->share[k]);
		}
	}
}

static void checkpoint_state(struct ctx *c, const struct metrics_pool *pools, int n)
{
	static const struct {
		uint32_t v;
		const char *name;
	} st[] = {
		{SR_CKPT_STATE_IDLE, "idle"},
		{SR_CKPT_STATE_SNAPSHOT, "snapshot"},
		{SR_CKPT_STATE_WRITING, "writing"},
		{SR_CKPT_STATE_FAILED, "failed"},
	};
	const char *name = "stepring_checkpoint_state";

	head(c, name, F_GAUGE, "1 for the pool's checkpoint state, 0 for the others");
	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < sizeof(st) / sizeof(st[0]); k++) {
			char extra[32];

			snprintf(extra, sizeof(extra), "state=\"%s\"", st[k].name);
			sample(c, &pools[i], name, "", extra,
			       pools[i].snap->agg.ckpt_state == st[k].v);
		}
	}
}

enum wfield { W_STEPS, W_BUSY, W_IDLE, W_CPU, W_UTIL };

static void workers(struct ctx *c, const struct metrics_pool *pools, int n, const char *name,
		    enum ftype t, const char *help, enum wfield f)
{
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= pools[i].snap->nw && (f != W_UTIL || has_rates(&pools[i]));
	if (!any)
		return;
	head(c, name, t, help);
	for (int i = 0; i < n; i++) {
		const struct stats_snap *s = pools[i].snap;

		if (f == W_UTIL && !has_rates(&pools[i]))
			continue;
		for (uint32_t w = 0; w < s->nw; w++) {
			char extra[32];
			double v;

			snprintf(extra, sizeof(extra), "worker=\"%u\"", w);
			switch (f) {
			case W_STEPS:
				v = (double)s->w[w].steps;
				break;
			case W_BUSY:
				v = (double)s->w[w].ns_busy / 1e9;
				break;
			case W_IDLE:
				v = (double)s->w[w].ns_idle / 1e9;
				break;
			case W_CPU:
				v = s->w[w].cpu == UINT64_MAX ? -1 : (double)s->w[w].cpu;
				break;
			default:
				v = pools[i].rates->util[w];
				break;
			}
			sample(c, &pools[i], name, t == F_COUNTER ? "_total" : "", extra, v);
		}
	}
}

void metrics_render(struct mbuf *b, const struct metrics_pool *pools, int n, bool openmetrics)
{
	struct ctx c = {.b = b, .om = openmetrics};

	head(&c, "stepring_pools", F_GAUGE, "Live pools reported (stale segments are not)");
	mbuf_printf(b, "stepring_pools %d\n", n);
	if (n > 0) {
		gauge(&c, pools, n, "stepring_envs", "Env instances in the pool", g_envs, NULL);
		gauge(&c, pools, n, "stepring_workers",
		      "Workers (threads or processes, worker 0 included)", g_workers, NULL);
		gauge(&c, pools, n, "stepring_batch_size", "Rows in a batch", g_batch, NULL);
		gauge(&c, pools, n, "stepring_uptime_seconds", "Seconds since the pool was created",
		      g_uptime, NULL);
		counter_u64(&c, pools, n, "stepring_steps", "Env steps since the pool was created",
			    AGG(steps), 1, false);
		counter_u64(&c, pools, n, "stepring_batches", "Batches returned", AGG(batches), 1,
			    false);
		counter_u64(&c, pools, n, "stepring_episodes", "Episodes finished", AGG(episodes),
			    1, false);
		counter_u64(&c, pools, n, "stepring_faults",
			    "Worker processes that died or hung", AGG(faults), 1, false);
		counter_u64(&c, pools, n, "stepring_restarts", "Worker processes started again",
			    AGG(restarts), 1, false);
		counter_u64(&c, pools, n, "stepring_fault_rows",
			    "Rows published as faults (env steps a worker fault interrupted)",
			    AGG(fault_rows), 1, false);
		counter_u64(&c, pools, n, "stepring_nonfinite_rows",
			    "Rows flagged for NaN or infinity in obs or reward", AGG(nonfinite_rows),
			    1, false);
		gauge(&c, pools, n, "stepring_steps_per_second",
		      "Env steps per second over the last sampling interval", g_sps, has_rates);
		latency_summary(&c, pools, n);
		gauge(&c, pools, n, "stepring_episode_return_mean",
		      "Mean return of the last 100 finished episodes", g_return, NULL);
		gauge(&c, pools, n, "stepring_episode_length_mean",
		      "Mean length of the last 100 finished episodes", g_length, NULL);
		time_parts(&c, pools, n);
		time_shares(&c, pools, n);
		gauge(&c, pools, n, "stepring_ring_capacity_slots", "Slots of the pool's ring",
		      g_ring_cap, NULL);
		gauge(&c, pools, n, "stepring_ring_pending_slots",
		      "Slots published and not yet consumed", g_pending, NULL);
		gauge(&c, pools, n, "stepring_replay_fill_ratio",
		      "Share of the ring holding transitions (the replay window)", g_replay_fill,
		      NULL);
		counter_u64(&c, pools, n, "stepring_checkpoints", "Checkpoints completed",
			    AGG(ckpt_count), 1, false);
		gauge(&c, pools, n, "stepring_checkpoint_last_bytes",
		      "Bytes of the last checkpoint", g_ckpt_bytes, NULL);
		checkpoint_state(&c, pools, n);
		counter_u64(&c, pools, n, "stepring_process_cpu_seconds",
			    "CPU time of the pool's process (worker processes not included)",
			    AGG(cpu_ns), 1e-9, true);
		gauge(&c, pools, n, "stepring_process_cpu_usage_ratio",
		      "CPU-seconds per second of the pool's process over the last sampling "
		      "interval (1: one CPU busy)",
		      g_cpu_usage, has_rates_v2);
		gauge(&c, pools, n, "stepring_process_resident_memory_bytes",
		      "Resident set of the pool's process (worker processes not included)", g_rss,
		      is_v2);
		workers(&c, pools, n, "stepring_worker_steps", F_COUNTER, "Env steps by the worker",
			W_STEPS);
		workers(&c, pools, n, "stepring_worker_busy_seconds", F_COUNTER,
			"Time the worker spent stepping envs and publishing", W_BUSY);
		workers(&c, pools, n, "stepring_worker_idle_seconds", F_COUNTER,
			"Time the worker spent spinning or sleeping", W_IDLE);
		workers(&c, pools, n, "stepring_worker_utilization_ratio", F_GAUGE,
			"Busy share of the worker over the last sampling interval", W_UTIL);
		workers(&c, pools, n, "stepring_worker_cpu", F_GAUGE,
			"The CPU the worker is bound to, or -1", W_CPU);
	}
	if (openmetrics)
		mbuf_printf(b, "# EOF\n");
}
