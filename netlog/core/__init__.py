"""netlog.core"""
