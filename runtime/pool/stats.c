/*
 * The pool's statistics: the queries of include/stepring/pool.h
 * (sr_pool_stats_get, sr_pool_worker_stats_get, sr_pool_faults_get), and
 * the statistics block in shared memory (include/stepring/stats.h),
 * published as "<ring_name>.stats" when the pool has a ring name. What
 * only the workers know (pids, restarts, faults, what they are) comes from
 * the worker kind's ops.
 *
 * Writers: the pool thread (aggregates, under the seqlock) and each worker
 * (its own sr_stats_worker, relaxed stores, see worker/thread.c). The seqlock:
 * seq is made odd (relaxed store + release fence), the fields are written,
 * then seq is made even with a release store; a reader loads seq with
 * acquire, copies, issues an acquire fence and re-reads seq.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pool_internal.h"

/* Version 2 took words version 1 reserved: the layout is that of 1. */
_Static_assert(offsetof(struct sr_stats_shm, workers) == 360 &&
		       sizeof(struct sr_stats_shm) == 8552,
	       "the statistics block's layout is ABI (stepring/stats.h)");

#define PROC_EVERY_NS 250000000ull /* CPU time and RSS: about every 0.25 s */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int sr__stats_shm_open(sr_pool *p, const char *ring_name)
{
	const char *base = ring_name[0] == '/' ? ring_name + 1 : ring_name;
	size_t len = sizeof(struct sr_stats_shm);
	struct sr__shm_seg seg;
	struct sr_stats_shm *s;
	char *name;
	int err;

	name = malloc(strlen(base) + 16);
	if (!name)
		return sr__errorf(-ENOMEM, "out of memory");
	sprintf(name, "/%s.stats", base);
	/* Allocated in full before it has a name, like the ring: a /dev/shm
	 * that fits the ring but not this block fails here, not with SIGBUS. */
	err = sr__shm_make("stats segment", name, len, &seg);
	if (err == -EEXIST && sr__shm_in_use_name(name) == 0) {
		/* A leftover of a dead pool of this name (nobody holds its
		 * lock, and this pool just made the ring of that name): the
		 * pool's segments go together, so replace it. */
		shm_unlink(name);
		err = sr__shm_make("stats segment", name, len, &seg);
	}
	if (err) {
		free(name);
		return err;
	}
	s = seg.base;
	memset(s, 0, len);
	s->version = SR_STATS_VERSION;
	s->state = SR_STATS_STATE_RUNNING;
	s->pid = getpid();
	snprintf(s->env_id, sizeof(s->env_id), "%s", p->cfg.spec.id);
	s->num_envs = p->cfg.num_envs;
	s->num_threads = p->cfg.num_threads;
	s->batch_size = p->cfg.batch_size;
	s->mode = p->cfg.async ? 1 : 0;
	s->start_ns = p->shm.start_ns;
	s->now_ns = p->shm.start_ns;
	s->ring_capacity = p->ring.cap;
	for (uint32_t i = 0; i < SR_STATS_MAX_WORKERS; i++)
		s->workers[i].cpu = UINT64_MAX;
	for (uint32_t i = 0; i < p->cfg.num_threads && i < SR_STATS_MAX_WORKERS; i++)
		p->workers.w[i].shm = &s->workers[i];
	/* Magic last, with release: a reader that sees it sees the rest. */
	__atomic_store_n(&s->magic, SR_STATS_MAGIC, __ATOMIC_RELEASE);
	err = sr__shm_link(&seg, "stats segment");
	if (err) {
		for (uint32_t i = 0; i < p->cfg.num_threads && i < SR_STATS_MAX_WORKERS; i++)
			p->workers.w[i].shm = NULL;
		sr__shm_abandon(&seg);
		free(name);
		return err;
	}
	p->shm.fd = seg.fd; /* holds the creator lock while the pool lives */
	p->shm.blk = s;
	p->shm.len = len;
	p->shm.name = name;
	return 0;
}

void sr__stats_shm_update(sr_pool *p)
{
	/* Every 64 batches: the block is for humans, not for the hot path. */
	if (p->col.lat_n % 64 != 1 && p->col.lat_n > 1)
		return;
	sr__stats_shm_update_now(p);
}

/* The resident set of this process, bytes (0 if unknown). */
static uint64_t rss_bytes(void)
{
	unsigned long long size, res;
	char buf[128];
	ssize_t n;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return 0;
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The latencies recorded since the block last counted them (lat_count
 * follows col.lat_n, modulo 2^32), added to lat_sum_ns. Updates come every
 * 64 batches, so all of them are still in the 256 recent ones; if more
 * were missed, those beyond the 256 count at their mean.
 */
static void fold_latencies(sr_pool *p, struct sr_stats_shm *s)
{
	const uint32_t cap = sizeof(p->col.lat_us) / sizeof(p->col.lat_us[0]);
	uint32_t fresh = p->col.lat_n - (uint32_t)s->lat_count;
	uint32_t m = fresh < cap ? fresh : cap;
	double sum = 0;

	for (uint32_t k = 0; k < m; k++)
		sum += p->col.lat_us[(p->col.lat_n - 1 - k) % cap];
	if (m)
		sum *= (double)fresh / (double)m;
	s->lat_count += fresh;
	s->lat_sum_ns += (uint64_t)(sum * 1e3 + 0.5);
}

void sr__stats_shm_update_now(sr_pool *p)
{
	struct sr_stats_shm *s = p->shm.blk;
	sr_pool_stats st;
	double lat[256];
	uint32_t n = p->col.lat_n < 256 ? p->col.lat_n : 256;
	uint64_t seq, now, rss = 0, cpu = 0;
	struct timespec ts;
	bool proc;

	if (!s)
		return;
	/* The process figures cost a system call or three: at most every
	 * PROC_EVERY_NS of the block's clock (the writer reads its own words). */
	now = sr__now_ns();
	proc = s->rss_bytes == 0 || now / PROC_EVERY_NS != s->now_ns / PROC_EVERY_NS;
	if (proc) {
		rss = rss_bytes();
		if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
			cpu = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	sr_pool_stats_get(p, &st);
	memcpy(lat, p->col.lat_us, n * sizeof(double));
	qsort(lat, n, sizeof(double), cmp_double);
	seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->now_ns = now;
	s->steps = st.steps;
	s->batches = p->stats.batches;
	s->episodes = st.episodes;
	s->mean_return = st.mean_return;
	s->mean_length = st.mean_length;
	s->p50_us = n ? lat[n / 2] : 0;
	s->p99_us = n ? lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] : 0;
	s->ring_head = sr_ring_head(p->ring.r);
	s->ring_cursor = sr_ring_cursor(p->ring.r);
	s->nonfinite_rows = st.nonfinite_rows;
	s->nonfinite_env = (uint64_t)(st.nonfinite_env + 1);
	s->ns_env_step = st.ns_env_step;
	s->ns_ring_publish = st.ns_ring_publish;
	s->ns_collect = st.ns_collect;
	s->ns_wait = st.ns_wait;
	s->ns_send = st.ns_send;
	fold_latencies(p, s);
	if (proc) {
		if (cpu)
			s->cpu_ns = cpu;
		if (rss)
			s->rss_bytes = rss;
	}
	if (p->workers.kind->stats_block)
		p->workers.kind->stats_block(p, s);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

void sr__stats_shm_set_rank(sr_pool *p, uint32_t rank, uint32_t size)
{
	struct sr_stats_shm *s = p->shm.blk;
	uint64_t seq;

	if (!s)
		return;
	/* Under the seqlock, like the other fields a reader snapshots. */
	seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->mpi_rank = rank;
	s->mpi_size = size;
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

void sr__stats_shm_close(sr_pool *p)
{
	if (!p->shm.blk)
		return;
	sr__stats_shm_update_now(p);
	__atomic_store_n(&p->shm.blk->state, SR_STATS_STATE_ENDED, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < p->cfg.num_threads && p->workers.w; i++)
		p->workers.w[i].shm = NULL;
	munmap(p->shm.blk, p->shm.len);
	shm_unlink(p->shm.name);
	close(p->shm.fd);
	p->shm.fd = -1;
	free(p->shm.name);
	p->shm.blk = NULL;
}

/* ---- the queries ---------------------------------------------------------- */

int sr_pool_worker_stats_get(const sr_pool *p, uint32_t worker, sr_pool_worker_stats *out)
{
	const struct sr__worker *w;

	if (!p || !out)
		return sr__errorf(-EINVAL, "sr_pool_worker_stats_get: NULL argument");
	if (worker >= p->cfg.num_threads)
		return sr__errorf(-EINVAL, "worker %u: the pool has %u", worker,
				  p->cfg.num_threads);
	w = &p->workers.w[worker];
	memset(out, 0, sizeof(*out));
	/* Relaxed: counters written by the worker alone (see worker/thread.c). */
	out->steps = atomic_load_explicit(&w->steps, memory_order_relaxed);
	out->ns_env_step = atomic_load_explicit(&w->ns_env, memory_order_relaxed);
	out->ns_ring_publish = atomic_load_explicit(&w->ns_ring, memory_order_relaxed);
	out->ns_idle = atomic_load_explicit(&w->ns_idle, memory_order_relaxed);
	out->first_env = w->first_env;
	out->num_envs = w->n_envs;
	out->rows = sr__worker_rows(p, worker);
	/* -ENOENT: not bound to one CPU (the calling thread unless bound). */
	out->cpu = (worker == 0 && p->workers.first_thread && !p->place.caller_bound) ||
				   w->cpu < 0 || !p->place.plan->w[worker].cpus[0]
			   ? -ENOENT
			   : w->cpu;
	if (p->workers.kind->worker_info)
		p->workers.kind->worker_info(p, worker, out);
	return 0;
}

int sr_pool_stats_get(const sr_pool *p, sr_pool_stats *out)
{
	uint32_t k;
	double r = 0, l = 0;

	if (!p || !out)
		return sr__errorf(-EINVAL, "sr_pool_stats_get: NULL argument");
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		struct sr__worker *w = &p->workers.w[i];
		out->steps += atomic_load_explicit(&w->steps, memory_order_relaxed);
		out->ns_env_step += atomic_load_explicit(&w->ns_env, memory_order_relaxed);
		out->ns_ring_publish += atomic_load_explicit(&w->ns_ring, memory_order_relaxed);
		if (i >= p->workers.first_thread)
			out->ns_wait += atomic_load_explicit(&w->ns_idle, memory_order_relaxed);
	}
	out->ns_collect = p->col.ns_collect;
	out->ns_wait += p->col.ns_wait;
	out->ns_send = p->col.ns_send;
	out->episodes = p->stats.episodes;
	k = p->stats.episodes < SR__EPWIN ? (uint32_t)p->stats.episodes : SR__EPWIN;
	for (uint32_t i = 0; i < k; i++) {
		r += p->stats.ret[i];
		l += p->stats.len[i];
	}
	out->mean_return = k ? r / k : 0.0;
	out->mean_length = k ? l / k : 0.0;
	out->nonfinite_rows = sr__nonfinite_rows(p);
	{
		uint64_t f = atomic_load_explicit(&p->fin.first, memory_order_relaxed);

		out->nonfinite_env = f ? (int64_t)(f & SR__NF_ENV_MASK) - 1 : -1;
	}
	out->check_finite = p->fin.on;
	return 0;
}

int sr_pool_faults_get(const sr_pool *p, sr_pool_faults *out)
{
	if (!p || !out)
		return sr__errorf(-EINVAL, "sr_pool_faults_get: NULL argument");
	memset(out, 0, sizeof(*out));
	if (p->workers.kind->faults)
		p->workers.kind->faults(p, out);
	return 0;
}
