"""Every candidate for the gpu profile's CUDA step, side by side in one run: the device script of issue 56.

Each candidate is a fresh Trainer of the profile's base row (precision auto: bf16 on a GPU) that trains
``--warmup`` untimed steps (a compiled candidate compiles there, anew for each row but helped by inductor's on-disk
cache where an earlier row compiled the same graph; its seconds are printed) and ``--windows`` timed
windows of ``--steps`` steps; its rate is the best window's target tokens/s.  In the order run (the most telling
first, so that a run cut short by ``--deadline`` still has them):

    padded 2x12.5k       today's step: padded length buckets, eager, two accumulated micro-batches (the baseline)
    packed graphs flex stack  the padded stream's very batches packed (packing=on), as many sentences in whole
                         128-token tiles as the buffer's room allows (packed_layout auto = tiles under Flex),
                         compiled and replayed as a CUDA graph with FlexAttention, one 25k micro-batch, losses
                         read once a logging window (loss_sync=window), the loss from the log-sum-exp
                         (loss_kernel=lse): the step a CUDA default would be if each part pays
    anchor compiled      benchmarks/anchor_transformer.py: torch.nn.Transformer of the same sizes, compiled
    packed graphs flex64 stack  the stack with FlexAttention at 64-token tiles (packed_attention=flex64)
    anchor eager         the anchor eager
    ... stack bf16       the stack with its residual stream kept in bf16 (residual_dtype=bf16)
    share k, MPS         k concurrent processes of the sharing candidate (--share, or the fastest graph row so
                         far) under an MPS daemon of this run's own (a private pipe directory, stopped after; k = 2, 3)
    share 2, time-sliced the same without MPS
    packed graphs flex end  the Flex graph step as the H200 measured it (end to end, read every step, log-softmax)
    ... flex, window, lse   one part of the stack each, on top of the row before
    ... stack fill/blocks   opt-in batch streams: buffers filled to the budget in real tokens (packing=fill), or
                         every sentence of a seeded shuffle in its tile (packing=blocks), alone and in the stack
    padded compiled      the baseline compiled (compile=on): the incumbent a new step has to beat
    packed graphs        packed graphs with varlen FlashAttention instead of Flex
    packed 2x12.5k       packed buffers (data/packing.py), eager
    packed compiled      packed, compiled at static shapes (compile=on)
    padded 1x25k         one micro-batch of the whole step's tokens
    packed 1x25k         packed, one micro-batch
    packed fill 2x12.5k  packing=fill, eager
    ... stack tuned      the stack compiled with inductor's coordinate-descent tuning (a benchmark setting), last

MFU is 6 x params x target tokens/s over the bf16 matrix-product peak measured in the same run; a sharing row's
aggregate MFU sums its processes' tokens/s, each counted over the same timed wall window (a file barrier lines the
processes' windows up).  The MPS daemon is started with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in this
run's temporary directory and stopped with ``quit``: no compute-mode change, no reset; where it does not start,
the row says why.  The table goes to ``--out`` with the device, torch version, commit, date and command.

``--dry-run`` runs every candidate on the CPU at the smoke profile on the committed fixture corpus (no CUDA
graphs there: that candidate runs compiled, and MPS rows say there is no GPU), to check the script end to end.

    python benchmarks/gpu_candidates.py [--profile gpu] [--corpus bible-en-de] [--data-dir D] [--steps 20]
        [--windows 3] [--warmup 5] [--deadline 480] [--out benchmarks/results/gpu_candidates.txt]
    python benchmarks/gpu_candidates.py --dry-run --out /tmp/dry.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT))


def _c(packing: str, compile_mode: str, micro: int, attention: str = "auto", sync: str = "auto", loss: str = "plain",
       layout: str = "auto", tuned: bool = False, residual: str = "fp32") -> dict:  # fmt: skip
    """A candidate: its run values (packing, compile, micro-batches a step, packed_attention, loss_sync,
    loss_kernel, packed_layout, residual_dtype) and whether inductor tunes its kernels (a benchmark setting, not a
    run value)."""
    return dict(packing=packing, compile_mode=compile_mode, micro=micro, attention=attention, sync=sync, loss=loss,
                layout=layout, tuned=tuned, residual=residual)  # fmt: skip


CANDIDATES = {
    "padded 2x12.5k": _c("off", "off", 2),
    "padded compiled 2x12.5k": _c("off", "on", 2),  # the incumbent to beat: today's step compiled
    "packed 2x12.5k": _c("on", "off", 2),
    "packed graphs": _c("on", "graphs", 1),  # a CUDA graph replays over its outputs: one micro-batch a step
    # FlexAttention with a block mask instead of varlen, the padded stream's batches end to end: the step the H200
    # measured at 491,750 tokens/s
    "packed graphs flex end": _c("on", "graphs", 1, "flex", layout="end"),
    # the same batches with as many sentences in whole 128-token tiles as the buffer's room allows (packed_layout
    # auto = tiles under FlexAttention): fewer key tiles a query tile visits
    "packed graphs flex": _c("on", "graphs", 1, "flex"),
    # the same step read once a logging window (loss_sync=window): the host queues a step while the GPU runs one
    "packed graphs flex window": _c("on", "graphs", 1, "flex", "window"),
    # the same step with the loss from the log-sum-exp (loss_kernel=lse: no log-probabilities tensor)
    "packed graphs flex lse": _c("on", "graphs", 1, "flex", loss="lse"),
    # the three together on the padded stream's very batches: the step a CUDA default would be if each part pays
    "packed graphs flex stack": _c("on", "graphs", 1, "flex", "window", "lse"),
    # the stack with the residual stream kept in bf16 (residual_dtype=bf16): the layer-norm, dropout and residual
    # kernels move it in 2 bytes an element, not 4 (layer norm and dropout backward: 6.5 of 42.4 ms on the H200)
    "packed graphs flex stack bf16": _c("on", "graphs", 1, "flex", "window", "lse", residual="bf16"),
    # the stack with FlexAttention's tiles at 64 tokens, pairs in 64-token blocks (packed_attention=flex64): a
    # query meets 0.56-0.61 of the keys it does at 128 (packing_tiles.py; attention: 9.1 of 42.4 ms on the H200)
    "packed graphs flex64 stack": _c("on", "graphs", 1, "flex64", "window", "lse"),
    # opt-in streams (another batch composition): buffers filled to the budget in real tokens, in tiles where room
    "packed graphs flex fill": _c("fill", "graphs", 1, "flex"),
    "packed graphs flex stack fill": _c("fill", "graphs", 1, "flex", "window", "lse"),
    # every sentence of a seeded shuffle in its 128-token tile (packing=blocks): one key tile a query tile
    "packed graphs flex blocks": _c("blocks", "graphs", 1, "flex"),
    "packed graphs flex stack blocks": _c("blocks", "graphs", 1, "flex", "window", "lse"),
    # the stack with inductor's coordinate-descent tuning of its generated kernels (30% of the Flex step's kernel
    # time is fused reductions: layer norm, dropout, the log-softmax)
    "packed graphs flex stack tuned": _c("on", "graphs", 1, "flex", "window", "lse", tuned=True),
    "packed compiled": _c("on", "on", 2),
    "padded 1x25k": _c("off", "off", 1),
    "packed 1x25k": _c("on", "off", 1),
    "packed fill 2x12.5k": _c("fill", "off", 2),  # buffers filled to the budget in real tokens: more tokens a step
}

# the single-trial candidates after the baseline, the stack and the anchor, most telling first
LATER = ("packed graphs flex end", "packed graphs flex", "packed graphs flex window", "packed graphs flex lse",
         "packed graphs flex stack fill", "packed graphs flex stack blocks", "packed graphs flex fill",
         "packed graphs flex blocks", "padded compiled 2x12.5k", "packed graphs", "packed 2x12.5k", "packed compiled",
         "padded 1x25k", "packed 1x25k", "packed fill 2x12.5k", "packed graphs flex stack tuned")  # fmt: skip
BARRIER_SECONDS = 300.0  # a sharing process waits this long for the others to warm up
# tuning every generated kernel can take minutes: the tuned row runs last, where the deadline leaves it room
TUNED_RESERVE = 180.0
# the candidates a sharing row may run (without --share: the fastest of them measured)
SHARING = (
    "packed graphs flex stack bf16",
    "packed graphs flex64 stack",
    "packed graphs flex stack",
    "packed graphs flex stack fill",
    "packed graphs flex stack blocks",
    "packed graphs flex",
    "packed graphs flex end",
    "packed graphs",
)


def row_values(args, packing: str, compile_mode: str, micro: int, attention: str = "auto", sync: str = "auto",
               loss: str = "plain", layout: str = "auto", tuned: bool = False,
               residual: str = "fp32") -> dict:  # fmt: skip
    """The base row's run values at the profile, the step's tokens split into ``micro`` micro-batches (``tuned``
    is read by ``inductor_tuning``)."""
    from step_profile import base_row_values

    values = base_row_values(args.profile, args.corpus, args.data_dir, {})
    step_tokens = int(values["tokens_per_batch"]) * int(values.get("accumulate", 1))
    values.update(packing=packing, compile=compile_mode, accumulate=micro, tokens_per_batch=step_tokens // micro,
                  packed_attention=attention, loss_sync=sync, loss_kernel=loss, packed_layout=layout,
                  residual_dtype=residual)  # fmt: skip
    if sync == "window":  # every timed window closes one logging window: its read is timed, as a run pays it
        values["log_every"] = args.steps
    if args.dry_run:  # a CPU attends through a mask, where layout auto is end: lay out as FlexAttention would
        values.update(device="cpu", threads=1)
        if attention in ("flex", "flex64") and layout == "auto":
            values["packed_layout"] = "tiles"
        if residual == "bf16":  # a bf16 stream needs bf16 autocast, which a CPU runs too
            values["precision"] = "bf16"
    return values


def wanted(only: str | None, name: str) -> bool:
    """Whether ``--only`` asks for row ``name``: each item names a candidate exactly (``packed graphs flex stack``
    is that row, not its bf16 or sharing variants), or, naming none, selects every row containing it (``anchor``,
    ``share``, ``MPS``); no ``--only``: every row."""
    items = [o.strip() for o in (only or "").split(",") if o.strip()]
    if not items:
        return True
    return any(o == name if o in CANDIDATES else o in name for o in items)


def inductor_tuning(name: str):
    """The inductor settings candidate ``name`` compiles under: coordinate-descent tuning of the generated kernels
    for a ``tuned`` row, none for the rest."""
    import contextlib

    if not CANDIDATES[name]["tuned"]:
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config

    return inductor_config.patch(coordinate_descent_tuning=True)


def candidate_rate(args, name: str, windows: int | None = None, barrier: Path | None = None, k: int = 1) -> dict:
    """``train_rate`` of candidate ``name`` under its inductor settings."""
    with inductor_tuning(name):
        values = row_values(args, **CANDIDATES[name])
        return train_rate(values, args.warmup, args.steps, windows or args.windows, barrier, k)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_rate(values: dict, warmup: int, steps: int, windows: int, barrier: Path | None = None, k: int = 1) -> dict:
    """A fresh Trainer of ``values``: warm-up, then timed windows; with ``barrier``, the first window starts when
    all ``k`` processes have warmed up, and the result is that one window over a wall time every process shares."""
    from sweeps.plan.device_bench import timed_windows
    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer, packing_keys

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    # each candidate compiles anew: torch keeps the compiled code of a function across the rows of one process (a
    # later row of another shape or setting would add to it, up to 8, then run uncompiled, and a row differing
    # only in inductor's settings would reuse an earlier row's kernels); inductor's on-disk cache still serves a
    # graph an earlier row compiled under the same settings
    torch._dynamo.reset()
    config = make_run_config({**values, "seed": 1, "steps": warmup + windows * steps + 1})
    with tempfile.TemporaryDirectory(prefix="gpu-cand-") as work:
        tr = Trainer(config, Path(work), JsonTracker(Path(work) / "t.jsonl"), None)

        def ready() -> None:  # processes sharing the GPU start their timed windows together
            (barrier / f"ready-{os.getpid()}").touch()
            waited = time.monotonic()
            while len(list(barrier.glob("ready-*"))) < k:
                if time.monotonic() - waited > BARRIER_SECONDS:  # a process that died never arrives
                    raise RuntimeError(f"{k - len(list(barrier.glob('ready-*')))} sharing process(es) did not "
                                       f"warm up within {BARRIER_SECONDS:.0f} s")  # fmt: skip
                time.sleep(0.01)

        warm, timed = timed_windows(tr, warmup, steps, windows, ready if barrier is not None else None)
        rates = [r[0] for r in timed]
        peak = torch.cuda.max_memory_allocated() / 2**30 if tr.device.type == "cuda" else None
        return {
            "tokens_per_second": max(rates), "windows": rates, "params": tr.params, "warmup_seconds": warm,
            "tokens_per_step": (tr.tokens / tr.step) if tr.step else 0.0, "peak_memory_gib": peak,
            "precision": tr.precision, "compile": tr.forward_loss.mode, **packing_keys(tr),
            "residual_dtype": tr.cfg.train.residual_dtype,
        }  # fmt: skip


def shared_rate(args, name: str, k: int, mps_dir: Path | None, work: Path, seconds: float = 600.0) -> dict:
    """k concurrent processes of candidate ``name``; their window rates summed (each over one shared window);
    processes still running after ``seconds`` are killed and the row fails."""
    barrier = Path(tempfile.mkdtemp(prefix=f"share{k}-", dir=work))
    env = dict(os.environ)
    if mps_dir is not None:
        env.update(CUDA_MPS_PIPE_DIRECTORY=str(mps_dir / "pipe"), CUDA_MPS_LOG_DIRECTORY=str(mps_dir / "log"))
    outs = [barrier / f"out-{i}.json" for i in range(k)]
    cmd = [sys.executable, __file__, "--worker", name, "--barrier", str(barrier), "--k", str(k)]
    cmd += [
        "--profile",
        args.profile,
        "--corpus",
        args.corpus,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
    ]
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    cmd += ["--dry-run"] if args.dry_run else []
    procs = [subprocess.Popen([*cmd, "--json", str(o)], env=env, stderr=subprocess.PIPE, text=True) for o in outs]
    try:
        errors = [p.communicate(timeout=max(30.0, seconds))[1] for p in procs]
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the sharing processes ran past {seconds:.0f} s") from None
    finally:  # none left holding GPU memory (or the MPS daemon) after the row, however it ended
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        tail = next(e for p, e in zip(procs, errors) if p.returncode).strip().splitlines()[-1:]
        raise RuntimeError(f"a sharing process failed: {' '.join(tail)}")
    runs = [json.loads(o.read_text()) for o in outs]
    return {**runs[0], "tokens_per_second": sum(r["tokens_per_second"] for r in runs),
            "per_process": [r["tokens_per_second"] for r in runs],
            "peak_memory_gib": max((r["peak_memory_gib"] or 0.0) for r in runs)}  # fmt: skip


class MPS:
    """An MPS control daemon of this run's own: pipe and log directories under ``root``; ``quit`` on exit."""

    def __init__(self, root: Path):
        self.root, self.env, self.why = root, None, ""

    def __enter__(self) -> "MPS":
        binary = shutil.which("nvidia-cuda-mps-control")
        if not torch.cuda.is_available():
            self.why = "no GPU"
            return self
        if binary is None:
            self.why = "nvidia-cuda-mps-control not found"
            return self
        for sub in ("pipe", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(self.root / "pipe"),
               "CUDA_MPS_LOG_DIRECTORY": str(self.root / "log")}  # fmt: skip
        r = subprocess.run([binary, "-d"], env=env, capture_output=True, text=True, timeout=30)
        if r.returncode:
            self.why = f"daemon did not start: {(r.stderr or r.stdout).strip()[:200]}"
            return self
        self.env = env
        return self

    def __exit__(self, *exc) -> None:
        if self.env is not None:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", env=self.env, text=True, timeout=30)


def matmul_peak(dry_run: bool) -> tuple[float, str]:
    """The bf16 (CPU: fp32) matrix-product peak in FLOP/s: the best of a few cubes."""
    device = "cpu" if dry_run else "cuda"
    dtype = torch.float32 if dry_run else torch.bfloat16
    best, sizes = 0.0, (256, 512) if dry_run else (4096, 8192)
    for n in sizes:
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        for _ in range(3):
            _sync(torch.device(device))
            t = time.perf_counter()
            for _ in range(5):
                a @ b
            _sync(torch.device(device))
            best = max(best, 2.0 * n**3 * 5 / (time.perf_counter() - t))
    return best, f"{'fp32' if dry_run else 'bf16'} cubes {sizes}"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _line(name: str, r: dict, peak: float, base: float | None) -> str:
    mfu = 6 * r["params"] * r["tokens_per_second"] / peak
    ratio = f", {r['tokens_per_second'] / base:.2f}x the baseline" if base else ""
    mem = f", peak memory {r['peak_memory_gib']:.1f} GiB" if r.get("peak_memory_gib") else ""
    per = f" (per process {', '.join(f'{x:,.0f}' for x in r['per_process'])})" if "per_process" in r else ""
    layout = f", layout {r['packed_layout']}" if r.get("packed_layout") else ""
    how = f"packing {r.get('packing', '-')} ({r.get('packing_reason', '')}){layout}, compile {r.get('compile', '-')}"
    how += ", residual stream bf16" if r.get("residual_dtype") == "bf16" else ""
    step = f"{r.get('tokens_per_step', 0):,.0f} tokens per step, warm-up {r['warmup_seconds']:.1f} s{mem}"
    return f"{name}: {r['tokens_per_second']:,.0f} target tokens/s{per}, MFU {100 * mfu:.1f}%{ratio}; {step}; {how}"


def device_line(dry_run: bool) -> str:
    """A results table's first line: the device, torch, Python, host, commit and time."""
    device = "CPU dry run (smoke profile, fixture corpus)" if dry_run else torch.cuda.get_device_name()
    return (
        f"# {device}; torch {torch.__version__}; Python {platform.python_version()}; {platform.machine()}, "
        f"{os.cpu_count()} CPU cores; commit {_commit()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    )


def header(args) -> list[str]:
    return [device_line(args.dry_run),
            "$ python benchmarks/gpu_candidates.py " + " ".join(sys.argv[1:]),
            f"# profile {args.profile} base row, corpus {args.corpus}; {args.steps} timed steps x {args.windows} "
            f"windows after {args.warmup}"]  # fmt: skip


def best_sets(args, results: dict[str, dict]) -> list[str]:
    """``--set`` arguments of the fastest single-trial candidate measured (what bench-device should time next)."""
    # a tuned row's inductor setting is no run value: its --set arguments would time the untuned step
    singles = {n: r for n, r in results.items() if n in CANDIDATES and not CANDIDATES[n]["tuned"]}
    if not singles:
        return []
    best = max(singles, key=lambda n: singles[n]["tokens_per_second"])
    values = row_values(args, **CANDIDATES[best])
    keys = (
        "packing",
        "compile",
        "accumulate",
        "tokens_per_batch",
        "packed_attention",
        "packed_layout",
        "loss_sync",
        "loss_kernel",
        "residual_dtype",
    )
    # a bf16 stream needs bf16: say so where precision auto would not resolve to it (a CPU's dry run)
    keys += ("precision",) if values["residual_dtype"] == "bf16" and values.get("precision") == "bf16" else ()
    return [f"{k}={values[k]}" for k in keys]


def run_all(args) -> list[str]:
    started = time.monotonic()
    lines: list[str] = []
    results: dict[str, dict] = {}
    head = header(args)

    def flush() -> None:  # the table so far: a run cut short at the device's limit still brings its rows back
        if args.out:
            Path(args.out).write_text("\n".join(head + lines) + "\n")
        if args.json:
            Path(args.json).write_text(json.dumps({"peak_flops": peak, "results": results}, indent=1))
        if args.best_sets:
            Path(args.best_sets).write_text(" ".join(f"--set {s}" for s in best_sets(args, results)) + "\n")

    def left() -> float:
        return args.deadline - (time.monotonic() - started)

    def record(name: str, fn, reserve: float = 20.0) -> None:
        if not wanted(args.only, name):
            return
        if left() < reserve:
            lines.append(f"{name}: skipped (the {args.deadline:.0f} s deadline)")
            return
        try:
            results[name] = fn()
            base = results.get("padded 2x12.5k", {}).get("tokens_per_second")
            lines.append(_line(name, results[name], peak, None if name == "padded 2x12.5k" else base))
        except Exception as exc:  # a candidate that fails is a row saying so, not the end of the table
            lines.append(f"{name}: failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}")
        print(lines[-1], flush=True)
        flush()

    peak, how = matmul_peak(args.dry_run)
    lines.append(f"matrix-product peak {peak / 1e12:.3f} TFLOP/s ({how})")
    print(lines[-1], flush=True)

    def single(name: str, reserve: float = 20.0) -> None:
        record(name, lambda: candidate_rate(args, name), reserve)

    # the baseline, the step a default would be, and the anchor first: the target's ratio is one run's; then the
    # stack with a bf16 residual stream, before the sharing rows (which run the fastest graph row so far)
    single("padded 2x12.5k")
    single("packed graphs flex stack")
    from anchor_transformer import anchor_rate

    from transformer_core.data import load_corpus

    values = row_values(args, **CANDIDATES["padded 2x12.5k"])

    vocab = load_corpus(args.corpus, values["vocab"], args.data_dir).vocab_size
    sizes = dict(vocab=vocab, d_model=values["d_model"], d_ff=values["d_ff"], h=values["h"], layers=values["N"],
                 tokens=int(values["tokens_per_batch"]) * int(values["accumulate"]))  # fmt: skip
    device = "cpu" if args.dry_run else "cuda"

    def anchor_row(compiled: bool) -> dict:
        r = anchor_rate(**sizes, compiled=compiled, steps=args.steps, warmup=args.warmup, device=device,
                        bf16=not args.dry_run)  # fmt: skip
        return {**r, "warmup_seconds": 0.0}

    record("anchor compiled", lambda: anchor_row(True))
    # flex64 before the eager anchor: in the device script's anchor part (a deadline of up to 190 s) the stack and
    # the compiled anchor take about 100 s, and the eager anchor (about 10 s) only prints beside the target's ratio
    single("packed graphs flex64 stack", 45)
    record("anchor eager", lambda: anchor_row(False))
    single("packed graphs flex stack bf16", 60)  # after the anchor: the target's ratio first
    graphs = [n for n in SHARING if n in results]
    # without a graph row measured (the stack failed or was not asked for): the Flex graph step measured before
    share = args.share or max(graphs, key=lambda n: results[n]["tokens_per_second"], default="packed graphs flex end")
    with tempfile.TemporaryDirectory(prefix="gpu-cand-") as tmp:
        work = Path(tmp)
        with MPS(work / "mps") as mps:  # MPS first: it measured 1.31x one trial alone, time-slicing 1.08x
            for k in (2, 3):
                if not wanted(args.only, f"share {k} x {share}, MPS"):
                    continue
                if mps.env is None:
                    lines.append(f"share {k} x {share}, MPS: not run ({mps.why})")
                    print(lines[-1], flush=True)
                    continue
                record(f"share {k} x {share}, MPS",
                       lambda k=k: shared_rate(args, share, k, work / "mps", work, left()), 60)  # fmt: skip
        record(f"share 2 x {share}, time-sliced", lambda: shared_rate(args, share, 2, None, work, left()), 60)
    # then what each part of the stack pays alone, and the earlier candidates
    for name in LATER:
        single(name, TUNED_RESERVE if "tuned" in name else 60)
    anchor = results.get("anchor compiled", {}).get("tokens_per_second")
    singles = {n: r for n, r in results.items() if n in CANDIDATES}
    if anchor and singles:
        best = max(singles, key=lambda n: singles[n]["tokens_per_second"])
        tuned = " (inductor's coordinate-descent tuning: not yet a knob)" if "tuned" in best else ""
        lines.append(f"best single trial: {best}{tuned}, {singles[best]['tokens_per_second'] / anchor:.2f}x the "
                     "compiled anchor (target >= 1.2x)")  # fmt: skip
    shared = {n: r for n, r in results.items() if n.startswith("share")}
    if shared:
        best = max(shared, key=lambda n: shared[n]["tokens_per_second"])
        r = shared[best]
        lines.append(f"best aggregate: {best}, MFU {100 * 6 * r['params'] * r['tokens_per_second'] / peak:.1f}% "
                     "of the measured peak (target >= 35%)")  # fmt: skip
    lines.append(f"total {time.monotonic() - started:.0f} s")
    flush()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds: later candidates are skipped past it")
    ap.add_argument("--only", default=None, help="comma list: run only these rows; an item that names no candidate "
                    "(e.g. anchor, share) selects every row whose name contains it")  # fmt: skip
    ap.add_argument("--share", default=None, help="the candidate the sharing rows run (default: the fastest graph row)")
    ap.add_argument("--out", default=None, help="write the table here (with device, torch, commit, command)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--best-sets", default=None, help="write the fastest single candidate's --set arguments here")
    ap.add_argument("--dry-run", action="store_true", help="the CPU at the smoke profile on the fixture corpus")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--k", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    # the device script's `timeout` ends a run with SIGTERM: exit through the context managers (the MPS daemon is
    # told to quit, sharing processes are killed) rather than leave them behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.dry_run:
        args.profile = "smoke"
        os.environ.setdefault("TSWEEP_BIBLE_DB", str(ROOT / "tests" / "fixtures" / "bible-mini.db"))
        if args.data_dir is None:
            args.data_dir = tempfile.mkdtemp(prefix="gpu-cand-data-")
        args.steps, args.warmup, args.windows = min(args.steps, 3), min(args.warmup, 2), min(args.windows, 2)
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_candidates.py: no CUDA device is visible (run with --dry-run to check it on a CPU)")
    if args.worker:
        r = candidate_rate(args, args.worker, 1, Path(args.barrier), args.k)
        Path(args.json).write_text(json.dumps(r))
        return
    run_all(args)


if __name__ == "__main__":
    main()
