"""Paths and the tiny models shared by the tests (importable as ``tests.helpers``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"  # committed data: bible-mini.db, wmt/
SPECS = ROOT / "tests" / "specs"  # sweep specs sized for the fixture corpus
SMOKE = SPECS / "smoke.yaml"
SEARCH_SMOKE = SPECS / "search-smoke.yaml"  # five Optuna samples at the smoke profile

# A model small enough to build and run forward in milliseconds (model-level tests: shapes, masks, counts).
SMALL_MODEL = dict(N=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, P_drop=0.0)

# The shape of the tiny model the training tests train on the fixture corpus (one layer, 48 wide).
TINY_MODEL = dict(N=1, d_model=48, d_ff=96, h=4, d_k=12, d_v=12)

# Run-config values of a tiny training run on the fixture corpus: a few seconds per run on one thread.
TINY_RUN = dict(
    TINY_MODEL,
    P_drop=0.0,
    vocab=400,
    tokens_per_batch=512,
    warmup=10,
    eval_sentences=8,
    beam=2,
    max_extra=10,
    threads=1,
    log_every=5,
    average_last=2,
)


def tiny_run_config(data_dir, **values):
    """The RunConfig of TINY_RUN on the corpora under ``data_dir``, with ``values`` on top."""
    from transformer_core.run_config import make_run_config

    return make_run_config({**TINY_RUN, "data_dir": str(data_dir), **values})


def tsweep(*args, env=None, timeout=600):
    """``tsweep ARGS`` as a user runs it, from the repository root; the CompletedProcess (text)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


def write_spec(path, **doc):
    """A one-seed spec on bible-en-de at ``path`` with ``doc`` on top; returns the path."""
    import yaml

    path.write_text(yaml.safe_dump({"name": "t", "corpus": {"name": "bible-en-de"}, "seeds": [1], **doc}))
    return path


def refused(argv, capsys, *needles) -> str:
    """``tsweep ARGV`` in process: exit 2 with one line on stderr holding every needle, no traceback; the line."""
    from sweeps.cli import main

    capsys.readouterr()
    rc, err = main([str(a) for a in argv]), capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def one_line(r, code=2):
    """The one stderr line of a refused command (exit ``code``, no traceback; Ray's INFO lines aside)."""
    assert r.returncode == code, r.stdout[-2000:] + r.stderr[-2000:]
    lines = [x for x in r.stderr.strip().splitlines() if " INFO " not in x]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def dead_pid():
    """The pid of a process that has exited (a stale lock's holder)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def copy_sweep(src: Path, dst: Path, leave_out: tuple = ()) -> Path:
    """The sweep copied to ``dst`` as a user moves one: its own mlflow.db (recorded relative to the sweep), with the
    experiment's and runs' artifact locations pointing into the copy, so that nothing written to the copy reaches
    the original.  ``leave_out``: names not copied (besides the lock)."""
    import shutil
    import sqlite3

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("sweep.lock", *leave_out))
    old, new = (src / "mlartifacts").as_uri(), (dst / "mlartifacts").as_uri()
    db = sqlite3.connect(dst / "mlflow.db")
    with db:
        db.execute("update experiments set artifact_location = replace(artifact_location, ?, ?)", (old, new))
        db.execute("update runs set artifact_uri = replace(artifact_uri, ?, ?)", (old, new))
        left = db.execute("select count(*) from runs where artifact_uri like ?", (old + "%",)).fetchone()[0]
        moved = db.execute("select count(*) from runs where artifact_uri like ?", (new + "%",)).fetchone()[0]
    db.close()
    assert left == 0 and moved > 0, f"{dst}: MLflow's artifact locations still point at {old} ({left} runs)"
    return dst


# What the GPU machines this project measures on lack (users' GPU nodes may too): what runs there must not need them.
GPU_MACHINE_MISSING = ("ray", "optuna", "mlflow", "optuna_dashboard")
_REFUSER = f'''import sys


class _Missing:
    """Refuses the packages a GPU machine may not have."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {GPU_MACHINE_MISSING!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (this machine has none)")
        return None


sys.meta_path.insert(0, _Missing())
'''


def gpu_machine_site(folder: Path) -> Path:
    """``folder`` made a PYTHONPATH entry whose sitecustomize refuses GPU_MACHINE_MISSING in any Python started
    with it (child processes too, where they inherit PYTHONPATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_REFUSER)
    return folder


DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested past Python's decoder: json.loads raises RecursionError on it
