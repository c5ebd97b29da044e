"""A small MLP trained with tessel.torch (tt.nn.Linear with fused activations, a tt.fuse gate) and
the same MLP in pure PyTorch, from the same initial weights on the same batches: the two loss
curves must agree. The guide (docs/guide/torch.rst) shows the plot this writes.

    python3 bench/peers/torch_mlp.py [--steps 300] [--device cpu|cuda] [--plot docs/guide/torch_mlp_loss.png]

Exits non-zero when a loss differs from PyTorch's by more than --tolerance (relative).
"""
import argparse
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_mlp: skipped: PyTorch is not installed")
    sys.exit(0)

import tessel.torch as tt


@tt.fuse
def swish_gate(a, b):
    """a * sigmoid(a) * b: one kernel forward, one per needed gradient backward."""
    return a * torch.sigmoid(a) * b


class TesselMLP(torch.nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.inp = tt.nn.Linear(width, hidden, activation="gelu_tanh")
        self.gate = tt.nn.Linear(hidden, hidden)
        self.up = tt.nn.Linear(hidden, hidden, activation="relu")
        self.out = tt.nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.inp(x)
        return self.out(swish_gate(self.gate(h), self.up(h)))


class TorchMLP(torch.nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.inp = torch.nn.Linear(width, hidden)
        self.gate = torch.nn.Linear(hidden, hidden)
        self.up = torch.nn.Linear(hidden, hidden)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        h = F.gelu(self.inp(x), approximate="tanh")
        a = self.gate(h)
        return self.out(a * torch.sigmoid(a) * F.relu(self.up(h)))


def train(model, batches, steps, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        loss = F.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def run(steps=300, device="cpu", width=16, hidden=64, batch=128, lr=0.02, seed=0):
    """(tessel losses, torch losses) of `steps` SGD steps on a synthetic regression task."""
    g = torch.Generator().manual_seed(seed)
    direction = torch.randn(width, generator=g)
    batches = []
    for _ in range(8):
        x = torch.randn(batch, width, generator=g)
        y = torch.sin(x @ direction / width ** 0.5 * 2) + 0.1 * torch.randn(batch, generator=g)
        batches.append((x.to(device), y.to(device)))
    torch.manual_seed(seed)
    ours = TesselMLP(width, hidden).to(device)
    ref = TorchMLP(width, hidden).to(device)
    ref.load_state_dict(ours.state_dict())
    return train(ours, batches, steps, lr), train(ref, batches, steps, lr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--plot", help="write the two loss curves to this PNG")
    args = parser.parse_args()
    ours, ref = run(args.steps, args.device)
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
    print(f"torch_mlp on {args.device}: {args.steps} steps, loss {ours[0]:.4f} -> {ours[-1]:.4f} "
          f"(PyTorch {ref[0]:.4f} -> {ref[-1]:.4f}), largest relative difference {worst:.2e}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
        ax.plot(ref, label="PyTorch (nn.Linear, F.gelu, eager ops)", linewidth=3, alpha=0.5)
        ax.plot(ours, label="tessel.torch (tt.nn.Linear, tt.fuse)", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (MSE)")
        ax.set_title(f"The same MLP, same start and batches ({args.device})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"plot: {args.plot}")
    if worst > args.tolerance:
        print(f"torch_mlp: FAILED: the loss curves differ by {worst:.2e} > {args.tolerance}")
        sys.exit(1)


if __name__ == "__main__":
    main()
