"""Where one training step of a profile's base row spends its time, by operator class, and its MFU.

For each precision this machine has (fp32, and bf16 where it is faster than fp32), a worker process builds the
real Trainer for the profile's base row (one thread, as the profile runs it), trains a few warm-up steps, times
``--steps`` steps, then runs the same number under torch.profiler and sums each operator's self time into:

    matrix products      aten::mm / addmm (the linear layers, forward and backward)
    attention            scaled_dot_product_attention and everything below it; its backward; bmm and softmax
    element-wise, norm   layer norm, residual adds, casts, loss, embedding, ... (every other aten op)
    dropout masks        aten::bernoulli_ or aten::random_ (the random masks of dropout: torch's or dropout.py's)
    optimizer            Adam's step, zero_grad, and the gradient scaling after backward
    overhead             view ops, allocation, the autograd engine, Python and the dispatcher (the step's wall
                         time that no aten op accounts for)
    data                 the trainer's own data clock (collating the next batch)

MFU = 6 x params x target tokens/s over the matrix-product peak of one thread at that precision, measured in the
same run (torch matmul at 256-2,048 square and the model's own shapes).  ``--pair`` repeats every measurement
with two processes at once (one thread each, seeds 1 and 2), as two trials share a 2-core machine.

    python benchmarks/step_profile.py [--profile cpu] [--steps 20] [--pair] [--set compile=on]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

CLASSES = ("matmul", "attention", "elementwise", "dropout", "optimizer", "overhead", "data")
LABELS = {
    "matmul": "matrix products",
    "attention": "attention",
    "elementwise": "element-wise, norm, casts, loss",
    "dropout": "dropout masks (bernoulli_ or random_)",
    "optimizer": "optimizer (+ grad scaling)",
    "overhead": "views, allocation, autograd, Python",
    "data": "data",
}
MATMUL = {"aten::mm", "aten::addmm", "aten::matmul", "aten::linear", "aten::_mkldnn_matmul"}
ATTENTION = {"aten::bmm", "aten::baddbmm", "aten::_softmax", "aten::_safe_softmax", "aten::_softmax_backward_data"}
OVERHEAD = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::t", "aten::transpose", "aten::permute",
    "aten::expand", "aten::as_strided", "aten::slice", "aten::select", "aten::split", "aten::split_with_sizes",
    "aten::unsqueeze", "aten::squeeze", "aten::detach", "detach", "aten::alias", "aten::empty", "aten::empty_like",
    "aten::empty_strided", "aten::resolve_conj", "aten::resolve_neg", "aten::to", "aten::lift_fresh",
    "aten::result_type", "aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::contiguous",
    "torch::autograd::AccumulateGrad", "TorchDynamo Cache Lookup", "Pregraph bytecode", "CompiledFunction",
    "CompiledFunctionBackward",
}  # fmt: skip
SHAPES_NOTE = "256-2,048 square and the model's (tokens x d_model x 3 h d_k, tokens x d_model x d_ff, ... x vocab)"


# ---------------------------------------------------------------------------------------------- matmul peak
def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 0.3) -> float:
    """GFLOP/s of an (m, k) x (k, n) product on the current threads, best of three timed blocks."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    flop = 2.0 * m * k * n
    for _ in range(3):
        a @ b
    reps = max(3, int(seconds * 60e9 / flop))
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, flop * reps / (time.perf_counter() - t) / 1e9)
    return best


def model_shapes(values: dict, vocab: int) -> list[tuple[int, int, int]]:
    """The base row's forward products at its token budget: QKV, attention output, the FFN's two, the generator."""
    n, d, ff, hk = values["tokens_per_batch"], values["d_model"], values["d_ff"], values["h"] * values["d_k"]
    return [(n, d, 3 * hk), (n, hk, d), (n, d, ff), (n, ff, d), (n, d, vocab), (d, n, ff)]


def matmul_peak(precision: str, shapes: list[tuple[int, int, int]]) -> dict:
    """Peak one-thread matmul GFLOP/s at ``precision``: the best over square sizes and the model's shapes."""
    torch.set_num_threads(1)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    rates = {f"{s}x{s}x{s}": matmul_rate(s, s, s, dtype) for s in (256, 512, 1024, 2048)}
    rates.update({f"{m}x{k}x{n}": matmul_rate(m, k, n, dtype) for m, k, n in shapes})
    return {"precision": precision, "peak_gflops": max(rates.values()), "rates": rates}


# ----------------------------------------------------------------------------------------- step profile
def base_preset_values(profile: str) -> dict:
    """The base preset's run values at ``profile`` (sweeps.spec.profiles.profile_values).  A tree from before that
    function left the CLI (step_ab.py times such a tree with this worker) gets the same values from its own
    profile and preset."""
    try:
        from sweeps.spec.profiles import profile_values
    except ImportError:
        from sweeps.spec.profiles import get_profile
        from transformer_core.config import MODEL_KEYS, paper_values

        p, paper = get_profile(profile), paper_values("base")
        knobs, steps = p.scale_model({k: paper[k] for k in MODEL_KEYS}), p.scale_steps(paper["train_steps"])
        return {**knobs, **p.train, **p.data, "steps": steps, "eps_ls": paper["eps_ls"]}
    return profile_values("base", profile)


def base_row_values(profile: str, corpus: str, data_dir, overrides: dict) -> dict:
    values = {**base_preset_values(profile), "corpus": corpus, **overrides}
    if data_dir:
        values["data_dir"] = str(data_dir)
    return values


def classify(event, after_backward: bool) -> str:
    """The class of one profiler event's self time (see the module docstring)."""
    chain, e = [], event
    while e is not None:
        chain.append(e.name)
        e = e.cpu_parent
    if after_backward or any(n.startswith("Optimizer.") for n in chain):
        return "optimizer"
    name = event.name
    if name in ("aten::bernoulli_", "aten::random_"):  # torch's masks, or the int32 draws of dropout.py
        return "dropout"
    if name in ATTENTION or any("scaled_dot_product" in n.lower() for n in chain):
        return "attention"
    if name in MATMUL:
        return "matmul"
    if name in OVERHEAD or name.startswith(("autograd::", "## Call", "Torch-Compiled")) or name.endswith("Backward0"):
        return "overhead"
    if name == "train_step":
        return "untracked"
    return "elementwise"


def split_by_class(events, steps: int) -> dict:
    """Milliseconds per step in each class (self times; a step's time no op accounts for goes to overhead)."""
    ms = dict.fromkeys(CLASSES, 0.0)
    roots = [e for e in events if e.name == "train_step" and e.cpu_parent is None]
    last_backward = {}
    for e in events:
        root = e
        while root.cpu_parent is not None:
            root = root.cpu_parent
        if e.name.startswith("autograd::engine"):
            last_backward[id(root)] = max(last_backward.get(id(root), 0), e.time_range.end)
    for e in events:
        root = e
        while root.cpu_parent is not None:
            root = root.cpu_parent
        top = e if e.cpu_parent is None else None
        after = top is None and e.cpu_parent is root and e.time_range.start > last_backward.get(id(root), 1e30)
        cls = classify(e, after)
        ms["overhead" if cls == "untracked" else cls] += e.self_cpu_time_total / 1000.0
    wall = sum(r.cpu_time_total for r in roots) / 1000.0
    return {k: v / steps for k, v in ms.items()}, wall / steps


def profile_worker(args, values: dict, precision: str, seed: int) -> dict:
    from torch.profiler import ProfilerActivity, profile, record_function

    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    config = make_run_config({**values, "precision": precision, "seed": seed})
    if values.get("compile", "off") != "off":  # the compiled kernels as profiler events of their own
        import torch._inductor.config as inductor_config

        inductor_config.cpp.enable_kernel_profile = True
    with tempfile.TemporaryDirectory(prefix="step-profile-") as work:
        tr = Trainer(config, Path(work), JsonTracker(Path(work) / "t.jsonl"), None)
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            tr.train_step()
        warmup_s = time.perf_counter() - t0
        tokens0, t0 = tr.tokens, time.perf_counter()
        for _ in range(args.steps):
            tr.train_step()
        seconds, tokens = time.perf_counter() - t0, tr.tokens - tokens0
        # getattr: step_ab.py also runs this worker on trees from before compile existed
        timed = {"precision": tr.precision, "compile": getattr(getattr(tr, "forward_loss", None), "mode", "off"),
                 "params": tr.params, "tokens_per_second": tokens / seconds,
                 "ms_per_step": 1000.0 * seconds / args.steps}  # fmt: skip
        if not args.profile_steps:
            return {**timed, "warmup_seconds": warmup_s, "compile_seconds": getattr(tr, "compile_seconds", 0.0)}
        data0 = tr.seconds["data"]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                with record_function("train_step"):
                    tr.train_step()
        by_class, profiled_ms = split_by_class(prof.events(), args.steps)
        by_class["data"] = (tr.seconds["data"] - data0) * 1000.0 / args.steps
        by_class["overhead"] = max(0.0, profiled_ms - sum(v for k, v in by_class.items() if k != "overhead"))
    return {
        **timed,
        "tokens_per_step": tokens / args.steps,
        "warmup_seconds": warmup_s,
        "profiled_ms_per_step": profiled_ms,
        "ms_by_class": by_class,
        "threads": torch.get_num_threads(),
    }


# ------------------------------------------------------------------------------------------------- driver
def run_workers(argv_sets: list[list[str]]) -> list[dict]:
    """Run this script's worker mode once per argv, all at the same time; their JSON results in order."""
    procs = [subprocess.Popen([sys.executable, __file__, *a], stdout=subprocess.PIPE, text=True) for a in argv_sets]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"worker failed ({p.returncode}): {' '.join(p.args)}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def machine_precisions() -> list[str]:
    """fp32, and bf16 where a trial's precision=auto takes it on this CPU."""
    import torch

    from transformer_core.device import resolve_precision

    return ["fp32", "bf16"] if resolve_precision("auto", torch.device("cpu")) == "bf16" else ["fp32"]


def cpu_flags() -> str:
    from transformer_core.device import cpu_flags as flags_of_this_cpu  # what precision=auto reads

    flags = flags_of_this_cpu()
    if flags is None:
        return "unknown"
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return " ".join(f for f in wanted if f in flags) or "none of avx2/avx512"


def table(rows: list[dict]) -> str:
    head = "| class | " + " | ".join(r["label"] for r in rows) + " |"
    lines = [head, "|---" * (len(rows) + 1) + "|"]
    for c in CLASSES:
        cells = []
        for r in rows:
            ms, total = r["ms_by_class"][c], r["profiled_ms_per_step"]
            cells.append(f"{ms:.1f} ms ({100 * ms / total:.0f}%)")
        lines.append(f"| {LABELS[c]} | " + " | ".join(cells) + " |")
    profiled = " | ".join(f"{r['profiled_ms_per_step']:.1f} ms" for r in rows)
    lines.append(f"| step under the profiler | {profiled} |")
    lines.append("| step without the profiler | " + " | ".join(f"{r['ms_per_step']:.1f} ms" for r in rows) + " |")
    lines.append("| target tokens/s | " + " | ".join(f"{r['tokens_per_second']:,.0f}" for r in rows) + " |")
    lines.append("| MFU (one-thread peak) | " + " | ".join(f"{100 * r['mfu']:.0f}%" for r in rows) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--steps", type=int, default=20, help="timed steps, then as many profiled")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precisions", default=None, help="comma list (default: those this machine has)")
    ap.add_argument("--pair", action="store_true", help="also two processes at once, one thread each")
    ap.add_argument("--set", action="append", default=[], help="key=value over the base row (e.g. compile=on)")
    ap.add_argument("--json", default=None, help="write every figure here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-profile", dest="profile_steps", action="store_false", help=argparse.SUPPRESS)
    args = ap.parse_args()
    from transformer_core.run_config import parse_assignments

    values = base_row_values(args.profile, args.corpus, args.data_dir, parse_assignments(args.set))
    if args.worker:  # "profile:PRECISION:SEED", "time:PRECISION:SEED" (no profiler) or "peak:PRECISION"
        kind, precision, *rest = args.worker.split(":")
        if kind == "peak":
            from transformer_core.data import load_corpus

            vocab = load_corpus(args.corpus, values["vocab"], args.data_dir).vocab_size
            print(json.dumps(matmul_peak(precision, model_shapes(values, vocab))))
        else:
            args.profile_steps = args.profile_steps and kind == "profile"
            print(json.dumps(profile_worker(args, values, precision, int(rest[0]))))
        return
    common = ["--profile", args.profile, "--corpus", args.corpus, "--steps", str(args.steps)]
    common += ["--warmup", str(args.warmup)] + [x for s in args.set for x in ("--set", s)]
    common += ["--data-dir", args.data_dir] if args.data_dir else []
    precisions = args.precisions.split(",") if args.precisions else machine_precisions()
    results, rows = {"cpu_flags": cpu_flags(), "torch": torch.__version__, "set": args.set}, []
    for precision in precisions:
        peak = run_workers([common + ["--worker", f"peak:{precision}"]])[0]
        results[precision] = {"peak": peak}
        for together in (1, 2) if args.pair else (1,):
            if together == 2:  # each thread's matmul rate while the other core runs the same benchmark
                results[precision]["peaks_two_at_once"] = run_workers([common + ["--worker", f"peak:{precision}"]] * 2)
            runs = run_workers([common + ["--worker", f"profile:{precision}:{1 + i}"] for i in range(together)])
            for i, run in enumerate(runs):
                run["peak_gflops"] = peak["peak_gflops"]
                run["mfu"] = 6 * run["params"] * run["tokens_per_second"] / (peak["peak_gflops"] * 1e9)
                run["label"] = f"{precision}, {'alone' if together == 1 else f'two at once ({i + 1})'}"
                rows.append(run)
            results[precision][f"x{together}"] = runs
    print(f"CPU flags: {results['cpu_flags']}; torch {torch.__version__}; profile {args.profile} base row; one thread "
          f"per process; {args.steps} steps timed, {args.steps} profiled; set {args.set or 'nothing'}")  # fmt: skip
    for precision in precisions:
        r = results[precision]
        two = r.get("peaks_two_at_once")
        both = "; two at once " + " and ".join(f"{p['peak_gflops']:.0f}" for p in two) if two else ""
        print(f"{precision}: one-thread matmul peak {r['peak']['peak_gflops']:.0f} GFLOP/s alone{both} ({SHAPES_NOTE})")
    for row in rows:
        print(f"{row['label']}: {row['tokens_per_second']:,.0f} target tokens/s, MFU {100 * row['mfu']:.1f}% "
              f"(warm-up {row['warmup_seconds']:.1f} s)")  # fmt: skip
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
