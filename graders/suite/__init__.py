"""The grading suite run by the plugin."""

#: Suite modules whose tests are not visible: graded with the reference only, and left
#: out of the student bundle (``graders export`` checks every hidden test lives in one).
HIDDEN_PREFIX = "test_hidden"
#: The suite module of the graded extensions: collected only when a course gives them
#: points (``--grader-exact-p99-points``); otherwise no test of it runs or is listed.
EXTENSIONS_MODULE = "test_extensions.py"
