"""netlog.log"""
