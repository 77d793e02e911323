"""Shared fixtures: the cloud_fleet track of lab-spec section 3, built by hand, and a
sandbox user whose worker Landlock confines (bubblewrap switched off).

Helpers that are not fixtures (paths, the CLI, the corpora's gradings) are in helpers.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from helpers import AS_ROOT

import graders.sandbox.confinement
import graders.sandbox.runner
from graders.sandbox import landlock
from graders.sandbox.privileges import SandboxUser, claim_sandbox_user
from reference import ServingTrackProfile
from reference.units import ureg


def cloud_fleet_profile() -> ServingTrackProfile:
    """cloud_fleet (H100 x8, Llama-2-70B) with every field written out from the spec."""
    return ServingTrackProfile(
        track_id="cloud_fleet",
        label="Cloud Fleet",
        hardware_ref="Hardware.Cloud.H100",
        model_ref="Models.Language.Llama2_70B",
        hardware_name="NVIDIA H100",
        model_name="Llama-2-70B",
        model_params_b=70.0,
        memory_capacity_gb=80 * 2**30 / 1e9,
        memory_bandwidth_gbs=3350.0,
        storage_bandwidth_gbs=7.0,
        interconnect_bandwidth_gbs=64.0,
        tdp_w=700.0,
        battery_wh=None,
        arrival_qps=500.0,
        service_ms=25.0,
        replicas=8,
        slo_ms=200.0,
        service_cv=1.0,
        batch_size=32,
        batch_efficiency_gain=6.4,
        context_tokens=131072,
        state_kind="KV cache",
        state_mb_per_request=None,
        precision_bytes=2.0,
        kv_precision_bytes=2.0,
        default_devices_per_replica=8,
        deserialize_gbs=20.0,
        runtime_init_ms=800.0,
        warmup_ms=500.0,
        warm_pool_replicas=2,
        scale_out_replicas=4,
        validation_tests=(
            "load test",
            "p99 SLA canary",
            "KV cache memory audit",
            "warm-pool scale-out drill",
        ),
        serving_policy="continuous-batched GPU fleet with warm pool",
        primary_metric="SLA-compliant p99 latency",
        guardrail_metric="cost/request and quality",
        source_refs=("Hardware.Cloud.H100", "Models.Language.Llama2_70B"),
    )


def llama2_70b() -> SimpleNamespace:
    """An MLSysIM-shaped Llama-2-70B: 7e10 parameters, 80 layers, hidden size 8192."""
    return SimpleNamespace(
        name="Llama-2-70B", parameters=ureg.Quantity(7e10, "param"), layers=80, hidden_dim=8192
    )


@pytest.fixture(scope="session")
def cloud_profile() -> ServingTrackProfile:
    return cloud_fleet_profile()


@pytest.fixture(scope="session")
def llama_model() -> SimpleNamespace:
    return llama2_70b()



@pytest.fixture
def landlocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxUser]:
    """A sandbox user, with bubblewrap switched off (as in Docker's default profile):
    the worker restricts itself with Landlock (in a box of its own tmpfs, as root with
    CAP_SYS_ADMIN)."""
    if not AS_ROOT:
        pytest.skip("sandbox users exist only under root")
    if landlock.unavailable() is not None:
        pytest.skip(str(landlock.unavailable()))
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "switched off by the test")
    user = claim_sandbox_user()
    try:
        yield user
    finally:
        user.release()


@pytest.fixture
def landlocked_unmounted(landlocked: SandboxUser,
                         monkeypatch: pytest.MonkeyPatch) -> SandboxUser:
    """That, with the box's mount switched off too: a plain host folder, as without
    CAP_SYS_ADMIN."""
    monkeypatch.setattr(graders.sandbox.runner, "mount_box",
                        lambda box, uid, gid: "switched off by the test")
    return landlocked
