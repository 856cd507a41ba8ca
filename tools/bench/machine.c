/*
 * What the benchmarks' JSON says about the machine and the build
 * (machine.h): one writer for every command, and one JSON string escaper.
 */
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "machine.h"
#include "stepring.h"
#include "stepring/device.h"

/* The JSON escape of one byte into @e (NUL-terminated); its length. */
static int escape1(unsigned char c, char e[8])
{
	if (c == '"' || c == '\\')
		return snprintf(e, 8, "\\%c", c);
	if (c < 0x20)
		return snprintf(e, 8, "\\u%04x", c);
	return snprintf(e, 8, "%c", c);
}

void bench_json_str(FILE *f, const char *s)
{
	char e[8];

	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		escape1(*p, e);
		fputs(e, f);
	}
	fputc('"', f);
}

char *bench_json_escape(char *buf, size_t len, const char *s)
{
	size_t o = 0;

	if (!len)
		return buf;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		char e[8];
		int n = escape1(*p, e);

		if (o + (size_t)n >= len)
			break; /* whole escapes only: never half of one */
		memcpy(buf + o, e, (size_t)n);
		o += (size_t)n;
	}
	buf[o] = '\0';
	return buf;
}

uint32_t bench_allowed_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && (n = CPU_COUNT(&set)) > 0)
		return (uint32_t)n;
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

uint32_t bench_physical_cores(void)
{
	/* Distinct (package, core) pairs; small fixed table, machines with
	 * more cores than it holds report what it counted. */
	enum { MAXC = 4096 };
	static long seen[MAXC][2];
	uint32_t n = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	char path[128];

	for (long c = 0; c < ncpu && n < MAXC; c++) {
		long pkg, core;
		uint32_t i;

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/topology/core_id", c);
		core = read_long(path);
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu%ld/topology/physical_package_id", c);
		pkg = read_long(path);
		if (core < 0)
			continue;
		for (i = 0; i < n; i++)
			if (seen[i][0] == pkg && seen[i][1] == core)
				break;
		if (i == n) {
			seen[n][0] = pkg;
			seen[n][1] = core;
			n++;
		}
	}
	return n ? n : bench_allowed_cpus();
}

double bench_loadavg(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double v = -1;

	if (f) {
		if (fscanf(f, "%lf", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

uint32_t bench_numa_nodes(void)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;
	uint32_t n = 0;

	if (!d)
		return 1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "node", 4) && isdigit((unsigned char)e->d_name[4]))
			n++;
	closedir(d);
	return n ? n : 1;
}

static void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *c = fopen("/proc/cpuinfo", "r");

	snprintf(buf, len, "unknown");
	if (!c)
		return;
	while (fgets(line, sizeof(line), c)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');

			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = '\0';
				snprintf(buf, len, "%s", p);
			}
			break;
		}
	}
	fclose(c);
}

/* The GPU's name as the device API reports it, or "none" (no CUDA in this
 * build, no driver, no GPU). Looked up once: opening a device costs the
 * CUDA runtime's start-up. */
static const char *gpu_name(void)
{
	static char name[128];

	if (name[0])
		return name;
	snprintf(name, sizeof(name), "none");
	if (sr_device_cuda_available(0)) {
		sr_device_opts o;
		sr_device_info info;
		sr_device *d = NULL;

		sr_device_opts_init(&o);
		o.kind = SR_DEVICE_CUDA;
		o.max_rows = 1;
		o.obs_dim = 1;
		o.act_kind = SR_SPACE_DISCRETE;
		o.act_dim = 1;
		o.flags = SR_DEVICE_F_QUIET;
		if (sr_device_open(&o, &d) == 0 && sr_device_info_get(d, &info) == 0)
			snprintf(name, sizeof(name), "%s", info.name);
		else
			snprintf(name, sizeof(name), "cuda device 0");
		sr_device_close(d);
	}
	return name;
}

void bench_json_machine(FILE *f)
{
	char model[256], gpu[128];

	cpu_model(model, sizeof(model));
	snprintf(gpu, sizeof(gpu), "%s", gpu_name());
	fputs("\"machine\":{\"cpu_model\":", f);
	bench_json_str(f, model);
	fprintf(f, ",\"cpus\":%u,\"cores\":%u,\"numa_nodes\":%u,\"gpu\":", bench_allowed_cpus(),
		bench_physical_cores(), bench_numa_nodes());
	bench_json_str(f, gpu);
	/* How busy the machine was: figures taken under load are not comparable. */
	fprintf(f, ",\"loadavg_1m\":%.2f", bench_loadavg());
	fputc('}', f);
}

void bench_json_build(FILE *f)
{
	/* sr_build_info(): "stepring X.Y.Z (FLAGS; backends: a b; COMPILER)" */
	const char *info = sr_build_info();
	const char *lp = strchr(info, '('), *semi, *bk;
	char flags[128] = "", backends[128] = "";

	if (lp && (semi = strchr(lp, ';'))) {
		snprintf(flags, sizeof(flags), "%.*s", (int)(semi - lp - 1), lp + 1);
		bk = strstr(semi, "backends: ");
		if (bk) {
			bk += strlen("backends: ");
			snprintf(backends, sizeof(backends), "%.*s", (int)strcspn(bk, ";)"), bk);
		}
	}
	fputs("\"build\":{\"version\":", f);
	bench_json_str(f, sr_version_string());
	fputs(",\"info\":", f);
	bench_json_str(f, info);
	fputs(",\"flags\":", f);
	bench_json_str(f, flags);
	fputs(",\"backends\":[", f);
	{
		char *save = NULL, *tok;
		int n = 0;

		for (tok = strtok_r(backends, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			if (n++)
				fputc(',', f);
			bench_json_str(f, tok);
		}
	}
	fputs("]}", f);
}
