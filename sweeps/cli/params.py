"""`tsweep params`: parameter counts of the paper's Table 3 rows (beside the paper's), or of a spec's rows."""

from __future__ import annotations

import argparse


def _variant(cfg, base) -> str:
    """The model knobs of ``cfg`` beyond the printed columns that differ from ``base``, as key=value."""
    import dataclasses

    from transformer_core.config import ffn_inner

    shown = ("N", "d_model", "d_ff", "h", "d_k", "d_v")
    parts = [
        f"{f.name}={getattr(cfg, f.name)}"
        for f in dataclasses.fields(cfg)
        if f.name not in shown and getattr(cfg, f.name) != getattr(base, f.name)
    ]
    if cfg.activation == "swiglu":
        parts.append(f"(swiglu inner width {ffn_inner(cfg.d_ff, cfg.activation)})")
    return " ".join(parts)


def _params_rows(args) -> tuple[str, list[tuple]]:
    """(title, rows of (label, ModelConfig, preset ModelConfig, vocab, paper count or None))."""
    import difflib

    from transformer_core.config import MODEL_KEYS, model_config
    from transformer_core.errors import ConfigError
    from transformer_core.run_config import make_run_config

    from .args import set_values, spec_path

    sets = set_values(args)
    for key in sets:
        if key not in MODEL_KEYS:
            near = difflib.get_close_matches(key, MODEL_KEYS, n=1)
            what = f"not a model knob (did you mean {near[0]!r}?)" if near else "params takes model knobs only"
            raise ConfigError(f"--set {key}: {what}; allowed {', '.join(MODEL_KEYS)}")
    rows = []
    spec_file = spec_path(args)
    if spec_file:
        from sweeps.spec.profiles import get_profile
        from sweeps.spec.sweep_spec import expand_row, load_spec

        spec, profile = load_spec(spec_file), get_profile(args.profile)
        preset = spec.base.get("preset", "base")
        for row in spec.rows:
            if row.label in profile.exclude:
                continue
            values = expand_row(spec, row, profile, spec.seeds[:1])[0].values
            run = make_run_config({**values, **sets}, preset)
            rows.append(
                (row.label, run.model, model_config(preset), args.vocab or values["vocab"], None, run.data.task)
            )
        title = f"{spec.name} rows at profile {args.profile!r}"
    else:
        from analysis.data.paper import load_table3, row_overrides

        for paper_row in load_table3():
            preset = "big" if paper_row["row"] == "big" else "base"
            cfg = make_run_config({**row_overrides(paper_row), **sets}, preset).model
            rows.append((paper_row["row"], cfg, model_config("base"), args.vocab or 37000,
                         paper_row["params_millions"], "translation"))  # fmt: skip
        title = "Table 3"
    if sets:
        title += " with " + " ".join(f"{k}={v}" for k, v in sets.items())
    return title, rows


def cmd_params(args: argparse.Namespace) -> int:
    from transformer_core.params import closed_form_parameters_for

    title, rows = _params_rows(args)
    vocabs = sorted({r[3] for r in rows})
    print(f"{title}: parameter counts (tied matrices once), shared vocabulary of {', '.join(f'{v:,}' for v in vocabs)}")
    print(
        f"{'row':<8}{'N':>3}{'d_model':>8}{'d_ff':>6}{'h':>4}{'d_k':>5}{'d_v':>5}  {'ours (M)':>9}  {'paper (M)':>9}"
        f"  {'exact':>12}  other knobs"
    )
    for label, cfg, base, vocab, paper, task in rows:
        ours = closed_form_parameters_for(cfg, vocab, task)
        paper = "" if paper is None else f"{paper:>9}"
        print(
            f"{label:<8}{cfg.N:>3}{cfg.d_model:>8}{cfg.d_ff:>6}{cfg.h:>4}{cfg.d_k:>5}{cfg.d_v:>5}"
            f"  {ours / 1e6:>9.1f}  {paper:>9}  {ours:>12,}  {_variant(cfg, base)}".rstrip()
        )
    return 0


def register(sub) -> None:
    from .args import add_profile_argument, add_set_argument, add_spec_argument

    p = sub.add_parser(
        "params",
        help="parameter counts: Table 3 rows beside the paper's, or a spec's rows; --set for variants",
        description="Parameter counts (closed form, tied matrices once) of the paper's Table 3 rows, or of a spec's"
        " rows at a profile's scale.  --set KEY=VALUE ... (model knobs) applies to every row, e.g."
        " --set activation=swiglu norm_type=rmsnorm.",
    )
    add_spec_argument(p, what=" whose rows to count (default: the paper's Table 3 rows)")
    p.add_argument("--vocab", type=int, default=None, help="shared vocabulary size (default: 37000, the paper's"
                   " about 37000; with a spec the profile's or the spec's)")  # fmt: skip
    add_set_argument(p, "model knobs for every row")
    add_profile_argument(p, "paper", "with a spec: the scale profile", why="the paper's sizes")
    p.set_defaults(func=cmd_params)
