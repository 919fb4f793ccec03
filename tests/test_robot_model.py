"""The UR5 + RG2 model against independent references (no simulation step)."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from mjlab.entity import Entity
from mjlab.sensor import CameraSensorCfg

from assets.ur5_rg2 import (
  PAD_GEOM_NAMES,
  build_ur5_rg2_spec,
  d415_nominal_intrinsics,
  ur5_rg2_entity_cfg,
)
from assets.ur5_rg2.model import GROUP_CAMERA_VISUAL

# UR5 standard DH parameters as Universal Robots publishes them, typed here
# independently of the model code.
DH = (
  # d, a, alpha
  (0.089159, 0.0, math.pi / 2),
  (0.0, -0.425, 0.0),
  (0.0, -0.39225, 0.0),
  (0.10915, 0.0, math.pi / 2),
  (0.09465, 0.0, -math.pi / 2),
  (0.0823, 0.0, 0.0),
)


def numpy_dh_flange(q: np.ndarray) -> np.ndarray:
  """Base-to-flange transform by the standard DH product."""
  t = np.eye(4)
  for theta, (d, a, alpha) in zip(q, DH, strict=True):
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    t = t @ np.array(
      [
        [ct, -st * ca, st * sa, a * ct],
        [st, ct * ca, -ct * sa, a * st],
        [0, sa, ca, d],
        [0, 0, 0, 1],
      ]
    )
  return t


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
  return build_ur5_rg2_spec().compile()


def test_forward_kinematics_matches_numpy_dh(model, rng):
  data = mujoco.MjData(model)
  tcp = model.site("tcp").id
  flange = model.site("flange").id
  # Fixed flange-to-TCP transform, read once at q = 0.
  mujoco.mj_kinematics(model, data)
  r_f, p_f = data.site_xmat[flange].reshape(3, 3), data.site_xpos[flange]
  tcp_in_flange = r_f.T @ (data.site_xpos[tcp] - p_f)
  for _ in range(200):
    q = rng.uniform(-2 * np.pi, 2 * np.pi, 6)
    data.qpos[:6] = q
    mujoco.mj_kinematics(model, data)
    ref = numpy_dh_flange(q)
    np.testing.assert_allclose(data.site_xpos[flange], ref[:3, 3], atol=1e-5)
    np.testing.assert_allclose(
      data.site_xmat[flange].reshape(3, 3), ref[:3, :3], atol=1e-6
    )
    ref_tcp = ref[:3, :3] @ tcp_in_flange + ref[:3, 3]
    np.testing.assert_allclose(data.site_xpos[tcp], ref_tcp, atol=1e-5)


def test_published_masses_and_limits(model):
  masses = {model.body(i).name: model.body_mass[i] for i in range(model.nbody)}
  for name, mass in zip(
    ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"),
    (3.7, 8.393, 2.33, 1.219, 1.219, 0.1879),
    strict=True,
  ):
    assert masses[f"{name}_link"] == pytest.approx(mass)
    np.testing.assert_allclose(model.joint(name).range, [-2 * np.pi, 2 * np.pi])
  gripper = sum(masses[n] for n in ("rg2_base", "left_finger", "right_finger"))
  assert gripper == pytest.approx(0.78)


def test_gripper_opening_range_and_pad_names(model):
  data = mujoco.MjData(model)
  left, right = (model.geom(n).id for n in PAD_GEOM_NAMES)
  for normalized, opening in ((-1.0, 0.0), (0.0, 0.055), (1.0, 0.110)):
    q = normalized * 0.0275
    data.qpos[6:8] = q
    mujoco.mj_forward(model, data)
    # Inner pad faces: pad centres minus half thickness along the closing axis.
    gap = np.linalg.norm(data.geom_xpos[left] - data.geom_xpos[right]) - 2 * 0.003
    assert gap == pytest.approx(opening, abs=1e-9)
    assert data.ten_length[0] == pytest.approx(normalized)
    # The TCP site sits midway between the pads.
    mid = 0.5 * (data.geom_xpos[left] + data.geom_xpos[right])
    np.testing.assert_allclose(mid, data.site_xpos[model.site("tcp").id], atol=1e-9)


def test_d415_camera_mount_and_intrinsics():
  without = build_ur5_rg2_spec(with_camera=False).compile()
  model = build_ur5_rg2_spec(with_camera=True).compile()
  # Visible mount and camera keep their mass; the collision proxies add none.
  assert model.body_mass.sum() - without.body_mass.sum() == pytest.approx(0.072 + 0.030)
  cam = model.camera("wrist_d415")
  data = mujoco.MjData(model)
  mujoco.mj_forward(model, data)
  hand = model.body("rg2_base").id
  r_h, p_h = data.xmat[hand].reshape(3, 3), data.xpos[hand]
  cam_in_hand = r_h.T @ (data.cam_xpos[cam.id] - p_h)
  np.testing.assert_allclose(
    cam_in_hand, [-0.0024707697691, -0.0524847399704, 0.0304948260870], atol=1e-9
  )
  # The camera looks along the tool axis (MuJoCo cameras look along -z).
  view_dir = -data.cam_xmat[cam.id].reshape(3, 3)[:, 2]
  np.testing.assert_allclose(view_dir, r_h[:, 2], atol=1e-9)
  intr = d415_nominal_intrinsics()
  assert (intr.width, intr.height) == (320, 180)
  assert tuple(model.cam_resolution[cam.id]) == (320, 180)
  assert model.cam_fovy[cam.id] == pytest.approx(intr.fovy_deg)
  # 1280x720 nominal intrinsics scaled by 1/4.
  full = d415_nominal_intrinsics(1280, 720)
  assert intr.fx == pytest.approx(full.fx / 4) and intr.cx == 160 and intr.cy == 90
  # Camera visuals sit in a group the camera sensors do not render.
  visual_groups = {
    model.geom_group[g]
    for g in range(model.ngeom)
    if model.geom(g).name in ("d415_visual",) or "mount_v4_visual" in model.geom(g).name
  }
  assert visual_groups == {GROUP_CAMERA_VISUAL}
  assert GROUP_CAMERA_VISUAL not in CameraSensorCfg(name="x").enabled_geom_groups
  for g in range(model.ngeom):
    if model.geom_group[g] == GROUP_CAMERA_VISUAL:
      assert model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0


def test_mount_proxy_is_conservative(rng):
  """Every point of the visible mount lies inside its collision hull."""
  model = build_ur5_rg2_spec(with_camera=True).compile()
  mesh = model.mesh("mount_v4_hull")
  geom = model.geom("mount_v4_collision")
  data = mujoco.MjData(model)
  mujoco.mj_kinematics(model, data)
  # Hull as half-spaces from the compiled mesh's faces, in world coordinates.
  verts = model.mesh_vert[mesh.vertadr[0] : mesh.vertadr[0] + mesh.vertnum[0]]
  faces = model.mesh_face[mesh.faceadr[0] : mesh.faceadr[0] + mesh.facenum[0]]
  r, p = data.geom_xmat[geom.id].reshape(3, 3), data.geom_xpos[geom.id]
  world = verts @ r.T + p
  centroid = world.mean(axis=0)
  for g in range(model.ngeom):
    if "mount_v4_visual" not in model.geom(g).name:
      continue
    half = model.geom_size[g]
    local = rng.uniform(-1, 1, (200, 3)) * half
    pts = local @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
    for f in faces:
      a, b, c = world[f]
      n = np.cross(b - a, c - a)
      n *= np.sign(np.dot(n, a - centroid))
      assert np.all((pts - a) @ n <= 1e-9)


def test_entity_cfg_builds_with_and_without_camera():
  for with_camera in (False, True):
    entity = Entity(ur5_rg2_entity_cfg(with_camera=with_camera))
    model = entity.compile()
    names = [model.actuator(i).name for i in range(model.nu)]
    assert names[-1] == "rg2_opening" and len(names) == 7
    gripper = model.actuator("rg2_opening")
    assert gripper.gainprm[0] == 12.0 and gripper.biasprm[2] == -0.4
    np.testing.assert_allclose(gripper.forcerange, [-3, 3])
    assert (
      "wrist_d415" in [model.camera(i).name for i in range(model.ncam)]
    ) == with_camera


def test_robot_at_home_touches_nothing():
  """The robot stands on the table without any contact (no hidden friction)."""
  from mjlab_tasks.common.scene import make_robot_env_cfg
  from mjlab_tasks.engine import make_env, worlds

  env = make_env(make_robot_env_cfg(with_camera=True), device="cpu", engine="mujoco")
  try:
    env.reset()
    env.sim.forward()
    model, world = env.sim.mj_model, worlds(env)[0]
    touching = [
      (model.geom(c.geom1).name, model.geom(c.geom2).name)
      for c in world.contact[: world.ncon]
    ]
    assert touching == []
  finally:
    env.close()
