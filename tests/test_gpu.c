/* The CUDA device on a real GPU: copies straight from the registered ring
 * (wrapping ranges too) and through pinned staging, DLPack on kDLCUDA,
 * actions back from device and host pointers, backpressure, the MLP kernel
 * against the host policy, and the pool stepping with device = cuda.
 * Exits 77 (skipped) when no GPU answers or the build has no CUDA. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <cmocka.h>
#include <dlpack/dlpack.h>

#include "stepring.h"
#include "stepring/device.h"
#include "device_internal.h"
#include "mlp.h"

#define OBS 5
#define CAP 256

static sr_ring *mk_ring(void)
{
	sr_ring_opts o = {.obs_dim = OBS, .act_size = 4, .capacity = CAP};
	sr_ring *r = NULL;

	assert_int_equal(sr_ring_create(&o, &r), 0);
	for (uint64_t s = 0; s < CAP; s++) {
		for (int k = 0; k < OBS; k++)
			sr_ring_obs_col(r)[s * OBS + k] = (float)s + 0.125f * (float)k;
		sr_ring_reward_col(r)[s] = -(float)s;
		sr_ring_terminated_col(r)[s] = (uint8_t)(s % 3 == 0);
		sr_ring_truncated_col(r)[s] = (uint8_t)(s % 4 == 0);
		sr_ring_flags_col(r)[s] = (uint8_t)(s & 3);
		sr_ring_env_id_col(r)[s] = (uint32_t)(s * 7);
	}
	return r;
}

static sr_device *mk_dev(sr_ring *r, unsigned flags, uint32_t rows, uint32_t nb)
{
	sr_device_opts o;
	sr_device *d = NULL;

	sr_device_opts_init(&o);
	o.kind = SR_DEVICE_CUDA;
	o.max_rows = rows;
	o.obs_dim = OBS;
	o.in_flight = nb;
	o.flags = flags | SR_DEVICE_F_QUIET;
	if (r) {
		o.flags |= SR_DEVICE_F_RING;
		o.ring = r;
	}
	assert_int_equal(sr_device_open(&o, &d), 0);
	return d;
}

/* Read the batch back from the GPU and compare with ring slots. */
static void check_batch(sr_device_batch *b, uint64_t first, bool flags_zero)
{
	uint32_t n = b->n;
	float *obs = malloc((size_t)n * OBS * 4), *rew = malloc(n * 4);
	uint8_t *term = malloc(n), *trunc = malloc(n), *fl = malloc(n);
	uint32_t *id = malloc(n * 4);

	assert_int_equal(sr_device_batch_sync(b), 0);
	assert_int_equal(sr__cuda_d2h(0, obs, b->obs, (size_t)n * OBS * 4), 0);
	assert_int_equal(sr__cuda_d2h(0, rew, b->reward, n * 4), 0);
	assert_int_equal(sr__cuda_d2h(0, term, b->terminated, n), 0);
	assert_int_equal(sr__cuda_d2h(0, trunc, b->truncated, n), 0);
	assert_int_equal(sr__cuda_d2h(0, fl, b->flags, n), 0);
	assert_int_equal(sr__cuda_d2h(0, id, b->env_id, n * 4), 0);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = (first + i) % CAP;

		for (int k = 0; k < OBS; k++)
			assert_true(obs[i * OBS + k] == (float)s + 0.125f * (float)k);
		assert_true(rew[i] == -(float)s);
		assert_int_equal(term[i], s % 3 == 0);
		assert_int_equal(trunc[i], s % 4 == 0);
		assert_int_equal(fl[i], flags_zero ? 0 : (s & 3));
		assert_int_equal(id[i], s * 7);
	}
	free(obs);
	free(rew);
	free(term);
	free(trunc);
	free(fl);
	free(id);
}

static void test_ring_registered_and_staging(void **st)
{
	sr_ring *r = mk_ring();
	sr_device_info info;

	(void)st;
	for (int m = 0; m < 2; m++) {
		sr_device *d = mk_dev(r, m ? SR_DEVICE_F_NO_REGISTER : 0, 128, 3);
		sr_device_batch *b;

		assert_int_equal(sr_device_info_get(d, &info), 0);
		assert_int_equal(info.kind, SR_DEVICE_CUDA);
		assert_int_equal(info.ring_registered, m == 0);
		assert_int_equal(info.staging, m == 1);
		assert_true(strlen(info.name) > 0);
		/* Contiguous, then wrapping (slots 200..255, 0..71). */
		assert_int_equal(sr_device_submit_ring(d, r, 10, 100, 0, &b), 0);
		assert_int_equal(b->dl_device_type, kDLCUDA);
		assert_non_null(b->stream);
		check_batch(b, 10, false);
		assert_int_equal(sr_device_release(d, b), 0);
		assert_int_equal(sr_device_submit_ring(d, r, 3 * CAP + 200, 128, 0, &b), 0);
		check_batch(b, 200, false);
		assert_int_equal(sr_device_release(d, b), 0);
		sr_device_close(d);
	}
	sr_ring_destroy(r);
}

static void test_submit_host_batch(void **st)
{
	sr_ring *r = mk_ring();
	sr_device *d = mk_dev(NULL, 0, 64, 2);
	sr_batch src = {.n = 64, .obs_dim = OBS, .obs = sr_ring_obs_col(r) + 30 * OBS,
			.reward = sr_ring_reward_col(r) + 30,
			.terminated = sr_ring_terminated_col(r) + 30,
			.truncated = sr_ring_truncated_col(r) + 30,
			.env_id = sr_ring_env_id_col(r) + 30, .first_seq = 30};
	sr_device_batch *b;

	(void)st;
	/* Unregistered host memory: the pinned staging path. Twice through
	 * both batches, to reuse each staging block. */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(sr_device_submit(d, &src, 0, &b), 0);
		check_batch(b, 30, true);
		assert_int_equal(sr_device_release(d, b), 0);
	}
	sr_device_close(d);
	sr_ring_destroy(r);
}

static void test_dlpack_actions_backpressure(void **st)
{
	sr_ring *r = mk_ring();
	sr_device *d = mk_dev(r, 0, 32, 2);
	sr_device_batch *a, *b, *c;
	DLManagedTensor *t;
	const void *h;
	uint32_t mine[32];

	(void)st;
	assert_int_equal(sr_device_submit_ring(d, r, 0, 32, 0, &a), 0);
	assert_int_equal(sr_device_batch_dlpack(a, SR_FIELD_OBS, &t), 0);
	assert_int_equal(t->dl_tensor.device.device_type, kDLCUDA);
	assert_int_equal(t->dl_tensor.device.device_id, 0);
	assert_ptr_equal(t->dl_tensor.data, a->obs);
	assert_int_equal(t->dl_tensor.shape[1], OBS);

	/* A device pointer comes back through a D2H copy: the env ids. */
	assert_int_equal(sr_device_actions(d, a, a->env_id, &h), 0);
	assert_ptr_not_equal(h, a->env_id);
	for (uint32_t i = 0; i < 32; i++)
		assert_int_equal(((const uint32_t *)h)[i], i * 7);
	/* A host pointer is used as it is. */
	assert_int_equal(sr_device_actions(d, a, mine, &h), 0);
	assert_ptr_equal(h, mine);

	assert_int_equal(sr_device_submit_ring(d, r, 32, 32, 0, &b), 0);
	assert_int_equal(sr_device_submit_ring(d, r, 64, 32, SR_SUBMIT_NOWAIT, &c), -EAGAIN);
	assert_int_equal(sr_device_release(d, a), 0);
	/* The tensor still holds batch a. */
	assert_int_equal(sr_device_submit_ring(d, r, 64, 32, SR_SUBMIT_NOWAIT, &c), -EAGAIN);
	t->deleter(t);
	assert_int_equal(sr_device_submit_ring(d, r, 64, 32, SR_SUBMIT_NOWAIT, &c), 0);
	check_batch(c, 64, false);
	assert_int_equal(sr_device_release(d, b), 0);
	assert_int_equal(sr_device_release(d, c), 0);
	sr_device_close(d);
	sr_ring_destroy(r);
}

static void policy_vs_host(const char *env, const char *desc)
{
	sr_env_spec spec;
	struct mlp_opts po = {.seed = 11};
	struct mlp *p = NULL;
	sr_device_opts o;
	sr_device *d = NULL;
	sr_device_batch *b;
	enum { N = 1000 };
	float *obs, *reward;
	uint8_t *z;
	uint32_t *ids;
	size_t asz;
	void *host;
	const void *h;
	sr_batch src = {0};
	int agree = 0;

	assert_int_equal(sr_env_find(env, &spec), 0);
	assert_int_equal(mlp_parse(desc, &po), 0);
	assert_int_equal(mlp_create(&spec, &po, &p), 0);
	asz = sr_env_action_size(&spec);
	obs = malloc((size_t)N * spec.obs_dim * 4);
	reward = calloc(N, 4);
	z = calloc(N, 1);
	ids = calloc(N, 4);
	host = malloc(N * asz);
	for (size_t i = 0; i < (size_t)N * spec.obs_dim; i++)
		obs[i] = (float)sin((double)i * 0.731) * 2.0f;
	assert_int_equal(mlp_forward(p, obs, N, host), 0);

	sr_device_opts_init(&o);
	o.kind = SR_DEVICE_CUDA;
	o.max_rows = N;
	o.obs_dim = spec.obs_dim;
	o.act_kind = spec.act_kind;
	o.act_dim = spec.act_dim;
	assert_int_equal(sr_device_open(&o, &d), 0);
	src.n = N;
	src.obs_dim = spec.obs_dim;
	src.obs = obs;
	src.reward = reward;
	src.terminated = z;
	src.truncated = z;
	src.env_id = ids;
	assert_int_equal(sr_device_submit(d, &src, 0, &b), 0);
	assert_int_equal(mlp_forward_batch(p, d, b), 0);
	assert_int_equal(sr_device_actions(d, b, NULL, &h), 0);
	if (spec.act_kind == SR_SPACE_DISCRETE) {
		for (int i = 0; i < N; i++) {
			int32_t g = ((const int32_t *)h)[i];

			assert_true(g >= 0 && (uint32_t)g < spec.act_n);
			agree += g == ((int32_t *)host)[i];
		}
		assert_int_equal(agree, N);
	}
	/* Same operations in the same order, the same rational tanh: the
	 * GPU's actions are the host's, bit for bit. */
	assert_memory_equal(h, host, N * asz);
	assert_int_equal(sr_device_release(d, b), 0);
	sr_device_close(d);
	mlp_destroy(p);
	free(obs);
	free(reward);
	free(z);
	free(ids);
	free(host);
}

static void test_policy_kernel(void **st)
{
	(void)st;
	policy_vs_host("CartPole-v1", "mlp:64x2");
	policy_vs_host("CartPole-v1", "mlp:256x4:relu");
	policy_vs_host("Pendulum-v1", "mlp:32x3");
}

/* The pool with device = cuda: its batches are device memory holding what
 * a host pool with the same seed returns. */
static void test_pool_cuda(void **st)
{
	sr_pool_opts o;
	sr_pool *ph = NULL, *pc = NULL;
	const sr_batch *bh, *bc;
	int32_t act[64] = {0};
	float obs[64 * 4];

	(void)st;
	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 64;
	o.num_threads = 1;
	o.flags = SR_POOL_F_SEED;
	o.seed = 5;
	assert_int_equal(sr_pool_create(&o, &ph), 0);
	o.device = SR_DEVICE_CUDA;
	assert_int_equal(sr_pool_create(&o, &pc), 0);
	assert_int_equal(sr_pool_reset(ph, &bh), 0);
	assert_int_equal(sr_pool_reset(pc, &bc), 0);
	for (int step = 0; step < 20; step++) {
		for (int i = 0; i < 64; i++)
			act[i] = (step + i) & 1;
		assert_int_equal(sr_pool_step(ph, act, &bh), 0);
		assert_int_equal(sr_pool_step(pc, act, &bc), 0);
		assert_int_equal(bc->n, 64);
		assert_int_equal(sr__cuda_d2h(0, obs, bc->obs, sizeof(obs)), 0);
		assert_memory_equal(obs, bh->obs, sizeof(obs));
	}
	sr_pool_destroy(pc);
	sr_pool_destroy(ph);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_registered_and_staging),
		cmocka_unit_test(test_submit_host_batch),
		cmocka_unit_test(test_dlpack_actions_backpressure),
		cmocka_unit_test(test_policy_kernel),
		cmocka_unit_test(test_pool_cuda),
	};

	if (!sr_device_cuda_available(0)) {
		printf("test_gpu: no GPU answers (or no CUDA in this build): skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
