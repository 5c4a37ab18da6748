"""netlog.har: the HAR export."""
