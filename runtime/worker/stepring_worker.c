/*
 * stepring-worker: the worker process of a pool with C env process
 * workers (SR_POOL_F_PROCS). Started by the pool (posix_spawn), never by
 * hand: it attaches to the pool's ring and command block (inherited file
 * descriptors) and steps its slice of envs until the pool stops it or
 * goes away. With --guard, the guard of a pool's named ring (removes
 * its names when the trainer is gone). See docs/procs.md.
 */
#include <string.h>

#include "proc_internal.h"

int main(int argc, char **argv)
{
	/* The guard of a pool's named ring (proc_spawn.c, sr__procs_spawn_guard). */
	if (argc > 1 && !strcmp(argv[1], "--guard"))
		return sr__proc_guard_main(argc, argv);
	return sr__proc_c_main();
}
