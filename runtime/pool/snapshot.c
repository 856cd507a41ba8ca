/*
 * Snapshot and restore of a pool: sr_pool_checkpoint*, sr_pool_restore.
 *
 * DESIGN
 *
 * Snapshot (the pool thread, at a quiescent point: between sync steps, or
 * in async mode with nothing in flight; see runtime/pool/pool_internal.h): the
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
#include "snapshot_pvt.h"

#define SR_CKPT_KNOWN_FLAGS                                                                \
	(SR_CKPT_F_BACKEND | SR_CKPT_F_REPLAY | SR_CKPT_F_NOWAIT | SR_CKPT_F_DIRECT |      \
	 SR_CKPT_F_CHUNK | SR_CKPT_F_NICE | SR_CKPT_F_NO_STAGE | SR_CKPT_F_BUFFERED)

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

void sr__pool_ckpt_finish(sr_pool *p)
{
	struct sr__pool_ckpt *c = ckpt_state(p, false);

	if (c && c->job)
		finish_job(c, true);
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
			  : sr__snap_foreign(p)        ? l <= (1u << 20) - 8
					      : l == s->state_size;
		if (!ok)
			return sr__errorf(sr__snap_foreign(p) ? -EFBIG : -EBADMSG,
					  "checkpoint: env %u's saved state has %llu bytes%s", e,
					  (unsigned long long)l,
					  sr__snap_foreign(p) ? " (at most 1 MiB - 8 per env)"
						     : ", not what the env's spec says");
		if (l > max)
			max = l;
	}
	*rb = sr__snap_foreign(p) ? 8 + (size_t)sr__align_up(max, 8) : sr__snap_env_rec_bytes(s);
	return 0;
}

/* The records of the workers into the env_states section (@rb bytes per
 * env) and the bookkeeping into env_counters. */
static void snap_recs(const sr_pool *p, const struct sr__env_recs *er, size_t rb,
		      uint8_t *states, struct sr__ckpt_env_rec *recs)
{
	bool plain = !sr_env_is_opaque(&p->cfg.spec) && !sr__snap_foreign(p);

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
	ps->state_size = (uint32_t)sr__snap_env_rec_bytes(&p->cfg.spec); /* bytes per env in env_states */
	ps->act_kind = p->cfg.spec.act_kind;
	ps->pool_flags = p->cfg.keep_final ? SR_POOL_F_FINAL_OBS : 0;
	ps->max_episode_steps = p->cfg.spec.max_episode_steps;
	ps->seed = p->cfg.seed;
	ps->first_env = p->cfg.env_base;
	ps->steps = pool_steps(p);
	ps->ring_capacity = p->ring.cap;
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
	l->off_envs = (size_t)sr__align_up(l->off_states + l->nst, 64);
	l->off_stats = l->off_envs + (size_t)p->cfg.num_envs * sizeof(struct sr__ckpt_env_rec);
	l->off_rt = l->off_stats + sizeof(struct ckpt_stats_sect);
	l->total = l->off_rt + sizeof(struct ckpt_runtime_sect);
}

/* An opaque env's instances, serialized by its save() into their records
 * (the pool is quiescent: no worker touches them meanwhile). */
static int save_opaque(const sr_pool *p, const struct sr__worker *wk, uint8_t *states)
{
	const sr_env_spec *s = &p->cfg.spec;
	size_t rb = sr__snap_env_rec_bytes(s);

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
	size_t rb = sr__snap_env_rec_bytes(&p->cfg.spec);
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
		err = sr__snap_idle(p, "checkpoint");
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
