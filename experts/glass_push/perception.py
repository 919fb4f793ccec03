"""Readings from the examiner's top view alone: a camera perception step.

``readings_from_top_view(picture)`` finds the glasses in the 384 x 384 RGB
top view (``Examiner.top_view()``) and returns, per glass it finds,
``{"x", "y", "widest", "kind"}`` in metres in the table frame. It uses only
the picture, the camera's public numbers (docs/glass_push.md, "Pictures")
and the documented drawing of the glasses ("Tables"), restated below.

What the picture shows (looked at on training tables 0-11): clear glasses
drawn nearly white and unsaturated on an orange table (saturation below 0.1
against above 0.2, shadows included); the floor beyond the table's edge a
flat bluish grey band. The sharpest circle of every glass is its TOP RIM
(checked against the truth: centre and radius within about half a pixel),
seen at the glass's height h, i.e. scaled by 750 / (750 - h) about the
camera axis. A stemmed glass's wider bowl ring lies lower and only widens
the outline on the side facing the axis; its foot shows through the bowl as
a fainter circle; neighbouring rims overlap in the picture.

Method:

1. glass pixels: low saturation, the floor band left out by its colour;
2. edges: the grey picture's gradient (Sobel) where strong, plus the
   boundary of the glass pixels;
3. circles: a gradient-direction Hough transform over the rim radii the
   drawing allows (19-42 px), peaks taken greedily while they have enough
   votes and do not repeat a circle already taken;
4. each circle refined by an iterated least-squares fit to the edge points
   near it whose gradient runs along its radius; weaker circles centred
   inside a stronger one are left out;
5. the kind from the grey inside the rim (a stemmed glass's stem and lower
   bowl; a tumbler is white there); a weaker circle on the ray from the
   camera axis through a stemmed glass's rim, nearer the axis, is that
   glass's foot and is left out;
6. metres: the rim's height is NOT in the picture (no depth, and no part of
   the glass at a known height is found), so the mean drawn height of the
   kind stands in for it (tumblers 75-150 mm, stemmed 150-220 mm). Position
   and width then carry an error proportional to the height's deviation
   from that mean: for the position also proportional to the glass's
   distance from the camera axis. This is the method's main error
   (measured by scripts/measure_glass_perception.py).

Height and foot are NOT returned: the rim's scale does not separate a
glass's height from its width, and the foot (a faint circle seen through a
stemmed glass's bowl, a side-wall crescent on some tumblers) is not fitted.
"""

from __future__ import annotations

import math

import numpy as np

# The camera's public numbers (docs/glass_push.md "Pictures"; the same as
# rules/tables.py ZONE_CENTER, TOP_VIEW_HEIGHT, TOP_VIEW_FOVY, which a
# solution may not import): 750 mm above the zone's centre, straight down,
# 44 degree field of view, 384 x 384, image right = +x, image up = +y.
ZONE_CENTER = (0.45, -0.27)
CAMERA_HEIGHT = 0.75
FOVY_DEG = 44.0
SIZE = 384
FOCAL = (SIZE / 2) / math.tan(math.radians(FOVY_DEG / 2))  # pixels
# The documented drawing of the glasses (docs/glass_push.md "Tables"): the
# circle found is a glass's top rim (checked against the truth: within 0.5
# px), at the glass's height, which the picture does not give: the mean
# drawn height per kind stands in for it (tumblers 75-150 mm, stemmed
# 150-220 mm). A stemmed glass's rim is 85 % of its widest ring
# (rules/glasses.py ``glass_parts``; docs "Tables": widest at 60 % of the
# bowl, narrowing to the rim).
RIM_HEIGHT = {"tumbler": 0.1125, "stemmed": 0.185}
RIM_OF_WIDEST = {"tumbler": 1.0, "stemmed": 0.85}
# Rim radii the drawing allows, in pixels: 29-46 mm (tumbler rim, 85 % of
# the stemmed bowl's 33-46 mm) at 75-220 mm.
R_MIN, R_MAX = 19, 42
SATURATION_GLASS = 0.15
EDGE_FRACTION = 0.12  # of the strongest gradient, for an edge pixel
MIN_VOTES = 0.22  # of a full circumference's votes, for a circle
MIN_SEPARATION = 0.55  # of the smaller radius, between two circles' centres
# A weaker circle centred this far inside a stronger one is left out (a
# stemmed glass's foot, seen through its bowl; a tumbler's foot crescent).
NESTED = 0.9
NESTED_RADIUS = 0.85  # or a circle centred inside one it is this much of
STEMMED_GREY = 0.04  # grey fraction at 0.3-0.6 of the rim: stemmed


def table_pixel(xy) -> np.ndarray:
  """(col, row) of table-plane points ``xy`` [..., 2] in the top view: the
  inverse of ``readings_from_top_view``'s pixels to metres at height 0."""
  xy = np.asarray(xy, dtype=float)
  per_px = CAMERA_HEIGHT / FOCAL
  col = SIZE / 2 + (xy[..., 0] - ZONE_CENTER[0]) / per_px
  row = SIZE / 2 - (xy[..., 1] - ZONE_CENTER[1]) / per_px
  return np.stack([col, row], -1)


def _glass_mask(rgb: np.ndarray) -> np.ndarray:
  mx = rgb.max(axis=2)
  mn = rgb.min(axis=2)
  saturation = (mx - mn) / np.maximum(mx, 1.0)
  r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
  floor = (np.abs(r - g) <= 3) & (b - r >= 12) & (b - r <= 35) & (mx < 235)
  return (saturation < SATURATION_GLASS) & ~floor


def _sobel(grey: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  p = np.pad(grey, 1, mode="edge")
  gx = (
    (p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:])
    - (p[:-2, :-2] + 2 * p[1:-1, :-2] + p[2:, :-2])
  ) / 8.0
  gy = (
    (p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:])
    - (p[:-2, :-2] + 2 * p[:-2, 1:-1] + p[:-2, 2:])
  ) / 8.0
  return gx, gy


def _edges(rgb: np.ndarray, mask: np.ndarray):
  """Edge points (row, col) and their unit gradient directions."""
  grey = rgb.mean(axis=2)
  gx, gy = _sobel(grey)
  # The glass/table boundary as a second, colour-blind gradient.
  mx, my = _sobel(mask.astype(float) * 255.0)
  gx, gy = gx + 0.5 * mx, gy + 0.5 * my
  mag = np.hypot(gx, gy)
  near_glass = _dilate(mask, 2)
  strong = (mag > EDGE_FRACTION * np.percentile(mag, 99.5)) & near_glass
  rows, cols = np.nonzero(strong)
  n = np.stack([gy[rows, cols], gx[rows, cols]], axis=1) / mag[rows, cols, None]
  return rows.astype(float), cols.astype(float), n, mag[rows, cols]


def _dilate(mask: np.ndarray, k: int) -> np.ndarray:
  out = mask.copy()
  for dr in range(-k, k + 1):
    for dc in range(-k, k + 1):
      out |= np.roll(np.roll(mask, dr, 0), dc, 1)
  return out


def _hough(rows, cols, normals, shape) -> np.ndarray:
  """Votes [R, H, W] for circle centres at each radius (both signs of the
  gradient: an outline can be darker or lighter than either side)."""
  radii = np.arange(R_MIN, R_MAX + 1)
  acc = np.zeros((len(radii), shape[0], shape[1]))
  for i, rad in enumerate(radii):
    for sign in (1.0, -1.0):
      r = np.rint(rows + sign * rad * normals[:, 0]).astype(int)
      c = np.rint(cols + sign * rad * normals[:, 1]).astype(int)
      ok = (r >= 0) & (r < shape[0]) & (c >= 0) & (c < shape[1])
      np.add.at(acc[i], (r[ok], c[ok]), 1.0)
  # Blur each radius plane a little (3 x 3 box) so near votes add up.
  p = np.pad(acc, ((0, 0), (1, 1), (1, 1)))
  acc = sum(
    p[:, 1 + dr : 1 + dr + shape[0], 1 + dc : 1 + dc + shape[1]]
    for dr in (-1, 0, 1)
    for dc in (-1, 0, 1)
  )
  # Normalize by the circumference: a full outline scores about 1.
  return acc / (2 * math.pi * radii[:, None, None])


def _fit_circle(rows, cols, normals, centre, radius):
  """Robust least-squares circle through the edge points near a circle whose
  gradient runs along its radius, iterated to convergence (a wide band
  first, then a narrow one); (centre, radius, points used)."""
  cr, cc = centre
  used = 0
  for step in range(30):
    band = 2.5 if step < 8 else 1.5
    dr, dc = rows - cr, cols - cc
    dist = np.hypot(dr, dc)
    along = (dr * normals[:, 0] + dc * normals[:, 1]) / np.maximum(dist, 1e-9)
    near = (np.abs(dist - radius) < band) & (np.abs(along) > 0.85)
    used = int(near.sum())
    if used < 12:
      break
    r_, c_ = rows[near], cols[near]
    # Kasa fit: r^2 + c^2 + D r + E c + F = 0.
    a = np.stack([r_, c_, np.ones_like(r_)], axis=1)
    b = -(r_**2 + c_**2)
    (d, e, f), *_ = np.linalg.lstsq(a, b, rcond=None)
    new = (-d / 2, -e / 2, math.sqrt(max(d**2 / 4 + e**2 / 4 - f, 1.0)))
    moved = abs(new[0] - cr) + abs(new[1] - cc) + abs(new[2] - radius)
    cr, cc, radius = new
    if step >= 8 and moved < 1e-3:
      break
  return (cr, cc), radius, used


def find_outlines(picture: np.ndarray) -> list[dict]:
  """The glasses' outlines in pixels: [{"row", "col", "radius", "score",
  "kind"}] (row, col continuous: pixel (i, j) covers [i, i + 1) x [j, j + 1))."""
  rgb = np.asarray(picture, dtype=float)
  if rgb.shape != (SIZE, SIZE, 3):
    raise ValueError(f"expected a {SIZE}x{SIZE}x3 picture, got {rgb.shape}")
  mask = _glass_mask(rgb)
  rows, cols, normals, _ = _edges(rgb, mask)
  acc = _hough(rows, cols, normals, mask.shape)
  radii = np.arange(R_MIN, R_MAX + 1)
  found: list[dict] = []
  best = acc.max(axis=0)
  which = acc.argmax(axis=0)
  order = np.argsort(best, axis=None)[::-1]
  for flat in order[:4000]:
    score = best.flat[flat]
    if score < MIN_VOTES:
      break
    r0, c0 = divmod(int(flat), SIZE)
    rad0 = float(radii[which[r0, c0]])
    if not mask[r0, c0]:
      continue
    if any(
      math.hypot(r0 - f["r0"], c0 - f["c0"]) < MIN_SEPARATION * min(rad0, f["rad0"])
      for f in found
    ):
      continue
    found.append({"r0": r0, "c0": c0, "rad0": rad0, "score": float(score)})
    if len(found) >= 14:
      break
  outlines = []
  for f in found:
    (cr, cc), rad, used = _fit_circle(
      rows, cols, normals, (f["r0"], f["c0"]), f["rad0"]
    )
    if used < 12 or not (R_MIN - 2 <= rad <= R_MAX + 2):
      cr, cc, rad = f["r0"], f["c0"], f["rad0"]
    outlines.append(
      {"row": cr + 0.5, "col": cc + 0.5, "radius": rad, "score": f["score"]}
    )
  outlines = _drop_duplicates(outlines)
  for o in outlines:
    o["kind"] = _kind(rgb, o["row"], o["col"], o["radius"])
  return [o for o in outlines if not any(_foot_of(o, k) for k in outlines)]


def _foot_of(o: dict, k: dict) -> bool:
  """Circle o is stemmed glass k's foot, seen through its bowl: weaker, on
  the ray from the camera axis through k's rim, nearer the axis by the
  ratio a rim 0-220 mm high allows (the foot stands at z = 0)."""
  if k is o or k["kind"] != "stemmed" or o["score"] >= k["score"]:
    return False
  ko = np.array([k["row"], k["col"]]) - SIZE / 2
  oo = np.array([o["row"], o["col"]]) - SIZE / 2
  length = float(np.linalg.norm(ko))
  if length < 1.0:
    return math.hypot(*(oo - ko)) < 2.0
  along = float(oo @ ko) / length
  across = abs(float(oo[0] * ko[1] - oo[1] * ko[0])) / length
  lowest = (CAMERA_HEIGHT - 0.23) / CAMERA_HEIGHT
  return across < 2.0 and lowest * length - 2.0 <= along <= length + 1.0


def _drop_duplicates(outlines: list[dict]) -> list[dict]:
  """One circle per glass: a circle that repeats a stronger one, or is
  centred inside a stronger one (NESTED), is left out."""
  keep: list[dict] = []
  for o in sorted(outlines, key=lambda o: -o["score"]):
    if all(
      math.hypot(o["row"] - k["row"], o["col"] - k["col"])
      >= MIN_SEPARATION * min(o["radius"], k["radius"])
      for k in keep
    ):
      keep.append(o)
  return [o for o in keep if not any(_nested(o, k) for k in keep)]


def _nested(o: dict, k: dict) -> bool:
  """Circle o is inside circle k: centred well inside it and weaker, or
  centred inside it and clearly smaller."""
  d = math.hypot(o["row"] - k["row"], o["col"] - k["col"])
  return (k["score"] > o["score"] and d < NESTED * k["radius"]) or (
    o["radius"] < NESTED_RADIUS * k["radius"] and d < k["radius"]
  )


def _kind(rgb, cr, cc, rad) -> str:
  """A stemmed glass shows its stem and the grey lower bowl through its rim:
  at 0.3-0.6 of the rim's radius at least 9 % of the pixels are below 245
  grey on training tables 0-6 (tumblers: none), so more than 4 % = stemmed."""
  r, c = np.mgrid[0:SIZE, 0:SIZE] + 0.5
  d = np.hypot(r - cr, c - cc) / rad
  band = (d >= 0.3) & (d < 0.6)
  if not band.any():
    return "tumbler"
  grey = float(np.mean(rgb[band].mean(axis=1) < 245))
  return "stemmed" if grey > STEMMED_GREY else "tumbler"


def readings_from_top_view(picture: np.ndarray) -> list[dict]:
  """Per glass found: {"x", "y", "widest", "kind"} (metres, table frame).

  x, y are the glass's axis and widest its widest ring's diameter, from its
  outline at the kind's mean ring height (the picture gives no height).
  No "height" or "foot": the top view does not show them.
  """
  readings = []
  for o in find_outlines(picture):
    z = RIM_HEIGHT[o["kind"]]
    metres_per_px = (CAMERA_HEIGHT - z) / FOCAL
    u = o["col"] - SIZE / 2
    v = SIZE / 2 - o["row"]
    readings.append(
      {
        "x": ZONE_CENTER[0] + u * metres_per_px,
        "y": ZONE_CENTER[1] + v * metres_per_px,
        "widest": 2 * o["radius"] * metres_per_px / RIM_OF_WIDEST[o["kind"]],
        "kind": o["kind"],
      }
    )
  return readings
