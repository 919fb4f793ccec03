"""Rescale ``model_1650.pt`` to BinPick's normalized Cartesian actions.

On 2026-12-06 BinPick's arm actions changed units from 5 mm and 1 degree to
the term's bound (40 mm and 4 degrees; ``arm_action_cfg(unit_bounds=True)``).
The checkpoint was trained in the old units. Its actor's mean and standard
deviation are scaled by the ratio of the units, and the ``actions``
observation's normalizer (actor and critic) by the same ratio, its first
layer's columns making up the normalizer's epsilon, so that the network
computes the same function and moves the arm as before. The
optimizer's moments are left as trained. Run once:
``python policies/bin_pick/rescale_actions.py OLD.pt NEW.pt``.
"""

import math
import sys

import torch

EPS = 1e-2  # rsl_rl's EmpiricalNormalization default.


def action_slices() -> dict[str, slice]:
  """Where the ``actions`` term sits in the actor and critic observations."""
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.engine import make_env

  cfg = bin_pick_env_cfg(objects=2, bin_width=0.14, bin_height=0.06)
  env = make_env(cfg, device="cpu", engine="mujoco")
  manager = env.observation_manager
  slices = {}
  for group in ("actor", "critic"):
    start = 0
    terms = manager.active_terms[group], manager.group_obs_term_dim[group]
    for name, dims in zip(*terms, strict=True):
      size = math.prod(dims)
      if name == "actions":
        slices[group] = slice(start, start + size)
      start += size
  env.close()
  return slices


def main(old: str, new: str) -> None:
  ratio = torch.tensor([0.005 / 0.04] * 3 + [1.0 / 4.0] * 3 + [1.0])
  ck = torch.load(old, map_location="cpu", weights_only=False)
  actor = ck["actor_state_dict"]
  actor["mlp.6.weight"] *= ratio.unsqueeze(-1)
  actor["mlp.6.bias"] *= ratio
  actor["distribution.std_param"] *= ratio
  slices = action_slices()
  for group, model in (("actor", actor), ("critic", ck["critic_state_dict"])):
    where = slices[group]
    std = model["obs_normalizer._std"][0, where].clone()
    model["obs_normalizer._mean"][0, where] *= ratio
    model["obs_normalizer._std"][0, where] *= ratio
    model["obs_normalizer._var"][0, where] *= ratio**2
    # rsl_rl normalizes by (std + eps): the first layer makes up the eps.
    model["mlp.0.weight"][:, where] *= (ratio * std + EPS) / (ratio * (std + EPS))
  torch.save(ck, new)


if __name__ == "__main__":
  main(*sys.argv[1:3])
