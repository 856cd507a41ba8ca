/* sr_strerror, sr_last_error and the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sr_base.h"

static _Thread_local char last_error[512];

int sr__errorf(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

void sr__clear_error(void)
{
	last_error[0] = '\0';
}

const char *sr_last_error(void)
{
	return last_error;
}

const char *sr_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOENT:
		return "no such env, ring or file";
	case ENOMEM:
		return "out of memory";
	case ENOSPC:
		return "no space left on device";
	case EPROTO:
		return "ABI or format version mismatch";
	case EBADMSG:
		return "corrupted data (checksum or format error)";
	case EBUSY:
		return "busy: an operation is already in progress";
	case ENODEV:
		return "no such device (no GPU answered)";
	case ENOSYS:
		return "not supported by this build";
	case EAGAIN:
		/* Also a thread or process limit (pthread_create, fork): not
		 * only "nothing ready"; sr_last_error() says which. */
		return "resource temporarily unavailable (try again)";
	case EEXIST:
		return "already exists";
	case EPERM:
	case EACCES:
		return "permission denied";
	case ERANGE:
		return "value out of range";
	case EIO:
		return "input/output error";
	default:
		return strerror(err); /* glibc: thread safe, static for known codes */
	}
}
