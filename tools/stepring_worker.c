/*
 * stepring-worker: the worker process of a pool with C env process
 * workers (SR_POOL_F_PROCS). Started by the pool (posix_spawn), never by
 * hand: it attaches to the pool's ring and command block (inherited file
 * descriptors) and steps its slice of envs until the pool stops it or
 * goes away. See docs/procs.md.
 */
int sr__proc_c_main(void);

int main(void)
{
	return sr__proc_c_main();
}
