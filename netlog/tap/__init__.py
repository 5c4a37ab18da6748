"""netlog.tap"""
