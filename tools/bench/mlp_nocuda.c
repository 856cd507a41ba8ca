/*
 * The MLP's CUDA side in a build without CUDA: no device batch is ever on
 * a GPU, so only a caller that insists gets here.
 */
#include <errno.h>

#include "mlp_priv.h"

int mlp_cuda_upload(const struct mlp_desc *d, int index, uint32_t max_rows,
		    struct mlp_cuda **out)
{
	*out = NULL;
	return mlp_errorf(-ENOSYS, "mlp: no CUDA in this build");
}

int mlp_cuda_forward(struct mlp_cuda *c, void *stream, const float *obs, void *actions,
		     uint32_t n)
{
	return mlp_errorf(-ENOSYS, "mlp: no CUDA in this build");
}

void mlp_cuda_free(struct mlp_cuda *c)
{
}

int bench_cuda_pinned_h2d(int index, size_t bytes, int reps, double *gbs)
{
	*gbs = 0;
	return mlp_errorf(-ENOSYS, "cuda: no CUDA in this build");
}
