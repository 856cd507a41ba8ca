/*
 * Restore of a pool: sr_pool_restore, sr_pool_restore_envs (snapshot.c
 * has the design: everything read and checked before anything changes).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "pool_internal.h"
#include "ring_internal.h"
#include "snapshot_pvt.h"
#include "sr_base.h"

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
	if (!sr__snap_foreign(p))
		GEOM("env state_size", ps->state_size, sr__snap_env_rec_bytes(&p->cfg.spec));
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
		if (p->cfg.spec.check_state && !sr_env_is_opaque(&p->cfg.spec) && !sr__snap_foreign(p) &&
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
	size_t rb = sr__snap_env_rec_bytes(s), ssz = s->state_size;
	uint8_t *inst = aligned_alloc(64, (size_t)sr__align_up((size_t)p->cfg.num_envs * ssz, 64));
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
	      (sr__snap_foreign(p) ? in->ps.state_size : sr__snap_env_rec_bytes(&p->cfg.spec));
	in->states = malloc(nst);
	in->envs = malloc((size_t)p->cfg.num_envs * sizeof(*in->envs));
	if (!in->states || !in->envs)
		return sr__errorf(-ENOMEM, "restore: out of memory");
	err = read_exact(&in->f, SR_CKPT_SECT_ENV_STATES, in->states, nst, true);
	if (!err && sr_env_is_opaque(&p->cfg.spec))
		err = load_opaque(p, in->states, &in->loaded);
	for (uint32_t e = 0; !err && sr__snap_foreign(p) && e < p->cfg.num_envs; e++) {
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
	int fd, err;

	if (!p || !path)
		return sr__errorf(-EINVAL, "%s: NULL argument", fn);
	if (!p->workers.kind->local_state && !p->workers.kind->ckpt_load)
		return sr__errorf(-ENOTSUP, "%s: %s workers cannot load envs", fn,
				  p->workers.kind->name);
	sr__pool_ckpt_finish(p);
	err = sr__snap_idle(p, "restore");
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
	const size_t rb = sr__snap_foreign(p) ? in->ps.state_size : sr__snap_env_rec_bytes(&p->cfg.spec);
	const bool plain = !sr_env_is_opaque(&p->cfg.spec) && !sr__snap_foreign(p);
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
	GEOM2("env state_size", ps.state_size, sr__snap_env_rec_bytes(&p->cfg.spec))
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
	rb = sr__snap_env_rec_bytes(&p->cfg.spec); /* ssz, or an opaque env's length + save() bytes */
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

		inst = aligned_alloc(64, (size_t)sr__align_up((size_t)n * ssz, 64));
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
