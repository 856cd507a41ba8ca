/* stepring envcheck: replay a Gymnasium reference CSV through an env and
 * compare obs, rewards and flags (see tests/refdata/README.md); the MuJoCo
 * envs' episodes (the MuJoCo reference kit's format: float64 obs, info
 * terms, gzipped) go through tools/bench/mjref.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env_probe.h"
#include "mjref.h"
#include "stepring.h"
#include "refcsv.h"

/* Called by the dispatcher (tools/stepring.c). */
int cmd_envcheck(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring envcheck (--env ID | --plugin PATH) --csv FILE\n"
		"                         [--mode both|onestep|rollout]\n"
		"Replay a reference trajectory CSV (episode,t,<state>,action,obs_*,reward,\n"
		"terminated,truncated; columns found from the header) through env ID and print\n"
		"  rows=N max_obs_err=E max_rew_err=E flag_mismatches=K\n"
		"  --mode onestep  every step from the row's own state\n"
		"  --mode rollout  every episode from its t=0 state, replaying the actions\n"
		"  --mode both     both (default)\n"
		"  --plugin PATH   check an env plugin (.so) instead of a built-in env\n"
		"Tolerances: obs %g absolute, reward %g * max(1, |r|), flags exact; truncated\n"
		"is expected when t == max_episode_steps.\n"
		"Exit status: 0 within tolerance, 1 outside it, 2 usage error or unreadable,\n"
		"malformed or unfitting CSV.\n"
		"MuJoCo envs (files of the MuJoCo reference kit, .csv or .csv.gz):\n"
		"  --mode seeded   each episode from its seed (the env's rng=numpy), the reset\n"
		"                  state checked bit for bit (default)\n"
		"  --mode state    each episode from its reset row's qpos/qvel\n"
		"  --time-limit N  the TimeLimit the file was made with (default: the env's)\n"
		"  prints rows=N episodes=E obs_differ=K/V trig_differ=K/V max_trig_err=E\n"
		"  rew_differ=K max_rew_rel=E info_differ=K/V max_info_rel=E flag_mismatches=K\n"
		"  reset_state_differ=K; tolerances: obs bit-identical except the sin/cos\n"
		"  entries (%g absolute), rewards and info %g relative, flags exact.\n",
		REF_OBS_TOL, REF_REW_TOL, MJREF_TRIG_TOL, MJREF_REL_TOL);
}

static int check_mujoco(const sr_env_spec *spec, const char *path, const char *mode,
			long long time_limit)
{
	struct mjref ref;
	struct mjref_result res;
	int m;

	if (!strcmp(mode, "seeded") || !strcmp(mode, "both"))
		m = MJREF_SEEDED;
	else if (!strcmp(mode, "state"))
		m = MJREF_STATE;
	else
		cli_die("envcheck: --mode: '%s' is not seeded or state (a MuJoCo env)", mode);
	if (mjref_load(path, &ref))
		cli_die("envcheck: %s", mjref_error());
	if (mjref_check(spec, &ref, m, (uint32_t)time_limit, &res))
		cli_die("envcheck: %s", mjref_error());
	printf("rows=%zu episodes=%zu obs_differ=%zu/%zu max_obs_err=%.3g trig_differ=%zu/%zu "
	       "max_trig_err=%.3g rew_differ=%zu max_rew_rel=%.3g info_differ=%zu/%zu "
	       "max_info_rel=%.3g flag_mismatches=%zu reset_state_differ=%zu\n",
	       ref.rows, res.episodes, res.obs_diff, res.obs_values, res.max_obs_abs,
	       res.trig_diff, res.trig_values, res.max_trig_abs, res.rew_diff, res.max_rew_rel,
	       res.info_diff, res.info_values, res.max_info_rel, res.flag_mismatch,
	       res.reset_state_diff);
	if (res.info_unknown)
		fprintf(stderr, "stepring: envcheck: %zu info columns are not terms of %s\n",
			res.info_unknown, spec->id);
	if (!mjref_ok(&res)) {
		if (res.first_bad_row != SIZE_MAX) {
			const double *row = ref.cell + res.first_bad_row * ref.cols;
			fprintf(stderr, "stepring: envcheck: outside tolerance; first mismatch at "
				"line %zu (episode %.0f, t=%.0f)\n", res.first_bad_row + 2,
				row[ref.c_episode], row[ref.c_t]);
		}
		mjref_free(&ref);
		return 1;
	}
	mjref_free(&ref);
	return 0;
}

int cmd_envcheck(int argc, char **argv)
{
	const char *env = NULL, *path = NULL, *mode = NULL, *plugin = NULL, *v;
	long long time_limit = 0;
	struct refcheck res;
	struct refcsv csv;
	unsigned modes;
	sr_env_spec spec;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &env)) {
		} else if (cli_opt(argc, argv, &i, "--csv", &path)) {
		} else if (cli_opt(argc, argv, &i, "--mode", &mode)) {
		} else if (cli_opt(argc, argv, &i, "--plugin", &plugin)) {
		} else if (cli_opt(argc, argv, &i, "--time-limit", &v)) {
			time_limit = cli_int("--time-limit", v, 1, 1 << 30);
		} else {
			cli_unknown("envcheck", argv[i]);
		}
	}
	if ((!env == !plugin) || !path)
		cli_die("envcheck: --csv and one of --env or --plugin are required (see "
			"'stepring envcheck --help')");
	if (!plugin) {
		cli_env(env, &spec);
		if (bench_is_mujoco(&spec))
			return check_mujoco(&spec, path, mode ? mode : "seeded", time_limit);
	}
	if (!mode)
		mode = "both";
	if (!strcmp(mode, "both"))
		modes = REFCHECK_ONESTEP | REFCHECK_ROLLOUT;
	else if (!strcmp(mode, "onestep"))
		modes = REFCHECK_ONESTEP;
	else if (!strcmp(mode, "rollout"))
		modes = REFCHECK_ROLLOUT;
	else
		cli_die("envcheck: --mode: '%s' is not one of both, onestep, rollout", mode);
	if (plugin) {
		if (sr_env_load_plugin(plugin, &spec))
			cli_die("envcheck: %s", sr_last_error());
	}
	if (spec.n_phys == 0)
		cli_die("envcheck: env '%s' has no physical state to load from a CSV", spec.id);
	err = refcsv_load(path, &spec, &csv);
	if (err)
		cli_die("envcheck: %s", refcsv_error());
	err = refcsv_check(&spec, &csv, modes, &res);
	if (err)
		cli_die("envcheck: %s", refcsv_error());
	printf("rows=%zu max_obs_err=%.3g max_rew_err=%.3g flag_mismatches=%zu\n", res.rows,
	       res.max_obs_err, res.max_rew_err, res.flag_mismatches);
	if (!refcheck_ok(&res)) {
		size_t r = res.first_bad_row;
		fprintf(stderr,
			"stepring: envcheck: outside tolerance; first mismatch at line %zu "
			"(episode %lld, t=%lld)\n",
			r + 2, (long long)csv.episode[r], (long long)csv.t[r]);
		refcsv_free(&csv);
		return 1;
	}
	refcsv_free(&csv);
	return 0;
}
