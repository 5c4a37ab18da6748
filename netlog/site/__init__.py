"""netlog.site"""
