"""The student bundle's lab notebook, run as a student runs it: the bundle exported,
installed with its `notebook` extra in a fresh environment, and ``lab.py`` run headless by
marimo (``marimo export html``: every cell runs, or the command fails) with the untouched
template, a correct submission, a buggy one and one that hangs; then the exported page in
Chromium, and the notebook opened as the README says (``marimo edit lab.py``) in Chromium."""

from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import time
import venv
from pathlib import Path

import pytest
from helpers import CHROMIUM_ARGS, CORPUS, REPO, chromium, graders

from graders.feedback.explore import HANG_NOTE
from graders.sandbox.limits import Limits

pytestmark = pytest.mark.slow

#: Every figure the notebook draws: the load, batch, context, bandwidth and warm-pool sweeps.
FIGURES = 5


def run(command: list[str | Path], cwd: Path, timeout: float = 900
        ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("PYTEST_") and k != "VIRTUAL_ENV"}
    return subprocess.run([str(part) for part in command], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A freshly exported student repository, installed with the notebook extra."""
    root = tmp_path_factory.mktemp("notebook")
    bundle = root / "serving-lab"
    exported = graders("export", "student", bundle)
    assert exported.returncode == 0, exported.stderr
    venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
    install = run([root / "venv" / "bin" / "python", "-m", "pip", "install", "--quiet", "-e",
                   ".[notebook]"], cwd=bundle)
    assert install.returncode == 0, install.stderr
    return bundle


def export_html(repository: Path, submission: Path | None, name: str,
                timeout: float = 900) -> str:
    """``lab.py`` run headless on ``submission`` (None: the untouched template)."""
    if submission is not None:
        shutil.copyfile(submission, repository / "serving.py")
    else:
        shutil.copyfile(REPO / "student_template" / "serving.py", repository / "serving.py")
    marimo = repository.parent / "venv" / "bin" / "marimo"
    output = repository.parent / f"{name}.html"
    done = run([marimo, "export", "html", "lab.py", "-f", "-o", output, "--", "--reveal"],
               cwd=repository, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr  # every cell ran
    return output.read_text(encoding="utf-8")


def decoded(page: str) -> str:
    """The export with its cells' outputs (HTML escaped into JSON, then into the page)
    turned back into HTML."""
    page = page.replace("\\u0026#92;", "\\")
    for code, char in (("\\u003c", "<"), ("\\u003e", ">"), ("\\u0026", "&"), ('\\"', '"')):
        page = page.replace(code, char)
    return page


def outputs(page: str) -> str:
    """The words of the export, markup left out (so `serve` in an output reads serve)."""
    return re.sub(r"<[^>]+>", "", decoded(page))


def test_the_bundle_installs_marimo_only_with_the_notebook_extra(repository: Path) -> None:
    pyproject = (repository / "pyproject.toml").read_text(encoding="utf-8")
    assert 'notebook = ["marimo==' in pyproject
    dependencies = re.search(r"^dependencies = (.*)$", pyproject, re.MULTILINE)
    assert dependencies is not None
    assert "marimo" not in dependencies.group(1)
    assert (repository / "lab.py").is_file()


def test_on_the_untouched_template_the_notebook_says_what_to_write_first(
        repository: Path) -> None:
    page = export_html(repository, None, "template")
    assert "Start with serve: it still raises NotImplementedError" in outputs(page)
    assert "data:image/svg+xml" not in decoded(page)  # no curve to draw yet, and no error
    assert "not implemented yet" in outputs(page)


def test_a_correct_submission_draws_every_figure_through_the_reference_points(
        repository: Path) -> None:
    page = export_html(repository, CORPUS / "correct" / "serving.py", "correct")
    text = outputs(page)
    assert "Every function of serving.py is written" in text
    assert decoded(page).count("data:image/svg+xml") == FIGURES
    assert text.count("Your curve goes through all") == FIGURES
    assert "departs from the reference" not in text


def test_a_buggy_submissions_p99_curve_departs_from_the_reference_points(
        repository: Path) -> None:
    page = export_html(repository, CORPUS / "p99_at_q095" / "serving.py", "buggy")
    text = outputs(page)
    assert decoded(page).count("data:image/svg+xml") == FIGURES
    assert re.search(r"Your curve departs from the reference at \d+ of \d+ points, first at "
                     r"arrival rate", text)


@pytest.mark.parametrize("name", ["correct", "buggy"])
def test_the_exported_notebook_in_headless_chromium(repository: Path, tmp_path: Path,
                                                   name: str) -> None:
    """The exported page loads marimo's frontend from its CDN; here it is served from the
    installed marimo's own copy, and any other request is refused (the test is offline)."""
    executable = chromium()
    from playwright.sync_api import Route, sync_playwright

    submission = CORPUS / ("correct" if name == "correct" else "p99_at_q095") / "serving.py"
    export_html(repository, submission, name)
    page_file = repository.parent / f"{name}.html"
    venv_python = repository.parent / "venv" / "bin" / "python"
    located = run([venv_python, "-c", "import marimo, pathlib; "
                   "print(marimo.__version__, pathlib.Path(marimo.__file__).parent)"],
                  cwd=repository)
    version, folder = located.stdout.split()
    static = Path(folder) / "_static"
    cdn = f"https://cdn.jsdelivr.net/npm/@marimo-team/frontend@{version}/dist/"
    refused: list[str] = []
    problems: list[str] = []

    def route(request: Route) -> None:
        url = request.request.url
        if url.startswith(cdn):
            local = static / url[len(cdn):].split("?", 1)[0]
            if local.is_file():
                request.fulfill(path=str(local))
                return
        if url.startswith(("file:", "data:", "blob:")):
            request.continue_()
            return
        refused.append(url)
        request.abort()

    screenshot = tmp_path / f"{name}.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 5200})
            page.route("**/*", route)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_selector("img[src^='data:image/svg+xml']", timeout=60_000)
            page.wait_for_function("document.querySelectorAll("
                                   "\"img[src^='data:image/svg+xml']\").length >= 5",
                                   timeout=60_000)
            images = page.eval_on_selector_all(
                "img[src^='data:image/svg+xml']", "els => els.map(e => e.complete && "
                "e.naturalWidth > 0)")
            text = page.locator("body").inner_text()
            page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    print(f"screenshot of the {name} notebook: {screenshot}")  # noqa: T201
    assert problems == []
    assert refused == []
    assert images == [True] * FIGURES
    assert "The serving lab, with your code inside" in text
    assert ("departs from the reference" in text) == (name == "buggy")
    assert screenshot.stat().st_size > 50_000


def hanging_submission(folder: Path) -> Path:
    """The correct submission, with ``serve`` looping forever and ``queueing_latency``
    looping forever past 80 % load."""
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    heavy = "    v = max(0.1, (1 + service_cv**2) / 2)\n"
    serve = "def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):\n"
    assert source.count(heavy) == 1
    assert source.count(serve) == 1
    source = source.replace(heavy, "    while utilization > 0.8:\n        pass\n" + heavy)
    source = source.replace(serve, serve + "    while True:\n        pass\n")
    path = folder / "serving.py"
    path.write_text(source, encoding="utf-8")
    return path


def test_a_serving_py_that_hangs_gives_notes_and_the_export_finishes(
        repository: Path, tmp_path: Path) -> None:
    """Every call runs in the grader's worker with its 3 s deadline: the export ends (its
    bound: both of the notebook's workers spending their whole hang budget, and a
    minute more), the hanging functions are named, and the others are still drawn."""
    bound = 2 * Limits().hang_worst_case_s + 60
    page = export_html(repository, hanging_submission(tmp_path), "hanging", timeout=bound)
    text = " ".join(html.unescape(outputs(page)).split())  # a callout's HTML is escaped
    note = HANG_NOTE.format(deadline=Limits().call_timeout_s)
    assert f"serve: {note}" in text  # the status, from the probe of serve
    assert f"queueing_latency: {note}" in text  # the load plot, in place of its figure
    assert decoded(page).count("data:image/svg+xml") == FIGURES - 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_marimo_edit_as_the_readme_says_shows_the_curves_without_a_click(
        repository: Path, tmp_path: Path) -> None:
    """``marimo edit lab.py``, opened in Chromium and never clicked: the status, the
    sliders and the curves that ask no prediction (section 4) show; nothing is fetched
    from outside the student's machine."""
    executable = chromium()
    from playwright.sync_api import Route, sync_playwright

    shutil.copyfile(CORPUS / "correct" / "serving.py", repository / "serving.py")
    shutil.rmtree(repository / "__marimo__", ignore_errors=True)  # no outputs to replay
    port = free_port()
    origin = f"127.0.0.1:{port}"
    marimo = repository.parent / "venv" / "bin" / "marimo"
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("PYTEST_") and k != "VIRTUAL_ENV"}
    server = subprocess.Popen([str(marimo), "edit", "lab.py", "--headless", "--no-token",
                               "--skip-update-check", "-p", str(port)], cwd=repository,
                              env=environment, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    refused: list[str] = []

    def route(request: Route) -> None:
        url = request.request.url
        if url.split("://", 1)[-1].startswith(origin) or url.startswith(("data:", "blob:")):
            request.continue_()
            return
        refused.append(url)
        request.abort()

    screenshot = tmp_path / "edit.png"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "marimo edit stopped"
                assert time.monotonic() < deadline, "marimo edit did not start"
                time.sleep(0.2)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable,
                                                 args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 3000})
                page.route("**/*", route)
                page.goto(f"http://{origin}/", wait_until="load")
                status = page.get_by_text("Every function of")  # in a shadow root
                status.wait_for(timeout=120_000)
                page.wait_for_function("document.querySelectorAll("
                                       "\"img[src^='data:image/svg+xml']\").length >= 2",
                                       timeout=120_000)
                text = " ".join(status.inner_text().split())
                asked = page.get_by_text("Make your prediction to see your curve").count()
                sliders = page.locator("[role=slider]").count()
                figures = page.locator("img[src^='data:image/svg+xml']").count()
                page.screenshot(path=str(screenshot), full_page=True)
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"screenshot of marimo edit: {screenshot}")  # noqa: T201
    assert "Every function of serving.py is written" in text
    assert sliders == 7
    assert figures == 2  # section 4's curves; sections 1 to 3 wait for a prediction
    assert asked == 3
    assert refused == []
