/*
 * Tuning helpers shared by `stepring sweep` and `stepring diagnose`
 * (implemented in tools/cmd_tune.c, unit-tested in tests/tool_tune.c).
 *
 * Everything here is a pure function of its arguments, or prints to a
 * FILE *, so the classification, the verdict, the table and the JSONL
 * context can be tested on synthetic numbers without running a pool.
 */
#ifndef SR_TUNE_H
#define SR_TUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What limits a configuration. The order is the table's and the docs'. */
enum tune_bound {
	TUNE_BOUND_ENV = 0,    /* stepping the envs (worker CPU time) */
	TUNE_BOUND_POLICY = 1, /* the policy forward pass (host or GPU) */
	TUNE_BOUND_COPY = 2,   /* moving data: ring publish + batch copy */
	TUNE_BOUND_SYNC = 3,   /* waiting: barriers, wake-ups, stragglers */
	TUNE_BOUND_COUNT
};

/* Fractions of a batch's wall-clock time (they sum to about 1). */
struct tune_shares {
	double env, ring, copy, policy, wait;
};

/**
 * Shares of a batch's wall-clock time as the trainer thread sees it, from
 * the pool benchmark's per-batch nanoseconds: @ns_env and @ns_ring are
 * summed over @threads workers (so divided by @threads: the average worker,
 * which is the critical path when the slices are balanced); @ns_copy (the
 * collector) and @ns_policy run on the trainer thread and count whole;
 * wait is what is left of @batch_wall_ns (waiting for the slowest worker,
 * wake-ups, per-call overhead). Every share is clamped to [0, 1]; when
 * the parts add up to more than the batch (they overlap, or a timer caught
 * a preemption) they are scaled to sum 1 and wait is 0. The shares always
 * sum to 1, except with @batch_wall_ns <= 0, where everything is 0.
 */
void tune_wall_shares(double ns_env, double ns_ring, double ns_copy, double ns_policy,
		      uint32_t threads, double batch_wall_ns, struct tune_shares *out);

/** Short name of a bound: "env", "policy", "copy", "sync". */
const char *tune_bound_name(enum tune_bound b);

/**
 * Classify one measured configuration by the largest slice of its time:
 * env, policy, copy (ring + copy) or sync (wait). Ties go to the earlier
 * bound in enum order. Shares that are negative or NaN count as 0.
 */
enum tune_bound tune_classify(const struct tune_shares *s);

/* One row of the sweep table. */
struct tune_row {
	uint32_t envs, threads, batch;
	int async;
	double steps_per_sec;
	double p50_us, p90_us, p99_us;
	double efficiency;
	struct tune_shares sh;
};

/** Print the sweep table's header (two lines: names and a rule). */
void tune_table_header(FILE *f);
/** Print one row of the sweep table; its bound is tune_classify(&r->sh). */
void tune_table_row(FILE *f, const struct tune_row *r);

/*
 * `--envs auto`: powers of two from the first one >= @start up to @max;
 * stop early once throughput has failed to beat the best so far by more
 * than 5% for three steps in a row (two stopped CartPole sync at 256 envs, on
 * a plateau before the rise to its best at 512-4096).
 */
struct tune_auto {
	uint32_t next, max;
	double best;
	int flat; /* consecutive steps without a >5% gain */
};

#define TUNE_AUTO_GAIN 1.05
#define TUNE_AUTO_PATIENCE 3

void tune_auto_init(struct tune_auto *a, uint32_t start, uint32_t max);
/**
 * First call: @last_sps is ignored (pass a negative value) and *envs gets
 * the first value. Later calls: pass the throughput measured at the value
 * returned last. Returns false when the series is done.
 */
bool tune_auto_next(struct tune_auto *a, double last_sps, uint32_t *envs);

/* Inputs of the diagnose verdict: three measurements and the setting. */
struct tune_diag_in {
	uint32_t envs, threads, batch, cores;
	int async;
	int cuda;               /* the policy ran on a CUDA device */
	double env_only_sps;    /* pool without a policy, steps/s */
	double policy_only_sps; /* policy alone, rows/s; <= 0: not measured */
	double loop_sps;        /* the closed loop, steps/s */
	struct tune_shares loop; /* breakdown of the closed loop */
	double other_mode_sps;  /* closed loop in the other mode; <= 0: not run */
	/* Added: is the machine busy? (<= 0: unknown) */
	double loadavg;         /* 1-minute load average */
	uint32_t cpus;          /* CPUs this process may use */
	double median_batch_us; /* the loop's median batch (pool call + policy) */
	double mean_batch_us;   /* the loop's mean batch: window / batches */
	/* Added: the fastest and slowest worker of the envs-only run, env + ring
	 * ns per env step (<= 0: not measured), with their index and CPU (< 0:
	 * not bound to one). A sync batch waits for the slowest. */
	double worker_fast_ns, worker_slow_ns;
	uint32_t worker_fast, worker_slow;
	int32_t worker_slow_cpu;
	/* Added: the envs-only run's cpu_balance (slowest / fastest CPU's raw
	 * env loop, all the workers' CPUs at once, no pool; <= 0: not
	 * measured). Below 1 / TUNE_WORKER_SPREAD the CPUs themselves differ. */
	double cpu_balance;
	/* Added: the closed loop's sr_pool_info.batch_groups (async: 0 means
	 * per-env queues, a send and a recv touch every row). */
	uint32_t batch_groups;
};

/* Workers further apart than this (slowest / fastest, per env step) are
 * called out in a sync verdict. */
#define TUNE_WORKER_SPREAD 1.15

#define TUNE_MAX_LINES 10
#define TUNE_LINE 256

struct tune_verdict {
	enum tune_bound bound;
	double expected_sps; /* what env and policy alone would allow */
	double loop_vs_expected;
	int nwhy, nadvice;
	char why[TUNE_MAX_LINES][TUNE_LINE];    /* the numbers behind it */
	char advice[TUNE_MAX_LINES][TUNE_LINE]; /* what to change */
};

/** Name of a verdict: "env-bound", "policy/GPU-bound", "copy-bound", "sync-bound". */
const char *tune_verdict_name(enum tune_bound b);

/**
 * The diagnose verdict (see docs/tuning.md for the rules and examples),
 * from the closed loop's wall-clock shares: sync-bound when waiting takes
 * >= 30% of a batch and is either its largest share or the loop reaches
 * < 60% of what envs and policy alone allow; else copy-bound when ring +
 * copy outweigh both env and policy; else policy-bound when policy
 * outweighs env; else env-bound. The "alone" figures are reported with
 * the verdict and steer the advice. A busy machine (load average above
 * the CPUs) and a mean batch well above the median one (>= 30% of the
 * time in slow outliers: preemption) are reported as such.
 */
void tune_diagnose(const struct tune_diag_in *in, struct tune_verdict *v);
/** Print a verdict block ("verdict: ...", "  because ...", "  try ..."). */
void tune_print_verdict(FILE *f, const struct tune_verdict *v);

/* Progress on stderr: a bar that redraws itself on a terminal, one plain
 * line per step otherwise. @total 0 means unknown (auto series). */
struct tune_progress {
	bool tty;
	bool enabled;
	unsigned done, total;
};

void tune_progress_init(struct tune_progress *p, unsigned total, bool enabled);
void tune_progress_step(struct tune_progress *p, const char *what);
void tune_progress_end(struct tune_progress *p);

struct bench_pool_result;
/* Wall-clock shares of one batch from a pool benchmark result; copy is
 * the trainer thread's collect and (async) send time. */
void tune_result_shares(const struct bench_pool_result *r, struct tune_shares *sh);

#endif
