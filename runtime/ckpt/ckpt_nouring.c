/* Built without liburing: the io_uring writer is refused, and the job falls
 * back to the pwrite thread (ckpt_pwrite.c) with the same guarantees. */
#include "sr_base.h"
#include "ckpt_internal.h"

int sr__ckpt_run_uring(sr__ckpt_job *j, const char **why)
{
	(void)j;
	*why = "this stepring was built without liburing";
	return SR__CKPT_REFUSED;
}
