"""netlog.supervise"""
