/*
 * DESIGN: the pool's thread workers (the thread kind, sr__kind_thread).
 *
 * Worker w owns envs [first_env, first_env + n_envs) for the pool's life.
 * Worker 0 runs on the calling thread (inline); workers 1..T-1 are pthreads
 * bound by the placement plan, which allocate their own memory after
 * binding (first touch => their NUMA node) and seed their own envs.
 *
 * Commands (one path for sync steps, resets, reset masks and async batch
 * groups; see "Batch groups" in pool/collector.c): the pool thread reserves
 * batch_size contiguous ring slots, writes command k into
 * p->cmds.rec[k % ngroups] (group, step or reset, first sequence, actions,
 * reset mask, rebalancing's shifts), publishes cmds.sent = k + 1 and bumps
 * each worker thread's `go` word. A sync pool is a pool with one group
 * (every worker's whole slice), whose command the pool thread waits for
 * before it returns. Each worker runs the commands in order: its envs of
 * the group (shifted at the ends by rebalancing: see rebalance()) straight
 * into its rows of the slots, publishes them, stores grp_done = k + 1 and
 * bumps pool->wake.evt for the waiting pool thread. Worker 0 runs its
 * shares on the pool thread (inline) when the pool thread waits.
 *
 * Ragged async sends (envs that are not a whole group): the pool thread
 * pushes env indices into the owning worker's SPSC queue (actions in a
 * per-env mailbox) and bumps `go`. The worker pops everything, reserves
 * one slot range for it, steps runs of consecutive envs, publishes, and
 * bumps pool->wake.evt for recv.
 *
 * Sleeping: spin (sr__cpu_relax) for spin_iters rounds, then announce
 * `sleeping` and futex_wait on the word. The waker stores the word, then
 * reads `sleeping`, and only then makes the futex_wake system call. Both
 * sides use seq_cst for (store word, load sleeping) / (store sleeping,
 * load word), so at least one of them sees the other (Dekker): either the
 * waker sees sleeping = 1 and wakes, or the sleeper sees the new word and
 * does not sleep; futex_wait itself rechecks the word in the kernel.
 *
 * Hot path: no lock, no allocation, no system call except futex for
 * sleeping and waking a sleeper; clock reads are per slice (vDSO). The
 * env calls and the ring bookkeeping of a slice are book_pvt.h's, shared
 * with the C env worker of process pools.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "book_pvt.h"
#include "pool_internal.h"
#include "ring_internal.h"

/* ---------------------------------------------------------------------- */
/* Memory of a worker                                                      */
/* ---------------------------------------------------------------------- */

static inline unsigned char *state_of(struct sr__worker *w, uint32_t loc)
{
	return sr__book_state(&w->pool->cfg.book, &w->slice, loc);
}

static int worker_alloc(struct sr__worker *w)
{
	sr_pool *p = w->pool;
	size_t n = w->n_envs ? w->n_envs : 1, qcap = 1, ecap = 1;
	/* Scratch and the episode queue also serve the envs it steps for its
	 * neighbours (rebalancing: up to a quarter of each one's share). */
	size_t ns = n + (p->rb.on ? p->cfg.max_slice / 2 : 0);
	/* 8-byte columns first, then 4-byte, then bytes; each 64-aligned. */
	size_t o_states = 0;
	size_t o_prev = sr__align_up(o_states + n * p->cfg.spec.state_size, 64);
	size_t o_eret = sr__align_up(o_prev + n * sizeof(uint64_t), 64);
	size_t o_elen = sr__align_up(o_eret + n * sizeof(double), 64);
	size_t o_rew = sr__align_up(o_elen + n * sizeof(uint64_t), 64);
	size_t o_dseq = sr__align_up(o_rew + n * sizeof(double), 64);
	size_t o_el = sr__align_up(o_dseq + ns * sizeof(uint64_t), 64);
	size_t o_run = sr__align_up(o_el + n * sizeof(uint32_t), 64);
	size_t o_dloc = sr__align_up(o_run + 3 * n * sizeof(uint32_t), 64);
	size_t o_fix = sr__align_up(o_dloc + ns * sizeof(uint32_t), 64);
	size_t o_done = sr__align_up(o_fix + 2 * ns * sizeof(uint32_t), 64);
	size_t o_dterm = sr__align_up(o_done + n, 64);
	size_t o_dtrunc = sr__align_up(o_dterm + n, 64);
	size_t o_need = sr__align_up(o_dtrunc + n, 64);
	size_t o_mark = sr__align_up(o_need + ns, 64);
	size_t o_eps = sr__align_up(o_mark + n, 64), o_q, total;
	unsigned char *m;

	while (qcap < n)
		qcap <<= 1;
	while (ecap < ns)
		ecap <<= 1;
	o_q = sr__align_up(o_eps + ecap * 2 * sizeof(double), 64);
	total = sr__align_up(o_q + qcap * sizeof(uint32_t), 64);
	m = aligned_alloc(64, total);
	if (!m)
		return -ENOMEM;
	/* First touch from the thread that owns it (bound already). */
	memset(m, 0, total);
	w->mem = m;
	w->slice.states = m + o_states;
	w->slice.prev_seq = (uint64_t *)(m + o_prev);
	w->slice.ep_ret = (double *)(m + o_eret);
	w->slice.ep_len = (uint64_t *)(m + o_elen);
	w->slice.rew = (double *)(m + o_rew);
	w->slice.elapsed = (uint32_t *)(m + o_el);
	w->slice.done = m + o_done;
	w->slice.done_term = m + o_dterm;
	w->slice.done_trunc = m + o_dtrunc;
	w->bx.done_seq = (uint64_t *)(m + o_dseq);
	w->bx.done_loc = (uint32_t *)(m + o_dloc);
	w->bx.fix = (uint32_t *)(m + o_fix);
	w->bx.need = m + o_need;
	w->bx.nonfinite = &w->nonfinite;
	w->run_env = (uint32_t *)(m + o_run);
	w->mark = m + o_mark;
	w->bx.eps.e = (double *)(m + o_eps);
	w->bx.eps.mask = (uint32_t)ecap - 1;
	w->bx.eps.head = &w->eps_head;
	w->bx.eps.tail = &w->eps_tail;
	w->q = (uint32_t *)(m + o_q);
	w->q_mask = (uint32_t)qcap - 1;
	for (uint32_t i = 0; i < w->n_envs; i++)
		w->slice.prev_seq[i] = SR_RING_NO_PREV;
	/* Opaque envs (a physics world per instance): create each one here, on
	 * the owning thread, so that its heap is first touched on this node. */
	if (sr_env_is_opaque(&p->cfg.spec)) {
		int err = sr_env_create_instances(&p->cfg.spec, w->slice.states, w->n_envs);
		if (err) {
			free(m);
			w->mem = NULL;
			return err;
		}
	}
	if (w->n_envs)
		p->cfg.spec.seed(&p->cfg.spec, w->slice.states, w->n_envs, p->cfg.seed,
				 p->cfg.env_base + w->first_env);
	return 0;
}

/* Destroy a worker's opaque instances and free its memory. */
static void worker_free(sr_pool *p, struct sr__worker *w)
{
	if (w->mem)
		sr_env_destroy_instances(&p->cfg.spec, w->slice.states, w->n_envs);
	free(w->mem);
	w->mem = NULL;
}

/* ---------------------------------------------------------------------- */
/* Stepping                                                                */
/* ---------------------------------------------------------------------- */

/* Env calls for local envs [lo, lo + n) of @w into slots s .. s + n - 1:
 * sr__book_env_calls (book_pvt.h). */
static uint32_t env_calls(struct sr__worker *w, uint32_t lo, uint32_t n, uint64_t s,
			  const unsigned char *acts)
{
	sr_pool *p = w->pool;

	return sr__book_env_calls(&p->cfg.book, &p->ring, &w->slice, lo, n, s, acts);
}

/*
 * Ring bookkeeping of local envs [lo, lo + n) of @w after env_calls, into
 * slots from @seq: sr__book_rows (book_pvt.h). The envs are @w's (its
 * per-env arrays); the worker stepping them is @x (@w, or a neighbour
 * that rebalancing gave them to): its scratch, its episode queue, its
 * same-step list (from entry @nd; the new length is returned).
 */
SR_VECTOR_CLONES
static uint32_t bookkeep(struct sr__worker *w, struct sr__worker *x, uint32_t lo, uint32_t n,
			 uint64_t seq, const unsigned char *acts, uint32_t nd, uint32_t nf_obs)
{
	sr_pool *p = w->pool;

	return sr__book_rows(&p->cfg.book, &p->ring, &w->slice, w->first_env + lo, lo, n, seq,
			     acts, &x->bx, nd, nf_obs);
}

/* SAME_STEP: the extra FINAL slots of the @nd envs of @w on @x's list
 * (bookkeep): sr__book_same_step. */
static void same_step_fixup(struct sr__worker *w, struct sr__worker *x, uint32_t nd)
{
	sr_pool *p = w->pool;

	sr__book_same_step(&p->cfg.book, &p->ring, &w->slice, w->first_env, &x->bx, nd);
}

/*
 * Reset local envs [lo, lo + n) into slots from @seq (no wrap), as reset
 * command @c says (NULL: a plain reset of every env): with its mask
 * (indexed by the pool's env), envs whose mask byte is 0 are only observed
 * and their slot is SR_SLOT_PAD; with its reset_fn, the others are reset
 * within its bounds.
 */
static void reset_range(struct sr__worker *w, uint32_t lo, uint32_t n, uint64_t seq,
			const struct sr__grp_cmd *c, uint64_t *ns_env)
{
	sr_pool *p = w->pool;
	const sr_env_spec *sp = &p->cfg.spec;
	const uint8_t *mask = c ? c->mask : NULL;
	const sr__reset_fn fn = c ? c->reset_fn : NULL;
	uint64_t s = seq & (p->ring.cap - 1), t0 = sr__now_ns(), t1;
	uint32_t od = p->cfg.obs_dim, i = 0;

	while (i < n) {
		bool on = !mask || mask[w->first_env + lo + i];
		uint32_t j = i + 1;
		while (j < n && (!mask || mask[w->first_env + lo + j]) == on)
			j++;
		if (on && fn)
			fn(sp, state_of(w, lo + i), j - i, c->reset_b, p->ring.obs + (s + i) * od);
		else if (on)
			sp->reset(sp, state_of(w, lo + i), j - i, p->ring.obs + (s + i) * od);
		else
			for (uint32_t k = i; k < j; k++)
				sp->observe(sp, state_of(w, lo + k), p->ring.obs + (s + k) * od);
		i = j;
	}
	t1 = sr__now_ns();
	*ns_env += t1 - t0;
	sr__book_reset_rows(&p->cfg.book, &p->ring, &w->slice, w->first_env, lo, n, seq, mask,
			    &w->bx);
}

/* A range of envs a worker steps in a command: local envs [lo, lo + n) of
 * worker v (itself or a neighbour). */
struct piece {
	struct sr__worker *v;
	uint32_t lo, n;
};

/*
 * What worker @w steps of a command for group @g, whose shares are worker
 * v's local envs [g * grp_m, (g + 1) * grp_m) (a sync pool has one group:
 * the whole slice), rows in worker order, with the boundaries between
 * neighbours moved by @a (between w-1 and w) and @b (between w and w+1;
 * see sr_pool.shift): in row order, the last -a envs of w-1's share when
 * a < 0, its own share less what its neighbours step, the first b envs of
 * w+1's share when b > 0. Consecutive rows. Returns the count of pieces
 * (at most 3).
 */
static uint32_t pieces(struct sr__worker *w, int32_t a, int32_t b, uint32_t g, struct piece *pc)
{
	sr_pool *p = w->pool;
	uint32_t k = 0, lo = 0, hi = w->grp_m, base = g * w->grp_m;

	if (a < 0) {
		struct sr__worker *v = &p->workers.w[w->index - 1];
		uint32_t end = (g + 1) * v->grp_m;

		pc[k++] = (struct piece){v, end - (uint32_t)-a, (uint32_t)-a};
	} else {
		lo = (uint32_t)a;
	}
	if (b < 0)
		hi -= (uint32_t)-b;
	pc[k++] = (struct piece){w, base + lo, hi - lo};
	if (b > 0) {
		struct sr__worker *v = &p->workers.w[w->index + 1];

		pc[k++] = (struct piece){v, g * v->grp_m, (uint32_t)b};
	}
	return k;
}

/* The batch row of local env @loc (in group @g) of worker @v: the
 * worker's rows of the group start at grp_off. */
static inline uint32_t row_of(const struct sr__worker *v, uint32_t loc, uint32_t g)
{
	return v->grp_off + loc - g * v->grp_m;
}

/*
 * Step the pieces @pc[0 .. @np) (worker @w; a command whose row 0 is slot
 * @seq0 and whose actions are @acts, in row order): the env calls of every
 * piece, then each piece's bookkeeping in its owner's arrays (episodes
 * and same-step lists on @w's own queues). Env time since @t0 goes to
 * *@ns_env. Returns the envs stepped; the caller publishes their rows
 * (consecutive, from the first piece's).
 */
static uint32_t step_pieces(struct sr__worker *w, const struct piece *pc, uint32_t np,
			    uint32_t g, uint64_t seq0, const unsigned char *acts, uint64_t t0,
			    uint64_t *ns_env)
{
	sr_pool *p = w->pool;
	uint32_t n = 0, nf[3];

	for (uint32_t k = 0; k < np; k++) {
		uint32_t r = row_of(pc[k].v, pc[k].lo, g);

		nf[k] = env_calls(pc[k].v, pc[k].lo, pc[k].n, (seq0 + r) & (p->ring.cap - 1),
				  acts + (size_t)r * p->cfg.act_size);
	}
	*ns_env = sr__now_ns() - t0;
	for (uint32_t k = 0; k < np; k++) {
		uint32_t r = row_of(pc[k].v, pc[k].lo, g);

		same_step_fixup(pc[k].v, w,
				bookkeep(pc[k].v, w, pc[k].lo, pc[k].n, seq0 + r,
					 acts + (size_t)r * p->cfg.act_size, 0, nf[k]));
		n += pc[k].n;
	}
	return n;
}

/* The worker's counters into its slot of the stats block, if any. */
static void publish_shm(struct sr__worker *w)
{
	if (!w->shm)
		return;
	__atomic_store_n(&w->shm->steps, atomic_load_explicit(&w->steps, memory_order_relaxed),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&w->shm->ns_busy,
			 atomic_load_explicit(&w->ns_env, memory_order_relaxed) +
				 atomic_load_explicit(&w->ns_ring, memory_order_relaxed),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&w->shm->ns_idle, atomic_load_explicit(&w->ns_idle, memory_order_relaxed),
			 __ATOMIC_RELAXED);
}

/* E0: tell the pool thread, which waits for rows or commands (p->wake.evt);
 * seq_cst pairs with wake.sleeping (Dekker). */
static void notify_recv(sr_pool *p)
{
	atomic_fetch_add_explicit(&p->wake.evt, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&p->wake.sleeping, memory_order_seq_cst))
		sr__futex_wake(&p->wake.evt, 1, false);
}

/*
 * Command @k (a sync step or reset, or an async batch group: collector.c,
 * "Batch groups"): this worker's envs of the group, local [g * m, (g + 1)
 * * m), stepped (or reset, all or the masked ones) into the group's slots
 * from seq + grp_off as one slice, shifted at its ends by rebalancing
 * (pieces). @t0: the clock now, if the caller has just read it (0: read
 * it here); returns the clock at the end, so that back-to-back calls read
 * it once between them.
 */
static uint64_t run_group(struct sr__worker *w, uint64_t k, uint64_t t0)
{
	sr_pool *p = w->pool;
	const struct sr__grp_cmd *c = sr__cmd_rec(p, k);
	uint64_t t1, ns_env = 0, seq;
	uint32_t n;

	if (!t0)
		t0 = sr__now_ns();

	/* R3: the pool thread claimed the group's slots on the ring's head
	 * before publishing the command, and the acquire that read cmds.sent
	 * (or program order, inline) ordered it before us; this fence orders
	 * it before every column write of the slice, so a sampler that copies
	 * a byte we write sees the claim (the ring's seq words are written
	 * once, by the publish). On x86-64 it is a compiler barrier only. */
	atomic_thread_fence(memory_order_release);
	if (c->reset) {
		n = w->grp_m;
		seq = c->seq + w->grp_off;
		reset_range(w, c->g * n, n, seq, c, &ns_env);
	} else {
		/* The command's own shifts (written with it, GS0/GS1): the
		 * workers may run different commands at once. */
		struct piece pc[3];
		uint32_t np = pieces(w, w->index ? c->shift[w->index - 1] : 0, c->shift[w->index],
				     c->g, pc);

		seq = c->seq + row_of(pc[0].v, pc[0].lo, c->g);
		n = step_pieces(w, pc, np, c->g, c->seq, c->acts, t0, &ns_env);
	}
	/* R1: publish (release) pairs with the collector's acquire. */
	sr_ring_publish(p->ring.r, seq, n);
	t1 = sr__now_ns();
	/* Counters before grp_done: a sync call that returns has every
	 * worker's steps counted (stats, checkpoints). */
	sr__add_relaxed(&w->steps, n);
	sr__add_relaxed(&w->ns_env, ns_env);
	sr__add_relaxed(&w->ns_ring, (t1 - t0) - ns_env);
	publish_shm(w);
	w->grp_next = k + 1;
	/* GD0: release pairs with the acquire in grp_done (GD1): the
	 * rows (and same-step extras) are published, and the command's
	 * record is read for the last time. */
	atomic_store_explicit(&w->grp_done, k + 1, memory_order_release);
	if (w->index >= p->workers.first_thread) /* inline worker 0: the waiter is this thread */
		notify_recv(p);
	return t1;
}

/* A worker thread: run the group commands published so far; returns how
 * many. *@t: the clock when the first may start (0: not read), then when
 * the last one ended. */
static uint32_t drain_groups(struct sr__worker *w, uint64_t *t)
{
	sr_pool *p = w->pool;
	uint64_t sent;
	uint32_t n = 0;

	/* The record of the next command, if there is one, and its
	 * boundaries: fetched while cmds.sent's line comes, instead of after
	 * it (a hint only: they are read after the acquire below). */
	if (p->cmds.ngroups) {
		const struct sr__grp_cmd *c = sr__cmd_rec(p, w->grp_next);

		__builtin_prefetch(c);
		__builtin_prefetch(c->shift);
	}
	/* GS1: acquire pairs with the release in grp_publish (GS0): the
	 * commands' records, their actions and the slots' claim. */
	sent = atomic_load_explicit(&p->cmds.sent, memory_order_acquire);
	for (; w->grp_next < sent; n++)
		*t = run_group(w, w->grp_next, *t);
	return n;
}

/*
 * Async: pop up to @max of the envs queued for @w (oldest first; worker
 * threads: p->side.drain_max), reserve one slot range for them and
 * step it in env order: the popped envs are marked in w->mark (1 step,
 * 2 reset) and walked by index, so runs of consecutive envs become one
 * env call whatever order they were sent in. Pass 1 makes the env calls
 * (timed once), pass 2 the ring bookkeeping. Returns the envs handled.
 */
static uint32_t drain_async(struct sr__worker *w, uint32_t max)
{
	sr_pool *p = w->pool;
	uint32_t tail = atomic_load_explicit(&w->q_tail, memory_order_relaxed);
	/* A1: acquire pairs with the release in async_kick (A0): the
	 * queue entries and the env's action mailbox are visible. */
	uint32_t head = atomic_load_explicit(&w->q_head, memory_order_acquire);
	uint32_t k = head - tail < max ? head - tail : max;
	uint32_t nd = 0, nruns = 0, lo_min = UINT32_MAX, lo_max = 0, nf = 0;
	uint64_t seq0, mask = p->ring.cap - 1, t0, t1, ns_env = 0, q;
	uint8_t *mark = w->mark;

	if (!k)
		return 0;
	t0 = sr__now_ns();
	{
		/* Locals: the byte stores to mark[] may alias anything. */
		const uint32_t *qe = w->q, qm = w->q_mask, first = w->first_env;

		for (uint32_t j = 0; j < k; j++) {
			uint32_t e = qe[(tail + j) & qm];
			uint32_t lo = (e & ~SR__Q_RESET) - first;
			mark[lo] = (e & SR__Q_RESET) ? 2 : 1;
			lo_min = lo < lo_min ? lo : lo_min;
			lo_max = lo > lo_max ? lo : lo_max;
		}
	}
	/* Entries are copied out: the slots may be reused by the producer. */
	atomic_store_explicit(&w->q_tail, tail + k, memory_order_release);
	sr_ring_reserve(p->ring.r, k, 0, &seq0);

	/* Runs: (first local env, length, first seq), in w->run_env triples
	 * packed as lo, len and the seq offset. */
	q = seq0;
	for (uint32_t lo = lo_min, *runs = w->run_env;;) {
		uint8_t m;
		uint32_t len = 1;

		lo = sr__next_set(mark, lo, lo_max + 1); /* skip unmarked envs 8 at a time */
		if (lo > lo_max)
			break;
		m = mark[lo];
		while (lo + len <= lo_max && mark[lo + len] == m && ((q + len) & mask) != 0)
			len++;
		runs[3 * nruns] = lo;
		runs[3 * nruns + 1] = len | (m == 2 ? SR__Q_RESET : 0);
		runs[3 * nruns + 2] = (uint32_t)(q - seq0);
		nruns++;
		memset(mark + lo, 0, len);
		q += len;
		lo += len;
	}
	/* Pass 1: env calls. Their finite-check findings are or-ed over the
	 * runs: a run where some other run found one is looked at row by row
	 * too (rare; only the rows that fail are flagged). */
	t1 = sr__now_ns();
	for (uint32_t r = 0; r < nruns; r++) {
		uint32_t lo = w->run_env[3 * r], len = w->run_env[3 * r + 1];
		uint64_t qq = seq0 + w->run_env[3 * r + 2];
		if (!(len & SR__Q_RESET))
			nf |= env_calls(w, lo, len, qq & mask,
					p->side.async_act +
						(size_t)(w->first_env + lo) * p->cfg.act_size);
	}
	ns_env = sr__now_ns() - t1;
	/* Pass 2: bookkeeping (and resets, rare: async reset only). */
	for (uint32_t r = 0; r < nruns; r++) {
		uint32_t lo = w->run_env[3 * r], len = w->run_env[3 * r + 1];
		uint64_t qq = seq0 + w->run_env[3 * r + 2];
		if (len & SR__Q_RESET)
			reset_range(w, lo, len & ~SR__Q_RESET, qq, NULL, &ns_env);
		else
			nd = bookkeep(w, w, lo, len, qq,
				      p->side.async_act +
					      (size_t)(w->first_env + lo) * p->cfg.act_size,
				      nd, nf);
	}
	same_step_fixup(w, w, nd);
	/* R1: publish (release) pairs with the collector's acquire. */
	sr_ring_publish(p->ring.r, seq0, k);
	notify_recv(p);
	t1 = sr__now_ns();
	sr__add_relaxed(&w->steps, k);
	sr__add_relaxed(&w->ns_env, ns_env);
	sr__add_relaxed(&w->ns_ring, (t1 - t0) - ns_env);
	return k;
}

/* ---------------------------------------------------------------------- */
/* Threads                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * Inline worker 0 never waits in wait_go: its idle time is the wall clock
 * since its last account that it did not spend stepping (waiting for the
 * other workers, collecting, and the caller's own work between calls), so
 * `stepring top` does not show it always busy. Pool thread only.
 */
static void inline_account(struct sr__worker *w, uint64_t now)
{
	uint64_t busy = atomic_load_explicit(&w->ns_env, memory_order_relaxed) +
			atomic_load_explicit(&w->ns_ring, memory_order_relaxed);

	if (w->mark_ns && now - w->mark_ns > busy - w->mark_busy)
		sr__add_relaxed(&w->ns_idle, (now - w->mark_ns) - (busy - w->mark_busy));
	w->mark_ns = now;
	w->mark_busy = busy;
}

/* Wait until w->go differs from @seen; returns the new value. */
static uint32_t wait_go(struct sr__worker *w, uint32_t seen)
{
	uint32_t v;

	for (uint32_t i = 0; i < w->pool->cfg.spin_iters; i++) {
		/* G1: acquire pairs with the release part of kick's G0. */
		v = atomic_load_explicit(&w->go, memory_order_acquire);
		if (v != seen)
			return v;
		sr__cpu_relax();
	}
	for (;;) {
		atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
		v = atomic_load_explicit(&w->go, memory_order_seq_cst);
		if (v != seen)
			break;
		sr__futex_wait(&w->go, seen, 0, false);
	}
	atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
	return v;
}

static void *worker_main(void *arg)
{
	struct sr__worker *w = arg;
	sr_pool *p = w->pool;
	uint32_t seen = 0;
	uint64_t t0;

	if (sr__bind_self(&p->place.plan->w[w->index]) == 0 && w->shm)
		__atomic_store_n(&w->shm->cpu, w->cpu >= 0 ? (uint64_t)w->cpu : UINT64_MAX,
				 __ATOMIC_RELAXED);
	w->alloc_err = worker_alloc(w);
	/* S0: release pairs with the acquire in started (S1): the memory
	 * and alloc_err. */
	atomic_fetch_add_explicit(&p->workers.n_ready, 1, memory_order_release);
	notify_recv(p);
	if (w->alloc_err)
		return NULL;
	/* t0: when the worker went idle. Clock reads are chained: the end of
	 * a slice is the start of the idle time that follows it. */
	t0 = sr__now_ns();
	for (;;) {
		uint64_t t = 0;

		seen = wait_go(w, seen);
		t = sr__now_ns();
		sr__add_relaxed(&w->ns_idle, t - t0);
		/* Ordered by G1's acquire. */
		if (atomic_load_explicit(&p->workers.stop, memory_order_relaxed))
			break;
		/* Commands first: per-env entries are queued only after the
		 * pool left group mode, behind its groups. */
		for (;;) {
			uint32_t n = drain_groups(w, &t);
			uint32_t m = drain_async(w, p->side.drain_max);

			if (m)
				t = 0; /* drain_async reads the clock itself */
			if (!n && !m)
				break;
		}
		t0 = t ? t : sr__now_ns();
		publish_shm(w);
	}
	return NULL;
}

static void wait_recv(sr_pool *p, bool (*ready)(sr_pool *, uint64_t), uint64_t arg);

/* S1: the worker threads started so far have allocated their memory. */
static bool started(sr_pool *p, uint64_t n)
{
	return atomic_load_explicit(&p->workers.n_ready, memory_order_acquire) >= n;
}

/* G0: wake worker @w after the command / queue entries are written. */
static void kick(struct sr__worker *w)
{
	atomic_fetch_add_explicit(&w->go, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst))
		sr__futex_wake(&w->go, 1, false);
}

static int thread_start(sr_pool *p, const sr_pool_opts *o)
{
	uint32_t T = p->cfg.num_threads, ft = p->workers.first_thread;
	int err;

	(void)o;
	/* Worker 0 is the calling thread unless SR__KNOB_NO_INLINE: its
	 * memory is then first touched here. */
	if (ft == 1) {
		err = worker_alloc(&p->workers.w[0]);
		if (err)
			return sr__errorf(err, "cannot allocate the state of worker 0 (%u envs)",
					  p->workers.w[0].n_envs);
	}
	if (T == ft)
		return 0;
	for (uint32_t i = ft; i < T; i++) {
		struct sr__worker *w = &p->workers.w[i];
		err = -pthread_create(&w->thread, NULL, worker_main, w);
		if (err) {
			char what[64];

			/* The ones started: ready before they are stopped. */
			wait_recv(p, started, i - ft);
			snprintf(what, sizeof(what), "cannot start worker thread %u of %u", i, T);
			return sr__thread_errorf(err, what);
		}
		w->started = true;
	}
	wait_recv(p, started, T - ft);
	for (uint32_t i = ft; i < T; i++)
		if (p->workers.w[i].alloc_err)
			return sr__errorf(p->workers.w[i].alloc_err,
					  "worker %u cannot allocate or create the state of its %u envs",
					  i, p->workers.w[i].n_envs);
	return 0;
}

static void thread_stop(sr_pool *p)
{
	if (!p->workers.w)
		return;
	atomic_store_explicit(&p->workers.stop, 1, memory_order_relaxed);
	for (uint32_t i = 0; i < p->cfg.num_threads; i++)
		if (p->workers.w[i].started)
			kick(&p->workers.w[i]);
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		if (p->workers.w[i].started)
			pthread_join(p->workers.w[i].thread, NULL);
		p->workers.w[i].started = false;
	}
	for (uint32_t i = 0; i < p->cfg.num_threads; i++)
		worker_free(p, &p->workers.w[i]);
}

/* Rebalancing: look every SR__RB_EVERY step commands;
 * move a boundary half the way to its target, in steps of a grain (a power
 * of two up to SR__RB_GRAIN envs, at most half the limit), and at most
 * 1/SR__RB_MAX of the smaller share (slice, or envs of a group) either
 * way. */
#define SR__RB_EVERY 32
#define SR__RB_GRAIN 64
#define SR__RB_MAX 4

/*
 * Rebalancing (pool thread, at each step command it sends): give each
 * worker rows in proportion to its speed, measured as its
 * busy time (env calls and bookkeeping) per env step since the last look.
 * A worker whose CPU is slower (another process on it, a slower core, a
 * hypervisor's choice) then no longer makes every batch wait: the
 * boundaries between neighbours' rows move (p->rb.shift), within a NUMA
 * node. The envs stay where they are (states and bookkeeping in their
 * owner's memory, seeded and checkpointed by it); the neighbour steps them
 * in place, and since the boundary moves slowly they stay in its cache.
 *
 * The boundaries move within each group's rows (a sync pool: one group,
 * the slices). In async mode the trainer thread (inline worker 0) also
 * counts its send and collect time: the other workers run the queued
 * groups meanwhile, so that work is part of its share of a batch. (In sync
 * mode every worker waits while it runs.)
 */
static void rebalance(sr_pool *p)
{
	uint32_t T = p->cfg.num_threads;
	double *inv = p->rb.inv, sum = 0, acc = 0;
	uint32_t end = 0;
	bool ok = true;

	if (++p->rb.n < SR__RB_EVERY)
		return;
	p->rb.n = 0;
	for (uint32_t i = 0; i < T; i++) {
		const struct sr__worker *w = &p->workers.w[i];
		uint64_t st = atomic_load_explicit(&w->steps, memory_order_relaxed);
		uint64_t ns = atomic_load_explicit(&w->ns_env, memory_order_relaxed) +
			      atomic_load_explicit(&w->ns_ring, memory_order_relaxed);
		uint64_t dst, dns;

		if (p->cfg.async && i == 0 && p->workers.first_thread)
			ns += p->col.ns_send + p->col.ns_collect;
		dst = st - p->rb.mark[2 * i];
		dns = ns - p->rb.mark[2 * i + 1];

		p->rb.mark[2 * i] = st;
		p->rb.mark[2 * i + 1] = ns;
		/* A worker without steps (or counters set back by a restore):
		 * nothing to compare this time. */
		if (!dst || !dns || dst > st || dns > ns)
			ok = false;
		inv[i] = ok ? (double)dst / (double)dns : 0;
		sum += inv[i];
	}
	if (!ok)
		return;
	for (uint32_t i = 0; i + 1 < T; i++) {
		const struct sr__worker *a = &p->workers.w[i], *b = &p->workers.w[i + 1];
		const uint32_t sa = a->grp_m, sb = b->grp_m;
		uint32_t lim = (sa < sb ? sa : sb) / SR__RB_MAX;
		uint32_t g = SR__RB_GRAIN;
		double target, to;
		int32_t sh;

		/* Whole grains: with a boundary that was on a cache line (or a
		 * page) in every column, a shifted one is too (64 envs: a line
		 * of the byte columns), so two workers never write one line;
		 * unaligned boundaries cost 2-3% in runs where nothing needed
		 * to move. */
		while (g > 1 && 2 * g > lim)
			g /= 2;
		lim -= lim % g;

		end += sa;
		acc += inv[i];
		sh = atomic_load_explicit(&p->rb.shift[i], memory_order_relaxed);
		if (p->place.plan->w[i].numa != p->place.plan->w[i + 1].numa)
			continue;
		/* The boundary where rows would go by speed, as a shift from
		 * the slices' own boundary. */
		target = (double)p->cfg.batch_size * acc / sum - (double)end;
		if (target > lim)
			target = lim;
		if (target < -(double)lim)
			target = -(double)lim;
		/* Half the way, rounded to a grain: a target that wanders
		 * within a grain of the boundary does not move it. */
		to = (sh + (target - sh) / 2) / g;
		atomic_store_explicit(&p->rb.shift[i], (int32_t)(to < 0 ? to - 0.5 : to + 0.5) * (int32_t)g,
				      memory_order_relaxed);
	}
}

/* Async: queue env (| SR__Q_RESET) to its worker; async_kick publishes.
 * Pool thread only. */
static inline void async_enqueue(sr_pool *p, uint32_t e)
{
	struct sr__worker *w = &p->workers.w[p->place.env_worker[e & ~SR__Q_RESET]];

	/* Published by async_kick, once per chunk of a send and worker: a
	 * release store per entry would have the draining worker pop a few
	 * entries at a time, each with its own reservation and publish. */
	w->q[w->q_next++ & w->q_mask] = e;
}

static void async_kick(sr_pool *p)
{
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		struct sr__worker *w = &p->workers.w[i];

		if (w->q_next == atomic_load_explicit(&w->q_head, memory_order_relaxed))
			continue;
		/* A0: release pairs with A1 in drain_async: entries + mailbox visible. */
		atomic_store_explicit(&w->q_head, w->q_next, memory_order_release);
		if (i >= p->workers.first_thread)
			kick(w);
	}
}

/* Async: step up to @max of the envs queued for worker 0, on the calling
 * thread (group commands still in flight first); returns how many. */
static uint32_t async_inline(sr_pool *p, uint32_t max)
{
	struct sr__worker *w0 = &p->workers.w[0];
	uint64_t t = 0; /* the last group's end: the clock read once */
	uint32_t n = 0;

	if (!p->workers.first_thread)
		return 0;
	/* Group commands still in flight after the pool left group mode:
	 * worker 0's shares first (the per-env recv waits on their slots). */
	for (; w0->grp_next < p->cmds.issued; n += w0->grp_m)
		t = run_group(w0, w0->grp_next, t);
	if (!n)
		n = drain_async(w0, max); /* t stays 0: it reads the clock itself */
	inline_account(&p->workers.w[0], t ? t : sr__now_ns());
	publish_shm(&p->workers.w[0]);
	return n;
}

#define SR__SEND_CHUNK 128

/*
 * A ragged send: each env's action into its mailbox (p->side.async_act) and the
 * env into its owner's queue, published to the workers every
 * SR__SEND_CHUNK entries (A0), so that they start stepping while the rest
 * is queued.
 */
static int thread_send_envs(sr_pool *p, const void *actions, const uint32_t *ids, uint32_t n)
{
	const unsigned char *a = actions;
	unsigned char *mailbox = p->side.async_act;
	const size_t asz = p->cfg.act_size;

	for (uint32_t i0 = 0; i0 < n; i0 += SR__SEND_CHUNK) {
		uint32_t i1 = n - i0 > SR__SEND_CHUNK ? i0 + SR__SEND_CHUNK : n;

		if (!a) {
			for (uint32_t i = i0; i < i1; i++)
				async_enqueue(p, (ids ? ids[i] : i) | SR__Q_RESET);
		} else if (asz == 4) {
			/* Discrete actions (and 1-d boxes): a 4-byte move, not a
			 * call to memcpy per row. */
			for (uint32_t i = i0; i < i1; i++) {
				uint32_t e = ids ? ids[i] : i, v;

				memcpy(&v, a + (size_t)i * 4, 4);
				memcpy(mailbox + (size_t)e * 4, &v, 4);
				async_enqueue(p, e);
			}
		} else {
			for (uint32_t i = i0; i < i1; i++) {
				uint32_t e = ids ? ids[i] : i;

				memcpy(mailbox + (size_t)e * asz, a + (size_t)i * asz, asz);
				async_enqueue(p, e);
			}
		}
		async_kick(p);
	}
	return 0;
}

/* wait_recv's predicate: slot @pos is published (R1 acquire). */
static bool slot_ready(sr_pool *p, uint64_t pos)
{
	return sr__slot_begin(p->ring.r, pos);
}

static int thread_advance(sr_pool *p, uint64_t pos, uint32_t max, uint64_t *tw)
{
	uint32_t n = async_inline(p, max);
	uint64_t t1;

	if (n)
		return (int)(n > INT32_MAX ? INT32_MAX : n);
	if (slot_ready(p, pos))
		return 0;
	/* Nothing left to step here: wait for slot pos (E0/E1). */
	t1 = sr__now_ns();
	wait_recv(p, slot_ready, pos);
	*tw += sr__now_ns() - t1;
	return 0;
}

/* The kind's shares: rebalancing's boundaries for the next step command. */
static void thread_shares(sr_pool *p, int32_t *shift)
{
	if (p->rb.on)
		rebalance(p);
	/* Stored only when they change: the workers read this line after
	 * every command, and a line left clean is not a cache miss for them. */
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		int32_t v = atomic_load_explicit(&p->rb.shift[i], memory_order_relaxed);

		if (shift[i] != v)
			shift[i] = v;
	}
}

/* Publish command p->cmds.issued (written by the caller) and kick the
 * worker threads. */
static int grp_publish(sr_pool *p)
{
	p->cmds.issued++;
	/* GS0: release pairs with GS1 in drain_groups: the command record,
	 * its actions and the slots' claim before the count. */
	atomic_store_explicit(&p->cmds.sent, p->cmds.issued, memory_order_release);
	for (uint32_t i = p->workers.first_thread; i < p->cfg.num_threads; i++)
		kick(&p->workers.w[i]);
	return 0;
}

/* Run worker 0's share of commands up to @k (inline); returns the clock at
 * its end; 0: no inline worker 0. */
static uint64_t grp_inline(sr_pool *p, uint64_t k)
{
	struct sr__worker *w0 = &p->workers.w[0];
	uint64_t t = 0;

	if (!p->workers.first_thread)
		return 0;
	while (w0->grp_next <= k)
		t = run_group(w0, w0->grp_next, t);
	if (!t)
		t = sr__now_ns();
	inline_account(w0, t);
	publish_shm(w0);
	return t;
}

static bool grp_done(sr_pool *p, uint64_t k);

/* Run worker 0's share of commands up to @k, then wait until every worker
 * thread has finished command @k; returns the clock at the end (the wait
 * goes to p->col.ns_wait). */
static uint64_t grp_wait(sr_pool *p, uint64_t k)
{
	uint64_t t = grp_inline(p, k), t0;

	if (p->cfg.num_threads > p->workers.first_thread) {
		t0 = t ? t : sr__now_ns();
		wait_recv(p, grp_done, k);
		t = sr__now_ns();
		p->col.ns_wait += t - t0;
	}
	return t ? t : sr__now_ns();
}

/* GD1: every worker thread has finished command @k (its rows are
 * published: acquire pairs with GD0). */
static bool grp_done(sr_pool *p, uint64_t k)
{
	for (uint32_t i = p->workers.first_thread; i < p->cfg.num_threads; i++)
		if (atomic_load_explicit(&p->workers.w[i].grp_done, memory_order_acquire) <= k)
			return false;
	return true;
}

/* recv: spin, then sleep on wake.evt (E1), until @ready(p, @arg); the
 * workers' notify after each publish (E0) wakes it. */
static void wait_recv(sr_pool *p, bool (*ready)(sr_pool *, uint64_t), uint64_t arg)
{
	uint32_t spins = 0;

	while (!ready(p, arg)) {
		uint32_t v;

		if (++spins < p->cfg.spin_iters) {
			sr__cpu_relax();
			continue;
		}
		/* E1: announce the sleep, then re-check: pairs with
		 * notify_recv (E0), seq_cst on both sides (Dekker), and
		 * futex_wait re-checks wake.evt in the kernel. */
		atomic_store_explicit(&p->wake.sleeping, 1, memory_order_seq_cst);
		v = atomic_load_explicit(&p->wake.evt, memory_order_seq_cst);
		if (!ready(p, arg))
			sr__futex_wait(&p->wake.evt, v, 0, false);
		atomic_store_explicit(&p->wake.sleeping, 0, memory_order_relaxed);
	}
}

static void add_episode(void *stats, double ret, double len)
{
	sr__ep_stats_add(stats, ret, len);
}

/* P1: merge the finished episodes the workers queued. */
static void thread_episodes(sr_pool *p)
{
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		struct sr__worker *w = &p->workers.w[i];

		sr__eps_take(w->bx.eps.e, w->bx.eps.mask, &w->eps_head, &w->eps_tail, add_episode,
			     &p->stats);
	}
}

static int thread_wait(sr_pool *p, uint64_t k, uint64_t *t)
{
	*t = grp_wait(p, k);
	return 0;
}

const struct sr__worker_kind sr__kind_thread = {
	.name = "thread",
	.local_state = true,
	.start = thread_start,
	.send = grp_publish,
	.shares = thread_shares,
	.wait = thread_wait,
	.send_envs = thread_send_envs,
	.advance = thread_advance,
	.episodes = thread_episodes,
	.stop = thread_stop,
};
