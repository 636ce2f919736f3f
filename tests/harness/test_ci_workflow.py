"""The example workflow's trust boundaries, checked on its parsed structure.

The YAML is read with ruamel.yaml (check-jsonschema, in the test extra, depends on it), and each
job's `if:` is evaluated for the events that matter by a small evaluator of GitHub's expression
language (the operators, literals, property paths with `*`, contains() and the status functions
the workflow uses; types coerced as GitHub documents), so the tests ask "which jobs run for an
unlabelled pull request?" rather than grepping for strings.
"""

from __future__ import annotations

import math
import re

import pytest

from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "benchmark.yml"
LABEL = "benchmark"
REPO = "owner/compiler"


def load_workflow() -> dict:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        yaml = pytest.importorskip("yaml", reason="neither ruamel.yaml nor PyYAML is installed")
        return yaml.safe_load(WORKFLOW.read_text())
    return YAML(typ="safe").load(WORKFLOW.read_text())


# --- a small evaluator of GitHub Actions expressions --------------------------------------------

TOKEN = re.compile(
    r"\s*(?:('(?:[^']|'')*')|(&&|\|\||==|!=|!|\(|\)|,)|([A-Za-z_][\w.*-]*)|(\d+(?:\.\d+)?))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    text = text.strip()
    while at < len(text):
        found = TOKEN.match(text, at)
        if not found:
            raise ValueError(f"cannot read {text[at:]!r}")
        string, op, name, number = found.groups()
        at = found.end()
        if string is not None:
            out.append(("str", string[1:-1].replace("''", "'")))
        elif op is not None:
            out.append(("op", op))
        elif number is not None:
            out.append(("num", number))
        else:
            out.append(("name", name))
    return out


def _number(value) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return math.nan
    return math.nan


def _equal(a, b) -> bool:
    """GitHub's ==: strings case-insensitively; mismatched types compared as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if type(a) is type(b) and not isinstance(a, (str, int, float, bool)) and a is not None:
        return a is b
    return _number(a) == _number(b)


def _truthy(value) -> bool:
    return not (value is None or value is False or value == "" or value == 0)


def _lookup(context: dict, path: str):
    values = [context]
    spread = False
    for part in path.split("."):
        if part == "*":
            values = [x for v in values if isinstance(v, list) for x in v]
            spread = True
            continue
        values = [v.get(part) if isinstance(v, dict) else None for v in values]
    return values if spread else values[0]


def evaluate(expression: str, context: dict):
    tokens = _tokens(expression)
    at = 0

    def peek():
        return tokens[at] if at < len(tokens) else ("end", "")

    def take(kind=None, value=None):
        nonlocal at
        token = peek()
        if (kind and token[0] != kind) or (value and token[1] != value):
            raise ValueError(f"{expression!r}: expected {value or kind}, found {token}")
        at += 1
        return token

    def either():
        left = both()
        while peek() == ("op", "||"):
            take()
            right = both()
            left = left if _truthy(left) else right
        return left

    def both():
        left = negation()
        while peek() == ("op", "&&"):
            take()
            right = negation()
            left = right if _truthy(left) else left
        return left

    def negation():
        if peek() == ("op", "!"):
            take()
            return not _truthy(negation())
        return comparison()

    def comparison():
        left = primary()
        if peek() in (("op", "=="), ("op", "!=")):
            op = take()[1]
            right = primary()
            return _equal(left, right) == (op == "==")
        return left

    def primary():
        kind, value = peek()
        if (kind, value) == ("op", "("):
            take()
            inner = either()
            take("op", ")")
            return inner
        take()
        if kind == "str":
            return value
        if kind == "num":
            return float(value)
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if peek() == ("op", "("):
            take()
            args = []
            while peek() != ("op", ")"):
                args.append(either())
                if peek() == ("op", ","):
                    take()
            take("op", ")")
            return call(value, args)
        return _lookup(context, value)

    def call(name, args):
        status = context.get("status", "success")
        if name == "contains":
            search, item = args
            if isinstance(search, list):
                return any(_equal(x, item) for x in search)
            return str(item).casefold() in str(search or "").casefold()
        if name == "always":
            return True
        if name == "cancelled":
            return status == "cancelled"
        if name == "success":
            return status == "success"
        if name == "failure":
            return status == "failure"
        raise ValueError(f"{expression!r}: function {name}() is not known to this evaluator")

    result = either()
    if at != len(tokens):
        raise ValueError(f"{expression!r}: left over {tokens[at:]}")
    return result


def test_the_evaluator_follows_githubs_rules():
    ctx = {"github": {"event": {"pull_request": {"labels": [{"name": "Benchmark"}]}}}}
    assert evaluate("contains(github.event.pull_request.labels.*.name, 'benchmark')", ctx)
    assert not evaluate("contains(github.event.pull_request.labels.*.name, 'bench')", ctx)
    assert evaluate("needs.x.outputs.result != ''", {}) is False  # null == '' (both 0)
    assert evaluate("'a' == 'A' && !(1 == 2)", {}) is True
    assert evaluate("github.nothing || 'fallback'", {}) == "fallback"


# --- events ---------------------------------------------------------------------------------------


def push(ref="refs/heads/main") -> dict:
    return {"github": {"event_name": "push", "ref": ref, "repository": REPO, "event": {}}}


def pull_request(action, labels=(), label=None, head=REPO) -> dict:
    event = {
        "action": action,
        "pull_request": {
            "labels": [{"name": n} for n in labels],
            "head": {"repo": {"full_name": head}},
        },
    }
    if label is not None:
        event["label"] = {"name": label}
    ref = "refs/pull/7/merge"
    return {
        "github": {"event_name": "pull_request", "ref": ref, "repository": REPO, "event": event}
    }


def running_jobs(workflow: dict, context: dict, *, result: str = "results/r.json") -> set[str]:
    """The jobs that run for `context`, in `needs` order: a job whose needs did not run is
    skipped; `result` is what the benchmark job reports as its output when it ran."""
    ran: set[str] = set()
    jobs = workflow["jobs"]
    for name, job in jobs.items():  # the workflow lists each job after the ones it needs
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        ctx = {
            **context,
            "needs": {n: {"outputs": {"result": result} if n in ran else {}} for n in needs},
        }
        condition = job.get("if")
        if needs and not all(n in ran for n in needs) and "cancelled()" not in str(condition):
            continue
        if condition is None or _truthy(evaluate(str(condition), ctx)):
            ran.add(name)
    return ran


def writes(job: dict) -> set[str]:
    permissions = job.get("permissions") or {}
    if permissions in ("write-all",):
        return {"*"}
    return {scope for scope, level in permissions.items() if level == "write"}


# --- the tests ------------------------------------------------------------------------------------


def test_pull_requests_run_only_when_the_benchmark_label_is_on():
    workflow = load_workflow()
    triggers = workflow.get("on", workflow.get(True))
    assert triggers["pull_request"]["types"] == ["labeled", "synchronize"]
    assert "pull_request_target" not in triggers  # it would run untrusted code with secrets
    cases = {
        "an unlabelled pull request": pull_request("synchronize"),
        "another label applied": pull_request("labeled", labels=["docs"], label="docs"),
        "another label applied to a labelled one": pull_request(
            "labeled", labels=[LABEL, "docs"], label="docs"
        ),
        "a fork's labelled pull request": pull_request(
            "labeled", labels=[LABEL], label=LABEL, head="someone/fork"
        ),
    }
    for what, context in cases.items():
        assert running_jobs(workflow, context) == set(), what
    labelled = pull_request("labeled", labels=[LABEL], label=LABEL)
    pushed = pull_request("synchronize", labels=[LABEL])
    assert running_jobs(workflow, labelled) == {"benchmark"}
    assert running_jobs(workflow, pushed) == {"benchmark"}


def test_only_the_job_of_trusted_pushes_to_main_may_write():
    workflow = load_workflow()
    top = workflow.get("permissions")
    assert top == {"contents": "read"}, top  # jobs start read-only
    writers = {name for name, job in workflow["jobs"].items() if writes(job)}
    assert writers == {"publish"}
    assert writes(workflow["jobs"]["publish"]) == {"contents", "pages", "id-token"}
    assert running_jobs(workflow, push()) == {"benchmark", "publish"}
    assert running_jobs(workflow, push("refs/heads/feature")) == {"benchmark"}
    assert running_jobs(workflow, {"github": {**push()["github"], "event_name": "workflow_dispatch"}}) == {"benchmark"}  # fmt: skip
    # a run that left no document stores nothing; one where a case failed is stored too
    assert running_jobs(workflow, push(), result="") == {"benchmark"}
    assert running_jobs(workflow, {**push(), "status": "failure"}) == {"benchmark", "publish"}
    for context in (
        pull_request("labeled", labels=[LABEL], label=LABEL),
        pull_request("synchronize", labels=[LABEL]),
    ):
        for name in running_jobs(workflow, context):
            assert not writes(workflow["jobs"][name]), name


def test_secrets_and_history_stay_where_they_belong():
    workflow = load_workflow()
    jobs = workflow["jobs"]
    benchmark, publish = jobs["benchmark"], jobs["publish"]
    assert "secrets." not in str(workflow.get("env", "")) + str(benchmark.get("env", ""))
    secret_steps = [s["name"] for s in benchmark["steps"] if "secrets." in str(s)]
    assert secret_steps == ["SSH key for the rented machine", "Correctness and benchmark on one rented GPU"]  # fmt: skip
    assert "secrets." not in str(publish)
    # everything that writes history or the site is in the publish job
    scripts = {
        name: " ".join(str(s.get("run", "")) for s in job["steps"]) for name, job in jobs.items()
    }
    uses = {name: [str(s.get("uses", "")) for s in job["steps"]] for name, job in jobs.items()}
    assert "--trusted" in scripts["publish"] and "--trusted" not in scripts["benchmark"]
    assert "git push" not in scripts["benchmark"] and "harness dashboard" in scripts["publish"]
    assert any(u.startswith("actions/deploy-pages") for u in uses["publish"])
    assert not any(
        u.startswith(("actions/deploy-pages", "benchmark-action/")) for u in uses["benchmark"]
    )
    assert publish["environment"]["name"] == "github-pages"


def test_a_pull_request_gets_a_summary_and_its_paired_base_head_comparison():
    """Base and head run on the one rented machine (harness run --base-bundle --head-bundle), so
    `harness pr` may gate; nothing compares with a result from another rented host."""
    steps = load_workflow()["jobs"]["benchmark"]["steps"]
    assert not any("harness compare" in s.get("run", "") for s in steps)
    pr = pull_request("synchronize", labels=[LABEL])
    ran = {"steps": {"run": {"outputs": {"result": "results/r.json"}}}}
    paired = next(s for s in steps if "harness pr" in s.get("run", ""))
    assert evaluate(paired["if"], {**pr, **ran}) and not evaluate(paired["if"], {**push(), **ran})
    assert '--fail-on "$PR_FAIL_ON"' in paired["run"] and '"$GITHUB_STEP_SUMMARY"' in paired["run"]
    assert load_workflow()["env"]["PR_FAIL_ON"] == "${{ vars.KERNELGAP_PR_FAIL_ON || 'slower' }}"
    base = next(s for s in steps if "bundle-base" in s.get("run", ""))
    assert evaluate(base["if"], pr) and not evaluate(base["if"], push())
    assert "github.event.pull_request.base.sha" in base["env"]["BASE_SHA"]
    rental = next(s for s in steps if "harness run" in s.get("run", ""))
    assert "--base-bundle bundle-base --head-bundle bundle" in rental["run"]
    summary = next(s for s in steps if "harness summary" in s.get("run", ""))
    assert evaluate(summary["if"], {**pr, **ran}) and '"$GITHUB_STEP_SUMMARY"' in summary["run"]


def test_the_rental_is_pinned_priced_and_budgeted():
    workflow = load_workflow()
    step = next(s for s in workflow["jobs"]["benchmark"]["steps"] if "harness run" in s.get("run", ""))  # fmt: skip
    script = " ".join(step["run"].split())
    assert 'kernelgap-harness run "$SUITE" --target vast:"$GPU"' in script
    assert '--max-price "$MAX_PRICE"' in script and '-- --budget-s "$BUDGET_S"' in script
    # kernelgap installed from a pinned source: --pytest-gpu (kernelgap's own tests) needs a checkout
    assert "--pytest-gpu" not in script
    env = workflow["env"]  # every setting once, at the top, with its default
    assert env["GPU"] == "${{ vars.KERNELGAP_GPU || 'NVIDIA H200' }}"
    assert env["MAX_PRICE"] == "${{ vars.KERNELGAP_MAX_PRICE || '4.00' }}"
    assert env["BUDGET_S"].startswith("${{ vars.KERNELGAP_BUDGET_S || ")
    assert env["KERNELGAP_SOURCE"] == "${{ vars.KERNELGAP_SOURCE }}"
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    assert not any(s.get("env", {}).keys() & env.keys() for s in steps), "a setting given twice"
    scripts = " ".join(str(s.get("run", "")) for s in steps)
    assert "benchmarks/" not in scripts and "pip install -e" not in scripts
    assert "python -m runner" not in scripts and "python -m harness" not in scripts
    names = [s.get("name", s.get("uses", "")) for s in workflow["jobs"]["benchmark"]["steps"]]
    compiler = names.index("Build the compiler under test")
    bundle = next(i for i, n in enumerate(names) if "PTX bundle" in n)
    assert compiler < bundle < names.index("Correctness and benchmark on one rented GPU")
