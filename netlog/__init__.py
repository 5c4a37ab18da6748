"""
netlog: record what a browser does on the network, export it as HAR 1.2.
"""

from __future__ import annotations

__version__ = "0.1.0"
