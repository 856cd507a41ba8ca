/*
 * The JSON reader (json.h): recursive descent, depth-limited, every
 * allocation checked; a value is freed with everything under it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct parser {
	const char *s;
	size_t len, pos;
	char *err;
	size_t errlen;
	bool oom;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->err && p->errlen && !p->err[0]) {
		n = snprintf(p->err, p->errlen, "at byte %zu: ", p->pos);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static int nomem(struct parser *p)
{
	p->oom = true;
	return -ENOMEM;
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static int value(struct parser *p, struct json *v, int depth);

static void put_utf8(char *o, size_t *k, uint32_t cp)
{
	if (cp < 0x80) {
		o[(*k)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*k)++] = (char)(0xc0 | cp >> 6);
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		o[(*k)++] = (char)(0xe0 | cp >> 12);
		o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		o[(*k)++] = (char)(0xf0 | cp >> 18);
		o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static int hex4(struct parser *p, uint32_t *out)
{
	uint32_t v = 0;

	if (p->len - p->pos < 4)
		return fail(p, "short \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(p, "bad \\u escape");
	}
	*out = v;
	return 0;
}

/* A string at p->pos (on the opening quote) into a new buffer. The
 * decoded text is never longer than the source. */
static int string(struct parser *p, char **out)
{
	size_t start = ++p->pos, k = 0;
	char *o;

	while (p->pos < p->len && p->s[p->pos] != '"')
		p->pos += p->s[p->pos] == '\\' && p->pos + 1 < p->len ? 2 : 1;
	if (p->pos >= p->len)
		return fail(p, "unterminated string");
	o = malloc(p->pos - start + 1);
	if (!o)
		return nomem(p);
	p->pos = start;
	while (p->s[p->pos] != '"') {
		unsigned char c = (unsigned char)p->s[p->pos++];

		if (c < 0x20) {
			free(o);
			return fail(p, "control character in a string");
		}
		if (c != '\\') {
			o[k++] = (char)c;
			continue;
		}
		c = (unsigned char)p->s[p->pos++];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			o[k++] = (char)c;
			break;
		case 'b':
			o[k++] = '\b';
			break;
		case 'f':
			o[k++] = '\f';
			break;
		case 'n':
			o[k++] = '\n';
			break;
		case 'r':
			o[k++] = '\r';
			break;
		case 't':
			o[k++] = '\t';
			break;
		case 'u': {
			uint32_t cp, lo;

			if (hex4(p, &cp)) {
				free(o);
				return -EINVAL;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p->len - p->pos < 6 || p->s[p->pos] != '\\' ||
				    p->s[p->pos + 1] != 'u') {
					free(o);
					return fail(p, "lone surrogate in \\u escape");
				}
				p->pos += 2;
				if (hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) {
					free(o);
					return fail(p, "bad surrogate pair");
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				free(o);
				return fail(p, "lone surrogate in \\u escape");
			}
			/* 6 or 12 source bytes give at most 4. */
			put_utf8(o, &k, cp);
			break;
		}
		default:
			free(o);
			return fail(p, "bad escape '\\%c'", c);
		}
	}
	p->pos++;
	o[k] = '\0';
	*out = o;
	return 0;
}

static int number(struct parser *p, struct json *v)
{
	size_t start = p->pos;
	char buf[64];

	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len)
		return fail(p, "bad number");
	if (p->s[p->pos] == '0') {
		p->pos++;
	} else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	} else {
		return fail(p, "bad number");
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos - start >= sizeof(buf))
		return fail(p, "number too long");
	memcpy(buf, p->s + start, p->pos - start);
	buf[p->pos - start] = '\0';
	v->type = JSON_NUM;
	v->num = strtod(buf, NULL);
	if (!isfinite(v->num))
		return fail(p, "number out of range");
	return 0;
}

static int literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return fail(p, "unexpected '%c'", p->s[p->pos]);
	p->pos += n;
	return 0;
}

/* Members or elements, grown by doubling. */
static int grow(struct parser *p, struct json *v, size_t *cap, bool keys)
{
	size_t nc = *cap ? *cap * 2 : 8;
	struct json *it;

	if (v->n < *cap)
		return 0;
	it = realloc(v->items, nc * sizeof(*it));
	if (!it)
		return nomem(p);
	v->items = it;
	if (keys) {
		char **k = realloc(v->keys, nc * sizeof(*k));

		if (!k)
			return nomem(p);
		v->keys = k;
	}
	*cap = nc;
	return 0;
}

static int array(struct parser *p, struct json *v, int depth)
{
	size_t cap = 0;
	int err;

	v->type = JSON_ARR;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']') {
		p->pos++;
		return 0;
	}
	for (;;) {
		if ((err = grow(p, v, &cap, false)))
			return err;
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		err = value(p, &v->items[v->n], depth + 1);
		v->n++;
		if (err)
			return err;
		skip_ws(p);
		if (p->pos >= p->len)
			return fail(p, "unterminated array");
		if (p->s[p->pos] == ']') {
			p->pos++;
			return 0;
		}
		if (p->s[p->pos] != ',')
			return fail(p, "expected ',' or ']'");
		p->pos++;
	}
}

static int object(struct parser *p, struct json *v, int depth)
{
	size_t cap = 0;
	int err;

	v->type = JSON_OBJ;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}') {
		p->pos++;
		return 0;
	}
	for (;;) {
		char *key;

		skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != '"')
			return fail(p, "expected a member name");
		if ((err = string(p, &key)))
			return err;
		if ((err = grow(p, v, &cap, true))) {
			free(key);
			return err;
		}
		v->keys[v->n] = key;
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		v->n++;
		skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != ':')
			return fail(p, "expected ':'");
		p->pos++;
		if ((err = value(p, &v->items[v->n - 1], depth + 1)))
			return err;
		skip_ws(p);
		if (p->pos >= p->len)
			return fail(p, "unterminated object");
		if (p->s[p->pos] == '}') {
			p->pos++;
			return 0;
		}
		if (p->s[p->pos] != ',')
			return fail(p, "expected ',' or '}'");
		p->pos++;
	}
}

static int value(struct parser *p, struct json *v, int depth)
{
	skip_ws(p);
	if (depth > JSON_MAX_DEPTH)
		return fail(p, "nested deeper than %d", JSON_MAX_DEPTH);
	if (p->pos >= p->len)
		return fail(p, "unexpected end");
	switch (p->s[p->pos]) {
	case '{':
		return object(p, v, depth);
	case '[':
		return array(p, v, depth);
	case '"':
		v->type = JSON_STR;
		return string(p, &v->str);
	case 't':
		v->type = JSON_BOOL;
		v->b = true;
		return literal(p, "true");
	case 'f':
		v->type = JSON_BOOL;
		return literal(p, "false");
	case 'n':
		v->type = JSON_NULL;
		return literal(p, "null");
	default:
		if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
			return number(p, v);
		return fail(p, "unexpected '%c'", p->s[p->pos]);
	}
}

static void clear(struct json *v)
{
	for (size_t i = 0; i < v->n && (v->type == JSON_ARR || v->type == JSON_OBJ); i++) {
		clear(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

void json_free(struct json *v)
{
	if (!v)
		return;
	clear(v);
	free(v);
}

int json_parse(const char *s, size_t len, struct json **out, char *err, size_t errlen)
{
	struct parser p = {.s = s, .len = len, .err = err, .errlen = errlen};
	struct json *v = calloc(1, sizeof(*v));
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!v)
		return -ENOMEM;
	rc = value(&p, v, 0);
	if (!rc) {
		skip_ws(&p);
		if (p.pos != p.len)
			rc = fail(&p, "text after the value");
	}
	if (rc) {
		json_free(v);
		if (p.oom && err && errlen)
			snprintf(err, errlen, "out of memory");
		return p.oom ? -ENOMEM : rc;
	}
	*out = v;
	return 0;
}

const struct json *json_get(const struct json *o, const char *key)
{
	if (!o || o->type != JSON_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->items[i];
	return NULL;
}

const struct json *json_path(const struct json *o, const char *path)
{
	char seg[128];

	while (o && *path) {
		size_t n = strcspn(path, ".");
		char *br;

		if (n >= sizeof(seg))
			return NULL;
		memcpy(seg, path, n);
		seg[n] = '\0';
		path += n + (path[n] == '.');
		br = strchr(seg, '[');
		if (!br) {
			o = json_get(o, seg);
			continue;
		}
		{
			char *eq = strchr(br, '='), *end = strchr(br, ']');
			const struct json *arr;

			if (!eq || !end || eq > end)
				return NULL;
			*br = *eq = *end = '\0';
			arr = json_get(o, seg);
			o = NULL;
			for (size_t i = 0; arr && arr->type == JSON_ARR && i < arr->n; i++) {
				const struct json *k = json_get(&arr->items[i], br + 1);

				if (k && k->type == JSON_STR && !strcmp(k->str, eq + 1)) {
					o = &arr->items[i];
					break;
				}
			}
		}
	}
	return o;
}
