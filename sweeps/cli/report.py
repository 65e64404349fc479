"""`tsweep report`: a sweep's report (Table 3 layout in Markdown, HTML, CSV and LaTeX, or a search's)."""

from __future__ import annotations

from pathlib import Path

from transformer_core.errors import UserError

BOOTSTRAP = 1000  # paired bootstrap samples, unless --bootstrap says
# the most --bootstrap allows: sacrebleu's paired bootstrap holds samples x sentences x its statistics in memory
# (240 MB a seed at the default on a 3,000-sentence test set), and 10,000 resolves a p of 1e-4
MAX_BOOTSTRAP = 10_000


def cmd_report(args) -> int:
    from analysis.report.search_report import is_search_sweep, write_search_report
    from sweeps.state.storage import open_storage
    from sweeps.state.sweep_state import check_inside

    if args.bootstrap > MAX_BOOTSTRAP:  # (positive_int refuses < 1)
        raise UserError(f"--bootstrap {args.bootstrap} is too many: allowed a whole number from 1 to "
                        f"{MAX_BOOTSTRAP:,} (default {BOOTSTRAP:,})")  # fmt: skip
    store = open_storage(str(args.sweep_dir))  # a URI: read from a pulled view, the report pushed back
    view = store.view() if store else args.sweep_dir
    report = Path(view) / "report"
    for path in [] if args.out else [report, *(report.iterdir() if report.is_dir() else ())]:
        check_inside(view, path)  # SWEEP/report and its files written inside the sweep, not through a symlink
    if args.out:
        _check_out(view, Path(args.out))
    if is_search_sweep(view):  # one row per sampled configuration, not the Table 3 layout
        given = (("--family", args.family), ("--method", args.method), ("--evidence", args.evidence))
        judging = [flag for flag, value in given if value is not None]  # (--bootstrap has a default: not told apart)
        if judging:
            raise UserError(f"{', '.join(judging)}: how claims are judged, and a search sweep's report judges none; "
                            "allowed without them (its confirmation round is judged as the spec set it)")  # fmt: skip
        out = write_search_report(view, args.out)
        if args.compare_rules:
            print("--compare-rules: a search sweep's report judges no claims, so there is nothing to compare")
        print(f"search report written: {out / 'report.md'}, {out / 'report.html'}, {out / 'trials.csv'}")
    else:
        from analysis.report.writers import write_report

        changes = []  # rule_changes.md is written into the report's folder before it is swapped in

        def compare_rules(folder: Path) -> None:
            from analysis.report.rule_changes import write

            changes.append(write(view, folder)[1])

        out = write_report(view, args.out, samples=args.bootstrap, family=args.family or "report",
                           method=args.method or "bh", evidence=args.evidence,
                           also=compare_rules if args.compare_rules else None)  # fmt: skip
        print(f"report written: {out / 'report.md'}, {out / 'report.html'}, {out / 'table.csv'}, {out / 'table.tex'}")
        if not args.out:  # the sweep's own report (not one written elsewhere) goes to its MLflow parent run
            _to_mlflow(view, out, local=not store)
        if args.compare_rules:
            table = changes[0]
            print(f"{int(table['changed'].sum())} of {len(table)} claim-readings changed from the previous rule: "
                  f"{out / 'rule_changes.md'}")  # fmt: skip
    if store and not args.out:
        store.push(out, "report")
        print(f"and copied to {args.sweep_dir.rstrip('/')}/report/")
    return 0


def _check_out(view, out: Path) -> None:
    """Refuse, in one line, an --out inside another sweep (SWEEP2/report, SWEEP2/trials/...): this report would
    replace that sweep's own files."""
    own = Path(view).resolve()
    where = out.resolve()
    for folder in (where, *where.parents):
        if folder != own and (folder / "sweep.json").is_file():
            raise UserError(f"--out {str(out)!r} lies inside the sweep {str(folder)!r}, whose files this report "
                            "would replace; allowed a folder outside other sweeps (or no --out: this sweep's own "
                            "report)")  # fmt: skip
        if folder == own:
            return


def _to_mlflow(view, out: Path, local: bool = True) -> None:
    """The report as the sweep's MLflow parent run's artifacts, each claim-reading's verdict as a tag; where the
    tracking store cannot take them (a server that accepts no connection within seconds among them), one line says
    so, the report stands and the command exits 0: MLflow holds a copy of the report, not the report."""
    import csv

    from analysis.data.sweep_record import require_record
    from sweeps.run.tracking import DEFAULT_DB, check_reachable, log_report, resolve_uri, sweep_store_uri

    try:
        tracking = require_record(Path(view)).tracking
        stored, run_id = tracking.uri, tracking.parent_run_id
        if stored is None or run_id is None:
            return  # no tracking recorded (an old or hand-made sweep): nothing to attach to
        uri = resolve_uri(stored, Path(view))
    except (UserError, ValueError, TypeError):
        return  # no readable record: nothing to attach to
    try:
        check_reachable(uri)  # a dead server: this one line, not minutes of MLflow's retries
        if local:  # a sweep on this machine: its own store re-rooted at it (a view's store is the URI's)
            db = Path(view) / DEFAULT_DB
            if stored == DEFAULT_DB and (not db.is_file() or db.stat().st_size == 0):  # MLflow would make a new one
                raise UserError(f"{db} is {'empty' if db.is_file() else 'missing'}, so it holds no parent run "
                                f"{run_id}; allowed the sweep's own store, as tsweep run left it")  # fmt: skip
            sweep_store_uri(stored, Path(view))
        with open(out / "claims.csv", newline="") as f:
            verdicts = {
                (r["claim"], r["reading"].split(" (")[0].replace(" ", "_")): r["verdict"] for r in csv.DictReader(f)
            }
        log_report(uri, run_id, out, verdicts)
    except Exception as exc:  # noqa: BLE001 - the report is written; MLflow is a copy of it
        print(f"report not copied to MLflow ({uri}): {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def register(sub) -> None:
    from .args import positive_int

    p = sub.add_parser("report", help="report of a sweep: Table 3 layout (markdown, HTML, CSV, "
                       "LaTeX), or for a search one row per sampled configuration")  # fmt: skip
    p.add_argument("sweep_dir")
    p.add_argument("--out", default=None, help="output directory (default SWEEP_DIR/report)")
    p.add_argument("--bootstrap", type=positive_int, default=BOOTSTRAP, help="paired bootstrap samples")
    p.add_argument("--family", choices=["report", "claim"], default=None,
                   help="what the multiple-testing procedure covers: the whole report (default: every claim-reading "
                   "and row against base together) or each claim-reading alone (the header says so)")  # fmt: skip
    p.add_argument("--method", choices=["bh", "holm"], default=None,
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
