"""`harness run --target vast:<model> --max-price USD_PER_HOUR`: a price ceiling on the rental.

Against the Vast fakes the other tests use: FakeVast (the SDK adapter, tests/harness/running/transport/test_vast)
and FAKE_VASTAI (a stand-in `vastai` module for a whole `harness run`, tests/harness/running/test_run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.errors import VastError
from harness.running.transport.vast import choose_offer
from tests.conftest import ROOT
from tests.harness.running.test_run import FAKE_VASTAI
from tests.harness.running.transport.test_vast import FakeSsh, FakeVast, provider

OFFERS = [
    {"id": 1, "gpu_name": "H200 NVL", "dph_total": 0.9},  # cheaper, but another model
    {"id": 2, "gpu_name": "H200", "dph_total": 4.6},
    {"id": 3, "gpu_name": "H200", "dph_total": 3.2},
    {"id": 4, "gpu_name": "H200"},  # no price stated
]


@pytest.fixture(autouse=True)
def fresh_fake_ssh():
    FakeSsh.made, FakeSsh.refusals, FakeSsh.run_error = [], 0, None


def test_the_cheapest_exact_offer_at_or_under_the_ceiling_is_chosen():
    assert choose_offer(OFFERS, "H200", max_price=5.0)["id"] == 3
    assert choose_offer(OFFERS, "H200", max_price=3.2)["id"] == 3  # the ceiling itself is allowed
    assert choose_offer(OFFERS, "H200")["id"] == 3  # no ceiling: as before


def test_no_offer_under_the_ceiling_names_the_model_the_ceiling_and_the_cheapest_seen():
    with pytest.raises(VastError) as failure:
        choose_offer(OFFERS, "H200", max_price=3.0)
    message = str(failure.value)
    assert "'H200'" in message and "--max-price 3.00 USD/h" in message
    assert "cheapest of 3 seen costs $3.20/h (offer 3)" in message
    assert "nothing was rented" in message
    with pytest.raises(VastError, match="none of the 1 seen states a price"):
        choose_offer([{"id": 4, "gpu_name": "H200"}], "H200", max_price=10.0)
    with pytest.raises(VastError, match="refusing to fall back"):  # the model rule comes first
        choose_offer(OFFERS, "H100 SXM", max_price=100.0)


def test_a_rental_over_the_ceiling_is_never_made():
    api = FakeVast(offers=OFFERS)
    with pytest.raises(VastError, match=r"--max-price 2\.50 USD/h"), provider(api, max_price=2.5):
        pass
    assert api.called("create_instance") == [] and api.called("destroy_instance") == []
    api = FakeVast(offers=OFFERS)
    with provider(api, max_price=4.0):
        pass
    assert [offer for offer, _ in api.called("create_instance")] == [3]
    assert api.called("destroy_instance") == [(4242,)]


def test_the_model_as_a_suite_pins_it_is_searched_as_vast_names_it():
    """CUDA calls the GPU 'NVIDIA H200' (the suite's `gpu`), Vast calls it 'H200'."""
    api = FakeVast(offers=OFFERS)
    with provider(api, model="NVIDIA H200", max_price=4.0):
        pass
    (query,) = api.called("search_offers")[0]
    assert query["gpu_name"] == {"eq": "H200"}
    assert [offer for offer, _ in api.called("create_instance")] == [3]  # not the H200 NVL
    with pytest.raises(VastError, match="no offer for GPU model 'NVIDIA H100 SXM'"):
        choose_offer(OFFERS, "NVIDIA H100 SXM")


def harness_run(tmp_path, *args) -> tuple[subprocess.CompletedProcess, list]:
    """`python -m harness run` with the stand-in vastai module (one H200 offer at $3.00/h)."""
    sdk = tmp_path / "sdk"
    sdk.mkdir(exist_ok=True)
    (sdk / "vastai.py").write_text(FAKE_VASTAI)
    log = tmp_path / "vast.log"
    log.write_text("")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(sdk), os.environ.get("PYTHONPATH")])),
        "FAKE_VAST_LOG": str(log),
        "FAKE_VAST_SSH_PORT": "1",  # never reached: nothing is rented
    }
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", *map(str, args), "--out", tmp_path / "r"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, [json.loads(line) for line in log.read_text().splitlines()]


def test_harness_run_exits_2_when_every_offer_is_over_the_ceiling(tmp_path):
    done, calls = harness_run(
        tmp_path, "--target", "vast:NVIDIA H200", "--max-price", "2.5", "--no-install"
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    message = done.stderr
    assert "'NVIDIA H200'" in message and "--max-price 2.50 USD/h" in message, message
    assert "$3.00/h" in message and "nothing was rented" in message
    assert [c[0] for c in calls] == ["search_offers"]  # searched, never rented
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--target", "local", "--max-price", "3"], "--max-price applies to vast:<GPU model>"),
        (["--target", "vast:H200", "--max-price", "0"], "not in the range x>0"),
        (["--target", "vast:H200", "--max-price", "cheap"], "is not a valid float"),
    ],
)
def test_a_ceiling_that_cannot_apply_is_bad_input(tmp_path, args, expected):
    done, calls = harness_run(tmp_path, *args)
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert calls == []
