/*
 * stepring envstats: run many episodes of an env with a fixed policy and
 * compare the per-episode statistics (length, return) with a reference
 * sample, e.g. Gymnasium's random-policy episodes, with two-sample
 * Kolmogorov-Smirnov tests.
 *
 * Envs whose trajectories cannot match a reference step for step (a
 * physics engine of another version, a different RNG) are judged on
 * distributions: the mean return within max(3 standard errors of the
 * difference, 10 points), the mean length within 10%, and the KS p-values
 * of both, reported.
 *
 * Policies: random (uniform over the action space, as Gymnasium's
 * action_space.sample()), zero (action 0 / all zeros), and heuristic: the
 * controllers Gymnasium ships with its Box2D envs (lunar_lander.py's
 * heuristic(), bipedal_walker.py's BipedalWalkerHeuristics), written here
 * again in C from their description.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env_probe.h"
#include "stepring.h"

/* Called by the dispatcher (declared weak there). */
int cmd_envstats(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring envstats --env ID [--episodes N] [--policy random|zero|heuristic]\n"
		"                         [--ref FILE [--ref-env NAME]] [--seed S] [--batch B]\n"
		"                         [--csv-out FILE] [--paired]\n"
		"       stepring envstats --env ID --trajectories FILE\n"
		"Run N episodes (default 1000) of env ID with a policy, B instances stepped\n"
		"together in this thread (default 64), and print the mean, std and standard\n"
		"error of the episode return and length, the terminated/truncated shares and\n"
		"the share of final rewards of +100 and -100.\n"
		"  --ref FILE      per-episode reference CSV (columns env, length, return, ...;\n"
		"                  rows whose env is NAME, default the env id): compare with\n"
		"                  two-sample Kolmogorov-Smirnov tests and the limits below\n"
		"  --csv-out FILE  write the port's episodes in the reference format\n"
		"  --paired        episode k uses Gymnasium's seed S+k (--seed S, default 0)\n"
		"                  for the env (adds rng=numpy) and for the random actions\n"
		"                  (NumPy's Generator(PCG64(S+k)), as action_space.seed;\n"
		"                  the zero policy reseeds only the env);\n"
		"                  with --ref, also compare episode by episode (mean and SE\n"
		"                  of the differences, shares of identical episodes)\n"
		"  --trajectories FILE  replay a reference trajectory CSV (seed,t,action_*,\n"
		"                  reward,terminated,truncated,obs_*) seeding each episode with\n"
		"                  its seed (use ID:rng=numpy for Gymnasium's streams) and print\n"
		"                  when the obs first drift past 1e-4 .. 1e-1\n"
		"Limits: |mean return - ref| <= max(3 * SE of the difference, 10);\n"
		"|mean length - ref| <= 10%% of ref. KS p-values are reported, not judged.\n"
		"Exit status: 0 within the limits (or no --ref), 1 outside, 2 usage error.\n");
}

/* ---- policies ------------------------------------------------------------ */

enum policy { POL_RANDOM, POL_ZERO, POL_HEURISTIC };

/* BipedalWalkerHeuristics' state, per instance and episode. */
struct walker_h {
	int state, moving, supporting;
	double sup_knee;
	int started;
};

enum { STAY_ON_ONE_LEG = 1, PUT_OTHER_DOWN = 2, PUSH_OFF = 3 };

static void walker_h_init(struct walker_h *h)
{
	h->state = STAY_ON_ONE_LEG;
	h->moving = 0;
	h->supporting = 1;
	h->sup_knee = 0.1;
	h->started = 0;
}

/* lunar_lander.py heuristic(): steer the angle toward the pad, hover lower
 * the closer it gets, only brake the fall after leg contact. */
static void lander_heuristic(const float *s, int continuous, void *act)
{
	double angle_targ = s[0] * 0.5 + s[2] * 1.0;
	if (angle_targ > 0.4)
		angle_targ = 0.4;
	if (angle_targ < -0.4)
		angle_targ = -0.4;
	double hover_targ = 0.55 * fabs((double)s[0]);
	double angle_todo = (angle_targ - s[4]) * 0.5 - s[5] * 1.0;
	double hover_todo = (hover_targ - s[1]) * 0.5 - s[3] * 0.5;

	if (s[6] != 0 || s[7] != 0) {
		angle_todo = 0;
		hover_todo = -(double)s[3] * 0.5;
	}
	if (continuous) {
		float a[2];
		a[0] = (float)fmin(fmax(hover_todo * 20 - 1, -1.0), 1.0);
		a[1] = (float)fmin(fmax(-angle_todo * 20, -1.0), 1.0);
		memcpy(act, a, sizeof(a));
	} else {
		int32_t a = 0;
		if (hover_todo > fabs(angle_todo) && hover_todo > 0.05)
			a = 2;
		else if (angle_todo < -0.05)
			a = 3;
		else if (angle_todo > 0.05)
			a = 1;
		memcpy(act, &a, 4);
	}
}

/* bipedal_walker.py BipedalWalkerHeuristics.step_heuristic(): a three-state
 * gait (stand on one leg, put the other down, push off) with PD targets
 * for hips and knees. A target of 0 counts as unset, as Python's
 * truthiness of the original has it. */
static void walker_heuristic(struct walker_h *h, const float *s, float *a)
{
	const double SPEED = 0.29, SUPPORT_KNEE_ANGLE = 0.1;
	int mb = 4 + 5 * h->moving, sb = 4 + 5 * h->supporting;
	double hip_targ[2] = {0, 0}, knee_targ[2] = {0, 0};
	double hip_todo[2] = {0, 0}, knee_todo[2] = {0, 0};

	if (h->state == STAY_ON_ONE_LEG) {
		hip_targ[h->moving] = 1.1;
		knee_targ[h->moving] = -0.6;
		h->sup_knee += 0.03;
		if (s[2] > SPEED)
			h->sup_knee += 0.03;
		h->sup_knee = fmin(h->sup_knee, SUPPORT_KNEE_ANGLE);
		knee_targ[h->supporting] = h->sup_knee;
		if (s[sb + 0] < 0.10)
			h->state = PUT_OTHER_DOWN;
	}
	if (h->state == PUT_OTHER_DOWN) {
		hip_targ[h->moving] = 0.1;
		knee_targ[h->moving] = SUPPORT_KNEE_ANGLE;
		knee_targ[h->supporting] = h->sup_knee;
		if (s[mb + 4] != 0) {
			h->state = PUSH_OFF;
			h->sup_knee = fmin((double)s[mb + 2], SUPPORT_KNEE_ANGLE);
		}
	}
	if (h->state == PUSH_OFF) {
		knee_targ[h->moving] = h->sup_knee;
		knee_targ[h->supporting] = 1.0;
		if (s[sb + 2] > 0.88 || s[2] > 1.2 * SPEED) {
			h->state = STAY_ON_ONE_LEG;
			h->moving = 1 - h->moving;
			h->supporting = 1 - h->moving;
		}
	}
	if (hip_targ[0] != 0)
		hip_todo[0] = 0.9 * (hip_targ[0] - s[4]) - 0.25 * s[5];
	if (hip_targ[1] != 0)
		hip_todo[1] = 0.9 * (hip_targ[1] - s[9]) - 0.25 * s[10];
	if (knee_targ[0] != 0)
		knee_todo[0] = 4.0 * (knee_targ[0] - s[6]) - 0.25 * s[7];
	if (knee_targ[1] != 0)
		knee_todo[1] = 4.0 * (knee_targ[1] - s[11]) - 0.25 * s[12];
	hip_todo[0] -= 0.9 * (0 - s[0]) - 1.5 * s[1]; /* keep the hull level */
	hip_todo[1] -= 0.9 * (0 - s[0]) - 1.5 * s[1];
	knee_todo[0] -= 15.0 * s[3]; /* damp vertical oscillation */
	knee_todo[1] -= 15.0 * s[3];
	double out[4] = {hip_todo[0], knee_todo[0], hip_todo[1], knee_todo[1]};
	for (int j = 0; j < 4; j++)
		a[j] = (float)fmin(fmax(0.5 * out[j], -1.0), 1.0);
}

/* ---- statistics ---------------------------------------------------------- */

struct sample {
	double *v;
	size_t n;
};

static double mean_of(const struct sample *x)
{
	double s = 0;
	for (size_t i = 0; i < x->n; i++)
		s += x->v[i];
	return x->n ? s / (double)x->n : NAN;
}

static double std_of(const struct sample *x)
{
	double m = mean_of(x), s = 0;
	for (size_t i = 0; i < x->n; i++)
		s += (x->v[i] - m) * (x->v[i] - m);
	return x->n > 1 ? sqrt(s / (double)(x->n - 1)) : NAN;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Kolmogorov's limiting distribution: P(K > lambda). */
static double ks_q(double lambda)
{
	double sum = 0, sign = 1;

	if (lambda < 0.2)
		return 1.0;
	for (int k = 1; k <= 100; k++) {
		double t = sign * exp(-2.0 * k * k * lambda * lambda);
		sum += t;
		if (fabs(t) < 1e-12)
			break;
		sign = -sign;
	}
	sum *= 2;
	return sum < 0 ? 0 : sum > 1 ? 1 : sum;
}

/* Two-sample KS statistic D and its asymptotic p-value (Stephens' small
 * sample correction). With ties (episode lengths), the test is
 * conservative: p is too large, never too small. */
static void ks_2samp(const struct sample *a, const struct sample *b, double *d_out,
		     double *p_out)
{
	double *x = malloc(a->n * sizeof(double)), *y = malloc(b->n * sizeof(double));
	size_t i = 0, j = 0;
	double d = 0;

	if (!x || !y)
		cli_die("envstats: out of memory");
	memcpy(x, a->v, a->n * sizeof(double));
	memcpy(y, b->v, b->n * sizeof(double));
	qsort(x, a->n, sizeof(double), cmp_d);
	qsort(y, b->n, sizeof(double), cmp_d);
	while (i < a->n && j < b->n) {
		double v = x[i] < y[j] ? x[i] : y[j];
		while (i < a->n && x[i] == v)
			i++;
		while (j < b->n && y[j] == v)
			j++;
		double f = fabs((double)i / (double)a->n - (double)j / (double)b->n);
		if (f > d)
			d = f;
	}
	double en = sqrt((double)a->n * (double)b->n / (double)(a->n + b->n));
	*d_out = d;
	*p_out = ks_q((en + 0.12 + 0.11 / en) * d);
	free(x);
	free(y);
}

/* ---- the reference file -------------------------------------------------- */

static int col_of(char **names, int n, const char *want)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return i;
	return -1;
}

/* Rows of @path whose env column is @env: lengths, returns and (-1 without
 * a seed column) seeds. */
static void load_ref(const char *path, const char *env, struct sample *len, struct sample *ret,
		     struct sample *seeds)
{
	FILE *f = fopen(path, "r");
	char line[4096], *names[64];
	int nn = 0, c_env, c_len, c_ret, c_seed;
	size_t cap = 0, lineno = 1;

	if (!f)
		cli_die("envstats: cannot open '%s': %s", path, strerror(errno));
	if (!fgets(line, sizeof(line), f))
		cli_die("envstats: '%s' is empty", path);
	line[strcspn(line, "\r\n")] = '\0';
	for (char *t = strtok(line, ","); t && nn < 64; t = strtok(NULL, ","))
		names[nn++] = strdup(t);
	c_env = col_of(names, nn, "env");
	c_len = col_of(names, nn, "length");
	c_ret = col_of(names, nn, "return");
	c_seed = col_of(names, nn, "seed");
	if (c_env < 0 || c_len < 0 || c_ret < 0)
		cli_die("envstats: '%s' needs columns env, length and return", path);
	len->n = ret->n = seeds->n = 0;
	len->v = ret->v = seeds->v = NULL;
	while (fgets(line, sizeof(line), f)) {
		char *fld[64], *save = NULL;
		int k = 0;

		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[0])
			continue;
		for (char *t = strtok_r(line, ",", &save); t && k < 64; t = strtok_r(NULL, ",", &save))
			fld[k++] = t;
		if (k != nn)
			cli_die("envstats: %s:%zu: %d fields, the header has %d", path, lineno, k, nn);
		if (strcmp(fld[c_env], env))
			continue;
		if (len->n == cap) {
			cap = cap ? 2 * cap : 1024;
			len->v = realloc(len->v, cap * sizeof(double));
			ret->v = realloc(ret->v, cap * sizeof(double));
			seeds->v = realloc(seeds->v, cap * sizeof(double));
			if (!len->v || !ret->v || !seeds->v)
				cli_die("envstats: out of memory");
		}
		char *e1, *e2;
		len->v[len->n] = strtod(fld[c_len], &e1);
		ret->v[ret->n] = strtod(fld[c_ret], &e2);
		if (*e1 || *e2 || !isfinite(len->v[len->n]) || !isfinite(ret->v[ret->n]))
			cli_die("envstats: %s:%zu: bad length or return", path, lineno);
		seeds->v[seeds->n] = -1;
		if (c_seed >= 0) {
			seeds->v[seeds->n] = strtod(fld[c_seed], &e1);
			if (*e1 || !(seeds->v[seeds->n] >= 0))
				cli_die("envstats: %s:%zu: bad seed", path, lineno);
		}
		len->n++;
		ret->n++;
		seeds->n++;
	}
	fclose(f);
	for (int i = 0; i < nn; i++)
		free(names[i]);
	if (len->n < 2)
		cli_die("envstats: '%s' has %zu rows for env '%s' (--ref-env NAME picks the rows)",
			path, len->n, env);
}

/* ---- the run --------------------------------------------------------------- */

struct episodes {
	struct sample len, ret;
	double *final_rew;
	uint8_t *term;
	size_t n;
};

/*
 * Run episodes 0..want-1 of @spec under @pol, @batch instances stepped
 * together: an instance that finishes an episode starts the next episode
 * number not yet started, and the run ends when every started episode has
 * ended. Results are stored by episode number. (Keeping the first @want
 * episodes to *end* would drop the ones still running at the cut, which
 * are the long ones: with 64 instances and 500 BipedalWalker episodes that
 * takes ~100 steps off the mean length.)
 *
 * @paired: episode k reseeds its instance with seed + k (with rng=numpy,
 * Gymnasium's env.reset(seed=seed + k)) and draws the random policy's
 * actions from NumPy's Generator(PCG64(seed + k)) as Gymnasium's
 * action_space.seed(seed + k) and sample() do, so that episode k meets the
 * reference episode of that seed: same terrain, forces, dispersion and
 * actions.
 */
static void run_episodes(const sr_env_spec *spec, enum policy pol, size_t want, size_t batch,
			 uint64_t seed, int paired, struct episodes *out)
{
	size_t asz = sr_env_action_size(spec), od = spec->obs_dim;
	if (batch > want)
		batch = want;
	char *states = aligned_alloc(64, (batch * spec->state_size + 63) / 64 * 64);
	/* obs_dim elements of the env's dtype (float64 for MuJoCo); the
	 * heuristics, which read them, are for float32 envs. */
	float *obs = malloc(batch * sr_env_obs_size(spec));
	double *rew = malloc(batch * sizeof(double)), *ret = calloc(batch, sizeof(double));
	uint8_t *term = malloc(batch);
	uint32_t *elapsed = calloc(batch, sizeof(uint32_t));
	size_t *ep_of = malloc(batch * sizeof(size_t)), started = 0, done = 0;
	char *act = calloc(batch, asz);
	struct walker_h *wh = calloc(batch, sizeof(*wh));
	bench_np *np = bench_np_new(batch);
	int lander = !strncmp(spec->id, "LunarLander", 11);
	int walker = !strncmp(spec->id, "BipedalWalker", 13);
	sr_rng arng;

	if (!states || !obs || !rew || !ret || !term || !elapsed || !ep_of || !act || !wh || !np)
		cli_die("envstats: out of memory");
	if (pol == POL_HEURISTIC && !lander && !walker)
		cli_die("envstats: --policy heuristic exists for LunarLander and BipedalWalker only");
	out->len.v = malloc(want * sizeof(double));
	out->ret.v = malloc(want * sizeof(double));
	out->final_rew = malloc(want * sizeof(double));
	out->term = malloc(want);
	if (!out->len.v || !out->ret.v || !out->final_rew || !out->term)
		cli_die("envstats: out of memory");
	if (sr_env_create_instances(spec, states, batch))
		cli_die("envstats: %s", sr_last_error());
	if (!paired)
		spec->seed(spec, states, batch, seed, 0);
	sr_rng_seed(&arng, seed, UINT64_MAX);
	/* Slot i starts episode started++; the one after @want stays idle. */
	for (size_t i = 0; i < batch; i++) {
		char *st = states + i * spec->state_size;
		ep_of[i] = started++;
		if (paired) {
			spec->seed(spec, st, 1, seed + ep_of[i], 0);
			bench_np_seed(np, i, seed + ep_of[i]);
		}
		spec->reset(spec, st, 1, (float *)(void *)((char *)obs + i * sr_env_obs_size(spec)));
		walker_h_init(&wh[i]);
	}

	while (done < want) {
		for (size_t i = 0; i < batch; i++) {
			char *a = act + i * asz;
			if (ep_of[i] == SIZE_MAX || pol == POL_ZERO) {
				memset(a, 0, asz);
			} else if (pol == POL_RANDOM) {
				if (spec->act_kind == SR_SPACE_DISCRETE) {
					int32_t v = paired ? (int32_t)bench_np_integers(np, i, 0, spec->act_n)
							   : (int32_t)(sr_rng_next(&arng) % spec->act_n);
					memcpy(a, &v, 4);
				} else {
					for (uint32_t d = 0; d < spec->act_dim; d++) {
						double lo = spec->act_low[d], hi = spec->act_high[d];
						float v = (float)(paired ? bench_np_uniform(np, i, lo, hi)
									 : sr_rng_range(&arng, lo, hi));
						memcpy(a + 4 * d, &v, 4);
					}
				}
			} else if (lander) {
				lander_heuristic(obs + i * od, spec->act_kind == SR_SPACE_BOX, a);
			} else if (!wh[i].started) { /* the walker's first action is zeros */
				memset(a, 0, asz);
				wh[i].started = 1;
			} else {
				walker_heuristic(&wh[i], obs + i * od, (float *)(void *)a);
			}
		}
		spec->step(spec, states, batch, act, obs, rew, term);
		for (size_t i = 0; i < batch; i++) {
			char *st = states + i * spec->state_size;
			ret[i] += rew[i];
			elapsed[i]++;
			int trunc = spec->max_episode_steps && elapsed[i] >= spec->max_episode_steps;
			if (!term[i] && !trunc)
				continue;
			if (ep_of[i] != SIZE_MAX) {
				size_t k = ep_of[i];
				out->len.v[k] = elapsed[i];
				out->ret.v[k] = ret[i];
				out->final_rew[k] = rew[i];
				out->term[k] = term[i];
				done++;
			}
			ret[i] = 0;
			elapsed[i] = 0;
			walker_h_init(&wh[i]);
			/* An idle slot keeps being reset (and stepped): cheaper than
			 * stepping the others one by one for the last episodes. */
			ep_of[i] = started < want ? started++ : SIZE_MAX;
			if (paired && ep_of[i] != SIZE_MAX) {
				spec->seed(spec, st, 1, seed + ep_of[i], 0);
				bench_np_seed(np, i, seed + ep_of[i]);
			}
			spec->reset(spec, st, 1,
				    (float *)(void *)((char *)obs + i * sr_env_obs_size(spec)));
		}
	}
	out->n = want;
	out->len.n = out->ret.n = out->n;
	sr_env_destroy_instances(spec, states, batch);
	free(states);
	free(obs);
	free(rew);
	free(ret);
	free(term);
	free(elapsed);
	free(ep_of);
	free(act);
	free(wh);
	bench_np_free(np);
}

/* ---- trajectories: the first steps against the reference ----------------- */

/*
 * Replay a reference trajectory CSV (seed,t,action_*,reward,terminated,
 * truncated,obs_*; row t = 0 is the reset obs) through the env, seeding
 * instance 0 with each episode's seed (with rng=numpy that is Gymnasium's
 * reset(seed=...)), feeding the reference actions and comparing obs and
 * rewards. Prints, per episode, the steps until the obs error first
 * exceeds 1e-4, 1e-3, 1e-2 and 1e-1, and the first flag mismatch.
 */
static void trajectories(const sr_env_spec *spec, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[8192], *names[128];
	int nn = 0, c_seed, c_t, c_rew, c_term, c_act[8], c_obs[64], na = 0, no = 0;
	size_t asz = sr_env_action_size(spec), lineno = 1;
	char *state = aligned_alloc(64, 64);
	float *obs = malloc(spec->obs_dim * sizeof(float));
	char act[64];
	double rew;
	uint8_t term;
	long long cur = -1, steps = 0;
	double thr[4] = {1e-4, 1e-3, 1e-2, 1e-1}, max_r = 0;
	long long first[4], flag_at = -1;
	int live = 0;

	if (!f)
		cli_die("envstats: cannot open '%s': %s", path, strerror(errno));
	if (!state || !obs || spec->state_size > 64)
		cli_die("envstats: out of memory");
	if (!fgets(line, sizeof(line), f))
		cli_die("envstats: '%s' is empty", path);
	line[strcspn(line, "\r\n")] = '\0';
	for (char *t = strtok(line, ","); t && nn < 128; t = strtok(NULL, ","))
		names[nn++] = strdup(t);
	c_seed = col_of(names, nn, "seed");
	c_t = col_of(names, nn, "t");
	c_rew = col_of(names, nn, "reward");
	c_term = col_of(names, nn, "terminated");
	for (int i = 0; i < nn; i++) {
		if (!strncmp(names[i], "action_", 7) && na < 8)
			c_act[na++] = i;
		if (!strncmp(names[i], "obs_", 4) && no < 64)
			c_obs[no++] = i;
	}
	if (c_seed < 0 || c_t < 0 || c_rew < 0 || c_term < 0 || no != (int)spec->obs_dim ||
	    na != (spec->act_kind == SR_SPACE_DISCRETE ? 1 : (int)spec->act_dim))
		cli_die("envstats: '%s' does not fit env '%s' (seed, t, action_*, reward, "
			"terminated, obs_* columns)",
			path, spec->id);
	if (sr_env_create_instances(spec, state, 1))
		cli_die("envstats: %s", sr_last_error());
	printf("trajectories of %s vs %s\n", spec->id, path);
	printf("%6s %6s %9s %9s %9s %9s %10s %12s\n", "seed", "steps", "obs>1e-4", "obs>1e-3",
	       "obs>1e-2", "obs>1e-1", "flag_diff", "max_rew_err");
	for (;;) {
		char *fld[128] = {0}, *save = NULL;
		int k = 0, eof = !fgets(line, sizeof(line), f);

		if (!eof) {
			lineno++;
			line[strcspn(line, "\r\n")] = '\0';
			for (char *t = strtok_r(line, ",", &save); t && k < 128;
			     t = strtok_r(NULL, ",", &save))
				fld[k++] = t;
		}
		/* A new episode starts at t = 0 (empty fields collapse: fewer columns). */
		int t0 = !eof && !strcmp(fld[c_t < k ? c_t : 0], "0") && k < nn;
		if ((eof || t0) && live) {
			printf("%6lld %6lld", cur, steps);
			for (int j = 0; j < 4; j++)
				if (first[j] < 0)
					printf(" %9s", "-");
				else
					printf(" %9lld", first[j]);
			if (flag_at < 0)
				printf(" %10s", "-");
			else
				printf(" %10lld", flag_at);
			printf(" %12.3g\n", max_r);
			live = 0;
		}
		if (eof)
			break;
		if (t0) {
			/* seed,t, then the obs (the empty action/reward/flag fields vanish) */
			if (k != 2 + no)
				cli_die("envstats: %s:%zu: a t=0 row needs seed, t and %d obs", path,
					lineno, no);
			cur = strtoll(fld[0], NULL, 10);
			spec->seed(spec, state, 1, (uint64_t)cur, 0);
			spec->reset(spec, state, 1, obs);
			steps = 0;
			max_r = 0;
			flag_at = -1;
			for (int j = 0; j < 4; j++)
				first[j] = -1;
			live = 1;
			double e = 0;
			for (int j = 0; j < no; j++)
				e = fmax(e, fabs(obs[j] - strtod(fld[2 + j], NULL)));
			for (int j = 0; j < 4; j++)
				if (first[j] < 0 && e > thr[j])
					first[j] = 0;
			continue;
		}
		if (k != nn)
			cli_die("envstats: %s:%zu: %d fields, the header has %d", path, lineno, k, nn);
		if (!live)
			continue;
		if (spec->act_kind == SR_SPACE_DISCRETE) {
			int32_t a = (int32_t)strtol(fld[c_act[0]], NULL, 10);
			memcpy(act, &a, 4);
		} else {
			for (int j = 0; j < na; j++) {
				float a = strtof(fld[c_act[j]], NULL);
				memcpy(act + 4 * j, &a, 4);
			}
		}
		(void)asz;
		spec->step(spec, state, 1, act, obs, &rew, &term);
		steps++;
		double e = 0, rr = strtod(fld[c_rew], NULL);
		for (int j = 0; j < no; j++)
			e = fmax(e, fabs(obs[j] - strtod(fld[c_obs[j]], NULL)));
		for (int j = 0; j < 4; j++)
			if (first[j] < 0 && e > thr[j])
				first[j] = steps;
		if (first[2] < 0)
			max_r = fmax(max_r, fabs(rew - rr));
		if (flag_at < 0 && term != (uint8_t)atoi(fld[c_term]))
			flag_at = steps;
	}
	printf("(obs>X: the first step whose max |obs - ref| exceeds X, '-' never; max_rew_err "
	       "over the steps before obs>1e-2)\n");
	sr_env_destroy_instances(spec, state, 1);
	free(state);
	free(obs);
	for (int i = 0; i < nn; i++)
		free(names[i]);
	fclose(f);
}

/*
 * Episode k of a paired run against the reference row of seed seed + k:
 * the mean and standard error of the per-episode differences (a bias shows
 * at a fraction of the unpaired standard error, since both runs share the
 * terrain, forces and actions), and how many episodes end identically.
 */
static void paired_report(const struct episodes *ep, uint64_t seed, const struct sample *rlen,
			  const struct sample *rret, const struct sample *rseed)
{
	struct sample dret = {malloc(ep->n * sizeof(double)), 0};
	struct sample dlen = {malloc(ep->n * sizeof(double)), 0};
	size_t same_len = 0, same_ret = 0, same_bits = 0;

	if (!dret.v || !dlen.v)
		cli_die("envstats: out of memory");
	for (size_t j = 0; j < rseed->n; j++) {
		double k = rseed->v[j] - (double)seed;
		if (!(k >= 0 && k < (double)ep->n))
			continue;
		size_t i = (size_t)k;
		dret.v[dret.n++] = ep->ret.v[i] - rret->v[j];
		dlen.v[dlen.n++] = ep->len.v[i] - rlen->v[j];
		same_len += ep->len.v[i] == rlen->v[j];
		same_ret += fabs(ep->ret.v[i] - rret->v[j]) < 0.01;
		same_bits += ep->ret.v[i] == rret->v[j] && ep->len.v[i] == rlen->v[j];
	}
	if (dret.n < 2) {
		printf("paired: no reference rows with seeds %llu..%llu (a seed column)\n",
		       (unsigned long long)seed, (unsigned long long)(seed + ep->n - 1));
	} else {
		double sd = std_of(&dret), sl = std_of(&dlen), nn = (double)dret.n;
		double z = sd > 0 ? mean_of(&dret) / (sd / sqrt(nn)) : 0;
		printf("paired (%zu episodes of the same seeds): return diff %+.2f (sem %.2f) = "
		       "%.1f SE, length diff %+.2f (sem %.2f); same length %.1f%%, return within "
		       "0.01 %.1f%%, identical (length and return to the bit) %.1f%%\n",
		       dret.n, mean_of(&dret), sd / sqrt(nn), z,
		       mean_of(&dlen), sl / sqrt(nn), 100.0 * same_len / nn, 100.0 * same_ret / nn,
		       100.0 * same_bits / nn);
	}
	free(dret.v);
	free(dlen.v);
}

int cmd_envstats(int argc, char **argv)
{
	const char *env = NULL, *ref = NULL, *ref_env = NULL, *pol_s = "random", *csv_out = NULL;
	const char *traj = NULL;
	long long n = 1000, batch = 64, seed = -1;
	int paired = 0;
	enum policy pol;
	sr_env_spec spec;
	struct episodes ep;
	int ok = 1;

	for (int i = 1; i < argc; i++) {
		const char *v;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &env)) {
		} else if (cli_opt(argc, argv, &i, "--ref", &ref)) {
		} else if (cli_opt(argc, argv, &i, "--ref-env", &ref_env)) {
		} else if (cli_opt(argc, argv, &i, "--policy", &pol_s)) {
		} else if (cli_opt(argc, argv, &i, "--csv-out", &csv_out)) {
		} else if (cli_opt(argc, argv, &i, "--trajectories", &traj)) {
		} else if (!strcmp(argv[i], "--paired")) {
			paired = 1;
		} else if (cli_opt(argc, argv, &i, "--episodes", &v)) {
			n = cli_int("--episodes", v, 2, 100000000);
		} else if (cli_opt(argc, argv, &i, "--batch", &v)) {
			batch = cli_int("--batch", v, 1, 1 << 16);
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			seed = cli_int("--seed", v, 0, INT64_MAX);
		} else {
			cli_unknown("envstats", argv[i]);
		}
	}
	if (!env)
		cli_die("envstats: --env is required (see 'stepring envstats --help')");
	if (!strcmp(pol_s, "random"))
		pol = POL_RANDOM;
	else if (!strcmp(pol_s, "zero"))
		pol = POL_ZERO;
	else if (!strcmp(pol_s, "heuristic"))
		pol = POL_HEURISTIC;
	else
		cli_die("envstats: --policy: '%s' is not one of random, zero, heuristic", pol_s);
	if (seed < 0)
		seed = paired ? 0 : 1;
	if (paired && pol == POL_HEURISTIC)
		cli_die("envstats: --paired replays Gymnasium's random or zero policy (--policy "
			"random|zero)");
	char env_np[256];
	if (paired && !strstr(env, "rng=")) { /* the env's draws as Gymnasium's */
		snprintf(env_np, sizeof(env_np), "%s%srng=numpy", env, strchr(env, ':') ? "," : ":");
		env = env_np;
	}
	cli_env(env, &spec);
	if (traj && spec.obs_dtype != SR_DTYPE_FLOAT32)
		cli_die("envstats: --trajectories compares float32 observations; for env '%s' (%s) "
			"use stepring envcheck", spec.id, sr_dtype_name(spec.obs_dtype));
	if (traj) {
		trajectories(&spec, traj);
		return 0;
	}

	struct sample rlen = {0}, rret = {0}, rseed = {0};
	if (ref)
		load_ref(ref, ref_env ? ref_env : spec.id, &rlen, &rret, &rseed);
	run_episodes(&spec, pol, (size_t)n, (size_t)batch, (uint64_t)seed, paired, &ep);

	size_t nterm = 0, plus = 0, minus = 0;
	for (size_t i = 0; i < ep.n; i++) {
		nterm += ep.term[i];
		plus += ep.term[i] && ep.final_rew[i] == 100.0;
		minus += ep.term[i] && ep.final_rew[i] == -100.0;
	}
	double m_ret = mean_of(&ep.ret), s_ret = std_of(&ep.ret);
	double m_len = mean_of(&ep.len), s_len = std_of(&ep.len);
	double se_ret = s_ret / sqrt((double)ep.n);
	printf("env=%s policy=%s%s episodes=%zu seed=%lld\n", spec.id, pol_s,
	       paired ? " (paired: Gymnasium's seeds and action streams)" : "", ep.n, seed);
	printf("port: return %.2f +- %.2f (sem %.2f)  length %.2f +- %.2f  terminated %.4f "
	       "truncated %.4f  final+100 %.4f  final-100 %.4f\n",
	       m_ret, s_ret, se_ret, m_len, s_len, (double)nterm / ep.n,
	       1.0 - (double)nterm / ep.n, (double)plus / ep.n, (double)minus / ep.n);
	if (ref) {
		double rm_ret = mean_of(&rret), rs_ret = std_of(&rret);
		double rm_len = mean_of(&rlen), rs_len = std_of(&rlen);
		double rse = rs_ret / sqrt((double)rret.n);
		double se = sqrt(se_ret * se_ret + rse * rse), lim = fmax(3 * se, 10.0);
		double dret = m_ret - rm_ret, dlen = (m_len - rm_len) / rm_len;
		double d1, p1, d2, p2;
		int ok_ret = fabs(dret) <= lim, ok_len = fabs(dlen) <= 0.10;

		ks_2samp(&ep.ret, &rret, &d1, &p1);
		ks_2samp(&ep.len, &rlen, &d2, &p2);
		printf("ref:  return %.2f +- %.2f (sem %.2f)  length %.2f +- %.2f  (%zu episodes)\n",
		       rm_ret, rs_ret, rse, rm_len, rs_len, rret.n);
		printf("return: diff %+.2f = %.2f SE (limit max(3 SE, 10) = %.2f) %s  KS D=%.4f "
		       "p=%.4g\n",
		       dret, dret / se, lim, ok_ret ? "ok" : "OUTSIDE", d1, p1);
		printf("length: diff %+.2f%% (limit 10%%) %s  KS D=%.4f p=%.4g\n", 100 * dlen,
		       ok_len ? "ok" : "OUTSIDE", d2, p2);
		ok = ok_ret && ok_len;
		if (paired)
			paired_report(&ep, (uint64_t)seed, &rlen, &rret, &rseed);
		free(rlen.v);
		free(rret.v);
		free(rseed.v);
	}
	if (csv_out) {
		FILE *f = fopen(csv_out, "w");
		if (!f)
			cli_die("envstats: cannot write '%s': %s", csv_out, strerror(errno));
		fprintf(f, "env,seed,length,return,terminated,truncated,final_reward\n");
		for (size_t i = 0; i < ep.n; i++)
			fprintf(f, "%s,%llu,%.0f,%.17g,%d,%d,%.17g\n", spec.id,
				(unsigned long long)(paired ? (uint64_t)seed + i : i), ep.len.v[i],
				ep.ret.v[i], ep.term[i], !ep.term[i], ep.final_rew[i]);
		if (fclose(f))
			cli_die("envstats: cannot write '%s': %s", csv_out, strerror(errno));
	}
	free(ep.len.v);
	free(ep.ret.v);
	free(ep.final_rew);
	free(ep.term);
	return ok ? 0 : 1;
}
