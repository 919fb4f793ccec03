"""Shared pytest setup: quiet Warp kernel-cache logging."""

from mjlab_tasks.common.runtime import quiet_warp

quiet_warp()
