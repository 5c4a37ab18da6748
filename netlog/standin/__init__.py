"""netlog.standin"""
