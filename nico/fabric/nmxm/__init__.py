"""NMX-M: the site-wide REST fabric manager with asynchronous operations (client)."""
