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

#if SR_CONFIG_WITH_MUJOCO
bool bench_is_mujoco(const sr_env_spec *spec)
{
	return sr__is_mujoco(spec);
}

int bench_mujoco_info(const sr_env_spec *spec, const void *state, const char *const **names,
		      double *values, size_t cap)
{
	return sr__mujoco_info(spec, state, names, values, cap);
}

int bench_mujoco_trig(const sr_env_spec *spec, uint32_t *first, uint32_t *count)
{
	return sr__mujoco_trig(spec, first, count);
}

int bench_mujoco_timing(int on, uint64_t *ns, uint64_t *steps)
{
	sr__mujoco_physics_timing(on, ns, steps);
	return 0;
}

int bench_mujoco_reset_how(const sr_env_spec *spec, void *states, size_t n, void *obs, int how)
{
	return sr__mujoco_reset_how(spec, states, n, obs, how);
}

int bench_mujoco_sizes(const void *state, size_t *buffer_bytes, size_t *stack_bytes, int *nefc,
		       int *ncon)
{
	return sr__mujoco_sizes(state, buffer_bytes, stack_bytes, nefc, ncon);
}

const char *bench_mujoco_xml_name(unsigned x)
{
	return sr__mujoco_xml_name(x);
}

int bench_mujoco_save_layout(const sr_env_spec *spec, size_t *hdr, size_t *cur, size_t *pre,
			     size_t *info)
{
	return sr__mujoco_save_layout(spec, hdr, cur, pre, info);
}
#else
bool bench_is_mujoco(const sr_env_spec *spec)
{
	(void)spec;
	return false;
}

int bench_mujoco_info(const sr_env_spec *spec, const void *state, const char *const **names,
		      double *values, size_t cap)
{
	return -ENOSYS;
}

int bench_mujoco_trig(const sr_env_spec *spec, uint32_t *first, uint32_t *count)
{
	return -ENOSYS;
}

int bench_mujoco_timing(int on, uint64_t *ns, uint64_t *steps)
{
	if (ns)
		*ns = 0;
	if (steps)
		*steps = 0;
	return -ENOSYS;
}

int bench_mujoco_reset_how(const sr_env_spec *spec, void *states, size_t n, void *obs, int how)
{
	return -ENOSYS;
}

int bench_mujoco_sizes(const void *state, size_t *buffer_bytes, size_t *stack_bytes, int *nefc,
		       int *ncon)
{
	return -ENOSYS;
}

const char *bench_mujoco_xml_name(unsigned x)
{
	return NULL;
}

int bench_mujoco_save_layout(const sr_env_spec *spec, size_t *hdr, size_t *cur, size_t *pre,
			     size_t *info)
{
	return -ENOSYS;
}
#endif

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

double bench_np_normal(bench_np *g, size_t i)
{
	return sr_np_standard_normal(&g->g[i]);
}
