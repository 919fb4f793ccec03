"""Bin picking with a pourer (docs/bin_pick.md). The task is registered with
mjlab by ``mjlab_tasks.tasks``; importing this package imports no mjlab."""

TASK_ID = "BinPick-UR5-RG2"
