/* Internal helpers shared by stepring's .c files (sr__ prefix). */
#ifndef SR_INTERNAL_H
#define SR_INTERNAL_H

#include <errno.h>
#include "stepring/common.h"

/* Record a detailed message for sr_last_error() and return @err (a negative
 * errno), so error paths read: return sr__errorf(-EINVAL, "bad %s", x); */
int sr__errorf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget the thread's last error message. */
void sr__clear_error(void);

#define SR_LIKELY(x) __builtin_expect(!!(x), 1)
#define SR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SR_CACHELINE 128 /* two 64-byte lines: defeats the adjacent-line prefetcher */

#endif
