/*
 * Checkpoints of a pool across MPI ranks (stepring/mpi.h): a part per
 * rank, a manifest at rank 0; every rank agrees on the outcome
 * (sr__mpi_agree).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_internal.h"

/* ---------------------------------------------------------------------------
 * Checkpoints: a part per rank, a manifest at rank 0.
 */
#define MANIFEST_MAGIC "stepring-mpi-manifest 1"

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

struct manifest {
	uint64_t gen, num_envs, seed;
	char env[64];
	uint32_t parts;
	struct mpart {
		uint64_t first;
		uint32_t n;
		char file[64];
	} *part;
};

/* 0, -ENOENT (none), -EBADMSG (malformed) */
static int manifest_read(const char *dir, struct manifest *m)
{
	char path[4096], line[256];
	FILE *f;
	int err = 0;
	uint32_t k = 0;

	memset(m, 0, sizeof(*m));
	snprintf(path, sizeof(path), "%s/manifest", dir);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : -errno;
	if (!fgets(line, sizeof(line), f) || strncmp(line, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC)) ||
	    fscanf(f, " generation %llu", (unsigned long long *)&m->gen) != 1 ||
	    fscanf(f, " env %63s", m->env) != 1 ||
	    fscanf(f, " num_envs %llu", (unsigned long long *)&m->num_envs) != 1 ||
	    fscanf(f, " seed %llu", (unsigned long long *)&m->seed) != 1 ||
	    fscanf(f, " parts %u", &m->parts) != 1 || m->parts == 0 || m->parts > (1u << 20)) {
		err = -EBADMSG;
		goto out;
	}
	m->part = calloc(m->parts, sizeof(*m->part));
	if (!m->part) {
		err = -ENOMEM;
		goto out;
	}
	for (k = 0; k < m->parts; k++) {
		unsigned r;
		if (fscanf(f, " part %u %llu %u %63s", &r, (unsigned long long *)&m->part[k].first,
			   &m->part[k].n, m->part[k].file) != 4 || r != k ||
		    strchr(m->part[k].file, '/')) {
			err = -EBADMSG;
			goto out;
		}
	}
	if (fscanf(f, " end%c", line) < 1)
		err = -EBADMSG; /* cut short */
out:
	fclose(f);
	if (err) {
		free(m->part);
		m->part = NULL;
	}
	return err;
}

static int manifest_write(sr_mpi_pool *mp, const char *dir, uint64_t gen)
{
	char tmp[4096], path[4096];
	FILE *f;
	int err = 0;

	snprintf(tmp, sizeof(tmp), "%s/.manifest.tmp", dir);
	snprintf(path, sizeof(path), "%s/manifest", dir);
	f = fopen(tmp, "we");
	if (!f)
		return sr__errorf(-errno, "checkpoint: cannot write '%s': %s", tmp, strerror(errno));
	fprintf(f, "%s\ngeneration %llu\nenv %s\nnum_envs %llu\nseed %llu\nparts %u\n",
		MANIFEST_MAGIC, (unsigned long long)gen, mp->pool->cfg.spec.id,
		(unsigned long long)mp->info.num_envs, (unsigned long long)mp->seed,
		mp->info.size);
	for (uint32_t r = 0; r < mp->info.size; r++) {
		uint64_t first;
		uint32_t n;
		sr_mpi_env_range(mp->info.num_envs, mp->info.size, r, &first, &n);
		fprintf(f, "part %u %llu %u part-%llu-%u.ckpt\n", r, (unsigned long long)first, n,
			(unsigned long long)gen, r);
	}
	fprintf(f, "end\n");
	if (fflush(f) || fsync(fileno(f)))
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (!err)
		err = fsync_path(dir, O_RDONLY | O_DIRECTORY);
	if (err)
		return sr__errorf(err, "checkpoint: writing the manifest in '%s': %s", dir,
				  sr_strerror(err));
	return 0;
}

/* Rank 0, after the new manifest is durable: parts of other generations. */
static void remove_old_parts(const char *dir, uint64_t gen)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		unsigned long long g;
		unsigned r;
		char path[4096];

		if (sscanf(de->d_name, "part-%llu-%u.ckpt", &g, &r) == 2 && g != gen) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	}
	closedir(d);
}

int sr_mpi_pool_checkpoint(sr_mpi_pool *mp, const char *dir, const sr_ckpt_opts *opts)
{
	const char *what = "sr_mpi_pool_checkpoint";
	uint64_t gen = 1;
	char path[4096];
	int err = 0, rc;
	MPI_Request rq;

	if (!mp || !dir)
		return sr__errorf(-EINVAL, "%s: NULL argument", what);
	if (mp->info.rank == 0) {
		struct manifest m;
		if (mkdir(dir, 0755) && errno != EEXIST)
			err = sr__errorf(-errno, "%s: cannot create '%s': %s", what, dir,
					 strerror(errno));
		else if (manifest_read(dir, &m) == 0) {
			gen = m.gen + 1;
			free(m.part);
		}
	}
	rc = MPI_Ibcast(&gen, 1, MPI_UINT64_T, 0, mp->comm, &rq);
	rc = rc != MPI_SUCCESS ? sr__mpi_fail(rc, what) : sr__mpi_wait(mp->comm, &rq, mp->timeout_s, what);
	if (rc)
		return rc;
	err = sr__mpi_agree(mp, err, what);
	if (err)
		return err;
	/* Each part, durable before its rank answers. */
	snprintf(path, sizeof(path), "%s/part-%llu-%u.ckpt", dir, (unsigned long long)gen,
		 mp->info.rank);
	err = sr_pool_checkpoint(mp->pool, path, opts);
	if (!err) {
		sr_ckpt_status st;
		err = sr_pool_checkpoint_wait(mp->pool, &st);
		if (!err && st.result)
			err = st.result;
	}
	if (err)
		sr__errorf(err, "part %s: %s", path, sr_last_error()[0] ? sr_last_error()
									: sr_strerror(err));
	err = sr__mpi_agree(mp, err, what);
	if (err)
		return err;
	if (mp->info.rank == 0) {
		err = manifest_write(mp, dir, gen);
		if (!err)
			remove_old_parts(dir, gen);
	}
	return sr__mpi_agree(mp, err, what);
}

int sr_mpi_pool_restore(sr_mpi_pool *mp, const char *dir)
{
	const char *what = "sr_mpi_pool_restore";
	struct manifest m = {0};
	uint64_t lo, hi, next = 0, got = 0;
	char path[4096];
	int err;

	if (!mp || !dir)
		return sr__errorf(-EINVAL, "%s: NULL argument", what);
	lo = mp->info.first_env;
	hi = lo + mp->info.local_envs;
	err = manifest_read(dir, &m);
	if (err == -ENOENT)
		err = sr__errorf(err, "no manifest in '%s' (no complete checkpoint there)", dir);
	else if (err)
		err = sr__errorf(err, "'%s/manifest' is malformed or cut short", dir);
	else if (strcmp(m.env, mp->pool->cfg.spec.id) || m.num_envs != mp->info.num_envs ||
		 m.seed != mp->seed)
		err = sr__errorf(-EINVAL, "'%s' holds a run of %llu %s envs with seed %llu; this "
				 "pool is %llu %s envs with seed %llu", dir,
				 (unsigned long long)m.num_envs, m.env, (unsigned long long)m.seed,
				 (unsigned long long)mp->info.num_envs, mp->pool->cfg.spec.id,
				 (unsigned long long)mp->seed);
	for (uint32_t k = 0; !err && k < m.parts; k++) {
		if (m.part[k].first != next)
			err = sr__errorf(-EBADMSG, "the manifest's parts do not cover envs [0, %llu) "
					 "in order (part %u starts at %llu)",
					 (unsigned long long)m.num_envs, k,
					 (unsigned long long)m.part[k].first);
		next = m.part[k].first + m.part[k].n;
	}
	if (!err && next != m.num_envs)
		err = sr__errorf(-EBADMSG, "the manifest's parts end at env %llu, not %llu",
				 (unsigned long long)next, (unsigned long long)m.num_envs);
	/* Verify every part this rank needs before any is applied. */
	for (uint32_t k = 0; !err && k < m.parts; k++) {
		if (m.part[k].first >= hi || m.part[k].first + m.part[k].n <= lo)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, m.part[k].file);
		err = sr_checkpoint_verify(path, NULL);
	}
	err = sr__mpi_agree(mp, err, what);
	for (uint32_t k = 0; !err && k < m.parts; k++) {
		int n;

		if (m.part[k].first >= hi || m.part[k].first + m.part[k].n <= lo)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, m.part[k].file);
		n = sr_pool_restore_envs(mp->pool, path);
		if (n < 0)
			err = n;
		else
			got += (uint64_t)n;
	}
	if (!err && got != mp->info.local_envs)
		err = sr__errorf(-EBADMSG, "restored %llu of this rank's %u envs",
				 (unsigned long long)got, mp->info.local_envs);
	free(m.part);
	return sr__mpi_agree(mp, err, what);
}
