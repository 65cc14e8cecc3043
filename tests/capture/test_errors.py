"""One-line error summaries keep what broke, not only torch's announcement of it."""

from __future__ import annotations

from capture.errors import gist


class UncapturedHigherOrderOpError(RuntimeError):
    pass


def test_an_announcing_first_line_is_joined_to_what_it_announces():
    error = UncapturedHigherOrderOpError(
        "This higher order operator doesn't work unless it is captured completely with "
        "torch.compile. Got graph break/error:\n\nAttempted to wrap unbacked SymInt\n"
        "  Higher Order Operator: torch.cond\n  Explanation: not supported yet.\n")
    text = gist(error)
    assert text.startswith("UncapturedHigherOrderOpError: This higher order operator")
    assert text.endswith("Got graph break/error: Attempted to wrap unbacked SymInt "
                         "Explanation: not supported yet.")


def test_a_plain_first_line_stays_alone_and_long_text_is_cut():
    assert gist(ValueError("shapes differ\nmore detail")) == "ValueError: shapes differ"
    assert gist(ValueError("")) == "ValueError: "
    assert len(gist(ValueError("x" * 1000), limit=50)) == len("ValueError: ") + 53
