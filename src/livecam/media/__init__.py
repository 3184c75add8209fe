"""Media in and out: still images (and, from the video and live work, cameras and videos)."""
