/*
 * The models of the MuJoCo envs: the embedded XML files (the build writes
 * their text into the library: cmake/embed_files.cmake), loaded through
 * MuJoCo's virtual file system, one read-only mjModel per file for the
 * life of the process.
 *
 * Sharing: mj_step, mj_forward and mj_rnePostConstraint take a const
 * mjModel and write only their mjData, so every instance of every env type
 * that uses a file steps with the same model from any thread. A model is
 * loaded once, under models_lock; the pointer is published under the same
 * lock (a thread that reads it takes the lock once, at instance creation),
 * so the model's bytes written by mj_loadXML happen before any read.
 * Models are never freed: the env types that refer to them live as long as
 * the process.
 *
 * MuJoCo's warnings (an unstable simulation reset by mj_step, a contact
 * buffer overflow) go by default to stdout and to a file MUJOCO_LOG.TXT in
 * the current directory. Before the first model is loaded, a handler that
 * writes them to stderr instead is installed, unless the process has set
 * its own (mju_user_warning is a process-wide hook of the library).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mj_internal.h"

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mj_model models[16];
static bool loaded[16];

int sr__mj_asset_index(const char *name)
{
	for (unsigned i = 0; i < sr__mj_assets_count; i++)
		if (!strcmp(sr__mj_assets[i].name, name))
			return (int)i;
	return -1;
}

/* stderr, once per distinct message start, at most 20 lines a process:
 * an unstable policy would otherwise print a line per reset. */
static void warning_to_stderr(const char *msg)
{
	static unsigned printed; /* __atomic builtins: relaxed, a count only */

	if (__atomic_fetch_add(&printed, 1, __ATOMIC_RELAXED) < 20)
		fprintf(stderr, "stepring: MuJoCo warning: %s\n", msg);
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* NumPy's float64 pairwise sum (np.sum of a contiguous array). */
static double pairwise(const double *a, size_t n)
{
	if (n < 8) {
		double s = 0.;
		for (size_t i = 0; i < n; i++)
			s += a[i];
		return s;
	}
	if (n <= 128) {
		double r[8];
		size_t i;
		for (int j = 0; j < 8; j++)
			r[j] = a[j];
		for (i = 8; i < n - n % 8; i += 8)
			for (int j = 0; j < 8; j++)
				r[j] += a[i + j];
		double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
		for (; i < n; i++)
			s += a[i];
		return s;
	}
	size_t n2 = n / 2;
	n2 -= n2 % 8;
	return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

static int load(uint32_t xml, struct mj_model *out)
{
	const struct sr__embedded *f = &sr__mj_assets[xml];
	char err[1000] = "";
	mjVFS *vfs = malloc(sizeof(*vfs)); /* 2 MB of name slots: not on a stack */
	mjModel *m = NULL;

	if (!vfs)
		return sr__errorf(-ENOMEM, "MuJoCo: out of memory for a virtual file system");
	mj_defaultVFS(vfs);
	if (mj_makeEmptyFileVFS(vfs, f->name, (int)f->size) == 0) {
		int id = mj_findFileVFS(vfs, f->name);
		memcpy(vfs->filedata[id], f->data, f->size);
		m = mj_loadXML(f->name, vfs, err, (int)sizeof(err));
	} else {
		snprintf(err, sizeof(err), "cannot make a file in MuJoCo's VFS");
	}
	mj_deleteVFS(vfs);
	free(vfs);
	if (!m)
		return sr__errorf(-EIO, "MuJoCo cannot load the embedded model %s: %s", f->name, err);
	memset(out, 0, sizeof(*out));
	out->m = m;
	out->hash = fnv1a(f->data, f->size);
	out->mass_sum = pairwise(m->body_mass, (size_t)m->nbody);
	out->body_torso = mj_name2id(m, mjOBJ_BODY, "torso");
	out->body_fingertip = mj_name2id(m, mjOBJ_BODY, "fingertip");
	out->body_target = mj_name2id(m, mjOBJ_BODY, "target");
	out->body_object = mj_name2id(m, mjOBJ_BODY, "object");
	out->body_tips_arm = mj_name2id(m, mjOBJ_BODY, "tips_arm");
	out->body_goal = mj_name2id(m, mjOBJ_BODY, "goal");
	return 0;
}

int sr__mj_model(uint32_t xml, const struct mj_model **out)
{
	int err = 0;

	if (xml >= sr__mj_assets_count || xml >= sizeof(models) / sizeof(models[0]))
		return sr__errorf(-EINVAL, "MuJoCo: no embedded model %u", xml);
	if (pthread_mutex_lock(&models_lock))
		abort();
	if (!loaded[xml]) {
		if (mj_version() != mjVERSION_HEADER) {
			err = sr__errorf(-ENOTSUP, "libmujoco reports version %d, stepring was built "
					 "with the headers of version %d", mj_version(),
					 mjVERSION_HEADER);
			goto out;
		}
		if (!mju_user_warning)
			mju_user_warning = warning_to_stderr;
		err = load(xml, &models[xml]);
		if (!err)
			loaded[xml] = true;
	}
	if (!err)
		*out = &models[xml];
out:
	if (pthread_mutex_unlock(&models_lock))
		abort();
	return err;
}
