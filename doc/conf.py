"""Sphinx configuration of the skdpvi documentation.

Build (offline, warnings are errors) from the repository root with::

    python -m sphinx -W --keep-going -b html doc doc/_build/html
"""

import os
import sys

# Document the package of this checkout even if it is not installed.
sys.path.insert(0, os.path.abspath(".."))

import skdpvi  # noqa: E402

project = "skdpvi"
author = "skdpvi developers"
copyright = "2025, skdpvi developers"
version = skdpvi.__version__
release = skdpvi.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
]

# No intersphinx mappings: the build must work without network access.
intersphinx_mapping = {}

autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# Cross-reference types only where a target exists; no validation warnings.
numpydoc_xref_param_type = False

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
source_suffix = {".rst": "restructuredtext"}
master_doc = "index"
default_role = "obj"

html_theme = "alabaster"
html_theme_options = {
    "description": "Noise-aware differentially private variational inference",
    "fixed_sidebar": True,
}
html_static_path = []
html_title = f"skdpvi {release}"


def _skip_member(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated metadata-routing setters (set_*_request).

    Their docstrings link to scikit-learn's own glossary, which is not part of
    this (offline) build; see the scikit-learn documentation for them.
    """
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
