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
 *     reserved (SR_RESERVE_CONTIG, so one view); async mode, batch_size
 *     result rows (not SR_SLOT_PAD filler and not the SR_SLOT_FINAL
 *     extras of same-step autoreset), each worker's share of them, oldest
 *     first (see "Async recv" below);
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
#include "ring_internal.h"

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
		.act_kind = p->spec.act_kind,
		.act_dim = p->spec.act_kind == SR_SPACE_DISCRETE ? 1 : p->spec.act_dim,
	};
	int err;

	p->gather = calloc(cfg.max_rows, sizeof(*p->gather));
	if (p->keep_final && p->async)
		p->final_stage = calloc((size_t)cfg.max_rows * p->obs_dim, sizeof(float));
	if (p->async) {
		p->ready = calloc(p->num_threads, sizeof(*p->ready));
		p->ready_seq = calloc(p->num_envs, sizeof(*p->ready_seq));
		p->taken = calloc(p->ring_cap, 1);
	}
	if (!p->gather || (p->keep_final && p->async && !p->final_stage) ||
	    (p->async && (!p->ready || !p->ready_seq || !p->taken)))
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
	free(p->gather);
	free(p->final_stage);
	free(p->ready);
	free(p->ready_seq);
	free(p->taken);
	p->ready = NULL;
	p->ready_seq = NULL;
	p->taken = NULL;
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
 * Async recv: which rows.
 *
 * Every published result row goes into its worker's FIFO (scan_new, in
 * ring order, so each FIFO is oldest first).
 *
 * When worker 0 runs on the calling thread (the default) and there are
 * other workers, that thread steps its own envs only as needed (see
 * sr__collect_async), and the batch is: worker 0's rows that were ready
 * before this recv (the oldest), then the worker threads' rows by their
 * shares (batch_size * n_envs / their envs, remainder rotating), then
 * the rows worker 0 stepped in this recv for what is still missing.
 *
 * Otherwise, once batch_size rows are ready, the batch is the batch_size
 * oldest of them if that gives every worker at least half its share
 * (usually one range: a zero-copy view). Otherwise it takes from each
 * worker its share of the batch (batch_size * n_envs / num_envs, the
 * remainder rotating), oldest first; what a worker has not published yet
 * comes from the oldest rows of the others (no waiting for a late worker
 * while rows are ready).
 *
 * Either way every env keeps progressing (each FIFO is served every batch
 * in which it has rows), and the next send gives each worker about its
 * share of the work: both threads step in parallel, instead of the batch
 * composition, which repeats from one round to the next when the caller
 * sends back the last batch, locking the work onto one thread; a late
 * worker gets less work the next round, so it catches up.
 *
 * Rows taken out of ring order are marked in p->taken; the cursor
 * advances over taken rows and over PAD / FINAL slots, and stops at the
 * first row still waiting in a FIFO. Each env has at most one such row
 * and each worker's oldest is taken every batch, so the cursor lags the
 * head by about two batches, well inside the 4 * num_envs ring. Should
 * it lag by more than 2 * num_envs (possible only with batch_size <
 * threads, where a worker's quota can be 0), the batch is the oldest
 * rows whoever owns them; a batch that starts too far behind the head
 * to stay valid until the next call as a view is copied.
 */

/* Move newly published rows from scan_pos on into the workers' FIFOs
 * (sr__slot_begin: acquire, pairs with the workers' publish R1; the
 * slots from the cursor on cannot be claimed again, so no head check). */
static void scan_new(sr_pool *p)
{
	/* Locals: the stores below (uint32 counts) could alias fields read
	 * through @p, which the compiler would reload every row. */
	const uint64_t mask = p->ring_cap - 1;
	const uint8_t *flags = p->c_flags;
	const uint32_t *env = p->c_env, *env_worker = p->env_worker;
	const struct sr__worker *workers = p->workers;
	struct sr__ready *ready = p->ready;
	uint64_t *ready_seq = p->ready_seq, pos = p->scan_pos;
	const sr_ring *ring = p->ring;

	while (sr__slot_begin(ring, pos)) {
		uint64_t s = pos & mask;
		if (!(flags[s] & (SR_SLOT_PAD | SR_SLOT_FINAL))) {
			uint32_t w = env_worker[env[s]];
			const struct sr__worker *wk = &workers[w];
			struct sr__ready *r = &ready[w];
			uint32_t at = r->head + r->n;
			if (at >= wk->n_envs)
				at -= wk->n_envs;
			ready_seq[wk->first_env + at] = pos;
			r->n++;
		}
		pos++;
	}
	p->scan_pos = pos;
}

static inline uint64_t ready_at(const sr_pool *p, uint32_t w, uint32_t k)
{
	const struct sr__worker *wk = &p->workers[w];
	uint32_t at = p->ready[w].head + k;

	if (at >= wk->n_envs)
		at -= wk->n_envs;
	return p->ready_seq[wk->first_env + at];
}

/*
 * The plain oldest-first batch (the @need oldest ready rows, whoever owns
 * them: often one contiguous range, a zero-copy view) when it gives every
 * worker at least half its share (the .take set by the caller); else
 * false and the shares decide. Sets .take to the prefix counts if so.
 */
static bool prefix_take(sr_pool *p, uint32_t need)
{
	uint32_t T = p->num_threads, n = 0;

	for (uint32_t w = 0; w < T; w++)
		p->ready[w].got = 0;
	while (n < need) {
		uint32_t best = T;
		uint64_t bs = UINT64_MAX;
		for (uint32_t w = 0; w < T; w++) {
			const struct sr__ready *r = &p->ready[w];
			if (r->got < r->n && ready_at(p, w, r->got) < bs) {
				bs = ready_at(p, w, r->got);
				best = w;
			}
		}
		/* Count the run of its rows before the others' next head. */
		{
			struct sr__ready *r = &p->ready[best];
			uint64_t lim = UINT64_MAX;
			for (uint32_t w = 0; w < T; w++) {
				const struct sr__ready *o = &p->ready[w];
				if (w != best && o->got < o->n && ready_at(p, w, o->got) < lim)
					lim = ready_at(p, w, o->got);
			}
			do {
				r->got++;
				n++;
			} while (n < need && r->got < r->n && ready_at(p, best, r->got) < lim);
		}
	}
	for (uint32_t w = 0; w < T; w++)
		if (p->ready[w].got < p->ready[w].take / 2)
			return false;
	for (uint32_t w = 0; w < T; w++)
		p->ready[w].take = p->ready[w].got;
	return true;
}

/* Decide how many rows each worker gives; false while fewer than @need
 * rows are ready. */
static bool plan_take(sr_pool *p, uint32_t need)
{
	uint32_t T = p->num_threads, sum = 0, rem, ready = 0;

	for (uint32_t w = 0; w < T; w++) {
		uint64_t q = (uint64_t)need * p->workers[w].n_envs / p->num_envs;
		p->ready[w].take = (uint32_t)q;
		sum += (uint32_t)q;
		ready += p->ready[w].n;
	}
	if (ready < need)
		return false;
	if (p->first_thread && T > 1 && p->scan_pos - sr_ring_cursor(p->ring) <= p->num_envs) {
		/* The calling thread is worker 0. Its rows that were ready
		 * before this recv go first (they are the oldest), then the
		 * worker threads' rows by their shares, and the rows it stepped
		 * in this recv fill in what is missing (see sr__collect_async). */
		uint32_t old0 = p->old0 < p->ready[0].n ? p->old0 : p->ready[0].n;
		uint32_t others = ready - p->ready[0].n, rest;

		if (old0 > need)
			old0 = need;
		p->ready[0].take = old0 + (others >= need - old0 ? 0 : need - old0 - others);
		rest = need - p->ready[0].take;
		sum = p->ready[0].take;
		for (uint32_t w = 1; w < T; w++) {
			uint64_t q = (uint64_t)rest * p->workers[w].n_envs /
				     (p->num_envs - p->workers[0].n_envs);
			struct sr__ready *r = &p->ready[w];

			r->take = (uint32_t)q < r->n ? (uint32_t)q : r->n;
			sum += r->take;
		}
		for (uint32_t k = 0; k < T - 1 && sum < need; k++) {
			struct sr__ready *r = &p->ready[1 + (p->quota_rr + k) % (T - 1)];

			if (r->take < r->n) {
				r->take++;
				sum++;
			}
		}
		goto oldest;
	}
	if (p->scan_pos - sr_ring_cursor(p->ring) > 2ull * p->num_envs) {
		/* The oldest waiting row holds the cursor far back (a worker
		 * without a share for a while: batch < threads): take the
		 * oldest rows, whoever owns them, so the producers keep room. */
		for (uint32_t w = 0; w < T; w++)
			p->ready[w].take = 0;
		sum = 0;
		goto oldest;
	}
	if (prefix_take(p, need))
		return true;
	rem = need - sum;
	for (uint32_t k = 0; k < T && rem; k++) {
		uint32_t w = (p->quota_rr + k) % T;
		p->ready[w].take++;
		rem--;
	}
	sum = 0;
	for (uint32_t w = 0; w < T; w++) {
		struct sr__ready *r = &p->ready[w];
		if (r->take > r->n)
			r->take = r->n; /* not published yet: the others fill in */
		sum += r->take;
	}
	/* The shortfall: the oldest rows left, whichever worker. */
oldest:
	while (sum < need) {
		uint32_t best = T;
		uint64_t bs = UINT64_MAX;
		for (uint32_t w = 0; w < T; w++) {
			struct sr__ready *r = &p->ready[w];
			uint32_t at;
			if (r->take >= r->n)
				continue;
			at = r->head + r->take;
			if (at >= p->workers[w].n_envs)
				at -= p->workers[w].n_envs;
			if (p->ready_seq[p->workers[w].first_env + at] < bs) {
				bs = p->ready_seq[p->workers[w].first_env + at];
				best = w;
			}
		}
		p->ready[best].take++; /* ready >= need: always found */
		sum++;
	}
	return true;
}

/* Pop the planned rows into p->gather in ring order (a merge of the
 * FIFO heads), mark them taken. Returns true when they are one range. */
static bool take_rows(sr_pool *p, uint32_t need)
{
	uint32_t T = p->num_threads, n = 0;
	uint64_t mask = p->ring_cap - 1;

	for (uint32_t w = 0; w < T; w++)
		p->ready[w].got = 0;
	while (n < need) {
		uint32_t best = T;
		uint64_t bs = UINT64_MAX;
		for (uint32_t w = 0; w < T; w++) {
			const struct sr__ready *r = &p->ready[w];
			const struct sr__worker *wk = &p->workers[w];
			uint32_t at;
			if (r->got >= r->take)
				continue;
			at = r->head + r->got;
			if (at >= wk->n_envs)
				at -= wk->n_envs;
			if (p->ready_seq[wk->first_env + at] < bs) {
				bs = p->ready_seq[wk->first_env + at];
				best = w;
			}
		}
		/* Copy the run of this worker's rows that come before the next
		 * head of the others: usually its whole share at once. */
		{
			struct sr__ready *r = &p->ready[best];
			const struct sr__worker *wk = &p->workers[best];
			uint64_t lim = UINT64_MAX;
			for (uint32_t w = 0; w < T; w++) {
				const struct sr__ready *o = &p->ready[w];
				uint32_t at;
				if (w == best || o->got >= o->take)
					continue;
				at = o->head + o->got;
				if (at >= p->workers[w].n_envs)
					at -= p->workers[w].n_envs;
				if (p->ready_seq[p->workers[w].first_env + at] < lim)
					lim = p->ready_seq[p->workers[w].first_env + at];
			}
			/* Locals: the byte stores to taken[] may alias anything. */
			const uint64_t *rs = p->ready_seq + wk->first_env;
			uint64_t *gather = p->gather;
			uint8_t *taken = p->taken;
			uint32_t got = r->got, take = r->take, head = r->head, ne = wk->n_envs;

			do {
				uint32_t at = head + got;
				uint64_t q;
				if (at >= ne)
					at -= ne;
				q = rs[at];
				if (q > lim)
					break;
				gather[n++] = q;
				taken[q & mask] = 1;
				got++;
			} while (got < take);
			r->got = got;
		}
	}
	for (uint32_t w = 0; w < T; w++) {
		struct sr__ready *r = &p->ready[w];
		r->head += r->take;
		if (r->head >= p->workers[w].n_envs)
			r->head -= p->workers[w].n_envs;
		r->n -= r->take;
	}
	p->quota_rr = (p->quota_rr + 1) % T;
	return p->gather[need - 1] - p->gather[0] == need - 1;
}

/* Advance the cursor over taken rows and PAD / FINAL slots. */
static void consume_taken(sr_pool *p)
{
	uint64_t mask = p->ring_cap - 1, c = sr_ring_cursor(p->ring), c0 = c, end = p->scan_pos;
	uint8_t *taken = p->taken;
	const uint8_t *flags = p->c_flags;

	while (c < end) {
		uint64_t s = c & mask;
		if (taken[s])
			taken[s] = 0;
		else if (!(flags[s] & (SR_SLOT_PAD | SR_SLOT_FINAL)))
			break;
		c++;
	}
	/* R2: slots before c are read (the view stays valid: see DESIGN). */
	while (c > c0) {
		uint32_t k = c - c0 > UINT32_MAX ? UINT32_MAX : (uint32_t)(c - c0);
		sr_ring_consume(p->ring, k);
		c0 += k;
	}
}

int sr__collect_async(sr_pool *p, const sr_batch **out)
{
	uint32_t need = p->batch_size;
	uint64_t t0 = sr__now_ns(), tw = 0, t1, tin = 0, ti;
	/* A quarter of a worker's share: fine enough not to overshoot the
	 * batch with an expensive env, coarse enough to amortise a drain. */
	uint32_t chunk = need / (4 * p->num_threads) ? need / (4 * p->num_threads) : 1;
	/* Half of worker 0's share of the batch, every call. */
	uint32_t min0 = (uint32_t)((uint64_t)need * p->workers[0].n_envs / p->num_envs / 2);
	struct sr__batch_req req;
	bool contig;
	int err;

	if (!min0)
		min0 = 1;

	if (p->n_inflight < need)
		return sr__errorf(-EINVAL, "recv needs %u envs in flight (batch_size) but only %u "
				  "were sent and not yet received", need, p->n_inflight);
	if (p->scan_pos < sr_ring_cursor(p->ring))
		p->scan_pos = sr_ring_cursor(p->ring);
	/*
	 * Worker 0 lives on this thread, which also does all the collecting:
	 * it steps its own queue only while the batch cannot be formed yet,
	 * a chunk at a time, taking in the other workers' rows between
	 * chunks; the rest of its queue stays in flight (not ready) for a
	 * later recv. So this thread's stepping fills the time it would
	 * otherwise spend waiting for the other workers, and the split of
	 * the work between it and them follows from what each can do: with
	 * cheap envs the other workers get most of it, as this thread's
	 * per-row send and collect work is then of the order of a step.
	 * Every call steps at least half of worker 0's share of a batch
	 * (min0), ready or not, so its envs progress at least half as fast
	 * as the others however fast those are. Its time counts as worker
	 * 0's env and ring time, not collect.
	 */
	scan_new(p);
	p->old0 = p->ready[0].n;
	ti = sr__now_ns();
	if (sr__async_inline(p, min0))
		scan_new(p);
	tin += sr__now_ns() - ti;
	while (!plan_take(p, need)) {
		uint32_t spins = 0, n0;

		ti = sr__now_ns();
		n0 = sr__async_inline(p, chunk);
		tin += sr__now_ns() - ti;
		if (n0) {
			scan_new(p);
			continue;
		}
		/* Nothing left here: wait for the workers' publishes (E0/E1). */
		t1 = sr__now_ns();
		while (spins < p->spin_iters) {
			uint32_t v = atomic_load_explicit(&p->pub_evt, memory_order_acquire);
			scan_new(p);
			if (plan_take(p, need))
				goto ready;
			while (atomic_load_explicit(&p->pub_evt, memory_order_acquire) == v &&
			       ++spins < p->spin_iters)
				cpu_relax();
		}
		for (;;) {
			uint32_t v;
			atomic_store_explicit(&p->main_sleeping, 1, memory_order_seq_cst);
			v = atomic_load_explicit(&p->pub_evt, memory_order_seq_cst);
			scan_new(p);
			if (plan_take(p, need))
				break;
			sr__futex_wait(&p->pub_evt, v);
		}
ready:
		atomic_store_explicit(&p->main_sleeping, 0, memory_order_relaxed);
		tw += sr__now_ns() - t1;
		break;
	}
	p->ns_wait += tw;
	contig = take_rows(p, need);

	req.first_seq = p->gather[0];
	/* A view must stay valid until the next call, while the workers
	 * write up to 2 * num_envs more slots: from far behind the head it
	 * is copied instead. */
	if (sr_ring_head(p->ring) - p->gather[0] >= p->ring_cap - 2ull * p->num_envs)
		contig = false;
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
	{
		/* Locals: the byte stores to inflight[] may alias anything. */
		const uint32_t *c_env = p->c_env;
		const uint64_t *gather = p->gather, mask = p->ring_cap - 1;
		uint8_t *inflight = p->inflight;
		uint32_t *last_ids = p->last_ids;

		for (uint32_t i = 0; i < need; i++) {
			uint32_t env = c_env[gather[i] & mask];
			inflight[env] = 0;
			last_ids[i] = env;
		}
	}
	p->last_n = need;
	p->sent_since_recv = false;
	p->old0 = 0;
	p->n_inflight -= need;
	consume_taken(p);
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
			if (p->taken[s]) {
				p->taken[s] = 0; /* returned already */
				continue;
			}
			if (!(p->c_flags[s] & (SR_SLOT_PAD | SR_SLOT_FINAL)) && p->inflight[p->c_env[s]]) {
				p->inflight[p->c_env[s]] = 0;
				p->n_inflight--;
			}
		}
		sr_ring_consume(p->ring, n);
	}
	sr__collect_episodes(p);
	p->last_n = 0;
	p->scan_pos = sr_ring_cursor(p->ring);
	for (uint32_t w = 0; w < p->num_threads; w++)
		memset(&p->ready[w], 0, sizeof(p->ready[w]));
}
