/* The Box2D envs (LunarLander-v3, LunarLanderContinuous-v3,
 * BipedalWalker-v3): spaces and parameters, Gymnasium's RNG streams
 * (rng=numpy) against the reset obs of Gymnasium's own episodes, seeding
 * and determinism, save/load continuing bit-exactly (and refusing what is
 * not a save), and threads stepping disjoint instances. Skipped (77) in a
 * build without Box2D, where the names must say so. */
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
#include <cmocka.h>

#include "stepring.h"
#include "stepring/config.h"
#include "np_random.h"

static const char *const ids[] = {"LunarLander-v3", "LunarLanderContinuous-v3",
				  "BipedalWalker-v3"};

/* n instances of @spec, created. */
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

/* Random actions for n instances from @rng. */
static void random_actions(const sr_env_spec *sp, sr_rng *rng, size_t n, void *act)
{
	for (size_t i = 0; i < n; i++) {
		if (sp->act_kind == SR_SPACE_DISCRETE) {
			((int32_t *)act)[i] = (int32_t)(sr_rng_next(rng) % sp->act_n);
		} else {
			for (uint32_t d = 0; d < sp->act_dim; d++)
				((float *)act)[i * sp->act_dim + d] =
					(float)sr_rng_range(rng, sp->act_low[d], sp->act_high[d]);
		}
	}
}

/* Steps with autoreset (terminated or the time limit), hashing obs, reward
 * and flags; elapsed is per instance. */
static uint64_t run_hash(const sr_env_spec *sp, char *states, size_t n, uint32_t *elapsed,
			 sr_rng *arng, int steps, uint64_t h)
{
	float *obs = malloc(n * sp->obs_dim * sizeof(float));
	double *rew = malloc(n * sizeof(double));
	uint8_t *term = malloc(n);
	char *act = malloc(n * sr_env_action_size(sp));

	for (int t = 0; t < steps; t++) {
		random_actions(sp, arng, n, act);
		sp->step(sp, states, n, act, obs, rew, term);
		for (size_t i = 0; i < n * sp->obs_dim * sizeof(float); i++)
			h = (h ^ ((unsigned char *)obs)[i]) * 0x100000001b3ull;
		for (size_t i = 0; i < n; i++) {
			uint64_t r;
			memcpy(&r, &rew[i], 8);
			h = (h ^ r ^ term[i]) * 0x100000001b3ull;
			if (term[i] || ++elapsed[i] >= sp->max_episode_steps) {
				elapsed[i] = 0;
				sp->reset(sp, states + i * sp->state_size, 1, obs + i * sp->obs_dim);
			}
		}
	}
	free(obs);
	free(rew);
	free(term);
	free(act);
	return h;
}

static void test_spaces_params(void **st)
{
	sr_env_spec s;

	assert_int_equal(sr_env_find("LunarLander-v3", &s), 0);
	assert_true(sr_env_is_opaque(&s));
	assert_int_equal(sr_env_validate(&s), 0);
	assert_int_equal(s.obs_dim, 8);
	assert_int_equal(s.act_kind, SR_SPACE_DISCRETE);
	assert_int_equal(s.act_n, 4);
	assert_int_equal(s.max_episode_steps, 1000);
	assert_non_null(s.check_state);
	assert_int_equal(sr_env_find("lunarlander:continuous=1", &s), 0);
	assert_string_equal(s.id, "LunarLanderContinuous-v3");
	assert_int_equal(s.act_kind, SR_SPACE_BOX);
	assert_int_equal(s.act_dim, 2);
	assert_int_equal(sr_env_find("LunarLanderContinuous-v3:continuous=0", &s), 0);
	assert_string_equal(s.id, "LunarLander-v3");
	assert_int_equal(sr_env_find("BipedalWalker-v3", &s), 0);
	assert_int_equal(s.obs_dim, 24);
	assert_int_equal(s.act_dim, 4);
	assert_int_equal(s.max_episode_steps, 1600);
	assert_true(s.obs_high[8] == 5.0f && s.obs_low[14] == -1.0f);
	assert_int_equal(sr_env_find("LunarLander-v3:gravity=-11.5,enable_wind=1,wind_power=5", &s),
			 0);
#define BAD(name, text)                                                                    \
	do {                                                                               \
		assert_int_equal(sr_env_find(name, &s), -EINVAL);                          \
		assert_non_null(strstr(sr_last_error(), text));                            \
	} while (0)
	BAD("LunarLander-v3:gravity=-12", "(-12, 0)");
	BAD("LunarLander-v3:gravity=0", "(-12, 0)");
	BAD("LunarLander-v3:gravity=abc", "not a finite number");
	BAD("LunarLander-v3:enable_wind=2", "0 or 1");
	BAD("LunarLander-v3:frob=1", "unknown parameter 'frob'");
	BAD("LunarLander-v3:rng=mt", "stepring or numpy");
	BAD("LunarLander-v3:gravity", "key=value");
	BAD("BipedalWalker-v3:hardcore=1", "hardcore");
	BAD("BipedalWalker-v3:frob=1", "unknown parameter");
#undef BAD
}

/*
 * rng=numpy draws what Gymnasium draws for env.reset(seed=k): the terrain,
 * the initial force (and for the walker 110 cloud draws and the terrain's
 * integers() before it). The reset obs (after Gymnasium's internal first
 * step) of Gymnasium 1.3.0's episodes with seeds 0-2
 * (shared refdata/box2d/trajectories, row t = 0) then agree to float
 * rounding (measured: below 2e-7 for the lander, whose legs start outside
 * their limits, with the joints solved as Box2D 2.3 does (Revolute23;
 * 8e-5 with 2.4's joint), 1e-6 for the walker); another draw for the
 * force moves the lander's velocity obs by ~0.1 per 100 N and the
 * walker's by ~4e-4 per newton.
 */
static void test_numpy_streams(void **st)
{
	static const float ll[3][8] = {
		{0.00570611935f, 1.39903367f, 0.577965319f, -0.528299689f, -0.00660530385f,
		 -0.130917653f, 0, 0},
		{-0.00271825795f, 1.41729975f, -0.275344133f, 0.283541232f, 0.00315655256f,
		 0.0623695739f, 0, 0},
		{-0.00107545848f, 1.41441691f, -0.108944058f, 0.155414209f, 0.00125294388f,
		 0.0246774741f, 0, 0},
	};
	/* BipedalWalker: hull angle, angular velocity, vx, vy, hip 0 angle */
	static const float bw[3][5] = {
		{0.00274728774f, -2.58837572e-05f, 0.00201349542f, -0.0159998275f, 0.0917948931f},
		{0.00274549937f, 1.26013365e-05f, -0.00164311635f, -0.0160000827f, 0.0925556868f},
		{0.00274626864f, 7.97496523e-06f, -0.00103989907f, -0.0160000511f, 0.092407465f},
	};
	sr_env_spec s;
	float obs[24];

	for (int c = 0; c < 2; c++) {
		assert_int_equal(sr_env_find(c ? "LunarLanderContinuous-v3:rng=numpy"
					       : "LunarLander-v3:rng=numpy",
					     &s),
				 0);
		char *st1 = make(&s, 1);
		for (int k = 0; k < 3; k++) {
			s.seed(&s, st1, 1, (uint64_t)k, 0);
			s.reset(&s, st1, 1, obs);
			for (int j = 0; j < 8; j++)
				assert_true(fabsf(obs[j] - ll[k][j]) < 1e-6f);
		}
		/* The default stream is another one. */
		sr_env_spec d;
		assert_int_equal(sr_env_find("LunarLander-v3", &d), 0);
		char *st2 = make(&d, 1);
		d.seed(&d, st2, 1, 0, 0);
		d.reset(&d, st2, 1, obs);
		assert_true(fabsf(obs[2] - ll[0][2]) > 1e-3f);
		unmake(&d, st2, 1);
		unmake(&s, st1, 1);
	}
	assert_int_equal(sr_env_find("BipedalWalker-v3:rng=numpy", &s), 0);
	char *w = make(&s, 1);
	for (int k = 0; k < 3; k++) {
		s.seed(&s, w, 1, (uint64_t)k, 0);
		s.reset(&s, w, 1, obs);
		for (int j = 0; j < 5; j++)
			assert_true(fabsf(obs[j] - bw[k][j]) < 2e-5f);
	}
	unmake(&s, w, 1);
}

/*
 * Whole random-policy episodes of Gymnasium 1.3.0 (refdata/box2d
 * random_policy.csv, seeds 0-15: length and return): the lander with
 * rng=numpy, stepped with the actions Gymnasium's action_space.seed(k)
 * draws (np_random.h), ends at the same step with the same return. The
 * legs' joints are solved as Gymnasium's Box2D 2.3 solves them
 * (Revolute23); with Box2D 2.4's own revolute joint only ~8% of the
 * episodes kept their return and ~80% their length (a leg hitting the
 * ground went through its limit).
 */
static void test_gymnasium_episodes(void **st)
{
	static const struct {
		int len;
		double ret;
	} ref[2][16] = {
		{{66, -189.96201019186577}, {99, -139.15352884584587}, {106, -210.74863628556236},
		 {99, -115.47114924229751}, {114, -195.88432997809059}, {117, -125.156688392392},
		 {99, -190.97390265196316}, {80, -81.492008813244126}, {67, -203.50764450324118},
		 {113, -279.90426350254006}, {96, -280.22563432225922}, {76, -148.50939631602208},
		 {89, -273.23124889922315}, {74, -136.4029493955527}, {104, -343.97341427314274},
		 {114, -69.666006552324944}},
		{{75, -159.65906764370274}, {184, -299.19147912226606}, {148, -319.05979163825805},
		 {125, -165.35255548315624}, {197, -264.66931298715917}, {177, -49.171822801515361},
		 {120, -178.05336014901653}, {100, -106.56022887039184}, {74, -224.49819694080173},
		 {103, -236.4878309228138}, {119, -210.33935488844179}, {85, -103.75241710456575},
		 {82, -84.459480011304976}, {115, -140.69674043179646}, {143, -148.76048134088811},
		 {121, -414.69062431428046}},
	};
	for (int c = 0; c < 2; c++) {
		sr_env_spec s;
		assert_int_equal(sr_env_find(c ? "LunarLanderContinuous-v3:rng=numpy"
					       : "LunarLander-v3:rng=numpy",
					     &s),
				 0);
		char *inst = make(&s, 1);
		for (int k = 0; k < 16; k++) {
			sr_np_pcg64 g;
			float obs[8], a[2];
			double r, ret = 0;
			uint8_t term = 0;
			int t = 0;

			s.seed(&s, inst, 1, (uint64_t)k, 0);
			sr_np_seed(&g, (uint64_t)k);
			s.reset(&s, inst, 1, obs);
			while (!term && t < 1000) {
				if (c) {
					a[0] = (float)sr_np_uniform(&g, -1, 1);
					a[1] = (float)sr_np_uniform(&g, -1, 1);
					s.step(&s, inst, 1, a, obs, &r, &term);
				} else {
					int32_t d = (int32_t)sr_np_integers(&g, 0, 4);
					s.step(&s, inst, 1, &d, obs, &r, &term);
				}
				ret += r;
				t++;
			}
			if (t != ref[c][k].len || fabs(ret - ref[c][k].ret) > 0.1)
				fail_msg("%s seed %d: length %d return %.4f, Gymnasium %d %.4f", s.id, k,
					 t, ret, ref[c][k].len, ref[c][k].ret);
		}
		unmake(&s, inst, 1);
	}
}

/* Same (seed, index): same episodes whatever the batch; other seeds and
 * neighbours differ. */
static void test_seeding(void **st)
{
	enum { N = 6 };
	for (int e = 0; e < 3; e++) {
		sr_env_spec sp;
		assert_int_equal(sr_env_find(ids[e], &sp), 0);
		int steps = e == 2 ? 120 : 250;
		char *a = make(&sp, N), *b = make(&sp, N), *c = make(&sp, N);
		float obs[N * 24];
		uint32_t ea[N] = {0}, eb[N] = {0}, ec[N] = {0};
		sr_rng ra, rb, rc;

		sp.seed(&sp, a, N, 9, 100);
		for (int i = N - 1; i >= 0; i--) /* one by one, backwards */
			sp.seed(&sp, b + i * sp.state_size, 1, 9, 100 + (uint64_t)i);
		sp.seed(&sp, c, N, 10, 100);
		sp.reset(&sp, a, N, obs);
		for (int i = 0; i < N; i++)
			sp.reset(&sp, b + i * sp.state_size, 1, obs + i * sp.obs_dim);
		sp.reset(&sp, c, N, obs);
		sr_rng_seed(&ra, 1, 0);
		sr_rng_seed(&rb, 1, 0);
		sr_rng_seed(&rc, 1, 0);
		uint64_t ha = run_hash(&sp, a, N, ea, &ra, steps, 1);
		uint64_t hb = run_hash(&sp, b, N, eb, &rb, steps, 1);
		uint64_t hc = run_hash(&sp, c, N, ec, &rc, steps, 1);
		assert_true(ha == hb);
		assert_true(ha != hc);
		/* Neighbours differ from each other. */
		float o1[24], o2[24];
		sp.observe(&sp, a, o1);
		sp.observe(&sp, a + sp.state_size, o2);
		assert_memory_not_equal(o1, o2, sp.obs_dim * sizeof(float));
		unmake(&sp, a, N);
		unmake(&sp, b, N);
		unmake(&sp, c, N);
	}
}

/*
 * save/load: instances saved mid-episode (and one never reset) and loaded
 * into fresh instances continue exactly like the originals for the same
 * actions, episodes ending and restarting included. A short buffer is
 * -ENOSPC; bytes that are not a save of this env (another env's, cut,
 * flipped, a changed action) are -EINVAL.
 */
static void test_save_load(void **st)
{
	enum { N = 5 };
	for (int e = 0; e < 3; e++) {
		sr_env_spec sp, other;
		assert_int_equal(sr_env_find(ids[e], &sp), 0);
		assert_int_equal(sr_env_find(ids[(e + 1) % 3], &other), 0);
		char *a = make(&sp, N), *b = make(&sp, N);
		float obs[N * 24];
		uint32_t ea[N] = {0}, eb[N];
		sr_rng ra, rb;
		unsigned char *buf = malloc((size_t)N * sp.save_max);
		size_t len[N];

		sp.seed(&sp, a, N, 3, 0);
		sp.reset(&sp, a, N - 1, obs); /* the last one is never reset */
		sr_rng_seed(&ra, 2, 0);
		/* Step the first N - 1 only; enough steps for some episodes to end. */
		(void)run_hash(&sp, a, N - 1, ea, &ra, e == 2 ? 90 : 130, 1);
		for (int i = 0; i < N; i++) {
			assert_int_equal(sp.save(&sp, a + i * sp.state_size, buf + i * sp.save_max,
						 sp.save_max, &len[i]),
					 0);
			assert_true(len[i] <= sp.save_max);
			assert_int_equal(sp.load(&sp, b + i * sp.state_size, buf + i * sp.save_max,
						 len[i]),
					 0);
			float o1[24], o2[24];
			sp.observe(&sp, a + i * sp.state_size, o1);
			sp.observe(&sp, b + i * sp.state_size, o2);
			assert_memory_equal(o1, o2, sp.obs_dim * sizeof(float));
		}
		/* Continue both the same way (the never-reset one gets a reset). */
		sp.reset(&sp, a + (N - 1) * sp.state_size, 1, obs);
		sp.reset(&sp, b + (N - 1) * sp.state_size, 1, obs);
		memcpy(eb, ea, sizeof(ea));
		sr_rng_seed(&ra, 77, 0);
		rb = ra;
		int more = e == 2 ? 150 : 300;
		uint64_t h1 = run_hash(&sp, a, N, ea, &ra, more, 5);
		uint64_t h2 = run_hash(&sp, b, N, eb, &rb, more, 5);
		assert_true(h1 == h2);

		/* Refusals: each leaves the instance loadable again. */
		size_t l0 = len[0], got;
		unsigned char *s0 = buf;
		assert_true(l0 > 64);
		assert_int_equal(sp.save(&sp, a, buf + sp.save_max, 16, &got), -ENOSPC);
		assert_int_equal(sp.load(&sp, b, s0, l0 - 1), -EINVAL);
		assert_int_equal(sp.load(&sp, b, s0, 8), -EINVAL);
		s0[0] ^= 1;
		assert_int_equal(sp.load(&sp, b, s0, l0), -EINVAL);
		s0[0] ^= 1;
		/* The last logged action changed to one with another effect: the
		 * replay ends elsewhere. (len[N - 1], never reset, is a header.) */
		size_t asz = sr_env_action_size(&sp);
		assert_true(l0 > len[N - 1]);
		unsigned char *la = s0 + l0 - asz, keep[16];
		memcpy(keep, la, asz);
		if (sp.act_kind == SR_SPACE_DISCRETE) {
			int32_t v;
			memcpy(&v, la, 4);
			v = (v + 2) % 4; /* noop <-> main, left <-> right */
			memcpy(la, &v, 4);
		} else {
			float f;
			memcpy(&f, la, 4);
			f = f > 0 ? -1.0f : 1.0f; /* main engine / hip torque flipped */
			memcpy(la, &f, 4);
		}
		assert_int_equal(sp.load(&sp, b, s0, l0), -EINVAL);
		memcpy(la, keep, asz);
		assert_int_equal(sp.load(&sp, b, s0, l0), 0);
		/* Another env type's save. */
		char *o = make(&other, 1);
		unsigned char *ob = malloc(other.save_max);
		other.seed(&other, o, 1, 1, 0);
		other.reset(&other, o, 1, obs);
		assert_int_equal(other.save(&other, o, ob, other.save_max, &got), 0);
		assert_int_equal(sp.load(&sp, b, ob, got), -EINVAL);
		free(ob);
		unmake(&other, o, 1);
		free(buf);
		unmake(&sp, a, N);
		unmake(&sp, b, N);
	}
}

/* check_state: a running or never-reset instance is accepted. */
static void test_check_state(void **st)
{
	for (int e = 0; e < 3; e++) {
		sr_env_spec sp;
		float obs[24];
		assert_int_equal(sr_env_find(ids[e], &sp), 0);
		char *a = make(&sp, 1);
		sp.seed(&sp, a, 1, 1, 0);
		assert_int_equal(sp.check_state(&sp, a), 0);
		sp.reset(&sp, a, 1, obs);
		assert_int_equal(sp.check_state(&sp, a), 0);
		unmake(&sp, a, 1);
	}
}

struct slice {
	const sr_env_spec *sp;
	char *states;
	size_t n;
	uint64_t h;
	int steps;
	uint64_t first;
};

static void *slice_main(void *arg)
{
	struct slice *s = arg;
	uint32_t el[16] = {0};
	sr_rng r;
	float obs[16 * 24];

	s->states = make(s->sp, s->n);
	s->sp->seed(s->sp, s->states, s->n, 4, s->first);
	s->sp->reset(s->sp, s->states, s->n, obs);
	sr_rng_seed(&r, 5, s->first);
	s->h = run_hash(s->sp, s->states, s->n, el, &r, s->steps, 1);
	unmake(s->sp, s->states, s->n);
	return NULL;
}

/* Four threads each creating and stepping their own instances give what
 * one thread gives (each instance owns its world; under TSan this checks
 * that nothing is shared). */
static void test_threads(void **st)
{
	for (int e = 0; e < 3; e++) {
		sr_env_spec sp;
		struct slice s[4], one[4];
		pthread_t t[4];
		assert_int_equal(sr_env_find(ids[e], &sp), 0);
		for (int k = 0; k < 4; k++) {
			s[k] = (struct slice){&sp, NULL, 3, 0, e == 2 ? 60 : 150, 3 * (uint64_t)k};
			one[k] = s[k];
			assert_int_equal(pthread_create(&t[k], NULL, slice_main, &s[k]), 0);
		}
		for (int k = 0; k < 4; k++) {
			pthread_join(t[k], NULL);
			slice_main(&one[k]);
			assert_true(s[k].h == one[k].h);
		}
		assert_true(s[0].h != s[1].h);
	}
}

int main(void)
{
	sr_env_spec s;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spaces_params), cmocka_unit_test(test_numpy_streams),
		cmocka_unit_test(test_seeding),	      cmocka_unit_test(test_save_load),
		cmocka_unit_test(test_check_state),   cmocka_unit_test(test_threads),
		cmocka_unit_test(test_gymnasium_episodes),
	};

	if (!SR_CONFIG_WITH_BOX2D) {
		/* The names are known and say what is missing. */
		for (int e = 0; e < 3; e++) {
			if (sr_env_find(ids[e], &s) != -ENOTSUP ||
			    !strstr(sr_last_error(), "built without Box2D")) {
				fprintf(stderr, "%s: %s\n", ids[e], sr_last_error());
				return 1;
			}
		}
		printf("built without Box2D: skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
