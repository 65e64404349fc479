"""`tsweep bench-device`: a short base-row training run on this machine's device; its FLOP/s feed `tsweep plan`.

Only optimiser steps are timed (after a few warm-up steps; no evaluation, no checkpoint), in windows of
``--steps`` steps with the device synchronised at both ends of each; the median window's rate (of an even number
of windows, the slower middle one) is the result, as model FLOPs: 6 x parameters x target tokens / seconds.  (A
compiled step can recompile for a batch shape it meets late, a minute on a GPU: that lands in one window, which
the median leaves out; a trial pays it once.)  The result is stored in the data
directory (device-bench.json, by profile), where `tsweep plan --profile P` finds it.

``--preset big`` (or model knobs in ``--set``) measures another model at the same profile and step settings; it is
stored beside the base row's, and `tsweep plan` gives that model's trials its rate and any other trial the rate of
the measured model nearest to it in parameters, where one rate for every row would take the base row's for all.
"""

from __future__ import annotations

from pathlib import Path


def cmd_bench_device(args) -> int:
    from sweeps.plan.device_bench import measure, measure_sharing
    from sweeps.plan.estimate import store_measurement, store_model_measurement
    from sweeps.spec.profiles import canonical_profile_name
    from transformer_core.data import default_data_dir
    from transformer_core.errors import ConfigError

    from .args import set_values

    if args.steps < 1 or args.warmup < 0 or args.windows < 1:
        raise ConfigError(
            f"--steps {args.steps} --warmup {args.warmup} --windows {args.windows} is invalid: allowed steps >= 1, "
            "warmup >= 0, windows >= 1"
        )
    if not 1 <= args.share <= 8:
        raise ConfigError(f"--share {args.share} is invalid: allowed 1 to 8 trials sharing the device")
    data_dir = Path(args.data_dir or default_data_dir())
    overrides = set_values(args)
    stored_as = canonical_profile_name(args.profile)  # an alias's measurement is its profile's
    label = model_label(args.profile, args.corpus, args.preset, overrides)
    if args.share > 1 and label != "base":
        raise ConfigError(
            f"--share {args.share} measures trials of the base row sharing a device, not {label}: allowed --share "
            "with the base row's model (no --preset, no model knob in --set)"
        )
    what = dict(profile=args.profile, corpus=args.corpus, steps=args.steps, warmup=args.warmup,
                data_dir=args.data_dir, overrides=overrides, windows=args.windows, preset=args.preset)  # fmt: skip
    record = measure(**what)
    record["label"] = label
    if label != "base":
        return _report_model(args, store_model_measurement(data_dir, stored_as, label, record), record)
    if args.share > 1:
        from sweeps.plan.estimate import profile_key, read_measurements

        found = read_measurements(data_dir)
        key = profile_key(found, stored_as)
        earlier = found[key] if key else {}
        # factors measured on this device with the same step (its settings and precision) stay with the new record
        same = all(earlier.get(k) == record.get(k) for k in ("device", "precision", "settings"))
        if same and isinstance(earlier.get("sharing"), dict):
            record["sharing"] = dict(earlier["sharing"])
    # the single trial is stored before k trials share the device: a run stopped while they do (a time limit on a
    # rented GPU) keeps what tsweep plan needs most
    path = store_measurement(data_dir, stored_as, record)
    print(_head_line(record, "base row", args.profile), flush=True)
    compiled = f"; compile {record['compile_seconds']:.0f} s" if record["compile_seconds"] else ""
    print(f"{_windows_line(record)}; warm-up {record['warmup_seconds']:.1f} s{compiled}")
    adam = "fused" if record.get("fused_adam", True) else "loop"
    step = record.get("settings") or {}
    shape = f"; {step['accumulate']} x {step['tokens_per_batch']:,} tokens a step" if step else ""
    print(f"kernels: compile {record.get('compile', 'off')}, loss {record.get('loss_kernel', 'plain')}, {adam} Adam, "
          f"{record['precision']}; packing {record.get('packing', 'off')}{shape}")  # fmt: skip
    print(_flops_line(record, path), flush=True)
    if args.share > 1:
        shared = measure_sharing(args.share, what, record)
        record["sharing"] = {**record.get("sharing", {}), str(args.share): shared}
        path = store_measurement(data_dir, stored_as, record)
        print(f"{args.share} trials sharing the device{' under MPS' if shared['mps'] else ''}: "
              f"{shared['tokens_per_second']:,.0f} tokens/s together (each: "
              + ", ".join(f"{x:,.0f}" for x in shared["per_trial"])
              + f"), {shared['factor']:.2f}x one trial alone; tsweep plan uses it for resources: "
              f"{{gpus: 1/{args.share}}}")  # fmt: skip
    return 0


def model_label(profile: str, corpus: str, preset: str, overrides: dict) -> str:
    """The measured model's label: the name of the preset whose model it is at ``profile`` ("base" for the base
    row's, estimate.model_identity), else ``preset`` and the model knobs that differ from it ("base+d_k=128")."""
    from sweeps.plan.estimate import model_identity
    from sweeps.spec.profiles import profile_values
    from transformer_core.config import PRESETS
    from transformer_core.run_config import make_run_config

    def identity(name: str, given: dict) -> dict:
        return model_identity(make_run_config({**profile_values(name, profile), "corpus": corpus, **given}))

    measured = identity(preset, overrides)
    same = next((name for name in PRESETS if identity(name, {}) == measured), None)
    if same:
        return same
    plain = identity(preset, {})
    return preset + "".join(f"+{k}={v}" for k, v in sorted(measured.items()) if v != plain[k])


def _report_model(args, path, record: dict) -> int:
    """bench-device's lines for a model other than the base row."""
    print(_head_line(record, f"model {record['label']}", args.profile))
    print(_windows_line(record))
    print(
        f"{_flops_line(record, path)} for trials of this model; tsweep plan uses it where the base row's measurement "
        "has the same device and step settings"
    )
    return 0


def _head_line(record: dict, what: str, profile: str) -> str:
    """A measurement's first line: the device and the rate of ``what`` (the base row, a model) at ``profile``."""
    return (
        f"{record['device']} ({record['precision']}), {what} at profile {profile!r}:"
        f" {record['params']:,} parameters, {record['seconds_per_step'] * 1000:.0f} ms per step of"
        f" {record['tokens_per_step']:,.0f} target tokens, {record['tokens_per_second']:,.0f} tokens/s"
    )


def _windows_line(record: dict) -> str:
    windows = ", ".join(f"{w:,.0f}" for w in record["windows"])
    return f"windows of {record['steps']} steps: {windows} tokens/s (the median is the result)"


def _flops_line(record: dict, path) -> str:
    mfu = f", MFU {record['mfu']:.1%} of {record['peak_flops_per_second']:.3g}" if "mfu" in record else ""
    return f"{record['flops_per_second']:.3g} FLOP/s (6 x params x tokens / s{mfu}); stored in {path}"


def register(sub) -> None:
    from transformer_core.config import PRESETS

    from .args import add_corpus_argument, add_data_dir_argument, add_profile_argument, add_set_argument

    p = sub.add_parser(
        "bench-device",
        help="measure this device's training FLOP/s on the base row (stored for tsweep plan)",
        description=__doc__,
    )
    add_profile_argument(p, "gpu", "the profile whose base row is measured", why="the device measured is a GPU")
    add_corpus_argument(p, "the corpus trained on (prepared first if it is not)", default="bible-en-de")
    p.add_argument("--steps", type=int, default=20, help="timed optimiser steps per window (default 20)")
    p.add_argument("--windows", type=int, default=3, help="timed windows; the median one's rate is stored (default 3)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    p.add_argument("--preset", default="base", choices=sorted(PRESETS),
                   help="the model measured (default base: the base row); big, or model knobs in --set, are stored "
                   "beside it for the trials of that model")  # fmt: skip
    p.add_argument("--share", type=int, default=1, metavar="K",
                   help="also measure K trials training at once on the device (K >= 2); stored as the sharing "
                   "factor tsweep plan uses for resources: {gpus: 1/K} (default 1: one trial)")  # fmt: skip
    add_data_dir_argument(p)
    add_set_argument(p)
    p.set_defaults(func=cmd_bench_device)
