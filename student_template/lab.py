import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="The serving lab: your functions, live")


@app.cell(hide_code=True)
def _():
    from pathlib import Path

    import marimo as mo

    from graders.feedback import explore, predictions

    here = Path(mo.notebook_dir() or ".").resolve()
    lab = explore.open_lab(here)
    # `marimo edit lab.py -- --reveal` (or export): every plot at once, no predictions asked
    reveal = "reveal" in mo.cli_args()
    return explore, here, lab, mo, predictions, reveal


@app.cell(hide_code=True)
def _(mo):
    mo.md(
        r"""
        # The serving lab, with your code inside

        Every plot below is drawn by **your own `serving.py`**, run as `pytest` runs it:
        in the grader's worker, with the same 3 s deadline for each call, so a function
        that hangs gets a note here instead of freezing the notebook. Save the file and
        the notebook runs it again. The dots are the points
        this repository already holds: the expected values of the visible tests at each
        track's own settings, and the *real* p99 (exact or simulated) where the lab's
        formulas are an approximation. Move a knob away from the track's settings and
        your curve is drawn alone: the repository has no expected values there.

        Nothing here is graded. The last cell runs the same preview grading as `pytest`.
        Each section asks you to predict before it shows your curve; to see every plot
        at once, with no questions, open it with `marimo edit lab.py -- --reveal`.
        """
    )
    return


@app.cell(hide_code=True)
def _(explore, here, mo):
    source = mo.watch.file(here / "serving.py")
    student = explore.load_student(source.read_bytes())
    return (student,)


@app.cell(hide_code=True)
def _(explore, lab, mo, student):
    probed = explore.probe(student, lab.probes)
    todo = probed.unwritten
    if probed.error:
        status = mo.callout(mo.md(f"**{probed.error}**. Fix it and save: the notebook "
                                  "reloads it."), kind="danger")
    elif probed.failed:
        status = mo.callout(mo.md("\n\n".join(f"**`{name}`**: {why.rstrip('.')}."
                                               for name, why in probed.failed)),
                            kind="danger")
    elif todo:
        first = todo[0]
        done = [case.function for case in lab.probes if case.function not in todo]
        status = mo.callout(mo.md(
            f"**Start with `{first}`**: it still raises NotImplementedError"
            + (f" (so do {', '.join(f'`{name}`' for name in todo[1:])})" if todo[1:] else "")
            + ". Its docstring in `serving.py` is its whole specification. "
            + (f"Written so far: {', '.join(f'`{name}`' for name in done)}." if done
               else "The plots below fill in as you write each function.")), kind="warn")
    else:
        status = mo.callout(mo.md("Every function of `serving.py` is written. Compare your "
                                  "curves with the dots below."), kind="success")
    status
    return (probed,)


@app.cell(hide_code=True)
def _(lab, mo):
    track_choice = mo.ui.dropdown(options={track.label: track.track_id for track in lab.tracks},
                                  value=lab.tracks[0].label, label="Track")
    track_choice
    return (track_choice,)


@app.cell(hide_code=True)
def _(explore, lab, mo, track_choice):
    track = lab.track(track_choice.value)
    own = explore.Knobs.of(track)
    steps = explore.slider_steps(track)

    def knob(name: str, label: str):
        return mo.ui.slider(steps=steps[name], value=getattr(own, name), label=label,
                            show_value=True)

    controls = mo.ui.dictionary({
        "arrival_qps": knob("arrival_qps", "arrival rate (req/s)"),
        "replicas": knob("replicas", "replicas"),
        "service_cv": knob("service_cv", "service-time cv"),
        "batch_size": knob("batch_size", "batch size"),
        "context_tokens": knob("context_tokens", "context length (tokens)"),
        "storage_bandwidth_gbs": knob("storage_bandwidth_gbs", "storage bandwidth (GB/s)"),
        "warm_pool_replicas": knob("warm_pool_replicas", "warm pool (replicas)"),
    })
    mo.vstack([mo.md(f"**{track.label}**: {track.reference_profile().model_name} on "
                     f"{track.reference_profile().hardware_name}. The knobs start at the "
                     "track's own settings."), controls.vstack()])
    return controls, own, track


@app.cell(hide_code=True)
def _(controls, explore, lab, probed, student, track):
    knobs = explore.Knobs(
        arrival_qps=float(controls.value["arrival_qps"]),
        replicas=int(controls.value["replicas"]),
        service_cv=float(controls.value["service_cv"]),
        batch_size=int(controls.value["batch_size"]),
        context_tokens=int(controls.value["context_tokens"]),
        storage_bandwidth_gbs=float(controls.value["storage_bandwidth_gbs"]),
        warm_pool_replicas=int(controls.value["warm_pool_replicas"]),
    )
    chosen = explore.sweeps(track, knobs)
    measured = {m.sweep.name: m for m in explore.measured(student, chosen, lab.expected,
                                                          probed)}

    def shown(name: str):
        sweep = measured[name]
        reality = explore.reality_for(lab.reality.get(track.track_id, ()), sweep.sweep,
                                      knobs, track)
        return explore.show(sweep, reality)

    return knobs, measured, shown


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""## 1. The tail: what load does to p99""")
    return


@app.cell(hide_code=True)
def _(mo, predictions):
    tail_guess = mo.ui.radio(
        options=list(predictions.TAIL_CHOICES),
        label="**Predict first.** The load goes from 50 % to 90 % of the fleet's capacity. "
              "What does p99 do?")
    tail_guess
    return (tail_guess,)


@app.cell(hide_code=True)
def _(measured, mo, predictions, reveal, shown, tail_guess):
    mo.stop(tail_guess.value is None and not reveal,
            mo.md("*Make your prediction to see your curve.*"))
    tail_view = shown("load")
    mo.vstack([
        mo.md(predictions.verdict(tail_guess.value, measured["load"], predictions.tail,
                                  "p99 {}", "Your queueing_latency")),
        mo.Html(tail_view.img("p99 and p999 against the arrival rate")),
        mo.md(tail_view.text),
    ])
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""## 2. The batching tax: waiting for a batch to form""")
    return


@app.cell(hide_code=True)
def _(mo, predictions):
    batch_guess = mo.ui.radio(
        options=list(predictions.BATCH_CHOICES),
        label="**Predict first.** At the track's arrival rate, is the total p99 of a "
              "request with batches of 32 lower or higher than without batching?")
    batch_guess
    return (batch_guess,)


@app.cell(hide_code=True)
def _(batch_guess, explore, knobs, measured, mo, predictions, reveal, shown, track):
    mo.stop(batch_guess.value is None and not reveal,
            mo.md("*Make your prediction to see your curve.*"))
    batch_view = shown("batch")
    mo.vstack([
        mo.md(predictions.verdict(batch_guess.value, measured["batch"], predictions.batching,
                                  "with batches of 32 the total p99 is {}",
                                  "Your batching_tax")
              + " Read the left panel at batch sizes 1 and 32: formation delay grows with "
              "the batch, while a stable queue's tail shrinks as batches serve more "
              "requests per pass."),
        mo.Html(batch_view.img("total p99 and throughput gain against the batch size")),
        mo.md(batch_view.text),
        mo.md(explore.batch_of_one_note(track, knobs)),
    ])
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""## 3. Memory: how many requests fit beside the weights""")
    return


@app.cell(hide_code=True)
def _(mo, predictions):
    memory_guess = mo.ui.radio(
        options=list(predictions.MEMORY_CHOICES),
        label="**Predict first.** When the context length doubles, the number of "
              "concurrent requests that fit...")
    memory_guess
    return (memory_guess,)


@app.cell(hide_code=True)
def _(knobs, measured, memory_guess, mo, predictions, reveal, shown):
    mo.stop(memory_guess.value is None and not reveal,
            mo.md("*Make your prediction to see your curve.*"))
    memory_view = shown("context")
    mo.vstack([
        mo.md(predictions.verdict(
            memory_guess.value, measured["context"],
            lambda sweep, reference: predictions.memory(sweep, reference,
                                                        knobs.context_tokens),
            "the number of concurrent requests that fit {}", "Your cache_capacity")
              + " A transformer's KV cache grows with every token; a model "
              "without one keeps a fixed state per request."),
        mo.Html(memory_view.img("max concurrent requests against the context length")),
        mo.md(memory_view.text),
    ])
    return


@app.cell(hide_code=True)
def _(mo, shown):
    bandwidth_view = shown("bandwidth")
    pool_view = shown("warm-pool")
    mo.vstack([
        mo.md("## 4. Cold starts: bandwidth and the warm pool"),
        mo.hstack([
            mo.vstack([mo.Html(bandwidth_view.img("cold start against the storage bandwidth")),
                       mo.md(bandwidth_view.text)]),
            mo.vstack([mo.Html(pool_view.img("exposed latency against the warm pool")),
                       mo.md(pool_view.text)]),
        ], widths="equal", wrap=True, align="start"),
    ])
    return


@app.cell(hide_code=True)
def _(mo):
    run_preview = mo.ui.run_button(label="Run the preview grading")
    mo.vstack([
        mo.md("## 5. The preview grading\n\nThe same grading as `pytest` in this "
              "repository: the visible tests only. It is a **preview**: the course's "
              "grader also checks every function on inputs you have not seen, and that "
              "grade is the one that counts."),
        run_preview,
    ])
    return (run_preview,)


@app.cell(hide_code=True)
def _(explore, here, mo, run_preview):
    mo.stop(not run_preview.value, mo.md("*Press the button to grade your serving.py.*"))
    preview = explore.preview_grading(here)
    hints = preview.hint_list()
    mo.vstack([
        mo.md("**Preview** of the visible tests (not your grade):"),
        mo.Html(explore.wrapped(preview.table or preview.output[-3000:])),
        mo.md(f"**First hints**, as `pytest` gives them:\n\n{hints}"),
    ])
    return


if __name__ == "__main__":
    app.run()
