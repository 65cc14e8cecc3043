"""``make demo``: the bundled example, end to end."""

from __future__ import annotations

from stitch.zoo.demo_model import make_demo


def run_demo(out_dir: str) -> int:
    import stitch

    model, args, kwargs, examples = make_demo()
    print("== 1. census: where the demo model breaks under torch.compile ==")
    census = stitch.explain(model, args, kwargs, examples=examples)
    print(census)
    return 0
