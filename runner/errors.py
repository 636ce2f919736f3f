"""Every error the runner raises, in one module: bad input (exit 2), no GPU (exit 2), a case
failed in a phase (a record in the document), a tool missing, the launch service.

The hierarchy is protocol.errors'; runner.cli maps bad input to exit 2 in one place (BAD_INPUT)."""

from __future__ import annotations

__all__ = [
    "BAD_INPUT",
    "STICKY_ERRORS",
    "AssemblyError",
    "BadInput",
    "BuildError",
    "BundleError",
    "CheckFailed",
    "CudaError",
    "DeclarationError",
    "DisassemblyError",
    "ExprError",
    "ExprProblem",
    "FileRefused",
    "InputError",
    "InputsModified",
    "IntegrityFailed",
    "LaunchArgumentError",
    "LaunchLimitError",
    "LockError",
    "ManifestError",
    "NcuOutputError",
    "NoGpuError",
    "NoKernelTimed",
    "OwnLaunchError",
    "PhaseError",
    "PtxError",
    "RecheckFailed",
    "ReferenceTimeout",
    "Refused",
    "RequestError",
    "ResetRefused",
    "SanitizerOutputError",
    "SignatureError",
    "TimerUnavailable",
    "TimingError",
    "ToolMissing",
    "ToolchainMissing",
    "Unavailable",
    "UnknownArch",
]


# bad input: the suite, its manifest, lock and bundle, a request (exit 2 from the CLI)


class ManifestError(ValueError):
    """The manifest is malformed; the message names the file, case, field and expectation."""


class ReferenceTimeout(ManifestError):
    """The reference did not return (or its module did not import) within the case's limit."""


class ExprError(ValueError):
    """A manifest expression that cannot be parsed or evaluated.

    The text is ``"<where>: expression '<text>': <problem>"`` (a long text is shortened); the
    three parts are kept whole as attributes so callers can reformat them.
    """

    def __init__(self, where: str, expression: object, problem: str):
        self.where = where
        self.expression = expression
        self.problem = problem
        shown = repr(expression)
        if len(shown) > 120:  # the limit admits 1000 characters; keep messages readable
            shown = f"{shown[:100]}... ({len(str(expression))} characters)"
        super().__init__(f"{where}: expression {shown}: {problem}")


class ExprProblem(Exception):
    """Raised inside the walkers; turned into ExprError where `where` and the text are known."""


class LaunchLimitError(ValueError):
    """A launch past what the GPU (or any GPU) allows; the message names the field."""


class LockError(ValueError):
    """The manifest and its lock disagree; the message says which case and what to do."""


class BundleError(ValueError):
    """The bundle is unreadable, or does not belong to this suite's sources."""


class InputError(Exception):
    """The paths or files given cannot be linted; `problems` names each one (file, line)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class RequestError(ValueError):
    """A request that cannot be run as given; `phase` is where it was found ("input")."""

    def __init__(self, phase: str, message: str):
        super().__init__(message)
        self.phase = phase
        self.message = message


class LaunchArgumentError(ValueError):
    """A command line of the compatible launcher that cannot be parsed."""


class Refused(Exception):
    """The command line cannot be run; `str()` is the line the C++ runner prints."""


class FileRefused(Exception):
    """A request file or PTX file that cannot make a request; `str()` names the file."""


class DeclarationError(ValueError):
    """A verification declaration, an implementation or a case is declared wrongly."""


class InputsModified(DeclarationError):
    """An implementation wrote the shared case.inputs."""


class PtxError(ValueError):
    """PTX text that this module cannot read (malformed header or parameter)."""


class SignatureError(ValueError):
    """A PTX entry whose parameters do not match what the manifest declares."""


class TimerUnavailable(RuntimeError):
    """The timer asked for cannot be used here: CUPTI for cold mode's "auto", or "cupti"."""


# no GPU, and the driver's errors


class NoGpuError(RuntimeError):
    """No usable NVIDIA driver or device on this machine."""


class CudaError(RuntimeError):
    """A driver call failed. `name` is the CUresult name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS."""

    def __init__(self, call: str, name: str, text: str, detail: str = ""):
        self.call = call
        self.name = name
        self.text = text
        self.detail = detail
        message = f"{call}: {name}: {text}"
        if detail:
            message += f"\n{detail}"
        super().__init__(message)

    @property
    def sticky(self) -> bool:
        return self.name in STICKY_ERRORS


# Errors after which the context is unusable: the process that owns it must be replaced.
STICKY_ERRORS = frozenset(
    {
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_CONTAINED",
        "CUDA_ERROR_TRAP",
    }
)


# a case failed, with its phase (the document's error record)


class PhaseError(RuntimeError):
    """A case (or one launch) failed in `phase` (inputs, check, load, timing, ...): the
    document's error record, with the CUDA error's name where there is one, or a finished
    error `document` to answer with."""

    def __init__(
        self,
        phase: str,
        message: str,
        cuda_error: str | None = None,
        document: dict | None = None,
    ):
        super().__init__(message)
        self.phase, self.cuda_error, self.document = phase, cuda_error, document


class TimingError(RuntimeError):
    """A measurement could not be taken as specified (e.g. the blocking kernel timed out)."""


class NoKernelTimed(TimingError):
    """The CUPTI timer found nothing to time in a sample of `name` (it launches no kernel the
    timer counts); with timer "auto" the comparison is timed by events instead."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


class OwnLaunchError(RuntimeError):
    """CUPTI did not report one of the runner's own launches: its records cannot be told apart."""


class CheckFailed(AssertionError):
    """An implementation's outputs did not match the reference: nothing was timed."""


class RecheckFailed(AssertionError):
    """Outputs of a timed sample did not match the reference on that sample's fresh inputs."""


class ResetRefused(AssertionError):
    """An implementation's reset makes its outputs (or the call depends on work reset did)."""


class IntegrityFailed(AssertionError):
    """A timed row was flagged: its work left the timed window, or its rate is impossible.
    `comparison` holds the rows (the flagged ones without a ratio)."""

    def __init__(self, message: str, comparison=None):
        super().__init__(message)
        self.comparison = comparison


# a tool missing or failing (compilers, ptxas, nvdisasm, ncu, compute-sanitizer)


class BuildError(RuntimeError):
    """The source could not be turned into PTX; the message carries the compiler's output."""


class ToolchainMissing(BuildError):
    """The toolchain's program is not installed here (the implementation is skipped, with this reason)."""


class ToolMissing(RuntimeError):
    """An NVIDIA tool is not installed here; the message says how to get it."""


class AssemblyError(RuntimeError):
    """ptxas refused the PTX; the message is its output."""


class DisassemblyError(RuntimeError):
    """The disassembler failed, or its listing has no such function."""


class NcuOutputError(ValueError):
    """ncu's output has no metric table for the kernel; the message quotes what it said."""


class SanitizerOutputError(ValueError):
    """compute-sanitizer's report has no summary line; the message quotes what it said."""


class UnknownArch(ValueError):
    """No SM limits are known for this target."""


# the launch service


class Unavailable(Exception):
    """No service could be reached or started; the caller launches in its own process."""


class BadInput(Exception):
    """Bad input or environment found by a command: exit 2 and `error: <message>`."""


# what `python -m runner` ends on with exit 2 and one line `error: <message>` (runner.cli.Commands)
BAD_INPUT = (BadInput, ManifestError, LockError, BundleError, TimerUnavailable, NoGpuError)
