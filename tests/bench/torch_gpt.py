"""torch_gpt.py: brigade's gpt trained by PyTorch on the CPU, for a side by side
speed comparison with tests/bench/bench_train.

    /usr/bin/python3 tests/bench/torch_gpt.py [--model gpt-small] [--threads 1]
                                              [--batch 8] [--ctx T] [--steps 5] [--warmup 2]

The model is the one of node/engine/model.c: byte-level (V = 256; gpt2: 50257), learned token and
position embeddings, pre-LN GPT-2 blocks (ln1 -> qkv -> causal attention ->
proj -> residual; ln2 -> fc 4C -> GELU (tanh) -> proj -> residual), final
layernorm, untied head (V, C) without bias, softmax cross-entropy.  A step is
forward + backward + per-unit gradient clipping (1.0) + AdamW (lr 1e-3,
betas 0.9/0.95, eps 1e-8, weight decay 0.01 on matrices only), as
stage_state_step does.  At 1 thread a step is timed by this thread's CPU
clock, with more by the wall clock, as bench_train does.  Prints a markdown row and a "kv" line; when torch
cannot be imported, prints a skip message and exits 0.
"""
import argparse
import math
import sys
import time

PRESETS = {  # V, T, C, L, NH
    "gpt-tiny": (256, 64, 128, 4, 4),
    "gpt-small": (256, 128, 256, 8, 8),
    "gpt-base": (256, 256, 512, 12, 8),
    "gpt2": (50257, 1024, 768, 12, 12),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt-small", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=0, help="a shorter context than the preset's")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        print(f"torch: skipped ({sys.executable} cannot import torch: {e})")
        print(f"kv what=torch model={args.model} threads={args.threads} skipped=1")
        return 0

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(1)
    V, T, C, L, NH = PRESETS[args.model]
    T = args.ctx or T
    B = args.batch
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fcproj = nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril(), persistent=False)

        def attn(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(b, t, NH, C // NH).transpose(1, 2)
            k = k.view(b, t, NH, C // NH).transpose(1, 2)
            v = v.view(b, t, NH, C // NH).transpose(1, 2)
            if sdpa is not None:
                y = sdpa(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
                att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
                y = att.softmax(dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, C))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.lnf = nn.LayerNorm(C)
            self.head = nn.Linear(C, V, bias=False)
            self.register_buffer("pos", torch.arange(T), persistent=False)
            for n, p in self.named_parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)
                elif n.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(self.pos[: idx.shape[1]])
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.lnf(x))
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() == 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    units = [list(model.wte.parameters()) + list(model.wpe.parameters())]
    units += [list(b.parameters()) for b in model.blocks]
    units += [list(model.lnf.parameters()) + list(model.head.parameters())]
    nparams = sum(p.numel() for p in model.parameters())

    # a deterministic, learnable stream: the same shifted sequence per row
    gen = torch.Generator().manual_seed(1)

    def batch():
        start = torch.randint(0, V, (B, 1), generator=gen)
        seq = (start + torch.arange(T + 1)) % V
        return seq[:, :T].contiguous(), seq[:, 1:].contiguous()

    def step():
        idx, tgt = batch()
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for u in units:
            torch.nn.utils.clip_grad_norm_(u, 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    # at 1 thread the work runs in this thread: its CPU clock ignores other
    # processes on the machine, as bench_train's does
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    best, total, wall, times = 1e30, 0.0, 1e30, []
    loss = float("nan")
    for _ in range(args.steps):
        t0, w0 = clock(), time.perf_counter()
        loss = step()
        dt = clock() - t0
        wall = min(wall, time.perf_counter() - w0)
        total += dt
        times.append(dt)
        best = min(best, dt)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    tok = B * T / best
    print(f"| torch {torch.__version__} | {args.model} | {nparams} | {args.threads} | {B} x {T} | "
          f"{1e3 * best:.1f} (median {1e3 * median:.1f}, mean {1e3 * total / args.steps:.1f}, wall {1e3 * wall:.1f}) | "
          f"{tok:.0f} | {loss:.3f} | "
          f"{'sdpa' if sdpa else 'manual'} |")
    print(f"kv what=torch model={args.model} threads={args.threads} tok_s={tok:.1f} "
          f"best_ms={1e3 * best:.2f} median_ms={1e3 * median:.2f} mean_ms={1e3 * total / args.steps:.2f} "
          f"wall_ms={1e3 * wall:.2f} tok_s_median={B * T / median:.1f} params={nparams} "
          f"version={torch.__version__} attention={'sdpa' if sdpa else 'manual'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
