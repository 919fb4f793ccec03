"""Graspability of a bin-picking object set, pose by pose.

For each object seed in ``--seeds``, every object that ``describe_objects``
draws from ``--object-set`` for the default environment (its ``objects``
count), in each of its
stable resting poses, is placed alone at the default bin's centre and the
expert's own CPU replica (``GraspReplica.plan`` with the expert's
``ReplicaCfg``, transit height and reach band) is asked for a grasp. Nothing
of the replica's checks is repeated here: a pose is graspable when the
replica's planner returns a plan.

Resting poses: the object is dropped alone onto a flat floor in plain C
MuJoCo from 26 + ``--random-drops`` orientations (each direction of a cube's
faces, edges and corners pointing down, then random ones), released just
above the floor; the distinct final orientations (the body-frame direction
that points down, up to the object's own symmetry) are its resting poses.
At the bin each pose is yawed so its footprint is narrowest across the bin
(the 400 mm bin is 128 mm wide: a wide box fits only along it) and its
footprint's centre is at the bin's centre, lowest point on the floor.

The planner is tried with the expert's first budget (100 checks per object
and pass) and, when that finds nothing, with its last-resort budget (1000).

  python scripts/measure_bin_graspability.py --seeds 0-19 \\
    --output reports/bin_graspability/seeds_0_19

``--workers N`` measures N seeds at a time in separate processes (the same
numbers: each object's drops are seeded by its own seed and slot).

Writes ``graspability.json`` (every pose) and ``graspability.md`` (per kind);
while it runs, ``objects.partial.jsonl`` holds the seeds measured so far.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from cli_args import check_at_least, check_new_folder, create_folder, fail, parse

from assets.objects import ObjectSet


@dataclass
class Args:
  seeds: str = "0-19"
  """Object seeds, inclusive: ``A-B`` (e.g. 0-99) or one seed ``A``."""
  output: Path | None = None
  """Folder for graspability.json and graspability.md; must not exist.
  Nothing written if unset (the table is printed either way)."""
  random_drops: int = 6
  """Random drop orientations per object, besides the 26 fixed ones."""
  drop_seed: int = 0
  """Seed of the random drop orientations and yaws."""
  object_set: ObjectSet = "default"
  """default or hard (the former default, with wide flat boxes)."""
  workers: int = 1
  """Seeds measured at a time, each in its own process."""


def parse_seeds(text: str) -> range | None:
  """``A-B`` or ``A`` (non-negative, A <= B) as a range; None if malformed."""
  parts = text.strip().split("-")
  if len(parts) not in (1, 2) or not all(p.strip().isdigit() for p in parts):
    return None
  first, last = int(parts[0]), int(parts[-1])
  return range(first, last + 1) if first <= last else None


def check_args(args: Args) -> range:
  """Every flag checked before anything is built: the seeds."""
  seeds = parse_seeds(args.seeds)
  if seeds is None:
    fail(f"--seeds must be A-B with 0 <= A <= B or one seed A, got {args.seeds!r}.")
  check_at_least(0, random_drops=args.random_drops, drop_seed=args.drop_seed)
  check_at_least(1, workers=args.workers)
  if args.output is not None:
    check_new_folder(args.output)
  return seeds


##
# Resting poses (an object alone on a flat floor, plain C MuJoCo).
##

# The body-frame direction that points down, as a cube's 6 faces, 12 edges and
# 8 corners: every stable face of a box or a hull is reached from one nearby.
_CUBE_DIRECTIONS = np.array(
  [
    (x, y, z)
    for x in (-1, 0, 1)
    for y in (-1, 0, 1)
    for z in (-1, 0, 1)
    if (x, y, z) != (0, 0, 0)
  ],
  dtype=float,
)
_SAME_POSE_COS = np.cos(np.radians(10.0))


@dataclass
class RestingPose:
  quat: list[float]
  """A final orientation the object came to rest in (w, x, y, z)."""
  down: list[float]
  """Canonical body-frame direction pointing down (``canonical_down``)."""
  drops: int
  """Drops that ended in this pose."""


def canonical_down(kind: str, down: np.ndarray) -> np.ndarray:
  """The down direction up to the object's own symmetry, so that one resting
  pose is not counted several times: a box is symmetric under half turns
  about its axes (the sign of each component does not matter), a capsule
  or a cylinder under any turn about its axis and a half turn across it
  (only the size of the axial component does)."""
  if kind in ("box", "wide"):
    return np.abs(down)
  if kind in ("capsule", "cylinder"):
    return np.array([np.hypot(down[0], down[1]), 0.0, abs(down[2])])
  return down


def _quat_turning(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Unit quaternion (w, x, y, z) rotating unit vector a onto unit vector b."""
  a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
  axis, cos = np.cross(a, b), float(a @ b)
  if cos < -1 + 1e-9:  # Opposite: a half turn about any axis normal to a.
    normal = np.cross(a, [1.0, 0, 0] if abs(a[0]) < 0.9 else [0, 1.0, 0])
    return np.array([0.0, *(normal / np.linalg.norm(normal))])
  q = np.array([1.0 + cos, *axis])
  return q / np.linalg.norm(q)


def _yaw_quat(yaw: float) -> np.ndarray:
  return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  import mujoco

  out = np.zeros(4)
  mujoco.mju_mulQuat(out, a, b)
  return out


def drop_orientations(random_drops: int, rng: np.random.Generator) -> np.ndarray:
  """Initial orientations [D, 4]: each cube direction pointing down (random
  yaw), then ``random_drops`` uniformly random ones."""
  quats = [
    _quat_mul(_yaw_quat(rng.uniform(0, 2 * np.pi)), _quat_turning(d, [0, 0, -1.0]))
    for d in _CUBE_DIRECTIONS
  ]
  for _ in range(random_drops):
    q = rng.normal(size=4)
    quats.append(q / np.linalg.norm(q))
  return np.array(quats)


def _floor_model(desc):
  """The object alone above a floor plane (plain C MuJoCo)."""
  import mujoco

  from assets.objects import object_spec

  spec = object_spec(desc)
  spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1.0, 1.0, 0.1])
  spec.option.timestep = 0.002
  return spec.compile()


def _drop(model, data, quat: np.ndarray, max_s: float = 4.0) -> bool:
  """Release the object at ``quat``, its lowest point 3 mm above the floor,
  and simulate until it rests (True) or ``max_s`` passes (False)."""
  import mujoco

  from experts.bin_pick.grasps import body_triangles_w

  mujoco.mj_resetData(model, data)
  data.qpos[3:7] = quat
  mujoco.mj_kinematics(model, data)
  geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == 1]
  lowest = body_triangles_w(model, data, geoms)[..., 2].min()
  data.qpos[2] = -lowest + 0.003
  still = 0
  for _ in range(round(max_s / model.opt.timestep)):
    mujoco.mj_step(model, data)
    # Still for 0.2 s: slow rolling (a capsule) counts as moving.
    still = still + 1 if np.abs(data.qvel).max() < 2e-3 else 0
    if still * model.opt.timestep >= 0.2:
      return True
  return False


def resting_poses(desc, random_drops: int, rng: np.random.Generator) -> tuple:
  """(distinct resting poses, drops that never came to rest)."""
  import mujoco

  model = _floor_model(desc)
  data = mujoco.MjData(model)
  poses: list[RestingPose] = []
  restless = 0
  for quat in drop_orientations(random_drops, rng):
    if not _drop(model, data, quat):
      restless += 1
      continue
    rot = data.xmat[1].reshape(3, 3)
    down = canonical_down(desc.kind, rot.T @ np.array([0.0, 0.0, -1.0]))
    for pose in poses:
      if float(np.dot(pose.down, down)) >= _SAME_POSE_COS:
        pose.drops += 1
        break
    else:
      poses.append(
        RestingPose(data.qpos[3:7].tolist(), down.round(4).tolist(), drops=1)
      )
  return poses, restless


##
# The expert's replica on the default scene with one object.
##


@dataclass(frozen=True)
class ExpertSetup:
  """The default environment's numbers the expert plans with."""

  objects: int
  rim_z: float
  bin_width: float
  bin_centre: tuple[float, float]
  floor_z: float
  transit_z: float
  reach: tuple[float, float]
  replica_cfg: object = field(repr=False)


def expert_setup() -> ExpertSetup:
  """Default object count and bin (``bin_pick_env_cfg``'s defaults) and the
  expert's limits (``BinPickExpertCfg``): the transit height is the
  expert's own (rim + transit clearance + pad half height)."""
  import inspect

  from assets.ur5_rg2.model import RG2_PAD_HALF
  from experts.bin_pick.expert import BinPickExpertCfg
  from mjlab_tasks.bin_pick.env_cfg import (
    BIN_CENTRE,
    BIN_FLOOR,
    BinGeometry,
    bin_pick_env_cfg,
  )

  cfg = BinPickExpertCfg()
  geometry = BinGeometry()
  return ExpertSetup(
    objects=inspect.signature(bin_pick_env_cfg).parameters["objects"].default,
    rim_z=geometry.rim_z,
    bin_width=geometry.width,
    bin_centre=BIN_CENTRE,
    floor_z=BIN_FLOOR,
    transit_z=geometry.rim_z + cfg.transit_clearance + RG2_PAD_HALF[2],
    reach=cfg.reach,
    replica_cfg=cfg.replica,
  )


def scene_model(desc):
  """The default scene (robot, bin, table) compiled with ``desc`` as its
  only object (slot ``obj_00``), as the environment compiles it (no pour)."""
  from mjlab.scene import Scene

  from assets.objects import object_spec
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg

  cfg = bin_pick_env_cfg(num_envs=1, objects=1)
  cfg.scene.entities["obj_00"].spec_fn = lambda: object_spec(desc)
  return Scene(cfg.scene, "cpu").compile()


class LoneObjectPlanner:
  """The expert's replica of the default scene holding one object, with the
  robot at home (the scene's keyframe: as after a reset)."""

  def __init__(self, desc, setup: ExpertSetup):
    import mujoco

    from experts.bin_pick.replica import GraspReplica

    self.setup = setup
    model = scene_model(desc)
    home = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, home, 0)
    self.home = home
    obj = model.body("obj_00/obj").id
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == obj]
    self.replica = GraspReplica(model, [geoms], cfg=setup.replica_cfg)
    self._adr = model.jnt_qposadr[model.body_jntadr[obj]]
    # The robot's root (its mocap body): the expert's reach band is around it.
    base = next(
      model.body_mocapid[b]
      for b in range(model.nbody)
      if model.body_mocapid[b] >= 0 and model.body(b).name.startswith("robot/")
    )
    self.base_xy = home.mocap_pos[base, :2].copy()

  def _pose(self, position: np.ndarray, quat: np.ndarray) -> None:
    qpos = self.home.qpos.copy()
    qpos[self._adr : self._adr + 3] = position
    qpos[self._adr + 3 : self._adr + 7] = quat
    self.replica.pose(qpos, self.home.mocap_pos, self.home.mocap_quat)

  def place(self, rest_quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Yaw the resting orientation so its footprint is narrowest across the
    bin (x), centre the footprint on the bin, lowest point on its floor:
    (position, quaternion)."""
    self._pose(np.zeros(3), rest_quat)
    points = self.replica.object_triangles(0).reshape(-1, 3)
    # Every tenth of a degree at once: a resting pose's yaw is arbitrary, and
    # a wide box fits the 128 mm bin only within a few degrees of its axis.
    yaws = np.radians(np.arange(0.0, 180.0, 0.1))
    across = np.ptp(
      np.cos(yaws)[:, None] * points[:, 0] - np.sin(yaws)[:, None] * points[:, 1],
      axis=1,
    )
    quat = _quat_mul(_yaw_quat(float(yaws[np.argmin(across)])), rest_quat)
    self._pose(np.zeros(3), quat)
    points = self.replica.object_triangles(0).reshape(-1, 3)
    lo, hi = points.min(0), points.max(0)
    cx, cy = self.setup.bin_centre
    position = np.array(
      [
        cx - 0.5 * (lo[0] + hi[0]),
        cy - 0.5 * (lo[1] + hi[1]),
        self.setup.floor_z - lo[2],
      ]
    )
    return position, quat

  def check(self, position: np.ndarray, quat: np.ndarray) -> dict:
    """Ask the expert's planner for a grasp of the object posed so."""
    from experts.bin_pick.replica import well_held

    self._pose(position, quat)
    r = self.replica
    arm_q = r.data.qpos[r.kin.qpos_adr].copy()
    tool = r.data.site_xmat[r.kin.site_id].reshape(3, 3)
    yaw = float(np.arctan2(tool[1, 0], tool[0, 0]))
    centre = r.data.xpos[r.model.geom_bodyid[r.object_geoms[0][0]]]
    distance = float(np.linalg.norm(centre[:2] - self.base_xy))
    points = r.object_triangles(0).reshape(-1, 3)
    out = {
      "position": position.round(4).tolist(),
      "quat": quat.round(5).tolist(),
      "footprint_mm": (np.ptp(points[:, :2], axis=0) * 1000).round(1).tolist(),
      "height_mm": round(float(np.ptp(points[:, 2])) * 1000, 1),
      "in_reach": self.setup.reach[0] <= distance <= self.setup.reach[1],
    }
    start = time.perf_counter()
    budget = "first"
    result = r.plan([0], self.setup.transit_z, arm_q, yaw)
    if result.plan is None:
      budget = "last_resort"
      result = r.plan(
        [0], self.setup.transit_z, arm_q, yaw,
        max_checks=r.cfg.last_resort_checks_per_object,
      )  # fmt: skip
    out["plan_s"] = round(time.perf_counter() - start, 3)
    out["checked"] = result.checked
    out["rejections"] = dict(result.rejections)
    plan = result.plan
    out["accepted"] = plan is not None
    out["budget"] = budget if plan is not None else None
    if plan is not None:
      out["grasp"] = {
        "width_mm": round(plan.width * 1000, 1),
        "tilt_deg": round(plan.tilt_deg),
        "level": plan.level,
        "patch": round(plan.patch, 2),
        "com_mm": round(plan.com_distance * 1000, 1),
        "well_held": bool(well_held(plan.width, plan.patch, plan.com_distance, r.cfg)),
      }
    else:
      out["why"] = self.why_none(result)
    return out

  def why_none(self, result) -> str:
    """Why the planner found nothing, in the planner's own terms: no
    candidate at all, none within its width limit, or the replica's
    rejections of those it checked."""
    from experts.bin_pick.grasps import grasp_candidates

    r = self.replica
    com, mass = r.object_mass(0)
    gravity = float(np.linalg.norm(r.model.opt.gravity))
    cands = grasp_candidates(
      r.object_triangles(0), r.cfg.search, com_w=com, weight=mass * gravity
    )
    if len(cands) == 0:
      return "no_candidate"
    if not np.any(cands.width <= r.cfg.max_width):
      return (
        f"wider_than_max_width ({len(cands)} candidates, narrowest "
        f"{cands.width.min() * 1000:.0f} mm > {r.cfg.max_width * 1000:.0f} mm)"
      )
    top = ", ".join(f"{k} {v}" for k, v in result.rejections.most_common(3))
    return f"rejected ({top})"


##
# Measurement.
##


def measure_object(desc, setup: ExpertSetup, random_drops: int, rng) -> dict:
  """Every resting pose of one object, checked by the expert's planner."""
  poses, restless = resting_poses(desc, random_drops, rng)
  planner = LoneObjectPlanner(desc, setup)
  checked = []
  for i, pose in enumerate(poses):
    position, quat = planner.place(np.array(pose.quat))
    checked.append({"pose": i, **asdict(pose), **planner.check(position, quat)})
  return {
    "name": desc.name,
    "kind": desc.kind,
    "extent_mm": [round(2000 * e, 1) for e in desc.extent],
    "restless_drops": restless,
    "poses": checked,
  }


def summarize(objects: list[dict]) -> dict[str, dict]:
  """Per kind: objects, poses, poses with no accepted grasp (and why)."""
  from assets.objects import KINDS

  table = {}
  for kind in KINDS:
    rows = [o for o in objects if o["kind"] == kind]
    if not rows:
      continue
    poses = [p for o in rows for p in o["poses"]]
    failed = [p for p in poses if not p["accepted"]]
    table[kind] = {
      "objects": len(rows),
      "poses": len(poses),
      "poses_without_grasp": len(failed),
      "objects_with_an_ungraspable_pose": sum(
        any(not p["accepted"] for p in o["poses"]) for o in rows
      ),
      "poses_found_only_by_last_resort": sum(
        p["budget"] == "last_resort" for p in poses
      ),
      "poses_whose_grasp_is_not_well_held": sum(
        p["accepted"] and not p["grasp"]["well_held"] for p in poses
      ),
      "why": dict(Counter(p["why"].split(" (")[0] for p in failed)),
      "mean_plan_s": round(float(np.mean([p["plan_s"] for p in poses])), 3)
      if poses
      else None,
    }
  return table


def markdown(
  table: dict[str, dict], seeds: range, wall_s: float, object_set: str
) -> str:
  head = (
    "| kind | objects | poses | poses without grasp | objects with one | "
    "found only at 1000 checks | accepted grasp not well held | why | "
    "mean plan s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n"
  )
  lines = [
    f"| {k} | {t['objects']} | {t['poses']} | {t['poses_without_grasp']} | "
    f"{t['objects_with_an_ungraspable_pose']} | "
    f"{t['poses_found_only_by_last_resort']} | "
    f"{t['poses_whose_grasp_is_not_well_held']} | "
    f"{', '.join(f'{w} {n}' for w, n in t['why'].items()) or '-'} | "
    f"{t['mean_plan_s']} |"
    for k, t in table.items()
  ]
  return (
    f"Object seeds {seeds.start}-{seeds.stop - 1}, {object_set} set, default bin, "
    f"expert's replica limits; {wall_s:.0f} s.\n\n" + head + "\n".join(lines) + "\n"
  )


def measure_seed(
  seed: int,
  object_set: ObjectSet = "default",
  random_drops: int = 6,
  drop_seed: int = 0,
) -> list[dict]:
  """Every object of one object seed, every resting pose checked."""
  from assets.objects import describe_objects

  setup = expert_setup()
  objects = []
  descs = describe_objects(setup.objects, seed, object_set=object_set)
  for slot, desc in enumerate(descs):
    # Drops drawn per object: a pose set does not depend on the seed range.
    rng = np.random.default_rng([drop_seed, seed, slot])
    objects.append({"seed": seed, **measure_object(desc, setup, random_drops, rng)})
  return objects


def _measure_seed_args(job: tuple) -> list[dict]:
  return measure_seed(*job)


def measure_seeds(args: Args, seeds: range, partial: Path | None = None) -> list[dict]:
  """All seeds, ``args.workers`` at a time, in seed order; each seed's
  objects are appended to ``partial`` (JSON lines) as it completes, so an
  interrupted run keeps what it measured."""
  from multiprocessing import get_context

  jobs = [(s, args.object_set, args.random_drops, args.drop_seed) for s in seeds]
  start, objects = time.perf_counter(), []
  pool = get_context("spawn").Pool(args.workers) if args.workers > 1 else None
  results = (
    map(_measure_seed_args, jobs)
    if pool is None
    else pool.imap(_measure_seed_args, jobs)
  )
  try:
    for seed, measured in zip(seeds, results, strict=True):
      objects += measured
      if partial is not None:
        with partial.open("a") as f:
          f.writelines(json.dumps(o) + "\n" for o in measured)
      done = sum(len(o["poses"]) for o in objects)
      failed = sum(not p["accepted"] for o in objects for p in o["poses"])
      print(
        f"seed {seed}: {done} poses, {failed} without a grasp, "
        f"{time.perf_counter() - start:.0f} s",
        flush=True,
      )
  finally:
    if pool is not None:
      pool.terminate()
  return objects


def main(args: Args) -> int:
  seeds = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  setup = expert_setup()
  start = time.perf_counter()
  partial = None if out_dir is None else out_dir / "objects.partial.jsonl"
  objects = measure_seeds(args, seeds, partial)
  wall = time.perf_counter() - start
  table = summarize(objects)
  text = markdown(table, seeds, wall, args.object_set)
  print(text)
  if out_dir is not None:
    report = {
      "seeds": [seeds.start, seeds.stop - 1],
      "setup": {k: v for k, v in asdict(setup).items() if k != "replica_cfg"},
      "replica_cfg": asdict(setup.replica_cfg),
      "random_drops": args.random_drops,
      "drop_seed": args.drop_seed,
      "object_set": args.object_set,
      "wall_s": round(wall, 1),
      "per_kind": table,
      "objects": objects,
    }
    (out_dir / "graspability.json").write_text(json.dumps(report, indent=1))
    (out_dir / "graspability.md").write_text(text)
    partial.unlink()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
