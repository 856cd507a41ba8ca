/*
 * A small JSON reader for the CLI's own JSON lines (`stepring compare`):
 * RFC 8259 values into a tree, strict (no comments, no trailing commas,
 * no leading zeros), nesting at most JSON_MAX_DEPTH deep. Input is data:
 * a malformed line gives an error message with its byte offset, never a
 * crash. tools/json.c.
 */
#ifndef SR_TOOLS_JSON_H
#define SR_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define JSON_MAX_DEPTH 64

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
	enum json_type type;
	bool b;             /* JSON_BOOL */
	double num;         /* JSON_NUM */
	char *str;          /* JSON_STR: NUL-terminated UTF-8 (a "\u0000" inside
			     * cuts it short) */
	size_t n;           /* JSON_ARR, JSON_OBJ: members */
	struct json *items; /* their values */
	char **keys;        /* JSON_OBJ: their names */
};

/* Parse @len bytes at @s as one JSON value (surrounding white space
 * allowed). 0 and *@out (free with json_free), or -EINVAL with a message
 * in @err, or -ENOMEM. */
int json_parse(const char *s, size_t len, struct json **out, char *err, size_t errlen);
void json_free(struct json *v);

/* The member @key of object @o (the first of that name), or NULL. */
const struct json *json_get(const struct json *o, const char *key);
/* A dotted path: "a.b.c"; a segment "name[k=v]" picks the element of the
 * array "name" that is an object whose member k is the string v. NULL if
 * any step is missing. */
const struct json *json_path(const struct json *o, const char *path);

#endif
