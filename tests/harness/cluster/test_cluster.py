"""`harness run --cluster` end to end on a real scheduler and worker processes on 127.0.0.1,
whose runner is the stand-in (conftest.py); the real runner's refusal on a CPU is at the end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import ClusterError, TrustError
from harness.running import cluster as engine
from harness.running import trust
from protocol.validation import load_result
from tests.conftest import gpu_unavailable_reason
from tests.harness.cluster.conftest import A100, CASES, H100, ROOT, SWEPT, SWEPT_POINTS

SETTINGS = {"job_timeout_s": 120.0, "commit": "0123456789ab"}


def _run(cluster, stand_in, tmp_path, runner_args=(), lines=None, deal=None):
    suite, shipment = stand_in
    out = tmp_path / "results"
    said = lines if lines is not None else []
    settings = {**SETTINGS, "out": out, "deal": deal}
    status = engine.run(cluster.address, suite, shipment, list(runner_args), settings, said.append)
    documents = {}
    for path in sorted(out.glob("*.json")):
        document = json.loads(path.read_text())
        documents[document["environment"]["device"]["name"]] = document
    return status, documents, said, out


def test_every_case_is_dealt_once_whole_to_one_gpu_and_merged_into_one_valid_document(
    cluster, stand_in, tmp_path
):
    cluster.set_control(sleep_s={"axpy_f64": 1.0, "matmul_f64_naive": 1.0})
    status, documents, said, out = _run(cluster, stand_in, tmp_path)
    assert status == 0
    assert list(documents) == [H100]
    document = documents[H100]
    assert [c["id"] for c in document["cases"]] == list(CASES)  # the suite's order
    workers = {w["name"] for w in document["environment"]["workers"]}
    assert workers == {"gpu0", "gpu1", "gpu2"}
    for case in document["cases"]:
        assert case["device"]["worker"] in workers
        assert case["device"]["uuid"].endswith(f"-{case['device']['index']}")
        assert set(case["implementations"]) >= {"cuda", "llvm"}
    assert document["summary"]["cases"] == len(CASES) and document["summary"]["ok"] == len(CASES)
    # the workers and their GPUs were listed before anything ran
    first_case = next(i for i, line in enumerate(said) if "started on" in line)
    listed = [i for i, line in enumerate(said) if "GPU 0: NVIDIA H100" in line]
    assert listed and listed[0] < first_case
    assert any("queued" in line and "left" in line for line in said)
    # each case's own document was kept as it arrived
    kept = sorted(p.name for p in next(out.glob("*-cluster")).glob("*.json"))
    assert kept == sorted(f"{c}.json" for c in CASES)


def test_a_worker_killed_mid_case_has_its_case_run_again_on_another_worker_of_its_model(
    cluster, stand_in, tmp_path
):
    cluster.set_control(kill_first=["axpy_f64"], sleep_s={"scale_i64": 0.5})
    status, documents, said, _ = _run(cluster, stand_in, tmp_path)
    assert status == 0, said
    axpy = next(c for c in documents[H100]["cases"] if c["id"] == "axpy_f64")
    killed_on = (cluster.marks / "killed-axpy_f64").read_text()
    assert axpy["status"] == "ok"
    assert axpy["device"]["index"] != int(killed_on)  # another worker, another GPU
    assert any("was lost mid-case" in note for note in axpy["notes"])
    assert any(f"worker gpu{killed_on} was lost during axpy_f64" in line for line in said)
    cluster.wait_for(3)  # its nanny restarts the killed worker for the next tests


def test_a_case_whose_workers_keep_dying_is_recorded_as_failed_with_the_reason(
    cluster, stand_in, tmp_path
):
    cluster.set_control(kill_always=["reduce_sum_f64"])
    status, documents, _said, out = _run(cluster, stand_in, tmp_path)
    assert status == 1
    cases = {c["id"]: c for c in documents[H100]["cases"]}
    lost = cases["reduce_sum_f64"]
    assert lost["status"] == "failed" and lost["error"]["phase"] == "worker"
    assert "lost mid-case twice" in lost["error"]["message"]
    others = {
        c: (cases[c]["status"], cases[c].get("error")) for c in CASES if c != "reduce_sum_f64"
    }
    assert all(status == "ok" for status, _ in others.values()), (others, _said)
    assert documents[H100]["summary"]["failed"] == 1
    assert (next(out.glob("*-cluster")) / "reduce_sum_f64.failed.json").is_file()
    cluster.wait_for(3)


def test_a_budget_stop_skips_the_cases_not_started_and_stops_the_running_ones(
    cluster, stand_in, tmp_path
):
    cluster.set_control(sleep_s=dict.fromkeys(CASES, 3.0))
    status, documents, _said, _ = _run(cluster, stand_in, tmp_path, ["--budget-s", "1.5"])
    assert status == 1
    statuses = {c["id"]: (c["status"], c.get("error", {})) for c in documents[H100]["cases"]}
    skipped = [c for c, (s, _) in statuses.items() if s == "skipped"]
    stopped = [c for c, (s, e) in statuses.items() if s == "failed" and e["phase"] == "timeout"]
    assert len(stopped) == 3 and len(skipped) == 2, statuses  # three GPUs, five cases
    assert all("--budget-s 1.5 was spent" in statuses[c][1]["message"] for c in skipped)
    assert documents[H100]["options"]["budget_s"] == 1.5


def test_a_run_over_two_gpu_models_writes_one_document_per_model(cluster, stand_in, tmp_path):
    extra = cluster.add("gpu3", "3", A100)
    try:
        cluster.wait_for(4)
        cluster.set_control(sleep_s=dict.fromkeys(CASES, 0.5))
        status, documents, said, _ = _run(cluster, stand_in, tmp_path)
    finally:
        cluster.stop(extra)
        cluster.settle(3)
    assert status == 0
    assert set(documents) == {H100, A100}
    assert any(f"GPU models: {A100}, {H100} (one document per model)" in line for line in said)
    ids = [c["id"] for d in documents.values() for c in d["cases"]]
    assert sorted(ids) == sorted(CASES)  # every case once, in one of the two
    for model, document in documents.items():
        assert {c["device"]["name"] for c in document["cases"]} == {model}
        assert {w["gpu"] for w in document["environment"]["workers"]} == {model}
    assert [w["name"] for w in documents[A100]["environment"]["workers"]] == ["gpu3"]
    # the trusted ingest's rule, unchanged: the suite pins the H100; the A100 run is refused
    canon = trust.Canon.from_manifest(stand_in[0])
    trust.check(documents[H100], canon, "the H100 document")
    with pytest.raises(TrustError, match=f"ran on '{A100}' but .* pins the GPU model '{H100}'"):
        trust.check(documents[A100], canon, "the A100 document")


def test_the_cases_finished_before_the_harness_dies_are_kept(cluster, stand_in, tmp_path):
    """The harness is SIGKILLed mid-run: the documents that had arrived stay, whole and valid."""
    suite, _ = stand_in
    cluster.set_control(sleep_s={"polynomial_f64": 20.0})  # still running when it is killed
    out = tmp_path / "results"
    script = (
        "import sys; from pathlib import Path; from harness.running import cluster, shipping\n"
        f"suite = Path({str(suite)!r})\n"
        f"plan = shipping.plan(suite, root=Path({str(tmp_path / 'tree')!r}))\n"
        f"cluster.run({cluster.address!r}, suite, plan, [], "
        f"{{'job_timeout_s': 120.0, 'out': Path({str(out)!r})}}, print)\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            kept = list(out.glob("*-cluster/*.json"))
            if len(kept) == len(CASES) - 1:
                break
            time.sleep(0.2)
    finally:
        harness.kill()
        harness.wait()
    kept = sorted(out.glob("*-cluster/*.json"))
    assert sorted(p.stem for p in kept) == sorted(c for c in CASES if c != "polynomial_f64")
    for path in kept:
        assert load_result(path.read_bytes(), str(path))["cases"][0]["id"] == path.stem
    assert not list(out.glob("*.json"))  # no merged document: the run did not end


def _without_where(case: dict) -> dict:
    """A case block less what says where and how it ran (device, notes): what per-case and
    per-point dealing must agree on."""
    case = {k: v for k, v in case.items() if k not in ("device", "notes")}
    if "points" in case:
        case["points"] = [{k: v for k, v in p.items() if k != "device"} for p in case["points"]]
    return case


def test_a_task_submitted_after_the_shipped_tree_was_lost_with_its_worker_sends_it_again(
    cluster, stand_in, tmp_path
):
    """The scheduler keeps one copy of the scattered tree (its memory manager drops the rest):
    the worker holding it is killed, and the next task still gets the tree."""
    from distributed import Client

    from harness.running import manifest_check, model_documents
    from protocol.version import package_version

    suite, shipment = stand_in
    cluster.set_control()
    said = []
    with Client(cluster.address, timeout=30) as client:
        workers, tree = engine.gpu_workers(client, shipment, package_version(), said.append)
        sink = model_documents.CaseDocuments(
            tmp_path, manifest_check.read(suite)[1], {}, {}, said.append
        )
        settings = {"cases": shipment.cases, "bench_args": [], "job_timeout_s": 120.0}
        plan = engine.plan_cases(list(CASES), [])
        dealing = engine._Dealing(client, workers, plan, settings, sink, said.append)
        dealing.share(shipment, tree)
        (piece,) = dealing.shared  # the stand-in's tree is one piece
        deadline = time.monotonic() + 60
        while len(holders := client.who_has(piece)[piece.key]) != 1:
            assert time.monotonic() < deadline, f"the tree stayed on {holders}"
            time.sleep(0.2)
        (holder,) = holders
        os.kill(client.run(os.getpid, workers=[holder])[holder], signal.SIGKILL)
        while piece.status == "finished":
            assert time.monotonic() < deadline, "the scheduler did not notice the lost tree"
            time.sleep(0.2)
        future = dealing.submit("axpy_f64", engine._Attempt("axpy_f64", 1))
        outcome = future.result(timeout=120)
    assert outcome["returncode"] == 0, outcome["stderr"]
    assert json.loads(outcome["stdout"])["cases"][0]["id"] == "axpy_f64"
    assert "harness: the shipped tree was lost with its worker; sending it again" in said
    cluster.wait_for(3)


def test_a_swept_case_dealt_per_point_is_one_task_per_point_merged_as_per_case_dealing(
    cluster, swept_stand_in, tmp_path
):
    cluster.set_control(sleep_s={SWEPT: 0.3})
    status, whole, _said, _ = _run(cluster, swept_stand_in, tmp_path / "case", deal="case")
    assert status == 0
    said = []
    status, split, _, out = _run(cluster, swept_stand_in, tmp_path / "point", lines=said)
    assert status == 0, said
    # auto: a swept case and fewer cases (2) than GPU workers (3): one task per point
    assert any("dealing per point (auto): 5 task(s) from 2 case(s), 1 swept" in x for x in said)
    kept = {p.name: json.loads(p.read_text()) for p in next(out.glob("*-cluster")).glob("*.json")}
    assert sorted(kept) == sorted([*(f"{SWEPT}[{p}].json" for p in SWEPT_POINTS), "scale_i64.json"])
    for point in SWEPT_POINTS:  # each task ran the runner for its point alone
        (case,) = kept[f"{SWEPT}[{point}].json"]["cases"]
        assert case["notes"][0].startswith(
            f"stand-in argv: suite/cases.toml --case {SWEPT}[{point}] "
        )
    (path,) = (tmp_path / "point" / "results").glob("*.json")
    load_result(path.read_bytes(), str(path))  # the merged document validates
    document = split[H100]
    assert document["options"]["deal"] == "point" and whole[H100]["options"]["deal"] == "case"
    assert [_without_where(c) for c in document["cases"]] == [
        _without_where(c) for c in whole[H100]["cases"]
    ]
    assert document["summary"] == whole[H100]["summary"]
    assert document["summary"]["points"] == {
        "cases": 1,
        "points": 4,
        "ok": 4,
        "failed": 0,
        "skipped": 0,
    }
    swept = document["cases"][0]
    assert [p["point"] for p in swept["points"]] == list(SWEPT_POINTS) and swept[
        "point"
    ] == "n=1024"
    workers = {w["name"] for w in document["environment"]["workers"]}
    assert swept["device"]["worker"] in workers  # each point records the GPU it ran on
    assert all(p["device"]["worker"] in workers for p in swept["points"] if not p.get("headline"))


def test_a_point_whose_workers_keep_dying_is_failed_and_the_other_points_are_kept(
    cluster, swept_stand_in, tmp_path
):
    lost = f"{SWEPT}[n=512]"
    cluster.set_control(kill_always=[lost])
    status, documents, said, out = _run(cluster, swept_stand_in, tmp_path, deal="point")
    assert status == 1
    document = documents[H100]
    load_result(json.dumps(document).encode(), "the merged document")
    swept = next(c for c in document["cases"] if c["id"] == SWEPT)
    points = {p["point"]: p for p in swept["points"]}
    assert points["n=512"]["status"] == "failed" and points["n=512"]["error"]["phase"] == "worker"
    assert (
        f"case {lost}: its workers were lost mid-case twice" in points["n=512"]["error"]["message"]
    )
    seen = {p: (points[p].get("status"), points[p].get("error")) for p in points}
    assert swept["status"] == "ok", (swept.get("error"), seen, said)  # the headline, n=1024
    assert all(points[p]["status"] == "ok" for p in ("n=256", "n=2048")), (seen, said)
    assert document["summary"]["points"] == {
        "cases": 1,
        "points": 4,
        "ok": 3,
        "failed": 1,
        "skipped": 0,
    }
    assert set(swept["curve"]["llvm"]) and swept["curve"]["llvm"]["points"] == 3
    assert (next(out.glob("*-cluster")) / f"{lost}.failed.json").is_file()
    assert any(f"{lost} failed: its workers were lost mid-case twice" in line for line in said)
    cluster.wait_for(3)


def test_a_sweep_dealt_over_two_gpu_models_has_each_point_measured_in_one_models_document(
    cluster, swept_stand_in, tmp_path
):
    extra = cluster.add("gpu3", "3", A100)
    try:
        cluster.wait_for(4)
        cluster.set_control(sleep_s={f"{SWEPT}[{p}]": 1.0 for p in SWEPT_POINTS})
        status, documents, said, _ = _run(cluster, swept_stand_in, tmp_path, deal="point")
    finally:
        cluster.stop(extra)
        cluster.settle(3)
    assert status == 0, said
    measured = {}
    for model, document in documents.items():
        load_result(json.dumps(document).encode(), model)
        swept = next(c for c in document["cases"] if c["id"] == SWEPT)
        for point in swept["points"]:
            block = swept if point.get("headline") else point
            if block["status"] == "ok":
                measured.setdefault(point["point"], []).append(model)
                assert block["device"]["name"] == model
            else:  # measured on the other model: skipped here, saying where
                other = next(m for m in documents if m != model)
                assert block["error"]["message"].endswith(
                    f"run on a {other}: in that model's document"
                )
    assert sorted(measured) == sorted(SWEPT_POINTS)  # every point measured once, on one model
    assert all(len(models) == 1 for models in measured.values())


def test_auto_deals_per_point_only_where_whole_cases_would_leave_gpus_idle():
    plan = engine.plan_cases(["a", "b"], [])
    assert engine.deals_points("auto", plan, {"a"}, workers=3)
    assert not engine.deals_points("auto", plan, {"a"}, workers=2)  # as many cases as GPUs
    assert not engine.deals_points("auto", plan, set(), workers=8)  # nothing swept
    assert engine.deals_points("point", plan, set(), workers=1)
    assert not engine.deals_points("case", plan, {"a"}, workers=8)
    with pytest.raises(ClusterError, match="--deal 'pts': expected one of auto, case"):
        engine.deals_points("pts", plan, set(), workers=1)
    skeleton = {"point": "n=4", "error": {"phase": "setup"},
                "points": [{"point": "n=2"}, {"point": "n=4", "headline": True}]}  # fmt: skip
    split = engine.plan_points(plan, {"a": skeleton})  # the headline was not selected
    assert split.cases == ["a[n=2]", "b"] and split.selectors["a[n=2]"] == ["a[n=2]"]


def _old_kernelgap(folder: Path, version: str, with_cluster: bool) -> Path:
    """A tree that imports as an older kernelgap: its pyproject's version (which
    package_version reads), or, without harness.running.cluster, its installed metadata's."""
    shutil.copytree(ROOT / "protocol", folder / "protocol")  # package_version reads ../pyproject
    if with_cluster:
        (folder / "harness").symlink_to(ROOT / "harness")
        pyproject = (ROOT / "pyproject.toml").read_text()
        (folder / "pyproject.toml").write_text(pyproject.replace('"0.1.0"', f'"{version}"', 1))
    else:  # a kernelgap from before --cluster: no worker side to call
        shutil.copytree(ROOT / "harness", folder / "harness",
                        ignore=shutil.ignore_patterns("cluster.py", "__pycache__"))  # fmt: skip
        info = folder / f"kernelgap-{version}.dist-info"
        info.mkdir()
        info.joinpath("METADATA").write_text(
            f"Metadata-Version: 2.1\nName: kernelgap\nVersion: {version}\n"
        )
    return folder


@pytest.mark.parametrize(("version", "with_cluster"), [("0.0.9", True), ("0.0.8", False)])
def test_a_worker_with_an_older_kernelgap_is_refused_naming_both_versions(
    cluster, stand_in, tmp_path, version, with_cluster
):
    old = _old_kernelgap(tmp_path / "old-kernelgap", version, with_cluster)
    extra = cluster.add("old", "7", H100, PYTHONPATH=str(old))
    try:
        cluster.wait_for(4)
        with pytest.raises(ClusterError) as refused:
            _run(cluster, stand_in, tmp_path)
    finally:
        cluster.stop(extra)
        cluster.settle(3)
    assert f"runs kernelgap {version}, older than this harness's 0.1.0" in str(refused.value)
    assert "pip install 'kernelgap[cluster]==0.1.0'" in str(refused.value)
    assert not (tmp_path / "results").exists()  # refused before anything ran


def test_the_real_runner_on_a_cpu_worker_is_refused_before_any_case_runs(tmp_path):
    """`--cluster local:0` starts a real local cluster; the real runner's `info` finds no GPU."""
    if gpu_unavailable_reason() is None:
        pytest.skip("this machine has a GPU: the refusal path needs a CPU-only worker")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "benchmarks/cases.toml",
         "--cluster", "local:0", "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "harness: scheduler tcp://127.0.0.1:" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: worker gpu0 (tcp://127.0.0.1:") and "GPU 0: the runner" in last
    assert done.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cluster", "local:0", "--target", "local"], "give one of --target"),
        (["--cluster", "local:0", "--pytest-gpu"], "--pytest-gpu: not with --cluster"),
        (["--cluster", "local:x"], "expected local, local:0,1"),
        (["--target", "local", "--deal", "point"], "--deal: only with --cluster"),
        (["--cluster", "local:0", "--", "--gpus", "all"], "runner option --gpus: with --cluster"),
        (
            ["--cluster", "tcp://127.0.0.1:9", "--connect-timeout", "1"],
            "--cluster tcp://127.0.0.1:9: cannot reach the scheduler",
        ),
    ],
)
def test_cluster_options_that_cannot_work_are_refused_before_anything_starts(args, expected):
    from click.testing import CliRunner

    from harness.cli import main

    result = CliRunner().invoke(main, ["run", str(ROOT / "benchmarks/cases.toml"), *args])
    assert result.exit_code == 2
    assert expected in result.stderr


def test_a_base_and_a_head_go_to_one_task_each_case_with_the_commit(cluster, stand_in, tmp_path):
    from harness.running import shipping

    suite, _ = stand_in
    cluster.set_control()
    bundles = []
    for label in ("base", "head"):
        (tmp_path / label).mkdir()
        (tmp_path / label / "manifest.json").write_text("{}")
        bundles.append((label, tmp_path / label))
    shipment = shipping.plan(suite, root=tmp_path / "tree", revisions=tuple(bundles))
    status = engine.run(cluster.address, suite, shipment, ["--mode", "cold"],
                        {**SETTINGS, "out": tmp_path / "out"}, [].append)  # fmt: skip
    assert status == 0
    (path,) = (tmp_path / "out").glob("*.json")
    for case in json.loads(path.read_text())["cases"]:
        (argv,) = case["notes"]
        assert argv.startswith(f"stand-in argv: suite/cases.toml --case {case['id']} ")
        assert "--commit 0123456789ab --bundle base=bundle/base --bundle head=bundle/head" in argv
        assert argv.endswith("--mode cold --device 0")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_a_local_cluster_without_nvidia_smi_asks_for_the_gpus_by_number():
    from click.testing import CliRunner

    from harness.cli import main

    result = CliRunner().invoke(
        main, ["run", str(ROOT / "benchmarks/cases.toml"), "--cluster", "local"]
    )
    assert result.exit_code == 2
    assert "cannot count this host's GPUs with nvidia-smi" in result.stderr
    assert "--cluster local:0,1" in result.stderr


def test_the_plan_takes_selectors_budget_and_an_earlier_runs_times(tmp_path):
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps({"cases": [{"id": "b", "worker_wall_s": 5.0},
                                              {"id": "c", "worker_wall_s": 9.0}]}))  # fmt: skip
    ids = ["a", "b", "c", "d"]
    plan = engine.plan_cases(ids, ["--budget-s=90", "--previous", str(previous), "--mode", "cold"])
    assert plan.cases == ["c", "b", "a", "d"]  # longest known first, then the suite's order
    assert plan.budget_s == 90.0 and plan.runner_args == ["--mode", "cold"]
    chosen = engine.plan_cases(ids, ["--case", "c[n=2^20]", "--case", "?"])
    assert chosen.cases == ids and chosen.selectors["c"] == ["c[n=2^20]", "?"]
    with pytest.raises(ClusterError, match=r"--case 'x\*': no case of the suite matches"):
        engine.plan_cases(ids, ["--case", "x*"])
    with pytest.raises(ClusterError, match="--budget-s 'soon': expected seconds"):
        engine.plan_cases(ids, ["--budget-s", "soon"])
    with pytest.raises(ClusterError, match=r"--previous .*: not a result document"):
        engine.plan_cases(ids, ["--previous", str(tmp_path / "missing.json")])


def test_without_the_cluster_extra_the_run_names_it():
    """dask is imported only for --cluster: without it the other targets work and --cluster
    says what to install."""
    blocked = "import sys; sys.modules['distributed'] = sys.modules['dask'] = None; "
    run = "from harness.cli import main; main(['run', 'benchmarks/cases.toml', *sys.argv[1:]])"
    done = subprocess.run([sys.executable, "-c", blocked + run, "--cluster", "tcp://127.0.0.1:9"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().endswith("pip install 'kernelgap[cluster]'")
    helped = subprocess.run([sys.executable, "-c", blocked + run, "--help"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert helped.returncode == 0 and "--cluster ADDRESS" in helped.stdout


def test_the_tree_goes_to_the_workers_in_pieces_and_runs_whole(
    cluster, stand_in, tmp_path, monkeypatch
):
    from distributed import Client

    cluster.set_control()
    _, shipment = stand_in
    whole = b"".join(shipment.chunks())
    monkeypatch.setattr(engine, "PIECE_BYTES", 4096)
    with Client(cluster.address, timeout=30) as client:
        futures = engine._scatter_tree(client, shipment)
        pieces = client.gather(futures)
    assert len(pieces) > 1 and b"".join(pieces) == whole
    assert all(len(piece) >= 4096 for piece in pieces[:-1])
    # the workers put the pieces back together: every case runs from the unpacked tree
    status, documents, _said, _ = _run(cluster, stand_in, tmp_path)
    assert status == 0 and documents[H100]["summary"]["ok"] == len(CASES)
