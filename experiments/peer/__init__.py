"""GraphMend's rule fixtures, ported to plain Python/PyTorch (the models that
``experiments/peer_fixtures.py`` measures), one module per family:

- ``guards``: ``hasattr``-guarded initialization and validation guards that raise;
- ``where``: data-dependent branches that assign, return or call;
- ``effects``: prints, logger calls and raises between tensor ops;
- ``common``: helpers the ``self_obj`` ports of ``guards`` and ``where`` share.

Every class and function a fixture uses is at module level in its module (stitch reads and
rewrites their source by name).

``FIXTURES`` lists ``(name, factory)``; ``factory()`` returns ``(model, args, kwargs,
examples)`` with the model in eval mode, built after ``torch.manual_seed(0)``. Where the
fixture branches on data, the first input and the examples together take both sides.
"""

from __future__ import annotations

from .effects import (
    make_logger_forward_hook,
    make_logger_forward_hook_raises,
    make_logger_kwargs,
    make_py_side_effect,
    make_region_deco_entry,
    make_se_in_helper,
    make_side_effect,
    make_side_effect_clone,
    make_side_effect_early_return,
    make_side_effect_logger,
    make_side_effect_raises,
)
from .guards import (
    make_guard_attr_escapes,
    make_guard_body_effects,
    make_guard_impure_init,
    make_guard_key_mismatch,
    make_hasattr_static,
    make_nested_guard_in_branch,
    make_py_val_guard,
    make_val_guard,
    make_val_guard_all,
)
from .where import (
    make_call_vs_literal,
    make_cond_assign,
    make_different_callees,
    make_py_callsite_module,
    make_py_where_return,
    make_where_assign,
    make_where_common_call,
    make_where_item_return,
    make_where_multi_arg,
    make_where_multi_stmt,
    make_where_return,
    make_where_unsafe_setup,
)

FIXTURES = [
    ("call_vs_literal", make_call_vs_literal),
    ("cond_assign", make_cond_assign),
    ("different_callees", make_different_callees),
    ("guard_attr_escapes", make_guard_attr_escapes),
    ("guard_body_effects", make_guard_body_effects),
    ("guard_impure_init", make_guard_impure_init),
    ("guard_key_mismatch", make_guard_key_mismatch),
    ("hasattr_static", make_hasattr_static),
    ("logger_forward_hook", make_logger_forward_hook),
    ("logger_forward_hook_raises", make_logger_forward_hook_raises),
    ("logger_kwargs", make_logger_kwargs),
    ("nested_guard_in_branch", make_nested_guard_in_branch),
    ("py_callsite_module", make_py_callsite_module),
    ("py_side_effect", make_py_side_effect),
    ("py_val_guard", make_py_val_guard),
    ("py_where_return", make_py_where_return),
    ("region_deco_entry", make_region_deco_entry),  # uses region_deco_factory's phase_wrap
    ("se_in_helper", make_se_in_helper),
    ("side_effect", make_side_effect),
    ("side_effect_clone", make_side_effect_clone),
    ("side_effect_early_return", make_side_effect_early_return),
    ("side_effect_logger", make_side_effect_logger),
    ("side_effect_raises", make_side_effect_raises),
    ("val_guard", make_val_guard),
    ("val_guard_all", make_val_guard_all),
    ("where_assign", make_where_assign),
    ("where_common_call", make_where_common_call),
    ("where_item_return", make_where_item_return),
    ("where_multi_arg", make_where_multi_arg),
    ("where_multi_stmt", make_where_multi_stmt),
    ("where_return", make_where_return),
    ("where_unsafe_setup", make_where_unsafe_setup),
]

__all__ = ["FIXTURES"]
