"""What a page prints of a path says nothing of the machine that built it (geomcap.analysis.display)."""
from pathlib import Path

from geomcap import store
from geomcap.analysis.display import shown_path, without_machine_paths


def test_a_store_path_is_shown_relative_to_the_repository_or_home():
    assert shown_path(store.committed_data("grokking")) == "data/grokking"
    assert shown_path(Path.home() / ".cache" / "geomcap" / "runs") == "~/.cache/geomcap/runs"
    assert shown_path("data/runs") == "data/runs"  # already relative: as given


def test_a_recorded_command_loses_the_folders_of_the_machine_that_ran_it():
    command = "geomcap bench --parts scale --out /tmp/bench/scale-cpu-2core.json --device auto"
    assert without_machine_paths(command) == "geomcap bench --parts scale --out .../scale-cpu-2core.json --device auto"
    text = f"in {store.committed_data('runs')}; see https://example.org/a/b; 24/24 runs; ~/.cache/geomcap"
    assert without_machine_paths(text) == "in data/runs; see https://example.org/a/b; 24/24 runs; ~/.cache/geomcap"
