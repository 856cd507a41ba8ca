/*
 * Snapshot and restore of a pool: sr_pool_checkpoint*, sr_pool_restore.
 *
 * DESIGN
 *
 * Snapshot (the pool thread, at a quiescent point: between sync steps, or
 * in async mode with nothing in flight; see runtime/pool_internal.h): the
 * small state is copied into one heap buffer: the pool section (options
 * and geometry), every env's state bytes (its RNG included), its
 * bookkeeping (elapsed steps, done flags, ring sequence of its last slot)
 * and episode accumulators, the pool statistics and the ring counters
 * (head, cursor). That is num_envs * (state_size + ~48) bytes: microseconds.
 *
 * The replay window (SR_CKPT_F_REPLAY) can be gigabytes, so it is NOT
 * copied at the snapshot. The snapshot records head H and the window
 * [W, H) with W = max(H - capacity, 0); the writer thread then reads the
 * ring columns straight from the shared segment, block by block, oldest
 * first, while the pool keeps stepping and overwriting the oldest slots.
 * Each block is copied with the ring's seqlock rule (R3 in
 * replay/ring_internal.h): copy the columns, acquire fence, re-check each
 * slot's publish sequence; a slot whose sequence changed was (being)
 * overwritten, so the saved window starts after it (first_valid in the
 * replay_meta section, which is written after the replay section). Blocks
 * are copied oldest first, the order in which producers lap them, so the
 * loss is at most what the producers overwrite during the write, and
 * nothing torn is ever kept. The pool never stops for the window.
 *
 * Blocks: the replay section is a sequence of blocks of chunk_size bytes
 * (the writer's piece size, so each fill() call produces exactly one
 * block): chunk_slots = chunk_size / slot_bytes slots, column after
 * column (obs, action, reward, terminated, truncated, flags, env_id,
 * prev), zero padded; the last block is not padded.
 *
 * Restore opens the file once; the verify pass (every CRC) and every later
 * read go through that descriptor, so a checkpoint replaced by rename
 * meanwhile is not seen. It reads everything into memory before changing
 * anything: the small sections, and the replay section into a staging
 * area of its size; each section's CRC is re-checked over the bytes read
 * (a file rewritten in place, or a read error, fails here). Geometry and
 * sizes are checked too. Only then does it write the env states,
 * bookkeeping, statistics, the staged window and the ring counters, which
 * cannot fail: a restore either completes or leaves the pool untouched.
 *
 * The checkpoint state is a member of the pool (p->ckpt, made at the first
 * checkpoint; every call on it comes from the pool thread, so it needs no
 * lock); sr__pool_ckpt_close() (called by sr_pool_destroy) waits for a
 * checkpoint in flight before the ring it reads goes away.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sr_base.h"
#include "ckpt_internal.h"
#include "pool_internal.h"
#include "ring_internal.h"

#define SR_CKPT_KNOWN_FLAGS                                                                \
	(SR_CKPT_F_BACKEND | SR_CKPT_F_REPLAY | SR_CKPT_F_NOWAIT | SR_CKPT_F_DIRECT |      \
	 SR_CKPT_F_CHUNK | SR_CKPT_F_NICE | SR_CKPT_F_NO_STAGE | SR_CKPT_F_BUFFERED)

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

struct replay_ctx {
	sr_ring *r;
	uint64_t first, head;
	uint64_t chunk_slots;
	size_t blk;
	size_t slot_bytes;
	uint8_t *stage;     /* staged copy of the window, or NULL: straight from the ring */
	uint64_t skip_to;   /* blocks below were lapped before being copied */
	size_t stage_len;
	struct sr__ckpt_replay_meta meta;
};

struct sr__pool_ckpt {
	sr_pool *pool; /* the pool this is a member of */
	sr__ckpt_job *job;
	void *snap;
	struct replay_ctx rc;
	sr_ckpt_status st;
	uint64_t t_start;
	bool unreported;  /* st.result is a failure nobody has been told of */
	/* Staging memory kept from one checkpoint to the next: first-touch
	 * page faults are the expensive part of a staged copy. */
	uint8_t *stage_cache;
	size_t stage_cache_len;
	char errmsg[512];
};

/* The pool's checkpoint state (p->ckpt), made at its first checkpoint. */
static struct sr__pool_ckpt *ckpt_state(sr_pool *p, bool create)
{
	if (!p->ckpt && create) {
		p->ckpt = calloc(1, sizeof(*p->ckpt));
		if (p->ckpt)
			p->ckpt->pool = p;
	}
	return p->ckpt;
}

static void shm_state(sr_pool *p, uint32_t state)
{
	if (p->shm.blk)
		__atomic_store_n(&p->shm.blk->ckpt_state, state, __ATOMIC_RELAXED);
}

/* Collect the finished job of @c (if any): result, status, memory. */
static int finish_job(struct sr__pool_ckpt *c, bool wait)
{
	int err;

	if (!c->job)
		return 0;
	err = wait ? sr__ckpt_job_wait(c->job) : sr__ckpt_job_poll(c->job);
	if (err == -EINPROGRESS)
		return err;
	c->st.result = err;
	c->st.backend = sr__ckpt_job_backend(c->job);
	c->st.ns_write = sr__ckpt_job_ns(c->job);
	c->st.bytes = sr__ckpt_job_size(c->job);
	c->st.replay_slots = c->rc.r ? c->rc.head - c->rc.meta.first_valid : 0;
	c->st.replay_dropped = c->rc.r ? c->rc.meta.first_valid - c->rc.first : 0;
	if (!err)
		c->st.count++;
	c->unreported = err != 0;
	if (err)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", sr_last_error());
	c->st.state = err ? SR_CKPT_STATE_FAILED : SR_CKPT_STATE_IDLE;
	sr__ckpt_job_destroy(c->job);
	c->job = NULL;
	free(c->snap);
	c->snap = NULL;
	memset(&c->rc, 0, sizeof(c->rc)); /* the stage stays in stage_cache */
	shm_state(c->pool, c->st.state);
	if (c->pool->shm.blk && !err) {
		__atomic_store_n(&c->pool->shm.blk->ckpt_count, c->st.count, __ATOMIC_RELAXED);
		__atomic_store_n(&c->pool->shm.blk->ckpt_bytes, c->st.bytes, __ATOMIC_RELAXED);
	}
	return err;
}

void sr__pool_ckpt_close(sr_pool *p)
{
	struct sr__pool_ckpt *c = p->ckpt;

	if (!c)
		return;
	finish_job(c, true);
	if (c->stage_cache)
		munmap(c->stage_cache, c->stage_cache_len);
	free(c);
	p->ckpt = NULL;
}

/* ---- snapshot -------------------------------------------------------------- */

static size_t slot_bytes(uint32_t obs_dim, uint32_t act_size)
{
	return (size_t)obs_dim * 4 + act_size + 4 + 1 + 1 + 1 + 4 + 8;
}

/* Copy slots [s0, s0 + n) of a column of @width bytes, in at most two
 * pieces at the wrap. The slots may be overwritten meanwhile: the caller
 * re-checks them (R3), so the copy goes through sr__racy_copy. */
static uint8_t *col_out(const struct replay_ctx *rc, uint8_t *dst, const void *col,
			size_t width, uint64_t s0, uint64_t n)
{
	uint64_t cap = rc->r->cap, i = s0 & (cap - 1);
	uint64_t first = n < cap - i ? n : cap - i;

	sr__racy_copy(dst, (const uint8_t *)col + i * width, first * width);
	if (n > first)
		sr__racy_copy(dst + first * width, col, (n - first) * width);
	return dst + n * width;
}

/* The producers caught up with the copy (they lap the window from its
 * oldest end too): copying on behind them would lose every block. Jump
 * ahead of them by a quarter of what is left; the skipped blocks are
 * written as zeros and discarded by first_valid. */
static void skip_ahead(struct replay_ctx *rc)
{
	uint64_t h = sr_ring_head(rc->r), cap = rc->r->cap;
	uint64_t oldest = h > cap ? h - cap : 0, target, b;

	if (oldest >= rc->head) {
		target = rc->head;
	} else {
		target = oldest + (rc->head - oldest) / 4;
		if (target < rc->first)
			target = rc->first;
	}
	b = (target - rc->first + rc->chunk_slots - 1) / rc->chunk_slots;
	if (b > rc->skip_to)
		rc->skip_to = b;
	target = rc->first + b * rc->chunk_slots;
	if (target > rc->head)
		target = rc->head;
	if (target > rc->meta.first_valid)
		rc->meta.first_valid = target;
}

/* Copy block @b of the window into @dst (@len bytes, zero padded) and
 * move first_valid past any slot that changed while being copied. */
static void copy_block(struct replay_ctx *rc, uint8_t *dst, uint64_t b, size_t len)
{
	sr_ring *r = rc->r;
	uint64_t s0 = rc->first + b * rc->chunk_slots;
	uint64_t n = rc->head - s0 < rc->chunk_slots ? rc->head - s0 : rc->chunk_slots;
	uint8_t *d = dst;
	uint64_t bad = 0;
	bool any_bad = false;

	d = col_out(rc, d, r->obs, (size_t)r->obs_dim * 4, s0, n);
	d = col_out(rc, d, r->action, r->act_size, s0, n);
	d = col_out(rc, d, r->reward, 4, s0, n);
	d = col_out(rc, d, r->terminated, 1, s0, n);
	d = col_out(rc, d, r->truncated, 1, s0, n);
	d = col_out(rc, d, r->flags, 1, s0, n);
	d = col_out(rc, d, r->env_id, 4, s0, n);
	d = col_out(rc, d, r->prev, 8, s0, n);
	memset(d, 0, len - (size_t)(d - dst));
	/* R3 (replay/ring_internal.h): the column reads above happen before
	 * the re-check; a producer that had started to overwrite a slot had
	 * claimed it on head first, so the slots below the lap floor may be
	 * torn, and one whose sequence changed (or was never published) is
	 * not this window's. */
	atomic_thread_fence(memory_order_acquire);
	{
		uint64_t floor = sr__lap_floor(r);

		if (floor > s0) {
			bad = (floor < s0 + n ? floor : s0 + n) - 1;
			any_bad = true;
		}
	}
	for (uint64_t s = s0; s < s0 + n; s++) {
		if (atomic_load_explicit(&r->seq[s & r->mask], memory_order_relaxed) != s + 1) {
			bad = s;
			any_bad = true;
		}
	}
	if (any_bad) {
		if (bad + 1 > rc->meta.first_valid)
			rc->meta.first_valid = bad + 1;
		skip_ahead(rc);
	}
}

static size_t block_len(const struct replay_ctx *rc, uint64_t b)
{
	uint64_t s0 = rc->first + b * rc->chunk_slots;

	return rc->head - s0 < rc->chunk_slots ? (size_t)(rc->head - s0) * rc->slot_bytes
					       : rc->blk;
}

/* Writer thread, before the first write: copy the whole window into the
 * staging memory at memory speed, oldest block first, so the producers
 * (which lap the window far faster than a disk writes it) lose nothing. */
static int replay_prepare(void *ctx)
{
	struct replay_ctx *rc = ctx;

	if (!rc->stage)
		return 0;
	for (uint64_t b = 0; b * rc->chunk_slots < rc->head - rc->first; b++) {
		if (b < rc->skip_to) /* lapped: below first_valid, discarded */
			memset(rc->stage + b * rc->blk, 0, block_len(rc, b));
		else
			copy_block(rc, rc->stage + b * rc->blk, b, block_len(rc, b));
	}
	return 0;
}

/* Staged blocks are written from the staging memory itself (no copy into
 * the writer's buffers); the last, unpadded block goes through fill. */
static const void *replay_map(void *ctx, uint64_t off, size_t len)
{
	struct replay_ctx *rc = ctx;

	if (!rc->stage || off % rc->blk || len != rc->blk || off + len > rc->stage_len)
		return NULL;
	return rc->stage + off;
}

static int replay_fill(void *ctx, void *dst, uint64_t off, size_t len)
{
	struct replay_ctx *rc = ctx;
	uint64_t b = off / rc->blk;

	if (off % rc->blk || len != block_len(rc, b))
		return -EIO; /* cannot happen: the writer asks for whole blocks */
	if (rc->stage)
		memcpy(dst, rc->stage + off, len);
	else if (b < rc->skip_to)
		memset(dst, 0, len);
	else
		copy_block(rc, dst, b, len);
	return 0;
}

static uint64_t pool_steps(const sr_pool *p)
{
	uint64_t s = 0;

	for (uint32_t w = 0; w < p->cfg.num_threads; w++)
		s += atomic_load_explicit(&p->workers.w[w].steps, memory_order_relaxed);
	return s;
}

/* Bytes of one env in the env states section: its state bytes; for an
 * opaque env (ABI v2) a u64 length (host order, like the other sections)
 * and save_max bytes of what its save() wrote (zero padded to 8). */
static size_t env_rec_bytes(const sr_env_spec *s)
{
	return sr_env_is_opaque(s) ? 8 + (((size_t)s->save_max + 7) & ~(size_t)7) : s->state_size;
}

/* Envs serialized by their worker program (SR_ENV_F_FOREIGN, Python): each
 * record is a u64 length and that many bytes, like an opaque env's, padded
 * to the longest record of the checkpoint (the pool section's state_size). */
static bool foreign(const sr_pool *p)
{
	return (p->cfg.spec.flags & SR_ENV_F_FOREIGN) != 0;
}

/* The bytes per env of the env_states section for the records @er the
 * workers handed over, each checked against the env: a plain env's is
 * its state, an opaque env's at most save_max, a foreign env's at most
 * 1 MiB (what verify accepts). */
static int recs_bytes(const sr_pool *p, const struct sr__env_recs *er, size_t *rb)
{
	const sr_env_spec *s = &p->cfg.spec;
	uint64_t max = 0;

	for (uint32_t e = 0; e < er->n; e++) {
		uint64_t l = er->len[e];
		bool ok = sr_env_is_opaque(s) ? l <= s->save_max
			  : foreign(p)        ? l <= (1u << 20) - 8
					      : l == s->state_size;
		if (!ok)
			return sr__errorf(foreign(p) ? -EFBIG : -EBADMSG,
					  "checkpoint: env %u's saved state has %llu bytes%s", e,
					  (unsigned long long)l,
					  foreign(p) ? " (at most 1 MiB - 8 per env)"
						     : ", not what the env's spec says");
		if (l > max)
			max = l;
	}
	*rb = foreign(p) ? 8 + (size_t)((max + 7) & ~(uint64_t)7) : env_rec_bytes(s);
	return 0;
}

/* The records of the workers into the env_states section (@rb bytes per
 * env) and the bookkeeping into env_counters. */
static void snap_recs(const sr_pool *p, const struct sr__env_recs *er, size_t rb,
		      uint8_t *states, struct sr__ckpt_env_rec *recs)
{
	bool plain = !sr_env_is_opaque(&p->cfg.spec) && !foreign(p);

	for (uint32_t e = 0; e < er->n; e++) {
		uint8_t *d = states + (size_t)e * rb;

		recs[e] = er->env[e];
		if (plain) {
			memcpy(d, er->rec[e], rb);
		} else {
			memcpy(d, &er->len[e], 8);
			memcpy(d + 8, er->rec[e], (size_t)er->len[e]);
		}
	}
}

static void fill_pool_sect(const sr_pool *p, struct sr__ckpt_pool_sect *ps)
{
	memset(ps, 0, sizeof(*ps));
	snprintf(ps->env_id, sizeof(ps->env_id), "%s", p->cfg.spec.id);
	ps->num_envs = p->cfg.num_envs;
	ps->batch_size = p->cfg.batch_size;
	ps->num_threads = p->cfg.num_threads;
	ps->autoreset = p->cfg.autoreset;
	ps->obs_dim = p->cfg.obs_dim;
	ps->act_size = (uint32_t)p->cfg.act_size;
	ps->state_size = (uint32_t)env_rec_bytes(&p->cfg.spec); /* bytes per env in env_states */
	ps->act_kind = p->cfg.spec.act_kind;
	ps->pool_flags = p->cfg.keep_final ? SR_POOL_F_FINAL_OBS : 0;
	ps->max_episode_steps = p->cfg.spec.max_episode_steps;
	ps->seed = p->cfg.seed;
	ps->first_env = p->cfg.env_base;
	ps->steps = pool_steps(p);
	ps->ring_capacity = p->ring.cap;
}

static int check_async_idle(const sr_pool *p, const char *what)
{
	if (p->cfg.async && p->flight.n_inflight)
		return sr__errorf(-EBUSY,
				  "%s: %u envs have steps in flight; receive them first (async "
				  "pools are checkpointed when nothing is in flight)",
				  what, p->flight.n_inflight);
	return 0;
}

/* ---- sr_pool_checkpoint: options -> claim -> save (snapshot, replay window,
 * writer job) ---------------------------------------------------------------- */

/* @opts (NULL: defaults) into @o, with the chunk size filled in, and the
 * backend asked for. -EINVAL for flags or a backend not known. */
static int resolve_opts(const sr_ckpt_opts *opts, sr_ckpt_opts *o, uint32_t *backend)
{
	if (opts)
		*o = *opts;
	else
		sr_ckpt_opts_init(o);
	if (o->flags & ~(uint32_t)SR_CKPT_KNOWN_FLAGS)
		return sr__errorf(-EINVAL, "sr_pool_checkpoint: unknown flags 0x%x",
				  o->flags & ~(uint32_t)SR_CKPT_KNOWN_FLAGS);
	*backend = (o->flags & SR_CKPT_F_BACKEND) ? o->backend : SR_CKPT_BACKEND_AUTO;
	if (*backend > SR_CKPT_BACKEND_SYNC)
		return sr__errorf(-EINVAL, "sr_pool_checkpoint: unknown backend %u", *backend);
	if (!(o->flags & SR_CKPT_F_CHUNK))
		o->chunk_size = SR_CKPT_DEFAULT_CHUNK;
	o->flags |= SR_CKPT_F_CHUNK;
	return 0;
}

/* One checkpoint at a time per pool: finish the previous one (waiting for
 * it), or -EBUSY if it is still being written and the caller said NOWAIT. */
static int claim(struct sr__pool_ckpt *c, const sr_ckpt_opts *o)
{
	if (!c->job)
		return 0;
	if ((o->flags & SR_CKPT_F_NOWAIT) && sr__ckpt_job_poll(c->job) == -EINPROGRESS)
		return sr__errorf(-EBUSY,
				  "checkpoint: the previous checkpoint of this pool is still "
				  "being written (started %.2f s ago); wait for it or retry",
				  (double)(sr__now_ns() - c->t_start) / 1e9);
	finish_job(c, true);
	return 0;
}


/* Where each small section sits in the snapshot buffer. */
struct snap_layout {
	size_t nst; /* env state bytes */
	size_t off_states, off_envs, off_stats, off_rt, total;
};

static void snap_layout(const sr_pool *p, size_t rb, struct snap_layout *l)
{
	l->nst = (size_t)p->cfg.num_envs * rb;
	l->off_states = sizeof(struct sr__ckpt_pool_sect);
	l->off_envs = (l->off_states + l->nst + 63) & ~(size_t)63;
	l->off_stats = l->off_envs + (size_t)p->cfg.num_envs * sizeof(struct sr__ckpt_env_rec);
	l->off_rt = l->off_stats + sizeof(struct ckpt_stats_sect);
	l->total = l->off_rt + sizeof(struct ckpt_runtime_sect);
}

/* An opaque env's instances, serialized by its save() into their records
 * (the pool is quiescent: no worker touches them meanwhile). */
static int save_opaque(const sr_pool *p, const struct sr__worker *wk, uint8_t *states)
{
	const sr_env_spec *s = &p->cfg.spec;
	size_t rb = env_rec_bytes(s);

	for (uint32_t i = 0; i < wk->n_envs; i++) {
		uint8_t *rec = states + (size_t)(wk->first_env + i) * rb;
		size_t len = 0;
		int err = s->save(s, wk->slice.states + (size_t)i * s->state_size, rec + 8, s->save_max,
				  &len);
		if (err || len > s->save_max)
			return sr__errorf(err ? err : -EOVERFLOW,
					  "checkpoint: env %u ('%s') cannot be saved: %s",
					  wk->first_env + i, s->id,
					  err ? sr_strerror(err) : "save() wrote more than save_max");
		uint64_t l64 = len;
		memcpy(rec, &l64, 8);
	}
	return 0;
}

/* Every env's state bytes (or saved form) and bookkeeping, in env order. */
static int snap_envs(const sr_pool *p, uint8_t *states, struct sr__ckpt_env_rec *recs)
{
	size_t ssz = p->cfg.spec.state_size;

	for (uint32_t w = 0; w < p->cfg.num_threads; w++) {
		const struct sr__worker *wk = &p->workers.w[w];
		if (sr_env_is_opaque(&p->cfg.spec)) {
			int err = save_opaque(p, wk, states);
			if (err)
				return err;
		} else {
			memcpy(states + (size_t)wk->first_env * ssz, wk->slice.states,
			       (size_t)wk->n_envs * ssz);
		}
		for (uint32_t i = 0; i < wk->n_envs; i++) {
			sr__slice_rec_get(&wk->slice, i, &recs[wk->first_env + i]);
		}
	}
	return 0;
}

static void snap_stats(const sr_pool *p, struct ckpt_stats_sect *ss)
{
	ss->steps = pool_steps(p);
	ss->episodes = p->stats.episodes;
	ss->batches = p->stats.batches;
	memcpy(ss->ep_ret, p->stats.ret, sizeof(ss->ep_ret));
	memcpy(ss->ep_len, p->stats.len, sizeof(ss->ep_len));
}

#define SRC(t, l, d) ((struct sr__ckpt_src){.type = (t), .len = (l), .data = (d)})

/* Copy the small state into one buffer (c->snap) and append its five
 * sections to @src; *@rt_out: its runtime section (ring counters). */
static int snapshot(struct sr__pool_ckpt *c, struct sr__ckpt_src *src, uint32_t *n,
		    const struct ckpt_runtime_sect **rt_out)
{
	sr_pool *p = c->pool;
	struct snap_layout l;
	struct ckpt_runtime_sect *rt;
	struct sr__env_recs er;
	size_t rb = env_rec_bytes(&p->cfg.spec);
	uint8_t *snap;
	int err = 0;

	/* Envs in worker processes: they hand their records over first (a
	 * SAVE command), and the snapshot copies them like a thread pool's. */
	memset(&er, 0, sizeof(er));
	if (!p->workers.kind->local_state) {
		err = p->workers.kind->ckpt_save(p, &er);
		if (!err)
			err = recs_bytes(p, &er, &rb);
		if (err) {
			sr__env_recs_free(&er);
			return err;
		}
	}
	snap_layout(p, rb, &l);
	snap = calloc(1, l.total);
	if (!snap) {
		sr__env_recs_free(&er);
		return sr__errorf(-ENOMEM, "checkpoint: out of memory for the snapshot (%zu bytes)",
				  l.total);
	}
	fill_pool_sect(p, (struct sr__ckpt_pool_sect *)snap);
	((struct sr__ckpt_pool_sect *)snap)->state_size = (uint32_t)rb;
	if (p->workers.kind->local_state)
		err = snap_envs(p, snap + l.off_states,
				(struct sr__ckpt_env_rec *)(snap + l.off_envs));
	else
		snap_recs(p, &er, rb, snap + l.off_states,
			  (struct sr__ckpt_env_rec *)(snap + l.off_envs));
	sr__env_recs_free(&er);
	if (err) {
		free(snap);
		return err;
	}
	snap_stats(p, (struct ckpt_stats_sect *)(snap + l.off_stats));
	rt = (struct ckpt_runtime_sect *)(snap + l.off_rt);
	rt->ring_head = sr_ring_head(p->ring.r);
	rt->ring_cursor = sr_ring_cursor(p->ring.r);
	memcpy(rt->spec_params, p->cfg.spec.params, sizeof(rt->spec_params));

	src[(*n)++] = SRC(SR_CKPT_SECT_POOL, sizeof(struct sr__ckpt_pool_sect), snap);
	src[(*n)++] = SRC(SR_CKPT_SECT_ENV_STATES, l.nst, snap + l.off_states);
	src[(*n)++] =
		SRC(SR_CKPT_SECT_ENV_COUNTERS,
		    (size_t)p->cfg.num_envs * sizeof(struct sr__ckpt_env_rec), snap + l.off_envs);
	src[(*n)++] = SRC(SR_CKPT_SECT_STATS, sizeof(struct ckpt_stats_sect), snap + l.off_stats);
	src[(*n)++] = SRC(SR_CKPT_SECT_RUNTIME, sizeof(struct ckpt_runtime_sect), snap + l.off_rt);
	c->snap = snap;
	*rt_out = rt;
	return 0;
}

/* Staging memory for a window of @len bytes, kept from one checkpoint to
 * the next; mapped here (lazily: no page is touched in the step loop's
 * thread), filled by the writer thread. No memory: rc->stage stays NULL
 * and the writer copies straight from the ring. */
static void map_stage(struct sr__pool_ckpt *c, uint64_t len)
{
	struct replay_ctx *rc = &c->rc;

	if (c->stage_cache && c->stage_cache_len < len) {
		munmap(c->stage_cache, c->stage_cache_len);
		c->stage_cache = NULL;
	}
	if (!c->stage_cache) {
		void *m = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED) {
			c->stage_cache = m;
			c->stage_cache_len = (size_t)len;
		}
	}
	rc->stage = c->stage_cache;
	rc->stage_len = c->stage_cache ? c->stage_cache_len : 0;
}

/* Describe the replay window [W, H) of the snapshot (c->rc), map its
 * staging memory and append the replay and replay_meta sections. */
static int replay_window(struct sr__pool_ckpt *c, const struct ckpt_runtime_sect *rt,
			 const sr_ckpt_opts *o, struct sr__ckpt_src *src, uint32_t *n)
{
	sr_ring *ring = c->pool->ring.r;
	struct replay_ctx *rc = &c->rc;
	uint64_t cnt, nblk, len;

	rc->r = ring;
	rc->head = rt->ring_head;
	rc->first = rc->head > ring->cap ? rc->head - ring->cap : 0;
	rc->slot_bytes = slot_bytes(ring->obs_dim, ring->act_size);
	rc->blk = (size_t)o->chunk_size;
	rc->chunk_slots = rc->blk / rc->slot_bytes;
	if (rc->chunk_slots == 0)
		return sr__errorf(-EINVAL, "checkpoint: chunk_size %zu is smaller than one "
					   "replay slot (%zu bytes)",
				  rc->blk, rc->slot_bytes);
	cnt = rc->head - rc->first;
	nblk = (cnt + rc->chunk_slots - 1) / rc->chunk_slots;
	len = nblk ? (nblk - 1) * rc->blk + (cnt - (nblk - 1) * rc->chunk_slots) * rc->slot_bytes
		   : 0;
	rc->meta.capacity = ring->cap;
	rc->meta.head = rc->head;
	rc->meta.cursor = rt->ring_cursor;
	rc->meta.first_seq = rc->first;
	rc->meta.first_valid = rc->first;
	rc->meta.chunk_slots = rc->chunk_slots;
	rc->meta.block_bytes = rc->blk;
	rc->meta.obs_dim = ring->obs_dim;
	rc->meta.act_size = ring->act_size;
	if (!(o->flags & SR_CKPT_F_NO_STAGE) && len)
		map_stage(c, len);
	src[(*n)++] = (struct sr__ckpt_src){.type = SR_CKPT_SECT_REPLAY, .len = len,
					    .fill = replay_fill, .ctx = rc, .map = replay_map};
	/* Written after the replay section, so first_valid is final. */
	src[(*n)++] = SRC(SR_CKPT_SECT_REPLAY_META, sizeof(rc->meta), &rc->meta);
	return 0;
}

#undef SRC

/* The writer runs on the allowed CPUs the workers are not bound to, if
 * there are any (else it floats, at its lower priority). */
static void place_writer(const sr_pool *p, sr__ckpt_job *job, uint32_t flags)
{
	cpu_set_t cs;

	if (!p->place.plan || sched_getaffinity(0, sizeof(cs), &cs) != 0)
		return;
	for (uint32_t w = 0; w < p->place.plan->nthreads; w++)
		if (p->place.plan->w[w].cpu >= 0 && p->place.plan->w[w].cpu < CPU_SETSIZE)
			CPU_CLR(p->place.plan->w[w].cpu, &cs);
	sr__ckpt_job_set_cpus(job, &cs, sizeof(cs));
	/* On CPUs of its own it need not yield to the workers. */
	if (CPU_COUNT(&cs) && !(flags & SR_CKPT_F_NICE))
		sr__ckpt_job_set_nice(job, 0);
}

/* Snapshot the pool and start the job that writes it to @path. */
static int save(struct sr__pool_ckpt *c, const char *path, uint32_t backend,
		const sr_ckpt_opts *o)
{
	sr_pool *p = c->pool;
	const struct ckpt_runtime_sect *rt = NULL;
	struct sr__ckpt_src src[8];
	uint32_t n = 0;
	uint64_t t0 = sr__now_ns();
	int err;

	shm_state(p, SR_CKPT_STATE_SNAPSHOT);
	memset(&c->rc, 0, sizeof(c->rc));
	err = snapshot(c, src, &n, &rt);
	if (!err && (o->flags & SR_CKPT_F_REPLAY))
		err = replay_window(c, rt, o, src, &n);
	if (!err) {
		c->st.ns_snapshot = sr__now_ns() - t0;
		err = sr__ckpt_job_create(path, src, n, backend, o, &c->job);
	}
	if (err) {
		free(c->snap);
		c->snap = NULL;
		memset(&c->rc, 0, sizeof(c->rc));
		shm_state(p, c->st.state);
		return err;
	}
	place_writer(p, c->job, o->flags);
	if (c->rc.stage)
		sr__ckpt_job_set_prepare(c->job, replay_prepare, &c->rc);
	c->t_start = t0;
	c->st.state = SR_CKPT_STATE_WRITING;
	shm_state(p, SR_CKPT_STATE_WRITING);
	err = sr__ckpt_job_start(c->job);
	if (backend == SR_CKPT_BACKEND_SYNC || err) {
		/* SYNC is done; a thread that did not start left the job unstarted. */
		int fin = finish_job(c, true);
		c->unreported = false; /* returned here */
		return err ? err : fin;
	}
	return 0;
}

int sr_pool_checkpoint(sr_pool *p, const char *path, const sr_ckpt_opts *opts)
{
	struct sr__pool_ckpt *c;
	sr_ckpt_opts o;
	uint32_t backend = SR_CKPT_BACKEND_AUTO;
	int err;

	if (!p || !path)
		return sr__errorf(-EINVAL, "sr_pool_checkpoint: NULL argument");
	if (!p->workers.kind->local_state && !p->workers.kind->ckpt_save)
		return sr__errorf(-ENOTSUP, "sr_pool_checkpoint: %s workers cannot save their envs",
				  p->workers.kind->name);
	err = resolve_opts(opts, &o, &backend);
	if (err)
		return err;
	c = ckpt_state(p, true);
	if (!c)
		return sr__errorf(-ENOMEM, "sr_pool_checkpoint: out of memory");
	err = claim(c, &o);
	if (!err)
		err = check_async_idle(p, "checkpoint");
	if (err)
		return err;
	return save(c, path, backend, &o);
}

/* Report a failure once: the call that learns it returns it. */
static int report(struct sr__pool_ckpt *c, int err, sr_ckpt_status *st)
{
	if (st) {
		if (c)
			*st = c->st;
		else
			memset(st, 0, sizeof(*st));
	}
	if (c && c->unreported) {
		c->unreported = false;
		return sr__errorf(c->st.result, "%s", c->errmsg);
	}
	return err == -EINPROGRESS ? err : 0;
}

int sr_pool_checkpoint_poll(sr_pool *p, sr_ckpt_status *st)
{
	struct sr__pool_ckpt *c;
	int err = 0;

	if (!p)
		return sr__errorf(-EINVAL, "sr_pool_checkpoint_poll: NULL pool");
	c = ckpt_state(p, false);
	if (c && c->job)
		err = finish_job(c, false);
	return report(c, err, st);
}

int sr_pool_checkpoint_wait(sr_pool *p, sr_ckpt_status *st)
{
	struct sr__pool_ckpt *c;

	if (!p)
		return sr__errorf(-EINVAL, "sr_pool_checkpoint_wait: NULL pool");
	c = ckpt_state(p, false);
	if (c && c->job)
		finish_job(c, true);
	return report(c, 0, st);
}

/* ---- restore ----------------------------------------------------------------- */

static int read_exact(const struct sr__ckpt_file *f, uint32_t type, void *buf, size_t len,
		      bool required)
{
	int i = sr__ckpt_find(f, type);

	if (i < 0)
		return required ? sr__errorf(-EBADMSG, "checkpoint: no %s section",
					     sr__ckpt_section_name(type))
				: 1;
	if (f->table[i].length != len)
		return sr__errorf(-EBADMSG, "checkpoint: section %s has %llu bytes, expected %zu",
				  sr__ckpt_section_name(type),
				  (unsigned long long)f->table[i].length, len);
	int err = sr__ckpt_read(f, i, 0, buf, len);
	/* Re-check over the bytes that will be applied: the verify pass read
	 * them once already, but a file rewritten in place may differ now. */
	return err ? err : sr__ckpt_check_crc(f, i, sr__crc32c(0, buf, len));
}

#define GEOM(field, a, b)                                                                  \
	do {                                                                               \
		if ((uint64_t)(a) != (uint64_t)(b))                                        \
			return sr__errorf(-EINVAL,                                         \
					  "restore: %s differs: checkpoint has %llu, pool has " \
					  "%llu",                                          \
					  field, (unsigned long long)(a),                  \
					  (unsigned long long)(b));                        \
	} while (0)

static int check_geometry(const sr_pool *p, const struct sr__ckpt_pool_sect *ps,
			  const struct ckpt_runtime_sect *rt)
{
	if (strcmp(ps->env_id, p->cfg.spec.id))
		return sr__errorf(-EINVAL, "restore: env differs: checkpoint has '%s', pool has '%s'",
				  ps->env_id, p->cfg.spec.id);
	GEOM("num_envs", ps->num_envs, p->cfg.num_envs);
	GEOM("first env (global index)", ps->first_env, p->cfg.env_base);
	GEOM("batch_size", ps->batch_size, p->cfg.batch_size);
	GEOM("obs_dim", ps->obs_dim, p->cfg.obs_dim);
	GEOM("action size", ps->act_size, p->cfg.act_size);
	if (!foreign(p))
		GEOM("env state_size", ps->state_size, env_rec_bytes(&p->cfg.spec));
	else if (ps->state_size < 8)
		return sr__errorf(-EBADMSG, "restore: %u bytes per env state cannot hold a record",
				  ps->state_size);
	GEOM("autoreset", ps->autoreset, p->cfg.autoreset);
	GEOM("max_episode_steps", ps->max_episode_steps, p->cfg.spec.max_episode_steps);
	if (memcmp(rt->spec_params, p->cfg.spec.params, sizeof(rt->spec_params)))
		return sr__errorf(-EINVAL, "restore: the env parameters of '%s' differ", ps->env_id);
	return 0;
}

static void ring_col_in(sr_ring *r, void *col, size_t width, uint64_t s0, uint64_t n,
			const uint8_t *src)
{
	uint64_t i = s0 & r->mask;
	uint64_t first = n < r->cap - i ? n : r->cap - i;

	memcpy((uint8_t *)col + i * width, src, first * width);
	if (n > first)
		memcpy(col, src + first * width, (n - first) * width);
}

/* Read the whole replay section into fresh staging memory and re-check its
 * CRC over exactly those bytes, before the pool changes: a failed read or a
 * file changed since the verify pass then leaves the ring untouched. The
 * staging area is as large as the section (the window's size); it is
 * mapped lazily and unmapped after the restore. */
static int stage_replay(const struct sr__ckpt_file *f, const struct sr__ckpt_replay_meta *m,
			int idx, uint8_t **out, size_t *out_len)
{
	uint64_t len = f->table[idx].length;
	uint32_t crc = 0;
	uint8_t *st;
	int err = 0;

	*out = NULL;
	*out_len = 0;
	if (!len)
		return sr__ckpt_check_crc(f, idx, 0);
	if (len > SIZE_MAX)
		return sr__errorf(-ENOMEM, "restore: replay window too large for memory");
	st = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED)
		return sr__errorf(-ENOMEM, "restore: no memory to stage the replay window "
					   "(%llu bytes); the pool is untouched",
				  (unsigned long long)len);
	for (uint64_t off = 0; off < len; off += m->block_bytes) {
		size_t n = len - off < m->block_bytes ? (size_t)(len - off) : (size_t)m->block_bytes;
		err = sr__ckpt_read(f, idx, off, st + off, n);
		if (err)
			break;
		crc = sr__crc32c(crc, st + off, n);
	}
	if (!err)
		err = sr__ckpt_check_crc(f, idx, crc);
	if (err) {
		munmap(st, (size_t)len);
		return err;
	}
	*out = st;
	*out_len = (size_t)len;
	return 0;
}

/* Copy the staged window into the ring (cannot fail). */
static void apply_replay(sr_pool *p, const struct sr__ckpt_replay_meta *m, const uint8_t *stage)
{
	sr_ring *r = p->ring.r;
	uint64_t boff = 0;

	for (uint64_t s0 = m->first_seq; s0 < m->head; s0 += m->chunk_slots, boff += m->block_bytes) {
		uint64_t n = m->head - s0 < m->chunk_slots ? m->head - s0 : m->chunk_slots;
		const uint8_t *d = stage + boff;
		ring_col_in(r, r->obs, (size_t)r->obs_dim * 4, s0, n, d);
		d += n * r->obs_dim * 4;
		ring_col_in(r, r->action, r->act_size, s0, n, d);
		d += n * r->act_size;
		ring_col_in(r, r->reward, 4, s0, n, d);
		d += n * 4;
		ring_col_in(r, r->terminated, 1, s0, n, d);
		d += n;
		ring_col_in(r, r->truncated, 1, s0, n, d);
		d += n;
		ring_col_in(r, r->flags, 1, s0, n, d);
		d += n;
		ring_col_in(r, r->env_id, 4, s0, n, d);
		d += n * 4;
		ring_col_in(r, r->prev, 8, s0, n, d);
	}
}

/*
 * Invariants of everything restore loads, checked before the pool changes
 * (a file with valid CRCs can still be made by hand): a state the pool
 * could never have been in would hang the step loop (a cursor behind the
 * head waits for slots nobody publishes) or feed an env a state its step
 * cannot take (an Acrobot angle of 1e300).
 */
static int check_loaded(const sr_pool *p, const struct ckpt_runtime_sect *rt,
			const struct ckpt_stats_sect *ss, const uint8_t *states,
			const struct sr__ckpt_env_rec *envs)
{
	uint32_t max = p->cfg.spec.max_episode_steps;

	/* A snapshot is taken at a step boundary, with every slot consumed. */
	if (rt->ring_cursor != rt->ring_head)
		return sr__errorf(-EBADMSG,
				  "restore: ring cursor %llu is not the head %llu (a checkpoint "
				  "is taken with every slot consumed)",
				  (unsigned long long)rt->ring_cursor,
				  (unsigned long long)rt->ring_head);
	if (ss->batches > ss->steps || ss->episodes > ss->steps)
		return sr__errorf(-EBADMSG,
				  "restore: statistics are impossible (%llu steps, %llu batches, "
				  "%llu episodes)",
				  (unsigned long long)ss->steps, (unsigned long long)ss->batches,
				  (unsigned long long)ss->episodes);
	for (uint32_t e = 0; e < p->cfg.num_envs; e++) {
		const struct sr__ckpt_env_rec *er = &envs[e];

		if (er->done > 1 || er->term > 1 || er->trunc > 1 || er->pad0)
			return sr__errorf(-EBADMSG, "restore: env %u bookkeeping is malformed", e);
		if (er->prev_seq != SR_RING_NO_PREV && er->prev_seq >= rt->ring_head)
			return sr__errorf(-EBADMSG,
					  "restore: env %u's last slot %llu is not below the ring "
					  "head %llu",
					  e, (unsigned long long)er->prev_seq,
					  (unsigned long long)rt->ring_head);
		if ((max && er->elapsed > max) || er->ep_len > ss->steps)
			return sr__errorf(-EBADMSG,
					  "restore: env %u's episode counters are impossible "
					  "(elapsed %u of at most %u, length %llu)",
					  e, er->elapsed, max, (unsigned long long)er->ep_len);
		/* (opaque envs: load_opaque checks the loaded instances) */
		if (p->cfg.spec.check_state && !sr_env_is_opaque(&p->cfg.spec) && !foreign(p) &&
		    p->cfg.spec.check_state(&p->cfg.spec,
					    states + (size_t)e * p->cfg.spec.state_size))
			return sr__errorf(-EBADMSG,
					  "restore: env %u's state is not one env '%s' can be in "
					  "(its check_state hook refused it)",
					  e, p->cfg.spec.id);
	}
	return 0;
}

/* The staged replay window's slots, before they enter the ring: flags
 * known, 0/1 outcomes, env ids of this pool (or a pad's), prev links
 * pointing back. Samplers follow prev and index per-env arrays by env id. */
static int check_window(const sr_pool *p, const struct sr__ckpt_replay_meta *m,
			const uint8_t *stage)
{
	const uint64_t cs = m->chunk_slots, od = m->obs_dim, as = m->act_size;

	for (uint64_t s = m->first_valid; s < m->head; s++) {
		uint64_t b = (s - m->first_seq) / cs, i = (s - m->first_seq) % cs;
		uint64_t s0 = m->first_seq + b * cs;
		uint64_t n = m->head - s0 < cs ? m->head - s0 : cs;
		const uint8_t *d = stage + b * m->block_bytes + n * (od * 4 + as + 4);
		uint8_t term = d[i], trunc = d[n + i], flags = d[2 * n + i];
		uint32_t env;
		uint64_t prev;

		memcpy(&env, d + 3 * n + 4 * i, 4);
		memcpy(&prev, d + 7 * n + 8 * i, 8);
		if (term > 1 || trunc > 1 ||
		    (flags & ~(uint8_t)(SR_SLOT_FIRST | SR_SLOT_PAD | SR_SLOT_FINAL)) ||
		    (flags & SR_SLOT_PAD ? env != UINT32_MAX : env >= p->cfg.num_envs) ||
		    (prev != SR_RING_NO_PREV && prev >= s))
			return sr__errorf(-EBADMSG,
					  "restore: replay slot %llu is malformed (flags 0x%x, env "
					  "%u, prev %llu)",
					  (unsigned long long)s, flags, env,
					  (unsigned long long)prev);
	}
	return 0;
}

/* Exchange two byte ranges. */
static void swap_bytes(uint8_t *a, uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t t = a[i];
		a[i] = b[i];
		b[i] = t;
	}
}

/*
 * An opaque env's saved records: load each into a new instance (made here,
 * on the pool thread), all before the pool changes, so that a record that
 * does not load leaves the pool untouched. *@out: num_envs instances in env
 * order; the caller swaps their handles with the workers' (the ABI lets
 * the runtime move an opaque state's bytes) and destroys what it gets
 * back. The loaded instances' heaps sit on this thread's node until their
 * next reset, which builds a new world on the worker.
 */
static int load_opaque(const sr_pool *p, const uint8_t *states, uint8_t **out)
{
	const sr_env_spec *s = &p->cfg.spec;
	size_t rb = env_rec_bytes(s), ssz = s->state_size;
	uint8_t *inst = aligned_alloc(64, ((size_t)p->cfg.num_envs * ssz + 63) & ~(size_t)63);
	int err;

	if (!inst)
		return sr__errorf(-ENOMEM, "restore: out of memory");
	err = sr_env_create_instances(s, inst, p->cfg.num_envs);
	if (err) {
		free(inst);
		return err;
	}
	for (uint32_t e = 0; e < p->cfg.num_envs; e++) {
		const uint8_t *rec = states + (size_t)e * rb;
		uint64_t len;
		memcpy(&len, rec, 8);
		if (len > s->save_max)
			err = -EBADMSG;
		else
			err = s->load(s, inst + (size_t)e * ssz, rec + 8, (size_t)len);
		if (!err && s->check_state)
			err = s->check_state(s, inst + (size_t)e * ssz);
		if (err) {
			sr_env_destroy_instances(s, inst, p->cfg.num_envs);
			free(inst);
			return sr__errorf(-EBADMSG,
					  "restore: env %u's saved state does not load into '%s' "
					  "(%s)",
					  e, s->id, sr_strerror(err));
		}
	}
	*out = inst;
	return 0;
}

/*
 * sr_pool_restore in steps: restore_load reads every section and checks
 * it against the pool (nothing changes), restore_apply puts the states,
 * the bookkeeping, the statistics and the ring back, restore_free frees
 * what the load made.
 */

/* What restore reads from a file: checked before the pool changes. */
struct restore_in {
	struct sr__ckpt_file f;
	struct sr__ckpt_pool_sect ps;
	struct ckpt_stats_sect ss;
	struct ckpt_runtime_sect rt;
	struct sr__ckpt_replay_meta meta;
	struct sr__ckpt_env_rec *envs; /* num_envs */
	uint8_t *states;           /* the env states section */
	uint8_t *loaded;           /* opaque envs: the instances made from it */
	uint8_t *stage;            /* the replay window, staged (mmap) */
	size_t stage_len;
	bool replay;               /* the file has a replay window */
};

/* The replay window's description (optional section), checked against
 * the ring counters and this pool's ring; in->replay says if there is one. */
static int restore_load_replay(sr_pool *p, struct restore_in *in, int *ri)
{
	int err = read_exact(&in->f, SR_CKPT_SECT_REPLAY_META, &in->meta, sizeof(in->meta), false);

	if (err < 0)
		return err;
	if (err > 0)
		return 0; /* no window */
	*ri = sr__ckpt_find(&in->f, SR_CKPT_SECT_REPLAY);
	/* Checked by the verify pass; again over the bytes read now. */
	if (*ri < 0 || in->meta.head != in->rt.ring_head || in->meta.cursor != in->rt.ring_cursor)
		return sr__errorf(-EBADMSG, "restore: replay window description is "
					    "inconsistent with the ring counters");
	err = sr__ckpt_check_replay_meta(&in->meta, in->f.table[*ri].length);
	if (err)
		return err;
	if (in->meta.capacity != p->ring.cap || in->meta.obs_dim != p->ring.r->obs_dim ||
	    in->meta.act_size != p->ring.r->act_size)
		return sr__errorf(-EINVAL,
				  "restore: the checkpoint's replay window needs a ring of "
				  "%llu slots (obs_dim %u, action %u bytes); this pool has %llu "
				  "(create it with ring_capacity = %llu)",
				  (unsigned long long)in->meta.capacity, in->meta.obs_dim,
				  in->meta.act_size, (unsigned long long)p->ring.cap,
				  (unsigned long long)in->meta.capacity);
	in->replay = true;
	return 0;
}

/* Verify @fd, read every section into @in and check it against @p. */
static int restore_load(sr_pool *p, int fd, struct restore_in *in)
{
	size_t nst;
	int err, ri = -1;

	/* Every CRC first: nothing below runs on a corrupt file. */
	err = sr__ckpt_verify_fd(fd, &in->f, NULL);
	if (!err)
		err = read_exact(&in->f, SR_CKPT_SECT_POOL, &in->ps, sizeof(in->ps), true);
	if (!err)
		err = read_exact(&in->f, SR_CKPT_SECT_RUNTIME, &in->rt, sizeof(in->rt), true);
	if (!err)
		err = check_geometry(p, &in->ps, &in->rt);
	if (!err)
		err = read_exact(&in->f, SR_CKPT_SECT_STATS, &in->ss, sizeof(in->ss), true);
	if (err)
		return err;
	/* Bytes per env: the spec's, or a foreign env's record size as saved
	 * (bounded by the verify pass). */
	nst = (size_t)p->cfg.num_envs *
	      (foreign(p) ? in->ps.state_size : env_rec_bytes(&p->cfg.spec));
	in->states = malloc(nst);
	in->envs = malloc((size_t)p->cfg.num_envs * sizeof(*in->envs));
	if (!in->states || !in->envs)
		return sr__errorf(-ENOMEM, "restore: out of memory");
	err = read_exact(&in->f, SR_CKPT_SECT_ENV_STATES, in->states, nst, true);
	if (!err && sr_env_is_opaque(&p->cfg.spec))
		err = load_opaque(p, in->states, &in->loaded);
	for (uint32_t e = 0; !err && foreign(p) && e < p->cfg.num_envs; e++) {
		uint64_t len;

		memcpy(&len, in->states + (size_t)e * in->ps.state_size, 8);
		if (len > in->ps.state_size - 8)
			err = sr__errorf(-EBADMSG, "restore: env %u's record says %llu bytes, more "
					 "than the %u it has", e, (unsigned long long)len,
					 in->ps.state_size - 8);
	}
	if (!err)
		err = read_exact(&in->f, SR_CKPT_SECT_ENV_COUNTERS, in->envs,
				 (size_t)p->cfg.num_envs * sizeof(*in->envs), true);
	if (!err)
		err = restore_load_replay(p, in, &ri);
	if (!err)
		err = check_loaded(p, &in->rt, &in->ss, in->states, in->envs);
	if (err || !in->replay)
		return err;
	/* The section's size is bounded by the pool's own ring (the meta
	 * matched its capacity and the window its size above): a file cannot
	 * make restore allocate more. */
	err = stage_replay(&in->f, &in->meta, ri, &in->stage, &in->stage_len);
	if (!err)
		err = check_window(p, &in->meta, in->stage);
	return err;
}

/* Put what @in holds into the pool (quiescent: no worker runs). */
static void restore_apply(sr_pool *p, const struct restore_in *in)
{
	sr_ring *r = p->ring.r;

	for (uint32_t w = 0; w < p->cfg.num_threads && !p->workers.kind->local_state; w++)
		atomic_store_explicit(&p->workers.w[w].steps, w == 0 ? in->ss.steps : 0,
				      memory_order_relaxed); /* the envs: restore_remote */
	for (uint32_t w = 0; w < p->cfg.num_threads && p->workers.kind->local_state; w++) {
		struct sr__worker *wk = &p->workers.w[w];
		size_t ssz = p->cfg.spec.state_size;
		if (in->loaded) /* swap handles: the old instances go to in->loaded */
			swap_bytes(wk->slice.states, in->loaded + (size_t)wk->first_env * ssz,
				   (size_t)wk->n_envs * ssz);
		else
			memcpy(wk->slice.states, in->states + (size_t)wk->first_env * ssz,
			       (size_t)wk->n_envs * ssz);
		for (uint32_t i = 0; i < wk->n_envs; i++)
			sr__slice_rec_put(&wk->slice, i, &in->envs[wk->first_env + i]);
		/* Worker step counters are per worker; the total is what counts. */
		atomic_store_explicit(&wk->steps, w == 0 ? in->ss.steps : 0, memory_order_relaxed);
	}
	p->stats.episodes = in->ss.episodes;
	p->stats.batches = in->ss.batches;
	memcpy(p->stats.ret, in->ss.ep_ret, sizeof(p->stats.ret));
	memcpy(p->stats.len, in->ss.ep_len, sizeof(p->stats.len));

	/* Ring: forget every slot, put back the saved window, then the counters.
	 * Quiescent: no producer runs; samplers re-check seq (R1/R3). */
	for (uint64_t i = 0; i < r->cap; i++)
		atomic_store_explicit(&r->seq[i], 0, memory_order_relaxed);
	if (in->replay) {
		apply_replay(p, &in->meta, in->stage);
		/* R1: columns before the publish sequence. */
		for (uint64_t s = in->meta.first_valid; s < in->meta.head; s++)
			atomic_store_explicit(&r->seq[s & r->mask], s + 1, memory_order_release);
	}
	atomic_store_explicit(&r->hdr->head, in->rt.ring_head, memory_order_release);
	atomic_store_explicit(&r->hdr->cursor, in->rt.ring_cursor, memory_order_release);
}

static void restore_free(sr_pool *p, struct restore_in *in)
{
	if (in->loaded) { /* the old instances after success, the loaded ones after a failure */
		sr_env_destroy_instances(&p->cfg.spec, in->loaded, p->cfg.num_envs);
		free(in->loaded);
	}
	if (in->stage)
		munmap(in->stage, in->stage_len);
	free(in->states);
	free(in->envs);
}

/* What both restores do first: refuse what cannot be restored, let a
 * checkpoint still being written finish, and open @path. Returns the open
 * descriptor, or -errno (the message names @fn). */
static int restore_open(sr_pool *p, const char *path, const char *fn)
{
	struct sr__pool_ckpt *c;
	int fd, err;

	if (!p || !path)
		return sr__errorf(-EINVAL, "%s: NULL argument", fn);
	if (!p->workers.kind->local_state && !p->workers.kind->ckpt_load)
		return sr__errorf(-ENOTSUP, "%s: %s workers cannot load envs", fn,
				  p->workers.kind->name);
	c = ckpt_state(p, false);
	if (c && c->job)
		finish_job(c, true);
	err = check_async_idle(p, "restore");
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sr__errorf(-errno, "restore: cannot open '%s': %s", path, strerror(errno));
	return fd;
}

/* Envs in worker processes: hand them the records (LOAD, then COMMIT
 * once every worker took its own), before anything else changes. */
static int restore_remote(sr_pool *p, const struct restore_in *in)
{
	const size_t rb = foreign(p) ? in->ps.state_size : env_rec_bytes(&p->cfg.spec);
	const bool plain = !sr_env_is_opaque(&p->cfg.spec) && !foreign(p);
	struct sr__env_recs er;
	int err = sr__env_recs_alloc(&er, p->cfg.num_envs);

	for (uint32_t e = 0; !err && e < p->cfg.num_envs; e++) {
		const uint8_t *d = in->states + (size_t)e * rb;

		er.env[e] = in->envs[e];
		if (plain) {
			er.rec[e] = d;
			er.len[e] = rb;
		} else {
			memcpy(&er.len[e], d, 8); /* checked by restore_load */
			er.rec[e] = d + 8;
		}
	}
	if (!err)
		err = p->workers.kind->ckpt_load(p, &er, in->ss.steps);
	sr__env_recs_free(&er);
	return err;
}

int sr_pool_restore(sr_pool *p, const char *path)
{
	struct restore_in in;
	int fd, err;

	fd = restore_open(p, path, "sr_pool_restore");
	if (fd < 0)
		return fd;
	memset(&in, 0, sizeof(in));
	err = restore_load(p, fd, &in);
	if (!err && !p->workers.kind->local_state)
		err = restore_remote(p, &in);
	if (!err)
		restore_apply(p, &in); /* from here on the pool changes */
	restore_free(p, &in);
	close(fd);
	return err;
}

int sr_pool_restore_envs(sr_pool *p, const char *path)
{
	struct sr__ckpt_file f;
	struct sr__ckpt_pool_sect ps;
	struct ckpt_runtime_sect rt;
	struct sr__ckpt_env_rec *envs = NULL;
	uint8_t *states = NULL, *inst = NULL;
	uint64_t lo, hi;
	size_t ssz, rb;
	int fd, err;

	if (p && !p->workers.kind->local_state)
		return sr__errorf(-ENOTSUP, "sr_pool_restore_envs: re-sharding needs the envs in "
				  "this process; a pool of %s workers restores a whole checkpoint "
				  "(sr_pool_restore)", p->workers.kind->name);
	fd = restore_open(p, path, "sr_pool_restore_envs");
	if (fd < 0)
		return fd;
	err = sr__ckpt_verify_fd(fd, &f, NULL);
	if (err)
		goto out;
	err = read_exact(&f, SR_CKPT_SECT_POOL, &ps, sizeof(ps), true);
	if (!err)
		err = read_exact(&f, SR_CKPT_SECT_RUNTIME, &rt, sizeof(rt), true);
	if (err)
		goto out;
	if (strcmp(ps.env_id, p->cfg.spec.id)) {
		err = sr__errorf(-EINVAL, "restore: env differs: checkpoint has '%s', pool has '%s'",
				 ps.env_id, p->cfg.spec.id);
		goto out;
	}
#define GEOM2(field, a, b)                                                                 \
	if ((uint64_t)(a) != (uint64_t)(b)) {                                              \
		err = sr__errorf(-EINVAL, "restore: %s differs: checkpoint has %llu, pool has " \
				 "%llu", field, (unsigned long long)(a),                   \
				 (unsigned long long)(b));                                 \
		goto out;                                                                  \
	}
	GEOM2("obs_dim", ps.obs_dim, p->cfg.obs_dim)
	GEOM2("action size", ps.act_size, p->cfg.act_size)
	GEOM2("env state_size", ps.state_size, env_rec_bytes(&p->cfg.spec))
	GEOM2("autoreset", ps.autoreset, p->cfg.autoreset)
	GEOM2("max_episode_steps", ps.max_episode_steps, p->cfg.spec.max_episode_steps)
	GEOM2("seed", ps.seed, p->cfg.seed)
#undef GEOM2
	if (memcmp(rt.spec_params, p->cfg.spec.params, sizeof(rt.spec_params))) {
		err = sr__errorf(-EINVAL, "restore: the env parameters of '%s' differ", ps.env_id);
		goto out;
	}
	lo = ps.first_env > p->cfg.env_base ? ps.first_env : p->cfg.env_base;
	hi = ps.first_env + ps.num_envs < p->cfg.env_base + p->cfg.num_envs
		     ? ps.first_env + ps.num_envs
		     : p->cfg.env_base + p->cfg.num_envs;
	if (lo >= hi) {
		err = 0; /* nothing in common */
		goto out;
	}
	ssz = p->cfg.spec.state_size;
	rb = env_rec_bytes(&p->cfg.spec); /* ssz, or an opaque env's length + save() bytes */
	states = malloc((size_t)ps.num_envs * rb);
	envs = malloc((size_t)ps.num_envs * sizeof(*envs));
	if (!states || !envs) {
		err = sr__errorf(-ENOMEM, "restore: out of memory");
		goto out;
	}
	err = read_exact(&f, SR_CKPT_SECT_ENV_STATES, states, (size_t)ps.num_envs * rb, true);
	if (!err)
		err = read_exact(&f, SR_CKPT_SECT_ENV_COUNTERS, envs,
				 (size_t)ps.num_envs * sizeof(*envs), true);
	if (err)
		goto out;
	for (uint32_t e = 0; e < ps.num_envs; e++)
		if (envs[e].done > 1 || envs[e].term > 1 || envs[e].trunc > 1) {
			err = sr__errorf(-EBADMSG, "restore: env %u bookkeeping is malformed", e);
			goto out;
		}
	if (sr_env_is_opaque(&p->cfg.spec)) {
		/* An opaque env (ABI v2): each saved record of [lo, hi) is
		 * loaded into a new instance, made here, before the pool
		 * changes (as sr_pool_restore does for the whole pool); the
		 * instances' handles are swapped with the workers' below and
		 * the old ones destroyed. */
		const sr_env_spec *s = &p->cfg.spec;
		uint64_t n = hi - lo;

		inst = aligned_alloc(64, ((size_t)n * ssz + 63) & ~(size_t)63);
		if (!inst) {
			err = sr__errorf(-ENOMEM, "restore: out of memory");
			goto out;
		}
		err = sr_env_create_instances(s, inst, (uint32_t)n);
		if (err) {
			free(inst);
			inst = NULL;
			goto out;
		}
		for (uint64_t g = lo; g < hi; g++) {
			const uint8_t *rec = states + (g - ps.first_env) * rb;
			uint8_t *in = inst + (g - lo) * ssz;
			uint64_t len;

			memcpy(&len, rec, 8);
			err = len > s->save_max ? -EBADMSG : s->load(s, in, rec + 8, (size_t)len);
			if (!err && s->check_state)
				err = s->check_state(s, in);
			if (err) {
				err = sr__errorf(-EBADMSG, "restore: env %llu's saved state does not "
						 "load into '%s' (%s)", (unsigned long long)g, s->id,
						 sr_strerror(err < 0 ? err : -EBADMSG));
				goto out;
			}
		}
	} else if (p->cfg.spec.check_state) {
		/* The env's own check of a state (v2 specs): nothing is applied
		 * when any saved state is refused. */
		for (uint64_t g = lo; g < hi; g++) {
			err = p->cfg.spec.check_state(&p->cfg.spec,
						      states + (g - ps.first_env) * ssz);
			if (err) {
				err = sr__errorf(err < 0 ? err : -EBADMSG, "restore: env %llu: the "
						 "saved state is refused by '%s'",
						 (unsigned long long)g, p->cfg.spec.id);
				goto out;
			}
		}
	}

	/* ---- from here on the pool changes ---- */
	for (uint32_t w = 0; w < p->cfg.num_threads; w++) {
		struct sr__worker *wk = &p->workers.w[w];

		for (uint32_t i = 0; i < wk->n_envs; i++) {
			uint64_t g = p->cfg.env_base + wk->first_env + i;
			const struct sr__ckpt_env_rec *er;

			if (g < lo || g >= hi)
				continue;
			er = &envs[g - ps.first_env];
			if (inst) /* swap handles: the old instance goes to inst */
				swap_bytes(wk->slice.states + (size_t)i * ssz, inst + (g - lo) * ssz, ssz);
			else
				memcpy(wk->slice.states + (size_t)i * ssz, states + (g - ps.first_env) * rb,
				       ssz);
			sr__slice_rec_put(&wk->slice, i, er);
			wk->slice.prev_seq[i] = SR_RING_NO_PREV; /* its slots are not in this ring */
		}
	}
	err = (int)(hi - lo);
out:
	if (inst) { /* the old instances after success, the loaded ones after a failure */
		sr_env_destroy_instances(&p->cfg.spec, inst, (uint32_t)(hi - lo));
		free(inst);
	}
	free(states);
	free(envs);
	close(fd);
	return err;
}
