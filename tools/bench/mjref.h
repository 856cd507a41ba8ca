/*
 * Reference episodes of the MuJoCo envs (the format of the MuJoCo
 * reference kit's gen_ref.py: ../shared/mujoco/README.md): loading them and
 * replaying them through an env spec, with the float64 observations and
 * the info terms. Used by `stepring envcheck` for the MuJoCo envs and by
 * tests/test_mujoco.c; part of the benchmark library (tools/bench).
 *
 * Format: a header, then per episode a reset row (t = 0: the reset state
 * qpos_*, qvel_*, the reset obs_* and reset info) and one row per step
 * (action_*, obs_*, reward, terminated, truncated, info_*). Columns are
 * found by name: episode, seed, t, qpos_<i>, qvel_<i>, action_<i>,
 * obs_<i>, reward, terminated, truncated, info_<key>. Empty cells are
 * absent values. A file whose name ends in .gz is read through zlib (in a
 * build that has it).
 */
#ifndef SR_MJREF_H
#define SR_MJREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stepring/env.h"

struct mjref {
	size_t rows, cols;
	double *cell;            /* rows * cols; NaN: an empty cell */
	int c_episode, c_seed, c_t, c_reward, c_term, c_trunc;
	int c_qpos, nq, c_qvel, nv, c_act, nu, c_obs, nobs; /* first column and count */
	int n_info;
	char **info_names;       /* the keys, without "info_" */
	int *c_info;
};

/* Load @path. 0, -ENOENT (cannot open), -EINVAL (malformed: "FILE:LINE:
 * why"), -ENOMEM, -ENOTSUP (.gz in a build without zlib); the message is in
 * mjref_error(). */
int mjref_load(const char *path, struct mjref *out);
void mjref_free(struct mjref *ref);
const char *mjref_error(void);

enum {
	MJREF_SEEDED = 1, /* start each episode from its seed (rng=numpy) and check the reset state */
	MJREF_STATE = 2,  /* start each episode from its reset row's qpos/qvel (set_phys) */
};

struct mjref_result {
	size_t episodes, steps;
	size_t reset_state_diff;  /* seeded: reset qpos/qvel values not bit-identical */
	size_t obs_values, obs_diff;       /* values compared; not bit-identical (sin/cos excluded) */
	size_t trig_values, trig_diff;     /* the sin/cos entries; not bit-identical */
	double max_obs_abs;                /* over the non-trig entries */
	double max_trig_abs;               /* over the sin/cos entries */
	size_t rew_diff;                   /* rewards not bit-identical */
	double max_rew_rel;                /* |r - ref| / max(|r|, |ref|) */
	size_t info_values, info_diff;
	double max_info_rel;
	size_t info_unknown;               /* reference info keys the env does not give */
	size_t flag_mismatch;              /* terminated or truncated differ */
	size_t first_bad_row;              /* SIZE_MAX: none */
};

#define MJREF_TRIG_TOL 1e-15 /* NumPy's sin/cos vs glibc's: 1-3 ulp on AVX-512 hosts */
#define MJREF_REL_TOL 1e-12

/* Replay @ref through @spec (a MuJoCo env; in MJREF_SEEDED mode it should
 * draw with rng=numpy, the default). @time_limit: the TimeLimit the file was
 * made with (truncated = t >= time_limit), 0 for the spec's. Returns 0 or
 * -EINVAL (columns that do not fit the env, an episode without its reset
 * row), -ENOMEM; the message is in mjref_error(). */
int mjref_check(const sr_env_spec *spec, const struct mjref *ref, int mode,
		uint32_t time_limit, struct mjref_result *res);

/* Within the tolerances above (and every reference info key known). */
bool mjref_ok(const struct mjref_result *res);

#endif
