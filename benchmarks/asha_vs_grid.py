"""ASHA against the full grid it is meant to shortcut: the same grid run twice through ``tsweep run``.

    python benchmarks/asha_vs_grid.py --out /tmp/asha [--spec benchmarks/specs/asha-grid.yaml --profile cpu]

The spec's grid (rows x seeds, scheduler none) runs once to the end and once under Ray Tune's ASHA, into
OUT/full and OUT/asha.  Each Tune trial is one (row, seed), so ASHA cuts seeds, not configurations: its rungs
compare single seeds.  Printed side by side, from what the two sweeps left on disk (``sweeps.load_sweep``):

* trial-steps: the sum over trials of the optimiser steps each trained (its last logged step), and the ratio;
* every configuration's seed mean of the objective in the full run, and in the ASHA run the budget it reached,
  its seeds that finished, their mean, and the mean of its seeds' readings at the last budget it reached;
* whether ASHA's best configuration (the best of those it ran to the end) is within seed noise of the full
  run's best: the verdict engine's comparison (analysis.stats.comparisons.compare, the moderated seed-noise model fitted
  to the full run's configurations), one two-sided comparison at alpha 0.05;
* Kendall's tau between the full run's order and ASHA's: on the configurations ASHA ran to the end (their
  finished seeds' means), and on all of them by their last rung (the budget reached, then the reading there);
* the target: the full run's best, within its seed noise, at <= 40% of the full run's trial-steps.

ASHA is configured from the spec's evaluation schedule: a report at each of the n evaluations plus the final
result, max_t = n + 1 so that the last evaluation is no rung (a trial is never stopped after training all of its
steps, only before its final decoding), grace period 1 and reduction factor 3 unless given.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "benchmarks" / "specs" / "asha-grid.yaml"
TARGET = 0.40  # ASHA's trial-steps as a share of the full run's
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "MLFLOW_DISABLE_TELEMETRY": "true",
       "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}  # fmt: skip


def evaluations(doc: dict, profile: str) -> tuple[int, int]:
    """(steps, evaluations) of the spec's trials at the profile; every row must share them (one rung schedule)."""
    sys.path.insert(0, str(ROOT))
    from sweeps.spec.profiles import get_profile
    from sweeps.spec.sweep_spec import parse_spec

    trials = parse_spec(doc).trials(get_profile(profile))
    shapes = {(t.values["steps"], t.values["eval_every"]) for t in trials}
    if len(shapes) != 1:
        raise SystemExit(f"every trial needs the same steps and eval_every for one rung schedule; got {sorted(shapes)}")
    steps, every = shapes.pop()
    return steps, math.ceil(steps / every)


def rungs(grace: int, factor: float, max_t: int) -> list[int]:
    """The iterations at which Tune's ASHA (one bracket) compares trials: grace x factor^k below max_t's count."""
    count = int(np.log(max_t / grace) / np.log(factor) + 1)
    return [round(grace * factor**k) for k in range(count)]


def asha_scheduler(n_evals: int, grace: int = 1, factor: float = 3) -> dict:
    max_t = n_evals + 1  # the final result is report n + 1: the last evaluation (report n) is no rung
    if n_evals in rungs(grace, factor, max_t):
        raise SystemExit(f"a rung at report {n_evals} would stop trials after their last evaluation: change "
                         "eval_every, the grace period or the reduction factor")  # fmt: skip
    return {"type": "asha", "grace_period": grace, "reduction_factor": factor, "max_t": max_t}


def run_sweep(doc: dict, name: str, out: Path, profile: str, num_cpus: int, env: dict) -> float:
    """``tsweep run`` of ``doc`` (written to OUT/NAME.yaml) into OUT/NAME; returns its wall seconds."""
    spec = out / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({**doc, "name": f"{doc['name']}-{name}"}, sort_keys=False))
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(spec), "--profile", profile, "--out", str(out / name),
           "--num-cpus", str(num_cpus)]  # fmt: skip
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, **os.environ, **env}, cwd=ROOT)
    (out / f"{name}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return time.time() - start


@dataclass
class Config:
    row: str
    knobs: dict
    full: float  # seed mean of the reading at the end of the full run
    full_seeds: list
    reached: int  # ASHA: the most steps any of its seeds trained
    finished: int  # ASHA: its seeds that ran to the end
    asha_end: float  # ASHA: mean over its finished seeds (nan if none)
    asha_last: float  # ASHA: mean of its seeds' readings at the budget ``reached``


@dataclass
class Measurement:
    metric: str
    reading: str
    higher_is_better: bool
    steps: int
    seeds: int
    scheduler: dict
    full_steps: int
    asha_steps: int
    trials: int
    configs: list = field(default_factory=list)
    full_best: str = ""
    asha_best: str = ""
    verdict: str = ""
    tau_finished: tuple = (float("nan"), float("nan"), 0)
    tau_all: tuple = (float("nan"), float("nan"), 0)
    wall: dict = field(default_factory=dict)
    stopped: int = 0

    @property
    def ratio(self) -> float:
        return self.asha_steps / self.full_steps if self.full_steps else float("nan")

    @property
    def within_noise(self) -> bool:
        return self.full_best == self.asha_best or self.verdict.startswith("within")

    @property
    def passed(self) -> bool:
        return self.within_noise and self.ratio <= TARGET


def _readings(trials, reading: str) -> dict:
    """{trial_id: {step: value}} of every evaluation, in the reading's units (dev_ce = ln dev PPL)."""
    from analysis.stats.trajectory import eval_records

    def value(e: dict):
        if reading == "dev_ce" and e.get("dev_ce") is None and e.get("dev_ppl"):
            return math.log(e["dev_ppl"])
        return e.get(reading)

    return {t["trial_id"]: {e["step"]: value(e) for e in eval_records(t["workdir"])} for _, t in trials.iterrows()}


def _tau(xs: list, ys: list) -> tuple:
    from scipy.stats import kendalltau

    if len(xs) < 2:
        return (float("nan"), float("nan"), len(xs))
    res = kendalltau(xs, ys)
    return (float(res.statistic), float(res.pvalue), len(xs))


def compare_sweeps(full_dir: Path, asha_dir: Path, metric: str, steps: int, scheduler: dict) -> Measurement:
    """The side-by-side figures of a full sweep and its ASHA twin (the module doc says what each is)."""
    from analysis.data.metrics import READINGS, reading_of_metric
    from analysis.stats.comparisons import compare, seed_values
    from analysis.stats.seed_noise import pooled_noise
    from sweeps import load_sweep
    from transformer_core.knobs import ROW_KNOBS
    from transformer_core.rundir import Status

    reading = reading_of_metric(metric)  # the verdict's reading of the spec's metric (perplexity: its log)
    assert reading is not None, metric
    sign = 1.0 if READINGS[reading].higher_is_better else -1.0
    full, asha = load_sweep(full_dir).trials, load_sweep(asha_dir).trials
    values = seed_values(full, reading)
    m = Measurement(metric, reading, sign > 0, steps, int(full["seed"].nunique()), scheduler,
                    int(full["step"].fillna(0).sum()), int(asha["step"].fillna(0).sum()), len(full),
                    stopped=int((asha["status"] == Status.STOPPED.value).sum()))  # fmt: skip
    varied = [
        k for k in ROW_KNOBS if k != "seed" and k in full and full[k].astype(str).nunique() > 1
    ]  # what the grid varies
    at = _readings(asha, reading)
    asha_values = seed_values(asha, reading)
    for row, part in full.groupby("row", sort=False):
        mine = asha[asha["row"] == row]
        reached = int(mine["step"].fillna(0).max()) if len(mine) else 0
        last = [at[t].get(reached) for t in mine["trial_id"] if at[t].get(reached) is not None]
        done = asha_values.get(row, np.array([]))
        knobs = {k: part.iloc[0][k] for k in varied}
        m.configs.append(Config(row, knobs, float(np.mean(values[row])) if len(values.get(row, [])) else float("nan"),
                                list(values.get(row, [])), reached, len(done),
                                float(np.mean(done)) if len(done) else float("nan"),
                                float(np.mean(last)) if last else float("nan")))  # fmt: skip
    ranked = [c for c in m.configs if math.isfinite(c.full)]
    m.full_best = max(ranked, key=lambda c: sign * c.full).row
    ended = [c for c in m.configs if math.isfinite(c.asha_end)]
    m.asha_best = max(ended, key=lambda c: sign * c.asha_end).row if ended else ""
    if m.asha_best and m.asha_best != m.full_best:
        c = compare(values, pooled_noise(values), m.full_best, ">", m.asha_best, reading)
        beyond = math.isfinite(c.p) and c.p < 0.05 and c.outcome.value == "agrees"
        m.verdict = ("beyond seed noise: " if beyond else "within seed noise: ") + c.detail
    elif m.asha_best:
        m.verdict = "the same configuration"
    else:
        m.verdict = "ASHA ran no configuration to the end"
    m.tau_finished = _tau([sign * c.full for c in ended], [sign * c.asha_end for c in ended])
    both = [c for c in ranked if math.isfinite(c.asha_last)]
    # ASHA's own order: the budget a configuration reached first, then its reading there
    order = sorted(both, key=lambda c: (c.reached, sign * c.asha_last))
    m.tau_all = _tau([sign * c.full for c in order], list(range(len(order))))
    return m


def measure(doc: dict, out: Path, profile: str, num_cpus: int = 2, env: dict | None = None,
            grace: int = 1, factor: float = 3) -> Measurement:  # fmt: skip
    """Run ``doc``'s grid to the end and under ASHA into OUT/full and OUT/asha, and compare them."""
    out.mkdir(parents=True, exist_ok=True)
    steps, n_evals = evaluations(doc, profile)
    scheduler = asha_scheduler(n_evals, grace, factor)
    full_doc = {**doc, "scheduler": "none"}
    asha_doc = {**doc, "scheduler": scheduler}
    wall = {"full": run_sweep(full_doc, "full", out, profile, num_cpus, env or {})}
    wall["asha"] = run_sweep(asha_doc, "asha", out, profile, num_cpus, env or {})
    m = compare_sweeps(out / "full", out / "asha", doc.get("metric", "dev_bleu"), steps, scheduler)
    m.wall = wall
    return m


def _fmt(x: float, reading: str) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{math.exp(x):.1f}" if reading == "dev_ce" else f"{x:.3f}"


def report(m: Measurement, header: str) -> str:
    unit = "dev PPL (exp of the seed mean of ln PPL)" if m.reading == "dev_ce" else m.metric
    n_evals, s = m.scheduler["max_t"] - 1, m.scheduler
    steps_at = [min(m.steps, r * -(-m.steps // n_evals)) for r in rungs(s["grace_period"], s["reduction_factor"],
                                                                          s["max_t"]) if r <= n_evals]  # fmt: skip
    at = ", ".join(str(x) for x in steps_at)
    wall = {k: f"{m.wall[k] / 60:.1f} min" if k in m.wall else "-" for k in ("full", "asha")}
    lines = [
        header,
        f"grid: {len(m.configs)} configurations x {m.seeds} seeds = {m.trials} trials of {m.steps} steps; "
        f"objective {unit}, {'higher' if m.higher_is_better else 'lower'} is better",
        f"ASHA: Ray Tune's ASHAScheduler, grace period {m.scheduler['grace_period']}, reduction factor "
        f"{m.scheduler['reduction_factor']:g}, max_t {m.scheduler['max_t']} reports (one per evaluation, the final "
        f"result last); rungs at step {at}; each trial is one seed, so rungs compare single seeds",
        f"wall: full run {wall['full']}, ASHA run {wall['asha']} (Ray start and final decoding included; one "
        "machine, nothing else heavy running)",
        "",
        f"trial-steps  full {m.full_steps:,}  ASHA {m.asha_steps:,}  ratio {m.ratio:.1%}  "
        f"({m.stopped} of {m.trials} ASHA trials stopped early)",
        "",
        f"{'configuration':<16}{'knobs':<28}{'full':>8}{'ASHA reached':>14}{'finished':>10}{'ASHA end':>10}"
        f"{'ASHA last rung':>16}",
    ]
    sign = 1 if m.higher_is_better else -1
    for c in sorted(m.configs, key=lambda c: -sign * c.full if math.isfinite(c.full) else math.inf):
        knobs = " ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in c.knobs.items())
        lines.append(f"{c.row:<16}{knobs:<28}{_fmt(c.full, m.reading):>8}{c.reached:>14}"
                     f"{f'{c.finished}/{m.seeds}':>10}{_fmt(c.asha_end, m.reading):>10}"
                     f"{_fmt(c.asha_last, m.reading):>16}")  # fmt: skip
    tf, ta = m.tau_finished, m.tau_all
    lines += [
        "",
        f"full run's best: {m.full_best}; ASHA's best (of the configurations it ran to the end): {m.asha_best or '-'}",
        f"within seed noise? {m.verdict}",
        "  (analysis.stats.comparisons.compare: the full run's seeds of both configurations, the moderated seed-noise "
        "model fitted to every configuration of the full run, one two-sided comparison at alpha 0.05)",
        f"Kendall's tau, full run vs ASHA: {tf[0]:+.2f} (p {tf[1]:.2g}) over the {tf[2]} configurations ASHA ran to "
        f"the end; {ta[0]:+.2f} (p {ta[1]:.2g}) over all {ta[2]} by their last rung (budget reached, then the "
        "reading there)",
        "",
        f"target: the full run's best (within its seed noise) at <= {TARGET:.0%} of the full run's trial-steps: "
        f"{'PASS' if m.passed else 'MISS'} (best {'found' if m.within_noise else 'missed'}, "
        f"trial-steps {m.ratio:.1%})",
    ]
    return "\n".join(lines)


def machine_line(command: str) -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    isa = "avx512_bf16" if "avx512_bf16" in flags else "avx2" if "avx2" in flags else "other"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()  # fmt: skip
    return (f"# {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, cpu flags: {isa}; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit {commit or '?'}; {command}")  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for the two sweeps (OUT/full, OUT/asha)")
    ap.add_argument("--spec", default=str(SPEC), help="a grid spec (rows x seeds); its scheduler is replaced")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--num-cpus", type=int, default=2, help="CPUs of each sweep's local Ray instance")
    ap.add_argument("--grace-period", type=int, default=1, help="ASHA's first rung, in reports")
    ap.add_argument("--reduction-factor", type=float, default=3)
    a = ap.parse_args(argv)
    doc = yaml.safe_load(Path(a.spec).read_text())
    header = machine_line("python " + shlex.join(["benchmarks/asha_vs_grid.py", *(argv or sys.argv[1:])]))
    m = measure(doc, Path(a.out), a.profile, a.num_cpus, None, a.grace_period, a.reduction_factor)
    print(report(m, header))


if __name__ == "__main__":
    main()
