"""State a module keeps across launches: its `.global` variables, saved as loaded and restored.

A kernel can keep a counter or a cache in a module-scope `.global` variable and so behave
differently from one launch to the next (work on every k-th launch, return a result cached by
the input's content). A snapshot of every such variable, taken right after the load and before
any launch, lets cold mode put them back before each launch (device-to-device copies queued
on the stream, outside any timing), so no launch sees what an earlier one left.
"""

from __future__ import annotations

from runner.gpu import driver, ptx


class ModuleState:
    """The `.global` variables of one loaded module and a device copy of each as loaded."""

    def __init__(self, module: driver.Module, names: list[str], stream: driver.Stream):
        """Saves every variable of `names`; one the driver does not find (a name the PTX
        scan took for a variable that is not one) is listed in `missing` instead."""
        self.label = module.label
        self.variables: dict[str, driver.Buffer] = {}
        self.missing: list[str] = []
        self._saved: list[tuple[driver.Buffer, driver.Buffer]] = []
        try:
            for name in names:
                try:
                    variable = module.global_variable(name)
                except driver.CudaError as exc:
                    if exc.name != "CUDA_ERROR_NOT_FOUND":
                        raise
                    self.missing.append(name)
                    continue
                saved = driver.Buffer(variable.nbytes)
                saved.copy_from(variable, stream)
                self.variables[name] = variable
                self._saved.append((variable, saved))
            stream.synchronize()  # the copies are taken before anything launches
        except BaseException:
            self.free()
            raise

    @classmethod
    def of(cls, module: driver.Module, text: str, stream: driver.Stream) -> ModuleState | None:
        """The state of `module` loaded from PTX `text`, or None when it declares no `.global`."""
        names = list(ptx.module_globals(text))
        return cls(module, names, stream) if names else None

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.variables.values())

    def restore(self, stream: driver.Stream) -> None:
        """Queue a copy of every variable's saved bytes back into it."""
        for variable, saved in self._saved:
            variable.copy_from(saved, stream)

    def free(self) -> None:
        for _, saved in self._saved:
            saved.free()
        self._saved.clear()
