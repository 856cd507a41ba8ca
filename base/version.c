#include "sr_base.h"

#ifndef SR_BUILD_FLAGS
#define SR_BUILD_FLAGS "unknown"
#endif
#ifdef SR_HAVE_CUDA
#define SR_BI_CUDA " cuda"
#else
#define SR_BI_CUDA ""
#endif
#ifdef SR_HAVE_URING
#define SR_BI_URING " uring"
#else
#define SR_BI_URING ""
#endif

unsigned sr_version(void)
{
	return SR_VERSION_HEX;
}

const char *sr_version_string(void)
{
	return SR_VERSION_STRING;
}

const char *sr_build_info(void)
{
	return "stepring " SR_VERSION_STRING " (" SR_BUILD_FLAGS "; backends: host" SR_BI_CUDA
	       SR_BI_URING "; " __VERSION__ ")";
}
