"""Just enough PTX parsing for the runner: module header and kernel (``.entry``) signatures.

Not a PTX parser: it reads ``.version``, ``.target``, ``.address_size`` and every ``.entry``
declaration with its ``.param`` list, so a case's manifest can be checked against the kernel
before any GPU work. Bodies, ``.func`` helpers and everything else are skipped.

A parameter's size is ``size(type) * array_len`` (``.param .align 8 .b8 p[16]`` is 16 bytes),
which is what ``cuLaunchKernel`` copies for it; that size is the only thing the signature check
compares, because compilers freely declare floats as ``.b32``/``.u32`` and pointers as ``.u64``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from runner.errors import PtxError, SignatureError

__all__ = [
    "KIND_BYTES",
    "Entry",
    "Param",
    "PtxModule",
    "check_signature",
    "describe",
    "module_globals",
    "parse",
]

# Manifest parameter kinds and their size in the kernel's parameter buffer; "ptr" is a device buffer.
KIND_BYTES = {"i32": 4, "u32": 4, "i64": 8, "u64": 8, "f32": 4, "f64": 8, "ptr": 8}

# Bytes per element of each PTX fundamental type allowed in a kernel parameter.
_TYPE_BYTES = {
    **dict.fromkeys(("b8", "u8", "s8"), 1),
    **dict.fromkeys(("b16", "u16", "s16", "f16", "bf16"), 2),
    **dict.fromkeys(("b32", "u32", "s32", "f32"), 4),
    **dict.fromkeys(("b64", "u64", "s64", "f64"), 8),
    "b128": 16,
}
# State spaces a `.ptr` parameter may point into (`.param .u64 .ptr .global .align 8 p`).
_PTR_SPACES = frozenset({"global", "const", "local", "shared"})

_IDENT = r"[A-Za-z_$%][\w$]*"
# Strings are matched only so that `//` or `/*` inside a `.file "..."` path is not a comment.
_COMMENT_START = re.compile(r'"|//|/\*')
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"', re.DOTALL)
MAX_PTX_CHARS = 256 * 1024 * 1024  # far above any real module; bounds what a parse may cost
_VERSION = re.compile(r"^[^\S\n]*\.version\s+(\S+)", re.MULTILINE)
_TARGET = re.compile(r"^[^\S\n]*\.target\s+([^\n;]+)", re.MULTILINE)
_ADDRESS_SIZE = re.compile(r"^[^\S\n]*\.address_size\s+(\S+)", re.MULTILINE)
# `.visible`/`.weak`/`.extern` before `.entry` are not matched: a run of them with no `.entry`
# after would be rescanned from each one (quadratic), and nothing here reads them.
_ENTRY = re.compile(rf"(?<![\w.$%])\.entry\s+({_IDENT})\s*(\(?)")
_PARAM_TOKEN = re.compile(r"\[[^\]]*\]|[^\s\[\]]+")
# A module-scope variable in the .global state space (`.visible .global .align 4 .u32 n;`,
# `.global .b8 table[64] = {...};`); `.extern` ones are defined elsewhere and hold nothing here.
_GLOBAL_VAR = re.compile(
    rf"^[ \t]*((?:\.(?:visible|weak|extern|common)\s+)*)\.global\s+"
    rf"(?:\.(?:align\s+\d+|v[248])\s+)*\.(\w+)\s+({_IDENT})((?:\s*\[\s*\d*\s*\])*)",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: size_bytes = element size of ptx_type * (array_len or 1)."""

    name: str
    ptx_type: str
    size_bytes: int
    align: int | None
    array_len: int | None
    is_pointer_hint: bool

    def declaration(self) -> str:
        """Short PTX-like spelling for messages: `.param .f32`, `.param .b8[16]`."""
        dims = f"[{self.array_len}]" if self.array_len is not None else ""
        return f".param .{self.ptx_type}{dims}"


@dataclass(frozen=True)
class Entry:
    name: str
    params: tuple[Param, ...]


@dataclass(frozen=True)
class PtxModule:
    version: str | None
    target: str | None
    targets: tuple[str, ...]
    address_size: int | None
    entries: dict[str, Entry]


def _strip_comments(text: str) -> str:
    """Blank out comments, keeping their newlines so that line numbers stay right.

    One pass, linear in the text: a `/*` with no `*/` after it is left as text, and once one is
    found unclosed no later `/*` is searched for again (a regex with a lazy `.*?` would rescan
    the rest of the text from each unclosed opener: quadratic).
    """
    out: list[str] = []
    pos, n = 0, len(text)
    unclosed = False  # a `/*` without `*/` was seen: no later one closes either
    while pos < n:
        found = _COMMENT_START.search(text, pos)
        if found is None:
            break
        start = found.start()
        token = found.group(0)
        if token == '"':
            string = _STRING.match(text, start)
            end = string.end() if string else start + 1
            out.append(text[pos:end])
        elif token == "//":
            end = text.find("\n", start)
            end = n if end < 0 else end
            out.append(text[pos:start] + " ")
        else:  # "/*"
            close = -1 if unclosed else text.find("*/", start + 2)
            if close < 0:
                unclosed = True
                end = start + 2
                out.append(text[pos:end])
            else:
                end = close + 2
                out.append(text[pos:start] + " " + "\n" * text.count("\n", start, end))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _parse_param(decl: str, entry: str, index: int, line: int) -> Param:
    """Read one `.param [.align N] .type [.ptr [.space] [.align N]] name[[N]...]`."""
    where = f"PTX .entry {entry} (line {line}), parameter {index} {decl!r}"
    tokens = _PARAM_TOKEN.findall(decl)
    if not tokens or tokens[0] != ".param":
        raise PtxError(f"{where}: expected a declaration starting with .param")
    ptx_type = name = align = None
    is_pointer = False
    dims: list[int] = []
    pos = 1
    while pos < len(tokens):
        token = tokens[pos]
        pos += 1
        if name is not None:
            if not token.startswith("["):
                raise PtxError(f"{where}: unexpected {token!r} after the parameter name")
            size = token[1:-1].strip()
            if not size.isdigit() or int(size) == 0:
                raise PtxError(f"{where}: array size {token} must be a positive integer")
            dims.append(int(size))
        elif token == ".align":
            value = tokens[pos] if pos < len(tokens) else ""
            pos += 1
            if not value.isdigit() or int(value) & (int(value) - 1) or int(value) == 0:
                raise PtxError(f"{where}: .align needs a power of two, got {value!r}")
            align = int(value)
        elif token == ".ptr":
            is_pointer = True
        elif token.startswith(".") and token[1:] in _PTR_SPACES and is_pointer:
            pass
        elif token.startswith(".") and token[1:] in _TYPE_BYTES:
            if ptx_type is not None:
                raise PtxError(f"{where}: two types (.{ptx_type} and {token})")
            ptx_type = token[1:]
        elif token.startswith("."):
            raise PtxError(
                f"{where}: unsupported qualifier or type {token} "
                f"(expected .align N, .ptr or one of {', '.join('.' + t for t in _TYPE_BYTES)})"
            )
        elif re.fullmatch(_IDENT, token):
            name = token
        else:
            raise PtxError(f"{where}: {token!r} is not a parameter name")
    if ptx_type is None:
        raise PtxError(f"{where}: no type (expected e.g. .u64, .f32 or .b8)")
    if name is None:
        raise PtxError(f"{where}: no parameter name")
    array_len = math.prod(dims) if dims else None
    return Param(
        name=name,
        ptx_type=ptx_type,
        size_bytes=_TYPE_BYTES[ptx_type] * (array_len or 1),
        align=align,
        array_len=array_len,
        is_pointer_hint=is_pointer,
    )


def _header(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1).strip() if match else None


def parse(text: str | bytes) -> PtxModule:
    """Parse PTX module text (str or bytes, trailing NUL bytes allowed) into header and entries."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PtxError(f"PTX is not UTF-8 text: {exc}") from None
    if len(text) > MAX_PTX_CHARS:
        raise PtxError(f"PTX of {len(text)} characters is over the {MAX_PTX_CHARS} this reads")
    text = _strip_comments(text.rstrip("\0"))

    version = _header(_VERSION, text)
    if version is not None and not re.fullmatch(r"\d+\.\d+", version):
        raise PtxError(f"PTX .version {version!r}: expected MAJOR.MINOR such as 8.7")
    target_line = _header(_TARGET, text)
    targets = tuple(t.strip() for t in target_line.split(",")) if target_line else ()
    if any(not t for t in targets):
        raise PtxError(f"PTX .target {target_line!r}: empty item in the target list")
    address_text = _header(_ADDRESS_SIZE, text)
    if address_text is not None and address_text not in ("32", "64"):
        raise PtxError(f"PTX .address_size {address_text!r}: expected 32 or 64")

    entries: dict[str, Entry] = {}
    line, counted = 1, 0  # line numbers counted on from the previous entry: linear
    for match in _ENTRY.finditer(text):
        name = match.group(1)
        line += text.count("\n", counted, match.start())
        counted = match.start()
        params: tuple[Param, ...] = ()
        if match.group(2):
            close = text.find(")", match.end())
            if close < 0:
                raise PtxError(f"PTX .entry {name} (line {line}): parameter list has no ')'")
            body = text[match.end() : close]
            if body.strip():
                decls = [" ".join(d.split()) for d in body.split(",")]
                params = tuple(_parse_param(d, name, i, line) for i, d in enumerate(decls))
        entry = Entry(name=name, params=params)
        # An `.extern` declaration may precede the definition; they must agree.
        if name in entries and entries[name] != entry:
            raise PtxError(f"PTX .entry {name} (line {line}) is declared twice, differently")
        entries[name] = entry

    return PtxModule(
        version=version,
        target=targets[0] if targets else None,
        targets=targets,
        address_size=int(address_text) if address_text is not None else None,
        entries=entries,
    )


def check_signature(
    module: PtxModule, entry: str, expected: list[tuple[str, str]], *, where: str
) -> Entry:
    """Check that `entry` exists and its parameter sizes match the manifest's (name, kind) list.

    Parameters are compared by position (indices count from 0, as in nvcc's `_param_N`
    names) and by size only: KIND_BYTES[kind] must equal the PTX parameter's size_bytes.
    """
    found = module.entries.get(entry)
    if found is None:
        have = ", ".join(module.entries) or "(none)"
        raise SignatureError(f"{where}: PTX has no .entry {entry!r}; its entries are: {have}")
    for index, (name, kind) in enumerate(expected):
        if kind not in KIND_BYTES:
            raise SignatureError(
                f"{where}: parameter {index} {name!r} has unknown kind {kind!r} "
                f"(expected one of {', '.join(KIND_BYTES)})"
            )
    if len(expected) != len(found.params):
        manifest_side = ", ".join(f"{n}: {k}" for n, k in expected) or "nothing"
        ptx_side = ", ".join(f"{p.declaration()} {p.name}" for p in found.params) or "nothing"
        raise SignatureError(
            f"{where}: the manifest lists {len(expected)} parameters ({manifest_side}) "
            f"but PTX .entry {entry} declares {len(found.params)} ({ptx_side})"
        )
    for index, ((name, kind), param) in enumerate(zip(expected, found.params, strict=True)):
        if KIND_BYTES[kind] != param.size_bytes:
            raise SignatureError(
                f"{where}: parameter {index} {name!r} is {kind} ({KIND_BYTES[kind]} bytes) "
                f"in the manifest but {param.declaration()} ({param.size_bytes} bytes) "
                f"in PTX .entry {entry}"
            )
    return found


def module_globals(text: str | bytes) -> dict[str, int | None]:
    """Every variable the module defines in the `.global` state space, with its declared size
    in bytes (None when a dimension is left open): state a kernel keeps from one launch to the
    next, which cold mode restores before each launch (runner.gpu.driver.ModuleState)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    found: dict[str, int | None] = {}
    for match in _GLOBAL_VAR.finditer(_strip_comments(text.rstrip("\0"))):
        if ".extern" in match.group(1):
            continue
        ptx_type, name, dims = match.group(2), match.group(3), match.group(4)
        sizes = [d.strip("[] \t") for d in re.findall(r"\[[^\]]*\]", dims)]
        element = _TYPE_BYTES.get(ptx_type)
        if element is None or any(not d for d in sizes):
            found[name] = None
        else:
            found[name] = element * math.prod(int(d) for d in sizes)
    return found


def describe(module: PtxModule, text: str | bytes | None = None) -> dict:
    """The module summary stored in the result document; with the module's `text`, also the
    `.global` variables it defines (`globals`, {name: bytes}) when there are any."""
    summary = {
        "version": module.version,
        "target": module.target,
        "address_size": module.address_size,
        "entries": list(module.entries),
    }
    if text is not None and (variables := module_globals(text)):
        summary["globals"] = variables
    return summary
