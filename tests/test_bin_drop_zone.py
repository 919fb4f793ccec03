"""The drop zone's footprint packing against hand computations: exact
distances between convex polygons (vertex to edge), and the choice rule by a
per-environment loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from experts.bin_pick.drop_zone import choose, directions, grid, separations, supports


def _hull(points: np.ndarray) -> np.ndarray:
  """Convex hull, counter-clockwise (Andrew's monotone chain)."""
  pts = sorted(map(tuple, points))

  def half(seq):
    out = []
    for p in seq:
      while len(out) >= 2:
        (ax, ay), (bx, by) = out[-2], out[-1]
        if (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) > 0:
          break
        out.pop()
      out.append(p)
    return out[:-1]

  return np.array(half(pts) + half(pts[::-1]))


def _point_to_segment(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
  t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0.0, 1.0)
  return float(np.linalg.norm(p - (a + t * (b - a))))


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
  """Separating-axis test over both polygons' edge normals (exact)."""
  for poly in (a, b):
    for i in range(len(poly)):
      e = poly[(i + 1) % len(poly)] - poly[i]
      n = np.array([-e[1], e[0]])
      if (a @ n).max() < (b @ n).min() or (b @ n).max() < (a @ n).min():
        return False
  return True


def polygon_distance(a: np.ndarray, b: np.ndarray) -> float:
  """Distance between two convex polygons (0 where they overlap)."""
  if _overlap(a, b):
    return 0.0
  best = math.inf
  for p, q in ((a, b), (b, a)):
    for v in p:
      for i in range(len(q)):
        best = min(best, _point_to_segment(v, q[i], q[(i + 1) % len(q)]))
  return best


def _random_polygon(rng, size: float) -> np.ndarray:
  n = int(rng.integers(3, 9))
  return _hull(rng.uniform(-size, size, (n, 2)) * rng.uniform(0.3, 1.0, 2))


def test_directions_pair_each_with_its_opposite():
  d = directions(8)
  torch.testing.assert_close(d.roll(4, 0), -d, atol=1e-6, rtol=0)
  with pytest.raises(ValueError):
    directions(7)


def test_the_grid_covers_the_disc_at_its_spacing():
  xy = grid((0.3, 0.4), 0.12, 0.01)
  r = torch.linalg.vector_norm(xy - torch.tensor([0.3, 0.4]), dim=-1)
  assert float(r.max()) <= 0.12 + 1e-6
  assert bool((r < 1e-6).any())  # The destination itself is a candidate.
  # Every point of the disc is within half a cell diagonal of a candidate.
  probe = torch.rand(500, 2) * 0.24 - 0.12
  inner = 0.12 - 0.01 * math.sqrt(0.5)  # Farther out, the disc's edge cuts cells.
  probe = probe[torch.linalg.vector_norm(probe, dim=-1) <= inner] + torch.tensor(
    [0.3, 0.4]
  )
  nearest = torch.cdist(probe, xy).amin(-1)
  assert float(nearest.max()) <= 0.01 * math.sqrt(0.5) + 1e-6


@pytest.mark.parametrize("count", [16, 64])
def test_separation_is_a_lower_bound_within_its_stated_error(count, rng):
  dirs = directions(count, "cpu").double()
  theta = math.pi / count
  for _ in range(60):
    a, b = _random_polygon(rng, 0.05), _random_polygon(rng, 0.05)
    ra, rb = rng.uniform(0.0, 0.01, 2)
    b = b + rng.uniform(-0.12, 0.12, 2)
    c = rng.uniform(-0.05, 0.05, (5, 2))  # Where a's reference point goes.
    held = supports(torch.tensor(a)[None, None], torch.tensor([[ra]]), dirs)
    other = supports(torch.tensor(b)[None, None], torch.tensor([[rb]]), dirs)
    sep = separations(torch.tensor(c), held, other, dirs)[0, :, 0].numpy()
    for j in range(len(c)):
      moved = a + c[j]
      exact = polygon_distance(moved, b) - ra - rb
      width = sum(
        np.ptp(p, 0).max() * math.sqrt(2) + 2 * r for p, r in ((a, ra), (b, rb))
      )
      if exact > 0:
        assert sep[j] <= exact + 1e-7  # float32 directions
        assert sep[j] >= exact * math.cos(theta) - math.sin(theta) * width - 1e-9
      else:
        assert sep[j] <= 1e-7  # Overlapping or touching footprints: not apart.


def test_parts_of_a_footprint_count_as_its_union(rng):
  # An L of two boxes: the held object's least separation is its nearer part's.
  dirs = directions(64).double()
  leg = np.array([[0, 0], [0.06, 0], [0.06, 0.02], [0, 0.02]], dtype=float)
  foot = np.array([[0, 0], [0.02, 0], [0.02, 0.06], [0, 0.06]], dtype=float)
  held = supports(torch.tensor(np.stack([leg, foot]))[None], torch.zeros(1, 2), dirs)
  other = np.array([[0.03, 0.05], [0.05, 0.05], [0.05, 0.07], [0.03, 0.07]])
  others = supports(torch.tensor(other)[None, None], torch.zeros(1, 1), dirs)
  sep = separations(torch.zeros(1, 2, dtype=torch.float64), held, others, dirs)
  exact = min(polygon_distance(leg, other), polygon_distance(foot, other))
  assert float(sep) == pytest.approx(exact, abs=1e-7)  # 10 mm above the leg.


def test_supports_on_turned_directions_are_the_turned_footprints(rng):
  # A footprint turned by R, on directions u, against the unturned one on
  # per-footprint directions R^T u: the same supports (a hand rotation of
  # the points, per batch entry).
  dirs = directions(64).double()
  for _ in range(20):
    n = int(rng.integers(1, 4))
    polys = [_random_polygon(rng, 0.05) for _ in range(n)]
    size = max(len(p) for p in polys)
    points = np.stack(
      [np.concatenate([p, np.repeat(p[:1], size - len(p), 0)]) for p in polys]
    )
    radius = rng.uniform(0.0, 0.01, (n, 1))
    angle = rng.uniform(-math.pi, math.pi, n)
    c, s = np.cos(angle), np.sin(angle)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # [n, 2, 2]
    turned_points = np.einsum("nij,npj->npi", rot, points)[:, None]
    expected = supports(torch.tensor(turned_points), torch.tensor(radius), dirs)
    turned = (dirs @ torch.tensor(rot))[:, None]  # R^T u per entry [n, 1, U, 2]
    got = supports(torch.tensor(points)[:, None], torch.tensor(radius), turned)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_choose_takes_the_cheapest_free_candidate_else_the_roomiest(rng):
  outcomes = set()
  for _ in range(50):
    b, c, m = 3, int(rng.integers(1, 30)), int(rng.integers(1, 6))
    sep = torch.tensor(rng.uniform(-0.02, 0.06, (b, c, m)))
    counted = torch.tensor(rng.random((b, m)) < 0.7)
    cost = torch.tensor(rng.uniform(0, 1, c))
    index, free = choose(sep, counted, cost, 0.015)
    for i in range(b):
      clear = [
        min([float(sep[i, j, k]) for k in range(m) if counted[i, k]], default=math.inf)
        for j in range(c)
      ]
      ok = [j for j in range(c) if clear[j] >= 0.015]
      if ok:
        assert bool(free[i]) and int(index[i]) == min(ok, key=lambda j: float(cost[j]))
        outcomes.add("free")
      else:
        assert not bool(free[i]) and clear[int(index[i])] == max(clear)
        outcomes.add("crowded")
  assert outcomes == {"free", "crowded"}


def _footprint(env, name: str) -> list[tuple[np.ndarray, float]]:
  """An object's geoms as (horizontal hull, sweep radius), as posed."""
  from mjlab_tasks.bin_pick.env_cfg import object_geom_points

  points, radius = object_geom_points(env, name)
  return [
    (_hull(p[:, :2]), float(r)) for p, r in zip(points[0].numpy(), radius, strict=True)
  ]


def _apart(a, b) -> float:
  return min(polygon_distance(p, q) - r - s for p, r in a for q, s in b)


def _crowd_the_zone(env, names, rng, gap: float = 0.012) -> None:
  """Each named object, as it rests in the bin, turned about the vertical
  and set on the table at a random spot within 120 mm of the drop
  destination, ``gap`` from those set before (exact footprint distances)."""
  from mjlab.utils.lab_api.math import quat_from_angle_axis, quat_mul

  from mjlab_tasks.bin_pick.env_cfg import DROP_DESTINATION, object_bounds

  origin = env.scene.env_origins[0]
  placed = []
  for name in names:
    obj = env.scene[name]
    state = torch.zeros(1, 13)
    state[:, :7] = obj.data.root_link_pose_w
    lowest = float(object_bounds(env, name)[0][0, 2])
    for _ in range(400):
      r, a = 0.12 * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)
      trial = state.clone()
      trial[0, :2] = (
        origin[:2]
        + torch.tensor(DROP_DESTINATION)
        + r * torch.tensor([math.cos(a), math.sin(a)])
      )
      trial[0, 2] = state[0, 2] - lowest + 0.001
      yaw = quat_from_angle_axis(
        torch.tensor([rng.uniform(0, 2 * math.pi)]), torch.tensor([[0.0, 0.0, 1.0]])
      )
      trial[0, 3:7] = quat_mul(yaw, state[:, 3:7])[0]
      trial[0, 7:] = 0.0
      obj.write_root_state_to_sim(trial)
      env.sim.forward()
      mine = _footprint(env, name)
      if all(_apart(mine, other) >= gap for other in placed):
        placed.append(mine)
        break
    else:
      raise AssertionError(f"no room found for {name}")


def _poured_scene(object_seed: int, least: int):
  """A one-environment default scene of 8 object slots, reset (poured),
  with at least ``least`` objects in the bin: the next object seeds are
  tried until one pours that many. Returns (env, poured names)."""
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg, pourer
  from mjlab_tasks.engine import make_env

  for seed in range(object_seed, object_seed + 10):
    env = make_env(
      bin_pick_env_cfg(num_envs=1, objects=8, object_seed=seed),
      device="cpu",
      engine="mujoco",
    )
    env.reset()
    pour = pourer(env)
    names = [
      n for n, b in zip(pour.cfg.names, pour.in_bin[0].tolist(), strict=True) if b
    ]
    if len(names) >= least:
      return env, names
    env.close()
  raise AssertionError(f"no object seed from {object_seed} poured {least} objects")


def _place_among_the_crowd(object_seed: int, rng):
  """One scene: all but the last two poured objects set in the drop zone
  (``_crowd_the_zone``), settled; the earlier deliveries are those then
  delivered. The expert runs until its first delivery, a failed attempt or
  its end (a second delivery would clear the bin and reset the episode).
  Returns (log, earlier delivery names, whether each is kept, how far each
  moved [m])."""
  from experts.bin_pick.expert import BinPickExpert, Stage
  from mjlab_tasks.bin_pick.env_cfg import pourer
  from mjlab_tasks.common.verdict import invalidate_verdict, task_verdict

  env, names = _poured_scene(object_seed, least=6)
  expert = None
  try:
    pour = pourer(env)
    early = names[:-2]
    _crowd_the_zone(env, early, rng)
    for _ in range(40):  # Two seconds to settle, the robot holding still.
      env.step(torch.zeros(1, 7))
    invalidate_verdict(env)
    # Those set down still (one resting against others in the bin may tip).
    delivered = task_verdict(env)["delivered"][0]
    early = [n for n in early if bool(delivered[pour.cfg.names.index(n)])]
    assert len(early) >= 4, "too few set down"
    before = torch.stack([env.scene[n].data.root_link_pos_w[0, :2] for n in early])
    expert = BinPickExpert(env)
    log = expert.logs[0]
    for _ in range(1000):
      env.step(expert.act())
      if log.delivery_times or log.failures or expert.stage[0] == int(Stage.DONE):
        break
    # Kept: in the zone on the table at the end, and delivered (still, as
    # the evaluator's speed limits say) at some step of a 2 s settle: an
    # object rocking in place was measured just over the 0.1 rad/s limit.
    index = [pour.cfg.names.index(n) for n in early]
    still = torch.zeros(len(index), dtype=torch.bool)
    for _ in range(40):
      env.step(torch.zeros(1, 7))
      invalidate_verdict(env)
      still |= task_verdict(env)["delivered"][0, index]
    verdict = task_verdict(env)
    placed = verdict["near_drop"] & verdict["outside_bin"] & verdict["supported"]
    kept = (still & placed[0, index]).tolist()
    after = torch.stack([env.scene[n].data.root_link_pos_w[0, :2] for n in early])
  finally:
    if expert is not None:
      expert.close()
    env.close()
  return log, early, kept, torch.linalg.vector_norm(after - before, dim=-1)


@pytest.mark.slow  # Up to three scenes of a pour, a settle and a delivery.
def test_a_crowded_drop_zone_keeps_every_earlier_delivery(rng):
  """Live (C engine): the zone crowded with four or more delivered objects
  at random, 12 mm apart; the expert delivers one more among them. Every
  earlier delivery is still delivered after it and none moved by more than
  the expert's knock margin. A scene whose attempt fails before a delivery
  (a slip, no grasp) tests nothing: the next object seed is tried."""
  from experts.bin_pick.expert import BinPickExpertCfg

  seed, tried = int(rng.integers(1000)), []
  for attempt in range(3):
    log, early, kept, moved = _place_among_the_crowd(seed + 10 * attempt, rng)
    if log.delivery_times and not log.failures:
      break
    tried.append([(t["t"], t["to"], t["note"][:50]) for t in log.transitions])
  else:
    raise AssertionError(f"no clean delivery in three scenes: {tried}")
  assert all(kept), (early, kept, moved.tolist())
  assert float(moved.max()) < BinPickExpertCfg().knock_margin, moved.tolist()


def test_a_capsule_held_standing_keeps_its_length_clear_all_around(rng):
  """``fall_radius`` on random capsule poses, against the rule written out
  per environment: the capsule's full length (2 (radius + half length), from
  a model built here) where its axis is within 45 degrees of vertical,
  else 0; and 0 for a box, a body of two capsules and a cylinder."""
  import mujoco

  from experts.bin_pick.expert import BinPickExpertCfg, _capsules, fall_radius

  spec = mujoco.MjSpec()
  radius, half = rng.uniform(0.01, 0.03), rng.uniform(0.02, 0.05)
  bodies = []
  for name, shapes in (
    ("capsule", [(mujoco.mjtGeom.mjGEOM_CAPSULE, [radius, half, 0])]),
    ("box", [(mujoco.mjtGeom.mjGEOM_BOX, [0.02, 0.03, 0.04])]),
    ("pair", [(mujoco.mjtGeom.mjGEOM_CAPSULE, [0.01, 0.02, 0])] * 2),
    ("cylinder", [(mujoco.mjtGeom.mjGEOM_CYLINDER, [radius, half, 0])]),
  ):
    body = spec.worldbody.add_body(name=name)
    bodies.append([body.add_geom(type=t, size=s) for t, s in shapes])
  model = spec.compile()
  groups = [[g.id for g in gs] for gs in bodies]
  geom, length = _capsules(model, groups, "cpu")
  assert geom.tolist() == [groups[0][0], -1, -1, -1]
  assert length.tolist() == pytest.approx([2 * (radius + half), 0.0, 0.0, 0.0])

  n = 64
  axes = rng.normal(size=(n, 3))
  axes /= np.linalg.norm(axes, axis=1, keepdims=True)
  xmat = torch.zeros(n, model.ngeom, 3, 3)
  for body in (0, 3):  # The capsule, and the cylinder posed alike.
    xmat[:, groups[body][0], :, 2] = torch.tensor(axes, dtype=torch.float32)
  targets = torch.tensor(rng.integers(0, 4, n))
  got = fall_radius(xmat, geom, length, targets, BinPickExpertCfg().standing_tilt)
  for i in range(n):
    tilt = math.degrees(math.acos(min(1.0, abs(axes[i, 2]))))
    standing = int(targets[i]) == 0 and tilt < 45.0
    assert float(got[i]) == pytest.approx(2 * (radius + half) if standing else 0.0)
