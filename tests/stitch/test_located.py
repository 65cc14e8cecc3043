"""``names.located``: the positions new nodes take. A new node takes its nearest positioned
ancestor's line (a guard made in a runtime call inside a moved loop names that loop), and its
one-line range is a valid one even where that ancestor spans several lines and ends left of
where it starts (transformers' FSMT: ``a, b, c = f(`` at column 63, ``)`` at column 9)."""

from __future__ import annotations

import ast
import textwrap

from stitch.synthesize.analysis.names import located, rt_call

SOURCE = textwrap.dedent('''
    def forward(self, x):
        if x.sum() > 0:
            for i in range(1 + int(x.shape[0] > 3)):
                x = x - 1
        return x
''')

MULTILINE = textwrap.dedent('''
    def forward(self, x, config):
        if x.sum() > 0:
            decoder_input_ids, decoder_padding_mask, causal_mask = prepare_inputs(
                config,
                x,
            )
        return x
''')


def _new_call_inside(tree: ast.Module, replace) -> ast.If:
    branch = tree.body[0].body[0]
    replace(branch.body[0])
    located(branch, branch)
    return branch


def test_a_new_expression_takes_the_line_of_the_statement_it_is_in():
    tree = ast.parse(SOURCE)
    loop_line = tree.body[0].body[0].body[0].lineno

    def wrap_count(loop):
        count = loop.iter.args[0]
        loop.iter.args[0] = ast.copy_location(rt_call("size_int", count), count)
    _new_call_inside(tree, wrap_count)
    loop = tree.body[0].body[0].body[0]
    call = loop.iter.args[0]
    assert call.func.lineno == call.func.value.lineno == loop_line  # not the ``if``'s
    compile(tree, "<test>", "exec")


def test_a_new_node_inside_an_expression_ending_left_of_its_start_has_a_valid_range():
    tree = ast.parse(MULTILINE)

    def wrap_call(assign):
        assign.value.args[0] = rt_call("own", ast.Name(id="config", ctx=ast.Load()))
    _new_call_inside(tree, wrap_call)
    assign = tree.body[0].body[0].body[0]
    new = assign.value.args[0]
    assert assign.value.col_offset > assign.value.end_col_offset  # the premise: FSMT's shape
    assert new.lineno == new.end_lineno and new.end_col_offset >= new.col_offset
    compile(tree, "<test>", "exec")
