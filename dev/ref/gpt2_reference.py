#!/usr/bin/python3
"""gpt2_reference.py: a ground truth for the project's GPT-2 from outside its own code.

A tiny GPT-2 written here in PyTorch (autograd for the gradients, float64 throughout),
with the architecture the C and CUDA models compute: learned token and position
embeddings, pre-LayerNorm blocks (eps 1e-5, biased variance), causal multi-head
self-attention with q, k, v as the three C-wide thirds of one linear, GELU with the tanh
approximation, a final LayerNorm and the classifier tied to wte over the padded vocabulary.
The loss is the mean over the B x T tokens of the cross-entropy over the first V logits:
the padded columns are computed but take no part in it. Then two AdamW steps (bias
correction, decay on the 2D tensors, the gradient first scaled by the clip factor) on the
same batch.

Writes, next to this file:
  gpt2_ref_model.bin  the initial parameters, an llm.c model file (fp32, version 3)
  gpt2_ref.bin        inputs, targets, logits, losses, norms, every gradient, the
                      parameters after AdamW step 1 and step 2 (README.md: the format)

float64 so that the file's numbers are the exact model's to about 1e-15; stored as
float32 (the models' own type), which adds a relative rounding of at most 2^-24.
Run: /usr/bin/python3 dev/ref/gpt2_reference.py   (python3-torch; the output is the same
bytes on every run: a fixed seed and float64 CPU arithmetic.)
"""
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))

# The shape: every dimension small, V padded to a multiple of 8 (the CUDA model's 16-byte
# rows) with padded rows that are not zero, so that a loss that reads the padded logits
# shows; T < maxT, so that wpe has rows no token uses.
MAX_T, V, VP, L, NH, C = 16, 50, 64, 2, 2, 32
B, T = 2, 8
SEED = 20240326
# AdamW as the trainers take it (learning rate constant over the two steps).
LR, BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-2, 0.9, 0.95, 1e-8, 0.1, 1.0
STEPS = 2
LN_EPS = 1e-5

MODEL_MAGIC, MODEL_FP32 = 20240326, 3
REF_MAGIC, REF_VERSION = 0x46455247, 1   # "GREF" read as a little-endian int32

# llm.c's tensor order; shapes per tensor (all layers), and whether AdamW decays it.
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
SHAPES = [(VP, C), (MAX_T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
          (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def init_params(gen):
    """Random parameters, larger than GPT-2's 0.02 so that attention, GELU and the
    LayerNorms are far from linear: weights N(0, 0.1), biases N(0, 0.05), LayerNorm
    weights 1 + N(0, 0.1). Rounded to float32: the model file holds exactly these."""
    params = {}
    for name, shape in zip(NAMES, SHAPES):
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
        if name in ("ln1w", "ln2w", "lnfw"):
            x = 1.0 + 0.1 * x
        elif name.endswith("b"):
            x = 0.05 * x
        else:
            x = 0.1 * x
        params[name] = x.float().double()
    return params


def layernorm(x, w, b):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + LN_EPS) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv):
    """qkv (B, T, 3C) as [q | k | v], head h the columns [h HS, (h+1) HS) of each third."""
    hs = C // NH
    q, k, v = qkv.split(C, dim=-1)
    q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(hs)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    p = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return (p @ v).transpose(1, 2).reshape(B, T, C)


def forward(p, inputs):
    """Logits (B, T, VP) over the padded vocabulary."""
    x = p["wte"][inputs] + p["wpe"][:T]
    for l in range(L):
        h = layernorm(x, p["ln1w"][l], p["ln1b"][l])
        y = attention(h @ p["qkvw"][l].T + p["qkvb"][l])
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = layernorm(x, p["ln2w"][l], p["ln2b"][l])
        f = gelu_tanh(h @ p["fcw"][l].T + p["fcb"][l])
        x = x + f @ p["fcprojw"][l].T + p["fcprojb"][l]
    return layernorm(x, p["lnfw"], p["lnfb"]) @ p["wte"].T


def mean_loss(logits, targets):
    """Mean cross-entropy over the B x T tokens, softmax over the first V logits only."""
    logp = torch.log_softmax(logits[..., :V], dim=-1)
    return -logp.gather(-1, targets.unsqueeze(-1)).mean()


def loss_and_grads(p, inputs, targets):
    leaves = {n: t.clone().requires_grad_(True) for n, t in p.items()}
    logits = forward(leaves, inputs)
    loss = mean_loss(logits, targets)
    loss.backward()
    return logits.detach(), loss.item(), {n: leaves[n].grad.detach() for n in NAMES}


def adamw(p, g, state, t):
    """One step at t (1-based), element by element as the trainers define it: the gradient
    times the clip scale (GRAD_CLIP / norm when the global norm exceeds GRAD_CLIP), then
    m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2, mhat = m / (1-b1^t), vhat = v / (1-b2^t),
    p -= lr (mhat / (sqrt(vhat) + eps) + wd p), wd on the 2D tensors only. Returns the new
    parameters, the norm and the clip scale."""
    norm = math.sqrt(sum(float((x ** 2).sum()) for x in g.values()))
    scale = GRAD_CLIP / norm if GRAD_CLIP > 0 and norm > GRAD_CLIP else 1.0
    out = {}
    for n in NAMES:
        gs = g[n] * scale
        m, v = state.setdefault(n, (torch.zeros_like(gs), torch.zeros_like(gs)))
        m = BETA1 * m + (1 - BETA1) * gs
        v = BETA2 * v + (1 - BETA2) * gs * gs
        state[n] = (m, v)
        upd = (m / (1 - BETA1 ** t)) / (torch.sqrt(v / (1 - BETA2 ** t)) + EPS)
        if n in DECAY:
            upd = upd + WEIGHT_DECAY * p[n]
        out[n] = p[n] - LR * upd
    return out, norm, scale


def torch_adamw_check(p0, grads_per_step, want):
    """The same steps through torch.optim.AdamW (decoupled decay, its own formula and
    code) on the clipped gradients: the largest difference from adamw() above, which must
    be float64 rounding. (torch's clip_grad_norm_ is not used: it divides by norm + 1e-6
    where the trainers divide by norm.)"""
    leaves = {n: p0[n].clone().requires_grad_(True) for n in NAMES}
    opt = torch.optim.AdamW([{"params": [leaves[n] for n in NAMES if n in DECAY], "weight_decay": WEIGHT_DECAY},
                             {"params": [leaves[n] for n in NAMES if n not in DECAY], "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    for g in grads_per_step:
        for n in NAMES:
            leaves[n].grad = g[n].clone()
        opt.step()
    return max(float((leaves[n].detach() - want[n]).abs().max()) for n in NAMES)


def flat(p):
    return np.concatenate([p[n].numpy().ravel() for n in NAMES]).astype(np.float32)


def main():
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(SEED)
    p0 = init_params(gen)
    # Tokens: half from a small set (repeats exercise the embedding's gradient scatter).
    inputs = torch.where(torch.rand(B, T, generator=gen) < 0.5, torch.randint(0, 6, (B, T), generator=gen),
                         torch.randint(0, V, (B, T), generator=gen))
    targets = torch.randint(0, V, (B, T), generator=gen)

    p, state = p0, {}
    losses, norms, grads_per_step, after = [], [], [], []
    for t in range(1, STEPS + 1):
        logits_t, loss, g = loss_and_grads(p, inputs, targets)
        if t == 1:
            logits, grads = logits_t, g
        p, norm, scale = adamw(p, g, state, t)
        losses.append(loss)
        norms.append(norm)
        grads_per_step.append({n: g[n] * scale for n in NAMES})
        after.append(p)
    diff = torch_adamw_check(p0, grads_per_step, after[-1])
    if diff > 1e-14:
        sys.exit(f"torch.optim.AdamW differs from the trainers' formula by {diff:.3e}")

    n_params = sum(int(np.prod(s)) for s in SHAPES)
    with open(os.path.join(HERE, "gpt2_ref_model.bin"), "wb") as f:
        header = np.zeros(256, dtype="<i4")
        header[:8] = [MODEL_MAGIC, MODEL_FP32, MAX_T, V, L, NH, C, VP]
        f.write(header.tobytes())
        f.write(flat(p0).astype("<f4").tobytes())

    with open(os.path.join(HERE, "gpt2_ref.bin"), "wb") as f:
        header = bytearray(256)
        struct.pack_into("<16i", header, 0, REF_MAGIC, REF_VERSION, MAX_T, V, L, NH, C, VP, B, T, STEPS,
                         n_params, 0, 0, 0, 0)
        struct.pack_into("<6f", header, 64, LR, BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP)
        f.write(header)
        f.write(inputs.numpy().astype("<i4").tobytes())
        f.write(targets.numpy().astype("<i4").tobytes())
        f.write(logits.numpy().astype("<f4").tobytes())
        f.write(np.array(losses, dtype="<f4").tobytes())
        f.write(np.array(norms, dtype="<f4").tobytes())
        f.write(flat(grads).astype("<f4").tobytes())
        for a in after:
            f.write(flat(a).astype("<f4").tobytes())

    print(f"L={L} C={C} NH={NH} V={V} Vp={VP} maxT={MAX_T} B={B} T={T}, {n_params} parameters")
    print("losses " + " ".join(f"{x:.9f}" for x in losses) + ", grad norms " + " ".join(f"{x:.9f}" for x in norms))
    print(f"torch.optim.AdamW against the formula: max |difference| {diff:.2e}")


if __name__ == "__main__":
    main()
