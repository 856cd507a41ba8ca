/*
 * The pool benchmark as a library for the CLI tools: `stepring bench pool`,
 * sweep and diagnose all measure through bench_pool_run().
 *
 * One run: a pool created from the configuration, a warm-up, the active
 * window (the figures), a cool-down. The active window is cut into rounds
 * that interleave the pool with the raw single-thread env loop (same env,
 * envs/threads instances) and, with T threads, T raw loops at once on the
 * workers' CPUs: the efficiency figures are medians of per-round ratios,
 * so a machine whose speed drifts does not bias them.
 * Members may be added at the end of both structs; none removed.
 */
#ifndef SR_BENCH_POOL_H
#define SR_BENCH_POOL_H

#include <stdint.h>
#include <stdio.h>

struct bench_pool_cfg {
	const char *env;      /* env id or short name */
	uint32_t envs, threads, batch; /* threads 0: one per core; batch 0: = envs */
	int async;            /* 0 sync (batch = envs), 1 async (batch < envs) */
	double seconds, warmup, cooldown; /* active window and the phases around it */
	const char *policy;   /* "none" (random actions) or "mlp:WxD" */
	int device;           /* enum sr_device_kind */
	uint64_t seed;
	double checkpoint_every; /* seconds between checkpoints, 0 = none (sync only) */
	const char *checkpoint_backend; /* "uring" | "pwrite" | "sync" (NULL: auto) */
	int bind;             /* enum sr_bind */
	const char *cpuset;   /* NULL or "0-3,8" */
	int no_inline;        /* knob no-inline: worker 0 is a thread too */
	int no_groups;        /* knob no-batch-groups: async per-env queues only */
	int no_rebalance;     /* knob no-rebalance: each worker its own envs */
	uint64_t ring_capacity; /* slots, 0: the pool's default (4 x envs, >= 1024) */
	int check_finite;     /* 0: the library's default, 1: SR_POOL_F_CHECK_FINITE,
			       * 2: SR_POOL_F_NO_CHECK_FINITE */
	int lockstep;         /* with T > 1, also T raw loops in lockstep (a round is
			       * then longer by one raw slice) */
	int procs;            /* 1: worker processes (SR_POOL_F_PROCS, sync), 2: with
			       * worker 0 inline (SR_POOL_F_PROC_INLINE) */
};

#define BENCH_MAX_WORKERS 64
#define BENCH_MAX_ROUNDS 40 /* rounds in an active window: 4 to 40 */
#define BENCH_EQUAL 0.95    /* see bench_pool_result.equal_rounds */

struct bench_pool_result {
	double steps_per_sec;     /* env steps per second in the active window */
	double raw_steps_per_sec; /* single-thread raw loop, same env, envs/threads instances */
	double efficiency;        /* steps_per_sec / (threads_used * raw_steps_per_sec) */
	double p50_us, p90_us, p99_us; /* batch latency (step, or send..recv) */
	double cpu_pct;           /* process CPU time / wall time, in % (200 = 2 cores) */
	uint64_t rss_kb;          /* peak resident set */
	/* per batch, nanoseconds summed over the threads */
	double ns_env_step, ns_ring, ns_copy, ns_policy, ns_wait;
	/* fractions of the active window (threads_used x seconds), sum ~1 */
	double share_env, share_ring, share_copy, share_policy, share_wait;
	uint32_t threads_used;
	uint64_t ring_capacity;   /* the pool's ring, slots */
	uint32_t check_finite;    /* the pool's finite check was on */
	uint64_t nonfinite_rows;  /* rows it flagged */
	int err;                  /* 0 or -errno */
	char msg[256];            /* why it failed */
	uint64_t batches;         /* batches in the active window */
	double seconds;           /* measured active window */
	uint64_t episodes;        /* episodes finished in the window */
	/* The same from medians, robust when other processes share the CPUs:
	 * batch rows / median batch latency, n / median raw batch time. */
	double p50_steps_per_sec, raw_p50_steps_per_sec, efficiency_p50;
	/* Per CPU-second of the process (pool, spinning included) against
	 * per CPU-second of the raw loop's thread: immune to preemption. */
	double steps_per_cpu_sec, raw_steps_per_cpu_sec, efficiency_cpu;
	/* The active window runs in rounds (pool, raw alone, raw on every
	 * worker's CPU at once); efficiency is the median of the rounds'
	 * ratios, min and max its spread. raw_parallel: T raw loops at once,
	 * the hardware's ceiling for T threads (median over the rounds);
	 * efficiency_parallel = steps/s / that (the pool's own overhead);
	 * parallel_scaling = raw_parallel / (T x raw), so efficiency is about
	 * parallel_scaling x efficiency_parallel. */
	uint32_t rounds;
	double efficiency_min, efficiency_max;
	double raw_parallel_steps_per_sec, efficiency_parallel, parallel_scaling;
	/* Async: the calling thread in sr_pool_send (checking the actions and
	 * queueing them on the workers), per batch and as a share like the
	 * others (out of wait, where it was counted before). */
	double ns_send, share_send;
	/* Async: sr_pool_info.batch_groups (0: per-env queues, or sync). */
	uint32_t batch_groups;
	/* Per worker (the first BENCH_MAX_WORKERS), over the active window:
	 * in sync mode every batch waits for the slowest. */
	uint32_t nworkers;
	struct bench_worker_result {
		int32_t cpu;              /* >= 0, or -ENOENT (not bound to one CPU) */
		uint32_t envs;
		uint32_t rows;            /* envs it stepped per batch (groups: per
					   * round) at the end: rebalancing moves
					   * some */
		double ns_env_per_step;   /* env step / reset time per env step */
		double ns_ring_per_step;  /* ring work per env step */
		double busy_share;        /* (env + ring time) / active window */
		double raw_parallel_steps_per_sec; /* its CPU's raw loop while all T
						    * ran at once (median of the
						    * rounds); 0 with one thread */
	} workers[BENCH_MAX_WORKERS];
	/* With T > 1: the slowest CPU's raw loop against the fastest's while
	 * all T ran at once (median over the rounds; 0 with one thread). Below
	 * 1 the CPUs step at different speeds, and a design where a batch
	 * needs every worker's share runs at the slowest one's pace. */
	double cpu_balance;
	/* Process workers (cfg.procs): over the pool's life (sr_pool_faults_get). */
	uint64_t faults, restarts, fault_rows;
	char last_fault[1024];
	/* With cfg.lockstep and T > 1: T raw loops on the workers' CPUs, each
	 * stepping its share of a batch (rows / T envs) and then waiting at a
	 * barrier for the others, as a sync pool (or a batch group) does. The
	 * ceiling of any design in which an env stays with its worker and a
	 * batch needs every worker's share: the slowest CPU sets the pace.
	 * lockstep_scaling = raw_lockstep / (T x raw); efficiency_lockstep =
	 * steps/s / raw_lockstep (the pool's own overhead). Medians over the
	 * rounds; 0 when not measured. */
	double raw_lockstep_steps_per_sec, lockstep_scaling, efficiency_lockstep;
	/* With T > 1, the rounds in which the CPUs were equal (BENCH_EQUAL):
	 * the T raw loops at once reached that share of T x raw, and the
	 * slowest CPU that share of the fastest. Their count, and the median
	 * of their efficiency and efficiency_lockstep (0 with none): what the
	 * pool reaches on equal CPUs, from a machine whose CPUs are not always
	 * equal. An estimate: a round's raw loops run just after its pool
	 * slice, not during it. */
	uint32_t equal_rounds;
	double efficiency_equal, efficiency_lockstep_equal;
	/* Each round's ratios, in order (the first BENCH_MAX_ROUNDS; the
	 * lockstep ones 0 when not measured, cpu_balance 0 with one thread),
	 * and its pool slice's steps/s and batch latency P99 (0 when the slice
	 * kept no latencies): the spread over rounds `stepring compare` uses. */
	uint32_t nround_figs;
	struct bench_round {
		double efficiency, efficiency_parallel, parallel_scaling, cpu_balance,
			lockstep_scaling, efficiency_lockstep;
		double steps_per_sec, p99_us;
	} round_figs[BENCH_MAX_ROUNDS];
};

/* Defaults: CartPole-v1, 1024 envs, threads 0 (one per core), sync, 3 s
 * active, 0.5 s warm-up and cool-down, policy none, host, seed 0, bind
 * core, no cpuset, no checkpoints. */
void bench_pool_cfg_init(struct bench_pool_cfg *c);
/* Run it. Returns 0 or -errno, with res->err and res->msg set. Prints
 * nothing. */
int bench_pool_run(const struct bench_pool_cfg *cfg, struct bench_pool_result *res);
/* One JSON object (no newline): config, figures, breakdown, machine. */
void bench_pool_print_json(FILE *f, const struct bench_pool_cfg *cfg,
			   const struct bench_pool_result *res);

/* A checkpoint backend's name ("auto", "uring", "pwrite", "sync") to its
 * enum sr_ckpt_backend value, or -EINVAL. */
int bench_ckpt_backend_parse(const char *name);

#endif
