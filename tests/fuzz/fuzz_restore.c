/*
 * libFuzzer target for checkpoint restore behind the checksums. The input
 * is a list of sections ([u8 type][u32 length][bytes], repeated); the
 * target writes them as a checkpoint with valid CRCs (tests/ckpt_craft.h),
 * so every input reaches the semantic checks of verify and restore instead
 * of dying at the first CRC. A restore that succeeds is followed by steps
 * of the pool, which must neither crash nor hang (-timeout). Seeds: with
 * SR_FUZZ_SEED_DIR set, LLVMFuzzerInitialize writes real checkpoints of
 * the pool in this input format there first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt_craft.h"
#include "stepring.h"
#include "stepring/checkpoint.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sr_pool *pool;
static int memfd = -1;
static char path[64];

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
		fprintf(stderr, "fuzz_restore: %s\n", sr_last_error());
		abort();
	}
	return p;
}

/* A real checkpoint as fuzz input. */
static void write_seed(const char *dir, const char *name, bool replay)
{
	char fn[4096], out[4096];
	struct craft c;
	sr_ckpt_opts co;
	FILE *f;

	snprintf(fn, sizeof(fn), "%s/%s.ckpt", dir, name);
	sr_ckpt_opts_init(&co);
	co.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_CHUNK | (replay ? SR_CKPT_F_REPLAY : 0);
	co.backend = SR_CKPT_BACKEND_SYNC;
	co.chunk_size = 64 << 10;
	if (sr_pool_checkpoint(pool, fn, &co) || craft_load(&c, fn))
		abort();
	unlink(fn);
	snprintf(out, sizeof(out), "%s/%s", dir, name);
	f = fopen(out, "wb");
	if (!f)
		abort();
	for (uint32_t i = 0; i < c.n; i++) {
		uint8_t t = (uint8_t)c.s[i].type;
		uint32_t l = (uint32_t)c.s[i].len;

		fwrite(&t, 1, 1, f);
		fwrite(&l, 4, 1, f);
		fwrite(c.s[i].data, 1, l, f);
	}
	fclose(f);
	craft_free(&c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seed = getenv("SR_FUZZ_SEED_DIR");
	const sr_batch *b;

	(void)argc;
	(void)argv;
	pool = mk();
	sr_pool_reset(pool, &b);
	memfd = memfd_create("fuzz_restore", MFD_CLOEXEC);
	if (memfd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	if (seed) {
		int32_t a[4] = {0, 1, 1, 0};

		for (int i = 0; i < 100; i++)
			sr_pool_step(pool, a, &b);
		write_seed(seed, "seed-pool", false);
		write_seed(seed, "seed-replay", true);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct craft c;
	int err;

	memset(&c, 0, sizeof(c));
	while (size >= 5 && c.n < SR_CKPT_MAX_SECTIONS) {
		uint32_t len;

		memcpy(&len, data + 1, 4);
		if (len > size - 5)
			len = (uint32_t)(size - 5);
		/* Type 0 is invalid in a table: map the byte onto 1..255. */
		craft_add(&c, data[0] ? data[0] : 64, data + 5, len);
		data += 5 + len;
		size -= 5 + len;
	}
	if (craft_write_fd(&c, memfd))
		abort();
	craft_free(&c);
	sr_checkpoint_verify(path, NULL);
	err = sr_pool_restore(pool, path);
	if (err == 0) {
		/* Whatever restore accepted must run. */
		int32_t a[4] = {1, 0, 1, 0};
		const sr_batch *b;

		for (int i = 0; i < 8; i++)
			if (sr_pool_step(pool, a, &b))
				abort();
	}
	return 0;
}
