"""Time estimates for a planned sweep on the device that will run it.

A trial's work is the plan's FLOPs, 6 x parameters x target tokens (tokens = steps x batch budget x 0.9, as
about a tenth of a budget is padding or left unfilled).  Its time needs a throughput, FLOP/s per device, from
one of (first found wins):

1. ``--device-flops F``: given by the user;
2. ``--gpu NAME``: a known GPU's peak dense FLOP/s (bf16, or fp32 where it has no bf16) x an MFU;
3. a measurement by ``tsweep bench-device`` on the device itself, stored as JSON in the data directory
   (``device-bench.json``; a shared data directory carries it from a GPU node to the planner).  Besides the
   profile's base row it can hold other models measured at the same step settings on the same device
   (``bench-device --preset big`` or model knobs in ``--set``): a trial of a measured model takes that model's
   rate, any other trial the rate of the measured model nearest to it in parameters (``rate_for``);
4. for the CPU profiles (cpu, cpu-large-batch, smoke) only, this project's own measurement on a 2-core
   laptop (3e10 FLOP/s, one thread per trial).

A GPU profile with none of 1-3 gets no time estimate, never the laptop's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from transformer_core import rundir
from transformer_core.errors import ConfigError, UserError

if TYPE_CHECKING:
    from sweeps.spec.sweep_spec import Resources

BENCH_FILE = "device-bench.json"
# the attention a packed step runs on CUDA, as a bench-device record names it (segments.packed_support's backends)
PACKED_BACKENDS = ("varlen", "flex", "flex64")
DEFAULT_MFU = 0.35  # of peak dense bf16: what well-tuned Transformer training of this size commonly sustains
LAPTOP_FLOPS = 3.0e10  # measured: one thread of the 2-core laptop this project is built on (cpu profile)
LAPTOP_PROFILES = ("cpu", "cpu-large-batch", "smoke")  # one thread per trial, as measured
FILL = 0.9  # fraction of a batch's token budget that is real tokens

# Peak dense (no sparsity) FLOP/s from the vendors' datasheets: (name, bf16, fp32).  bf16 None: no bf16,
# training runs in fp32 (precision auto).
KNOWN_DEVICES = {
    "h100": ("NVIDIA H100 SXM", 989e12, 67e12),
    "h100-pcie": ("NVIDIA H100 PCIe", 756e12, 51e12),
    "h200": ("NVIDIA H200 SXM", 989e12, 67e12),
    "b200": ("NVIDIA B200", 2250e12, 80e12),
    "a100": ("NVIDIA A100", 312e12, 19.5e12),
    "l40s": ("NVIDIA L40S", 362e12, 91.6e12),
    "l4": ("NVIDIA L4", 121e12, 30.3e12),
    "v100": ("NVIDIA V100 SXM2", None, 15.7e12),
    "p100": ("NVIDIA P100 SXM2 (the paper's GPU)", None, 10.6e12),
    "mi300x": ("AMD Instinct MI300X", 1307e12, 163.4e12),
}


@dataclass(frozen=True)
class Throughput:
    flops_per_second: float  # per device (one GPU; one CPU trial)
    source: str  # where the figure comes from, in words
    # k -> what k trials sharing one device train together over what one trains alone (tsweep bench-device --share k)
    sharing: dict[int, float] = field(default_factory=dict)
    # the step's settings the figure was measured at (STEP_SETTINGS; empty where the source has none)
    settings: dict[str, object] = field(default_factory=dict)
    # the measured trial's peak GPU memory (GiB) and its parameters, where the source measured them
    peak_gb: Optional[float] = None
    params: Optional[float] = None
    # the models measured at these step settings on this device, the base row's first (empty: one rate for all)
    models: tuple[ModelRate, ...] = ()
    # the other models' measurements left out of ``models``, each as its label and why
    left_out: tuple[str, ...] = ()
    device_gb: Optional[float] = None  # the measured device's memory (GiB), where the source has it
    packing: Optional[str] = None  # the measured trial's packed attention (PACKED_BACKENDS), None where it was not
    precision: str = "bf16"  # the measured trial's precision, as resolved on its device
    # a bench-device record that keeps no step settings (stored before records kept them): unknown, not matched
    settings_unknown: bool = False


@dataclass(frozen=True)
class ModelRate:
    """One model's measured training rate (a bench-device record)."""

    label: str  # the preset, and the model knobs given with --set ("base", "big", "big+d_k=128")
    model: dict  # model_identity of what it trained ({} for a record from before it was kept)
    params: float
    flops_per_second: float
    peak_gb: Optional[float] = None  # its trial's peak GPU memory alone, where measured


def model_identity(cfg) -> dict:
    """What sets a trial's rate at given step settings beyond its size: the model knobs, the vocabulary and the
    task (a RunConfig's)."""
    return {**dataclasses.asdict(cfg.model), "vocab": cfg.data.vocab, "task": cfg.data.task}


def rate_for(source: Throughput, cfg, params: float) -> tuple[float, Optional[ModelRate]]:
    """(FLOP/s per device, the measurement it comes from) of a trial of RunConfig ``cfg`` with ``params``
    parameters: the measured model it is, else the measured model nearest to it in parameters (on a log scale:
    a 164M model is nearer 214M than 63M), else (nothing but one rate measured) the source's one rate, None."""
    if not source.models:
        return source.flops_per_second, None
    ident = model_identity(cfg)
    same = next((m for m in source.models if m.model == ident), None)
    near = same or min(source.models, key=lambda m: abs(math.log(max(params, 1.0) / m.params)))
    return near.flops_per_second, near


def model_rates(source: Throughput) -> str:
    """The measured models' rates in words ("base 1.8e+14, big 3e+14"), or the one rate where no model was."""
    return ", ".join(f"{m.label} {m.flops_per_second:.3g}" for m in source.models) or f"{source.flops_per_second:.3g}"


def unmeasured_note(source: Throughput, row_params: dict[str, float]) -> Optional[str]:
    """Where one base-row measurement rates every row and some rows are more than twice its size: that they are
    planned at the base row's rate, and how to measure their own (None otherwise)."""
    if source.models or not source.params:
        return None
    larger = [f"{row} ({n / 1e6:.0f}M)" for row, n in row_params.items() if n > 2 * source.params]
    smaller = [f"{row} ({n / 1e6:.0f}M)" for row, n in row_params.items() if n < 0.5 * source.params]
    if not larger and not smaller:
        return None
    rows = ", ".join(larger + smaller)
    less = (f" (a smaller model keeps a GPU busy with fewer FLOPs a token: the trials of {', '.join(smaller)} "
            "likely take longer than planned)") if smaller else ""  # fmt: skip
    return (
        f"rows {rows} are planned at the base row's measured rate ({source.params / 1e6:.0f}M parameters){less}:"
        " tsweep bench-device --preset big (or their model knobs in --set) measures their own"
    )


def rates_note(source: Throughput, used: dict[str, list[str]], nearest: dict[str, list[str]]) -> Optional[str]:
    """The line `tsweep plan` prints where more than one model was measured: each measured model's rate and the
    rows planned at it (``used``: label -> rows that are that model; ``nearest``: label -> rows of other models
    that take it as the measured model nearest in parameters)."""
    skipped = f"model measurements left out: {'; '.join(source.left_out)}" if source.left_out else None
    if not source.models:
        return skipped
    parts = []
    for m in source.models:
        rows = ", ".join(used.get(m.label, [])) or "none of this spec's"
        near = nearest.get(m.label)
        also = f"; nearest in parameters for {', '.join(near)}" if near else ""
        parts.append(f"{m.label} ({m.params / 1e6:.1f}M parameters) {m.flops_per_second:.3g} FLOP/s: rows {rows}{also}")
    line = "rates by model (tsweep bench-device --preset/--set): " + "; ".join(parts)
    return f"{line}\n{skipped}" if skipped else line


# The run-only settings that set how fast a step is (not what it learns about a row): a measured rate holds for
# trials that train with these values.
STEP_SETTINGS = ("tokens_per_batch", "accumulate", "compile", "packing", "packed_attention", "packed_layout",
                 "loss_kernel", "loss_sync", "fused_adam", "fast_dropout", "precision", "residual_dtype")  # fmt: skip


def step_settings(train) -> dict[str, object]:
    """{name: value} of a TrainConfig's STEP_SETTINGS."""
    return {name: getattr(train, name) for name in STEP_SETTINGS}


def settings_note(measured: dict, trains: list) -> Optional[str]:
    """The line `tsweep plan` prints where the spec's trials train with other step settings than the throughput
    was measured at (their speed is then not that figure); None where they match or nothing was recorded."""
    if not isinstance(measured, dict):
        return None
    plain = (bool, int, float, str)  # a hand-edited record's other values are not compared
    measured = {n: v for n, v in measured.items() if isinstance(v, plain) and str(v).isprintable() and len(str(v)) < 40}
    differ: dict[str, set] = {}
    for train in trains:
        for name, value in step_settings(train).items():
            if name in measured and measured[name] != value:
                differ.setdefault(name, set()).add(value)
    if not differ:
        return None

    def shown(v) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    theirs = ", ".join(f"{n} {'/'.join(sorted(map(shown, v)))}" for n, v in differ.items())
    ours = ", ".join(f"{n} {shown(measured[n])}" for n in differ)
    yaml_map = ", ".join(f"{n}: {shown(measured[n])}" for n in differ)
    return (
        f"the throughput was measured with {ours}; this spec's trials train with {theirs}, so their speed is "
        f"not the measured one: put {{{yaml_map}}} in the spec's train: or measure its own settings with "
        "tsweep bench-device"
    )


SHARING_SLACK = 1.5  # a factor up to this times k is measurement noise around k (used as k); beyond, an error


def unknown_settings_note(source: "Throughput") -> Optional[str]:
    """The line `tsweep plan` prints where the measurement keeps no step settings: whether the trials train at its
    speed cannot be checked (None where it keeps them or the source is not a bench-device record)."""
    if not source.settings_unknown:
        return None
    return (
        "the measurement keeps no step settings (stored before bench-device recorded them; of them only "
        f"{', '.join(OLD_RECORD_SETTINGS)} are compared): whether this spec's trials train at its speed is not known; "
        "run tsweep bench-device again with the spec's own train settings"
    )


def sharing_holds(source: "Throughput", resources: Resources, params: float) -> bool:
    """Whether the measured sharing factor holds for a trial of ``params`` parameters.  k trials gain from
    sharing a GPU the time each leaves it idle; bench-device --share measures the base row's model, and a model
    no larger leaves the GPU at least as idle and needs no more memory, so its trials share at the factor; a
    larger one's (busier, bigger) are planned at 1/k of a GPU, as are all where k of the measured trial exceed
    the device's memory.  Where the record has no parameter count, every trial takes it."""
    k = trials_per_device(resources)
    if k == 1 or k not in source.sharing or over_memory(source, k):
        return False
    return source.params is None or params <= 1.05 * source.params


def over_memory(source: "Throughput", k: int) -> bool:
    """Whether k of the measured trial need more than the measured device's memory (False where either is not
    known)."""
    return bool(source.peak_gb and source.device_gb and k * source.peak_gb > source.device_gb)


def measured_sharing(record: dict) -> dict[int, float]:
    """{k: sharing factor} of a bench-device record's ``sharing`` entries (none where the record has none).  k
    trials cannot train more than k times one alone: a factor up to SHARING_SLACK x k is the noise of two separate
    timings and is used as k; an entry that is not a count of 2 to 64 trials with a factor in (0, 1.5 k] is a
    ValueError naming it (the caller names the file)."""
    found = record.get("sharing") if isinstance(record, dict) else None
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise ValueError(f"sharing is {type(found).__name__}; allowed a mapping of k to {{'factor': number}}")
    out = {}
    for k, entry in found.items():
        n = int(k) if isinstance(k, str) and k.isdigit() and len(k) < 4 else 0
        if not 2 <= n <= 64:
            raise ValueError(f"sharing[{k!r}] is not a count of trials; allowed 2 to 64")
        factor = entry.get("factor") if isinstance(entry, dict) else None
        value = finite_positive(factor) if isinstance(factor, (int, float)) else None
        if value is None or value > SHARING_SLACK * n:
            raise ValueError(f"sharing[{k!r}].factor is {factor!r}; allowed a number above 0 and at most "
                             f"{SHARING_SLACK * n:g} ({n} trials train at most {n} times one alone)")  # fmt: skip
        out[n] = min(value, float(n))
    return out


def device_peak(name: str, precision: str = "bf16") -> tuple[str, float, str]:
    """(full name, peak FLOP/s, precision used) of a known device."""
    key = name.lower()
    if key not in KNOWN_DEVICES:
        raise ConfigError(f"--gpu {name!r} is unknown: allowed {', '.join(KNOWN_DEVICES)} (or give --device-flops)")
    full, bf16, fp32 = KNOWN_DEVICES[key]
    if precision == "bf16" and bf16 is not None:
        return full, bf16, "bf16"
    return full, fp32, "fp32"


def match_device(torch_name: str) -> Optional[str]:
    """The KNOWN_DEVICES key of a device name as torch reports it ('NVIDIA H100 80GB HBM3' -> 'h100')."""
    name = torch_name.lower()
    for key in sorted(KNOWN_DEVICES, key=len, reverse=True):  # the longest first: h100-pcie before h100
        if all(part in name for part in key.split("-")):
            return key
    return None


# --- stored measurements -------------------------------------------------------------
def bench_path(data_dir) -> Path:
    return Path(data_dir) / BENCH_FILE


def read_measurements(data_dir) -> dict[str, dict]:
    """Measurements by profile; an unreadable file is an error naming it (it would silently change plans)."""
    path = bench_path(data_dir)
    if not path.exists():
        return {}
    try:
        body = rundir.loads(path.read_text())
        return _checked(body["measurements"], "measurements", ("flops_per_second",))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a device measurement file ({exc}): delete it or run tsweep bench-device")


# What a stored measurement's numbers may be: FLOP/s from a slow CPU thread to beyond any accelerator, a time of
# measurement in seconds since 1970, a step's seconds and a trial's target tokens per second above zero
_LIMITS = {
    "flops_per_second": (1e3, 1e19),
    "measured_at": (0.0, 1e11),
    "seconds_per_step": (1e-9, 1e6),
    "tokens_per_second": (1e-6, 1e15),
}


def _checked(records, section: str, required: tuple[str, ...]) -> dict[str, dict]:
    """``records`` (one section of the file) with each record's numbers checked: a ValueError naming the record,
    the name, its value and what is allowed (the caller names the file)."""
    if not isinstance(records, dict):
        raise ValueError(f"{section} is {type(records).__name__}; allowed a mapping of records")
    for key, record in records.items():
        if not isinstance(record, dict):
            raise ValueError(f"{section}[{key!r}] is {type(record).__name__}; allowed a mapping")
        for name, (lo, hi) in _LIMITS.items():
            if name not in record and name not in required:
                continue
            value = record.get(name)
            if name not in record or isinstance(value, bool) or not isinstance(value, (int, float)):
                found = "missing" if name not in record else f"{value!r}"
                raise ValueError(f"{section}[{key!r}].{name} is {found}; allowed a number from {lo:g} to {hi:g}")
            if not lo <= value <= hi:  # nan and inf fail too
                raise ValueError(f"{section}[{key!r}].{name} is {value!r}; allowed a number from {lo:g} to {hi:g}")
        try:
            measured_sharing(record)
        except ValueError as exc:
            raise ValueError(f"{section}[{key!r}].{exc}") from None
    return records


def store_measurement(data_dir, profile: str, record: dict) -> Path:
    """Add (or replace) the measurement of ``profile`` (and drop one stored under another name of it, an alias);
    written atomically."""
    from sweeps.spec.profiles import same_profile

    return _store(data_dir, "measurements", profile, record, lambda key, _: same_profile(key, profile))


def _store(data_dir, section: str, key: str, record: dict, replaces=lambda key, record: False) -> Path:
    """Add (or replace) ``record`` under ``key`` in ``section`` of the file, and drop the section's records that
    it ``replaces``, the other sections kept; written atomically (a file without model measurements keeps no empty
    section for them)."""
    path = bench_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        MACHINES: read_machine_measurements(data_dir),
        "measurements": read_measurements(data_dir),
        MODELS: read_model_measurements(data_dir),
    }
    kept = {k: r for k, r in body[section].items() if not replaces(k, r)}
    body[section] = {**kept, key: record}
    if not body[MODELS]:
        del body[MODELS]
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


# bench-device measurements of models other than a profile's base row (--preset, model knobs in --set), keyed
# "profile/label", beside the profiles' own in the same file
MODELS = "models"


def read_model_measurements(data_dir) -> dict[str, dict]:
    """{"profile/label": measurement}; an unreadable file is an error naming it, as for read_measurements."""
    return _section(data_dir, MODELS, ("flops_per_second",))


def store_model_measurement(data_dir, profile: str, label: str, record: dict) -> Path:
    """Add (or replace) the measurement of model ``label`` at ``profile``, and drop any other record of the same
    model at ``profile`` (stored under another label); written atomically."""
    from sweeps.spec.profiles import same_profile

    def same_model(key: str, other: dict) -> bool:
        return same_profile(_profile_of(key), profile) and other.get("model") == record.get("model")

    return _store(data_dir, MODELS, f"{profile}/{label}", record, same_model)


# Step times measured by `tsweep plan --budget` (sweeps/plan/machine_bench.py), keyed by what decides them on this
# machine (profile, CPU flags and instruction set, torch, precision, threads, trials side by side), beside the
# bench-device measurements in the same file
MACHINES = "machines"


def read_machine_measurements(data_dir) -> dict[str, dict]:
    """{machine key: measurement}; an unreadable file is an error naming it, as for read_measurements."""
    return _section(data_dir, MACHINES, tuple(_LIMITS))


def _section(data_dir, section: str, required: tuple[str, ...]) -> dict[str, dict]:
    path = bench_path(data_dir)
    if not path.exists():
        return {}
    try:
        found = rundir.loads(path.read_text()).get(section, {})
        return _checked(found, section, required)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a device measurement file ({exc}): delete it or run tsweep bench-device")


def store_machine_measurement(data_dir, key: str, record: dict) -> Path:
    """Add (or replace) the measurement under ``key``; the profile measurements are kept; written atomically."""
    return _store(data_dir, MACHINES, key, record)


# --- which throughput ------------------------------------------------------------------
def resolve_throughput(
    profile: str,
    device_flops: Optional[float] = None,
    device: Optional[str] = None,
    mfu: float = DEFAULT_MFU,
    data_dir=None,
) -> Optional[Throughput]:
    if device_flops is not None:
        if not (device_flops > 0 and math.isfinite(device_flops)):
            raise ConfigError(f"--device-flops {device_flops!r} is invalid: allowed a number above 0, e.g. 3e14")
        return Throughput(device_flops, "given with --device-flops")
    if not (0 < mfu <= 1):
        raise ConfigError(f"--mfu {mfu!r} is invalid: allowed a fraction in (0, 1], e.g. 0.35")
    if device:
        full, peak, precision = device_peak(device)
        return Throughput(peak * mfu, f"{full} peak dense {precision} {peak:.3g} FLOP/s x assumed MFU {mfu:g}")
    if data_dir is not None:
        found = read_measurements(data_dir)
        if found:
            key = profile_key(found, profile)
            same = key is not None
            m = found[key] if key else max(found.values(), key=lambda r: r.get("measured_at", 0))
            where = "" if same else f" at profile {m.get('profile')!r} (none stored for {profile!r})"
            when = time.strftime("%Y-%m-%d", time.localtime(m.get("measured_at", 0)))
            settings = m.get("settings")
            return Throughput(
                float(m["flops_per_second"]),
                f"measured by tsweep bench-device on {m.get('device', '?')} {m.get('precision', '')}{where}, {when}"
                f" ({bench_path(data_dir)})",
                measured_sharing(m),
                settings if isinstance(settings, dict) else _old_settings(m),
                finite_positive(m.get("peak_cuda_gb")),
                finite_positive(m.get("params")),
                *(measured_models(m, read_model_measurements(data_dir), key) if key else ((), ())),
                device_gb=finite_positive(m.get("device_memory_gb")),
                packing=m.get("packing") if m.get("packing") in PACKED_BACKENDS else None,
                precision="fp32" if m.get("precision") == "fp32" else "bf16",
                settings_unknown=not isinstance(settings, dict),
            )
    from sweeps.spec.profiles import canonical_profile_name

    if canonical_profile_name(profile) in LAPTOP_PROFILES:
        return Throughput(LAPTOP_FLOPS, "this project's measurement on a 2-core laptop, one thread per trial")
    return None


# what a record stored before records kept their step settings says of them at its top level, in knob values
OLD_RECORD_SETTINGS = ("compile", "fused_adam")  # (its loss_kernel is the one that ran: plain when compiled)


def _old_settings(record: dict) -> dict[str, object]:
    """The step settings a record without ``settings`` still gives (OLD_RECORD_SETTINGS), for settings_note."""
    return {n: record[n] for n in OLD_RECORD_SETTINGS if isinstance(record.get(n), (bool, str))}


def profile_key(found: dict, profile: str) -> Optional[str]:
    """The key of ``found`` (a file section's records by profile) holding ``profile``'s record: its own name's or
    an alias's (a record stored before bench-device stored aliases under their profile's name), the newest."""
    from sweeps.spec.profiles import same_profile

    mine = [k for k in found if same_profile(k, profile)]
    return max(mine, key=lambda k: found[k].get("measured_at", 0)) if mine else None


def _profile_of(key: str) -> str:
    """The profile part of a models section key ("gpu/big" -> "gpu")."""
    return key.split("/", 1)[0]


def measured_models(
    base: dict, records: dict[str, dict], profile: str
) -> tuple[tuple[ModelRate, ...], tuple[str, ...]]:
    """(the base record and the other models' records of ``profile`` measured like it, the same device, precision,
    corpus and step settings, as ModelRates, the base first, the newest of any one model kept; the labels of those
    left out and why).  No ModelRates where none besides the base qualifies."""
    params = finite_positive(base.get("params"))
    if params is None:
        return (), ()
    from sweeps.spec.profiles import same_profile

    model = base.get("model") if isinstance(base.get("model"), dict) else _base_identity(profile, base.get("corpus"))
    keys = ("device", "precision", "settings", "corpus")  # what sets a rate beside the model
    newest: dict[str, tuple[float, ModelRate]] = {}
    left_out = []
    for key, r in sorted(records.items()):
        if "/" not in key or not same_profile(_profile_of(key), profile):
            continue
        label = str(r.get("label") or key.split("/", 1)[-1])
        differ = [k.replace("settings", "step settings") for k in keys if r.get(k) != base.get(k)]
        if not (isinstance(r.get("settings"), dict) and isinstance(base.get("settings"), dict)):
            differ = [d for d in differ if d != "step settings"] + ["no recorded step settings"]
        p = finite_positive(r.get("params"))
        why = (
            f"other {' and '.join(differ)} than the base row's measurement" if differ
            else "no model or parameters recorded" if not isinstance(r.get("model"), dict) or p is None
            else "the base row's own model" if r["model"] == model else None
        )  # fmt: skip
        if why or p is None:
            left_out.append(f"{label} ({why})")
            continue
        rate = ModelRate(label, r["model"], p, float(r["flops_per_second"]), finite_positive(r.get("peak_cuda_gb")))
        ident = json.dumps(r["model"], sort_keys=True)
        when = float(r.get("measured_at", 0))
        if ident not in newest or when >= newest[ident][0]:
            newest[ident] = (when, rate)
    if not newest:
        return (), tuple(left_out)
    peak = finite_positive(base.get("peak_cuda_gb"))
    first = ModelRate("base", model or {}, params, float(base["flops_per_second"]), peak)
    return (first, *(rate for _, rate in newest.values())), tuple(left_out)


def _base_identity(profile: str, corpus) -> Optional[dict]:
    """model_identity of ``profile``'s base row (for a record stored before records kept their model), None where
    the profile or corpus is not known here."""
    from sweeps.spec.profiles import profile_values
    from transformer_core.run_config import make_run_config

    try:
        values = {**profile_values("base", profile), **({"corpus": corpus} if isinstance(corpus, str) else {})}
        return model_identity(make_run_config(values))
    except (UserError, ValueError, TypeError):
        return None


def finite_positive(x) -> Optional[float]:
    """x as a float where it is a finite number above 0 (a record's field), else None."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return None
    try:  # a JSON integer of hundreds of digits is an int no float holds
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) and 0 < value < 1e12 else None


def no_source_message(profile: str) -> str:
    return (
        f"no time estimate: profile {profile!r} is meant for GPUs and no throughput was given. Run"
        f" `tsweep bench-device --profile {profile}` on the GPU, or pass --device-flops F or --gpu NAME"
        f" ({', '.join(KNOWN_DEVICES)}; MFU {DEFAULT_MFU} unless --mfu)"
    )


# --- arithmetic of a plan -----------------------------------------------------------------
def trial_flops(cfg) -> tuple[int, float]:
    """(parameters, training FLOPs) of a RunConfig: 6 x params x target tokens."""
    tr = cfg.train
    from transformer_core.params import closed_form_parameters_for

    params = closed_form_parameters_for(cfg.model, cfg.data.vocab, cfg.data.task)
    tokens = tr.steps * tr.tokens_per_batch * tr.accumulate * FILL
    return params, 6.0 * params * tokens


def trials_per_device(resources: Resources) -> int:
    """How many trials share one GPU: as many as Ray places on it, the whole number of ``gpus`` that fit in one
    (1/k: k; 0.34: 2, since three would ask for 1.02 GPUs), else 1.  A data-parallel trial (workers > 1) gives each
    of its workers a whole GPU (sweeps/run/tune_adapter.py), whatever fraction ``gpus`` says: 1."""
    gpus = float(resources.gpus or 0)
    if int(resources.workers or 1) > 1:
        return 1
    return max(1, math.floor(1.0 / gpus + 1e-9)) if 0 < gpus < 1 else 1


def devices_per_trial(resources: Resources, sharing: Optional[dict[int, float]] = None) -> float:
    """Devices' worth of speed one trial computes at: its workers, each with a whole GPU or a share of one.  A
    trial sharing a GPU with k - 1 others runs at the measured sharing factor over k (``sharing``: {k: what k
    trials train together over one alone}), or at 1/k of the GPU where no factor for k was measured."""
    k = trials_per_device(resources)
    share = 1.0 / k  # a GPU's k trials each hold 1/k of it, whatever fraction under 1/(k - 1) each asks for
    factor = (sharing or {}).get(k) if k > 1 else None
    return max(1, int(resources.workers or 1)) * share * (factor or 1.0)


def sharing_note(resources: Resources, sharing: Optional[dict[int, float]], others: Optional[list[str]] = None,
                 why: str = "larger models than the measured one") -> Optional[str]:  # fmt: skip
    """The line `tsweep plan` prints about trials sharing a GPU, or None where each trial has its own.  ``others``:
    the rows planned at 1/k of a GPU although a factor was measured (``why``); None: every trial took it."""
    k = trials_per_device(resources)
    if k == 1:
        return None
    factor = (sharing or {}).get(k)
    if factor:
        rest = (f"; rows {', '.join(others)} ({why}) at 1/{k} of a GPU each" if others
                else "" if others is not None else "; every model's trials planned at it")  # fmt: skip
        return (f"{k} trials share each GPU: together {factor:.2f}x one trial alone (measured by tsweep bench-device "
                f"--share {k} on the base row), so each of its trials at {factor / k:.2f} of a GPU{rest}")  # fmt: skip
    return (f"{k} trials share each GPU, each planned at 1/{k} of one: no sharing measured for {k} (tsweep "
            f"bench-device --share {k} on the GPU measures it)")  # fmt: skip


def padded_rows_note(source: Throughput, rows: dict) -> Optional[str]:
    """Where the measured trial packed its batches on a GPU (``source.packing``: varlen, flex or flex64), the rows whose
    models train padded batches there instead (``rows``: {row: RunConfig}), whose rate the measurement is not; None
    where every row packs or the measured trial did not."""
    if source.packing not in PACKED_BACKENDS:
        return None
    from transformer_core.segments import cuda_model_limit, packing_limit

    found: dict[str, list[str]] = {}
    for row, cfg in rows.items():
        why = packing_limit(cfg.model, cfg.data.task) or cuda_model_limit(cfg.model, source.packing, source.precision)
        if why:
            found.setdefault(why, []).append(row)
    if not found:
        return None
    named = "; ".join(f"{', '.join(r)} ({why})" for why, r in found.items())
    return (
        f"the measured trial packed its batches ({source.packing} attention, {source.precision}); rows {named} train "
        "padded batches on a GPU: the measured packed rate is not theirs (measure one with tsweep bench-device and "
        "its model knobs in --set)"
    )


def memory_note(
    resources: Resources, source: Optional[Throughput], row_params: dict[str, float], own: Optional[dict] = None
) -> Optional[str]:
    """Where k trials share a GPU and the measurement has the base row's peak memory: what k of it need, what k of
    each other measured model need (``own``: {model label: the rows that are that model}), and the rows larger than
    the base row that are no measured model, whose memory nothing here measured (``row_params``: {row:
    parameters})."""
    k = trials_per_device(resources)
    if k == 1 or source is None or source.peak_gb is None:
        return None
    own = own or {}
    others = [(m, m.peak_gb) for m in source.models[1:] if m.peak_gb is not None and own.get(m.label)]
    measured = {row for m, _ in others for row in own[m.label]}
    big = 1.05 * (source.params or math.inf)
    larger = [row for row, n in row_params.items() if n > big and row not in measured]
    models = "".join(f"; {m.label} (rows {', '.join(own[m.label])}) {gb:.1f} GiB alone, {k} of it about "
                     f"{k * gb:.1f} GiB" for m, gb in others)  # fmt: skip
    more = (f"; rows with more parameters ({', '.join(larger)}) need more and were not measured: size k by the "
            "largest row's peak_cuda_gb (in its result.json)") if larger else ""  # fmt: skip
    device = source.device_gb or math.inf
    over = [(label, gb) for label, gb in [("the base row", source.peak_gb), *((m.label, gb) for m, gb in others)]
            if k * gb > device]  # fmt: skip
    fits = "".join(f"; more than the device's {device:.1f} GiB for {label}: {int(device // gb)} of its trials fit "
                   "at most" for label, gb in over)  # fmt: skip
    return (
        f"memory: the measured trial peaked at {source.peak_gb:.1f} GiB of GPU memory alone, {k} of it about "
        f"{k * source.peak_gb:.1f} GiB{models}{fits}{more}"
    )


# --- evaluation -----------------------------------------------------------------------------------------
# What a translation trial evaluates (transformer_core/translation_task.py): at every evaluation (every
# eval_every steps, and the last step) the whole dev split's perplexity and a checkpoint; beam search on the first
# eval_sentences dev sentences (0: all) at the evaluations before the last where eval_bleu is "all"; the whole dev
# split at the last; the whole test split and its perplexity at the final evaluation.  None of it grows with the
# steps, so it is costed per sentence, not as a share of training: at the smoke profile decoding dev and test
# (1,108 bible sentences) is most of a trial.  The constants are this project's measurements on its 2-core
# machine, one thread (benchmarks/results/eval_estimate_cpu.txt); on a GPU they are not measured.
SENTENCE_SECONDS = 0.0065  # a decoded sentence's search overhead, whatever the model (smoke: 6.6 ms, 62 steps)
DECODE_FLOPS_PER_PARAM = 30.0  # and each beam hypothesis's arithmetic: ~2 FLOPs a parameter a decoded token
SCORE_FLOPS_PER_PARAM = 120.0  # perplexity of one sentence pair: a forward pass over ~60 source and target tokens
EVALUATION_SECONDS = 1.0  # each evaluation's fixed part: the dev perplexity's batches and a checkpoint
# where a corpus is neither prepared in the data directory nor in transformer_core/data/split_sizes.py
FALLBACK_SPLIT_SIZES = {"dev": 1000, "test": 1000}
_META_CACHE: dict[tuple[str, int], dict[str, int]] = {}


def split_sizes(data=None, data_dir=None) -> tuple[dict[str, int], str]:
    """({"dev": n, "test": n}, where the sizes come from) of a run's corpus (``data``: its DataConfig; None: the
    default corpus).  First found wins: the prepared copy's meta.json in ``data_dir`` (the run's own data_dir,
    else the default data directory); the known recipes' table (transformer_core/data/split_sizes.py);
    FALLBACK_SPLIT_SIZES.  Never prepares anything."""
    from transformer_core.data.split_sizes import known_split_sizes
    from transformer_core.run_config import DataConfig

    data = data if data is not None else DataConfig()
    name, direction = data.corpus, data.direction
    try:
        from transformer_core.data.prepare import corpus_key, default_data_dir, parse_corpus_name

        recipe, options = parse_corpus_name(name)
        where = Path(data.data_dir or data_dir or default_data_dir()) / corpus_key(recipe, direction, options)
        meta = where / "meta.json"
        key = (str(meta), meta.stat().st_mtime_ns)
        if key not in _META_CACHE:
            sizes = rundir.loads(meta.read_text())["sizes"]
            _META_CACHE[key] = {s: int(sizes[s]) for s in ("dev", "test")}
        return dict(_META_CACHE[key]), f"prepared ({meta})"
    except (OSError, ValueError, KeyError, TypeError, UserError):  # not prepared, unreadable, a name unknown
        pass
    known = known_split_sizes(name.split(":")[0])
    if known:
        return known, "transformer_core/data/split_sizes.py"
    return dict(FALLBACK_SPLIT_SIZES), f"not known: {FALLBACK_SPLIT_SIZES['dev']:,} sentences a split assumed"


def evaluations(train) -> int:
    """Evaluations of a trial: every eval_every steps and the last step (trainer.is_eval_step)."""
    return train.steps // train.eval_every + (1 if train.steps % train.eval_every else 0)


def eval_sentences(train, sizes: dict[str, int]) -> tuple[int, int]:
    """(sentences beam-searched, sentence pairs scored for perplexity) over a translation trial's evaluations."""
    dev, test, n = sizes["dev"], sizes["test"], evaluations(train)
    first = min(train.eval_sentences or dev, dev) if train.eval_bleu == "all" else 0
    return (n - 1) * first + dev + test, n * dev + test


def eval_seconds(params: float, train, sizes: dict[str, int], flops_per_second: float, task: str = "translation"):
    """Seconds a trial evaluates: each evaluation's fixed part, the perplexity passes' arithmetic and (translation)
    each decoded sentence's overhead and its ``beam`` hypotheses' arithmetic, at ``flops_per_second`` (the
    trial's training rate)."""
    decoded, scored = eval_sentences(train, sizes)
    if task == "lm":  # perplexity and bits per byte only (lm_task.py); its few greedy samples are not costed
        decoded, scored = 0, evaluations(train) * sizes["dev"] + sizes["test"]
    arithmetic = (scored * SCORE_FLOPS_PER_PARAM + decoded * train.beam * DECODE_FLOPS_PER_PARAM) * params
    return evaluations(train) * EVALUATION_SECONDS + decoded * SENTENCE_SECONDS + arithmetic / flops_per_second


def trial_seconds(flops: float, train, trial_flops_per_second: float, data=None, data_dir=None) -> float:
    """Training time of a trial with ``train`` (its run config's TrainConfig) and ``flops`` (trial_flops), and its
    evaluation (eval_seconds) with the split sizes of its corpus (``data``: its DataConfig, split_sizes; without
    it the default corpus's)."""
    tokens = train.steps * train.tokens_per_batch * train.accumulate * FILL
    params = flops / (6.0 * tokens) if tokens else 0.0
    sizes = split_sizes(data, data_dir)[0]
    task = getattr(data, "task", "translation")
    return flops / trial_flops_per_second + eval_seconds(params, train, sizes, trial_flops_per_second, task)


def makespan(durations: list[float], slots: int) -> float:
    """Wall time of independent trials on ``slots`` parallel slots, longest first to the least loaded slot."""
    loads = [0.0] * max(1, slots)
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}min"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


# --- device-hours of a whole spec per profile (docs/cluster.md) ---------------------------------
def spec_hours(spec, profile: str, flops_per_device: float, devices_per_trial: int = 1, gpus: int = 8) -> dict:
    """One seed of every row of ``spec`` at ``profile``: FLOPs, device-hours, wall hours on 1 and on ``gpus``."""
    from sweeps.spec.sweep_spec import plan

    trials = [t for t in plan(spec, profile) if t.seed == spec.seeds[0]]
    flops, seconds = [], []
    for t in trials:
        cfg = t.config
        f = trial_flops(cfg)[1]
        flops.append(f)
        seconds.append(trial_seconds(f, cfg.train, flops_per_device * devices_per_trial, cfg.data))
    base = next(i for i, t in enumerate(trials) if t.row == "base")
    one = sum(seconds) if devices_per_trial == 1 else None  # a trial on 8 workers cannot run on one GPU
    many = makespan(seconds, gpus // devices_per_trial)
    return {
        "profile": profile,
        "trials": len(trials),
        "base_flops": flops[base],
        "base_hours": seconds[base] / 3600,
        "flops": sum(flops),
        "device_hours": sum(seconds) * devices_per_trial / 3600,
        "wall_1": None if one is None else one / 3600,
        "wall_n": many / 3600,
    }
