"""
C{netlog mcp}: netlog's API for agents, over the Model Context Protocol
(the official C{mcp} SDK, the C{mcp} extra), built on L{netlog.client}.
"""
