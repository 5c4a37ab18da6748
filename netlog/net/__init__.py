"""
Where a proxy may go, and how it gets there: the resolver with its
C{--resolve} overrides, the destination policy, connecting with a timeout, and
the blind two-way relay. Shared by the stand-in and the site proxy.
"""
