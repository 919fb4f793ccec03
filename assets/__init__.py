"""Robot and scene assets (know nothing of tasks)."""

# mjlab imports this suite's tasks (entry point "mjlab.tasks") when it is first
# imported, and the tasks import these assets. Importing mjlab here first keeps
# that cycle in one order whichever module a program happens to import first
# (else `import assets.ur5_rg2.model` alone fails on a half-initialized module).
import mjlab  # noqa: F401
