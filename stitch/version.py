"""The package version, in a module of its own so any stage can read it without importing
the package (whose ``__init__`` imports every stage)."""

__version__ = "0.1.0"
