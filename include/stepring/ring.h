/*
 * stepring shared-memory transition ring (the replay window).
 *
 * One segment: a header (magic, format version, geometry, column offsets,
 * counters each on its own 128-byte line) followed by one column per field
 * (struct of arrays). Offsets, never pointers, inside shared memory.
 *
 * A slot holds one env step's output for one env: the observation after the
 * step (obs), the action that led to it, the reward, terminated, truncated,
 * flags (SR_SLOT_FIRST for a reset observation, SR_SLOT_PAD for filler),
 * env_id, and prev = the sequence number of the previous slot of the same
 * env (SR_RING_NO_PREV at the start of an episode). So (s, a, r, s') of a
 * transition at slot q is (obs[prev[q]], action[q], reward[q], obs[q]).
 *
 * Sequence numbers are free-running uint64; slot = seq & (capacity - 1).
 *
 * Producers (many threads) reserve a range with one atomic, write the
 * columns outside any lock, and publish per slot. The single consumer (the
 * collector) takes the longest contiguous published range from its cursor.
 * Producers never overwrite a slot the consumer has not consumed yet
 * (reserve waits, try_reserve says -EAGAIN); consumed slots stay readable
 * as the replay window until a producer laps them. Readers of old slots
 * (samplers, other processes) check the slot's publish sequence before and
 * after reading and never return a torn transition.
 */
#ifndef STEPRING_RING_H
#define STEPRING_RING_H

#include "stepring/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SR_RING_MAGIC 0x474e495250455453ull /* "STEPRING" little endian */
#define SR_RING_FORMAT_VERSION 2u
#define SR_RING_NO_PREV UINT64_MAX

/* Bits of the flags column. */
enum {
	SR_SLOT_FIRST = 1u << 0, /* first obs of an episode (reset); action/reward unused */
	SR_SLOT_PAD = 1u << 1,   /* filler written by SR_RESERVE_CONTIG; never a transition */
	SR_SLOT_FINAL = 1u << 2, /* obs is the final obs of an episode (same-step autoreset) */
	SR_SLOT_FAULT = 1u << 3, /* the env's worker process died or hung during this step:
				  * truncated = 1, prev SR_RING_NO_PREV, obs zero; not a
				  * transition. The env restarts with a reset row next. */
	SR_SLOT_NONFINITE = 1u << 4, /* the pool's finite check (SR_POOL_F_CHECK_FINITE, on
				      * by default) found a NaN or an infinity in this
				      * row's obs or reward. The values are left as the env
				      * wrote them and the row keeps its other flags and
				      * links: mask it out of training (docs/envs.md). */
};

/* sr_ring_create flags */
enum {
	SR_RING_SHM = 1u << 0, /* name the segment in /dev/shm so other processes can attach */
};
/* sr_ring_attach flags */
enum {
	SR_RING_RDWR = 1u << 0, /* attach read-write (default: read-only) */
};
/* sr_ring_reserve flags */
enum {
	SR_RESERVE_CONTIG = 1u << 0, /* the range must not wrap: pad to the next lap if needed */
};

typedef struct sr_ring sr_ring;

typedef struct sr_ring_opts {
	uint32_t flags;      /* SR_RING_* */
	uint32_t obs_dim;    /* float32 per obs, >= 1 */
	uint32_t act_size;   /* bytes per action, >= 1 (sr_env_action_size) */
	uint32_t reserved0;
	uint64_t capacity;   /* slots; a power of two >= 2 */
	const char *name;    /* with SR_RING_SHM: segment name ("/sr-foo" or "sr-foo") */
} sr_ring_opts;

/** Bytes of a segment for @opts (header plus columns, page aligned). */
SR_EXPORT size_t sr_ring_memsize(const sr_ring_opts *opts);

/**
 * Create a ring in a new segment (memfd, or shm_open mode 0600 with
 * SR_RING_SHM), pre-faulted so that a too-small /dev/shm fails here and not
 * later with SIGBUS. Returns 0, -EINVAL (bad geometry), -EEXIST (name taken),
 * -ENOMEM/-ENOSPC (no memory for the segment).
 */
SR_EXPORT int sr_ring_create(const sr_ring_opts *opts, sr_ring **out);

/**
 * Attach to a named ring made by another process. Validates magic, format
 * version and geometry before trusting anything. Read-only unless
 * SR_RING_RDWR. Returns 0, -ENOENT (no such name), -EPROTO (another format
 * version: the message names both), -EBADMSG (not a ring, or a geometry
 * that does not fit the segment size), -EAGAIN (the creator has not
 * finished initialising it), -EACCES (permissions).
 */
SR_EXPORT int sr_ring_attach(const char *name, unsigned flags, sr_ring **out);

/** Unmap; the creator also unlinks a named segment. NULL is a no-op. */
SR_EXPORT void sr_ring_destroy(sr_ring *r);

/** Remove a named segment left by a crashed owner. 0 or -errno. */
SR_EXPORT int sr_ring_unlink(const char *name);

/* Geometry. */
SR_EXPORT uint64_t sr_ring_capacity(const sr_ring *r);
SR_EXPORT uint32_t sr_ring_obs_dim(const sr_ring *r);
SR_EXPORT uint32_t sr_ring_act_size(const sr_ring *r);

/* Column base pointers (slot 0); slot s of a column is base + s * width. */
SR_EXPORT float *sr_ring_obs_col(const sr_ring *r);
SR_EXPORT uint8_t *sr_ring_action_col(const sr_ring *r);
SR_EXPORT float *sr_ring_reward_col(const sr_ring *r);
SR_EXPORT uint8_t *sr_ring_terminated_col(const sr_ring *r);
SR_EXPORT uint8_t *sr_ring_truncated_col(const sr_ring *r);
SR_EXPORT uint8_t *sr_ring_flags_col(const sr_ring *r);
SR_EXPORT uint32_t *sr_ring_env_id_col(const sr_ring *r);
SR_EXPORT uint64_t *sr_ring_prev_col(const sr_ring *r);

/**
 * Producer: reserve @n consecutive slots; *@seq gets the first sequence
 * number. With SR_RESERVE_CONTIG the range does not wrap (slots up to the
 * end of the lap are published as SR_SLOT_PAD filler). Waits while the
 * range would overwrite unconsumed slots. Returns 0 or -EINVAL (n == 0 or
 * n > capacity), -EPERM (ring attached read-only). Thread safe (many
 * producers, also in other processes attached with SR_RING_RDWR).
 * sr_ring_try_reserve returns -EAGAIN instead of waiting (with
 * SR_RESERVE_CONTIG it may have published the lap-end filler first).
 * Progress: reserve is lock-free against other producers but blocks while
 * the consumer lags by a full capacity (spin, sched_yield, then 50 us
 * sleeps). After reserve the slots read as unpublished (sr_ring_slot_valid
 * is false for their new sequence numbers, and for the previous lap's,
 * which the reservation claimed) until sr_ring_publish. Reserve does not
 * write the slots' seq words, so a range can be split among several writer
 * threads, each writing and publishing its part: a writer that is not the
 * reserving thread must be handed the range with release / acquire (as a
 * queue or a flag does) and issue a release fence before its first column
 * write (R3 in the ring's design notes).
 */
SR_EXPORT int sr_ring_reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq);
SR_EXPORT int sr_ring_try_reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq);

/** Producer: publish slots [seq, seq + n) after writing their columns
 * (release: the writes before it are visible to a reader that sees it). */
SR_EXPORT void sr_ring_publish(sr_ring *r, uint64_t seq, uint32_t n);

/**
 * Consumer (one thread): the longest contiguous published range from the
 * consumer cursor, at most @max slots, without consuming it. *@first gets
 * its first sequence number. Returns the count (0 if nothing is ready).
 * The range may wrap: columns are then copied in two pieces. The range can
 * contain SR_SLOT_PAD filler slots (from SR_RESERVE_CONTIG): skip them.
 * Needs a writable handle (the creator's, or attached SR_RING_RDWR).
 */
SR_EXPORT uint32_t sr_ring_peek(sr_ring *r, uint32_t max, uint64_t *first);
/** Consumer: advance the cursor by @n (after peek); producers may then
 * reuse them. Returns 0, or -EINVAL (cursor unchanged) when the @n slots
 * from the cursor are not all published: never more than peek returned. */
SR_EXPORT int sr_ring_consume(sr_ring *r, uint32_t n);

/** Counters: next sequence to reserve (head) and the consumer cursor
 * (acquire loads). The oldest sequence still readable is head - capacity
 * (or 0), see sr_ring_info. */
SR_EXPORT uint64_t sr_ring_head(const sr_ring *r);
SR_EXPORT uint64_t sr_ring_cursor(const sr_ring *r);

/**
 * Is slot @seq still the transition published under @seq? Seqlock style:
 * a reader calls it before copying (false: not published yet, or already
 * overwritten), copies what it needs, then calls it again: false means the
 * slot was claimed by a producer meanwhile (head passed seq + capacity, or
 * the slot reads unpublished) and the copy may be torn (retry or skip).
 * Acquire ordering pairs with sr_ring_publish's release; an acquire fence
 * orders the caller's earlier reads before the check. Any thread, any
 * process (read-only attach is enough). Wait-free.
 */
SR_EXPORT bool sr_ring_slot_valid(const sr_ring *r, uint64_t seq);

/* What a segment holds (sr_ring_info.kind). */
enum sr_segment_kind {
	SR_SEGMENT_OTHER = 0, /* not a stepring segment (or too short to tell) */
	SR_SEGMENT_RING = 1,  /* a ring (of sr_ring_info.version) */
	SR_SEGMENT_STATS = 2, /* a pool's statistics block (stepring/stats.h) */
};

/* sr_ring_info.flags */
enum {
	SR_RING_INFO_ALIVE = 1u << 0,     /* a creator holds the segment's lock */
	SR_RING_INFO_COMPLETE = 1u << 1,  /* the creator finished setting it up */
	SR_RING_INFO_READ_ONLY = 1u << 2, /* sr_ring_info_get: attached without SR_RING_RDWR
					   * (producer and consumer calls are refused) */
	SR_RING_INFO_OWNER = 1u << 3,     /* sr_ring_info_get: this handle created it */
};

/* Columns in sr_ring_info.offsets, in segment order. */
enum {
	SR_RING_COL_OBS = 0,
	SR_RING_COL_ACTION,
	SR_RING_COL_REWARD,
	SR_RING_COL_TERMINATED,
	SR_RING_COL_TRUNCATED,
	SR_RING_COL_FLAGS,
	SR_RING_COL_ENV_ID,
	SR_RING_COL_PREV,
	SR_RING_COL_SEQ, /* the publish sequence words */
	SR_RING_NCOLS,
};

/*
 * A ring, or what a named segment holds. The caller sets @size to
 * sizeof(sr_ring_info) before the call: the library fills what both sides
 * know and zeroes the rest, so members can be appended in later versions
 * without breaking older callers.
 */
typedef struct sr_ring_info {
	uint32_t size;          /* in: sizeof(sr_ring_info) as the caller knows it */
	uint32_t kind;          /* enum sr_segment_kind */
	uint32_t version;       /* segment format version (SR_RING_FORMAT_VERSION) */
	uint32_t flags;         /* SR_RING_INFO_* */
	uint64_t capacity;      /* slots */
	uint32_t obs_dim;
	uint32_t act_size;
	uint32_t header_bytes;
	uint32_t uid;           /* owner of the segment file (named rings) */
	uint64_t bytes;         /* the whole segment (the mapping of a handle) */
	void *base;             /* sr_ring_info_get: where it is mapped (NULL from probe) */
	int64_t creator_pid;    /* as the creator saw itself (its PID namespace) */
	uint64_t create_time;   /* CLOCK_REALTIME seconds */
	uint64_t head;          /* next sequence to reserve */
	uint64_t cursor;        /* consumer cursor */
	uint64_t oldest;        /* oldest readable sequence: head - capacity, or 0 */
	uint64_t reserve_waits; /* producers that had to wait for room */
	uint64_t pad_slots;     /* SR_SLOT_PAD filler slots written */
	uint64_t consumed_batches; /* sr_ring_consume calls with n > 0 */
	uint64_t offsets[SR_RING_NCOLS]; /* of each column from the segment base */
	char name[256];         /* "/sr-foo" ("" for an anonymous ring) */
} sr_ring_info;

/**
 * Geometry, counters and identity of @r (the counters are one snapshot of
 * independent relaxed loads). Returns 0, or -EINVAL (NULL, or @info->size
 * smaller than the members up to @flags). Thread safe.
 */
SR_EXPORT int sr_ring_info_get(const sr_ring *r, sr_ring_info *info);

/**
 * What the shared-memory segment @name ("sr-foo" or "/sr-foo") holds, read
 * with pread without mapping it (a segment truncated meanwhile reads short,
 * never SIGBUS), and whether its creator is alive (its lock, which works
 * across PID namespaces). @info->kind says ring, statistics block or
 * other; for a ring of another format version only kind, version and the
 * liveness are filled. Returns 0, -EINVAL (bad name or @info), -ENOENT (no
 * such segment), -EACCES/-EPERM (another user's), -EIO. Thread safe.
 */
SR_EXPORT int sr_ring_probe(const char *name, sr_ring_info *info);

#ifdef __cplusplus
}
#endif
#endif
