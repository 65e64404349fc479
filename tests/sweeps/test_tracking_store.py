"""A new sweep's mlflow.db starts as a copy of an empty store that MLflow made once (sweeps.tracking.seed_store):
the same schema and migration stamp as a store MLflow creates itself, a Default experiment of its own, and the
sweep's runs as before."""

import sqlite3

from mlflow.tracking import MlflowClient

from sweeps.tracking import default_uri, ensure_parent_run


def _schema(db) -> tuple:
    """Each table's columns (name, type, not null, default, key) and indexes, and the migration stamp.  (Not the
    CREATE text: MLflow's migrations word it differently when run twice in one process.)"""
    con = sqlite3.connect(db)
    try:
        names = [n for (n,) in con.execute("select name from sqlite_master where type = 'table'")]
        tables = {n: sorted(c[1:] for c in con.execute(f"pragma table_info('{n}')")) for n in names}
        indexes = sorted(con.execute("select name, tbl_name from sqlite_master where type = 'index'"))
        stamp = con.execute("select version_num from alembic_version").fetchall()
        return tables, indexes, stamp
    finally:
        con.close()


def test_a_seeded_store_is_the_store_mlflow_makes(tmp_path, fixture_data_dir):
    fresh = tmp_path / "fresh.db"
    MlflowClient(f"sqlite:///{fresh}").search_experiments()  # MLflow runs its migrations itself
    sweeps = [tmp_path / f"sweep{i}" for i in range(2)]
    ids = []
    for sweep in sweeps:
        sweep.mkdir()
        exp, run = ensure_parent_run(default_uri(sweep), "exp", "s", {}, artifact_location=(sweep / "art").as_uri())
        ids.append(exp)
        client = MlflowClient(default_uri(sweep))
        assert client.get_run(run).info.experiment_id == exp
        assert client.get_experiment(exp).artifact_location == (sweep / "art").as_uri()
        assert client.get_experiment("0").name == "Default"  # MLflow's own, created on opening the copy
    assert (fixture_data_dir / "mlflow").is_dir() and list((fixture_data_dir / "mlflow").glob("empty-*.db"))
    seeded, made = _schema(sweeps[1] / "mlflow.db"), _schema(fresh)
    assert seeded == made and len(made[0]) > 10 and made[2] != []
    assert ids[0] == ids[1]  # the first experiment of each sweep gets the same id as in a store MLflow made


def test_an_existing_store_is_left_as_it_is(tmp_path, fixture_data_dir):
    """A resumed sweep's mlflow.db is never replaced by the empty one."""
    exp, run = ensure_parent_run(default_uri(tmp_path), "exp", "s", {}, artifact_location=(tmp_path / "a").as_uri())
    again = ensure_parent_run(default_uri(tmp_path), "exp", "s", {}, existing=run)
    assert again == (exp, run) and MlflowClient(default_uri(tmp_path)).get_run(run).info.status == "RUNNING"
