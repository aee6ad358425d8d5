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
