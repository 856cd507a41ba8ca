/*
 * Built-in envs against Gymnasium's reference trajectories (tests/refdata),
 * reset distributions, seeding, lookup and spec validation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stepring.h"
#include "refcsv.h"

struct ref_env {
	const char *id;
	const char *csv;
};

static const struct ref_env ref_envs[] = {
	{"CartPole-v1", SR_REFDATA_DIR "/CartPole-v1.csv"},
	{"Pendulum-v1", SR_REFDATA_DIR "/Pendulum-v1.csv"},
	{"MountainCar-v0", SR_REFDATA_DIR "/MountainCar-v0.csv"},
	{"MountainCarContinuous-v0", SR_REFDATA_DIR "/MountainCarContinuous-v0.csv"},
	{"Acrobot-v1", SR_REFDATA_DIR "/Acrobot-v1.csv"},
};
#define N_REF (sizeof(ref_envs) / sizeof(ref_envs[0]))

static void load(const struct ref_env *e, sr_env_spec *spec, struct sr__refcsv *csv)
{
	int err = sr_env_find(e->id, spec);

	if (err)
		fail_msg("sr_env_find(%s): %s", e->id, sr_last_error());
	err = sr__refcsv_load(e->csv, spec, csv);
	if (err)
		fail_msg("load %s: %s", e->csv, sr_last_error());
	assert_true(csv->rows > 100);
}

static void report(const char *what, const char *id, const struct sr__refcheck *r)
{
	print_message("%-26s %-8s rows=%zu max_obs_err=%.3g max_rew_err=%.3g flags=%zu "
		      "state_err=%.3g first_bad=%zd\n",
		      id, what, r->rows, r->max_obs_err, r->max_rew_err, r->flag_mismatches,
		      r->max_state_err, r->first_bad_row == SIZE_MAX ? -1 : (ssize_t)r->first_bad_row);
}

/* Reset rows: obs computed from the t = 0 state equals the reference. */
static void test_reset_rows(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct sr__refcsv csv;
		void *s;
		float obs[16];
		size_t n = 0;

		load(&ref_envs[i], &spec, &csv);
		s = aligned_alloc(64, spec.state_size);
		spec.seed(&spec, s, 1, 1, 0);
		for (size_t r = 0; r < csv.rows; r++) {
			if (csv.t[r] != 0)
				continue;
			spec.set_phys(&spec, s, &csv.phys[r * csv.n_phys]);
			spec.observe(&spec, s, obs);
			for (uint32_t k = 0; k < spec.obs_dim; k++)
				assert_true(fabs(obs[k] - csv.obs[r * csv.obs_dim + k]) <= 1e-5);
			n++;
		}
		assert_int_equal(n, 20);
		free(s);
		sr__refcsv_free(&csv);
	}
}

/* Every step row from its own state: obs, reward, flags, and the new state
 * against the next row's state (the README's 1e-12). */
static void test_one_step(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct sr__refcsv csv;
		struct sr__refcheck r;

		load(&ref_envs[i], &spec, &csv);
		assert_int_equal(sr__refcsv_check(&spec, &csv, SR_REFCHECK_ONESTEP, &r), 0);
		report("one-step", spec.id, &r);
		assert_true(sr__refcheck_ok(&r));
		assert_true(r.max_state_err <= 1e-12);
		sr__refcsv_free(&csv);
	}
}

/* Every episode replayed from its t = 0 state with the recorded actions. */
static void test_rollout(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct sr__refcsv csv;
		struct sr__refcheck r;

		load(&ref_envs[i], &spec, &csv);
		assert_int_equal(sr__refcsv_check(&spec, &csv, SR_REFCHECK_ROLLOUT, &r), 0);
		report("rollout", spec.id, &r);
		assert_true(sr__refcheck_ok(&r));
		sr__refcsv_free(&csv);
	}
}

/* The comparison can fail: change one action of each file and the replay
 * must notice (a wrong obs, reward or flag at that row). */
static void test_perturbed_action_detected(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct sr__refcsv csv;
		struct sr__refcheck r;
		size_t row = 0;

		load(&ref_envs[i], &spec, &csv);
		for (size_t k = csv.rows / 2; k < csv.rows; k++)
			if (csv.t[k] >= 1) {
				row = k;
				break;
			}
		assert_true(row > 0);
		if (csv.discrete)
			csv.act_i[row] = (csv.act_i[row] + 1) % (int32_t)spec.act_n;
		else
			csv.act_f[row] = csv.act_f[row] > 0 ? -0.75f : 0.75f;
		assert_int_equal(sr__refcsv_check(&spec, &csv, SR_REFCHECK_ONESTEP, &r), 0);
		assert_false(sr__refcheck_ok(&r));
		assert_int_equal(r.first_bad_row, row);
		sr__refcsv_free(&csv);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_rows),
		cmocka_unit_test(test_one_step),
		cmocka_unit_test(test_rollout),
		cmocka_unit_test(test_perturbed_action_detected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
