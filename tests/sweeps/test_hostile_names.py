"""Hostile input, fourth round (issue 52): copied and moved sweeps write only inside themselves, the names the
stores accept, environment variables and caches checked before Ray starts, hand-edited records."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, refused, write_spec
from transformer_core.errors import UserError


def tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


# a copied or moved sweep's MLflow artifacts (item 1) -------------------------------------------------------------


def tracked_sweep(root: Path) -> tuple[str, str]:
    """A local sweep with its own MLflow store as `tsweep run` makes one: the parent run, one trial's child run
    with an artifact; returns (parent run id, child run id).  Made in another process, as a sweep is: MLflow
    keeps each run's artifact folder for the life of the process that first wrote to it."""
    code = f"import json; from {__name__} import make_tracked_sweep as m; print(json.dumps(m({str(root)!r})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    parent, child = json.loads(done.stdout.strip().splitlines()[-1])
    return parent, child


def make_tracked_sweep(where: str) -> tuple[str, str]:
    from sweeps.run.tracking import MlflowTracker, default_uri, ensure_parent_run

    root = Path(where)
    root.mkdir()
    uri = default_uri(root)  # the experiment's artifacts where `tsweep run` puts them, SWEEP/mlartifacts
    exp, parent = ensure_parent_run(uri, "t", "t", {}, artifact_location=(root / "mlartifacts").as_uri())
    workdir = root / "trials" / "base-s1-abc"
    tracker = MlflowTracker(uri, exp, parent, workdir, "base-s1-abc", {})
    (workdir / "config.json").write_text("{}")
    tracker.log_artifact(str(workdir / "config.json"))
    (root / "sweep.json").write_text(json.dumps({"name": "s", "uri": "mlflow.db", "parent_run_id": parent}))
    return parent, tracker.run_id


def a_report(sweep: Path) -> Path:
    out = sweep / "report"
    out.mkdir()
    (out / "claims.csv").write_text("claim,reading,verdict\nB-smaller-dk,dev BLEU (Δ),held\n")
    return out


def test_a_copied_sweep_writes_its_report_and_evaluations_into_itself(tmp_path, capsys):
    from sweeps.cli.report import _to_mlflow
    from sweeps.run.evaluate import trial_tracker

    parent, child = tracked_sweep(tmp_path / "A")
    shutil.copytree(tmp_path / "A", tmp_path / "A2")  # cp -a: the store still names A's mlartifacts
    before = tree(tmp_path / "A")
    _to_mlflow(tmp_path / "A2", a_report(tmp_path / "A2"))
    workdir = tmp_path / "A2" / "trials" / "base-s1-abc"
    (workdir / "evals").mkdir()
    (workdir / "evals" / "x.json").write_text("{}")
    trial_tracker(workdir).log_artifact(str(workdir / "evals" / "x.json"))
    assert "not copied" not in capsys.readouterr().out
    assert tree(tmp_path / "A") == before  # nothing written into the original
    arts = tmp_path / "A2" / "mlartifacts"
    assert (arts / parent / "artifacts" / "report" / "claims.csv").is_file()
    assert (arts / child / "artifacts" / "evals" / "x.json").is_file()
    assert (arts / child / "artifacts" / "config.json").is_file()  # the copied artifacts found by the copy


def test_a_moved_sweep_does_not_create_its_old_directory_again(tmp_path):
    from mlflow.tracking import MlflowClient

    from sweeps.cli.report import _to_mlflow
    from sweeps.run.tracking import default_uri

    parent, _ = tracked_sweep(tmp_path / "A")
    (tmp_path / "A").rename(tmp_path / "Amoved")
    _to_mlflow(tmp_path / "Amoved", a_report(tmp_path / "Amoved"))
    assert not (tmp_path / "A").exists()
    run = MlflowClient(default_uri(tmp_path / "Amoved")).get_run(parent)
    assert run.info.artifact_uri == (tmp_path / "Amoved" / "mlartifacts").resolve().as_uri() + f"/{parent}/artifacts"
    assert run.data.tags["verdict.B-smaller-dk.dev_BLEU"] == "held"


def test_a_copied_store_that_cannot_be_re_rooted_is_named_in_one_line(tmp_path, capsys):
    from sweeps.cli.report import _to_mlflow
    from sweeps.run.tracking import reroot_artifacts

    sweep = tmp_path / "A2"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"name": "s", "uri": "mlflow.db", "parent_run_id": "0" * 32}))
    (sweep / "mlflow.db").write_bytes(b"not a database, but not empty either")
    try:
        reroot_artifacts(sweep)
        raise AssertionError("a store that cannot be read was re-rooted")
    except UserError as exc:
        assert "mlflow.db: its MLflow artifact locations cannot be read or re-rooted" in str(exc)
    _to_mlflow(sweep, a_report(sweep))
    out = capsys.readouterr().out
    assert out.startswith("report not copied to MLflow") and len(out.strip().splitlines()) == 1, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A2"]


# the names the stores accept: one rule for plan, run, evaluate and report (item 2) -------------------------------


@pytest.mark.parametrize("cid", ["a.b+c", "a\n", "-x", "a" * 65, "a b"])
def test_claim_ids_that_mlflow_or_a_file_name_would_refuse_are_refused(tmp_path, cid):
    from analysis.data.claims import parse_claim

    with pytest.raises(UserError) as caught:
        parse_claim({"id": cid, "compare": "B1 < base"}, "claims[0]", ["base", "B1"])
    assert str(caught.value).startswith("claims[0].id: ") and "\n" not in str(caught.value).replace(repr(cid), "")
    assert "allowed up to 64 letters, digits, '_', '.', '-' (starting with a letter or digit)" in str(caught.value)


def test_a_claim_id_mlflow_accepts_is_accepted():
    from analysis.data.claims import parse_claim

    assert parse_claim({"id": "a.b-c_1", "compare": "B1 < base"}, "claims[0]", ["base", "B1"]).id == "a.b-c_1"


@pytest.mark.parametrize("name", ["x\n", "x+y", "_x", "dev"])
def test_evaluation_set_names_the_stores_refuse_are_refused_before_anything_is_written(tmp_path, name):
    from transformer_core.data.eval_set import EvalSetError, read_eval_set

    (tmp_path / "pairs.tsv").write_text("ein Haus\ta house\n")
    with pytest.raises(EvalSetError, match="is invalid: allowed up to 64 letters"):
        read_eval_set(f"files:{tmp_path / 'pairs.tsv'}", name)
    assert read_eval_set(f"files:{tmp_path / 'pairs.tsv'}", "x.y-1").name == "x.y-1"


@pytest.mark.parametrize(
    "doc,field",
    [({"name": "nlB\n"}, "name"), ({"rows": {"P": [{"label": "P0\n", "h": 2}]}}, "rows.P[0].label")],
    ids=["spec-name", "label"],
)
def test_a_name_ending_in_a_newline_is_refused_by_plan(tmp_path, capsys, doc, field):
    spec = write_spec(tmp_path / "s.yaml", **doc)
    refused(["plan", spec, "--profile", "smoke"], capsys, f"{field}: ", "is invalid; allowed letters, digits")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


# TSWEEP_WORKER_MEMORY checked before Ray starts (item 3) --------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "0", "-1", " ", "inf", "nan", "1e-30", "1e300"])
def test_a_bad_worker_memory_bound_is_refused_before_the_sweep_starts(tmp_path, capsys, monkeypatch, value):
    from tests.helpers import SMOKE

    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", value)
    out = tmp_path / "out"
    refused(["run", SMOKE, "--profile", "smoke", "--out", out], capsys,
            f"TSWEEP_WORKER_MEMORY={value!r} is invalid: allowed a number of GB from 0.001 to 1e+06")  # fmt: skip
    assert not out.exists()


def test_a_worker_memory_bound_in_range_is_taken_in_bytes(monkeypatch):
    from sweeps.run.worker_memory import env_worker_bound, worker_bound

    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", "0.001")
    assert env_worker_bound() == worker_bound(2) == 1_000_000
    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", "")
    assert env_worker_bound() is None


# the device-bench.json cache checked, the file named in one line (item 4) --------------------------------------

MACHINE_RECORD = {"flops_per_second": 2e10, "measured_at": 1.7e9, "seconds_per_step": 0.5, "tokens_per_second": 900.0}


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"measured_at": None}, "machines['k'].measured_at is missing"),
        ({"measured_at": "yesterday"}, "machines['k'].measured_at is 'yesterday'"),
        ({"seconds_per_step": "abc"}, "machines['k'].seconds_per_step is 'abc'"),
        ({"tokens_per_second": None, "keep": True}, "machines['k'].tokens_per_second is None"),
        ({"flops_per_second": float("inf")}, "machines['k'].flops_per_second is inf; allowed a number from 1000 to"),
        ({"flops_per_second": "1e30"}, "machines['k'].flops_per_second is '1e30'"),
        ({"flops_per_second": 1e-300}, "machines['k'].flops_per_second is 1e-300"),
    ],
    ids=["no-measured_at", "measured_at-text", "step-text", "tokens-null", "flops-inf", "flops-text", "flops-tiny"],
)
def test_a_hand_edited_machine_measurement_is_refused_naming_the_file(tmp_path, change, needle):
    from sweeps.plan.estimate import read_machine_measurements
    from transformer_core.errors import ConfigError

    keep = change.pop("keep", False)
    record = {**MACHINE_RECORD, **change}
    record = {k: v for k, v in record.items() if v is not None or keep}
    (tmp_path / "device-bench.json").write_text(json.dumps({"measurements": {}, "machines": {"k": record}}))
    with pytest.raises(ConfigError) as caught:
        read_machine_measurements(tmp_path)
    line = str(caught.value)
    assert line.startswith(f"{tmp_path / 'device-bench.json'} is not a device measurement file (") and needle in line
    assert "\n" not in line


def test_a_stored_measurement_of_inf_flops_is_refused_by_plan(tmp_path, capsys):
    from tests.helpers import SPECS

    record = {"profile": "gpu", "device": "H100", "precision": "bf16", "flops_per_second": float("inf")}
    (tmp_path / "device-bench.json").write_text(json.dumps({"measurements": {"gpu": record}}))
    refused(["plan", SPECS.parent.parent / "sweeps" / "specs" / "table3.yaml", "--profile", "gpu", "--data-dir",
             tmp_path], capsys, "device-bench.json is not a device measurement file (measurements['gpu']"
            ".flops_per_second is inf")  # fmt: skip


def test_valid_measurements_are_read_as_before(tmp_path):
    from sweeps.plan.estimate import read_machine_measurements, read_measurements

    body = {"measurements": {"gpu": {"flops_per_second": 2e14, "measured_at": 0}}, "machines": {"k": MACHINE_RECORD}}
    (tmp_path / "device-bench.json").write_text(json.dumps(body))
    assert (
        read_machine_measurements(tmp_path) == body["machines"] and read_measurements(tmp_path) == body["measurements"]
    )


# a search space's values checked at plan, as a row's knobs are (item 5) --------------------------------------------


def search_spec(tmp_path: Path, knob: str, dist: dict) -> Path:
    import yaml

    from tests.helpers import SEARCH_SMOKE

    doc = yaml.safe_load(SEARCH_SMOKE.read_text())
    doc["search"]["space"] = {knob: dist}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path / "s.yaml"


@pytest.mark.parametrize(
    "knob,dist,needle",
    [
        ("lr_scale", {"type": "choice", "values": [0.5, [1, 2]]}, "search.space.lr_scale.values[1]: [1, 2] is invalid"),
        ("lr_scale", {"type": "choice", "values": [0.5, {"a": 1}]}, "search.space.lr_scale.values[1]: {'a': 1} is "),
        ("lr_scale", {"type": "choice", "values": [None]}, "search.space.lr_scale.values[0]: None is invalid"),
        ("lr_scale", {"type": "choice", "values": [0.5, True]}, "search.space.lr_scale.values[1]: True is invalid at"),
        ("positional", {"type": "choice", "values": ["<img src=x>"]}, "search.space.positional.values[0]: '<img"),
        ("d_model", {"type": "int", "low": 64, "high": 10**20}, "search.space.d_model.high: 100000000000000000000 is"),
    ],
    ids=["list", "mapping", "null", "bool-for-number", "unknown-word", "huge-int"],
)
def test_a_search_value_no_trial_could_run_is_refused_by_plan(tmp_path, capsys, knob, dist, needle):
    refused(["plan", search_spec(tmp_path, knob, dist), "--profile", "smoke"], capsys, needle)


def test_a_valid_search_space_plans_as_before(tmp_path, capsys):
    from sweeps.cli import main
    from tests.helpers import SEARCH_SMOKE

    assert main(["plan", str(SEARCH_SMOKE), "--profile", "smoke"]) == 0, capsys.readouterr().err


# a resume that changes the seeds (item 6) --------------------------------------------------------------------------


def earlier_sweep(out: Path, **state) -> Path:
    out.mkdir()
    (out / "sweep.json").write_text(
        json.dumps({"name": "t", "profile": "smoke", "status": "stopped", "plan": {}, **state})
    )
    return out


@pytest.mark.parametrize(
    "before,seeds,needle",
    [
        (
            {"seed_plan": {"adaptive": {"min": 2, "max": 3, "evidence": "e"}}},
            {"min": 2, "max": 4},
            "was run with seeds {min: 2, max: 3, evidence: e}, not {min: 2, max: 4}: a resume keeps",
        ),
        ({"seed_plan": {"seeds": [1, 2]}}, [1, 2, 3], "was run with seeds [1, 2], not [1, 2, 3]"),
        ({"seed_plan": {"seeds": [1, 2]}}, {"min": 2, "max": 3}, "was run with seeds [1, 2], not {min: 2, max: 3}"),
        (
            {"adaptive": {"min": 2, "max": 3, "evidence": "e", "looks": 2, "rounds": []}},
            {"min": 2, "max": 3},
            "was run with seeds {min: 2, max: 3, evidence: e}, not {min: 2, max: 3}",
        ),
    ],
    ids=["adaptive-max", "fixed-list", "fixed-to-adaptive", "recorded-before-seed-plan"],
)
def test_a_resume_that_changes_the_seeds_is_refused_before_it_starts(tmp_path, capsys, before, seeds, needle):
    claims = [{"id": "D-dropout-helps", "compare": "D1 < base"}]
    spec = write_spec(tmp_path / "s.yaml", seeds=seeds, rows={"D": [{"label": "D1", "P_drop": 0.0}]}, claims=claims)
    out = earlier_sweep(tmp_path / "out", **before)
    refused(["run", spec, "--profile", "smoke", "--out", out, "--resume"], capsys, needle)
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]


def test_the_seeds_a_sweep_runs_with_are_recorded_and_the_same_seeds_resume():
    from sweeps.state.sweep_state import check_seeds, seed_record

    state = {"seed_plan": seed_record([1, 2], None)}
    check_seeds(state, [1, 2], None, "out")
    check_seeds({"seed_plan": seed_record([1, 2], {"min": 2, "max": 3})}, [1, 2], {"min": 2, "max": 3}, "out")
    check_seeds({}, [1, 2, 3], None, "out")  # a sweep recorded before seed_plan, not adaptive: nothing to compare
    with pytest.raises(UserError, match=r"was run with seeds \[1, 2\], not \[2, 1\]"):
        check_seeds(state, [2, 1], None, "out")


# duplicate or contradicting comparisons in one claim (item 11) ---------------------------------------------------


@pytest.mark.parametrize(
    "compare,needle",
    [
        (["P0 < base", "P0 > base"], "claims[0].compare[1]: 'P0 > base' compares the rows of compare[0] ('P0 < base')"),
        (["P0 < base", "P0 < base"], "claims[0].compare[1]: 'P0 < base' compares the rows of compare[0]"),
        (["P0 < base", "base > P0"], "claims[0].compare[1]: 'base > P0' compares the rows of compare[0]"),
        (["P0 < best of base, P1", "P0 > best of base, P1"], "claims[0].compare[1]: 'P0 > best of base, P1'"),
    ],
    ids=["contradicting", "repeated", "the-same-turned-round", "best-of-twice"],
)
def test_a_claim_that_compares_one_pair_of_rows_twice_is_refused(compare, needle):
    from analysis.data.claims import parse_claim

    with pytest.raises(UserError) as caught:
        parse_claim({"id": "x", "compare": compare}, "claims[0]", ["base", "P0", "P1"])
    assert needle in str(caught.value) and "allowed each pair of rows once per claim" in str(caught.value)


def test_a_claim_comparing_different_pairs_is_accepted():
    from analysis.data.claims import parse_claim

    claim = parse_claim({"id": "x", "compare": ["P0 < base", "P1 > base", "P0 < P1"]}, "c", ["base", "P0", "P1"])
    assert len(claim.comparisons) == 3


# a tracking server that accepts no connection (item 8) -----------------------------------------------------------


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_tracking_server_is_refused_in_seconds_before_the_sweep_starts(tmp_path, capsys):
    import time

    import yaml

    from tests.helpers import SMOKE

    uri = f"http://127.0.0.1:{dead_port()}"
    doc = yaml.safe_load(Path(SMOKE).read_text())
    spec = write_spec(tmp_path / "s.yaml", **{**doc, "tracking": {"uri": uri}})
    out = tmp_path / "out"
    t0 = time.monotonic()
    needle = f"MLflow tracking server 127.0.0.1:{uri.rsplit(':', 1)[1]} ({uri}) is not reachable"
    refused(["run", spec, "--profile", "smoke", "--out", out], capsys, needle, "allowed a running")
    assert time.monotonic() - t0 < 30 and not out.exists()  # MLflow's retries took 251 s


def test_a_report_whose_tracking_server_is_dead_says_so_in_one_line_and_stands(tmp_path, capsys):
    import time

    from sweeps.cli.report import _to_mlflow

    dead = f"http://127.0.0.1:{dead_port()}"
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s", "uri": dead, "parent_run_id": "r"}))
    t0 = time.monotonic()
    _to_mlflow(tmp_path, a_report(tmp_path))
    out = capsys.readouterr().out
    assert time.monotonic() - t0 < 30  # MLflow's retries took 254 s
    assert out.startswith("report not copied to MLflow") and "is not reachable" in out and out.count("\n") == 1


@pytest.mark.parametrize(("uri", "needle"), [("http://127.0.0.1:99999/", "is invalid"), ("https:///x", "names no host"),
                                             ("sqlite:///x.db", None), ("file:///tmp/x", None)])  # fmt: skip
def test_which_tracking_uris_are_checked(uri, needle):
    from sweeps.run.tracking import check_reachable

    if needle is None:
        check_reachable(uri)  # a local store: nothing to connect to
    else:
        with pytest.raises(UserError, match=needle):
            check_reachable(uri)


# small items (item 13) ---------------------------------------------------------------------------------------------


def test_remeasure_without_a_budget_is_refused(capsys):
    from tests.helpers import SMOKE

    refused(["plan", SMOKE, "--profile", "smoke", "--remeasure"], capsys, "--remeasure", "allowed with --budget")


def test_a_search_report_refuses_the_options_that_judge_claims(tmp_path, capsys):
    sweep = tmp_path / "search"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"name": "s", "spec": "s.yaml", "profile": "smoke"}))
    (sweep / "optuna.db").write_bytes(b"")  # a search sweep
    refused(["report", sweep, "--evidence", "e", "--family", "claim"], capsys, "--family, --evidence: how claims are",
            "allowed without them")  # fmt: skip
    refused(["report", sweep, "--method", "holm"], capsys, "--method: how claims are")
    assert sorted(p.name for p in sweep.iterdir()) == ["optuna.db", "sweep.json"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["data", "info", "bible-en-de", "--tokens-per-batch", "-5"], "'-5' is invalid; allowed a whole number >= 1"),
        (["data", "info", "bible-en-de", "--budget", "0"], "'0' is invalid; allowed a whole number >= 1"),
        (["report", "S", "--bootstrap", "x"], "'x' is not a whole number"),
        (["plan", "S", "--device", "h100", "--gpu", "a100"], "--device h100 and --gpu a100 both given"),
        (["plan", "S", "--gpu", "a100", "--device", "h100"], "--device h100 and --gpu a100 both given"),
    ],
    ids=["tokens-negative", "budget-zero", "bootstrap-text", "device-then-gpu", "gpu-then-device"],
)
def test_bad_option_values_are_refused_by_the_parser(capsys, argv, needle):
    from sweeps.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and needle in err and "Traceback" not in err


def test_the_same_value_in_both_spellings_is_allowed(capsys):
    from sweeps.cli import build_parser
    from sweeps.cli.args import check_deprecated

    parser = build_parser()
    args = parser.parse_args(["plan", "S", "--device", "a100", "--gpu", "a100"])
    check_deprecated(parser, args)
    assert args.gpu == "a100"


@pytest.mark.parametrize("empty", [True, False], ids=["empty", "missing"])
def test_a_report_does_not_give_an_empty_or_missing_mlflow_db_a_fresh_schema(tmp_path, capsys, empty):
    from sweeps.cli.report import _to_mlflow

    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s", "uri": "mlflow.db", "parent_run_id": "r"}))
    if empty:
        (tmp_path / "mlflow.db").write_bytes(b"")
    _to_mlflow(tmp_path, a_report(tmp_path))
    out = capsys.readouterr().out
    assert out.startswith("report not copied to MLflow") and ("is empty" if empty else "is missing") in out
    assert (tmp_path / "mlflow.db").exists() == empty and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["report", "sweep.json"] + (["mlflow.db"] if empty else [])
    )
    if empty:
        assert (tmp_path / "mlflow.db").stat().st_size == 0


def test_claims_removed_on_a_resume_are_not_marked_amended(capsys):
    from types import SimpleNamespace

    from sweeps.run.runner import report_record

    claim = {"id": "c1", "text": "t", "kind": "other", "readings": ["dev_ce"], "comparisons": [["P0", "<", "base"]],
             "margin": None}  # fmt: skip
    before = {"report": {"title": "", "description": "", "paper": {}, "claims": [claim]}, "plan": {}}
    ctx = SimpleNamespace(spec=SimpleNamespace(report_record=lambda: {"title": "", "paper": {}, "claims": []}),
                          result=lambda tid, h: None)  # fmt: skip
    record = report_record(ctx, before)
    out = capsys.readouterr().out
    assert "amended" not in record and "claims removed since the sweep started (c1)" in out and "changed" not in out


def test_a_report_out_inside_another_sweep_is_refused(tmp_path, capsys):
    from tests.analysis.test_analysis import make_sweep

    a, b = make_sweep(tmp_path / "A"), make_sweep(tmp_path / "B")
    before = tree(b)
    for out in (b / "report", b / "trials" / "x"):
        refused(["report", a, "--out", out, "--bootstrap", "20"], capsys, f"lies inside the sweep {str(b)!r}")
    assert tree(b) == before


# the second hostile read ---------------------------------------------------------------------------------------------


def test_a_spec_giving_a_key_twice_is_refused_and_a_merge_key_is_not(tmp_path, capsys):
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: t\ncorpus: {name: bible-en-de}\nseeds: [1]\nrows:\n  A: [{label: P0, P_drop: 0.0}]\n"
                   "  A: [{label: P1, P_drop: 0.3}]\n")  # fmt: skip
    refused(["plan", dup, "--profile", "smoke"], capsys, "gives the key 'A' twice in one mapping (lines 5 and 6)")
    merged = tmp_path / "merge.yaml"
    merged.write_text("name: t\ncorpus: {name: bible-en-de}\nseeds: [1]\nrows:\n  A:\n"
                      "    - &p {label: P0, P_drop: 0.0}\n    - {<<: *p, label: P1}\n")  # fmt: skip
    from sweeps.cli import main

    assert main(["plan", str(merged), "--profile", "smoke"]) == 0
    assert "P1-s1-" in capsys.readouterr().out


def test_an_error_whose_text_spans_lines_is_printed_on_one(tmp_path, capsys):
    spec = tmp_path / "nul.yaml"
    spec.write_bytes(b"name: t\ndescription: 'a\x00b'\n")  # YAML's message puts the position on a line of its own
    refused(["plan", spec, "--profile", "smoke"], capsys, "is not valid YAML", "special characters are not allowed in")
