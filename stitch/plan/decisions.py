"""Decisions: how each site was fixed, or why it was left. Frozen data, printed by the report."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum


class Action(StrEnum):
    COND = "torch.cond"  # data-dependent if -> torch.cond over the live variables
    WHERE = "torch.where"  # cheap, pure, shape-identical arms -> predication
    CHECK = "runtime check"  # data-dependent assert/raise -> torch._assert_async or epilogue
    TENSOR_SCALAR = "0-d tensor"  # .item()/float()/int() -> stays a tensor
    WHILE_LOOP = "torch.while_loop"  # range(tensor) loop
    EPILOGUE = "epilogue"  # print/logging/warnings -> values out of the graph, call replayed
    ONE_ARM = "one arm"  # a size test: the arm most sizes take serves every size
    GUARD = "guarded"  # specialised to the path that traces, runtime check for the other
    AS_WRITTEN = "torch.export as written"  # stitch's rewrites refused; the model exports
    SYMBOLIC = "symbolic size"  # nonzero & co: torch.export captures it, its size symbolic
    UNDISABLED = "traced past compiler.disable"  # the disabled function, traced as written
    TRACED = "traced by torch.export"  # an RNN module: torch.export traces it, Dynamo breaks
    LEFT = "left as is"  # could not be rewritten; see reason


@dataclass(frozen=True)
class Decision:
    """One decision about one place in the source."""

    action: Action
    location: str  # file:line
    function: str
    reason: str
    site: str = ""  # census site id, when the place is a census site
    round: int = 1
    advice: str = ""  # what the user can change, where the decision knows it (else the site's)

    def to_json(self) -> dict:
        out = asdict(self)
        out["action"] = self.action.value
        return out
