"""Peak resident memory of cpu-profile trials, trial after trial in one process (as a reused Ray worker runs
them), in each precision, with the native libraries' cache defaults beside the bounds transformer_core sets.

Each setting is one fresh worker process that trains ``--trials`` trials of Table 3 rows one after another (A3's
16 heads, B1's d_k 16, A1's one head of 512, base; ``--steps`` steps each, dev scored on ``--eval-sentences``),
one thread, and prints per trial: its peak resident memory (VmHWM reset at the trial's start), the resident memory
after it, and its training rate.  Settings run one at a time, never beside each other, so rates compare.

    libraries' defaults   ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024 LRU_CACHE_CAPACITY=1024, nothing released after
                          a trial (the worker as it ran before this benchmark existed)
    bounded               transformer_core's defaults (native_memory.CACHE_CAPACITY) and release_free_memory()
                          after each trial, as sweeps/run/trial.py does

The ratios printed: bf16 / fp32 peak (bounded; the target is <= 1.5), growth per trial after the first, and the
training rate bounded / defaults per precision.

    python benchmarks/worker_memory.py [--trials 4] [--steps 200] [--precisions fp32,bf16] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ROWS = [("A3", {"h": 16}), ("B1", {"d_k": 16}), ("A1", {"h": 1, "d_k": 512, "d_v": 512}), ("base", {})]
SETTINGS = {
    "libraries' defaults": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024", "LRU_CACHE_CAPACITY": "1024"},
    "bounded": {},
}


def worker(args) -> None:
    """One process: ``--trials`` trials in a row; a JSON line per trial."""
    from sweeps.spec.profiles import profile_values
    from transformer_core.native_memory import gb, peak_bytes, release_free_memory, resident_bytes
    from transformer_core.run_config import make_run_config
    from transformer_core.train import train_and_evaluate

    release = args.worker == "bounded"
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.trials):
            row, knobs = ROWS[i % len(ROWS)]
            values = {
                **profile_values("base", "cpu"),
                "corpus": args.corpus,
                "steps": args.steps,
                "eval_every": args.steps,
                "eval_sentences": args.eval_sentences,
                "threads": 1,
                "precision": args.precision,
                "seed": 1 + i,
                **knobs,
            }
            if args.data_dir:
                values["data_dir"] = args.data_dir
            result = train_and_evaluate(make_run_config(values), Path(tmp) / f"t{i}")
            peak = peak_bytes()
            if release:
                release_free_memory()
            out = {
                "trial": i + 1,
                "row": row,
                "peak_gb": gb(peak),
                "after_gb": gb(resident_bytes()),
                "result_peak_rss_gb": result.get("peak_rss_gb"),
                "tokens_per_second": result["tokens_per_second"],
                "env": {k: os.environ.get(k) for k in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")},
            }
            print(json.dumps(out), flush=True)


def run_setting(args, setting: str, precision: str) -> list[dict]:
    env = {**os.environ, **SETTINGS[setting], "PYTHONPATH": str(HERE)}
    if setting == "bounded":
        for name in SETTINGS["libraries' defaults"]:
            env.pop(name, None)
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        setting,
        "--precision",
        precision,
        "--trials",
        str(args.trials),
        "--steps",
        str(args.steps),
        "--eval-sentences",
        str(args.eval_sentences),
        "--corpus",
        args.corpus,
    ]
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE)
    if out.returncode:
        raise SystemExit(f"worker failed ({out.returncode}): {out.stderr[-2000:]}")
    return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]


# Which cache holds the growth: bf16 linear layers (forward and backward) over 380 new shapes in a fresh process,
# the resident memory it adds, with each cache at the libraries' default (1024) or capped (64).  transformer_core is
# imported first, as in a trial: its caps hold unless the environment sets the capacities.
SHAPES = """
import json, os, sys
import transformer_core
import torch
torch.set_num_threads(1)
rss = lambda: int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1e3
w, out = torch.randn(512, 128, requires_grad=True), []
for i, n in enumerate(range(8, 808, 2)):
    x = torch.randn(n, 128, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=sys.argv[1] == "bf16"):
        y = torch.nn.functional.linear(x, w)
    y.float().sum().backward()
    if i == 19:
        out.append(rss())
variables = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
print(json.dumps({"growth_mb": rss() - out[0], "env": {k: os.environ.get(k) for k in variables}}))
"""
ATTRIBUTION = {
    "both at 1024 (the libraries' defaults)": ("1024", "1024"),
    "oneDNN's capped, ideep's at 1024": ("64", "1024"),
    "ideep's capped, oneDNN's at 1024": ("1024", "64"),
    "both capped (transformer_core's default)": ("64", "64"),
}


def shape_growth(precision: str, capacities: dict | None = None) -> dict:
    """{growth_mb, env} of SHAPES in a fresh process with the cache capacities ``capacities`` (None: neither set,
    transformer_core's caps)."""
    from transformer_core.native_memory import CACHE_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
    env.update(capacities or {}, PYTHONPATH=str(HERE))
    out = subprocess.run([sys.executable, "-c", SHAPES, precision], capture_output=True, text=True, env=env,
                         timeout=300)  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"shape growth failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def attribution(precision: str) -> list[str]:
    lines = []
    for label, (onednn, ideep) in ATTRIBUTION.items():
        caps = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": onednn, "LRU_CACHE_CAPACITY": ideep}
        growth = shape_growth(precision, caps)["growth_mb"]
        lines.append(f"  {precision}, {label}: +{growth:.0f} MB over 380 new shapes")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-sentences", type=int, default=100)
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--precisions", default=None, help="comma list (default: fp32, and bf16 where it is faster)")
    ap.add_argument("--out", default=None, help="also write the printed text here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--precision", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    sys.path.insert(0, str(HERE / "benchmarks"))
    import torch
    from step_profile import cpu_flags, machine_precisions

    from sweeps.run.tracking import git_commit
    from transformer_core.memory import machine_memory

    precisions = args.precisions.split(",") if args.precisions else machine_precisions()
    mem = (machine_memory() or 0) / 1e9
    lines = [
        f"# {' '.join(['python', 'benchmarks/worker_memory.py', *sys.argv[1:]])}",
        f"# {time.strftime('%Y-%m-%d')}, commit {git_commit(HERE)}, "
        f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, CPU flags: {cpu_flags()}, {mem:.1f} GB memory, torch {torch.__version__}",
        f"# {args.trials} trials per process ({', '.join(r for r, _ in ROWS[: args.trials])}), {args.steps} steps, "
        f"one thread; settings one at a time",
        "",
    ]
    lines.append("Where the growth is: linear layers over new shapes in a fresh process, per cache setting")
    for precision in precisions:
        lines += attribution(precision)
    print("\n".join(lines), flush=True)
    lines.append("")
    summary = {}
    for precision in precisions:
        for setting in SETTINGS:
            rows = run_setting(args, setting, precision)
            summary[precision, setting] = rows
            lines.append(f"{precision}, {setting}:")
            for r in rows:
                lines.append(
                    f"  trial {r['trial']} {r['row']:>4}: peak {r['peak_gb']:.3f} GB, after {r['after_gb']:.3f} GB, "
                    f"{r['tokens_per_second']:,.0f} target tokens/s"
                )
            print("\n".join(lines[-len(rows) - 1 :]), flush=True)
    lines.append("")
    first = len(lines)
    for precision in precisions:
        for setting in SETTINGS:
            rows = summary[precision, setting]
            growth = (rows[-1]["after_gb"] - rows[0]["after_gb"]) / max(len(rows) - 1, 1)
            lines.append(
                f"{precision}, {setting}: largest peak {max(r['peak_gb'] for r in rows):.3f} GB, "
                f"resident after each trial grows {1000 * growth:+.0f} MB per trial"
            )
    for setting in SETTINGS if "bf16" in precisions and "fp32" in precisions else ():
        ratios = [b["peak_gb"] / f["peak_gb"] for b, f in zip(summary["bf16", setting], summary["fp32", setting])]
        lines.append(
            f"bf16 / fp32 peak, {setting}: "
            + ", ".join(f"{x:.2f}x" for x in ratios)
            + f" (largest {max(ratios):.2f}x; target <= 1.5x)"
        )
    for precision in precisions:
        rate = {s: statistics.median(r["tokens_per_second"] for r in summary[precision, s]) for s in SETTINGS}
        lines.append(
            f"{precision}: training rate bounded / defaults {rate['bounded'] / rate[next(iter(SETTINGS))]:.3f}x "
            f"(medians {rate['bounded']:,.0f} / {rate[next(iter(SETTINGS))]:,.0f} target tokens/s)"
        )
    text = "\n".join(lines)
    print("\n" + "\n".join(lines[first:]))
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
