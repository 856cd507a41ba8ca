/*
 * What a pool's snapshot (snapshot.c) and its restore (restore.c) share:
 * the layouts of the pool's own sections of a checkpoint file (the
 * format's fixed sizes are in ckpt_internal.h) and the rules both apply.
 */
#ifndef SR_SNAPSHOT_PVT_H
#define SR_SNAPSHOT_PVT_H

#include "ckpt_internal.h"
#include "pool_internal.h"

struct ckpt_stats_sect {
	uint64_t steps;
	uint64_t episodes;
	uint64_t batches;
	double ep_ret[SR__EPWIN];
	double ep_len[SR__EPWIN];
	uint64_t reserved[8];
};

struct ckpt_runtime_sect {
	uint64_t ring_head;
	uint64_t ring_cursor;
	uint64_t spec_params[8];
	uint64_t reserved[8];
};

_Static_assert(sizeof(struct sr__ckpt_env_rec) == SR__CKPT_ENV_REC_SIZE, "env record size");
_Static_assert(sizeof(struct ckpt_stats_sect) == SR__CKPT_STATS_SIZE, "stats section size");
_Static_assert(sizeof(struct ckpt_runtime_sect) == SR__CKPT_RUNTIME_SIZE, "runtime section size");
_Static_assert(SR__EPWIN == 100, "stats section size assumes a window of 100");

/* Bytes of one env in the env states section: its state bytes; for an
 * opaque env (ABI v2) a u64 length (host order, like the other sections)
 * and save_max bytes of what its save() wrote (zero padded to 8). */
static inline size_t sr__snap_env_rec_bytes(const sr_env_spec *s)
{
	return sr_env_is_opaque(s) ? 8 + (size_t)sr__align_up(s->save_max, 8) : s->state_size;
}

/* Envs serialized by their worker program (SR_ENV_F_FOREIGN, Python): each
 * record is a u64 length and that many bytes, like an opaque env's, padded
 * to the longest record of the checkpoint (the pool section's state_size). */
static inline bool sr__snap_foreign(const sr_pool *p)
{
	return (p->cfg.spec.flags & SR_ENV_F_FOREIGN) != 0;
}

/* Async pools are checkpointed (and restored) with nothing in flight. */
static inline int sr__snap_idle(const sr_pool *p, const char *what)
{
	if (p->cfg.async && p->flight.n_inflight)
		return sr__errorf(-EBUSY,
				  "%s: %u envs have steps in flight; receive them first (async "
				  "pools are checkpointed when nothing is in flight)",
				  what, p->flight.n_inflight);
	return 0;
}

/* Wait for this pool's checkpoint in flight, if any (its result is kept
 * for sr_pool_checkpoint_poll / _wait). */
void sr__pool_ckpt_finish(sr_pool *p);

#endif
