/*
 * Host device: a batch is a view of the ring columns when its rows are one
 * contiguous, non-wrapping range of slots, else a copy into staging
 * buffers (per column: one or two memcpy for a wrapping range, a gather
 * for a list of slots).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "internal.h"

struct host_priv {
	void *mem;
	float *obs, *reward, *final_obs;
	uint8_t *term, *trunc;
	uint32_t *env_id;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int host_batch(struct sr__device *dev, const struct sr__batch_req *req, sr_batch *out)
{
	struct host_priv *h = dev->priv;
	sr_ring *r = dev->cfg.ring;
	uint64_t cap = sr_ring_capacity(r), mask = cap - 1;
	uint32_t od = dev->cfg.obs_dim;
	const float *obs = sr_ring_obs_col(r), *rew = sr_ring_reward_col(r);
	const uint8_t *term = sr_ring_terminated_col(r), *trunc = sr_ring_truncated_col(r);
	const uint32_t *env = sr_ring_env_id_col(r);
	uint64_t t0;

	if (req->n > dev->cfg.max_rows)
		return sr__errorf(-EINVAL, "batch of %u rows > staging size %u", req->n,
				  dev->cfg.max_rows);
	out->n = req->n;
	out->obs_dim = od;
	out->final_obs = dev->cfg.final_obs ? req->final_obs : NULL;
	if (!req->seqs && (req->first_seq & mask) + req->n <= cap) {
		/* Zero copy: the rows are the ring's own slots. */
		uint64_t s = req->first_seq & mask;
		out->obs = obs + s * od;
		out->reward = rew + s;
		out->terminated = term + s;
		out->truncated = trunc + s;
		out->env_id = env + s;
		out->first_seq = req->first_seq;
		return 0;
	}
	t0 = now_ns();
	if (!req->seqs) {
		/* Wrapping range: two pieces per column. */
		uint64_t s = req->first_seq & mask;
		uint32_t a = (uint32_t)(cap - s), b = req->n - a;
		memcpy(h->obs, obs + s * od, (size_t)a * od * sizeof(float));
		memcpy(h->obs + (size_t)a * od, obs, (size_t)b * od * sizeof(float));
		memcpy(h->reward, rew + s, a * sizeof(float));
		memcpy(h->reward + a, rew, b * sizeof(float));
		memcpy(h->term, term + s, a);
		memcpy(h->term + a, term, b);
		memcpy(h->trunc, trunc + s, a);
		memcpy(h->trunc + a, trunc, b);
		memcpy(h->env_id, env + s, a * sizeof(uint32_t));
		memcpy(h->env_id + a, env, b * sizeof(uint32_t));
	} else {
		sr__gather_rows(r, req->seqs, req->n, h->obs, h->reward, h->term, h->trunc,
				h->env_id);
	}
	out->obs = h->obs;
	out->reward = h->reward;
	out->terminated = h->term;
	out->truncated = h->trunc;
	out->env_id = h->env_id;
	out->first_seq = UINT64_MAX;
	dev->bytes_copied += (uint64_t)req->n * (od * sizeof(float) + sizeof(float) + 2 +
						  sizeof(uint32_t));
	dev->ns_copy += now_ns() - t0;
	return 0;
}

static void host_release(struct sr__device *dev, sr_batch *b)
{
}

static void host_close(struct sr__device *dev)
{
	struct host_priv *h = dev->priv;

	free(h->mem);
	free(h);
	free(dev);
}

static const struct sr__device_ops host_ops = {
	.name = "host",
	.batch_from_ring = host_batch,
	.release = host_release,
	.close = host_close,
};

int sr__device_host_open(const struct sr__device_cfg *cfg, struct sr__device **out)
{
	struct sr__device *dev = calloc(1, sizeof(*dev));
	struct host_priv *h = calloc(1, sizeof(*h));
	size_t rows = cfg->max_rows ? cfg->max_rows : 1, od = cfg->obs_dim;
	size_t bytes = rows * (od * sizeof(float) + sizeof(float) + sizeof(uint32_t) + 2) + 64;
	char *m;

	if (!dev || !h || !(m = malloc(bytes))) {
		free(dev);
		free(h);
		return sr__errorf(-ENOMEM, "host device: cannot allocate %zu bytes of staging", bytes);
	}
	h->mem = m;
	h->obs = (float *)m;
	h->reward = h->obs + rows * od;
	h->env_id = (uint32_t *)(h->reward + rows);
	h->term = (uint8_t *)(h->env_id + rows);
	h->trunc = h->term + rows;
	dev->ops = &host_ops;
	dev->kind = SR_DEVICE_HOST;
	dev->cfg = *cfg;
	dev->priv = h;
	*out = dev;
	return 0;
}

int sr__device_open(const struct sr__device_cfg *cfg, struct sr__device **out)
{
	int err;

	switch (cfg->kind) {
	case SR_DEVICE_HOST:
		return sr__device_host_open(cfg, out);
	case SR_DEVICE_CUDA:
		return sr__device_cuda_open(cfg, out);
	case SR_DEVICE_AUTO:
		err = sr__device_cuda_open(cfg, out);
		if (!err)
			return 0;
		sr__clear_error();
		return sr__device_host_open(cfg, out);
	default:
		return sr__errorf(-EINVAL, "unknown device kind %u (host 0, cuda 1, auto 2)",
				  cfg->kind);
	}
}

void sr__device_close(struct sr__device *dev)
{
	if (dev)
		dev->ops->close(dev);
}
