"""tessel.torch against PyTorch eager and torch.compile, in the same run (issue 22's targets):

1. mlp_step: a training step (forward and backward) of 4 x [Linear(4096, 4096) + GELU(tanh)] in
   bfloat16, batch 16384, loss y.float().square().mean(): tessel is tt.nn.MLP (the stack as one
   op, each layer's GELU derivative and bias gradient fused into the data-gradient GEMM of the
   layer above) with the loss as tt.fuse(reduction="mean", dtype=torch.float32) of y * y (one
   elementwise kernel and a float32 sum forward, one kernel backward); tessel_layers is the same
   model as separate tt.nn.Linear(activation="gelu_tanh") layers; against torch.nn.Linear + F.gelu
   and torch's loss, eager and compiled. Beside them, in the same rounds, the ceiling: the step's
   GEMMs alone plus the faster of the two losses alone, and the speedup over eager and compile a
   step of nothing else would have. mlp_step_autotuned: the same with ts.set_matmul_autotune(True),
   every tessel GEMM autotuned on its first use (cuBLASLt's algorithms, tessel's sm90 kernel).
2. swish_gate: x * sigmoid(x) * y forward and backward over 2.5e7 float32 elements, followed by
   .sum().backward(): tt.fuse against eager and compiled; and the function with its sum as one
   op, tt.fuse(reduction="sum") against torch.compile of the function and its sum. tt.fuse's
   eager calls with grad run through its compiled C++ autograd op; the *_registered variants run
   the same function through its registered Python op instead (what they cost without the
   compiled op), in the same rounds.
3. overhead: host microseconds per call of a tt.fuse op (x * sigmoid(x) * y) on 1-element tensors
   against the same chain of torch eager ops, without grad and with grad (forward and backward),
   timed around the calls with the device synchronized once per batch; also the registered
   torch.library op itself (what torch.compile graphs call, and eager calls with grad without the
   compiled op): the difference is what the compiled op saves per call.

GPU times are CUDA events around each variant, medians over repeats, with the variants run in
alternating rounds; each ratio is the median of the per-round ratios. Every variant is checked
against the eager result first (a wrong one is reported FAILED, not timed). Results go into
bench/results/<device>-<date>.json under "torch_training".

Without CUDA it runs a small smoke version on the CPU (host clocks, tiny sizes) and writes nothing.

    python3 bench/peers/torch_training.py [--rounds 5] [--quick]
"""
import argparse
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_training: skipped: PyTorch is not installed")
    sys.exit(0)

import tessel.torch as tt
from peer_results import merge_results
from tessel.torch import _compiled


@tt.fuse(reduction="mean", dtype=torch.float32)
def mean_square(y):
    """y.float().square().mean(): y * y computed in float and summed in float32."""
    return y * y


def torch_loss(y):
    return y.float().square().mean()


@tt.fuse
def swish_gate(x, y):
    return x * torch.sigmoid(x) * y


def swish_gate_torch(x, y):
    return x * torch.sigmoid(x) * y


@tt.fuse(reduction="sum")
def swish_gate_sum(x, y):
    """swish_gate(x, y).sum() as one op: the sum fused into the elementwise kernel's forward, its
    scalar gradient read as a uniform by the backward kernel."""
    return x * torch.sigmoid(x) * y


def swish_gate_sum_torch(x, y):
    return (x * torch.sigmoid(x) * y).sum()


class TorchMLP(torch.nn.Module):
    def __init__(self, width, layers, dtype, device):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width, dtype=dtype, device=device) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x), approximate="tanh")
        return x


class TesselLayers(torch.nn.Module):
    def __init__(self, width, layers, dtype, device):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            tt.nn.Linear(width, width, dtype=dtype, device=device, activation="gelu_tanh") for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Timer:
    """CUDA events on the current stream, or host clocks on the CPU."""

    def __init__(self, cuda):
        self.cuda = cuda

    def ms(self, fn, repeats, warmup=2):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            if self.cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return sorted(times)[len(times) // 2]


def rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    if torch.isnan(a).any():
        return float("inf")
    return float((a - b).norm() / b.norm())


def alternate(variants, timer, rounds, repeats):
    """{name: median ms} and {name: median of per-round (eager ms / name's ms)}, in alternating rounds."""
    per_round = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            per_round[name].append(timer.ms(fn, repeats))
    medians = {name: statistics.median(v) for name, v in per_round.items()}
    speedup = {name: statistics.median(e / t for e, t in zip(per_round["torch_eager"], v)) for name, v in per_round.items()}
    return medians, speedup


def step_fn(model, x, loss):
    def step():
        for p in model.parameters():
            p.grad = None
        loss(model(x)).backward()
    return step


def ceiling_fns(device, width, batch, layers, dtype):
    """The step's floor for any implementation calling cuBLAS GEMMs: the step's GEMMs alone (per
    layer the forward x @ W.T and the weight gradient dz.T @ x; the data gradient dz @ W for every
    layer but the first, whose input needs no gradient), and the loss's forward and backward alone
    (torch's, and tessel's fused one). Bare torch.mm on the step's shapes and layouts."""
    x = torch.randn(batch, width, dtype=dtype, device=device)
    w = torch.randn(width, width, dtype=dtype, device=device) / width ** 0.5
    dz = torch.randn(batch, width, dtype=dtype, device=device)
    y = torch.randn(batch, width, dtype=dtype, device=device, requires_grad=True)

    def gemms():
        for layer in range(layers):
            torch.mm(x, w.t())
            torch.mm(dz.t(), x)
            if layer > 0:
                torch.mm(dz, w)

    def loss(fn):
        def run():
            y.grad = None
            fn(y).backward()
        return run
    return {"gemms_only": gemms, "loss_only": loss(torch_loss), "tessel_loss_only": loss(mean_square)}


def bench_mlp(device, timer, rounds, width, batch, layers, dtype):
    torch.manual_seed(0)
    ref = TorchMLP(width, layers, dtype, device)
    ours = tt.nn.MLP([width] * (layers + 1), activation="gelu_tanh", dtype=dtype, device=device)
    ours.load_state_dict(ref.state_dict())  # the same keys: layers.<i>.weight / .bias
    separate = TesselLayers(width, layers, dtype, device)
    separate.load_state_dict(ref.state_dict())
    x = torch.randn(batch, width, dtype=dtype, device=device)
    models = {"torch_eager": ref, "torch_compile": torch.compile(ref), "tessel": ours,
              "tessel_compile": torch.compile(ours, fullgraph=True), "tessel_layers": separate}
    # check: loss and the first layer's weight gradient against eager, bf16 tolerance (METHOD.md)
    losses = {name: mean_square if name.startswith("tessel") else torch_loss for name in models}
    status = {}
    ref_loss = torch_loss(ref(x))
    ref_loss.backward()
    ref_grad = ref.layers[0].weight.grad.clone()
    for name, model in models.items():
        for p in model.parameters():
            p.grad = None
        loss = losses[name](model(x))
        loss.backward()
        params = list(model.parameters())
        err = max(rel_err(loss.reshape(1), ref_loss.reshape(1)), rel_err(params[0].grad, ref_grad))
        status[name] = "ok" if err < 2e-2 else f"FAILED (relative error {err:.2e})"
    variants = {name: step_fn(m, x, losses[name]) for name, m in models.items() if status[name] == "ok"}
    ceiling = ceiling_fns(device, width, batch, layers, dtype)
    medians, speedup = alternate({**variants, **ceiling}, timer, rounds, repeats=5)
    flops = 3 * 2 * batch * width * width * layers  # forward + two backward GEMMs per layer
    result = {"width": width, "batch": batch, "layers": layers, "dtype": str(dtype), "status": status}
    for name in variants:
        result[name] = {"ms": medians[name], "TFLOPs": flops / medians[name] / 1e9, "speedup_vs_eager": speedup[name]}
    if "tessel" in variants and "torch_compile" in variants:
        result["tessel_vs_compile"] = medians["torch_compile"] / medians["tessel"]
    # The most any variant could gain over eager and compile with these GEMMs: the speedup a step
    # made of nothing but its GEMMs and the loss would have.
    floor = medians["gemms_only"] + min(medians["loss_only"], medians["tessel_loss_only"])
    result["ceiling"] = {"gemms_ms": medians["gemms_only"], "loss_ms": medians["loss_only"],
                         "tessel_loss_ms": medians["tessel_loss_only"], "gemms": 3 * layers - 1}
    for name, key in (("torch_eager", "ceiling_speedup_vs_eager"), ("torch_compile", "ceiling_speedup_vs_compile")):
        if name in variants:
            result["ceiling"][key] = medians[name] / floor
    return result


def bench_mlp_autotuned(device, timer, rounds, **shape):
    """bench_mlp with ts.set_matmul_autotune(True): every tessel GEMM of the step (forward,
    weight and data gradients, bias sums) autotuned on its first use, in the check step before the
    timed rounds. The winners go to a temporary cache folder, and the memory caches are cleared
    after, so that later sections run the heuristic's choices as users get them by default."""
    import tempfile

    import tessel as ts
    ts.set_matmul_cache_dir(tempfile.mkdtemp())
    ts.clear_matmul_memory_cache()
    ts.set_matmul_autotune(True)
    try:
        t0 = time.perf_counter()
        result = bench_mlp(device, timer, rounds, **shape)
        result["matmul_autotune"] = True
        result["seconds_with_first_use_autotune"] = time.perf_counter() - t0
        return result
    finally:
        ts.set_matmul_autotune(False)
        ts.set_matmul_cache_dir("")
        ts.clear_matmul_memory_cache()


def bench_backward_gemm(device, timer, rounds, width, batch, dtype):
    """The data-gradient GEMM of one hidden layer of mlp_step with the layer below's GELU(tanh)
    derivative and bias gradient, each way tessel can run it, beside torch eager's kernels:
    separate (the GEMM, tessel's derivative kernel, the ones @ dz bias GEMM: what a stack of
    tt.linear layers runs) and fused (epilogue gelu_tanh_grad with bias_grad: what tt.mlp runs),
    the latter also as an autotuned ts.Matmul plan, whose candidates and times are recorded;
    gemm_only is the floor. (cuBLASLt's DGELU_BGRAD, timed here on 2026-12-01, is in
    bench/results/nvidia-h200-2026-12-01-dgelu-bgrad.json.)"""
    import tessel as ts
    from tessel.torch._interop import on_torch_stream, to_tessel, to_torch
    from tessel.torch._linear import activation_grad

    dz = to_tessel(torch.randn(batch, width, dtype=dtype, device=device))
    w = to_tessel(torch.randn(width, width, dtype=dtype, device=device) / width ** 0.5)
    z = to_tessel(torch.randn(batch, width, dtype=dtype, device=device))
    ones = ts.ones((batch,), dtype=dz.dtype, device=dz.device)
    dev = torch.device(device)
    with on_torch_stream(dev):
        plan = ts.Matmul(dz, w, epilogue="gelu_tanh_grad", aux=z, bias_grad=True)
        tuned = [(c.name, c.time_ms) for c in plan.autotune(iterations=5)]

    def run(fn):
        def step():
            with on_torch_stream(dev):
                fn()
        return step

    dzt, wt, zt = to_torch(dz), to_torch(w), to_torch(z)
    variants = {
        "torch_eager": lambda: torch.ops.aten.gelu_backward(dzt @ wt, zt, approximate="tanh").sum(0),
        "gemm_only": run(lambda: ts.matmul(dz, w)),
        "separate": run(lambda: ts.matmul(ones, activation_grad("gelu_tanh", ts.matmul(dz, w), z))),
        "fused": run(lambda: ts.matmul(dz, w, epilogue="gelu_tanh_grad", aux=z, bias_grad=True)),
        "fused_tuned": run(lambda: plan.execute(dz, w, aux=z)),
    }
    medians, speedup = alternate(variants, timer, rounds, repeats=10)
    return {"width": width, "batch": batch, "dtype": str(dtype), "ms": medians, "speedup_vs_torch_eager": speedup,
            "plan": {"candidates": tuned, "selected": plan.selected.name}}


def bench_swish(device, timer, rounds, n):
    x0 = torch.randn(n, device=device)
    y0 = torch.randn(n, device=device)
    compiled = torch.compile(swish_gate_torch)

    compiled_sum = torch.compile(swish_gate_sum_torch)

    def run(fn, summed=False):
        x = x0.detach().requires_grad_()
        y = y0.detach().requires_grad_()

        def step():
            x.grad = y.grad = None
            (fn(x, y) if summed else fn(x, y).sum()).backward()
        return step, x, y

    status, variants = {}, {}
    ref_step, rx, ry = run(swish_gate_torch)
    ref_step()
    # *_sum: the function with its .sum() as one fused op (tt.fuse(reduction="sum")) or one
    # compiled graph; the others call .sum() on the function's result, as the workload is written.
    for name, fn, summed in (("torch_eager", swish_gate_torch, False), ("torch_compile", compiled, False),
                             ("tessel", swish_gate, False), ("tessel_registered", swish_gate._call, False),
                             ("torch_compile_sum", compiled_sum, True), ("tessel_sum", swish_gate_sum, True),
                             ("tessel_sum_registered", swish_gate_sum._call, True)):
        step, x, y = run(fn, summed)
        step()
        err = max(rel_err(x.grad, rx.grad), rel_err(y.grad, ry.grad))
        status[name] = "ok" if err < 1e-5 else f"FAILED (relative error {err:.2e})"
        if status[name] == "ok":
            variants[name] = step
    medians, speedup = alternate(variants, timer, rounds, repeats=10)
    result = {"n": n, "status": status, "compiled_op": _compiled.fuse is not None}
    for name in variants:
        result[name] = {"ms": medians[name], "speedup_vs_eager": speedup[name]}
    # The backward kernel alone, on the stride-0 gradient .sum() gives (read as a broadcast input,
    # never materialized: the strided kernel layout) and on a contiguous gradient of the same values
    # (the vectorized layout): what reading the expanded gradient in place costs in kernel time.
    from tessel.torch._interop import to_tessel
    kernel = swish_gate._backward_plan(2, [True, True]).kernel
    ax, ay = to_tessel(x0), to_tessel(y0)
    expanded = torch.ones((), device=device).expand(n)
    g_expanded, g_contiguous = to_tessel(expanded), to_tessel(expanded.contiguous())
    result["backward_kernel_ms"] = {
        "expanded_grad": timer.ms(lambda: kernel([ax, ay, g_expanded]), 10),
        "contiguous_grad": timer.ms(lambda: kernel([ax, ay, g_contiguous]), 10),
        "bytes_min": 4 * n * 4,  # x and y read, two gradients written
    }
    return result


def bench_overhead(device, calls):
    """Host microseconds per call, 1-element tensors: the eager chain, tt.fuse as users call it
    (eager: the op's implementation without grad, the compiled C++ autograd op with grad), and the
    registered torch.library op that torch.compile traces (fn._call: the dispatcher, the custom op's
    Python autograd and fake layers)."""
    x = torch.randn(1, device=device)
    y = torch.randn(1, device=device)
    xg = x.clone().requires_grad_()

    def per_call_us(fn):
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):  # the best of 5 batches: host noise only adds time
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        return best

    op = swish_gate._call  # the registered custom op (OpOverload)
    result = {}
    with torch.no_grad():
        result["forward_torch_eager_us"] = per_call_us(lambda: swish_gate_torch(x, y))
        result["forward_tessel_us"] = per_call_us(lambda: swish_gate(x, y))
        result["forward_tessel_registered_op_us"] = per_call_us(lambda: op(x, y))
    result["fwd_bwd_torch_eager_us"] = per_call_us(lambda: swish_gate_torch(xg, y).backward())
    result["fwd_bwd_tessel_us"] = per_call_us(lambda: swish_gate(xg, y).backward())
    result["fwd_bwd_tessel_registered_op_us"] = per_call_us(lambda: op(xg, y).backward())
    # The tessel kernels alone (forward; the backward's one kernel), called on tessel arrays: the
    # launch on a GPU, the whole computation on the CPU backend. tessel_us minus these is what the
    # torch integration costs around them.
    from tessel.torch._interop import to_tessel
    forward_kernel = swish_gate._forward_kernel(2).kernel
    backward_kernel = swish_gate._backward_plan(2, [True, False]).kernel
    ax, ay, ag = to_tessel(x), to_tessel(y), to_tessel(torch.ones_like(x))
    result["forward_tessel_kernel_us"] = per_call_us(lambda: forward_kernel([ax, ay]))
    result["backward_tessel_kernel_us"] = per_call_us(lambda: backward_kernel([ax, ay, ag]))
    result["forward_ratio"] = result["forward_tessel_us"] / result["forward_torch_eager_us"]
    result["fwd_bwd_ratio"] = result["fwd_bwd_tessel_us"] / result["fwd_bwd_torch_eager_us"]
    reg_fwd = result["forward_tessel_registered_op_us"] - result["forward_tessel_us"]
    reg_bwd = result["fwd_bwd_tessel_registered_op_us"] - result["fwd_bwd_tessel_us"]
    result["python_registration_us"] = {"forward": reg_fwd, "fwd_bwd": reg_bwd}
    result["compiled_op"] = _compiled.fuse is not None
    result["cpp_torch_library_decision"] = (
        ("eager calls with grad run through the compiled C++ autograd op" if result["compiled_op"] else
         "the compiled C++ autograd op is not loaded: eager calls with grad take the registered op")
        + f"; the registered Python op costs {reg_fwd:.1f} us more forward and {reg_bwd:.1f} us more forward+backward "
        "per call than tt.fuse as called")
    return result


SECTIONS = ["mlp_step", "mlp_step_autotuned", "backward_gemm", "swish_gate", "overhead"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a check of the script, not a result)")
    parser.add_argument("--only", nargs="*", default=None, choices=SECTIONS,
                        help="run these sections alone (default: all); the results file keeps the others' last rows")
    args = parser.parse_args()
    sections = args.only or SECTIONS
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    timer = Timer(cuda)
    small = args.quick or not cuda
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    big = not small
    dtype = torch.bfloat16 if cuda else torch.float32
    mlp = dict(width=4096, batch=16384, layers=4) if big else dict(width=64, batch=128, layers=4)
    rounds = args.rounds if big else 2
    runs = {
        "mlp_step": lambda: bench_mlp(device, timer, rounds, dtype=dtype, **mlp),
        "mlp_step_autotuned": lambda: bench_mlp_autotuned(device, timer, rounds, dtype=dtype, **mlp),
        "backward_gemm": lambda: bench_backward_gemm(device, timer, rounds, width=mlp["width"], batch=mlp["batch"],
                                                     dtype=dtype),
        "swish_gate": lambda: bench_swish(device, timer, rounds, n=25_000_000 if big else 10_000),
        "overhead": lambda: bench_overhead(device, calls=2000 if big else 200),
    }
    for key in sections:
        out[key] = runs[key]()
    for key in ("mlp_step", "mlp_step_autotuned", "swish_gate"):
        if key not in out:
            continue
        r = out[key]
        for name in ("torch_eager", "torch_compile", "tessel", "tessel_registered", "tessel_compile", "tessel_layers",
                     "torch_compile_sum", "tessel_sum", "tessel_sum_registered"):
            if name in r:
                print(f"{key} {name}: {r[name]['ms']:.3f} ms, {r[name]['speedup_vs_eager']:.2f}x eager")
            elif name in r["status"]:
                print(f"{key} {name}: {r['status'][name]}")
    print_details(out)
    if small:
        print("torch_training: smoke run (small sizes): nothing written")
        return
    merge_results("torch_training", out, torch.cuda.get_device_name(0), merge_keys=args.only is not None)


def print_details(out):
    if "backward_gemm" in out:
        bg = out["backward_gemm"]
        print("backward_gemm (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in bg["ms"].items()))
        print(f"backward_gemm plan: selected {bg['plan']['selected']}")
    if "mlp_step" in out:
        c = out["mlp_step"]["ceiling"]
        print(f"mlp_step ceiling: the {c['gemms']} GEMMs alone {c['gemms_ms']:.3f} ms + the loss alone (torch "
              f"{c['loss_ms']:.3f} ms, tessel {c['tessel_loss_ms']:.3f} ms): "
              f"at most {c.get('ceiling_speedup_vs_eager', float('nan')):.2f}x eager, "
              f"{c.get('ceiling_speedup_vs_compile', float('nan')):.2f}x compile")
    if "swish_gate" in out:
        b = out["swish_gate"]["backward_kernel_ms"]
        print(f"swish_gate backward kernel alone: {b['expanded_grad']:.3f} ms on the expanded gradient, "
              f"{b['contiguous_grad']:.3f} ms on a contiguous one ({b['bytes_min'] / b['expanded_grad'] / 1e6:.0f} GB/s)")
    if "overhead" in out:
        o = out["overhead"]
        print(f"overhead: tt.fuse forward {o['forward_tessel_us']:.1f} us vs eager {o['forward_torch_eager_us']:.1f} us "
              f"(registered op {o['forward_tessel_registered_op_us']:.1f} us); forward+backward "
              f"{o['fwd_bwd_tessel_us']:.1f} us vs {o['fwd_bwd_torch_eager_us']:.1f} us (registered op "
              f"{o['fwd_bwd_tessel_registered_op_us']:.1f} us)")
        print(f"overhead: the tessel kernels alone: forward {o['forward_tessel_kernel_us']:.1f} us, backward "
              f"{o['backward_tessel_kernel_us']:.1f} us")
        print(f"overhead: {o['cpp_torch_library_decision']}")


if __name__ == "__main__":
    main()
