"""Frame processors: face swapper and face enhancer, behind one contract."""
