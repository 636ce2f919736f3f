"""100,000 fuzzed lines through one `python -m runner serve` (tests/support/serve_fuzz.py makes them):
one schema-valid answer per non-blank line, in order, each with its line's id (or null where the
line was refused before its id could be read), no answer from the service's last-resort handler,
and the service alive at the end, answering a final valid request. No GPU needed: without one a
valid request is answered with an environment error, and on a GPU the fuzzer's PTX has no
kernel, so nothing is ever launched."""

from __future__ import annotations

import collections
import re
import subprocess
import sys

import orjson

from protocol.validation import validate
from tests.conftest import ROOT
from tests.support.serve_fuzz import lines

LINES = 100_000
MAX_LINE_BYTES = 4096  # so overlong lines stay cheap to send
# The message of runner.launch.serve's last resort for an exception nobody planned for.
UNPLANNED = re.compile(r"unexpected [A-Z]\w*(Error|Exception|Exit)\b")


def test_every_fuzzed_line_gets_one_valid_answer_and_the_service_lives_on():
    made = lines(seed=33, count=LINES, max_line_bytes=MAX_LINE_BYTES)
    kinds = collections.Counter(line.kind for line in made)
    assert min(kinds.values()) >= 1 and len(kinds) >= 11, kinds  # every mutation was made
    done = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--max-line-bytes", str(MAX_LINE_BYTES)],
        input=b"".join(line.data + b"\n" for line in made),
        capture_output=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"Traceback" not in done.stderr, done.stderr[-4000:]
    expected = [line for line in made if not line.blank]
    answers = [orjson.loads(raw) for raw in done.stdout.splitlines()]
    assert len(answers) == len(expected)
    phases = collections.Counter()
    for number, (line, answer) in enumerate(zip(expected, answers, strict=True)):
        validate(answer, "run-response", f"answer {number} ({line.kind})")
        assert answer["id"] in line.ids, (number, line.kind, line.data[:200], answer)
        assert not UNPLANNED.search(answer.get("error", "")), (line.kind, answer)
        phases[answer.get("phase")] += 1
        if line.kind in ("valid", "final"):  # a valid request is never refused as input
            assert answer.get("phase") != "input", (line.data[:300], answer)
    assert answers[-1]["id"] == "final"
    assert answers[-1]["phase"] in ("environment", "signature"), answers[-1]
    assert phases["input"] >= len(expected) // 3, phases
