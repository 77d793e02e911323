"""The HTML feedback report of one grading run: measure the curves, draw them, write the page.

The curves are measured while the student's worker still runs (before the session
closes); the page is written after ``results.json``, from the same results document.
A failure here never costs the results: the page then says what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.feedback.audience import Audience
from graders.feedback.curves import track_sweeps
from graders.feedback.measure import MeasuredSweep, measure
from graders.feedback.render import PlotView, build_page
from graders.reality.curves import RealityCurve
from graders.reality.store import load_reality, missing_reasons
from graders.results.files import write_text_atomically

if TYPE_CHECKING:
    from graders.grading.cases import Case
    from graders.sandbox.runner import StudentRunner
    from graders.trackfiles.tracks import Track


@dataclass(frozen=True)
class FeedbackReport:
    """The measured curves of one run, by track (or why they could not be measured)."""

    track_labels: Mapping[str, str]
    measured: tuple[MeasuredSweep, ...]
    error: str | None = None
    #: Each track's reality curves, read from their cache (none when not built).
    reality: Mapping[str, tuple[RealityCurve, ...]] = field(default_factory=dict)
    #: Why a track has no reality curves (graders.reality.store.missing_reasons).
    reality_missing: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def measure(cls, tracks: Sequence[Track], runner: StudentRunner,
                expected: Callable[[Case], Any]) -> FeedbackReport:
        """Measure every track's curves: the student's values through ``runner``, the
        expected ones from ``expected`` (the session's oracle)."""
        labels = {track.track_id: track.label for track in tracks}
        try:
            sweeps = [sweep for track in tracks for sweep in track_sweeps(track)]
            measured = measure(sweeps, lambda case: runner.call(
                case.function, case.args, case.kwargs, case.fields), expected)
        except Exception as error:  # the grader's own failure: report it, keep grading
            return cls(labels, (), f"the curves could not be measured: "
                                   f"{type(error).__name__}: {error}")
        try:
            reality = load_reality(tracks)
            missing = missing_reasons(tracks, reality)
        except Exception:  # the reality curves are a bonus: never a failure of the page
            reality, missing = {}, {}
        return cls(labels, tuple(measured), reality=reality, reality_missing=missing)

    def views(self) -> list[PlotView]:
        """One view per track and plotted function, with its figure drawn."""
        groups: dict[tuple[str, str], list[MeasuredSweep]] = {}
        for item in self.measured:  # in track order, then function order
            groups.setdefault((item.sweep.track_id, item.sweep.function), []).append(item)
        views = []
        for (track_id, function), sweeps in groups.items():
            plotted = [m for m in sweeps if m.plotted]
            real = next((c for c in self.reality.get(track_id, ()) if c.function == function),
                        None)
            views.append(PlotView(
                track_id=track_id, track_label=self.track_labels.get(track_id, track_id),
                function=function, image=_figure(plotted, real) if plotted else None,
                messages=_unique(m.message for m in sweeps if m.message),
                notes=_unique(note for m in plotted for note in m.notes),
                violations=_unique(f"{m.sweep.x_label} = {m.sweep.xs[v.index]:g}: {v.rule}"
                                   for m in plotted for v in m.violations)))
        return views

    def page(self, document: Mapping[str, Any], audience: Audience = "student") -> str:
        """The page for ``audience``; if the plots fail, the page without them and the
        reason; if the page itself fails, a page with the score and the reason. Never
        raises."""
        try:
            views = self.views()
            error = self.error
        except Exception as failure:  # the grader's own failure: the scores still show
            views, error = [], f"the plots could not be drawn: {type(failure).__name__}: " \
                               f"{failure}"
        notes = () if error is None else (error,)
        try:
            return build_page(document, views, reality=self.reality,
                              reality_missing=self.reality_missing, notes=notes,
                              audience=audience)
        except Exception as failure:  # e.g. a malformed document: say so, keep the score
            reason = f"the page could not be built: {type(failure).__name__}: {failure}"
            score = document.get("score", 0.0)
            tests = document.get("tests")
            counts_hidden = not isinstance(tests, list) or any(
                not isinstance(t, Mapping) or t.get("visibility", "visible") != "visible"
                for t in tests)
            if audience == "student" and counts_hidden:  # no total that implies them
                return build_page({"grader_failed": True, "tests": []}, [],
                                  notes=(*notes, reason))
            return build_page({"score": score if isinstance(score, int | float) else 0.0,
                               "tests": []}, [], notes=(*notes, reason), audience=audience)

    def write(self, path: Path, document: Mapping[str, Any],
              audience: Audience = "student") -> None:
        """Write the page for ``audience`` to ``path`` atomically; a character UTF-8
        cannot encode is written as its escape, so encoding never fails."""
        write_text_atomically(path, self.page(document, audience))


def _figure(plotted: list[MeasuredSweep], reality: RealityCurve | None) -> str:
    from graders.feedback.plots import figure_uri

    return figure_uri(plotted) if reality is None else figure_uri(plotted, reality)


def _unique(items: Iterable[Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(item) for item in items))
