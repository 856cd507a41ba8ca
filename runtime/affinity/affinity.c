/*
 * Placement of the pool's workers: the only file that includes hwloc.h.
 *
 * sr__plan_compute() is a pure function of (topology, cpuset, thread count,
 * bind policy), so tests run it on synthetic and XML topologies and
 * `stepring topo` prints it. sr__bind_self() applies one entry of a plan to
 * the calling thread, using the machine's topology (loaded once).
 */
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "affinity_internal.h"
#include "stepring/pool.h"  /* enum sr_bind */
#include "stepring/stats.h" /* SR_STATS_MAX_WORKERS */

#define MAX_NODES 1024

struct node_info {
	hwloc_obj_t numa;     /* NULL: the PUs of no NUMA node (treated as one node) */
	uint32_t ncores;      /* allowed cores */
	uint32_t npus;        /* allowed PUs */
	uint32_t want;        /* workers planned here */
};

/* Synthetic topologies are for tests and planning: bound the PUs they
 * describe, so that "pack:65536 pu:65536" is refused at once instead of
 * making hwloc build four billion objects (minutes, then out of memory). */
#define SR_SYNTH_MAX_PUS 16384

/* Product of the arities ("type:N") of a synthetic description,
 * overflow-checked; UINT64_MAX above the bound. */
static uint64_t synthetic_pus(const char *desc)
{
	uint64_t prod = 1;
	const char *p = desc;

	while ((p = strchr(p, ':'))) {
		char *end;
		unsigned long long n;

		p++;
		if (*p < '0' || *p > '9')
			continue;
		errno = 0;
		n = strtoull(p, &end, 10);
		if (errno || n > SR_SYNTH_MAX_PUS || (n && prod > SR_SYNTH_MAX_PUS / n))
			return UINT64_MAX;
		prod *= n;
		p = end;
	}
	return prod;
}

static int load_topology(const char *desc, hwloc_topology_t *out)
{
	hwloc_topology_t t;
	size_t len;
	int err;

	if (hwloc_topology_init(&t) < 0)
		return sr__errorf(-ENOMEM, "hwloc_topology_init failed");
	if (desc) {
		len = strlen(desc);
		if (len > 4 && !strcmp(desc + len - 4, ".xml")) {
			err = hwloc_topology_set_xml(t, desc);
		} else if (synthetic_pus(desc) > SR_SYNTH_MAX_PUS) {
			hwloc_topology_destroy(t);
			return sr__errorf(-EINVAL,
					  "topology '%.100s' describes more than %d PUs (the "
					  "product of its arities); synthetic topologies are "
					  "bounded",
					  desc, SR_SYNTH_MAX_PUS);
		} else {
			err = hwloc_topology_set_synthetic(t, desc);
		}
		if (err < 0) {
			hwloc_topology_destroy(t);
			return sr__errorf(-EINVAL, "bad topology '%s' (an hwloc synthetic description "
					  "like \"pack:2 numa:2 core:8 pu:2\" or an .xml file)", desc);
		}
	}
	if (hwloc_topology_load(t) < 0) {
		hwloc_topology_destroy(t);
		return sr__errorf(-EINVAL, "cannot load topology '%s'", desc ? desc : "(machine)");
	}
	*out = t;
	return 0;
}

/* The NUMA node holding @cpuset's PUs (first that intersects), or NULL. */
static hwloc_obj_t numa_of(hwloc_topology_t t, hwloc_const_cpuset_t set)
{
	hwloc_obj_t n = NULL;

	while ((n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n)))
		if (n->cpuset && hwloc_bitmap_intersects(n->cpuset, set))
			return n;
	return NULL;
}

static int node_index(struct node_info *nodes, uint32_t nn, hwloc_obj_t numa)
{
	for (uint32_t i = 0; i < nn; i++)
		if (nodes[i].numa == numa)
			return (int)i;
	return -1;
}

/*
 * Worker 0 is the calling thread and the collector: put it on the first
 * planned worker's CPUs that lie near the device (@near), by exchanging
 * the two entries, so the spread over nodes and cores stays as planned.
 */
static void plan_near(struct sr__plan *plan, hwloc_const_bitmap_t near, hwloc_bitmap_t tmp)
{
	uint32_t T = plan->nthreads;

	if (plan->bind == SR_BIND_NONE)
		return;
	for (uint32_t i = 0; i < T; i++) {
		if (hwloc_bitmap_list_sscanf(tmp, plan->w[i].cpus) < 0 ||
		    !hwloc_bitmap_intersects(tmp, near))
			continue;
		if (i) {
			struct sr__plan_worker w0 = plan->w[0];

			plan->w[0] = plan->w[i];
			plan->w[i] = w0;
		}
		return;
	}
	snprintf(plan->warning + strlen(plan->warning),
		 sizeof(plan->warning) - strlen(plan->warning),
		 "%sno worker runs near the device (cpus %s): the collector stays on cpus %s",
		 plan->warning[0] ? "; " : "", plan->near, plan->w[0].cpus);
}

/* What plan_from_topology works on, step after step. */
struct plan_ctx {
	hwloc_topology_t t;
	hwloc_obj_type_t ctype;  /* a core, or a PU on topologies without cores */
	hwloc_bitmap_t allowed;  /* the PUs the pool may use */
	hwloc_bitmap_t tmp;      /* scratch */
	struct node_info *nodes; /* MAX_NODES */
	uint32_t nn, ncores, npus;
};

/* The allowed PUs: the topology's, less what the process binding
 * (taskset, cgroups; @machine only) and @cpuset leave out. */
static int narrow_allowed(struct plan_ctx *x, bool machine, const char *cpuset)
{
	hwloc_bitmap_t user;
	int err = 0;

	if (machine && hwloc_get_cpubind(x->t, x->tmp, HWLOC_CPUBIND_PROCESS) == 0 &&
	    hwloc_bitmap_intersects(x->tmp, x->allowed))
		hwloc_bitmap_and(x->allowed, x->allowed, x->tmp);
	if (!cpuset)
		return 0;
	user = hwloc_bitmap_alloc();
	if (!user || hwloc_bitmap_list_sscanf(user, cpuset) < 0 || hwloc_bitmap_iszero(user) ||
	    hwloc_bitmap_weight(user) < 0) {
		err = sr__errorf(-EINVAL, "bad cpuset '%s' (expected a list like \"0-3,8\")", cpuset);
	} else if (!hwloc_bitmap_isincluded(user, x->allowed)) {
		char have[256];
		hwloc_bitmap_list_snprintf(have, sizeof(have), x->allowed);
		err = sr__errorf(-EINVAL, "cpuset '%s' names CPUs that are not available "
				 "(available: %s)", cpuset, have);
	} else {
		hwloc_bitmap_and(x->allowed, x->allowed, user);
	}
	hwloc_bitmap_free(user);
	return err;
}

/* @near as a bitmap into *@out (NULL: none). */
static int parse_near(const char *near, hwloc_bitmap_t *out)
{
	*out = NULL;
	if (!near)
		return 0;
	*out = hwloc_bitmap_alloc();
	if (!*out || hwloc_bitmap_list_sscanf(*out, near) < 0 || hwloc_bitmap_iszero(*out) ||
	    hwloc_bitmap_weight(*out) < 0)
		return sr__errorf(-EINVAL, "bad list of CPUs near the device '%s' (expected a "
				  "list like \"0-3,8\")", near);
	return 0;
}

/* Group the cores with allowed PUs by NUMA node (x->nodes, nn, ncores). */
static int group_cores(struct plan_ctx *x)
{
	for (hwloc_obj_t c = NULL; (c = hwloc_get_next_obj_by_type(x->t, x->ctype, c));) {
		hwloc_obj_t numa;
		int k;

		if (!hwloc_bitmap_intersects(c->cpuset, x->allowed))
			continue;
		numa = numa_of(x->t, c->cpuset);
		k = node_index(x->nodes, x->nn, numa);
		if (k < 0) {
			if (x->nn == MAX_NODES)
				return sr__errorf(-EINVAL, "more than %d NUMA nodes", MAX_NODES);
			k = (int)x->nn++;
			x->nodes[k].numa = numa;
		}
		hwloc_bitmap_and(x->tmp, c->cpuset, x->allowed);
		x->nodes[k].ncores++;
		x->nodes[k].npus += (uint32_t)hwloc_bitmap_weight(x->tmp);
		x->ncores++;
	}
	return 0;
}

/* A plan for @T workers with the machine-wide fields filled in. */
static int plan_alloc(const struct plan_ctx *x, uint32_t T, uint32_t bind, const char *cpuset,
		      struct sr__plan **out)
{
	struct sr__plan *plan;

	if (T > x->npus)
		return sr__errorf(-EINVAL, "%u threads but only %u CPUs (%u cores) are available%s",
				  T, x->npus, x->ncores, cpuset ? " in the cpuset" : "");
	if (T > SR_STATS_MAX_WORKERS)
		return sr__errorf(-EINVAL, "%u threads: at most %d", T, SR_STATS_MAX_WORKERS);
	plan = calloc(1, sizeof(*plan) + T * sizeof(plan->w[0]));
	if (!plan)
		return sr__errorf(-ENOMEM, "out of memory computing the placement");
	plan->nthreads = T;
	plan->ncores = x->ncores;
	plan->npus = x->npus;
	plan->nnuma = x->nn;
	plan->bind = bind;
	hwloc_bitmap_list_snprintf(plan->allowed, sizeof(plan->allowed), x->allowed);
	if (T > x->ncores)
		snprintf(plan->warning, sizeof(plan->warning),
			 "%u threads on %u cores: some workers share a core (SMT)", T, x->ncores);
	*out = plan;
	return 0;
}

/* Spread: each worker goes to the node with the lowest fill ratio (the
 * nodes' want), first counting cores, then (more threads than cores) PUs. */
static void spread(struct plan_ctx *x, uint32_t T)
{
	struct node_info *nodes = x->nodes;

	for (uint32_t i = 0; i < T; i++) {
		bool smt = i >= x->ncores;
		int best = -1;
		for (uint32_t k = 0; k < x->nn; k++) {
			uint32_t cap = smt ? nodes[k].npus : nodes[k].ncores;
			if (nodes[k].want >= cap)
				continue;
			/* want/cap < best.want/best.cap, cross-multiplied */
			if (best < 0 ||
			    (uint64_t)nodes[k].want * (smt ? nodes[best].npus : nodes[best].ncores) <
				    (uint64_t)nodes[best].want * cap)
				best = (int)k;
		}
		nodes[best].want++;
	}
}

/* Worker @w on PU @id of core @c of node @k, as @bind says. */
static void place_worker(struct plan_ctx *x, struct sr__plan_worker *w, hwloc_obj_t c,
			 uint32_t k, int id, uint32_t bind)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(x->t, (unsigned)id);
	hwloc_obj_t pk = pu ? hwloc_get_ancestor_obj_by_type(x->t, HWLOC_OBJ_PACKAGE, pu) : NULL;
	hwloc_obj_t numa = x->nodes[k].numa;

	w->numa = numa ? (int32_t)numa->os_index : -1;
	w->pack = pk ? (int32_t)pk->logical_index : -1;
	if (bind == SR_BIND_CORE) {
		w->cpu = id;
		w->core = x->ctype == HWLOC_OBJ_CORE ? (int32_t)c->logical_index : -1;
		snprintf(w->cpus, sizeof(w->cpus), "%d", id);
	} else if (bind == SR_BIND_NUMA) {
		w->cpu = -1;
		w->core = -1;
		if (numa)
			hwloc_bitmap_and(x->tmp, numa->cpuset, x->allowed);
		else
			hwloc_bitmap_copy(x->tmp, x->allowed);
		hwloc_bitmap_list_snprintf(w->cpus, sizeof(w->cpus), x->tmp);
	} else {
		w->cpu = -1;
		w->core = -1;
		w->numa = -1;
		w->pack = -1;
		w->cpus[0] = '\0';
	}
}

/* Assign node-major, so a worker's neighbours share its node. Within a
 * node: first PU of each core in order, then the next PUs (SMT). Returns
 * the count of workers placed. */
static uint32_t assign(struct plan_ctx *x, struct sr__plan *plan, uint32_t bind)
{
	uint32_t placed = 0;

	for (uint32_t k = 0; k < x->nn; k++) {
		uint32_t got = 0;
		for (unsigned round = 0; got < x->nodes[k].want; round++) {
			for (hwloc_obj_t c = NULL;
			     got < x->nodes[k].want && (c = hwloc_get_next_obj_by_type(x->t, x->ctype, c));) {
				unsigned idx = 0;
				int id;

				if (!hwloc_bitmap_intersects(c->cpuset, x->allowed) ||
				    numa_of(x->t, c->cpuset) != x->nodes[k].numa)
					continue;
				/* the round-th allowed PU of this core */
				hwloc_bitmap_and(x->tmp, c->cpuset, x->allowed);
				id = hwloc_bitmap_first(x->tmp);
				for (idx = 0; idx < round && id >= 0; idx++)
					id = hwloc_bitmap_next(x->tmp, id);
				if (id < 0)
					continue;
				place_worker(x, &plan->w[placed++], c, k, id, bind);
				got++;
			}
			if (round > 64)
				break;
		}
	}
	return placed;
}

/*
 * The plan on topology @t: allowed PUs (narrow_allowed), cores by node
 * (group_cores), the plan (plan_alloc), workers spread over the nodes
 * (spread) and given PUs (assign), worker 0 near the device (plan_near).
 */
static int plan_from_topology(hwloc_topology_t t, bool machine, const char *cpuset,
			      const char *near, uint32_t num_threads, uint32_t bind,
			      struct sr__plan **out)
{
	struct plan_ctx x = {
		.t = t,
		.ctype = HWLOC_OBJ_CORE,
		.allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t)),
		.tmp = hwloc_bitmap_alloc(),
		.nodes = calloc(MAX_NODES, sizeof(struct node_info)),
	};
	hwloc_bitmap_t nearset = NULL;
	struct sr__plan *plan = NULL;
	uint32_t T, placed;
	int err = 0;

	if (!x.allowed || !x.tmp || !x.nodes) {
		err = sr__errorf(-ENOMEM, "out of memory computing the placement");
		goto out;
	}
	if (bind > SR_BIND_NONE) {
		err = sr__errorf(-EINVAL, "bind policy %u is not core (0), numa (1) or none (2)", bind);
		goto out;
	}
	err = narrow_allowed(&x, machine, cpuset);
	if (!err)
		err = parse_near(near, &nearset);
	if (err)
		goto out;
	x.npus = (uint32_t)hwloc_bitmap_weight(x.allowed);
	if (x.npus == 0) {
		err = sr__errorf(-EINVAL, "no CPU is available to the pool");
		goto out;
	}
	if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) <= 0)
		x.ctype = HWLOC_OBJ_PU; /* topologies without cores: a PU is a core */
	err = group_cores(&x);
	if (err)
		goto out;
	T = num_threads ? num_threads : x.ncores;
	err = plan_alloc(&x, T, bind, cpuset, &plan);
	if (err)
		goto out;
	spread(&x, T);
	placed = assign(&x, plan, bind);
	if (placed != T) {
		err = sr__errorf(-EINVAL, "placement failed: %u of %u workers placed", placed, T);
		goto out;
	}
	if (nearset) {
		hwloc_bitmap_list_snprintf(plan->near, sizeof(plan->near), nearset);
		plan_near(plan, nearset, x.tmp);
	}
	*out = plan;
	plan = NULL;
out:
	free(plan);
	free(x.nodes);
	hwloc_bitmap_free(x.tmp);
	hwloc_bitmap_free(nearset);
	hwloc_bitmap_free(x.allowed);
	return err;
}

int sr__plan_compute(const char *topology, const char *cpuset, const char *near,
		     uint32_t num_threads, uint32_t bind, struct sr__plan **out)
{
	hwloc_topology_t t = NULL;
	int err;

	*out = NULL;
	err = load_topology(topology, &t);
	if (err)
		return err;
	err = plan_from_topology(t, topology == NULL, cpuset, near, num_threads, bind, out);
	hwloc_topology_destroy(t);
	return err;
}

void sr__plan_free(struct sr__plan *plan)
{
	free(plan);
}

void sr__plan_print(const struct sr__plan *plan, FILE *f)
{
	static const char *const bind_name[] = {"core", "numa", "none"};

	fprintf(f, "allowed cpus %s: %u PUs, %u cores, %u NUMA nodes; %u workers, bind %s\n",
		plan->allowed, plan->npus, plan->ncores, plan->nnuma, plan->nthreads,
		bind_name[plan->bind <= SR_BIND_NONE ? plan->bind : SR_BIND_NONE]);
	for (uint32_t i = 0; i < plan->nthreads; i++) {
		const struct sr__plan_worker *w = &plan->w[i];
		fprintf(f, "worker %u: cpus %s", i, w->cpus[0] ? w->cpus : "any");
		if (w->core >= 0)
			fprintf(f, " core %d", w->core);
		if (w->numa >= 0)
			fprintf(f, " numa %d", w->numa);
		if (w->pack >= 0)
			fprintf(f, " package %d", w->pack);
		fprintf(f, "%s\n", i == 0 ? " (calling thread: not bound by the pool)" : "");
	}
	if (plan->near[0])
		fprintf(f, "device near cpus %s: worker 0 (the collector) on cpus %s\n", plan->near,
			plan->w[0].cpus[0] ? plan->w[0].cpus : "any");
	if (plan->warning[0])
		fprintf(f, "warning: %s\n", plan->warning);
}

/* The machine topology for binding, loaded once. */
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t machine_topo;

static void machine_load(void)
{
	if (load_topology(NULL, &machine_topo))
		machine_topo = NULL;
}

int sr__plan_cpuset(const struct sr__plan_worker *w, cpu_set_t *out)
{
	hwloc_bitmap_t set;
	int i, err = 0;

	CPU_ZERO(out);
	if (!w->cpus[0])
		return 0;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_bitmap_list_sscanf(set, w->cpus) < 0)
		err = -EINVAL;
	else
		hwloc_bitmap_foreach_begin(i, set)
		{
			if (i < CPU_SETSIZE)
				CPU_SET(i, out);
		}
		hwloc_bitmap_foreach_end();
	hwloc_bitmap_free(set);
	return err;
}

int sr__bind_self(const struct sr__plan_worker *w)
{
	hwloc_bitmap_t set;
	int err = 0;

	if (!w->cpus[0])
		return 0;
	pthread_once(&machine_once, machine_load);
	if (!machine_topo)
		return -ENOSYS;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_bitmap_list_sscanf(set, w->cpus) < 0)
		err = -EINVAL;
	else if (hwloc_set_cpubind(machine_topo, set, HWLOC_CPUBIND_THREAD) < 0)
		err = -errno;
	hwloc_bitmap_free(set);
	return err;
}

#ifdef SR_HAVE_CUDA
#include <hwloc/cudart.h>

/* *@out gets the CPUs near CUDA device @dev (free it with
 * hwloc_bitmap_free). 0, -ENOSYS (no topology), -ENOMEM, -ENODEV (no such
 * GPU, or hwloc does not know where it is). */
static int cuda_cpuset(int dev, hwloc_bitmap_t *out)
{
	hwloc_bitmap_t set;

	pthread_once(&machine_once, machine_load);
	if (!machine_topo)
		return -ENOSYS;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_cudart_get_device_cpuset(machine_topo, dev, set) < 0 || hwloc_bitmap_iszero(set)) {
		hwloc_bitmap_free(set);
		return -ENODEV;
	}
	*out = set;
	return 0;
}

int sr__cuda_local_cpus(int dev, char *buf, size_t len)
{
	hwloc_bitmap_t set;
	int err = cuda_cpuset(dev, &set);

	if (err)
		return err;
	if (buf && len)
		hwloc_bitmap_list_snprintf(buf, len, set);
	hwloc_bitmap_free(set);
	return 0;
}

/* Bind the calling thread (the collector) to the CPUs near CUDA device
 * @dev, from hwloc's CUDA helper (the PCI device's local CPUs); @buf gets
 * them as a list. 0, -ENOSYS (no topology), -ENODEV (no such GPU, or
 * hwloc does not know where it is), -errno from the binding. */
int sr__bind_self_near_cuda(int dev, char *buf, size_t len)
{
	hwloc_bitmap_t set;
	int err = cuda_cpuset(dev, &set);

	if (err)
		return err;
	if (hwloc_set_cpubind(machine_topo, set, HWLOC_CPUBIND_THREAD) < 0)
		err = -errno;
	if (!err && buf && len)
		hwloc_bitmap_list_snprintf(buf, len, set);
	hwloc_bitmap_free(set);
	return err;
}
#else
/* No CUDA in this build: no GPU has local CPUs. */
int sr__cuda_local_cpus(int dev, char *buf, size_t len)
{
	return -ENOSYS;
}

int sr__bind_self_near_cuda(int dev, char *buf, size_t len)
{
	return -ENOSYS;
}
#endif
