"""Stand-in ONNX models with the exact tensor names, shapes and dtypes of the real ones.

The real weights cannot be downloaded in tests; these small random-weight graphs exercise the
same pre- and post-processing code paths (and let insightface's classes be run as an oracle).
"""
