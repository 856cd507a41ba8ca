/* stepring version macros. The library version is separate from the env ABI
 * version (env.h) and the ring format version (ring.h). */
#ifndef STEPRING_VERSION_H
#define STEPRING_VERSION_H

#define SR_VERSION_MAJOR 0
#define SR_VERSION_MINOR 1
#define SR_VERSION_PATCH 0
#define SR_VERSION_HEX ((SR_VERSION_MAJOR << 16) | (SR_VERSION_MINOR << 8) | SR_VERSION_PATCH)
#define SR_STRINGIFY_(x) #x
#define SR_STRINGIFY(x) SR_STRINGIFY_(x)
#define SR_VERSION_STRING                                                      \
	SR_STRINGIFY(SR_VERSION_MAJOR) "." SR_STRINGIFY(SR_VERSION_MINOR) "."  \
	SR_STRINGIFY(SR_VERSION_PATCH)

#endif
