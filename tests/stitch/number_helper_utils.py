"""A user module whose function a read reaches as ``number_helper_utils.mean_of(...)``,
for test_number_helpers.py."""


def mean_of(values):
    return sum(values) / len(values)


def count_above(t, bound):
    """A read made and returned here, for test_returned_reads.py (called as
    ``number_helper_utils.count_above(x, 0)``)."""
    return int((t > bound).sum())
