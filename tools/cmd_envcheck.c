/* stepring envcheck: replay a Gymnasium reference CSV through an env and
 * compare obs, rewards and flags (see tests/refdata/README.md). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
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
		"malformed or unfitting CSV.\n",
		REF_OBS_TOL, REF_REW_TOL);
}

int cmd_envcheck(int argc, char **argv)
{
	const char *env = NULL, *path = NULL, *mode = "both", *plugin = NULL;
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
		} else {
			cli_unknown("envcheck", argv[i]);
		}
	}
	if ((!env == !plugin) || !path)
		cli_die("envcheck: --csv and one of --env or --plugin are required (see "
			"'stepring envcheck --help')");
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
	} else {
		cli_env(env, &spec);
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
