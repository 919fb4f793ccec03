"""Trained policies acting in an environment the way an expert does.

``load_policy`` opens a policy file by its suffix:

- ``model_N.pt``: an rsl_rl checkpoint written by mjlab's ``train`` (or
  ``scripts/train.py``), loaded as mjlab's ``play`` loads it
  (``CheckpointPolicy``);
- ``policy.pt`` of ``scripts/train_bc.py``: a behaviour-cloning MLP
  (``BcPolicy``), recognised by its content (a ``format`` key), not its name;
- ``*.onnx``: the policy as mjlab's runner exports it
  (``MjlabOnPolicyRunner.export_policy_to_onnx``, here ``export_onnx_policy``
  or ``scripts/play.py --export-onnx``): one input ``obs`` [1, D], the actor's
  observation groups concatenated, the observation normalizer inside; one
  output ``actions``, the deterministic (mean) action (``OnnxPolicy``). Needs
  onnxruntime, the optional ``onnx`` extra.

All offer the experts' interface (``act``, ``reset``, ``close``), so the
evaluation tools score a policy with the same evaluator, report and videos
as an expert. Actions are clipped as the task's runner configuration says.

Modules: ``loading`` (the dispatch on the file), ``trained`` (rsl_rl
checkpoints and their ONNX export), ``bc_networks`` (the behaviour-cloning
networks ``scripts/train_bc.py`` trains), ``bc_perception`` (the two-part
image policy of ``train_bc.py --perceive``: a perception network that
estimates state terms from camera images, and a state policy acting on
them) and ``bc_policy`` (a behaviour-cloning checkpoint acting in an
environment).
"""

from mjlab_tasks.policies.bc_networks import (
  BcImageNet,
  BcMlp,
  ImageEncoder,
  SpatialSoftmax,
  downsample,
  image_camera,
  quarter_yaw,
  random_shift,
)
from mjlab_tasks.policies.bc_policy import (
  BC_ENSEMBLE_DECAY,
  BC_FORMAT,
  BcPolicy,
  bc_cameras,
  bc_checkpoint,
)
from mjlab_tasks.policies.loading import (
  POLICY_SUFFIXES,
  load_policy,
  policy_file_problem,
)
from mjlab_tasks.policies.trained import (
  ONNX_INSTALL,
  CheckpointPolicy,
  OnnxPolicy,
  export_onnx_policy,
  onnx_runtime_missing,
)

__all__ = [
  "BC_ENSEMBLE_DECAY",
  "BC_FORMAT",
  "ONNX_INSTALL",
  "POLICY_SUFFIXES",
  "BcImageNet",
  "BcMlp",
  "BcPolicy",
  "CheckpointPolicy",
  "ImageEncoder",
  "OnnxPolicy",
  "SpatialSoftmax",
  "bc_cameras",
  "bc_checkpoint",
  "downsample",
  "export_onnx_policy",
  "image_camera",
  "load_policy",
  "onnx_runtime_missing",
  "policy_file_problem",
  "quarter_yaw",
  "random_shift",
]
