"""Media in and out: still images, cameras, video files, windows, virtual cameras.

OpenCV is imported here, before any of these modules imports PyAV: PyAV's wheel bundles its own
libxcb, and when it loads first, OpenCV's Qt window binds to it and livelocks at 100% CPU in
namedWindow (PyAV-Org/PyAV#978, #1050). Every PyAV import in livecam lives under this package
(tests/media/test_import_order.py): one video reader (video_reader.py) and one video writer
(video_writer.py), which the camera file source, the recorder sink, `video`, `demo` and `bench` use.
"""

import cv2  # noqa: F401  (import order matters; see above)
