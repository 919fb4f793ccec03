"""Pushing glasses apart (docs/glass_push.md). The task is registered with
mjlab by ``mjlab_tasks.tasks``; importing this package imports no mjlab."""

TASK_ID = "GlassPush-UR5-RG2"
