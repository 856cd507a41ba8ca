/* libFuzzer target for the CLI's JSON reader (tools/json.c), what
 * `stepring compare` parses its input files with: any bytes either parse or
 * give an error message, never a crash, a leak or a read out of bounds;
 * a parsed value is walked and looked up. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const struct json *v, int depth)
{
	size_t n = 1;

	if (v->type == JSON_STR)
		n += strlen(v->str);
	for (size_t i = 0; (v->type == JSON_ARR || v->type == JSON_OBJ) && i < v->n; i++) {
		if (v->type == JSON_OBJ && !v->keys[i])
			abort();
		n += walk(&v->items[i], depth + 1);
	}
	if (depth > JSON_MAX_DEPTH + 1)
		abort();
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json *v = NULL;
	char err[256];
	int rc = json_parse((const char *)data, size, &v, err, sizeof(err));

	if (rc == 0) {
		walk(v, 0);
		json_path(v, "config.env");
		json_path(v, "phases[checkpoint=uring].p99_us");
		json_path(v, "a[b=c].d[e=f]");
	} else if (!err[0] || v) {
		abort(); /* a failure says why and gives nothing back */
	}
	json_free(v);
	return 0;
}
