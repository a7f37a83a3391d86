"""PyTorch's CPU AdamW in GB/s, the baseline bench_adamw_cpu prints beside its own kernel.
   python3 dev/bench/bench_adamw_torch.py ELEMENTS REPEATS MAX_THREADS
One flat fp32 parameter of ELEMENTS, the same hyperparameters and byte count (28 per
element: p, g, m, v read, p, m, v written) as bench_adamw_cpu; best step time of REPEATS,
for each thread count 1..MAX_THREADS and each implementation this torch has."""
import sys
import time

import torch


def best_step_seconds(n, repeats, **impl):
    p = torch.nn.Parameter(0.02 * torch.randn(n))
    p.grad = 1e-3 * torch.randn(n)
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, **impl)
    opt.step()  # allocates m and v
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    n, repeats, max_threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print(f"torch {torch.__version__}")
    print(f"{'impl':<8} {'threads':>7} {'GB/s':>10}")
    for threads in range(1, max_threads + 1):
        torch.set_num_threads(threads)
        for name, impl in (("foreach", {"foreach": True}), ("fused", {"fused": True}), ("default", {})):
            try:
                s = best_step_seconds(n, repeats, **impl)
            except (RuntimeError, TypeError, ValueError) as e:  # e.g. no fused CPU AdamW in this version
                print(f"{name:<8} {threads:>7} {'n/a':>10}  ({str(e).splitlines()[0][:80]})")
                continue
            print(f"{name:<8} {threads:>7} {28.0 * n / s / 1e9:>10.2f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
