#!/usr/bin/env bash
# Data-parallel collectives (lib/train/comm.c): alone, under `mpirun -np 2`, and the error for a
# world size that no launcher backs.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BUILD/tests/tupe-commtest
run $P
[ $rc = 0 ] && has $T/out "rank 0 of 1 (single, none): ok"
verdict "a process without a launcher is a world of one"
run env ASAN_OPTIONS="$MPI_ASAN_OPTIONS" WORLD_SIZE=2 RANK=0 $P
[ $rc = 2 ] && has $T/err "start CPU ranks with mpirun or srun"
verdict "WORLD_SIZE without a launcher: a clear usage error"
run env WORLD_SIZE=2 RANK=5 $P
[ $rc = 2 ] && has $T/err "inconsistent rank environment"
verdict "a rank outside the world is refused"
if command -v mpirun >/dev/null; then
    if grep -q mpi <<<"$(basename "$TUPE_BUILD")"; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
        # MPI's own allocations are not ours to chase under LeakSanitizer.
        run env ASAN_OPTIONS="$MPI_ASAN_OPTIONS" mpirun -np 2 $P
        [ $rc = 0 ] && has $T/out "rank 0 of 2 (mpi, mpirun): ok" && has $T/out "rank 1 of 2 (mpi, mpirun): ok"
        verdict "mpirun -np 2: allreduce, reduce-scatter, allgather, bcast, max"
        run env ASAN_OPTIONS="$MPI_ASAN_OPTIONS" mpirun -np 3 $P
        [ $rc = 0 ] && [ "$(grep -c ': ok' $T/out)" = 3 ]
        verdict "mpirun -np 3 (more ranks than cores)"
    fi
fi
exit $_failed
