/*
 * DESIGN: the collector.
 *
 * The collector is the ring's single consumer. It runs on the thread that
 * drives the pool (the trainer's thread, which also runs the policy and
 * talks to the device), inside sr_pool_step / sr_pool_recv: a separate
 * collector thread would cost a core and a wake-up per batch, and the
 * batch has to reach that thread anyway. It:
 *
 *  1. takes the longest contiguous published range from the ring cursor
 *     (sr_ring_peek, acquire: pairs with the workers' sr_ring_publish);
 *  2. picks the batch rows in it: sync mode, the num_envs slots the pool
 *     reserved (SR_RESERVE_CONTIG, so one view); async mode, the
 *     batch_size oldest published result rows in ring order (not
 *     SR_SLOT_PAD filler and not the SR_SLOT_FINAL extras of same-step
 *     autoreset): see "Async recv" below;
 *  3. merges the episodes the workers finished into the statistics;
 *  4. lands the rows where batches live (land_batch below): a view of
 *     the ring or a copy on the host, or the CUDA device;
 *  5. consumes the range (sr_ring_consume): producers may reuse those
 *     slots, but only after a full lap, and the pool keeps the ring at
 *     least 4 * num_envs slots, so the batch stays valid until the next
 *     call (at most 2 * num_envs slots are written meanwhile).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepring/device.h"
#include "pool_internal.h"
#include "ring_internal.h"

/*
 * Where batches land: the one device abstraction is the public sr_device
 * (stepring/device.h, runtime/device/device.c). A host pool has none: a batch
 * whose rows are one contiguous range of slots that does not wrap is a
 * view of the ring columns (zero copy), any other is copied into the
 * staging columns (one or two memcpy per column for a wrapping range, a
 * gather of runs for a list of slots). A CUDA pool opens an sr_device over
 * its ring: a range goes straight from the ring (sr_device_submit_ring),
 * a list of slots is gathered into the staging columns first
 * (sr_device_submit); each batch takes one of the device's N batches and
 * gives back the previous one, so the pool's "valid until the next call"
 * holds. final_obs stays in host memory.
 */

/* Which slots form a batch. */
struct batch_req {
	uint64_t first_seq;     /* rows are slots first_seq .. first_seq + n - 1 ... */
	const uint64_t *seqs;   /* ... unless seqs != NULL: row i is slot seqs[i] (gather) */
	uint32_t n;
	const float *final_obs; /* NULL, or n * obs_dim host floats in row order */
};

static int stage_open_cuda(sr_pool *p, uint32_t max_rows)
{
	sr_device_opts o;

	sr_device_opts_init(&o);
	o.kind = SR_DEVICE_CUDA;
	o.index = p->col.dev_index;
	o.max_rows = max_rows;
	o.obs_dim = p->cfg.obs_dim;
	o.act_kind = p->cfg.spec.act_kind;
	o.act_dim = p->cfg.spec.act_kind == SR_SPACE_DISCRETE ? 1 : p->cfg.spec.act_dim;
	o.flags = SR_DEVICE_F_RING;
	o.ring = p->ring.r;
	return sr_device_open(&o, &p->col.dev);
}

int sr__collector_open(sr_pool *p)
{
	const uint32_t rows = p->cfg.async ? p->cfg.batch_size : p->cfg.num_envs;
	const size_t od = p->cfg.obs_dim;
	struct sr__collector *st = &p->col;
	char *m;
	int err;

	st->gather = calloc(rows, sizeof(*st->gather));
	if (p->cfg.keep_final && p->cfg.async)
		st->final_stage = calloc((size_t)rows * p->cfg.obs_dim, sizeof(float));
	st->stage = malloc(rows * (od * sizeof(float) + sizeof(float) + sizeof(uint32_t) + 2));
	if (!st->gather || (p->cfg.keep_final && p->cfg.async && !st->final_stage) || !st->stage)
		return sr__errorf(-ENOMEM, "cannot allocate the collector's buffers");
	m = st->stage;
	st->obs = (float *)m;
	st->reward = st->obs + rows * od;
	st->env_id = (uint32_t *)(st->reward + rows);
	st->term = (uint8_t *)(st->env_id + rows);
	st->trunc = st->term + rows;
	switch (p->col.dev_kind) {
	case SR_DEVICE_HOST:
		return 0;
	case SR_DEVICE_CUDA:
		return stage_open_cuda(p, rows);
	default: /* SR_DEVICE_AUTO: CUDA when it opens, else host */
		err = stage_open_cuda(p, rows);
		if (err)
			sr__clear_error();
		return 0;
	}
}

void sr__collector_close(sr_pool *p)
{
	struct sr__collector *st = &p->col;

	if (st->cur)
		sr_device_release(st->dev, st->cur);
	sr_device_close(st->dev);
	free(st->stage);
	free(st->gather);
	free(st->final_stage);
	st->cur = NULL;
	st->dev = NULL;
	st->stage = NULL;
	st->gather = NULL;
	st->final_stage = NULL;
}

/* Copy ring rows @seqs[0..n) into the staging columns, one memcpy per
 * column for each run of consecutive slots (a batch taken from a few
 * workers' ranges is a few runs). */
static void gather_rows(const sr_pool *p, const uint64_t *seqs, uint32_t n)
{
	const struct sr__collector *st = &p->col;
	const uint64_t mask = p->ring.cap - 1;
	const uint32_t od = p->cfg.obs_dim;

	for (uint32_t i = 0, j; i < n; i = j) {
		const uint64_t s = seqs[i] & mask;
		size_t len;

		/* The run: consecutive sequences, not wrapping past the end. */
		for (j = i + 1; j < n && seqs[j] == seqs[j - 1] + 1 && (seqs[j] & mask); j++)
			;
		len = j - i;
		memcpy(st->obs + (size_t)i * od, p->ring.obs + s * od, len * od * sizeof(float));
		memcpy(st->reward + i, p->ring.rew + s, len * sizeof(float));
		memcpy(st->term + i, p->ring.term + s, len);
		memcpy(st->trunc + i, p->ring.trunc + s, len);
		memcpy(st->env_id + i, p->ring.env + s, len * sizeof(uint32_t));
	}
}

/* Host: the rows as a view of the ring, or copied into the staging. */
static void land_host(sr_pool *p, const struct batch_req *req, sr_batch *out)
{
	const struct sr__collector *st = &p->col;
	const uint64_t cap = p->ring.cap, mask = cap - 1;
	const uint32_t od = p->cfg.obs_dim;

	if (!req->seqs && (req->first_seq & mask) + req->n <= cap) {
		/* Zero copy: the rows are the ring's own slots. */
		const uint64_t s = req->first_seq & mask;

		out->obs = p->ring.obs + s * od;
		out->reward = p->ring.rew + s;
		out->terminated = p->ring.term + s;
		out->truncated = p->ring.trunc + s;
		out->env_id = p->ring.env + s;
		out->first_seq = req->first_seq;
		return;
	}
	if (!req->seqs) {
		/* Wrapping range: two pieces per column. */
		const uint64_t s = req->first_seq & mask;
		const uint32_t a = (uint32_t)(cap - s), b = req->n - a;

		memcpy(st->obs, p->ring.obs + s * od, (size_t)a * od * sizeof(float));
		memcpy(st->obs + (size_t)a * od, p->ring.obs, (size_t)b * od * sizeof(float));
		memcpy(st->reward, p->ring.rew + s, a * sizeof(float));
		memcpy(st->reward + a, p->ring.rew, b * sizeof(float));
		memcpy(st->term, p->ring.term + s, a);
		memcpy(st->term + a, p->ring.term, b);
		memcpy(st->trunc, p->ring.trunc + s, a);
		memcpy(st->trunc + a, p->ring.trunc, b);
		memcpy(st->env_id, p->ring.env + s, a * sizeof(uint32_t));
		memcpy(st->env_id + a, p->ring.env, b * sizeof(uint32_t));
	} else {
		gather_rows(p, req->seqs, req->n);
	}
	out->obs = st->obs;
	out->reward = st->reward;
	out->terminated = st->term;
	out->truncated = st->trunc;
	out->env_id = st->env_id;
	out->first_seq = UINT64_MAX;
}

/* CUDA: submit the rows to the device and wait for the copies; the
 * previous device batch goes back first. */
static int land_device(sr_pool *p, const struct batch_req *req, sr_batch *out)
{
	struct sr__collector *st = &p->col;
	sr_device_batch *b;
	int err;

	if (st->cur) {
		sr_device_release(st->dev, st->cur);
		st->cur = NULL;
	}
	if (!req->seqs) {
		err = sr_device_submit_ring(st->dev, p->ring.r, req->first_seq, req->n, 0, &b);
	} else {
		sr_batch g = {
			.n = req->n, .obs_dim = p->cfg.obs_dim, .obs = st->obs,
			.reward = st->reward, .terminated = st->term, .truncated = st->trunc,
			.env_id = st->env_id,
			.first_seq = UINT64_MAX,
		};

		gather_rows(p, req->seqs, req->n);
		err = sr_device_submit(st->dev, &g, 0, &b);
	}
	if (err)
		return err;
	st->cur = b;
	err = sr_device_batch_sync(b);
	if (err)
		return err;
	out->obs = b->obs;
	out->reward = b->reward;
	out->terminated = b->terminated;
	out->truncated = b->truncated;
	out->env_id = b->env_id;
	out->first_seq = req->seqs ? UINT64_MAX : req->first_seq;
	return 0;
}

/* Step 4: the batch's rows where the pool's batches live (p->col.batch). */
/*
 * Finite check (SR_POOL_F_CHECK_FINITE, on by default). An env that writes
 * a NaN or an infinity into its obs or reward (a plugin's bug, a physics
 * blow-up) would otherwise reach the trainer unmarked and turn the episode
 * statistics into NaN. Where each row is written, its obs and reward are
 * tested for an all-ones exponent where they are written, by the
 * workers (runtime/worker/book_pvt.h, the code of the thread workers and
 * of the C env worker of process pools: the obs in the env calls, a chunk
 * at a time right after them, still in L1; the rewards in the
 * bookkeeping's episode-return loop; resets in sr__book_reset_rows; a
 * process worker counts on its record and offers the first env to the
 * command block); the pool thread checks the rows of the other process
 * workers (Python: sr__nonfinite_scan, before the batch is formed).
 * A row that fails gets SR_SLOT_NONFINITE in the ring's flags column
 * before it is published, and keeps its values and its other flags and
 * links: the runtime does not make values up, and the env's episode goes
 * on as the env says (it may well end it). Each such row is counted on
 * the worker that wrote it; the first one's env is kept in p->fin.first
 * (the one compare-exchange from 0: relaxed, the ring's publish orders it
 * before the row) and told once, on the pool thread, after the batch that
 * holds it: a line on stderr and sr_last_error(), with the env's index,
 * id and what was not finite. The batch says how many of its rows are
 * flagged (sr_batch.nonfinite: a scan of its flags bytes, done only once
 * a first one was seen); the statistics and the stats block count them.
 * Independently of the check, a non-finite reward is never added to an
 * episode's return, so mean_return stays finite.
 */
bool sr__check_finite_default(void)
{
	const char *s = getenv("STEPRING_CHECK_FINITE");

	if (s && (!strcmp(s, "0") || !strcmp(s, "off") || !strcmp(s, "no") ||
		  !strcmp(s, "false")))
		return false;
	return true;
}

uint64_t sr__nonfinite_rows(const sr_pool *p)
{
	uint64_t n = p->fin.pool_rows;

	for (uint32_t i = 0; i < p->cfg.num_threads && p->workers.w; i++)
		n += atomic_load_explicit(&p->workers.w[i].nonfinite, memory_order_relaxed);
	return n;
}

void sr__nonfinite_scan(sr_pool *p, uint64_t seq, uint32_t n)
{
	const uint64_t mask = p->ring.cap - 1;
	const uint32_t od = p->cfg.obs_dim;

	if (!p->fin.on)
		return;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = (seq + i) & mask;
		uint64_t what = (sr__nonfinite_any(p->ring.obs + s * od, od) ? SR__NF_OBS : 0) |
				(sr__nonfinite_f(p->ring.rew[s]) ? SR__NF_REW : 0);

		if (!what)
			continue;
		p->ring.flags[s] |= SR_SLOT_NONFINITE;
		sr__nonfinite_offer(&p->fin.first, p->ring.env[s], what);
		p->fin.pool_rows++;
	}
}

/* The first non-finite row, told once (pool thread, after a batch). */
static void nonfinite_tell(sr_pool *p)
{
	uint64_t f;
	char msg[400];

	if (SR_LIKELY(p->fin.told) ||
	    SR_LIKELY(!(f = atomic_load_explicit(&p->fin.first, memory_order_relaxed))))
		return;
	p->fin.told = true;
	snprintf(msg, sizeof(msg),
		 "env %" PRIu64 " (%s) wrote a non-finite %s (NaN or infinity): its rows are "
		 "flagged SR_SLOT_NONFINITE and counted in sr_pool_stats.nonfinite_rows; mask "
		 "them out (STEPRING_CHECK_FINITE=0 turns the check off)",
		 (uint64_t)((f & SR__NF_ENV_MASK) - 1), p->cfg.spec.id,
		 (f & SR__NF_OBS) && (f & SR__NF_REW) ? "observation and reward"
		 : (f & SR__NF_OBS)		   ? "observation"
						   : "reward");
	fprintf(stderr, "stepring: warning: %s\n", msg);
	sr__errorf(0, "%s", msg);
}

/* Rows of the batch @req flagged SR_SLOT_NONFINITE: none before the first
 * one was seen (no scan). Pool thread, after the rows' acquire. */
static uint32_t batch_nonfinite(sr_pool *p, const struct batch_req *req)
{
	const uint64_t mask = p->ring.cap - 1;
	uint32_t k = 0;

	if (SR_LIKELY(!atomic_load_explicit(&p->fin.first, memory_order_relaxed)))
		return 0;
	for (uint32_t i = 0; i < req->n; i++)
		k += (p->ring.flags[(req->seqs ? req->seqs[i] : req->first_seq + i) & mask] &
		      SR_SLOT_NONFINITE) != 0;
	return k;
}

/* P1: merge the finished episodes the workers queued (the worker kind's
 * episodes), after telling the first non-finite row if there is one. */
static void collect_episodes(sr_pool *p)
{
	nonfinite_tell(p);
	p->workers.kind->episodes(p);
}

static int land_batch(sr_pool *p, const struct batch_req *req)
{
	sr_batch *out = &p->col.batch;

	out->n = req->n;
	out->obs_dim = p->cfg.obs_dim;
	out->final_obs = p->cfg.keep_final ? req->final_obs : NULL;
	out->nonfinite = batch_nonfinite(p, req);
	if (p->col.dev)
		return land_device(p, req, out);
	land_host(p, req, out);
	return 0;
}

int sr__collect_sync(sr_pool *p, uint64_t seq, uint64_t *t, const sr_batch **out)
{
	struct batch_req req = {.first_seq = seq, .n = p->cfg.num_envs,
				    .final_obs = p->cfg.keep_final ? p->side.final_env : NULL};
	uint64_t t0 = *t;
	int err;

	/* Every worker has published (the kind's wait: an acquire on each one's
	 * grp_done, which follows its releases), so the whole reservation (pads, batch,
	 * same-step extras) is ready: consume it without scanning it with
	 * peek. */
	{
		uint64_t n = sr_ring_head(p->ring.r) - sr_ring_cursor(p->ring.r);
		while (n) {
			uint32_t k = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
			sr_ring_consume(p->ring.r, k);
			n -= k;
		}
	}
	collect_episodes(p);
	err = land_batch(p, &req);
	if (err)
		return err;
	p->stats.batches++;
	*t = sr__now_ns();
	p->col.ns_collect += *t - t0;
	*out = &p->col.batch;
	return 0;
}

/*
 * Async recv: the batch is the batch_size oldest published result rows, in
 * ring order: [cursor, pos) less the PAD / FINAL slots in it. That is "the
 * first envs that are ready" (first published, first returned), usually one
 * contiguous range (a zero-copy view), and the collector's work per row is
 * a look at the slot's seq and flags and, for the next send, its env id.
 *
 * Worker 0 runs on the calling thread (the default, with other workers): it
 * steps half of its share of a batch from its queue first, on every recv
 * (so its envs keep progressing however fast the other workers are), then
 * more, a chunk at a time, only while the batch is not published yet; the
 * rest of its queue stays in flight for a later recv. Its rows land behind
 * the ones already reserved, so they make later batches; the share of the
 * work each thread gets follows from that: a thread whose rows are in a
 * batch gets them back with the next send. The calling thread also sends
 * and collects, so with a cheap env it steps fewer rows than the others.
 *
 * Why every env keeps coming back: a published row is returned by the
 * first recv whose range reaches it (nothing is passed over), and an env
 * in a worker's queue is stepped in queue order (worker 0: at least half a
 * share per recv). An env has at most one result row not yet returned, and
 * at most one same-step extra with it.
 *
 * Room: each env holds at most one result row and one FINAL extra between
 * the cursor and the head, so head - cursor <= 2 * num_envs (half the
 * smallest ring, 4 * num_envs): the calling thread, which reserves for
 * worker 0's drains and is the only consumer, never waits for room in its
 * own sr_ring_reserve. A view stays valid until the next call: from its
 * first slot c, the head is at most 2 * batch_size (the batch and its
 * extras) + 2 * (num_envs - batch_size) (the others) + 2 * batch_size (the
 * next send's steps) < 4 * num_envs slots on before the next recv; a batch
 * that would start closer than that to being overwritten is copied.
 */

/*
 * Async, both recvs: hand the batch's rows to the device and merge the
 * finished episodes. With final obs kept, those of the batch's done rows
 * (from the per-env side buffer the workers fill) are staged first, in
 * batch row order, for req->final_obs.
 */
static int hand_async(sr_pool *p, struct batch_req *req)
{
	int err;

	if (p->cfg.keep_final) {
		const uint64_t mask = p->ring.cap - 1;

		for (uint32_t i = 0; i < req->n; i++) {
			uint64_t s = (req->seqs ? req->seqs[i] : req->first_seq + i) & mask;
			if (p->ring.term[s] | p->ring.trunc[s])
				memcpy(p->col.final_stage + (size_t)i * p->cfg.obs_dim,
				       p->side.final_env + (size_t)p->ring.env[s] * p->cfg.obs_dim,
				       p->cfg.obs_dim * sizeof(float));
		}
		req->final_obs = p->col.final_stage;
	}
	err = land_batch(p, req);
	if (err)
		return err;
	collect_episodes(p);
	return 0;
}

/*
 * Batch groups. When batch_size divides num_envs into G >= 2 groups (and
 * is at least the thread count), each worker's slice is G runs of m_w
 * envs, and group g is run g of every worker: batch rows [off_w, off_w +
 * m_w) are worker w's local envs [g * m_w, (g + 1) * m_w). A trainer that
 * sends back the batch it got (env ids NULL, or the same ids in the same
 * order) sends a whole group, and then the pool works like a sync step
 * per group, with up to G of them in flight:
 *
 *  - send reserves batch_size contiguous slots, copies the actions into
 *    the group's command, and publishes it to the workers (one release
 *    store, one kick each): no per-env queue entries or mailbox;
 *  - each worker thread runs the commands in order, its m_w envs of the
 *    group into its part of the slots (the env calls and bookkeeping of a
 *    sync slice), publishes them, and stores how many it has done;
 *  - recv takes the oldest group in flight: worker 0 (this thread) steps
 *    its share of it, then waits until every worker thread has done it,
 *    and the batch is a view of the group's slots: no row is looked at.
 *
 * With G groups in flight the threads always have the next group queued,
 * so a slice that runs late on one CPU delays one recv, not every thread
 * (a sync step waits for the slowest slice every batch). The batch is the
 * oldest group, which in this loop is also the first one ready (every
 * worker runs the commands in order); every env comes back once per G
 * batches.
 *
 * Everything in flight is groups while p->flight.grp_on: from an async reset,
 * or from a group send with nothing in flight. A send of anything else
 * leaves group mode: its envs go to the per-env queues, and the groups
 * still in flight come back through the per-env recv above, as rows
 * (an inline worker 0 runs its shares of them first: the kind's advance).
 *
 * The ring: group k's slots are claimed at its send, after those of the
 * groups sent before it; a worker reserves same-step extras while it runs
 * a group, so after that group's slots. Hence every slot between the
 * cursor and the oldest group in flight is an extra or a pad already
 * published, and recv consumes through the end of the group. Room is the
 * per-env argument above: one result slot and one extra per env.
 */
static int collect_group(sr_pool *p, uint64_t *t, const sr_batch **out)
{
	const uint64_t k = p->flight.grp_recvd;
	const struct sr__grp_cmd *c = sr__cmd_rec(p, k);
	const uint32_t need = p->cfg.batch_size, g = c->g;
	const uint64_t end = c->seq + need;
	uint64_t t2;
	struct batch_req req = {.first_seq = c->seq, .n = need};
	int err;

	err = p->workers.kind->wait(p, k, &t2);
	if (err)
		return err;
	/* A view that might not last until the next call (see Room; not
	 * expected): the rows are copied. */
	if (sr_ring_head(p->ring.r) - c->seq >= p->ring.cap - 2ull * p->cfg.num_envs) {
		for (uint32_t i = 0; i < need; i++)
			p->col.gather[i] = c->seq + i;
		req.seqs = p->col.gather;
	}
	err = hand_async(p, &req);
	if (err)
		return err;
	sr__grp_mark(p, g, 0);
	p->flight.grp_last = (int32_t)g;
	/* last_ids: for a send that names the envs, or leaves group mode. */
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		const struct sr__worker *w = &p->workers.w[i];
		/* Locals: the stores may alias the worker's fields. */
		const uint32_t e0 = w->first_env + g * w->grp_m, m = w->grp_m;
		uint32_t *restrict ids = p->flight.last_ids + w->grp_off;

		for (uint32_t j = 0; j < m; j++)
			ids[j] = e0 + j;
	}
	p->flight.last_n = need;
	p->flight.sent_since_recv = false;
	p->flight.n_inflight -= need;
	p->flight.grp_recvd = k + 1;
	/* R2: the slots before end are read (extras and pads before the
	 * group: published, see above); the view stays valid (Room). */
	sr_ring_consume(p->ring.r, (uint32_t)(end - sr_ring_cursor(p->ring.r)));
	p->stats.batches++;
	*t = sr__now_ns();
	p->col.ns_collect += *t - t2;
	*out = &p->col.batch;
	return 0;
}

/* The rows of [c, pos) that are results, in p->col.gather. */
static void gather_results(sr_pool *p, uint64_t c, uint64_t pos)
{
	const uint64_t mask = p->ring.cap - 1;
	const uint8_t *flags = p->ring.flags;
	uint32_t n = 0;

	for (uint64_t q = c; q < pos; q++)
		if (!(flags[q & mask] & (SR_SLOT_PAD | SR_SLOT_FINAL)))
			p->col.gather[n++] = q;
}

int sr__collect_async(sr_pool *p, uint64_t *t, const sr_batch **out)
{
	const uint32_t need = p->cfg.batch_size;
	const uint64_t mask = p->ring.cap - 1;
	const uint8_t *flags = p->ring.flags;
	const sr_ring *ring = p->ring.r;
	/* A quarter of a worker's share: fine enough not to overshoot the
	 * batch with an expensive env, coarse enough to amortise a drain. */
	const uint32_t chunk =
		need / (4 * p->cfg.num_threads) ? need / (4 * p->cfg.num_threads) : 1;
	/* Half of worker 0's share of a batch, every call. */
	uint32_t min0 = (uint32_t)((uint64_t)need * p->workers.w[0].n_envs / p->cfg.num_envs / 2);
	uint64_t t0, tw = 0, tin = 0, ti, tw0;
	uint64_t c = sr_ring_cursor(ring), pos = c;
	uint32_t rows = 0;
	bool extras = false;
	struct batch_req req;
	int err;

	if (p->flight.n_inflight < need)
		return sr__errorf(-EINVAL, "recv needs %u envs in flight (batch_size) but only %u "
				  "were sent and not yet received", need, p->flight.n_inflight);
	if (p->flight.grp_on)
		return collect_group(p, t, out);
	/* The kind's advance: an inline worker 0 steps min0 of its queue
	 * first, then a chunk at a time while the batch is not published;
	 * with none to step it waits for slot pos. tin: the time stepping. */
	t0 = ti = sr__now_ns();
	err = p->workers.kind->advance(p, pos, min0 ? min0 : 1, &tw);
	tin += sr__now_ns() - ti;
	if (err < 0)
		return err;
	for (;;) {
		/* R1: sr__slot_begin's acquire pairs with the workers' publish:
		 * the slot's columns are visible. The slots from the cursor on
		 * cannot be claimed for another lap (no lap check needed). */
		while (rows < need && sr__slot_begin(ring, pos)) {
			if (flags[pos & mask] & (SR_SLOT_PAD | SR_SLOT_FINAL))
				extras = true;
			else
				rows++;
			pos++;
		}
		if (rows == need)
			break;
		ti = sr__now_ns();
		tw0 = tw;
		err = p->workers.kind->advance(p, pos, chunk, &tw);
		tin += sr__now_ns() - ti - (tw - tw0);
		if (err < 0)
			return err;
	}
	p->col.ns_wait += tw;

	req.first_seq = c;
	req.seqs = NULL;
	req.n = need;
	req.final_obs = NULL;
	/* Extras in the range, or a view that might not last until the next
	 * call (see Room above; not expected): the rows are copied. */
	if (extras || sr_ring_head(ring) - c >= p->ring.cap - 2ull * p->cfg.num_envs) {
		gather_results(p, c, pos);
		req.seqs = p->col.gather;
	}
	err = hand_async(p, &req);
	if (err)
		return err;
	{
		/* Locals: the byte stores to inflight[] may alias anything. */
		const uint32_t *c_env = p->ring.env;
		const uint64_t *seqs = req.seqs;
		uint8_t *inflight = p->flight.inflight;
		uint32_t *last_ids = p->flight.last_ids;

		for (uint32_t i = 0; i < need; i++) {
			uint32_t env = c_env[(seqs ? seqs[i] : c + i) & mask];
			inflight[env] = 0;
			last_ids[i] = env;
		}
	}
	p->flight.last_n = need;
	p->flight.grp_last = -1; /* rows, not a group: send(NULL) must not take it for one */
	p->flight.sent_since_recv = false;
	p->flight.n_inflight -= need;
	/* R2: the slots before pos are read; the view stays valid (Room). */
	sr_ring_consume(p->ring.r, (uint32_t)(pos - c));
	p->stats.batches++;
	*t = sr__now_ns();
	p->col.ns_collect += *t - t0 - tw - tin;
	*out = &p->col.batch;
	return 0;
}

void sr__collect_drain(sr_pool *p)
{
	uint64_t first, mask = p->ring.cap - 1, tw = 0;

	while (p->flight.n_inflight || sr_ring_cursor(p->ring.r) != sr_ring_head(p->ring.r)) {
		uint32_t n = sr_ring_peek(p->ring.r, (uint32_t)p->ring.cap, &first);

		if (!n) {
			/* Worker 0's queue (inline), or a wait for the slot. */
			if (p->workers.kind->advance(p, sr_ring_cursor(p->ring.r), UINT32_MAX,
						     &tw) < 0)
				break; /* the workers failed for good: nothing more comes */
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint64_t s = (first + i) & mask;
			if (!(p->ring.flags[s] & (SR_SLOT_PAD | SR_SLOT_FINAL)) &&
			    p->flight.inflight[p->ring.env[s]]) {
				p->flight.inflight[p->ring.env[s]] = 0;
				p->flight.n_inflight--;
			}
		}
		sr_ring_consume(p->ring.r, n);
	}
	if (p->flight.n_inflight) {
		/* Only after a failure for good: nothing is in flight any more. */
		memset(p->flight.inflight, 0, p->cfg.num_envs);
		p->flight.n_inflight = 0;
	}
	p->col.ns_wait += tw;
	collect_episodes(p);
	p->flight.last_n = 0;
	p->flight.grp_last = -1;
	/* Every command is done (its rows came back), an inline worker 0's
	 * share too (the kind's advance runs them). */
	p->flight.grp_recvd = p->cmds.issued;
	p->flight.grp_on = false;
}
