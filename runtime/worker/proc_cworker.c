/*
 * The C env worker (the stepring-worker program, and an inline worker 0
 * of a process pool that steps a C env): loads the pool's env (built-in
 * by name, or plugin by path, with the trainer's scalar spec fields),
 * seeds its slice from (seed, env index) (restarts: sr_proc_seed) and
 * steps it with the thread workers' code (book_pvt.h): TimeLimit
 * truncation, autoreset modes, prev links, episode statistics, final
 * observations, same-step extra slots, the finite check of its rows (its
 * count in its record, the first env in the block). Same seed, same
 * actions: the same rows as thread workers. Also its part of the
 * checkpoints (SAVE, LOAD, COMMIT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"
#include "envs.h"
#include "proc_internal.h"
#include "ring_internal.h"
#include "stepring/pool.h"

/* ---------------------------------------------------------------------- */
/* The C env worker                                                        */
/* ---------------------------------------------------------------------- */

struct sr__cworker {
	sr_proc_worker *w;
	sr_proc_info in;
	sr_env_spec spec;
	uint32_t n, od, maxs;
	size_t asz;
	uint64_t mask; /* ring capacity - 1 */
	float *c_obs, *c_rew;
	uint8_t *c_act, *c_term, *c_trunc, *c_flags;
	uint32_t *c_env;
	uint64_t *c_prev;
	unsigned char *states;
	uint64_t *prev_seq, *ep_len, *done_seq;
	uint32_t *elapsed, *done_loc;
	uint8_t *done, *done_term, *done_trunc, *need;
	uint32_t *fix;   /* 2 * n: rows that need more than the column loops */
	double *ep_ret, *rew;
	uint64_t ns_env; /* of the last command */
	uint32_t nd;     /* SAME_STEP: envs of the command that ended (done_loc, done_seq) */
	uint32_t made;   /* opaque instances created */
	bool check;      /* the finite check is on */
	/* LOAD: the records kept aside until COMMIT (stage: n states, opaque
	 * envs: instances made and loaded here). */
	bool staged;
	unsigned char *stage;
	struct sr__ckpt_env_rec *stage_rec;
};

static unsigned char *state_of(struct sr__cworker *c, uint32_t i)
{
	return c->states + (size_t)i * c->spec.state_size;
}

/* The env this pool steps: by name or plugin path, then the trainer's
 * scalar fields (the spin env keeps its parameters there). */
static int load_env(struct sr__cworker *c)
{
	struct sr__proc_hdr *h = c->w->h;
	int err = h->plugin[0] ? sr_env_load_plugin(h->plugin, &c->spec)
			       : sr_env_find(h->env_name, &c->spec);

	if (err)
		return err;
	c->spec.state_size = h->state_size;
	c->spec.max_episode_steps = h->max_episode_steps;
	c->spec.obs_ndim = h->obs_ndim;
	memcpy(c->spec.obs_shape, h->obs_shape, sizeof(c->spec.obs_shape));
	c->spec.obs_dim = h->obs_dim;
	memcpy(c->spec.params, h->params, sizeof(c->spec.params));
	if (sr_env_action_size(&c->spec) != h->act_size)
		return sr__errorf(-EINVAL, "worker: env '%s' has actions of %zu bytes, the pool %u",
				  c->spec.id, sr_env_action_size(&c->spec), h->act_size);
	return 0;
}

static int cw_alloc(struct sr__cworker *c)
{
	size_t n = c->n ? c->n : 1;

	c->states = calloc(n, c->spec.state_size);
	c->prev_seq = calloc(n, sizeof(uint64_t));
	c->ep_len = calloc(n, sizeof(uint64_t));
	c->done_seq = calloc(n, sizeof(uint64_t));
	c->elapsed = calloc(n, sizeof(uint32_t));
	c->done_loc = calloc(n, sizeof(uint32_t));
	c->done = calloc(n, 1);
	c->done_term = calloc(n, 1);
	c->done_trunc = calloc(n, 1);
	c->ep_ret = calloc(n, sizeof(double));
	c->rew = calloc(n, sizeof(double));
	c->need = calloc(n, 1);
	c->fix = calloc(2 * n, sizeof(uint32_t));
	if (!c->states || !c->prev_seq || !c->ep_len || !c->done_seq || !c->elapsed ||
	    !c->done_loc || !c->done || !c->done_term || !c->done_trunc || !c->ep_ret || !c->rew ||
	    !c->need || !c->fix)
		return sr__errorf(-ENOMEM, "worker: out of memory for %u envs", c->n);
	/* Opaque envs (a physics world per instance) are created here, as
	 * the thread workers do; the process's exit frees them. */
	if (sr_env_is_opaque(&c->spec))
		for (uint32_t i = 0; i < c->n; i++) {
			int err = c->spec.create(&c->spec, c->states + (size_t)i * c->spec.state_size);

			if (err)
				return sr__errorf(err < 0 ? err : -ENOMEM,
						  "worker: env '%s' instance %u: create failed",
						  c->spec.id, c->in.first_env + i);
			c->made++;
		}
	return 0;
}

static void cw_drop_stage(struct sr__cworker *c);

static void cw_free(struct sr__cworker *c)
{
	cw_drop_stage(c);
	if (c->states && sr_env_is_opaque(&c->spec))
		for (uint32_t i = 0; i < c->made; i++)
			c->spec.destroy(&c->spec, c->states + (size_t)i * c->spec.state_size);
	free(c->states);
	free(c->prev_seq);
	free(c->ep_len);
	free(c->done_seq);
	free(c->elapsed);
	free(c->done_loc);
	free(c->done);
	free(c->done_term);
	free(c->done_trunc);
	free(c->ep_ret);
	free(c->rew);
	free(c->need);
	free(c->fix);
}

static void cw_seed(struct sr__cworker *c)
{
	const uint64_t e0 = c->in.env_base + c->in.first_env;

	if (!c->n)
		return;
	if (!c->in.restarts) {
		/* As the thread workers do: instance i from (seed, e0 + i). */
		c->spec.seed(&c->spec, c->states, c->n, c->in.seed, e0);
	} else {
		for (uint32_t i = 0; i < c->n; i++)
			c->spec.seed(&c->spec, state_of(c, i), 1,
				     sr_proc_seed(c->in.seed, (uint32_t)(e0 + i), c->in.restarts),
				     e0 + i);
	}
	for (uint32_t i = 0; i < c->n; i++) {
		c->prev_seq[i] = SR_RING_NO_PREV;
		/* After a restart every env starts over: the next step resets
		 * it (NEXT_STEP, SAME_STEP), or it repeats a truncated pad row
		 * until the trainer resets it (DISABLED). */
		c->done[i] = c->done_trunc[i] = c->in.restarts ? 1 : 0;
	}
}

/*
 * The finite check, slow part (runtime/collector.c, "Finite check"; the
 * same rule as the thread workers' flag_nonfinite): rows of local envs
 * [lo, lo + n) in the slots from @s (no wrap), where a vector pass found a
 * NaN or an infinity: flag each such row, count it on this worker's
 * record (its single writer) and offer the first one's env to the
 * block's nf_first. @rew_too: 0 for reset rows (reward 0 by
 * construction). Published with the rows (R1), read by the trainer after
 * done_gen (PC1).
 */
static void cw_flag(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t s, bool rew_too)
{
	struct sr__proc_hdr *h = c->w->h;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t what = (sr__nonfinite_any(c->c_obs + (s + i) * c->od, c->od) ? SR__NF_OBS
										 : 0) |
				(rew_too && sr__nonfinite_f(c->c_rew[s + i]) ? SR__NF_REW : 0);

		if (!what)
			continue;
		c->c_flags[s + i] |= SR_SLOT_NONFINITE;
		if (!k++)
			sr__nonfinite_offer(&h->nf_first, (uint64_t)c->in.first_env + lo + i, what);
	}
	sr__add_relaxed(&c->w->rec->nonfinite, k);
}

/* Reset local envs [lo, lo + n) (all, or where mask[env]) into the slots
 * from @q0; the others are observed into pad rows. */
static void cw_reset(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t q0,
		     const sr_proc_cmd *cmd)
{
	const sr_env_spec *sp = &c->spec;
	const uint32_t e0 = c->in.first_env, rf = cmd->reset_flags;
	const uint8_t *mask = cmd->mask;
	/* A reset of sr_pool_reset_ex reseeds each env it resets, then resets
	 * it within its options, as the thread pool does (sr_pool_reset_ex,
	 * worker.c reset_range): the same rows. */
	const struct sr__reset_opt *ro = (rf & SR_RESET_F_OPTIONS) ? sr__env_reset_opt(sp) : NULL;

	for (uint32_t k = 0; k < n; k++) {
		const uint32_t i = lo + k;
		uint64_t q = q0 + k, s = q & c->mask;
		bool on = !mask || mask[e0 + i];

		if (on && (rf & SR_RESET_F_SEED))
			sp->seed(sp, state_of(c, i), 1, cmd->reset_seed, c->in.env_base + e0 + i);
		else if (on && (rf & SR_RESET_F_SEEDS) && (!cmd->seed_mask || cmd->seed_mask[e0 + i]))
			sp->seed(sp, state_of(c, i), 1, cmd->seeds[e0 + i], 0);
		if (on && ro)
			ro->reset(sp, state_of(c, i), 1, cmd->reset_b, c->c_obs + s * c->od);
		else if (on)
			sp->reset(sp, state_of(c, i), 1, c->c_obs + s * c->od);
		else
			sp->observe(sp, state_of(c, i), c->c_obs + s * c->od);
		memset(c->c_act + s * c->asz, 0, c->asz);
		c->c_env[s] = e0 + i;
		c->c_rew[s] = 0.0f;
		c->c_term[s] = 0;
		c->c_trunc[s] = 0;
		if (on) {
			c->ep_ret[i] = 0;
			c->ep_len[i] = 0;
			c->c_flags[s] = SR_SLOT_FIRST;
			c->c_prev[s] = SR_RING_NO_PREV;
			c->prev_seq[i] = q;
			c->elapsed[i] = 0;
			c->done[i] = c->done_term[i] = c->done_trunc[i] = 0;
		} else {
			c->c_flags[s] = SR_SLOT_PAD;
			c->c_prev[s] = c->prev_seq[i];
		}
	}
	if (c->check && n &&
	    SR_UNLIKELY(sr__nonfinite_any(c->c_obs + (q0 & c->mask) * c->od, (size_t)n * c->od)))
		cw_flag(c, lo, n, q0 & c->mask, false);
}

/*
 * Ring bookkeeping of a step of local envs [lo, lo + n) into the slots
 * from @q0 (no wrap), as runtime/worker.c's bookkeep() does it for thread
 * workers: reward, truncation (TimeLimit), flags, env id, prev link,
 * action, the finite check. First straight-line loops over whole columns
 * (no branches: the compiler vectorizes them) do what a live env needs and
 * mark in need[] the rows that need more: envs whose episode ended last
 * step (not stepped now: reset or observed, reward 0 and terminated 0)
 * and envs that end now. Then those rows only. Envs of SAME_STEP that
 * ended are listed (c->nd) for cw_extras.
 */
SR_VECTOR_CLONES
static void cw_book(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t q0,
		    const unsigned char *acts)
{
	const uint64_t s = q0 & c->mask;
	const uint32_t od = c->od, env0 = c->in.first_env + lo;
	const uint32_t trunc_at = c->maxs ? c->maxs - 1 : UINT32_MAX;
	const uint32_t autoreset = c->in.autoreset;
	/* Locals: byte stores may alias anything, so fields read through @c
	 * would be reloaded after every store. */
	uint32_t *restrict c_env = c->c_env + s;
	uint8_t *restrict c_term = c->c_term + s;
	uint8_t *restrict c_trunc = c->c_trunc + s;
	uint8_t *restrict c_flags = c->c_flags + s;
	float *restrict c_rew = c->c_rew + s;
	uint64_t *restrict c_prev = c->c_prev + s;
	const double *restrict rew = c->rew + lo;
	uint64_t *restrict prev_seq = c->prev_seq + lo;
	uint32_t *restrict elapsed = c->elapsed + lo;
	uint8_t *restrict done = c->done + lo;
	uint8_t *restrict done_term = c->done_term + lo;
	uint8_t *restrict done_trunc = c->done_trunc + lo;
	double *restrict ep_ret = c->ep_ret + lo;
	uint64_t *restrict ep_len = c->ep_len + lo;
	uint8_t *restrict need = c->need;
	uint32_t *restrict fa = c->fix, *restrict fb = c->fix + n;
	uint32_t na = 0, nb = 0;
	uint8_t any = 0;

	memcpy(c->c_act + s * c->asz, acts, (size_t)n * c->asz);
	memset(c_flags, 0, n);
	for (uint32_t i = 0; i < n; i++) {
		c_env[i] = env0 + i;
		c_rew[i] = (float)rew[i];
		ep_len[i]++;
	}
	for (uint32_t i = 0; i < n; i++) {
		/* A NaN or infinite reward never enters the episode's return:
		 * its bits are masked to +0.0f (an and, not a branch). */
		float r = c_rew[i];
		uint32_t b;

		memcpy(&b, &r, sizeof(b));
		b &= sr__nonfinite_f(r) - 1u;
		memcpy(&r, &b, sizeof(r));
		ep_ret[i] += r;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t t = c_term[i] != 0, tr = elapsed[i] >= trunc_at;

		c_trunc[i] = tr;
		c_term[i] = t;
		need[i] = done[i] | t | tr;
		any |= need[i];
	}
	for (uint32_t i = 0; i < n; i++) {
		c_prev[i] = prev_seq[i];
		prev_seq[i] = q0 + i;
		elapsed[i]++;
	}
	/* The finite check: one vector pass over the rows just written (hot
	 * in cache); row by row only when it finds something. */
	if (c->check && SR_UNLIKELY(sr__nonfinite_any(c->c_obs + s * od, (size_t)n * od) |
				    sr__nonfinite_any(c_rew, n)))
		cw_flag(c, lo, n, s, true);
	if (SR_LIKELY(!any))
		return;

	/* The rare rows, listed without a branch per row: those that ended
	 * last step in fa, those that end now in fb. */
	for (uint32_t i0 = 0; i0 < n; i0 += 8) {
		const uint32_t kn = n - i0 < 8 ? n - i0 : 8;
		uint64_t m = 0;

		for (uint32_t k = 0; k < kn; k++)
			m |= (uint64_t)need[i0 + k] << (8 * k);
		while (m) {
			const uint32_t i = i0 + ((uint32_t)__builtin_ctzll(m) >> 3);
			const uint8_t d = done[i];

			fa[na] = i;
			na += d;
			fb[nb] = i;
			nb += d ^ 1;
			m &= m - 1;
		}
	}
	for (uint32_t k = 0; k < na; k++) {
		/* Ended last step, so not stepped now: undo the live-env update
		 * where it does not apply. */
		const uint32_t i = fa[k];

		if (autoreset == SR_AUTORESET_DISABLED) {
			/* Repeat the state: a pad row, not a transition. */
			prev_seq[i] = c_prev[i];
			elapsed[i]--;
			ep_len[i]--;
			c_term[i] = done_term[i];
			c_trunc[i] = done_trunc[i];
			c_flags[i] |= SR_SLOT_PAD;
		} else {
			/* The reset obs of a new episode. */
			c_term[i] = 0;
			c_trunc[i] = 0;
			c_flags[i] |= SR_SLOT_FIRST;
			c_prev[i] = SR_RING_NO_PREV;
			elapsed[i] = 0;
			ep_ret[i] = 0;
			ep_len[i] = 0;
			done[i] = done_term[i] = done_trunc[i] = 0;
		}
	}
	for (uint32_t k = 0; k < nb; k++) {
		/* Ends now: the live-env update applies; then the episode. */
		const uint32_t i = fb[k];

		sr_proc_worker_episode(c->w, ep_ret[i], ep_len[i]);
		ep_ret[i] = 0;
		ep_len[i] = 0;
		done[i] = 1;
		done_term[i] = c_term[i];
		done_trunc[i] = c_trunc[i];
		if (c->in.final_obs)
			memcpy(c->in.final_obs + (size_t)(env0 + i) * od, c->c_obs + (s + i) * od,
			       od * sizeof(float));
		if (autoreset == SR_AUTORESET_SAME_STEP) {
			c->done_loc[c->nd] = lo + i;
			c->done_seq[c->nd] = q0 + i;
			c->nd++;
		}
	}
}

/* Step local envs [lo, lo + n) into the slots from @q0 (consecutive, no
 * wrap: the pool reserves a command's rows with SR_RESERVE_CONTIG); @acts:
 * env lo's action, the others' after it (the mailbox, row = env). Envs of
 * SAME_STEP that ended are listed (c->nd) for cw_extras. */
static void cw_step(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t q0,
		    const unsigned char *acts, uint64_t *ns_env)
{
	const sr_env_spec *sp = &c->spec;
	const uint64_t s0 = q0 & c->mask;
	unsigned char *st = state_of(c, lo);
	const uint8_t *done = c->done + lo;
	double *rew = c->rew + lo;
	const size_t ssz = c->spec.state_size;
	uint64_t t0 = sr__now_ns();
	uint32_t i = 0;

	/* Env calls: runs of live envs in one call; an env whose episode
	 * ended last step is reset (or observed, DISABLED) instead. */
	while (i < n) {
		uint32_t j = i;

		while (j < n && !done[j])
			j++;
		if (j > i)
			sp->step(sp, st + (size_t)i * ssz, j - i, acts + (size_t)i * c->asz,
				 c->c_obs + (s0 + i) * c->od, rew + i, c->c_term + s0 + i);
		if (j == n)
			break;
		if (c->in.autoreset == SR_AUTORESET_DISABLED)
			sp->observe(sp, st + (size_t)j * ssz, c->c_obs + (s0 + j) * c->od);
		else
			sp->reset(sp, st + (size_t)j * ssz, 1, c->c_obs + (s0 + j) * c->od);
		rew[j] = 0.0;
		c->c_term[s0 + j] = 0;
		i = j + 1;
	}
	*ns_env += sr__now_ns() - t0;
	cw_book(c, lo, n, q0, acts);
}

/* SAME_STEP: the step's row (final obs) of each env that ended moves to
 * an extra slot flagged FINAL; the batch row gets the reset obs, FIRST.
 * The extras are reserved here: if this process dies before it publishes
 * them, the pool publishes the gap as pad rows. */
static void cw_extras(struct sr__cworker *c)
{
	const sr_env_spec *sp = &c->spec;
	const uint32_t nd = c->nd;
	uint64_t e;

	if (!nd)
		return;
	sr_ring_reserve(c->in.ring, nd, 0, &e);
	for (uint32_t k = 0; k < nd; k++) {
		const uint64_t sq = c->done_seq[k] & c->mask, se = (e + k) & c->mask;
		const uint32_t l = c->done_loc[k];

		memcpy(c->c_obs + se * c->od, c->c_obs + sq * c->od, c->od * sizeof(float));
		memcpy(c->c_act + se * c->asz, c->c_act + sq * c->asz, c->asz);
		c->c_rew[se] = c->c_rew[sq];
		c->c_term[se] = c->c_term[sq];
		c->c_trunc[se] = c->c_trunc[sq];
		c->c_env[se] = c->c_env[sq];
		c->c_prev[se] = c->c_prev[sq];
		/* The final obs and the reward move with the transition, and so
		 * does their finite flag; the batch row keeps the reward and
		 * gets the reset obs (a new finding, counted). */
		c->c_flags[se] = SR_SLOT_FINAL | (c->c_flags[sq] & SR_SLOT_NONFINITE);
		sp->reset(sp, state_of(c, l), 1, c->c_obs + sq * c->od);
		c->c_flags[sq] = SR_SLOT_FIRST;
		if (c->check) {
			if (SR_UNLIKELY(sr__nonfinite_any(c->c_obs + sq * c->od, c->od)))
				cw_flag(c, l, 1, sq, false);
			else if (SR_UNLIKELY(sr__nonfinite_f(c->c_rew[sq])))
				c->c_flags[sq] |= SR_SLOT_NONFINITE; /* counted by cw_book */
		}
		c->c_prev[sq] = SR_RING_NO_PREV;
		c->prev_seq[l] = c->done_seq[k];
		c->elapsed[l] = 0;
		c->done[l] = c->done_term[l] = c->done_trunc[l] = 0;
	}
	sr_ring_publish(c->in.ring, e, nd);
	c->nd = 0;
}

int sr__cworker_open(sr_proc_worker *w, const sr_proc_info *info, const sr_env_spec *spec,
		     struct sr__cworker **out)
{
	struct sr__cworker *c = calloc(1, sizeof(*c));
	int err;

	*out = NULL;
	if (!c)
		return sr__errorf(-ENOMEM, "out of memory");
	c->w = w;
	c->in = *info;
	c->n = info->n_envs;
	if (spec)
		c->spec = *spec; /* this process's own spec (the inline slice) */
	err = spec ? 0 : load_env(c);
	if (!err)
		err = cw_alloc(c);
	if (err) {
		sr__cworker_close(c);
		return err;
	}
	c->od = info->obs_dim;
	c->asz = info->act_size;
	c->maxs = c->spec.max_episode_steps;
	c->mask = sr_ring_capacity(info->ring) - 1;
	c->c_obs = sr_ring_obs_col(info->ring);
	c->c_rew = sr_ring_reward_col(info->ring);
	c->c_act = sr_ring_action_col(info->ring);
	c->c_term = sr_ring_terminated_col(info->ring);
	c->c_trunc = sr_ring_truncated_col(info->ring);
	c->c_flags = sr_ring_flags_col(info->ring);
	c->c_env = sr_ring_env_id_col(info->ring);
	c->c_prev = sr_ring_prev_col(info->ring);
	c->check = w->h->check_finite != 0;
	/* The trainer leaves this worker's rows to it (PC1: ordered before
	 * the READY state, or, inline, on the trainer's own thread). */
	atomic_store_explicit(&w->rec->checks_finite, 1, memory_order_relaxed);
	cw_seed(c);
	*out = c;
	return 0;
}

void sr__cworker_close(struct sr__cworker *c)
{
	if (!c)
		return;
	cw_free(c);
	free(c);
}

/* ---- checkpoints: SAVE, LOAD, COMMIT (the exchange area: stepring/proc.h) ---- */

#define XREC sizeof(struct sr__ckpt_env_rec)

/* Every env's record: its state bytes (an opaque env: what save() writes)
 * and its bookkeeping, as the thread workers' checkpoint takes them. */
static void cw_save(struct sr__cworker *c, sr_proc_worker *w)
{
	const sr_env_spec *sp = &c->spec;
	const bool opq = sr_env_is_opaque(sp);
	const size_t each = sr__align_up(opq ? sp->save_max : sp->state_size, 8);
	size_t cap, off = (size_t)c->n * (XREC + 8);
	uint8_t *a;
	void *area;
	int err = sr_proc_worker_xchg(w, &area, &cap);

	if (err) {
		sr_proc_worker_xchg_end(w, err, 0, sr_last_error());
		return;
	}
	if ((uint64_t)c->n * (XREC + 8 + each) > cap) {
		sr_proc_worker_xchg_end(w, -ENOBUFS, (uint64_t)c->n * (XREC + 8 + each), NULL);
		return;
	}
	a = area;
	for (uint32_t i = 0; i < c->n; i++) {
		struct sr__ckpt_env_rec er;
		uint64_t len = sp->state_size;

		memset(&er, 0, sizeof(er));
		er.prev_seq = c->prev_seq[i];
		er.ep_len = c->ep_len[i];
		er.ep_ret = c->ep_ret[i];
		er.elapsed = c->elapsed[i];
		er.done = c->done[i];
		er.term = c->done_term[i];
		er.trunc = c->done_trunc[i];
		memcpy(a + (size_t)i * XREC, &er, XREC);
		if (opq) {
			size_t l = 0;

			err = sp->save(sp, state_of(c, i), a + off, sp->save_max, &l);
			if (err || l > sp->save_max) {
				char msg[256];

				snprintf(msg, sizeof(msg), "env %u ('%s') cannot be saved: %s",
					 c->in.first_env + i, sp->id,
					 err ? sr_strerror(err) : "save() wrote more than save_max");
				sr_proc_worker_xchg_end(w, err ? err : -EOVERFLOW, 0, msg);
				return;
			}
			len = l;
		} else {
			memcpy(a + off, state_of(c, i), sp->state_size);
		}
		memset(a + off + len, 0, sr__align_up(len, 8) - len);
		memcpy(a + (size_t)c->n * XREC + (size_t)i * 8, &len, 8);
		off += sr__align_up(len, 8);
	}
	sr_proc_worker_xchg_end(w, 0, off, NULL);
}

static void cw_drop_stage(struct sr__cworker *c)
{
	if (c->stage && sr_env_is_opaque(&c->spec))
		sr_env_destroy_instances(&c->spec, c->stage, c->n);
	free(c->stage);
	free(c->stage_rec);
	c->stage = NULL;
	c->stage_rec = NULL;
	c->staged = false;
}

/* The records of the exchange area, checked and kept aside (the live envs
 * untouched): plain states copied, an opaque env's loaded into new
 * instances; each accepted by the env's check_state. */
static void cw_load(struct sr__cworker *c, sr_proc_worker *w)
{
	const sr_env_spec *sp = &c->spec;
	const bool opq = sr_env_is_opaque(sp);
	const size_t ssz = sp->state_size;
	size_t cap, off = (size_t)c->n * (XREC + 8);
	char msg[256] = "";
	const uint8_t *a;
	void *area;
	int err;

	cw_drop_stage(c);
	err = sr_proc_worker_xchg(w, &area, &cap);
	if (err) {
		sr_proc_worker_xchg_end(w, err, 0, sr_last_error());
		return;
	}
	a = area;
	if (off > cap) {
		sr_proc_worker_xchg_end(w, -EBADMSG, 0, "the exchange area is too small");
		return;
	}
	c->stage = aligned_alloc(64, ((size_t)c->n * ssz + 127) & ~(size_t)63);
	c->stage_rec = malloc((size_t)(c->n ? c->n : 1) * XREC);
	if (!c->stage || !c->stage_rec) {
		free(c->stage);
		c->stage = NULL;
		sr_proc_worker_xchg_end(w, -ENOMEM, 0, "out of memory");
		return;
	}
	memcpy(c->stage_rec, a, (size_t)c->n * XREC);
	if (opq && (err = sr_env_create_instances(sp, c->stage, c->n))) {
		free(c->stage);
		c->stage = NULL;
		snprintf(msg, sizeof(msg), "cannot create %u instances of '%s': %s", c->n, sp->id,
			 sr_strerror(err));
		goto fail;
	}
	for (uint32_t i = 0; i < c->n; i++) {
		uint64_t len;
		unsigned char *st = c->stage + (size_t)i * ssz;

		memcpy(&len, a + (size_t)c->n * XREC + (size_t)i * 8, 8);
		if (len > cap - off || (opq ? len > sp->save_max : len != ssz)) {
			err = -EBADMSG;
			snprintf(msg, sizeof(msg), "env %u's record has %llu bytes", c->in.first_env + i,
				 (unsigned long long)len);
			goto fail;
		}
		err = opq ? sp->load(sp, st, a + off, (size_t)len) : (memcpy(st, a + off, ssz), 0);
		if (!err && sp->check_state)
			err = sp->check_state(sp, st);
		if (err) {
			snprintf(msg, sizeof(msg), "env %u's state is refused by '%s' (%s)",
				 c->in.first_env + i, sp->id, sr_strerror(err < 0 ? err : -EINVAL));
			err = -EBADMSG;
			goto fail;
		}
		off += sr__align_up((size_t)len, 8);
	}
	c->staged = true;
	sr_proc_worker_xchg_end(w, 0, 0, NULL);
	return;
fail:
	cw_drop_stage(c);
	sr_proc_worker_xchg_end(w, err ? err : -EBADMSG, 0, msg);
}

/* COMMIT: the staged records become the envs (@apply) or are dropped. */
static void cw_commit(struct sr__cworker *c, bool apply)
{
	if (apply && c->staged) {
		const size_t ssz = c->spec.state_size;

		for (uint32_t i = 0; i < c->n; i++) {
			const struct sr__ckpt_env_rec *er = &c->stage_rec[i];
			unsigned char *a = state_of(c, i), *b = c->stage + (size_t)i * ssz;

			/* Swap: an opaque env's old instance goes to the stage,
			 * which destroys it below (the ABI lets the runtime move
			 * an opaque state's bytes). */
			for (size_t k = 0; k < ssz; k++) {
				unsigned char t = a[k];
				a[k] = b[k];
				b[k] = t;
			}
			c->prev_seq[i] = er->prev_seq;
			c->ep_len[i] = er->ep_len;
			c->ep_ret[i] = er->ep_ret;
			c->elapsed[i] = er->elapsed;
			c->done[i] = er->done;
			c->done_term[i] = er->term;
			c->done_trunc[i] = er->trunc;
		}
	}
	cw_drop_stage(c);
}

/* One command: this worker's rows of it (a range of its envs, or a list
 * of them as runs of consecutive envs), published. Also the inline
 * slice's sr_proc_inline_fn (@arg is the worker). */
int sr__cworker_run(void *arg, sr_proc_worker *w, const sr_proc_info *info,
		    const sr_proc_cmd *cmd)
{
	struct sr__cworker *c = arg;
	const uint32_t e0 = c->in.first_env;
	const unsigned char *acts = cmd->actions;
	uint64_t ns_env = 0, t0 = sr__now_ns();

	(void)info;
	c->ns_env = 0;
	c->nd = 0;
	switch (cmd->kind) { /* checkpoints: the whole slice, no rows */
	case SR_PROC_CMD_SAVE:
		cw_save(c, w);
		return 0;
	case SR_PROC_CMD_LOAD:
		cw_load(c, w);
		return 0;
	case SR_PROC_CMD_COMMIT:
		cw_commit(c, cmd->seq != 0);
		return 0;
	default:
		break;
	}
	if (!cmd->n)
		return 0;
	/* R3: the trainer claimed the command's slots on the ring's head
	 * before posting it (PC0's acquire ordered the claim before us; the
	 * same thread for the inline slice); the fence orders the claim
	 * before our writes. */
	atomic_thread_fence(memory_order_release);
	for (uint32_t j = 0, k; j < cmd->n; j = k) {
		/* A run of consecutive envs (a range is one run). */
		const uint32_t e = cmd->ids ? cmd->ids[j] : cmd->lo + j;

		k = j + 1;
		if (cmd->ids)
			while (k < cmd->n && cmd->ids[k] == e + (k - j))
				k++;
		else
			k = cmd->n;
		if (cmd->kind == SR_PROC_CMD_STEP)
			cw_step(c, e - e0, k - j, cmd->row + j, acts + (size_t)e * c->asz, &ns_env);
		else
			cw_reset(c, e - e0, k - j, cmd->row + j, cmd);
	}
	if (cmd->kind == SR_PROC_CMD_STEP)
		cw_extras(c);
	else
		ns_env = sr__now_ns() - t0;
	c->ns_env = ns_env;
	/* R1: the rows' columns before the consumer sees them. */
	sr_ring_publish(c->in.ring, cmd->row, cmd->n);
	return 0;
}

int sr__proc_c_main(void);
int sr__proc_c_main(void)
{
	struct sr__cworker *c;
	sr_proc_worker *w;
	sr_proc_info in;
	sr_proc_cmd cmd;
	int err;

	err = sr_proc_worker_open(&w, &in);
	if (err) {
		fprintf(stderr, "stepring-worker: %s\n", sr_last_error());
		return 2;
	}
	err = sr__cworker_open(w, &in, NULL, &c);
	if (err) {
		sr_proc_worker_fail(w, sr_last_error());
		return 3;
	}
	sr_proc_worker_ready(w);
	while (!(err = sr_proc_worker_wait(w, &cmd))) {
		sr__cworker_run(c, w, &in, &cmd);
		sr_proc_worker_done(w, cmd.n, c->ns_env);
	}
	sr__cworker_close(c);
	sr_proc_worker_close(w);
	return 0;
}
