"""A griffe extension for the docs site: the docstrings' Sphinx roles (``:func:`rollax.solve```,
``:class:`~rollax.Solution```) shown as inline code, since the docstrings are prose read in
``help()`` as well and mkdocstrings would show the roles as written."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:func|class|attr|meth|mod|data|exc|obj|const):`~?([^`]+)`")


class Roles(griffe.Extension):
    def on_instance(self, *, node, obj, agent, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
