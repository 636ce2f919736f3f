"""Print how the house is arranged: harness/'s tree, the modules at its root, the import arrows
between its parts that run back up (both ends reach each other), and functions over 80 lines.

    python tools/house_metrics.py [ROOT]        # ROOT: a checkout (default: this one)

Run it on two checkouts (e.g. `git worktree add /tmp/main main`) to compare before and after.
A part of harness/ is a subpackage, or a module at its root; an arrow runs back up when the
import graph between parts has a cycle through it. Stdout only: a short plain-text report.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.architecture.test_import_direction import imports

LONG_LINES = 80
CODE_DIRS = ("harness", "runner", "protocol", "tools", "benchmarks", "examples")


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under root/package."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def part(name: str) -> str:
    """The part of harness a module belongs to: its subpackage, or itself at the root."""
    pieces = name.split(".")
    return ".".join(pieces[:2])


def part_edges(root: Path) -> set[tuple[str, str]]:
    mods = modules(root, "harness")
    edges = set()
    for name, path in mods.items():
        for target in imports(path, root=root):
            if target in mods and part(target) != part(name):
                edges.add((part(name), part(target)))
    return edges


def back_arrows(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Edges whose target reaches back to their source."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    return sorted((a, b) for a, b in edges if reaches(b, a))


def long_functions(root: Path) -> list[tuple[int, str]]:
    found = []
    for folder in CODE_DIRS:
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else ():
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > LONG_LINES:
                        found.append((length, f"{path.relative_to(root)}:{node.name}"))
    return sorted(found, reverse=True)


def tree(root: Path) -> list[str]:
    lines = []
    for folder in sorted(p for p in (root / "harness").rglob("*") if p.is_dir()):
        if folder.name == "__pycache__":
            continue
        count = len(list(folder.glob("*.py")))
        lines.append(f"  {folder.relative_to(root)}/  ({count} modules)")
    return lines


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1]).resolve()
    at_root = sorted(p.name for p in (root / "harness").glob("*.py"))
    arrows = back_arrows(part_edges(root))
    long = long_functions(root)
    print(f"house metrics of {root}")
    print("harness tree:")
    print("\n".join(tree(root)))
    print(f"modules at harness/'s root: {len(at_root)}: {' '.join(at_root)}")
    print(f"arrows running back up: {len(arrows)}")
    for a, b in arrows:
        print(f"  {a} -> {b}")
    print(f"functions over {LONG_LINES} lines: {len(long)}")
    for length, where in long:
        print(f"  {length:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
