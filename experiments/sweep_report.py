"""Classifies the sweep's per-model records and writes the summary (pure: no model runs)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    ONE_GRAPH = "one_graph"  # stitch returned a verified program that matches eager here too
    REFUSED = "refused"  # a StitchError
    PARTIAL = "partial"  # a PartialProgram (only with allow_partial)
    CRASH = "crash"  # an exception that is not a StitchError, or the process died in stitch
    MISMATCH = "mismatch"  # a returned program whose outputs differ from eager
    TIMEOUT = "timeout"
    NOT_BUILT = "not_built"  # the builder could not make the model or its inputs
    EAGER_FAILED = "eager_failed"  # the model does not run on the builder's inputs
    HARNESS_ERROR = "harness_error"  # the sweep itself failed outside stitch


NOT_RUN = {Outcome.NOT_BUILT, Outcome.EAGER_FAILED, Outcome.HARNESS_ERROR}


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str  # the refusal group, crash or mismatch text; "" for one graph
    breaks: bool | None  # breaks under torch.compile, or torch.export refuses it
    exports: bool | None  # torch.export (non-strict) exports it and matches eager


def _stage(rec: dict, name: str) -> dict:
    return rec.get(name) or {}


def breaks(rec: dict) -> bool | None:
    dyn, exp = _stage(rec, "dynamo"), _stage(rec, "torch_export")
    broke = dyn.get("ok") and (dyn.get("breaks", 0) > 0 or dyn.get("graphs", 1) > 1)
    refused = "ok" in exp and not (exp["ok"] and exp.get("matches", True))
    if not dyn.get("ok") and "ok" not in exp:
        return None
    return bool(broke or refused)


def exports(rec: dict) -> bool | None:
    exp = _stage(rec, "torch_export")
    return None if "ok" not in exp else bool(exp["ok"] and exp.get("matches"))


def refusal_group(st: dict) -> str:
    """A refusal's group: the error class with the kinds of sites left, or with the first
    line of its message, line numbers and addresses taken out."""
    cls = st.get("error_class", "?")
    if st.get("kinds_left"):
        return f"{cls}: left {', '.join(st['kinds_left'])}"
    first = st.get("message", "").split("\n")[0].split(": ", 1)[-1]
    first = re.sub(r"(/[\w.\-]+)+\.py", "<file>", first)
    first = re.sub(r"\b0x[0-9a-f]+\b|:\d+\b|\b\d+\b", "#", first)
    return f"{cls}: {first[:110]}"


def classify(rec: dict) -> Verdict:
    b, e = breaks(rec), exports(rec)
    if rec.get("timeout") and rec.get("stage") != "stitch_guarded":  # that one: guarded()
        return Verdict(Outcome.TIMEOUT, f"timed out in stage {rec.get('stage')}", b, e)
    if rec.get("harness_error"):
        return Verdict(Outcome.HARNESS_ERROR, rec["harness_error"], b, e)
    if not _stage(rec, "build").get("ok", rec.get("stage") not in ("start", "build")):
        return Verdict(Outcome.NOT_BUILT, _stage(rec, "build").get("error", "died while "
                                                                   "building"), b, e)
    if _stage(rec, "eager").get("ok") is False:
        return Verdict(Outcome.EAGER_FAILED, rec["eager"].get("error", ""), b, e)
    st = _stage(rec, "stitch")
    if rec.get("died"):
        died = f"process died ({rec['died']}) in stage {rec.get('stage')}"
        return Verdict(Outcome.CRASH if rec.get("stage") == "stitch" else Outcome.HARNESS_ERROR,
                       died, b, e)
    result = st.get("result")
    if result == "crash":
        return Verdict(Outcome.CRASH, st.get("error", ""), b, e)
    if result == "refused":
        return Verdict(Outcome.REFUSED, refusal_group(st), b, e)
    if result == "PartialProgram":
        return Verdict(Outcome.PARTIAL, "left " + ", ".join(st.get("kinds_left", [])), b, e)
    if result == "StitchedProgram":
        if st.get("matches") or not _stage(rec, "eager").get("deterministic", True):
            return Verdict(Outcome.ONE_GRAPH, "", b, e)
        return Verdict(Outcome.MISMATCH, st.get("why_not", ""), b, e)
    return Verdict(Outcome.HARNESS_ERROR, f"no stitch result (stage {rec.get('stage')})", b, e)


def guarded(rec: dict) -> str | None:
    """The guarded stage's outcome (``Settings(allow_guards=True)``, run where the refusal
    suggests guards): "one_graph" (exact on every sweep input), "guards_refuse_inputs"
    (exact where it runs, but a guard refuses a sweep input: specialised to data, not to a
    configuration such as an image grid), "mismatch", "refused", "crash"; None where it
    did not run."""
    st = _stage(rec, "stitch_guarded")
    if rec.get("timeout") and rec.get("stage") == "stitch_guarded":
        return "timeout"
    if not st:
        return None
    if st.get("result") == "StitchedProgram":
        if not st.get("matches"):
            return "mismatch"
        return "guards_refuse_inputs" if "guard" in st.get("inputs", ()) else "one_graph"
    return st.get("result", "crash")


def summarize(records: list[dict]) -> dict:
    """The summary figures and the groups, by model name."""
    verdicts = {r["model"]: classify(r) for r in records}
    by_name = {r["model"]: r for r in records}
    by_outcome: dict[str, list[str]] = defaultdict(list)
    for name, v in sorted(verdicts.items()):
        by_outcome[v.outcome.value].append(name)
    ran = [n for n, v in verdicts.items() if v.outcome not in NOT_RUN]
    breaking = sorted(n for n in ran if verdicts[n].breaks)
    one = [n for n in breaking if verdicts[n].outcome == Outcome.ONE_GRAPH]
    guarded_one = [n for n in breaking if n not in one
                   and guarded(by_name[n]) == "one_graph"]
    exported_refused = sorted(n for n in ran if verdicts[n].exports
                              and verdicts[n].outcome != Outcome.ONE_GRAPH)
    refusals: dict[str, list[str]] = defaultdict(list)
    for name, v in sorted(verdicts.items()):
        if v.outcome in (Outcome.REFUSED, Outcome.PARTIAL):
            refusals[v.reason].append(name)
    not_built: dict[str, list[str]] = defaultdict(list)
    for name, v in sorted(verdicts.items()):
        if v.outcome in NOT_RUN:
            not_built[f"{v.outcome.value}: {v.reason[:140]}"].append(name)
    kinds: dict[str, list[str]] = defaultdict(list)
    for r in records:
        for kind in (r.get("dynamo") or {}).get("kinds", {}):
            kinds[kind].append(r["model"])
    return {
        "records": len(records),
        "models_by_break_kind": {k: sorted(v) for k, v in sorted(kinds.items())},
        "ran": len(ran),
        "by_outcome": dict(sorted(by_outcome.items())),
        "breaking": len(breaking),
        "breaking_one_graph": len(one),
        "breaking_one_graph_share": round(len(one) / len(breaking), 4) if breaking else None,
        "breaking_not_one_graph": sorted(set(breaking) - set(one)),
        # on request only (Settings.allow_guards): programs specialised to example 0's values
        "breaking_one_graph_with_guards": len(one) + len(guarded_one),
        "guarded_one_graph": sorted(guarded_one),
        "guarded_mismatches": sorted(n for n in ran if guarded(by_name[n]) == "mismatch"),
        "guarded_crashes": sorted(n for n in ran if guarded(by_name[n]) == "crash"),
        "guarded_timeouts": sorted(n for n in ran if guarded(by_name[n]) == "timeout"),
        "guards_refuse_inputs": sorted(n for n in ran
                                       if guarded(by_name[n]) == "guards_refuse_inputs"),
        "torch_export_exports": sum(bool(verdicts[n].exports) for n in ran),
        "exported_but_stitch_did_not": exported_refused,
        "mismatches": {n: verdicts[n].reason for n in by_outcome.get("mismatch", [])},
        "crashes": {n: verdicts[n].reason + (" [stitch code changed during this run]"
                                             if by_name[n].get("code_changed_during_run")
                                             else "")
                    for n in by_outcome.get("crash", [])},
        "timeouts": by_outcome.get("timeout", []),
        "refusals": dict(sorted(refusals.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
        "not_run": dict(sorted(not_built.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
    }


def _cell(rec: dict) -> list:
    v = classify(rec)
    dyn, exp = _stage(rec, "dynamo"), _stage(rec, "torch_export")
    kinds = ",".join(f"{k}:{n}" for k, n in sorted(dyn.get("kinds", {}).items()))
    graphs = (f"{dyn['graphs']}g/{dyn['breaks']}b" + (f" {kinds}" if kinds else "")
              if dyn.get("ok") else ("error" if "ok" in dyn else "-"))
    export = ("-" if "ok" not in exp else "no" if not exp["ok"]
              else "yes" if exp.get("matches") else "differs")
    secs = " ".join(f"{k.removeprefix('torch_')}={s:g}" for k, s in rec.get("seconds", {}).items())
    build = rec.get("build", {})
    plan = build.get("plan", "tiny")  # the builder's fallback plan, where the tiny one failed
    cls = build.get("class", "") + ("" if plan == "tiny" else f" ({plan})")
    return [rec["model"], cls, graphs, export,
            v.outcome.value, v.reason[:90].replace("|", "/").replace("\n", " "), secs]


def markdown(result: dict) -> str:
    lines = ["# stitch sweep", ""]
    meta = result["meta"]
    lines += [f"Generated {meta['date']}; stitch commit(s) {', '.join(meta['commits'])}"
              f" (dirty working tree: {meta['dirty']}); limit {meta['limit_s']} s per model.",
              "Every figure below covers only the models that ran; nothing is extrapolated.", ""]
    for suite, data in result["suites"].items():
        s = data["summary"]
        lines += [f"## {suite} ({data['versions']})", "",
                  f"Coverage: {s['records']} of {data['architectures']} architectures run "
                  f"({s['ran']} built and ran eagerly; {s['records'] - s['ran']} not built or "
                  f"not runnable, listed below).", "",
                  "- outcomes: " + ", ".join(f"{k} {len(v)}" for k, v in s["by_outcome"].items()),
                  f"- break under torch.compile or refused by torch.export: {s['breaking']}; "
                  f"one verified graph among them: {s['breaking_one_graph']}"
                  + (f" ({100 * s['breaking_one_graph_share']:.1f}%)"
                     if s["breaking_one_graph_share"] is not None else ""),
                  f"- with guards on request (Settings(allow_guards=True), tried where the "
                  f"refusal suggests it): {s['breaking_one_graph_with_guards']} one verified "
                  f"graph, specialised to example 0's values "
                  f"({', '.join(s['guarded_one_graph']) or 'none more'}); "
                  f"guards refuse a sweep input {len(s['guards_refuse_inputs'])}, "
                  f"mismatches {len(s['guarded_mismatches'])}, crashes "
                  f"{len(s['guarded_crashes'])}, timeouts {len(s['guarded_timeouts'])}",
                  f"- torch.export exports (and matches eager): {s['torch_export_exports']}; "
                  f"of these, stitch did not give one graph: {len(s['exported_but_stitch_did_not'])}"
                  + (f" ({', '.join(s['exported_but_stitch_did_not'])})"
                     if s["exported_but_stitch_did_not"] else ""),
                  f"- mismatches: {len(s['mismatches'])}; crashes: {len(s['crashes'])}; "
                  f"timeouts: {len(s['timeouts'])}",
                  "- models with a Dynamo break of each kind: " + (", ".join(
                      f"{k} {len(v)}" for k, v in s["models_by_break_kind"].items()) or "none"),
                  ""]
        for title, group in (("Crashes", s["crashes"]), ("Mismatches", s["mismatches"])):
            if group:
                lines += [f"### {title}", ""] + [f"- {n}: {why[:300]}" for n, why in
                                                  group.items()] + [""]
        if s["refusals"]:
            lines += ["### Refusals by reason", ""]
            lines += [f"- **{len(ns)}** {why}: {', '.join(ns)}" for why, ns in
                      s["refusals"].items()] + [""]
        rows = [_cell(r) for r in data["records"] if classify(r).outcome not in NOT_RUN]
        lines += ["### Models run", "",
                  "| model | class | dynamo graphs/breaks, kinds | torch.export | stitch | "
                  "reason | seconds |", "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]
        if s["not_run"]:
            lines += ["### Not built or not runnable (apart)", ""]
            lines += [f"- {len(ns)} {why}: {', '.join(ns)}" for why, ns in
                      s["not_run"].items()] + [""]
    return "\n".join(lines) + "\n"
