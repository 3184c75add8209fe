"""Media in and out: still images, cameras, video files, windows, virtual cameras.

OpenCV is imported here, before any of these modules imports PyAV: PyAV's wheel bundles its own
libxcb, and when it loads first, OpenCV's Qt window binds to it and livelocks at 100% CPU in
namedWindow (PyAV-Org/PyAV#978, #1050). Every PyAV import in livecam lives under this package,
except commands/demo.py, which imports OpenCV first itself (tests/media/test_import_order.py).
"""

import cv2  # noqa: F401  (import order matters; see above)
