/*
 * The synthetic MLP policy (mlp.h) on the host, and its dispatch to a
 * device batch.
 *
 * Weights: Glorot-uniform, drawn layer by layer from sr_rng seeded with
 * (seed, layer); biases small and nonzero so that relu units are not all
 * dead. The same seed gives the same weights on every machine.
 *
 * Evaluation order is fixed (row by row, outputs in order, inputs summed
 * from 0 up), the tanh is mlp_tanh (mlp_priv.h), and the sources build
 * with -ffp-contract=off, so the result is reproducible bit for bit, and
 * the CUDA kernels (mlp_cuda.cu) compute the same bits.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_priv.h"

struct mlp {
	struct mlp_desc d;
	float *wt;      /* each layer's weights transposed: W[in][out], then bias */
	float *scale, *shift;
	float *scratch; /* 2 * max_dim floats */
	uint64_t macs;
	/* The device batches last seen come from @dev (kind, index, rows);
	 * on a GPU the weights live in @cuda. */
	const sr_device *dev;
	sr_device_info info;
	struct mlp_cuda *cuda;
};

static _Thread_local char mlp_msg[256];

int mlp_errorf(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mlp_msg, sizeof(mlp_msg), fmt, ap);
	va_end(ap);
	return err;
}

const char *mlp_error(void)
{
	return mlp_msg;
}

int mlp_parse(const char *desc, struct mlp_opts *o)
{
	unsigned long w, dd;
	char *end;
	const char *s;

	if (!desc || !o)
		return mlp_errorf(-EINVAL, "policy: NULL argument");
	if (strncmp(desc, "mlp:", 4) != 0)
		return mlp_errorf(-EINVAL, "policy '%s': expected mlp:WxD[:tanh|:relu]", desc);
	s = desc + 4;
	errno = 0;
	w = strtoul(s, &end, 10);
	if (errno || end == s || *end != 'x' || *s == '-')
		return mlp_errorf(-EINVAL, "policy '%s': expected mlp:WxD (W = width)", desc);
	s = end + 1;
	dd = strtoul(s, &end, 10);
	if (errno || end == s || *s == '-')
		return mlp_errorf(-EINVAL, "policy '%s': expected mlp:WxD (D = depth)", desc);
	if (w < 1 || w > 8192)
		return mlp_errorf(-EINVAL, "policy '%s': width %lu not in [1, 8192]", desc, w);
	if (dd < 1 || dd > MLP_MAX_LAYERS - 2)
		return mlp_errorf(-EINVAL, "policy '%s': depth %lu not in [1, %d]", desc, dd,
				  MLP_MAX_LAYERS - 2);
	o->activation = MLP_TANH;
	if (*end == ':') {
		if (!strcmp(end + 1, "relu"))
			o->activation = MLP_RELU;
		else if (strcmp(end + 1, "tanh") != 0)
			return mlp_errorf(-EINVAL, "policy '%s': activation must be tanh or relu",
					  desc);
	} else if (*end) {
		return mlp_errorf(-EINVAL, "policy '%s': junk after the depth", desc);
	}
	o->width = (uint32_t)w;
	o->depth = (uint32_t)dd;
	return 0;
}

void mlp_destroy(struct mlp *p)
{
	if (!p)
		return;
	mlp_cuda_free(p->cuda);
	free(p->wt);
	free(p->scale);
	free(p->shift);
	free(p->scratch);
	free(p);
}

int mlp_create(const sr_env_spec *spec, const struct mlp_opts *o, struct mlp **out)
{
	struct mlp *p;
	struct mlp_desc *d;
	float *w = NULL;
	uint32_t out_dim, l;
	size_t n = 0;
	sr_rng rng;

	if (!spec || !o || !out)
		return mlp_errorf(-EINVAL, "policy: NULL argument");
	*out = NULL;
	if (o->width < 1 || o->depth < 1 || o->depth > MLP_MAX_LAYERS - 2)
		return mlp_errorf(-EINVAL, "policy: width %u, depth %u out of range", o->width,
				  o->depth);
	if (o->activation != MLP_TANH && o->activation != MLP_RELU)
		return mlp_errorf(-EINVAL, "policy: unknown activation %u", o->activation);
	if (spec->obs_dim < 1)
		return mlp_errorf(-EINVAL, "policy: env has obs_dim 0");
	if (spec->act_kind == SR_SPACE_DISCRETE)
		out_dim = spec->act_n;
	else if (spec->act_kind == SR_SPACE_BOX)
		out_dim = spec->act_dim;
	else
		return mlp_errorf(-EINVAL, "policy: unknown action space kind %u", spec->act_kind);
	if (out_dim < 1)
		return mlp_errorf(-EINVAL, "policy: env has no actions");

	p = calloc(1, sizeof(*p));
	if (!p)
		return mlp_errorf(-ENOMEM, "policy: out of memory");
	d = &p->d;
	d->nlayers = o->depth + 1;
	d->dims[0] = spec->obs_dim;
	for (l = 1; l <= o->depth; l++)
		d->dims[l] = o->width;
	d->dims[d->nlayers] = out_dim;
	d->activation = o->activation;
	d->act_kind = spec->act_kind;
	d->max_dim = 0;
	for (l = 0; l <= d->nlayers; l++)
		if (d->dims[l] > d->max_dim)
			d->max_dim = d->dims[l];
	for (l = 0; l < d->nlayers; l++) {
		d->off[l] = n;
		n += (size_t)d->dims[l] * d->dims[l + 1] + d->dims[l + 1];
		p->macs += (uint64_t)d->dims[l] * d->dims[l + 1];
	}
	d->nparams = n;
	w = malloc(n * sizeof(float)); /* W[out][in] as drawn */
	p->wt = malloc(n * sizeof(float));
	p->scratch = malloc(2 * (size_t)d->max_dim * sizeof(float));
	if (!w || !p->wt || !p->scratch)
		goto err_nomem;

	for (l = 0; l < d->nlayers; l++) {
		uint32_t in = d->dims[l], on = d->dims[l + 1];
		double a = sqrt(6.0 / (double)(in + on));
		size_t k;

		sr_rng_seed(&rng, o->seed, l);
		for (k = 0; k < (size_t)in * on; k++)
			w[k] = (float)sr_rng_range(&rng, -a, a);
		for (k = 0; k < on; k++)
			w[(size_t)in * on + k] = (float)sr_rng_range(&rng, -0.1, 0.1);
		/* Transposed for the loops; biases stay after the weights. */
		for (size_t i = 0; i < in; i++)
			for (size_t j = 0; j < on; j++)
				p->wt[d->off[l] + i * on + j] = w[j * in + i];
		memcpy(p->wt + d->off[l] + (size_t)in * on, w + (size_t)in * on, on * sizeof(float));
	}

	if (spec->act_kind == SR_SPACE_BOX) {
		p->scale = malloc(out_dim * sizeof(float));
		p->shift = malloc(out_dim * sizeof(float));
		if (!p->scale || !p->shift)
			goto err_nomem;
		for (l = 0; l < out_dim; l++) {
			double lo = spec->act_low ? spec->act_low[l] : -1.0;
			double hi = spec->act_high ? spec->act_high[l] : 1.0;

			/* Unbounded boxes get [-1, 1]: a benchmark policy only
			 * needs valid actions. */
			if (!isfinite(lo) || !isfinite(hi) || hi < lo) {
				lo = -1.0;
				hi = 1.0;
			}
			p->scale[l] = (float)((hi - lo) / 2.0);
			p->shift[l] = (float)((hi + lo) / 2.0);
		}
	}
	free(w);
	w = NULL;
	d->wt = p->wt;
	d->scale = p->scale;
	d->shift = p->shift;
	*out = p;
	return 0;

err_nomem:
	free(w);
	mlp_destroy(p);
	return mlp_errorf(-ENOMEM, "policy: out of memory for %zu parameters", n);
}

uint64_t mlp_macs(const struct mlp *p)
{
	return p ? p->macs : 0;
}

size_t mlp_num_params(const struct mlp *p)
{
	return p ? p->d.nparams : 0;
}

/*
 * One dense layer for one row: y = W x + b, then the activation. @wt is W
 * transposed (W[in][out]) so the inner loop runs over outputs and
 * vectorizes without reassociating anything: each y[j] still sums its
 * products in input order, then adds the bias, exactly as the CUDA kernel
 * does. Hence O3 for this function alone (gcc's O2 does
 * not vectorize loops of unknown length; clang's does).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define SR_VECTORIZE __attribute__((optimize("O3")))
#else
#define SR_VECTORIZE
#endif
SR_VECTORIZE static void dense(const float *restrict wt, uint32_t in,
						  uint32_t on, const float *restrict x,
						  float *restrict y, int act)
{
	const float *b = wt + (size_t)in * on;

	for (uint32_t j = 0; j < on; j++)
		y[j] = 0.0f;
	for (uint32_t k = 0; k < in; k++) {
		const float *wk = wt + (size_t)k * on;
		float xk = x[k];

		for (uint32_t j = 0; j < on; j++)
			y[j] += wk[j] * xk;
	}
	for (uint32_t j = 0; j < on; j++) {
		float s = y[j] + b[j];

		if (act == 1)
			s = mlp_tanh(s);
		else if (act == 2)
			s = s > 0.0f ? s : 0.0f;
		y[j] = s;
	}
}

int mlp_forward(struct mlp *p, const float *obs, uint32_t n, void *actions)
{
	const struct mlp_desc *d;
	int hid_act;

	if (!p || (n && (!obs || !actions)))
		return mlp_errorf(-EINVAL, "policy forward: NULL argument");
	d = &p->d;
	hid_act = d->activation == MLP_RELU ? 2 : 1;
	for (uint32_t r = 0; r < n; r++) {
		const float *x = obs + (size_t)r * d->dims[0];
		float *buf[2] = {p->scratch, p->scratch + d->max_dim};
		uint32_t l, last = d->nlayers - 1, od = d->dims[d->nlayers];
		float *y = NULL;

		for (l = 0; l < d->nlayers; l++) {
			y = buf[l & 1];
			dense(p->wt + d->off[l], d->dims[l], d->dims[l + 1], x, y,
			      l == last ? 0 : hid_act);
			x = y;
		}
		if (d->act_kind == SR_SPACE_DISCRETE) {
			int32_t best = 0;

			/* First maximum wins, as in the CUDA kernel. NaN never
			 * wins: obs are finite, and so are the weights. */
			for (uint32_t j = 1; j < od; j++)
				if (y[j] > y[best])
					best = (int32_t)j;
			((int32_t *)actions)[r] = best;
		} else {
			float *a = (float *)actions + (size_t)r * od;

			for (uint32_t j = 0; j < od; j++)
				a[j] = p->shift[j] + p->scale[j] * mlp_tanh(y[j]);
		}
	}
	return 0;
}

/* Which device the batches come from; a new device drops the weights
 * uploaded for the previous one. */
static int use_device(struct mlp *p, const sr_device *d)
{
	int err;

	if (p->dev == d)
		return 0;
	mlp_cuda_free(p->cuda);
	p->cuda = NULL;
	p->dev = NULL;
	err = sr_device_info_get(d, &p->info);
	if (err)
		return mlp_errorf(err, "mlp: %s", sr_last_error());
	if (p->info.obs_dim != p->d.dims[0] || p->info.act_kind != p->d.act_kind)
		return mlp_errorf(-EINVAL,
				  "mlp: the device holds obs_dim %u, action kind %u; "
				  "the policy wants %u, %u",
				  p->info.obs_dim, p->info.act_kind, p->d.dims[0], p->d.act_kind);
	if (p->info.kind == SR_DEVICE_CUDA) {
		err = mlp_cuda_upload(&p->d, p->info.index, p->info.max_rows, &p->cuda);
		if (err)
			return err;
	}
	p->dev = d;
	return 0;
}

int mlp_forward_batch(struct mlp *p, sr_device *d, sr_device_batch *b)
{
	int err;

	if (!p || !d || !b)
		return mlp_errorf(-EINVAL, "mlp: NULL argument");
	err = use_device(p, d);
	if (err)
		return err;
	if (b->obs_dim != p->d.dims[0] || b->n > p->info.max_rows)
		return mlp_errorf(-EINVAL, "mlp: batch of %u rows of %u floats on a device of "
					   "%u rows, policy obs_dim %u",
				  b->n, b->obs_dim, p->info.max_rows, p->d.dims[0]);
	if (p->cuda)
		return mlp_cuda_forward(p->cuda, b->stream, b->obs, b->actions, b->n);
	return mlp_forward(p, b->obs, b->n, b->actions);
}
