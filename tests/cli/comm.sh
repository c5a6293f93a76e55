#!/usr/bin/env bash
# Data-parallel collectives (lib/train/comm.c): alone, under `mpirun -np 2`, and the error for a
# world size that no launcher backs.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BUILD/tests/tupe-commtest
run $P
[ $rc = 0 ] && has $T/out "rank 0 of 1 (single, none): ok"
verdict "a process without a launcher is a world of one"
# With MPI, MPI itself finds a world of one; without, the build says it has no MPI.
run env ASAN_OPTIONS="$MPI_ASAN_OPTIONS" WORLD_SIZE=2 RANK=0 $P
if built_with mpi; then
    why="start CPU ranks with mpirun or srun"
else
    why="this build has no MPI; rebuild with MPI=1"
fi
[ $rc = 2 ] && has $T/err "$why"
verdict "WORLD_SIZE without a launcher: a clear usage error"
run env WORLD_SIZE=2 RANK=5 $P
[ $rc = 2 ] && has $T/err "inconsistent rank environment"
verdict "a rank outside the world is refused"
if have_mpi; then
    mpi_run -np 2 $P
    [ $rc = 0 ] && has $T/out "rank 0 of 2 (mpi, mpirun): ok" && has $T/out "rank 1 of 2 (mpi, mpirun): ok"
    verdict "mpirun -np 2: allreduce, reduce-scatter, allgather, bcast, max"
    mpi_run -np 3 $P
    [ $rc = 0 ] && [ "$(grep -c ': ok' $T/out)" = 3 ]
    verdict "mpirun -np 3 (more ranks than cores)"
else
    skip "mpirun -np 2: allreduce, reduce-scatter, allgather, bcast, max" "$NO_MPI"
    skip "mpirun -np 3 (more ranks than cores)" "$NO_MPI"
fi
exit $_failed
