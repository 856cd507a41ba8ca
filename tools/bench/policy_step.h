/*
 * The synthetic policy step of the closed-loop benchmarks, shared by
 * `stepring bench loop` and bench_pool_run's "mlp:WxD" policy.
 *
 * Per batch of a pool on the host device: move the batch to the policy's
 * device (straight from the registered ring when the batch is a ring
 * range), run the MLP there, bring the actions back to the host.
 */
#ifndef SR_BENCH_POLICY_STEP_H
#define SR_BENCH_POLICY_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "stepring.h"
#include "stepring/device.h"

struct bench_policy;
struct mlp;

/* Open "mlp:WxD[:relu]" for @pool's env on @device (enum sr_device_kind;
 * the pool itself must run on the host device). "none" gives *@out = NULL
 * and 0. Returns 0 or -errno with @msg set. */
int bench_policy_open(const char *desc, sr_pool *pool, int device, uint64_t seed,
		      struct bench_policy **out, char *msg, size_t len);
/* Actions for batch @b (host memory, n * action size, valid until the next
 * call). *@ns_copy and *@ns_policy get the time of the transfer in and of
 * the forward pass plus actions back. 0 or -errno (bench_policy_error()). */
int bench_policy_act(struct bench_policy *bp, const sr_batch *b, const void **actions,
		     uint64_t *ns_copy, uint64_t *ns_policy);
/* Why the last bench_policy_act failed. */
const char *bench_policy_error(const struct bench_policy *bp);
/* The MLP, and the device it runs on. */
const struct mlp *bench_policy_mlp(const struct bench_policy *bp);
const sr_device_info *bench_policy_device(const struct bench_policy *bp);
/* "host" or the GPU's name. */
const char *bench_policy_where(const struct bench_policy *bp);
/* NULL is a no-op. */
void bench_policy_close(struct bench_policy *bp);

#endif
