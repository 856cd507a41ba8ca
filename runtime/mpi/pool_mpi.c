/*
 * A pool across MPI ranks (stepring/mpi.h): creation, the collectives
 * every part of runtime/mpi/ uses, statistics. The checkpoint manifests
 * are ckpt_mpi.c, the replay across ranks replay_mpi.c; pool_nompi.c is
 * the fallback of all three in a build without MPI.
 *
 * Every collective exchange is nonblocking and polled against a deadline
 * (coll_wait), so a rank that died or hangs turns into -ETIMEDOUT on the
 * others instead of a hang; the pool's communicator is a duplicate with
 * MPI_ERRORS_RETURN, so an MPI error (a broken connection) becomes -EIO
 * rather than the default abort without a word from us.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_internal.h"

#define DEFAULT_TIMEOUT_S 60.0

void sr_mpi_opts_init(sr_mpi_opts *o)
{
	if (o)
		memset(o, 0, sizeof(*o));
}

static double opts_timeout(const sr_mpi_opts *m)
{
	const char *s = getenv("STEPRING_MPI_TIMEOUT");

	if (m && (m->flags & SR_MPI_F_TIMEOUT) && m->timeout_s > 0)
		return m->timeout_s;
	if (s && *s && strtod(s, NULL) > 0)
		return strtod(s, NULL);
	return DEFAULT_TIMEOUT_S;
}

int sr__mpi_fail(int rc, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "MPI error %d", rc);
	return sr__errorf(-EIO, "%s: %s (a rank died, or the network failed)", what, msg);
}

/* Poll @rq until it completes or @timeout_s passes. Spins briefly, then
 * sleeps 50 us between tests: the other ranks' CPUs may be this rank's. */
int sr__mpi_wait(MPI_Comm comm, MPI_Request *rq, double timeout_s, const char *what)
{
	double t0 = MPI_Wtime();
	unsigned polls = 0;
	int done = 0, rc, rank = -1;

	for (;;) {
		rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return sr__mpi_fail(rc, what);
		if (done)
			return 0;
		if (MPI_Wtime() - t0 > timeout_s) {
			MPI_Comm_rank(comm, &rank);
			/* The request cannot be cancelled (a collective): the
			 * communicator is unusable from here on. */
			return sr__errorf(-ETIMEDOUT,
					  "%s: rank %d waited %.0f s for the other ranks: a rank "
					  "died or hangs (STEPRING_MPI_TIMEOUT sets the limit)",
					  what, rank, timeout_s);
		}
		if (++polls > 2000) {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
	}
}

int sr__mpi_allgather(MPI_Comm comm, const void *in, void *out, int bytes, double timeout_s,
		      const char *what)
{
	MPI_Request rq;
	int rc = MPI_Iallgather(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, comm, &rq);

	if (rc != MPI_SUCCESS)
		return sr__mpi_fail(rc, what);
	return sr__mpi_wait(comm, &rq, timeout_s, what);
}

/* ---------------------------------------------------------------------------
 * Options every rank must agree on.
 */
struct optrec {
	char env[64];
	uint64_t num_envs, seed, ring_capacity;
	uint32_t batch_size, autoreset, device, obs_dim, act_size, state_size;
	uint32_t seed_set, final_obs, version, first_env_set;
};

static void optrec_fill(struct optrec *r, const sr_pool_opts *o, const sr_env_spec *spec)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->env, sizeof(r->env), "%s", spec ? spec->id : (o->env ? o->env : "?"));
	r->num_envs = o->num_envs;
	r->seed = (o->flags & SR_POOL_F_SEED) ? o->seed : 0;
	r->ring_capacity = o->ring_capacity;
	r->batch_size = o->batch_size == o->num_envs ? 0 : o->batch_size;
	r->autoreset = o->autoreset;
	r->device = o->device;
	r->obs_dim = spec ? spec->obs_dim : 0;
	r->act_size = spec ? (uint32_t)sr_env_action_size(spec) : 0;
	r->state_size = spec ? spec->state_size : 0;
	r->final_obs = !!(o->flags & SR_POOL_F_FINAL_OBS);
	r->version = sr_version();
	r->first_env_set = !!(o->flags & SR_POOL_F_FIRST_ENV);
}

/* The first field where @b differs from @a, as "name a vs b", or "" */
static void optrec_diff(const struct optrec *a, const struct optrec *b, char *out, size_t n)
{
	out[0] = '\0';
#define U(f, name)                                                                        \
	if (a->f != b->f) {                                                                \
		snprintf(out, n, "%s %llu vs %llu", name, (unsigned long long)a->f,        \
			 (unsigned long long)b->f);                                        \
		return;                                                                    \
	}
	if (strcmp(a->env, b->env)) {
		snprintf(out, n, "env '%s' vs '%s'", a->env, b->env);
		return;
	}
	U(num_envs, "num_envs")
	U(seed, "seed")
	U(batch_size, "batch_size")
	U(autoreset, "autoreset")
	U(final_obs, "final_obs")
	U(device, "device")
	U(ring_capacity, "ring_capacity")
	U(obs_dim, "obs_dim")
	U(act_size, "action size")
	U(state_size, "env state_size")
	U(version, "stepring version")
	U(first_env_set, "SR_POOL_F_FIRST_ENV")
#undef U
}

/* ---------------------------------------------------------------------------
 * Splitting a node's CPUs between its ranks.
 */
struct core_pus {
	int32_t numa, core;
	uint32_t n;
	int32_t pu[16];
};

static int cmp_core(const void *x, const void *y)
{
	const struct core_pus *a = x, *b = y;

	if (a->numa != b->numa)
		return a->numa < b->numa ? -1 : 1;
	return (a->core > b->core) - (a->core < b->core);
}

static int cmp_int(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;

	return (a > b) - (a < b);
}

/* "0-3,8" from a list of PU indexes (sorted here). */
static int format_list(int *v, uint32_t n, char *out, size_t len)
{
	size_t off = 0;

	qsort(v, n, sizeof(*v), cmp_int);
	out[0] = '\0';
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;
		int w;

		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		if (j > i)
			w = snprintf(out + off, len - off, "%s%d-%d", off ? "," : "", v[i], v[j]);
		else
			w = snprintf(out + off, len - off, "%s%d", off ? "," : "", v[i]);
		if (w < 0 || (size_t)w >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)w;
		i = j + 1;
	}
	return 0;
}

/*
 * Rank @lr of @ln on the node: its block of the allowed cores (@allowed,
 * a list), cut in contiguous runs in (NUMA node, core) order so a rank's
 * workers share NUMA nodes; with fewer cores than ranks, ranks share
 * cores round robin. -errno when the plan fails.
 */
static int split_cpus(const char *allowed, uint32_t lr, uint32_t ln, char *out, size_t len,
		      char *warn, size_t wlen)
{
	struct sr__plan *pl0 = NULL, *pl = NULL;
	struct core_pus *cores = NULL;
	uint32_t nc = 0, c0, c1;
	int *pus = NULL, err;
	uint32_t npu = 0;

	err = sr__plan_compute(NULL, allowed, NULL, 0, SR_BIND_CORE, &pl0);
	if (err)
		return err;
	err = sr__plan_compute(NULL, allowed, NULL, pl0->npus, SR_BIND_CORE, &pl);
	if (err)
		goto out;
	cores = calloc(pl->nthreads, sizeof(*cores));
	pus = calloc(pl->nthreads, sizeof(*pus));
	if (!cores || !pus) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < pl->nthreads; i++) {
		const struct sr__plan_worker *w = &pl->w[i];
		uint32_t k = 0;

		while (k < nc && cores[k].core != w->core)
			k++;
		if (k == nc) {
			cores[nc].core = w->core;
			cores[nc].numa = w->numa;
			nc++;
		}
		if (cores[k].n < 16 && w->cpu >= 0)
			cores[k].pu[cores[k].n++] = w->cpu;
	}
	qsort(cores, nc, sizeof(*cores), cmp_core);
	if (nc >= ln) {
		c0 = (uint32_t)((uint64_t)lr * nc / ln);
		c1 = (uint32_t)((uint64_t)(lr + 1) * nc / ln);
	} else {
		c0 = lr % nc;
		c1 = c0 + 1;
		snprintf(warn, wlen, "%u ranks on %u cores of this node: ranks share cores", ln,
			 nc);
	}
	for (uint32_t k = c0; k < c1; k++)
		for (uint32_t j = 0; j < cores[k].n; j++)
			pus[npu++] = cores[k].pu[j];
	err = npu ? format_list(pus, npu, out, len) : -EINVAL;
out:
	free(cores);
	free(pus);
	sr__plan_free(pl);
	sr__plan_free(pl0);
	return err;
}

/* ---------------------------------------------------------------------------
 * Creation.
 */

int sr_mpi_pool_create(MPI_Comm comm, const sr_pool_opts *opts, const sr_mpi_opts *mopts,
		       sr_mpi_pool **out)
{
	const char *what = "sr_mpi_pool_create";
	sr_mpi_pool *mp = NULL;
	MPI_Comm node = MPI_COMM_NULL;
	MPI_Request rq;
	struct optrec mine, *all = NULL;
	struct sr__mpi_result res, *ress = NULL;
	sr_env_spec spec;
	sr_pool_opts lo;
	char (*allowed)[256] = NULL, warn[256] = "";
	int rank, size, lrank, lsize, rc, err = 0, have_spec;
	uint64_t first = 0;
	uint32_t nloc = 0;

	if (!out)
		return sr__errorf(-EINVAL, "%s: out is NULL", what);
	*out = NULL;
	if (!opts)
		return sr__errorf(-EINVAL, "%s: opts is NULL", what);
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return sr__errorf(-ENOMEM, "out of memory");
	mp->comm = MPI_COMM_NULL;
	mp->timeout_s = opts_timeout(mopts);

	/* A private communicator that returns errors instead of aborting. */
	rc = MPI_Comm_idup(comm, &mp->comm, &rq);
	if (rc != MPI_SUCCESS) {
		err = sr__mpi_fail(rc, what);
		goto fail_nocomm;
	}
	err = sr__mpi_wait(comm, &rq, mp->timeout_s, what);
	if (err)
		goto fail_nocomm;
	MPI_Comm_set_errhandler(mp->comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(mp->comm, &rank);
	MPI_Comm_size(mp->comm, &size);

	/* 1. Every rank's options: the same on all, or the same error on all. */
	have_spec = opts->spec ? (sr_env_validate(opts->spec) == 0)
			       : (opts->env && sr_env_find(opts->env, &spec) == 0);
	if (opts->spec && have_spec)
		spec = *opts->spec;
	optrec_fill(&mine, opts, have_spec ? &spec : NULL);
	all = calloc((size_t)size, sizeof(*all));
	ress = calloc((size_t)size, sizeof(*ress));
	allowed = calloc((size_t)size, sizeof(*allowed));
	if (!all || !ress || !allowed) {
		err = sr__errorf(-ENOMEM, "out of memory");
		goto fail; /* the others time out in the next exchange */
	}
	err = sr__mpi_allgather(mp->comm, &mine, all, (int)sizeof(mine), mp->timeout_s, what);
	if (err)
		goto fail;
	for (int r = 1; r < size; r++) {
		char d[200];

		optrec_diff(&all[0], &all[r], d, sizeof(d));
		if (d[0]) {
			err = sr__errorf(-EINVAL, "%s: options differ across ranks: rank 0 and "
					 "rank %d have %s (every rank must pass the same env, "
					 "num_envs, seed, mode and autoreset)", what, r, d);
			goto fail;
		}
	}
	if (mine.first_env_set) {
		err = sr__errorf(-EINVAL, "%s: opts.first_env is set by the distributed pool; "
				 "clear SR_POOL_F_FIRST_ENV", what);
		goto fail;
	}
	err = sr_mpi_env_range(opts->num_envs, (uint32_t)size, (uint32_t)rank, &first, &nloc);
	if (err) {
		err = sr__errorf(err, "%s: num_envs %u < %d ranks: every rank must host at least "
				 "one env", what, opts->num_envs, size);
		goto fail;
	}

	/* 2. The node's ranks and their CPUs. */
	rc = MPI_Comm_split_type(mp->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
	if (rc != MPI_SUCCESS) {
		err = sr__mpi_fail(rc, what);
		goto fail;
	}
	MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
	MPI_Comm_rank(node, &lrank);
	MPI_Comm_size(node, &lsize);
	{
		/* Node index: how many node leaders (local rank 0) have a
		 * lower rank than this node's leader. */
		int leader = lrank == 0 ? rank : -1, my_leader = rank, *leaders;

		leaders = calloc((size_t)size, sizeof(int));
		if (!leaders) {
			err = sr__errorf(-ENOMEM, "out of memory");
			goto fail;
		}
		MPI_Bcast(&my_leader, 1, MPI_INT, 0, node);
		err = sr__mpi_allgather(mp->comm, &leader, leaders, (int)sizeof(int), mp->timeout_s,
				 what);
		if (!err) {
			mp->info.nodes = 0;
			mp->info.node = 0;
			for (int r = 0; r < size; r++) {
				if (leaders[r] < 0)
					continue;
				mp->info.nodes++;
				if (leaders[r] < my_leader)
					mp->info.node++;
			}
		}
		free(leaders);
		if (err)
			goto fail;
	}

	lo = *opts;
	lo.flags |= SR_POOL_F_FIRST_ENV;
	lo.first_env = first;
	lo.num_envs = nloc;
	if (opts->batch_size && opts->batch_size < opts->num_envs) {
		uint64_t b = (uint64_t)opts->batch_size * nloc / opts->num_envs;
		lo.batch_size = b ? (uint32_t)b : 1;
		if (lo.batch_size >= nloc)
			lo.batch_size = nloc > 1 ? nloc - 1 : 1;
	} else {
		lo.batch_size = 0;
	}
	if (!(opts->flags & SR_POOL_F_TOPOLOGY)) {
		struct sr__plan *pl = NULL;
		char mine_allowed[256] = "";

		err = sr__plan_compute(NULL, (opts->flags & SR_POOL_F_CPUSET) ? opts->cpuset : NULL,
				       NULL, 0, SR_BIND_CORE, &pl);
		if (!err) {
			snprintf(mine_allowed, sizeof(mine_allowed), "%s", pl->allowed);
			sr__plan_free(pl);
		}
		/* Exchange even after an error, so no rank waits for this one. */
		{
			MPI_Request r2;
			rc = MPI_Iallgather(mine_allowed, 256, MPI_BYTE, allowed, 256, MPI_BYTE,
					    node, &r2);
			int e2 = rc != MPI_SUCCESS ? sr__mpi_fail(rc, what)
						   : sr__mpi_wait(node, &r2, mp->timeout_s, what);
			if (!err)
				err = e2;
		}
		if (!err) {
			bool same = true;

			for (int r = 1; r < lsize; r++)
				same = same && !strcmp(allowed[r], allowed[0]);
			snprintf(mp->info.cpus, sizeof(mp->info.cpus), "%s", mine_allowed);
			if (same && lsize > 1 && !(mopts && (mopts->flags & SR_MPI_F_NO_SPLIT)))
				err = split_cpus(mine_allowed, (uint32_t)lrank, (uint32_t)lsize,
						 mp->info.cpus, sizeof(mp->info.cpus), warn,
						 sizeof(warn));
			if (err)
				err = sr__errorf(err, "%s: cannot split CPUs %s between %d ranks",
						 what, mine_allowed, lsize);
			lo.flags |= SR_POOL_F_CPUSET;
			lo.cpuset = mp->info.cpus;
		}
	}

	/* 3. The local pools; every rank learns every rank's result. */
	if (!err)
		err = sr_pool_create(&lo, &mp->pool);
	memset(&res, 0, sizeof(res));
	res.err = err;
	if (err)
		snprintf(res.msg, sizeof(res.msg), "%s",
			 sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	{
		int e2 = sr__mpi_allgather(mp->comm, &res, ress, (int)sizeof(res), mp->timeout_s, what);
		if (e2) {
			err = e2;
			goto fail;
		}
	}
	for (int r = 0; r < size; r++) {
		if (ress[r].err) {
			err = sr__errorf(ress[r].err, "%s: rank %d: %s", what, r, ress[r].msg);
			goto fail;
		}
	}
	if (warn[0] && rank == 0)
		fprintf(stderr, "stepring: warning: %s\n", warn);

	mp->seed = mine.seed;
	mp->info.rank = (uint32_t)rank;
	mp->info.size = (uint32_t)size;
	mp->info.local_rank = (uint32_t)lrank;
	mp->info.local_size = (uint32_t)lsize;
	sr__stats_shm_set_rank(mp->pool, (uint32_t)rank, (uint32_t)size); /* `stepring metrics` */
	mp->info.num_envs = opts->num_envs;
	mp->info.first_env = first;
	mp->info.local_envs = nloc;
	mp->info.num_threads = mp->pool->cfg.num_threads;
	if (opts->flags & SR_POOL_F_TOPOLOGY)
		mp->info.cpus[0] = '\0';
	MPI_Comm_free(&node);
	free(all);
	free(ress);
	free(allowed);
	*out = mp;
	return 0;

fail:
	/* Keep the message: the cleanup below may overwrite it. */
	{
		char keep[512];
		snprintf(keep, sizeof(keep), "%s", sr_last_error());
		sr_pool_destroy(mp->pool);
		if (node != MPI_COMM_NULL)
			MPI_Comm_free(&node);
		/* A timed-out communicator may be stuck: do not free it (that
		 * is collective); it is reclaimed at MPI_Finalize / abort. */
		if (err != -ETIMEDOUT && err != -EIO)
			MPI_Comm_free(&mp->comm);
		free(all);
		free(ress);
		free(allowed);
		free(mp);
		return sr__errorf(err, "%s", keep);
	}
fail_nocomm:
	free(mp);
	return err;
}

int sr_mpi_pool_create_f(int64_t fcomm, const sr_pool_opts *opts, const sr_mpi_opts *mopts,
			 sr_mpi_pool **out)
{
	int init = 0;

	MPI_Initialized(&init);
	if (!init)
		return sr__errorf(-EINVAL, "sr_mpi_pool_create_f: MPI is not initialized "
				  "(import mpi4py, or call MPI_Init, first)");
	return sr_mpi_pool_create(MPI_Comm_f2c((MPI_Fint)fcomm), opts, mopts, out);
}

void sr_mpi_pool_destroy(sr_mpi_pool *mp)
{
	if (!mp)
		return;
	sr_pool_destroy(mp->pool);
	if (mp->comm != MPI_COMM_NULL)
		MPI_Comm_free(&mp->comm);
	free(mp);
}

sr_pool *sr_mpi_pool_detach(sr_mpi_pool *mp)
{
	sr_pool *p;

	if (!mp)
		return NULL;
	p = mp->pool;
	mp->pool = NULL;
	sr_mpi_pool_destroy(mp);
	return p;
}

sr_pool *sr_mpi_pool_local(const sr_mpi_pool *mp)
{
	return mp ? mp->pool : NULL;
}

int sr_mpi_pool_info_get(const sr_mpi_pool *mp, sr_mpi_pool_info *out)
{
	if (!mp || !out)
		return sr__errorf(-EINVAL, "sr_mpi_pool_info_get: NULL argument");
	*out = mp->info;
	return 0;
}

MPI_Comm sr_mpi_pool_comm(const sr_mpi_pool *mp)
{
	return mp ? mp->comm : MPI_COMM_NULL;
}

int sr_mpi_pool_barrier(sr_mpi_pool *mp)
{
	MPI_Request rq;
	int rc;

	if (!mp)
		return sr__errorf(-EINVAL, "sr_mpi_pool_barrier: pool is NULL");
	rc = MPI_Ibarrier(mp->comm, &rq);
	if (rc != MPI_SUCCESS)
		return sr__mpi_fail(rc, "sr_mpi_pool_barrier");
	return sr__mpi_wait(mp->comm, &rq, mp->timeout_s, "sr_mpi_pool_barrier");
}

int sr_mpi_pool_gather_envs(sr_mpi_pool *mp, const void *local, size_t size, void *out, int root)
{
	const char *what = "sr_mpi_pool_gather_envs";
	int *cnt = NULL, *disp = NULL, rc, err;
	MPI_Request rq;
	uint32_t n;

	if (!mp || (!local && size) || size == 0)
		return sr__errorf(-EINVAL, "%s: NULL pool or data, or size 0", what);
	n = mp->info.size;
	if (root < 0 || (uint32_t)root >= n)
		return sr__errorf(-EINVAL, "%s: root %d of %u ranks", what, root, n);
	if (mp->info.num_envs * size > INT32_MAX)
		return sr__errorf(-EOVERFLOW, "%s: %llu envs x %zu bytes is over MPI's int "
				  "counts", what, (unsigned long long)mp->info.num_envs, size);
	if (mp->info.rank == (uint32_t)root) {
		if (!out)
			return sr__errorf(-EINVAL, "%s: out is NULL at the root", what);
		cnt = malloc(n * sizeof(int));
		disp = malloc(n * sizeof(int));
		if (!cnt || !disp) {
			free(cnt);
			free(disp);
			return sr__errorf(-ENOMEM, "out of memory");
		}
		for (uint32_t r = 0; r < n; r++) {
			uint64_t f;
			uint32_t k;

			sr_mpi_env_range(mp->info.num_envs, n, r, &f, &k);
			cnt[r] = (int)(k * size);
			disp[r] = (int)(f * size);
		}
	}
	rc = MPI_Igatherv(local, (int)(mp->info.local_envs * size), MPI_BYTE, out, cnt, disp,
			  MPI_BYTE, root, mp->comm, &rq);
	err = rc != MPI_SUCCESS ? sr__mpi_fail(rc, what) : sr__mpi_wait(mp->comm, &rq, mp->timeout_s, what);
	free(cnt);
	free(disp);
	return err;
}

int sr_mpi_pool_stats_get(sr_mpi_pool *mp, sr_mpi_pool_stats *out, sr_pool_stats *per_rank)
{
	const char *what = "sr_mpi_pool_stats_get";
	sr_pool_stats mine, *all;
	double wret = 0, wlen = 0;
	uint64_t wep = 0;
	int err;

	if (!mp || !out)
		return sr__errorf(-EINVAL, "%s: NULL argument", what);
	err = sr_pool_stats_get(mp->pool, &mine);
	if (err)
		return err;
	all = per_rank ? per_rank : calloc(mp->info.size, sizeof(*all));
	if (!all)
		return sr__errorf(-ENOMEM, "out of memory");
	err = sr__mpi_allgather(mp->comm, &mine, all, (int)sizeof(mine), mp->timeout_s, what);
	if (!err) {
		memset(out, 0, sizeof(*out));
		out->size = mp->info.size;
		out->steps_min = UINT64_MAX;
		for (uint32_t r = 0; r < mp->info.size; r++) {
			const sr_pool_stats *s = &all[r];
			uint64_t w = s->episodes < SR__EPWIN ? s->episodes : SR__EPWIN;

			out->total.steps += s->steps;
			out->total.episodes += s->episodes;
			out->total.ns_env_step += s->ns_env_step;
			out->total.ns_ring_publish += s->ns_ring_publish;
			out->total.ns_collect += s->ns_collect;
			out->total.ns_wait += s->ns_wait;
			out->total.ns_send += s->ns_send;
			wret += s->mean_return * (double)w;
			wlen += s->mean_length * (double)w;
			wep += w;
			if (s->steps < out->steps_min) {
				out->steps_min = s->steps;
				out->slowest_rank = r;
			}
			if (s->steps > out->steps_max)
				out->steps_max = s->steps;
		}
		out->total.mean_return = wep ? wret / (double)wep : 0;
		out->total.mean_length = wep ? wlen / (double)wep : 0;
	}
	if (!per_rank)
		free(all);
	return err;
}

/* Every rank learns every rank's (err, message); the first error becomes
 * this rank's, with the same text on all. */
int sr__mpi_agree(sr_mpi_pool *mp, int err, const char *what)
{
	struct sr__mpi_result mine, *all;
	int e2;

	memset(&mine, 0, sizeof(mine));
	mine.err = err;
	if (err)
		snprintf(mine.msg, sizeof(mine.msg), "%s",
			 sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	all = calloc(mp->info.size, sizeof(*all));
	if (!all)
		return sr__errorf(-ENOMEM, "out of memory");
	e2 = sr__mpi_allgather(mp->comm, &mine, all, (int)sizeof(mine), mp->timeout_s, what);
	if (!e2) {
		for (uint32_t r = 0; r < mp->info.size; r++) {
			if (all[r].err) {
				e2 = sr__errorf(all[r].err, "%s: rank %u: %s", what, r, all[r].msg);
				break;
			}
		}
	}
	free(all);
	return e2;
}
