/*
 * Probes of the built-in envs' internals that the benchmarks and envstats
 * need and that the public API does not carry: the raw Box2D world step's
 * and MuJoCo mj_step loop's time (the ceiling of a port), the MuJoCo envs'
 * info terms and reset paths, and NumPy's random streams (Gymnasium's
 * seeded action samples, for envstats --paired).
 */
#ifndef SR_BENCH_ENV_PROBE_H
#define SR_BENCH_ENV_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Box2D world-step timing: on = 1 clears and starts counting in every
 * b2World::Step of this thread's Box2D envs, on = 0 stops and returns the
 * nanoseconds and steps counted. Returns 0, or -ENOSYS in a build without
 * Box2D (ns and steps are then 0). */
int bench_world_timing(int on, uint64_t *ns, uint64_t *steps);

/* The MuJoCo envs' internals (all -ENOSYS, or false, in a build without
 * MuJoCo; see envs/envs.h for what each does). */
#include "stepring/env.h"
bool bench_is_mujoco(const sr_env_spec *spec);
int bench_mujoco_info(const sr_env_spec *spec, const void *state, const char *const **names,
		      double *values, size_t cap);
int bench_mujoco_trig(const sr_env_spec *spec, uint32_t *first, uint32_t *count);
int bench_mujoco_timing(int on, uint64_t *ns, uint64_t *steps);
int bench_mujoco_reset_how(const sr_env_spec *spec, void *states, size_t n, void *obs, int how);
int bench_mujoco_sizes(const void *state, size_t *buffer_bytes, size_t *stack_bytes, int *nefc,
		       int *ncon);
const char *bench_mujoco_xml_name(unsigned x);
int bench_mujoco_save_layout(const sr_env_spec *spec, size_t *hdr, size_t *cur, size_t *pre,
			     size_t *info);

/* n independent NumPy Generator(PCG64(seed)) streams. */
typedef struct bench_np bench_np;
bench_np *bench_np_new(size_t n);
void bench_np_free(bench_np *g);
void bench_np_seed(bench_np *g, size_t i, uint64_t seed);
/* Generator.integers(lo, hi) (hi exclusive, hi - lo < 2^32) and
 * Generator.uniform(lo, hi) of stream i. */
int64_t bench_np_integers(bench_np *g, size_t i, int64_t lo, int64_t hi);
double bench_np_uniform(bench_np *g, size_t i, double lo, double hi);
/* Generator.standard_normal() of stream i (NumPy's ziggurat). */
double bench_np_normal(bench_np *g, size_t i);

#endif
