"""Cube in tray (docs/cube_tray.md). The task is registered with mjlab by
``mjlab_tasks.tasks``; importing this package imports no mjlab."""

TASK_ID = "CubeTray-UR5-RG2"
