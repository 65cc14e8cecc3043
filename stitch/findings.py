"""What a program's report says besides the rewrites: the epilogue's calls as decisions,
the graph's control-flow ops, and notes on what stitch did to the graph on the way."""

from __future__ import annotations

import torch

from .plan import Action, Decision


def epilogue_decisions(census, epilogue) -> list[Decision]:
    """One EPILOGUE decision per source location of a deferred call (census site or not)."""
    by_location: dict[str, list] = {}
    out = []
    for entry in epilogue.entries:
        if entry.kind == "check":
            site = entry.options["site"]
            out.append(Decision(
                Action.CHECK, entry.location, "",
                f"{site}: the graph returns the condition and the epilogue raises "
                f"{entry.options['type']} after the graph ran (a failed check in a CUDA "
                "graph is a device-side assert that ends the CUDA context; Settings.checks)",
                site))
            continue
        by_location.setdefault(entry.location, []).append(entry)
    for location, entries in by_location.items():
        site = next((s for s in census.sites if s.location == location), None)
        kinds = sorted({e.options.get("method", e.kind) for e in entries})
        tensors = sum(a.kind == "tensor" for e in entries for a in e.args)
        out.append(Decision(
            Action.EPILOGUE, location, site.function if site else "",
            f"{len(entries)} call(s) ({', '.join(kinds)}) replayed after the graph; "
            f"{tensors} tensor value(s) returned by the graph",
            site.id if site else ""))
    return out


def hop_counts(gm: torch.fx.GraphModule) -> dict[str, int]:
    counts: dict[str, int] = {}
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", str(node.target))
            target = str(node.target)
            if name in ("cond", "while_loop") or "_assert_async" in target \
                    or target.startswith("aten.where.self"):
                key = ("assert" if "_assert_async" in target
                       else "where" if "where" in target else name)
                counts[key] = counts.get(key, 0) + 1
    return counts


def graph_notes(forced, dead_reads: int, registered: list[str], inlined: int = 0,
                dead: list[str] = ()) -> tuple[str, ...]:
    notes = []
    if registered:
        notes.append(f"registered {', '.join(registered)} as a pytree for torch.export "
                     "(process-wide; stitch/pytree_types.py says how)")
    if dead_reads:
        notes.append(f"removed {dead_reads} unused scalar read(s) of constants that "
                     "torch.export left in the graph (they stop torch.compile and "
                     "AOTInductor, and would be host syncs on a GPU)")
    if inlined:
        notes.append(f"turned {inlined} scalar constant(s) inside cond/while_loop branches "
                     "into aten.full ops (torch.export lifts only the top graph's constants; "
                     "AOTInductor and torch.export.save refuse the others)")
    if forced:
        own = [r for r in forced if getattr(r[2], "against", "model") == "model"]
        notes.append(f"forced {len(forced)} branch side(s) the examples did not take; "
                     f"{len(own)} checked against the model's own code with that test "
                     "forced")
        rewrite_only = [f"{site} {'true' if side else 'false'} "
                        f"({getattr(fn, 'why', 'a branch stitch built')})"
                        for site, side, fn, _ in forced if getattr(fn, "against", "") == "rewrite"]
        if rewrite_only:
            notes.append("checked against stitch's rewrite only, as the model cannot be "
                         f"forced there: {'; '.join(rewrite_only)}")
    if dead:
        notes.append(f"not forced, as no input can run them (the enclosing arms' size tests "
                     f"decide the branch's own test the other way): {'; '.join(dead)}")
    return tuple(notes)
