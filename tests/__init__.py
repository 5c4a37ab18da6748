"""
netlog's tests.

Hypothesis runs without its per-example deadline: on a loaded 2-core CI
machine a slow example is not a failure (speed is measured in benchmarks/).
"""

from hypothesis import settings

settings.register_profile("netlog", deadline=None)
settings.load_profile("netlog")
