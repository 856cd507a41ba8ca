#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "stepring.h"

void cli_die(const char *fmt, ...)
{
	va_list ap;

	fputs("stepring: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(SR_CLI_EXIT_USAGE);
}

long long cli_int(const char *opt, const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		cli_die("%s: '%s' is not an integer", opt, s);
	if (v < lo || v > hi)
		cli_die("%s: %lld is out of range [%lld, %lld]", opt, v, lo, hi);
	return v;
}

double cli_double(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || isnan(v))
		cli_die("%s: '%s' is not a number", opt, s);
	if (v < lo || v > hi)
		cli_die("%s: %g is out of range [%g, %g]", opt, v, lo, hi);
	return v;
}

int cli_int_list(const char *opt, const char *s, long long *out, int max, long long lo,
		 long long hi)
{
	char buf[1024], *save = NULL, *tok;
	int n = 0;

	if (strlen(s) >= sizeof(buf))
		cli_die("%s: list too long", opt);
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			cli_die("%s: at most %d values", opt, max);
		out[n++] = cli_int(opt, tok, lo, hi);
	}
	if (n == 0)
		cli_die("%s: empty list", opt);
	return n;
}

int cli_bind(const char *v)
{
	if (!strcmp(v, "core"))
		return SR_BIND_CORE;
	if (!strcmp(v, "numa"))
		return SR_BIND_NUMA;
	if (!strcmp(v, "none"))
		return SR_BIND_NONE;
	cli_die("--bind: '%s' is not core, numa or none", v);
}

bool cli_run_opt(int argc, char **argv, int *i, const struct cli_run_opts *o)
{
	const char *v;

	if (o->env && cli_opt(argc, argv, i, "--env", &v)) {
		*o->env = v;
	} else if (o->envs && cli_opt(argc, argv, i, "--envs", &v)) {
		*o->envs = (uint32_t)cli_int("--envs", v, 1,
					     o->envs_max ? o->envs_max : CLI_ENVS_MAX);
	} else if (o->threads && cli_opt(argc, argv, i, "--threads", &v)) {
		*o->threads = (uint32_t)cli_int("--threads", v, 0, CLI_THREADS_MAX);
	} else if (o->batch && cli_opt(argc, argv, i, "--batch", &v)) {
		*o->batch = (uint32_t)cli_int("--batch", v, 1, CLI_BATCH_MAX);
	} else if (o->bind && cli_opt(argc, argv, i, "--bind", &v)) {
		*o->bind = cli_bind(v);
		if (o->bind_name)
			*o->bind_name = v;
	} else {
		return false;
	}
	return true;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t len = strlen(name);

	if (strncmp(a, name, len) != 0)
		return false;
	if (a[len] == '\0') {
		if (!val)
			return true;
		if (*i + 1 >= argc)
			cli_die("%s needs a value", name);
		*val = argv[++*i];
		return true;
	}
	if (a[len] == '=' && val) {
		*val = a + len + 1;
		return true;
	}
	return false;
}

void cli_unknown(const char *cmd, const char *arg)
{
	cli_die("%s: unknown option '%s' (see 'stepring %s --help')", cmd, arg, cmd);
}

int cli_device(const char *v)
{
	if (!strcmp(v, "host"))
		return SR_DEVICE_HOST;
	if (!strcmp(v, "cuda"))
		return SR_DEVICE_CUDA;
	if (!strcmp(v, "auto"))
		return SR_DEVICE_AUTO;
	cli_die("--device: '%s' is not host, cuda or auto", v);
}

void cli_env(const char *name, struct sr_env_spec *out)
{
	int err = sr_env_find(name, out);

	if (err)
		cli_die("%s", sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
}

sr_pool_info cli_pool_info(const sr_pool *p)
{
	sr_pool_info in = {.size = sizeof(in)};

	if (sr_pool_info_get(p, &in))
		cli_die("pool info: %s", sr_last_error());
	return in;
}

