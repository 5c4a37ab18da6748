"""
The stand-in: a forward proxy that decrypts nothing and logs every
connection (C{twistd netlog-standin}).
"""
