#include "env_probe.h"

#include <errno.h>
#include <stdlib.h>

#include "stepring/config.h"
#include "envs.h"
#include "np_random.h"

int bench_world_timing(int on, uint64_t *ns, uint64_t *steps)
{
#if SR_CONFIG_WITH_BOX2D
	sr__box2d_world_timing(on, ns, steps);
	return 0;
#else
	(void)on;
	if (ns)
		*ns = 0;
	if (steps)
		*steps = 0;
	return -ENOSYS;
#endif
}

struct bench_np {
	size_t n;
	sr_np_pcg64 g[];
};

bench_np *bench_np_new(size_t n)
{
	bench_np *g = calloc(1, sizeof(*g) + n * sizeof(g->g[0]));
	if (g)
		g->n = n;
	return g;
}

void bench_np_free(bench_np *g)
{
	free(g);
}

void bench_np_seed(bench_np *g, size_t i, uint64_t seed)
{
	sr_np_seed(&g->g[i], seed);
}

int64_t bench_np_integers(bench_np *g, size_t i, int64_t lo, int64_t hi)
{
	return sr_np_integers(&g->g[i], lo, hi);
}

double bench_np_uniform(bench_np *g, size_t i, double lo, double hi)
{
	return sr_np_uniform(&g->g[i], lo, hi);
}
