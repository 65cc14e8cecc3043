"""The server's start line says which guards a program has (from the artifact manifest)."""

from __future__ import annotations

from stitch.serve.variant import guards_line


def test_no_guards_says_every_input_is_accepted():
    manifest = {"report": {"decisions": [{"action": "torch.cond", "location": "m.py:3",
                                          "reason": "cond"}]}}
    assert guards_line(manifest).startswith("guards: none")
    assert guards_line({}).startswith("guards: none")


def test_each_guard_is_named_with_its_place():
    manifest = {"report": {"decisions": [
        {"action": "guarded", "location": "m.py:7", "reason": "specialised to the true branch"},
        {"action": "epilogue", "location": "m.py:9", "reason": "print"}]}}
    line = guards_line(manifest)
    assert line.startswith("guards: 1 specialised branch(es)")
    assert "m.py:7: specialised to the true branch" in line and "m.py:9" not in line
