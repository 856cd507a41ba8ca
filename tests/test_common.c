/* Version and error reporting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "stepring.h"

static void test_version(void **st)
{
	(void)st;
	assert_int_equal(sr_version(), SR_VERSION_HEX);
	assert_string_equal(sr_version_string(), SR_VERSION_STRING);
	assert_non_null(strstr(sr_build_info(), SR_VERSION_STRING));
}

static void test_strerror(void **st)
{
	(void)st;
	assert_string_equal(sr_strerror(0), "success");
	assert_string_equal(sr_strerror(-EINVAL), sr_strerror(EINVAL));
	assert_non_null(strstr(sr_strerror(-EPROTO), "version"));
	assert_non_null(sr_strerror(-12345));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_strerror),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
