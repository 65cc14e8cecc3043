"""Shared fixtures: censuses are computed once per session and shared between tests."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEGACY_PYTHON = os.path.join(REPO, ".venv-hf452", "bin", "python")

# Outside the fast tier: `make test` runs -m "not slow", `make test-all` runs these too.
# A test file, a file::test (all its cases) or one case's id -> why it is slow. Marks written
# in the test files themselves (pytestmark, @pytest.mark.slow) count as well. LONG: a test of
# several seconds or more on 2 cores (most of the suite's time is in these); the file's other
# tests keep its area in the fast tier.
BUILD = "an Inductor or AOTInductor build"
LONG = "a long export"
SLOW = {
    "tests/fuzz/test_differential.py": "the budgeted differential fuzz run, 50 programs",
    "tests/capture/test_census_hf.py": "real transformers models, two in the 4.52.4 environment",
    "tests/lower/test_arm_asserts_lowered.py::"
        "test_an_arm_assertion_stays_in_its_arm_when_lowered": BUILD,
    "tests/lower/test_arm_asserts_lowered.py::"
        "test_a_size_test_written_otherwise_stays_in_its_arm_under_aoti": BUILD,
    "tests/capture/test_dynamic_sizes.py::"
        "test_torchvision_nms_keeping_one_box": "torchvision's nms, then Inductor and AOTInductor builds",
    "tests/deploy/test_candidates.py::"
        "test_candidates_of_a_noisy_program_are_compared_from_the_same_random_state": BUILD,
    "tests/capture/test_branch_asserts.py::"
        "test_a_branch_on_a_size_whose_arms_assert_different_facts_is_one_verified_graph": LONG,
    "tests/capture/test_branch_asserts.py::"
        "test_an_arm_assertion_dividing_by_the_predicates_size_runs_on_the_general_side": LONG,
    "tests/capture/test_branch_asserts.py::"
        "test_arm_assertions_are_conditioned_on_their_arm_in_torch_export": LONG,
    "tests/capture/test_nested_subgraphs.py::"
        "test_nested_data_dependent_ifs_before_a_no_grad_region_are_one_graph": LONG,
    "tests/forms/test_forms.py::test_stitch_exports_or_refuses_with_a_location": LONG,
    "tests/lower/test_lowering.py::test_capture_blockers_name_cpu_inputs": LONG,
    "tests/lower/test_lowering.py::"
        "test_mutated_buffers_finds_in_place_updates_the_signature_does_not_list": LONG,
    "tests/lower/test_onnx_binding.py::"
        "test_results_are_tensors_of_the_models_dtypes_and_never_the_callers_memory": LONG,
    "tests/lower/test_predicate.py::"
        "test_pure_conds_become_where_and_compute_the_same_on_both_sides": LONG,
    "tests/stitch/test_appends.py::"
        "test_appends_in_branches_sizes_and_submodules_match_the_model": LONG,
    "tests/stitch/test_appends.py::test_dropping_appends_fails_verification": LONG,
    "tests/stitch/test_appends.py::test_extend_and_global_lists_are_deferred": LONG,
    "tests/stitch/test_appends.py::test_top_level_append_replays_into_the_models_list": LONG,
    "tests/stitch/test_appends.py::test_unbound_targets_keep_the_values": LONG,
    "tests/stitch/test_batch_norm_rows.py::test_batch_norm_over_rows_from_data_is_one_graph": LONG,
    "tests/stitch/test_bounded_loop.py::"
        "test_a_python_test_on_data_in_the_while_loop_body_is_refused_naming_its_line": LONG,
    "tests/stitch/test_bounded_loop.py::test_loop_over_a_size_from_data_is_one_graph": LONG,
    "tests/stitch/test_bounded_loop.py::test_the_loop_written_otherwise_is_one_graph": LONG,
    "tests/stitch/test_branch_effects.py::"
        "test_early_return_branch_with_print_and_log_is_one_graph_matching_the_model": LONG,
    "tests/stitch/test_branch_effects.py::"
        "test_effects_in_loops_inside_a_branch_replay_per_iteration_in_order": LONG,
    "tests/stitch/test_branch_effects.py::test_effects_inside_if_blocks_of_a_branch": LONG,
    "tests/stitch/test_branch_in_loop_body.py::"
        "test_a_branch_in_a_tensor_counted_loop_is_a_cond_in_its_body": LONG,
    "tests/stitch/test_branch_numbers.py::"
        "test_a_float_an_arm_only_read_leaves_the_cond_as_a_float": LONG,
    "tests/stitch/test_branch_numbers.py::"
        "test_numbers_changed_in_a_branch_are_carried_both_ways": LONG,
    "tests/stitch/test_break_guard.py::"
        "test_a_break_in_a_range_loop_stops_at_the_same_iteration": LONG,
    "tests/stitch/test_break_guard.py::"
        "test_a_loop_variable_read_after_an_early_exit_is_the_one_it_broke_at": LONG,
    "tests/stitch/test_break_guard.py::test_an_early_exit_then_a_tensor_counted_loop": LONG,
    "tests/stitch/test_break_guard.py::"
        "test_early_exit_over_layers_is_one_graph_that_stops_where_eager_stops": LONG,
    "tests/stitch/test_break_guard.py::"
        "test_effects_in_an_early_exit_loop_print_what_eager_prints": LONG,
    "tests/stitch/test_break_guard.py::"
        "test_names_bound_only_in_the_body_are_carried_to_after_the_loop": LONG,
    "tests/stitch/test_caller_continuation.py::test_a_call_inside_a_loop_stays_refused": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_a_method_callee_with_a_python_test_in_its_condition": LONG,
    "tests/stitch/test_caller_continuation.py::test_a_rest_that_cannot_be_carried_is_refused": LONG,
    "tests/stitch/test_caller_continuation.py::test_a_tail_call_passes_the_continuation_on": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_an_assert_in_the_rest_raises_the_models_exception": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_the_arms_read_a_batch_size_the_examples_vary": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_the_rest_of_a_larger_expression_goes_into_each_arm": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_the_rest_of_two_callers_goes_into_each_arm": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_the_rest_reads_counts_known_only_at_run_time": LONG,
    "tests/stitch/test_caller_continuation.py::"
        "test_the_untaken_side_of_a_branch_copied_into_the_caller_is_forced_in_the_model": LONG,
    "tests/stitch/test_caller_rest_names.py::"
        "test_a_name_bound_when_the_call_is_made_reaches_the_rest": LONG,
    "tests/stitch/test_caller_rest_names.py::test_the_callers_rest_follows": LONG,
    "tests/stitch/test_carried_unroll.py::"
        "test_branch_in_the_body_that_example_0_never_reaches": LONG,
    "tests/stitch/test_carried_unroll.py::test_carried_loop_is_one_graph_exact": LONG,
    "tests/stitch/test_carried_unroll.py::test_carried_loop_written_otherwise": LONG,
    "tests/stitch/test_const_buffers.py::test_padding_from_int_buffers_exports_as_one_graph": LONG,
    "tests/stitch/test_continuations.py::test_matches_eager_on_both_sides_and_new_inputs": LONG,
    "tests/stitch/test_continuations.py::test_no_guard_one_cond_later_ifs_resolved": LONG,
    "tests/stitch/test_counters.py::"
        "test_a_counter_held_by_a_loaded_program_counts_on_from_its_value_when_exported": LONG,
    "tests/stitch/test_counters.py::test_a_dropped_count_is_caught_by_verification": LONG,
    "tests/stitch/test_counters.py::"
        "test_counters_at_the_top_level_are_added_to_by_the_epilogue": LONG,
    "tests/stitch/test_detection_patterns.py::test_guards_on_request_give_one_graph_for_it": LONG,
    "tests/stitch/test_detection_patterns.py::"
        "test_one_graph_with_a_while_loop_over_the_labels": LONG,
    "tests/stitch/test_detection_patterns.py::"
        "test_sides_of_different_ranks_take_the_rest_of_the_function": LONG,
    "tests/stitch/test_detection_patterns.py::test_torchvision_batched_nms_both_paths_exact": LONG,
    "tests/stitch/test_dict_items.py::test_a_dropped_item_set_is_caught_by_verification": LONG,
    "tests/stitch/test_dict_items.py::"
        "test_items_a_branch_sets_or_adds_to_are_replayed_when_the_branch_ran": LONG,
    "tests/stitch/test_dict_items.py::"
        "test_items_set_and_added_to_are_replayed_by_the_epilogue": LONG,
    "tests/stitch/test_effect_moments.py::"
        "test_dynamo_failing_inside_itself_is_a_refusal_never_a_crash": LONG,
    "tests/stitch/test_effect_moments.py::"
        "test_text_formatted_in_a_branch_is_formatted_in_the_epilogue": LONG,
    "tests/stitch/test_example_sets.py::test_batch_one_first_with_a_data_dependent_branch": LONG,
    "tests/stitch/test_example_shapes.py::"
        "test_a_dynamic_size_printed_is_its_value_not_its_symbol": LONG,
    "tests/stitch/test_example_shapes.py::"
        "test_a_program_from_examples_of_two_batch_sizes_takes_a_third": LONG,
    "tests/stitch/test_export_zoo.py::test_strict_export_same_graph_and_values": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_a_branch_before_an_early_exit_keeps_its_own_site": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_a_size_test_the_examples_take_both_ways_is_verified_by_them_not_forced": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_a_tensor_left_in_a_plain_objects_list_is_copied_for_the_forced_runs": LONG,
    "tests/stitch/test_forced_sites.py::test_a_wrong_nested_arm_is_caught_by_forcing": LONG,
    "tests/stitch/test_forced_sites.py::test_an_early_exit_is_forced_in_the_model_both_ways": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_an_early_exit_with_work_before_it_is_named_as_checked_against_the_rewrite": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_an_elif_and_a_helpers_branch_are_forced_in_the_model": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_an_untaken_side_of_a_size_test_that_forcing_cannot_check_asks_for_an_example": LONG,
    "tests/stitch/test_forced_sites.py::test_every_missed_side_is_forced_nested_included": LONG,
    "tests/stitch/test_forced_sites.py::test_nested_buffer_writes_are_carried_out_and_forced": LONG,
    "tests/stitch/test_forced_sites.py::test_no_marks_left_and_all_paths_match_eager": LONG,
    "tests/stitch/test_forced_sites.py::"
        "test_the_work_before_an_early_exit_is_forced_when_no_example_breaks": LONG,
    "tests/stitch/test_global_branches.py::"
        "test_a_dropped_global_replay_in_a_branch_is_caught_by_verification": LONG,
    "tests/stitch/test_global_branches.py::"
        "test_a_global_counted_in_branches_that_return_is_replayed": LONG,
    "tests/stitch/test_global_branches.py::"
        "test_globals_a_branch_sets_and_counts_in_are_replayed_when_it_ran": LONG,
    "tests/stitch/test_held_state.py::"
        "test_state_held_outside_a_dict_that_the_forward_changes_is_refused": LONG,
    "tests/stitch/test_helper_effects.py::"
        "test_helpers_with_effects_in_branches_are_replayed_when_their_branch_ran": LONG,
    "tests/stitch/test_hostile.py::"
        "test_a_refused_example_does_not_desynchronise_verification_of_the_next": LONG,
    "tests/stitch/test_indexed_loop.py::"
        "test_a_body_the_while_loop_cannot_hold_is_refused_naming_why": LONG,
    "tests/stitch/test_indexed_loop.py::test_a_loop_over_the_unroll_limit_is_one_while_loop": LONG,
    "tests/stitch/test_indexed_loop.py::"
        "test_numbers_read_from_a_row_stay_in_the_while_loop_body": LONG,
    "tests/stitch/test_indexed_loop.py::"
        "test_the_loop_in_a_helper_written_otherwise_is_one_while_loop": LONG,
    "tests/stitch/test_inplace_and_nonzero.py::"
        "test_a_loop_over_nonzero_inside_a_branch_is_one_graph": LONG,
    "tests/stitch/test_inplace_and_nonzero.py::"
        "test_a_name_rebound_and_written_in_place_carries_the_original_apart": LONG,
    "tests/stitch/test_inplace_and_nonzero.py::"
        "test_moe_dispatch_over_nonzero_is_one_exact_sparse_graph": LONG,
    "tests/stitch/test_inplace_and_nonzero.py::"
        "test_views_loops_and_nested_writes_in_an_arm_behave_as_in_eager": LONG,
    "tests/stitch/test_moe_dispatch.py::"
        "test_continue_on_an_empty_expert_becomes_a_cond_over_the_rest": LONG,
    "tests/stitch/test_moe_dispatch.py::test_hit_experts_as_python_ints_with_mask_writes": LONG,
    "tests/stitch/test_moe_dispatch.py::test_hits_found_under_no_grad_with_a_python_continue": LONG,
    "tests/stitch/test_nested_effects.py::test_effects_after_a_flag_continuation": LONG,
    "tests/stitch/test_nested_effects.py::test_nested_branch_that_returns_early": LONG,
    "tests/stitch/test_nested_effects.py::test_nested_branch_updating_a_buffer": LONG,
    "tests/stitch/test_nested_effects.py::"
        "test_outer_predicate_that_is_a_python_value_while_exporting": LONG,
    "tests/stitch/test_nested_effects.py::test_three_levels_in_a_loop_replay_in_order": LONG,
    "tests/stitch/test_number_helpers.py::"
        "test_a_helper_after_and_is_computed_only_where_python_computes_it": LONG,
    "tests/stitch/test_number_helpers.py::test_a_module_level_helper_divides_as_python": LONG,
    "tests/stitch/test_number_list.py::test_window_bounds_are_one_graph_for_every_grid": LONG,
    "tests/stitch/test_pinned_reads.py::"
        "test_pinned_reads_give_one_exact_graph_that_refuses_other_values": LONG,
    "tests/stitch/test_pinned_reads.py::test_refused_by_default_naming_the_reads_to_pin": LONG,
    "tests/stitch/test_python_numbers.py::test_a_read_printed_in_a_branch_prints_as_a_number": LONG,
    "tests/stitch/test_python_numbers.py::test_an_int_read_compares_with_a_float_exactly": LONG,
    "tests/stitch/test_python_numbers.py::"
        "test_an_operator_on_reads_inside_a_branch_keeps_pythons_rules": LONG,
    "tests/stitch/test_python_numbers.py::"
        "test_builtin_math_and_operator_functions_on_reads_keep_pythons_rules": LONG,
    "tests/stitch/test_python_numbers.py::test_division_by_a_zero_read_raises_as_python": LONG,
    "tests/stitch/test_python_numbers.py::test_max_of_bool_reads_is_a_bool": LONG,
    "tests/stitch/test_python_numbers.py::"
        "test_reads_gathered_by_a_comprehension_or_append_divide_as_python": LONG,
    "tests/stitch/test_python_numbers.py::"
        "test_rounding_to_digits_and_modulo_and_int_of_a_float_read_are_pythons": LONG,
    "tests/stitch/test_python_state.py::"
        "test_a_read_after_a_second_set_in_an_arm_reads_the_second_value": LONG,
    "tests/stitch/test_python_state.py::"
        "test_appends_outside_the_instance_are_deferred_in_branches": LONG,
    "tests/stitch/test_python_state.py::test_dropping_a_replay_is_caught_by_verification": LONG,
    "tests/stitch/test_python_state.py::"
        "test_state_a_branch_sets_is_set_by_the_epilogue_when_the_branch_ran": LONG,
    "tests/stitch/test_python_state.py::"
        "test_state_set_by_a_helper_in_a_branch_is_refused_naming_it": LONG,
    "tests/stitch/test_quiet_export.py::test_successful_exports_print_nothing": LONG,
    "tests/stitch/test_random_draws.py::test_a_dead_draw_beside_a_rewritten_branch": LONG,
    "tests/stitch/test_reachable_state.py::"
        "test_a_helpers_mutable_default_is_state_the_program_appends_to": LONG,
    "tests/stitch/test_scratch.py::test_the_directory_goes_when_the_process_exits": LONG,
    "tests/stitch/test_size_branches.py::"
        "test_a_branch_on_a_data_dependent_size_is_one_verified_cond": LONG,
    "tests/stitch/test_size_probes.py::"
        "test_sizes_the_program_raises_on_are_noted_not_refused": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_len_or_equality_size_test_in_an_arm_is_served_on_every_size": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_becomes_a_cond_and_the_general_side_is_served": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_beside_a_count_known_at_run_time_becomes_a_cond": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_in_a_data_branch_becomes_a_cond_of_its_own": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_in_an_arm_written_otherwise_becomes_a_cond": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_inside_a_cond_arm_becomes_a_cond_of_its_own": LONG,
    "tests/stitch/test_size_tests.py::"
        "test_a_size_test_on_rows_two_inputs_share_becomes_a_cond": LONG,
    "tests/stitch/test_size_tests.py::test_a_size_test_two_data_branches_deep_becomes_a_cond": LONG,
    "tests/stitch/test_size_tests.py::test_a_size_test_written_otherwise_becomes_a_cond": LONG,
    "tests/stitch/test_split_map.py::test_a_map_the_loop_cannot_hold_is_refused": LONG,
    "tests/stitch/test_split_map.py::"
        "test_a_packed_length_known_only_at_run_time_is_one_while_loop": LONG,
    "tests/stitch/test_split_map.py::test_other_spellings_are_one_graph_for_every_sizes": LONG,
    "tests/stitch/test_split_map.py::test_packed_attention_is_one_while_loop_for_every_grid": LONG,
    "tests/stitch/test_split_map.py::"
        "test_reads_elsewhere_in_the_function_are_pinned_on_request": LONG,
    "tests/stitch/test_state_aliases.py::"
        "test_integer_additions_in_a_branch_and_around_it_are_replayed": LONG,
    "tests/stitch/test_tensor_while.py::"
        "test_a_while_only_torch_export_meets_is_rewritten_too": LONG,
    "tests/stitch/test_traced_breaks.py::"
        "test_a_loop_over_a_mask_first_traced_by_torch_export_is_rewritten": LONG,
    "tests/stitch/test_traced_breaks.py::"
        "test_a_loop_over_a_mask_in_an_arm_no_example_took_is_rewritten": LONG,
    "tests/stitch/test_traced_breaks.py::"
        "test_an_if_in_a_branch_with_effects_no_example_took_is_found_by_export": LONG,
    "tests/stitch/test_traced_breaks.py::"
        "test_breaks_in_the_untaken_branch_are_found_and_rewritten": LONG,
    "tests/stitch/test_traced_breaks.py::"
        "test_nested_branches_holding_only_asserts_fold_into_one_check": LONG,
    "tests/stitch/test_untaken_helpers.py::"
        "test_a_bool_from_a_branch_no_example_ran_is_carried_and_read_back": LONG,
    "tests/stitch/test_untaken_helpers.py::test_none_and_a_bool_among_a_conds_outputs": LONG,
    "tests/stitch/test_untaken_state.py::"
        "test_a_dropped_untaken_replay_is_caught_on_the_forced_side": LONG,
}


def _mark_slow(items) -> None:
    used = set()
    for item in items:
        path, _, rest = item.nodeid.partition("::")
        for key in (path, f"{path}::{rest.split('[')[0]}", item.nodeid):
            if key in SLOW:
                item.add_marker(pytest.mark.slow)
                used.add(key)
    # an entry whose test was renamed or removed would silently put nothing in the slow tier
    modules = {item.nodeid.partition("::")[0]: item.module for item in items
               if getattr(item, "module", None) is not None}
    for key in set(SLOW) - used:
        path, _, rest = key.partition("::")
        if not os.path.exists(os.path.join(REPO, path)) or (
                path in modules and rest and not hasattr(modules[path], rest.split("[")[0])):
            raise pytest.UsageError(f"tests/conftest.py SLOW names no test: {key}")


def pytest_collection_modifyitems(config, items):
    _mark_slow(items)
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    no_hf = pytest.mark.skip(reason="transformers is not installed (pip install -e '.[hf]')")
    no_legacy = pytest.mark.skip(
        reason=f"transformers 4.52.4 environment missing at {LEGACY_PYTHON}; run make install-hf452")
    has_hf = importlib.util.find_spec("transformers") is not None
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_gpu)
        if "hf" in item.keywords and not has_hf:
            item.add_marker(no_hf)
        if "hf_legacy" in item.keywords and not os.path.exists(LEGACY_PYTHON):
            item.add_marker(no_legacy)


@functools.cache
def zoo_census(name: str):
    from capture import explain
    from tests.zoo import make

    model, args, kwargs, examples = make(name)
    return explain(model, args, kwargs, examples=examples)


def run_legacy(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``code`` with the transformers 4.52.4 environment, this repo on the path."""
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([LEGACY_PYTHON, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.fixture(scope="session")
def census_of():
    return zoo_census


@pytest.fixture(autouse=True)
def _no_leaked_trace():
    before = sys.gettrace()
    yield
    assert sys.gettrace() is before, "a test left a trace function installed"


@functools.cache
def zoo_program(name: str, strict: bool = False):
    import stitch
    from tests.zoo import make

    model, args, kwargs, examples = make(name)
    return stitch.export(model, args, kwargs, examples=examples, strict=strict)


@pytest.fixture
def drop_guarded_replays(monkeypatch):
    """Sabotage: ``drop(kind)`` makes the epilogue skip its guarded state entries of that
    kind (a branch's additions, sets or item sets), so verification must refuse."""
    import importlib

    replay = importlib.import_module("stitch.epilogue.replay")
    real = replay._set_state

    def drop(kind: str) -> None:
        def forgetful(entry, values, lists):
            if not (entry.kind == kind and entry.guard is not None):
                real(entry, values, lists)

        monkeypatch.setattr(replay, "_set_state", forgetful)

    return drop
