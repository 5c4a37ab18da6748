"""
Sessions: many browsers through one proxy, each with a forward listener and a
log of its own (see C{docs/sessions.rst}).
"""
