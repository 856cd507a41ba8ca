/* Reference trajectory CSVs: load and replay (see refcsv.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refcsv.h"

static _Thread_local char refcsv_msg[512];

__attribute__((format(printf, 2, 3))) static int refcsv_errorf(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(refcsv_msg, sizeof(refcsv_msg), fmt, ap);
	va_end(ap);
	return err;
}

const char *refcsv_error(void)
{
	return refcsv_msg;
}

#define MAX_COLS 64
/* A header of 64 columns of %.17g numbers is under 2 KiB. */
#define REFCSV_MAX_LINE 65536
#define REFCSV_MAX_ROWS (1 << 26)

void refcsv_free(struct refcsv *c)
{
	if (!c)
		return;
	free(c->episode);
	free(c->t);
	free(c->phys);
	free(c->act_i);
	free(c->act_f);
	free(c->obs);
	free(c->reward);
	free(c->term);
	free(c->trunc);
	memset(c, 0, sizeof(*c));
}

/* One line (with its '\n') into *buf: its length, -1 at the end of the
 * file, -2 when it is longer than REFCSV_MAX_LINE (a file of one endless
 * line, /dev/zero, must not take all the memory), -3 on a read error. */
static long read_line(FILE *f, char **buf, size_t *cap)
{
	size_t n = 0;
	int ch = EOF;

	while ((ch = getc_unlocked(f)) != EOF) {
		if (n + 2 > *cap) {
			size_t nc = *cap ? 2 * *cap : 256;
			char *p;

			if (*cap >= REFCSV_MAX_LINE)
				return -2;
			if (nc > REFCSV_MAX_LINE)
				nc = REFCSV_MAX_LINE;
			p = realloc(*buf, nc);
			if (!p)
				return -3;
			*buf = p;
			*cap = nc;
		}
		(*buf)[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (ferror(f))
		return -3;
	if (n == 0)
		return -1;
	(*buf)[n] = '\0';
	return (long)n;
}

static int split(char *line, char **tok, int max)
{
	int n = 0;
	char *p = line;

	line[strcspn(line, "\r\n")] = '\0';
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

static bool parse_double(const char *s, double *v)
{
	char *end;

	if (!*s)
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return *end == '\0' && errno != ERANGE;
}

/* float32 values printed with %.9g: parse as float32 (see refdata README). */
static bool parse_float(const char *s, float *v)
{
	char *end;

	if (!*s)
		return false;
	errno = 0;
	*v = strtof(s, &end);
	return *end == '\0';
}

static bool parse_int(const char *s, long long lo, long long hi, int64_t *v)
{
	char *end;
	long long x;

	if (!*s)
		return false;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (*end || errno || x < lo || x > hi)
		return false;
	*v = x;
	return true;
}

static int grow(struct refcsv *c, size_t cap)
{
	void *p;

#define GROW(field, count)                                                                 \
	do {                                                                               \
		p = realloc(c->field, (count) * sizeof(*c->field) + 1);                    \
		if (!p)                                                                    \
			return -ENOMEM;                                                    \
		c->field = p;                                                              \
	} while (0)
	GROW(episode, cap);
	GROW(t, cap);
	GROW(phys, cap * c->n_phys);
	if (c->discrete)
		GROW(act_i, cap);
	else
		GROW(act_f, cap * c->act_dim);
	GROW(obs, cap * c->obs_dim);
	GROW(reward, cap);
	GROW(term, cap);
	GROW(trunc, cap);
#undef GROW
	return 0;
}

int refcsv_load(const char *path, const sr_env_spec *spec, struct refcsv *out)
{
	int c_ep = -1, c_t = -1, c_act = -1, c_rew = -1, c_term = -1, c_trunc = -1;
	int c_state[MAX_COLS], c_obs[MAX_COLS], n_state = 0, n_obs = 0, ncols, err;
	char *line = NULL, *tok[MAX_COLS + 1];
	const char *unexpected = NULL;
	size_t len = 0, cap = 0, lineno = 1;
	struct refcsv c;
	long got;
	FILE *f;

	memset(&c, 0, sizeof(c));
	memset(out, 0, sizeof(*out));
	f = fopen(path, "r");
	if (!f) {
		err = -errno;
		return refcsv_errorf(err, "cannot open '%s': %s", path, strerror(-err));
	}
	got = read_line(f, &line, &len);
	if (got == -2) {
		err = refcsv_errorf(-E2BIG, "%s:1: line longer than %d bytes", path,
				    REFCSV_MAX_LINE);
		goto out;
	} else if (got == -3) {
		err = refcsv_errorf(-EIO, "%s:1: read error or out of memory", path);
		goto out;
	} else if (got < 0) {
		err = refcsv_errorf(-EINVAL, "%s: empty file (expected a CSV header)", path);
		goto out;
	}
	ncols = split(line, tok, MAX_COLS);
	if (ncols < 0) {
		err = refcsv_errorf(-EINVAL, "%s:1: more than %d columns", path, MAX_COLS);
		goto out;
	}
	for (int i = 0; i < ncols; i++) {
		const char *h = tok[i];
		if (!strcmp(h, "episode"))
			c_ep = i;
		else if (!strcmp(h, "t"))
			c_t = i;
		else if (!strcmp(h, "action"))
			c_act = i;
		else if (!strcmp(h, "reward"))
			c_rew = i;
		else if (!strcmp(h, "terminated"))
			c_term = i;
		else if (!strcmp(h, "truncated"))
			c_trunc = i;
		else if (!strncmp(h, "obs_", 4))
			c_obs[n_obs++] = i;
		else if (c_t >= 0 && c_act < 0)
			c_state[n_state++] = i;
		else if (!unexpected)
			unexpected = h;
	}
	if (c_ep < 0 || c_t < 0 || c_act < 0 || c_rew < 0 || c_term < 0 || c_trunc < 0) {
		err = refcsv_errorf(-EINVAL,
				 "%s:1: not a reference CSV: the header needs episode, t, <state>, "
				 "action, obs_*, reward, terminated, truncated",
				 path);
		goto out;
	}
	if (unexpected) {
		err = refcsv_errorf(-EINVAL, "%s:1: unexpected column '%s'", path, unexpected);
		goto out;
	}
	if ((uint32_t)n_obs != spec->obs_dim || (uint32_t)n_state != spec->n_phys) {
		err = refcsv_errorf(-EINVAL,
				 "%s: %d state and %d obs columns do not fit env '%s' (%u state "
				 "values, obs_dim %u)",
				 path, n_state, n_obs, spec->id, spec->n_phys, spec->obs_dim);
		goto out;
	}
	c.n_phys = spec->n_phys;
	c.obs_dim = spec->obs_dim;
	c.discrete = spec->act_kind == SR_SPACE_DISCRETE;
	c.act_dim = spec->act_dim;
	if (!c.discrete && c.act_dim != 1) {
		err = refcsv_errorf(-EINVAL, "%s: one action column cannot hold env '%s''s %u-dim action",
				 path, spec->id, c.act_dim);
		goto out;
	}

	while ((got = read_line(f, &line, &len)) >= 0) {
		size_t r = c.rows;
		int64_t v;
		int n;

		lineno++;
		if (c.rows >= REFCSV_MAX_ROWS) {
			err = refcsv_errorf(-E2BIG, "%s:%zu: more than %d data rows", path, lineno,
					    REFCSV_MAX_ROWS);
			goto out;
		}
		if (line[0] == '\n' || line[0] == '\0')
			continue;
		if (r == cap) {
			cap = cap ? 2 * cap : 1024;
			err = grow(&c, cap);
			if (err) {
				err = refcsv_errorf(err, "%s: out of memory", path);
				goto out;
			}
		}
		n = split(line, tok, MAX_COLS);
		if (n != ncols) {
			err = refcsv_errorf(-EINVAL, "%s:%zu: %d fields, the header has %d", path, lineno,
					 n < 0 ? MAX_COLS + 1 : n, ncols);
			goto out;
		}
#define BAD(what, s)                                                                       \
	do {                                                                               \
		err = refcsv_errorf(-EINVAL, "%s:%zu: bad %s '%s'", path, lineno, what, s);   \
		goto out;                                                                  \
	} while (0)
		if (!parse_int(tok[c_ep], 0, INT32_MAX, &c.episode[r]))
			BAD("episode", tok[c_ep]);
		if (!parse_int(tok[c_t], 0, INT32_MAX, &c.t[r]))
			BAD("t", tok[c_t]);
		for (int k = 0; k < n_state; k++)
			if (!parse_double(tok[c_state[k]], &c.phys[r * c.n_phys + k]))
				BAD("state value", tok[c_state[k]]);
		if (c.discrete) {
			/* A reset row's action (-1 in the reference) is ignored. */
			if (!parse_int(tok[c_act], c.t[r] == 0 ? INT32_MIN : 0,
				       c.t[r] == 0 ? INT32_MAX : (long long)spec->act_n - 1, &v))
				BAD("action", tok[c_act]);
			c.act_i[r] = (int32_t)v;
		} else {
			if (!parse_float(tok[c_act], &c.act_f[r]) ||
			    (c.t[r] > 0 && isnan(c.act_f[r])))
				BAD("action", tok[c_act]);
		}
		for (int k = 0; k < n_obs; k++)
			if (!parse_float(tok[c_obs[k]], &c.obs[r * c.obs_dim + k]))
				BAD("obs value", tok[c_obs[k]]);
		if (!parse_double(tok[c_rew], &c.reward[r]) || isnan(c.reward[r]))
			BAD("reward", tok[c_rew]);
		if (!parse_int(tok[c_term], 0, 1, &v))
			BAD("terminated", tok[c_term]);
		c.term[r] = (uint8_t)v;
		if (!parse_int(tok[c_trunc], 0, 1, &v))
			BAD("truncated", tok[c_trunc]);
		c.trunc[r] = (uint8_t)v;
#undef BAD
		/* Structure: an episode starts with t = 0, and steps follow it. */
		if (c.t[r] > 0 &&
		    (r == 0 || c.episode[r] != c.episode[r - 1] || c.t[r] != c.t[r - 1] + 1)) {
			err = refcsv_errorf(-EINVAL,
					 "%s:%zu: episode %lld t=%lld does not follow the previous "
					 "row (episodes start at t=0, steps are consecutive)",
					 path, lineno, (long long)c.episode[r], (long long)c.t[r]);
			goto out;
		}
		c.rows++;
	}
	if (got == -2) {
		err = refcsv_errorf(-E2BIG, "%s:%zu: line longer than %d bytes", path, lineno + 1,
				    REFCSV_MAX_LINE);
		goto out;
	} else if (got == -3) {
		err = refcsv_errorf(-EIO, "%s:%zu: read error or out of memory", path, lineno + 1);
		goto out;
	}
	if (c.rows == 0) {
		err = refcsv_errorf(-EINVAL, "%s: no data rows", path);
		goto out;
	}
	*out = c;
	memset(&c, 0, sizeof(c));
	err = 0;
out:
	free(line);
	fclose(f);
	refcsv_free(&c);
	return err;
}

static void compare(const struct refcsv *c, size_t r, const float *obs, double rew,
		    uint8_t term, uint8_t trunc, struct refcheck *res)
{
	double oe = 0, re;
	bool bad = false;

	for (uint32_t k = 0; k < c->obs_dim; k++) {
		double e = fabs((double)obs[k] - (double)c->obs[r * c->obs_dim + k]);
		if (!(e <= oe)) /* NaN counts as the worst error */
			oe = isnan(e) ? INFINITY : e;
	}
	re = fabs(rew - c->reward[r]) / fmax(1.0, fabs(c->reward[r]));
	if (isnan(re))
		re = INFINITY;
	if (oe > res->max_obs_err)
		res->max_obs_err = oe;
	if (re > res->max_rew_err)
		res->max_rew_err = re;
	if (oe > REF_OBS_TOL) {
		res->obs_fail++;
		bad = true;
	}
	if (re > REF_REW_TOL) {
		res->rew_fail++;
		bad = true;
	}
	if (term != c->term[r] || trunc != c->trunc[r]) {
		res->flag_mismatches++;
		bad = true;
	}
	if (bad && r < res->first_bad_row)
		res->first_bad_row = r;
}

static const void *action_of(const struct refcsv *c, size_t r)
{
	return c->discrete ? (const void *)&c->act_i[r] : (const void *)&c->act_f[r * c->act_dim];
}

/* A reference row's state that the env could never be in (a corrupt or
 * hostile CSV: NaN, huge angles) is refused before it is stepped, through
 * the env's own check_state hook. */
static bool bad_state(const sr_env_spec *spec, const void *st, const struct refcsv *c, size_t r)
{
	if (!spec->check_state || spec->check_state(spec, st) == 0)
		return false;
	refcsv_errorf(-EINVAL,
		      "data row %zu (episode %lld, t %lld): a state env '%s' can never be in "
		      "(non-finite or out of its bounds)",
		      r + 1, (long long)c->episode[r], (long long)c->t[r], spec->id);
	return true;
}

int refcsv_check(const sr_env_spec *spec, const struct refcsv *c, unsigned modes,
		 struct refcheck *res)
{
	double phys[64], next[64];
	float *obs;
	void *st;
	int err = 0;

	memset(res, 0, sizeof(*res));
	res->first_bad_row = SIZE_MAX;
	res->rows = c->rows;
	if (c->n_phys != spec->n_phys || c->obs_dim != spec->obs_dim || c->n_phys > 64 ||
	    !spec->set_phys)
		return refcsv_errorf(-EINVAL, "reference data does not fit env '%s'", spec->id);
	st = aligned_alloc(64, (spec->state_size + 63) / 64 * 64);
	obs = malloc(sizeof(float) * spec->obs_dim);
	if (!st || !obs) {
		free(st);
		free(obs);
		return refcsv_errorf(-ENOMEM, "out of memory");
	}
	spec->seed(spec, st, 1, 0, 0);

	if (modes & REFCHECK_ONESTEP) {
		for (size_t r = 0; r < c->rows; r++) {
			double rew = 0;
			uint8_t term = 0, trunc;

			for (uint32_t k = 0; k < c->n_phys; k++)
				phys[k] = c->phys[r * c->n_phys + k];
			spec->set_phys(spec, st, phys);
			if (bad_state(spec, st, c, r)) {
				err = -EINVAL;
				goto out;
			}
			if (c->t[r] == 0) {
				spec->observe(spec, st, obs);
				compare(c, r, obs, 0.0, 0, 0, res);
				continue;
			}
			spec->step(spec, st, 1, action_of(c, r), obs, &rew, &term);
			/* The runtime's elapsed counter was t-1 before this step. */
			trunc = spec->max_episode_steps && (uint64_t)c->t[r] >= spec->max_episode_steps;
			compare(c, r, obs, rew, term, trunc, res);
			if (r + 1 < c->rows && c->t[r + 1] == c->t[r] + 1) {
				spec->get_phys(spec, st, next);
				for (uint32_t k = 0; k < c->n_phys; k++) {
					double e = fabs(next[k] - c->phys[(r + 1) * c->n_phys + k]);
					if (isnan(e) || e > res->max_state_err)
						res->max_state_err = isnan(e) ? INFINITY : e;
				}
			}
		}
	}
	if (modes & REFCHECK_ROLLOUT) {
		uint64_t elapsed = 0;

		for (size_t r = 0; r < c->rows; r++) {
			double rew = 0;
			uint8_t term = 0, trunc;

			if (c->t[r] == 0) {
				for (uint32_t k = 0; k < c->n_phys; k++)
					phys[k] = c->phys[r * c->n_phys + k];
				spec->set_phys(spec, st, phys);
				if (bad_state(spec, st, c, r)) {
					err = -EINVAL;
					goto out;
				}
				spec->observe(spec, st, obs);
				elapsed = 0;
				compare(c, r, obs, 0.0, 0, 0, res);
				continue;
			}
			spec->step(spec, st, 1, action_of(c, r), obs, &rew, &term);
			elapsed++;
			trunc = spec->max_episode_steps && elapsed >= spec->max_episode_steps;
			compare(c, r, obs, rew, term, trunc, res);
		}
	}
	err = 0;
out:
	free(st);
	free(obs);
	return err;
}

bool refcheck_ok(const struct refcheck *res)
{
	return res->obs_fail == 0 && res->rew_fail == 0 && res->flag_mismatches == 0 &&
	       res->max_obs_err <= REF_OBS_TOL && res->max_rew_err <= REF_REW_TOL;
}
