"""The two-part image policy of train_bc.py --perceive (``bc_perception``):
the perception's training targets and their decoding, the quarter-turn
error, where given and estimated terms go in the actor's input, and the
policy acting through both parts, each against a hand computation. The
whole tool (train, checkpoint, scoring) is tested in test_image_demos.py."""

from __future__ import annotations

import math

import numpy as np
import torch

from mjlab_tasks.policies import BcMlp
from mjlab_tasks.policies.bc_perception import (
  PerceivingBc,
  Perception,
  actor_columns,
  crop_images,
  quarter_turn_error,
  seen_columns,
)

SIZE = (20, 24)


def perception(given_dim=5, out_sizes=(3, 1), quarter=(False, True), yaw_at=None):
  torch.manual_seed(1)
  model = Perception(
    given_dim, list(out_sizes), list(quarter), [16], ["scene_rgb"], [3], SIZE, yaw_at
  )
  model.target_mean.copy_(torch.randn(sum(out_sizes)))
  model.target_std.copy_(torch.rand(sum(out_sizes)) + 0.5)
  return model.eval()


def test_targets_by_hand_and_decoded_back():
  model = perception()
  generator = torch.Generator().manual_seed(7)
  values = torch.rand(9, 4, generator=generator) * 2 - 1
  values[:, 3] = (torch.rand(9, generator=generator) - 0.5) * (math.pi / 2 - 1e-4)
  targets = model.targets(values)
  mean, std = model.target_mean.numpy(), model.target_std.numpy()
  v = values.numpy()
  expected = np.concatenate(
    [(v[:, :3] - mean[:3]) / std[:3], np.sin(4 * v[:, 3:]), np.cos(4 * v[:, 3:])],
    axis=1,
  )
  np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(model.decode(targets).numpy(), v, rtol=1e-5, atol=1e-5)


def test_quarter_turn_error_wraps():
  estimate = torch.tensor([0.78, 0.1, -0.3])
  truth = torch.tensor([-0.78, 0.1 + math.pi / 2, -0.1])
  expected = [abs(1.56 - math.pi / 2), 0.0, 0.2]
  np.testing.assert_allclose(quarter_turn_error(estimate, truth), expected, atol=1e-6)


def test_actor_columns_by_hand():
  given, perceived = actor_columns(["a", "b", "c", "d"], [2, 3, 1, 2], ["b", "d"])
  assert given.tolist() == [0, 1, 5]
  assert perceived.tolist() == [2, 3, 4, 6, 7]


def test_the_perception_reads_the_tool_pose_only():
  seen = seen_columns(["joint_pos", "tcp_pose", "gripper_opening"], [6, 7, 1])
  assert seen.tolist() == list(range(6, 13))


def test_crop_is_a_slice():
  images = torch.from_numpy(np.random.default_rng(3).integers(0, 255, (2, 30, 40, 3)))
  np.testing.assert_array_equal(
    crop_images(images, (4, 6, 20, 24)).numpy(), images.numpy()[:, 4:24, 6:30]
  )
  assert crop_images(images, None) is images


def test_policy_acts_on_given_terms_and_estimates_in_the_actors_order():
  # Actor terms: a (2, given), b (3, estimated), c (2, given), d (1, estimated).
  keys, sizes, perceive = ["a", "b", "c", "d"], [2, 3, 2, 1], ["b", "d"]
  given_at, perceived_at = actor_columns(keys, sizes, perceive)
  torch.manual_seed(4)
  actor = BcMlp(8, 2, [16], 3).eval()
  actor.obs_mean.copy_(torch.randn(8))
  # The perception reads the given columns 1 and 3 only.
  vision = perception(given_dim=2, out_sizes=(3, 1), quarter=(False, True))
  seen_at = torch.tensor([1, 3])
  policy = PerceivingBc(actor, vision, given_at, perceived_at, seen_at).eval()
  rng = np.random.default_rng(11)
  given = torch.from_numpy(rng.normal(size=(5, 4)).astype(np.float32))
  images = {"scene_rgb": torch.from_numpy(rng.uniform(0, 255, (5, 3, *SIZE)))}
  images["scene_rgb"] = images["scene_rgb"].float()
  with torch.no_grad():
    estimate = vision(given[:, [1, 3]], images).numpy()
    g = given.numpy()
    full = np.concatenate(
      [g[:, 0:2], estimate[:, 0:3], g[:, 2:4], estimate[:, 3:4]], axis=1
    )
    expected = actor(torch.from_numpy(full)).numpy()
    actions = policy(given, images).numpy()
  assert actions.shape == (5, 3, 2)
  np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
  # A quarter-turn estimate stays in [-pi/4, pi/4].
  assert np.all(np.abs(estimate[:, 3]) <= math.pi / 4 + 1e-6)
