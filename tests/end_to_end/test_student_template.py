"""The student's starting file: the contract of lab-spec section 1, stubbed, standalone."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from helpers import REPO, graders

import reference

TEMPLATE = REPO / "student_template" / "serving.py"
MODULE_NAME = "student_template_serving_under_test"

P = inspect.Parameter
POS, KW = P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY
NO = P.empty

#: lab-spec section 1, written out: (name, kind, default) of every parameter.
SPEC_SIGNATURES: dict[str, list[tuple[str, Any, Any]]] = {
    "serve": [("n_requests", POS, NO), ("batch_size", POS, NO), ("overhead_ms", KW, 20.0),
              ("marginal_ms", KW, 2.0)],
    "erlang_c": [("arrival_qps", POS, NO), ("service_ms", POS, NO), ("replicas", POS, NO)],
    "queueing_latency": [("arrival_qps", KW, NO), ("service_ms", KW, NO), ("replicas", KW, 1),
                         ("service_cv", KW, 1.0), ("slo_ms", KW, 100.0)],
    "batching_tax": [("batch_size", KW, NO), ("arrival_qps", KW, NO), ("service_ms", KW, NO),
                     ("slo_ms", KW, NO), ("efficiency_gain", KW, 1.0), ("replicas", KW, 1),
                     ("service_cv", KW, 1.0)],
    "transformer_state_gb": [("model", POS, NO), ("context_tokens", POS, NO),
                             ("kv_bytes", POS, NO)],
    "cache_capacity": [("profile", POS, NO), ("model", POS, NO), ("context_tokens", KW, NO),
                       ("precision_bytes", KW, NO), ("devices_per_replica", KW, 1),
                       ("kv_precision_bytes", KW, None)],
    "cold_start_latency": [("profile", POS, NO), ("precision_bytes", KW, NO),
                           ("storage_bandwidth_gbs", KW, None),
                           ("interconnect_bandwidth_gbs", KW, None),
                           ("deserialize_gbs", KW, None), ("runtime_init_ms", KW, None),
                           ("warmup_ms", KW, None), ("warm_pool_replicas", KW, 0),
                           ("scale_out_replicas", KW, 1)],
    "quantity_to_float": [("value", POS, NO), ("unit", POS, NO), ("default", POS, NO)],
    "serving_track_profile": [("profile", POS, NO), ("variant", POS, NO), ("hardware", POS, NO),
                              ("model", POS, NO)],
}

#: lab-spec section 1, written out: the result fields in order.
SPEC_FIELDS = {
    "ServeResult": ("total_ms", "throughput_rps", "passes"),
    "QueueingResult": (
        "arrival_qps", "service_ms", "replicas", "utilization", "stable", "mean_latency_ms",
        "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms", "slo_ms",
        "slo_ok", "queue_wait_probability", "queue_amplifier",
    ),
    "BatchingTaxResult": (
        "batch_size", "arrival_qps", "formation_delay_ms", "batched_service_ms", "queue_p99_ms",
        "total_p99_ms", "formation_slo_pct", "throughput_gain", "effective_batch_qps",
        "utilization", "slo_ok",
    ),
    "CacheCapacityResult": (
        "total_memory_gb", "weight_gb", "state_per_request_gb", "available_gb",
        "max_concurrent", "oom", "state_kind", "context_tokens",
    ),
    "ColdStartResult": (
        "model_weight_gb", "storage_bandwidth_gbs", "interconnect_bandwidth_gbs",
        "effective_bandwidth_gbs", "read_ms", "deserialize_ms", "runtime_init_ms", "warmup_ms",
        "cold_start_ms", "exposed_first_request_ms", "protected_fraction", "exceeds_slo",
    ),
}
DATACLASS_RESULTS = (
    "QueueingResult", "BatchingTaxResult", "CacheCapacityResult", "ColdStartResult",
    "ServingTrackProfile",
)


@pytest.fixture(scope="module")
def template() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(MODULE_NAME, TEMPLATE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # dataclasses look their module up while building
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[MODULE_NAME]


def _shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", sorted(SPEC_SIGNATURES))
def test_the_template_signature_is_the_spec_signature(template: ModuleType, name: str) -> None:
    shape = _shape(getattr(template, name))
    assert shape == SPEC_SIGNATURES[name]
    for (_, _, got), (_, _, want) in zip(shape, SPEC_SIGNATURES[name], strict=True):
        assert type(got) is type(want)  # 20.0 stays a float default, 1 an int one


@pytest.mark.parametrize("name", sorted(SPEC_SIGNATURES))
def test_the_reference_signature_is_the_spec_signature(name: str) -> None:
    assert _shape(getattr(reference, name)) == SPEC_SIGNATURES[name]


def _stub_arguments(name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    profile, model = SimpleNamespace(), SimpleNamespace()
    return {
        "serve": ((256, 32), {}),
        "erlang_c": ((160.0, 5.0, 1), {}),
        "queueing_latency": ((), {"arrival_qps": 160.0, "service_ms": 5.0}),
        "batching_tax": ((), {"batch_size": 32, "arrival_qps": 500.0, "service_ms": 5.0,
                              "slo_ms": 50.0}),
        "transformer_state_gb": ((model, 4096, 2.0), {}),
        "cache_capacity": ((profile, model), {"context_tokens": 4096, "precision_bytes": 2.0}),
        "cold_start_latency": ((profile,), {"precision_bytes": 2.0}),
        "quantity_to_float": ((None, "GB", 0.0), {}),
        "serving_track_profile": ((profile, SimpleNamespace(), SimpleNamespace(), model), {}),
    }[name]


@pytest.mark.parametrize("name", sorted(SPEC_SIGNATURES))
def test_every_template_function_raises_not_implemented_naming_itself(
    template: ModuleType, name: str
) -> None:
    args, kwargs = _stub_arguments(name)
    with pytest.raises(NotImplementedError, match=f"^{name}: "):
        getattr(template, name)(*args, **kwargs)


def test_the_template_exports_every_name_of_the_contract(template: ModuleType) -> None:
    names = {*SPEC_SIGNATURES, "ServeResult", *DATACLASS_RESULTS}
    assert names <= set(vars(template))
    for name in SPEC_SIGNATURES:
        assert inspect.isfunction(getattr(template, name))


def test_serve_result_is_a_named_tuple_with_the_spec_fields(template: ModuleType) -> None:
    cls = template.ServeResult
    assert issubclass(cls, tuple)
    assert cls._fields == SPEC_FIELDS["ServeResult"] == reference.ServeResult._fields
    assert cls(1.0, 2.0, 3) == (1.0, 2.0, 3)


@pytest.mark.parametrize("name", DATACLASS_RESULTS)
def test_result_types_are_frozen_dataclasses_with_the_reference_fields_in_order(
    template: ModuleType, name: str
) -> None:
    cls, ref = getattr(template, name), getattr(reference, name)
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen
    fields = tuple(field.name for field in dataclasses.fields(cls))
    assert fields == tuple(field.name for field in dataclasses.fields(ref))
    assert fields == SPEC_FIELDS.get(name, fields)
    # The same annotations too, so a student reading the template sees the reference's types.
    assert [f.type for f in dataclasses.fields(cls)] == [f.type for f in dataclasses.fields(ref)]


def test_the_reference_result_fields_are_the_spec_fields() -> None:
    for name, fields in SPEC_FIELDS.items():
        ref = getattr(reference, name)
        got = ref._fields if name == "ServeResult" else tuple(
            field.name for field in dataclasses.fields(ref)
        )
        assert got == fields, name


def test_the_template_imports_only_the_standard_library() -> None:
    tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            assert node.module is not None
            modules.add(node.module.split(".")[0])
    assert modules
    assert modules <= sys.stdlib_module_names | {"__future__"}, modules


def test_the_template_runs_alone_without_site_packages(tmp_path: Path) -> None:
    copy = tmp_path / "serving.py"
    copy.write_text(TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    script = "import sys; sys.path.insert(0, sys.argv[1]); import serving; print(serving.__file__)"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == copy


#: What each docstring must state for a student to implement the lab's model from it alone:
#: the conventions a blind implementation from the template got wrong or had to guess.
MODEL_STATEMENTS: dict[str, tuple[str, ...]] = {
    "serve": ("ceil(n_requests / batch_size)", "overhead_ms + b * marginal_ms",
              "n_requests / (total_ms / 1000)"),
    "erlang_c": ("Degenerate", "service_ms <= 0", "replicas <= 0", "a >= c",
                 "(math.inf, 1.0)", "c * mu - lambda", "Erlang B recursion",
                 "B = a * B / (k + a * B)", "C = c * B / (c - a * (1 - B))"),
    "queueing_latency": ("max(1, int(replicas))", "(lambda / mu) / c",
                         "utilization < 1", "max(0.1, (1 + service_cv**2) / 2)",
                         "service_ms + P / r * 1000 * v", "*mean* service time",
                         "q <= 1 - P", "service_ms + v * ln(P / (1 - q)) / r * 1000",
                         "0.50, 0.95, 0.99 and 0.999", "p99_latency_ms <= slo_ms",
                         "p99_latency_ms / service_ms", "114.5507"),
    "batching_tax": ("max(1, int(batch_size))", "max(0.0001, arrival_qps)",
                     "(B - 1) / (2 * lambda) * 1000", "*mean* time",
                     "service_ms * (1 + 0.08 * log2(B)) / g", "*not* B times",
                     "arrival_qps=lambda / B", "max(0.001, slo_ms -",
                     "max(0, Q.p99_latency_ms - batched_service_ms)",
                     "formation_delay_ms + batched_service_ms + queue_p99_ms",
                     "B * service_ms / batched_service_ms", "32.690"),
    "transformer_state_gb": ("2 * layers * hidden_dim * context_tokens * kv_bytes / 10**9",
                             "missing, None or 0"),
    "cache_capacity": ("devices_per_replica * profile.memory_capacity_gb",
                       "profile.model_params_b * precision_bytes",
                       "profile.state_mb_per_request / 1024", "max(0.001, 0.1 * weight_gb)",
                       "floor(available_gb / state_per_request_gb)", "max_concurrent < 1"),
    "cold_start_latency": ("None or 0", "at least 0.001", "min(storage, interconnect)",
                           "0 is a value", "model_weight_gb / effective_bandwidth_gbs * 1000",
                           "read_ms + deserialize_ms + runtime_init_ms + warmup_ms",
                           "max(0, warm_pool_replicas) / max(1",
                           "profile.service_ms + cold_start_ms * (1 -",
                           "exposed_first_request_ms > profile.slo_ms", "14,175"),
    "quantity_to_float": ("m_as", "to(unit).magnitude", "float(value)", "TypeError or ValueError"),
    "serving_track_profile": ("divided by 1e9",
                              '``hardware.memory.bandwidth`` in "GB/s" with default 1.0',
                              "a memory bandwidth of 0 stays 0",
                              "None, not 0", "arrival_qps 100", "service_ms 20",
                              "context_tokens 4096", '"state/cache"', "runtime_init_ms 800",
                              "warmup_ms 500", '"devices_per_replica", default 1',
                              '"track-specific serving policy"',
                              "source_refs = (hardware_ref, model_ref)"),
}


@pytest.mark.parametrize("name", SPEC_SIGNATURES)
def test_each_template_docstring_states_its_functions_model(template: ModuleType,
                                                            name: str) -> None:
    doc = " ".join((inspect.getdoc(getattr(template, name)) or "").split())
    missing = [statement for statement in MODEL_STATEMENTS[name]
               if " ".join(statement.split()) not in doc]
    assert not missing, (name, missing)


def test_template_docstrings_state_units(template: ModuleType) -> None:
    for name, unit in [("serve", "ms"), ("erlang_c", "per second"), ("queueing_latency", "ms"),
                       ("batching_tax", "ms"), ("transformer_state_gb", "GB"),
                       ("cache_capacity", "GB"), ("cold_start_latency", "GB/s"),
                       ("serving_track_profile", "GB/s")]:
        assert unit in (inspect.getdoc(getattr(template, name)) or ""), (name, unit)


def test_the_template_header_names_its_one_unit_exception(template: ModuleType) -> None:
    header = " ".join((template.__doc__ or "").split())
    assert "1 GB = 10**9 bytes" in header
    assert "cache_capacity" in header
    assert "/ 1024" in header
    assert "complete specification" in header


def student_pytest(bundle: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``pytest`` as a student runs it in the repository they cloned: the bundle's own
    grader, from its folder (stdout and stderr together, as a terminal shows them)."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PYTEST_", "COV_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *flags],
                          cwd=bundle, env=environment, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, check=False)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the grader closes its folders only as root")
def test_the_template_run_as_root_says_where_to_start_and_no_staff_note(
        tmp_path: Path) -> None:
    bundle = tmp_path / "lab"
    exported = graders("export", "student", bundle)
    assert exported.returncode == 0, exported.stderr
    for folder in (bundle, bundle / "graders"):
        folder.chmod(0o755)  # as a fresh clone: open to other users, so the grader closes it
    first = student_pytest(bundle)
    assert first.returncode == 1, first.stdout
    feedback = first.stdout.split("serving-lab feedback", 1)[1]
    assert feedback.lstrip("=\n ").startswith("Start with serve: ")
    assert stat.S_IMODE(bundle.stat().st_mode) & 0o007 == 0  # closed all the same
    # the one line a student can ignore; the staff's note (groups, chgrp) is not shown
    assert first.stdout.count("closed the grader's folders to other users") == 1
    for staff in ("chgrp", "chmod", "staff in their group", "STAFF"):
        assert staff not in first.stdout, staff
    assert "the student's code runs as" not in first.stdout  # the protections: under -v
    again = student_pytest(bundle)
    assert "closed the grader's folders" not in again.stdout  # said once: nothing changed
    for folder in (bundle, bundle / "graders"):
        folder.chmod(0o755)
    verbose = student_pytest(bundle, "-v")  # the staff's note, and the protections, under -v
    assert "chgrp -R STAFF" in verbose.stdout
    assert "serving-grader: root w" in verbose.stdout  # with or without CAP_SYS_ADMIN
    assert "the student's code runs as an unprivileged sandbox user" in verbose.stdout
