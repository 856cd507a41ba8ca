/*
 * stepring replay samplers over a transition ring (stepring/ring.h).
 *
 * A sampler reads any live slot of a ring (its own, or one attached
 * read-only from another process) and copies transitions into caller
 * buffers. It never returns a torn transition: every slot it reads is
 * checked before and after the copy (sr_ring_slot_valid, seqlock style);
 * a slot overwritten meanwhile is skipped and another one drawn.
 *
 * Transition: a sampled item is identified by the ring sequence e of its
 * LAST slot (the slot holding s'). Walking back along prev links gives the
 * slots x_0 ... x_m = e (1 <= m <= n_step) of one env:
 *   obs      = obs[x_0]             (s)
 *   action   = action[x_1]          (a, taken in s)
 *   reward   = sum_{k=1..m} gamma^(k-1) * reward[x_k]   (n-step return)
 *   next_obs = obs[e]               (s')
 *   terminated/truncated = those of e, discount = gamma^m
 * The walk stops (m < n_step) at the start of an episode (a FIRST slot or
 * SR_RING_NO_PREV), at the end of an earlier episode (a terminated or
 * truncated slot), or at a slot that is no longer live. A slot is a
 * transition when it is published, not SR_SLOT_PAD, not SR_SLOT_FIRST, and
 * its prev slot is still live. A target is then
 *   reward + discount * (1 - terminated) * V(next_obs).
 *
 * Uniform sampling draws uniformly among live transitions (rejection over
 * the window). Prioritized sampling (Schaul et al. 2016) keeps a sum-tree
 * of p^alpha in double over the ring's slots: new transitions enter at the
 * largest priority seen so far, an update is O(log capacity), each batch
 * is drawn stratified (one draw per equal slice of the total), and the
 * importance weights (N * P(i))^-beta are divided by the largest weight of
 * the batch.
 *
 * Samples-per-insert limiter (as in Reverb's SampleToInsertRatio): with
 * spi = samples_per_insert, diff = spi * inserts - samples must stay in
 * [spi * min_size - error_buffer, spi * min_size + error_buffer]. A sample
 * of n is allowed when inserts >= min_size and diff - n stays above the
 * lower bound; sr_replay_can_insert() tells a producer whether inserting n
 * more keeps diff under the upper bound. Inserts are the transitions the
 * sampler has seen published (sr_replay_sync).
 *
 * Thread safety: one sampler is used by one thread at a time; any number
 * of samplers (threads, processes) may read one ring while it is written.
 */
#ifndef STEPRING_REPLAY_H
#define STEPRING_REPLAY_H

#include "stepring/common.h"
#include "stepring/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

enum sr_replay_kind {
	SR_REPLAY_UNIFORM = 0,
	SR_REPLAY_PRIORITIZED = 1,
};

/* sr_replay_opts.flags: which optional members are set. */
enum {
	SR_REPLAY_F_SEED = 1u << 0,     /* seed (default 0) */
	SR_REPLAY_F_NSTEP = 1u << 1,    /* n_step, gamma (default 1, 0.99) */
	SR_REPLAY_F_PRIORITY = 1u << 2, /* alpha, beta, eps (default 0.6, 0.4, 1e-6) */
	SR_REPLAY_F_LIMITER = 1u << 3,  /* samples_per_insert, min_size, error_buffer, timeout_ms */
};

typedef struct sr_replay_opts {
	uint32_t flags;     /* SR_REPLAY_F_* */
	uint32_t kind;      /* enum sr_replay_kind */
	uint64_t seed;
	uint32_t n_step;    /* >= 1 */
	uint32_t reserved0;
	double gamma;       /* [0, 1] */
	double alpha;       /* >= 0: 0 is uniform, 1 fully prioritized */
	double beta;        /* [0, 1]: importance-weight exponent */
	double eps;         /* > 0 added to updated priorities */
	double samples_per_insert; /* > 0 */
	uint64_t min_size;  /* inserts before the first sample */
	double error_buffer; /* >= 0 */
	int32_t timeout_ms; /* limiter: 0 -> -EAGAIN at once, < 0 wait forever, > 0 wait at most */
	uint32_t reserved1;
} sr_replay_opts;

/** Defaults: uniform, seed 0, 1-step, gamma 0.99, no limiter. */
SR_EXPORT void sr_replay_opts_init(sr_replay_opts *o);

/* Caller buffers for n rows; any pointer may be NULL to skip that field. */
typedef struct sr_replay_batch {
	float *obs;          /* n * obs_dim */
	float *next_obs;     /* n * obs_dim */
	void *action;        /* n * act_size bytes */
	float *reward;       /* n: n-step discounted return */
	float *discount;     /* n: gamma^m */
	uint8_t *terminated; /* n */
	uint8_t *truncated;  /* n */
	uint32_t *env_id;    /* n */
	uint64_t *seq;       /* n: key for sr_replay_update */
	float *weight;       /* n: importance weights (1 for uniform) */
} sr_replay_batch;

/* Caller buffers for n sequences of k consecutive slots of one env, oldest
 * first (row i, step j at index i * k + j); any pointer may be NULL. */
typedef struct sr_replay_seq_batch {
	float *obs;          /* n * k * obs_dim */
	void *action;        /* n * k * act_size (the action that led to the obs) */
	float *reward;       /* n * k */
	uint8_t *terminated; /* n * k */
	uint8_t *truncated;  /* n * k */
	uint8_t *flags;      /* n * k: SR_SLOT_* (FIRST marks a reset obs) */
	uint32_t *env_id;    /* n */
	uint64_t *seq;       /* n * k: ring sequence of each step */
} sr_replay_seq_batch;

typedef struct sr_replay sr_replay;

/**
 * Create a sampler over @ring (which must outlive it). Allocates the
 * sum-tree for SR_REPLAY_PRIORITIZED (16 bytes per ring slot) plus 8 bytes
 * per slot of bookkeeping. Returns 0, -EINVAL (bad option, unknown flag or
 * kind; the message names it), -ENOMEM.
 */
SR_EXPORT int sr_replay_create(sr_ring *ring, const sr_replay_opts *opts, sr_replay **out);
/** Free the sampler. NULL is a no-op. */
SR_EXPORT void sr_replay_destroy(sr_replay *s);

/**
 * Take in the transitions published since the last call (prioritized: at
 * the largest priority so far) and count them as inserts. Called by every
 * sample function; call it yourself to update the limiter. Returns the
 * number of new transitions (>= 0).
 */
SR_EXPORT int64_t sr_replay_sync(sr_replay *s);

/**
 * Sample @n transitions into @b. Returns @n, -EAGAIN (the limiter refused
 * within timeout_ms, or there are no live transitions, or too many draws hit
 * overwritten slots: try again), -EINVAL (n == 0 or b NULL).
 */
SR_EXPORT int sr_replay_sample(sr_replay *s, uint32_t n, const sr_replay_batch *b);

/**
 * Prioritized: set the priority of the transitions @seq (from a sample) to
 * (|prio| + eps)^alpha. Keys no longer live are ignored. Returns the number
 * updated, or -EINVAL (not a prioritized sampler, NaN priority).
 */
SR_EXPORT int sr_replay_update(sr_replay *s, const uint64_t *seq, const float *prio, uint32_t n);

/**
 * Sample @n sequences of @k consecutive steps of one env (within one
 * episode; uniform over live end slots that have k - 1 live predecessors).
 * Returns @n, -EAGAIN (as sr_replay_sample), -EINVAL (k == 0 or
 * k > capacity).
 */
SR_EXPORT int sr_replay_sample_seq(sr_replay *s, uint32_t n, uint32_t k,
				   const sr_replay_seq_batch *b);

/** Limiter: may a producer insert @n more transitions now? Always true
 * without a limiter. */
SR_EXPORT bool sr_replay_can_insert(const sr_replay *s, uint64_t n);

/*
 * What a sampler has seen. The caller sets @size to sizeof(sr_replay_info)
 * (the struct may grow at the end: an older caller's shorter struct gets
 * what it knows, a newer caller's longer one gets zeroes beyond).
 */
typedef struct sr_replay_info {
	uint32_t size;           /* set by the caller */
	uint32_t kind;           /* enum sr_replay_kind */
	uint64_t inserts;        /* transitions seen (synced from the ring) */
	uint64_t samples;        /* transitions returned by the sample calls */
	uint64_t live;           /* prioritized: leaves with priority > 0 (0 for uniform) */
	double total_priority;   /* prioritized: sum of p^alpha over live leaves (0 for uniform) */
} sr_replay_info;

/** Fill @info. Returns 0, or -EINVAL (NULL, or info->size smaller than
 * its first four fields). Counters are relaxed loads: consistent each, not
 * with one another while producers and samplers run. Any thread. */
SR_EXPORT int sr_replay_info_get(const sr_replay *s, sr_replay_info *info);

#ifdef __cplusplus
}
#endif
#endif
