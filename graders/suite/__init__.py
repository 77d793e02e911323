"""The grading suite run by the plugin."""

#: Suite modules whose tests are not visible: graded with the reference only, and left
#: out of the student bundle (``graders export`` checks every hidden test lives in one).
HIDDEN_PREFIX = "test_hidden"
