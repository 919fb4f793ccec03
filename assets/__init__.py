"""Robot and scene assets (know nothing of tasks)."""
