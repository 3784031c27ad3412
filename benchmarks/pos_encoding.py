"""Cost of each STRING variant next to RoPE, eager (forward+backward), compiled (apply_rope_mixed forward) and the
attention that consumes it.

    python -m benchmarks.pos_encoding                      # head_dim 64, 4 heads, batch 2, N = 256/1024/4096
    python -m benchmarks.pos_encoding --tokens 256 1024 --repeats 9 --variants rope cayley circulant

Every variant compiles to RoPE-Mixed in a folded basis (docs/DESIGN.md §2), so the "compiled" column times the exported
op, `apply_rope_mixed`, with each variant's canonical frequencies. Times are medians over repeats that are
interleaved across variants (round-robin), so load from other processes hits all variants alike.
The dense expm oracle (float64 matrix_exp per token, O(N·Dh³)) is timed after the others, only up to
--dense-max-tokens, with --dense-repeats repeats and no warm-up. Nothing here asserts on time.

⊗-STRING ('tensor_product', m Fourier features) is not a rotation: it grows the q/k head from Dh to 2m·Dh
("qk dim" column), so its encoded q and k are 2m times larger and qᵀk costs 2m times more ("attn" column: SDPA
over the encoded q, k and an un-encoded v, up to --attn-max-tokens). It still compiles to RoPE-Mixed, on a lift.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import math

import torch.nn.functional as F

from string_perception.encodings import (ALL_ENCODING_NAMES, ENCODING_NAMES, apply_rope_mixed,
                                         build_position_encoding)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--tokens', type=int, nargs='+', default=[256, 1024, 4096])
    p.add_argument('--batch', type=int, default=2)
    p.add_argument('--heads', type=int, default=4)
    p.add_argument('--head-dim', type=int, default=64)
    p.add_argument('--coord-dim', type=int, default=3)
    p.add_argument('--repeats', type=int, default=15, help='timed repeats per measurement (median reported)')
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--variants', nargs='+', default=list(ALL_ENCODING_NAMES), choices=ALL_ENCODING_NAMES)
    p.add_argument('--tensor-features', type=int, default=4, help='m of tensor_product (q/k head 2m·Dh)')
    p.add_argument('--dense-max-tokens', type=int, default=256)
    p.add_argument('--attn-max-tokens', type=int, default=1024, help='time attention only up to this N')
    p.add_argument('--dense-repeats', type=int, default=1)
    p.add_argument('--threads', type=int, default=1, help='torch intra-op threads (shared CPU: keep it small)')
    p.add_argument('--device', default='cpu')
    return p.parse_args(argv)


def _sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _timed(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def bench_size(args, n, device):
    """Median seconds {variant: (eager fwd, eager fwd+bwd, compiled fwd[, attention])}, compile error and q/k head
    size, for N = n."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch, args.heads, n, args.head_dim, generator=g).to(device)  # [B,H,N,Dh]
    r = (torch.randn(args.batch, n, args.coord_dim, generator=g) * 4).to(device)  # [B,N,dc]
    grad_out = torch.randn(x.shape, generator=g).to(device)
    cases = {}
    for name in args.variants:
        if name == 'dense' and n > args.dense_max_tokens:
            continue
        torch.manual_seed(0)
        kw = dict(num_features=args.tensor_features) if name == 'tensor_product' else {}
        enc = build_position_encoding(name, head_dim=args.head_dim, num_heads=args.heads,
                                      coord_dim=args.coord_dim, **kw).to(device)
        if name == 'cayley':  # away from the S = 0 init, where P = I
            with torch.no_grad():
                enc.weight.normal_(0, 0.1)
        can = enc.canonical()
        basis, freqs = can.basis.to(device), can.freqs.float().to(device)
        with torch.no_grad():  # compiled path: fold basis (outside the timed op) then plain RoPE-Mixed
            xb = (x.double() @ basis.transpose(-1, -2)).float()
            ref = enc(x, r)                                                   # [B,H,N,Dh or 2m·Dh]
            out = apply_rope_mixed(xb, r, freqs).double()
            if name in ENCODING_NAMES:  # rotations: back to the original basis (⊗-STRING's lift is the output)
                out = out @ basis
            err = (out - ref.double()).abs().max().item()
        xg = x.clone().requires_grad_()

        def fwd(enc=enc):
            with torch.no_grad():
                enc(x, r)

        g_out = grad_out.repeat(1, 1, 1, ref.shape[-1] // args.head_dim)  # [B,H,N,Dh or 2m·Dh]

        def fwd_bwd(enc=enc, xg=xg, g_out=g_out):
            enc(xg, r).backward(g_out)

        def compiled(xb=xb, freqs=freqs):
            with torch.no_grad():
                apply_rope_mixed(xb, r, freqs)

        def attention(qk=ref):
            with torch.no_grad():
                F.scaled_dot_product_attention(qk, qk, x, scale=1.0 / math.sqrt(args.head_dim))

        fns = (fwd, fwd_bwd, compiled) + ((attention,) if n <= args.attn_max_tokens else ())
        cases[name] = (fns, err, ref.shape[-1])
    times = {name: tuple([] for _ in cases[name][0]) for name in cases}
    fast = [name for name in cases if name != 'dense']
    for rep in range(args.warmup + args.repeats):  # round-robin: every variant sees the same machine load
        for name in fast:
            for i, fn in enumerate(cases[name][0]):
                t = _timed(fn, device)
                if rep >= args.warmup:
                    times[name][i].append(t)
    if 'dense' in cases:  # alone, afterwards: its GBs of temporaries would disturb the others
        for _ in range(max(1, args.dense_repeats)):
            for i, fn in enumerate(cases['dense'][0]):
                times['dense'][i].append(_timed(fn, device))
    return ({name: tuple(statistics.median(ts) for ts in times[name]) for name in cases},
            {name: err for name, (_, err, _) in cases.items()}, {name: dq for name, (_, _, dq) in cases.items()})


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f'# STRING position encodings: B={args.batch} H={args.heads} Dh={args.head_dim} dc={args.coord_dim} '
          f'device={device} threads={args.threads} repeats={args.repeats} (median, ms)')
    print('# eager = PositionEncoding.forward (+ backward); compiled = apply_rope_mixed with the canonical\n'
          '# [H,Dh/2,dc] frequencies on the folded basis (the exported op);\n'
          '# x rope = ratio to rope in the same column and N; err = max|compiled - eager| in float32;\n'
          '# qk dim = per-head size of the encoded q/k (2m·Dh for tensor_product); attn = SDPA on them')
    header = (f'{"variant":<15}{"N":>6}{"qk dim":>8}{"fwd ms":>11}{"fwd+bwd ms":>13}{"x rope":>10}'
              f'{"compiled ms":>13}{"x rope":>8}{"attn ms":>10}{"x rope":>8}{"err":>10}')
    print(header)
    print('-' * len(header))
    t_start = time.perf_counter()
    for n in args.tokens:
        res, errs, qk_dims = bench_size(args, n, device)
        ref = res.get('rope')
        for name, (f, fb, c, *attn) in res.items():
            rel_fb = f'{fb / ref[1]:.2f}' if ref else '-'
            rel_c = f'{c / ref[2]:.2f}' if ref else '-'
            a = f'{attn[0] * 1e3:.3f}' if attn else '-'
            rel_a = f'{attn[0] / ref[3]:.2f}' if attn and ref and len(ref) > 3 else '-'
            print(f'{name:<15}{n:>6}{qk_dims[name]:>8}{f * 1e3:>11.3f}{fb * 1e3:>13.3f}{rel_fb:>10}{c * 1e3:>13.3f}'
                  f'{rel_c:>8}{a:>10}{rel_a:>8}{errs[name]:>10.1e}')
        skipped = [v for v in args.variants if v not in res]
        if skipped:
            print(f'{"":<15}{n:>6}  skipped: {", ".join(skipped)} (N > --dense-max-tokens)')
    print(f'# total {time.perf_counter() - t_start:.1f} s')


if __name__ == '__main__':
    main()
