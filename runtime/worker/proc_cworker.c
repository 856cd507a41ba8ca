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

#include "book_pvt.h"
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
	uint32_t n;
	struct sr__book book;    /* the pool's settings, as the block says (book_pvt.h) */
	struct sr__ring_cols rc; /* the ring's columns */
	struct sr__slice slice;  /* its envs */
	struct sr__book_x bx;    /* its scratch, same-step list, counter, episode queue */
	uint64_t ns_env; /* of the last command */
	uint32_t nd;     /* SAME_STEP: envs of the command that ended (bx.done_loc, done_seq) */
	uint32_t made;   /* opaque instances created */
	/* LOAD: the records kept aside until COMMIT (stage: n states, opaque
	 * envs: instances made and loaded here). */
	bool staged;
	unsigned char *stage;
	struct sr__ckpt_env_rec *stage_rec;
};

static unsigned char *state_of(struct sr__cworker *c, uint32_t i)
{
	return sr__book_state(&c->book, &c->slice, i);
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

	struct sr__slice *sl = &c->slice;
	struct sr__book_x *x = &c->bx;

	sl->states = calloc(n, c->spec.state_size);
	sl->prev_seq = calloc(n, sizeof(uint64_t));
	sl->ep_len = calloc(n, sizeof(uint64_t));
	sl->elapsed = calloc(n, sizeof(uint32_t));
	sl->done = calloc(n, 1);
	sl->done_term = calloc(n, 1);
	sl->done_trunc = calloc(n, 1);
	sl->ep_ret = calloc(n, sizeof(double));
	sl->rew = calloc(n, sizeof(double));
	x->done_seq = calloc(n, sizeof(uint64_t));
	x->done_loc = calloc(n, sizeof(uint32_t));
	x->need = calloc(n, 1);
	x->fix = calloc(2 * n, sizeof(uint32_t));
	if (!sl->states || !sl->prev_seq || !sl->ep_len || !sl->elapsed || !sl->done ||
	    !sl->done_term || !sl->done_trunc || !sl->ep_ret || !sl->rew || !x->done_seq ||
	    !x->done_loc || !x->need || !x->fix)
		return sr__errorf(-ENOMEM, "worker: out of memory for %u envs", c->n);
	/* Opaque envs (a physics world per instance) are created here, as
	 * the thread workers do; the process's exit frees them. */
	if (sr_env_is_opaque(&c->spec))
		for (uint32_t i = 0; i < c->n; i++) {
			int err = c->spec.create(&c->spec, state_of(c, i));

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
	if (c->slice.states && sr_env_is_opaque(&c->spec))
		for (uint32_t i = 0; i < c->made; i++)
			c->spec.destroy(&c->spec, state_of(c, i));
	free(c->slice.states);
	free(c->slice.prev_seq);
	free(c->slice.ep_len);
	free(c->slice.elapsed);
	free(c->slice.done);
	free(c->slice.done_term);
	free(c->slice.done_trunc);
	free(c->slice.ep_ret);
	free(c->slice.rew);
	free(c->bx.done_seq);
	free(c->bx.done_loc);
	free(c->bx.need);
	free(c->bx.fix);
}

static void cw_seed(struct sr__cworker *c)
{
	const uint64_t e0 = c->in.env_base + c->in.first_env;

	if (!c->n)
		return;
	if (!c->in.restarts) {
		/* As the thread workers do: instance i from (seed, e0 + i). */
		c->spec.seed(&c->spec, c->slice.states, c->n, c->in.seed, e0);
	} else {
		for (uint32_t i = 0; i < c->n; i++)
			c->spec.seed(&c->spec, state_of(c, i), 1,
				     sr_proc_seed(c->in.seed, (uint32_t)(e0 + i), c->in.restarts),
				     e0 + i);
	}
	for (uint32_t i = 0; i < c->n; i++) {
		c->slice.prev_seq[i] = SR_RING_NO_PREV;
		/* After a restart every env starts over: the next step resets
		 * it (NEXT_STEP, SAME_STEP), or it repeats a truncated pad row
		 * until the trainer resets it (DISABLED). */
		c->slice.done[i] = c->slice.done_trunc[i] = c->in.restarts ? 1 : 0;
	}
}

/* Reset local envs [lo, lo + n) (all, or where mask[env]) into the slots
 * from @q0; the others are observed into pad rows (sr__book_reset_rows). */
static void cw_reset(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t q0,
		     const sr_proc_cmd *cmd)
{
	const sr_env_spec *sp = &c->spec;
	const uint32_t e0 = c->in.first_env, rf = cmd->reset_flags, od = c->book.od;
	const uint8_t *mask = cmd->mask;
	/* A reset of sr_pool_reset_ex reseeds each env it resets, then resets
	 * it within its options, as the thread pool does (sr_pool_reset_ex,
	 * worker/thread.c reset_range): the same rows. */
	const struct sr__reset_opt *ro = (rf & SR_RESET_F_OPTIONS) ? sr__env_reset_opt(sp) : NULL;

	for (uint32_t k = 0; k < n; k++) {
		const uint32_t i = lo + k;
		float *obs = c->rc.obs + ((q0 + k) & (c->rc.cap - 1)) * od;
		bool on = !mask || mask[e0 + i];

		if (on && (rf & SR_RESET_F_SEED))
			sp->seed(sp, state_of(c, i), 1, cmd->reset_seed, c->in.env_base + e0 + i);
		else if (on && (rf & SR_RESET_F_SEEDS) && (!cmd->seed_mask || cmd->seed_mask[e0 + i]))
			sp->seed(sp, state_of(c, i), 1, cmd->seeds[e0 + i], 0);
		if (on && ro)
			ro->reset(sp, state_of(c, i), 1, cmd->reset_b, obs);
		else if (on)
			sp->reset(sp, state_of(c, i), 1, obs);
		else
			sp->observe(sp, state_of(c, i), obs);
	}
	sr__book_reset_rows(&c->book, &c->rc, &c->slice, e0, lo, n, q0, mask, &c->bx);
}

/*
 * Step local envs [lo, lo + n) into the slots from @q0 (consecutive, no
 * wrap: the pool reserves a command's rows with SR_RESERVE_CONTIG); @acts:
 * env lo's action, the others' after it (the mailbox, row = env): the env
 * calls, then the ring bookkeeping, as the thread workers do
 * (book_pvt.h). Envs of SAME_STEP that ended are listed (c->nd) for
 * cw_extras.
 */
SR_VECTOR_CLONES
static void cw_step(struct sr__cworker *c, uint32_t lo, uint32_t n, uint64_t q0,
		    const unsigned char *acts, uint64_t *ns_env)
{
	uint64_t t0 = sr__now_ns();
	uint32_t nf = sr__book_env_calls(&c->book, &c->rc, &c->slice, lo, n, q0 & (c->rc.cap - 1),
					 acts);

	*ns_env += sr__now_ns() - t0;
	c->nd = sr__book_rows(&c->book, &c->rc, &c->slice, c->in.first_env + lo, lo, n, q0, acts,
			      &c->bx, c->nd, nf);
}

/* SAME_STEP: the extra FINAL slots of the envs that ended (sr__book_same_step).
 * If this process dies before it publishes them, the pool publishes the
 * reservation as pad rows. */
static void cw_extras(struct sr__cworker *c)
{
	sr__book_same_step(&c->book, &c->rc, &c->slice, c->in.first_env, &c->bx, c->nd);
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
	c->book.spec = &c->spec; /* state_of() from here on */
	if (spec)
		c->spec = *spec; /* this process's own spec (the inline slice) */
	err = spec ? 0 : load_env(c);
	if (!err)
		err = cw_alloc(c);
	if (err) {
		sr__cworker_close(c);
		return err;
	}
	sr__ring_cols_get(info->ring, &c->rc);
	c->book.od = info->obs_dim;
	c->book.asz = info->act_size;
	c->book.trunc_at = c->spec.max_episode_steps ? c->spec.max_episode_steps - 1 : UINT32_MAX;
	c->book.autoreset = info->autoreset;
	c->book.check = w->h->check_finite != 0;
	c->book.final = info->final_obs;
	c->book.nf_first = &w->h->nf_first;
	c->bx.nonfinite = &w->rec->nonfinite;
	c->bx.eps = w->eps;
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
		sr__slice_rec_get(&c->slice, i, &er);
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
	c->stage = aligned_alloc(64, (size_t)sr__align_up((size_t)c->n * ssz + 64, 64));
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
			sr__slice_rec_put(&c->slice, i, er);
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
			cw_step(c, e - e0, k - j, cmd->row + j, acts + (size_t)e * c->book.asz, &ns_env);
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
