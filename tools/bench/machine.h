/*
 * The machine and build description of the benchmarks' JSON lines, and
 * the JSON string escaper every command uses.
 */
#ifndef SR_BENCH_MACHINE_H
#define SR_BENCH_MACHINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Write @s (NULL: "") as a JSON string literal: quotes, backslashes and
 * control characters escaped. */
void bench_json_str(FILE *f, const char *s);
/* @s escaped for the inside of a JSON string literal, in @buf (cut at a
 * whole escape when it does not fit); returns @buf. */
char *bench_json_escape(char *buf, size_t len, const char *s);
/* "machine":{"cpu_model":..,"cpus":..,"cores":..,"numa_nodes":..,"gpu":..,
 * "loadavg_1m":..} */
void bench_json_machine(FILE *f);
/* "build":{"version":..,"info":..,"flags":..,"backends":[..]} */
void bench_json_build(FILE *f);

/* Online CPUs this process may run on (sched_getaffinity), at least 1. */
uint32_t bench_allowed_cpus(void);
/* Physical cores of the machine (distinct package/core ids), at least 1. */
uint32_t bench_physical_cores(void);
/* 1-minute load average from /proc/loadavg, or -1 when unknown. */
double bench_loadavg(void);
/* NUMA nodes listed under /sys/devices/system/node (1 when unknown). */
uint32_t bench_numa_nodes(void);

#endif
