"""Generated documentation: the marker rewriting of ``talos_core.docblocks``, ``talos docs [--check]``, the claims
table of ``talos_core.evaluation.claims``, and the committed blocks of README.md and docs/ against the shipped store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from talos_core.cli import main
from talos_core.cli.docs import default_files
from talos_core.docblocks import find_blocks, rewrite, stale_blocks, store_renderer
from talos_core.errors import TalosError
from talos_core.evaluation.audit import audit_suite
from talos_core.evaluation.claims import CLAIMS, check_claims, claims_markdown
from talos_core.store import Store

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "cached_results"


def fake(kind: str, args: tuple[str, ...]) -> str:
    return f"{kind}:{','.join(args)}"


DOC = """# Title

<!-- talos:report text -->
stale text
<!-- /talos:report -->

between

<!-- talos:claims vision text -->
<!-- /talos:claims -->
end
"""


# --------------------------------------------------------------------------------------------
# markers
# --------------------------------------------------------------------------------------------
def test_rewrite_replaces_only_the_text_between_the_markers():
    out = rewrite(DOC, fake)
    assert out == DOC.replace("stale text\n", "report:text\n").replace(
        "<!-- talos:claims vision text -->\n", "<!-- talos:claims vision text -->\nclaims:vision,text\n")
    assert rewrite(out, fake) == out  # idempotent
    assert [(b.kind, b.args, b.line) for b in find_blocks(out)] == [("report", ("text",), 3),
                                                                    ("claims", ("vision", "text"), 9)]


def test_stale_blocks_names_the_blocks_that_differ():
    assert [b.label for b in stale_blocks(DOC, fake)] == ["report text", "claims vision text"]
    fresh = rewrite(DOC, fake)
    assert stale_blocks(fresh, fake) == []
    edited = fresh.replace("report:text", "report:text (edited by hand)")
    assert [(b.label, b.line) for b in stale_blocks(edited, fake)] == [("report text", 3)]
    # the rendered text is framed by newlines however it ends
    assert stale_blocks(fresh, lambda k, a: fake(k, a) + "\n\n") == []


@pytest.mark.parametrize("text, message", [
    ("<!-- talos:report x -->\nbody\n", "line 1: the report block is not closed"),
    ("<!-- talos:report x -->\n<!-- /talos:claims -->\n", "not closed by <!-- /talos:report -->"),
    ("<!-- talos:report x -->\n<!-- talos:claims y -->\n<!-- /talos:claims -->\n<!-- /talos:report -->\n",
     "not closed"),
    ("text\n<!-- /talos:report -->\n", "line 2: a closing marker"),
    ("<!-- talos:table x -->\n<!-- /talos:table -->\n", "unknown generated block kind 'table'"),
    ("<!-- talos:report -->\n<!-- /talos:report -->\n", "takes 1 argument(s), got 0"),
    ("<!-- talos:report a b -->\n<!-- /talos:report -->\n", "takes 1 argument(s), got 2"),
    ("<!-- talos:claims -->\n<!-- /talos:claims -->\n", "takes at least 1 argument(s), got 0"),
])
def test_malformed_markers_are_one_sentence_naming_the_file_and_line(text, message):
    with pytest.raises(TalosError, match=r"doc.md") as err:
        rewrite(text, fake, "doc.md")
    assert message in str(err.value)


def test_cli_rewrites_and_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("talos_core.docblocks.store_renderer", lambda store: fake)
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    assert main(["docs", "--check", "--store", "S", str(doc)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and out[0].startswith(f"{doc}: the generated block 'report text' (line 3) differs from "
                                               "what S gives; run `talos docs")
    assert doc.read_text() == DOC  # --check writes nothing
    assert main(["docs", "--store", "S", str(doc)]) == 0
    assert doc.read_text() == rewrite(DOC, fake) and capsys.readouterr().out.strip() == f"rewrote {doc}"
    assert main(["docs", "--check", "--store", "S", str(doc)]) == 0
    assert "2 generated block(s) in 1 file(s) match S" in capsys.readouterr().out
    assert main(["docs", "--check", "--store", "S", str(tmp_path / "none.md")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_default_files_are_the_readme_and_docs(tmp_path):
    assert default_files(tmp_path) == []
    (tmp_path / "docs").mkdir()
    for name in ("README.md", "docs/b.md", "docs/a.md", "docs/notes.txt"):
        (tmp_path / name).write_text("x")
    assert default_files(tmp_path) == [tmp_path / "README.md", tmp_path / "docs/a.md", tmp_path / "docs/b.md"]


# --------------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------------
def _claims_store(root: Path, *, talos_best: bool) -> Store:
    """A hand-made suite ``s`` of model ``m``: TaLoS best in everything (``talos_best``) or worst."""
    store = Store(root)
    store.write_result("suite", "s", {"model": "m", "scale": "mini", "tasks": ["a", "b"]})
    good, bad = (0.9, 0.5) if talos_best else (0.5, 0.9)
    store.write_table("comparison", "s__m", pd.DataFrame([
        {"method": "talos", "addition_abs": good, "addition_norm": good, "negation_target": bad,
         "single_task_acc": 0.80},
        {"method": "talos-k0.9", "addition_abs": 0.99, "addition_norm": 0.99, "negation_target": 0.01,
         "single_task_acc": 0.99},  # TaLoS's own variant: never the "other" row
        {"method": "nonlinear", "addition_abs": 0.7, "addition_norm": 0.7, "negation_target": 0.7,
         "single_task_acc": 0.85},
        {"method": "lota", "addition_abs": 0.6, "addition_norm": 0.6, "negation_target": 0.6,
         "single_task_acc": 0.81 if talos_best else 0.83},
    ]))
    store.write_result("mask_iou", "s__m__talos", {"tasks": ["a", "b"], "matrix": [[1, 0.6], [0.6, 1]]})
    store.write_result("mask_iou", "s__m__lota", {"tasks": ["a", "b"],
                                                  "matrix": [[1, 0.05 if talos_best else 0.7], [0.05, 1]]})
    store.write_result("sharing", "s__m__prune", {"tasks": ["a", "b"], "matrix": [[0.9, 0.88], [0.87, 0.9]],
                                                  "fraction": 0.1})
    store.write_table("masks", "s__m__talos", pd.DataFrame([
        {"task": "a", "param": "q", "layer_type": "q", "numel": 10, "trainable": 6 if talos_best else 1},
        {"task": "a", "param": "k", "layer_type": "k", "numel": 10, "trainable": 3 if talos_best else 1},
        {"task": "a", "param": "m", "layer_type": "mlp_in", "numel": 10, "trainable": 1 if talos_best else 8},
    ]))
    store.write_table("linearization", "s__m", pd.DataFrame([
        {"method": "talos", "task": "a", "finetuned_acc": 0.8, "linearized_acc": 0.79 if talos_best else 0.5},
        {"method": "nonlinear", "task": "a", "finetuned_acc": 0.8, "linearized_acc": 0.7},
        {"method": "linearized", "task": "a", "finetuned_acc": 0.7, "linearized_acc": 0.7},  # not compared
    ]))
    store.write_table("single", "s__m", pd.DataFrame([
        {"method": m, "task": "a", "zero_shot_acc": 0.5, "finetuned_acc": 0.8, "split": "test"}
        for m in ("talos", "nonlinear")]))
    store.write_table("sparsity_ablation", "s__m__talos", pd.DataFrame(
        {"sparsity": [0.5, 0.9, 0.99], "addition_abs": [0.6, 0.7 if talos_best else 0.5, 0.55],
         "addition_norm": [0.8, 0.8, 0.8], "negation_target": [0.3, 0.3, 0.3], "single_task_acc": [0.9, 0.85, 0.8]}))
    return store


def test_claims_reproduced_when_every_rule_holds(tmp_path):
    found = check_claims(_claims_store(tmp_path, talos_best=True), ["s"])
    assert [f.claim.key for f in found] == [c.key for c in CLAIMS]
    assert {f.claim.key: f.verdict for f in found} == dict.fromkeys("abcdef", "reproduced")
    by_key = {f.claim.key: f.numbers for f in found}
    assert "addition abs 90.0 vs 70.0 (nonlinear)" in by_key["a"]
    assert "negation target 50.0 vs 60.0 (lota)" in by_key["a"] and "(normalized 90.0, not decisive)" in by_key["a"]
    assert "talos 0.600 vs lota 0.050" in by_key["b"] and "bottom 10 %" in by_key["b"]
    assert "60.0 % Q, 30.0 % K" in by_key["c"]
    assert by_key["d"] == ("share of the fine-tuning gain kept linearized (mean gain over zero-shot): talos 97 % "
                           "(+30.0 points), nonlinear 67 % (+30.0 points)")
    assert "sparsity 0.5 / 0.9 / 0.99: addition abs 60.0 / 70.0 / 55.0" in by_key["e"]
    assert by_key["f"] == "single-task TaLoS 80.0 vs lota 81.0"


def test_claims_not_reproduced_and_missing_inputs(tmp_path):
    store = _claims_store(tmp_path, talos_best=False)
    assert {f.claim.key: f.verdict for f in check_claims(store, ["s"])} == dict.fromkeys("abcdef", "not reproduced")
    for kind, name in (("sharing", "s__m__prune"), ("linearization", "s__m")):
        store.result_path(kind, name).unlink()
    store.write_table("masks", "s__m__talos", pd.DataFrame([
        {"task": "a", "param": "c", "layer_type": "conv", "numel": 10, "trainable": 1}]))  # a CNN: no attention
    found = {f.claim.key: f for f in check_claims(store, ["s"])}
    assert found["b"].verdict == found["c"].verdict == found["d"].verdict == "n/a"
    assert found["b"].numbers == "n/a: no sharing result s__m__prune"
    assert found["c"].numbers == "n/a: m has no attention projections"
    with pytest.raises(TalosError, match="no results of suite 'other'"):
        check_claims(store, ["other"])


def _negation(store: Store, row: str, control_test: float) -> None:
    store.write_table("negation", f"s__m__{row}", pd.DataFrame(
        [{"target": "a", "alpha": 0.5, "split": sp, "target_acc": 0.3, "control_acc": control_test}
         for sp in ("val", "test")]), selected={"a": 0.5}, control_zero_shot_acc={"val": 0.8, "test": 0.8},
        threshold=0.95, alpha_grid=[0.0, 0.5, 1.0], control_task="c")


def test_claim_a_counts_negation_only_where_the_control_holds_on_test(tmp_path):
    store = _claims_store(tmp_path, talos_best=True)
    table = store.read_table("comparison", "s__m")
    table.loc[table["method"] == "lota", "negation_target"] = 0.1   # lower than TaLoS's 0.5 ...
    table["negation_control"] = 0.8
    table.loc[table["method"] == "lota", "negation_control"] = 0.6  # ... bought by breaking the control
    store.write_table("comparison", "s__m", table)
    _negation(store, "lota", 0.6)
    a = next(f for f in check_claims(store, ["s"]) if f.claim.key == "a")
    assert "not counted for a control broken on test: lota" in a.numbers and a.rule_verdict == "reproduced"
    assert a.verdict == "reproduced"  # lota's flagged negation is not the evidence: it was not counted
    table.loc[table["method"] == "talos", "negation_control"] = 0.6  # TaLoS's own control broken: never best
    store.write_table("comparison", "s__m", table)
    _negation(store, "talos", 0.6)
    a = next(f for f in check_claims(store, ["s"]) if f.claim.key == "a")
    assert "negation target 50.0 (control broken on test)" in a.numbers and a.rule_verdict == "not reproduced"


def test_claim_d_cannot_be_won_by_learning_nothing(tmp_path):
    store = _claims_store(tmp_path, talos_best=True)
    store.write_table("single", "s__m", pd.DataFrame([
        {"method": m, "task": "a", "zero_shot_acc": 0.78, "finetuned_acc": 0.8, "split": "test"}
        for m in ("talos", "nonlinear")]))  # TaLoS gains 2 points: nothing to keep
    d = next(f for f in check_claims(store, ["s"]) if f.claim.key == "d")
    assert d.verdict == "n/a" and "must gain 5 points" in d.numbers


def test_flagged_evidence_makes_a_claim_inconclusive(tmp_path):
    store = _claims_store(tmp_path, talos_best=True)
    store.write_table("addition", "s__m__nonlinear", pd.DataFrame(
        [{"alpha": a, "split": "test", "task": "a", "accuracy": 0.7, "normalized_accuracy": 0.8} for a in (0, 1)]),
        selected_alpha=1.0, alpha_grid=[0.0, 1.0], summary={"abs_acc": 0.7, "norm_acc": 0.8}, tasks=["a"])
    found = {f.claim.key: f for f in check_claims(store, ["s"])}
    assert found["a"].verdict == "inconclusive" and found["a"].rule_verdict == "reproduced"
    assert [f.check for f in found["a"].flags] == ["alpha-at-edge"]
    assert found["f"].verdict == "reproduced"  # nonlinear's α says nothing about single-task accuracy
    text = claims_markdown(store, ["s"])
    assert "**inconclusive** (rule alone: reproduced; flagged: alpha-at-edge: nonlinear)" in text


def _with_intervals(store: Store, width: float) -> None:
    """Give the comparison table of ``_claims_store`` 95 % intervals of ± ``width`` around every mean."""
    table = store.read_table("comparison", "s__m")
    for col in ("addition_abs", "addition_norm", "negation_target", "single_task_acc"):
        table[f"{col}_lo"], table[f"{col}_hi"] = (table[col] - width).clip(0, 1), (table[col] + width).clip(0, 1)
    store.write_table("comparison", "s__m", table)


def _flag_lota_negation(store: Store) -> None:
    """A negation result of the ``lota`` row (the lowest other negation target) whose α sits at the last point of its
    grid (audit: alpha-at-edge on its negation numbers only)."""
    store.write_table("negation", "s__m__lota", pd.DataFrame(
        [{"target": "a", "alpha": a, "split": sp, "target_acc": 0.6, "control_acc": 0.8}
         for a in (0.0, 0.5, 1.0) for sp in ("val", "test")]),
        selected={"a": 1.0}, alpha_grid=[0.0, 0.5, 1.0], control_task="c", threshold=0.95,
        control_zero_shot_acc={"val": 0.8, "test": 0.8}, summary={"target_acc": 0.6, "control_acc": 0.8})


def test_a_failing_part_on_clean_separated_numbers_settles_not_reproduced(tmp_path):
    """Claim (a) fails its addition part (TaLoS 0.5 vs non-linear 0.7) on unflagged numbers with disjoint
    intervals: flags on the negation part cannot make it inconclusive. Within noise, they do."""
    store = _claims_store(tmp_path, talos_best=False)
    _flag_lota_negation(store)
    _with_intervals(store, 0.02)
    a = next(f for f in check_claims(store, ["s"]) if f.claim.key == "a")
    assert [f.check for f in a.flags] == ["alpha-at-edge"] and a.flags[0].row == "lota"
    assert (a.verdict, a.rule_verdict, a.settled_by) == ("not reproduced", "not reproduced", "addition")
    assert "**not reproduced** (settled by the addition part" in claims_markdown(store, ["s"])
    _with_intervals(store, 0.15)  # TaLoS 0.5 ± 0.15 overlaps 0.7 ± 0.15: the failure is within noise
    a = next(f for f in check_claims(store, ["s"]) if f.claim.key == "a")
    assert (a.verdict, a.settled_by) == ("inconclusive", "")


def test_best_within_noise_between_two_other_rows_does_not_concern_a_claim(tmp_path):
    """best-not-separated between LoTA and non-linear FT says which of them leads, not how TaLoS compares: claim
    (f), which reads LoTA's single-task accuracy, is not flagged by it; a TaLoS row within noise of the best is."""
    store = _claims_store(tmp_path, talos_best=False)
    table = store.read_table("comparison", "s__m")
    table.loc[table["method"] == "talos-k0.9", "single_task_acc"] = 0.7
    table.loc[table["method"] == "lota", "single_task_acc"] = 0.86  # best, nonlinear's 0.85 within noise
    store.write_table("comparison", "s__m", table)
    _with_intervals(store, 0.02)
    noise = [f for f in audit_suite(store.root, "s") if f.check == "best-not-separated"
             and f.metrics == ("single_task_acc",)]
    assert [(f.row, f.numbers["runner_up"]) for f in noise] == [("lota", "nonlinear")]
    f = next(f for f in check_claims(store, ["s"]) if f.claim.key == "f")
    assert (f.verdict, f.flags) == ("not reproduced", ())
    table = store.read_table("comparison", "s__m")
    table.loc[table["method"] == "talos", "single_task_acc"] = 0.855  # now TaLoS is the runner-up within noise
    table.loc[table["method"] == "talos", ["single_task_acc_lo", "single_task_acc_hi"]] = [0.835, 0.875]
    store.write_table("comparison", "s__m", table)
    f = next(f for f in check_claims(store, ["s"]) if f.claim.key == "f")
    assert [fl.check for fl in f.flags] == ["best-not-separated"] and f.verdict == "inconclusive"


def test_claims_markdown_lists_each_claim_once_and_its_rule(tmp_path):
    store = _claims_store(tmp_path, talos_best=True)
    store.write_result("suite", "t", {"model": "m2", "scale": "full"})  # a suite with no results: all n/a
    text = claims_markdown(store, ["s", "t"])
    rows = [line for line in text.splitlines() if line.startswith(("| (", "|  |"))]
    assert len(rows) == 2 * len(CLAIMS)
    assert rows[0].startswith("| (a) TaLoS is best") and rows[1].startswith("|  | t (full) | n/a:")
    assert all(f"- ({c.key}) {c.rule}." in text for c in CLAIMS)


# --------------------------------------------------------------------------------------------
# the committed documents
# --------------------------------------------------------------------------------------------
def test_committed_generated_blocks_match_the_shipped_store():
    """Every generated block of README.md and docs/*.md is what ``talos docs --store cached_results`` writes: a
    change of the shipped results (or of the report code) without ``talos docs`` fails here."""
    files = default_files(REPO)
    labels = {b.label for f in files for b in find_blocks(f.read_text(), str(f))}
    assert {"report text", "report vision", "claims vision text"} <= labels
    render = store_renderer(SHIPPED)
    stale = [f"{f.relative_to(REPO)}: '{b.label}' (line {b.line})"
             for f in files for b in stale_blocks(f.read_text(), render, str(f))]
    assert not stale, f"stale generated blocks, run `talos docs --store cached_results`: {stale}"


def _github_slug(heading: str) -> str:
    """A heading's anchor as GitHub renders it: lower case, punctuation dropped (word characters, spaces and hyphens
    kept, ``α`` and ``ξ`` too), spaces to hyphens."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    import re

    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*)", line)
        if m:
            s = _github_slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def test_every_link_between_the_docs_resolves():
    """Every relative link of README.md, docs/*.md and bench/RESULTS.md names a file that exists and, with ``#…``, a
    heading of it (issue 50 found links to a results.md section that did not exist)."""
    import re

    assert _github_slug("Scale `full`: the paper's protocol, every run converged") == \
        "scale-full-the-papers-protocol-every-run-converged"
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "RESULTS.md"]
    bad = []
    for f in files:
        text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                bad.append(f"{f.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{f.relative_to(REPO)}: {target} (no such heading)")
    assert not bad, bad


def _flag_references(prose: str) -> list[tuple[list[int], str | None]]:
    """``(footnote numbers, check id or None)`` of every "flag 8" / "flags 2, 16, 19" / "flags 1–3: `check`" in
    ``prose``."""
    import re

    out = []
    for m in re.finditer(r"\bflags? (\d+(?:\s*(?:,|and|–)\s*\d+)*)(?::\s*`([a-z0-9-]+)`)?", prose):
        numbers: list[int] = []
        for part in re.split(r"\s*(?:,|and)\s*", m.group(1)):
            lo, _, hi = part.partition("–")
            numbers += range(int(lo), int(hi or lo) + 1)
        out.append((numbers, m.group(2)))
    return out


def test_flag_references_in_the_results_prose_name_footnotes_that_exist():
    """The hand-written prose of each suite in docs/results.md cites the audit's footnotes by number ("flags 3, 4, 6,
    17: `timing-disturbed`"); every number cited names a footnote of that suite's generated table, and of the check
    it names when it names one. A store or audit change that renumbers or removes footnotes fails here, instead of
    leaving prose about a flag that is gone."""
    import re

    from talos_core.evaluation.audit import CHECKS

    by_title = {c.title: c.id for c in CHECKS}
    assert _flag_references("(flags 3, 4, 6–7: `timing-disturbed`) and flag 8 and flags 1 and 2") == [
        ([3, 4, 6, 7], "timing-disturbed"), ([8], None), ([1, 2], None)]
    text = (REPO / "docs" / "results.md").read_text()
    checked = 0
    for section in re.split(r"^## ", text, flags=re.M):
        block = re.search(r"<!-- talos:report (\w+) -->(.*?)<!-- /talos:report -->", section, re.S)
        if not block:
            continue
        notes = {int(n): by_title.get(title.strip()) for n, title in
                 re.findall(r"^- \[(\d+)\] \S+ — ([^:]+):", block.group(2), re.M)}
        prose = section[:block.start()] + section[block.end():]
        for numbers, check in _flag_references(prose):
            for n in numbers:
                assert n in notes, f"results.md ({block.group(1)}) cites flag {n}; its table has {len(notes)}"
                assert check is None or notes[n] == check, \
                    f"results.md ({block.group(1)}) cites flag {n} as {check}; footnote {n} is {notes[n]}"
                checked += 1
    assert checked > 10


#: Numbers the hand-written prose copies from the shipped store, as templates: ``{suite:row:column}`` is a comparison
#: number in % (one decimal), ``{suite:row:task:single}`` a single-task test accuracy in %, ``{suite:row:task:zero}``
#: the zero-shot one. Each rendered template must stand in its file (line breaks ignored), so a re-shipped store
#: that moves a quoted number fails here until the prose is rewritten.
QUOTES: tuple[tuple[str, str], ...] = (
    ("README.md", "single-task {vision:talos:single_task_acc} against non-linear FT's "
                  "{vision:nonlinear:single_task_acc} and LoTA's {vision:lota:single_task_acc}"),
    ("README.md", "task addition {vision:talos:addition_abs} against non-linear FT's {vision:nonlinear:addition_abs}"),
    ("README.md", "negation target {vision:talos:negation_target} against {vision:nonlinear:negation_target}"),
    ("docs/results.md", "TaLoS {vision:talos:mnist:zero} → {vision:talos:mnist:single} / {vision:talos:digits:zero} → "
                        "{vision:talos:digits:single} / {vision:talos:animal-shapes:zero} → "
                        "{vision:talos:animal-shapes:single}, non-linear FT {vision:nonlinear:mnist:single} / "
                        "{vision:nonlinear:digits:single} / {vision:nonlinear:animal-shapes:single}, linearized FT "
                        "{vision:linearized:mnist:single} / {vision:linearized:digits:single} / "
                        "{vision:linearized:animal-shapes:single}, LoTA {vision:lota:mnist:single} / "
                        "{vision:lota:digits:single} / {vision:lota:animal-shapes:single}"),
    ("docs/results.md", "TaLoS adds to {vision:talos:addition_abs}"),
    ("docs/results.md", "LoTA to {vision:lota:addition_abs}"),
    ("docs/results.md", "Negation: non-linear FT reaches {vision:nonlinear:negation_target}, LoTA "
                        "{vision:lota:negation_target}, TaLoS {vision:talos:negation_target}"),
    ("docs/results.md", "single-task {vision:talos-k0.9-lr0.0001:single_task_acc} against "
                        "{vision:talos:single_task_acc} at 1e-3"),
    ("docs/results.md", "Test: TIES {vision:ties:addition_abs} addition and {vision:ties:negation_target} negation "
                        "target"),
    ("docs/results.md", "DARE {vision:dare:addition_abs} and {vision:dare:negation_target}"),
    ("docs/results.md", "Breadcrumbs {vision:breadcrumbs:addition_abs} and {vision:breadcrumbs:negation_target}"),
    ("docs/results.md", "LoTA {vision:lota:addition_abs}, linearized FT {vision:linearized:addition_abs}, LoTA "
                        "(k = 0.9) {vision:lota-k0.9:addition_abs} — are above TaLoS's {vision:talos:addition_abs}"),
    ("README.md", "single-task {text:talos:single_task_acc} against non-linear FT's {text:nonlinear:single_task_acc} "
                  "and LoTA's {text:lota:single_task_acc}"),
    ("README.md", "task addition {text:talos:addition_abs} against non-linear FT's {text:nonlinear:addition_abs} and "
                  "TSV-Merge's {text:tsv:addition_abs}"),
    ("README.md", "negation target {text:talos:negation_target} against {text:nonlinear:negation_target} and "
                  "{text:tsv:negation_target}"),
    ("docs/results.md", "zero-shot {text:talos:tweets:zero} / {text:talos:wordnet-nouns:zero} / "
                        "{text:talos:wordnet-verbs:zero} / {text:talos:drug-reviews:zero} / "
                        "{text:talos:fortune-topics:zero}; TaLoS {text:talos:tweets:single} / "
                        "{text:talos:wordnet-nouns:single} / {text:talos:wordnet-verbs:single} / "
                        "{text:talos:drug-reviews:single} / {text:talos:fortune-topics:single}, non-linear FT "
                        "{text:nonlinear:tweets:single} / {text:nonlinear:wordnet-nouns:single} / "
                        "{text:nonlinear:wordnet-verbs:single} / {text:nonlinear:drug-reviews:single} / "
                        "{text:nonlinear:fortune-topics:single}, LoTA {text:lota:tweets:single} / "
                        "{text:lota:wordnet-nouns:single} / {text:lota:wordnet-verbs:single} / "
                        "{text:lota:drug-reviews:single} / {text:lota:fortune-topics:single}"),
    ("docs/results.md", "budgets read off curves) to {text:talos:single_task_acc}"),
    ("docs/results.md", "single-task {text:talos-k0.9-lr0.0001:single_task_acc} against "
                        "{text:talos-k0.9:single_task_acc} at 1e-3 (k = 0.9 both), addition "
                        "{text:talos-k0.9-lr0.0001:addition_abs}"),
    ("docs/results.md", "TSV-Merge leads with {text:tsv:addition_abs} (not separated from Iso-CTS's "
                        "{text:iso_cts:addition_abs} or Iso-C's {text:iso_c:addition_abs}), then non-linear FT "
                        "{text:nonlinear:addition_abs}"),
    ("docs/results.md", "TaLoS adds to {text:talos:addition_abs}, the lowest main row"),
    ("docs/results.md", "TSV-Merge {text:tsv:negation_target}, non-linear FT {text:nonlinear:negation_target}, LoTA "
                        "{text:lota:negation_target}, TaLoS {text:talos:negation_target}"),
    ("docs/results.md", "TaLoS {text:talos:single_task_acc} against LoTA's {text:lota:single_task_acc} and L-LoRA's "
                        "{text:llora:single_task_acc}"),
)


def _render_quote(template: str, store: Store) -> str:
    import re

    from talos_core.schema import result_name

    tables: dict[tuple[str, str], pd.DataFrame] = {}

    def table(kind: str, suite: str) -> pd.DataFrame:
        if (kind, suite) not in tables:
            model = store.read_result("suite", suite)["model"]
            tables[kind, suite] = store.read_table(kind, result_name(suite, model))
        return tables[kind, suite]

    def value(m: re.Match) -> str:
        parts = m.group(1).split(":")
        if len(parts) == 3:
            suite, row, column = parts
            t = table("comparison", suite)
            v = t.loc[t["method"] == row, column]
        else:
            suite, row, task, what = parts
            t = table("single", suite)
            v = t.loc[(t["method"] == row) & (t["task"] == task) & (t["split"] == "test"),
                      {"single": "finetuned_acc", "zero": "zero_shot_acc"}[what]]
        assert len(v) == 1, f"{m.group(1)}: {len(v)} values in the store"
        return f"{100 * float(v.iloc[0]):.1f}"

    return re.sub(r"\{([^{}]+)\}", value, template)


@pytest.mark.parametrize("path,template", QUOTES)
def test_numbers_the_prose_copies_match_the_shipped_store(path, template):
    import re

    rendered = _render_quote(template, Store(SHIPPED))
    text = re.sub(r"\s+", " ", (REPO / path).read_text())
    assert re.sub(r"\s+", " ", rendered) in text, f"{path} does not say: {rendered}"
