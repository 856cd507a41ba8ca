/*
 * Device batches: N in flight, backpressure, DLPack export, and the host
 * backend. The CUDA backend (device_cuda.cu) only moves bytes; everything
 * about who holds which batch lives here.
 *
 * DESIGN
 *
 * A device has N batches (1..8). Batch i is free when bit i of free_mask
 * is set. Exactly one producer thread takes batches (submit): it clears the
 * bit and sets refs = 1 (the consumer's reference). Consumers, on any
 * thread, drop references: sr_device_release() drops the consumer's one,
 * each DLPack tensor's deleter drops the one its export took. The thread
 * that drops the last reference sets the bit again: the batch is recycled.
 *
 * Memory ordering:
 *  R1 (put_ref, release side of refs): every access to the batch by a
 *     consumer happens before its fetch_sub; the last dropper's fetch_sub is
 *     acq_rel so it also sees the other consumers' accesses (A1).
 *  R2 (recycle): fetch_or on free_mask (seq_cst, which includes release)
 *     publishes the batch as free; it pairs with the producer's acquire
 *     load/fetch_and in take_batch (A2), so the producer's new writes into
 *     the batch come after every consumer access.
 *  W (wake-up): a producer that finds no free batch increments waiters
 *     and re-reads free_mask under the mutex; a recycler sets free_mask and
 *     then reads waiters. Both seq_cst, so at least one sees the other (the
 *     Dekker pattern): either the producer sees the bit, or the recycler
 *     sees the waiter and broadcasts under the mutex. No lost wake-up.
 *
 * The device struct itself is reference counted (the open handle plus one
 * per live DLPack tensor) so that a tensor deleted after sr_device_close()
 * does not touch freed memory.
 */
#include <dlpack/dlpack.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"
#include "sr_base.h"

struct sr__dbatch {
	sr_device_batch pub; /* first member: container_of by cast */
	struct sr_device *dev;
	atomic_uint refs;
	atomic_bool released;
	void *host_mem;      /* host backend: one block with every column */
};

struct sr_device {
	sr_device_opts opts;
	uint32_t kind;       /* resolved: SR_DEVICE_HOST or SR_DEVICE_CUDA */
	uint32_t nb;
	uint32_t next;       /* producer only: where to look for a free batch first */
	uint32_t act_size;
	struct sr__cuda *cuda;
	bool registered, staging;
	char name[96];
	_Atomic uint32_t free_mask; /* bit i: batch i is free (R2/A2) */
	atomic_uint waiters;        /* producers blocked in take_batch (W) */
	atomic_uint live;           /* open handle + live DLPack tensors */
	atomic_uint_least64_t batches, waits;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sr__dbatch b[SR_DEVICE_MAX_IN_FLIGHT];
};

void sr_device_opts_init(sr_device_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = SR_DEVICE_HOST;
	o->in_flight = 3;
	o->act_kind = SR_SPACE_DISCRETE;
	o->act_dim = 1;
}

bool sr_device_cuda_available(int index)
{
	return sr__cuda_available(index);
}

int sr_device_describe(char *buf, size_t len)
{
	if (!buf || !len)
		return sr__errorf(-EINVAL, "device describe: no buffer");
	if (sr__cuda_describe(0, buf, len) == 0)
		return 0;
	snprintf(buf, len, "none");
	return -ENODEV;
}

/* Host backend: one block per batch, each column 64-byte aligned. */
static int host_alloc(struct sr_device *d)
{
	uint32_t rows = d->opts.max_rows;
	size_t o_obs = 0;
	size_t o_rew = o_obs + sr__align_up((size_t)rows * d->opts.obs_dim * sizeof(float), 64);
	size_t o_term = o_rew + sr__align_up((size_t)rows * sizeof(float), 64);
	size_t o_trunc = o_term + sr__align_up(rows, 64);
	size_t o_flags = o_trunc + sr__align_up(rows, 64);
	size_t o_id = o_flags + sr__align_up(rows, 64);
	size_t o_act = o_id + sr__align_up((size_t)rows * sizeof(uint32_t), 64);
	size_t total = o_act + sr__align_up((size_t)rows * d->act_size, 64);

	for (uint32_t i = 0; i < d->nb; i++) {
		sr_device_batch *p = &d->b[i].pub;
		char *m = aligned_alloc(64, total);

		if (!m)
			return sr__errorf(-ENOMEM, "device: out of memory for %u batches of %u rows",
					  d->nb, rows);
		memset(m, 0, total);
		d->b[i].host_mem = m;
		p->obs = (float *)(m + o_obs);
		p->reward = (float *)(m + o_rew);
		p->terminated = (uint8_t *)(m + o_term);
		p->truncated = (uint8_t *)(m + o_trunc);
		p->flags = (uint8_t *)(m + o_flags);
		p->env_id = (uint32_t *)(m + o_id);
		p->actions = m + o_act;
		p->dl_device_type = kDLCPU;
		p->dl_device_id = 0;
		p->stream = NULL;
	}
	snprintf(d->name, sizeof(d->name), "host");
	return 0;
}

static void device_free(struct sr_device *d)
{
	for (uint32_t i = 0; i < d->nb; i++)
		free(d->b[i].host_mem);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static void device_put(struct sr_device *d)
{
	/* acq_rel: the last one out sees every other holder's accesses. */
	if (atomic_fetch_sub_explicit(&d->live, 1, memory_order_acq_rel) == 1)
		device_free(d);
}

int sr_device_open(const sr_device_opts *o, sr_device **out)
{
	static atomic_bool staging_said;
	struct sr_device *d;
	uint32_t kind;
	int err;

	if (!o || !out)
		return sr__errorf(-EINVAL, "device: NULL argument");
	*out = NULL;
	if (o->flags & ~(uint32_t)(SR_DEVICE_F_RING | SR_DEVICE_F_NO_REGISTER | SR_DEVICE_F_QUIET))
		return sr__errorf(-EINVAL, "device: unknown flags 0x%x", o->flags);
	if (o->in_flight > SR_DEVICE_MAX_IN_FLIGHT)
		return sr__errorf(-EINVAL, "device: in_flight %u not in [1, %d]", o->in_flight,
				  SR_DEVICE_MAX_IN_FLIGHT);
	if (o->max_rows < 1 || o->obs_dim < 1)
		return sr__errorf(-EINVAL, "device: max_rows and obs_dim must be >= 1");
	if (o->act_kind != SR_SPACE_DISCRETE && o->act_kind != SR_SPACE_BOX)
		return sr__errorf(-EINVAL, "device: act_kind %u is neither discrete nor box",
				  o->act_kind);
	if (o->act_kind == SR_SPACE_BOX && o->act_dim < 1)
		return sr__errorf(-EINVAL, "device: box actions need act_dim >= 1");
	if ((o->flags & SR_DEVICE_F_RING) && !o->ring)
		return sr__errorf(-EINVAL, "device: SR_DEVICE_F_RING without a ring");
	if ((o->flags & SR_DEVICE_F_RING) && sr_ring_obs_dim(o->ring) != o->obs_dim)
		return sr__errorf(-EINVAL, "device: ring obs_dim %u != device obs_dim %u",
				  sr_ring_obs_dim(o->ring), o->obs_dim);

	switch (o->kind) {
	case SR_DEVICE_HOST:
		kind = SR_DEVICE_HOST;
		break;
	case SR_DEVICE_CUDA:
		kind = SR_DEVICE_CUDA;
		break;
	case SR_DEVICE_AUTO:
		kind = sr__cuda_available(o->index) ? SR_DEVICE_CUDA : SR_DEVICE_HOST;
		break;
	default:
		return sr__errorf(-EINVAL, "device: unknown kind %u", o->kind);
	}

	d = calloc(1, sizeof(*d));
	if (!d)
		return sr__errorf(-ENOMEM, "device: out of memory");
	d->opts = *o;
	d->kind = kind;
	d->nb = o->in_flight ? o->in_flight : 3;
	d->opts.in_flight = d->nb;
	d->act_size = o->act_kind == SR_SPACE_DISCRETE ? 4u : 4u * o->act_dim;
	atomic_init(&d->free_mask, (uint32_t)((1u << d->nb) - 1));
	atomic_init(&d->waiters, 0);
	atomic_init(&d->live, 1);
	atomic_init(&d->batches, 0);
	atomic_init(&d->waits, 0);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	for (uint32_t i = 0; i < d->nb; i++) {
		struct sr__dbatch *b = &d->b[i];

		b->dev = d;
		b->pub.index = i;
		b->pub.obs_dim = o->obs_dim;
		b->pub.act_size = d->act_size;
		atomic_init(&b->refs, 0);
		atomic_init(&b->released, true);
	}

	if (kind == SR_DEVICE_HOST) {
		err = host_alloc(d);
	} else {
		sr_device_batch pubs[SR_DEVICE_MAX_IN_FLIGHT];

		for (uint32_t i = 0; i < d->nb; i++)
			pubs[i] = d->b[i].pub;
		err = sr__cuda_open(&d->opts, d->nb, pubs, &d->cuda, d->name, sizeof(d->name),
				    &d->registered, &d->staging);
		for (uint32_t i = 0; !err && i < d->nb; i++)
			d->b[i].pub = pubs[i];
	}
	if (err) {
		device_free(d);
		return err;
	}
	if (d->staging && !(o->flags & SR_DEVICE_F_QUIET) &&
	    !atomic_exchange_explicit(&staging_said, true, memory_order_relaxed))
		fprintf(stderr,
			"stepring: cuda: the ring is not registered as pinned memory; "
			"batches go through a pinned staging buffer (one extra host copy)\n");
	*out = d;
	return 0;
}

void sr_device_close(sr_device *d)
{
	if (!d)
		return;
	if (d->cuda)
		sr__cuda_close(d->cuda);
	d->cuda = NULL;
	device_put(d);
}

int sr_device_info_get(const sr_device *d, sr_device_info *out)
{
	uint32_t m;

	if (!d || !out)
		return sr__errorf(-EINVAL, "device info: NULL argument");
	memset(out, 0, sizeof(*out));
	m = atomic_load_explicit(&((struct sr_device *)d)->free_mask, memory_order_relaxed);
	out->kind = d->kind;
	out->index = d->kind == SR_DEVICE_CUDA ? d->opts.index : 0;
	out->in_flight = d->nb;
	out->held = d->nb - (uint32_t)__builtin_popcount(m);
	out->ring_registered = d->registered;
	out->staging = d->staging;
	snprintf(out->name, sizeof(out->name), "%s", d->name);
	out->batches = atomic_load_explicit(&((struct sr_device *)d)->batches,
					    memory_order_relaxed);
	out->waits = atomic_load_explicit(&((struct sr_device *)d)->waits, memory_order_relaxed);
	out->max_rows = d->opts.max_rows;
	out->obs_dim = d->opts.obs_dim;
	out->act_kind = d->opts.act_kind;
	out->act_dim = d->opts.act_dim;
	return 0;
}

/* Producer: claim a free batch, waiting while the consumers hold all. */
static int take_batch(struct sr_device *d, unsigned flags, struct sr__dbatch **out)
{
	uint32_t m, i;
	int spins = 0;

	for (;;) {
		/* A2: pairs with R2 in recycle(). */
		m = atomic_load_explicit(&d->free_mask, memory_order_acquire);
		if (m)
			break;
		if (flags & SR_SUBMIT_NOWAIT)
			return sr__errorf(-EAGAIN, "device: all %u batches are held by the consumer",
					  d->nb);
		if (spins++ < 64) {
			sched_yield();
			continue;
		}
		atomic_fetch_add_explicit(&d->waits, 1, memory_order_relaxed);
		pthread_mutex_lock(&d->mu);
		atomic_fetch_add(&d->waiters, 1); /* W: seq_cst */
		while (!(m = atomic_load(&d->free_mask)))
			pthread_cond_wait(&d->cv, &d->mu);
		atomic_fetch_sub(&d->waiters, 1);
		pthread_mutex_unlock(&d->mu);
		break;
	}
	/* Round robin from d->next, so batches cycle 0, 1, 2, ... */
	m = (m >> d->next) | (m << ((d->nb - d->next) % 32));
	m &= (1u << d->nb) - 1;
	i = (d->next + (uint32_t)__builtin_ctz(m)) % d->nb;
	/* Only the producer clears bits, so bit i stays set until here. */
	atomic_fetch_and_explicit(&d->free_mask, ~(1u << i), memory_order_acquire);
	d->next = (i + 1) % d->nb;
	atomic_store_explicit(&d->b[i].refs, 1, memory_order_relaxed);
	atomic_store_explicit(&d->b[i].released, false, memory_order_relaxed);
	atomic_fetch_add_explicit(&d->batches, 1, memory_order_relaxed);
	*out = &d->b[i];
	return 0;
}

static void recycle(struct sr_device *d, uint32_t i)
{
	/* R2: publishes the batch as free (seq_cst, also W). */
	atomic_fetch_or(&d->free_mask, 1u << i);
	if (atomic_load(&d->waiters)) {
		pthread_mutex_lock(&d->mu);
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
}

static void batch_put(struct sr__dbatch *b)
{
	/* R1/A1. */
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		recycle(b->dev, b->pub.index);
}

static int submit_cols(struct sr_device *d, const struct sr__cols *c, uint64_t first_seq,
		       unsigned flags, sr_device_batch **out)
{
	struct sr__dbatch *b = NULL;
	int err;

	err = take_batch(d, flags, &b);
	if (err)
		return err;
	b->pub.n = c->n;
	b->pub.first_seq = first_seq;
	if (d->kind == SR_DEVICE_CUDA) {
		err = sr__cuda_copy(d->cuda, b->pub.index, c);
	} else {
		char *dst[SR__NCOLS] = {
			(char *)b->pub.obs, (char *)b->pub.reward, (char *)b->pub.terminated,
			(char *)b->pub.truncated, (char *)b->pub.flags, (char *)b->pub.env_id,
		};

		for (int k = 0; k < SR__NCOLS; k++) {
			size_t a = c->n0 * c->width[k], rest = (c->n - c->n0) * c->width[k];

			if (!c->piece[0][k]) {
				memset(dst[k], 0, a + rest);
				continue;
			}
			memcpy(dst[k], c->piece[0][k], a);
			if (rest)
				memcpy(dst[k] + a, c->piece[1][k], rest);
		}
	}
	if (err) {
		atomic_store_explicit(&b->released, true, memory_order_relaxed);
		batch_put(b);
		return err;
	}
	*out = &b->pub;
	return 0;
}

static void cols_widths(const struct sr_device *d, struct sr__cols *c)
{
	c->width[SR__COL_OBS] = (size_t)d->opts.obs_dim * sizeof(float);
	c->width[SR__COL_REWARD] = sizeof(float);
	c->width[SR__COL_TERMINATED] = 1;
	c->width[SR__COL_TRUNCATED] = 1;
	c->width[SR__COL_FLAGS] = 1;
	c->width[SR__COL_ENV_ID] = sizeof(uint32_t);
}

int sr_device_submit(sr_device *d, const sr_batch *src, unsigned flags, sr_device_batch **out)
{
	struct sr__cols c;

	if (!d || !src || !out)
		return sr__errorf(-EINVAL, "device submit: NULL argument");
	if (flags & ~(unsigned)SR_SUBMIT_NOWAIT)
		return sr__errorf(-EINVAL, "device submit: unknown flags 0x%x", flags);
	if (src->n < 1 || src->n > d->opts.max_rows)
		return sr__errorf(-EINVAL, "device submit: %u rows not in [1, %u]", src->n,
				  d->opts.max_rows);
	if (src->obs_dim != d->opts.obs_dim)
		return sr__errorf(-EINVAL, "device submit: obs_dim %u != device obs_dim %u",
				  src->obs_dim, d->opts.obs_dim);
	memset(&c, 0, sizeof(c));
	cols_widths(d, &c);
	c.n = c.n0 = src->n;
	c.piece[0][SR__COL_OBS] = src->obs;
	c.piece[0][SR__COL_REWARD] = src->reward;
	c.piece[0][SR__COL_TERMINATED] = src->terminated;
	c.piece[0][SR__COL_TRUNCATED] = src->truncated;
	c.piece[0][SR__COL_FLAGS] = NULL; /* an sr_batch has no flags column */
	c.piece[0][SR__COL_ENV_ID] = src->env_id;
	return submit_cols(d, &c, src->first_seq, flags, out);
}

int sr_device_submit_ring(sr_device *d, const sr_ring *r, uint64_t first_seq, uint32_t n,
			  unsigned flags, sr_device_batch **out)
{
	struct sr__cols c;
	uint64_t cap, s0;
	const char *base[SR__NCOLS];

	if (!d || !r || !out)
		return sr__errorf(-EINVAL, "device submit: NULL argument");
	if (flags & ~(unsigned)SR_SUBMIT_NOWAIT)
		return sr__errorf(-EINVAL, "device submit: unknown flags 0x%x", flags);
	cap = sr_ring_capacity(r);
	if (n < 1 || n > d->opts.max_rows || n > cap)
		return sr__errorf(-EINVAL, "device submit: %u rows not in [1, %u]", n,
				  d->opts.max_rows < cap ? d->opts.max_rows : (uint32_t)cap);
	if (sr_ring_obs_dim(r) != d->opts.obs_dim)
		return sr__errorf(-EINVAL, "device submit: ring obs_dim %u != device obs_dim %u",
				  sr_ring_obs_dim(r), d->opts.obs_dim);
	memset(&c, 0, sizeof(c));
	cols_widths(d, &c);
	base[SR__COL_OBS] = (const char *)sr_ring_obs_col(r);
	base[SR__COL_REWARD] = (const char *)sr_ring_reward_col(r);
	base[SR__COL_TERMINATED] = (const char *)sr_ring_terminated_col(r);
	base[SR__COL_TRUNCATED] = (const char *)sr_ring_truncated_col(r);
	base[SR__COL_FLAGS] = (const char *)sr_ring_flags_col(r);
	base[SR__COL_ENV_ID] = (const char *)sr_ring_env_id_col(r);
	s0 = first_seq & (cap - 1);
	c.n = n;
	c.n0 = (uint32_t)(cap - s0 < n ? cap - s0 : n);
	for (int k = 0; k < SR__NCOLS; k++) {
		c.piece[0][k] = base[k] + s0 * c.width[k];
		c.piece[1][k] = base[k]; /* the wrapped rest starts at slot 0 */
	}
	return submit_cols(d, &c, first_seq, flags, out);
}

static struct sr__dbatch *dbatch(sr_device_batch *b)
{
	return (struct sr__dbatch *)b;
}

int sr_device_batch_sync(sr_device_batch *b)
{
	struct sr_device *d;

	if (!b)
		return sr__errorf(-EINVAL, "device sync: NULL batch");
	d = dbatch(b)->dev;
	if (d->kind == SR_DEVICE_CUDA && d->cuda)
		return sr__cuda_sync(d->cuda, b->index);
	return 0;
}

int sr_device_release(sr_device *d, sr_device_batch *b)
{
	struct sr__dbatch *db;

	if (!d || !b)
		return sr__errorf(-EINVAL, "device release: NULL argument");
	db = dbatch(b);
	if (db->dev != d || b->index >= d->nb || &d->b[b->index] != db)
		return sr__errorf(-EINVAL, "device release: batch is not from this device");
	if (atomic_exchange_explicit(&db->released, true, memory_order_relaxed))
		return sr__errorf(-EINVAL, "device release: batch %u was already released",
				  b->index);
	batch_put(db);
	return 0;
}

/* ---- DLPack ---------------------------------------------------------------- */

struct dl_export {
	DLManagedTensor t; /* first member */
	int64_t shape[2];
	int64_t strides[2];
	struct sr__dbatch *b;
};

static void dl_deleter(DLManagedTensor *self)
{
	struct dl_export *e;
	struct sr_device *d;

	if (!self)
		return;
	e = (struct dl_export *)self->manager_ctx;
	d = e->b->dev;
	batch_put(e->b);
	device_put(d);
	free(e);
}

int sr_device_batch_dlpack(sr_device_batch *b, int field, struct DLManagedTensor **out)
{
	struct dl_export *e;
	struct sr__dbatch *db;
	DLTensor *t;
	int err;

	if (!b || !out)
		return sr__errorf(-EINVAL, "dlpack: NULL argument");
	*out = NULL;
	if (field < 0 || field >= SR_FIELD_COUNT)
		return sr__errorf(-EINVAL, "dlpack: unknown field %d", field);
	db = dbatch(b);
	if (atomic_load_explicit(&db->released, memory_order_relaxed))
		return sr__errorf(-EINVAL, "dlpack: batch %u was released", b->index);
	err = sr_device_batch_sync(b);
	if (err)
		return err;
	e = calloc(1, sizeof(*e));
	if (!e)
		return sr__errorf(-ENOMEM, "dlpack: out of memory");
	e->b = db;
	t = &e->t.dl_tensor;
	t->device.device_type = (DLDeviceType)b->dl_device_type;
	t->device.device_id = b->dl_device_id;
	t->ndim = 1;
	t->shape = e->shape;
	t->strides = e->strides;
	t->byte_offset = 0;
	e->shape[0] = b->n;
	e->strides[0] = 1;
	t->dtype.lanes = 1;
	switch (field) {
	case SR_FIELD_OBS:
		t->data = b->obs;
		t->dtype.code = kDLFloat;
		t->dtype.bits = 32;
		t->ndim = 2;
		e->shape[1] = b->obs_dim;
		e->strides[0] = b->obs_dim;
		e->strides[1] = 1;
		break;
	case SR_FIELD_REWARD:
		t->data = b->reward;
		t->dtype.code = kDLFloat;
		t->dtype.bits = 32;
		break;
	case SR_FIELD_TERMINATED:
	case SR_FIELD_TRUNCATED:
	case SR_FIELD_FLAGS:
		t->data = field == SR_FIELD_TERMINATED ? b->terminated
			  : field == SR_FIELD_TRUNCATED ? b->truncated
							: b->flags;
		t->dtype.code = kDLUInt;
		t->dtype.bits = 8;
		break;
	case SR_FIELD_ENV_ID:
		t->data = b->env_id;
		t->dtype.code = kDLInt;
		t->dtype.bits = 32;
		break;
	case SR_FIELD_ACTION:
		t->data = b->actions;
		t->dtype.bits = 32;
		if (db->dev->opts.act_kind == SR_SPACE_DISCRETE) {
			t->dtype.code = kDLInt;
		} else {
			t->dtype.code = kDLFloat;
			t->ndim = 2;
			e->shape[1] = db->dev->opts.act_dim;
			e->strides[0] = db->dev->opts.act_dim;
			e->strides[1] = 1;
		}
		break;
	}
	e->t.manager_ctx = e;
	e->t.deleter = dl_deleter;
	/* The holder already has a reference (not released), so relaxed
	 * increments suffice: no one can drop the count to 0 meanwhile. */
	atomic_fetch_add_explicit(&db->refs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&db->dev->live, 1, memory_order_relaxed);
	*out = &e->t;
	return 0;
}

struct ring_view {
	DLManagedTensor t; /* first member */
	int64_t shape[2];
	int64_t strides[2];
};

static void ring_view_deleter(DLManagedTensor *self)
{
	free(self);
}

int sr_ring_dlpack(const sr_ring *r, int field, uint64_t first_seq, uint32_t n,
		   struct DLManagedTensor **out)
{
	struct ring_view *v;
	DLTensor *t;
	uint64_t cap, s;

	if (!r || !out)
		return sr__errorf(-EINVAL, "ring dlpack: NULL argument");
	*out = NULL;
	cap = sr_ring_capacity(r);
	if (field < 0 || field >= SR_FIELD_COUNT)
		return sr__errorf(-EINVAL, "ring dlpack: unknown field %d", field);
	if (n < 1 || n > cap)
		return sr__errorf(-EINVAL, "ring dlpack: %u slots not in [1, %llu]", n,
				  (unsigned long long)cap);
	s = first_seq & (cap - 1);
	if (s + n > cap)
		return sr__errorf(-ERANGE, "ring dlpack: slots %llu..%llu wrap around the ring",
				  (unsigned long long)first_seq,
				  (unsigned long long)(first_seq + n - 1));
	v = calloc(1, sizeof(*v));
	if (!v)
		return sr__errorf(-ENOMEM, "ring dlpack: out of memory");
	t = &v->t.dl_tensor;
	t->device.device_type = kDLCPU;
	t->device.device_id = 0;
	t->ndim = 1;
	t->shape = v->shape;
	t->strides = v->strides;
	v->shape[0] = n;
	v->strides[0] = 1;
	t->dtype.lanes = 1;
	t->dtype.bits = 8;
	t->dtype.code = kDLUInt;
	switch (field) {
	case SR_FIELD_OBS:
		t->data = sr_ring_obs_col(r) + s * sr_ring_obs_dim(r);
		t->dtype.code = kDLFloat;
		t->dtype.bits = 32;
		t->ndim = 2;
		v->shape[1] = sr_ring_obs_dim(r);
		v->strides[0] = sr_ring_obs_dim(r);
		v->strides[1] = 1;
		break;
	case SR_FIELD_REWARD:
		t->data = sr_ring_reward_col(r) + s;
		t->dtype.code = kDLFloat;
		t->dtype.bits = 32;
		break;
	case SR_FIELD_TERMINATED:
		t->data = sr_ring_terminated_col(r) + s;
		break;
	case SR_FIELD_TRUNCATED:
		t->data = sr_ring_truncated_col(r) + s;
		break;
	case SR_FIELD_FLAGS:
		t->data = sr_ring_flags_col(r) + s;
		break;
	case SR_FIELD_ENV_ID:
		t->data = sr_ring_env_id_col(r) + s;
		t->dtype.code = kDLInt;
		t->dtype.bits = 32;
		break;
	case SR_FIELD_ACTION:
		t->data = sr_ring_action_col(r) + s * sr_ring_act_size(r);
		t->ndim = 2;
		v->shape[1] = sr_ring_act_size(r);
		v->strides[0] = sr_ring_act_size(r);
		v->strides[1] = 1;
		break;
	}
	v->t.manager_ctx = v;
	v->t.deleter = ring_view_deleter;
	*out = &v->t;
	return 0;
}

/* ---- actions ---------------------------------------------------------------- */

int sr_device_actions(sr_device *d, sr_device_batch *b, const void *src, const void **host)
{
	if (!d || !b || !host)
		return sr__errorf(-EINVAL, "device actions: NULL argument");
	if (d->kind == SR_DEVICE_CUDA)
		return sr__cuda_actions(d->cuda, b->index, b->n, src, host);
	*host = src ? src : b->actions;
	return 0;
}
