"""`tsweep report`: a sweep's report (Table 3 layout in Markdown, HTML, CSV and LaTeX, or a search's)."""

from __future__ import annotations

from pathlib import Path


def cmd_report(args) -> int:
    from analysis.search_report import is_search_sweep, write_search_report

    from .storage import open_storage
    from .sweep_state import check_inside

    store = open_storage(str(args.sweep_dir))  # a URI: read from a pulled view, the report pushed back
    view = store.view() if store else args.sweep_dir
    report = Path(view) / "report"
    for path in [] if args.out else [report, *(report.iterdir() if report.is_dir() else ())]:
        check_inside(view, path)  # SWEEP/report and its files written inside the sweep, not through a symlink
    if is_search_sweep(view):  # one row per sampled configuration, not the Table 3 layout
        out = write_search_report(view, args.out)
        if args.compare_rules:
            print("--compare-rules: a search sweep's report judges no claims, so there is nothing to compare")
        print(f"search report written: {out / 'report.md'}, {out / 'report.html'}, {out / 'trials.csv'}")
    else:
        from analysis.report import write_report

        out = write_report(view, args.out, samples=args.bootstrap, family=args.family, method=args.method,
                           evidence=args.evidence)  # fmt: skip
        print(f"report written: {out / 'report.md'}, {out / 'report.html'}, {out / 'table.csv'}, {out / 'table.tex'}")
        if not args.out:  # the sweep's own report (not one written elsewhere) goes to its MLflow parent run
            _to_mlflow(view, out, local=not store)
        if args.compare_rules:
            from analysis.rule_changes import write

            path, table = write(view, out)
            print(
                f"{int(table['changed'].sum())} of {len(table)} claim-readings changed from the previous rule: {path}"
            )
    if store and not args.out:
        store.push(out, "report")
        print(f"and copied to {args.sweep_dir.rstrip('/')}/report/")
    return 0


def _to_mlflow(view, out: Path, local: bool = True) -> None:
    """The report as the sweep's MLflow parent run's artifacts, each claim-reading's verdict as a tag; where the
    tracking store cannot take them, one line says so and the report stands."""
    import csv
    import json

    from .tracking import log_report, resolve_uri, sweep_store_uri

    try:
        state = json.loads((Path(view) / "sweep.json").read_text())
        stored, run_id = state["uri"], state["parent_run_id"]
        uri = resolve_uri(stored, Path(view))
    except (OSError, ValueError, KeyError, TypeError):
        return  # no tracking recorded (an old or hand-made sweep): nothing to attach to
    try:
        if local:  # a sweep on this machine: its own store re-rooted at it (a view's store is the URI's)
            sweep_store_uri(stored, Path(view))
        with open(out / "claims.csv", newline="") as f:
            verdicts = {
                (r["claim"], r["reading"].split(" (")[0].replace(" ", "_")): r["verdict"] for r in csv.DictReader(f)
            }
        log_report(uri, run_id, out, verdicts)
    except Exception as exc:  # noqa: BLE001 - the report is written; MLflow is a copy of it
        print(f"report not copied to MLflow ({uri}): {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def register(sub) -> None:
    p = sub.add_parser("report", help="report of a sweep: Table 3 layout (markdown, HTML, CSV, "
                       "LaTeX), or for a search one row per sampled configuration")  # fmt: skip
    p.add_argument("sweep_dir")
    p.add_argument("--out", default=None, help="output directory (default SWEEP_DIR/report)")
    p.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap samples")
    p.add_argument("--family", choices=["report", "claim"], default="report",
                   help="what the multiple-testing procedure covers: the whole report (default: every claim-reading "
                   "and row against base together) or each claim-reading alone (the header says so)")  # fmt: skip
    p.add_argument("--method", choices=["bh", "holm"], default="bh",
                   help="the procedure over the report's family: bh (Benjamini-Hochberg, false discovery rate; "
                   "default) or holm (family-wise error rate)")  # fmt: skip
    p.add_argument("--evidence", choices=["p", "e"], default=None,
                   help="what each comparison is decided on: p (its p-value) or e (its e-value by e-BH: valid "
                   "however seeds were added or stopped; docs/verdicts.md); default: what the spec chose "
                   "(seeds: {min, max, evidence: e}), else p")  # fmt: skip
    p.add_argument("--compare-rules", action="store_true",
                   help="also judge the sweep under the previous rule and each change since (pooled noise and Holm "
                   "per claim, looks as taken, moderated noise, the report's family) and write rule_changes.md: "
                   "which verdicts changed and which change did it")  # fmt: skip
    p.set_defaults(func=cmd_report)
