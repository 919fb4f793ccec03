"""UR5 (CB3) + OnRobot RG2 model, built as a MuJoCo spec from published numbers.

Frames follow Universal Robots' standard DH convention: each link body sits on
the previous DH frame and rotates about its own z axis, so the kinematics are
exactly the published DH chain. Geometry is primitive (capsules and boxes):
cheap collision proxies for the GPU, not the vendor meshes. See docs/robot.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from assets.ur5_rg2_dimensions import (
  RG2_FINGER_MASS,
  RG2_HOUSING_HALF,
  RG2_HOUSING_POS,
  RG2_MASS,
  RG2_MAX_OPENING,
  RG2_PAD_HALF,
  RG2_TCP_OFFSET,
)

##
# Published UR5 (CB3) numbers.
##

# Standard DH parameters (Universal Robots, "DH parameters for calculations of
# kinematics and dynamics", UR5 column).
UR5_DH_D = (0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823)
UR5_DH_A = (0.0, -0.425, -0.39225, 0.0, 0.0, 0.0)
UR5_DH_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)

# Link masses [kg] and centres of mass in DH frame i [m] (same UR source).
UR5_LINK_MASS = (3.7, 8.393, 2.33, 1.219, 1.219, 0.1879)
UR5_LINK_COM = (
  (0.0, -0.02561, 0.00193),
  (0.2125, 0.0, 0.11336),
  (0.15, 0.0, 0.0265),
  (0.0, -0.0018, 0.01634),
  (0.0, 0.0018, 0.01634),
  (0.0, 0.0, -0.001159),
)
UR5_BASE_MASS = 4.0

ARM_JOINT_NAMES = (
  "shoulder_pan",
  "shoulder_lift",
  "elbow",
  "wrist_1",
  "wrist_2",
  "wrist_3",
)
# CB3 user manual: every joint +-360 degrees, 180 degrees/s; torques 150 Nm
# (size 3 joints: base, shoulder, elbow) and 28 Nm (size 1 wrists).
ARM_JOINT_LIMIT = 2.0 * math.pi
ARM_JOINT_SPEED_LIMIT = math.pi
ARM_JOINT_EFFORT_LIMIT = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)
# Position servos (mjlab's entity and the glass examiner's plain-MuJoCo world
# read these). UR does not publish its servo gains. Every joint has the same
# stiffness-to-damping ratio, so a bounded IK step turns into joint
# velocities in the same proportions and the tool keeps its Cartesian
# direction (docs/robot.md). Armature: reflected rotor inertia (not published
# either; order of magnitude of a 100:1 harmonic drive). Gripper: normalized
# position actuator on the opening tendon, seed numbers.
ARM_STIFFNESS = (2000.0, 2000.0, 1500.0, 300.0, 300.0, 300.0)
ARM_DAMPING = tuple(kp / 20.0 for kp in ARM_STIFFNESS)
ARM_ARMATURE = (0.3, 0.3, 0.2, 0.05, 0.05, 0.05)
GRIPPER_KP = 12.0
GRIPPER_KV = 0.4
GRIPPER_EFFORT_LIMIT = 3.0
# UR's base frame has the home pose's tool at -x; a half turn puts it at +x.
BASE_QUAT_FACING_X = (0.0, 0.0, 0.0, 1.0)
# Home: tool pointing straight down in front of the robot, elbow up.
HOME_ARM_Q = (0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0)

# Lateral offsets of the physical links along the joint-2 axis (UR5 URDF):
# used only to place collision geometry, the DH chain already nets them to d4.
_SHOULDER_OFFSET = 0.13585
_ELBOW_OFFSET = _SHOULDER_OFFSET - 0.1197

##
# OnRobot RG2 (simplified) and the wrist camera.
##

# The RG2's plain numbers (mass, opening, tool point, pads, housing) are in
# assets/ur5_rg2_dimensions.py, imported above, for code without MuJoCo.
# Finger slide joints are zero at half opening, so the fixed tendon
# (q_left + q_right) / (max_opening / 2) is the normalized position -1..+1.
RG2_FINGER_TRAVEL = RG2_MAX_OPENING / 4.0
RG2_OPENING_TENDON_COEF = 2.0 / RG2_MAX_OPENING

# D415 RGB optical centre in the RG2 (flange) frame, from the mount-v4
# reference assembly.
D415_RGB_POS = (-0.0024707697691, -0.0524847399704, 0.0304948260870)
D415_HALF = (0.0495, 0.0115, 0.010)  # 99 x 23 x 20 mm housing.
D415_MASS = 0.072
MOUNT_V4_MASS = 0.030
# Nominal D415 RGB field of view (datasheet, 16:9 modes): 69 x 42 degrees.
# 1280x720 intrinsics scaled by 1/4 to the 320x180 policy image.
D415_IMAGE_SIZE = (320, 180)
D415_NOMINAL_HFOV_DEG = 69.0
D415_NOMINAL_VFOV_DEG = 42.0
D415_SENSOR_PIXEL = 1e-5  # Nominal sensor length per policy pixel [m].
# Pose tolerance of the camera on mount v4, for image randomization. Neither
# the bin-picking specification nor the reference assembly gives one, and no hand-eye calibration
# exists, so this is an assumption: a printed mount's fit and screw play, up
# to 2 mm per axis and 1 degree about each axis.
D415_MOUNT_POS_TOLERANCE = 0.002  # [m]
D415_MOUNT_ROT_TOLERANCE_DEG = 1.0  # [deg]

# Geom groups: 2 robot visuals+collision, 3 camera collision proxies,
# 4 camera visuals (camera sensors render groups 0-2 only).
GROUP_ROBOT = 2
GROUP_CAMERA_PROXY = 3
GROUP_CAMERA_VISUAL = 4

# Robot geoms collide with the scene (contype 1) but never with each other.
ROBOT_CONTYPE = 2
ROBOT_CONAFFINITY = 1

PAD_GEOM_NAMES = ("left_pad", "right_pad")
TCP_SITE_NAME = "tcp"
HAND_BODY_NAME = "rg2_base"


@dataclass(frozen=True)
class D415Intrinsics:
  """Pinhole intrinsics of the D415 RGB stream (nominal, not calibrated)."""

  width: int
  height: int
  fx: float
  fy: float
  cx: float
  cy: float

  @property
  def fovy_deg(self) -> float:
    return math.degrees(2.0 * math.atan(0.5 * self.height / self.fy))


def d415_nominal_intrinsics(width: int = 320, height: int = 180) -> D415Intrinsics:
  """Nominal 1280x720 intrinsics from the datasheet field of view, scaled."""
  fx720 = 640.0 / math.tan(math.radians(D415_NOMINAL_HFOV_DEG / 2))
  fy720 = 360.0 / math.tan(math.radians(D415_NOMINAL_VFOV_DEG / 2))
  sx, sy = width / 1280.0, height / 720.0
  return D415Intrinsics(width, height, fx720 * sx, fy720 * sy, width / 2, height / 2)


def dh_transform(theta: float, d: float, a: float, alpha: float) -> np.ndarray:
  """Standard DH transform Rz(theta) Tz(d) Tx(a) Rx(alpha) as a 4x4 matrix."""
  ct, st, ca, sa = math.cos(theta), math.sin(theta), math.cos(alpha), math.sin(alpha)
  return np.array(
    [
      [ct, -st * ca, st * sa, a * ct],
      [st, ct * ca, -ct * sa, a * st],
      [0.0, sa, ca, d],
      [0.0, 0.0, 0.0, 1.0],
    ]
  )


def _quat_x(angle: float) -> list[float]:
  return [math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]


def _cylinder_inertia(mass: float, radius: float, length: float, axis: int):
  """Diagonal inertia of a solid cylinder along the given body axis."""
  along = 0.5 * mass * radius**2
  across = mass * (3 * radius**2 + length**2) / 12.0
  inertia = [across, across, across]
  inertia[axis] = along
  return inertia


def _add_capsule(body, name, p0, p1, radius, rgba):
  body.add_geom(
    name=name,
    type=mujoco.mjtGeom.mjGEOM_CAPSULE,
    fromto=[*p0, *p1],
    size=[radius, 0, 0],
    rgba=rgba,
    group=GROUP_ROBOT,
    contype=ROBOT_CONTYPE,
    conaffinity=ROBOT_CONAFFINITY,
  )


# Per link: collision capsule (from, to, radius) in the link body frame, and the
# axis and size of the cylinder used for its inertia.
_LINK_CAPSULES = (
  # Shoulder housing: kept above the base (and the table it stands on).
  ((0, 0, 0.065), (0, 0, 0.10), 0.06),
  ((0, 0, _SHOULDER_OFFSET), (-0.425, 0, _SHOULDER_OFFSET), 0.054),
  ((0, 0, _ELBOW_OFFSET), (-0.39225, 0, _ELBOW_OFFSET), 0.04),
  ((0, 0, 0.0), (0, 0, 0.10915), 0.0375),
  ((0, 0, -0.035), (0, 0, 0.09465), 0.0375),
  ((0, 0, -0.03), (0, 0, 0.075), 0.0375),
)
_LINK_INERTIA_AXIS = (2, 0, 0, 2, 2, 2)


def _add_arm(parent) -> mujoco.MjsBody:
  """Add the six UR5 links under `parent`; return the last (wrist_3) body."""
  grey, blue = [0.7, 0.7, 0.72, 1], [0.2, 0.35, 0.6, 1]
  body = parent
  pos, quat = [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
  for i, name in enumerate(ARM_JOINT_NAMES):
    body = body.add_body(name=f"{name}_link", pos=pos, quat=quat)
    body.add_joint(
      name=name,
      type=mujoco.mjtJoint.mjJNT_HINGE,
      axis=[0, 0, 1],
      range=[-ARM_JOINT_LIMIT, ARM_JOINT_LIMIT],
    )
    # The published CoM is in DH frame i = this body * Tz(d) Tx(a) Rx(alpha).
    d, a, alpha = UR5_DH_D[i], UR5_DH_A[i], UR5_DH_ALPHA[i]
    to_dh = dh_transform(0.0, d, a, alpha)
    com = to_dh[:3, :3] @ np.array(UR5_LINK_COM[i]) + to_dh[:3, 3]
    p0, p1, radius = _LINK_CAPSULES[i]
    length = float(np.linalg.norm(np.subtract(p1, p0)))
    body.explicitinertial = True
    body.mass = UR5_LINK_MASS[i]
    body.ipos = com.tolist()
    body.inertia = _cylinder_inertia(
      UR5_LINK_MASS[i], radius, length, _LINK_INERTIA_AXIS[i]
    )
    _add_capsule(body, f"{name}_collision", p0, p1, radius, blue if i % 2 else grey)
    pos, quat = [a, 0.0, d], _quat_x(alpha)
  return body


def _box(body, name, pos, half, rgba, group, contype, conaffinity, **kwargs):
  return body.add_geom(
    name=name,
    type=mujoco.mjtGeom.mjGEOM_BOX,
    pos=list(pos),
    size=list(half),
    rgba=rgba,
    group=group,
    contype=contype,
    conaffinity=conaffinity,
    **kwargs,
  )


def _add_gripper(flange) -> mujoco.MjsBody:
  """RG2 on the flange: housing, two parallel slide fingers, TCP site."""
  dark, pad_rgba = [0.25, 0.25, 0.27, 1], [0.1, 0.1, 0.1, 1]
  hand = flange.add_body(name=HAND_BODY_NAME)
  finger_total = 2 * RG2_FINGER_MASS
  hand.explicitinertial = True
  hand.mass = RG2_MASS - finger_total
  hand.ipos = [0, 0, 0.07]
  hand.inertia = _cylinder_inertia(hand.mass, 0.035, 0.14, 2)
  hand.add_site(name="wrist_ft", pos=[0, 0, 0], size=[0.005, 0, 0])
  hand.add_site(name=TCP_SITE_NAME, pos=[0, 0, RG2_TCP_OFFSET], size=[0.004, 0, 0])
  robot = dict(group=GROUP_ROBOT, contype=ROBOT_CONTYPE, conaffinity=ROBOT_CONAFFINITY)
  _box(hand, "rg2_coupling", (0, 0, 0.0075), (0.0375, 0.0375, 0.0075), dark, **robot)
  _box(hand, "rg2_housing", RG2_HOUSING_POS, RG2_HOUSING_HALF, dark, **robot)
  pad_z = RG2_TCP_OFFSET
  px, py, pz = RG2_PAD_HALF
  for side, sign in (("left", 1.0), ("right", -1.0)):
    # Finger frame: x points away from the centre plane; q = 0 at half opening.
    finger = hand.add_body(
      name=f"{side}_finger",
      pos=[sign * RG2_MAX_OPENING / 4, 0, 0],
      quat=[1, 0, 0, 0] if sign > 0 else [0, 0, 0, 1],
    )
    finger.add_joint(
      name=f"{side}_finger_joint",
      type=mujoco.mjtJoint.mjJNT_SLIDE,
      axis=[1, 0, 0],
      range=[-RG2_FINGER_TRAVEL, RG2_FINGER_TRAVEL],
      armature=0.01,
    )
    finger.explicitinertial = True
    finger.mass = RG2_FINGER_MASS
    finger.ipos = [0.008, 0, pad_z - 0.03]
    finger.inertia = [2e-5, 2e-5, 5e-6]
    _box(
      finger,
      f"{side}_finger_link",
      (px * 2 + 0.005, 0, pad_z - 0.04),
      (0.005, 0.011, 0.035),
      dark,
      **robot,
    )
    _box(
      finger,
      f"{side}_pad",
      (px, 0, pad_z),
      RG2_PAD_HALF,
      pad_rgba,
      priority=1,
      condim=4,
      friction=[1.0, 0.005, 0.0001],
      **robot,
    )
  return hand


def _add_d415(spec: mujoco.MjSpec, hand: mujoco.MjsBody) -> None:
  """D415 on mount v4. Visible parts carry the mass; proxies carry none."""
  cx, cy, cz = D415_RGB_POS
  hx, hy, hz = D415_HALF
  visual = dict(group=GROUP_CAMERA_VISUAL, contype=0, conaffinity=0)
  proxy = dict(
    group=GROUP_CAMERA_PROXY, contype=ROBOT_CONTYPE, conaffinity=ROBOT_CONAFFINITY
  )
  camera_center = (cx, cy, cz - hz)  # The lens sits on the front face.
  housing_face_y = -0.022
  camera_back_y = cy + hy
  # Mount v4: a clamp plate on the RG2 housing and two posts holding the camera,
  # with an opening between the posts.
  plate_y = housing_face_y - 0.002
  post_y = 0.5 * (camera_back_y + housing_face_y - 0.004)
  post_half_y = 0.5 * (housing_face_y - 0.004 - camera_back_y)
  parts = (
    ((cx, plate_y, 0.03), (0.03, 0.002, 0.028)),
    ((cx - 0.022, post_y, cz - hz), (0.006, post_half_y, hz)),
    ((cx + 0.022, post_y, cz - hz), (0.006, post_half_y, hz)),
  )
  mount = hand.add_body(name="d415_mount")
  mount.explicitinertial = True
  mount.mass = MOUNT_V4_MASS
  mount.ipos = [cx, post_y, 0.03]
  mount.inertia = [1e-5, 1e-5, 1e-5]
  corners = []
  for k, (center, half) in enumerate(parts):
    _box(mount, f"mount_v4_visual_{k}", center, half, [0.15, 0.15, 0.15, 1], **visual)
    signs = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T
    corners.append(np.asarray(center) + signs * np.asarray(half))
  # Conservative proxy: MuJoCo collides with the convex hull of the mesh, which
  # spans the opening between the posts.
  spec.add_mesh(name="mount_v4_hull", uservert=np.concatenate(corners).ravel())
  mount.add_geom(
    name="mount_v4_collision",
    type=mujoco.mjtGeom.mjGEOM_MESH,
    meshname="mount_v4_hull",
    rgba=[0, 0, 0, 0],
    **proxy,
  )
  camera = hand.add_body(name="d415")
  camera.explicitinertial = True
  camera.mass = D415_MASS
  camera.ipos = list(camera_center)
  camera.inertia = [
    D415_MASS * (hy**2 + hz**2) / 3,
    D415_MASS * (hx**2 + hz**2) / 3,
    D415_MASS * (hx**2 + hy**2) / 3,
  ]
  _box(camera, "d415_visual", camera_center, D415_HALF, [0.6, 0.6, 0.62, 1], **visual)
  _box(camera, "d415_collision", camera_center, D415_HALF, [0, 0, 0, 0], **proxy)
  # MuJoCo cameras look along their -z with +y up: a half turn about x makes
  # the camera look along the tool axis (+z of the RG2 frame).
  intr = d415_nominal_intrinsics(*D415_IMAGE_SIZE)
  # Pinhole intrinsics in pixels (fx and fy differ, which fovy cannot say).
  # MuJoCo wants a sensor size: D415_SENSOR_PIXEL per pixel (only the ratio
  # to the focal length matters); fovy is kept for readers, MuJoCo then
  # ignores it.
  camera.add_camera(
    name="wrist_d415",
    pos=list(D415_RGB_POS),
    quat=[0, 1, 0, 0],
    fovy=intr.fovy_deg,
    resolution=[intr.width, intr.height],
    sensor_size=[intr.width * D415_SENSOR_PIXEL, intr.height * D415_SENSOR_PIXEL],
    focal_pixel=[intr.fx, intr.fy],
    principal_pixel=[intr.cx - intr.width / 2, intr.cy - intr.height / 2],
  )


def build_ur5_rg2_spec(with_camera: bool = False) -> mujoco.MjSpec:
  """UR5 CB3 with an RG2 gripper (and optionally the D415 on mount v4).

  Args:
    with_camera: Attach the wrist D415 on mount v4 (bin picking).

  Returns:
    An uncompiled spec whose root body ``base`` sits at the entity origin.
  """
  spec = mujoco.MjSpec()
  spec.modelname = "ur5_rg2"
  spec.compiler.degree = False  # Joint ranges below are in radians.
  base = spec.worldbody.add_body(name="base")
  base.explicitinertial = True
  base.mass = UR5_BASE_MASS
  base.ipos = [0, 0, 0.03]
  base.inertia = _cylinder_inertia(UR5_BASE_MASS, 0.075, 0.06, 2)
  # Boxes rather than cylinders: MuJoCo Warp has no multi-contact CCD for
  # cylinder-box pairs, and boxes are cheap everywhere.
  _box(
    base,
    "base_collision",
    (0, 0, 0.031),
    (0.075, 0.075, 0.029),  # 2 mm clear of the table it stands on.
    [0.7, 0.7, 0.72, 1],
    group=GROUP_ROBOT,
    contype=ROBOT_CONTYPE,
    conaffinity=ROBOT_CONAFFINITY,
  )
  wrist_3 = _add_arm(base)
  flange = wrist_3.add_body(name="flange", pos=[0, 0, UR5_DH_D[5]])
  flange.add_site(name="flange", size=[0.005, 0, 0])
  hand = _add_gripper(flange)
  if with_camera:
    _add_d415(spec, hand)
  # Normalized opening: -1 closed, +1 open (0..110 mm).
  tendon = spec.add_tendon(name="rg2_opening")
  for side in ("left", "right"):
    tendon.wrap_joint(f"{side}_finger_joint", RG2_OPENING_TENDON_COEF)
  spec.add_equality(
    name="rg2_finger_coupling",
    type=mujoco.mjtEq.mjEQ_JOINT,
    name1="right_finger_joint",
    name2="left_finger_joint",
    data=[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  )
  return spec
