"""The documentation site builds with MkDocs in strict mode from docs/ and the pages beside the code: every
method's page carries its configuration table generated from its config dataclass, and a broken link fails the
build."""
import shutil
from pathlib import Path

import pytest

from fedlab import docsite

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_with_every_page_and_generated_tables(tmp_path):
    site = docsite.build(tmp_path / "site", staged=tmp_path / "staged")
    for page in ("index.html", "getting-started/index.html", "concepts/index.html", "cli/index.html",
                 "api/index.html", "methods/fedmkt/index.html", "results/elsa/index.html", "readme/index.html"):
        assert (site / page).is_file(), page
    fedmkt = (tmp_path / "staged" / "docs" / "methods" / "fedmkt.md").read_text()
    assert "## Configuration" in fedmkt and "| `method.topk` | `int` | `16` | K: top-K logits" in fedmkt
    assert "`fedlab config`" in (tmp_path / "staged" / "docs" / "cli.md").read_text()
    # a figure of a results page is copied beside the site's pages
    assert list((tmp_path / "staged" / "docs" / "files" / "experiments" / "elsa").glob("forest.png"))


def test_a_link_to_a_missing_file_fails_the_build(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    (root / "docs" / "faults.md").write_text((root / "docs" / "faults.md").read_text() + "\n[gone](nowhere.md)\n")
    for p in ("README.md", "ARCHITECTURE.md", "RESULTS.md"):
        shutil.copy(ROOT / p, root / p)
    (root / "benchmarks").mkdir()
    (root / "experiments").mkdir()
    (root / "fedlab" / "methods").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "README.md", root / "benchmarks" / "README.md")
    with pytest.raises(docsite.BrokenLinks, match="docs/faults.md: nowhere.md"):
        docsite.stage(tmp_path / "out", root)


def test_method_readmes_show_the_configuration_their_dataclass_declares(tmp_path):
    """A README's `config` block is the table generated from the method's config dataclass: filled by
    `python -m fedlab.docsite config`, and every committed one is current."""
    from fedlab.evidence.claims import block_markers

    begin, end = block_markers("config")
    stale = [p for p, text in docsite.config_blocks().items() if p.read_text() != text]
    assert not stale, f"run `python -m fedlab.docsite config`: {stale}"
    readme = tmp_path / "fedlab" / "methods" / "fedmkt" / "README.md"
    readme.parent.mkdir(parents=True)
    readme.write_text(f"# fedmkt\n\n{begin}\n{end}\n")
    assert docsite.write_config_blocks(tmp_path) == [readme]
    text = readme.read_text()
    assert "| `method.topk` | `int` | `16` |" in text and text.endswith(f"{end}\n")
    assert docsite.write_config_blocks(tmp_path) == []


SHAPE = ["The paper and what fedlab implements", "Equations as implemented", "What travels between the parties",
         "Configuration", "Running its tables"]
SYSTEMS = ["fedproxy", "fedmkt", "coplms", "floe", "elsa"]


def test_every_method_page_has_the_one_shape():
    """Each method page's sections come in one order; the five systems' pages also state their deviations and
    their positive control, and every page carries its generated configuration table."""
    import re

    from fedlab.docsite import ROOT

    bad = {}
    for readme in sorted((ROOT / "fedlab" / "methods").glob("*/README.md")):
        text = readme.read_text()
        heads = re.findall(r"^## (.+)$", text, re.M)
        want = SHAPE[:4] + (["Deviations from the paper, and why", "Positive control"]
                            if readme.parent.name in SYSTEMS else []) + SHAPE[4:]
        got = [h for h in heads if h in want + ["Deviations from the paper, and why", "Positive control"]]
        if [h for h in got if h in want] != want or "<!-- /config -->" not in text:
            bad[readme.parent.name] = heads
    assert bad == {}
