"""Where the committed data directory is found (``store.committed_data``)."""
import pytest

from geomcap import store


def test_committed_data_is_the_checkouts_data_folder(monkeypatch):
    monkeypatch.delenv("GEOMCAP_DATA", raising=False)
    assert (store.committed_data("runs") / "index.csv").is_file()


def test_geomcap_data_overrides_the_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv("GEOMCAP_DATA", str(tmp_path))
    assert store.committed_data("pythia", "runs") == tmp_path / "pythia" / "runs"


def test_a_missing_data_directory_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("GEOMCAP_DATA", str(tmp_path / "absent"))
    monkeypatch.setattr(store, "__file__", str(tmp_path / "site-packages" / "geomcap" / "store.py"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="GEOMCAP_DATA"):
        store.committed_data("runs")


def test_each_committed_index_lists_its_store_as_geomcap_runs_writes_it():
    """A store's index.csv is ``geomcap runs --csv`` of it (scripts/copy_runs.sh rewrites it as runs land): a
    run copied in by hand, or a column added to run_index, leaves it stale, and nothing read it back."""
    from geomcap import results

    data = store.committed_data()
    indexes = sorted(data.glob("*/index.csv"))
    assert indexes, f"no index.csv under {data}"
    stale = [str(p.relative_to(data)) for p in indexes if results.run_index(p.parent).to_csv(index=False)
             != p.read_text()]
    assert not stale, ("stale, rewrite with geomcap runs --root data/STORE --csv data/STORE/index.csv: "
                       + ", ".join(stale))
