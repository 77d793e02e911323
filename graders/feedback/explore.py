"""The lab notebook's engine: the student's own functions swept as knobs move, beside the
points the student repository holds (the golden file's visible curve cases and the tracks'
reality curves). Pure Python: ``lab.py`` (a marimo notebook) only lays it out.

The notebook runs ``serving.py`` as ``pytest`` does: in the grader's worker, with its
per-call deadline and time budget (:mod:`graders.feedback.lab_worker`), so that a call that
hangs becomes a note and never a frozen cell. Nothing here reads the reference
implementation, a hidden case or a secret. A sweep at the
track's own settings is the feedback page's sweep, case for case, so the golden file has its
reference points; a sweep at other settings shows the student's curve alone, and says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import math
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.errors import GraderError
from graders.feedback import curves
from graders.feedback.curves import Guide, Sweep
from graders.feedback.lab_worker import grading_worker
from graders.feedback.measure import MeasuredSweep, measure
from graders.grading.cases import Case
from graders.grading.checks import failed_call_message
from graders.grading.contract import CONTRACT_FUNCTIONS
from graders.reality.curves import BATCHES, RealityCurve
from graders.sandbox.limits import MAX_SUBMISSION_BYTES, Limits
from graders.sandbox.runner import CallOutcome
from graders.trackfiles.tracks import Track

#: Relative gap beyond which a student's point departs from the reference (the grader's
#: own tolerance is far tighter; this is what a reader can see on a plot).
VISIBLE_GAP = 1e-3
#: Lines of a preview grading's feedback shown as its first hints.
MAX_HINTS = 3


@dataclass(frozen=True)
class Lab:
    """What the student repository holds: its tracks, the golden file's values of the
    visible cases, the tracks' reality curves, and one visible case per function."""

    tracks: tuple[Track, ...]
    expected: Callable[[Case], Any]
    reality: Mapping[str, tuple[RealityCurve, ...]]
    probes: tuple[Case, ...]

    def track(self, track_id: str) -> Track:
        return next(track for track in self.tracks if track.track_id == track_id)


def open_lab(repository: Path, golden: Path | None = None) -> Lab:
    """The student repository at ``repository``, read from its own files only: the golden
    file (``graders/golden.json`` unless ``golden``), never the reference implementation."""
    from graders.expected.golden import GoldenOracle
    from graders.expected.oracle import bundled_golden_file
    from graders.grading.cases import visible_cases
    from graders.reality.store import load_reality
    from graders.trackfiles.tracks import load_tracks

    oracle = GoldenOracle.load(golden or bundled_golden_file())
    tracks = oracle.bind(load_tracks(repository / "tracks"))
    probes: dict[str, Case] = {}
    for case in visible_cases(tracks):
        probes.setdefault(case.function, case)
    try:
        reality = load_reality(tracks)
    except Exception:  # noqa: BLE001 (the reality curves are a bonus, as on the page)
        reality = {}
    return Lab(tracks, oracle.expected, reality, tuple(probes.values()))


@dataclass(frozen=True)
class StudentCode:
    """The student's ``serving.py`` as saved now (its bytes), run in the grader's worker
    under ``limits`` (the grader's own by default)."""

    source: bytes
    limits: Limits = Limits()


def load_student(source: bytes, limits: Limits | None = None) -> StudentCode:
    """``source``, the bytes of ``serving.py`` read at each save (an edit is seen at the
    next load). Nothing runs here: each cell's calls run it in a fresh worker."""
    return StudentCode(source, limits or Limits())


#: How a call that timed out reads in the notebook.
HANG_NOTE = ("no answer within the grader's {deadline:g} s deadline for one call: it hangs "
             "(or is far too slow) here, and pytest and the course's grader stop it there "
             "too. Fix it and save serving.py: the notebook runs it again.")


def _noted(outcome: CallOutcome, limits: Limits) -> CallOutcome:
    """``outcome`` with a timeout said in the notebook's words."""
    if outcome.status != "timeout":
        return outcome
    return dataclasses.replace(outcome, message=HANG_NOTE.format(deadline=limits.call_timeout_s))


@contextlib.contextmanager
def calling(student: StudentCode) -> Iterator[Callable[[Case], CallOutcome]]:
    """A function that runs one case in the grader's worker (an exception, a timeout or a
    crash is an outcome, as in the grader), for the block's calls. A worker that cannot
    start makes every call an outcome that says why."""
    if len(student.source) > MAX_SUBMISSION_BYTES:
        why = (f"serving.py is {len(student.source)} bytes; the grader takes at most "
               f"{MAX_SUBMISSION_BYTES}")
    else:
        with contextlib.ExitStack() as stack:
            try:
                runner = stack.enter_context(grading_worker(student.source, student.limits))
            except (GraderError, OSError) as error:
                why = f"the grader's worker could not start: {error}"
            else:
                yield lambda case: _noted(runner.call(case.function, case.args, case.kwargs,
                                                      case.fields), student.limits)
                return
    failed = CallOutcome("unimportable", message=why)
    yield lambda case: failed


def call(student: StudentCode, case: Case) -> CallOutcome:
    """Run one case in a worker of its own (see :func:`calling`)."""
    with calling(student) as run:
        return run(case)


@dataclass(frozen=True)
class Probe:
    """What one visible case per function says of the student's code as saved now."""

    #: The functions, in the lab's order, that still raise NotImplementedError.
    unwritten: tuple[str, ...]
    #: (function, why) of those whose call hung, crashed or failed otherwise.
    failed: tuple[tuple[str, str], ...] = ()
    #: Why no function could be called (serving.py does not import, or the worker failed).
    error: str = ""


def probe(student: StudentCode, probes: Sequence[Case]) -> Probe:
    """Call each function once on its probe case (``probes``: one visible case per
    function), in one worker."""
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    with calling(student) as run:
        for case in probes:
            outcome = run(case)
            if outcome.status == "unimportable":
                return Probe(tuple(CONTRACT_FUNCTIONS), (), failed_call_message(outcome))
            if outcome.status == "raised" and outcome.message.startswith("NotImplementedError"):
                missing.append(case.function)
            elif outcome.status not in ("ok", "raised"):
                failed.append((case.function, failed_call_message(outcome)))
    return Probe(tuple(name for name in CONTRACT_FUNCTIONS if name in missing), tuple(failed))


def unwritten(student: StudentCode, probes: Sequence[Case]) -> list[str]:
    """The functions, in the lab's order, that still raise NotImplementedError on their
    first probe case (all of them when ``serving.py`` does not import)."""
    return list(probe(student, probes).unwritten)


@dataclass(frozen=True)
class Knobs:
    """The settings a student moves: where each sweep is cut, and the point marked on it."""

    arrival_qps: float
    replicas: int
    service_cv: float
    batch_size: int
    context_tokens: int
    storage_bandwidth_gbs: float
    warm_pool_replicas: int

    @classmethod
    def of(cls, track: Track) -> Knobs:
        """The track's own settings."""
        p = track.reference_profile()
        return cls(p.arrival_qps, p.replicas, p.service_cv, p.batch_size, p.context_tokens,
                   p.storage_bandwidth_gbs, p.warm_pool_replicas)


def _with(sweep: Sweep, marker: Guide, *, custom: dict[str, Any] | None = None) -> Sweep:
    """``sweep`` with ``marker`` on its first panel; with ``custom`` inputs, its cases are
    renamed (``lab-...``: no golden value) and take those inputs."""
    cases = sweep.cases
    if custom:
        cases = tuple(dataclasses.replace(case, case_id="lab-" + case.case_id,
                                          kwargs={**case.kwargs, **custom})
                      for case in cases)
    first, *rest = sweep.panels
    panels = (dataclasses.replace(first, guides=(*first.guides, marker)), *rest)
    return dataclasses.replace(sweep, cases=cases, panels=panels)


def sweeps(track: Track, knobs: Knobs) -> list[Sweep]:
    """The feedback page's sweeps of ``track`` cut at ``knobs``: each one keeps the
    page's cases (and so its reference points) while the knobs it does not sweep are the
    track's own, and marks where the knob it sweeps stands."""
    own = Knobs.of(track)
    queue = {"replicas": knobs.replicas, "service_cv": knobs.service_cv}
    queue_own = queue == {"replicas": own.replicas, "service_cv": own.service_cv}
    load = curves.load_sweep(track)
    if not queue_own:
        service_ms = track.reference_profile().service_ms
        capacity = knobs.replicas * 1000.0 / service_ms
        load = dataclasses.replace(load, xs=tuple(rho * capacity for rho in curves.LOADS),
                                   panels=(dataclasses.replace(load.panels[0], guides=(
                                       Guide("x", capacity, f"saturation ({capacity:.4g} req/s)"),
                                       *load.panels[0].guides[1:])),))
        load = dataclasses.replace(load, cases=tuple(
            dataclasses.replace(case, kwargs={**case.kwargs, "arrival_qps": x})
            for case, x in zip(load.cases, load.xs, strict=True)))
    batch_custom = {**queue, "arrival_qps": knobs.arrival_qps}
    batch_own = queue_own and knobs.arrival_qps == own.arrival_qps
    return [
        _with(load, Guide("x", knobs.arrival_qps, "your arrival rate"),
              custom=None if queue_own else queue),
        _with(curves.context_sweep(track), Guide("x", knobs.context_tokens, "your context")),
        _with(curves.batch_sweep(track), Guide("x", knobs.batch_size, "your batch size"),
              custom=None if batch_own else batch_custom),
        _with(curves.bandwidth_sweep(track),
              Guide("x", knobs.storage_bandwidth_gbs, "your storage bandwidth"),
              custom=None if knobs.warm_pool_replicas == own.warm_pool_replicas
              else {"warm_pool_replicas": knobs.warm_pool_replicas}),
        _with(curves.warm_pool_sweep(track),
              Guide("x", knobs.warm_pool_replicas, "your warm pool"),
              custom=None if knobs.storage_bandwidth_gbs == own.storage_bandwidth_gbs
              else {"storage_bandwidth_gbs": knobs.storage_bandwidth_gbs}),
    ]


def measured(student: StudentCode, chosen: Sequence[Sweep], expected: Callable[[Case], Any],
             probed: Probe | None = None) -> list[MeasuredSweep]:
    """The student's rows, measured in one worker, and the reference's (None where the
    repository has none). A function that hangs is called no more in this measurement;
    where ``probed`` found that no function can be called, none is."""
    if probed is not None and probed.error:
        failed = CallOutcome("unimportable", message=probed.error)
        return measure(chosen, lambda case: failed, expected)
    with calling(student) as run:
        return measure(chosen, run, expected)


@dataclass(frozen=True)
class Comparison:
    """How a student's curve sits against the reference points it can be compared with."""

    compared: int
    departed: int
    first: str = ""

    @property
    def text(self) -> str:
        if not self.compared:
            return ("No reference points at these settings: the repository holds them at "
                    "the track's own settings only. Your curve is drawn alone.")
        if not self.departed:
            return f"Your curve goes through all {self.compared} reference points."
        return (f"Your curve departs from the reference at {self.departed} of "
                f"{self.compared} points, first at {self.first}.")


def compare(sweep: MeasuredSweep) -> Comparison:
    """Count the points where the student's value and the reference's visibly differ."""
    compared = departed = 0
    first = ""
    for x, reference, student in zip(sweep.sweep.xs, sweep.reference, sweep.student,
                                     strict=True):
        if reference is None:
            continue
        for field in sweep.sweep.fields:
            want = reference.get(field)
            if not isinstance(want, int | float) or isinstance(want, bool):
                continue
            compared += 1
            got = student.get(field) if isinstance(student, dict) else None
            if not _close(want, got):
                departed += 1
                first = first or f"{sweep.sweep.x_label} = {x:g} ({field})"
    return Comparison(compared, departed, first)


def _close(want: float, got: Any) -> bool:
    if not isinstance(got, int | float) or isinstance(got, bool):
        return False
    if math.isinf(want) or math.isinf(got):
        return want == got
    return abs(got - want) <= VISIBLE_GAP * max(abs(want), abs(got), 1e-12)


def figure(sweep: MeasuredSweep, reality: RealityCurve | None) -> str:
    """The sweep's figure as an SVG ``data:`` URI (the feedback page's drawing)."""
    from graders.feedback.plots import figure_uri

    return figure_uri([sweep]) if reality is None else figure_uri([sweep], reality)


def reality_for(curves_of_track: Sequence[RealityCurve], sweep: Sweep, knobs: Knobs,
                track: Track) -> RealityCurve | None:
    """The track's reality curve of the sweep's function, when the knobs it depends on are
    the track's own (it was simulated there and nowhere else)."""
    own = Knobs.of(track)
    if (knobs.replicas, knobs.service_cv) != (own.replicas, own.service_cv):
        return None
    if sweep.name == "batch" and knobs.arrival_qps != own.arrival_qps:
        return None
    if sweep.name not in ("load", "batch"):
        return None
    return next((c for c in curves_of_track if c.function == sweep.function), None)


@dataclass(frozen=True)
class Preview:
    """A local preview grading: its score table, its first hints, and its exit code."""

    table: str
    hints: tuple[str, ...]
    exit_code: int
    output: str

    def hint_list(self) -> str:
        """The first hints as a Markdown list; with none, why: every visible test passes
        only when ``pytest`` said so (exit 0), never on a run that failed."""
        if self.hints:
            return "\n".join(f"- {hint}" for hint in self.hints)
        if self.exit_code == 0:
            return "- none: every visible test passes"
        return ("- none: what fails gives no hint (a function not written yet, say); "
                "the table above and `pytest` say what fails")


def preview_grading(repository: Path, timeout_s: float = 300.0) -> Preview:
    """Run ``pytest`` in the student repository (the same grading, the same feedback) and
    keep its score table and its first hints."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
                          cwd=repository, capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    return parse_preview(done.stdout, done.returncode)


def parse_preview(output: str, exit_code: int) -> Preview:
    """The score table (from its heading to the TOTAL or the partial-run line) and the first
    :data:`MAX_HINTS` distinct hints of a ``pytest`` run's output."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "serving-lab score" in line), None)
    table: list[str] = []
    if start is not None:
        for line in lines[start + 1:]:
            if line.startswith("results written") or line.startswith("=") and table:
                break
            table.append(line)
    hints = tuple(dict.fromkeys(line.strip().removeprefix("hint:").strip()
                                for line in lines if line.strip().startswith("hint:")))
    return Preview("\n".join(table).strip("\n"), hints[:MAX_HINTS], exit_code, output)


def wrapped(text: str) -> str:
    """``text`` as preformatted HTML whose long lines wrap (no sideways scrolling)."""
    return (f'<pre style="white-space: pre-wrap; overflow-wrap: anywhere; '
            f'font-size: 0.85em">{html.escape(text)}</pre>')


@dataclass(frozen=True)
class Shown:
    """One sweep as the notebook shows it: a figure (None when the student has no curve
    yet) and one line about it."""

    uri: str | None
    text: str
    #: The figure's natural width in CSS pixels (a panel is 440).
    width: int = 0

    def img(self, alt: str) -> str:
        """The figure as an ``<img>`` at its natural size ("" when there is none)."""
        if self.uri is None:
            return ""
        return (f'<img src="{self.uri}" alt="{html.escape(alt)}" '
                f'style="width: {self.width}px; max-width: 100%; height: auto">')


def show(sweep: MeasuredSweep, reality: RealityCurve | None) -> Shown:
    """The figure and the comparison of one measured sweep; a function not written yet, or
    one that fails everywhere, gets its message instead of a figure."""
    if not sweep.plotted:
        return Shown(None, sweep.message or "")
    text = compare(sweep).text
    if sweep.notes:
        text += " " + "; ".join(sweep.notes[:2])
    from graders.feedback.plots import PANEL_WIDTH

    return Shown(figure(sweep, reality), text, round(PANEL_WIDTH * len(sweep.sweep.panels)))


def slider_steps(track: Track) -> dict[str, list[float]]:
    """The values each knob's slider offers: the page's sweep points and the track's own
    value (so that the track's settings, with their reference points, can be chosen)."""
    own = Knobs.of(track)
    capacity = own.replicas * 1000.0 / track.reference_profile().service_ms
    scale_out = max(curves.WARM_POOL_SCALE_OUT, track.reference_profile().scale_out_replicas)

    def steps(values: Sequence[float], mine: float) -> list[float]:
        return sorted({*values, mine})

    return {
        "arrival_qps": steps([rho * capacity for rho in curves.LOADS], own.arrival_qps),
        "replicas": steps(range(1, max(16, 2 * own.replicas) + 1), own.replicas),
        "service_cv": steps((0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0), own.service_cv),
        "batch_size": steps(BATCHES, own.batch_size),
        "context_tokens": steps(curves.CONTEXTS, own.context_tokens),
        "storage_bandwidth_gbs": steps(curves.BANDWIDTHS, own.storage_bandwidth_gbs),
        "warm_pool_replicas": steps(range(scale_out + 2), own.warm_pool_replicas),
    }


def batch_of_one_note(track: Track, knobs: Knobs) -> str:
    """Markdown: why ``batching_tax`` at B = 1 is not section 1's queue on ``track`` at
    ``knobs``: it divides the service time by the track's efficiency gain at every batch
    size, B = 1 included (lab spec, batching_tax)."""
    profile = track.reference_profile()
    gain = max(1.0, float(profile.batch_efficiency_gain))
    service = float(profile.service_ms)
    plain = knobs.replicas * 1000.0 / service

    def load(capacity: float) -> str:
        share = knobs.arrival_qps / capacity
        return (f"{share:.0%} of that" if share < 1 else
                f"{share:.0%} of that: past saturation, so that queue is unstable")

    if gain == 1.0:
        return (f"**B = 1 here is section 1's queue.** On {track.label} the efficiency gain "
                "is 1, so `batching_tax` at B = 1 serves each request in the track's "
                f"service time ({service:g} ms), as `queueing_latency` does.")
    batched = service / gain
    return (f"**Why B = 1 here differs from section 1.** `batching_tax` divides the service "
            f"time by the track's efficiency gain g = {gain:g} at every batch size, B = 1 "
            "included: batched_service_ms = service_ms · (1 + 0.08·log₂B) / g. At B = 1 a "
            f"request takes {service:g} / {gain:g} = {batched:.3g} ms, so {knobs.replicas} "
            f"replicas serve up to {knobs.replicas * 1000.0 / batched:,.0f} req/s, and "
            f"{knobs.arrival_qps:g} req/s is {load(knobs.replicas * 1000.0 / batched)}. "
            f"Section 1's queue serves each request in the full {service:g} ms: "
            f"{knobs.replicas} replicas serve up to {plain:,.0f} req/s, and "
            f"{knobs.arrival_qps:g} req/s is {load(plain)}.")
