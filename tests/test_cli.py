"""The geomcap command: presets, train/show round trip, and one-line errors with exit 2."""
import subprocess
import sys

import pytest

GEOMCAP = [sys.executable, "-m", "geomcap.cli"]


def run(*args):
    return subprocess.run(GEOMCAP + list(args), capture_output=True, text=True)


def test_presets_lists_six_sizes_and_the_depth_variants():
    out = run("presets")
    assert out.returncode == 0
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 9 and lines[1].startswith("405k") and lines[6].startswith("151m")
    assert lines[7].startswith("405k-deep") and lines[8].startswith("1.3m-deep")


@pytest.mark.parametrize("args, fragment", [
    (["--task", "nope", "--level", "easy"], "unknown task 'nope'"),
    (["--task", "copy", "--level", "impossible"], "unknown level 'impossible'"),
    (["--task", "copy", "--level", "easy", "--size", "7b"], "unknown size '7b'"),
    (["--task", "copy", "--level", "easy", "--steps", "0"], "steps must be a positive integer"),
    (["--task", "copy", "--level", "easy", "--steps", "-5"], "steps must be a positive integer"),
    (["--task", "copy", "--level", "easy", "--steps", "ten"], "invalid int value"),
    (["--task", "copy", "--level", "easy", "--measures", "vibes"], "unknown measure 'vibes'"),
    (["--task", "copy", "--level", "easy", "--device", "tpu"], "unknown device 'tpu'"),
    (["--level", "easy"], "required: --task"),
])
def test_bad_input_gives_one_line_and_exit_2_and_writes_nothing(tmp_path, args, fragment):
    out_dir = tmp_path / "run"
    result = run("train", *args, "--out", str(out_dir))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    assert not out_dir.exists()


def test_unwritable_out_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run("train", "--task", "copy", "--level", "easy", "--steps", "5", "--out", str(blocker / "run"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "cannot write run directory" in result.stderr
    assert blocker.read_text() == "not a directory"


def test_train_then_show(tmp_path):
    out_dir = tmp_path / "run"
    result = run("train", "--task", "parity", "--level", "easy", "--steps", "30", "--quiet", "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    shown = run("show", str(out_dir))
    assert shown.returncode == 0, shown.stderr
    for fragment in ("parity/easy", "accuracy", "rankme", "top-down", "precursors"):
        assert fragment in shown.stdout
    listed = run("runs", "--root", str(tmp_path), "--csv", str(tmp_path / "index.csv"))
    assert listed.returncode == 0 and "parity" in listed.stdout
    assert (tmp_path / "index.csv").read_text().startswith("run,task,level,size,seed,steps")
    missing = run("show", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and "not a geomcap run directory" in missing.stderr


@pytest.mark.parametrize("setting, fragment", [
    ("lr", "--set 'lr': expected KEY=VALUE"),
    ("seed=3", "--set seed: not a settable field"),
    ("warmup_steps=ten", "--set warmup_steps: 'ten' is not an integer"),
    ("answer_order=lsd", "answer_order 'lsd' applies to add, mod, mul only, not 'copy'"),
])
def test_sweep_bad_setting_is_one_line_exit_2(tmp_path, setting, fragment):
    result = run("sweep", "--tasks", "copy", "--levels", "easy", "--set", setting, "--root", str(tmp_path / "runs"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def _tiny_run(tmp_path):
    """A run directory whose config holds only task, level, size, seed and steps, and whose metrics stop
    before the budget (a run that stopped early)."""
    import json

    import numpy as np
    import pandas as pd

    steps = np.concatenate([np.arange(0, 128), np.arange(140, 1201, 20)])
    acc = (steps >= 900).astype(float)
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, acc)]
    rows += [(s, -1, "test_loss", 3.0 - 2.5 * a) for s, a in zip(steps, acc)]
    rows += [(s, -1, "llc", float("nan") if s == 20 else 5.0 + (s >= 500)) for s in steps]
    rows += [(s, layer, "rankme", np.interp(s, [0, 30, 90, 1200], [40.0, 3.0, 30.0, 30.0]) if layer else 1.0)
             for s in steps for layer in (0, 1, 2)]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pd.DataFrame(rows, columns=["step", "layer", "measure", "value"]).to_csv(run_dir / "metrics.csv", index=False)
    (run_dir / "config.json").write_text(json.dumps({"task": "copy", "level": "easy", "size": "405k", "seed": 0,
                                                 "steps": 3000}))
    (run_dir / "status.json").write_text(json.dumps({"complete": True, "stopped_at": 1200}))
    return run_dir


def test_show_json_is_strict_on_a_minimal_config_and_a_bare_metrics_file(tmp_path):
    import json

    run_dir = _tiny_run(tmp_path)
    shown = run("show", "--json", str(run_dir))
    assert shown.returncode == 0, shown.stderr
    assert "NaN" not in shown.stdout and "Infinity" not in shown.stdout
    out = json.loads(shown.stdout)
    summary = out["summary"]
    assert summary["acquisition_step"] == 900 and summary["last_step"] == 1200
    assert out["chance_known"] is True and out["status"]["stopped_at"] == 1200
    llc = summary["precursors"]["llc"]
    assert llc["is_precursor"] is True and llc["gap_checkpoints"] == 20 and llc["leads_test_loss"] is True
    assert summary["precursors"]["test_loss"]["leads_test_loss"] is None
    assert summary["top_down"]["rho_step"] is None  # undefined (one informative layer): null, not NaN
    json.dumps(out, allow_nan=False)
    bare = run("show", "--json", str(run_dir / "metrics.csv"))
    assert bare.returncode == 0, bare.stderr
    assert json.loads(bare.stdout)["chance_known"] is True  # the config beside it is read
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "metrics.csv").write_text((run_dir / "metrics.csv").read_text())
    for target in (alone, alone / "metrics.csv"):
        out = json.loads(run("show", "--json", str(target)).stdout)
        assert out["chance_known"] is False and "unknown" in out["note"]
        assert out["summary"]["acquisition_step"] == 900
    text = run("show", str(alone))
    assert text.returncode == 0 and "config     none" in text.stdout
