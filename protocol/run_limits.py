"""Bounds of a run request that the runner, the host's client and schemas/run-request.schema.json
share: a number past them is refused as input, never carried into a timer or a deadline, and
nesting past them is refused before anything (a schema check, an error message's repr) recurses
into it."""

from __future__ import annotations

# One day: far past any kernel a test launches, and far inside what a thread's timed wait, a
# timestamp or a deadline sum can hold (threading.TIMEOUT_MAX is about 9.2e9 s on Linux).
MAX_TIMEOUT_S = 86400.0
# One array's host copy is bounded: a device array is allocated whole, so `count` alone can
# ask for any size.
MAX_ARRAY_BYTES = 1 << 36
# The JSON text of one request a JSON runner reads (stdin or a request file), so its cost stays
# predictable.
MAX_REQUEST_BYTES = 1 << 30
# A run request nests 4 levels (request, params, a param, its values).
MAX_DEPTH = 16

_CONTAINERS = frozenset((dict, list))  # what a JSON decoder builds


def nested_deeper_than(document, limit: int = MAX_DEPTH) -> bool:
    """Whether `document` nests dicts and lists more than `limit` levels (1 for a flat dict),
    found without recursion; a long list of numbers is passed over in C."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if depth > limit:
            return True
        items = value.values() if isinstance(value, dict) else value
        if _CONTAINERS.isdisjoint(map(type, items)):
            continue
        stack.extend((item, depth + 1) for item in items if type(item) in _CONTAINERS)
    return False
