# shellcheck shell=bash
# Sourced by the MPI tests: run Open MPI on one machine, in a container,
# as root, with more ranks than cores, and skip (77) without it.
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1  # --oversubscribe
export OMPI_MCA_btl=self,vader              # shared memory only (loopback)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # no CMA/XPMEM in containers
# One-sided windows: over vader without single copy, Open MPI 4.1's osc/rdma
# refuses MPI_Win_create (MPI_ERR_WIN); osc/pt2pt works over any BTL.
export OMPI_MCA_osc=pt2pt
export OMPI_MCA_mpi_yield_when_idle=1       # oversubscribed ranks yield while they wait
export OMPI_MCA_plm_rsh_agent=false         # never ssh anywhere
# Open MPI keeps memory until exit: the sanitizer build checks our leaks elsewhere.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN="timeout -k 5 ${MPI_TEST_LIMIT:-90} mpirun -q"
