"""The geomcap command: presets, train/show round trip, and one-line errors with exit 2."""
import subprocess
import sys

import pytest

GEOMCAP = [sys.executable, "-m", "geomcap.cli"]
#: small evaluation sets for the runs these tests train: a checkpoint's probes and RankMe on the default sets
#: made a 30-step run take 20 s; what is tested here is the command, not the measurements
SMALL = ["--n-train", "500", "--n-test", "64", "--probe-size", "64", "--train-eval-size", "64", "--batch-size", "16"]


def run(*args):
    return subprocess.run(GEOMCAP + list(args), capture_output=True, text=True)


def run_in_process(capsys, *args):
    """``geomcap ARGS`` through ``cli.main`` in this process: (exit code, stdout, stderr). For the many
    bad-input cases, which fail before any work (a subprocess per case mostly timed torch's import);
    the first case of each group also runs as a real process."""
    from geomcap import cli

    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_presets_lists_six_sizes_and_the_depth_variants():
    out = run("presets")
    assert out.returncode == 0
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 10 and lines[1].startswith("405k") and lines[6].startswith("151m")
    assert lines[7].startswith("405k-deep") and lines[8].startswith("1.3m-deep") and lines[9].startswith("grok-1l")


@pytest.mark.parametrize("args, fragment", [
    (["--task", "nope", "--level", "easy"], "unknown task 'nope'"),
    (["--task", "copy", "--level", "impossible"], "unknown level 'impossible'"),
    (["--task", "copy", "--level", "easy", "--size", "7b"], "unknown size '7b'"),
    (["--task", "copy", "--level", "easy", "--steps", "0"], "steps must be a positive integer"),
    (["--task", "copy", "--level", "easy", "--steps", "-5"], "steps must be a positive integer"),
    (["--task", "copy", "--level", "easy", "--steps", "ten"], "invalid int value"),
    (["--task", "copy", "--level", "easy", "--measures", "vibes"], "unknown measure 'vibes'"),
    (["--task", "copy", "--level", "easy", "--device", "tpu"], "--device: unknown value 'tpu'"),
    (["--level", "easy"], "required: --task"),
    (["--task", "copy", "--level", "easy", "--weight-decay", "-1"], "weight_decay must be a number in [0, inf)"),
    (["--task", "copy", "--level", "easy", "--lr", "inf"], "lr must be a number in (0, inf), got inf"),
    (["--task", "copy", "--level", "easy", "--weight-decay", "nan"], "weight_decay must be a number in [0, inf), got nan"),
    (["--task", "copy", "--level", "easy", "--seed", str(2**70)], "seed must be an integer in [0, 4294967295]"),
    (["--task", "copy", "--level", "easy", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["--task", "copy", "--level", "easy", "--costly-window", "900"], "argument --costly-window: invalid pair value"),
    (["--task", "copy", "--level", "easy", "--costly-window", "9,2"], "costly_window must be two whole steps"),
])
def test_bad_input_gives_one_line_and_exit_2_and_writes_nothing(tmp_path, capsys, args, fragment):
    out_dir = tmp_path / "run"
    code, _, err = run_in_process(capsys, "train", *args, "--out", out_dir)
    assert code == 2
    assert err.count("\n") == 1 and fragment in err, err
    assert not out_dir.exists()
    if args[1] == "nope":  # one case as a real process: exit status and stderr as a shell sees them
        result = run("train", *args, "--out", str(out_dir))
        assert (result.returncode, result.stderr) == (2, err) and not out_dir.exists()


def test_unwritable_out_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run("train", "--task", "copy", "--level", "easy", "--steps", "5", "--out", str(blocker / "run"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "cannot write run directory" in result.stderr
    assert blocker.read_text() == "not a directory"


def test_off_a_terminal_train_logs_lines_not_a_bar(tmp_path):
    """Off a terminal (a log file) `geomcap train` wrote every redraw of its bar; now a line as the run starts,
    a summary every few minutes, and a line as it ends (on stderr, as the bar: stdout is the run directory)."""
    import io

    from geomcap.progress import ProgressLines

    out_dir = tmp_path / "run"
    result = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "6", "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{out_dir}\n" and "\r" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "parity/easy 405k s0: starts at step 0 of 6" and len(lines) == 2, lines
    assert lines[1].startswith("parity/easy 405k s0: ended at step 6 of 6 in ") and ", acc " in lines[1]
    log = io.StringIO()
    progress = ProgressLines(10, 4, "run", every_s=0.0, file=log)
    progress.set_postfix({"acc": "0.500"})
    progress.update(2)
    assert log.getvalue().splitlines()[0] == "run: resumes at step 4 of 10"
    assert log.getvalue().splitlines()[1].startswith("run: step 6/10, acc 0.500 (")


def test_train_then_show(tmp_path):
    out_dir = tmp_path / "run"
    result = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "30", "--quiet", "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    shown = run("show", str(out_dir))
    assert shown.returncode == 0, shown.stderr
    for fragment in ("parity/easy", "accuracy", "rankme", "top-down", "the paper's reading"):
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
def test_sweep_bad_setting_is_one_line_exit_2(tmp_path, capsys, setting, fragment):
    args = ["sweep", "--tasks", "copy", "--levels", "easy", "--set", setting, "--root", str(tmp_path / "runs")]
    code, _, err = run_in_process(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "runs").exists()
    if setting == "lr":  # one case as a real process
        result = run(*args)
        assert (result.returncode, result.stderr) == (2, err) and not (tmp_path / "runs").exists()


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
    rows += [(s, -1, "llc", float("nan") if s == 20 else 5.0 + (s >= 700)) for s in steps]
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
    # read from step 300: a baseline of 16 checkpoints (to 600), the rise at 700 seen at 720
    assert llc["measure_step"] == 720 and llc["is_precursor"] is True and llc["gap_checkpoints"] == 9
    assert llc["leads_test_loss"] is True and llc["informative"] is True
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


def test_empty_out_is_refused(tmp_path):
    result = subprocess.run(GEOMCAP + ["train", "--task", "copy", "--level", "easy", "--steps", "2", "--out", ""],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--out is empty" in result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("options, fragment", [
    (["--set", "beta1=2"], "beta1 must be a number in [0, 1), got 2.0"),
    (["--set", "grad_clip=-1"], "grad_clip must be a number in (0, inf), got -1.0"),
    (["--set", "min_lr_ratio=-3"], "min_lr_ratio must be a number in [0, 1]"),
    (["--set", "warmup_steps=-5"], "warmup_steps must be a non-negative integer"),
    (["--set", "lr=nan"], "lr must be a number in (0, inf), got nan"),
    (["--sizes", "all"], "--sizes: unknown value 'all'; choose one of: 405k, 1.3m"),
    (["--seeds", "all"], "--seeds: must be an integer in [0, 4294967295], got 'all'"),
    (["--tasks", ""], "--tasks: empty selection"),
    (["--levels", ","], "--levels: empty selection"),
    (["--levels", "x"], "--levels: unknown value 'x'; choose one of: easy, medium, hard (or 'all')"),
    (["--tasks", "copy,chess"], "--tasks: unknown value 'chess'"),
    (["--seeds", "0,x"], "--seeds: must be an integer in [0, 4294967295], got 'x'"),
    (["--seeds", "-1"], "--seeds: must be an integer in [0, 4294967295], got -1"),
    (["--steps", "many"], "--steps: 'many' is not an integer"),
    (["--steps", "easy=1,medium=2,hard=x"], "--steps: 'x' is not an integer"),
    (["--root", ""], "--root is empty"),
])
def test_sweep_bad_option_is_one_line_exit_2(tmp_path, capsys, monkeypatch, options, fragment):
    """These ran nothing with exit 0, or failed inside the workers, or gave an int() error not naming the option."""
    args = {"--tasks": "copy", "--levels": "easy", "--root": str(tmp_path / "runs")}
    for flag, value in zip(options[::2], options[1::2]):
        args[flag] = value
    argv = ["sweep"] + [w for kv in args.items() for w in kv]
    monkeypatch.chdir(tmp_path)  # an empty --root would write into the current directory
    code, out, err = run_in_process(capsys, *argv)
    assert code == 2, out + err
    assert err.count("\n") == 1 and fragment in err, err
    assert list(tmp_path.iterdir()) == []
    if options[0] == "--root":  # one case as a real process, in its own working directory
        result = subprocess.run(GEOMCAP + argv, capture_output=True, text=True, cwd=tmp_path)
        assert (result.returncode, result.stderr) == (2, err) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("axis, value", [("tasks", "copy,chess"), ("levels", "x"), ("sizes", "7b"), ("seeds", "0,-1"),
                                         ("seeds", "x"), ("tasks", ","), ("steps", "easy:0")])
def test_a_bad_grid_axis_is_the_same_line_in_the_sweep_and_a_notebook(tmp_path, capsys, axis, value):
    """`geomcap sweep --tasks ...` and a notebook's `tasks` parameter are one row: the same reason, worded
    "--tasks: ..." and "parameter tasks: ..." (the sweep said "unknown task 'chess'", without the option)."""
    from geomcap import parameters

    with pytest.raises(parameters.ParameterError) as in_a_notebook:
        parameters.check({axis: value}, cells=["", f"# parameters\n{axis} = 'all'\n"])
    reason = str(in_a_notebook.value).removeprefix(f"parameter {axis}: ")
    if axis in ("sizes", "seeds"):  # a sweep trains named sizes and seeds: it offers no 'all'
        reason = reason.removesuffix(" (or 'all')")
    code, _, err = run_in_process(capsys, "sweep", "--levels", "easy", f"--{axis}", value, "--root", str(tmp_path))
    assert code == 2 and err == f"geomcap: error: --{axis}: {reason}\n"
    assert list(tmp_path.iterdir()) == []


def test_train_from_a_recorded_config_reruns_it_exactly(tmp_path):
    """`geomcap train --from RUN/config.json --out DIR` reruns a run with its whole config; at one thread
    the metrics are byte-identical (a single thread has one order of summation on any CPU)."""
    import json

    source = tmp_path / "source"
    first = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "12", "--seed", "3", "--lr", "2e-3",
                "--quiet", "--out", str(source))
    assert first.returncode == 0, first.stderr
    assert json.loads((source / "config.json").read_text())["provenance"]["threads"] == 1
    again = run("train", "--from", str(source / "config.json"), "--quiet", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert f"metrics.csv byte-identical to {source / 'metrics.csv'}" in again.stdout
    rerun = json.loads((tmp_path / "again" / "config.json").read_text())
    rerun.pop("provenance")
    recorded = json.loads((source / "config.json").read_text())
    recorded.pop("provenance")
    assert rerun == recorded
    assert (tmp_path / "again" / "metrics.csv").read_bytes() == (source / "metrics.csv").read_bytes()


def test_train_from_reruns_with_the_recorded_thread_count(tmp_path):
    """--from takes the recorded thread count (not the default one). At two threads a rerun is
    byte-identical on some CPUs and not on others (a CI machine's differed by 2.4e-5 at step 10), so
    only the count and the report's form are checked: either report, never a traceback."""
    import json
    import re

    source = tmp_path / "source"
    first = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "2", "--seed", "3",
                "--threads", "2", "--quiet", "--out", str(source))
    assert first.returncode == 0, first.stderr
    again = run("train", "--from", str(source / "config.json"), "--quiet", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again" / "config.json").read_text())["provenance"]["threads"] == 2
    report = re.escape(str(source / "metrics.csv"))
    assert re.search(rf"metrics.csv (byte-identical to {report}|against {report}: [\d,]+ shared rows; )",
                     again.stdout), again.stdout
    # the default is one thread
    default = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "2", "--quiet", "--out", str(tmp_path / "d"))
    assert default.returncode == 0 and json.loads((tmp_path / "d" / "config.json").read_text())["provenance"]["threads"] == 1


@pytest.mark.parametrize("args, fragment", [
    (["--from", "CONFIG", "--seed", "1"], "--from reruns a recorded run as it was: it takes no --seed"),
    (["--from", "nowhere/config.json"], "--from nowhere/config.json: no such config.json or run directory"),
    (["--from", "GARBAGE"], "not a readable config.json (JSONDecodeError)"),
    (["--task", "copy", "--level", "easy", "--threads", "0"], "--threads: must be a positive integer, got 0"),
])
def test_train_from_and_threads_errors(tmp_path, args, fragment):
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "config.json").write_text('{"task": "copy", "level": "easy"}')
    args = [{"CONFIG": str(tmp_path / "config.json"), "GARBAGE": str(tmp_path / "garbage.json")}.get(a, a) for a in args]
    result = subprocess.run(GEOMCAP + ["train", *args, "--out", str(tmp_path / "run")], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("option, value, reason", [
    ("--threads", "0", "must be a positive integer, got 0"),
    ("--threads", "x", "must be a positive integer, got 'x'"),  # argparse said "invalid int value: 'x'"
    ("--threads", "1.5", "must be a positive integer, got '1.5'"),
    ("--device", "tpu", "unknown value 'tpu'; choose one of: auto, cpu, cuda, cuda:N"),
    ("--device", "cudax", "unknown value 'cudax'; choose one of: auto, cpu, cuda, cuda:N"),
    ("--device", "cuda:1", "'cuda:1' requested but CUDA is not available"),
])
def test_train_s_own_options_are_refused_through_their_rows(tmp_path, capsys, monkeypatch, option, value, reason):
    """geomcap train's --device and --threads are rows (parameters.TRAIN_OPTIONS): "--NAME: REASON" (they said
    "unknown device 'tpu'; use auto, cpu or cuda" and "--threads must be ..."), before anything is written."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same line on a machine with a GPU
    code, out, err = run_in_process(capsys, "train", "--task", "copy", "--level", "easy", option, value,
                                    "--out", tmp_path / "run")
    assert (code, out, err) == (2, "", f"geomcap: error: {option}: {reason}\n")
    assert list(tmp_path.iterdir()) == []


def rows_are_the_options(capsys, monkeypatch, command: str, rows: dict, required=()) -> None:
    """Each row of ``rows`` is an option of ``geomcap COMMAND`` (``pythia run``: words; ``required``: the command's
    required arguments): its default when not given, its help in --help."""
    from geomcap import cli

    monkeypatch.setenv("COLUMNS", "10000")  # --help unwrapped
    code, out, _ = run_in_process(capsys, *command.split(), "--help")
    assert code == 0
    given = cli.build_parser().parse_args([*command.split(), *required])
    for name, row in rows.items():
        assert getattr(given, name) == row.default
        assert f"--{name.replace('_', '-')} {name.upper()} {row.describe()}" in " ".join(out.split())


def test_train_s_own_options_take_default_and_help_from_their_rows(capsys, monkeypatch):
    from geomcap.parameters import TRAIN_OPTIONS

    rows_are_the_options(capsys, monkeypatch, "train", TRAIN_OPTIONS)
    assert TRAIN_OPTIONS["device"].describe().endswith("default auto; with --from, the recorded run's")


def test_bench_s_options_take_default_and_help_from_their_rows(capsys, monkeypatch):
    """Every option of geomcap bench but --out, --update and --quiet is a row of parameters.BENCH; the recorded
    command spells each default as before (--rankme-n 512,4096,32768; --compile, none, left out)."""
    from geomcap import bench, cli
    from geomcap.parameters import BENCH

    rows_are_the_options(capsys, monkeypatch, "bench", BENCH)

    class Stop(Exception):
        pass

    def runs(out, **settings):  # what geomcap bench would run, not run
        raise Stop(settings)

    monkeypatch.setattr(bench, "run_bench", runs)
    with pytest.raises(Stop) as stopped:
        cli.main(["bench", "--out", "r.json", "--device", "cpu"])
    settings = stopped.value.args[0]
    assert settings["command"] == (
        "geomcap bench --parts default --out r.json --device cpu --presets auto --max-step-s 2.0 --task add "
        "--level hard --batch-size 128 --rounds 7 --block-s 1.5 --peer gpt2 --rankme-n 512,4096,32768 "
        "--rankme-d 128,768,2560 --costly-repeats 3")
    assert settings["parts"] == list(bench.DEFAULT_PARTS) and settings["compile_presets"] == []
    assert settings["rankme_sizes"] == [(n, d) for n in bench.RANKME_N for d in bench.RANKME_D]


#: the refusals of a positive-integer row, and of the device row (CUDA absent), as (value, reason)
POSITIVE_REFUSALS = [("0", "must be a positive integer, got 0"), ("-3", "must be a positive integer, got -3"),
                     ("x", "must be a positive integer, got 'x'"),  # argparse said "invalid int value: 'x'"
                     ("1.5", "must be a positive integer, got '1.5'")]
DEVICE_REFUSALS = [("tpu", "unknown value 'tpu'; choose one of: auto, cpu, cuda, cuda:N"),
                   ("cuda", "'cuda' requested but CUDA is not available")]
MEASURES = "grad_rank, grad_cov_rank, hessian_top, llc"


def refused(capsys, monkeypatch, tmp_path, argv, option: str, reason: str) -> None:
    """``geomcap ARGV`` on a machine without CUDA: exit 2, the one line "--OPTION: REASON", nothing written."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same line on a machine with a GPU
    code, out, err = run_in_process(capsys, *argv)
    assert (code, out, err) == (2, "", f"geomcap: error: {option}: {reason}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option, value, reason", [
    *[(option, value, reason) for option in ("--workers", "--threads", "--pack")
      for value, reason in POSITIVE_REFUSALS],
    *[("--device", value, reason) for value, reason in DEVICE_REFUSALS],
    ("--measures", "vibes", f"unknown value 'vibes'; choose one of: {MEASURES}"),
    ("--measures", "llc,vibes", f"unknown value 'vibes'; choose one of: {MEASURES}"),
])
def test_sweep_s_own_options_are_refused_through_their_rows(tmp_path, capsys, monkeypatch, option, value, reason):
    """geomcap sweep's --workers, --device, --threads, --pack and --measures are rows (parameters.SWEEP):
    "--NAME: REASON" before anything is planned or written (they said "--workers must be a positive integer,
    got 0", argparse's "invalid int value", "unknown device 'tpu'; ...", "unknown measure 'vibes'; ...")."""
    from geomcap import sweep

    def plans(*args, **kwargs):
        raise AssertionError("the sweep was planned")

    monkeypatch.setattr(sweep, "plan", plans)
    refused(capsys, monkeypatch, tmp_path, ["sweep", "--tasks", "copy", "--levels", "easy", option, value,
                                            "--root", tmp_path / "runs"], option, reason)


def test_sweep_s_own_options_take_default_and_help_from_their_rows(tmp_path, capsys, monkeypatch):
    """Each of geomcap sweep's own options is a row of parameters.SWEEP; run_sweep gets the values it got before
    (None where not given, numbers as ints, the device as typed), and every run the measures."""
    from geomcap import cli, sweep
    from geomcap.parameters import SWEEP

    rows_are_the_options(capsys, monkeypatch, "sweep", SWEEP)

    class Stop(Exception):
        pass

    class Plan:
        def lines(self):
            return []

    def runs(configs, **options):  # what geomcap sweep would train, not trained
        raise Stop(configs, options)

    monkeypatch.setattr(sweep, "plan", lambda *args, **kwargs: Plan())
    monkeypatch.setattr(sweep, "run_sweep", runs)
    sweep_copy = ["sweep", "--tasks", "copy", "--levels", "easy", "--root", str(tmp_path)]
    for options, expected in (([], dict(device="cpu", workers=None, threads=None, pack=None)),
                              (["--workers", "2", "--threads", "3", "--pack", "4", "--device", "auto"],
                               dict(device="auto", workers=2, threads=3, pack=4))):
        with pytest.raises(Stop) as stopped:
            cli.main(sweep_copy + options + ["--measures", "llc,hessian"])
        configs, given = stopped.value.args
        assert {name: given[name] for name in expected} == expected
        assert [c.measures for c in configs] == [("hessian_top", "llc")]


@pytest.mark.parametrize("value, reason", POSITIVE_REFUSALS)
def test_pythia_run_s_batch_tokens_is_refused_through_its_row(tmp_path, capsys, monkeypatch, value, reason):
    """geomcap pythia run --batch-tokens is the row parameters.PARAMETERS["batch_tokens"] (it said "--batch-tokens
    must be a positive integer, got 0", and argparse's "invalid int value")."""
    refused(capsys, monkeypatch, tmp_path, ["pythia", "run", "--model", "EleutherAI/pythia-160m", "--batch-tokens",
                                            value, "--out", tmp_path / "runs"], "--batch-tokens", reason)


def test_pythia_run_s_batch_tokens_takes_default_and_help_from_its_row(capsys, monkeypatch):
    from geomcap.parameters import PARAMETERS

    rows_are_the_options(capsys, monkeypatch, "pythia run", {"batch_tokens": PARAMETERS["batch_tokens"]},
                         required=["--model", "standin", "--out", "runs"])
    assert PARAMETERS["batch_tokens"].describe() == "padded tokens per forward pass; default 4096 on CPU, 16384 on GPU"


@pytest.mark.parametrize("option, value, reason", [
    ("--position", "last", "must be an integer or 'mean', got 'last'"),
    ("--position", "1.5", "must be an integer or 'mean', got '1.5'"),
    ("--position", "", "must be an integer or 'mean', got ''"),
    *[("--device", value, reason) for value, reason in DEVICE_REFUSALS],
])
def test_checkpoints_options_are_refused_through_their_rows(tmp_path, capsys, monkeypatch, option, value, reason):
    """geomcap checkpoints' --position and --device are rows (parameters.CHECKPOINTS): "--NAME: REASON" before
    anything is read (they said "--position must be ...", and "unknown device 'tpu'; ..." without the option)."""
    refused(capsys, monkeypatch, tmp_path, ["checkpoints", tmp_path / "root", "--prompts", tmp_path / "prompts.txt",
                                            "--out", tmp_path / "out", option, value], option, reason)


def test_checkpoints_options_take_default_and_help_from_their_rows(capsys, monkeypatch):
    from geomcap import checkpoints
    from geomcap.parameters import CHECKPOINTS

    rows_are_the_options(capsys, monkeypatch, "checkpoints", CHECKPOINTS,
                         required=["root", "--prompts", "prompts.txt", "--out", "out"])
    assert CHECKPOINTS["position"].read("-1") == -1 and CHECKPOINTS["position"].read("mean") == "mean"
    assert checkpoints.measure_checkpoints.__kwdefaults__ == {"position": -1, "device": "cpu", "dtype": None,
                                                             "progress": None}


def test_train_options_are_trainconfig_s_fields():
    """Every TrainConfig field is an option of geomcap train, with the field's type; an option not given is
    not in the namespace, so TrainConfig's default applies."""
    from dataclasses import fields

    from geomcap import cli
    from geomcap.train import TrainConfig

    parser = cli.build_parser()
    assert cli.config_fields() == [f.name for f in fields(TrainConfig)]
    args = parser.parse_args(["train", "--task", "add", "--level", "easy", "--beta1", "0.8", "--warmup-steps", "7",
                              "--stop-margin", "none", "--hessian-warm-start", "false", "--measures", "llc,hessian_top"])
    given = {name: getattr(args, name) for name in cli.config_fields() if hasattr(args, name)}
    assert given == {"task": "add", "level": "easy", "beta1": 0.8, "warmup_steps": 7, "stop_margin": None,
                     "hessian_warm_start": False, "measures": ("llc", "hessian_top")}
    cfg = TrainConfig(**given)
    assert (cfg.beta2, cfg.steps, cfg.measures) == (0.98, 2000, ("hessian_top", "llc"))
    with pytest.raises(cli.UsageError, match="argument --warmup-steps: invalid int value: '1.5'"):
        parser.parse_args(["train", "--task", "add", "--level", "easy", "--warmup-steps", "1.5"])
    with pytest.raises(cli.UsageError, match="argument --hessian-warm-start: invalid bool value: 'maybe'"):
        parser.parse_args(["train", "--task", "add", "--level", "easy", "--hessian-warm-start", "maybe"])
    window = parser.parse_args(["train", "--task", "add", "--level", "easy", "--costly-window", "900,1400"])
    assert window.costly_window == (900, 1400)
    grok = parser.parse_args(["train", "--task", "mod", "--level", "hard", "--task-params",
                              "p=113,train_fraction=0.3,number_tokens=true", "--control", "none",
                              "--grad-clip", "none", "--full-batch", "true", "--schedule", "constant"])
    assert grok.task_params == {"p": 113, "train_fraction": 0.3, "number_tokens": True}
    assert (grok.control, grok.grad_clip, grok.full_batch, grok.schedule) == (None, None, True, "constant")
    with pytest.raises(cli.UsageError, match="--task-params takes KEY=VALUE"):
        parser.parse_args(["train", "--task", "mod", "--level", "hard", "--task-params", "113"])
    bad = parser.parse_args(["train", "--task", "mod", "--level", "hard", "--control", "shuffle"])
    with pytest.raises(ValueError, match="unknown control 'shuffle'; choose one of: none, shuffled_answers"):
        TrainConfig(**{name: getattr(bad, name) for name in cli.config_fields() if hasattr(bad, name)})


def test_sweep_settings_take_the_fields_types():
    from geomcap.config import SETTINGS
    from geomcap.sweep import SETTABLE_FIELDS, parse_settings

    # "settable by a sweep" is a flag of each parameter row; the sweep's list is read from the rows
    assert SETTABLE_FIELDS == {name: row.type for name, row in SETTINGS.items() if row.sweep_settable}
    assert {"precision", "lr", "stop_at", "perturb_seed"} <= set(SETTABLE_FIELDS)
    assert not {"task", "level", "size", "seed", "steps", "measures"} & set(SETTABLE_FIELDS)  # the grid's own
    assert SETTABLE_FIELDS["warmup_steps"] is int and SETTABLE_FIELDS["lr"] is float
    assert SETTABLE_FIELDS["answer_order"] is str
    assert parse_settings(["warmup_steps=0", "lr=3e-4", "answer_order=lsd"]) == {
        "warmup_steps": 0, "lr": 0.0003, "answer_order": "lsd"}


def test_train_from_reports_where_a_rerun_departs(tmp_path):
    """`train --from` said only "DIFFERS" when the metrics were not byte-identical (another CPU), even when
    the only difference was the measures a newer geomcap adds; now it compares the rows both files hold."""
    import pandas as pd

    source = tmp_path / "source"
    first = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "8", "--quiet", "--out", str(source))
    assert first.returncode == 0, first.stderr
    older = tmp_path / "older"  # as recorded elsewhere by an older geomcap: no param_norm, probe_control_accuracy,
    older.mkdir()               # and one rankme 1% off from step 5
    (older / "config.json").write_text((source / "config.json").read_text())
    m = pd.read_csv(source / "metrics.csv")
    m = m[~m.measure.isin(["param_norm", "probe_control_accuracy"])]
    m.loc[(m.step == 5) & (m.measure == "rankme") & (m.layer == 1), "value"] *= 1.01
    m.to_csv(older / "metrics.csv", index=False)
    again = run("train", "--from", str(older), "--quiet", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    report = again.stdout.split(f"metrics.csv against {older / 'metrics.csv'}: ")[1]
    assert "largest relative difference 9.9e-03 (rankme layer 1, step 5)" in report, report
    assert "first departure beyond 0.0001 at step 5 (rankme layer 1)" in report
    assert "rows only in the rerun (param_norm, probe_control_accuracy)" in report
    assert report.splitlines()[1] == "first departures: rankme at step 5"


def test_a_full_disk_during_train_is_one_line_and_a_rerun_resumes(tmp_path):
    """A write that found no room during `geomcap train` (a full disk; here a file size limit, as `ulimit -f`
    sets) ended in a 20-line OSError traceback from the state writer. Now one line says what failed, and the
    same command, rerun, completes the run."""
    import resource

    from geomcap import store

    out_dir = tmp_path / "run"
    args = ["train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "6", "--quiet", "--out", str(out_dir)]
    limited = subprocess.run(GEOMCAP + args, capture_output=True, text=True,  # config.json fits, state.pt does not
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)))
    assert limited.returncode == 1 and "Traceback" not in limited.stderr, limited.stderr[-3000:]
    assert limited.stderr.splitlines()[-1] == (
        f"geomcap: error: could not write {out_dir / store.STATE_FILE}: File too large (a full disk or a file size "
        "limit); what was saved is kept: make room and rerun the same command to resume")
    again = run(*args)
    assert again.returncode == 0 and store.is_complete(out_dir), again.stderr


def test_a_run_store_that_is_a_file_is_refused_before_the_plan(tmp_path, capsys, monkeypatch):
    """$GEOMCAP_RUNS naming a file was refused in one line by `train`, but a `sweep` planned into it and failed
    with a traceback from each of its workers."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    sweep = ["sweep", "--tasks", "copy", "--levels", "easy", "--seeds", "0,1", "--steps", "2", "--workers", "1"]
    monkeypatch.setenv("GEOMCAP_RUNS", str(blocker))
    code, out, err = run_in_process(capsys, *sweep)
    assert (code, out, err) == (2, "", f"geomcap: error: $GEOMCAP_RUNS {blocker} is a file, not a run store "
                                       "directory\n")
    code, out, err = run_in_process(capsys, *sweep, "--root", str(blocker))
    assert (code, out) == (2, "") and err.startswith(f"geomcap: error: --root {blocker} is a file")
    assert blocker.read_text() == "not a directory"


def test_a_reader_that_stops_reading_ends_the_command_silently():
    """`geomcap show RUN | head -1` ended in a BrokenPipeError traceback once head had gone."""
    import os

    from geomcap import store

    run_dir = sorted(store.committed_data("runs").iterdir())[0]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        result = subprocess.run(GEOMCAP + ["show", "--json", str(run_dir)], stdout=write, stderr=subprocess.PIPE,
                                text=True)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (1, "")


def test_an_unreadable_status_is_warned_about_once(tmp_path):
    """An unreadable status.json was warned about three times by one `geomcap train` (before and under the
    run's lock), five times by a sweep (its plan, its own check, and its worker's three)."""
    from geomcap import store
    from geomcap.sweep import grid

    def bad_status(run_dir):
        run_dir.mkdir(parents=True)
        (run_dir / store.STATUS_FILE).write_text("{bad")

    bad_status(tmp_path / "run")
    trained = run("train", *SMALL, "--task", "parity", "--level", "easy", "--steps", "2", "--quiet", "--out",
                  str(tmp_path / "run"))
    assert trained.returncode == 0 and trained.stderr.count("geomcap: warning:") == 1, trained.stderr
    assert f"{tmp_path / 'run' / store.STATUS_FILE} is unreadable" in trained.stderr
    root = tmp_path / "runs"
    bad_status(store.run_dir_for(grid(tasks=["parity"], levels=["easy"], steps=2)[0].to_dict(), root))
    swept = run("sweep", "--tasks", "parity", "--levels", "easy", "--steps", "2", "--workers", "1", "--root", str(root))
    assert swept.returncode == 0 and swept.stderr.count("geomcap: warning:") == 1, swept.stderr


def test_a_dry_run_sweep_prints_its_plan_and_trains_nothing(tmp_path, capsys):
    """A researcher sizing a grid wants the projection without starting it: the plan's lines, exit 0, an empty
    store. The same sweep without --dry-run trains (so the flag, not the arguments, stops it)."""
    sweep = ["sweep", "--tasks", "copy", "--levels", "easy", "--seeds", "0,1", "--steps", "2", "--workers", "1",
             "--root", tmp_path / "runs", "--quiet"]
    code, out, err = run_in_process(capsys, *sweep, "--dry-run")
    assert code == 0 and out.startswith("plan: 2 runs; 0 exist, 2 to train") and "projected:" in out, out
    assert not (tmp_path / "runs").exists()
    code, out, _ = run_in_process(capsys, *sweep)
    assert code == 0 and "2 runs complete" in out and len(list((tmp_path / "runs").iterdir())) == 2


def test_a_sweep_counts_the_runs_of_a_done_store_as_trained_and_never_writes_there(tmp_path, capsys):
    """A fresh checkout resuming a grid whose finished runs are committed (data/scale): --done names that store,
    so its runs exist for the plan and are not trained again into --root; the others are; --done is read only."""
    base = ["sweep", "--tasks", "copy", "--levels", "easy", "--steps", "2", "--workers", "1", "--quiet"]
    code, _, _ = run_in_process(capsys, *base, "--seeds", "0", "--root", tmp_path / "committed")
    assert code == 0
    before = sorted(p.name for p in (tmp_path / "committed").iterdir())
    sweep = [*base, "--seeds", "0,1", "--root", tmp_path / "runs", "--done", tmp_path / "committed"]
    code, out, _ = run_in_process(capsys, *sweep, "--dry-run")
    assert code == 0 and out.startswith("plan: 2 runs; 1 exist, 1 to train"), out
    code, out, _ = run_in_process(capsys, *sweep)
    assert code == 0 and "2 runs complete, 0 failed" in out, out
    assert len(list((tmp_path / "runs").iterdir())) == 1  # seed 1 only: seed 0 was done
    assert sorted(p.name for p in (tmp_path / "committed").iterdir()) == before
    code, _, err = run_in_process(capsys, *base, "--root", tmp_path / "runs", "--done", tmp_path / "nowhere")
    assert code != 0 and "--done" in err and "not a directory" in err
