/*
 * The CUDA backend in a build without CUDA: no GPU ever answers, and asking
 * for one explicitly says so. The host device serves the same API.
 */
#include "device_internal.h"
#include "sr_base.h"

bool sr__cuda_available(int index)
{
	(void)index;
	return false;
}

int sr__cuda_describe(int index, char *buf, size_t len)
{
	return -ENODEV;
}

int sr__cuda_open(const sr_device_opts *opts, uint32_t nb, sr_device_batch *batches,
		  struct sr__cuda **out, char *name, size_t name_len, bool *registered,
		  bool *staging)
{
	*out = NULL;
	return sr__errorf(-ENOSYS, "device: this build has no CUDA support "
				   "(configure with -DSR_WITH_CUDA=ON and nvcc)");
}

void sr__cuda_close(struct sr__cuda *c)
{
}

int sr__cuda_copy(struct sr__cuda *c, uint32_t bi, const struct sr__cols *src)
{
	return sr__errorf(-ENOSYS, "device: no CUDA in this build");
}

int sr__cuda_sync(struct sr__cuda *c, uint32_t bi)
{
	return sr__errorf(-ENOSYS, "device: no CUDA in this build");
}

int sr__cuda_actions(struct sr__cuda *c, uint32_t bi, uint32_t n, const void *src,
		     const void **host)
{
	return sr__errorf(-ENOSYS, "device: no CUDA in this build");
}

int sr__cuda_d2h(int index, void *dst, const void *src, size_t len)
{
	return sr__errorf(-ENOSYS, "device: no CUDA in this build");
}
