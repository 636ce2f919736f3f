"""Imports run one way: between harness's stages, and between runner's layers.

Each rule reads the real source with `ast` (every import, lazy ones in functions included), so
an arrow running back up fails here instead of silently growing a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

# harness's parts, and the parts each may import. A part is a subpackage, or a module at the
# root. escaping and errors are leaves every part may use; they import no part.
HARNESS_MAY_IMPORT = {
    "escaping": set(),
    "errors": {"escaping"},
    "history": {"escaping"},
    "analysis": {"escaping", "history"},
    "reporting": {"escaping", "history", "analysis"},
    "running": {"escaping", "errors", "history"},
    "explain": {"escaping", "history", "reporting"},
    "dashboard": {"escaping", "history", "analysis", "reporting", "explain"},
    "client": set(),
    "commands": {
        "escaping",
        "errors",
        "history",
        "analysis",
        "reporting",
        "running",
        "explain",
        "dashboard",
    },
    "cli": {"commands"},
    "__main__": {"cli"},
}
for _part in HARNESS_MAY_IMPORT.keys() - {"escaping", "errors"}:
    HARNESS_MAY_IMPORT[_part].add("errors")

# runner's parts that must stay below others: the suite definition runs with no GPU (and no
# measurement or orchestration); the GPU access knows the definition's inputs and nothing above.
RUNNER_MUST_NOT_IMPORT = {
    "definition": {"gpu", "measurement", "execution", "launch", "bench"},
    "gpu": {"measurement", "execution", "launch", "bench", "explain"},
}


# runner's layers, lowest first (docs/architecture.md): a part imports only parts of the layers
# below its own. cuda_bindings is a leaf (the driver's bindings); explain finds NVIDIA's programs
# and reads their output and knows no suite, so the definition (its toolchains find nvcc there; a
# bundle records the static analysis) and the execution (--profile, --sanitize) both use it.
# document is the one assembly of result documents, under both front ends (execution: the suite;
# bench: the Python API), which stay apart; launch, the command lines and __main__ sit on top.
RUNNER_LAYERS = [
    {"errors"},
    {"cuda_bindings"},
    {"explain"},
    {"definition"},
    {"gpu"},
    {"measurement"},
    {"document"},
    {"execution", "bench"},
    {"launch", "bench_lint"},
    {"cli_suite"},
    {"cli"},
    {"__main__"},
]
RUNNER_MAY_IMPORT = {
    part: set().union(*RUNNER_LAYERS[:level])
    for level, layer in enumerate(RUNNER_LAYERS)
    for part in layer
}


def imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every absolute module name the file imports (relative imports resolved)."""
    parts = path.relative_to(root).with_suffix("").parts
    package = parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def part_of(path: Path, package: str) -> str:
    """The part of `package` a file belongs to: its first folder, or its module at the root."""
    rel = path.relative_to(ROOT / package).with_suffix("").parts
    return rel[0]


def parts_imported(path: Path, package: str) -> set[str]:
    return {
        name.split(".")[1]
        for name in imports(path)
        if name.startswith(f"{package}.") and len(name.split(".")) > 1
    }


def crossings(package: str) -> list[tuple[str, str, Path]]:
    """(part, the part it imports, the file) for every import between parts of `package`."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        own = part_of(path, package)
        found.extend((own, other, path) for other in parts_imported(path, package) - {own})
    return found


def back_arrows(package: str, may_import: dict[str, set[str]]) -> list[str]:
    """'file: part imports other' for every import of a part that `may_import` does not allow."""
    return [
        f"{path.relative_to(ROOT)}: {own} imports {other}"
        for own, other, path in crossings(package)
        if other in may_import and other not in may_import[own]
    ]


def test_harness_parts_are_all_known():
    parts = {part_of(p, "harness") for p in (ROOT / "harness").rglob("*.py")} - {"__init__"}
    assert parts == set(HARNESS_MAY_IMPORT), "a new part of harness needs its place in the rule"


def test_harness_imports_run_one_way():
    assert back_arrows("harness", HARNESS_MAY_IMPORT) == []


def test_harness_never_imports_the_runner():
    wrong = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "harness").rglob("*.py")
        if any(name == "runner" or name.startswith("runner.") for name in imports(path))
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("package", "above"), [("runner", {"harness"}), ("protocol", {"harness", "runner"})]
)
def test_the_lower_packages_never_import_the_ones_above(package, above):
    # The runner ships alone to a GPU box or a Dask worker (harness.running.shipping: runner/ and
    # protocol/ only), so an import of harness there fails only on the box.
    wrong = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / package).rglob("*.py")
        for name in sorted(imports(path))
        if name.split(".")[0] in above
    ]
    assert wrong == []


@pytest.mark.parametrize("part", sorted(RUNNER_MUST_NOT_IMPORT), ids=lambda part: f"runner.{part}")
def test_runner_part_stays_below(part):
    wrong = [
        f"{path.relative_to(ROOT)}: {own} imports {other}"
        for own, other, path in crossings("runner")
        if own == part and other in RUNNER_MUST_NOT_IMPORT[part]
    ]
    assert wrong == []


def test_runner_parts_are_all_known():
    parts = {part_of(p, "runner") for p in (ROOT / "runner").rglob("*.py")} - {"__init__"}
    assert parts <= set(RUNNER_MAY_IMPORT), "a new part of runner needs its layer in the rule"


def test_runner_imports_run_down_its_layers():
    assert back_arrows("runner", RUNNER_MAY_IMPORT) == []


def test_the_reader_sees_lazy_and_relative_imports(tmp_path):
    """What a back arrow usually hides in: an import inside a function, a relative import."""
    module = tmp_path / "harness" / "history" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("from ..reporting import summary\n\ndef f():\n    import harness.running\n")
    assert {"harness.reporting.summary", "harness.running"} <= imports(module, root=tmp_path)
