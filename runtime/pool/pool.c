/*
 * DESIGN: the pool (public API of include/stepring/pool.h).
 *
 * create: validate options, resolve the env, compute the placement plan
 * (affinity.c), split the envs into contiguous slices (one per worker,
 * sizes differ by at most one), create the ring (>= 4 * num_envs slots, so
 * a batch view stays valid while the next one is written), open the
 * collector's device, start the workers (their kind's start: worker/), which allocate and seed
 * their envs from (seed, env index) on their own node.
 *
 * Sync step: validate every action first (nothing is stepped on -EINVAL),
 * send one step command for the pool's one group (num_envs contiguous
 * slots; worker/thread.c), run worker 0's share on this thread and wait for the
 * others, then let the collector expose the slots as the batch (row i =
 * env i). Resets and reset masks are commands too. Results depend only on (seed, env index,
 * actions): never on the thread count or the binding.
 *
 * Async: send validates, copies each action into the env's mailbox and
 * queues the env on its worker; recv runs worker 0's queue on this thread
 * and collects the first batch_size results published in the ring.
 *
 * Threading: the pool is driven from one thread at a time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"
#include "pool_internal.h"
#include "envs.h"

#define SR_POOL_F_ALL (SR_POOL_F_SEED | SR_POOL_F_CPUSET | SR_POOL_F_RING_NAME | \
		       SR_POOL_F_FINAL_OBS | SR_POOL_F_TOPOLOGY | SR_POOL_F_BIND_CALLER | \
		       SR_POOL_F_FIRST_ENV | SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE | \
		       SR_POOL_F_CHECK_FINITE | SR_POOL_F_NO_CHECK_FINITE)

void sr_pool_opts_init(sr_pool_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->autoreset = SR_AUTORESET_NEXT_STEP;
	o->bind = SR_BIND_CORE;
	o->device = SR_DEVICE_HOST;
}

static uint64_t pow2_at_least(uint64_t x)
{
	uint64_t c = 2;

	while (c < x)
		c <<= 1;
	return c;
}

/*
 * The default thread count (num_threads 0) comes from the work of one
 * batch: num_envs x the env's step cost, measured here on the calling
 * thread (SR__COST_ENVS instances, about 20 us of steps after a warm-up
 * round). A worker thread pays for itself only when its share of a batch
 * is well above what waking it and waiting for it cost: a few
 * microseconds on an idle machine, tens on a busy or virtualised one,
 * where a second thread made a 4-env CartPole pool 2.5x slower than the
 * calling thread alone. So: one thread per SR__THREAD_GRAIN_NS of work, at
 * least one (the calling thread steps everything: no wake-ups at all), at
 * most one per core of the allowed cpuset. Results never depend on it.
 */
#define SR__THREAD_GRAIN_NS 100000ull
#define SR__COST_ENVS 16u

static uint64_t step_cost_ns(const sr_env_spec *s, uint64_t seed)
{
	const size_t n = SR__COST_ENVS, asz = sr_env_action_size(s);
	size_t sbytes = (size_t)sr__align_up((size_t)s->state_size * n, 64);
	unsigned char *st = aligned_alloc(64, sbytes), *act = calloc(n, asz);
	float *obs = malloc(n * s->obs_dim * sizeof(float));
	double *rew = malloc(n * sizeof(double));
	uint8_t *term = malloc(n);
	uint64_t t0, t = 0, rounds = 0, cost = 0;
	size_t made = 0;

	if (!st || !act || !obs || !rew || !term)
		goto out;
	memset(st, 0, sbytes);
	if (s->flags & SR_ENV_F_OPAQUE)
		for (; made < n; made++)
			if (s->create(s, st + made * s->state_size))
				goto out;
	if (s->act_kind == SR_SPACE_BOX)
		for (size_t i = 0; i < n * s->act_dim; i++) {
			uint32_t k = (uint32_t)(i % s->act_dim);
			((float *)act)[i] = 0.5f * s->act_low[k] + 0.5f * s->act_high[k];
		}
	s->seed(s, st, n, seed, 0);
	s->reset(s, st, n, obs);
	s->step(s, st, n, act, obs, rew, term); /* warm-up: caches, lazy init */
	t0 = sr__now_ns();
	do {
		s->step(s, st, n, act, obs, rew, term);
		rounds++;
		t = sr__now_ns();
	} while (t - t0 < 20000 && rounds < 512);
	cost = (t - t0) / (n * rounds);
	if (!cost)
		cost = 1;
out:
	if (s->flags & SR_ENV_F_OPAQUE)
		while (made)
			s->destroy(s, st + --made * s->state_size);
	free(st);
	free(act);
	free(obs);
	free(rew);
	free(term);
	return cost;
}

/* Threads for @p's work, at most @cores; the reason in p->cfg.threads_note. */
static uint32_t auto_threads(sr_pool *p, uint32_t cores)
{
	uint64_t cost = step_cost_ns(&p->cfg.spec, p->cfg.seed);
	uint64_t work = cost * p->cfg.num_envs;
	uint64_t t = work / SR__THREAD_GRAIN_NS;

	if (!cost) {
		snprintf(p->cfg.threads_note, sizeof(p->cfg.threads_note),
			 "%u (default: the step cost could not be measured: one per core)", cores);
		return cores;
	}
	if (t < 1)
		t = 1;
	if (t > cores)
		t = cores;
	snprintf(p->cfg.threads_note, sizeof(p->cfg.threads_note),
		 "%u (default: %u envs x %llu ns a step = %.1f us a batch; one thread per "
		 "%llu us of it, %s)", (unsigned)t, p->cfg.num_envs, (unsigned long long)cost,
		 (double)work / 1e3, SR__THREAD_GRAIN_NS / 1000,
		 t == 1 ? "so the calling thread steps them all" :
		 t == cores ? "up to one per core" : "fewer than the cores");
	return (uint32_t)t;
}

static int check_opts(const sr_pool_opts *o)
{
	if (o->flags & ~(uint32_t)SR_POOL_F_ALL)
		return sr__errorf(-EINVAL, "unknown pool flags 0x%x", o->flags & ~(uint32_t)SR_POOL_F_ALL);
	if ((o->flags & SR_POOL_F_CHECK_FINITE) && (o->flags & SR_POOL_F_NO_CHECK_FINITE))
		return sr__errorf(-EINVAL, "SR_POOL_F_CHECK_FINITE and SR_POOL_F_NO_CHECK_FINITE "
				  "are both set");
	if (o->num_envs == 0)
		return sr__errorf(-EINVAL, "num_envs must be > 0");
	if (o->num_envs >= SR__Q_RESET)
		return sr__errorf(-EINVAL, "num_envs %u is too large", o->num_envs);
	if (o->batch_size > o->num_envs)
		return sr__errorf(-EINVAL, "batch_size %u > num_envs %u (batch_size must be <= "
				  "num_envs; = num_envs or 0 for sync)", o->batch_size, o->num_envs);
	if (o->autoreset > SR_AUTORESET_DISABLED)
		return sr__errorf(-EINVAL, "unknown autoreset mode %u (next_step 0, same_step 1, "
				  "disabled 2)", o->autoreset);
	if (o->autoreset == SR_AUTORESET_DISABLED && o->batch_size &&
	    o->batch_size < o->num_envs)
		return sr__errorf(-EINVAL, "autoreset disabled needs a sync pool (batch_size = "
				  "num_envs): sr_pool_reset_mask, the only way to reset single "
				  "envs, is sync");
	if (o->bind > SR_BIND_NONE)
		return sr__errorf(-EINVAL, "unknown bind policy %u (core 0, numa 1, none 2)", o->bind);
	if (o->device > SR_DEVICE_AUTO)
		return sr__errorf(-EINVAL, "unknown device %u (host 0, cuda 1, auto 2)", o->device);
	if (!o->spec && !o->env)
		return sr__errorf(-EINVAL, "no env: set opts.env (id or name) or opts.spec");
	if ((o->flags & SR_POOL_F_CPUSET) && !o->cpuset)
		return sr__errorf(-EINVAL, "SR_POOL_F_CPUSET set but cpuset is NULL");
	if ((o->flags & SR_POOL_F_RING_NAME) && (!o->ring_name || !o->ring_name[0]))
		return sr__errorf(-EINVAL, "SR_POOL_F_RING_NAME set but ring_name is empty");
	if ((o->flags & SR_POOL_F_TOPOLOGY) && !o->topology)
		return sr__errorf(-EINVAL, "SR_POOL_F_TOPOLOGY set but topology is NULL");
	if ((o->flags & SR_POOL_F_FIRST_ENV) && o->first_env > UINT64_MAX - o->num_envs)
		return sr__errorf(-EINVAL, "first_env %llu + num_envs %u overflows",
				  (unsigned long long)o->first_env, o->num_envs);
	if ((o->flags & SR_POOL_F_PROCS) && o->batch_size && o->batch_size < o->num_envs &&
	    ((o->worker_argv && o->worker_argv[0]) || o->proc_inline))
		return sr__errorf(-EINVAL, "an async process pool (batch_size %u < num_envs %u) "
					   "needs the C env worker: a worker program of its own "
					   "(worker_argv) or an inline function (proc_inline) steps "
					   "whole slices, sync commands only",
				  o->batch_size, o->num_envs);
	if ((o->flags & SR_POOL_F_PROC_INLINE) && !(o->flags & SR_POOL_F_PROCS))
		return sr__errorf(-EINVAL, "SR_POOL_F_PROC_INLINE is for process workers: set "
					   "SR_POOL_F_PROCS too");
	if (o->worker_out_size && !(o->flags & SR_POOL_F_PROCS))
		return sr__errorf(-EINVAL, "worker_out_size is for process workers: set "
					   "SR_POOL_F_PROCS too");
	if (o->worker_out_size > ((size_t)256 << 20))
		return sr__errorf(-EINVAL, "worker_out_size %zu: at most 256 MiB", o->worker_out_size);
	if (o->proc_inline && !(o->flags & SR_POOL_F_PROC_INLINE))
		return sr__errorf(-EINVAL, "proc_inline is set but SR_POOL_F_PROC_INLINE is not");
	if ((o->flags & SR_POOL_F_PROC_INLINE) && o->worker_argv && o->worker_argv[0] &&
	    !o->proc_inline)
		return sr__errorf(-EINVAL, "SR_POOL_F_PROC_INLINE with a worker program "
					   "(worker_argv) needs proc_inline: the program's envs "
					   "cannot be stepped in this process");
	if (o->ring_capacity && (o->ring_capacity & (o->ring_capacity - 1)))
		return sr__errorf(-EINVAL, "ring_capacity %llu is not a power of two",
				  (unsigned long long)o->ring_capacity);
	if (o->ring_capacity && o->ring_capacity < 4ull * o->num_envs)
		return sr__errorf(-EINVAL, "ring_capacity %llu < 4 * num_envs (%llu): a batch "
				  "must stay valid while the next one is written",
				  (unsigned long long)o->ring_capacity, 4ull * o->num_envs);
	return 0;
}

/*
 * sr_pool_create in steps, each on the pool made so far (sr_pool_destroy
 * frees whatever a failed step leaves): configuration from the options,
 * placement and thread count, the ring, the per-env arrays, the command
 * records, the workers' slices; then the collector, the stats block and
 * the workers themselves (p->workers.kind->start).
 */

/* The env and the configuration fields. */
static int create_config(sr_pool *p, const sr_pool_opts *o)
{
	int err;

	if (o->spec)
		err = sr_env_spec_upgrade(o->spec, &p->cfg.spec); /* v1, v2 or v3 */
	else
		err = sr_env_find(o->env, &p->cfg.spec);
	if (err)
		return err;
	/* The ring, batches, replay and checkpoints hold float32 observations
	 * of a box space so far; the other dtypes of env ABI v3 are refused
	 * here until they carry them. */
	if (p->cfg.spec.obs_dtype != SR_DTYPE_FLOAT32 ||
	    (p->cfg.spec.obs_kind && p->cfg.spec.obs_kind != SR_SPACE_BOX))
		return sr__errorf(-ENOTSUP, "env '%s': %s observations (obs_dtype %u, obs_kind %u) "
				  "are not supported by the pool yet: float32 box only",
				  p->cfg.spec.id, sr_dtype_name(p->cfg.spec.obs_dtype),
				  p->cfg.spec.obs_dtype, p->cfg.spec.obs_kind);
	p->cfg.num_envs = o->num_envs;
	p->cfg.batch_size = o->batch_size ? o->batch_size : o->num_envs;
	p->cfg.async = p->cfg.batch_size < p->cfg.num_envs;
	p->cfg.autoreset = o->autoreset;
	p->cfg.keep_final =
		o->autoreset == SR_AUTORESET_SAME_STEP || (o->flags & SR_POOL_F_FINAL_OBS);
	p->cfg.seed = (o->flags & SR_POOL_F_SEED) ? o->seed : 0;
	p->cfg.env_base = (o->flags & SR_POOL_F_FIRST_ENV) ? o->first_env : 0;
	p->cfg.act_size = sr_env_action_size(&p->cfg.spec);
	p->workers.kind = (o->flags & SR_POOL_F_PROCS) ? &sr__kind_proc : &sr__kind_thread;
	if ((p->cfg.spec.flags & SR_ENV_F_FOREIGN) &&
	    (!(o->flags & SR_POOL_F_PROCS) || !o->worker_argv || !o->worker_argv[0]))
		return sr__errorf(-EINVAL, "env '%s' lives in worker programs (SR_ENV_F_FOREIGN): "
				  "it needs SR_POOL_F_PROCS and worker_argv", p->cfg.spec.id);
	p->cfg.obs_dim = p->cfg.spec.obs_dim;
	p->col.dev_kind = o->device;
	p->col.dev_index = o->device_index;
	p->cfg.spin_iters = 1u << 14;
	{
		const char *s = getenv("STEPRING_SPIN");
		if (s && *s)
			p->cfg.spin_iters = (uint32_t)strtoul(s, NULL, 10);
	}
	p->fin.on = sr__check_finite_default();
	if (o->flags & (SR_POOL_F_CHECK_FINITE | SR_POOL_F_NO_CHECK_FINITE))
		p->fin.on = (o->flags & SR_POOL_F_CHECK_FINITE) != 0;
	return 0;
}

/* The placement plan (near the batches' GPU when the calling thread, the
 * collector, is bound), the calling thread's binding, the thread count. */
static int create_placement(sr_pool *p, const sr_pool_opts *o)
{
	struct sr__plan *plan;
	uint32_t T;
	int err;

	{
		/* The calling thread is the collector: when the batches go to a
		 * GPU and the pool binds that thread, plan it near the GPU. */
		char near[256] = "";
		bool gpu = o->device == SR_DEVICE_CUDA ||
			   (o->device == SR_DEVICE_AUTO && sr__cuda_available((int)o->device_index));

		if ((o->flags & SR_POOL_F_BIND_CALLER) && !(o->flags & SR_POOL_F_TOPOLOGY) && gpu &&
		    sr__cuda_local_cpus((int)o->device_index, near, sizeof(near)))
			near[0] = '\0'; /* hwloc does not know where it is: plan as usual */
		err = sr__plan_compute((o->flags & SR_POOL_F_TOPOLOGY) ? o->topology : NULL,
				       (o->flags & SR_POOL_F_CPUSET) ? o->cpuset : NULL,
				       near[0] ? near : NULL, o->num_threads, o->bind, &p->place.plan);
	}
	if (err)
		return err;
	plan = p->place.plan;
	if (o->flags & SR_POOL_F_TOPOLOGY) {
		/* A described topology is not this machine: plan only, no binding. */
		for (uint32_t i = 0; i < plan->nthreads; i++)
			plan->w[i].cpus[0] = '\0';
	}
	if (o->flags & SR_POOL_F_BIND_CALLER) {
		/* Before worker 0's memory is first touched from this thread. */
		err = sr__bind_self(&plan->w[0]);
		if (err)
			return sr__errorf(err, "cannot bind the calling thread to cpus %s: %s",
					  plan->w[0].cpus, sr_strerror(err));
		p->place.caller_bound = plan->w[0].cpus[0] != '\0';
	}
	T = plan->nthreads;
	if (o->num_threads == 0)
		T = auto_threads(p, T);
	else
		snprintf(p->cfg.threads_note, sizeof(p->cfg.threads_note), "%u (asked for)",
			 T < p->cfg.num_envs ? T : p->cfg.num_envs);
	if (T > p->cfg.num_envs)
		T = p->cfg.num_envs; /* a worker without envs would only cost a thread */
	p->cfg.num_threads = T;
	p->workers.first_thread = (p->cfg.knobs & SR__KNOB_NO_INLINE) ? 0 : 1;
	/* Async: a worker thread steps at most this many queued envs per
	 * reservation. recv returns rows in ring order, so a batch that
	 * reaches into a drain waits for the whole drain: a worker's share of
	 * a batch keeps that short; 128 rows at least keep the per-drain
	 * costs (reserve, publish, wake) small against the steps. */
	p->side.drain_max =
		p->cfg.batch_size / T > SR__DRAIN_MIN ? p->cfg.batch_size / T : SR__DRAIN_MIN;
	return 0;
}

/* The ring (>= 4 * num_envs slots) and its cached columns. */
static int create_ring(sr_pool *p, const sr_pool_opts *o)
{
	sr_ring_opts ro;
	int err;

	memset(&ro, 0, sizeof(ro));
	ro.obs_dim = p->cfg.obs_dim;
	ro.act_size = (uint32_t)p->cfg.act_size;
	ro.capacity = o->ring_capacity
			      ? o->ring_capacity
			      : pow2_at_least(4ull * p->cfg.num_envs > 1024 ? 4ull * p->cfg.num_envs
									    : 1024);
	if (o->flags & SR_POOL_F_RING_NAME) {
		ro.flags = SR_RING_SHM;
		ro.name = o->ring_name;
	}
	err = sr_ring_create(&ro, &p->ring.r);
	if (err)
		return err;
	sr__ring_cols_get(p->ring.r, &p->ring);
	return 0;
}

/* The worker records and the per-env and per-worker arrays. */
static int create_arrays(sr_pool *p)
{
	const uint32_t T = p->cfg.num_threads;

	p->workers.w = aligned_alloc(SR_CACHELINE, sizeof(*p->workers.w) * T);
	p->place.env_worker = calloc(p->cfg.num_envs, sizeof(*p->place.env_worker));
	p->rb.shift = calloc(T, sizeof(*p->rb.shift));
	p->rb.mark = calloc(2 * (size_t)T, sizeof(*p->rb.mark));
	p->rb.inv = calloc(T, sizeof(*p->rb.inv));
	p->flight.inflight = calloc(p->cfg.num_envs, 1);
	p->flight.last_ids = calloc(p->cfg.num_envs, sizeof(*p->flight.last_ids));
	p->side.async_act = calloc(p->cfg.num_envs, p->cfg.act_size);
	if (p->cfg.keep_final)
		p->side.final_env = calloc((size_t)p->cfg.num_envs * p->cfg.obs_dim, sizeof(float));
	if (!p->workers.w || !p->place.env_worker || !p->rb.shift || !p->rb.mark || !p->rb.inv ||
	    !p->flight.inflight || !p->flight.last_ids || !p->side.async_act ||
	    (p->cfg.keep_final && !p->side.final_env))
		return sr__errorf(-ENOMEM, "out of memory for %u envs", p->cfg.num_envs);
	memset(p->workers.w, 0, sizeof(*p->workers.w) * T);
	p->flight.grp_last = -1;
	return 0;
}

/*
 * The command records. Commands go to groups of envs (worker/thread.c): a sync
 * pool has one, every env; an async one has batch groups (collector.c)
 * when the batches tile the envs: each worker has the same number of envs
 * in every group, so its slice is a multiple of the group count.
 */
/*
 * Zeroed memory on whole SR_CACHELINE blocks of its own: for what one
 * thread writes and another reads, whose lines must not be shared with
 * the allocator's neighbours (calloc aligns to 16 bytes only), nor the
 * _Alignas of its members be void.
 */
static void *calloc_lines(size_t n, size_t size)
{
	size_t len = (size_t)sr__align_up(n * size, SR_CACHELINE);
	void *m = len ? aligned_alloc(SR_CACHELINE, len) : NULL;

	if (m)
		memset(m, 0, len);
	return m;
}

static int create_commands(sr_pool *p, const sr_pool_opts *o)
{
	const uint32_t T = p->cfg.num_threads;

	if (p->cfg.async && (p->cfg.num_envs % p->cfg.batch_size != 0 || p->cfg.batch_size < T ||
			 (p->cfg.knobs & SR__KNOB_NO_BATCH_GROUPS)))
		return 0; /* per-env queues only */
	p->cmds.ngroups = p->cfg.num_envs / p->cfg.batch_size;
	/* The workers read a command's record and its shifts while the pool
	 * thread writes the next ones: each on lines of its own (an 80-byte
	 * record packed behind another shared its first line with the
	 * other's last). */
	p->cmds.rec = calloc_lines(p->cmds.ngroups, sizeof(*p->cmds.rec));
	if (!p->cmds.rec)
		return sr__errorf(-ENOMEM, "out of memory for %u batch groups", p->cmds.ngroups);
	for (uint32_t g = 0; g < p->cmds.ngroups; g++) {
		/* Sync steps use the caller's actions in place. */
		if (p->cfg.async)
			p->cmds.rec[g].acts_buf =
				malloc((size_t)p->cfg.batch_size * p->cfg.act_size);
		p->cmds.rec[g].shift = calloc_lines(T, sizeof(int32_t));
		if ((p->cfg.async && !p->cmds.rec[g].acts_buf) || !p->cmds.rec[g].shift)
			return sr__errorf(-ENOMEM, "out of memory for %u batch groups",
					  p->cmds.ngroups);
	}
	return 0;
}

/*
 * The workers' slices: contiguous, sizes differ by at most one (with batch
 * groups: multiples of the group count, differing by at most that), each
 * env's owner, and whether rebalancing moves the shares' boundaries.
 */
static void create_slices(sr_pool *p, const sr_pool_opts *o)
{
	const uint32_t T = p->cfg.num_threads, base = p->cfg.num_envs / T,
		       extra = p->cfg.num_envs % T;
	uint32_t env = 0;

	for (uint32_t i = 0; i < T; i++) {
		struct sr__worker *w = &p->workers.w[i];
		w->pool = p;
		w->index = i;
		w->first_env = env;
		w->n_envs = base + (i < extra);
		if (p->cmds.ngroups) {
			/* batch_size / T rows of each group, the first ones one more. */
			w->grp_m = p->cfg.batch_size / T + (i < p->cfg.batch_size % T);
			w->grp_off = i * (p->cfg.batch_size / T) +
				     (i < p->cfg.batch_size % T ? i : p->cfg.batch_size % T);
			w->n_envs = w->grp_m * p->cmds.ngroups;
		}
		w->cpu = p->place.plan->w[i].cpu;
		for (uint32_t k = 0; k < w->n_envs; k++)
			p->place.env_worker[env + k] = i;
		env += w->n_envs;
	}
	p->cfg.max_slice = 0;
	for (uint32_t i = 0; i < T; i++)
		if (p->workers.w[i].n_envs > p->cfg.max_slice)
			p->cfg.max_slice = p->workers.w[i].n_envs;
	p->rb.on = (!p->cfg.async || p->cmds.ngroups) && T > 1 &&
		   !(p->cfg.knobs & SR__KNOB_NO_REBALANCE) && !(o->flags & SR_POOL_F_PROCS);
}

/* The settings the workers step with (struct sr__book). */
static void create_book(sr_pool *p)
{
	const uint32_t maxs = p->cfg.spec.max_episode_steps;

	p->cfg.book.spec = &p->cfg.spec;
	p->cfg.book.od = p->cfg.obs_dim;
	/* truncated <=> elapsed + 1 >= maxs <=> elapsed >= maxs - 1 */
	p->cfg.book.trunc_at = maxs ? maxs - 1 : UINT32_MAX;
	p->cfg.book.asz = p->cfg.act_size;
	p->cfg.book.autoreset = p->cfg.autoreset;
	p->cfg.book.check = p->fin.on;
	p->cfg.book.final = p->cfg.keep_final ? p->side.final_env : NULL;
	p->cfg.book.nf_first = &p->fin.first;
}

/* Everything but the validation and the allocation of @p itself. */
static int create_steps(sr_pool *p, const sr_pool_opts *o)
{
	int err;

	err = create_config(p, o);
	if (!err)
		err = create_placement(p, o);
	if (!err)
		err = create_ring(p, o);
	if (!err)
		err = create_arrays(p);
	if (!err)
		err = create_commands(p, o);
	if (err)
		return err;
	create_book(p);
	create_slices(p, o);
	err = sr__collector_open(p);
	if (!err && (o->flags & SR_POOL_F_RING_NAME))
		err = sr__stats_shm_open(p, o->ring_name);
	if (!err)
		err = p->workers.kind->start(p, o);
	return err;
}

int sr__pool_knobs_parse(const char *s, uint32_t *out)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} known[] = {
		{"no-inline", SR__KNOB_NO_INLINE},
		{"no-batch-groups", SR__KNOB_NO_BATCH_GROUPS},
		{"no-rebalance", SR__KNOB_NO_REBALANCE},
	};

	*out = 0;
	while (s && *s) {
		size_t n = strcspn(s, ",");
		size_t k;

		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (n == strlen(known[k].name) && !strncmp(s, known[k].name, n))
				break;
		if (k == sizeof(known) / sizeof(known[0]))
			return sr__errorf(-EINVAL, "STEPRING_POOL_KNOBS: unknown knob '%.*s' "
					  "(no-inline, no-batch-groups, no-rebalance)", (int)n, s);
		*out |= known[k].bit;
		s += n + (s[n] == ',');
	}
	return 0;
}

int sr_pool_create(const sr_pool_opts *o, sr_pool **out)
{
	uint32_t knobs;
	int err;

	if (!out)
		return sr__errorf(-EINVAL, "sr_pool_create: out is NULL");
	*out = NULL;
	err = sr__pool_knobs_parse(getenv("STEPRING_POOL_KNOBS"), &knobs);
	if (err)
		return err;
	return sr__pool_create_knobs(o, knobs, out);
}

int sr__pool_create_knobs(const sr_pool_opts *o, uint32_t knobs, sr_pool **out)
{
	sr_pool *p;
	int err;

	if (!out)
		return sr__errorf(-EINVAL, "sr_pool_create: out is NULL");
	*out = NULL;
	if (!o)
		return sr__errorf(-EINVAL, "sr_pool_create: opts is NULL");
	err = check_opts(o);
	if (err)
		return err;
	/* Aligned as its _Alignas members say: with calloc's 16 bytes the
	 * lines the workers read (configuration, ring columns, commands'
	 * count) were not the ones the layout puts them on, and the first one
	 * held the end of whatever the allocator had put before it. */
	p = calloc_lines(1, sizeof(*p));
	if (!p)
		return sr__errorf(-ENOMEM, "out of memory");
	p->shm.start_ns = sr__now_ns();
	p->cfg.knobs = knobs;
	err = create_steps(p, o);
	if (err) {
		sr_pool_destroy(p);
		return err;
	}
	sr__clear_error();
	*out = p;
	return 0;
}

void sr_pool_destroy(sr_pool *p)
{
	if (!p)
		return;
	sr__pool_ckpt_close(p); /* waits for a checkpoint still reading the ring */
	if (p->workers.kind)
		p->workers.kind->stop(p);
	sr__stats_shm_close(p);
	sr__collector_close(p);
	sr_ring_destroy(p->ring.r);
	sr__plan_free(p->place.plan);
	free(p->workers.w);
	free(p->place.env_worker);
	free(p->rb.shift);
	free(p->rb.mark);
	free(p->rb.inv);
	free(p->flight.inflight);
	free(p->flight.last_ids);
	free(p->side.async_act);
	free(p->side.final_env);
	if (p->cmds.rec) {
		for (uint32_t g = 0; g < p->cmds.ngroups; g++) {
			free(p->cmds.rec[g].acts_buf);
			free(p->cmds.rec[g].shift);
		}
	}
	free(p->cmds.rec);
	free(p);
}

/* Validate the actions of @n envs (ids or 0..n-1); -EINVAL names the env.
 * A branch-free pass (vectorized) first; the slow pass only finds which. */
SR_VECTOR_CLONES
static int check_actions(const sr_pool *p, const void *actions, const uint32_t *ids, uint32_t n)
{
	const sr_env_spec *s = &p->cfg.spec;

	if (!actions)
		return sr__errorf(-EINVAL, "actions is NULL");
	if (s->act_kind == SR_SPACE_DISCRETE) {
		const uint32_t *a = actions;
		uint32_t bad = 0;
		for (uint32_t i = 0; i < n; i++)
			bad |= a[i] >= s->act_n; /* negative int32 -> huge uint32 */
		if (SR_LIKELY(!bad))
			return 0;
		for (uint32_t i = 0; i < n; i++)
			if (a[i] >= s->act_n)
				return sr__errorf(-EINVAL, "env %u: action %d is out of range [0, %u)",
						  ids ? ids[i] : i, (int32_t)a[i], s->act_n);
	} else {
		/* Box actions: only non-finite values are refused. Values outside
		 * [act_low, act_high] reach the env, which clips them the way its
		 * reference does (Gymnasium's Pendulum and MountainCarContinuous
		 * clip the force; MountainCarContinuous's reward uses the raw
		 * action). */
		const float *a = actions;
		const size_t m = (size_t)n * s->act_dim;
		int bad = 0;
		for (size_t i = 0; i < m; i++)
			bad |= a[i] - a[i] != 0.0f; /* NaN or inf: inf - inf is NaN */
		if (SR_LIKELY(!bad))
			return 0;
		for (size_t i = 0; i < m; i++)
			if (!isfinite(a[i]))
				return sr__errorf(-EINVAL, "env %u: action[%u] is %s",
						  ids ? ids[i / s->act_dim] : (uint32_t)(i / s->act_dim),
						  (uint32_t)(i % s->act_dim),
						  isnan(a[i]) ? "NaN" : "infinite");
	}
	return 0;
}

/* Batch latency [t0, t1] (clock reads are about 30 ns on a VM: the
 * collector's last one is reused). */
static void lat_record(sr_pool *p, uint64_t t0, uint64_t t1)
{
	p->col.lat_us[p->col.lat_n++ % (sizeof(p->col.lat_us) / sizeof(p->col.lat_us[0]))] =
		(double)(t1 - t0) / 1e3;
	if (p->shm.blk)
		sr__stats_shm_update(p);
}

/*
 * Send command p->cmds.issued to the workers: group @g's envs into
 * batch_size contiguous slots (from *@seq), stepped with @actions (in
 * batch row order), or with @actions NULL reset (every env, or where
 * @mask, one byte per env, is not 0). Sync pools pass the caller's actions
 * (the call waits for the command); async ones copy them.
 */
static int cmd_send(sr_pool *p, uint32_t g, const void *actions, const uint8_t *mask,
		    const struct sr__reset_opt *ro, const double *b, uint64_t *seq)
{
	struct sr__grp_cmd *c = sr__cmd_rec(p, p->cmds.issued);
	int err;

	/* Room: at most num_envs result slots (the groups in flight), as
	 * many same-step extras and a pad are between the cursor and the
	 * head, so this (the only consumer's) reservation never waits. The
	 * seq words of the slots are written only by the workers that
	 * publish them (R3 is the claim on head, see run_group). */
	err = sr_ring_reserve(p->ring.r, p->cfg.batch_size, SR_RESERVE_CONTIG, seq);
	if (err)
		return err;
	c->g = g;
	c->reset = !actions;
	c->seq = *seq;
	c->mask = mask;
	c->reset_fn = ro ? ro->reset : NULL;
	if (ro)
		memcpy(c->reset_b, b, sizeof(c->reset_b));
	c->acts = actions;
	if (actions) {
		if (c->acts_buf) {
			memcpy(c->acts_buf, actions, (size_t)p->cfg.batch_size * p->cfg.act_size);
			c->acts = c->acts_buf;
		}
		if (p->workers.kind->shares)
			p->workers.kind->shares(p, c->shift);
	}
	return p->workers.kind->send(p);
}

/* Sync: one command for the one group, sent to the workers, waited for
 * (thread workers: worker 0's share runs on this thread meanwhile) and
 * collected. */
static int sync_cmd(sr_pool *p, const void *actions, const uint8_t *mask,
		    const struct sr__reset_opt *ro, const double *b, const sr_batch **out)
{
	uint64_t seq, t, k = p->cmds.issued, t0 = sr__now_ns();
	const sr_batch *dropped;
	int err, cerr;

	err = cmd_send(p, 0, actions, mask, ro, b, &seq);
	if (err)
		return err;
	err = p->workers.kind->wait(p, k, &t);
	/* A command that faulted has every row published all the same (fault
	 * rows): consume them, so that the ring stays usable; its batch is
	 * not returned. */
	cerr = sr__collect_sync(p, seq, &t, err ? &dropped : out);
	if (err)
		return err;
	lat_record(p, t0, t);
	return cerr;
}

/* The group whose envs @ids are, in batch row order, or -1. */
static int32_t grp_match(const sr_pool *p, const uint32_t *ids, uint32_t n)
{
	const struct sr__worker *w0 = &p->workers.w[0];
	uint32_t g;

	/* Worker 0's envs start at 0: a group's first row is env g * m_0. */
	if (!p->cmds.ngroups || n != p->cfg.batch_size)
		return -1;
	g = ids[0] / w0->grp_m;
	if (g >= p->cmds.ngroups)
		return -1;
	for (uint32_t i = 0; i < p->cfg.num_threads; i++) {
		const struct sr__worker *w = &p->workers.w[i];
		uint32_t e0 = w->first_env + g * w->grp_m, bad = 0;

		for (uint32_t j = 0; j < w->grp_m; j++)
			bad |= ids[w->grp_off + j] ^ (e0 + j);
		if (bad)
			return -1;
	}
	return (int32_t)g;
}

/*
 * Batch groups: queue group @g's command (a step with @actions, or with
 * @actions NULL a reset) into batch_size contiguous slots. The caller
 * checked that the pool may be in group mode and that the group is not
 * in flight.
 */
static int grp_send(sr_pool *p, uint32_t g, const void *actions)
{
	uint64_t seq;
	int err = cmd_send(p, g, actions, NULL, NULL, NULL, &seq);

	if (err)
		return err;
	sr__grp_mark(p, g, 1);
	p->flight.n_inflight += p->cfg.batch_size;
	return 0;
}

int sr_pool_reset(sr_pool *p, const sr_batch **out)
{
	if (!p)
		return sr__errorf(-EINVAL, "pool is NULL");
	if (p->cfg.async) {
		int err = 0;

		/* Drop whatever is in flight, then queue a reset of every env;
		 * recv returns them. */
		sr__collect_drain(p);
		if (p->cmds.ngroups) {

			/* By group, in order: recv returns group 0 first (the
			 * drain left no command in flight). */
			p->flight.grp_on = true;
			for (uint32_t g = 0; g < p->cmds.ngroups && !err; g++)
				err = grp_send(p, g, NULL);
			if (out)
				*out = NULL;
			return err;
		}
		err = p->workers.kind->send_envs(p, NULL, NULL, p->cfg.num_envs);
		if (!err) {
			memset(p->flight.inflight, 1, p->cfg.num_envs);
			p->flight.n_inflight = p->cfg.num_envs;
		}
		if (out)
			*out = NULL;
		return err;
	}
	if (!out)
		return sr__errorf(-EINVAL, "out is NULL");
	return sync_cmd(p, NULL, NULL, NULL, NULL, out);
}

int sr_pool_step(sr_pool *p, const void *actions, const sr_batch **out)
{
	int err;

	if (!p || !out)
		return sr__errorf(-EINVAL, "sr_pool_step: NULL argument");
	if (p->cfg.async)
		return sr__errorf(-EINVAL, "sr_pool_step is for sync pools (batch_size == num_envs); "
				  "this one is async: use sr_pool_send / sr_pool_recv");
	err = check_actions(p, actions, NULL, p->cfg.num_envs);
	if (err)
		return err;
	return sync_cmd(p, actions, NULL, NULL, NULL, out);
}

int sr_pool_reset_mask(sr_pool *p, const uint8_t *mask, const sr_batch **out)
{
	if (!p || !mask || !out)
		return sr__errorf(-EINVAL, "sr_pool_reset_mask: NULL argument");
	if (p->cfg.async)
		return sr__errorf(-EINVAL, "sr_pool_reset_mask is for sync pools");
	return sync_cmd(p, NULL, mask, NULL, NULL, out);
}

void sr_pool_reset_opts_init(sr_pool_reset_opts *o)
{
	memset(o, 0, sizeof(*o));
}

#define SR_RESET_F_ALL (SR_RESET_F_MASK | SR_RESET_F_SEED | SR_RESET_F_SEEDS | SR_RESET_F_OPTIONS | \
			SR_RESET_F_PAYLOAD)

int sr_pool_reset_ex(sr_pool *p, const sr_pool_reset_opts *o, const sr_batch **out)
{
	const struct sr__reset_opt *ro = NULL;
	const uint8_t *mask;
	double b[2];
	int err;

	if (!p || !o || !out)
		return sr__errorf(-EINVAL, "sr_pool_reset_ex: NULL argument");
	if (o->flags & ~(uint32_t)SR_RESET_F_ALL)
		return sr__errorf(-EINVAL, "unknown reset flags 0x%x",
				  o->flags & ~(uint32_t)SR_RESET_F_ALL);
	if (!o->flags)
		return sr_pool_reset(p, out);
	if (p->cfg.async)
		return sr__errorf(-EINVAL, "reset masks, seeds and options need a sync pool; an "
				  "async pool resets every env (sr_pool_reset)");
	if ((o->flags & SR_RESET_F_MASK) && !o->mask)
		return sr__errorf(-EINVAL, "SR_RESET_F_MASK set but mask is NULL");
	if ((o->flags & SR_RESET_F_SEED) && (o->flags & SR_RESET_F_SEEDS))
		return sr__errorf(-EINVAL, "SR_RESET_F_SEED and SR_RESET_F_SEEDS: one or the other");
	if ((o->flags & SR_RESET_F_SEEDS) && !o->seeds)
		return sr__errorf(-EINVAL, "SR_RESET_F_SEEDS set but seeds is NULL");
	if ((o->flags & (SR_RESET_F_SEED | SR_RESET_F_SEEDS | SR_RESET_F_OPTIONS |
			 SR_RESET_F_PAYLOAD)) &&
	    !p->workers.kind->local_state && !p->workers.kind->reset_next)
		return sr__errorf(-ENOTSUP, "reset seeds and options need the envs in this process; "
				  "this pool has %s workers (a reset mask alone works)",
				  p->workers.kind->name);
	if ((o->flags & SR_RESET_F_PAYLOAD) && !p->workers.kind->reset_next)
		return sr__errorf(-EINVAL, "a reset payload is for process workers (SR_POOL_F_PROCS); "
				  "this pool has %s workers", p->workers.kind->name);
	if ((o->flags & SR_RESET_F_PAYLOAD) && o->payload_len &&
	    (!o->payload || o->payload_len > SR_PROC_RESET_PAYLOAD_MAX))
		return sr__errorf(-EINVAL, "reset payload: %s (%zu bytes; at most %u)",
				  o->payload ? "too long" : "NULL with a length", o->payload_len,
				  SR_PROC_RESET_PAYLOAD_MAX);
	if (o->flags & SR_RESET_F_OPTIONS) {
		if (!o->options)
			return sr__errorf(-EINVAL, "SR_RESET_F_OPTIONS set but options is NULL");
		ro = sr__env_reset_opt(&p->cfg.spec);
		if (!ro)
			return sr__errorf(-EINVAL, "env '%s' takes no reset options (got '%.64s')",
					  p->cfg.spec.id, o->options);
		err = sr__env_parse_reset_opts(&p->cfg.spec, ro, o->options, b);
		if (err)
			return err;
	}
	mask = (o->flags & SR_RESET_F_MASK) ? o->mask : NULL;
	if (!p->workers.kind->local_state) {
		/* The envs are in the workers: the seeds, options and payload
		 * go with the reset command (process workers: the command
		 * block), and each worker reseeds its envs there as below. */
		p->workers.kind->reset_next(p, o, ro ? b : NULL);
	} else if (o->flags & (SR_RESET_F_SEED | SR_RESET_F_SEEDS)) {
		/* On this thread: between commands the workers touch no env
		 * state (the last command's completion was acquired; the next
		 * kick releases these writes to them), as restore does. */
		for (uint32_t e = 0; e < p->cfg.num_envs; e++) {
			if ((mask && !mask[e]) ||
			    ((o->flags & SR_RESET_F_SEEDS) && o->seed_mask && !o->seed_mask[e]))
				continue;
			p->cfg.spec.seed(&p->cfg.spec, sr__env_state(p, e), 1,
				     (o->flags & SR_RESET_F_SEED) ? o->seed : o->seeds[e],
				     (o->flags & SR_RESET_F_SEED) ? p->cfg.env_base + e : 0);
		}
	}
	err = sync_cmd(p, NULL, mask, ro, b, out);
	if (err && !p->workers.kind->local_state)
		p->workers.kind->reset_next(p, NULL, NULL); /* never onto a later reset */
	return err;
}

int sr_pool_set_params(sr_pool *p, const char *params)
{
	if (!p || !params)
		return sr__errorf(-EINVAL, "sr_pool_set_params: NULL argument");
	if (p->cfg.async)
		return sr__errorf(-EINVAL, "env parameters change on sync pools only (an async "
				  "pool has envs in flight, stepping with the old ones)");
	if (!p->workers.kind->local_state)
		return sr__errorf(-ENOTSUP, "env parameters of a pool with %s workers are fixed "
				  "when it is made (each worker keeps the spec it started with)",
				  p->workers.kind->name);
	/* Between commands the workers read no spec (the last command's
	 * completion was acquired); the next kick releases the new slots to
	 * them, as the seeds of sr_pool_reset_ex. All keys are checked
	 * before any slot changes. */
	return sr__env_set_params(&p->cfg.spec, params, true);
}

int sr_pool_send(sr_pool *p, const void *actions, const uint32_t *env_ids, uint32_t n)
{
	bool fast = false;
	uint64_t t0;
	int err;

	if (!p)
		return sr__errorf(-EINVAL, "pool is NULL");
	if (!p->cfg.async)
		return sr__errorf(-EINVAL, "sr_pool_send is for async pools (batch_size < "
				  "num_envs); this one is sync: use sr_pool_step");
	if (!env_ids) {
		if (n != p->flight.last_n)
			return sr__errorf(-EINVAL, "send with env_ids NULL needs n = %u (the last "
					  "batch), got %u", p->flight.last_n, n);
		env_ids = p->flight.last_ids;
		/* The last batch's envs were not in flight when recv returned
		 * them; if nothing was sent since, they still are not. */
		fast = !p->flight.sent_since_recv;
	}
	if (n == 0)
		return 0;
	t0 = sr__now_ns();
	/* Batch groups: the envs of a whole group, and nothing in flight
	 * that is not a group (group mode, or nothing in flight at all). */
	if (p->cmds.ngroups && (p->flight.grp_on || !p->flight.n_inflight)) {
		int32_t g = fast && p->flight.grp_last >= 0 ? p->flight.grp_last : grp_match(p, env_ids, n);

		if (g >= 0 && !p->flight.inflight[env_ids[0]]) {
			err = check_actions(p, actions, env_ids, n);
			if (err)
				return err;
			if (!p->flight.grp_on) {
				p->flight.grp_on = true;
				p->flight.grp_recvd = p->cmds.issued;
			}
			err = grp_send(p, (uint32_t)g, actions);
			if (err)
				return err;
			p->flight.grp_last = -1;
			p->flight.sent_since_recv = true;
			p->col.call_t0 = sr__now_ns();
			p->col.ns_send += p->col.call_t0 - t0;
			return 0;
		}
	}
	err = check_actions(p, actions, env_ids, n);
	if (err)
		return err;
	if (!fast) {
		/* In range, not in flight, no duplicates: marked in flight as
		 * they pass (which catches duplicates in this call), unmarked
		 * again on an error. */
		for (uint32_t i = 0; i < n; i++) {
			if (env_ids[i] >= p->cfg.num_envs)
				err = sr__errorf(-EINVAL, "env id %u out of range [0, %u)",
						 env_ids[i], p->cfg.num_envs);
			else if (p->flight.inflight[env_ids[i]] == 1)
				err = sr__errorf(-EINVAL, "env %u already has an action in flight "
						 "(send again only after recv returned it)",
						 env_ids[i]);
			else {
				p->flight.inflight[env_ids[i]] = 1;
				continue;
			}
			while (i--)
				p->flight.inflight[env_ids[i]] = 0;
			return err;
		}
	} else {
		/* Locals: the byte stores to inflight[] may alias anything. */
		uint8_t *inflight = p->flight.inflight;

		for (uint32_t i = 0; i < n; i++)
			inflight[env_ids[i]] = 1;
	}
	/* Per-env sends from here on: recv goes by rows, and takes the
	 * groups still in flight as rows too. */
	err = p->workers.kind->send_envs(p, actions, env_ids, n);
	if (err) {
		for (uint32_t i = 0; i < n; i++)
			p->flight.inflight[env_ids[i]] = 0;
		return err;
	}
	p->flight.grp_on = false;
	p->flight.sent_since_recv = true;
	p->flight.n_inflight += n;
	p->col.call_t0 = sr__now_ns();
	p->col.ns_send += p->col.call_t0 - t0;
	return 0;
}

int sr_pool_recv(sr_pool *p, const sr_batch **out)
{
	uint64_t t0, t = 0;
	int err;

	if (!p || !out)
		return sr__errorf(-EINVAL, "sr_pool_recv: NULL argument");
	if (!p->cfg.async)
		return sr__errorf(-EINVAL, "sr_pool_recv is for async pools; use sr_pool_step");
	t0 = p->col.call_t0 ? p->col.call_t0 : sr__now_ns();
	err = sr__collect_async(p, &t, out);
	if (!err)
		lat_record(p, t0, t);
	p->col.call_t0 = 0;
	return err;
}

int sr_pool_info_get(const sr_pool *p, sr_pool_info *info)
{
	sr_pool_info o;
	uint32_t size;

	if (!p || !info || info->size < offsetof(sr_pool_info, num_threads))
		return sr__errorf(-EINVAL, "pool info: NULL argument, or info->size not set");
	memset(&o, 0, sizeof(o));
	o.num_envs = p->cfg.num_envs;
	o.num_threads = p->cfg.num_threads;
	o.batch_size = p->cfg.batch_size;
	/* A sync pool's one command group is not a batch group. */
	o.batch_groups = p->cfg.async ? p->cmds.ngroups : 0;
	o.autoreset = p->cfg.autoreset;
	o.device = p->col.dev ? SR_DEVICE_CUDA : SR_DEVICE_HOST;
	o.first_env = p->cfg.env_base;
	o.spec = &p->cfg.spec;
	o.ring = p->ring.r;
	o.threads_note = p->cfg.threads_note;
	/* What both sides know; zeroes beyond. */
	size = info->size;
	memcpy(info, &o, size < sizeof(o) ? size : sizeof(o));
	if (size > sizeof(o))
		memset((char *)info + sizeof(o), 0, size - sizeof(o));
	info->size = size;
	return 0;
}
