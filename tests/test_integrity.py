"""Revision integrity: content digests of checkpoint files, which revisions are copies of which, the gaps refused
across them, and the upstream reports on the public Pythia checkpoints (data/pythia/upstream_revisions.json)."""
import json

import pytest

from geomcap import digests, store
from geomcap.analysis import integrity, pythia_revisions, pythia_upstream


def digest(step, weights=None, files=None):
    return {"step": step, "weights": weights, "files": files or {}}


def test_identical_weights_are_duplicates_of_the_earliest():
    series = {"step0": digest(0, "a"), "step10": digest(10, "b"), "step20": digest(20, "a"),
              "step30": digest(30, "c"), "step40": digest(40, "b"), "step50": digest(50, "d")}
    table = integrity.integrity_table(series)
    assert list(table["revision"]) == ["step0", "step10", "step20", "step30", "step40", "step50"]
    assert dict(zip(table["revision"], table["duplicate_of"])) == {
        "step0": "", "step10": "", "step20": "step0", "step30": "", "step40": "step10", "step50": ""}
    assert list(table["step_specific"]) == [False, False, False, True, False, True]
    assert integrity.left_out_steps(table) == {20, 40}
    assert integrity.earlier_copy(series, "step40") == "step10" and integrity.earlier_copy(series, "step10") is None
    # a gap is refused when it spans a revision that is not step-specific (either end, either order)
    assert integrity.copies_in_span(table, 25, 35) == [] and integrity.copies_in_span(table, 50, 50) == []
    assert integrity.copies_in_span(table, 50, 30) == integrity.copies_in_span(table, 30, 50) == ["step40"]
    assert integrity.copies_in_span(table, 0, 5) == ["step0"]
    assert integrity.copies_in_span(table, None, 50) == []
    line = integrity.copies_line(table, "m")
    assert line.startswith("m: 2 of its 6 revisions") and "step20 = step0; step40 = step10" in line
    with pytest.warns(integrity.CopiedRevisionsWarning, match="step40 = step10"):
        integrity.warn_copies(table, "m")


def test_a_series_of_distinct_revisions_has_no_copies(recwarn):
    table = integrity.integrity_table({f"step{s}": digest(s, f"w{s}") for s in range(0, 50, 10)})
    assert table["step_specific"].all() and integrity.left_out_steps(table) == set()
    assert integrity.copies_in_span(table, 0, 40) == []
    assert integrity.copies_line(table, "m") is None and integrity.warn_copies(table, "m") is None
    assert not recwarn.list


def test_files_compare_when_weights_are_unknown_and_a_shared_file_is_a_partial_copy():
    shard = {"a.bin": "X"}
    series = {"step0": digest(0, files={**shard, "b.bin": "0"}), "step5": digest(5, files={"a.bin": "Y", "b.bin": "5"}),
              "step9": digest(9, files={**shard, "b.bin": "9"}), "step12": digest(12, files={**shard, "b.bin": "0"})}
    table = integrity.integrity_table(series).set_index("revision")
    assert table.loc["step12", "duplicate_of"] == "step0"                      # every file the same
    assert table.loc["step9", "shares_files_with"] == "step0, step12"          # one shard the same, the rest not
    assert table.loc["step0", "shares_files_with"] == "step9"
    assert table.loc["step5", "step_specific"] and not table.loc["step9", "step_specific"]
    # weights decide where both have them, whatever the files
    assert integrity.same_weights(digest(0, "w", {"x": "1"}), digest(1, "w", {"x": "2"}))
    assert not integrity.same_weights(digest(0, "w", {"x": "1"}), digest(1, "v", {"x": "1"}))
    assert not integrity.same_weights(digest(0), digest(1))  # nothing known: not the same


def test_spans_and_ranges_counted_by_brute_force():
    weights = {0: "a", 1: "a", 2: "b", 4: "c", 6: "c", 8: "d", 10: "e", 12: "f"}
    table = integrity.integrity_table({f"step{s}": digest(s, w) for s, w in weights.items()})
    specific = {s for s, w in weights.items() if list(weights.values()).count(w) == 1}
    spans = integrity.span_table(table, 4)
    expected = [(s, s + 4, sum(s <= t <= s + 4 for t in weights), sum(s <= t <= s + 4 for t in specific))
                for s in weights if s + 4 in weights]
    assert list(map(tuple, spans[["first_step", "last_step", "revisions", "step_specific"]].to_numpy())) == expected
    assert list(spans["ends_step_specific"]) == [s in specific and s + 4 in specific for s, *_ in expected]
    ranges = integrity.content_ranges(table)
    assert list(ranges["content"]) == ["the weights of step0", "step-specific", "the weights of step4",
                                       "step-specific"]
    assert list(ranges["revisions"]) == [2, 1, 2, 3] and ranges["revisions"].sum() == len(weights)


# ---------------------------------------------------------------------------
# content digests of checkpoint files
# ---------------------------------------------------------------------------


def test_weights_digest_is_the_same_across_formats_and_shards_and_moves_with_one_value(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(0)
    state = {"embed.weight": torch.randn(8, 4, generator=generator), "head.weight": torch.randn(4, 8, generator=generator),
             "norm.weight": torch.ones(4, dtype=torch.float16)}
    one, sharded, pickled, changed = (tmp_path / name for name in ("one", "sharded", "pickled", "changed"))
    for folder in (one, sharded, pickled, changed):
        folder.mkdir()
    save_file(state, one / "model.safetensors")
    save_file({"embed.weight": state["embed.weight"]}, sharded / "model-00001-of-00002.safetensors")
    save_file({k: v for k, v in state.items() if k != "embed.weight"}, sharded / "model-00002-of-00002.safetensors")
    torch.save(state, pickled / "pytorch_model.bin")
    save_file({**state, "norm.weight": state["norm.weight"].clone().index_fill_(0, torch.tensor([2]), 2.0)},
              changed / "model.safetensors")
    (one / "training_args.bin").write_bytes(b"not weights")  # not a weight file
    records = {folder.name: digests.revision_digest(folder, step) for step, folder in enumerate((one, sharded, pickled,
                                                                                                 changed))}
    assert list(records["one"]["files"]) == ["model.safetensors"] and records["one"]["tensors"] == 3
    assert records["one"]["files"]["model.safetensors"] == digests.file_sha256(one / "model.safetensors")
    assert len(records["sharded"]["files"]) == 2
    assert records["one"]["weights"] == records["sharded"]["weights"] == records["pickled"]["weights"]
    assert records["changed"]["weights"] != records["one"]["weights"]
    assert len({json.dumps(r["files"], sort_keys=True) for r in records.values()}) == 4  # the files all differ
    table = integrity.integrity_table(records)
    assert dict(zip(table["revision"], table["duplicate_of"])) == {"one": "", "sharded": "one", "pickled": "one",
                                                                   "changed": ""}
    with pytest.raises(ValueError, match="no weight file"):
        digests.revision_digest(tmp_path, 0)


def test_digests_file_in_the_store(tmp_path):
    assert store.read_digests(tmp_path) == {}
    store.write_digests(tmp_path, {"step9": digest(9, "b"), "step1": digest(1, "a")})
    assert store.read_digests(tmp_path) == {"step1": digest(1, "a"), "step9": digest(9, "b")}
    (tmp_path / store.DIGESTS_FILE).write_text("{truncated")
    with pytest.raises(ValueError, match="digests.json is unreadable"):
        store.read_digests(tmp_path)


# ---------------------------------------------------------------------------
# the upstream reports on the public Pythia checkpoints
# ---------------------------------------------------------------------------


def test_the_upstream_reports_reproduce_their_own_counts():
    reports = pythia_upstream.upstream_reports()
    for model, entry in reports["models"].items():
        assert entry["source"].endswith(f"/issues/{entry['issue']}") and entry["reported"]
        for shared in entry["shared"]:
            assert shared["file"] in entry["files"]
            assert set(shared["steps"]) <= set(pythia_revisions.SCHEDULE_STEPS), model
    counts = reports["models"]["EleutherAI/pythia-2.8b"]["reported_counts"]
    table = pythia_upstream.upstream_integrity("EleutherAI/pythia-2.8b", reports)
    groups = table["duplicate_of"].where(table["duplicate_of"] != "", table["revision"])
    sizes = sorted(groups[~table["step_specific"]].value_counts())
    assert len(table) == 154 and sizes == sorted([counts["identical to main"], counts["second blob"]])
    assert table["step_specific"].sum() == counts["unique"]
    twelve = pythia_upstream.upstream_integrity("EleutherAI/pythia-12b", reports)
    partial = twelve[twelve["shares_files_with"] != ""]
    assert list(partial["step"]) == [50000, 58000, 143000] and (twelve["duplicate_of"] == "").all()
    assert pythia_upstream.upstream_integrity("EleutherAI/pythia-12b-deduped", reports)["step_specific"].all()
    with pytest.raises(ValueError, match="no upstream report on 'EleutherAI/pythia-70m'"):
        pythia_upstream.upstream_digests("EleutherAI/pythia-70m", reports)


def test_paper_span_from_a_report_whose_answer_is_known():
    # steps 0..512 and 1000..40000 serve one file; everything after is the branch's own
    early = [s for s in pythia_revisions.SCHEDULE_STEPS if s <= 40_000]
    reports = {"models": {"m": {"issue": 1, "files": ["w"], "shared": [{"file": "w", "sha256": "z", "steps": early}]}}}
    span = pythia_upstream.paper_span("m", 10_000, reports)
    assert span["revisions"] == 154 and span["step_specific"] == 154 - len(early)
    assert (span["first_specific"], span["last_specific"]) == (41_000, 143_000)
    assert span["none_until"] == 30_000          # 30000..40000 holds none, 31000..41000 holds one
    assert span["most_specific"] == 11 and span["span_revisions"] == 21  # 41000..51000 all its own; 0..10000: 21
    assert span["both_ends"] == len([s for s in range(41_000, 133_001, 1000)])
    assert "none in a span starting at step 30000 or before" in pythia_upstream.paper_span_text(span)
