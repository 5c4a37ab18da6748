"""netlog.api"""
