/*
 * libFuzzer target for the reference-CSV reader (tools/bench/refcsv.c):
 * the input is a CSV file, loaded for each built-in env with physical
 * state (the first input byte picks one) and, when it loads, replayed in
 * both modes. Nothing may crash, hang or read out of bounds; bad input is
 * an error message. Seeds: the reference CSVs of tests/refdata, cut short.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "refcsv.h"
#include "stepring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const envs[] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
					   "MountainCarContinuous-v0", "Acrobot-v1"};
	char path[64];
	sr_env_spec spec;
	struct refcsv c;
	struct refcheck res;

	if (size < 1)
		return 0;
	if (memfd < 0 && (memfd = memfd_create("fuzz_refcsv", MFD_CLOEXEC)) < 0)
		abort();
	if (sr_env_find(envs[data[0] % 5], &spec))
		abort();
	if (ftruncate(memfd, 0) || pwrite(memfd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	if (refcsv_load(path, &spec, &c) == 0) {
		refcsv_check(&spec, &c, REFCHECK_ONESTEP | REFCHECK_ROLLOUT, &res);
		refcsv_free(&c);
	}
	return 0;
}
