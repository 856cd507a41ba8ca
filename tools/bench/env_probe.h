/*
 * Probes of the built-in envs' internals that the benchmarks and envstats
 * need and that the public API does not carry: the raw Box2D world step's
 * time (the ceiling of a port) and NumPy's random streams (Gymnasium's
 * seeded action samples, for envstats --paired).
 */
#ifndef SR_BENCH_ENV_PROBE_H
#define SR_BENCH_ENV_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* Box2D world-step timing: on = 1 clears and starts counting in every
 * b2World::Step of this thread's Box2D envs, on = 0 stops and returns the
 * nanoseconds and steps counted. Returns 0, or -ENOSYS in a build without
 * Box2D (ns and steps are then 0). */
int bench_world_timing(int on, uint64_t *ns, uint64_t *steps);

/* n independent NumPy Generator(PCG64(seed)) streams. */
typedef struct bench_np bench_np;
bench_np *bench_np_new(size_t n);
void bench_np_free(bench_np *g);
void bench_np_seed(bench_np *g, size_t i, uint64_t seed);
/* Generator.integers(lo, hi) (hi exclusive, hi - lo < 2^32) and
 * Generator.uniform(lo, hi) of stream i. */
int64_t bench_np_integers(bench_np *g, size_t i, int64_t lo, int64_t hi);
double bench_np_uniform(bench_np *g, size_t i, double lo, double hi);

#endif
