/* Reference episodes of the MuJoCo envs: load and replay (see mjref.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SR_BENCH_ZLIB
#include <zlib.h>
#endif

#include "env_probe.h"
#include "mjref.h"

static _Thread_local char mjref_msg[512];

__attribute__((format(printf, 2, 3))) static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mjref_msg, sizeof(mjref_msg), fmt, ap);
	va_end(ap);
	return err;
}

const char *mjref_error(void)
{
	return mjref_msg;
}

/* ---- a line reader over a plain or gzip file ------------------------------------ */

#define MAX_LINE (1 << 20)
#define MAX_COLS 4096
#define MAX_ROWS (1 << 24)

struct reader {
	FILE *f;
#ifdef SR_BENCH_ZLIB
	gzFile gz;
#endif
	char buf[1 << 16];
	size_t len, pos;
	bool eof, error;
};

static int reader_open(struct reader *r, const char *path)
{
	size_t n = strlen(path);

	memset(r, 0, sizeof(*r));
	if (n > 3 && !strcmp(path + n - 3, ".gz")) {
#ifdef SR_BENCH_ZLIB
		r->gz = gzopen(path, "rb");
		if (!r->gz)
			return fail(-ENOENT, "cannot open '%s': %s", path, strerror(errno));
		return 0;
#else
		return fail(-ENOTSUP, "'%s': this build reads no .gz files (no zlib): gunzip it "
			    "first", path);
#endif
	}
	r->f = fopen(path, "r");
	if (!r->f)
		return fail(-ENOENT, "cannot open '%s': %s", path, strerror(errno));
	return 0;
}

static void reader_close(struct reader *r)
{
	if (r->f)
		fclose(r->f);
#ifdef SR_BENCH_ZLIB
	if (r->gz)
		gzclose(r->gz);
#endif
}

static bool refill(struct reader *r)
{
	long got = 0;

	if (r->eof)
		return false;
	if (r->f) {
		got = (long)fread(r->buf, 1, sizeof(r->buf), r->f);
		if (ferror(r->f))
			r->error = true;
	}
#ifdef SR_BENCH_ZLIB
	else {
		got = gzread(r->gz, r->buf, (unsigned)sizeof(r->buf));
		if (got < 0) {
			r->error = true;
			got = 0;
		}
	}
#endif
	r->len = (size_t)got;
	r->pos = 0;
	if (got == 0)
		r->eof = true;
	return got > 0;
}

/* The next line (without its newline) into *line; its length, -1 at the
 * end, -2 longer than MAX_LINE, -3 on a read error or out of memory. */
static long read_line(struct reader *r, char **line, size_t *cap)
{
	size_t n = 0;

	for (;;) {
		if (r->pos == r->len && !refill(r))
			break;
		char *nl = memchr(r->buf + r->pos, '\n', r->len - r->pos);
		size_t take = nl ? (size_t)(nl - (r->buf + r->pos)) : r->len - r->pos;
		if (n + take + 1 > MAX_LINE)
			return -2;
		if (n + take + 1 > *cap) {
			size_t nc = *cap ? *cap : 4096;
			while (nc < n + take + 1)
				nc *= 2;
			char *p = realloc(*line, nc);
			if (!p)
				return -3;
			*line = p;
			*cap = nc;
		}
		memcpy(*line + n, r->buf + r->pos, take);
		n += take;
		r->pos += take;
		if (nl) {
			r->pos++;
			(*line)[n] = '\0';
			if (n && (*line)[n - 1] == '\r')
				(*line)[--n] = '\0';
			return (long)n;
		}
	}
	if (r->error)
		return -3;
	if (n == 0)
		return -1;
	(*line)[n] = '\0';
	return (long)n;
}

static int split(char *line, char **tok, int max)
{
	int n = 0;
	char *p = line;

	for (;;) {
		if (n == max)
			return -1;
		tok[n++] = p;
		p = strchr(p, ',');
		if (!p)
			break;
		*p++ = '\0';
	}
	return n;
}

/* ---- loading ------------------------------------------------------------------ */

void mjref_free(struct mjref *ref)
{
	if (!ref)
		return;
	free(ref->cell);
	for (int i = 0; i < ref->n_info; i++)
		free(ref->info_names[i]);
	free(ref->info_names);
	free(ref->c_info);
	memset(ref, 0, sizeof(*ref));
}

/* Columns prefix_0, prefix_1, ... consecutive: the first's index and count. */
static int series(char **names, int n, const char *prefix, int *first, int *count)
{
	size_t pl = strlen(prefix);
	char want[64];

	*first = -1;
	*count = 0;
	for (int i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "%s%d", prefix, *count);
		if (!strcmp(names[i], want)) {
			if (*first < 0)
				*first = i;
			else if (i != *first + *count)
				return -1;
			(*count)++;
		} else if (!strncmp(names[i], prefix, pl) && *first >= 0 && i == *first + *count) {
			return -1;
		}
	}
	return 0;
}

static int find(char **names, int n, const char *want)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return i;
	return -1;
}

int mjref_load(const char *path, struct mjref *out)
{
	char *line = NULL, **tok = NULL;
	size_t cap = 0, rows_cap = 0, lineno = 1;
	struct reader r;
	struct mjref c;
	long got;
	int err, ncols;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	err = reader_open(&r, path);
	if (err)
		return err;
	tok = malloc(sizeof(char *) * (MAX_COLS + 1));
	if (!tok) {
		err = fail(-ENOMEM, "out of memory");
		goto out;
	}
	got = read_line(&r, &line, &cap);
	if (got < 0) {
		err = fail(got == -1 ? -EINVAL : -EIO, "%s: %s", path,
			   got == -1 ? "empty file (expected a CSV header)" : "unreadable first line");
		goto out;
	}
	ncols = split(line, tok, MAX_COLS);
	if (ncols < 0) {
		err = fail(-EINVAL, "%s:1: more than %d columns", path, MAX_COLS);
		goto out;
	}
	c.cols = (size_t)ncols;
	c.c_episode = find(tok, ncols, "episode");
	c.c_seed = find(tok, ncols, "seed");
	c.c_t = find(tok, ncols, "t");
	c.c_reward = find(tok, ncols, "reward");
	c.c_term = find(tok, ncols, "terminated");
	c.c_trunc = find(tok, ncols, "truncated");
	if (series(tok, ncols, "qpos_", &c.c_qpos, &c.nq) ||
	    series(tok, ncols, "qvel_", &c.c_qvel, &c.nv) ||
	    series(tok, ncols, "action_", &c.c_act, &c.nu) ||
	    series(tok, ncols, "obs_", &c.c_obs, &c.nobs)) {
		err = fail(-EINVAL, "%s:1: qpos_/qvel_/action_/obs_ columns out of order", path);
		goto out;
	}
	if (c.c_episode < 0 || c.c_seed < 0 || c.c_t < 0 || c.c_reward < 0 || c.c_term < 0 ||
	    c.c_trunc < 0 || c.nq == 0 || c.nv == 0 || c.nu == 0 || c.nobs == 0) {
		err = fail(-EINVAL, "%s:1: needs columns episode, seed, t, qpos_*, qvel_*, action_*, "
			   "obs_*, reward, terminated, truncated", path);
		goto out;
	}
	for (int i = 0; i < ncols; i++)
		c.n_info += !strncmp(tok[i], "info_", 5);
	c.info_names = calloc((size_t)c.n_info + 1, sizeof(char *));
	c.c_info = calloc((size_t)c.n_info + 1, sizeof(int));
	if (!c.info_names || !c.c_info) {
		err = fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0, k = 0; i < ncols; i++)
		if (!strncmp(tok[i], "info_", 5)) {
			c.info_names[k] = strdup(tok[i] + 5);
			if (!c.info_names[k]) {
				err = fail(-ENOMEM, "out of memory");
				goto out;
			}
			c.c_info[k++] = i;
		}
	while ((got = read_line(&r, &line, &cap)) != -1) {
		lineno++;
		if (got < 0) {
			err = fail(got == -2 ? -E2BIG : -EIO, "%s:%zu: %s", path, lineno,
				   got == -2 ? "line too long" : "read error");
			goto out;
		}
		if (!got)
			continue;
		if (split(line, tok, MAX_COLS) != ncols) {
			err = fail(-EINVAL, "%s:%zu: not %d fields", path, lineno, ncols);
			goto out;
		}
		if (c.rows == rows_cap) {
			if (rows_cap >= MAX_ROWS) {
				err = fail(-E2BIG, "%s: more than %d rows", path, MAX_ROWS);
				goto out;
			}
			rows_cap = rows_cap ? 2 * rows_cap : 1024;
			double *p = realloc(c.cell, rows_cap * c.cols * sizeof(double));
			if (!p) {
				err = fail(-ENOMEM, "out of memory for %zu rows", rows_cap);
				goto out;
			}
			c.cell = p;
		}
		double *row = c.cell + c.rows * c.cols;
		for (int i = 0; i < ncols; i++) {
			char *e;
			if (!tok[i][0]) {
				row[i] = NAN;
				continue;
			}
			row[i] = strtod(tok[i], &e);
			if (*e) {
				err = fail(-EINVAL, "%s:%zu: column %d: bad number '%.40s'", path,
					   lineno, i + 1, tok[i]);
				goto out;
			}
		}
		c.rows++;
	}
	*out = c;
	memset(&c, 0, sizeof(c));
	err = 0;
out:
	mjref_free(&c);
	free(line);
	free(tok);
	reader_close(&r);
	return err;
}

/* ---- replay -------------------------------------------------------------------- */

static double rel_err(double a, double b)
{
	if (a == b || (isnan(a) && isnan(b)))
		return 0;
	double m = fmax(fabs(a), fabs(b));
	return m > 0 && isfinite(m) ? fabs(a - b) / m : INFINITY;
}

static bool same_bits(double a, double b)
{
	return !memcmp(&a, &b, sizeof(a));
}

struct ctx {
	const sr_env_spec *spec;
	const struct mjref *ref;
	struct mjref_result *res;
	int *info_map; /* per reference info column: the env's index, or -1 */
	const char *const *names;
	int n_names;
	uint32_t trig_first, trig_count;
	double *obs, *info;
	bool bad;
};

static void compare_obs(struct ctx *x, const double *row)
{
	for (int j = 0; j < x->ref->nobs; j++) {
		double a = x->obs[j], b = row[x->ref->c_obs + j];
		bool trig = (uint32_t)j >= x->trig_first && (uint32_t)j < x->trig_first + x->trig_count;
		double d = fabs(a - b);
		if (isnan(d) && !same_bits(a, b))
			d = INFINITY;
		if (trig) {
			x->res->trig_values++;
			x->res->trig_diff += !same_bits(a, b);
			if (d > x->res->max_trig_abs)
				x->res->max_trig_abs = d;
			x->bad |= d > MJREF_TRIG_TOL;
		} else {
			x->res->obs_values++;
			if (!same_bits(a, b)) {
				x->res->obs_diff++;
				x->bad = true;
			}
			if (d > x->res->max_obs_abs)
				x->res->max_obs_abs = d;
		}
	}
}

static void compare_info(struct ctx *x, const sr_env_spec *spec, const void *state,
			 const double *row)
{
	int n = bench_mujoco_info(spec, state, NULL, x->info, 64);

	for (int k = 0; k < x->ref->n_info; k++) {
		double b = row[x->ref->c_info[k]];
		if (isnan(b))
			continue; /* not a term of this row (reset rows give fewer) */
		int i = x->info_map[k];
		x->res->info_values++;
		if (i < 0 || i >= n) {
			x->bad = true;
			continue;
		}
		double e = rel_err(x->info[i], b);
		x->res->info_diff += !same_bits(x->info[i], b);
		if (e > x->res->max_info_rel)
			x->res->max_info_rel = e;
		x->bad |= e > MJREF_REL_TOL;
	}
}

int mjref_check(const sr_env_spec *spec, const struct mjref *ref, int mode,
		uint32_t time_limit, struct mjref_result *res)
{
	const size_t od = spec->obs_dim, asz = sr_env_action_size(spec);
	struct ctx x = {.spec = spec, .ref = ref, .res = res};
	double phys[128];
	void *state = NULL;
	float act[64];
	int err = 0;

	memset(res, 0, sizeof(*res));
	res->first_bad_row = SIZE_MAX;
	if (!time_limit)
		time_limit = spec->max_episode_steps;
	x.n_names = bench_mujoco_info(spec, NULL, &x.names, NULL, 0);
	if (x.n_names < 0 || spec->obs_dtype != SR_DTYPE_FLOAT64)
		return fail(-EINVAL, "env '%s' is not a MuJoCo env", spec->id);
	if ((uint32_t)ref->nobs != od || (uint32_t)ref->nu != spec->act_dim ||
	    (uint32_t)(ref->nq + ref->nv) != spec->n_phys || spec->n_phys > 128 ||
	    asz > sizeof(act))
		return fail(-EINVAL, "the file does not fit env '%s' (%d obs, %d actions, %d+%d "
			    "qpos/qvel; the env has %u, %u, %u)", spec->id, ref->nobs, ref->nu,
			    ref->nq, ref->nv, spec->obs_dim, spec->act_dim, spec->n_phys);
	bench_mujoco_trig(spec, &x.trig_first, &x.trig_count);
	x.info_map = calloc((size_t)ref->n_info + 1, sizeof(int));
	x.obs = malloc(od * sizeof(double));
	x.info = malloc(64 * sizeof(double));
	state = aligned_alloc(64, 64);
	if (!x.info_map || !x.obs || !x.info || !state) {
		err = fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (int k = 0; k < ref->n_info; k++) {
		x.info_map[k] = -1;
		for (int i = 0; i < x.n_names; i++)
			if (!strcmp(ref->info_names[k], x.names[i]))
				x.info_map[k] = i;
		res->info_unknown += x.info_map[k] < 0;
	}
	if (sr_env_create_instances(spec, state, 1)) {
		err = fail(-ENOMEM, "cannot create an instance of '%s'", spec->id);
		goto out;
	}
	bool live = false;
	uint32_t t_now = 0;
	for (size_t r = 0; r < ref->rows; r++) {
		const double *row = ref->cell + r * ref->cols;
		double t = row[ref->c_t];

		x.bad = false;
		if (t == 0) { /* a reset row */
			for (int j = 0; j < ref->nq; j++)
				phys[j] = row[ref->c_qpos + j];
			for (int j = 0; j < ref->nv; j++)
				phys[ref->nq + j] = row[ref->c_qvel + j];
			if (mode == MJREF_SEEDED) {
				double s = row[ref->c_seed];
				if (!(s >= 0 && s < 0x1p63)) {
					err = fail(-EINVAL, "row %zu: seed %g", r + 2, s);
					goto destroy;
				}
				spec->seed(spec, state, 1, (uint64_t)s, 0);
				spec->reset(spec, state, 1, (float *)(void *)x.obs);
				double now[128];
				spec->get_phys(spec, state, now);
				for (uint32_t j = 0; j < spec->n_phys; j++)
					if (!same_bits(now[j], phys[j])) {
						res->reset_state_diff++;
						x.bad = true;
					}
			} else {
				spec->set_phys(spec, state, phys);
				spec->observe(spec, state, (float *)(void *)x.obs);
			}
			compare_obs(&x, row);
			compare_info(&x, spec, state, row);
			res->episodes++;
			live = true;
			t_now = 0;
		} else {
			if (!live || t != (double)(t_now + 1)) {
				err = fail(-EINVAL, "row %zu: step t=%g does not follow t=%u of its "
					   "episode", r + 2, t, t_now);
				goto destroy;
			}
			for (int j = 0; j < ref->nu; j++)
				act[j] = (float)row[ref->c_act + j];
			double rew;
			uint8_t term;
			spec->step(spec, state, 1, act, (float *)(void *)x.obs, &rew, &term);
			t_now++;
			res->steps++;
			compare_obs(&x, row);
			compare_info(&x, spec, state, row);
			double rr = row[ref->c_reward], e = rel_err(rew, rr);
			res->rew_diff += !same_bits(rew, rr);
			if (e > res->max_rew_rel)
				res->max_rew_rel = e;
			x.bad |= e > MJREF_REL_TOL;
			bool trunc = t_now >= time_limit;
			if ((double)term != row[ref->c_term] || (double)trunc != row[ref->c_trunc]) {
				res->flag_mismatch++;
				x.bad = true;
			}
			if (row[ref->c_term] != 0 || row[ref->c_trunc] != 0)
				live = false;
		}
		if (x.bad && res->first_bad_row == SIZE_MAX)
			res->first_bad_row = r;
	}
destroy:
	sr_env_destroy_instances(spec, state, 1);
out:
	free(state);
	free(x.info_map);
	free(x.obs);
	free(x.info);
	return err;
}

bool mjref_ok(const struct mjref_result *res)
{
	return res->first_bad_row == SIZE_MAX && res->info_unknown == 0;
}
