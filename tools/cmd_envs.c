/* stepring envs: list the env types with their spaces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stepring.h"

/* Called by the dispatcher (tools/stepring.c). */
int cmd_envs(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f, "usage: stepring envs [--json] [--plugin PATH]\n"
		   "List the built-in env types (and a plugin's): Gymnasium id, short name,\n"
		   "observation shape and bounds, action space, max_episode_steps (the\n"
		   "runtime's time limit; 0 = none).\n"
		   "  --json         one JSON object per env\n"
		   "  --plugin PATH  also load and list an env plugin (.so)\n"
		   "The spin benchmark env takes parameters: "
		   "spin:cost_us=50,obs_dim=64,ep_len=1000,act_n=2\n");
}

static void fmt_float(char *buf, size_t len, float v)
{
	if (isinf(v)) {
		snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
		return;
	}
	/* The shortest decimal that reads back as the same float32. */
	for (int p = 6; p <= 9; p++) {
		snprintf(buf, len, "%.*g", p, (double)v);
		if (strtof(buf, NULL) == v)
			return;
	}
}

/* "[lo,hi]" per component, or "(-inf,inf)" when the env gives no bounds. */
static void fmt_bounds(char *buf, size_t len, const float *lo, const float *hi, uint32_t n,
		       bool json)
{
	size_t off = 0;

	if (!lo || !hi) {
		snprintf(buf, len, json ? "null" : "unbounded");
		return;
	}
	if (json)
		off += (size_t)snprintf(buf + off, len - off, "[");
	for (uint32_t k = 0; k < n && off < len; k++) {
		char a[32], b[32];
		fmt_float(a, sizeof(a), lo[k]);
		fmt_float(b, sizeof(b), hi[k]);
		if (json)
			off += (size_t)snprintf(buf + off, len - off, "%s[%s%s%s,%s%s%s]",
						k ? "," : "", isinf(lo[k]) ? "\"" : "", a,
						isinf(lo[k]) ? "\"" : "", isinf(hi[k]) ? "\"" : "", b,
						isinf(hi[k]) ? "\"" : "");
		else
			off += (size_t)snprintf(buf + off, len - off, "%s[%s,%s]", k ? " " : "", a,
						b);
	}
	if (json && off < len)
		snprintf(buf + off, len - off, "]");
}

static void fmt_shape(char *buf, size_t len, const sr_env_spec *s)
{
	size_t off = (size_t)snprintf(buf, len, "(");

	for (uint32_t k = 0; k < s->obs_ndim && off < len; k++)
		off += (size_t)snprintf(buf + off, len - off, "%u%s", s->obs_shape[k],
					s->obs_ndim == 1 ? "," : k + 1 < s->obs_ndim ? "," : "");
	if (off < len)
		snprintf(buf + off, len - off, ")");
}

static void fmt_action(char *buf, size_t len, const sr_env_spec *s)
{
	if (s->act_kind == SR_SPACE_DISCRETE) {
		snprintf(buf, len, "Discrete(%u)", s->act_n);
	} else {
		char lo[32], hi[32];
		fmt_float(lo, sizeof(lo), s->act_low[0]);
		fmt_float(hi, sizeof(hi), s->act_high[0]);
		snprintf(buf, len, "Box(%s,%s,(%u,))", lo, hi, s->act_dim);
	}
}

static void print_env(const sr_env_spec *s, bool json, const char *origin)
{
	char shape[64], bounds[1024], action[96];

	fmt_shape(shape, sizeof(shape), s);
	fmt_action(action, sizeof(action), s);
	if (json) {
		char act_bounds[256] = "null";
		fmt_bounds(bounds, sizeof(bounds), s->obs_low, s->obs_high,
			   s->obs_dim <= 32 ? s->obs_dim : 0, true);
		if (s->act_kind == SR_SPACE_BOX)
			fmt_bounds(act_bounds, sizeof(act_bounds), s->act_low, s->act_high,
				   s->act_dim <= 8 ? s->act_dim : 0, true);
		printf("{\"id\":\"%s\",\"name\":\"%s\",\"origin\":\"%s\",\"obs_shape\":[", s->id,
		       s->name, origin);
		for (uint32_t k = 0; k < s->obs_ndim; k++)
			printf("%s%u", k ? "," : "", s->obs_shape[k]);
		printf("],\"obs_dtype\":\"%s\",\"obs_bounds\":%s,\"action\":{\"kind\":\"%s\","
		       "\"n\":%u,\"dim\":%u,\"bounds\":%s},\"max_episode_steps\":%u,"
		       "\"state_size\":%u}\n",
		       sr_dtype_name(s->obs_dtype), bounds,
		       s->act_kind == SR_SPACE_DISCRETE ? "discrete" : "box", s->act_n, s->act_dim,
		       act_bounds, s->max_episode_steps, s->state_size);
		return;
	}
	if (s->obs_dim <= 8)
		fmt_bounds(bounds, sizeof(bounds), s->obs_low, s->obs_high, s->obs_dim, false);
	else
		snprintf(bounds, sizeof(bounds), "%s", s->obs_low ? "(per component)" : "unbounded");
	/* Observations other than float32 say their dtype first. */
	printf("%-25s %-25s %-6s %-19s %5u  %s%s%s\n", s->id, s->name, shape, action,
	       s->max_episode_steps, s->obs_dtype ? sr_dtype_name(s->obs_dtype) : "",
	       s->obs_dtype ? " " : "", bounds);
}

int cmd_envs(int argc, char **argv)
{
	const char *plugin = NULL;
	bool json = false;
	sr_env_spec ps;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else if (cli_opt(argc, argv, &i, "--plugin", &plugin)) {
		} else {
			cli_unknown("envs", argv[i]);
		}
	}
	if (plugin && sr_env_load_plugin(plugin, &ps))
		cli_die("%s", sr_last_error());
	if (!json)
		printf("%-25s %-25s %-6s %-19s %5s  %s\n", "ID", "NAME", "OBS", "ACTION",
		       "STEPS", "OBS [DTYPE] BOUNDS [low,high]");
	for (size_t i = 0; i < sr_env_count(); i++)
		print_env(sr_env_at(i), json, "builtin");
	if (plugin)
		print_env(&ps, json, "plugin");
	return 0;
}
