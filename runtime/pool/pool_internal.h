/*
 * Internal layout of a pool (runtime/pool/: pool.c, collector.c, stats.c,
 * snapshot.c, restore.c; the worker kinds of runtime/worker/ see it too).
 *
 * This header is the contract for code that needs to look inside a pool:
 * the checkpoint engine snapshots and restores the env states, the
 * elapsed-step counters, the episode accumulators and the statistics; the
 * collector lands batches on the host or on an sr_device (collector.c).
 *
 * OWNERSHIP (see docs/pool.md for the whole design)
 *
 *  - Env i belongs to exactly one worker for the life of the pool: worker w
 *    owns the contiguous slice [w->first_env, w->first_env + w->n_envs).
 *    Its state bytes live in w->states (one allocation per worker, first
 *    touched by the bound worker thread), together with the per-env
 *    bookkeeping, as arrays indexed by i - first_env (struct of arrays,
 *    so the per-step bookkeeping runs as vector loops): prev_seq,
 *    elapsed, done, done_term, done_trunc, ep_ret, ep_len.
 *  - Worker 0 is "inline": the thread that calls sr_pool_step/recv/reset
 *    steps worker 0's slice itself. Workers 1..T-1 are pthreads bound by
 *    the placement plan. So num_threads = T uses T CPUs, not T + 1.
 *  - Episode accumulators (w->ep_ret / ep_len: return, length) are updated
 *    by the env's worker as it steps; a finished episode goes into the
 *    worker's SPSC episode queue, and the pool thread merges those into the
 *    statistics window (pool->stats) after each batch.
 *
 * QUIESCENT POINTS: between two pool calls in sync mode, and in async mode
 * once every sent env has been received (n_inflight == 0: a worker
 * publishes same-step extras before the rows, and touches no env state
 * after publishing them), no worker touches any of this, so the checkpoint
 * engine may read or write it from the calling thread. sr__pool_quiesce()
 * forces such a point in async mode by waiting for and DROPPING the
 * results in flight (what sr_pool_reset does).
 */
#ifndef SR_POOL_INTERNAL_H
#define SR_POOL_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "affinity_internal.h"
#include "ring_internal.h"
#include "sr_base.h"
#include "stepring/device.h"
#include "stepring/pool.h"
#include "stepring/stats.h"
#include "worker_internal.h"

#define SR__EPWIN 100 /* episode statistics window */
#define SR__DRAIN_MIN 128 /* async: a worker thread's drains are not capped below this */

/*
 * Commands to the workers (worker/thread.c; pool.c writes them): command k is
 * rec[k % ngroups], written by the pool thread before the release store
 * of sent = k + 1. rec and ngroups are read-mostly (set at create); sent
 * is on a line of its own, with issued, which the pool thread writes with
 * it, so that the workers' read-mostly lines stay clean.
 */
struct sr__cmds {
	struct sr__grp_cmd *rec; /* ngroups records, or NULL */
	uint32_t ngroups;        /* num_envs / batch_size (sync: 1), or 0 (async batches
				  * that do not tile the envs: no commands) */
	/* Published (release, by the pool thread; acquire, by the workers). */
	_Alignas(SR_CACHELINE) _Atomic uint64_t sent;
	uint64_t issued;         /* commands written (sent's value; pool thread) */
};

/*
 * Rebalancing (worker/thread.c rebalance, at each step command; pool thread):
 * shift[w] moves the boundary between the rows stepped by workers w and
 * w+1 (> 0: worker w steps the first shift[w] envs of w+1's share; < 0:
 * w+1 steps the last -shift[w] of w's); shift[T-1] is 0. A command's
 * shares are the workers' envs of its group (sync: the slices); each
 * command takes a copy at its send (sr__grp_cmd.shift), which is what the
 * workers read, so this part is the pool thread's alone (sr__worker_rows
 * reads shift relaxed from any thread, for statistics).
 */
struct sr__rebalance {
	bool on;               /* set at create: sync steps and batch groups move them */
	_Atomic int32_t *shift; /* num_threads */
	uint32_t n;            /* step commands since the last look */
	uint64_t *mark;        /* 2 per worker at the last look: steps, ns_env + ns_ring */
	double *inv;           /* per worker: steps per busy ns since the last look */
};

/*
 * Placement (pool.c at create, from affinity.c's plan; read-only after):
 * where each worker runs and which worker owns each env.
 */
struct sr__placement {
	struct sr__plan *plan; /* affinity.c */
	bool caller_bound;     /* SR_POOL_F_BIND_CALLER bound the calling thread (worker 0) */
	uint32_t *env_worker;  /* num_envs: env -> worker index */
};

/*
 * The stats block in shared memory (stats.c; SR_POOL_F_RING_NAME), for
 * `stepring top`: blk is NULL without one.
 */
struct sr__stats_block {
	struct sr_stats_shm *blk;
	size_t len;
	char *name;
	int fd;            /* holds the block's creator lock (liveness) */
	uint64_t start_ns; /* when the pool was created */
};

/*
 * Async sends in flight (pool.c sends, collector.c receives; pool thread
 * only): which envs have an action out, the last batch (a send with env
 * ids NULL sends it back), and the batch groups' progress.
 */
struct sr__flight {
	uint8_t *inflight;    /* num_envs: env sent and not yet received */
	uint32_t n_inflight;
	uint32_t *last_ids;   /* env ids of the last batch (send with NULL) */
	uint32_t last_n;
	bool sent_since_recv; /* a send came after the last recv */
	bool grp_on;          /* everything in flight is batch groups (recv by group) */
	int32_t grp_last;     /* group of the last batch, or -1 */
	uint64_t grp_recvd;   /* commands whose batch recv returned (grp_on) */
};

/*
 * The collector (collector.c; pool thread only): the batch it exposes,
 * the device the batch goes to, and the pool thread's own timing and
 * batch latencies (stats, the stats block, rebalancing).
 */
struct sr__collector {
	sr_device *dev;      /* CUDA: where batches land (land_batch); NULL: host */
	sr_device_batch *cur; /* the device batch `batch` shows, or NULL */
	void *stage;         /* staging columns of max rows: copies and gathers */
	float *obs, *reward;
	uint32_t *env_id;
	uint8_t *term, *trunc;
	uint32_t dev_kind;   /* enum sr_device_kind asked for */
	int32_t dev_index;
	uint64_t *gather;    /* batch_size seqs when a batch is not one range */
	float *final_stage;  /* async: final obs rows in batch order */
	uint64_t ns_collect, ns_wait, ns_send;
	sr_batch batch;
	double lat_us[256];  /* recent batch latencies for the stats block */
	uint32_t lat_n;
	uint64_t call_t0;    /* async: when the last send returned (0: none) */
};

/*
 * Episode statistics (collector.c, pool thread; checkpointed): the last
 * SR__EPWIN finished episodes, merged from the workers' episode queues
 * after each batch, and the batches returned.
 */
struct sr__ep_stats {
	double ret[SR__EPWIN], len[SR__EPWIN]; /* ring of the last ones: return, length */
	uint64_t episodes;                     /* finished since create (or as restored) */
	uint64_t batches;                      /* batches returned */
};

/* A finished episode into the window. */
static inline void sr__ep_stats_add(struct sr__ep_stats *s, double ret, double len)
{
	uint32_t k = (uint32_t)(s->episodes % SR__EPWIN);

	s->ret[k] = ret;
	s->len[k] = len;
	s->episodes++;
}

/*
 * The finite check (SR_POOL_F_CHECK_FINITE; collector.c, "Finite check").
 * on is read by the workers for every row range they write; the rest is
 * written at most once (first, told) or only with process workers
 * (pool_rows), so the line stays clean in the workers' caches.
 */
struct sr__finite {
	bool on;                  /* set at create */
	bool told;                /* pool thread: the first one was reported */
	/* The first non-finite row, as 1 + its env index | SR__NF_OBS /
	 * SR__NF_REW (what was not finite); 0: none yet. Set once
	 * (compare-exchange from 0) by whichever thread finds it. */
	_Atomic uint64_t first;
	uint64_t pool_rows;       /* pool thread: rows it flagged (process workers) */
};

/*
 * Configuration (pool.c sr_pool_create, from the options and the
 * environment): written by the creating thread before any worker starts,
 * read-only after, by every thread. No ordering of its own: a worker
 * thread sees it through pthread_create, a worker process gets what it
 * needs in its start options (worker/proc_kind.c). It is the first thing in the
 * pool, on lines that are never written while the pool runs.
 */
struct sr__pool_cfg {
	sr_env_spec spec;
	uint32_t num_envs, num_threads, batch_size;
	char threads_note[200]; /* how num_threads was chosen (sr_pool_info) */
	bool async;             /* batch_size < num_envs */
	uint32_t autoreset;     /* enum sr_autoreset */
	bool keep_final;        /* final_obs kept (SAME_STEP or SR_POOL_F_FINAL_OBS) */
	uint64_t seed;
	uint64_t env_base;      /* SR_POOL_F_FIRST_ENV: global index of env 0 (seeding only) */
	uint32_t knobs;         /* SR__KNOB_* */
	size_t act_size;        /* bytes of one env's action */
	uint32_t obs_dim;
	uint32_t spin_iters;    /* spin before futex_wait */
	uint32_t max_slice;     /* the most envs any worker owns */
	struct sr__book book;   /* stepping's settings (thread workers: book_pvt.h) */
};


/*
 * The workers (worker/thread.c for threads, worker/proc_kind.c for processes). kind, w
 * and first_thread are set at create and read-only after; each record in
 * w says who writes which of its fields (struct sr__worker). stop and
 * n_ready are the thread kind's lifecycle words: written once per worker
 * (n_ready) or once (stop), on the same read-mostly line.
 */
struct sr__workers {
	const struct sr__worker_kind *kind; /* what the workers are (threads, processes) */
	struct sr__worker *w;  /* num_threads records; w[0] is inline unless SR__KNOB_NO_INLINE */
	uint32_t first_thread; /* 1: worker 0 runs on the calling thread; 0: all are threads */
	/* Set by thread_stop (relaxed) before it kicks every worker; a worker
	 * reads it after waking (ordered by the go word's acquire, G1). */
	_Atomic uint32_t stop;
	/* Worker threads that have allocated their memory: each adds 1 once
	 * (release, S0); the creating thread waits for all (acquire, S1). */
	_Atomic uint32_t n_ready;
};

/*
 * The pool thread's wake-up word (worker/thread.c, E0/E1): a worker thread bumps
 * evt after each publish (and once when it has started); the pool thread,
 * when it has spun enough, sets sleeping and futex-waits on evt. seq_cst
 * on both sides (Dekker). On a line of its own: every drain writes it.
 */
struct sr__recv_wake {
	_Atomic uint32_t evt;
	_Atomic uint32_t sleeping;
};

/*
 * Buffers beside the ring (pool.c at create). The pointers and drain_max
 * are set at create and read by the workers: a line of their own, not the
 * wake word's (bumped by every drain) nor the flight's (written by every
 * call). What they point to:
 *  - async_act, num_envs * act_size: an env's action, written by the pool
 *    thread before it queues the env, read by the env's worker after the
 *    queue's acquire (A0/A1, worker/thread.c).
 *  - final_env, num_envs * obs_dim (keep_final): an env's final
 *    observation, written by the env's worker before it publishes the
 *    env's row, read by the collector after the ring's acquire (R1).
 *    Process workers: the command block's (worker/proc_kind.c).
 */
struct sr__side {
	unsigned char *async_act;
	uint32_t drain_max; /* async: most envs a worker thread steps per reservation */
	float *final_env;
};

struct sr_pool {
	struct sr__pool_cfg cfg; /* set at create, read-only after */
	struct sr__placement place; /* where the workers run */
	struct sr__ring_cols ring;  /* the ring and its columns */
	struct sr__workers workers; /* what the workers are, their records */
	struct sr__finite fin; /* the finite check (read by the workers; written rarely) */

	_Alignas(SR_CACHELINE) struct sr__recv_wake wake; /* a line of its own */
	_Alignas(SR_CACHELINE) struct sr__side side;      /* a line of its own */

	struct sr__cmds cmds; /* commands to the workers */

	/* --- async sends in flight (pool.c send, collector.c recv; pool
	 * thread only) --- */
	_Alignas(SR_CACHELINE) struct sr__flight flight;

	struct sr__rebalance rb;  /* the shares' boundaries */
	struct sr__collector col; /* the batch, its device, the pool thread's timing */

	struct sr__ep_stats stats; /* episodes and batches (collector.c) */

	/* --- checkpoint state (snapshot.c), made at the first checkpoint,
	 * or NULL; pool thread only --- */
	struct sr__pool_ckpt *ckpt;

	/* --- the process kind's state (SR_POOL_F_PROCS, worker/proc_kind.c only), or NULL --- */
	struct sr__procs *procs;

	struct sr__stats_block shm; /* the stats block in shared memory */
};

/* The record of command @k. The group count is usually a power of two (1
 * for a sync pool): a mask then, not a 64-bit division (tens of cycles, on
 * the path of every command, several times). */
static inline struct sr__grp_cmd *sr__cmd_rec(const sr_pool *p, uint64_t k)
{
	const uint32_t n = p->cmds.ngroups;

	return &p->cmds.rec[(n & (n - 1)) == 0 ? k & (n - 1) : k % n];
}

/*
 * Experiment knobs: ways of running a pool that benchmarks compare against
 * the default, not options a user needs (docs/tuning.md). sr_pool_create
 * reads them from STEPRING_POOL_KNOBS (a comma list of the names below);
 * tests pass them to sr__pool_create_knobs.
 */
enum {
	SR__KNOB_NO_INLINE = 1u << 0,       /* "no-inline": worker 0 is a thread too; the
					     * calling thread only sends, collects and
					     * waits (one more thread than CPUs planned) */
	SR__KNOB_NO_BATCH_GROUPS = 1u << 1, /* "no-batch-groups": async per-env queues
					     * only (recv returns whichever envs are
					     * ready first) */
	SR__KNOB_NO_REBALANCE = 1u << 2,    /* "no-rebalance": each worker steps exactly
					     * its own envs */
};
/* Parse a knob list ("no-inline,no-rebalance"; NULL or "": none); 0 or
 * -EINVAL naming the unknown word. */
int sr__pool_knobs_parse(const char *s, uint32_t *out);
/* sr_pool_create with @knobs instead of the environment's. */
int sr__pool_create_knobs(const sr_pool_opts *o, uint32_t knobs, sr_pool **out);

/* The state of env @env of a kind with local_state (in its owner worker's
 * memory): the pool thread may touch it between commands only. */
static inline void *sr__env_state(sr_pool *p, uint32_t env)
{
	struct sr__worker *w = &p->workers.w[p->place.env_worker[env]];

	return w->slice.states + (size_t)(env - w->first_env) * p->cfg.spec.state_size;
}
/* Envs worker @w steps now in each round of the commands (each sync
 * step; async, one command per group): its envs and the shifts at its two
 * ends; relaxed loads, any thread. */
static inline uint32_t sr__worker_rows(const sr_pool *p, uint32_t w)
{
	int32_t lo = w ? atomic_load_explicit(&p->rb.shift[w - 1], memory_order_relaxed) : 0;
	int32_t hi = atomic_load_explicit(&p->rb.shift[w], memory_order_relaxed);
	int32_t per = p->cmds.ngroups ? (int32_t)p->cmds.ngroups : 1; /* once per group */

	return (uint32_t)((int32_t)p->workers.w[w].n_envs + per * (hi - lo));
}
/* Batch groups (pool.c sends, collector.c receives): mark group @g's envs
 * in flight (1) or not (0). */
static inline void sr__grp_mark(sr_pool *p, uint32_t g, uint8_t v)
{
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		const struct sr__worker *w = &p->workers.w[i];

		memset(p->flight.inflight + w->first_env + g * w->grp_m, v, w->grp_m);
	}
}

/* --- collector.c: the finite check --- */
/* SR__NF_ENV_MASK, SR__NF_OBS, SR__NF_REW, sr__nonfinite_offer: sr_base.h. */
/* The default of the check: on, unless STEPRING_CHECK_FINITE=0. */
bool sr__check_finite_default(void);
/* Rows flagged SR_SLOT_NONFINITE so far (relaxed loads, any thread). */
uint64_t sr__nonfinite_rows(const sr_pool *p);
/* Process workers that do not check their own rows (a Python worker):
 * check rows [seq, seq + n) (published, not consumed), flag and count
 * the non-finite ones. Pool thread. */
void sr__nonfinite_scan(sr_pool *p, uint64_t seq, uint32_t n);

/* --- collector.c --- */
int sr__collector_open(sr_pool *p);
void sr__collector_close(sr_pool *p);
/* Sync: consume everything published (pads, batch, extras) and expose
 * slots [seq, seq + num_envs) as the batch. *@t: the clock when the
 * workers finished (the kind's wait), then when the batch is formed. */
int sr__collect_sync(sr_pool *p, uint64_t seq, uint64_t *t, const sr_batch **out);
/* Async: wait for batch_size ready envs and expose them; *@t gets the
 * clock at the end. */
int sr__collect_async(sr_pool *p, uint64_t *t, const sr_batch **out);
/* Async: wait until nothing is in flight and drop what is published. */
void sr__collect_drain(sr_pool *p);

/* --- stats.c --- */
int sr__stats_shm_open(sr_pool *p, const char *ring_name);
void sr__stats_shm_update(sr_pool *p);
/* The same at once (not every 64 batches): a fault is news. */
void sr__stats_shm_update_now(sr_pool *p);
void sr__stats_shm_close(sr_pool *p);
/* An MPI pool's local pool: its rank and the ranks, into the block. */
void sr__stats_shm_set_rank(sr_pool *p, uint32_t rank, uint32_t size);

/* Async: wait for the results in flight and drop them; sync: no-op. */
static inline void sr__pool_quiesce(sr_pool *p)
{
	if (p->cfg.async)
		sr__collect_drain(p);
}

/* --- snapshot.c --- */
/* Wait for this pool's checkpoint in flight and free p->ckpt. */
void sr__pool_ckpt_close(sr_pool *p);

#endif
