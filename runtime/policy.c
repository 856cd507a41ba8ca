/*
 * The synthetic MLP policy on the host: obs -> D hidden layers of width W
 * (tanh or relu) -> logits (argmax) or box outputs (tanh scaled to the
 * action bounds). Benchmarks use it to close the loop env -> ring -> device
 * -> policy -> actions -> env with a cost that scales with W and D; the CUDA
 * kernels in device_cuda.cu compute the same function.
 *
 * Weights: Glorot-uniform, drawn layer by layer from sr_rng seeded with
 * (seed, layer); biases small and nonzero so that relu units are not all
 * dead. The same seed gives the same weights on every machine.
 *
 * Evaluation order is fixed (row by row, outputs in order, inputs summed
 * from 0 up), the tanh is sr__tanh (device_priv.h), and the library is
 * built with -ffp-contract=off, so the result is reproducible bit for bit,
 * and the CUDA kernels compute the same bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_priv.h"
#include "internal.h"

struct sr_policy {
	struct sr__policy_desc d;
	float *params;
	float *wt;      /* host copy of each layer's weights transposed: W[in][out] */
	float *scale, *shift;
	float *scratch; /* 2 * max_dim floats */
	uint64_t macs;
};

int sr_policy_parse(const char *desc, sr_policy_opts *o)
{
	unsigned long w, dd;
	char *end;
	const char *s;

	if (!desc || !o)
		return sr__errorf(-EINVAL, "policy: NULL argument");
	if (strncmp(desc, "mlp:", 4) != 0)
		return sr__errorf(-EINVAL, "policy '%s': expected mlp:WxD[:tanh|:relu]", desc);
	s = desc + 4;
	errno = 0;
	w = strtoul(s, &end, 10);
	if (errno || end == s || *end != 'x' || *s == '-')
		return sr__errorf(-EINVAL, "policy '%s': expected mlp:WxD (W = width)", desc);
	s = end + 1;
	dd = strtoul(s, &end, 10);
	if (errno || end == s || *s == '-')
		return sr__errorf(-EINVAL, "policy '%s': expected mlp:WxD (D = depth)", desc);
	if (w < 1 || w > 8192)
		return sr__errorf(-EINVAL, "policy '%s': width %lu not in [1, 8192]", desc, w);
	if (dd < 1 || dd > SR__POLICY_MAX_LAYERS - 2)
		return sr__errorf(-EINVAL, "policy '%s': depth %lu not in [1, %d]", desc, dd,
				  SR__POLICY_MAX_LAYERS - 2);
	o->activation = SR_ACT_TANH;
	if (*end == ':') {
		if (!strcmp(end + 1, "relu"))
			o->activation = SR_ACT_RELU;
		else if (strcmp(end + 1, "tanh") != 0)
			return sr__errorf(-EINVAL, "policy '%s': activation must be tanh or relu",
					  desc);
	} else if (*end) {
		return sr__errorf(-EINVAL, "policy '%s': junk after the depth", desc);
	}
	o->width = (uint32_t)w;
	o->depth = (uint32_t)dd;
	return 0;
}

void sr_policy_destroy(sr_policy *p)
{
	if (!p)
		return;
	free(p->params);
	free(p->wt);
	free(p->scale);
	free(p->shift);
	free(p->scratch);
	free(p);
}

int sr_policy_create(const sr_env_spec *spec, const sr_policy_opts *o, sr_policy **out)
{
	struct sr_policy *p;
	struct sr__policy_desc *d;
	uint32_t out_dim, l;
	size_t n = 0;
	sr_rng rng;

	if (!spec || !o || !out)
		return sr__errorf(-EINVAL, "policy: NULL argument");
	*out = NULL;
	if (o->flags)
		return sr__errorf(-EINVAL, "policy: unknown flags 0x%x", o->flags);
	if (o->width < 1 || o->depth < 1 || o->depth > SR__POLICY_MAX_LAYERS - 2)
		return sr__errorf(-EINVAL, "policy: width %u, depth %u out of range", o->width,
				  o->depth);
	if (o->activation != SR_ACT_TANH && o->activation != SR_ACT_RELU)
		return sr__errorf(-EINVAL, "policy: unknown activation %u", o->activation);
	if (spec->obs_dim < 1)
		return sr__errorf(-EINVAL, "policy: env has obs_dim 0");
	if (spec->act_kind == SR_SPACE_DISCRETE)
		out_dim = spec->act_n;
	else if (spec->act_kind == SR_SPACE_BOX)
		out_dim = spec->act_dim;
	else
		return sr__errorf(-EINVAL, "policy: unknown action space kind %u", spec->act_kind);
	if (out_dim < 1)
		return sr__errorf(-EINVAL, "policy: env has no actions");

	p = calloc(1, sizeof(*p));
	if (!p)
		return sr__errorf(-ENOMEM, "policy: out of memory");
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
	p->params = malloc(n * sizeof(float));
	p->wt = malloc(n * sizeof(float));
	p->scratch = malloc(2 * (size_t)d->max_dim * sizeof(float));
	if (!p->params || !p->wt || !p->scratch)
		goto err_nomem;

	for (l = 0; l < d->nlayers; l++) {
		uint32_t in = d->dims[l], on = d->dims[l + 1];
		double a = sqrt(6.0 / (double)(in + on));
		float *w = p->params + d->off[l];
		size_t k;

		sr_rng_seed(&rng, o->seed, l);
		for (k = 0; k < (size_t)in * on; k++)
			w[k] = (float)sr_rng_range(&rng, -a, a);
		for (k = 0; k < on; k++)
			w[(size_t)in * on + k] = (float)sr_rng_range(&rng, -0.1, 0.1);
		/* Transposed for the host loop; biases stay after the weights. */
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
	d->params = p->params;
	d->wt = p->wt;
	d->scale = p->scale;
	d->shift = p->shift;
	*out = p;
	return 0;

err_nomem:
	sr_policy_destroy(p);
	return sr__errorf(-ENOMEM, "policy: out of memory for %zu parameters", n);
}

const struct sr__policy_desc *sr__policy_desc(const sr_policy *p)
{
	return &p->d;
}

uint64_t sr_policy_macs(const sr_policy *p)
{
	return p ? p->macs : 0;
}

size_t sr_policy_num_params(const sr_policy *p)
{
	return p ? p->d.nparams : 0;
}

/*
 * One dense layer for one row: y = W x + b, then the activation. @wt is W
 * transposed (W[in][out]) so the inner loop runs over outputs and
 * vectorizes without reassociating anything: each y[j] still sums its
 * products in input order, then adds the bias, exactly as the CUDA kernel
 * does with W[out][in]. Hence O3 for this function alone (gcc's O2 does
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
			s = sr__tanh(s);
		else if (act == 2)
			s = s > 0.0f ? s : 0.0f;
		y[j] = s;
	}
}

int sr_policy_forward(sr_policy *p, const float *obs, uint32_t n, void *actions)
{
	const struct sr__policy_desc *d;
	int hid_act;

	if (!p || (n && (!obs || !actions)))
		return sr__errorf(-EINVAL, "policy forward: NULL argument");
	d = &p->d;
	hid_act = d->activation == SR_ACT_RELU ? 2 : 1;
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
				a[j] = p->shift[j] + p->scale[j] * sr__tanh(y[j]);
		}
	}
	return 0;
}
