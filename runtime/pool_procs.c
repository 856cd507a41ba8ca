/*
 * The pool's process workers (SR_POOL_F_PROCS): the process kind of
 * worker (sr__kind_proc, see struct sr__worker_kind), the glue between
 * the pool (slices, sync commands, statistics) and runtime/proc.c (the
 * command block, spawning, faults and restarts).
 *
 * The pool keeps its worker records (slices, counters) but starts no
 * threads: a sync command goes to the worker processes, and their
 * counters are copied into the records after each command, so that
 * sr_pool_stats_get, sr_pool_worker_stats_get and the stats block read
 * them as for threads. Episodes come from the workers' queues in the
 * command block.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "proc.h"

static int procs_start(sr_pool *p, const sr_pool_opts *o)
{
	struct sr__procs_opts po;
	uint32_t *slice;
	int err;

	slice = calloc(p->cfg.num_threads, sizeof(*slice));
	if (!slice)
		return sr__errorf(-ENOMEM, "out of memory");
	for (uint32_t w = 0; w < p->cfg.num_threads; w++)
		slice[w] = p->workers.w[w].n_envs;
	memset(&po, 0, sizeof(po));
	po.num_envs = p->cfg.num_envs;
	po.nworkers = p->cfg.num_threads;
	po.slice_n = slice;
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
	 * proc.h), up to 200 us, when every party has a CPU of its own: a
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
	err = sr__procs_create(&po, &p->procs);
	free(slice);
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

/* The command block is written and published by sr__procs_run, which
 * sends a command and waits for it in one call: send leaves the command
 * where the pool wrote it, and wait runs it (a process pool has one
 * command at a time: sync only). */
static int procs_send(sr_pool *p)
{
	p->cmds.issued++;
	return 0;
}

static int procs_wait(sr_pool *p, uint64_t k, uint64_t *t)
{
	const struct sr__grp_cmd *c = sr__cmd_rec(p, k);
	struct sr__procs_stats before, after;
	int err;

	sr__procs_info(p->procs, &before);
	err = sr__procs_run(p->procs, c->reset ? SR_PROC_CMD_RESET : SR_PROC_CMD_STEP, c->seq,
			    c->reset ? NULL : c->acts, c->reset ? c->mask : NULL);
	mirror(p, c->seq, !err && p->fin.on);
	if (!atomic_load_explicit(&p->fin.first, memory_order_relaxed)) {
		uint64_t f = sr__procs_nonfinite_first(p->procs);

		if (f)
			sr__nonfinite_first(p, (uint32_t)((f & SR__NF_ENV_MASK) - 1),
					    f & ~SR__NF_ENV_MASK);
	}
	sr__procs_info(p->procs, &after);
	if (after.faults != before.faults)
		sr__stats_shm_update_now(p); /* `stepring top` shows a fault at once */
	*t = sr__now_ns();
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
}

static void procs_faults(const sr_pool *p, sr_pool_faults *out)
{
	struct sr__procs_stats st;

	sr__procs_info(p->procs, &st);
	out->faults = st.faults;
	out->restarts = st.restarts;
	out->fault_rows = st.fault_rows;
	snprintf(out->last, sizeof(out->last), "%s", st.last_fault);
}

/* Checkpoints: the workers hand their envs' records over in shared
 * memory (SAVE), or take them back (LOAD, COMMIT); proc.c. */
static int procs_ckpt_save(sr_pool *p, struct sr__env_recs *out)
{
	return sr__procs_save(p->procs, out);
}

static int procs_ckpt_load(sr_pool *p, const struct sr__env_recs *in, uint64_t steps)
{
	int err = sr__procs_load(p->procs, in, steps);

	mirror(p, 0, false);
	return err;
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
	.episodes = procs_episodes,
	.stop = procs_stop,
	.worker_info = procs_worker_info,
	.faults = procs_faults,
	.ckpt_save = procs_ckpt_save,
	.ckpt_load = procs_ckpt_load,
	.reset_next = procs_reset_next,
};
