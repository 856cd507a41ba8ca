/*
 * The MuJoCo envs (envs/mujoco/): specs and parameters, NumPy's normal
 * stream, Gymnasium's episodes replayed bit for bit (the MuJoCo reference
 * kit's in ../shared/mujoco when it is there, the committed ones with
 * constructor arguments in tests/refdata/mujoco always), the reset that
 * skips mj_resetData against mj_resetData itself (also on a garbage-filled
 * buffer), save/load mid-episode, batch splits, threads, check_state and
 * the memory of an instance. Skipped (77) in a build without MuJoCo.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/config.h"
#include "env_probe.h"
#include "mjref.h"
#include "np_random.h"

#ifndef SR_MUJOCO_KIT_DIR
#define SR_MUJOCO_KIT_DIR SR_SOURCE_DIR "/../shared/mujoco"
#endif
#define PARAM_DIR SR_SOURCE_DIR "/tests/refdata/mujoco"

/* The MuJoCo env types, in registry order. */
static const sr_env_spec *mj_specs[64];
static size_t n_mj;

static char *make(const sr_env_spec *spec, size_t n)
{
	char *s = aligned_alloc(64, (n * spec->state_size + 63) / 64 * 64);
	assert_non_null(s);
	assert_int_equal(sr_env_create_instances(spec, s, n), 0);
	return s;
}

static void unmake(const sr_env_spec *spec, char *s, size_t n)
{
	sr_env_destroy_instances(spec, s, n);
	free(s);
}

static void random_actions(const sr_env_spec *sp, sr_rng *rng, size_t n, float *act)
{
	for (size_t i = 0; i < n; i++)
		for (uint32_t d = 0; d < sp->act_dim; d++)
			act[i * sp->act_dim + d] =
				(float)sr_rng_range(rng, sp->act_low[d], sp->act_high[d]);
}

static bool same(const void *a, const void *b, size_t n)
{
	return !memcmp(a, b, n);
}

/* ---- specs and parameters --------------------------------------------------- */

struct dims {
	const char *env;
	uint32_t obs_dim;
};

static void test_specs(void **st)
{
	/* Gymnasium's observation sizes, defaults and with arguments. */
	static const struct dims want[] = {
		{"HalfCheetah-v5", 17}, {"HalfCheetah-v4", 17}, {"Hopper-v5", 11},
		{"Hopper-v4", 11}, {"Walker2d-v5", 17}, {"Walker2d-v4", 17}, {"Ant-v5", 105},
		{"Ant-v4", 27}, {"Humanoid-v5", 348}, {"Humanoid-v4", 376},
		{"HumanoidStandup-v5", 348}, {"HumanoidStandup-v4", 376},
		{"InvertedPendulum-v5", 4}, {"InvertedPendulum-v4", 4},
		{"InvertedDoublePendulum-v5", 9}, {"InvertedDoublePendulum-v4", 11},
		{"Reacher-v5", 10}, {"Reacher-v4", 11}, {"Swimmer-v5", 8}, {"Swimmer-v4", 8},
		{"Pusher-v5", 23}, {"Pusher-v4", 23},
		{"HalfCheetah-v5:exclude_current_positions_from_observation=0", 18},
		{"Hopper-v4:exclude_current_positions_from_observation=false", 12},
		{"Ant-v5:include_cfrc_ext_in_observation=0", 27},
		{"Ant-v5:exclude_current_positions_from_observation=0", 107},
		{"Ant-v4:use_contact_forces=1", 111},
		{"Humanoid-v5:include_cinert_in_observation=0", 218},
		{"Humanoid-v5:include_cvel_in_observation=0,include_qfrc_actuator_in_observation=0",
		 253},
		{"Humanoid-v5:include_cfrc_ext_in_observation=0", 270},
		{"Humanoid-v4:exclude_current_positions_from_observation=0", 378},
		{"HumanoidStandup-v5:include_cinert_in_observation=0,include_cvel_in_observation=0,"
		 "include_qfrc_actuator_in_observation=0,include_cfrc_ext_in_observation=0,"
		 "exclude_current_positions_from_observation=0",
		 47},
		{"Swimmer-v5:exclude_current_positions_from_observation=0", 10},
	};
	sr_env_spec s, t;

	(void)st;
	assert_int_equal(n_mj, 22);
	for (size_t i = 0; i < n_mj; i++) {
		const sr_env_spec *sp = mj_specs[i];
		assert_int_equal(sr_env_validate(sp), 0);
		assert_int_equal(sp->obs_dtype, SR_DTYPE_FLOAT64);
		assert_true(sr_env_is_opaque(sp));
		assert_int_equal(sp->state_size, 8);
		assert_null(sp->obs_low);
		assert_int_equal(sp->act_kind, SR_SPACE_BOX);
		assert_int_equal(sr_env_find(sp->id, &s), 0);
		assert_int_equal(sr_env_find(sp->name, &t), 0);
		assert_memory_equal(&s, &t, sizeof(s));
		/* A MuJoCo id's short name: lower case, "_v4" for v4. */
		assert_true(strstr(sp->id, "-v4") ? strstr(sp->name, "_v4") != NULL
						  : strchr(sp->name, '_') == NULL);
	}
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		assert_int_equal(sr_env_find(want[k].env, &s), 0);
		if (s.obs_dim != want[k].obs_dim)
			fail_msg("%s: obs_dim %u, Gymnasium's %u", want[k].env, s.obs_dim,
				 want[k].obs_dim);
		assert_int_equal(s.obs_shape[0], s.obs_dim);
		/* Every env type makes an instance that resets and steps. */
		char *x = make(&s, 1);
		double *obs = malloc(sr_env_obs_size(&s));
		float act[32] = {0};
		double r;
		uint8_t term;
		s.seed(&s, x, 1, 3, 0);
		s.reset(&s, x, 1, (float *)(void *)obs);
		s.step(&s, x, 1, act, (float *)(void *)obs, &r, &term);
		for (uint32_t j = 0; j < s.obs_dim; j++)
			assert_true(isfinite(obs[j]));
		assert_true(isfinite(r));
		free(obs);
		unmake(&s, x, 1);
	}
	/* The embedded models are the files the envs expect, in order. */
	for (unsigned x = 0; bench_mujoco_xml_name(x); x++)
		assert_non_null(strstr(bench_mujoco_xml_name(x), ".xml"));
}

static void expect_einval(const char *name, const char *msg)
{
	sr_env_spec s;
	int err = sr_env_find(name, &s);

	if (err != -EINVAL || !strstr(sr_last_error(), msg))
		fail_msg("%s: %d '%s', want -EINVAL with '%s'", name, err, sr_last_error(), msg);
}

static void test_params(void **st)
{
	sr_env_spec a, b;

	(void)st;
	expect_einval("Hopper-v5:frob=1", "unknown parameter 'frob' (it takes forward_reward_weight");
	expect_einval("Hopper-v5:ctrl_cost_weight=abc", "not a finite number");
	expect_einval("Hopper-v5:ctrl_cost_weight=inf", "not a finite number");
	expect_einval("Hopper-v5:ctrl_cost_weight=nan", "not a finite number");
	expect_einval("Hopper-v5:ctrl_cost_weight", "key=value");
	expect_einval("Hopper-v5:ctrl_cost_weight=1,ctrl_cost_weight=2", "given twice");
	expect_einval("Hopper-v5:healthy_z_range=0.7", "not a range low:high");
	expect_einval("Hopper-v5:healthy_z_range=0.7:x", "not a range low:high");
	expect_einval("Hopper-v5:healthy_z_range=1:0.5", "low 1 is above high 0.5");
	expect_einval("Hopper-v5:terminate_when_unhealthy=2", "must be 0 or 1");
	expect_einval("Hopper-v5:frame_skip=0", "integer in [1, 255]");
	expect_einval("Hopper-v5:frame_skip=2.5", "integer in [1, 255]");
	expect_einval("Hopper-v5:frame_skip=256", "integer in [1, 255]");
	expect_einval("Hopper-v4:frame_skip=2", "unknown parameter 'frame_skip'");
	expect_einval("Pusher-v4:reward_dist_weight=2", "unknown parameter");
	expect_einval("Hopper-v5:rng=mt", "numpy or stepring");
	expect_einval("Hopper-v5:xml_file=/tmp/hopper.xml", "not a bundled model");
	expect_einval("Hopper-v5:xml_file=nope.xml", "files are not read");
	expect_einval("Hopper-v5:xml_file=ant.xml", "is not a model of this env");
	expect_einval("Ant-v5:main_body=nose", "not a body of ant.xml");
	expect_einval("Ant-v5:main_body=14", "not a body of ant.xml");
	/* Eight numbers off their defaults do not fit the spec's params. */
	expect_einval("Hopper-v5:forward_reward_weight=2,ctrl_cost_weight=0.1,healthy_reward=3,"
		      "healthy_z_range=0.5:3,healthy_angle_range=-1:1,reset_noise_scale=0.1",
		      "at most 7 numbers");
	assert_int_equal(sr_env_find("Hopper-v5:forward_reward_weight=2,ctrl_cost_weight=0.1,"
				     "healthy_reward=3,healthy_z_range=0.5:3,reset_noise_scale=0.1,"
				     "frame_skip=7,terminate_when_unhealthy=0",
				     &a), 0);
	/* A default written out is the default spec. */
	assert_int_equal(sr_env_find("Hopper-v5", &a), 0);
	assert_int_equal(sr_env_find("Hopper-v5:ctrl_cost_weight=0.001,frame_skip=4,"
				     "healthy_z_range=0.7:inf,rng=numpy",
				     &b), 0);
	assert_memory_equal(a.params, b.params, sizeof(a.params));
	/* main_body by name is its id. */
	assert_int_equal(sr_env_find("Ant-v5:main_body=torso", &a), 0);
	assert_int_equal(sr_env_find("Ant-v5", &b), 0);
	assert_memory_equal(a.params, b.params, sizeof(a.params));
	assert_int_equal(sr_env_find("Ant-v5:main_body=2", &a), 0);
	assert_memory_not_equal(a.params, b.params, sizeof(a.params));
	/* A parameter changes the env: ctrl_cost_weight the reward only. */
	assert_int_equal(sr_env_find("Hopper-v5:ctrl_cost_weight=0.5", &b), 0);
	assert_int_equal(sr_env_find("Hopper-v5", &a), 0);
	char *x = make(&a, 1), *y = make(&b, 1);
	double oa[11], ob[11], ra, rb;
	uint8_t ta, tb;
	float act[3] = {0.5f, -0.5f, 0.25f};
	a.seed(&a, x, 1, 5, 0);
	b.seed(&b, y, 1, 5, 0);
	a.reset(&a, x, 1, (float *)(void *)oa);
	b.reset(&b, y, 1, (float *)(void *)ob);
	a.step(&a, x, 1, act, (float *)(void *)oa, &ra, &ta);
	b.step(&b, y, 1, act, (float *)(void *)ob, &rb, &tb);
	assert_memory_equal(oa, ob, sizeof(oa));
	assert_true(fabs((ra - rb) - (0.5 - 0.001) * (double)(0.25f + 0.25f + 0.0625f)) < 1e-6);
	unmake(&a, x, 1);
	unmake(&b, y, 1);
	/* rng=stepring: another stream, the same env otherwise. */
	assert_int_equal(sr_env_find("Hopper-v5:rng=stepring", &b), 0);
	x = make(&a, 1);
	y = make(&b, 1);
	a.seed(&a, x, 1, 5, 0);
	b.seed(&b, y, 1, 5, 0);
	a.reset(&a, x, 1, (float *)(void *)oa);
	b.reset(&b, y, 1, (float *)(void *)ob);
	assert_memory_not_equal(oa, ob, sizeof(oa));
	unmake(&a, x, 1);
	unmake(&b, y, 1);
	/* The unknown-name message names the family; other ids are unknown. */
	assert_int_equal(sr_env_find("Hopper-v3", &a), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "MuJoCo, as <Name>-v5 or -v4"));
	assert_non_null(strstr(sr_last_error(), "CartPole-v1 (cartpole)"));
}

/* ---- NumPy's normal stream -------------------------------------------------- */

static void test_numpy_normal(void **st)
{
	static const uint64_t digest[4] = {0x8e1b377c65be5cb7ull, 0xcacf67f3d0fed97full,
					   0x39ae6c85eb3ddd08ull, 0x6e70a4041818e978ull};
	static const int tail[4] = {283, 290, 273, 272};
	char path[512], line[256];

	(void)st;
	for (int s = 0; s < 4; s++) {
		sr_np_pcg64 g;
		uint64_t h = 0xcbf29ce484222325ull;
		int beyond = 0;
		sr_np_seed(&g, (uint64_t)s);
		for (int i = 0; i < 1 << 20; i++) {
			double x = sr_np_standard_normal(&g);
			unsigned char b[8];
			memcpy(b, &x, 8);
			for (int k = 0; k < 8; k++)
				h = (h ^ b[k]) * 0x100000001b3ull;
			beyond += fabs(x) > 3.6541528853610088;
		}
		assert_int_equal(beyond, tail[s]);
		assert_true(h == digest[s]);
	}
	/* The kit's rng_ref.csv: fresh generators per kind. */
	snprintf(path, sizeof(path), "%s/ref/rng_ref.csv", SR_MUJOCO_KIT_DIR);
	FILE *f = fopen(path, "r");
	if (!f) {
		print_message("no %s: the kit's RNG values not compared\n", path);
		return;
	}
	int n = 0;
	long long cur_seed = -1;
	char cur_kind[32] = "";
	sr_np_pcg64 g;
	while (fgets(line, sizeof(line), f)) {
		long long seed, i;
		char kind[32], val[64];
		if (sscanf(line, "%lld,%31[^,],%lld,%63s", &seed, kind, &i, val) != 4)
			continue;
		if (seed != cur_seed || strcmp(kind, cur_kind)) {
			sr_np_seed(&g, (uint64_t)seed);
			cur_seed = seed;
			snprintf(cur_kind, sizeof(cur_kind), "%s", kind);
		}
		if (!strcmp(kind, "uint64")) {
			assert_true(sr_np_next64(&g) == strtoull(val, NULL, 10));
		} else if (!strcmp(kind, "double")) {
			assert_true(sr_np_next_double(&g) == strtod(val, NULL));
		} else if (!strcmp(kind, "normal")) {
			assert_true(sr_np_standard_normal(&g) == strtod(val, NULL));
		} else {
			continue;
		}
		n++;
	}
	fclose(f);
	print_message("rng_ref.csv: %d values equal\n", n);
	assert_true(n >= 7 * 64);
}

/* ---- Gymnasium's episodes ----------------------------------------------------- */

static void replay(const char *env, const char *path, uint32_t limit)
{
	sr_env_spec spec;
	struct mjref ref;
	struct mjref_result r;

	assert_int_equal(sr_env_find(env, &spec), 0);
	if (mjref_load(path, &ref))
		fail_msg("%s", mjref_error());
	if (mjref_check(&spec, &ref, MJREF_SEEDED, limit, &r))
		fail_msg("%s: %s", path, mjref_error());
	if (!mjref_ok(&r))
		fail_msg("%s (%s): first mismatch at line %zu: obs %zu/%zu (max %g), sin/cos %g, "
			 "rewards %zu (max rel %g), info %zu (max rel %g, %zu unknown), flags %zu, "
			 "reset states %zu", path, env, r.first_bad_row + 2, r.obs_diff,
			 r.obs_values, r.max_obs_abs, r.max_trig_abs, r.rew_diff, r.max_rew_rel,
			 r.info_diff, r.max_info_rel, r.info_unknown, r.flag_mismatch,
			 r.reset_state_diff);
	/* Bit for bit, not merely within the tolerances. */
	assert_int_equal(r.obs_diff, 0);
	assert_int_equal(r.rew_diff, 0);
	assert_int_equal(r.info_diff, 0);
	print_message("%-26s %5zu steps %2zu episodes: obs %zu values bit-identical, sin/cos "
		      "%zu of %zu differ (max %.2g), rewards and %zu info terms bit-identical\n",
		      env, r.steps, r.episodes, r.obs_values, r.trig_diff, r.trig_values,
		      r.max_trig_abs, r.info_values);
	mjref_free(&ref);
}

static void test_kit_episodes(void **st)
{
	char path[600], line[1024];
	int n = 0;

	(void)st;
	snprintf(path, sizeof(path), "%s/ref/index__random__seeds0-4.csv", SR_MUJOCO_KIT_DIR);
	FILE *f = fopen(path, "r");
	if (!f) {
		print_message("no MuJoCo reference kit (%s): skipped\n", path);
		skip();
	}
	assert_non_null(fgets(line, sizeof(line), f)); /* header */
	while (fgets(line, sizeof(line), f)) {
		char env[64], file[256];
		unsigned limit;
		/* env,file,policy,seeds,episodes,steps,rows,time_limit,... */
		if (sscanf(line, "%63[^,],%255[^,],%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%u", env, file,
			   &limit) != 3)
			fail_msg("index line '%s'", line);
		snprintf(path, sizeof(path), "%s/ref/%s", SR_MUJOCO_KIT_DIR, file);
		replay(env, path, limit);
		n++;
	}
	fclose(f);
	assert_int_equal(n, 16);
}

static void test_param_episodes(void **st)
{
	char path[600], line[1024];
	int n = 0;

	(void)st;
	FILE *f = fopen(PARAM_DIR "/params.txt", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char file[256], env[700];
		unsigned limit;
		if (sscanf(line, "%255s %u %699s", file, &limit, env) != 3)
			fail_msg("params.txt line '%s'", line);
		snprintf(path, sizeof(path), "%s/%s", PARAM_DIR, file);
		replay(env, path, limit);
		n++;
	}
	fclose(f);
	assert_int_equal(n, 22);
}

/* ---- a run with autoresets, recorded ------------------------------------------ */

struct trace {
	double *obs, *rew, *info, *phys;
	uint8_t *term;
	size_t n;
};

/* @steps batch steps of the @n instances in @x, random actions from @seed;
 * an instance resets (through @how) when terminated or every @every steps.
 * Records obs, rewards, flags, info terms and qpos/qvel of every step. */
static void run_trace(const sr_env_spec *sp, char *x, size_t n, int steps, int every,
		      uint64_t seed, int how, struct trace *tr)
{
	size_t od = sp->obs_dim, ni = 16, np = sp->n_phys;
	sr_rng rng;
	float *act = malloc(n * sp->act_dim * sizeof(float));
	int *age = calloc(n, sizeof(int));

	sr_rng_seed(&rng, seed, 77);
	tr->n = (size_t)steps * n;
	tr->obs = malloc(tr->n * od * sizeof(double));
	tr->rew = malloc(tr->n * sizeof(double));
	tr->info = calloc(tr->n * ni, sizeof(double)); /* terms past n_info stay 0 */
	tr->phys = malloc(tr->n * np * sizeof(double));
	tr->term = malloc(tr->n);
	assert_non_null(tr->obs);
	for (int t = 0; t < steps; t++) {
		size_t k = (size_t)t * n;
		random_actions(sp, &rng, n, act);
		sp->step(sp, x, n, act, (float *)(void *)(tr->obs + k * od), tr->rew + k,
			 tr->term + k);
		for (size_t i = 0; i < n; i++) {
			char *s = x + i * sp->state_size;
			bench_mujoco_info(sp, s, NULL, tr->info + (k + i) * ni, ni);
			sp->get_phys(sp, s, tr->phys + (k + i) * np);
			if (tr->term[k + i] || ++age[i] >= every) {
				double tmp[400];
				age[i] = 0;
				assert_int_equal(bench_mujoco_reset_how(sp, s, 1, tmp, how), 0);
			}
		}
	}
	free(act);
	free(age);
}

static void free_trace(struct trace *t)
{
	free(t->obs);
	free(t->rew);
	free(t->info);
	free(t->phys);
	free(t->term);
}

static bool same_trace(const sr_env_spec *sp, const struct trace *a, const struct trace *b)
{
	return a->n == b->n && same(a->obs, b->obs, a->n * sp->obs_dim * sizeof(double)) &&
	       same(a->rew, b->rew, a->n * sizeof(double)) && same(a->term, b->term, a->n) &&
	       same(a->info, b->info, a->n * 16 * sizeof(double)) &&
	       same(a->phys, b->phys, a->n * sp->n_phys * sizeof(double));
}

/*
 * The reset without mj_resetData writes everything a step reads: for every
 * env type, instances reset through mj_resetData, through the ordinary
 * reset, and through the ordinary reset after their whole mjData buffer
 * was filled with 0x7f bytes (a stale value anywhere that a step or an
 * observation read would show) give the same obs, rewards, flags, info
 * terms and qpos/qvel, episode after episode.
 */
static void test_fast_reset(void **st)
{
	(void)st;
	for (size_t e = 0; e < n_mj; e++) {
		const sr_env_spec *sp = mj_specs[e];
		int every = sp->max_episode_steps < 30 ? 20 : 30;
		struct trace t[3];
		for (int how = 0; how < 3; how++) {
			char *x = make(sp, 3);
			double obs[3 * 400];
			sp->seed(sp, x, 3, 11, 0);
			assert_int_equal(bench_mujoco_reset_how(sp, x, 3, obs, how), 0);
			run_trace(sp, x, 3, 90, every, 5, how, &t[how]);
			unmake(sp, x, 3);
		}
		if (!same_trace(sp, &t[0], &t[1]) || !same_trace(sp, &t[0], &t[2]))
			fail_msg("%s: the reset paths differ (fast vs mj_resetData %d, vs garbage %d)",
				 sp->id, !same_trace(sp, &t[0], &t[1]), !same_trace(sp, &t[0], &t[2]));
		for (int how = 0; how < 3; how++)
			free_trace(&t[how]);
	}
}

/* ---- save and load ------------------------------------------------------------ */

static void test_save_load(void **st)
{
	(void)st;
	for (size_t e = 0; e < n_mj; e++) {
		const sr_env_spec *sp = mj_specs[e];
		size_t cap = sp->save_max, len, len2;
		unsigned char *buf = malloc(cap), *buf2 = malloc(cap);
		char *x = make(sp, 2), *y = make(sp, 2);
		double obs[2 * 400];
		struct trace ta, tb;

		/* A save before any reset loads too (phase: created). */
		sp->seed(sp, x, 2, 21, 0);
		assert_int_equal(sp->save(sp, x, buf, cap, &len), 0);
		assert_int_equal(sp->load(sp, y, buf, len), 0);
		sp->seed(sp, y, 2, 21, 0);
		sp->reset(sp, x, 2, (float *)(void *)obs);
		run_trace(sp, x, 2, 13, 1000, 3, 0, &ta); /* mid-episode */
		free_trace(&ta);
		for (int i = 0; i < 2; i++) { /* one instance right after a reset */
			char *s = x + i * sp->state_size;
			if (i == 1)
				sp->reset(sp, s, 1, (float *)(void *)obs);
			assert_int_equal(sp->save(sp, s, buf, cap, &len), 0);
			assert_true(len <= cap);
			assert_int_equal(sp->load(sp, y + i * sp->state_size, buf, len), 0);
			/* Saving the loaded instance gives the same bytes. */
			assert_int_equal(sp->save(sp, y + i * sp->state_size, buf2, cap, &len2), 0);
			assert_int_equal(len, len2);
			assert_memory_equal(buf, buf2, len);
			assert_int_equal(sp->check_state(sp, y + i * sp->state_size), 0);
		}
		/* The loaded instances observe and continue bit for bit. */
		double ox[400], oy[400];
		sp->observe(sp, x, (float *)(void *)ox);
		sp->observe(sp, y, (float *)(void *)oy);
		assert_memory_equal(ox, oy, sp->obs_dim * sizeof(double));
		run_trace(sp, x, 2, 40, 25, 9, 0, &ta);
		run_trace(sp, y, 2, 40, 25, 9, 0, &tb);
		if (!same_trace(sp, &ta, &tb))
			fail_msg("%s: a loaded instance does not continue as the saved one", sp->id);
		free_trace(&ta);
		free_trace(&tb);

		/* Bytes that are not a save of this env type: -EINVAL. */
		assert_int_equal(sp->save(sp, x, buf, cap, &len), 0);
		assert_int_equal(sp->save(sp, x, buf, len - 1, &len2), -ENOSPC);
		assert_int_equal(sp->load(sp, y, buf, len - 8), -EINVAL);
		assert_int_equal(sp->load(sp, y, buf, 4), -EINVAL);
		memcpy(buf2, buf, len);
		buf2[0] ^= 1; /* magic */
		assert_int_equal(sp->load(sp, y, buf2, len), -EINVAL);
		/* A value of the state now, or of the last step's inputs: the
		 * replay does not land on the saved state. */
		size_t hdr, cur, pre, info;
		assert_int_equal(bench_mujoco_save_layout(sp, &hdr, &cur, &pre, &info), 0);
		assert_int_equal(hdr + cur + pre + info, len);
		size_t where[3] = {hdr + 8, hdr + cur + 8, hdr + cur + pre - 8 * sp->act_dim - 8};
		for (int w = 0; w < 3; w++) { /* qpos[1] now, qpos[1] before, time before */
			memcpy(buf2, buf, len);
			buf2[where[w] + 7] ^= 0x40; /* an exponent bit */
			assert_int_equal(sp->load(sp, y, buf2, len), -EINVAL);
		}
		const sr_env_spec *other = mj_specs[(e + 2) % n_mj];
		unsigned char *ob = malloc(other->save_max);
		char *z = make(other, 1);
		assert_int_equal(other->save(other, z, ob, other->save_max, &len2), 0);
		assert_int_equal(sp->load(sp, y, ob, len2), -EINVAL);
		unmake(other, z, 1);
		free(ob);
		/* y is still usable (unspecified but valid). */
		assert_int_equal(sp->load(sp, y, buf, len), 0);
		unmake(sp, x, 2);
		unmake(sp, y, 2);
		free(buf);
		free(buf2);
	}
	/* Another parameter set of the same env type: refused. */
	sr_env_spec a, b;
	assert_int_equal(sr_env_find("Hopper-v5", &a), 0);
	assert_int_equal(sr_env_find("Hopper-v5:healthy_reward=2", &b), 0);
	char *x = make(&a, 1), *y = make(&b, 1);
	unsigned char buf[4096];
	size_t len;
	double obs[16];
	a.seed(&a, x, 1, 1, 0);
	a.reset(&a, x, 1, (float *)(void *)obs);
	assert_int_equal(a.save(&a, x, buf, sizeof(buf), &len), 0);
	assert_int_equal(b.load(&b, y, buf, len), -EINVAL);
	unmake(&a, x, 1);
	unmake(&b, y, 1);
}

/* The hash of a trace (obs, rewards, flags, info terms, qpos/qvel). */
static uint64_t trace_hash(const sr_env_spec *sp, const struct trace *t)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const struct {
		const void *p;
		size_t n;
	} parts[] = {{t->obs, t->n * sp->obs_dim * 8}, {t->rew, t->n * 8}, {t->term, t->n},
		     {t->info, t->n * 16 * 8}, {t->phys, t->n * sp->n_phys * 8}};

	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
		for (size_t i = 0; i < parts[k].n; i++)
			h = (h ^ ((const unsigned char *)parts[k].p)[i]) * 0x100000001b3ull;
	return h;
}

/* Child mode: load the saves in @path into new instances of @env (another
 * process: its own models, its own heap) and continue as the parent did. */
static int load_child(const char *env, const char *path)
{
	sr_env_spec sp;
	struct trace t;
	unsigned char buf[2][8192];
	size_t len[2];
	FILE *f = fopen(path, "rb");

	if (!f || sr_env_find(env, &sp) || fread(len, sizeof(len), 1, f) != 1 ||
	    len[0] > sizeof(buf[0]) || len[1] > sizeof(buf[1]) ||
	    fread(buf[0], 1, len[0], f) != len[0] || fread(buf[1], 1, len[1], f) != len[1])
		return 2;
	fclose(f);
	char *x = aligned_alloc(64, 64);
	if (!x || sr_env_create_instances(&sp, x, 2))
		return 3;
	for (int i = 0; i < 2; i++)
		if (sp.load(&sp, x + i * 8, buf[i], len[i]))
			return 4;
	run_trace(&sp, x, 2, 40, 25, 9, 0, &t);
	printf("%016llx\n", (unsigned long long)trace_hash(&sp, &t));
	free_trace(&t);
	sr_env_destroy_instances(&sp, x, 2);
	free(x);
	return 0;
}

/* Saved mid-episode here, loaded in another process: the same steps. */
static void test_load_other_process(void **st)
{
	static const char *const envs[] = {"Ant-v5", "Humanoid-v5:frame_skip=3", "Reacher-v4"};
	char path[256], cmd[600], out[64];

	(void)st;
	for (size_t e = 0; e < 3; e++) {
		sr_env_spec sp;
		struct trace t;
		double obs[2 * 400];
		unsigned char buf[2][8192];
		size_t len[2];
		assert_int_equal(sr_env_find(envs[e], &sp), 0);
		char *x = make(&sp, 2);
		sp.seed(&sp, x, 2, 31, 0);
		sp.reset(&sp, x, 2, (float *)(void *)obs);
		run_trace(&sp, x, 2, 17, 1000, 4, 0, &t);
		free_trace(&t);
		for (int i = 0; i < 2; i++)
			assert_int_equal(sp.save(&sp, x + i * 8, buf[i], sizeof(buf[i]), &len[i]), 0);
		const char *tmp = getenv("TMPDIR");
		snprintf(path, sizeof(path), "%s/sr-mujoco-save-%d-%zu", tmp && tmp[0] ? tmp : "/tmp",
			 (int)getpid(), e);
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(len, sizeof(len), 1, f), 1);
		assert_int_equal(fwrite(buf[0], 1, len[0], f), len[0]);
		assert_int_equal(fwrite(buf[1], 1, len[1], f), len[1]);
		fclose(f);
		run_trace(&sp, x, 2, 40, 25, 9, 0, &t);
		char want[64];
		snprintf(want, sizeof(want), "%016llx", (unsigned long long)trace_hash(&sp, &t));
		free_trace(&t);
		snprintf(cmd, sizeof(cmd), "/proc/%d/exe child '%s' '%s'", (int)getpid(), envs[e],
			 path);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		assert_non_null(fgets(out, sizeof(out), p));
		assert_int_equal(pclose(p), 0);
		out[strcspn(out, "\n")] = '\0';
		assert_string_equal(out, want);
		unlink(path);
		unmake(&sp, x, 2);
	}
}

/* ---- batches and threads ------------------------------------------------------- */

/* Instances seeded together or one by one, stepped in one batch or in
 * batches that change every step: the same bytes. */
static void test_batch_split(void **st)
{
	static const char *const envs[] = {"Ant-v5", "Hopper-v5", "Reacher-v5", "Humanoid-v4"};
	enum { N = 7, T = 50 };

	(void)st;
	for (size_t e = 0; e < 4; e++) {
		sr_env_spec sp;
		assert_int_equal(sr_env_find(envs[e], &sp), 0);
		size_t od = sp.obs_dim;
		char *a = make(&sp, N), *b = make(&sp, N);
		double *oa = malloc(N * od * 8), *ob = malloc(N * od * 8), ra[N], rb[N];
		uint8_t ta[N], tb[N];
		float act[N * 17];
		sr_rng rng;

		sp.seed(&sp, a, N, 1234, 0);
		sp.reset(&sp, a, N, (float *)(void *)oa);
		for (size_t i = 0; i < N; i++) {
			size_t j = N - 1 - i;
			sp.seed(&sp, b + j * 8, 1, 1234, j);
			sp.reset(&sp, b + j * 8, 1, (float *)(void *)(ob + j * od));
		}
		assert_memory_equal(oa, ob, N * od * 8);
		assert_memory_not_equal(oa, oa + od, od * 8); /* neighbours differ */
		sr_rng_seed(&rng, 5, 5);
		for (int t = 0; t < T; t++) {
			random_actions(&sp, &rng, N, act);
			sp.step(&sp, a, N, act, (float *)(void *)oa, ra, ta);
			size_t cut1 = (size_t)t % N, cut2 = cut1 + (N - cut1) / 2;
			size_t cuts[4] = {0, cut1, cut2, N};
			for (int c = 0; c < 3; c++) {
				size_t lo = cuts[c], n = cuts[c + 1] - lo;
				if (n)
					sp.step(&sp, b + lo * 8, n, act + lo * sp.act_dim,
						(float *)(void *)(ob + lo * od), rb + lo, tb + lo);
			}
			assert_memory_equal(oa, ob, N * od * 8);
			assert_memory_equal(ra, rb, sizeof(ra));
			assert_memory_equal(ta, tb, sizeof(ta));
			for (size_t i = 0; i < N; i++)
				if (ta[i]) {
					sp.reset(&sp, a + i * 8, 1, (float *)(void *)(oa + i * od));
					sp.reset(&sp, b + i * 8, 1, (float *)(void *)(ob + i * od));
				}
		}
		unmake(&sp, a, N);
		unmake(&sp, b, N);
		free(oa);
		free(ob);
	}
}

struct slice {
	const sr_env_spec *sp;
	char *x;
	size_t n;
	int steps;
	uint64_t seed;
	struct trace tr;
};

static void *slice_main(void *arg)
{
	struct slice *s = arg;
	double obs[8 * 400];

	/* Created, seeded, reset and stepped on this thread. */
	s->x = make(s->sp, s->n);
	s->sp->seed(s->sp, s->x, s->n, 99, s->seed);
	s->sp->reset(s->sp, s->x, s->n, (float *)(void *)obs);
	run_trace(s->sp, s->x, s->n, s->steps, 40, s->seed, 0, &s->tr);
	return NULL;
}

/* Three threads stepping disjoint instances equal one thread stepping them
 * in turn (instances share only the read-only model; clean under TSan). */
static void test_threads(void **st)
{
	sr_env_spec sp;
	struct slice th[3], one[3];
	pthread_t t[3];

	(void)st;
	assert_int_equal(sr_env_find("Walker2d-v5", &sp), 0);
	for (int i = 0; i < 3; i++) {
		th[i] = (struct slice){.sp = &sp, .n = 2, .steps = 60, .seed = (uint64_t)(10 * i)};
		one[i] = th[i];
		assert_int_equal(pthread_create(&t[i], NULL, slice_main, &th[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		slice_main(&one[i]);
		assert_true(same_trace(&sp, &th[i].tr, &one[i].tr));
		free_trace(&th[i].tr);
		free_trace(&one[i].tr);
		unmake(&sp, th[i].x, 2);
		unmake(&sp, one[i].x, 2);
	}
}

/* ---- check_state, memory --------------------------------------------------------- */

static void test_check_state(void **st)
{
	sr_env_spec sp;
	double phys[64], obs[32];

	(void)st;
	assert_int_equal(sr_env_find("Swimmer-v5", &sp), 0);
	char *x = make(&sp, 1);
	assert_int_equal(sp.check_state(&sp, x), -EINVAL); /* not seeded */
	sp.seed(&sp, x, 1, 1, 0);
	sp.reset(&sp, x, 1, (float *)(void *)obs);
	assert_int_equal(sp.check_state(&sp, x), 0);
	sp.get_phys(&sp, x, phys);
	phys[3] = NAN;
	sp.set_phys(&sp, x, phys);
	assert_int_equal(sp.check_state(&sp, x), -EINVAL);
	phys[3] = 0.25;
	sp.set_phys(&sp, x, phys);
	assert_int_equal(sp.check_state(&sp, x), 0);
	double back[64];
	sp.get_phys(&sp, x, back);
	assert_true(back[3] == 0.25);
	unmake(&sp, x, 1);
}

static long rss_pages(void)
{
	long size = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss;
}

/* An instance's mjData is resident from its creation (mj_makeData clears
 * it on the creating thread: first touch there). Prints the figures. */
static void test_memory(void **st)
{
	static const char *const envs[] = {"Hopper-v5", "Ant-v5", "Humanoid-v5", "Pusher-v5"};
	enum { N = 8 };

	(void)st;
	for (size_t e = 0; e < 4; e++) {
		sr_env_spec sp;
		size_t buffer, stack;
		assert_int_equal(sr_env_find(envs[e], &sp), 0);
		char *x = make(&sp, 1); /* loads the model first */
		long before = rss_pages();
		char *y = make(&sp, N);
		long after = rss_pages();
		assert_int_equal(bench_mujoco_sizes(y, &buffer, &stack, NULL, NULL), 0);
		double per = (double)(after - before) * (double)sysconf(_SC_PAGESIZE) / N;
		print_message("%-12s mjData buffer %zu bytes, stack %zu bytes; resident after "
			      "creation %.0f bytes an instance\n", envs[e], buffer, stack, per);
		if (before > 0 && after > 0)
			assert_true(per >= 0.9 * (double)buffer);
		unmake(&sp, x, 1);
		unmake(&sp, y, N);
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "child"))
		return load_child(argv[2], argv[3]);
	for (size_t i = 0; i < sr_env_count(); i++)
		if (bench_is_mujoco(sr_env_at(i)) && n_mj < 64)
			mj_specs[n_mj++] = sr_env_at(i);
	if (!SR_CONFIG_WITH_MUJOCO || !n_mj) {
		printf("built without MuJoCo: skipped\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_specs),	     cmocka_unit_test(test_params),
		cmocka_unit_test(test_numpy_normal), cmocka_unit_test(test_kit_episodes),
		cmocka_unit_test(test_param_episodes), cmocka_unit_test(test_fast_reset),
		cmocka_unit_test(test_save_load),    cmocka_unit_test(test_load_other_process),
		cmocka_unit_test(test_batch_split),
		cmocka_unit_test(test_threads),	     cmocka_unit_test(test_check_state),
		cmocka_unit_test(test_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
