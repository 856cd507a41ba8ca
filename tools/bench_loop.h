/*
 * The synthetic policy step of the closed-loop benchmarks, shared by
 * `stepring bench loop` (tools/cmd_bench_loop.c, which implements it) and
 * bench_pool_run's "mlp:WxD" policy (tools/cmd_bench_pool.c).
 *
 * Per batch of a pool on the host device: move the batch to the policy's
 * device (straight from the registered ring when the batch is a ring
 * range), run the MLP there, bring the actions back to the host.
 */
#ifndef SR_BENCH_LOOP_H
#define SR_BENCH_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "stepring.h"

struct bench_policy;

/* Open "mlp:WxD[:relu]" for @pool's env on @device (enum sr_device_kind;
 * the pool itself must run on the host device). "none" gives *@out = NULL
 * and 0. Returns 0 or -errno with @msg set. */
int bench_policy_open(const char *desc, sr_pool *pool, int device, uint64_t seed,
		      struct bench_policy **out, char *msg, size_t len);
/* Actions for batch @b (host memory, n * action size, valid until the next
 * call). *@ns_copy and *@ns_policy get the time of the transfer in and of
 * the forward pass plus actions back. 0 or -errno (sr_last_error()). */
int bench_policy_act(struct bench_policy *bp, const sr_batch *b, const void **actions,
		     uint64_t *ns_copy, uint64_t *ns_policy);
/* "host" or the GPU's name. */
const char *bench_policy_where(const struct bench_policy *bp);
/* NULL is a no-op. */
void bench_policy_close(struct bench_policy *bp);

#endif
