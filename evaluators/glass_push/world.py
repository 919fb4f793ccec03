"""The examiner's world: scene, physics, the push routine, recording, truth.

One ``GlassWorld`` owns one table's C MuJoCo model and data (2 ms step). It
lives in the examiner's worker process (``examiner.py``); solutions reach it
only through the client's requests. See docs/glass_push.md for the contract.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass

import mujoco
import numpy as np

from assets.ur5_rg2 import ARM_JOINT_NAMES, TCP_SITE_NAME, build_ur5_rg2_spec
from assets.ur5_rg2.kinematics import ArmKinematics
from assets.ur5_rg2.model import (
  ARM_ARMATURE,
  ARM_DAMPING,
  ARM_JOINT_EFFORT_LIMIT,
  ARM_STIFFNESS,
  GRIPPER_EFFORT_LIMIT,
  GRIPPER_KP,
  GRIPPER_KV,
  HAND_BODY_NAME,
)
from assets.ur5_rg2.model import BASE_QUAT_FACING_X as BASE_QUAT
from assets.ur5_rg2.model import HOME_ARM_Q as HOME_Q
from evaluators.glass_push.errors import BudgetSpent, NoOffscreenGL
from evaluators.glass_push.felt import felt_distances
from evaluators.glass_push.glasses import PALETTE, glass_parts, ring
from evaluators.glass_push.hand import (
  LOWEST_TCP_Z,
  PAD_HALF_Z,
  PAD_LEAD,  # noqa: F401 - re-exported for callers of the world module
)
from evaluators.glass_push.hidden import glass_states, had_room, readings
from evaluators.glass_push.requests import (
  MAX_WAYPOINT_STEP,
  MAX_WAYPOINT_TURN,
  WAYPOINT_DT,
  _wrap,
  glass_index,
  parse_follow,
  parse_push,
)
from evaluators.glass_push.tables import (
  RACK_CENTER,
  RACK_SHELF_HALF,
  RACK_SHELF_TOP,
  TABLE_HEIGHT,
  TABLE_X,
  TABLE_Y,
  ZONE_CENTER,
  Glass,
  _draw_table,
)

TIMESTEP = 0.002
IK_DAMPING = 0.01  # the hand's reference IK (lambda of the 6x6 solve)
HAND_FORCE_SENSOR = "hand_force"

# The push routine (seed 003).
DESCEND_SPEED = 0.200  # m/s
FEEL_SPEED = 0.010
PUSH_SPEED = 0.020
BACK_OFF = 0.020  # m
BACK_OFF_SPEED = 0.050
LIFT_SPEED = 0.200
TRANSIT_SPEED = 0.200
TURN_SPEED = math.pi / 2  # rad/s, heading change in transit
TOUCH_FORCE = 0.1  # N, descent and feel
JAM_FORCE = 20.0  # N, push
LIFT_CLEARANCE = 0.03  # pad bottoms above the tallest glass [m]
RECORD_EVERY = int(round(WAYPOINT_DT / TIMESTEP))  # physics steps per sample
# A glass has stopped once it moves slower than these for 0.1 s.
STILL_LIN, STILL_ANG = 0.002, 0.05
SETTLE_MAX_S = 3.0


@dataclass(frozen=True)
class Friction:
  """Sliding friction coefficients (hidden from solutions).

  Attributes:
    glass_table: glass on the table top.
    glass_glass: glass on glass.
    pad_glass: the hand (pads and every other hand part) on glass.
  """

  glass_table: float = 0.35
  glass_glass: float = 0.5
  pad_glass: float = 0.9


@dataclass(frozen=True)
class PhysicsConfig:
  """Private physics settings for tests and training tools.

  Solutions never pass this: an ``Examiner`` built without it uses the hidden
  defaults. Attributes:
    friction: the three coefficients.
    glasses: replace the drawn glasses (a training/test fixture), or None.
    obstacle: centre (x, y) of a fixed 60 mm box post on the table, or None.
  """

  friction: Friction = Friction()
  glasses: tuple[Glass, ...] | None = None
  obstacle: tuple[float, float] | None = None


def hand_rotation(heading: float) -> np.ndarray:
  """Level closed hand (tool axis straight down) pointing along the heading.

  Returns the tool frame's rotation [3, 3]: y (the pads' width, so their
  edges lead) along the heading, z down, x (closing axis) across.
  """
  c, s = math.cos(heading), math.sin(heading)
  return np.column_stack(([-s, c, 0.0], [c, s, 0.0], [0.0, 0.0, -1.0]))


def _look_at_quat(pos, target, up=(0.0, 0.0, 1.0)) -> list[float]:
  f = np.subtract(target, pos)
  f = f / np.linalg.norm(f)
  x = np.cross(f, up)
  if np.linalg.norm(x) < 1e-9:
    x = np.array([1.0, 0.0, 0.0])
  x = x / np.linalg.norm(x)
  y = np.cross(x, f)
  quat = np.zeros(4)
  mujoco.mju_mat2Quat(quat, np.column_stack([x, y, -f]).ravel())
  return quat.tolist()


def _add_glass(spec: mujoco.MjSpec, g: Glass, rgba) -> None:
  body = spec.worldbody.add_body(name=f"glass_{g.id}", pos=[g.x, g.y, 0.0])
  body.add_freejoint(name=f"glass_{g.id}")
  common = dict(rgba=rgba, group=1, condim=4, friction=[0, 0.002, 0.0001])
  if g.kind == "tumbler":
    verts = np.concatenate([ring(g.foot / 2, 0.0), ring(g.widest / 2, g.height)])
    spec.add_mesh(name=f"glass_{g.id}_hull", uservert=verts.ravel())
    body.add_geom(
      name=f"glass_{g.id}_body",
      type=mujoco.mjtGeom.mjGEOM_MESH,
      meshname=f"glass_{g.id}_hull",
      mass=g.mass,
      **common,
    )
    return
  ft, st = g.foot_thickness, g.stem_top
  # The foot disk and bowl of the glasses' shared parts (the stem here is a
  # cylinder, not the parts' 20-sided hull).
  (foot, _), _, (bowl, _) = glass_parts(g)
  spec.add_mesh(name=f"glass_{g.id}_bowl", uservert=bowl.ravel())
  spec.add_mesh(name=f"glass_{g.id}_foot", uservert=foot.ravel())
  foot_mass = 0.35 * g.mass
  stem_mass = 0.10 * g.mass
  body.add_geom(
    name=f"glass_{g.id}_foot",
    type=mujoco.mjtGeom.mjGEOM_MESH,
    meshname=f"glass_{g.id}_foot",
    mass=foot_mass,
    **common,
  )
  body.add_geom(
    name=f"glass_{g.id}_stem",
    type=mujoco.mjtGeom.mjGEOM_CYLINDER,
    size=[g.stem_radius, (st - ft) / 2 + 0.002, 0],
    pos=[0, 0, (st + ft) / 2],
    mass=stem_mass,
    **common,
  )
  body.add_geom(
    name=f"glass_{g.id}_bowl",
    type=mujoco.mjtGeom.mjGEOM_MESH,
    meshname=f"glass_{g.id}_bowl",
    mass=g.mass - foot_mass - stem_mass,
    **common,
  )


def set_hand_friction(spec: mujoco.MjSpec, friction: Friction) -> None:
  """Every hand geom meets glass with the pad friction (priority 1)."""
  hand = spec.body(HAND_BODY_NAME)
  for body in [hand, *hand.bodies]:
    for geom in body.geoms:
      geom.priority = 1
      geom.friction = [friction.pad_glass, 0.005, 0.0001]


def add_table(world: mujoco.MjsBody, physics: PhysicsConfig) -> None:
  """Floor, table top, rack and the optional obstacle: glass-on-table
  friction (priority 2)."""
  fr = physics.friction
  fixed = dict(priority=2, condim=4, friction=[fr.glass_table, 0.002, 0.0001])
  tx, ty = TABLE_X, TABLE_Y
  world.add_geom(
    name="floor",
    type=mujoco.mjtGeom.mjGEOM_PLANE,
    size=[3, 3, 0.1],
    pos=[0, 0, -TABLE_HEIGHT],
    rgba=[0.45, 0.45, 0.5, 1],
    **fixed,
  )
  world.add_geom(
    name="table_top",
    type=mujoco.mjtGeom.mjGEOM_BOX,
    size=[(tx[1] - tx[0]) / 2, (ty[1] - ty[0]) / 2, 0.02],
    pos=[(tx[0] + tx[1]) / 2, (ty[0] + ty[1]) / 2, -0.02],
    rgba=[0.62, 0.5, 0.36, 1],
    **fixed,
  )
  rx, ry = RACK_CENTER
  hx, hy, hz = RACK_SHELF_HALF
  rack = dict(rgba=[0.35, 0.3, 0.25, 1], **fixed)
  world.add_geom(
    name="rack_shelf",
    type=mujoco.mjtGeom.mjGEOM_BOX,
    size=[hx, hy, hz],
    pos=[rx, ry, RACK_SHELF_TOP - hz],
    **rack,
  )
  for k, sx in enumerate((-1, 1)):
    world.add_geom(
      name=f"rack_leg_{k}",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[0.01, hy, (RACK_SHELF_TOP - 2 * hz) / 2],
      pos=[rx + sx * (hx - 0.01), ry, (RACK_SHELF_TOP - 2 * hz) / 2],
      **rack,
    )
  if physics.obstacle is not None:
    world.add_geom(
      name="obstacle",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[0.03, 0.03, 0.1],
      pos=[*physics.obstacle, 0.1],
      rgba=[0.6, 0.2, 0.2, 1],
      **fixed,
    )


def add_cameras_and_lights(world: mujoco.MjsBody) -> None:
  """``top_view`` above the zone and ``film`` from the robot's right."""
  zx, zy = ZONE_CENTER
  world.add_camera(
    name="top_view",
    pos=[zx, zy, 0.75],
    quat=[1, 0, 0, 0],
    fovy=34.0,
    resolution=[384, 384],
  )
  # The film: from the robot's right, framing the arm, the glass zone (with
  # room for groups at its near edge) and the rack behind (checked by eye on
  # the tables with the nearest and farthest groups of 10000-10099).
  film_pos = (0.30, -1.12, 1.05)
  world.add_camera(
    name="film",
    pos=list(film_pos),
    quat=_look_at_quat(film_pos, (0.30, -0.08, 0.17)),
    fovy=42.0,
  )
  world.add_light(pos=[zx, zy, 2.0], dir=[0, 0, -1], diffuse=[0.7, 0.7, 0.7])
  world.add_light(pos=[-0.5, 0.0, 1.5], dir=[0.5, -0.3, -1], diffuse=[0.3, 0.3, 0.3])


def build_world_spec(glasses, physics: PhysicsConfig) -> mujoco.MjSpec:
  """The scene: table, robot at its edge, glasses, rack, cameras."""
  fr = physics.friction
  spec = build_ur5_rg2_spec()
  spec.modelname = "glass_push"
  spec.option.timestep = TIMESTEP
  spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
  spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
  spec.option.impratio = 10
  spec.option.iterations = 30
  spec.visual.global_.offwidth = 640
  spec.visual.global_.offheight = 480
  base = spec.body("base")
  base.quat = list(BASE_QUAT)
  set_hand_friction(spec, fr)
  world = spec.worldbody
  add_table(world, physics)
  for g in glasses:
    _add_glass(spec, g, list(PALETTE[g.kind]))
  # Glass-on-glass friction comes from the glasses' own geoms (priority 0).
  for g in glasses:
    for geom in spec.body(f"glass_{g.id}").geoms:
      geom.friction = [fr.glass_glass, 0.002, 0.0001]
  add_cameras_and_lights(world)
  for name, kp, kv, effort, arm in zip(
    ARM_JOINT_NAMES,
    ARM_STIFFNESS,
    ARM_DAMPING,
    ARM_JOINT_EFFORT_LIMIT,
    ARM_ARMATURE,
    strict=True,
  ):
    spec.joint(name).armature = arm
    act = spec.add_actuator(name=name, target=name)
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.set_to_position(kp=kp, kv=kv)
    act.forcelimited = True
    act.forcerange = [-effort, effort]
  grip = spec.add_actuator(name="rg2_opening", target="rg2_opening")
  grip.trntype = mujoco.mjtTrn.mjTRN_TENDON
  grip.set_to_position(kp=GRIPPER_KP, kv=GRIPPER_KV)
  grip.forcelimited = True
  grip.forcerange = [-GRIPPER_EFFORT_LIMIT, GRIPPER_EFFORT_LIMIT]
  # The wrist reading: MuJoCo's contact sensor on the hand's subtree, reduced
  # to the net force in the world frame (data bit 1: force; reduce 3:
  # netforce). C MuJoCo and MuJoCo Warp compute it the same way.
  spec.add_sensor(
    name=HAND_FORCE_SENSOR,
    type=mujoco.mjtSensor.mjSENS_CONTACT,
    objtype=mujoco.mjtObj.mjOBJ_XBODY,
    objname=HAND_BODY_NAME,
    intprm=[1 << 1, 3, 1],
  )
  return spec


FILM_FPS = 10
FILM_EVERY = int(round(1 / (FILM_FPS * TIMESTEP)))  # physics steps per frame
FILM_SIZE = (480, 360)
RACK_SLOTS = tuple(
  (RACK_CENTER[0] + dx, RACK_CENTER[1] + dy)
  for dy in (-0.045, 0.045)
  for dx in (-0.2, -0.1, 0.0, 0.1, 0.2)
)


def table_glasses(table: int, physics: PhysicsConfig) -> tuple[Glass, ...]:
  """The glasses of a table: drawn from its number, or the physics fixture's."""
  glasses = _draw_table(table)
  if physics.glasses is not None:
    glasses = list(physics.glasses)
    if not 1 <= len(glasses) <= len(RACK_SLOTS):
      raise ValueError(f"a table holds 1 to {len(RACK_SLOTS)} glasses")
    if len({g.id for g in glasses}) != len(glasses):
      raise ValueError("glass ids must be unique")
  return tuple(glasses)


def write_video(path: str, frames: list[np.ndarray]) -> None:
  """Film frames to an mp4 at FILM_FPS (nothing for no frames)."""
  import shutil

  import mediapy

  if not frames:
    return
  if shutil.which("ffmpeg") is None:
    import imageio_ffmpeg

    mediapy.set_ffmpeg(imageio_ffmpeg.get_ffmpeg_exe())
  mediapy.write_video(path, frames, fps=FILM_FPS)


# Debian packages of the headless OpenGL libraries behind MuJoCo's backends.
GL_PACKAGES = {"osmesa": "libosmesa6", "egl": "libegl1"}
_GL_LIBRARIES = {"osmesa": "OSMesa", "egl": "EGL"}
_GL_MODULES = {"osmesa": "mujoco.osmesa", "egl": "mujoco.egl"}
GL_OFF = ("disable", "disabled", "off", "false", "0")  # MuJoCo's "no GL" values
# The backend pictures use (chosen by the examiner for its worker, which runs
# with MUJOCO_GL=disable so that importing mujoco loads no OpenGL); None:
# decide from this process's environment at the first picture.
_picture_gl: str | None = None
_gl_failure: NoOffscreenGL | None = None  # a failed load is not retried


def use_picture_gl(backend: str | None) -> None:
  """Draw pictures with MuJoCo's OpenGL ``backend`` (a MUJOCO_GL value)."""
  global _picture_gl
  _picture_gl = backend


def picture_gl() -> str:
  """The backend for pictures: the chosen one, else ``MUJOCO_GL``, else
  GLFW with a display and OSMesa without."""
  if _picture_gl is not None:
    return _picture_gl
  chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
  if chosen:
    return chosen
  return "glfw" if os.environ.get("DISPLAY") else "osmesa"


def _library_loads(name: str) -> bool:
  """Whether lib<name> loads, tried as PyOpenGL tries it. Checked before
  PyOpenGL is imported: PyOpenGL on Linux turns a missing library into
  ``None`` and fails later with "'NoneType' object has no attribute
  'glGetError'"; after that a second try can crash instead of raising."""
  import ctypes

  for suffix in ["", *(f".{i}" for i in range(9, -1, -1))]:
    try:
      ctypes.CDLL(f"lib{name}.so{suffix}")
    except OSError:
      continue
    return True
  return False


def _no_gl(backend: str, detail: str) -> NoOffscreenGL:
  """The error for pictures without OpenGL, naming what to install."""
  if backend in GL_PACKAGES:
    other = "egl" if backend == "osmesa" else "osmesa"
    need = (
      f"Install the Debian package {GL_PACKAGES[backend]} (apt-get install "
      f"{GL_PACKAGES[backend]}), or use MUJOCO_GL={other} "
      f"({GL_PACKAGES[other]}{', with a GPU' if other == 'egl' else ''})"
    )
  else:
    need = (
      "Use a display, or MUJOCO_GL=osmesa (Debian package libosmesa6) or "
      "MUJOCO_GL=egl (libegl1, with a GPU)"
    )
  return NoOffscreenGL(
    f"pictures need offscreen OpenGL (MUJOCO_GL={backend}): {detail}. {need}. "
    "Every call but the pictures works without OpenGL."
  )


def open_gl_context(width: int, height: int):
  """A current offscreen OpenGL context of the picture backend. Raises
  ``NoOffscreenGL`` (only) when none can be made; imports OpenGL only here,
  at the first picture."""
  global _gl_failure
  if _gl_failure is not None:
    raise _gl_failure
  backend = picture_gl()
  if backend in GL_OFF:
    raise _no_gl(backend, "OpenGL is disabled")
  library = _GL_LIBRARIES.get(backend)
  if library and not _library_loads(library):
    raise _no_gl(backend, f"lib{library} is missing")
  try:
    module = importlib.import_module(_GL_MODULES.get(backend, "mujoco.glfw"))
    context = module.GLContext(width, height)
    if getattr(context, "_context", True) is None:  # GLFW made no window
      raise RuntimeError("no OpenGL context (no display?)")
    context.make_current()
  except Exception as err:  # noqa: BLE001 - any backend's failure to load
    _gl_failure = _no_gl(backend, f"{type(err).__name__}: {err}")
    raise _gl_failure from err
  return context


class PoseRenderer:
  """Pictures of a model's poses, drawn in a replica ``MjData`` that is
  never stepped (the scored world is the same filmed or not). OpenGL is
  loaded at the first picture, not before."""

  def __init__(self, model: mujoco.MjModel):
    self.model = model
    self._replica: mujoco.MjData | None = None
    self._gl = None  # (GL context, MjrContext) once the first picture is drawn
    self._scenes: dict[str, mujoco.MjvScene] = {}  # one per camera

  def _context(self):
    if self._gl is None:
      g = self.model.vis.global_
      context = open_gl_context(g.offwidth, g.offheight)
      mjr = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_150)
      mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, mjr)
      self._gl = (context, mjr)
    context, mjr = self._gl
    context.make_current()  # several renderers can share one process
    return mjr

  def _scene(self, qpos, camera: str, hide_robot: bool) -> mujoco.MjvScene:
    """The scene of pose ``qpos`` seen from ``camera`` (its own scene, so the
    floor is never placed by another camera's picture)."""
    if self._replica is None:
      self._replica = mujoco.MjData(self.model)
    rep = self._replica
    rep.qpos[:] = qpos
    mujoco.mj_forward(self.model, rep)
    opt = mujoco.MjvOption()
    if hide_robot:
      opt.geomgroup[2] = 0
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    cam.fixedcamid = self.model.camera(camera).id
    if camera not in self._scenes:
      self._scenes[camera] = mujoco.MjvScene(self.model, maxgeom=10000)
    scene = self._scenes[camera]
    mujoco.mjv_updateScene(
      self.model, rep, opt, None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
    )
    return scene

  def render(self, qpos: np.ndarray, camera: str, size, hide_robot: bool) -> np.ndarray:
    """RGB uint8 [H, W, 3] of pose ``qpos`` from ``camera`` at ``size`` (W, H);
    ``hide_robot`` hides geom group 2 (the arm)."""
    width, height = size
    g = self.model.vis.global_
    if width > g.offwidth or height > g.offheight:
      raise ValueError(
        f"{size} exceeds the offscreen buffer {g.offwidth}x{g.offheight}"
      )
    mjr = self._context()
    scene = self._scene(qpos, camera, hide_robot)
    rect = mujoco.MjrRect(0, 0, width, height)
    mujoco.mjr_render(rect, scene, mjr)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    mujoco.mjr_readPixels(rgb, None, rect, mjr)
    return np.flipud(rgb).copy()

  def close(self) -> None:
    if self._gl is not None:
      context, mjr = self._gl
      context.make_current()
      mjr.free()
      context.free()
    self._gl = None
    self._scenes.clear()


class GlassWorld:
  """One table: its physics, the push routine, the record (examiner side)."""

  def __init__(
    self,
    table: int,
    pushes: int,
    physics: PhysicsConfig | None = None,
    film: bool = False,
  ):
    if isinstance(pushes, bool) or not isinstance(pushes, (int, np.integer)):
      raise ValueError(f"pushes must be an int, got {pushes!r}")
    if pushes < 1:
      raise ValueError(f"pushes must be at least 1, got {pushes}")
    self.physics = physics if physics is not None else PhysicsConfig()
    self.table = int(table)
    self.glasses = table_glasses(table, self.physics)
    self.budget = int(pushes)
    self.pushes_left = int(pushes)
    self.film = bool(film)
    m = self.model = build_world_spec(self.glasses, self.physics).compile()
    self.data = mujoco.MjData(m)
    self._qadr = np.array([m.joint(n).qposadr[0] for n in ARM_JOINT_NAMES])
    self._dof = np.array([m.joint(n).dofadr[0] for n in ARM_JOINT_NAMES])
    self._act = np.array([m.actuator(n).id for n in ARM_JOINT_NAMES])
    self._grip = m.actuator("rg2_opening").id
    self._tcp = m.site(TCP_SITE_NAME).id
    sensor = m.sensor(HAND_FORCE_SENSOR)
    self._force_adr = sensor.adr[0] + np.arange(3)
    self._gbody = np.array([m.body(f"glass_{g.id}").id for g in self.glasses])
    self._gq = np.array([m.joint(f"glass_{g.id}").qposadr[0] for g in self.glasses])
    self._gv = np.array([m.joint(f"glass_{g.id}").dofadr[0] for g in self.glasses])
    self._gv6 = (self._gv[:, None] + np.arange(6)).ravel()
    # Kinematic replica of the robot alone, for the hand's IK.
    self._kin = ArmKinematics(base_quat=BASE_QUAT)
    tallest = max(g.height for g in self.glasses)
    self.z_safe = tallest + LIFT_CLEARANCE + PAD_HALF_Z
    # State of the run.
    self.taken: dict[int, dict] = {}
    self.refused: dict[int, str] = {}
    self.actions: list[dict] = []
    self.looks = 0
    self._steps = 0
    self._rec: list[tuple] = []
    self._peak = 0.0
    self._film_qpos: list[np.ndarray] = []
    self._pictures = PoseRenderer(m)
    # Start: hand above the zone centre at the safe height, pointing +x.
    self._qref = np.array(HOME_Q)
    self._heading = 0.0
    self._cmd = np.array([ZONE_CENTER[0], ZONE_CENTER[1] + 0.25, self.z_safe])
    for _ in range(300):
      self._ik_step(self._cmd, hand_rotation(self._heading))
    d = self.data
    d.qpos[self._qadr] = self._qref
    for side in ("left", "right"):
      d.qpos[m.joint(f"{side}_finger_joint").qposadr[0]] = -0.0275
    d.ctrl[self._grip] = -1.0
    mujoco.mj_forward(m, d)
    for _ in range(250):
      self._step()
    self._rec.clear()
    self.initial_qpos = d.qpos.copy()

  # -- low level ---------------------------------------------------------------

  def _ik_step(self, target_p: np.ndarray, target_r: np.ndarray) -> None:
    """One damped least-squares step of the arm reference toward a tool pose."""
    dq, _ = self._kin.dls_step(self._qref, target_p, target_r, IK_DAMPING)
    self._qref = self._qref + dq

  def hand_force(self) -> float:
    """Norm of the vector sum of contact forces acting on the hand [N]."""
    return float(np.linalg.norm(self.data.sensordata[self._force_adr]))

  def _step(self) -> float:
    d = self.data
    d.ctrl[self._act] = self._qref
    d.qfrc_applied[self._dof] = d.qfrc_bias[self._dof]
    mujoco.mj_step(self.model, d)
    self._steps += 1
    force = self.hand_force()
    if force > self._peak:
      self._peak = force
    if self._steps % RECORD_EVERY == 0:
      p = d.site_xpos[self._tcp]
      r = d.site_xmat[self._tcp]
      self._rec.append((d.time, p[0], p[1], p[2], math.atan2(r[4], r[1]), force))
    if self.film and self._steps % FILM_EVERY == 0:
      self._film_qpos.append(d.qpos.copy())
    return force

  def hand_position(self) -> np.ndarray:
    return self.data.site_xpos[self._tcp].copy()

  def _move(self, target, heading: float, speed: float, stop: float | None = None):
    """Straight line of the commanded tool point; True if stopped by force."""
    p0, h0 = self._cmd.copy(), self._heading
    p1 = np.asarray(target, dtype=float)
    dh = _wrap(heading - h0)
    # The tool points down, so wrist_3 turns by -dh: turn the long way round
    # rather than wind wrist_3 into its +-360 degree limit.
    if self._qref[5] - dh > 1.5 * math.pi:
      dh += 2 * math.pi
    elif self._qref[5] - dh < -1.5 * math.pi:
      dh -= 2 * math.pi
    duration = max(float(np.linalg.norm(p1 - p0)) / speed, abs(dh) / TURN_SPEED)
    n = max(1, math.ceil(duration / TIMESTEP))
    for k in range(1, n + 1):
      a = k / n
      self._cmd = p0 + a * (p1 - p0)
      self._heading = h0 + a * dh
      self._ik_step(self._cmd, hand_rotation(self._heading))
      if self._step() > (stop if stop is not None else math.inf):
        return True
    return False

  def _lift(self) -> None:
    if self._cmd[2] < self.z_safe - 1e-9:
      self._move([self._cmd[0], self._cmd[1], self.z_safe], self._heading, LIFT_SPEED)

  def _settle(self) -> None:
    """Hold the hand until every glass has stopped (at most SETTLE_MAX_S)."""
    still = 0
    for _ in range(int(SETTLE_MAX_S / TIMESTEP)):
      self._ik_step(self._cmd, hand_rotation(self._heading))
      self._step()
      v = self.data.qvel[self._gv6].reshape(-1, 6)
      moving = np.any(
        (np.linalg.norm(v[:, :3], axis=1) > STILL_LIN)
        | (np.linalg.norm(v[:, 3:], axis=1) > STILL_ANG)
      )
      still = 0 if moving else still + 1
      if still >= 50:
        return

  # -- truth -------------------------------------------------------------------

  def glass_states(self) -> list[dict]:
    """True state of every glass: position, uprightness, where it is."""
    return glass_states(
      self.glasses, self.data.xpos[self._gbody], self.data.xmat[self._gbody], self.taken
    )

  def _glass_index(self, glass) -> int:
    return glass_index(self.glasses, self.taken, glass)

  # -- the calls -----------------------------------------------------------------

  def look(self) -> list[dict]:
    """Noisy readings of the glasses on the table (noise from table, look)."""
    self.looks += 1
    return readings(
      self.table,
      self.looks,
      self.glasses,
      self.glass_states(),
      self.data.xpos[self._gbody],
      self.data.xmat[self._gbody],
    )

  def _begin(self) -> None:
    if self.pushes_left <= 0:
      raise BudgetSpent(
        f"the push budget of {self.budget} is spent: the run has ended "
        "(look, take and refuse still answer)"
      )
    self.pushes_left -= 1
    self._rec = []
    self._peak = 0.0

  def _end(self, kind: str, request, report: dict, glass, aim) -> dict:
    self._settle()
    entry = dict(kind=kind, request=request, report=report, glass=glass, aim=aim)
    if glass is not None and aim is not None:
      k = [g.id for g in self.glasses].index(glass)
      pos = self.data.xpos[self._gbody[k]]
      entry["aim_error"] = float(math.hypot(pos[0] - aim[0], pos[1] - aim[1]))
    entry["path"] = np.array(self._rec, dtype=float).reshape(-1, 6)
    self.actions.append(entry)
    return report

  def push(self, request: dict) -> dict:
    """The seed's six-step push; see docs/glass_push.md.

    Args:
      request: {"glass", "start" [x, y], "heading" rad, "reach" m, "travel" m,
        "aim" [x, y]}.

    Returns:
      {"blocked", "touched" (m or None), "jammed", "peak" (N), "pushed" (m)}.

    Raises:
      ValueError: a malformed request (costs no push).
      BudgetSpent: the budget is used up.
    """
    glass, start, heading, reach, travel, aim, clean = parse_push(
      request, self.glasses, self.taken
    )
    u = np.array([math.cos(heading), math.sin(heading), 0.0])
    self._begin()
    self._lift()
    self._move([start[0], start[1], self.z_safe], heading, TRANSIT_SPEED)
    blocked = self._move(
      [start[0], start[1], LOWEST_TCP_Z], heading, DESCEND_SPEED, stop=TOUCH_FORCE
    )
    touched, jammed, pushed = None, False, 0.0
    if not blocked:
      p_feel = self.hand_position()
      if self._move(self._cmd + reach * u, heading, FEEL_SPEED, stop=TOUCH_FORCE):
        p_touch = self.hand_position()
        jammed = self._move(self._cmd + travel * u, heading, PUSH_SPEED, stop=JAM_FORCE)
        # The rule follow() uses too: from the start of the feel to the
        # touch, and from the touch to the end of step 4.
        touched, pushed = felt_distances(
          [p_feel, p_touch, self.hand_position()], 1, heading
        )
        self._move(self._cmd - BACK_OFF * u, heading, BACK_OFF_SPEED)
    self._lift()
    report = self._felt(blocked, touched, jammed, pushed)
    return self._end("push", clean, report, glass, aim.tolist())

  def follow(self, chunk, glass=None, aim=None) -> dict:
    """Tool-point waypoints [K, 4] (x, y, z, heading) at 50 Hz, reported like
    a push; ``glass`` and ``aim`` (optional) record an aim error."""
    way, glass, aim = parse_follow(chunk, glass, aim, self.glasses, self.taken)
    self._begin()
    blocked = False
    first = way[0]
    if (
      np.linalg.norm(first[:3] - self._cmd) > MAX_WAYPOINT_STEP
      or abs(_wrap(first[3] - self._heading)) > MAX_WAYPOINT_TURN
    ):
      # Approach like a push: up, across, down (a touch on the way is blocked).
      self._lift()
      self._move([first[0], first[1], self.z_safe], first[3], TRANSIT_SPEED)
      blocked = self._move(first[:3], first[3], DESCEND_SPEED, stop=TOUCH_FORCE)
    touched, jammed, pushed = None, False, 0.0
    if blocked:
      self._lift()
    else:
      n = RECORD_EVERY
      # Tool points at the follow's start and every waypoint's end (or where
      # a force cut it short): felt_distances measures the report on them.
      seen = [self.hand_position()]
      touch, touch_heading = None, 0.0
      for row in way:
        p0, h0 = self._cmd.copy(), self._heading
        dh = _wrap(row[3] - h0)
        stop = JAM_FORCE if touch is not None else TOUCH_FORCE
        hit = False
        for k in range(1, n + 1):
          self._cmd = p0 + (k / n) * (row[:3] - p0)
          self._heading = h0 + (k / n) * dh
          self._ik_step(self._cmd, hand_rotation(self._heading))
          if self._step() > stop:
            hit = True
            break
        seen.append(self.hand_position())
        if hit and touch is None:
          touch, touch_heading = len(seen) - 1, self._heading
        elif hit:
          jammed = True
          break
      touched, pushed = felt_distances(seen, touch, touch_heading)
      if jammed:
        # Back 20 mm against the last waypoint step's horizontal direction.
        move = row[:3] - p0
        move[2] = 0.0
        length = float(np.linalg.norm(move))
        if length < 1e-9:
          move = np.array([math.cos(self._heading), math.sin(self._heading), 0.0])
          length = 1.0
        self._move(self._cmd - BACK_OFF * move / length, self._heading, BACK_OFF_SPEED)
    report = self._felt(blocked, touched, jammed, pushed)
    return self._end("follow", way.tolist(), report, glass, aim)

  def _felt(self, blocked, touched, jammed, pushed) -> dict:
    """The report of one push or follow (the seed's five fields)."""
    return {
      "blocked": bool(blocked),
      "touched": touched,
      "jammed": bool(jammed),
      "peak": float(self._peak),
      "pushed": pushed,
    }

  def take(self, glass) -> None:
    """Move a glass to the rack; record whether it truly had room."""
    k = self._glass_index(glass)
    states = self.glass_states()
    me = states[k]
    room = had_room(k, states, self.glasses)
    slot = RACK_SLOTS[len(self.taken)]
    self.taken[int(glass)] = dict(room=bool(room), state=me, step=self._steps)
    d = self.data
    q = self._gq[k]
    d.qpos[q : q + 7] = [slot[0], slot[1], RACK_SHELF_TOP + 0.0005, 1, 0, 0, 0]
    d.qvel[self._gv[k] : self._gv[k] + 6] = 0.0
    mujoco.mj_forward(self.model, d)
    self._peak = 0.0
    for _ in range(100):
      self._ik_step(self._cmd, hand_rotation(self._heading))
      self._step()

  def refuse(self, glass, reason) -> None:
    """Record a refusal with its reason (the glass stays)."""
    self._glass_index(glass)
    if not isinstance(reason, str) or not reason.strip():
      raise ValueError("refuse() needs a non-empty reason string")
    self.refused[int(glass)] = reason

  # -- pictures -------------------------------------------------------------------

  def top_view(self) -> np.ndarray:
    """384x384x3 uint8 picture from 750 mm above the zone (arm not drawn)."""
    return self._pictures.render(self.data.qpos.copy(), "top_view", (384, 384), True)

  def write_film(self, path: str) -> int:
    """Render the recorded film poses to an mp4; returns the frame count."""
    frames = [
      self._pictures.render(q, "film", FILM_SIZE, False) for q in self._film_qpos
    ]
    write_video(path, frames)
    return len(frames)

  # -- record ---------------------------------------------------------------------

  def record(self) -> dict:
    """Everything the scoring needs (truth included): examiner side only."""
    return dict(
      table=self.table,
      budget=self.budget,
      pushes_used=self.budget - self.pushes_left,
      glasses=[g.as_dict() for g in self.glasses],
      final=self.glass_states(),
      taken={int(k): v for k, v in self.taken.items()},
      refused=dict(self.refused),
      actions=self.actions,
      looks=self.looks,
      sim_time=float(self.data.time),
      friction=vars(self.physics.friction) | {},
      engine="mujoco",
    )

  def close(self) -> None:
    self._pictures.close()
