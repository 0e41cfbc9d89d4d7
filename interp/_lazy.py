"""Lazy package exports (PEP 562): a name is imported from its module on first use."""

from __future__ import annotations

import importlib


def exports(package: str, table: dict[str, str], namespace: dict):
    """``__getattr__`` and ``__dir__`` for ``package``: ``table`` maps a public name to the
    module that defines it, or to the module itself where the module's basename is the name."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(table[name])
        value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
