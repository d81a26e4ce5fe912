"""Features of market data for models: one definition (spec.py), numba kernels (kernels.py), and the
incremental and batch forms over them (pipeline.py), which give the same rows bit for bit."""

from foxhunt.core.features.pipeline import Columns, ColumnsBuilder, FeaturePipeline, batch
from foxhunt.core.features.spec import FeatureSpec
from foxhunt.core.features.windows import FeatureWindows

__all__ = ["Columns", "ColumnsBuilder", "FeaturePipeline", "FeatureSpec", "FeatureWindows", "batch"]
