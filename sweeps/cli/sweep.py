"""`tsweep plan | run | status`: sweeps from a YAML spec."""

from __future__ import annotations

import numbers
import signal
import sys
import time
from pathlib import Path

from transformer_core.formatting import MISSING, number


def _fmt(x, spec=".2f"):
    return number(x, spec)


def cmd_plan(args) -> int:
    from analysis.data.text import printable
    from analysis.report.reach import spec_lines
    from analysis.stats.scale import confound_line, param_confounds, sized_rows
    from sweeps.plan import estimate
    from sweeps.spec.profiles import canonical_profile_name, get_profile
    from sweeps.spec.sweep_spec import load_spec, parse_budget, plan
    from transformer_core.data import default_data_dir
    from transformer_core.errors import UserError
    from transformer_core.knobs import plan_columns

    start = time.time()
    spec = _with_corpus(load_spec(args.spec), args.corpus)
    trials = plan(spec, args.profile)
    data_dir = args.data_dir or default_data_dir()
    source = estimate.resolve_throughput(args.profile, args.device_flops, args.gpu, args.mfu, data_dir)
    budget = parse_budget(args.budget, "--budget")
    if args.remeasure and budget is None:
        raise UserError("--remeasure measures this machine's step time again for a --budget plan; allowed with "
                        "--budget (e.g. --budget 60m --remeasure)")  # fmt: skip
    if budget is not None:  # this machine's measured step time of the base row (cached), unless one is given
        from sweeps.plan.budget_plan import budget_source

        source = budget_source(spec, args.profile, trials, data_dir, args.device_flops, args.gpu, args.mfu,
                               args.remeasure)  # fmt: skip
    occupied = estimate.devices_per_trial(spec.resources)  # the devices a trial holds: what device-hours bill
    print(
        f"sweep {spec.name}: {len(trials)} trials at profile {args.profile!r}"
        f" ({len(spec.rows)} rows x {len(spec.seeds)} seeds), corpus {spec.corpus.name}"
    )
    if spec.search:  # the table shows the base configuration; the search runs this many trials of it
        print(f"  a search: {search_size(spec)}")
    warning = scheduler_warning(spec)
    if warning:
        print(warning)
    labels = {r.label for r in spec.rows}
    for label, why in get_profile(args.profile).exclude.items():
        if label in labels:  # only rows this spec has
            print(f"  row {label} left out at this profile: {why}")
    configs = [t.config for t in trials]
    # the knob columns are the knob table's Table 3 columns (knobs.plan_columns()), in run units
    flat = [cfg.flat() for cfg in configs]
    columns = [(k, k.width or 1 + max([len(k.name)] + [len(k.format(f[k.name])) for f in flat]))
               for k in (*plan_columns(), *varied_knobs(flat))]  # fmt: skip
    rw = max([6] + [len(t.row) + 1 for t in trials])  # the row column: as wide as the longest label needs
    knob_head = "".join(f"{k.name:>{w}}" for k, w in columns)
    head = (
        f"{'group':<6}{'row':<{rw}}{'seed':>5}{knob_head}"
        f"{'steps':>8}{'tok/batch':>10}{'params':>9}{'FLOPs':>10}{'est. time':>11}  id"
    )
    print(head)
    total_flops, seconds, row_params = 0.0, [], dict[str, float]()
    rated: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})  # measured model -> rows: its own, nearest
    unshared: list[str] = []  # rows planned at 1/k of a GPU although a sharing factor was measured (another model)
    k = estimate.trials_per_device(spec.resources)
    for t, cfg, values in zip(trials, configs, flat):
        tr = cfg.train
        params, flops = estimate.trial_flops(cfg)
        row_params.setdefault(t.row, params)
        shown = MISSING
        if source:
            rate, model = estimate.rate_for(source, cfg, params)
            if model is not None:
                rows = rated[model.model != estimate.model_identity(cfg)].setdefault(model.label, [])
                rows.extend([t.row] if t.row not in rows else [])
            shares = estimate.sharing_holds(source, spec.resources, params)  # speed per trial: the factor, or 1/k
            devices = estimate.devices_per_trial(spec.resources, source.sharing if shares else None)
            if not shares and source.sharing.get(k) and t.row not in unshared:
                unshared.append(t.row)
            est = estimate.trial_seconds(flops, tr, rate * devices, cfg.data, data_dir)
            seconds.append(est)
            shown = estimate.duration(est)
        total_flops += flops
        print(
            f"{printable(t.group):<6}{t.row:<{rw}}{t.seed:>5}"
            f"{''.join(f'{k.format(values[k.name]):>{w}}' for k, w in columns)}"
            f"{tr.steps:>8}{tr.tokens_per_batch * tr.accumulate:>10}"
            f"{params / 1e6:>8.2f}M{flops:>10.2e}{shown:>11}  {t.trial_id}"
        )
    print(f"total {total_flops:.2e} training FLOPs (6 x params x tokens)")
    sized = sized_rows({t.row: values for t, values in zip(trials, flat)})
    confounds = confound_line(param_confounds(row_params, sized)).replace("**", "")
    if confounds:
        print(confounds)
    for line in spec_lines(spec, rows=list(dict.fromkeys(t.row for t in trials))):  # what the rule can decide
        print(line)
    if source is None:
        print(estimate.no_source_message(args.profile))
    else:
        conc = min(spec.max_concurrent, len(trials))
        rates = estimate.model_rates(source)
        on_cpu = canonical_profile_name(args.profile) in estimate.LAPTOP_PROFILES
        eval_note = "" if on_cpu else ", at this project's CPU constants: unmeasured on a GPU"
        rates = (
            f"the measured models' rates ({rates} FLOP/s) per device" if source.models else f"{rates} FLOP/s per device"
        )
        print(
            f"time at {rates}, {occupied:g} device(s) per trial: about"
            f" {estimate.duration(sum(seconds))} of trial time, {sum(seconds) * occupied / 3600:,.1f} device-hours,"
            f" {estimate.duration(estimate.makespan(seconds, conc))} wall at {conc} concurrent"
            f" (evaluation included roughly{eval_note})"
        )
        if spec.adaptive and len(spec.seeds):  # the plan costs the first seeds; undecided claims add more
            most = int(spec.adaptive["max"]) / len(spec.seeds)
            print(f"at {spec.adaptive['max']} seeds a row (adaptive seeds' most, where every claim stays undecided): "
                  f"about {estimate.duration(sum(seconds) * most)} of trial time, "
                  f"{sum(seconds) * occupied * most / 3600:,.1f} device-hours")  # fmt: skip
        print(f"throughput source: {source.source}")
        for note in (estimate.rates_note(source, *rated), estimate.unmeasured_note(source, row_params)):
            if note:
                print(note)
        why = (f"{k} of the base row's trials need more than the device's memory" if estimate.over_memory(source, k)
               else "larger models than the measured one, whose sharing nothing measured")  # fmt: skip
        note = estimate.sharing_note(spec.resources, source.sharing, None if source.params is None else unshared, why)
        if note:
            print(note)
        for note in (estimate.settings_note(source.settings, [cfg.train for cfg in configs]),
                     estimate.unknown_settings_note(source)):  # fmt: skip
            if note:
                print(note)
        note = estimate.padded_rows_note(source, {t.row: cfg for t, cfg in zip(trials, configs)})
        if note:
            print(note)
        note = estimate.memory_note(spec.resources, source, row_params, rated[0])
        if note:
            print(note)
    if budget is not None:
        from sweeps.plan.budget_plan import budget_lines

        print("\n".join(budget_lines(spec, trials, source, budget)))
    print(f"planned in {time.time() - start:.2f} s; nothing was run")
    return 0


def varied_knobs(flat: list[dict], table3: bool = False) -> list:
    """The knobs beyond Table 3's columns whose values differ between the trials (norm, activation, lr_scale, ...),
    in the knob table's order; run-only knobs and the seed aside.  ``table3``: Table 3's columns too, where they
    differ (tsweep status, which has none of its own)."""
    from transformer_core.knobs import KNOBS, plan_columns

    shown = ({k.name for k in plan_columns()} if not table3 else set()) | {"seed", "steps"}  # steps: plan's own column
    return [k for k in KNOBS if k.name not in shown and k.where not in ("run", "spec")
            and len({repr(f.get(k.name)) for f in flat}) > 1]  # fmt: skip


def scheduler_warning(spec) -> str | None:
    """The one warning line of an ablation (rows, no search) under an early-stopping scheduler (docs/search.md,
    Early stopping: it fits a search, not an ablation); None otherwise."""
    if spec.search or spec.scheduler.type == "none":
        return None
    return (f"warning: scheduler {spec.scheduler.type} stops the trials whose dev metric trails at a rung, so this "
            "ablation's rows end at unequal budgets and its verdicts compare them there; early stopping fits a "
            "search (docs/search.md#early-stopping), an ablation runs with scheduler: none")  # fmt: skip


def search_size(spec) -> str:
    """'5 samples x 2 seeds + 2 confirmed x 3 fresh seeds = 16 trials': what a search spec runs in all."""
    n, seeds = spec.search.samples, len(spec.seeds)
    text, total = f"{n:,} samples x {seeds:,} seeds", n * seeds
    confirm = spec.search.confirm
    if confirm:
        text += f" + {confirm.top:,} confirmed x {confirm.seeds:,} fresh seeds"
        total += confirm.top * confirm.seeds
    return f"{text} = {total:,} trials"


def _with_corpus(spec, corpus):
    """--corpus replaces the spec's corpus recipe (checked like the spec's own)."""
    if not corpus:
        return spec
    import yaml

    from sweeps.spec.sweep_spec import parse_spec

    doc = yaml.safe_load(Path(spec.source).read_text())
    doc["corpus"] = {**(doc.get("corpus") if isinstance(doc.get("corpus"), dict) else {}), "name": corpus}
    return parse_spec(doc, spec.source)


def cmd_run(args) -> int:
    from analysis.report.reach import spec_lines
    from sweeps.run.driverlog import DriverLog
    from sweeps.run.interrupts import INTERRUPTS
    from sweeps.run.runner import SweepInterrupted, check_address
    from sweeps.spec.profiles import scale_warning
    from sweeps.spec.sweep_spec import load_spec, plan
    from sweeps.state.diskfull import disk_full_at, no_space, no_space_message
    from sweeps.state.storage import is_uri
    from transformer_core.errors import UserError
    from transformer_core.rundir import DiskFullError

    spec = _with_corpus(load_spec(args.spec), args.corpus)
    trials = plan(spec, args.profile)  # every trial's config is checked before anything is written
    warning = scale_warning(args.profile)
    if warning:  # a test profile's verdicts mean nothing: said before anything runs
        print(warning, flush=True)
    warning = scheduler_warning(spec)
    if warning:  # early stopping in an ablation: rows at unequal budgets
        print(warning, flush=True)
    for line in spec_lines(spec, list(dict.fromkeys(t.row for t in trials)), always=False):  # a rule short of 3 sd
        print(line, flush=True)
    check_address(args.address)
    out = args.out or spec.output or str(Path("sweep_runs") / f"{spec.name}-{args.profile}")
    out = out if is_uri(out) else Path(out)
    if spec.search:  # the search's own state and its warm start, before Ray starts and anything is written
        _check_search(spec, out, args.resume, args.address, args.num_cpus)
    start = time.time()
    INTERRUPTS.activate()  # SIGINT and SIGTERM end the sweep as interrupted (exit 130 / 143)
    log = None if args.verbose else DriverLog().start()  # Ray's, Tune's and MLflow's messages: driver.log
    where = None
    try:
        try:
            summary = _drive(spec, args, out)
        except (SweepInterrupted, UserError, KeyboardInterrupt):
            raise
        except Exception:
            import traceback

            traceback.print_exc()  # into driver.log (fd 2 is the log while it runs); the terminal gets one line
            raise
        finally:
            where = _finish(log, out)
    except SweepInterrupted as exc:
        lost = f" ({exc.missing} ended without a result)" if exc.missing and not exc.signum else ""
        print(f"interrupted: {exc.finished} of {exc.total} trials finished{lost}; resume with "
              f"`{_resume_command(args, out)}`{_see(where)}", file=sys.stderr)  # fmt: skip
        return 128 + (exc.signum or signal.SIGINT)
    except KeyboardInterrupt as exc:  # a second signal before the sweep was open
        print(f"tsweep run: interrupted{_see(where)}", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    except UserError as exc:
        if isinstance(exc, DiskFullError):  # the driver's own state files: say how to go on with this sweep
            raise UserError(no_space_message(str(out), exc, _has_state(out)) + _see(where)) from None
        exc.args = (f"{exc}{_see(where)}",)
        raise
    except Exception as exc:  # a full disk anywhere (driver, MLflow, Tune's state): one line, not a traceback
        if no_space(exc) or (not is_uri(str(out)) and disk_full_at(out)):  # e.g. Tune's EOFError on an empty file
            raise UserError(no_space_message(str(out), exc, _has_state(out)) + _see(where)) from None
        from sweeps.run.tune_adapter import one_line

        resume = f"; resume with `{_resume_command(args, out)}`" if _has_state(out) else ""
        print(f"tsweep run stopped: {one_line(exc)}; the trials that ended keep their results{resume}"
              f"{_see(where) or ' (rerun with --verbose for the traceback)'}", file=sys.stderr)  # fmt: skip
        return 1
    print(f"sweep {spec.name} done in {(time.time() - start) / 60:.1f} min: {len(summary)} trials in {out}")
    _print_status(out)
    failed = {tid: e["error"] for tid, e in summary.items() if isinstance(e, dict) and e.get("error")}
    if failed:  # trials whose workers failed every retry: the sweep did not do all of its job
        first = next(iter(failed.values()))
        print(f"tsweep run: {len(failed)} trial(s) failed after their retries (first: {first}); they keep their "
              f"checkpoints, and `{_resume_command(args, out)}` trains them again", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _check_search(spec, out, resume: bool, address=None, num_cpus=None) -> None:
    """A search's state checked before anything runs: its optuna.db is its own study of the spec's space (a
    resumed sweep), and ``search.warm_start`` an earlier search it can start from (unless the study holds it)."""
    from sweeps.run.warm_start import check_source
    from sweeps.state.search_state import check_study
    from sweeps.state.sweep_state import read_state
    from transformer_core.errors import UserError

    if len(spec.seeds) > 1 and not address:  # each sample's seeds run together: the local Ray must hold them
        import os

        need, have = len(spec.seeds) * spec.resources.cpus, num_cpus or os.cpu_count() or 1
        if need > have + 1e-9:
            raise UserError(f"seeds: {len(spec.seeds)} seeds x resources.cpus {spec.resources.cpus} = {need:g} "
                            f"CPUs per sample, but the local Ray has {have:g}: give fewer seeds or cpus, or more "
                            "--num-cpus")  # fmt: skip
    warm = False
    if not isinstance(out, Path):  # a URI: the driver checks the study it pulls (search_state.plan_search)
        check_source(spec)
        return
    state = read_state(None, out, str(out)) if (out / "sweep.json").is_file() else None
    if state is not None and (not resume or state.name != spec.name):
        return  # the runner refuses it in its own words
    if state is not None:
        warm = check_study(spec, out, str(out))
    if not warm:
        check_source(spec)


def _drive(spec, args, out) -> dict:
    from sweeps.run.runner import run_sweep
    from sweeps.spec.sweep_spec import parse_budget

    kwargs = dict(address=args.address, resume=args.resume, num_cpus=args.num_cpus, verbose=args.verbose)
    if spec.adaptive:
        from sweeps.run.adaptive import run_adaptive

        return run_adaptive(spec, args.profile, out, budget=parse_budget(args.budget, "--budget"), **kwargs)
    return run_sweep(spec, args.profile, out, **kwargs)


def _finish(log, out):
    """Ray shut down while its messages still go to the driver's log, the log moved into the sweep, the
    signal handlers given back; returns the file that holds the messages (None: there were none)."""
    from sweeps.run.interrupts import INTERRUPTS
    from sweeps.state.storage import open_storage

    INTERRUPTS.closing = True
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:  # noqa: S110 - a Ray that is already gone: nothing to shut down
        pass
    try:
        if log is None:
            return None
        try:
            store = open_storage(str(out))
        except Exception:  # a location that cannot be opened: its one line must reach the terminal
            return log.stop(None)
        return log.stop(store.scratch / "driver" if store else Path(out).resolve())
    finally:
        INTERRUPTS.deactivate()


def _see(where) -> str:
    return f" (Ray, Tune and MLflow messages: {where})" if where else ""


def _has_state(out) -> bool:
    from sweeps.state.sweep_state import read_sweep_state

    try:
        read_sweep_state(out)
    except Exception:  # none, unreadable or unreachable: nothing to resume
        return False
    return True


def _resume_command(args, out) -> str:
    import shlex

    extra = f" --corpus {shlex.quote(args.corpus)}" if args.corpus else ""
    return (
        f"tsweep run {shlex.quote(args.spec)} --profile {shlex.quote(args.profile)}{extra}"
        f" --out {shlex.quote(str(out))} --resume"
    )


INTERVAL = (0.5, 86400.0)  # --interval: seconds between refreshes of --watch, half a second to a day


def cmd_status(args) -> int:
    from sweeps.state.sweep_state import read_sweep_state
    from transformer_core.errors import UserError

    lo, hi = INTERVAL
    if not (lo <= args.interval <= hi):  # NaN fails too; 0 would redraw without pause, -1 crash the sleep
        raise UserError(f"--interval {args.interval!r} is invalid: allowed a number of seconds from {lo:g} to "
                        f"{hi:g} (a day)")  # fmt: skip
    read_sweep_state(args.sweep_dir)  # a missing or unreadable sweep.json: one line
    if args.watch:
        return _watch(args.sweep_dir, args.interval)
    return _print_status(args.sweep_dir)


def _recorded(value, default, lo: float, hi: float):
    """A number sweep.json records (a count, a time) if it is a real number in [lo, hi], else ``default``: a
    damaged field ("abc", [1], NaN) is left unread, as plain status leaves it."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and lo <= value <= hi
    return value if ok else default


def _watch(sweep_dir, interval: float) -> int:
    """The driver's live view, refreshed from the sweep directory (or URI) until every trial has ended."""
    from sweeps.state.live import LiveView
    from sweeps.state.storage import local_view
    from sweeps.state.sweep_state import read_sweep_state

    state = read_sweep_state(sweep_dir)
    concurrent = _recorded(state.get("max_concurrent"), 2, 1, 10_000)
    view = LiveView(local_view(sweep_dir), int(concurrent), interval=interval,
                    refresh=lambda: local_view(sweep_dir))  # fmt: skip
    started = _recorded(state.get("created"), None, 0, 1e12)  # epoch seconds (1e12: the year 33658)
    if started:
        view.started = float(started)
    try:
        while True:
            trials = view.tick()
            if trials and all(t.status not in ("running", "pending") for t in trials):
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        for bar in view.bars:
            bar.close()
    return _print_status(sweep_dir)


def _percent(x):
    """A fraction as a percentage; None for a missing value (a trial without result.json)."""
    return None if x is None or x != x else 100 * x


def status_knobs(df) -> list[tuple]:
    """(knob, column width, each trial's value as text) of the knobs whose values differ between the sweep's trials
    (varied_knobs with Table 3's columns), from each trial's values as run (trial.json), a train or data knob it
    leaves unset read at its default."""
    import dataclasses

    from transformer_core.formatting import is_missing
    from transformer_core.run_config import DataConfig, TrainConfig

    defaults = {**dataclasses.asdict(TrainConfig()), **dataclasses.asdict(DataConfig())}
    flat = [{k: (defaults.get(k) if is_missing(v) else v) for k, v in r.items()} for r in df.to_dict("records")]
    out = []
    for k in varied_knobs(flat, table3=True):
        texts = [k.format(f.get(k.name)) for f in flat]
        out.append((k, 1 + max(len(k.name), *map(len, texts)), texts))
    return out


def _print_status(sweep_dir) -> int:
    from analysis.data.collect import collect
    from analysis.data.metrics import for_task, sweep_task
    from sweeps.state.storage import local_view

    df = collect(local_view(sweep_dir))  # analysis reads local paths: a URI is pulled to a view first
    knobs = status_knobs(df)  # the knobs the sweep's rows (or samples) vary, after the seed
    (ka, a), (kb, b) = for_task(sweep_task(df)).status  # a language-model sweep: bits per byte
    # as wide as the longest name (a search's sample-... ids and rows), so that columns never run together
    wt = max([24, *(len(str(x)) + 2 for x in df["trial_id"])])
    wg = max([6, *(len(str(x)) + 1 for x in df["group"])])
    wr = max([6, *(len(str(x)) + 1 for x in df["row"])])
    ws = max([14, *(len(str(x)) + 1 for x in df["status"])])
    print(
        f"{'trial':<{wt}}{'group':<{wg}}{'row':<{wr}}{'seed':>5}{''.join(f'{k.name:>{w}}' for k, w, _ in knobs)} "
        f" {'state':<{ws}}{'step':>11}{a:>9}{'dev PPL':>9}{b:>10}{'eval %':>7}{'peak GB':>8}{'tries':>6}  reason"
    )
    for i, (_, r) in enumerate(df.iterrows()):
        total = r["steps"]  # a number where trial.json is sound
        steps = (
            f"{r['step']}/{int(total)}"  # type: ignore[call-overload]  # typeshed does not model numbers.Real
            if isinstance(total, numbers.Real) and 0 < total < 1e18  # type: ignore[operator]  # (nor here)
            else str(r["step"])
        )
        reason = r["reason"] if isinstance(r["reason"], str) else (r["error"] or "")
        if isinstance(r.get("faults"), str):  # retried after its worker failed (killed for memory, an error)
            reason = "; ".join(x for x in (reason, f"retried after: {r['faults']}") if x)
        print(
            f"{r['trial_id']:<{wt}}{str(r['group']):<{wg}}{str(r['row']):<{wr}}{str(r['seed']):>5}"
            f"{''.join(f'{texts[i]:>{w}}' for _, w, texts in knobs)}  {r['status']:<{ws}}{steps:>11}"
            f"{_fmt(r.get(ka)):>9}{_fmt(r['dev_ppl']):>9}{_fmt(r.get(kb)):>10}"
            f"{_fmt(_percent(r['eval_fraction']), '.1f'):>7}{_fmt(r.get('peak_rss_gb')):>8}"
            f"{r['attempts']:>6}  {reason}"
        )
    print("; ".join(f"{n} {s}" for s, n in sorted(df["status"].value_counts().items())) or "no trials yet")
    return 0


def register(sub) -> None:
    from .args import (
        add_budget_argument,
        add_corpus_argument,
        add_data_dir_argument,
        add_gpu_argument,
        add_profile_argument,
        add_spec_argument,
    )

    cpu = "a sweep that runs on this machine"
    p = sub.add_parser("plan", help="the expanded trial table of a spec, without running anything")
    add_spec_argument(p)
    add_profile_argument(p, "cpu", why=cpu)
    add_corpus_argument(p, "use this corpus instead of the spec's")
    p.add_argument(
        "--device-flops",
        "--flops-per-second",
        dest="device_flops",
        type=float,
        default=None,
        help="sustained training FLOP/s of one device (one GPU), e.g. 3e14; wins over --gpu and a measurement",
    )
    add_gpu_argument(p, "the GPU assumed (wins over a measurement)")
    p.add_argument("--mfu", type=float, default=0.35, help="model FLOPs utilisation assumed with --gpu (0.35)")
    add_data_dir_argument(p)
    add_budget_argument(
        p,
        "which claims it is expected to decide on this machine, from the base row's step time measured here (a few "
        "seconds, cached in the data dir)",
    )
    p.add_argument("--remeasure", action="store_true", help="with --budget: measure the step time again (not cached)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("run", help="run a sweep with Ray Tune (local Ray by default)")
    add_spec_argument(p)
    add_profile_argument(p, "cpu", why=cpu)
    p.add_argument(
        "--out",
        default=None,
        help="sweep directory, or a URI of a pyarrow filesystem (s3://, gs://, hdfs://, "
        "file://) every node reaches (default sweep_runs/<name>-<profile>)",
    )
    add_corpus_argument(p, "use this corpus instead of the spec's")
    p.add_argument(
        "--address",
        default=None,
        help="an existing Ray cluster: HOST:PORT, ray://HOST:PORT or auto (the one `ray start` began on this "
        "machine); default: a fresh local Ray instance",
    )
    p.add_argument("--resume", action="store_true", help="resume an interrupted sweep in --out")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    add_budget_argument(p, "for adaptive seed rounds (default: the spec's budget, else none)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("status", help="each trial's state and metrics so far")
    p.add_argument("sweep_dir")
    p.add_argument("--watch", action="store_true", help="follow the sweep live until every trial has ended")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between refreshes with --watch")
    p.set_defaults(func=cmd_status)
