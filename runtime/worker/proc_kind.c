/*
 * The pool's process workers (SR_POOL_F_PROCS): the process kind of
 * worker (sr__kind_proc, see struct sr__worker_kind), the glue between
 * the pool (slices, sync commands, statistics) and proc_trainer.c (the
 * command block, spawning, faults and restarts).
 *
 * The pool keeps its worker records (slices, counters) but starts no
 * threads. Every command of the pool (a sync step, reset or reset mask,
 * an async batch group's step or reset) is a record of the command block,
 * posted at send and waited for at wait: each worker's part is its envs
 * of the command's group (sync: its slice), as for thread workers, so the
 * rows and the batches are the same. A ragged async send is a record too,
 * with each worker's envs as a list, rows worker by worker, in env order;
 * recv takes the oldest published rows in ring order as for threads, and
 * its advance waits for the oldest command in flight (an inline worker 0
 * runs its parts of the commands on the pool thread then). The workers'
 * counters are copied into the records after each wait, so that
 * sr_pool_stats_get, sr_pool_worker_stats_get and the stats block read
 * them as for threads. Episodes come from the workers' queues in the
 * command block.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "proc_internal.h"
#include "ring_internal.h"

static int procs_start(sr_pool *p, const sr_pool_opts *o)
{
	struct sr__procs_opts po;
	uint32_t *slice;
	cpu_set_t *cpus;
	int err = 0;

	slice = calloc(p->cfg.num_threads, sizeof(*slice));
	cpus = calloc(p->cfg.num_threads, sizeof(*cpus));
	if (!slice || !cpus) {
		free(slice);
		free(cpus);
		return sr__errorf(-ENOMEM, "out of memory");
	}
	/* Each worker process is bound where the placement plan puts its
	 * worker (bind core: one CPU; numa: its node's; none: not bound), as
	 * a thread pool binds its threads; worker 0 inline is the calling
	 * thread, bound only with SR_POOL_F_BIND_CALLER (create_placement). */
	for (uint32_t w = 0; w < p->cfg.num_threads; w++) {
		slice[w] = p->workers.w[w].n_envs;
		if (!err && !(w == 0 && (o->flags & SR_POOL_F_PROC_INLINE)))
			err = sr__plan_cpuset(&p->place.plan->w[w], &cpus[w]);
	}
	if (err) {
		free(slice);
		free(cpus);
		return sr__errorf(err, "process workers: cpus of the placement plan: %s",
				  sr_strerror(err));
	}
	memset(&po, 0, sizeof(po));
	po.num_envs = p->cfg.num_envs;
	po.nworkers = p->cfg.num_threads;
	po.slice_n = slice;
	po.cpus = cpus;
	po.spec = &p->cfg.spec;
	po.ring = p->ring.r;
	po.seed = p->cfg.seed;
	po.env_base = p->cfg.env_base;
	po.autoreset = p->cfg.autoreset;
	po.keep_final = p->cfg.keep_final;
	po.inline0 = (o->flags & SR_POOL_F_PROC_INLINE) != 0;
	po.inline_fn = o->proc_inline;
	po.inline_arg = o->proc_inline_arg;
	po.stats_name = p->shm.name;
	po.check_finite = p->fin.on;
	/* A waiter (a worker between commands, the trainer waiting for the
	 * workers) spins while its recent waits were short (sr__spin,
	 * proc_internal.h), up to 200 us, when every party has a CPU of its own: a
	 * futex wake-up costs more than a slice of cheap envs. When the worker
	 * processes and the trainer are more than the allowed CPUs, a spinning
	 * party takes the CPU another one needs to make progress: then nobody
	 * spins, a waiter sleeps at once. STEPRING_PROC_SPIN_US sets the most
	 * microseconds a waiter spins (0: never). */
	{
		uint32_t parties = p->cfg.num_threads - (po.inline0 ? 1u : 0u) + 1u;
		const char *s = getenv("STEPRING_PROC_SPIN_US");

		po.spin_ns = parties <= p->place.plan->npus ? 200000u : 0u;
		if (s && *s) {
			unsigned long us = strtoul(s, NULL, 10);

			po.spin_ns = us > 4000000ul ? 4000000000u : (uint32_t)us * 1000u;
		}
	}
	po.step_timeout_ms = o->step_timeout_ms;
	po.max_restarts = o->max_restarts ? o->max_restarts : 100;
	po.argv = o->worker_argv;
	po.payload = o->worker_payload;
	po.payload_len = o->worker_payload ? o->worker_payload_len : 0;
	po.out_size = o->worker_out_size;
	po.ragged = p->cfg.async;
	err = sr__procs_create(&po, &p->procs);
	free(slice);
	free(cpus);
	if (err)
		return err;
	if (p->cfg.keep_final) {
		free(p->side.final_env);
		p->side.final_env = sr__procs_final(p->procs);
	}
	return 0;
}

/* After a command: the workers' counters into the pool's worker records
 * (and the stats block), and the finite check of the rows of the workers
 * that do not check their own (a Python worker; a C env worker flags its
 * rows as it writes them, as thread workers do). The rows are published,
 * not consumed yet, so flagged before the batch is formed (a replay
 * sampler in another process may copy one in between without its flag). */
static void mirror(sr_pool *p, uint64_t seq, bool scan)
{
	for (uint32_t w = 0; w < p->cfg.num_threads; w++) {
		struct sr__worker *x = &p->workers.w[w];
		struct sr__procs_wstats ws;

		if (sr__procs_worker(p->procs, w, &ws))
			continue;
		if (scan && !ws.checks_finite)
			sr__nonfinite_scan(p, seq + x->first_env, x->n_envs);
		atomic_store_explicit(&x->nonfinite, ws.nonfinite, memory_order_relaxed);
		atomic_store_explicit(&x->steps, ws.steps, memory_order_relaxed);
		atomic_store_explicit(&x->ns_env, ws.ns_env, memory_order_relaxed);
		atomic_store_explicit(&x->ns_ring, ws.ns_ring, memory_order_relaxed);
		atomic_store_explicit(&x->ns_idle, ws.ns_idle, memory_order_relaxed);
		if (x->shm) {
			x->shm->steps = ws.steps;
			x->shm->ns_busy = ws.ns_env + ws.ns_ring;
			x->shm->ns_idle = ws.ns_idle;
		}
	}
}

/*
 * After a wait for a command whose rows start at @seq: the workers'
 * counters into the pool's records (and, @scan, the finite check of the
 * rows of a worker that does not check its own: a sync command's, see
 * mirror), the first non-finite row a worker found, and a fault into the
 * stats block at once (`stepring top`). Async pools have C env workers
 * only, which check their own rows before they publish them.
 */
static void after_wait(sr_pool *p, uint64_t seq, bool scan, uint64_t faults_before)
{
	struct sr__procs_stats after;

	mirror(p, seq, scan);
	if (!atomic_load_explicit(&p->fin.first, memory_order_relaxed)) {
		uint64_t f = sr__procs_nonfinite_first(p->procs);

		if (f)
			sr__nonfinite_offer(&p->fin.first, (f & SR__NF_ENV_MASK) - 1,
					    f & ~SR__NF_ENV_MASK);
	}
	sr__procs_info(p->procs, &after);
	if (after.faults != faults_before)
		sr__stats_shm_update_now(p);
}

static uint64_t faults_now(const sr_pool *p)
{
	struct sr__procs_stats st;

	sr__procs_info(p->procs, &st);
	return st.faults;
}

/* Slots [seq, seq + n) the pool reserved for a command that could not be
 * posted (the workers failed for good): pads, so the ring stays usable. */
static void pad_slots(sr_pool *p, uint64_t seq, uint32_t n)
{
	sr__ring_pad_rows(p->ring.r, seq, n);
	sr_ring_publish(p->ring.r, seq, n); /* R1 */
}

/*
 * Command p->cmds.issued (a sync step, reset or reset mask; an async batch
 * group's step or reset): worker w's part is its envs of the group, local
 * [g * grp_m, (g + 1) * grp_m) (sync: one group, the slice), rows from
 * grp_off, as a thread worker's (without rebalancing); their actions go
 * to the mailbox, by env.
 */
static int procs_send(sr_pool *p)
{
	const struct sr__grp_cmd *c = sr__cmd_rec(p, p->cmds.issued);
	const size_t asz = p->cfg.act_size;
	unsigned char *mb = sr__procs_actions(p->procs);
	struct sr__proc_crec *r;
	int err;

	r = sr__procs_begin(p->procs, c->reset ? SR_PROC_CMD_RESET : SR_PROC_CMD_STEP, c->seq,
			    p->cfg.batch_size, &err);
	if (!r) {
		pad_slots(p, c->seq, p->cfg.batch_size);
		return err;
	}
	for (uint32_t w = 0; w < p->cfg.num_threads; w++) {
		const struct sr__worker *x = &p->workers.w[w];
		const uint32_t lo = x->first_env + c->g * x->grp_m;

		r->part[w] = (struct sr__proc_part){lo, x->grp_m, x->grp_off, 0};
		if (!c->reset)
			memcpy(mb + (size_t)lo * asz, c->acts + (size_t)x->grp_off * asz,
			       (size_t)x->grp_m * asz);
	}
	if (c->reset && c->mask) {
		memcpy(sr__procs_mask(p->procs), c->mask, p->cfg.num_envs);
		r->has_mask = 1;
	}
	sr__cmd_rec(p, p->cmds.issued)->kgen = sr__procs_post(p->procs);
	p->cmds.issued++;
	return 0;
}

static int procs_wait(sr_pool *p, uint64_t k, uint64_t *t)
{
	const struct sr__grp_cmd *c = sr__cmd_rec(p, k);
	uint64_t f = faults_now(p);
	int err = sr__procs_wait(p->procs, c->kgen);

	after_wait(p, c->seq, !err && p->fin.on && !p->cfg.async, f);
	*t = sr__now_ns();
	return err;
}

/*
 * A ragged send: one command whose parts are lists, each worker's envs
 * in env order (a byte map of the sent envs, walked over each worker's
 * span of them), its rows consecutive, worker after worker, in n slots
 * the pool thread reserves here (contiguous). @ids NULL: envs 0 .. n-1,
 * as ranges.
 */
static int procs_send_envs(sr_pool *p, const void *actions, const uint32_t *ids, uint32_t n)
{
	const uint32_t T = p->cfg.num_threads;
	const size_t asz = p->cfg.act_size;
	unsigned char *mb = sr__procs_actions(p->procs);
	uint8_t *mark = sr__procs_env_mark(p->procs);
	struct sr__proc_crec *r;
	uint32_t *list = NULL, off = 0, row = 0;
	uint64_t seq;
	int err;

	/* Room: as for the thread kind's drains, at most one result and one
	 * extra per env between the cursor and the head (collector.c): this
	 * reservation, the only consumer's, does not wait. */
	err = sr_ring_reserve(p->ring.r, n, SR_RESERVE_CONTIG, &seq);
	if (err)
		return err;
	r = sr__procs_begin(p->procs, actions ? SR_PROC_CMD_STEP : SR_PROC_CMD_RESET, seq, n, &err);
	if (!r) {
		pad_slots(p, seq, n);
		return err;
	}
	if (ids) {
		list = sr__procs_ids(p->procs, n, &off);
		for (uint32_t i = 0; i < n; i++) {
			mark[ids[i]] = 1;
			if (actions)
				memcpy(mb + (size_t)ids[i] * asz, (const char *)actions + (size_t)i * asz,
				       asz);
		}
	} else if (actions) {
		memcpy(mb, actions, (size_t)n * asz);
	}
	for (uint32_t w = 0; w < T; w++) {
		const struct sr__worker *x = &p->workers.w[w];
		uint32_t k = 0;

		if (!ids) {
			uint32_t lo = x->first_env < n ? x->first_env : n;
			uint32_t hi = x->first_env + x->n_envs < n ? x->first_env + x->n_envs : n;

			r->part[w] = (struct sr__proc_part){lo, hi - lo, lo, 0};
			continue;
		}
		for (uint32_t e = x->first_env; e < x->first_env + x->n_envs && row + k < n; e++)
			if (mark[e]) {
				mark[e] = 0;
				list[row + k++] = e;
			}
		r->part[w] = (struct sr__proc_part){SR__PROC_LIST, k, row, off + row};
		row += k;
	}
	sr__procs_post(p->procs);
	return 0;
}

/* Ragged recv: wait for the worker that writes slot @pos (an inline
 * worker 0 runs its parts of the commands up to that one). */
static int procs_advance(sr_pool *p, uint64_t pos, uint32_t max, uint64_t *tw)
{
	uint64_t f, t1;
	int err;

	(void)max;
	if (sr__slot_begin(p->ring.r, pos))
		return 0;
	f = faults_now(p);
	t1 = sr__now_ns();
	err = sr__procs_wait_slot(p->procs, pos);
	*tw += sr__now_ns() - t1;
	after_wait(p, 0, false, f);
	return err;
}

static void add_episode(void *arg, double ret, double len)
{
	sr_pool *p = arg;

	sr__ep_stats_add(&p->stats, ret, len);
}

static void procs_episodes(sr_pool *p)
{
	sr__procs_episodes(p->procs, add_episode, p);
}

static void procs_stop(sr_pool *p)
{
	sr__procs_destroy(p->procs);
	if (p->procs)
		p->side.final_env = NULL; /* it was the command block's */
	p->procs = NULL;
}

static void procs_worker_info(const sr_pool *p, uint32_t w, sr_pool_worker_stats *out)
{
	struct sr__procs_wstats ws;

	if (!sr__procs_worker(p->procs, w, &ws)) {
		out->pid = (int32_t)ws.pid;
		out->restarts = ws.restarts;
	}
	/* Worker 0 is a process unless inline: bound as its plan says. */
	if (w == 0 && !sr__procs_inline(p->procs))
		out->cpu = p->workers.w[0].cpu >= 0 && p->place.plan->w[0].cpus[0]
				   ? p->workers.w[0].cpu
				   : -ENOENT;
}

static void procs_faults(const sr_pool *p, sr_pool_faults *out)
{
	struct sr__procs_stats st;

	if (!p->procs)
		return; /* not started yet, or stopped (the stats block's last update) */
	sr__procs_info(p->procs, &st);
	out->faults = st.faults;
	out->restarts = st.restarts;
	out->fault_rows = st.fault_rows;
	snprintf(out->last, sizeof(out->last), "%s", st.last_fault);
}

/* Checkpoints: the workers hand their envs' records over in shared
 * memory (SAVE), or take them back (LOAD, COMMIT); proc_ckpt.c. */
static int procs_ckpt_save(sr_pool *p, struct sr__env_recs *out)
{
	int err = sr__procs_save(p->procs, out);

	/* Every worker has done every command (the SAVE came after them, PC1):
	 * its step counter and episode queue are final, so the statistics the
	 * snapshot takes next agree with the env records (an async pool
	 * mirrors and merges them lazily otherwise). */
	mirror(p, 0, false);
	procs_episodes(p);
	return err;
}

static int procs_ckpt_load(sr_pool *p, const struct sr__env_recs *in, uint64_t steps)
{
	int err = sr__procs_load(p->procs, in, steps);

	mirror(p, 0, false);
	return err;
}

int sr_pool_worker_out(const sr_pool *p, uint32_t worker, void **out, size_t *size)
{
	if (!p || !out || !size)
		return sr__errorf(-EINVAL, "sr_pool_worker_out: NULL argument");
	if (p->workers.kind != &sr__kind_proc || !p->procs)
		return sr__errorf(-EINVAL, "sr_pool_worker_out: not a process pool (SR_POOL_F_PROCS)");
	if (worker >= p->cfg.num_threads)
		return sr__errorf(-EINVAL, "sr_pool_worker_out: worker %u of %u", worker,
				  p->cfg.num_threads);
	*out = sr__procs_out(p->procs, worker, size);
	return 0;
}

static void procs_stats_block(const sr_pool *p, struct sr_stats_shm *s)
{
	struct sr__procs_stats ps;

	if (!p->procs)
		return;
	sr__procs_info(p->procs, &ps);
	s->faults = ps.faults;
	s->restarts = ps.restarts;
	s->fault_rows = ps.fault_rows;
	s->worker_kind = sr__procs_inline(p->procs) ? SR_STATS_WORKERS_PROCS_INLINE
						    : SR_STATS_WORKERS_PROCS;
}

static void procs_reset_next(sr_pool *p, const sr_pool_reset_opts *o, const double *b)
{
	sr__procs_reset_next(p->procs, o, b);
}

const struct sr__worker_kind sr__kind_proc = {
	.name = "process",
	.local_state = false,
	.start = procs_start,
	.send = procs_send,
	.wait = procs_wait,
	.send_envs = procs_send_envs,
	.advance = procs_advance,
	.episodes = procs_episodes,
	.stop = procs_stop,
	.worker_info = procs_worker_info,
	.faults = procs_faults,
	.stats_block = procs_stats_block,
	.ckpt_save = procs_ckpt_save,
	.ckpt_load = procs_ckpt_load,
	.reset_next = procs_reset_next,
};
