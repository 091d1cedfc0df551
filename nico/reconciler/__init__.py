"""The reconciler: state loading, planner (pure), executor, write-back, monitor loop, metrics."""
