"""livecam: real-time, single-image face swapping from the command line."""

__version__ = "0.1.0"
