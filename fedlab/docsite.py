"""The documentation site: the hand-written pages of docs/ and the pages the repository already holds — the
README, each method's README with its configuration table generated from the config dataclass, each system's
results page with its figures, the experiments' READMEs, the benchmarks — plus a CLI reference from the
argument parser and an API reference (mkdocstrings), built by MkDocs with the Material theme, warnings as errors
(a broken link or a missing page fails the build).

    python -m fedlab.docsite build [--out site]    # stage the pages into site_src/, then build the HTML
    python -m fedlab.docsite serve                 # the same, served with live reload
    python -m fedlab.docsite config                # fill each method README's configuration table

MkDocs builds from one folder, so the pages that live beside their code are staged into it with their links
rewritten: a link to a repository file that has a page goes to that page, a figure is copied beside the page,
and a link to any other file (a YAML, a script) becomes its path in code font.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from fedlab.evidence.records import ROOT

LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
METHODS = ROOT / "fedlab" / "methods"


def page_map(root: Path = ROOT) -> dict[str, str]:
    """{repository path: page path in the site} of every Markdown file the site shows."""
    out = {"README.md": "readme.md", "ARCHITECTURE.md": "house.md", "RESULTS.md": "results/overview.md",
           "benchmarks/README.md": "benchmarks.md"}
    for p in sorted((root / "docs").rglob("*.md")):
        out[p.relative_to(root).as_posix()] = p.relative_to(root / "docs").as_posix()
    for p in sorted((root / "fedlab" / "methods").glob("*/README.md")):
        out[p.relative_to(root).as_posix()] = f"methods/{p.parent.name}.md"
    for p in sorted((root / "experiments").glob("*/*.md")):
        rel = p.relative_to(root).as_posix()
        system = p.parent.name
        out[rel] = (f"results/{system}.md" if p.name == "RESULTS.md" else f"experiments/{system}.md"
                    if p.name == "README.md" else f"results/{system}-{p.stem.lower()}.md")
    for p in sorted((root / "experiments").glob("*/*/RESULTS.md")):
        out[p.relative_to(root).as_posix()] = f"results/{p.parent.parent.name}-{p.parent.name}.md"
    return out


def _rel(target: str, start: str) -> str:
    import posixpath

    return posixpath.relpath(target, posixpath.dirname(start) or ".")


class BrokenLinks(ValueError):
    """Links of the repository's Markdown to files that do not exist."""


def rewrite_links(text: str, source: str, page: str, pages: dict[str, str], root: Path, out: Path,
                  broken: list[str] | None = None) -> str:
    """`text` of the repository file `source`, staged as `page`: relative links re-pointed (module docstring);
    a link to a path that does not exist is appended to `broken` as "source: target"."""
    import posixpath

    def sub(m: re.Match) -> str:
        bang, label, target = m.groups()
        if re.match(r"^[a-z]+:|^#|^/", target):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if repo in pages:
            return f"{bang}[{label}]({_rel(pages[repo], page)}{'#' + anchor if anchor else ''})"
        if (root / repo).is_file() and repo.endswith((".png", ".svg", ".jpg")):
            asset = f"files/{repo}"
            (out / asset).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / repo, out / asset)
            return f"{bang}[{label}]({_rel(asset, page)})"
        if not (root / repo).exists() and broken is not None:
            broken.append(f"{source}: {target}")
        return f"`{repo}`" if not label or label.strip("`") == repo or label.strip("`") == path else f"{label} (`{repo}`)"
    return LINK.sub(sub, text)


def config_table(name: str) -> list[str]:
    """The `method.` keys of the method registered as `name`, a Markdown table generated from its config dataclass
    (the help each field carries); [] for a folder that registers no method under its own name."""
    from fedlab import registry
    from fedlab.config_help import markdown_table

    if name not in registry.method_names():
        return []
    return markdown_table(registry.get(name).config_cls, "method").splitlines()


def config_blocks(root: Path = ROOT) -> dict[Path, str]:
    """{README: its text with the `config` block filled} for every method README that has the block's markers."""
    from fedlab.evidence.claims import block_markers

    begin, end = block_markers("config")
    out = {}
    for readme in sorted((Path(root) / "fedlab" / "methods").glob("*/README.md")):
        text = readme.read_text()
        if begin in text and end in text:
            block = "\n".join([begin, *config_table(readme.parent.name), end])
            out[readme] = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _, b=block: b, text, flags=re.S)
    return out


def write_config_blocks(root: Path = ROOT) -> list[Path]:
    """Fill every method README's `config` block; returns the READMEs whose text changed."""
    changed = [p for p, text in config_blocks(root).items() if p.read_text() != text]
    for p in changed:
        p.write_text(config_blocks(root)[p])
    return changed


def method_config_section(name: str, text: str) -> list[str]:
    """The configuration table appended to a method page whose README has no `config` block."""
    from fedlab.evidence.claims import block_markers

    if block_markers("config")[0] in text or not config_table(name):
        return []
    return ["", "## Configuration", "", "Every key of `method.` for `method.name: " + name + "`, generated from its "
            "config dataclass (`fedlab config show CONFIG method.` prints the resolved values).", "",
            *config_table(name)]


def cli_reference() -> list[str]:
    """Every `fedlab` subcommand's help, from the parser the command line uses."""
    from fedlab.cli import build_parser

    parser = build_parser()
    out = ["# Command-line reference", "", "Generated from `fedlab`'s argument parser.", "", "```text",
           parser.format_help().rstrip(), "```"]
    for action in parser._subparsers._group_actions:              # argparse keeps the subparsers here
        for name, sub in action.choices.items():
            out += ["", f"## `fedlab {name}`", "", "```text", sub.format_help().rstrip(), "```"]
    return out


API = ["# API reference", "", "The evidence engine, the pieces a table script uses:", "", "::: fedlab.evidence",
       "", "::: fedlab.evidence.claims", "", "::: fedlab.evidence.controls", "", "::: fedlab.evidence.verdicts", "",
       "::: fedlab.evidence.collapse", "", "::: fedlab.evidence.page", "", "Writing a method:", "",
       "::: fedlab.registry", "", "::: fedlab.validation"]


def stage(out: Path, root: Path = ROOT) -> list[tuple[str, str]]:
    """Write every page into `out` (emptied first); returns the navigation as (title, page)."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pages = page_map(root)
    broken: list[str] = []
    for source, page in pages.items():
        text = (root / source).read_text()
        if source.startswith("fedlab/methods/"):
            text = text.rstrip("\n") + "\n" + "\n".join(method_config_section(Path(source).parent.name, text)) + "\n"
        (out / page).parent.mkdir(parents=True, exist_ok=True)
        (out / page).write_text(rewrite_links(text, source, page, pages, root, out, broken))
    if broken:
        raise BrokenLinks(f"{len(broken)} link(s) to files that do not exist: " + "; ".join(broken))
    (out / "cli.md").write_text("\n".join(cli_reference()) + "\n")
    (out / "api.md").write_text("\n".join(API) + "\n")
    title = lambda page: re.search(r"^# (.+)$", (out / page).read_text(), re.M)
    nav = [(t.group(1) if (t := title(p)) else p, p) for p in sorted(set(pages.values()) | {"cli.md", "api.md"})]
    return nav


# the top-level pages in reading order (others follow, by name)
ORDER = ("getting-started.md", "concepts.md", "results.md", "reproducibility.md", "cluster.md", "plan.md", "faults.md",
         "benchmark.md", "configs.md", "architecture.md", "house.md", "dependencies.md", "papers.md", "cli.md",
         "api.md", "benchmarks.md")


def config(out: Path, site: Path, nav: list[tuple[str, str]]) -> dict:
    """The MkDocs configuration of the staged pages."""
    section = lambda prefix: [{t: p} for t, p in nav if p.startswith(prefix)]
    rank = {p: i for i, p in enumerate(ORDER)}
    top = sorted(([{t: p}, p] for t, p in nav if "/" not in p and p not in ("index.md", "readme.md")),
                 key=lambda x: (rank.get(x[1], len(ORDER)), x[1]))
    top = [entry for entry, _ in top]
    return {
        "site_name": "fedlab", "docs_dir": str(out), "site_dir": str(site), "strict": True,
        "theme": {"name": "material", "features": ["navigation.sections", "search.highlight"]},
        "markdown_extensions": ["tables", "toc", "admonition", "pymdownx.superfences",
                                {"pymdownx.arithmatex": {"generic": True}}],
        # the methods' equations ($…$, as GitHub renders them) typeset by MathJax; offline they show as LaTeX
        "extra_javascript": ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"],
        "plugins": ["search", {"mkdocstrings": {"handlers": {"python": {
            "paths": [str(ROOT)], "options": {"show_source": False, "docstring_style": None, "members_order":
                                              "source", "show_root_heading": True}}}}}],
        "validation": {"links": {"not_found": "warn", "anchors": "warn", "absolute_links": "warn",
                                 "unrecognized_links": "warn"}},
        "nav": [{"Home": "index.md"}, {"README": "readme.md"}, *top,
                {"Methods": section("methods/")}, {"Results": section("results/")},
                {"Experiments": section("experiments/")}],
    }


def build(site: Path, staged: Path | None = None, root: Path = ROOT, serve: bool = False) -> Path:
    """Stage the pages and build (or serve) the site with warnings as errors; returns the site folder."""
    import yaml

    staged = Path(staged or root / "site_src")
    nav = stage(staged / "docs", root)
    cfg = staged / "mkdocs.yml"
    cfg.write_text(yaml.safe_dump(config(staged / "docs", Path(site), nav), sort_keys=False, allow_unicode=True))
    if serve:
        from mkdocs.commands.serve import serve as mk_serve

        mk_serve(config_file=str(cfg), strict=True)
        return Path(site)
    from mkdocs.commands.build import build as mk_build
    from mkdocs.config import load_config

    mk_build(load_config(config_file=str(cfg), strict=True))
    return Path(site)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="build fedlab's documentation site (MkDocs, warnings as errors)")
    ap.add_argument("action", choices=["build", "serve", "config"],
                    help="config: fill every method README's configuration table from its config dataclass")
    ap.add_argument("--out", default=str(ROOT / "site"), help="the HTML site's folder (default: site/)")
    args = ap.parse_args(argv)
    if args.action == "config":
        for p in write_config_blocks():
            print(f"wrote {p.relative_to(ROOT)}")
        return 0
    try:
        site = build(Path(args.out), serve=args.action == "serve")
    except Exception as e:                  # MkDocs' strict mode: a warning aborts the build
        print(f"fedlab: error: the documentation site did not build: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"site written to {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
