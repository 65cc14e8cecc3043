"""Python state kept in a helper module a model reaches as an attribute (``import
state_helpers; state_helpers.LOG.append(...)``), for test_helper_modules.py."""

LOG = []
CALLS = 0
SEEN = set()


def count_call():
    global CALLS
    CALLS += 1


def mark(tag):
    SEEN.add(tag)


class Registry:
    items = {}
    n = 0

    @classmethod
    def register(cls, key, value):
        cls.items[key] = value
        cls.n += 1
