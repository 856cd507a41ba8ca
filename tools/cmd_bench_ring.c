/* stepring bench ring | bench replay: ring publish cost, consumer drain
 * bandwidth and replay sampling throughput, each next to the memcpy of the
 * same bytes measured in the same run (the ceiling). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "cli.h"
#include "machine.h"
#include "stepring.h"
#include "stepring/replay.h"

int bench_ring(int argc, char **argv);
int bench_replay(int argc, char **argv);

/* The ring's columns and geometry, from the public accessors. */
struct cols {
	float *obs, *reward;
	uint8_t *action, *terminated, *truncated, *flags;
	uint32_t *env_id;
	uint64_t *prev;
	uint64_t cap, mask;
	uint32_t obs_dim, act_size;
};

static struct cols cols_of(const sr_ring *r)
{
	struct cols c = {
		.obs = sr_ring_obs_col(r),
		.reward = sr_ring_reward_col(r),
		.action = sr_ring_action_col(r),
		.terminated = sr_ring_terminated_col(r),
		.truncated = sr_ring_truncated_col(r),
		.flags = sr_ring_flags_col(r),
		.env_id = sr_ring_env_id_col(r),
		.prev = sr_ring_prev_col(r),
		.cap = sr_ring_capacity(r),
		.obs_dim = sr_ring_obs_dim(r),
		.act_size = sr_ring_act_size(r),
	};

	c.mask = c.cap - 1;
	return c;
}


#define MAXREP 32

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return v[n / 2];
}

/* CPU time of the calling thread: on a shared machine, rates per CPU
 * second are steadier than wall-clock rates (time spent descheduled does
 * not count). Both are reported. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Keep the compiler from dropping a copy. */
static volatile uint64_t sink;

/* ---------------------------------------------------------------------------
 * bench ring
 * ------------------------------------------------------------------------- */

struct pub {
	sr_ring *r;
	uint32_t bulk;
	bool write;          /* write the columns, or protocol only */
	uint64_t n;          /* transitions per producer */
	_Atomic int *go;
	uint64_t ns;         /* this producer's time */
	uint64_t cpu;        /* this producer's CPU time */
};

static void *pub_thread(void *arg)
{
	struct pub *p = arg;
	sr_ring *r = p->r;
	struct cols c = cols_of(r);
	uint64_t q, t0, done = 0, mask = c.mask;
	uint32_t d = c.obs_dim;

	uint64_t c0;

	while (!atomic_load_explicit(p->go, memory_order_acquire))
		;
	t0 = bench_now_ns();
	c0 = cpu_ns();
	while (done < p->n) {
		sr_ring_reserve(r, p->bulk, 0, &q);
		if (p->write) {
			for (uint32_t j = 0; j < p->bulk; j++) {
				uint64_t s = (q + j) & mask;

				for (uint32_t k = 0; k < d; k++)
					c.obs[s * d + k] = (float)k;
				memset(c.action + s * c.act_size, 0, c.act_size);
				c.reward[s] = 1.0f;
				c.terminated[s] = 0;
				c.truncated[s] = 0;
				c.flags[s] = 0;
				c.env_id[s] = (uint32_t)j;
				c.prev[s] = q + j - 1;
			}
		}
		sr_ring_publish(r, q, p->bulk);
		done += p->bulk;
	}
	p->ns = bench_now_ns() - t0;
	p->cpu = cpu_ns() - c0;
	return NULL;
}

struct drain_ctx {
	sr_ring *r;
	_Atomic int stop;
	uint64_t consumed;
};

/* Consumer that only moves the cursor (publish cost is measured, not the
 * copy); yields when idle so that producers keep the cores. */
static void *cursor_thread(void *arg)
{
	struct drain_ctx *c = arg;
	uint64_t first;

	for (;;) {
		uint32_t n = sr_ring_peek(c->r, 4096, &first);

		if (n) {
			sr_ring_consume(c->r, n);
			c->consumed += n;
		} else if (atomic_load_explicit(&c->stop, memory_order_acquire)) {
			break;
		} else {
			sched_yield();
		}
	}
	return NULL;
}

#define MAX_PUB 2 /* producer threads in the publish runs */

/* ns per transition (per producer thread) for @np (1..MAX_PUB) producers
 * at @bulk; *cpu_ns_t gets the same from the producers' CPU time. */
static double publish_run(sr_ring *r, uint32_t np, uint32_t bulk, bool write, double seconds,
			  double *mtps, double *cpu_ns_t)
{
	struct pub p[MAX_PUB];
	pthread_t th[MAX_PUB], ct;
	struct drain_ctx dc = {.r = r};
	_Atomic int go = 0;
	uint64_t t0, wall, n;
	double ns = 0, cns = 0;

	if (np > MAX_PUB)
		np = MAX_PUB; /* the callers pass 1 or 2; this tells the compiler too */
	/* Size the run from a quick estimate: ~15 ns per transition. */
	n = (uint64_t)(seconds * 1e9 / 15.0 / np);
	n = (n / bulk + 1) * bulk;
	pthread_create(&ct, NULL, cursor_thread, &dc);
	for (uint32_t i = 0; i < np; i++) {
		p[i] = (struct pub){r, bulk, write, n, &go, 0, 0};
		pthread_create(&th[i], NULL, pub_thread, &p[i]);
	}
	t0 = bench_now_ns();
	atomic_store_explicit(&go, 1, memory_order_release);
	for (uint32_t i = 0; i < np; i++) {
		pthread_join(th[i], NULL);
		ns += (double)p[i].ns / (double)n;
		cns += (double)p[i].cpu / (double)n;
	}
	wall = bench_now_ns() - t0;
	atomic_store_explicit(&dc.stop, 1, memory_order_release);
	pthread_join(ct, NULL);
	*mtps = (double)n * np / ((double)wall / 1e9) / 1e6;
	*cpu_ns_t = cns / np;
	return ns / np;
}

/* Bytes of one slot that a consumer copies into a batch. */
static size_t slot_bytes(const sr_ring *r)
{
	return (size_t)sr_ring_obs_dim(r) * 4 + sr_ring_act_size(r) + 4 + 1 + 1 + 1 + 4;
}

struct dst {
	float *obs;
	uint8_t *action, *term, *trunc, *flags;
	float *reward;
	uint32_t *env_id;
};

static void copy_cols(const sr_ring *r, struct dst *d, uint64_t at, uint64_t from, uint64_t n)
{
	struct cols c = cols_of(r);
	uint32_t od = c.obs_dim, as = c.act_size;

	memcpy(d->obs + at * od, c.obs + from * od, n * od * 4);
	memcpy(d->action + at * as, c.action + from * as, n * as);
	memcpy(d->reward + at, c.reward + from, n * 4);
	memcpy(d->term + at, c.terminated + from, n);
	memcpy(d->trunc + at, c.truncated + from, n);
	memcpy(d->flags + at, c.flags + from, n);
	memcpy(d->env_id + at, c.env_id + from, n * 4);
}

/* Fill the whole ring (published, unconsumed), untimed. */
static void fill_ring(sr_ring *r)
{
	struct cols c = cols_of(r);
	uint64_t q, cap = c.cap;

	sr_ring_reserve(r, (uint32_t)cap, 0, &q);
	for (uint64_t j = 0; j < cap; j++) {
		uint64_t s = (q + j) & c.mask;

		for (uint32_t k = 0; k < c.obs_dim; k++)
			c.obs[s * c.obs_dim + k] = (float)(j + k);
		memset(c.action + s * c.act_size, 1, c.act_size);
		c.reward[s] = 1.0f;
		c.terminated[s] = 0;
		c.truncated[s] = 0;
		c.flags[s] = 0;
		c.env_id[s] = (uint32_t)j;
		c.prev[s] = SR_RING_NO_PREV;
	}
	sr_ring_publish(r, q, (uint32_t)cap);
}

/* The ceiling: the same column pieces copied with memcpy alone (no
 * peek, no consume). */
static uint64_t memcpy_pass(sr_ring *r, struct dst *d, uint32_t batch, uint64_t *cpu)
{
	uint64_t t0 = bench_now_ns(), c0 = cpu_ns(), cap = sr_ring_capacity(r);

	for (uint64_t at = 0; at < cap; at += batch) {
		uint64_t n = cap - at < batch ? cap - at : batch;

		copy_cols(r, d, at, at, n);
	}
	*cpu = cpu_ns() - c0;
	return bench_now_ns() - t0;
}

/* Drain a full ring in batches of @batch with one copy per column per
 * piece (two at the wrap); GB/s, and the memcpy GB/s of the same bytes in
 * the same pieces (run first or second in turn, for the cache state). */
static void drain_run(sr_ring *r, struct dst *d, uint32_t batch, int order, double *gbs,
		      double *memcpy_gbs, double *cpu_gbs, double *cpu_memcpy_gbs)
{
	uint64_t first, t0, c0, t_drain, c_drain, t_copy = 0, c_copy = 0, got = 0;
	const uint64_t cap = sr_ring_capacity(r), mask = cap - 1;
	size_t bytes = (size_t)cap * slot_bytes(r);

	fill_ring(r);
	if (order & 1)
		t_copy = memcpy_pass(r, d, batch, &c_copy);
	t0 = bench_now_ns();
	c0 = cpu_ns();
	while (got < cap) {
		uint32_t n = sr_ring_peek(r, batch, &first);
		uint64_t s = first & mask, n1 = n;

		if (s + n > cap)
			n1 = cap - s; /* wraps: two pieces */
		copy_cols(r, d, got, s, n1);
		if (n1 < n)
			copy_cols(r, d, got + n1, 0, n - n1);
		sr_ring_consume(r, n);
		got += n;
	}
	t_drain = bench_now_ns() - t0;
	c_drain = cpu_ns() - c0;
	sink += (uint64_t)d->obs[got / 2];
	if (!(order & 1))
		t_copy = memcpy_pass(r, d, batch, &c_copy);
	sink += (uint64_t)d->obs[cap / 3];
	*gbs = (double)bytes / (double)t_drain;
	*memcpy_gbs = (double)bytes / (double)t_copy;
	*cpu_gbs = (double)bytes / (double)(c_drain ? c_drain : 1);
	*cpu_memcpy_gbs = (double)bytes / (double)(c_copy ? c_copy : 1);
}

static void usage_ring(FILE *f)
{
	fprintf(f,
		"usage: stepring bench ring [--seconds S] [--repeat R] [--capacity N]\n"
		"                           [--obs-dim D] [--batch B] [--json]\n"
		"Publish cost per transition (reserve + publish, and with the columns\n"
		"written) for 1 and 2 producers at bulk sizes 1, 8, 64, 256; consumer drain\n"
		"bandwidth (contiguous batches, one copy per column) next to memcpy of the\n"
		"same bytes in the same run. Medians of R runs.\n"
		"  --seconds S    per publish measurement (default 0.2)\n"
		"  --repeat R     runs per figure (default 5)\n"
		"  --capacity N   ring slots, power of two (default 65536)\n"
		"  --obs-dim D    floats per obs (default 4; drain also reports 64)\n"
		"  --batch B      drain batch size (default 1024)\n"
		"  --json         one JSON object per line\n");
}

int bench_ring(int argc, char **argv)
{
	long long repeat = 5, cap = 65536, obs_dim = 4, batch = 1024;
	double seconds = 0.2;
	bool json = false;
	static const uint32_t bulks[] = {1, 8, 64, 256};
	const char *v;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage_ring(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			seconds = cli_double("--seconds", v, 0.001, 60);
		} else if (cli_opt(argc, argv, &i, "--repeat", &v)) {
			repeat = cli_int("--repeat", v, 1, MAXREP);
		} else if (cli_opt(argc, argv, &i, "--capacity", &v)) {
			cap = cli_int("--capacity", v, 512, 1ll << 26);
			if (cap & (cap - 1))
				cli_die("--capacity: %lld is not a power of two", cap);
		} else if (cli_opt(argc, argv, &i, "--obs-dim", &v)) {
			obs_dim = cli_int("--obs-dim", v, 1, 1 << 16);
		} else if (cli_opt(argc, argv, &i, "--batch", &v)) {
			batch = cli_int("--batch", v, 1, 1 << 20);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_unknown("bench ring", argv[i]);
		}
	}
	if ((uint64_t)obs_dim * 4 * (uint64_t)cap > (2ull << 30))
		cli_die("bench ring: capacity x obs-dim x 4 is over 2 GiB; lower one of them");

	/* Publish cost. */
	for (uint32_t np = 1; np <= MAX_PUB; np++) {
		for (unsigned b = 0; b < sizeof(bulks) / sizeof(bulks[0]); b++) {
			for (int w = 0; w < 2; w++) {
				sr_ring_opts o = {.obs_dim = (uint32_t)obs_dim, .act_size = 4,
						  .capacity = (uint64_t)cap};
				double ns[MAXREP], mt[MAXREP], cn[MAXREP], med_ns, med_mt, med_cn;
				sr_ring *r;
				int err = sr_ring_create(&o, &r);

				if (err)
					cli_die("bench ring: %s", sr_last_error());
				/* warm-up */
				publish_run(r, np, bulks[b], w, seconds / 4, &mt[0], &cn[0]);
				for (int k = 0; k < repeat; k++)
					ns[k] = publish_run(r, np, bulks[b], w, seconds, &mt[k],
							    &cn[k]);
				med_ns = median(ns, (int)repeat);
				med_mt = median(mt, (int)repeat);
				med_cn = median(cn, (int)repeat);
				if (json)
					printf("{\"bench\":\"ring\",\"what\":\"publish\",\"producers\":%u,"
					       "\"bulk\":%u,\"writes_columns\":%s,\"obs_dim\":%lld,"
					       "\"capacity\":%lld,\"ns_per_transition\":%.2f,"
					       "\"ns_per_transition_min\":%.2f,\"mtransitions_per_s\":%.2f,"
					       "\"cpu_ns_per_transition\":%.2f,\"repeat\":%lld,",
					       np, bulks[b], w ? "true" : "false", obs_dim, cap, med_ns,
					       ns[0], med_mt, med_cn, repeat);
				else
					printf("publish  producers=%u bulk=%-3u %-17s ns/transition=%7.2f "
					       "(min %.2f, CPU %.2f)  total %.1f M/s\n",
					       np, bulks[b], w ? "reserve+write+pub" : "reserve+publish",
					       med_ns, ns[0], med_cn, med_mt);
				if (json) {
					bench_json_machine(stdout);
					printf(",\"build\":\"%s\"}\n", sr_build_info());
				}
				sr_ring_destroy(r);
			}
		}
	}

	/* Drain. */
	long long dims[2] = {obs_dim, obs_dim == 64 ? 4 : 64};
	for (int di = 0; di < 2; di++) {
		sr_ring_opts o = {.obs_dim = (uint32_t)dims[di], .act_size = 4,
				  .capacity = (uint64_t)cap};
		double g[MAXREP], m[MAXREP], cg[MAXREP], cm[MAXREP], mg, mm, mcg, mcm;
		struct dst d;
		sr_ring *r;

		if ((uint64_t)dims[di] * 4 * (uint64_t)cap > (2ull << 30))
			continue;
		if (sr_ring_create(&o, &r))
			cli_die("bench ring: %s", sr_last_error());
		d.obs = malloc((size_t)cap * (size_t)dims[di] * 4);
		d.action = malloc((size_t)cap * 4);
		d.reward = malloc((size_t)cap * 4);
		d.term = malloc((size_t)cap);
		d.trunc = malloc((size_t)cap);
		d.flags = malloc((size_t)cap);
		d.env_id = malloc((size_t)cap * 4);
		if (!d.obs || !d.action || !d.reward || !d.term || !d.trunc || !d.flags || !d.env_id)
			cli_die("bench ring: out of memory");
		/* Touch the destination once (page faults are not the point). */
		memset(d.obs, 0, (size_t)cap * (size_t)dims[di] * 4);
		/* Drains are short (a few ms): more runs than --repeat. */
		int dr = repeat < 9 ? 9 : (int)repeat;

		drain_run(r, &d, (uint32_t)batch, 0, &g[0], &m[0], &cg[0], &cm[0]);
		for (int k = 0; k < dr; k++)
			drain_run(r, &d, (uint32_t)batch, k, &g[k], &m[k], &cg[k], &cm[k]);
		mg = median(g, dr);
		mm = median(m, dr);
		mcg = median(cg, dr);
		mcm = median(cm, dr);
		if (json) {
			printf("{\"bench\":\"ring\",\"what\":\"drain\",\"obs_dim\":%lld,"
			       "\"capacity\":%lld,\"batch\":%lld,\"bytes_per_slot\":%zu,"
			       "\"drain_gb_per_s\":%.2f,\"memcpy_gb_per_s\":%.2f,\"ratio\":%.3f,"
			       "\"cpu_drain_gb_per_s\":%.2f,\"cpu_memcpy_gb_per_s\":%.2f,"
			       "\"cpu_ratio\":%.3f,\"repeat\":%d,",
			       dims[di], cap, batch, slot_bytes(r), mg, mm, mg / mm, mcg, mcm,
			       mcg / mcm, dr);
			bench_json_machine(stdout);
			printf(",\"build\":\"%s\"}\n", sr_build_info());
		} else {
			printf("drain    obs_dim=%-4lld batch=%lld  %.2f GB/s  memcpy %.2f GB/s  "
			       "ratio %.2f | per CPU-s %.2f vs %.2f GB/s ratio %.2f  (%zu B/slot, "
			       "%lld slots)\n",
			       dims[di], batch, mg, mm, mg / mm, mcg, mcm, mcg / mcm, slot_bytes(r),
			       cap);
		}
		free(d.obs);
		free(d.action);
		free(d.reward);
		free(d.term);
		free(d.trunc);
		free(d.flags);
		free(d.env_id);
		sr_ring_destroy(r);
	}
	return 0;
}

/* ---------------------------------------------------------------------------
 * bench replay
 * ------------------------------------------------------------------------- */

/* Fill a ring with episodes of @E envs (round robin, length 100), so most
 * slots are transitions. */
static void fill_episodes(sr_ring *r, uint32_t E)
{
	struct cols c = cols_of(r);
	uint64_t q, first, cap = c.cap;

	for (uint64_t j = 0; j < cap; j++) {
		uint32_t env = (uint32_t)(j % E), t = (uint32_t)((j / E) % 100);
		uint64_t s;

		sr_ring_reserve(r, 1, 0, &q);
		s = q & c.mask;
		for (uint32_t k = 0; k < c.obs_dim; k++)
			c.obs[s * c.obs_dim + k] = (float)(q + k);
		memset(c.action + s * c.act_size, 0, c.act_size);
		c.reward[s] = 1.0f;
		c.terminated[s] = t == 99;
		c.truncated[s] = 0;
		c.flags[s] = t ? 0 : SR_SLOT_FIRST;
		c.env_id[s] = env;
		c.prev[s] = t ? q - E : SR_RING_NO_PREV;
		sr_ring_publish(r, q, 1);
		sr_ring_consume(r, sr_ring_peek(r, UINT32_MAX, &first));
	}
}

/* Bytes a sampled transition carries into the caller's buffers. */
static size_t row_bytes(const sr_ring *r)
{
	return (size_t)sr_ring_obs_dim(r) * 8 + sr_ring_act_size(r) + 4 + 4 + 1 + 1 + 4 + 8 + 4;
}

struct rbufs {
	float *obs, *nobs, *rew, *disc, *w, *prio;
	uint8_t *act, *term, *trunc;
	uint32_t *env;
	uint64_t *seq;
	sr_replay_batch b;
	uint8_t *copy_dst;
};

static void rbufs_alloc(struct rbufs *u, const sr_ring *r, uint32_t B)
{
	size_t d = sr_ring_obs_dim(r);

	u->obs = malloc(B * d * 4);
	u->nobs = malloc(B * d * 4);
	u->act = malloc((size_t)B * sr_ring_act_size(r));
	u->rew = malloc(B * 4);
	u->disc = malloc(B * 4);
	u->w = malloc(B * 4);
	u->prio = malloc(B * 4);
	u->term = malloc(B);
	u->trunc = malloc(B);
	u->env = malloc(B * 4);
	u->seq = malloc(B * 8);
	u->copy_dst = malloc(B * row_bytes(r));
	if (!u->obs || !u->nobs || !u->act || !u->rew || !u->disc || !u->w || !u->prio ||
	    !u->term || !u->trunc || !u->env || !u->seq || !u->copy_dst)
		cli_die("bench replay: out of memory");
	memset(u->copy_dst, 0, B * row_bytes(r));
	u->b = (sr_replay_batch){.obs = u->obs, .next_obs = u->nobs, .action = u->act,
				 .reward = u->rew, .discount = u->disc, .terminated = u->term,
				 .truncated = u->trunc, .env_id = u->env, .seq = u->seq,
				 .weight = u->w};
}

static void rbufs_free(struct rbufs *u)
{
	free(u->obs);
	free(u->nobs);
	free(u->act);
	free(u->rew);
	free(u->disc);
	free(u->w);
	free(u->prio);
	free(u->term);
	free(u->trunc);
	free(u->env);
	free(u->seq);
	free(u->copy_dst);
}

enum { M_UNIFORM, M_PRIO_SAMPLE, M_PRIO_SAMPLE_UPDATE, M_UPDATE };

/* Batches per second (wall, and per CPU second in *cpu_bps) for @mode. */
static double replay_run(sr_replay *rp, struct rbufs *u, uint32_t B, int mode, double seconds,
			 double *cpu_bps)
{
	uint64_t t0 = bench_now_ns(), c0 = cpu_ns(), end = t0 + (uint64_t)(seconds * 1e9);
	uint64_t batches = 0, now;
	sr_rng g;

	sr_rng_seed(&g, 5, 0);
	if (mode == M_UPDATE && sr_replay_sample(rp, B, &u->b) != (int)B)
		cli_die("bench replay: sampling failed: %s", sr_last_error());
	do {
		for (int k = 0; k < 16; k++) {
			if (mode != M_UPDATE) {
				int n = sr_replay_sample(rp, B, &u->b);

				if (n != (int)B)
					cli_die("bench replay: sampling failed: %s", sr_last_error());
			}
			if (mode == M_PRIO_SAMPLE_UPDATE || mode == M_UPDATE) {
				for (uint32_t j = 0; j < B; j++)
					u->prio[j] = (float)sr_rng_uniform(&g) * 4.0f;
				sr_replay_update(rp, u->seq, u->prio, B);
			}
			batches++;
		}
		now = bench_now_ns();
	} while (now < end);
	sink += u->seq[0];
	*cpu_bps = (double)batches / ((double)(cpu_ns() - c0) / 1e9);
	return (double)batches / ((double)(now - t0) / 1e9);
}

/* memcpy of one batch's bytes: @B rows of row_bytes from the ring's obs
 * column (a rotating window, so the source is not always cached), in
 * batches per second. */
static double memcpy_run(const sr_ring *r, struct rbufs *u, uint32_t B, double seconds,
			 double *cpu_bps)
{
	size_t bytes = B * row_bytes(r), span = (size_t)sr_ring_capacity(r) * sr_ring_obs_dim(r) * 4;
	uint64_t t0 = bench_now_ns(), c0 = cpu_ns(), end = t0 + (uint64_t)(seconds * 1e9);
	uint64_t batches = 0, now;
	size_t off = 0;
	sr_rng g;

	sr_rng_seed(&g, 9, 0);
	do {
		for (int k = 0; k < 16; k++) {
			if (bytes < span)
				off = (size_t)(sr_rng_next(&g) % (span - bytes)) & ~(size_t)63;
			memcpy(u->copy_dst, (const uint8_t *)sr_ring_obs_col(r) + off, bytes < span ? bytes : span);
			batches++;
		}
		now = bench_now_ns();
	} while (now < end);
	sink += u->copy_dst[bytes / 2];
	*cpu_bps = (double)batches / ((double)(cpu_ns() - c0) / 1e9);
	return (double)batches / ((double)(now - t0) / 1e9);
}

static void usage_replay(FILE *f)
{
	fprintf(f,
		"usage: stepring bench replay [--seconds S] [--repeat R] [--batch B]\n"
		"                             [--obs-dims LIST] [--capacity N] [--json]\n"
		"Uniform and prioritized sampling throughput (transitions/s), prioritized\n"
		"sample + priority update, updates alone, next to the memcpy time of the\n"
		"bytes one batch delivers (obs, next_obs, action, reward, discount, flags,\n"
		"env_id, seq, weight). Medians of R runs.\n"
		"  --seconds S      per measurement (default 0.3)\n"
		"  --repeat R       runs per figure (default 5)\n"
		"  --batch B        transitions per sample (default 256)\n"
		"  --obs-dims LIST  floats per obs (default 4,3072)\n"
		"  --capacity N     ring slots (default: 65536, capped to 256 MiB of obs)\n"
		"  --json           one JSON object per line\n");
}

int bench_replay(int argc, char **argv)
{
	long long repeat = 5, B = 256, cap_opt = 0, dims[8] = {4, 3072};
	int ndims = 2;
	double seconds = 0.3;
	bool json = false;
	const char *v;
	static const char *names[] = {"uniform", "prioritized", "prioritized+update", "update"};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage_replay(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			seconds = cli_double("--seconds", v, 0.001, 60);
		} else if (cli_opt(argc, argv, &i, "--repeat", &v)) {
			repeat = cli_int("--repeat", v, 1, MAXREP);
		} else if (cli_opt(argc, argv, &i, "--batch", &v)) {
			B = cli_int("--batch", v, 1, 65536);
		} else if (cli_opt(argc, argv, &i, "--obs-dims", &v)) {
			ndims = cli_int_list("--obs-dims", v, dims, 8, 1, 1 << 16);
		} else if (cli_opt(argc, argv, &i, "--capacity", &v)) {
			cap_opt = cli_int("--capacity", v, 1024, 1ll << 24);
			if (cap_opt & (cap_opt - 1))
				cli_die("--capacity: %lld is not a power of two", cap_opt);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_unknown("bench replay", argv[i]);
		}
	}
	for (int di = 0; di < ndims; di++) {
		uint64_t cap = cap_opt ? (uint64_t)cap_opt : 65536;
		sr_ring_opts o = {.obs_dim = (uint32_t)dims[di], .act_size = 4};
		double copy_bps[MAXREP], copy_cpu[MAXREP], med_copy, med_copy_cpu;
		struct rbufs u;
		sr_ring *r;

		while (!cap_opt && cap > 1024 && cap * (uint64_t)dims[di] * 4 > (256ull << 20))
			cap /= 2;
		if (cap <= (uint64_t)B)
			cli_die("bench replay: capacity %llu must exceed the batch %lld",
				(unsigned long long)cap, B);
		o.capacity = cap;
		if (sr_ring_create(&o, &r))
			cli_die("bench replay: %s", sr_last_error());
		fill_episodes(r, 64);
		rbufs_alloc(&u, r, (uint32_t)B);
		memcpy_run(r, &u, (uint32_t)B, seconds / 4, &copy_cpu[0]);
		for (int k = 0; k < repeat; k++)
			copy_bps[k] = memcpy_run(r, &u, (uint32_t)B, seconds, &copy_cpu[k]);
		med_copy = median(copy_bps, (int)repeat);
		med_copy_cpu = median(copy_cpu, (int)repeat);
		for (int mode = 0; mode < 4; mode++) {
			sr_replay_opts ro;
			sr_replay *rp;
			double bps[MAXREP], cbps[MAXREP], med, medc;

			sr_replay_opts_init(&ro);
			ro.kind = mode == M_UNIFORM ? SR_REPLAY_UNIFORM : SR_REPLAY_PRIORITIZED;
			if (sr_replay_create(r, &ro, &rp))
				cli_die("bench replay: %s", sr_last_error());
			sr_replay_sync(rp);
			replay_run(rp, &u, (uint32_t)B, mode, seconds / 4, &cbps[0]);
			for (int k = 0; k < repeat; k++)
				bps[k] = replay_run(rp, &u, (uint32_t)B, mode, seconds, &cbps[k]);
			med = median(bps, (int)repeat);
			medc = median(cbps, (int)repeat);
			/* Time ratio to the memcpy of the same bytes (per CPU
			 * second: the steadier figure on a shared machine). */
			double ratio = med_copy / med, ratio_cpu = med_copy_cpu / medc;
			if (json) {
				printf("{\"bench\":\"replay\",\"what\":\"%s\",\"obs_dim\":%lld,"
				       "\"capacity\":%llu,\"batch\":%lld,\"bytes_per_batch\":%zu,"
				       "\"transitions_per_s\":%.0f,\"us_per_batch\":%.3f,"
				       "\"memcpy_us_per_batch\":%.3f,\"time_vs_memcpy\":%.3f,"
				       "\"transitions_per_cpu_s\":%.0f,\"cpu_us_per_batch\":%.3f,"
				       "\"memcpy_cpu_us_per_batch\":%.3f,\"cpu_time_vs_memcpy\":%.3f,"
				       "\"repeat\":%lld,",
				       names[mode], dims[di], (unsigned long long)cap, B,
				       (size_t)B * row_bytes(r), med * (double)B, 1e6 / med,
				       1e6 / med_copy, ratio, medc * (double)B, 1e6 / medc,
				       1e6 / med_copy_cpu, ratio_cpu, repeat);
				bench_json_machine(stdout);
				printf(",\"build\":\"%s\"}\n", sr_build_info());
			} else {
				printf("replay   obs_dim=%-5lld %-19s %7.2f M/s %9.2f us/batch "
				       "memcpy %8.2f us x%-7.2f | per CPU-s: %7.2f M/s %9.2f us "
				       "memcpy %8.2f us x%.2f\n",
				       dims[di], names[mode], med * (double)B / 1e6, 1e6 / med,
				       1e6 / med_copy, ratio, medc * (double)B / 1e6, 1e6 / medc,
				       1e6 / med_copy_cpu, ratio_cpu);
			}
			sr_replay_destroy(rp);
		}
		rbufs_free(&u);
		sr_ring_destroy(r);
	}
	return 0;
}
