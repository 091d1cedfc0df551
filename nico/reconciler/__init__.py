"""The reconciler: the scheduler (queue, LISTEN, retries, full passes), the domain pass, the pure
planner, the executor, write-back and metrics."""
