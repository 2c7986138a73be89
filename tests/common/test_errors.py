import pytest

from common.errors import error_reason


class OpError(Exception):
    """Like TensorFlow's errors: the text in `.message`."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


@pytest.mark.parametrize("error, reason", [
    (ValueError("bad value\nmore detail"), "bad value"),
    (ValueError("\n  \n  indented first line  \nsecond"), "indented first line"),
    # A graph-execution error: the line saying what is wrong, without the node and op tags.
    (OpError("Graph execution error:\n\nDetected at node DecodeJpeg defined at (most recent call last):\n"
             "<stack traces unavailable>\n{{function_node __wrapped__DecodeJpeg}} Unknown image file format. "
             "One of JPEG, PNG, GIF, BMP required. [Op:DecodeImage]\n\t [[{{node DecodeJpeg}}]]"),
     "Unknown image file format. One of JPEG, PNG, GIF, BMP required."),
    # TensorFlow's "<file>; <reason>": the reason.
    (OpError("/runs/a/ckpt-3_temp/part-00000-of-00001.data-00000-of-00001; File too large"), "File too large"),
    (ValueError(""), "ValueError"),
    (OpError("Graph execution error:\n"), "OpError"),
])
def test_an_errors_reason_is_the_line_that_says_what_is_wrong(error, reason):
    assert error_reason(error) == reason


def test_a_reason_is_cut_to_the_limit():
    assert error_reason(ValueError("x" * 500)) == "x" * 200
    assert error_reason(ValueError("x" * 500), limit=300) == "x" * 300
