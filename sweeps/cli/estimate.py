"""`tsweep estimate`: device-hours of one seed of every row of a spec at each GPU profile (docs/cluster.md).

Trial time is the plan's FLOPs over a known device's peak dense FLOP/s times an MFU, as `tsweep plan --gpu`
computes it (sweeps/plan/estimate.py).
"""

from __future__ import annotations

from pathlib import Path

# the GPU profiles of the table and the devices one trial of each uses
GPU_PROFILES = (("gpu", 1), ("gpu-8x", 8), ("gpu-half", 1))
MAX_GPUS = 100_000


def cmd_estimate(args) -> int:
    from sweeps.plan.estimate import device_peak, duration, resolve_throughput, spec_hours
    from sweeps.spec.sweep_spec import load_spec
    from transformer_core.errors import UserError

    from .args import spec_path

    resolve_throughput("gpu", device=args.gpu, mfu=args.mfu)  # `tsweep plan --gpu`'s checks: one line for a bad --mfu
    if not 1 <= args.gpus <= MAX_GPUS:  # the wall column packs trials onto this many GPUs, one slot each
        raise UserError(f"--gpus {args.gpus} is invalid: allowed a whole number of GPUs in [1, {MAX_GPUS:,}]")
    full, peak, precision = device_peak(args.gpu)
    per_device = peak * args.mfu
    path = spec_path(args)
    if path is None:  # the command's default is Table 3's spec
        raise TypeError("tsweep estimate: no spec and no default")
    spec = load_spec(path)
    print(f"{spec.name}, one seed of every row; {full}: {peak:.3g} FLOP/s dense {precision} x MFU {args.mfu:g} =")
    print(f"{per_device:.3g} FLOP/s per GPU; trial time = FLOPs / FLOP/s + evaluation by the sentences decoded\n")
    n = args.gpus
    print(
        f"| profile | GPUs per trial | base trial FLOPs | base trial | Table 3 FLOPs | GPU-hours | wall on 1 GPU"
        f" | wall on {n} GPUs |\n|---|---|---|---|---|---|---|---|"
    )
    h = lambda x: "cannot run" if x is None else f"{x:,.1f} h"  # noqa: E731
    for profile, devices in GPU_PROFILES:
        r = spec_hours(spec, profile, per_device, devices, n)
        print(
            f"| {profile} | {devices} | {r['base_flops']:.2e} | {duration(r['base_hours'] * 3600)} | {r['flops']:.2e}"
            f" | {r['device_hours']:,.0f} | {h(r['wall_1'])} | {h(r['wall_n'])} |"
        )
    return 0


def register(sub) -> None:
    from sweeps.plan.estimate import DEFAULT_MFU

    from .args import add_gpu_argument, add_spec_argument

    p = sub.add_parser(
        "estimate",
        help="device-hours of a spec's rows at each GPU profile on a known device (the table of docs/cluster.md)",
        description=__doc__,
    )
    table3 = Path(__file__).parent.parent / "specs" / "table3.yaml"
    add_spec_argument(p, default=str(table3), shown="sweeps/specs/table3.yaml")
    add_gpu_argument(p, "the GPU the table assumes", default="h100")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU, help=f"model FLOPs utilisation (default {DEFAULT_MFU})")
    p.add_argument("--gpus", type=int, default=8, help="GPUs of the wall-time column (default 8)")
    p.set_defaults(func=cmd_estimate)
