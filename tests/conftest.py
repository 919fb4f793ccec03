"""Shared pytest setup: quiet Warp kernel-cache logging before mjlab loads."""

import os

os.environ.setdefault("MJLAB_WARP_QUIET", "1")
