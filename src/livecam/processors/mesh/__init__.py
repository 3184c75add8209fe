"""The embedded mesh swapper: a classical face swap driven by 468 FaceMesh landmarks.

Once per source photo: a Delaunay triangulation of its landmarks inside the face oval and a
small pyramid of its face texture. Per target face: every source triangle is mapped onto the
matching target triangle (a piecewise-affine warp) in ONE cv2.remap over the face's region of
interest. The sampling maps are built without a Python loop over triangles: all triangles are
rasterised together on a coarse grid (candidate grid points from every triangle's bounding box,
one vectorised barycentric test), each grid point takes its triangle's affine map, and the grid
is upsampled to full resolution (a piecewise-affine map is continuous, so linear upsampling is
exact away from triangle edges and off by a fraction of a pixel on them).

The source's soft face mask (its oval, cut below the hairline, feathered inwards) is the texture's
fourth channel, so it is warped with the colours and its edge lands inside the target's oval;
the weight is also bounded by the target's own oval at full resolution (the coarse grid alone
could leave grid-cell steps past it where a turned-away side is squeezed), so nothing outside
the oval changes. A source face cut off by its photo's edge fades out at that edge.
The warped face is colour-matched to the target's skin (LAB mean/std, then the target's
low-frequency lighting), triangles turned away from the camera fade out, and the target's eyes
and inner mouth (and, with --mouth-mask, its lips and more; on a mouth open wider than the
source's, its mouth corners) are kept so that blinks, gaze and speech follow the target. All
work is inside the face's region of interest.

The tells of a classical swap are taken from the target too: the source's forehead is used only
where it is skin (a fringe falls back to the target's forehead), a closed eye keeps the whole
region round it, a target's glasses frame (thin dark lines over the eye band) stays, the
source's white spots (a nose highlight, white hair at a temple) are filled in, the lips
keep their colour, and the source's sharpness is matched to the target's.

Identity is more than texture: before the warp, the target's inner landmarks (eyes, brows,
nose, mouth, cheeks; not the oval) move towards the source's proportions (shape_offsets), the
source texture is warped onto the moved landmarks, and the target's own pixels that show
through (its kept eyes and inner mouth) are warped from the old landmarks to the new ones with
the same triangles and grid, so the face's features sit where the source person has them while
the outline, pose and expression stay the target's. `shape_strength` (0..1) sets how far;
--blend scales it too (the opacity of the whole swap: 0 leaves the frame exactly as it was).

The modules, one job each, each importing only those listed before it (shape.py names source.py's
PreparedSource for type checking only):
- warp.py: the piecewise-affine warp (triangulation, sampling maps, facing weights, the motion of
  the target's own pixels);
- shape.py: the shape transfer (shape_offsets, shape_weights, turned_apart);
- regions.py: the face's regions from its landmarks (soft polygon masks, lips, forehead line,
  eyes' openness, closed-eye and mouth-corner regions);
- texture.py: the texture's repairs (the source's fringe, white spots and teeth, once; the lips'
  colour and lighting and the sharpness, per face);
- source.py: PreparedSource, what prepare_source computes once per source photo;
- swapper.py: MeshSwapper, the frame processor ("face_swapper" for --swap-model mesh).
"""
