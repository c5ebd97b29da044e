"""Run with: mpirun -np 2 python3 distributed_allreduce.py (tests/python/test_distributed.py runs it)."""
import numpy as np

import tessel as ts
import tessel.distributed as dist

dist.init()                                   # rank, size and local rank from MPI
r, n = dist.rank(), dist.world_size()
device = dist.local_device()                  # cuda:<local rank>, or the CPU without a GPU

x = ts.full((4,), float(r + 1), device=device)
dist.all_reduce(x)                            # in place: 1 + 2 + ... + n on every rank
assert np.all(x.numpy() == n * (n + 1) / 2)

gathered = ts.empty((n, 2), device=device)
dist.all_gather(gathered, ts.full((2,), float(r), device=device))
assert gathered.numpy()[:, 0].tolist() == list(range(n))

work = dist.all_reduce(x, op="max", async_op=True)   # returns at once
work.wait()                                           # x may be read after this

left = ts.empty((3,), device=device)
with dist.group():                            # issued together: no rank waits on another's send
    dist.send(ts.full((3,), float(r), device=device), (r + 1) % n)
    dist.recv(left, (r - 1) % n)
assert np.all(left.numpy() == (r - 1) % n)

evens = dist.new_group(color=r % 2)           # the even ranks and the odd ranks
y = ts.ones((1,), device=device)
dist.all_reduce(y, group=evens)
print(f"rank {r} of {n}: {evens.size} ranks share my parity")
