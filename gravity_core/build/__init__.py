"""Incremental build of the anchor KB: batching, merging, checkpointing."""

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder, BuildReport, plan_batches
from gravity_core.build.forget import ForgetReport, ForgetRequest
from gravity_core.build.merge import MergeResult, apply_update

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "AnchorBuilder",
    "BuildReport",
    "ForgetReport",
    "ForgetRequest",
    "MergeResult",
    "apply_update",
    "plan_batches",
]
