"""
The log as WARC 1.1 and WACZ 1.1: the archiving world's formats.
"""
