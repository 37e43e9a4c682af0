"""Test package: the folders mirror skdpvi's subpackages; a folder's tests share helpers
through relative imports (``from ._traces import ...``), which need these __init__ files."""
