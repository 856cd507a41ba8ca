/* Env plugins: loading the example, refusing a wrong ABI version, missing
 * files and symbols. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stepring.h"

static void test_load_and_step(void **st)
{
	sr_env_spec spec;
	char states[4 * 64] __attribute__((aligned(64)));
	float obs[4], o1[1];
	double rew[4], phys;
	uint8_t term[4];
	int32_t right[4] = {1, 1, 1, 1};
	int steps = 0, ended = 0;

	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_GOOD, &spec), 0);
	assert_string_equal(spec.id, "Corridor-v0");
	assert_string_equal(spec.name, "corridor");
	assert_int_equal(spec.abi_version, SR_ENV_ABI_VERSION);
	assert_int_equal(sr_env_validate(&spec), 0);
	assert_int_equal(spec.obs_dim, 1);
	assert_true(spec.state_size * 4 <= sizeof(states));
	/* A plugin is not a built-in: the registry does not know it. */
	assert_int_equal(sr_env_find("corridor", &(sr_env_spec){0}), -ENOENT);

	spec.seed(&spec, states, 4, 42, 0);
	spec.reset(&spec, states, 4, obs);
	for (int i = 0; i < 4; i++)
		assert_true(obs[i] >= 0 && obs[i] < 5);
	/* Always right: each instance reaches cell 9 in 9 - start steps. */
	float start[4];
	memcpy(start, obs, sizeof(start));
	while (ended < 4 && steps < 20) {
		spec.step(&spec, states, 4, right, obs, rew, term);
		steps++;
		for (int i = 0; i < 4; i++) {
			int expect_end = steps == 9 - (int)start[i];
			assert_int_equal(term[i], expect_end || steps > 9 - (int)start[i]);
			if (expect_end) {
				assert_true(rew[i] == 1.0);
				ended++;
			} else if (steps < 9 - (int)start[i]) {
				assert_true(rew[i] == -0.01);
				assert_true(obs[i] == start[i] + (float)steps);
			}
		}
	}
	assert_int_equal(ended, 4);
	/* Physical state round trip. */
	phys = 3;
	spec.set_phys(&spec, states, &phys);
	spec.observe(&spec, states, o1);
	assert_true(o1[0] == 3.0f);
	/* Loading twice works and gives the same spec. */
	sr_env_spec again;
	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_GOOD, &again), 0);
	assert_ptr_equal(again.step, spec.step);
}

static void test_wrong_abi(void **st)
{
	sr_env_spec spec;
	const char *msg;

	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_WRONG_ABI, &spec), -EPROTO);
	msg = sr_last_error();
	print_message("%s\n", msg);
	assert_non_null(strstr(msg, "version 99"));
	assert_non_null(strstr(msg, "version 3"));
	assert_non_null(strstr(msg, "version 2"));
	assert_non_null(strstr(msg, "version 1"));
	assert_non_null(strstr(msg, SR_PLUGIN_WRONG_ABI));
}

/* A plugin built for env ABI version 1 (a spec without the v2 tail) loads:
 * the copy says the current version, its tail is zero, and it steps. */
static void test_v1_plugin(void **st)
{
	sr_env_spec spec, good;
	char states[2 * 64] __attribute__((aligned(64)));
	float obs[2];
	double rew[2];
	uint8_t term[2];
	int32_t act[2] = {1, 0};

	memset(&spec, 0xa5, sizeof(spec));
	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_V1, &spec), 0);
	assert_int_equal(spec.abi_version, SR_ENV_ABI_VERSION);
	assert_int_equal(spec.spec_size, sizeof(sr_env_spec));
	assert_int_equal(spec.flags, 0);
	assert_int_equal(spec.save_max, 0);
	assert_null(spec.check_state);
	assert_null(spec.create);
	assert_null(spec.destroy);
	assert_null(spec.save);
	assert_null(spec.load);
	assert_false(sr_env_is_opaque(&spec));
	assert_int_equal(sr_env_validate(&spec), 0);
	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_GOOD, &good), 0);
	assert_string_equal(spec.id, good.id);
	assert_int_equal(spec.state_size, good.state_size);
	assert_int_equal(spec.obs_dim, good.obs_dim);
	assert_int_equal(spec.act_n, good.act_n);
	assert_int_equal(spec.n_phys, good.n_phys);
	assert_non_null(spec.set_phys); /* the last v1 field is copied */
	spec.seed(&spec, states, 2, 1, 0);
	spec.reset(&spec, states, 2, obs);
	spec.step(&spec, states, 2, act, obs, rew, term);
	assert_true(rew[0] == -0.01 || rew[0] == 1.0);
}

static void test_missing(void **st)
{
	sr_env_spec spec;

	assert_int_equal(sr_env_load_plugin("/nonexistent/corridor.so", &spec), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "/nonexistent/corridor.so"));
	/* A shared object without the symbol. */
	assert_int_equal(sr_env_load_plugin("libm.so.6", &spec), -ENOENT);
	print_message("%s\n", sr_last_error());
	assert_non_null(strstr(sr_last_error(), SR_ENV_PLUGIN_SYMBOL));
	/* A file that is not a shared object. */
	assert_int_equal(sr_env_load_plugin(SR_SOURCE_DIR "/tests/test_plugin.c", &spec), -ENOENT);
	assert_int_equal(sr_env_load_plugin(NULL, &spec), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_and_step),
		cmocka_unit_test(test_wrong_abi),
		cmocka_unit_test(test_v1_plugin),
		cmocka_unit_test(test_missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
