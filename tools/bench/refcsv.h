/*
 * Reference trajectory CSVs (the Gymnasium format of tests/refdata):
 * loading and replaying them against an env spec. Used by
 * `stepring envcheck` and the env tests; part of the benchmark library
 * (tools/bench), on the public env ABI only.
 *
 * Format: a header, then one row per reset (t = 0) or step (t >= 1):
 *   episode,t,<state...>,action,<obs_...>,reward,terminated,truncated
 * Columns are found by name: "episode", "t", "action", "reward",
 * "terminated", "truncated"; the obs columns are those named "obs_*"; the
 * state columns are the others between "t" and "action". Their counts must
 * match the env's n_phys and obs_dim.
 */
#ifndef SR_REFCSV_H
#define SR_REFCSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stepring/env.h"

struct refcsv {
	size_t rows;
	uint32_t n_phys, obs_dim, act_dim;
	bool discrete;
	int64_t *episode, *t;
	double *phys;    /* rows * n_phys: the state before the step */
	int32_t *act_i;  /* discrete: rows */
	float *act_f;    /* box: rows * act_dim (parsed as float32) */
	float *obs;      /* rows * obs_dim */
	double *reward;
	uint8_t *term, *trunc;
};

/* Load @path for @spec. Returns 0, -ENOENT (cannot open), -EINVAL
 * (malformed: "FILE:LINE: why", or columns that do not fit the env), -ENOMEM;
 * the message is in refcsv_error(). */
int refcsv_load(const char *path, const sr_env_spec *spec, struct refcsv *out);
void refcsv_free(struct refcsv *csv);

enum {
	REFCHECK_ONESTEP = 1, /* every t >= 1 row from its own state */
	REFCHECK_ROLLOUT = 2, /* every episode from its t = 0 state */
};

struct refcheck {
	size_t rows;            /* rows compared (reset rows included) */
	double max_obs_err;     /* max |obs - ref| */
	double max_rew_err;     /* max |r - ref| / max(1, |ref|) */
	size_t flag_mismatches; /* terminated or truncated differ */
	size_t obs_fail, rew_fail; /* rows over the tolerance */
	double max_state_err;   /* one-step: new state vs the next row's state */
	size_t first_bad_row;   /* first row out of tolerance (0-based), or SIZE_MAX */
};

#define REF_OBS_TOL 1e-5
#define REF_REW_TOL 1e-9

/* Replay @csv through @spec in the given modes (a bit mask) and accumulate
 * the worst errors. Truncation is computed as the runtime does: after the
 * k-th step of an episode, truncated = max_episode_steps && k >=
 * max_episode_steps. Returns 0 or -EINVAL (an episode without a t = 0 row,
 * t not consecutive), -ENOMEM. */
int refcsv_check(const sr_env_spec *spec, const struct refcsv *csv, unsigned modes,
		     struct refcheck *res);

/* Why the last refcsv_* call of this thread failed. */
const char *refcsv_error(void);

/* True when @res is within the tolerances above. */
bool refcheck_ok(const struct refcheck *res);

#endif
