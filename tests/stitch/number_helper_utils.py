"""A user module whose function a read reaches as ``number_helper_utils.mean_of(...)``,
for test_number_helpers.py."""


def mean_of(values):
    return sum(values) / len(values)
