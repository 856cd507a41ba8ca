/*
 * libFuzzer target for the checkpoint loader: header, trailer, section
 * table, CRCs, the pool and replay sections, and sr_pool_restore's checks
 * on a real (small) pool. Build with -DSR_FUZZ=ON and clang; run with
 * tools/fuzz_ckpt.sh. With SR_FUZZ_SEED_DIR set, LLVMFuzzerInitialize
 * writes valid checkpoints there first (seed corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stepring.h"
#include "stepring/checkpoint.h"
#include "ckpt_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sr_pool *pool;
static int memfd = -1;

static sr_pool *mk(void)
{
	sr_pool_opts o;
	sr_pool *p;

	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 4;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.ring_capacity = 64;
	if (sr_pool_create(&o, &p)) {
		fprintf(stderr, "fuzz_ckpt: %s\n", sr_last_error());
		abort();
	}
	return p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seed = getenv("SR_FUZZ_SEED_DIR");
	const sr_batch *b;

	(void)argc;
	(void)argv;
	pool = mk();
	sr_pool_reset(pool, &b);
	memfd = memfd_create("fuzz_ckpt", MFD_CLOEXEC);
	if (memfd < 0)
		abort();
	if (seed) {
		char path[4096];
		sr_ckpt_opts co;
		int32_t a[4] = {0, 1, 1, 0};
		sr_ckpt_opts_init(&co);
		co.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_CHUNK;
		co.backend = SR_CKPT_BACKEND_SYNC;
		co.chunk_size = 64 << 10;
		for (int i = 0; i < 30; i++)
			sr_pool_step(pool, a, &b);
		snprintf(path, sizeof(path), "%s/seed-pool.ckpt", seed);
		sr_pool_checkpoint(pool, path, &co);
		co.flags |= SR_CKPT_F_REPLAY;
		snprintf(path, sizeof(path), "%s/seed-replay.ckpt", seed);
		sr_pool_checkpoint(pool, path, &co);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr__ckpt_file f;
	sr_ckpt_info info;
	char path[64];

	if (size > (1u << 20))
		return 0;
	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
	if (sr__ckpt_verify_fd(memfd, &f, &info) == 0) {
		/* Every section readable within its bounds. */
		uint8_t buf[256];
		for (uint32_t i = 0; i < info.n_sections; i++) {
			size_t n = info.sections[i].length < sizeof(buf) ? info.sections[i].length
									 : sizeof(buf);
			if (sr__ckpt_read(&f, (int)i, info.sections[i].length - n, buf, n))
				abort();
		}
	}
	/* The restore path: geometry, sizes, replay window description. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	sr_pool_restore(pool, path);
	return 0;
}
