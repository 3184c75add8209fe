"""Index lists into the 468 points of MediaPipe's FaceMesh topology (facts about the model).

Every list is an ordered closed loop, so it can be drawn as a polygon directly. Sides are named
as MediaPipe names them, from the PERSON's point of view: RIGHT_EYE is the person's right eye,
which is on the IMAGE's left in an unmirrored frontal photo (livecam's kps[0]).
"""

from __future__ import annotations

import numpy as np


def _loop(*indices: int) -> np.ndarray:
    arr = np.array(indices, dtype=np.intp)
    arr.setflags(write=False)  # shared constants: nobody may change them in place
    return arr


# Silhouette from the top of the forehead (10), down the image-right side to the chin (152), and
# back up the image-left side.
FACE_OVAL = _loop(
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
    152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
)
# Outer lip contour: lower lip from the person's right mouth corner (61) to the left one (291),
# then the upper lip back.
LIPS_OUTER = _loop(
    61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185,
)
# Inner lip contour (the mouth opening), same direction, corners 78 and 308.
LIPS_INNER = _loop(
    78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191,
)
# Eye contours: lower lid from the outer corner to the inner corner, then the upper lid back.
RIGHT_EYE = _loop(33, 7, 163, 144, 145, 153, 154, 155, 133, 173, 157, 158, 159, 160, 161, 246)
LEFT_EYE = _loop(263, 249, 390, 373, 374, 380, 381, 382, 362, 398, 384, 385, 386, 387, 388, 466)

# Eyebrows (each an outline: upper edge from the inner end outwards, then the lower edge back).
RIGHT_EYEBROW = _loop(107, 66, 105, 63, 70, 46, 53, 52, 65, 55)
LEFT_EYEBROW = _loop(336, 296, 334, 293, 300, 276, 283, 282, 295, 285)

# The nose tip (1) and the point just above it (4); livecam's nose keypoint is their mean, which
# sits where BlazeFace and SCRFD put the nose keypoint.
NOSE_TIP = _loop(1, 4)
MOUTH_RIGHT_CORNER = 61  # person's right: image left when frontal
MOUTH_LEFT_CORNER = 291
