"""The same small decoder-only transformer trained with each position encoding, applied through
grape's torch ops, on two tasks; writes the table and plot of docs/experiments.md.

    build/venv/bin/python examples/python/tiny_lm.py --out T.md --plot P.png   # about 25 min, 2 cores
    build/venv/bin/python examples/python/tiny_lm.py --smoke      # a few steps per encoding

Tasks:
  induction  sequences of random tokens whose second half repeats the first: predicting the second
             half needs an induction head (find the previous occurrence, copy its successor), i.e.
             attention by content at an offset of half the length. Trained at length 128, evaluated
             at 128, 256 and 512 (the offset grows with the length): length generalisation.
  text       characters of the licence texts in Debian's base-files package
             (/usr/share/common-licenses, about 260 kB of English prose on every Debian system, so
             no download), trained with a context of 128 and evaluated with 128, 256 and 512.

Encodings and how they enter (E = grape):
  none        no position information (causal mask only)
  sinusoidal  E.add_sinusoidal on the token embeddings (exact phases)
  learned     a learned absolute table added to the embeddings (a lookup: plain torch)
  rope        E.torch.rotate_qk on Q and K, base 10000
  alibi       E.torch.alibi_bias tile, fixed slopes E.alibi_slopes
  fox         E.torch.fox_bias of per-head forget gates sigmoid(w.x + b) (Forgetting Transformer)
  grape_m     E.torch.rotate_qk with learnable frequencies (GRAPE-M, non-contextual; RoPE init)
  grape_a     E.torch.grape_a_bias, the GRAPE paper's key-gated linear bias: omega_h = softplus(w_h)
              slope_h, gate = softplus(u_h . k / sqrt(d))
"""
import argparse
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import grape
import grape.torch as gt

ENCODINGS = ["none", "sinusoidal", "learned", "rope", "alibi", "fox", "grape_m", "grape_a"]
EVAL_LENGTHS = (128, 256, 512)
TRAIN_LENGTH = 128


class Attention(nn.Module):
    def __init__(self, d, heads, encoding):
        super().__init__()
        self.heads, self.hd, self.encoding = heads, d // heads, encoding
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        if encoding in ("rope", "grape_m"):
            self.rope = grape.rope(head_dim=self.hd)
        if encoding == "grape_m":
            self.log_freq = nn.Parameter(torch.tensor(self.rope.inv_freq, dtype=torch.float64).log())
        if encoding in ("alibi", "grape_a"):
            self.register_buffer("slopes", torch.tensor(grape.alibi_slopes(heads), dtype=torch.float32))
        if encoding == "fox":
            self.forget = nn.Linear(d, heads)
            nn.init.constant_(self.forget.bias, 3.0)  # sigmoid(3) = 0.95: forget slowly at first
        if encoding == "grape_a":
            self.omega_logit = nn.Parameter(torch.full((heads,), math.log(math.expm1(1.0))))  # softplus = 1
            self.u = nn.Parameter(torch.randn(heads, self.hd) / math.sqrt(self.hd))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).unbind(2)  # [b, t, h, hd] views
        if self.encoding in ("rope", "grape_m"):
            positions = torch.arange(t).repeat(b)
            inv_freq = self.log_freq.exp() if self.encoding == "grape_m" else None
            q, k = gt.rotate_qk(q, k, self.rope, positions=positions, inv_freq=inv_freq)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # [b, h, t, hd]
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        if self.encoding == "alibi":
            scores = scores + gt.alibi_bias(self.slopes, t, t)
        elif self.encoding == "fox":
            log_forget = F.logsigmoid(self.forget(x)).transpose(1, 2)  # [b, h, t]
            scores = scores + gt.fox_bias(log_forget, causal_mask_value=0.0)
        elif self.encoding == "grape_a":
            u = F.normalize(self.u, dim=-1, eps=1e-6)
            gate = F.softplus((k * u[None, :, None, :]).sum(-1) / math.sqrt(self.hd))  # [b, h, t]
            omega = F.softplus(self.omega_logit) * self.slopes
            scores = scores + gt.grape_a_bias(omega, gate, causal_mask_value=0.0)
        scores = scores.masked_fill(causal, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, d, heads, encoding):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, encoding)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, encoding, d=128, layers=2, heads=4, max_len=max(EVAL_LENGTHS)):
        super().__init__()
        self.encoding = encoding
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=0.02)  # tied with the output: small logits at first
        if encoding == "learned":
            self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads, encoding) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self._sinusoids = {}

    def sinusoids(self, t, d):
        if t not in self._sinusoids:
            table = torch.zeros(t, d)
            grape.add_sinusoidal(table, torch.arange(t))
            self._sinusoids[t] = table
        return self._sinusoids[t]

    def forward(self, ids):
        x = self.embed(ids)
        t = ids.shape[1]
        if self.encoding == "sinusoidal":  # as in Vaswani et al.: embeddings scaled by sqrt(d)
            x = x * math.sqrt(x.shape[-1]) + self.sinusoids(t, x.shape[-1])
        elif self.encoding == "learned":
            x = x + self.pos[:t]
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.embed.weight.t()  # tied output


# ---- tasks: (inputs, targets, loss mask) batches ----

INDUCTION_VOCAB = 256


def induction_batch(gen, batch, length):
    """length input tokens: half random tokens, then the same again (and one more for the last target)."""
    half = length // 2
    first = torch.randint(0, INDUCTION_VOCAB, (batch, half), generator=gen)
    seq = torch.cat([first, first, first[:, :1]], dim=1)
    inputs, targets = seq[:, :-1], seq[:, 1:]
    mask = torch.zeros_like(targets, dtype=torch.bool)
    mask[:, half:] = True  # from the second occurrence on, every target is a copy
    return inputs, targets, mask


def load_text():
    root = "/usr/share/common-licenses"
    names = sorted(n for n in os.listdir(root) if not os.path.islink(os.path.join(root, n)))
    text = "".join(open(os.path.join(root, n), encoding="utf-8", errors="replace").read() for n in names)
    data = torch.tensor([min(ord(c), 127) for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    return data[:split], data[split:]


def text_batch(gen, data, batch, length):
    starts = torch.randint(0, len(data) - length - 1, (batch,), generator=gen)
    seq = torch.stack([data[s:s + length + 1] for s in starts.tolist()])
    return seq[:, :-1], seq[:, 1:], torch.ones(batch, length, dtype=torch.bool)


def masked_loss(logits, targets, mask):
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return (loss * mask.reshape(-1)).sum() / mask.sum()


@torch.no_grad()
def evaluate(model, batches):
    loss = correct = count = 0.0
    for inputs, targets, mask in batches:
        logits = model(inputs)
        n = mask.sum().item()
        loss += masked_loss(logits, targets, mask).item() * n
        correct += ((logits.argmax(-1) == targets) & mask).sum().item()
        count += n
    return loss / count, correct / count


def run(task, encoding, steps, batch, seed, eval_batches, text=None):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = INDUCTION_VOCAB if task == "induction" else 128
    model = TinyLM(vocab, encoding)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    train, held_out = text if text is not None else (None, None)

    def batch_of(g, length, n, data):
        return induction_batch(g, n, length) if task == "induction" else text_batch(g, data, n, length)

    losses = []
    start = time.perf_counter()
    for _ in range(steps):
        inputs, targets, mask = batch_of(gen, TRAIN_LENGTH, batch, train)
        loss = masked_loss(model(inputs), targets, mask)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    results = {"train_loss": float(np.mean(losses[-max(1, steps // 20):])), "losses": losses,
               "tokens_per_s": steps * batch * TRAIN_LENGTH / seconds, "params": sum(p.numel() for p in model.parameters())}
    model.eval()
    for length in EVAL_LENGTHS:
        g = torch.Generator().manual_seed(seed + 1000 + length)
        n = max(1, eval_batches * TRAIN_LENGTH // length)
        results[length] = evaluate(model, [batch_of(g, length, batch, held_out) for _ in range(n)])
    return results


def table(task, results):
    metric = "accuracy on the repeated half" if task == "induction" else "loss (nats/char)"
    head = "| encoding | params | train loss | " + " | ".join("eval %d" % n for n in EVAL_LENGTHS) + " | tokens/s |"
    lines = ["%s, eval = %s:" % (task, metric), "", head, "|" + "---|" * (len(EVAL_LENGTHS) + 4)]
    for enc, r in results.items():
        cells = ["%.3f" % (r[n][1] if task == "induction" else r[n][0]) for n in EVAL_LENGTHS]
        lines.append("| %s | %d | %.3f | %s | %.0f |" % (enc, r["params"], r["train_loss"], " | ".join(cells), r["tokens_per_s"]))
    return "\n".join(lines)


def plot(all_results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (task, results) in zip(axes, all_results.items()):
        for enc, r in results.items():
            ys = [r[n][1] if task == "induction" else r[n][0] for n in EVAL_LENGTHS]
            ax.plot(EVAL_LENGTHS, ys, marker="o", label=enc)
        ax.set_xscale("log", base=2)
        ax.set_xticks(EVAL_LENGTHS, [str(n) for n in EVAL_LENGTHS])
        ax.set_xlabel("evaluation length (trained at %d)" % TRAIN_LENGTH)
        ax.set_ylabel("accuracy, repeated half" if task == "induction" else "held-out loss (nats/char)")
        ax.set_title(task)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=500, help="training steps per encoding and task")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-batches", type=int, default=8, help="evaluation batches at the train length")
    p.add_argument("--encodings", default=",".join(ENCODINGS))
    p.add_argument("--tasks", default="induction,text")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--out", default=None, help="write the markdown tables here")
    p.add_argument("--plot", default=None, help="write the plot (PNG) here")
    p.add_argument("--smoke", action="store_true", help="8 steps of batch 4 per encoding, 1 eval batch: a quick check")
    a = p.parse_args(argv)
    if a.smoke:
        a.steps, a.batch, a.eval_batches = 8, 4, 1
    if a.threads:
        torch.set_num_threads(a.threads)
    encodings = a.encodings.split(",")
    for e in encodings:
        if e not in ENCODINGS:
            p.error("--encodings: unknown encoding %r (known: %s)" % (e, ", ".join(ENCODINGS)))
    text = load_text() if "text" in a.tasks.split(",") else None
    wall = time.perf_counter()
    all_results = {}
    for task in a.tasks.split(","):
        all_results[task] = {}
        for enc in encodings:
            r = run(task, enc, a.steps, a.batch, a.seed, a.eval_batches, text)
            all_results[task][enc] = r
            print("%-9s %-10s train %.3f  %s  %.0f tok/s" % (
                task, enc, r["train_loss"],
                "  ".join("@%d %.3f/%.3f" % (n, *r[n]) for n in EVAL_LENGTHS), r["tokens_per_s"]), flush=True)
    wall = time.perf_counter() - wall
    machine = "%s, %d CPU threads (torch %s, %s)" % (platform.machine(), torch.get_num_threads(), torch.__version__,
                                                     platform.platform(terse=True))
    report = "\n\n".join(table(t, r) for t, r in all_results.items())
    report += "\n\n%d steps x batch %d x length %d per run, seed %d; wall time %.0f s on %s.\n" % (
        a.steps, a.batch, TRAIN_LENGTH, a.seed, wall, machine)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report)
    if a.plot:
        plot(all_results, a.plot)
    return all_results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
