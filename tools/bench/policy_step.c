/*
 * The policy step of the closed-loop benchmarks (policy_step.h): per batch
 * of a pool on the host device, submit the batch to the policy's device
 * (straight from the registered ring when the batch is a ring range), run
 * the MLP where the batch lives, bring the actions back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "mlp.h"
#include "policy_step.h"
#include "stepring/device.h"

struct bench_policy {
	sr_pool *pool;
	sr_ring *ring;         /* the pool's */
	struct mlp *pol;
	sr_device *dev;
	sr_device_batch *held; /* the previous batch: its actions are still in use */
	sr_device_info info;
	char msg[256];         /* why the last bench_policy_act failed */
};

int bench_policy_open(const char *desc, sr_pool *pool, int device, uint64_t seed,
		      struct bench_policy **out, char *msg, size_t len)
{
	sr_pool_info pi = {.size = sizeof(pi)};
	const sr_env_spec *spec;
	struct bench_policy *bp;
	struct mlp_opts po;
	sr_device_opts o;
	int err;

	*out = NULL;
	if (!desc || !strcmp(desc, "none"))
		return 0;
	err = sr_pool_info_get(pool, &pi);
	if (err) {
		snprintf(msg, len, "pool info: %s", sr_last_error());
		return err;
	}
	spec = pi.spec;
	memset(&po, 0, sizeof(po));
	po.seed = seed;
	bp = calloc(1, sizeof(*bp));
	if (!bp) {
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	bp->pool = pool;
	bp->ring = pi.ring;
	err = mlp_parse(desc, &po);
	if (!err)
		err = mlp_create(spec, &po, &bp->pol);
	if (err) {
		snprintf(msg, len, "policy %s: %s", desc, mlp_error());
		bench_policy_close(bp);
		return err;
	}
	sr_device_opts_init(&o);
	o.kind = (uint32_t)device;
	o.max_rows = pi.batch_size;
	o.obs_dim = spec->obs_dim;
	o.act_kind = spec->act_kind;
	o.act_dim = spec->act_dim;
	o.flags = SR_DEVICE_F_RING;
	o.ring = pi.ring;
	err = sr_device_open(&o, &bp->dev);
	if (err) {
		snprintf(msg, len, "policy %s: %s", desc, sr_last_error());
		bench_policy_close(bp);
		return err;
	}
	sr_device_info_get(bp->dev, &bp->info);
	*out = bp;
	return 0;
}

int bench_policy_act(struct bench_policy *bp, const sr_batch *b, const void **actions,
		     uint64_t *ns_copy, uint64_t *ns_policy)
{
	sr_device_batch *db;
	uint64_t t0 = bench_now_ns(), t1;
	int err;

	/* The caller has handed the previous actions to the pool (send and
	 * step copy them): that batch can go back. */
	if (bp->held)
		sr_device_release(bp->dev, bp->held);
	bp->held = NULL;
	if (b->first_seq != UINT64_MAX)
		err = sr_device_submit_ring(bp->dev, bp->ring, b->first_seq, b->n, 0, &db);
	else
		err = sr_device_submit(bp->dev, b, 0, &db);
	if (err) {
		snprintf(bp->msg, sizeof(bp->msg), "%s", sr_last_error());
		return err;
	}
	t1 = bench_now_ns();
	err = mlp_forward_batch(bp->pol, bp->dev, db);
	if (err) {
		snprintf(bp->msg, sizeof(bp->msg), "%s", mlp_error());
		sr_device_release(bp->dev, db);
		return err;
	}
	err = sr_device_actions(bp->dev, db, NULL, actions);
	if (err) {
		snprintf(bp->msg, sizeof(bp->msg), "%s", sr_last_error());
		sr_device_release(bp->dev, db);
		return err;
	}
	bp->held = db;
	*ns_copy = t1 - t0;
	*ns_policy = bench_now_ns() - t1;
	return 0;
}

const char *bench_policy_error(const struct bench_policy *bp)
{
	return bp->msg;
}

const struct mlp *bench_policy_mlp(const struct bench_policy *bp)
{
	return bp->pol;
}

const sr_device_info *bench_policy_device(const struct bench_policy *bp)
{
	return &bp->info;
}

const char *bench_policy_where(const struct bench_policy *bp)
{
	return bp ? bp->info.name : "none";
}

void bench_policy_close(struct bench_policy *bp)
{
	if (!bp)
		return;
	if (bp->held)
		sr_device_release(bp->dev, bp->held);
	sr_device_close(bp->dev);
	mlp_destroy(bp->pol);
	free(bp);
}

