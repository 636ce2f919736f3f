"""Print how the house is arranged: issue 48's figures for runner/, harness/ and protocol/
(modules, modules defining exception classes, getattr probes of a backend, comment and docstring
lines carrying measured figures, import circles), harness/'s tree, the import arrows between its
parts that run back up, and functions over 80 lines.

    python tools/house_metrics.py [ROOT]        # ROOT: a checkout (default: this one)
    python tools/house_metrics.py --trace [SUITE [CASE]]    # on a GPU box: one case's path

--trace runs `python -m runner bench SUITE --case CASE -o <tmp>` (default: tests/gpu_suite's
first case) with a profile hook in the runner and in its case worker (a sitecustomize on
PYTHONPATH), and prints the project files whose functions one case's run calls (imports are not
counted), from the command line to the written document, and the calls back into a file already
left (distinct caller -> file pairs).
It needs a GPU: without one the run stops at the driver (exit 2) and no figure is printed.

Run it on two checkouts (e.g. `git worktree add /tmp/main main`) to compare before and after.
A part of harness/ is a subpackage, or a module at its root; an arrow runs back up when the
import graph between parts has a cycle through it. Stdout only: a short plain-text report.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.architecture.test_import_direction import imports

LONG_LINES = 80
CODE_DIRS = ("harness", "runner", "protocol", "tools", "benchmarks", "examples")
HOUSE = ("runner", "harness", "protocol")
# the objects a timing strategy or a wrapper drives: probing them by name is an undeclared interface
BACKEND_NAMES = {"backend", "self.inner", "device", "self.device", "runner.device"}
# a line carries a measured figure when it names a GPU model, a numbered session or a design file
# that is not in the repository, or a decimal number with a unit or as a ratio (x1.0027, 0.54%,
# 1.3 us, [0.949, 0.988]) or microseconds and nanoseconds (80 ns); whole numbers of coarser
# units ("50 ms", "10 s") are mostly defaults and settings, and are not counted
FIGURE = re.compile(
    r"\b[HAB]1?[0-9]00\b|\bsession \d+|DESIGN\.md"
    r"|\bx\d+\.\d{2,}"
    r"|\d+\.\d+ ?(?:%|[unm]?s\b|us\b|µs|[KMG]i?B\b|[MG]Hz|GB/s|TB/s|TFLOP)"
    r"|\b\d+ ?(?:us|ns|µs)\b"
    r"|\[\d+\.\d+, \d+\.\d+\]"
)


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


# the packages, lowest first: each imports only those before it (the runner ships alone)
PACKAGES = ("protocol", "runner", "harness")


def package_arrows(root: Path) -> list[str]:
    """'module -> import' for every import of a package above the module's own (PACKAGES)."""
    found = []
    for level, package in enumerate(PACKAGES):
        above = set(PACKAGES[level + 1 :])
        for name, path in sorted(modules(root, package).items()):
            for target in sorted(imports(path, root=root)):
                if target.split(".")[0] in above:
                    found.append(f"{name} -> {target}")
    return found


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


def house_files(root: Path) -> list[Path]:
    return [p for folder in HOUSE for p in sorted((root / folder).rglob("*.py"))]


def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def exception_modules(root: Path) -> list[str]:
    """Files defining a class that derives (through the house's own classes) from BaseException."""
    classes = {}  # class name -> (file, base names)
    for path in house_files(root):
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                classes.setdefault(node.name, []).append((path, bases))
    known = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
    raised = {n for n in known if issubclass(getattr(builtins, n), BaseException)}
    raised |= {"CudaError", "ClickException", "UsageError", "BadParameter", "ValidationError"}
    while True:
        more = {
            name
            for name, defs in classes.items()
            if name not in raised and any(set(bases) & raised for _, bases in defs)
        }
        if not more:
            break
        raised |= more
    files = {
        str(path.relative_to(root))
        for name, defs in classes.items()
        if name in raised
        for path, bases in defs
        if set(bases) & raised
    }
    return sorted(files)


def backend_probes(root: Path) -> list[str]:
    """getattr/hasattr calls on a backend, a wrapped backend or a device (BACKEND_NAMES), or on
    `self` inside a class named *Backend: capabilities asked for by name, not declared."""
    found = []
    for path in house_files(root):
        tree = _parsed(path)
        for cls in [None, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
            scope = tree if cls is None else cls
            for node in ast.walk(scope):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                if node.func.id not in ("getattr", "hasattr") or not node.args:
                    continue
                target = ast.unparse(node.args[0])
                on_self = target == "self" and cls is not None and cls.name.endswith("Backend")
                if (target in BACKEND_NAMES and cls is None) or on_self:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def _paragraphs(path: Path) -> list[list[tuple[int, str]]]:
    """Every comment block (consecutive comment lines) and docstring paragraph (lines between
    blank ones; a string statement anywhere is a docstring) of a file, as (line, text) pairs."""
    source = path.read_text(encoding="utf-8")
    blocks: list[list[tuple[int, str]]] = []
    last = -2
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            if token.start[0] != last + 1:
                blocks.append([])
            blocks[-1].append((token.start[0], token.string))
            last = token.start[0]
    for node in ast.walk(ast.parse(source)):  # docstrings, attribute docstrings included
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            blocks.append([])
            for i, text in enumerate(value.value.splitlines()):
                if not text.strip():
                    blocks.append([])
                else:
                    blocks[-1].append((value.lineno + i, text))
    return [b for b in blocks if b]


def figure_lines(root: Path) -> tuple[list[str], int]:
    """Comment and docstring lines that carry a measured figure (FIGURE), and the lines of the
    paragraphs holding them (the history told around the figures)."""
    found, around = [], 0
    for path in house_files(root):
        for block in _paragraphs(path):
            hits = [(n, t) for n, t in block if FIGURE.search(t)]
            found += [f"{path.relative_to(root)}:{n}: {t.strip()}" for n, t in hits]
            around += len(block) if hits else 0
    return found, around


def import_circles(root: Path) -> list[list[str]]:
    """Strongly connected groups of more than one module in the house's import graph."""
    mods = {name: path for pkg in HOUSE for name, path in modules(root, pkg).items()}
    graph = {  # importing a submodule runs its packages first: not an arrow back up
        name: {t for t in imports(path, root=root) if t in mods and not name.startswith(f"{t}.")}
        for name, path in mods.items()
    }
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                item = stack.pop()
                on.discard(item)
                group.append(item)
                if item == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(groups)


def house(root: Path) -> list[str]:
    """Issue 48's figures, one line each, with what each counts."""
    files = house_files(root)
    excepts, probes = exception_modules(root), backend_probes(root)
    (figures, around), circles = figure_lines(root), import_circles(root)
    lines = [
        f"modules in runner/harness/protocol: {len(files)}",
        f"  under 60 lines: {sum(len(p.read_text().splitlines()) < 60 for p in files)}",
        f"modules defining exception classes: {len(excepts)}",
        f"getattr/hasattr probes of a backend or device: {len(probes)}",
        *(f"  {p}" for p in probes),
        f"comment/docstring lines carrying measured figures: {len(figures)}"
        f" (in paragraphs of {around} lines)",
        *(f"  {name}: {count}" for name, count in _per_file(figures)[:15]),
        f"import circles: {len(circles)}",
        *(f"  {' <-> '.join(group)}" for group in circles),
    ]
    return lines


def _per_file(lines: list[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for line in lines:
        name = line.split(":", 1)[0]
        counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def tree(root: Path) -> list[str]:
    lines = []
    for folder in sorted(p for p in (root / "harness").rglob("*") if p.is_dir()):
        if folder.name == "__pycache__":
            continue
        count = len(list(folder.glob("*.py")))
        lines.append(f"  {folder.relative_to(root)}/  ({count} modules)")
    return lines


# the profile hook --trace puts in every Python process of the run (as sitecustomize.py):
# project files entered, in order, and calls into a file entered before and not on the stack
TRACER = """
import json, os, sys, threading
_OUT, _ROOT = os.environ["KERNELGAP_TRACE_OUT"], os.environ["KERNELGAP_TRACE_ROOT"]
_HOUSE = tuple(os.path.join(_ROOT, p) + os.sep for p in ("runner", "harness", "protocol"))
_seen, _backs, _local = {}, {}, threading.local()

def _dump():
    with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w") as f:
        json.dump({"files": list(_seen), "backs": [list(k) for k in _backs]}, f)

def _hook(frame, event, arg):
    name = frame.f_code.co_filename
    if event not in ("call", "return") or not name.startswith(_HOUSE):
        return
    if frame.f_code.co_name == "<module>":  # an import runs the file; a call is what counts
        return
    stack = _local.__dict__.setdefault("stack", [])
    if event == "return":
        if stack:
            stack.pop()
        return
    top = stack[-1] if stack else None
    back = name != top and name in _seen and name not in stack and (top, name) not in _backs
    if (back or name not in _seen) and not _importing(frame):
        _backs.update({(top, name): True} if back else {})
        _seen[name] = True
        _dump()
    stack.append(name)

def _importing(frame):  # a class body or decorator an import runs
    frame = frame.f_back
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") != "__main__":
            return True
        frame = frame.f_back
    return False

threading.setprofile(_hook)
sys.setprofile(_hook)
"""


def trace(root: Path, suite: Path, case: str | None) -> int:
    """Run one case of SUITE under the profile hook; print the files entered and calls back."""
    if case is None:
        case = re.search(r'^id = "([^"]+)"', suite.read_text(), re.M).group(1)
    with tempfile.TemporaryDirectory() as tmp:
        hook, out = Path(tmp, "hook"), Path(tmp, "out")
        hook.mkdir(), out.mkdir()
        (hook / "sitecustomize.py").write_text(TRACER)
        env = dict(os.environ, KERNELGAP_TRACE_OUT=str(out), KERNELGAP_TRACE_ROOT=str(root))
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(hook), str(root), env.get("PYTHONPATH")])
        )
        command = [sys.executable, "-m", "runner", "bench", str(suite), "--case", case]
        done = subprocess.run([*command, "-o", str(Path(tmp, "result.json"))], env=env, cwd=root)
        if done.returncode == 2 or not Path(tmp, "result.json").exists():
            print(
                f"--trace: runner bench ended with exit {done.returncode}: no figure",
                file=sys.stderr,
            )
            return 2
        files, backs = [], set()
        for part in sorted(out.glob("*.json"), key=lambda p: p.stat().st_mtime):
            found = json.loads(part.read_text())
            files += [f for f in found["files"] if f not in files]
            backs |= {tuple(b) for b in found["backs"]}
    short = lambda f: str(Path(f).relative_to(root)) if f else "(start)"  # noqa: E731
    print(
        f"one case's run ({suite.relative_to(root) if suite.is_relative_to(root) else suite}, "
        f"case {case}), from `runner bench` to the written document, runner and its worker:"
    )
    print(f"files entered: {len(files)}")
    print("\n".join(f"  {short(f)}" for f in files))
    print(f"calls back into a file already left: {len(backs)} (caller -> file):")
    print("\n".join(f"  {short(a)} -> {short(b)}" for a, b in sorted(backs, key=str)))
    return 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--trace"]:
        root = Path(__file__).resolve().parents[1]
        suite = Path(argv[2]).resolve() if len(argv) > 2 else root / "tests/gpu_suite/cases.toml"
        return trace(root, suite, argv[3] if len(argv) > 3 else None)
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1]).resolve()
    at_root = sorted(p.name for p in (root / "harness").glob("*.py"))
    arrows = back_arrows(part_edges(root))
    long = long_functions(root)
    print(f"house metrics of {root}")
    print("\n".join(house(root)))
    print("harness tree:")
    print("\n".join(tree(root)))
    print(f"modules at harness/'s root: {len(at_root)}: {' '.join(at_root)}")
    print(f"arrows running back up: {len(arrows)}")
    for a, b in arrows:
        print(f"  {a} -> {b}")
    upward = package_arrows(root)
    print(f"imports of a package above (protocol < runner < harness): {len(upward)}")
    print("\n".join(f"  {line}" for line in upward))
    print(f"functions over {LONG_LINES} lines: {len(long)}")
    for length, where in long:
        print(f"  {length:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
