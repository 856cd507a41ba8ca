/* The device layer on the host path: DLPack views of the ring and of
 * device batches (shapes, dtypes, strides, data pointers, deleters), N in
 * flight with release and backpressure, the synthetic MLP policy of the
 * benchmark library (tools/bench) on a host device batch, and the
 * CUDA device refusing cleanly where there is none. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>
#include <dlpack/dlpack.h>

#include "stepring.h"
#include "stepring/device.h"
#include "device_internal.h"
#include "mlp_priv.h"

#define OBS 3
#define CAP 64

static sr_ring *mk_ring(void)
{
	sr_ring_opts o = {.obs_dim = OBS, .act_size = 4, .capacity = CAP};
	sr_ring *r = NULL;

	assert_int_equal(sr_ring_create(&o, &r), 0);
	for (uint64_t s = 0; s < CAP; s++) {
		for (int k = 0; k < OBS; k++)
			sr_ring_obs_col(r)[s * OBS + k] = (float)(s * 10 + k);
		sr_ring_reward_col(r)[s] = (float)s * 0.5f;
		sr_ring_terminated_col(r)[s] = (uint8_t)(s % 7 == 0);
		sr_ring_truncated_col(r)[s] = (uint8_t)(s % 5 == 0);
		sr_ring_flags_col(r)[s] = (uint8_t)(s % 2 ? SR_SLOT_FIRST : 0);
		sr_ring_env_id_col(r)[s] = (uint32_t)(s % 9);
		memcpy(sr_ring_action_col(r) + s * 4, &(int32_t){(int32_t)s}, 4);
	}
	return r;
}

static sr_device *mk_dev(sr_ring *r, uint32_t n_flight, uint32_t rows)
{
	sr_device_opts o;
	sr_device *d = NULL;

	sr_device_opts_init(&o);
	o.in_flight = n_flight;
	o.max_rows = rows;
	o.obs_dim = OBS;
	if (r) {
		o.flags = SR_DEVICE_F_RING;
		o.ring = r;
	}
	assert_int_equal(sr_device_open(&o, &d), 0);
	return d;
}

static void check_rows(const sr_device_batch *b, uint64_t first)
{
	for (uint32_t i = 0; i < b->n; i++) {
		uint64_t s = (first + i) % CAP;

		for (int k = 0; k < OBS; k++)
			assert_true(b->obs[i * OBS + k] == (float)(s * 10 + k));
		assert_true(b->reward[i] == (float)s * 0.5f);
		assert_int_equal(b->terminated[i], s % 7 == 0);
		assert_int_equal(b->truncated[i], s % 5 == 0);
		assert_int_equal(b->flags[i], s % 2 ? SR_SLOT_FIRST : 0);
		assert_int_equal(b->env_id[i], s % 9);
	}
}

static void test_ring_dlpack_views(void **st)
{
	sr_ring *r = mk_ring();
	DLManagedTensor *t = NULL;
	DLTensor *x;

	(void)st;
	assert_int_equal(sr_ring_dlpack(r, SR_FIELD_OBS, 70, 10, &t), 0); /* slot 6 */
	x = &t->dl_tensor;
	assert_ptr_equal(x->data, sr_ring_obs_col(r) + 6 * OBS);
	assert_int_equal(x->device.device_type, kDLCPU);
	assert_int_equal(x->ndim, 2);
	assert_int_equal(x->shape[0], 10);
	assert_int_equal(x->shape[1], OBS);
	assert_int_equal(x->strides[0], OBS);
	assert_int_equal(x->strides[1], 1);
	assert_int_equal(x->dtype.code, kDLFloat);
	assert_int_equal(x->dtype.bits, 32);
	assert_int_equal(x->dtype.lanes, 1);
	assert_int_equal(x->byte_offset, 0);
	assert_true(((float *)x->data)[OBS + 1] == 71.0f);
	t->deleter(t);

	struct {
		int field;
		void *base;
		int code, bits;
	} cols[] = {
		{SR_FIELD_REWARD, sr_ring_reward_col(r) + 6, kDLFloat, 32},
		{SR_FIELD_TERMINATED, sr_ring_terminated_col(r) + 6, kDLUInt, 8},
		{SR_FIELD_TRUNCATED, sr_ring_truncated_col(r) + 6, kDLUInt, 8},
		{SR_FIELD_FLAGS, sr_ring_flags_col(r) + 6, kDLUInt, 8},
		{SR_FIELD_ENV_ID, sr_ring_env_id_col(r) + 6, kDLInt, 32},
	};
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		assert_int_equal(sr_ring_dlpack(r, cols[i].field, 6, 10, &t), 0);
		x = &t->dl_tensor;
		assert_ptr_equal(x->data, cols[i].base);
		assert_int_equal(x->ndim, 1);
		assert_int_equal(x->shape[0], 10);
		assert_int_equal(x->strides[0], 1);
		assert_int_equal(x->dtype.code, cols[i].code);
		assert_int_equal(x->dtype.bits, cols[i].bits);
		t->deleter(t);
	}
	assert_int_equal(sr_ring_dlpack(r, SR_FIELD_ACTION, 6, 10, &t), 0);
	assert_ptr_equal(t->dl_tensor.data, sr_ring_action_col(r) + 6 * 4);
	assert_int_equal(t->dl_tensor.shape[1], 4);
	t->deleter(t);

	/* Wrapping ranges and nonsense are refused with a reason. */
	assert_int_equal(sr_ring_dlpack(r, SR_FIELD_OBS, CAP - 2, 4, &t), -ERANGE);
	assert_null(t);
	assert_non_null(strstr(sr_last_error(), "wrap"));
	assert_int_equal(sr_ring_dlpack(r, SR_FIELD_OBS, 0, 0, &t), -EINVAL);
	assert_int_equal(sr_ring_dlpack(r, SR_FIELD_OBS, 0, CAP + 1, &t), -EINVAL);
	assert_int_equal(sr_ring_dlpack(r, 99, 0, 1, &t), -EINVAL);
	sr_ring_destroy(r);
}

static void test_submit_ring_and_wrap(void **st)
{
	sr_ring *r = mk_ring();
	sr_device *d = mk_dev(r, 2, 16);
	sr_device_batch *b = NULL;
	sr_device_info info;

	(void)st;
	assert_int_equal(sr_device_info_get(d, &info), 0);
	assert_int_equal(info.kind, SR_DEVICE_HOST);
	assert_string_equal(info.name, "host");
	assert_int_equal(info.in_flight, 2);
	assert_false(info.staging);

	assert_int_equal(sr_device_submit_ring(d, r, 10, 16, 0, &b), 0);
	assert_int_equal(b->n, 16);
	assert_int_equal(b->first_seq, 10);
	assert_int_equal(b->dl_device_type, kDLCPU);
	assert_null(b->stream);
	assert_int_equal(sr_device_batch_sync(b), 0);
	check_rows(b, 10);
	/* A copy, not a view: the batch does not alias the ring. */
	assert_true((char *)b->obs < (char *)sr_ring_obs_col(r) ||
		    (char *)b->obs >= (char *)sr_ring_obs_col(r) + CAP * OBS * 4);
	assert_int_equal(sr_device_release(d, b), 0);

	/* Slots 60..63 then 0..5: two pieces per column. */
	assert_int_equal(sr_device_submit_ring(d, r, 2 * CAP + 60, 10, 0, &b), 0);
	check_rows(b, 60);
	assert_int_equal(sr_device_release(d, b), 0);

	assert_int_equal(sr_device_submit_ring(d, r, 0, 17, 0, &b), -EINVAL);
	assert_int_equal(sr_device_submit_ring(d, r, 0, 0, 0, &b), -EINVAL);
	assert_int_equal(sr_device_submit_ring(d, r, 0, 1, 1u << 9, &b), -EINVAL);
	assert_int_equal(sr_device_info_get(d, &info), 0);
	assert_int_equal(info.held, 0);
	assert_int_equal(info.batches, 2);
	sr_device_close(d);
	sr_ring_destroy(r);
}

static void test_submit_batch_and_dlpack(void **st)
{
	float obs[4 * OBS], rew[4] = {1, 2, 3, 4};
	uint8_t term[4] = {0, 1, 0, 0}, trunc[4] = {0, 0, 1, 0};
	uint32_t ids[4] = {7, 5, 3, 1};
	sr_batch src = {.n = 4, .obs_dim = OBS, .obs = obs, .reward = rew, .terminated = term,
			.truncated = trunc, .env_id = ids, .first_seq = 42};
	sr_device *d = mk_dev(NULL, 3, 8);
	sr_device_batch *b = NULL;
	DLManagedTensor *t[SR_FIELD_COUNT];

	(void)st;
	for (int i = 0; i < 4 * OBS; i++)
		obs[i] = (float)i - 3.5f;
	assert_int_equal(sr_device_submit(d, &src, 0, &b), 0);
	assert_int_equal(b->first_seq, 42);
	assert_memory_equal(b->obs, obs, sizeof(obs));
	assert_memory_equal(b->reward, rew, sizeof(rew));
	assert_memory_equal(b->env_id, ids, sizeof(ids));
	assert_memory_equal(b->terminated, term, 4);
	assert_memory_equal(b->truncated, trunc, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(b->flags[i], 0); /* an sr_batch has no flags */

	for (int f = 0; f < SR_FIELD_COUNT; f++) {
		assert_int_equal(sr_device_batch_dlpack(b, f, &t[f]), 0);
		assert_int_equal(t[f]->dl_tensor.device.device_type, kDLCPU);
		assert_int_equal(t[f]->dl_tensor.shape[0], 4);
		assert_int_equal(t[f]->dl_tensor.byte_offset, 0);
		assert_int_equal(t[f]->dl_tensor.dtype.lanes, 1);
		assert_ptr_equal(t[f]->manager_ctx, t[f]);
	}
	assert_ptr_equal(t[SR_FIELD_OBS]->dl_tensor.data, b->obs);
	assert_int_equal(t[SR_FIELD_OBS]->dl_tensor.ndim, 2);
	assert_int_equal(t[SR_FIELD_OBS]->dl_tensor.shape[1], OBS);
	assert_int_equal(t[SR_FIELD_OBS]->dl_tensor.strides[0], OBS);
	assert_ptr_equal(t[SR_FIELD_REWARD]->dl_tensor.data, b->reward);
	assert_ptr_equal(t[SR_FIELD_TERMINATED]->dl_tensor.data, b->terminated);
	assert_ptr_equal(t[SR_FIELD_TRUNCATED]->dl_tensor.data, b->truncated);
	assert_ptr_equal(t[SR_FIELD_FLAGS]->dl_tensor.data, b->flags);
	assert_ptr_equal(t[SR_FIELD_ENV_ID]->dl_tensor.data, b->env_id);
	assert_int_equal(t[SR_FIELD_ENV_ID]->dl_tensor.dtype.code, kDLInt);
	assert_ptr_equal(t[SR_FIELD_ACTION]->dl_tensor.data, b->actions);
	assert_int_equal(t[SR_FIELD_ACTION]->dl_tensor.dtype.code, kDLInt);
	assert_int_equal(t[SR_FIELD_ACTION]->dl_tensor.ndim, 1);
	{
		DLManagedTensor *none = (DLManagedTensor *)&none;

		assert_int_equal(sr_device_batch_dlpack(b, SR_FIELD_COUNT, &none), -EINVAL);
		assert_null(none);
	}

	src.obs_dim = OBS + 1;
	assert_int_equal(sr_device_submit(d, &src, 0, &b), -EINVAL);
	src.obs_dim = OBS;
	src.n = 9;
	assert_int_equal(sr_device_submit(d, &src, 0, &b), -EINVAL);

	/* Close with tensors alive: their memory and deleters stay valid. */
	sr_device_close(d);
	for (int f = 0; f < SR_FIELD_COUNT; f++) {
		if (f == SR_FIELD_REWARD)
			assert_true(((float *)t[f]->dl_tensor.data)[3] == 4.0f);
		t[f]->deleter(t[f]);
	}
}

/* A batch is recycled only once released AND every tensor is deleted. */
static void test_release_and_deleter(void **st)
{
	sr_ring *r = mk_ring();
	sr_device *d = mk_dev(r, 2, 8);
	sr_device_batch *a = NULL, *b = NULL, *c = NULL;
	DLManagedTensor *t1, *t2, *t3 = NULL;
	sr_device_info info;

	(void)st;
	assert_int_equal(sr_device_submit_ring(d, r, 0, 8, 0, &a), 0);
	assert_int_equal(sr_device_submit_ring(d, r, 8, 8, 0, &b), 0);
	assert_int_not_equal(a->index, b->index);
	assert_int_equal(sr_device_submit_ring(d, r, 16, 8, SR_SUBMIT_NOWAIT, &c), -EAGAIN);
	assert_non_null(strstr(sr_last_error(), "held"));

	assert_int_equal(sr_device_batch_dlpack(a, SR_FIELD_OBS, &t1), 0);
	assert_int_equal(sr_device_batch_dlpack(a, SR_FIELD_REWARD, &t2), 0);
	assert_int_equal(sr_device_release(d, a), 0);
	assert_int_equal(sr_device_release(d, a), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "already released"));
	assert_int_equal(sr_device_batch_dlpack(a, SR_FIELD_OBS, &t3), -EINVAL);
	assert_null(t3);
	/* Released, but two tensors still hold it. */
	assert_int_equal(sr_device_info_get(d, &info), 0);
	assert_int_equal(info.held, 2);
	assert_int_equal(sr_device_submit_ring(d, r, 16, 8, SR_SUBMIT_NOWAIT, &c), -EAGAIN);
	assert_true(((float *)t1->dl_tensor.data)[0] == 0.0f); /* still readable */
	t1->deleter(t1);
	assert_int_equal(sr_device_submit_ring(d, r, 16, 8, SR_SUBMIT_NOWAIT, &c), -EAGAIN);
	t2->deleter(t2);
	assert_int_equal(sr_device_submit_ring(d, r, 16, 8, SR_SUBMIT_NOWAIT, &c), 0);
	assert_int_equal(c->index, a->index); /* the recycled one */
	check_rows(c, 16);

	/* A batch of another device is refused. */
	{
		sr_device *d2 = mk_dev(r, 1, 8);

		assert_int_equal(sr_device_release(d2, c), -EINVAL);
		sr_device_close(d2);
	}
	assert_int_equal(sr_device_release(d, b), 0);
	assert_int_equal(sr_device_release(d, c), 0);
	sr_device_close(d);
	sr_ring_destroy(r);
}

struct bp {
	sr_device *d;
	sr_ring *r;
	atomic_int stage;
	sr_device_batch *got;
	int err;
};

static void *producer(void *arg)
{
	struct bp *p = arg;

	atomic_store(&p->stage, 1);
	p->err = sr_device_submit_ring(p->d, p->r, 24, 8, 0, &p->got); /* blocks */
	atomic_store(&p->stage, 2);
	return NULL;
}

/* Backpressure: a blocking submit waits while the consumer holds all N,
 * and proceeds as soon as one batch is released. */
static void test_backpressure(void **st)
{
	struct bp p = {0};
	sr_device_batch *h[2];
	sr_device_info info;
	pthread_t th;

	(void)st;
	p.r = mk_ring();
	p.d = mk_dev(p.r, 2, 8);
	assert_int_equal(sr_device_submit_ring(p.d, p.r, 0, 8, 0, &h[0]), 0);
	assert_int_equal(sr_device_submit_ring(p.d, p.r, 8, 8, 0, &h[1]), 0);
	assert_int_equal(pthread_create(&th, NULL, producer, &p), 0);
	while (atomic_load(&p.stage) < 1)
		usleep(1000);
	/* Until the producer counts its wait (it has spun and is about to
	 * block): a fixed sleep here let a descheduled producer (TSan, a
	 * busy machine) arrive after the release and never wait. */
	for (int i = 0; i < 10000; i++) {
		assert_int_equal(sr_device_info_get(p.d, &info), 0);
		if (info.waits >= 1)
			break;
		usleep(1000);
	}
	assert_true(info.waits >= 1);
	usleep(20 * 1000);
	assert_int_equal(atomic_load(&p.stage), 1); /* still waiting */
	assert_int_equal(sr_device_release(p.d, h[1]), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&p.stage), 2);
	assert_int_equal(p.err, 0);
	assert_int_equal(p.got->index, h[1]->index);
	check_rows(p.got, 24);
	assert_int_equal(sr_device_info_get(p.d, &info), 0);
	assert_true(info.waits >= 1);
	assert_int_equal(sr_device_release(p.d, h[0]), 0);
	assert_int_equal(sr_device_release(p.d, p.got), 0);
	sr_device_close(p.d);
	sr_ring_destroy(p.r);
}

static void test_bad_opts_and_cuda_absent(void **st)
{
	sr_device_opts o;
	sr_device *d = NULL;
	sr_device_info info;

	(void)st;
	sr_device_opts_init(&o);
	o.max_rows = 4;
	o.obs_dim = OBS;
	o.in_flight = SR_DEVICE_MAX_IN_FLIGHT + 1;
	assert_int_equal(sr_device_open(&o, &d), -EINVAL);
	o.in_flight = 0; /* default 3 */
	o.flags = 1u << 20;
	assert_int_equal(sr_device_open(&o, &d), -EINVAL);
	o.flags = SR_DEVICE_F_RING; /* without a ring */
	assert_int_equal(sr_device_open(&o, &d), -EINVAL);
	o.flags = 0;
	o.kind = 7;
	assert_int_equal(sr_device_open(&o, &d), -EINVAL);
	o.kind = SR_DEVICE_HOST;
	o.act_kind = SR_SPACE_BOX;
	o.act_dim = 0;
	assert_int_equal(sr_device_open(&o, &d), -EINVAL);
	o.act_kind = SR_SPACE_DISCRETE;
	assert_null(d);

	if (sr_device_cuda_available(0)) {
		/* tests/test_gpu.c covers this machine. */
		return;
	}
	{
		char gpu[128];

		assert_int_equal(sr_device_describe(gpu, sizeof(gpu)), -ENODEV);
		assert_string_equal(gpu, "none");
	}
	o.kind = SR_DEVICE_CUDA;
	{
		int err = sr_device_open(&o, &d);

		assert_true(err == -ENOSYS || err == -ENODEV);
		assert_true(strlen(sr_last_error()) > 0);
		assert_null(d);
	}
	o.kind = SR_DEVICE_AUTO;
	assert_int_equal(sr_device_open(&o, &d), 0);
	assert_int_equal(sr_device_info_get(d, &info), 0);
	assert_int_equal(info.kind, SR_DEVICE_HOST);
	assert_int_equal(info.in_flight, 3);
	sr_device_close(d);
	sr_device_close(NULL);

	/* A pool asked for a cuda device says why it cannot open; auto falls
	 * back to the host. */
	{
		sr_pool_opts po;
		sr_pool *pool = NULL;
		const sr_batch *b = NULL;
		int err;

		sr_pool_opts_init(&po);
		po.env = "CartPole-v1";
		po.num_envs = 8;
		po.num_threads = 1;
		po.bind = SR_BIND_NONE;
		po.device = SR_DEVICE_CUDA;
		err = sr_pool_create(&po, &pool);
		assert_true(err == -ENOSYS || err == -ENODEV);
		assert_true(strlen(sr_last_error()) > 0);
		assert_null(pool);
		po.device = SR_DEVICE_AUTO;
		assert_int_equal(sr_pool_create(&po, &pool), 0);
		assert_int_equal(sr_pool_reset(pool, &b), 0);
		assert_int_equal(b->n, 8);
		assert_int_equal(b->first_seq == UINT64_MAX, 0); /* a ring view: host */
		sr_pool_destroy(pool);
	}
}

/* ---- policy ------------------------------------------------------------------ */

static void test_policy_parse(void **st)
{
	struct mlp_opts o = {0};

	(void)st;
	assert_int_equal(mlp_parse("mlp:64x2", &o), 0);
	assert_int_equal(o.width, 64);
	assert_int_equal(o.depth, 2);
	assert_int_equal(o.activation, MLP_TANH);
	assert_int_equal(mlp_parse("mlp:8x1:relu", &o), 0);
	assert_int_equal(o.activation, MLP_RELU);
	const char *bad[] = {"mlp", "mlp:", "mlp:64", "mlp:x2", "mlp:64x", "mlp:0x2", "mlp:64x0",
			     "mlp:-1x2", "mlp:64x2:sigmoid", "mlp:64x2x", "cnn:64x2",
			     "mlp:99999x1", "mlp:4x1000"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(mlp_parse(bad[i], &o), -EINVAL);
		assert_true(strlen(mlp_error()) > 0);
	}
}

static void test_policy_discrete(void **st)
{
	sr_env_spec spec;
	struct mlp_opts o = {.width = 16, .depth = 2, .seed = 7};
	struct mlp *p = NULL, *q = NULL, *z = NULL;
	enum { N = 256 };
	float obs[N * 4];
	int32_t a[N], b[N], c[N];
	int hist[2] = {0, 0}, differ = 0;

	(void)st;
	assert_int_equal(sr_env_find("CartPole-v1", &spec), 0);
	assert_int_equal(mlp_create(&spec, &o, &p), 0);
	assert_int_equal(mlp_create(&spec, &o, &q), 0);
	o.seed = 8;
	assert_int_equal(mlp_create(&spec, &o, &z), 0);
	assert_int_equal(mlp_num_params(p), 4 * 16 + 16 + 16 * 16 + 16 + 16 * 2 + 2);
	assert_int_equal(mlp_macs(p), 4 * 16 + 16 * 16 + 16 * 2);
	for (int i = 0; i < N * 4; i++)
		obs[i] = (float)sin(i * 0.37) * 2.0f;
	assert_int_equal(mlp_forward(p, obs, N, a), 0);
	assert_int_equal(mlp_forward(q, obs, N, b), 0);
	assert_int_equal(mlp_forward(z, obs, N, c), 0);
	assert_memory_equal(a, b, sizeof(a)); /* same seed, same actions */
	for (int i = 0; i < N; i++) {
		assert_true(a[i] == 0 || a[i] == 1);
		hist[a[i]]++;
		differ += a[i] != c[i];
	}
	/* A random MLP on varied inputs uses both actions, and another seed
	 * is another function. */
	assert_true(hist[0] > 0 && hist[1] > 0);
	assert_true(differ > 0);
	/* Row r depends on obs row r only. */
	assert_int_equal(mlp_forward(p, obs + 4 * 10, 1, b), 0);
	assert_int_equal(b[0], a[10]);
	assert_int_equal(mlp_forward(p, obs, 0, a), 0);
	assert_int_equal(mlp_forward(NULL, obs, 1, a), -EINVAL);
	o.width = 0;
	struct mlp *bad = NULL;
	assert_int_equal(mlp_create(&spec, &o, &bad), -EINVAL);
	assert_null(bad);
	mlp_destroy(p);
	mlp_destroy(q);
	mlp_destroy(z);
	mlp_destroy(NULL);
}

static void test_policy_box(void **st)
{
	sr_env_spec spec;
	struct mlp_opts o = {.width = 32, .depth = 3, .activation = MLP_RELU, .seed = 1};
	struct mlp *p = NULL;
	enum { N = 128 };
	float obs[N * 3], a[N], lo = 1e9f, hi = -1e9f;

	(void)st;
	assert_int_equal(sr_env_find("Pendulum-v1", &spec), 0);
	assert_int_equal(spec.act_kind, SR_SPACE_BOX);
	assert_int_equal(mlp_create(&spec, &o, &p), 0);
	for (int i = 0; i < N * 3; i++)
		obs[i] = (float)cos(i * 0.11) * 3.0f;
	assert_int_equal(mlp_forward(p, obs, N, a), 0);
	for (int i = 0; i < N; i++) {
		assert_true(isfinite(a[i]));
		assert_true(a[i] >= spec.act_low[0] && a[i] <= spec.act_high[0]);
		lo = a[i] < lo ? a[i] : lo;
		hi = a[i] > hi ? a[i] : hi;
	}
	assert_true(hi > lo); /* not constant */
	mlp_destroy(p);
}

/* The policy's rational tanh: close to tanh, odd, monotone up to a few ulp
 * of rounding near saturation, in [-1, 1]. */
static void test_policy_tanh(void **st)
{
	float prev = -2.0f;

	(void)st;
	for (int i = -200000; i <= 200000; i++) {
		float x = (float)i * 1e-4f * 1.5f, y = mlp_tanh(x);

		assert_true(fabs((double)y - tanh((double)x)) < 1e-4);
		assert_true(y == -mlp_tanh(-x));
		assert_true(y >= prev - 3e-7f);
		assert_true(y >= -1.0f && y <= 1.0f);
		prev = y;
	}
	assert_true(mlp_tanh(1e30f) == 1.0f);
	assert_true(mlp_tanh(-INFINITY) == -1.0f);
	assert_true(mlp_tanh(0.0f) == 0.0f);
}

/* The host device runs the policy where the batch lives and gives the
 * actions back (from its own buffer, or from a caller's host pointer). */
static void test_device_policy_host(void **st)
{
	sr_env_spec spec, pend;
	struct mlp_opts po = {.width = 8, .depth = 1, .seed = 3};
	struct mlp *p = NULL, *pp = NULL;
	sr_ring *r = mk_ring();
	sr_device_opts o;
	sr_device *d = NULL;
	sr_device_batch *b = NULL;
	const void *h = NULL;
	int32_t want[16], mine[16] = {0};

	(void)st;
	assert_int_equal(sr_env_find("CartPole-v1", &spec), 0);
	spec.obs_dim = OBS; /* the test ring's width */
	assert_int_equal(mlp_create(&spec, &po, &p), 0);
	sr_device_opts_init(&o);
	o.max_rows = 16;
	o.obs_dim = OBS;
	assert_int_equal(sr_device_open(&o, &d), 0);
	assert_int_equal(sr_device_submit_ring(d, r, 5, 16, 0, &b), 0);
	assert_int_equal(mlp_forward_batch(p, d, b), 0);
	assert_int_equal(sr_device_actions(d, b, NULL, &h), 0);
	assert_ptr_equal(h, b->actions);
	assert_int_equal(mlp_forward(p, sr_ring_obs_col(r) + 5 * OBS, 16, want), 0);
	assert_memory_equal(h, want, sizeof(want));
	assert_int_equal(sr_device_actions(d, b, mine, &h), 0);
	assert_ptr_equal(h, mine);

	/* A policy for another action space is refused. */
	assert_int_equal(sr_env_find("Pendulum-v1", &pend), 0);
	assert_int_equal(mlp_create(&pend, &po, &pp), 0);
	assert_int_equal(mlp_forward_batch(pp, d, b), -EINVAL);
	assert_true(strstr(mlp_error(), "action kind") != NULL);
	assert_int_equal(sr_device_release(d, b), 0);
	sr_device_close(d);
	mlp_destroy(p);
	mlp_destroy(pp);
	sr_ring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_dlpack_views),
		cmocka_unit_test(test_submit_ring_and_wrap),
		cmocka_unit_test(test_submit_batch_and_dlpack),
		cmocka_unit_test(test_release_and_deleter),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_bad_opts_and_cuda_absent),
		cmocka_unit_test(test_policy_parse),
		cmocka_unit_test(test_policy_discrete),
		cmocka_unit_test(test_policy_box),
		cmocka_unit_test(test_policy_tanh),
		cmocka_unit_test(test_device_policy_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
