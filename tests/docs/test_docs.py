"""The README and docs/ stay true: every link between them resolves, and every `runner` or
`harness` command they show names a command that exists and options that command takes.

A command is found wherever the docs write `python -m runner X`, `python3 -m harness X`,
`kernelgap-runner X` or `harness X` in code; its `--options` are read up to the end of the
code span or line and checked against the click command's own parameters, so a renamed flag
or a removed command fails here before a reader finds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from harness.cli import main as harness_main
from runner.cli import main as runner_main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
INDENTED = re.compile(r"^    (\S.*)$", re.M)
COMMAND = re.compile(
    r"(?:python3? -m |kernelgap-)(runner|harness)\s+([a-z][a-z-]*)([^\n|;&]*)"
    r"|^(harness|runner)\s+([a-z][a-z-]+)([^\n|;&]*)",
    re.M,
)
GROUPS = {"runner": runner_main, "harness": harness_main}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {
        _slug(line.lstrip("#"))
        for line in page.read_text().splitlines()
        if line.startswith("#") and not line.startswith("#!")
    }


def _links():
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not fetched here (no network in CI)
            yield page, target


@pytest.mark.parametrize(
    "page,target", list(_links()), ids=lambda v: v if isinstance(v, str) else v.name
)
def test_every_relative_link_resolves(page, target):
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{page.relative_to(ROOT)}: no heading #{anchor}"


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    if command.name == "launch":  # the C++ runner's command line, parsed by launch_command
        from runner.launch.launch_command import OPTIONS

        names.update(OPTIONS)
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _shown_commands():
    for page in PAGES:
        text = page.read_text()
        fenced = [body for lang, body in FENCE.findall(text) if lang not in ("python", "toml")]
        prose = FENCE.sub("", text)
        for code in fenced + SPAN.findall(prose) + INDENTED.findall(prose):
            for found in COMMAND.finditer(code):
                program, name, rest = found.group(1, 2, 3)
                if program is None:
                    program, name, rest = found.group(4, 5, 6)
                yield page.relative_to(ROOT).as_posix(), program, name, rest or ""


SHOWN = list(_shown_commands())


def test_the_docs_show_commands_of_both_programs():
    programs = {program for _, program, _, _ in SHOWN}
    assert programs == {"runner", "harness"}, programs
    assert len(SHOWN) > 40  # the docs describe the command line; a parser that finds none is broken


@pytest.mark.parametrize("page,program,name,rest", SHOWN, ids=lambda v: str(v)[:40])
def test_every_command_the_docs_show_exists_with_its_options(page, program, name, rest):
    group = GROUPS[program]
    if name not in group.commands:
        # prose such as "the harness never ..." is not a command: only code is read, and in
        # code a bare word after the program name must be one of its commands
        pytest.fail(
            f"{page}: `{program} {name}` is not a command of {program} ({sorted(group.commands)})"
        )
    command = group.commands[name]
    known = _options(command)
    own = re.split(r"(?<!\S)--(?!\S)", rest, maxsplit=1)[0]  # after a bare --: another program's
    for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", own):
        assert option in known, f"{page}: `{program} {name}` has no option {option}"


def test_the_readme_is_one_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"


def test_the_readmes_worked_example_declares_what_the_bundled_suite_does():
    """The README's case is the bundled suite's axpy_f64 in small: same buffers (with their
    `valid` ranges, without which `runner check` prints a note), params and tolerance."""
    import tomllib

    readme = (ROOT / "README.md").read_text()
    (example,) = [body for lang, body in FENCE.findall(readme) if lang == "toml"]
    (shown,) = tomllib.loads(example)["case"]
    bundled = tomllib.loads((ROOT / "benchmarks" / "cases.toml").read_text())["case"]
    (axpy,) = [case for case in bundled if case["id"] == shown["id"]]
    for key in ("buffers", "params", "tolerance", "grid", "block", "dims", "check_dims"):
        assert shown[key] == axpy[key], f"README.md's {shown['id']}: {key} differs from the suite's"
