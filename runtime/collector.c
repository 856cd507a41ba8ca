/*
 * DESIGN: the collector.
 *
 * The collector is the ring's single consumer. It runs on the thread that
 * drives the pool (the trainer's thread, which also runs the policy and
 * talks to the device), inside sr_pool_step / sr_pool_recv: a separate
 * collector thread would cost a core and a wake-up per batch, and the
 * batch has to reach that thread anyway. It:
 *
 *  1. takes the longest contiguous published range from the ring cursor
 *     (sr_ring_peek, acquire: pairs with the workers' sr_ring_publish);
 *  2. picks the batch rows in it: sync mode, the num_envs slots the pool
 *     reserved (SR_RESERVE_CONTIG, so one view); async mode, the first
 *     batch_size slots that are env results (not SR_SLOT_PAD filler and
 *     not the SR_SLOT_FINAL extras of same-step autoreset);
 *  3. merges the episodes the workers finished into the statistics;
 *  4. hands the rows to the device (device.h), which gives a view of the
 *     ring or a copy;
 *  5. consumes the range (sr_ring_consume): producers may reuse those
 *     slots, but only after a full lap, and the pool keeps the ring at
 *     least 4 * num_envs slots, so the batch stays valid until the next
 *     call (at most 2 * num_envs slots are written meanwhile).
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

int sr__collector_open(sr_pool *p)
{
	struct sr__device_cfg cfg = {
		.kind = p->dev_kind,
		.index = p->dev_index,
		.ring = p->ring,
		.obs_dim = p->obs_dim,
		.act_size = (uint32_t)p->act_size,
		.max_rows = p->async ? p->batch_size : p->num_envs,
		.final_obs = p->keep_final,
	};
	int err;

	p->acc = calloc(p->num_envs, sizeof(*p->acc));
	p->gather = calloc(cfg.max_rows, sizeof(*p->gather));
	if (p->keep_final && p->async)
		p->final_stage = calloc((size_t)cfg.max_rows * p->obs_dim, sizeof(float));
	if (!p->acc || !p->gather || (p->keep_final && p->async && !p->final_stage))
		return sr__errorf(-ENOMEM, "cannot allocate the collector's buffers");
	err = sr__device_open(&cfg, &p->dev);
	if (err)
		return err;
	return 0;
}

void sr__collector_close(sr_pool *p)
{
	sr__device_close(p->dev);
	p->dev = NULL;
	free(p->acc);
	free(p->gather);
	free(p->final_stage);
	p->acc = NULL;
	p->gather = NULL;
	p->final_stage = NULL;
}

/* P1: merge the finished episodes the workers queued. */
void sr__collect_episodes(sr_pool *p)
{
	for (uint32_t i = 0; i < p->num_threads; i++) {
		struct sr__worker *w = &p->workers[i];
		uint32_t t = atomic_load_explicit(&w->eps_tail, memory_order_relaxed);
		uint32_t h = atomic_load_explicit(&w->eps_head, memory_order_acquire);

		if (t == h)
			continue; /* no store: keep the line clean in the worker's cache */
		for (; t != h; t++) {
			uint32_t k = (uint32_t)(p->episodes % SR__EPWIN);
			p->ep_ret[k] = w->eps[2 * (t & w->eps_mask)];
			p->ep_len[k] = w->eps[2 * (t & w->eps_mask) + 1];
			p->episodes++;
		}
		/* Entries read before the worker may reuse them. */
		atomic_store_explicit(&w->eps_tail, h, memory_order_release);
	}
}


int sr__collect_sync(sr_pool *p, uint64_t seq, const sr_batch **out)
{
	struct sr__batch_req req = {.first_seq = seq, .n = p->num_envs,
				    .final_obs = p->keep_final ? p->final_env : NULL};
	uint64_t t0 = sr__now_ns();
	int err;

	/* Every worker has published (wait_done's acquire on done_gen, which
	 * follows their releases), so the whole reservation (pads, batch,
	 * same-step extras) is ready: consume it without scanning it with
	 * peek. */
	{
		uint64_t n = sr_ring_head(p->ring) - sr_ring_cursor(p->ring);
		while (n) {
			uint32_t k = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
			sr_ring_consume(p->ring, k);
			n -= k;
		}
	}
	sr__collect_episodes(p);
	err = p->dev->ops->batch_from_ring(p->dev, &req, &p->batch);
	if (err)
		return err;
	p->batches++;
	p->ns_collect += sr__now_ns() - t0;
	*out = &p->batch;
	return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * Scan forward from *@pos over published slots (sr_ring_slot_valid: an
 * acquire load of the slot's publish sequence, R1) and collect batch rows
 * into p->gather until @need are found. Incremental: a recv that has to
 * wait resumes where it stopped. Returns true when the batch is complete.
 */
static bool scan_rows(sr_pool *p, uint32_t need, uint64_t *pos, uint32_t *rows, bool *contig)
{
	uint64_t mask = p->ring_cap - 1;

	while (*rows < need && sr_ring_slot_valid(p->ring, *pos)) {
		uint64_t q = (*pos)++;
		if (p->c_flags[q & mask] & (SR_SLOT_PAD | SR_SLOT_FINAL)) {
			if (*rows)
				*contig = false;
			continue;
		}
		p->gather[(*rows)++] = q;
	}
	return *rows == need;
}

int sr__collect_async(sr_pool *p, const sr_batch **out)
{
	uint32_t need = p->batch_size, rows = 0;
	uint64_t first = sr_ring_cursor(p->ring), pos = first;
	uint64_t t0 = sr__now_ns(), tw = 0, t1, tin = 0, ti;
	uint32_t n0, chunk = need / 8 > 32 ? need / 8 : 32;
	struct sr__batch_req req;
	bool contig = true;
	int err;

	if (p->n_inflight < need)
		return sr__errorf(-EINVAL, "recv needs %u envs in flight (batch_size) but only %u "
				  "were sent and not yet received", need, p->n_inflight);
	/* Worker 0 lives on this thread. It steps its envs only while the
	 * ready rows do not make a batch, in chunks, then looks again: if it
	 * stepped all of them first, its envs would be ready first, come back
	 * in the next batch more often, and the work would drift onto this
	 * thread, which also does the serial send and collect work. Its time
	 * counts as worker 0's env and ring time, not collect. */
	while (!scan_rows(p, need, &pos, &rows, &contig)) {
		ti = sr__now_ns();
		n0 = sr__async_inline(p, chunk);
		tin += sr__now_ns() - ti;
		if (!n0)
			break;
	}
	if (rows < need) {
		uint32_t spins = 0;

		/* Wait for the workers' publishes (E0/E1). */
		t1 = sr__now_ns();
		while (spins < p->spin_iters) {
			uint32_t v = atomic_load_explicit(&p->pub_evt, memory_order_acquire);
			if (scan_rows(p, need, &pos, &rows, &contig))
				break;
			while (atomic_load_explicit(&p->pub_evt, memory_order_acquire) == v &&
			       ++spins < p->spin_iters)
				cpu_relax();
		}
		while (rows < need) {
			uint32_t v;
			atomic_store_explicit(&p->main_sleeping, 1, memory_order_seq_cst);
			v = atomic_load_explicit(&p->pub_evt, memory_order_seq_cst);
			if (scan_rows(p, need, &pos, &rows, &contig))
				break;
			sr__futex_wait(&p->pub_evt, v);
		}
		atomic_store_explicit(&p->main_sleeping, 0, memory_order_relaxed);
		tw = sr__now_ns() - t1;
	}
	p->ns_wait += tw;

	req.first_seq = p->gather[0];
	req.seqs = contig ? NULL : p->gather;
	req.n = need;
	req.final_obs = NULL;
	if (p->keep_final) {
		uint64_t mask = p->ring_cap - 1;
		for (uint32_t i = 0; i < need; i++) {
			uint64_t s = p->gather[i] & mask;
			if (p->c_term[s] | p->c_trunc[s])
				memcpy(p->final_stage + (size_t)i * p->obs_dim,
				       p->final_env + (size_t)p->c_env[s] * p->obs_dim,
				       p->obs_dim * sizeof(float));
		}
		req.final_obs = p->final_stage;
	}
	err = p->dev->ops->batch_from_ring(p->dev, &req, &p->batch);
	if (err)
		return err;
	sr__collect_episodes(p);
	for (uint32_t i = 0; i < need; i++) {
		uint32_t env = p->c_env[p->gather[i] & (p->ring_cap - 1)];
		p->inflight[env] = 0;
		p->last_ids[i] = env;
	}
	p->last_n = need;
	p->n_inflight -= need;
	/* R2: slots before pos are read (the view stays valid: see DESIGN). */
	sr_ring_consume(p->ring, (uint32_t)(pos - first));
	p->batches++;
	p->ns_collect += sr__now_ns() - t0 - tw - tin;
	*out = &p->batch;
	return 0;
}

void sr__collect_drain(sr_pool *p)
{
	uint64_t first, mask = p->ring_cap - 1;

	while (p->n_inflight || sr_ring_cursor(p->ring) != sr_ring_head(p->ring)) {
		uint32_t n;

		sr__async_inline(p, UINT32_MAX);
		n = sr_ring_peek(p->ring, (uint32_t)p->ring_cap, &first);
		if (!n) {
			cpu_relax();
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint64_t s = (first + i) & mask;
			if (!(p->c_flags[s] & (SR_SLOT_PAD | SR_SLOT_FINAL)) && p->inflight[p->c_env[s]]) {
				p->inflight[p->c_env[s]] = 0;
				p->n_inflight--;
			}
		}
		sr_ring_consume(p->ring, n);
	}
	sr__collect_episodes(p);
	p->last_n = 0;
}
