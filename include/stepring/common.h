/*
 * stepring common definitions: export macro, error reporting, version.
 *
 * Error convention: every public function that can fail returns 0 (or a
 * count) on success and -errno on failure. sr_strerror() explains a code;
 * sr_last_error() gives the detailed message of the last failure in the
 * calling thread ("num_envs must be > 0", "unknown env 'Foo' (known: ...)").
 */
#ifndef STEPRING_COMMON_H
#define STEPRING_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "stepring/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SR_BUILDING_LIB)
#define SR_EXPORT __attribute__((visibility("default")))
#else
#define SR_EXPORT
#endif

/** Library version as SR_VERSION_HEX of the library actually loaded. */
SR_EXPORT unsigned sr_version(void);
/** Library version as "major.minor.patch". Never NULL. */
SR_EXPORT const char *sr_version_string(void);
/** Build description: build type, sanitizers, backends ("cuda", "uring"). */
SR_EXPORT const char *sr_build_info(void);

/**
 * Describe an error code. @err is a negative errno as returned by stepring
 * functions (a positive value is accepted too). Never returns NULL; the
 * string is static. Thread safe.
 */
SR_EXPORT const char *sr_strerror(int err);

/**
 * The detailed message of the last failure reported by a stepring function
 * in the calling thread, or "" if none. Valid until the next stepring call
 * in this thread. Thread safe (thread-local).
 */
SR_EXPORT const char *sr_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
