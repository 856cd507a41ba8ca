/*
 * Stepping a slice of envs into ring rows: the code both C worker kinds
 * run (the thread workers, worker/thread.c, and the C env worker of
 * process pools, worker/proc_cworker.c). Not for inclusion anywhere else.
 *
 * One copy of each routine, static inline and parameterized by what
 * differs between the two (DPDK's rte_ring_elem_pvt.h, "identical code
 * needed in both single and multi producer"): where the ring's columns are
 * (struct sr__ring_cols), the settings (struct sr__book: the env, the
 * geometry, the autoreset mode, where final observations go, where the
 * first non-finite row is kept), whose envs the rows are (struct
 * sr__slice), which worker steps them (struct sr__book_x: its scratch,
 * its same-step list, its count of non-finite rows, its queue of finished
 * episodes). A thread worker may step a neighbour's envs (rebalancing):
 * the slice is then the neighbour's and the stepper its own.
 *
 * The rows a call writes are slots s .. s + n - 1 of the ring (slot
 * indices, no wrap: every caller reserves its rows with SR_RESERVE_CONTIG
 * or cuts its runs at the lap's end); the caller publishes them (R1).
 *
 * The order of the work is the thread workers' (measured there, see the
 * comments): env calls with the finite check's obs test a chunk at a
 * time, while the rows are in L1; then column loops without branches over
 * whole columns, which the vectorizer turns into vector code (the callers
 * are SR_VECTOR_CLONES functions, built at -O3); then only the rare rows
 * (episode ends) one by one.
 */
#ifndef SR_BOOK_PVT_H
#define SR_BOOK_PVT_H

#include <string.h>

#include "ring_internal.h"
#include "sr_base.h"
#include "worker_internal.h"

/* A little-endian word from memory, as the host holds it. */
static inline uint64_t sr__le64(uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return __builtin_bswap64(v);
#else
	return v;
#endif
}

/* The first index >= @i below @n whose byte in @a is not 0, or @n:
 * eight bytes at a time (done flags are rare: usually one load per 8). */
static inline uint32_t sr__next_set(const uint8_t *a, uint32_t i, uint32_t n)
{
	for (; n - i >= 8; i += 8) {
		uint64_t m;

		memcpy(&m, a + i, 8);
		if (m)
			return i + ((uint32_t)__builtin_ctzll(sr__le64(m)) >> 3);
	}
	while (i < n && !a[i])
		i++;
	return i;
}

/* The state of local env @loc of slice @w. */
static inline unsigned char *sr__book_state(const struct sr__book *b, const struct sr__slice *w,
					    uint32_t loc)
{
	return w->states + (size_t)loc * b->spec->state_size;
}

/*
 * The finite check's test of obs just written (sr__book_env_calls):
 * whether any of @a[0 .. @n) is NaN or infinite. A function of its own
 * (book.c) so that it gets the AVX2 clone, called once per SR__NF_CHUNK
 * floats or so, not once per env call.
 */
uint32_t sr__book_obs_nonfinite(const float *a, size_t n);

/* Obs floats sr__book_env_calls writes between two tests: 2 KiB, which
 * with the env states stepped meanwhile stays in L1. */
#define SR__NF_CHUNK 512

/*
 * Env calls for local envs [lo, lo + n) of @w writing into slots s .. s +
 * n - 1. Live envs are stepped in runs of consecutive envs (one call
 * each); an env whose episode ended last step is reset (NEXT_STEP,
 * SAME_STEP) or just observed (DISABLED) instead, and gets reward 0 and
 * terminated 0 here, so sr__book_rows' vector passes read defined values
 * for every row.
 *
 * With the finite check on, the obs rows are tested here, a chunk at a
 * time right after the env calls that wrote them, while they are still
 * in L1. (Tested in the bookkeeping, after the whole slice's env calls,
 * they had been pushed out by the env states stepped after them:
 * CartPole, 1024 envs on one thread, every obs line was an L1 miss again,
 * 12% more L1 read misses for the whole step.) Returns whether some obs
 * is NaN or infinite (sr__book_rows flags the rows); 0 with the check off.
 */
static inline __attribute__((always_inline)) uint32_t
sr__book_env_calls(const struct sr__book *b, const struct sr__ring_cols *rc,
		   const struct sr__slice *w, uint32_t lo, uint32_t n, uint64_t s,
		   const unsigned char *acts)
{
	const sr_env_spec *sp = b->spec;
	const uint8_t *done = w->done + lo;
	const bool check = b->check;
	const uint32_t od = b->od;
	uint32_t i = 0, c = 0, nf = 0; /* c: first row not tested */

	while (i < n) {
		uint32_t j = sr__next_set(done, i, n);

		if (j > i)
			sp->step(sp, sr__book_state(b, w, lo + i), j - i, acts + (size_t)i * b->asz,
				 rc->obs + (s + i) * od, w->rew + lo + i, rc->term + s + i);
		if (j < n) {
			if (b->autoreset == SR_AUTORESET_DISABLED)
				sp->observe(sp, sr__book_state(b, w, lo + j), rc->obs + (s + j) * od);
			else
				sp->reset(sp, sr__book_state(b, w, lo + j), 1, rc->obs + (s + j) * od);
			w->rew[lo + j] = 0.0;
			rc->term[s + j] = 0;
			j++;
		}
		/* Rows [c, j) are written. */
		if (check && ((size_t)(j - c) * od >= SR__NF_CHUNK || j == n)) {
			nf |= sr__book_obs_nonfinite(rc->obs + (s + c) * od, (size_t)(j - c) * od);
			c = j;
		}
		i = j;
	}
	return nf;
}

/*
 * The finite check (runtime/pool/collector.c, "Finite check"), slow part:
 * rows [0, @n) of slots from @s, those of pool envs @env0 .. @env0 + n - 1,
 * where some obs or reward is NaN or infinite: flag each such row, count
 * it on @x (its stepper, the counter's single writer) and offer the
 * first to b->nf_first. Runs only when a vector test found one. @rew_too:
 * 0 for reset rows (their reward is 0 by construction). Returns the rows
 * flagged.
 */
static inline uint32_t sr__book_flag(const struct sr__book *b, const struct sr__ring_cols *rc,
				     const struct sr__book_x *x, uint32_t env0, uint32_t n,
				     uint64_t s, bool rew_too)
{
	const uint32_t od = b->od;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t what = (sr__nonfinite_any(rc->obs + (s + i) * od, od) ? SR__NF_OBS : 0) |
				(rew_too && sr__nonfinite_f(rc->rew[s + i]) ? SR__NF_REW : 0);

		if (!what)
			continue;
		rc->flags[s + i] |= SR_SLOT_NONFINITE;
		if (!k)
			sr__nonfinite_offer(b->nf_first, (uint64_t)env0 + i, what);
		k++;
	}
	sr__add_relaxed(x->nonfinite, k);
	return k;
}

/*
 * Ring bookkeeping for the same envs after sr__book_env_calls: reward,
 * truncation (TimeLimit), flags, env id, prev link, action; remembers
 * which envs finished (SAME_STEP fix-up). The envs are local [lo, lo + n)
 * of @w, pool envs from @env0, in slots from ring sequence @seq; @x steps
 * them: its scratch, its same-step list (from entry @nd), its count of
 * non-finite rows, its episode queue. Returns the same-step list's new
 * length.
 *
 * Two parts. First, straight-line loops over whole columns (struct of
 * arrays on both sides, no branches, so the compiler vectorizes them) do
 * what a live env needs: float reward, terminated normalised to 0/1,
 * truncation, prev link, elapsed, episode sums, env id, flags, action;
 * and mark in x->need the rows that need more. Second, those rows only:
 * envs whose episode ended last step (not stepped now: reset or
 * observed; the env calls gave them reward 0 and terminated 0) and envs
 * that end now (episode, final obs, same-step list). With CartPole's
 * short episodes that is a few percent of the rows.
 *
 * The finite check: @nf_obs is the env calls' finding on the rows' obs;
 * the rewards are tested in the episode-return loop, which looks at each
 * one's exponent already.
 */
static inline __attribute__((always_inline)) uint32_t
sr__book_rows(const struct sr__book *b, const struct sr__ring_cols *rc, struct sr__slice *w,
	      uint32_t env0, uint32_t lo, uint32_t n, uint64_t seq, const unsigned char *acts,
	      struct sr__book_x *x, uint32_t nd, uint32_t nf_obs)
{
	const uint64_t s = seq & (rc->cap - 1);
	const uint32_t trunc_at = b->trunc_at;
	const uint32_t od = b->od;
	const uint32_t autoreset = b->autoreset;
	/* Locals: byte stores may alias anything, so fields read through @b,
	 * @rc, @w or @x would be reloaded after every store. */
	uint32_t *restrict c_env = rc->env + s;
	uint8_t *restrict c_term = rc->term + s;
	uint8_t *restrict c_trunc = rc->trunc + s;
	uint8_t *restrict c_flags = rc->flags + s;
	float *restrict c_rew = rc->rew + s;
	uint64_t *restrict c_prev = rc->prev + s;
	const double *restrict rew = w->rew + lo;
	uint64_t *restrict prev_seq = w->prev_seq + lo;
	uint32_t *restrict elapsed = w->elapsed + lo;
	uint8_t *restrict done = w->done + lo;
	uint8_t *restrict done_term = w->done_term + lo;
	uint8_t *restrict done_trunc = w->done_trunc + lo;
	double *restrict ep_ret = w->ep_ret + lo;
	uint64_t *restrict ep_len = w->ep_len + lo;
	uint8_t *restrict need = x->need;
	uint32_t *restrict fa = x->fix, *restrict fb = x->fix + n;
	float *const final = b->final;
	uint32_t na = 0, nb = 0, nf_rew = 0;
	uint8_t any = 0;

	memcpy(rc->act + s * b->asz, acts, (size_t)n * b->asz);
	memset(c_flags, 0, n);
	for (uint32_t i = 0; i < n; i++) {
		c_env[i] = env0 + i;
		c_rew[i] = (float)rew[i];
		ep_len[i]++;
	}
	for (uint32_t i = 0; i < n; i++) {
		/* A NaN or infinite reward never enters the episode's return:
		 * its bits are masked to +0.0f (an and, not a branch, and a loop
		 * of its own: with the select in the loop above, that loop of
		 * four element widths was no longer vectorized, and the
		 * bookkeeping ran twice the instructions). The finite check's
		 * test of the reward is the same test, or-ed up. */
		float r = c_rew[i];
		uint32_t bits, bad = sr__nonfinite_f(r);

		memcpy(&bits, &r, sizeof(bits));
		bits &= bad - 1u; /* 0 when non-finite, else all ones */
		memcpy(&r, &bits, sizeof(r));
		ep_ret[i] += r;
		nf_rew |= bad;
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
		prev_seq[i] = seq + i;
		elapsed[i]++;
	}
	/* The finite check (the env calls tested the obs, the loop above the
	 * rewards): the rows are looked at one by one only when something
	 * was found. The flag is or-ed in: the slow path below or-s its own. */
	if (b->check && SR_UNLIKELY(nf_obs | nf_rew))
		sr__book_flag(b, rc, x, env0, n, s, true);
	if (SR_LIKELY(!any))
		return nd;

	/* The rare rows come at random, so a branch per row would mispredict
	 * on each: list them without branches, those that ended last step in
	 * fa, those that end now in fb, then handle each list. */
	for (uint32_t i0 = 0; i0 < n; i0 += 8) {
		/* need[] bytes are 0 or 1: bit 8k of the word is byte k. Most
		 * words are 0; in the others, one step per set byte. */
		uint64_t m = 0;

		if (n - i0 >= 8) {
			memcpy(&m, need + i0, 8);
			m = sr__le64(m);
		} else {
			for (uint32_t k = 0; k < n - i0; k++)
				m |= (uint64_t)need[i0 + k] << (8 * k);
		}
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
			/* Repeat the state: a pad slot, not a transition. */
			prev_seq[i] = c_prev[i];
			elapsed[i]--;
			ep_len[i]--;
			c_term[i] = done_term[i];
			c_trunc[i] = done_trunc[i];
			c_flags[i] |= SR_SLOT_PAD;
		} else {
			/* NEXT_STEP: the reset obs of a new episode. */
			c_term[i] = 0;
			c_trunc[i] = 0;
			c_flags[i] |= SR_SLOT_FIRST;
			c_prev[i] = SR_RING_NO_PREV;
			elapsed[i] = 0;
			ep_ret[i] = 0;
			ep_len[i] = 0;
			done[i] = 0;
			done_term[i] = 0;
			done_trunc[i] = 0;
		}
	}
	for (uint32_t k = 0; k < nb; k++) {
		/* Ends now: the live-env update applies; then the episode. */
		const uint32_t i = fb[k];

		sr__eps_push(&x->eps, ep_ret[i], ep_len[i]);
		ep_ret[i] = 0;
		ep_len[i] = 0;
		done[i] = 1;
		done_term[i] = c_term[i];
		done_trunc[i] = c_trunc[i];
		if (final)
			memcpy(final + (size_t)(env0 + i) * od, rc->obs + (s + i) * od,
			       od * sizeof(float));
		if (autoreset == SR_AUTORESET_SAME_STEP) {
			x->done_loc[nd] = lo + i;
			x->done_seq[nd] = seq + i;
			nd++;
		}
	}
	return nd;
}

/* Copy slot @from into slot @to (all columns but flags). */
static inline void sr__book_copy_slot(const struct sr__book *b, const struct sr__ring_cols *rc,
				      uint64_t from, uint64_t to)
{
	const uint32_t od = b->od;

	memcpy(rc->obs + to * od, rc->obs + from * od, od * sizeof(float));
	memcpy(rc->act + to * b->asz, rc->act + from * b->asz, b->asz);
	rc->rew[to] = rc->rew[from];
	rc->term[to] = rc->term[from];
	rc->trunc[to] = rc->trunc[from];
	rc->env[to] = rc->env[from];
	rc->prev[to] = rc->prev[from];
}

/*
 * SAME_STEP: for each of the @nd envs on @x's same-step list (local envs
 * of @w, whose env 0 is pool env @first), move the step's slot (final
 * obs, the real transition) to an extra slot flagged SR_SLOT_FINAL, and
 * reset the env into its batch slot, flagged SR_SLOT_FIRST, keeping that
 * step's reward / terminated / truncated there (Gymnasium's same-step
 * contract). Replay stays exact: the FINAL slot is the transition, the
 * FIRST slot starts the next episode's chain. The extras are reserved and
 * published here (a process worker that dies before it publishes them
 * leaves a reservation its pool fills with pads).
 */
static inline void sr__book_same_step(const struct sr__book *b, const struct sr__ring_cols *rc,
				      struct sr__slice *w, uint32_t first,
				      const struct sr__book_x *x, uint32_t nd)
{
	const uint64_t mask = rc->cap - 1;
	const uint32_t od = b->od;
	uint64_t e0;

	if (!nd)
		return;
	sr_ring_reserve(rc->r, nd, 0, &e0);
	for (uint32_t k = 0; k < nd; k++) {
		uint64_t q = x->done_seq[k], sq = q & mask, se = (e0 + k) & mask;
		uint32_t i = x->done_loc[k];

		sr__book_copy_slot(b, rc, sq, se);
		/* The final obs and the reward move with the transition: so
		 * does their finite flag. The batch slot keeps the reward and
		 * gets the reset obs: its flag is the reward's, or the reset
		 * obs's (a new finding, counted). */
		rc->flags[se] = SR_SLOT_FINAL | (rc->flags[sq] & SR_SLOT_NONFINITE);
		b->spec->reset(b->spec, sr__book_state(b, w, i), 1, rc->obs + sq * od);
		rc->flags[sq] = SR_SLOT_FIRST;
		if (b->check) {
			if (SR_UNLIKELY(sr__nonfinite_any(rc->obs + sq * od, od)))
				sr__book_flag(b, rc, x, first + i, 1, sq, false);
			else if (SR_UNLIKELY(sr__nonfinite_f(rc->rew[sq])))
				rc->flags[sq] |= SR_SLOT_NONFINITE; /* counted by sr__book_rows */
		}
		rc->prev[sq] = SR_RING_NO_PREV;
		w->prev_seq[i] = q;
		w->elapsed[i] = 0;
		w->done[i] = w->done_term[i] = w->done_trunc[i] = 0;
	}
	sr_ring_publish(rc->r, e0, nd);
}

/*
 * The rows of a reset of local envs [lo, lo + n) of @w (pool envs from
 * @first + lo) into slots from ring sequence @seq, after the env calls
 * wrote their obs: with @mask (one byte per pool env, from pool env 0),
 * the envs whose byte is 0 were only observed and their rows are pads
 * (SR_SLOT_PAD, linked to their last slot); the others start an episode
 * (SR_SLOT_FIRST) and their bookkeeping starts over. Reward, terminated,
 * truncated and the action are 0. Then the finite check of the obs (@x
 * counts what it flags).
 */
static inline void sr__book_reset_rows(const struct sr__book *b, const struct sr__ring_cols *rc,
				       struct sr__slice *w, uint32_t first, uint32_t lo,
				       uint32_t n, uint64_t seq, const uint8_t *mask,
				       const struct sr__book_x *x)
{
	const uint64_t s = seq & (rc->cap - 1);

	memset(rc->act + s * b->asz, 0, (size_t)n * b->asz);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t l = lo + i;
		uint64_t sl = s + i;
		bool on = !mask || mask[first + l];

		rc->env[sl] = first + l;
		rc->rew[sl] = 0.0f;
		rc->term[sl] = 0;
		rc->trunc[sl] = 0;
		if (on) {
			/* A reset abandons a partial episode. */
			w->ep_ret[l] = 0;
			w->ep_len[l] = 0;
			rc->flags[sl] = SR_SLOT_FIRST;
			rc->prev[sl] = SR_RING_NO_PREV;
			w->prev_seq[l] = seq + i;
			w->elapsed[l] = 0;
			w->done[l] = w->done_term[l] = w->done_trunc[l] = 0;
		} else {
			rc->flags[sl] = SR_SLOT_PAD;
			rc->prev[sl] = w->prev_seq[l];
		}
	}
	if (b->check && n &&
	    SR_UNLIKELY(sr__nonfinite_any(rc->obs + s * b->od, (size_t)n * b->od)))
		sr__book_flag(b, rc, x, first + lo, n, s, false);
}

#endif
