#!/usr/bin/env python3
"""Allreduce reference: Open MPI over TCP (mpi4py, comm.Allreduce with MPI.IN_PLACE).

    mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,tcp \
        --mca btl_tcp_if_include lo -n N \
        python3 bench/mpi_allreduce.py --bytes B --iters K [--dtype f32] [--op sum]

`--mca pml ob1` matters: Debian's Open MPI also ships the UCX PML, which would be
preferred and would move the bytes through shared memory, not the TCP BTL.
float32 sum, in place, B bytes per rank. Rank 0 times every iteration and prints
ONE JSON line (format: bench/benchstats.py).
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchstats  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--workers", type=int, default=None,
                   help="expected world size (checked against mpirun -n)")
    p.add_argument("--bytes", type=int, default=4, help="bytes per rank (multiple of 4)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up iterations (default 5)")
    p.add_argument("--dtype", default="f32", choices=["f32"])
    p.add_argument("--op", default="sum", choices=["sum"])
    args = p.parse_args()

    import mpi4py
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    if args.workers is not None and args.workers != n:
        if rank == 0:
            print(f"mpi_allreduce: -n {args.workers} but mpirun started {n} ranks", file=sys.stderr)
        comm.Abort(2)
    count = benchstats.check_bytes(args.bytes)
    warmup = args.warmup if args.warmup is not None else benchstats.default_warmup(args.iters)

    # Zeros: repeated in-place sums stay finite (no inf/NaN, no denormals).
    buf = np.zeros(count, dtype=np.float32)
    spec = [buf, MPI.FLOAT]
    for _ in range(warmup):
        comm.Allreduce(MPI.IN_PLACE, spec, op=MPI.SUM)
    times = []
    clock = time.perf_counter
    for _ in range(args.iters):
        t0 = clock()
        comm.Allreduce(MPI.IN_PLACE, spec, op=MPI.SUM)
        times.append(clock() - t0)

    # Correctness: every element must equal 1 + 2 + ... + n.
    chk = np.full(count, rank + 1, dtype=np.float32)
    comm.Allreduce(MPI.IN_PLACE, [chk, MPI.FLOAT], op=MPI.SUM)
    expect = n * (n + 1) / 2
    ok = bool(np.all(chk == expect))
    oks = comm.gather(ok, root=0)

    if rank == 0:
        all_ok = all(oks)
        rec = benchstats.summarize(
            "mpi", n, args.bytes, times, warmup, args.dtype, args.op,
            check="ok" if all_ok else f"FAILED on ranks {[i for i, o in enumerate(oks) if not o]}",
            version=MPI.Get_library_version().splitlines()[0].split(",")[0].strip(),
            mpi4py=mpi4py.__version__,
            pml=os.environ.get("OMPI_MCA_pml"), btl=os.environ.get("OMPI_MCA_btl"))
        benchstats.emit(rec)
        return 0 if all_ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
