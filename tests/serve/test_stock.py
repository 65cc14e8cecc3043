"""``stitch serve`` on the stock Triton leaves nothing of its repository copy behind."""

from __future__ import annotations

import os

import pytest

from stitch.serve import stock


@pytest.mark.parametrize("outcome", ["exits", "raises"])
def test_the_repository_copy_is_removed_when_the_server_stops(monkeypatch, outcome):
    seen = {}

    def serve_in(workdir, path, options, log):
        seen["workdir"] = workdir
        with open(os.path.join(workdir, "config.pbtxt"), "w") as f:
            f.write("name: 'm'")
        if outcome == "raises":
            raise KeyboardInterrupt
        return 0

    monkeypatch.setattr(stock, "_serve_in", serve_in)
    if outcome == "raises":
        with pytest.raises(KeyboardInterrupt):
            stock.serve_repository("model.pt2", None)
    else:
        assert stock.serve_repository("model.pt2", None) == 0
    assert not os.path.exists(seen["workdir"])
