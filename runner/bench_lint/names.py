"""What the names of a benchmark file refer to, from its imports, without importing anything.

runner.bench is recognised under whatever name the file binds it to (`from runner import bench`,
`from runner import bench as kb`, `import runner.bench as bench`, `import runner.bench`,
`from runner.bench import Runner, cases`, module-level `Runner = bench.Runner`), and so are the
timers the lint refuses (BL003), however they were imported (`from time import perf_counter as
pc` too).
"""

from __future__ import annotations

import ast

__all__ = [
    "BENCH",
    "BENCH_NAMES",
    "EVENT_TIMING_ARGUMENT",
    "TIMING_FUNCTIONS",
    "Names",
    "canonical",
    "is_timing",
]

BENCH = "runner.bench"
# runner.bench re-exports these from its submodules; one spelling per object
BENCH_SUBMODULES = ("workload", "comparison", "checking")
BENCH_NAMES = {f"{BENCH}.{name}" for name in ("cases", "params", "Runner", "Case", "check")}

TIMING_FUNCTIONS = frozenset(
    [
        *(
            f"time.{clock}{suffix}"
            for clock in ("perf_counter", "time", "monotonic", "process_time", "thread_time")
            for suffix in ("", "_ns")
        ),
        "triton.testing.do_bench",
        "triton.testing.do_bench_cudagraph",
        "torch.utils.benchmark.Timer",
        "torch.utils.benchmark.utils.timer.Timer",
        "cupyx.profiler.benchmark",
        "cupy.cuda.get_elapsed_time",
    ]
)
TIMING_MODULES = ("timeit",)  # every name in these modules times

# event type -> (the keyword that switches timing, its position among the arguments or None
# when keyword-only); "enable_*" is off by default, "disable_*" leaves timing on by default
EVENT_TIMING_ARGUMENT = {
    "torch.cuda.Event": ("enable_timing", 0),
    "torch.cuda.streams.Event": ("enable_timing", 0),
    "torch.Event": ("enable_timing", None),
    "cupy.cuda.Event": ("disable_timing", 1),
    "cupy.cuda.stream.Event": ("disable_timing", 1),
}


def canonical(name: str) -> str:
    for submodule in BENCH_SUBMODULES:
        prefix = f"{BENCH}.{submodule}."
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest and "." not in rest:
            return f"{BENCH}.{rest}"
    return name


def is_timing(name: str | None) -> bool:
    if name is None:
        return False
    return name in TIMING_FUNCTIONS or any(name.startswith(f"{m}.") for m in TIMING_MODULES)


class Names:
    """What the names of one module refer to, from its imports, without importing anything.

    Imports anywhere in the file count (a test that imports time inside its body still times);
    a name bound at module level wins over the same name bound inside a function."""

    def __init__(self, tree: ast.Module):
        self.bound: dict[str, str] = {}
        self.star_modules: list[str] = []
        for node in ast.walk(tree):  # breadth first: module-level imports come first
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.bound.setdefault(alias.asname, alias.name)
                    else:  # `import runner.bench` binds `runner`
                        root = alias.name.split(".")[0]
                        self.bound.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        self.star_modules.append(node.module)
                    else:
                        local = alias.asname or alias.name
                        self.bound.setdefault(local, f"{node.module}.{alias.name}")
        for stmt in tree.body:  # module-level aliases: `Runner = bench.Runner`
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Name | ast.Attribute)
            ):
                resolved = self.qualified(stmt.value)
                if resolved is not None:
                    self.bound.setdefault(stmt.targets[0].id, resolved)

    def qualified(self, node: ast.expr) -> str | None:
        """`bench.Runner` -> "runner.bench.Runner"; None when the root name was not imported."""
        attributes = []
        while isinstance(node, ast.Attribute):
            attributes.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.bound.get(node.id) or self._from_star_import(node.id)
        if root is None:
            return None
        return canonical(".".join([root, *reversed(attributes)]))

    def _from_star_import(self, name: str) -> str | None:
        for module in self.star_modules:
            candidate = canonical(f"{module}.{name}")
            if (
                candidate in BENCH_NAMES
                or is_timing(candidate)
                or candidate in EVENT_TIMING_ARGUMENT
            ):
                return candidate
        return None

    def bench_alias(self) -> str:
        """How the file spells runner.bench, for messages ("bench" when it imports names only)."""
        for local, target in self.bound.items():
            if target == BENCH:
                return local
        if self.bound.get("runner") == "runner":
            return BENCH
        return "bench"

    def imports_bench(self) -> bool:
        return any(
            target == BENCH or target.startswith(f"{BENCH}.") for target in self.bound.values()
        ) or any(m == BENCH or m.startswith(f"{BENCH}.") for m in self.star_modules)
